//! `fleetsim experiment`: two campaigns compared run for run.

use std::io::Write;
use std::path::{Path, PathBuf};

use reports::RunRecord;

use crate::model::campaign::{self, Campaign};
use crate::model::exit::EXIT_PASS;
use crate::model::spec::SpecError;
use crate::run::experiment;
use crate::run::runner::{self};

use super::*;

pub(super) const EXPERIMENT_HELP: &str = "\
Runs two campaign files on the same run seeds (the base file's seed, or --seed) and pairs
run i of one with run i of the other. The files must differ in exactly one setting, compared
on the resolved campaigns field by field (seed, runs and description do not count); with
more, the command names them and refuses unless --allow-multi.

Prints the 2x2 table (both pass, only base fails, only variant fails, both fail) and, for each
discordant pair, its seed and the two commands that replay it; writes the same to
DIR/experiment.json (atomically; default target/fleetsim/experiment-<base>-vs-<variant>/).
Exit 0 when the experiment ran: it measures, it does not judge.

Example:
  fleetsim experiment campaigns/ci-50.toml /tmp/ci-50-legacy.toml --runs 20 --jobs 2";

pub(super) struct ExperimentArgs {
    pub(super) runs: Option<u64>,
    pub(super) seed: Option<u64>,
    pub(super) jobs: usize,
    pub(super) allow_multi: bool,
    pub(super) dir: Option<PathBuf>,
    pub(super) format: Format,
}

pub(super) fn run_experiment(
    base_path: &Path,
    variant_path: &Path,
    args: ExperimentArgs,
    out: &mut dyn Write,
) -> Result<i32, CliError> {
    let mut base = campaign::load_campaign(base_path)?;
    let mut variant = campaign::load_campaign(variant_path)?;
    let files = [(base.seed, base.runs), (variant.seed, variant.runs)];
    let runs = check_runs(args.runs.unwrap_or(base.runs))?;
    let seed = args.seed.unwrap_or(base.seed);
    for arm in [&mut base, &mut variant] {
        arm.runs = runs;
        arm.seed = seed;
    }
    let differences = experiment::differences(&base, &variant);
    let refuse = |message: String| SpecError { path: variant_path.display().to_string(), position: None, message };
    if differences.is_empty() {
        return Err(refuse(format!(
            "differs from {} in no setting (seed, runs and description do not count): nothing to compare",
            base_path.display()
        ))
        .into());
    }
    if differences.len() > 1 && !args.allow_multi {
        return Err(refuse(format!(
            "differs from {} in {} settings ({}); an experiment changes one, so an outcome can be put down to it — pass --allow-multi to compare them anyway",
            base_path.display(),
            differences.len(),
            differences.join(", ")
        ))
        .into());
    }
    let indices: Vec<u64> = (0..runs).collect();
    // Each arm's records are the ones `fleetsim campaign FILE --seed S` writes (their repro lines carry `--seed` when
    // S is not the file's), so an arm's campaign digest is that campaign's.
    let execute = |arm: &Campaign, file_seed: u64| -> Vec<RunRecord> {
        crate::run::campaign::execute(arm, &indices, args.jobs, seed != file_seed, false, &|_| {})
            .into_iter()
            .map(|o| o.record)
            .collect()
    };
    let base_runs = execute(&base, files[0].0);
    let variant_runs = execute(&variant, files[1].0);
    let arms = [&base, &variant];
    let (table, discordant) = experiment::pair(&base_runs, &variant_runs, |arm, index| {
        experiment::repro_line(arms[arm], files[arm].0, files[arm].1, index)
    });
    let arm = |campaign: &Campaign, records: &[RunRecord]| {
        let summary = reports::summarize(records, &[], crate::model::digest::sha256_hex);
        reports::ExperimentArm {
            campaign: campaign.source.clone(),
            config_hash: campaign.config_hash(),
            passed: summary.passed,
            failed: summary.failed,
            campaign_digest: summary.campaign_digest,
        }
    };
    let report = reports::ExperimentReport {
        schema_version: reports::SCHEMA_VERSION,
        kind: "experiment".to_owned(),
        tool_version: runner::TOOL_VERSION.to_owned(),
        commit: runner::commit().to_owned(),
        seed,
        runs,
        differences,
        base: arm(&base, &base_runs),
        variant: arm(&variant, &variant_runs),
        table,
        discordant,
    };
    let dir = args.dir.unwrap_or_else(|| {
        let stem =
            |path: &Path| path.file_stem().map_or_else(|| "campaign".into(), |s| s.to_string_lossy().into_owned());
        PathBuf::from("target").join("fleetsim").join(format!(
            "experiment-{}-vs-{}",
            stem(base_path),
            stem(variant_path)
        ))
    });
    std::fs::create_dir_all(&dir).map_err(output_error(&dir))?;
    let path = dir.join("experiment.json");
    reports::write_json_atomic(&path, &report).map_err(output_error(&path))?;
    match args.format {
        Format::Text => {
            let mut text = experiment::render(&report);
            text.push_str(&format!("  written       {}\n", path.display()));
            console(out, &text)?;
        }
        Format::Json => {
            let json = serde_json::to_string_pretty(&report).expect("experiments serialise");
            console(out, &format!("{json}\n"))?;
        }
    }
    Ok(EXIT_PASS)
}
