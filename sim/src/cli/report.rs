//! `fleetsim report` (and `report merge`) and `fleetsim diff`: reports rendered and merged, traces compared.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::model::exit::{EXIT_FAIL, EXIT_PASS};
use crate::model::spec::{self, SpecError};

use super::*;

pub(super) const REPORT_HELP: &str = "\
Formats:
  text   the summary `fleetsim campaign` prints at its end
  md     Markdown for a CI job summary or a pull-request comment
  junit  JUnit XML: a test case per run, per (run, oracle) that fired, per sometimes-property
  html   one self-contained page: inline CSS and SVG plots, no script, no network

The report is read fail-closed: a missing, empty, truncated, corrupt or self-inconsistent
file, or one with another schema_version, is refused with its reason and exit code 2.
`report` renders and does not judge: it exits 0 whatever the campaign's verdict.

`fleetsim report merge A.json B.json ... -o merged.json` combines the shard reports of one
campaign (see `fleetsim report merge --help`).

Examples:
  fleetsim report target/fleetsim/ci-50/report.json
  fleetsim report target/fleetsim/ci-50/report.json --format md >> \"$GITHUB_STEP_SUMMARY\"
  fleetsim report target/fleetsim/ci-50/report.json --format junit -o junit.xml
  fleetsim report target/fleetsim/ci-50/report.json --format html -o report.html";

pub(super) const MERGE_HELP: &str = "\
Each input is a report.json written by `fleetsim campaign ... --shard K/N`. The merged report
is the one an unsharded execution writes: the runs in index order, the summary (and its
campaign_digest) recomputed from them, no `shard` field. Shards may be given in any order.

Refused with exit code 2, naming the files: an input that is not a shard report; inputs of
different campaigns (path, description, config hash, seed, commit or tool version); a run
held by two inputs (overlap); runs no input holds (a shard is missing).

Example (a campaign over three machines):
  fleetsim campaign campaigns/ci-50.toml --shard 1/3 --out s1    # on machine 1
  fleetsim campaign campaigns/ci-50.toml --shard 2/3 --out s2    # on machine 2
  fleetsim campaign campaigns/ci-50.toml --shard 3/3 --out s3    # on machine 3
  fleetsim report merge s1/report.json s2/report.json s3/report.json -o merged/report.json
  fleetsim gate merged/report.json --policy campaigns/release-gate.toml";

pub(super) const KEYGEN_HELP: &str = "\
A CI that runs the campaign can sign its report, so that a gate that trusts the CI's key
does not replay it (docs/trust.md says what a signature proves: that the holder of the key
signed exactly these bytes; not that the build that ran the campaign was honest).

  fleetsim report keygen -o ci.key          # ci.key (0600, keep it secret) and ci.key.pub
  fleetsim report sign target/fleetsim/ci-50/report.json --key ci.key
  fleetsim gate target/fleetsim/ci-50/report.json --policy campaigns/release-gate.toml \\
    --trusted-key ci.key.pub

keygen refuses to overwrite a key; sign refuses a key file others can read, and a report
that does not agree with itself (exit 2).";

pub(super) const DIFF_HELP: &str = "\
Two runs of the same file and seed must write the same trace, byte for byte. When their
digests differ, this shows where: the first line at which the traces disagree, the lines
before it they share, a few lines of each from there on, and the keys that differ.

Exit codes: 0 identical, 1 the traces differ, 2 bad input (a missing file, or not a trace).

Examples:
  fleetsim run scenarios/hub-crashes-and-restarts-mid-run.toml --out /tmp/a
  fleetsim run scenarios/hub-crashes-and-restarts-mid-run.toml --out /tmp/b
  fleetsim diff /tmp/a/trace.jsonl /tmp/b/trace.jsonl";

pub(super) fn render_report(
    path: &Path,
    format: ReportFormat,
    output: Option<&Path>,
    out: &mut dyn Write,
) -> Result<i32, CliError> {
    let report = reports::read::read_report(path)?;
    let rendered = match format {
        ReportFormat::Text => reports::render::text(&report),
        ReportFormat::Md => reports::render::markdown(&report),
        ReportFormat::Junit => reports::render::junit(&report),
        ReportFormat::Html => reports::render::html(&report),
    };
    match output {
        Some(file) => reports::write_atomic(file, rendered.as_bytes()).map_err(output_error(file))?,
        None => console(out, &rendered)?,
    }
    Ok(EXIT_PASS)
}

/// Reads a trace file for `diff`: one line naming the file when it is missing, not text, or not a trace.
pub(super) fn read_trace(path: &Path) -> Result<String, CliError> {
    let text = spec::read(path)?;
    if let Err(error) = reports::trace_diff::trace_lines(&text) {
        return Err(SpecError { path: path.display().to_string(), position: None, message: error.to_string() }.into());
    }
    Ok(text)
}

pub(super) fn diff(a: &Path, b: &Path, out: &mut dyn Write) -> Result<i32, CliError> {
    let (text_a, text_b) = (read_trace(a)?, read_trace(b)?);
    let (lines_a, lines_b): (Vec<&str>, Vec<&str>) = (text_a.lines().collect(), text_b.lines().collect());
    let (name_a, name_b) = (a.display().to_string(), b.display().to_string());
    console(out, &reports::trace_diff::render(&name_a, &lines_a, &name_b, &lines_b))?;
    Ok(match reports::trace_diff::compare(&lines_a, &lines_b) {
        reports::trace_diff::TraceDiff::Identical { .. } => EXIT_PASS,
        reports::trace_diff::TraceDiff::Diverged { .. } => EXIT_FAIL,
    })
}

pub(super) fn merge_reports(paths: &[PathBuf], output: &Path, out: &mut dyn Write) -> Result<i32, CliError> {
    let mut inputs = Vec::with_capacity(paths.len());
    for path in paths {
        inputs.push((path.display().to_string(), reports::read::read_report(path)?));
    }
    let merged = reports::merge(&inputs, crate::model::digest::sha256_hex).map_err(|error| SpecError {
        path: "report merge".into(),
        position: None,
        message: error.to_string(),
    })?;
    let verified = verify_merged(&inputs, &merged)?;
    if let Some(parent) = output.parent().filter(|parent| !parent.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(output_error(parent))?;
    }
    reports::write_json_atomic(output, &merged).map_err(output_error(output))?;
    console(
        out,
        &format!(
            "merged {} shard reports of {} ({} runs, {} passed) into {}: campaign digest {}; {verified} runs replayed to check the shards, drawn at random\n",
            inputs.len(),
            merged.campaign,
            merged.summary.runs,
            merged.summary.passed,
            output.display(),
            merged.summary.campaign_digest
        ),
    )?;
    Ok(EXIT_PASS)
}

/// Re-derives what the shards say before they are merged: the campaign they name (from the working directory) gives
/// the merged report's config hash, and every run's seed and configuration; and a sample of the runs, drawn now from
/// the operating system's random source, replays to the records the shards hold. Returns how many were replayed.
fn verify_merged(
    inputs: &[(String, reports::CampaignReport)],
    merged: &reports::CampaignReport,
) -> Result<usize, CliError> {
    let refuse =
        |message: String| -> CliError { SpecError { path: "report merge".into(), position: None, message }.into() };
    let (campaign, seed_overridden) = super::gate::campaign_of_report(Path::new("report merge"), merged)?;
    let hash = campaign.config_hash();
    if hash != merged.config_hash {
        return Err(refuse(format!(
            "the shards' config hash is not that of {} with seed {} and {} runs: the campaign file changed since the shards ran, or a shard was edited; merge from the checkout the shards ran",
            merged.campaign, merged.seed, merged.summary.runs
        )));
    }
    let mismatches = crate::run::gate::run_mismatches(merged, &campaign);
    if let Some(first) = mismatches.first() {
        return Err(refuse(format!("runs that are not the campaign's: {first}")));
    }
    let held: Vec<u64> = merged.runs.iter().filter_map(|run| run.run_index).collect();
    let sample = crate::run::gate::sample_indices(&held, crate::run::shard::VERIFY_SAMPLE, super::gate::draw_seed()?);
    let record = |index| merged.runs.iter().find(|run| run.run_index == Some(index));
    let replays =
        super::gate::replay_runs(&campaign, seed_overridden, &sample, super::campaign::jobs_or_cores(None), &record);
    if let Some((index, reason)) = super::gate::first_forged(&replays) {
        let holder = inputs
            .iter()
            .find(|(_, shard)| shard.runs.iter().any(|run| run.run_index == Some(index)))
            .map_or("a shard", |(name, _)| name.as_str());
        return Err(refuse(format!("{holder}: {reason}: the shard was edited after it was written")));
    }
    Ok(sample.len())
}

/// `fleetsim report keygen -o FILE`: a signing key from the operating system's random source, FILE (0600) and
/// FILE.pub.
pub(super) fn keygen(output: &Path, out: &mut dyn Write) -> Result<i32, CliError> {
    if output.exists() {
        let message = "already exists: remove it first (a key is never overwritten)".to_owned();
        return Err(SpecError { path: output.display().to_string(), position: None, message }.into());
    }
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|error| SpecError {
        path: "the operating system's random source".into(),
        position: None,
        message: format!("cannot make a key: {error}"),
    })?;
    let secret = reports::sign::secret_key_text(seed);
    let public = reports::sign::public_key_text(&secret).expect("a key made here reads back");
    let mut public_path = output.as_os_str().to_owned();
    public_path.push(".pub");
    let public_path = PathBuf::from(public_path);
    if let Some(parent) = output.parent().filter(|parent| !parent.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(output_error(parent))?;
    }
    crate::live::private::write_private(output, secret.as_bytes()).map_err(output_error(output))?;
    reports::write_atomic(&public_path, public.as_bytes()).map_err(output_error(&public_path))?;
    console(
        out,
        &format!(
            "signing key {} (mode 0600: keep it secret), public key {}: {}",
            output.display(),
            public_path.display(),
            public
        ),
    )?;
    Ok(EXIT_PASS)
}

/// `fleetsim report sign REPORT --key FILE`: the report read fail-closed, then signed over its exact bytes.
pub(super) fn sign_report(report: &Path, key: &Path, output: &Path, out: &mut dyn Write) -> Result<i32, CliError> {
    reports::read::read_report(report)?;
    let bytes = spec::read_capped(report, reports::read::REPORT_BYTES_MAX).map_err(|_| SpecError {
        path: report.display().to_string(),
        position: None,
        message: "cannot read it again to sign it".into(),
    })?;
    let secret = crate::live::private::read_private(key).map_err(|error| SpecError {
        path: key.display().to_string(),
        position: None,
        message: error.to_string().replace(&format!("{}: ", key.display()), ""),
    })?;
    let secret = String::from_utf8(secret).unwrap_or_default();
    let signature = reports::sign::sign(&secret, &bytes).map_err(|message| SpecError {
        path: key.display().to_string(),
        position: None,
        message,
    })?;
    reports::write_atomic(output, signature.as_bytes()).map_err(output_error(output))?;
    console(out, &format!("signed {} into {}\n", report.display(), output.display()))?;
    Ok(EXIT_PASS)
}
