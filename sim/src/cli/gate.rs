//! `fleetsim gate` and `fleetsim repro`: a report judged against a release policy (its runs re-checked), one run replayed.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::model::campaign::{self, Campaign};
use crate::model::exit::{EXIT_FAIL, EXIT_PASS};
use crate::model::spec::SpecError;
use crate::run::gate;

use super::campaign::default_campaign_dir;
use super::run::{render_run, write_run};
use super::*;

pub(super) const GATE_HELP: &str = "\
The policy (TOML, see docs/formats.md and campaigns/release-gate.toml) sets thresholds: the
least runs, the pass rate, lane convergence among runs that started a rollout, the most
violations per oracle, the least injections per fault kind, the recovery-matrix pairs to hit,
how many runs to replay for a re-check, and whether the report must come from the checked-out
commit. A threshold the policy does not set is not checked.

The report is checked against itself first (its summary and campaign digest recomputed from
its runs, each run's verdict from its findings; see `fleetsim report --help`). The re-check
then replays runs and compares each replay's whole record with the report's (verdict,
digest, faults, violations, reached properties, lanes, workflows; not the build). Which runs
are drawn from --recheck-seed, by default a hash of the report's and the policy's bytes, so
whoever wrote the report cannot know them in advance; --recheck N or --recheck all replays
N or every run instead of the policy's recheck_runs.

The gate also re-resolves the campaign file the report names (from the working directory,
with the report's seed and runs) and fails when its config hash or any run's seed or
configuration is not the report's, and fails on a shard report (merge the shards first).

Output: one line `gate PASS: ...` and exit 0, or `gate FAIL: ...` followed by every unmet
threshold, one a line, and exit 1. A missing, truncated, corrupt or other-schema report, a
bad policy or an unreadable campaign file is refused in one line with exit 2.

Examples:
  fleetsim campaign campaigns/ci-50.toml
  fleetsim gate target/fleetsim/ci-50/report.json --policy campaigns/release-gate.toml
  fleetsim gate target/fleetsim/ci-50/report.json --policy campaigns/release-gate.toml --recheck all";

pub(super) const REPRO_HELP: &str = "\
Replays run K of the campaign a report names (its file, read from the working directory,
with the report's seed and runs), writes DIR/run.json and DIR/trace.jsonl (default
target/fleetsim/<campaign>/repro-K), and compares the replay's trace digest with the
report's. Exit 0 when they are equal, whatever the run's verdict; 1 with both digests when
they differ (use `fleetsim diff` on two traces to see where); 2 when the report or its
campaign cannot be read, holds no run K, or the campaign file no longer resolves to the
report's config hash.

Example:
  fleetsim repro target/fleetsim/ci-50/report.json --run 17 --out /tmp/run17";

/// The campaign a report names, resolved as it was run: the report's seed and its campaign's number of runs. Also
/// says whether the seed is not the file's (a replay's reproduce line then carries `--seed`).
pub(super) fn campaign_of_report(
    report_path: &Path,
    report: &reports::CampaignReport,
) -> Result<(Campaign, bool), CliError> {
    let mut campaign = campaign::load_campaign(Path::new(&report.campaign)).map_err(|error| SpecError {
        path: report_path.display().to_string(),
        position: None,
        message: format!("cannot load the campaign it names ({error}); run from the directory the campaign ran in"),
    })?;
    campaign.runs = report.shard.map_or(report.summary.runs, |shard| shard.runs_total);
    let seed_overridden = report.seed != campaign.seed;
    campaign.seed = report.seed;
    Ok((campaign, seed_overridden))
}

/// `git rev-parse HEAD` in the working directory, or why it could not be read.
pub(super) fn git_head() -> Result<String, String> {
    let output = std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .output()
        .map_err(|error| format!("git is not available ({error})"))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(format!("`git rev-parse HEAD` failed: {}", stderr.trim()));
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// How many runs the gate replays: the policy's `recheck_runs`, or `--recheck N`, or every run (`--recheck all`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RecheckCount {
    Policy,
    Runs(u64),
    All,
}

/// Parses `--recheck`: `all` or a number of runs.
pub(super) fn parse_recheck(text: &str) -> Result<RecheckCount, String> {
    match text {
        "all" => Ok(RecheckCount::All),
        _ => text
            .parse()
            .map(RecheckCount::Runs)
            .map_err(|_| format!("`{}` is neither `all` nor a number of runs", super::echo(text))),
    }
}

pub(super) fn run_gate(
    report_path: &Path,
    policy_path: &Path,
    jobs: usize,
    recheck: RecheckCount,
    recheck_seed: Option<u64>,
    out: &mut dyn Write,
) -> Result<i32, CliError> {
    let mut policy = gate::load_policy(policy_path)?;
    let report = reports::read::read_report(report_path)?;
    match recheck {
        RecheckCount::Policy => {}
        RecheckCount::Runs(runs) => policy.recheck_runs = runs,
        RecheckCount::All => policy.recheck_runs = report.runs.len() as u64,
    }
    let seed = match recheck_seed {
        Some(seed) => seed,
        None => {
            // Both files were just read whole; read again for their bytes (a file changed in between is refused by
            // the replays, which then do not match).
            let bytes = |path: &Path| std::fs::read(path).unwrap_or_default();
            gate::default_recheck_seed(&bytes(report_path), &bytes(policy_path))
        }
    };
    let (campaign, seed_overridden) = campaign_of_report(report_path, &report)?;
    let mut evidence = gate::Evidence { campaign_config_hash: campaign.config_hash(), ..gate::Evidence::default() };
    if evidence.campaign_config_hash == report.config_hash {
        evidence.run_mismatches = gate::run_mismatches(&report, &campaign);
        if policy.recheck_runs > 0 && evidence.run_mismatches.is_empty() {
            let sample = gate::recheck_sample(&report, policy.recheck_runs, seed);
            let replays = crate::run::campaign::execute(&campaign, &sample, jobs, seed_overridden, false, &|_| {});
            evidence.rechecks = replays
                .into_iter()
                .filter_map(|replay| {
                    let reported = report.runs.iter().find(|run| run.run_index == replay.record.run_index)?;
                    Some(gate::Recheck {
                        run_index: replay.record.run_index.unwrap_or(0),
                        seed: replay.record.seed,
                        reported: reported.trace_digest.clone(),
                        differences: gate::record_differences(reported, &replay.record),
                        replayed: replay.record.trace_digest,
                    })
                })
                .collect();
        }
    }
    if policy.commit_matches_head {
        evidence.head = Some(git_head());
    }
    let decision = gate::decide(&report, &policy, &evidence);
    let name = report_path.display().to_string();
    console(out, &gate::render(&decision, &name, &report, &policy, evidence.rechecks.len()))?;
    Ok(if decision.passed() { EXIT_PASS } else { EXIT_FAIL })
}

pub(super) fn repro(
    report_path: &Path,
    index: u64,
    dir: Option<PathBuf>,
    format: Format,
    out: &mut dyn Write,
) -> Result<i32, CliError> {
    let report = reports::read::read_report(report_path)?;
    let bad = |message: String| SpecError { path: report_path.display().to_string(), position: None, message };
    let Some(recorded) = report.runs.iter().find(|run| run.run_index == Some(index)) else {
        let held: Vec<String> = report.runs.iter().filter_map(|run| run.run_index).map(|i| i.to_string()).collect();
        let held = if held.len() > 10 {
            format!("{} … {}", held[..5].join(", "), held[held.len() - 1])
        } else {
            held.join(", ")
        };
        return Err(bad(format!("holds no run {index} (it holds runs {held})")).into());
    };
    let (campaign, seed_overridden) = campaign_of_report(report_path, &report)?;
    let hash = campaign.config_hash();
    if hash != report.config_hash {
        return Err(bad(format!(
            "{} with seed {} and {} runs resolves to config hash {hash}, the report has {}: the campaign file changed since the report was written, so run {index} cannot be replayed from it",
            report.campaign, campaign.seed, campaign.runs, report.config_hash
        ))
        .into());
    }
    let dir = dir.unwrap_or_else(|| default_campaign_dir(Path::new(&report.campaign)).join(format!("repro-{index}")));
    let output = crate::run::campaign::execute(&campaign, &[index], 1, seed_overridden, true, &|_| {}).remove(0);
    write_run(&dir, &output)?;
    let reproduced = output.record.trace_digest == recorded.trace_digest;
    match format {
        Format::Text => {
            let mut text = render_run(&output.record);
            text.push_str(&format!("  written       {}/run.json, trace.jsonl\n", dir.display()));
            if reproduced {
                text.push_str(&format!("  reproduced    the report's trace digest, from {}\n", report_path.display()));
            } else {
                text.push_str(&format!(
                    "repro FAIL: run {index}'s trace digest differs: the report has {}, the replay {}\n",
                    recorded.trace_digest, output.record.trace_digest
                ));
            }
            console(out, &text)?;
        }
        Format::Json => {
            let json = serde_json::to_string_pretty(&output.record).expect("run records serialise");
            console(out, &format!("{json}\n"))?;
        }
    }
    Ok(if reproduced { EXIT_PASS } else { EXIT_FAIL })
}
