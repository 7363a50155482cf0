//! The `fleetsim` command line: `run`, `campaign`, `check`. [`main_with`] is the whole program, callable in-process
//! by tests with any argument list and output sinks.
//!
//! Exit codes (documented in `docs/ARCHITECTURE.md`): 0 everything passed, 1 a run or campaign failed, 2 bad input
//! (usage, a missing or malformed file), 3 an output could not be written.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand, ValueEnum};
use reports::RunRecord;

use crate::campaign::{self, Campaign};
use crate::runner::{self, RunIdentity, RunOutput};
use crate::spec::{self, SpecError};

pub const EXIT_PASS: i32 = 0;
pub const EXIT_FAIL: i32 = 1;
pub const EXIT_BAD_INPUT: i32 = 2;
pub const EXIT_OUTPUT_ERROR: i32 = 3;

const AFTER_HELP: &str = "\
Exit codes: 0 pass, 1 a run or campaign failed, 2 bad input, 3 an output could not be written.
Logs go to stderr; choose their level with RUST_LOG (e.g. RUST_LOG=info).

Examples:
  fleetsim run scenarios/agent-partitioned-from-hub-is-reported-silent-and-recovers.toml
  fleetsim run scenarios/hub-crashes-and-restarts-mid-run.toml --seed 7 --out /tmp/run
  fleetsim campaign campaigns/ci-50.toml --jobs 2
  fleetsim campaign campaigns/ci-50.toml --run 17 --out /tmp/run17
  fleetsim check scenarios/*.toml campaigns/*.toml";

/// Deterministic fault-injection simulator and conformance harness for a bare-metal fleet lifecycle engine.
///
/// The real lifecycle engine runs against deterministic fakes on a simulated network in virtual time. A run is a
/// pure function of its file and its seed: the same seed gives the same trace digest, byte for byte.
#[derive(Debug, Parser)]
#[command(name = "fleetsim", version, after_help = AFTER_HELP)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    /// A short summary for people.
    Text,
    /// The run record (`run.json`) on stdout.
    Json,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run one scripted scenario and judge it with every oracle.
    ///
    /// Prints the verdict, virtual duration, faults fired, violations, trace digest and a command that replays the
    /// run. With --out DIR, writes DIR/run.json and DIR/trace.jsonl.
    Run {
        /// A scenario file (see docs/formats.md).
        scenario: PathBuf,
        /// Run with this seed instead of the file's.
        #[arg(long)]
        seed: Option<u64>,
        /// Write run.json and trace.jsonl into this directory (created if missing).
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Run a randomized campaign: N runs, each with its own seed and fault plan, over several threads.
    ///
    /// Results are identical whatever --jobs is. Writes DIR/report.json (default target/fleetsim/<campaign name>/).
    /// With --run K, replays only run K of the campaign (as a failing run's reproduce command does).
    Campaign {
        /// A campaign file (see docs/formats.md).
        campaign: PathBuf,
        /// Number of runs instead of the file's `runs`.
        #[arg(long)]
        runs: Option<u64>,
        /// Campaign seed instead of the file's `seed`.
        #[arg(long)]
        seed: Option<u64>,
        /// Worker threads (default: the number of cores).
        #[arg(long)]
        jobs: Option<usize>,
        /// Output directory.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        /// Replay only run K (0-based); with --out, writes its run.json and trace.jsonl.
        #[arg(long, value_name = "K")]
        run: Option<u64>,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Validate scenario and campaign files without running them.
    Check {
        /// Files to check; each is a scenario or a campaign (a campaign has a `runs` key).
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}

/// The whole program. Returns the exit code.
pub fn main_with(args: impl IntoIterator<Item = OsString>, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(error) => {
            let code = if error.use_stderr() { EXIT_BAD_INPUT } else { EXIT_PASS };
            let text = error.render().to_string();
            let _ = if error.use_stderr() { write!(err, "{text}") } else { write!(out, "{text}") };
            return code;
        }
    };
    let result = match cli.command {
        Command::Run { scenario, seed, out: dir, format } => run_scenario(&scenario, seed, dir.as_deref(), format, out),
        Command::Campaign { campaign, runs, seed, jobs, out: dir, run, format } => {
            run_campaign(&campaign, CampaignArgs { runs, seed, jobs, dir, run, format }, out, err)
        }
        Command::Check { files } => check(&files, out),
    };
    match result {
        Ok(code) => code,
        Err(CliError::BadInput(error)) => {
            let _ = writeln!(err, "error: {error}");
            EXIT_BAD_INPUT
        }
        Err(CliError::Output { path, error }) => {
            let _ = writeln!(err, "error: cannot write {}: {error}", path.display());
            EXIT_OUTPUT_ERROR
        }
    }
}

enum CliError {
    BadInput(SpecError),
    Output { path: PathBuf, error: std::io::Error },
}

impl From<SpecError> for CliError {
    fn from(error: SpecError) -> Self {
        CliError::BadInput(error)
    }
}

fn output_error(path: &Path) -> impl FnOnce(std::io::Error) -> CliError + '_ {
    move |error| CliError::Output { path: path.to_owned(), error }
}

fn console(out: &mut dyn Write, text: &str) -> Result<(), CliError> {
    out.write_all(text.as_bytes()).map_err(output_error(Path::new("<stdout>")))
}

fn run_scenario(
    path: &Path,
    seed: Option<u64>,
    dir: Option<&Path>,
    format: Format,
    out: &mut dyn Write,
) -> Result<i32, CliError> {
    let scenario = spec::load_scenario(path)?;
    let seed = seed.unwrap_or(scenario.seed);
    let identity = RunIdentity {
        source: path.display().to_string(),
        run_index: None,
        repro: format!("fleetsim run {} --seed {seed}", path.display()),
    };
    let output = runner::run(&scenario.run, seed, &identity, dir.is_some());
    finish_run(&output, dir, format, out)
}

fn finish_run(output: &RunOutput, dir: Option<&Path>, format: Format, out: &mut dyn Write) -> Result<i32, CliError> {
    if let Some(dir) = dir {
        write_run(dir, output)?;
    }
    match format {
        Format::Text => console(out, &render_run(&output.record))?,
        Format::Json => {
            let json = serde_json::to_string_pretty(&output.record).expect("run records serialise");
            console(out, &format!("{json}\n"))?;
        }
    }
    Ok(if output.record.verdict.passed() { EXIT_PASS } else { EXIT_FAIL })
}

fn write_run(dir: &Path, output: &RunOutput) -> Result<(), CliError> {
    std::fs::create_dir_all(dir).map_err(output_error(dir))?;
    let run_path = dir.join("run.json");
    reports::write_json_atomic(&run_path, &output.record).map_err(output_error(&run_path))?;
    let trace_path = dir.join("trace.jsonl");
    let mut trace = output.trace.join("\n");
    trace.push('\n');
    reports::write_atomic(&trace_path, trace.as_bytes()).map_err(output_error(&trace_path))
}

/// The human summary of one run.
pub fn render_run(record: &RunRecord) -> String {
    let mut text = String::new();
    let run = record.run_index.map(|i| format!(" run {i}")).unwrap_or_default();
    text.push_str(&format!("{}{run}  seed {}\n", record.source, record.seed));
    text.push_str(&format!("  verdict       {}\n", record.verdict.label()));
    text.push_str(&format!(
        "  virtual time  {} ({} ms)\n",
        human_ms(record.virtual_duration_ms),
        record.virtual_duration_ms
    ));
    let faults: Vec<String> = record.faults.iter().map(|(kind, count)| format!("{kind} x{count}")).collect();
    text.push_str(&format!(
        "  faults        {}\n",
        if faults.is_empty() { "none".to_owned() } else { faults.join(", ") }
    ));
    let reached: Vec<String> = record.reached.iter().map(|r| format!("{} (t={} ms)", r.oracle, r.t_ms)).collect();
    text.push_str(&format!(
        "  reached       {}\n",
        if reached.is_empty() { "nothing".to_owned() } else { reached.join(", ") }
    ));
    if record.violations.is_empty() {
        text.push_str("  violations    none\n");
    } else {
        text.push_str("  violations\n");
        for violation in &record.violations {
            let expected = if violation.expected { " (expected)" } else { "" };
            text.push_str(&format!(
                "    {} at t={} ms{expected}: {}\n",
                violation.oracle, violation.t_ms, violation.evidence
            ));
        }
    }
    for name in &record.unmet {
        text.push_str(&format!("  unmet         {name} was expected to fire and never did\n"));
    }
    if let Some(panic) = &record.panic {
        text.push_str(&format!("  panic         {panic}\n"));
    }
    text.push_str(&format!("  trace digest  {} ({} events)\n", record.trace_digest, record.trace_events));
    text.push_str(&format!("  reproduce     {}\n", record.repro));
    text
}

/// `7_200_000` → `2h 00m 00s`.
pub fn human_ms(ms: u64) -> String {
    let seconds = ms / 1000;
    format!("{}h {:02}m {:02}s", seconds / 3600, seconds / 60 % 60, seconds % 60)
}

struct CampaignArgs {
    runs: Option<u64>,
    seed: Option<u64>,
    jobs: Option<usize>,
    dir: Option<PathBuf>,
    run: Option<u64>,
    format: Format,
}

fn run_campaign(path: &Path, args: CampaignArgs, out: &mut dyn Write, err: &mut dyn Write) -> Result<i32, CliError> {
    let mut campaign = campaign::load_campaign(path)?;
    if let Some(runs) = args.runs {
        if runs == 0 {
            return Err(
                SpecError { path: "--runs".into(), position: None, message: "must be at least 1".into() }.into()
            );
        }
        campaign.runs = runs;
    }
    let seed_overridden = args.seed.is_some_and(|seed| seed != campaign.seed);
    if let Some(seed) = args.seed {
        campaign.seed = seed;
    }
    let jobs = args.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from)).max(1);

    if let Some(index) = args.run {
        if index >= campaign.runs {
            let message = format!("--run {index}: the campaign has runs 0 to {}", campaign.runs - 1);
            return Err(SpecError { path: path.display().to_string(), position: None, message }.into());
        }
        let output = campaign.execute(&[index], 1, seed_overridden, args.dir.is_some(), &|_| {}).remove(0);
        return finish_run(&output, args.dir.as_deref(), args.format, out);
    }

    let indices: Vec<u64> = (0..campaign.runs).collect();
    let progress = indicatif::ProgressBar::new(campaign.runs);
    progress.set_style(
        indicatif::ProgressStyle::with_template("{prefix} [{bar:40}] {pos}/{len} runs, {msg} failed, eta {eta}")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    progress.set_prefix(format!("campaign {}", path.display()));
    progress.set_message("0");
    let failed = std::sync::atomic::AtomicU64::new(0);
    #[expect(clippy::disallowed_methods, reason = "the CLI reports wall time; nothing simulated reads it")]
    let started = std::time::Instant::now();
    let outputs = campaign.execute(&indices, jobs, seed_overridden, false, &|output| {
        if !output.record.verdict.passed() {
            let count = failed.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            progress.set_message(count.to_string());
        }
        progress.inc(1);
    });
    progress.finish_and_clear();
    let wall = started.elapsed();

    let report = campaign.report(outputs.into_iter().map(|output| output.record).collect());
    let dir = args.dir.unwrap_or_else(|| default_campaign_dir(path));
    std::fs::create_dir_all(&dir).map_err(output_error(&dir))?;
    let report_path = dir.join("report.json");
    reports::write_json_atomic(&report_path, &report).map_err(output_error(&report_path))?;
    match args.format {
        Format::Text => console(out, &render_campaign(&campaign, &report, jobs, wall.as_secs_f64(), &report_path))?,
        Format::Json => {
            let json = serde_json::to_string_pretty(&report).expect("reports serialise");
            console(out, &format!("{json}\n"))?;
        }
    }
    let _ = err.flush();
    Ok(if report.summary.passed() { EXIT_PASS } else { EXIT_FAIL })
}

fn default_campaign_dir(path: &Path) -> PathBuf {
    let stem = path.file_stem().map_or_else(|| "campaign".into(), |stem| stem.to_string_lossy().into_owned());
    PathBuf::from("target").join("fleetsim").join(stem)
}

/// The human summary of a campaign.
pub fn render_campaign(
    campaign: &Campaign,
    report: &reports::CampaignReport,
    jobs: usize,
    wall_s: f64,
    report_path: &Path,
) -> String {
    let summary = &report.summary;
    let mut text = String::new();
    text.push_str(&format!(
        "campaign {}: {} runs, seed {}, {} jobs, {:.2} s wall, {} virtual\n",
        report.campaign,
        summary.runs,
        report.seed,
        jobs,
        wall_s,
        human_ms(summary.virtual_duration_ms_total)
    ));
    text.push_str(&format!("  passed        {}/{}\n", summary.passed, summary.runs));
    let faults: Vec<String> = summary.faults.iter().map(|(kind, count)| format!("{kind} {count}")).collect();
    text.push_str(&format!(
        "  faults        {}\n",
        if faults.is_empty() { "none".to_owned() } else { faults.join(", ") }
    ));
    let sometimes: Vec<String> =
        summary.sometimes_reached.iter().map(|(name, runs)| format!("{name} {runs}/{}", summary.runs)).collect();
    if !sometimes.is_empty() {
        text.push_str(&format!("  reached       {}\n", sometimes.join(", ")));
    }
    for name in &summary.sometimes_never_reached {
        text.push_str(&format!("  never reached {name}: no run got there, so the campaign proves nothing about it\n"));
    }
    if summary.violations_by_oracle.is_empty() {
        text.push_str("  violations    none\n");
    } else {
        text.push_str("  violations\n");
        for (oracle, count) in &summary.violations_by_oracle {
            text.push_str(&format!("    {oracle}: {count}\n"));
        }
    }
    let failures: Vec<&RunRecord> = report.runs.iter().filter(|run| !run.verdict.passed()).collect();
    for run in failures.iter().take(10) {
        let first = run
            .violations
            .iter()
            .find(|v| !v.expected)
            .map(|v| format!("{} at t={} ms: {}", v.oracle, v.t_ms, v.evidence))
            .or_else(|| run.panic.clone())
            .or_else(|| run.unmet.first().map(|name| format!("{name} never fired")))
            .unwrap_or_default();
        text.push_str(&format!(
            "  FAIL run {} seed {}: {} {first}\n",
            run.run_index.unwrap_or(0),
            run.seed,
            run.verdict.label()
        ));
        text.push_str(&format!("       reproduce: {}\n", run.repro));
    }
    if failures.len() > 10 {
        text.push_str(&format!("  … and {} more failing runs in the report\n", failures.len() - 10));
    }
    text.push_str(&format!("  digest        {}\n", summary.campaign_digest));
    text.push_str(&format!("  report        {}\n", report_path.display()));
    text.push_str(&format!("  config        {} ({})\n", campaign.source, report.config_hash));
    text
}

fn check(files: &[PathBuf], out: &mut dyn Write) -> Result<i32, CliError> {
    for path in files {
        let text = spec::read(path)?;
        let name = path.display().to_string();
        // A campaign has a top-level `runs` key; look at the text when it does not parse, so the error comes from the
        // right parser.
        let is_campaign = match toml::from_str::<toml::Table>(&text) {
            Ok(table) => table.contains_key("runs"),
            Err(_) => text.lines().take_while(|line| !line.trim_start().starts_with('[')).any(|line| {
                line.trim_start().strip_prefix("runs").is_some_and(|rest| rest.trim_start().starts_with('='))
            }),
        };
        if is_campaign {
            let campaign = campaign::parse_campaign(&name, &text)?;
            console(
                out,
                &format!("ok  {name}: campaign, {} runs of {} nodes\n", campaign.runs, campaign.base.fleet.nodes),
            )?;
        } else {
            let scenario = spec::parse_scenario(&name, &text)?;
            console(
                out,
                &format!(
                    "ok  {name}: scenario, {} nodes, {} steps\n",
                    scenario.run.fleet.nodes,
                    scenario.run.steps.len()
                ),
            )?;
        }
    }
    Ok(EXIT_PASS)
}
