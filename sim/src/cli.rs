//! The `fleetsim` command line: `run`, `campaign`, `check`, `report`, `diff`. [`main_with`] is the whole program,
//! callable in-process by tests with any argument list and output sinks.
//!
//! Exit codes (documented in `docs/ARCHITECTURE.md` and `README.md`): 0 everything passed, 1 a run or campaign
//! failed (for `diff`: the traces differ), 2 bad input (usage, a missing, malformed or incompatible file), 3 an
//! output could not be written. `report` renders and does not judge: it exits 0 whatever verdict it renders.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand, ValueEnum};
use reports::RunRecord;
use reports::render::human_ms;

use crate::campaign;
use crate::runner::{self, RunIdentity, RunOutput};
use crate::spec::{self, SpecError};

pub const EXIT_PASS: i32 = 0;
pub const EXIT_FAIL: i32 = 1;
pub const EXIT_BAD_INPUT: i32 = 2;
pub const EXIT_OUTPUT_ERROR: i32 = 3;

const AFTER_HELP: &str = "\
Exit codes: 0 pass, 1 a run or campaign failed, 2 bad input, 3 an output could not be written.
`diff` exits 1 when the traces differ; `report` exits 0 whatever verdict it renders.
Logs go to stderr; choose their level with RUST_LOG (e.g. RUST_LOG=info).

Examples:
  fleetsim run scenarios/agent-partitioned-from-hub-is-reported-silent-and-recovers.toml
  fleetsim run scenarios/hub-crashes-and-restarts-mid-run.toml --seed 7 --out /tmp/run
  fleetsim campaign campaigns/ci-50.toml --jobs 2
  fleetsim campaign campaigns/ci-50.toml --run 17 --out /tmp/run17
  fleetsim check scenarios/*.toml campaigns/*.toml
  fleetsim report target/fleetsim/ci-50/report.json --format md >> \"$GITHUB_STEP_SUMMARY\"
  fleetsim diff /tmp/a/trace.jsonl /tmp/b/trace.jsonl";

const REPORT_HELP: &str = "\
Formats:
  text   the summary `fleetsim campaign` prints at its end
  md     Markdown for a CI job summary or a pull-request comment
  junit  JUnit XML: a test case per run, per (run, oracle) that fired, per sometimes-property
  html   one self-contained page: inline CSS and SVG plots, no script, no network

The report is read fail-closed: a missing, empty, truncated, corrupt or self-inconsistent
file, or one with another schema_version, is refused with its reason and exit code 2.
`report` renders and does not judge: it exits 0 whatever the campaign's verdict.

Examples:
  fleetsim report target/fleetsim/ci-50/report.json
  fleetsim report target/fleetsim/ci-50/report.json --format md >> \"$GITHUB_STEP_SUMMARY\"
  fleetsim report target/fleetsim/ci-50/report.json --format junit -o junit.xml
  fleetsim report target/fleetsim/ci-50/report.json --format html -o report.html";

const DIFF_HELP: &str = "\
Two runs of the same file and seed must write the same trace, byte for byte. When their
digests differ, this shows where: the first line at which the traces disagree, the lines
before it they share, a few lines of each from there on, and the keys that differ.

Exit codes: 0 identical, 1 the traces differ, 2 bad input (a missing file, or not a trace).

Examples:
  fleetsim run scenarios/hub-crashes-and-restarts-mid-run.toml --out /tmp/a
  fleetsim run scenarios/hub-crashes-and-restarts-mid-run.toml --out /tmp/b
  fleetsim diff /tmp/a/trace.jsonl /tmp/b/trace.jsonl";

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

/// What `fleetsim report` renders.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ReportFormat {
    /// The terminal summary `fleetsim campaign` prints.
    Text,
    /// Markdown for a CI job summary or a pull-request comment.
    Md,
    /// JUnit XML for CI test views.
    Junit,
    /// One self-contained HTML page with inline SVG plots.
    Html,
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
    /// Render a campaign's report.json as text, Markdown, JUnit XML or a self-contained HTML page.
    ///
    /// Prints to stdout, or writes FILE (atomically) with -o.
    #[command(after_long_help = REPORT_HELP)]
    Report {
        /// A report.json written by `fleetsim campaign` (see docs/formats.md).
        report: PathBuf,
        #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
        format: ReportFormat,
        /// Write the rendering to FILE instead of stdout.
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Show where two traces (trace.jsonl) first diverge, with context, or say they are identical.
    #[command(after_long_help = DIFF_HELP)]
    Diff {
        /// The first trace.
        a: PathBuf,
        /// The second trace.
        b: PathBuf,
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
        Command::Report { report, format, output } => render_report(&report, format, output.as_deref(), out),
        Command::Diff { a, b } => diff(&a, &b, out),
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

impl From<reports::read::ReadError> for CliError {
    fn from(error: reports::read::ReadError) -> Self {
        CliError::BadInput(SpecError { path: error.path, position: None, message: error.reason })
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
        Format::Text => console(out, &render_campaign(&report, jobs, wall.as_secs_f64(), &report_path))?,
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

/// The human summary of a campaign: the report's own summary ([`reports::render::text`], the same `fleetsim report`
/// prints), then what only this execution knows: threads, wall time and where the report went.
pub fn render_campaign(report: &reports::CampaignReport, jobs: usize, wall_s: f64, report_path: &Path) -> String {
    let mut text = reports::render::text(report);
    text.push_str(&format!("  executed      {jobs} jobs, {wall_s:.2} s wall\n"));
    text.push_str(&format!("  report        {}\n", report_path.display()));
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

fn render_report(
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
fn read_trace(path: &Path) -> Result<String, CliError> {
    let text = spec::read(path)?;
    if let Err(error) = reports::trace_diff::trace_lines(&text) {
        return Err(SpecError { path: path.display().to_string(), position: None, message: error.to_string() }.into());
    }
    Ok(text)
}

fn diff(a: &Path, b: &Path, out: &mut dyn Write) -> Result<i32, CliError> {
    let (text_a, text_b) = (read_trace(a)?, read_trace(b)?);
    let (lines_a, lines_b): (Vec<&str>, Vec<&str>) = (text_a.lines().collect(), text_b.lines().collect());
    let (name_a, name_b) = (a.display().to_string(), b.display().to_string());
    console(out, &reports::trace_diff::render(&name_a, &lines_a, &name_b, &lines_b))?;
    Ok(match reports::trace_diff::compare(&lines_a, &lines_b) {
        reports::trace_diff::TraceDiff::Identical { .. } => EXIT_PASS,
        reports::trace_diff::TraceDiff::Diverged { .. } => EXIT_FAIL,
    })
}
