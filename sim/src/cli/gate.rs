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
its runs, each run's verdict from its findings; see `fleetsim report --help`). A report's
digests are plain SHA-256 over its own content, so that check only finds careless edits:
the gate trusts nothing it did not compute. It replays every run of the report from the
campaign file and the run's seed with this build and compares each replay's whole record
with the report's (verdict, digest, faults, violations, reached properties, lanes,
workflows; not the build). A policy's `recheck = { sample = N }` or --recheck N replays N
runs drawn at gate time from the operating system's random source (never from the report),
and prints the probability that k forged runs escape the sample; --recheck all replays
every run whatever the policy says. Replaying costs what running did (docs/trust.md).

--trusted-key KEY.pub checks the report's signature (REPORT.sig beside it, or --signature
FILE; `fleetsim report sign` writes it): a report signed by that key over exactly its bytes
is not replayed (unless --recheck asks), and one whose signature does not hold fails the
gate. What a signature proves, and what it does not: docs/trust.md.

The gate also re-resolves the campaign file the report names (from the working directory,
with the report's seed and runs) and fails when its config hash or any run's seed or
configuration is not the report's, and fails on a shard report (merge the shards first).

Output: one line `gate PASS: ...` and exit 0, or `gate FAIL: ...` followed by every unmet
threshold, one a line, and exit 1. A missing, truncated, corrupt or other-schema report, a
bad policy or an unreadable campaign file is refused in one line with exit 2.

Examples:
  fleetsim campaign campaigns/ci-50.toml
  fleetsim gate target/fleetsim/ci-50/report.json --policy campaigns/release-gate.toml
  fleetsim gate target/fleetsim/ci-50/report.json --policy campaigns/release-gate.toml --recheck 20";

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

/// Parses `--recheck`: `all` or a number of runs to sample.
pub(super) fn parse_recheck(text: &str) -> Result<gate::Recheck, String> {
    match text {
        "all" => Ok(gate::Recheck::All),
        _ => match text.parse() {
            Ok(0) | Err(_) => Err(format!("`{}` is neither `all` nor a number of runs (1 or more)", super::echo(text))),
            Ok(runs) => Ok(gate::Recheck::Sample(runs)),
        },
    }
}

/// A seed for `gate::recheck_sample` from the operating system's random source: unpredictable to anyone, the
/// report's author included, and another at every call. The command line's, never a run's.
pub(super) fn draw_seed() -> Result<u64, CliError> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(|error| SpecError {
        path: "the operating system's random source".into(),
        position: None,
        message: format!("cannot draw a sample: {error}"),
    })?;
    Ok(u64::from_le_bytes(bytes))
}

/// Replays `indices` of `campaign` and compares each replay's whole record with the record `reported` gives for its
/// index (a run it gives none for is skipped).
pub(super) fn replay_runs<'a>(
    campaign: &Campaign,
    seed_overridden: bool,
    indices: &[u64],
    jobs: usize,
    reported: &dyn Fn(u64) -> Option<&'a reports::RunRecord>,
) -> Vec<gate::Replayed> {
    let replays = crate::run::campaign::execute(campaign, indices, jobs, seed_overridden, false, &|_| {});
    replays
        .into_iter()
        .filter_map(|replay| {
            let reported = reported(replay.record.run_index?)?;
            Some(gate::Replayed {
                run_index: replay.record.run_index.unwrap_or(0),
                seed: replay.record.seed,
                reported: reported.trace_digest.clone(),
                differences: gate::record_differences(reported, &replay.record),
                replayed: replay.record.trace_digest,
            })
        })
        .collect()
}

/// The first of `replays` whose record is not the one held, as a reason: what the run's replay disagrees on.
pub(super) fn first_forged(replays: &[gate::Replayed]) -> Option<(u64, String)> {
    replays.iter().find(|replay| replay.reported != replay.replayed || !replay.differences.is_empty()).map(|replay| {
        let fields =
            if replay.differences.is_empty() { "trace_digest".to_owned() } else { replay.differences.join(", ") };
        (
            replay.run_index,
            format!(
                "its record of run {} is not what the run gives (its replay differs in {fields})",
                replay.run_index
            ),
        )
    })
}

/// Where a report's signature is looked for unless `--signature` says: beside it, `report.json.sig`.
pub(super) fn signature_path(report: &Path) -> PathBuf {
    let mut path = report.as_os_str().to_owned();
    path.push(".sig");
    PathBuf::from(path)
}

/// Checks the report file's signature against the trusted public key: the key's id, or why it does not hold.
fn check_signature(report: &Path, key: &Path, signature: &Path) -> Result<Result<String, String>, CliError> {
    let public = crate::model::spec::read(key)?;
    let signed = match crate::model::spec::read(signature) {
        Ok(text) => text,
        Err(error) => return Ok(Err(error.to_string())),
    };
    let bytes = crate::model::spec::read_capped(report, reports::read::REPORT_BYTES_MAX).map_err(|_| SpecError {
        path: report.display().to_string(),
        position: None,
        message: "cannot read it again to check its signature".into(),
    })?;
    Ok(reports::sign::verify(&public, &signed, &bytes))
}

pub(super) fn run_gate(
    report_path: &Path,
    policy_path: &Path,
    jobs: usize,
    recheck: Option<gate::Recheck>,
    trusted: Option<(&Path, Option<&Path>)>,
    out: &mut dyn Write,
) -> Result<i32, CliError> {
    let mut policy = gate::load_policy(policy_path)?;
    let report = reports::read::read_report(report_path)?;
    if let Some(recheck) = recheck {
        policy.recheck = recheck;
    }
    let (campaign, seed_overridden) = campaign_of_report(report_path, &report)?;
    let mut evidence = gate::Evidence { campaign_config_hash: campaign.config_hash(), ..gate::Evidence::default() };
    if let Some((key, signature)) = trusted {
        let signature = signature.map_or_else(|| signature_path(report_path), Path::to_owned);
        evidence.signature = Some(check_signature(report_path, key, &signature)?);
        // A report signed by a trusted key is not replayed, unless --recheck asks for replays all the same.
        evidence.replays_waived = matches!(evidence.signature, Some(Ok(_))) && recheck.is_none();
    }
    if evidence.campaign_config_hash == report.config_hash {
        evidence.run_mismatches = gate::run_mismatches(&report, &campaign);
        if evidence.run_mismatches.is_empty() && !evidence.replays_waived {
            let seed = match policy.recheck {
                gate::Recheck::All => 0,
                gate::Recheck::Sample(_) => draw_seed()?,
            };
            let indices = gate::recheck_sample(&report, policy.recheck, seed);
            let held = |index| report.runs.iter().find(|run| run.run_index == Some(index));
            evidence.rechecks = replay_runs(&campaign, seed_overridden, &indices, jobs, &held);
        }
    }
    if policy.commit_matches_head {
        evidence.head = Some(git_head());
    }
    let decision = gate::decide(&report, &policy, &evidence);
    let name = report_path.display().to_string();
    console(out, &gate::render(&decision, &name, &report, &policy, &evidence))?;
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
