//! The `fleetsim` command line: `run`, `campaign`, `check`, `report` (and `report merge`), `diff`, `gate`, `repro`
//! and `experiment`. [`main_with`] is the whole program, callable in-process by tests with any argument list and
//! output sinks.
//!
//! Exit codes ([`crate::model::exit`], documented in `docs/simulation.md` and `README.md`): 0 everything passed, 1 a run or campaign
//! failed (for `diff`: the traces differ; for `gate`: a threshold is unmet; for `repro`: the replay's digest differs),
//! 2 bad input (usage, a missing, malformed or incompatible file), 3 an output could not be written. `report` renders
//! and does not judge: it exits 0 whatever verdict it renders; `experiment` measures and exits 0 when it ran.

mod campaign;
mod check;
mod experiment;
mod gate;
mod live;
mod report;
mod run;

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand, ValueEnum};

use campaign::{CAMPAIGN_HELP, CampaignArgs, jobs_or_cores, run_campaign};
use check::check;
use experiment::{EXPERIMENT_HELP, ExperimentArgs, run_experiment};
use gate::{GATE_HELP, REPRO_HELP, repro, run_gate};
use live::{DRIVE_HELP, SERVE_HELP, drive, serve};
use report::{DIFF_HELP, KEYGEN_HELP, MERGE_HELP, REPORT_HELP, diff, merge_reports, render_report};
use run::run_scenario;

use crate::model::spec::SpecError;
use crate::run::runner::{self};

use crate::model::exit::{EXIT_BAD_INPUT, EXIT_OUTPUT_ERROR, EXIT_PASS};

const AFTER_HELP: &str = "\
Exit codes: 0 pass, 1 a run or campaign failed, 2 bad input, 3 an output could not be written.
`diff` exits 1 when the traces differ, `gate` when a threshold is unmet, `repro` when the replay's
digest differs; `report` exits 0 whatever verdict it renders, `experiment` whenever it ran.
Logs go to stderr; choose their level with RUST_LOG (e.g. RUST_LOG=info).

Examples:
  fleetsim run scenarios/agent-partitioned-from-hub-is-reported-silent-and-recovers.toml
  fleetsim run scenarios/hub-crashes-and-restarts-mid-run.toml --seed 7 --out /tmp/run
  fleetsim campaign campaigns/ci-50.toml --jobs 2
  fleetsim campaign campaigns/ci-50.toml --run 17 --out /tmp/run17
  fleetsim check scenarios/*.toml campaigns/*.toml
  fleetsim report target/fleetsim/ci-50/report.json --format md >> \"$GITHUB_STEP_SUMMARY\"
  fleetsim diff /tmp/a/trace.jsonl /tmp/b/trace.jsonl
  fleetsim gate target/fleetsim/ci-50/report.json --policy campaigns/release-gate.toml
  fleetsim repro target/fleetsim/ci-50/report.json --run 17 --out /tmp/run17
  fleetsim campaign campaigns/ci-50.toml --shard 2/4 --out /tmp/shard2
  fleetsim report merge /tmp/shard*/report.json -o merged.json
  fleetsim experiment base.toml variant.toml --runs 20
  fleetsim shrink target/fleetsim/ci-50/report.json --run 17 -o shrunk.toml
  fleetsim conformance";

#[derive(Debug, Parser)]
#[command(name = "fleetsim", version, after_help = AFTER_HELP)]
pub(super) struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(super) enum Format {
    /// A short summary for people.
    Text,
    /// The run record (`run.json`) on stdout.
    Json,
}

/// What `fleetsim report` renders.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(super) enum ReportFormat {
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
pub(super) enum Command {
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
        /// The network the services talk over.
        #[arg(long, value_enum, default_value_t = runner::Transport::Fast)]
        transport: runner::Transport,
    },
    /// Run a randomized campaign: N runs, each with its own seed and fault plan, over several threads.
    ///
    /// Results are identical whatever --jobs is. Writes DIR/report.json (default target/fleetsim/<campaign name>/)
    /// and each finished run's DIR/runs/NNNN.json. With --run K, replays only run K of the campaign (as a failing
    /// run's reproduce command does).
    #[command(after_long_help = CAMPAIGN_HELP)]
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
        #[arg(long, value_name = "K", conflicts_with_all = ["shard", "resume"])]
        run: Option<u64>,
        /// Run only the shard K of N: the runs i with i % N == K - 1 (K from 1). Merge the shards' reports with
        /// `fleetsim report merge`.
        #[arg(long, value_name = "K/N")]
        shard: Option<String>,
        /// Finish an interrupted campaign: read the runs DIR/runs/ already holds, run only the missing ones.
        #[arg(long)]
        resume: bool,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Validate scenario, campaign and gate-policy files without running them.
    Check {
        /// Files to check; each is a scenario, a campaign (it has a top-level `runs` key) or a gate policy (it has
        /// `kind = "gate_policy"`).
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Render a campaign's report.json as text, Markdown, JUnit XML or a self-contained HTML page; or merge shards.
    ///
    /// Prints to stdout, or writes FILE (atomically) with -o. `fleetsim report merge A.json B.json ... -o FILE`
    /// merges the shard reports of one campaign instead.
    #[command(
        after_long_help = REPORT_HELP,
        args_conflicts_with_subcommands = true,
        subcommand_negates_reqs = true,
        disable_help_subcommand = true
    )]
    Report {
        #[command(subcommand)]
        action: Option<ReportAction>,
        /// A report.json written by `fleetsim campaign` (see docs/formats.md).
        #[arg(required = true)]
        report: Option<PathBuf>,
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
    /// Judge a campaign report against a release-gate policy: exit 0 with one line, or 1 listing every unmet threshold.
    #[command(after_long_help = GATE_HELP)]
    Gate {
        /// A report.json written by `fleetsim campaign` or `fleetsim report merge`.
        report: PathBuf,
        /// The gate policy (e.g. campaigns/release-gate.toml; see docs/formats.md).
        #[arg(long, value_name = "FILE")]
        policy: PathBuf,
        /// Worker threads for the re-check (default: the number of cores).
        #[arg(long)]
        jobs: Option<usize>,
        /// Replay every run (`all`), or N runs drawn at gate time from the operating system's random source,
        /// instead of what the policy's `[determinism] recheck` says (by default: every run).
        #[arg(long, value_name = "all|N", value_parser = gate::parse_recheck)]
        recheck: Option<crate::run::gate::Recheck>,
        /// Trust a report signed by this public key (written by `fleetsim report keygen`): it is not replayed.
        #[arg(long, value_name = "KEY.pub")]
        trusted_key: Option<PathBuf>,
        /// The report's signature (default: the report's path with `.sig` added).
        #[arg(long, value_name = "FILE", requires = "trusted_key")]
        signature: Option<PathBuf>,
    },
    /// Replay one run of a report's campaign, write its run.json and trace.jsonl, and check its trace digest.
    #[command(after_long_help = REPRO_HELP)]
    Repro {
        /// A report.json written by `fleetsim campaign` or `fleetsim report merge`.
        report: PathBuf,
        /// The run to replay (its run_index, from 0).
        #[arg(long, value_name = "K")]
        run: u64,
        /// Where to write run.json and trace.jsonl (default target/fleetsim/<campaign>/repro-K).
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Run two campaign files that differ in one setting on the same seeds and tabulate the paired outcomes.
    #[command(after_long_help = EXPERIMENT_HELP)]
    Experiment {
        /// The base campaign file.
        base: PathBuf,
        /// The variant: the base with one setting changed.
        variant: PathBuf,
        /// Paired runs (default: the base file's `runs`).
        #[arg(long)]
        runs: Option<u64>,
        /// Campaign seed for both (default: the base file's `seed`).
        #[arg(long)]
        seed: Option<u64>,
        /// Worker threads (default: the number of cores).
        #[arg(long)]
        jobs: Option<usize>,
        /// Compare files that differ in more than one setting.
        #[arg(long)]
        allow_multi: bool,
        /// Output directory for experiment.json.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        /// `json` prints experiment.json instead of the table.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Shrink a failing campaign run to a minimal scenario file that still fails the same way.
    ///
    /// Delta debugging over the run's fault steps, then halving its knobs; prints how many steps and faults it
    /// removed in how many runs. Writes FILE with -o, else prints the scenario.
    Shrink {
        /// A report.json written by `fleetsim campaign`.
        report: PathBuf,
        /// The failing run to shrink (0-based).
        #[arg(long, value_name = "K")]
        run: u64,
        /// Write the scenario to FILE instead of stdout.
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: Option<PathBuf>,
        /// The most candidate runs to try.
        #[arg(long, value_name = "N", default_value_t = crate::run::shrink::DEFAULT_MAX_RUNS)]
        max_runs: u64,
    },
    /// Run the recovery-matrix conformance suite: one scripted case per listed (stage, failure class) pair.
    ///
    /// Prints a line per case, then the coverage (listed pairs covered by a passing case) and every failing case with
    /// its reproduce command; writes OUT/conformance.json. Exit 0 only when every case passes and every listed pair
    /// is covered.
    Conformance {
        /// The cases' directory.
        #[arg(default_value = crate::run::conformance::DEFAULT_DIR)]
        dir: PathBuf,
        /// Where to write conformance.json (default target/fleetsim/conformance).
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
    /// Serve the fakes of one MAAS site on loopback ports: MAAS, Redfish BMCs, secrets, hub and inventory, DNS, admin.
    ///
    /// Prints each service's URL and a MAAS API key, then serves until Ctrl-C. Use curl, dig, MAAS's and Redfish's own
    /// client libraries, or `fleetsim drive` against it; inject faults while it runs through the admin API.
    #[command(after_long_help = SERVE_HELP)]
    Serve {
        /// Take the machines and the seed from this scenario's `[onboarding]` table.
        #[arg(long, value_name = "FILE")]
        scenario: Option<PathBuf>,
        /// The site seed (machines' hardware, MACs, credentials); default the scenario's, else 1.
        #[arg(long)]
        seed: Option<u64>,
        /// How many machines to rack (gpu-01 …) when no scenario names them.
        #[arg(long, default_value_t = 3)]
        machines: u32,
        /// The address to listen on. Loopback unless named here: anything else is served to whoever can reach it.
        #[arg(long, default_value = "127.0.0.1")]
        bind: std::net::IpAddr,
        /// The MAAS port; Redfish, secrets, hub, DNS (UDP and TCP) and admin take the five after it. 0: ephemeral ports.
        #[arg(long, default_value_t = 5240)]
        port: u16,
        /// Virtual time runs this many times faster than the wall clock (MAAS's minutes become seconds at 60).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10_000))]
        speed: u32,
        /// Write DIR/site.toml and its credential files (mode 0600) for `fleetsim drive`.
        #[arg(long, value_name = "DIR")]
        write_site: Option<PathBuf>,
        /// Serve the credentials in DIR's seven 0600 files (as --write-site writes them) instead of fresh random ones.
        /// Required with a --bind address that is not loopback.
        #[arg(long, value_name = "DIR")]
        credentials: Option<PathBuf>,
        /// Open connections per HTTP service; at the cap a new one takes the place of the one idle, or stalled in a
        /// request's body, the longest.
        #[arg(long, value_name = "N", default_value_t = 512, value_parser = clap::value_parser!(u32).range(1..=65_536))]
        connections_max: u32,
        /// Seconds a connection may take to send a request's headers, from opening and after each answer (the
        /// keep-alive idle timeout); a request's body has 10 s, at 1,024 bytes a second after its first.
        #[arg(long, value_name = "S", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3_600))]
        header_timeout_s: u64,
    },
    /// Run the engine for real against a MAAS site: onboard or decommission nodes, read their status, or perform an
    /// operator recovery action. Every workflow is journaled (SQLite) and resumes where a killed `drive` left it.
    #[command(after_long_help = DRIVE_HELP)]
    Drive {
        #[command(subcommand)]
        action: DriveAction,
    },
}

/// `fleetsim drive`'s subcommands.
#[derive(Debug, Subcommand)]
pub(super) enum DriveAction {
    /// Onboard nodes (default: every node of the site file); a node the journal shows onboarded is not run again.
    Onboard(DriveNodes),
    /// Decommission nodes: drain, clean, release with erase, delete everywhere.
    Decommission(DriveNodes),
    /// Each node's workflows as the journal tells them.
    Status(DriveNodes),
    /// Operator action: retry the stage a workflow stopped at.
    RetryStage(DriveActionArgs),
    /// Operator action: resume a stopped workflow from its last checkpoint.
    Resume(DriveActionArgs),
    /// Operator action: run the workflow again from the top (status-aware adoption keeps what is done).
    Rerun(DriveActionArgs),
    /// Operator action: compensate, then run again from the top.
    RestartClean(DriveActionArgs),
    /// Operator action: stop the workflow for good.
    Cancel(DriveActionArgs),
    /// Operator action: accept what MAAS and the hub show now as the stage's checkpoint.
    AdoptObservedState(DriveActionArgs),
    /// Operator action: freeze the workflow until a person resolves it (`--resolves-freeze` lifts it).
    MarkManualInterventionRequired(DriveActionArgs),
}

#[derive(Debug, clap::Args)]
pub(super) struct DriveNodes {
    /// The site file (see docs/serve.md; `fleetsim serve --write-site DIR` writes one).
    #[arg(long, value_name = "FILE")]
    site: PathBuf,
    /// Comma-separated node names from the site file (default: all of them).
    #[arg(long, value_delimiter = ',')]
    nodes: Vec<String>,
}

#[derive(Debug, clap::Args)]
pub(super) struct DriveActionArgs {
    #[arg(long, value_name = "FILE")]
    site: PathBuf,
    /// The workflow the action is on.
    #[arg(long, value_parser = ["onboarding", "decommission"])]
    workflow: String,
    /// The node whose workflow it is.
    #[arg(long)]
    node: String,
    /// Who asks (recorded in the audit record).
    #[arg(long)]
    actor: String,
    /// The asker's role.
    #[arg(long, default_value = "operator", value_parser = ["operator", "sre", "automation"])]
    role: String,
    /// Why (recorded; never put a secret here: a reason carrying one is refused).
    #[arg(long)]
    reason: String,
    /// This request resolves the freeze a `mark-manual-intervention-required` set.
    #[arg(long)]
    resolves_freeze: bool,
}

/// `fleetsim report`'s own subcommands.
#[derive(Debug, Subcommand)]
pub(super) enum ReportAction {
    /// Merge the shard reports of one campaign into the report an unsharded execution writes.
    #[command(after_long_help = MERGE_HELP)]
    Merge {
        /// Shard reports written by `fleetsim campaign ... --shard K/N`, in any order.
        #[arg(required = true)]
        reports: Vec<PathBuf>,
        /// Where to write the merged report.json (atomically).
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: PathBuf,
    },
    /// Make a report-signing key: FILE (the signing key, mode 0600) and FILE.pub (the public key a gate trusts).
    #[command(after_long_help = KEYGEN_HELP)]
    Keygen {
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: PathBuf,
    },
    /// Sign a report.json with a signing key: writes REPORT.sig (or -o FILE) over exactly the report's bytes.
    #[command(after_long_help = KEYGEN_HELP)]
    Sign {
        /// A report.json (read fail-closed first: only a report that agrees with itself is signed).
        report: PathBuf,
        /// The signing key file (`fleetsim report keygen`; mode 0600, as ssh wants a private key).
        #[arg(long, value_name = "FILE")]
        key: PathBuf,
        /// Where to write the signature (default: the report's path with `.sig` added).
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: Option<PathBuf>,
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
        Command::Run { scenario, seed, out: dir, format, transport } => {
            run_scenario(&scenario, seed, dir.as_deref(), format, transport, out)
        }
        Command::Campaign { campaign, runs, seed, jobs, out: dir, run, shard, resume, format } => {
            run_campaign(&campaign, CampaignArgs { runs, seed, jobs, dir, run, shard, resume, format }, out, err)
        }
        Command::Check { files } => check(&files, out),
        Command::Report { action: Some(ReportAction::Merge { reports, output }), .. } => {
            merge_reports(&reports, &output, out)
        }
        Command::Report { action: Some(ReportAction::Keygen { output }), .. } => report::keygen(&output, out),
        Command::Report { action: Some(ReportAction::Sign { report: path, key, output }), .. } => {
            let output = output.unwrap_or_else(|| gate::signature_path(&path));
            report::sign_report(&path, &key, &output, out)
        }
        Command::Report { action: None, report, format, output } => match report {
            Some(report) => render_report(&report, format, output.as_deref(), out),
            None => {
                Err(SpecError { path: "report".into(), position: None, message: "give a report.json".into() }.into())
            }
        },
        Command::Diff { a, b } => diff(&a, &b, out),
        Command::Gate { report, policy, jobs, recheck, trusted_key, signature } => {
            let trusted = trusted_key.as_deref().map(|key| (key, signature.as_deref()));
            run_gate(&report, &policy, jobs_or_cores(jobs), recheck, trusted, out)
        }
        Command::Repro { report, run, out: dir, format } => repro(&report, run, dir, format, out),
        Command::Experiment { base, variant, runs, seed, jobs, allow_multi, out: dir, format } => run_experiment(
            &base,
            &variant,
            ExperimentArgs { runs, seed, jobs: jobs_or_cores(jobs), allow_multi, dir, format },
            out,
        ),
        Command::Shrink { report, run, output, max_runs } => {
            crate::run::shrink::shrink_command(&report, run, output.as_deref(), max_runs, out).map_err(CliError::from)
        }
        Command::Conformance { dir, out: dir_out } => {
            crate::run::conformance::command(&dir, dir_out.as_deref(), out).map_err(CliError::from)
        }
        Command::Serve {
            scenario,
            seed,
            machines,
            bind,
            port,
            speed,
            write_site,
            credentials,
            connections_max,
            header_timeout_s,
        } => {
            let limits = crate::live::listen::Limits {
                connections_max: connections_max as usize,
                header_read: std::time::Duration::from_secs(header_timeout_s),
                ..crate::live::listen::Limits::default()
            };
            serve(scenario.as_deref(), seed, machines, bind, port, speed, write_site, credentials, limits, out, err)
        }
        Command::Drive { action } => drive(action, out, err),
    };
    match result {
        Ok(code) => code,
        // An error names files and keys and echoes little of the input, but never a credential (engine::secret).
        Err(CliError::BadInput(error)) => {
            let _ = writeln!(err, "error: {}", engine::secret::redact(&error.to_string()));
            EXIT_BAD_INPUT
        }
        Err(CliError::Output { path, error }) => {
            let text = format!("cannot write {}: {error}", path.display());
            let _ = writeln!(err, "error: {}", engine::secret::redact(&text));
            EXIT_OUTPUT_ERROR
        }
    }
}

pub(super) enum CliError {
    BadInput(SpecError),
    Output { path: PathBuf, error: std::io::Error },
}

impl From<crate::run::shrink::CommandError> for CliError {
    fn from(error: crate::run::shrink::CommandError) -> Self {
        match error {
            crate::run::shrink::CommandError::BadInput(error) => CliError::BadInput(error),
            crate::run::shrink::CommandError::Output { path, error } => CliError::Output { path, error },
        }
    }
}

impl From<crate::run::conformance::CommandError> for CliError {
    fn from(error: crate::run::conformance::CommandError) -> Self {
        use crate::run::conformance::{CommandError, SuiteError};
        match error {
            CommandError::BadInput(SuiteError::Case(error)) => CliError::BadInput(error),
            CommandError::BadInput(SuiteError::Directory { dir, error }) => CliError::BadInput(SpecError {
                path: dir.display().to_string(),
                position: None,
                message: error.to_string(),
            }),
            CommandError::BadInput(SuiteError::Empty { dir }) => CliError::BadInput(SpecError {
                path: dir.display().to_string(),
                position: None,
                message: "no *.toml case in the directory".to_owned(),
            }),
            CommandError::BadInput(SuiteError::NoPairs { file }) => CliError::BadInput(SpecError {
                path: file.display().to_string(),
                position: None,
                message: "not a conformance case: [expect] matrix_pairs names no stage/failure_class pair".to_owned(),
            }),
            CommandError::BadInput(SuiteError::NoWork { file }) => CliError::BadInput(SpecError {
                path: file.display().to_string(),
                position: None,
                message: "a conformance case asserts its work: [expect] needs recovery_work (`[]` when none is due) and workflow_state".to_owned(),
            }),
            CommandError::Output { path, error } => CliError::Output { path, error },
        }
    }
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

pub(super) fn output_error(path: &Path) -> impl FnOnce(std::io::Error) -> CliError + '_ {
    move |error| CliError::Output { path: path.to_owned(), error }
}

/// `text` as it may be echoed to a terminal: control characters escaped (`\u{1b}`), so an input cannot move the
/// cursor or clear the screen.
pub(super) fn echo(text: &str) -> String {
    crate::model::spec::escape_controls(text)
}

/// Checks `--runs N`: 1 to [`reports::RUNS_MAX`], the bound a campaign file's `runs` has.
pub(super) fn check_runs(runs: u64) -> Result<u64, CliError> {
    let max = reports::RUNS_MAX;
    if runs == 0 || runs > max {
        let message = format!("must be 1 to {max} (the most runs a campaign may have), not {runs}");
        return Err(SpecError { path: "--runs".into(), position: None, message }.into());
    }
    Ok(runs)
}

pub(super) fn console(out: &mut dyn Write, text: &str) -> Result<(), CliError> {
    out.write_all(text.as_bytes()).map_err(output_error(Path::new("<stdout>")))
}
