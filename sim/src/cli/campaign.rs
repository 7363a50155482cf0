//! `fleetsim campaign`: every run of a campaign (or a shard, or one run), resumable, with a progress bar on a terminal, and its report.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::model::campaign::{self};
use crate::model::exit::{EXIT_FAIL, EXIT_PASS};
use crate::model::spec::SpecError;
use crate::run::shard;

use super::run::finish_run;
use super::*;

pub(super) const CAMPAIGN_HELP: &str = "\
Every finished run is written to DIR/runs/NNNN.json (atomically) as it finishes, and
DIR/report.json is written whole at the end (a temporary file renamed over it), so a
campaign that is interrupted (Ctrl-C, killed, a machine lost) leaves its finished runs and
never a half report. Run the same command with --resume to run only the missing runs: the
report is the one an uninterrupted campaign writes.

--shard K/N runs the runs i with i % N == K - 1 (K from 1), for spreading one campaign over
N machines; its report records the shard, and `fleetsim report merge` combines the shards.
A shard exits 1 only when one of its runs failed: sometimes-properties are judged on the
merged report.

Examples:
  fleetsim campaign campaigns/ci-50.toml --jobs 2
  fleetsim campaign campaigns/ci-50.toml --run 17 --out /tmp/run17
  fleetsim campaign campaigns/ci-50.toml --out target/ci      # interrupted? then:
  fleetsim campaign campaigns/ci-50.toml --out target/ci --resume
  fleetsim campaign campaigns/ci-50.toml --shard 2/4 --out target/shard2";

pub(super) struct CampaignArgs {
    pub(super) runs: Option<u64>,
    pub(super) seed: Option<u64>,
    pub(super) jobs: Option<usize>,
    pub(super) dir: Option<PathBuf>,
    pub(super) run: Option<u64>,
    pub(super) shard: Option<String>,
    pub(super) resume: bool,
    pub(super) format: Format,
}

pub(super) fn jobs_or_cores(jobs: Option<usize>) -> usize {
    jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from)).max(1)
}

pub(super) fn run_campaign(
    path: &Path,
    args: CampaignArgs,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<i32, CliError> {
    let mut campaign = campaign::load_campaign(path)?;
    if let Some(runs) = args.runs {
        campaign.runs = check_runs(runs)?;
    }
    let seed_overridden = args.seed.is_some_and(|seed| seed != campaign.seed);
    if let Some(seed) = args.seed {
        campaign.seed = seed;
    }
    let jobs = jobs_or_cores(args.jobs);

    if let Some(index) = args.run {
        if index >= campaign.runs {
            let message = format!("--run {index}: the campaign has runs 0 to {}", campaign.runs - 1);
            return Err(SpecError { path: path.display().to_string(), position: None, message }.into());
        }
        let output =
            crate::run::campaign::execute(&campaign, &[index], 1, seed_overridden, args.dir.is_some(), &|_| {})
                .remove(0);
        return finish_run(&output, args.dir.as_deref(), args.format, out);
    }

    let shard = args.shard.as_deref().map(|text| shard::parse_shard(text, campaign.runs)).transpose()?;
    let indices: Vec<u64> = shard.map_or_else(|| (0..campaign.runs).collect(), |shard| shard.indices());
    let dir = args.dir.unwrap_or_else(|| default_campaign_dir(path));
    let runs_dir = dir.join(shard::RUNS_DIR);
    std::fs::create_dir_all(&runs_dir).map_err(output_error(&runs_dir))?;
    let finished = if args.resume {
        shard::load_finished(&dir, &campaign, &indices, seed_overridden)?
    } else {
        std::collections::BTreeMap::new()
    };
    // What was read back is re-derived, not trusted: a sample of the records, drawn now from the operating system's
    // random source, is replayed and must be what its run gives.
    let verified = if finished.is_empty() {
        0
    } else {
        let held: Vec<u64> = finished.keys().copied().collect();
        let sample = crate::run::gate::sample_indices(&held, shard::VERIFY_SAMPLE, super::gate::draw_seed()?);
        let replays =
            super::gate::replay_runs(&campaign, seed_overridden, &sample, jobs, &|index| finished.get(&index));
        if let Some((index, reason)) = super::gate::first_forged(&replays) {
            let path = shard::run_file(&dir, index).display().to_string();
            let message =
                format!("{reason}: it was edited after it was written; delete it and resume to run this run again");
            return Err(SpecError { path, position: None, message }.into());
        }
        sample.len()
    };
    let missing: Vec<u64> = indices.iter().copied().filter(|index| !finished.contains_key(index)).collect();
    let progress = indicatif::ProgressBar::new(indices.len() as u64);
    progress.set_position(finished.len() as u64);
    progress.set_style(
        indicatif::ProgressStyle::with_template("{prefix} [{bar:40}] {pos}/{len} runs, {msg} failed, eta {eta}")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    progress.set_prefix(format!("campaign {}", path.display()));
    progress.set_message("0");
    let failed =
        std::sync::atomic::AtomicU64::new(finished.values().filter(|run| !run.verdict.passed()).count() as u64);
    progress.set_message(failed.load(std::sync::atomic::Ordering::Relaxed).to_string());
    // The first per-run file that could not be written; the campaign finishes its runs, then exits 3.
    let write_failure: std::sync::Mutex<Option<(PathBuf, std::io::Error)>> = std::sync::Mutex::new(None);
    #[expect(clippy::disallowed_methods, reason = "the CLI reports wall time; nothing simulated reads it")]
    let started = std::time::Instant::now();
    let outputs = crate::run::campaign::execute(&campaign, &missing, jobs, seed_overridden, false, &|output| {
        if let Err(failure) = shard::write_run_file(&dir, &output.record) {
            write_failure.lock().expect("no writer panics holding the lock").get_or_insert(failure);
        }
        if !output.record.verdict.passed() {
            let count = failed.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            progress.set_message(count.to_string());
        }
        progress.inc(1);
    });
    progress.finish_and_clear();
    let wall = started.elapsed();
    if let Some((path, error)) = write_failure.into_inner().expect("the runs are done") {
        return Err(CliError::Output { path, error });
    }

    let resumed = finished.len();
    let mut records = finished;
    records.extend(outputs.into_iter().map(|output| (output.record.run_index.unwrap_or(0), output.record)));
    let mut report = crate::run::campaign::report(&campaign, records.into_values().collect());
    report.shard = shard;
    let report_path = dir.join("report.json");
    reports::write_json_atomic(&report_path, &report).map_err(output_error(&report_path))?;
    match args.format {
        Format::Text => {
            let mut text = render_campaign(&report, jobs, wall.as_secs_f64(), &report_path);
            if args.resume {
                text.push_str(&format!(
                    "  resumed       {resumed} runs read from {} ({verified} of them replayed to check, drawn at random), {} run now\n",
                    runs_dir.display(),
                    missing.len()
                ));
            }
            if let Some(shard) = shard {
                text.push_str(&format!(
                    "  shard         {shard}: runs i with i % {} == {} ({} of {}); merge the shards with `fleetsim report merge`\n",
                    shard.count,
                    shard.index - 1,
                    report.runs.len(),
                    shard.runs_total
                ));
            }
            console(out, &text)?
        }
        Format::Json => {
            let json = serde_json::to_string_pretty(&report).expect("reports serialise");
            console(out, &format!("{json}\n"))?;
        }
    }
    let _ = err.flush();
    // A shard is judged on its runs only: its sometimes-properties are judged on the merged report.
    let passed = if shard.is_some() { report.summary.failed == 0 } else { report.summary.passed() };
    Ok(if passed { EXIT_PASS } else { EXIT_FAIL })
}

pub(super) fn default_campaign_dir(path: &Path) -> PathBuf {
    let stem = path.file_stem().map_or_else(|| "campaign".into(), |stem| stem.to_string_lossy().into_owned());
    PathBuf::from("target").join("fleetsim").join(stem)
}

/// The human summary of a campaign: the report's own summary ([`reports::render::text`], the same `fleetsim report`
/// prints), then what only this execution knows: threads, wall time and where the report went.
pub fn render_campaign(report: &reports::CampaignReport, jobs: usize, wall_s: f64, report_path: &Path) -> String {
    let mut text = reports::render::text(report);
    text.push_str(&format!("  executed      {jobs} jobs, {wall_s:.2} s wall\n"));
    text.push_str(&format!("  report        {}\n", report_path.display()));
    text
}
