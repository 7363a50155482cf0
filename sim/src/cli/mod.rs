//! The `fleetsim` command line: `run`, `campaign`, `check`, `report` (and `report merge`), `diff`, `gate`, `repro`
//! and `experiment`. [`main_with`] is the whole program, callable in-process by tests with any argument list and
//! output sinks.
//!
//! Exit codes (documented in `docs/ARCHITECTURE.md` and `README.md`): 0 everything passed, 1 a run or campaign
//! failed (for `diff`: the traces differ; for `gate`: a threshold is unmet; for `repro`: the replay's digest differs),
//! 2 bad input (usage, a missing, malformed or incompatible file), 3 an output could not be written. `report` renders
//! and does not judge: it exits 0 whatever verdict it renders; `experiment` measures and exits 0 when it ran.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand, ValueEnum};
use reports::RunRecord;
use reports::render::human_ms;

use crate::model::campaign::{self, Campaign};
use crate::model::spec::{self, SpecError};
use crate::run::runner::{self, RunIdentity, RunOutput};
use crate::{run::experiment, run::gate, run::shard};

use crate::model::exit::{EXIT_BAD_INPUT, EXIT_FAIL, EXIT_OUTPUT_ERROR, EXIT_PASS};

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

const REPORT_HELP: &str = "\
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

const MERGE_HELP: &str = "\
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

const CAMPAIGN_HELP: &str = "\
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

const GATE_HELP: &str = "\
The policy (TOML, see docs/formats.md and campaigns/release-gate.toml) sets thresholds: the
least runs, the pass rate, lane convergence among runs that started a rollout, the most
violations per oracle, the least injections per fault kind, the recovery-matrix pairs to hit,
how many runs to replay for a determinism re-check, and whether the report must come from
the checked-out commit. A threshold the policy does not set is not checked.

The gate also re-resolves the campaign file the report names (from the working directory,
with the report's seed and runs) and fails when its config hash or any run's seed or
configuration is not the report's, and fails on a shard report (merge the shards first).

Output: one line `gate PASS: ...` and exit 0, or `gate FAIL: ...` followed by every unmet
threshold, one a line, and exit 1. A missing, truncated, corrupt or other-schema report, a
bad policy or an unreadable campaign file is refused in one line with exit 2.

Examples:
  fleetsim campaign campaigns/ci-50.toml
  fleetsim gate target/fleetsim/ci-50/report.json --policy campaigns/release-gate.toml";

const REPRO_HELP: &str = "\
Replays run K of the campaign a report names (its file, read from the working directory,
with the report's seed and runs), writes DIR/run.json and DIR/trace.jsonl (default
target/fleetsim/<campaign>/repro-K), and compares the replay's trace digest with the
report's. Exit 0 when they are equal, whatever the run's verdict; 1 with both digests when
they differ (use `fleetsim diff` on two traces to see where); 2 when the report or its
campaign cannot be read, holds no run K, or the campaign file no longer resolves to the
report's config hash.

Example:
  fleetsim repro target/fleetsim/ci-50/report.json --run 17 --out /tmp/run17";

const EXPERIMENT_HELP: &str = "\
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

const SERVE_HELP: &str = "\
The services, on consecutive ports from --port (default 5240):
  MAAS     /MAAS/api/2.0/ with OAuth 1.0 PLAINTEXT (the printed API key)
  Redfish  /redfish/v1/Systems/{machine} with HTTP Basic (each BMC's login is in the secrets store)
  secrets  /v1/... with X-Vault-Token (the printed token)
  hub      /v1/hub/... and the inventory /v1/inventory/...
  DNS      the rack resolver, over UDP
  admin    /admin/state (machines, statuses, transition counts) and POST /admin/faults

Faults while it runs, e.g.:
  curl -X POST localhost:5245/admin/faults -d '{\"fault\":\"maas_503\",\"count\":3}' -H 'content-type: application/json'
See docs/serve.md for every fault, and for curl, dig, python-libmaas and sushy against it.

Examples:
  fleetsim serve
  fleetsim serve --speed 60 --write-site /tmp/site     # then: fleetsim drive onboard --site /tmp/site/site.toml
  fleetsim serve --scenario scenarios/maas-commissioning-2026-07-20.toml --port 0";

const DRIVE_HELP: &str = "\
The site file names the MAAS region, the secrets store, the hub and inventory, the rack resolver,
the SSH command, the journal and the audit log, and the nodes (docs/serve.md). Credential files
must be mode 0600: a file others can read is refused.

Every workflow is journaled in SQLite (default fleetsim-journal.sqlite beside the site file).
Kill `drive` at any point and run the same command again: completed workflows are not run
twice, unfinished ones resume with status-aware adoption, and no machine is commissioned or
deployed twice. Operator actions are audited (journal and audit log) before they act.

Exit codes: 0 every workflow completed (or the action was accepted), 1 one did not, 2 bad input.

Examples:
  fleetsim drive onboard --site site.toml --nodes gpu-01,gpu-02
  fleetsim drive status --site site.toml
  fleetsim drive resume --site site.toml --workflow onboarding --node gpu-01 --actor alice --reason 'MAC re-registered'
  fleetsim drive decommission --site site.toml --nodes gpu-02";

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
        /// Worker threads for the determinism re-check (default: the number of cores).
        #[arg(long)]
        jobs: Option<usize>,
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
        /// The MAAS port; Redfish, secrets, hub, DNS (UDP) and admin take the five after it. 0: ephemeral ports.
        #[arg(long, default_value_t = 5240)]
        port: u16,
        /// Virtual time runs this many times faster than the wall clock (MAAS's minutes become seconds at 60).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10_000))]
        speed: u32,
        /// Write DIR/site.toml and its credential files (mode 0600) for `fleetsim drive`.
        #[arg(long, value_name = "DIR")]
        write_site: Option<PathBuf>,
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
enum DriveAction {
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
struct DriveNodes {
    /// The site file (see docs/serve.md; `fleetsim serve --write-site DIR` writes one).
    #[arg(long, value_name = "FILE")]
    site: PathBuf,
    /// Comma-separated node names from the site file (default: all of them).
    #[arg(long, value_delimiter = ',')]
    nodes: Vec<String>,
}

#[derive(Debug, clap::Args)]
struct DriveActionArgs {
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
enum ReportAction {
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
        Command::Report { action: None, report, format, output } => match report {
            Some(report) => render_report(&report, format, output.as_deref(), out),
            None => {
                Err(SpecError { path: "report".into(), position: None, message: "give a report.json".into() }.into())
            }
        },
        Command::Diff { a, b } => diff(&a, &b, out),
        Command::Gate { report, policy, jobs } => run_gate(&report, &policy, jobs_or_cores(jobs), out),
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
        Command::Serve { scenario, seed, machines, bind, port, speed, write_site } => {
            serve(scenario.as_deref(), seed, machines, bind, port, speed, write_site, out, err)
        }
        Command::Drive { action } => drive(action, out, err),
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

fn output_error(path: &Path) -> impl FnOnce(std::io::Error) -> CliError + '_ {
    move |error| CliError::Output { path: path.to_owned(), error }
}

fn console(out: &mut dyn Write, text: &str) -> Result<(), CliError> {
    out.write_all(text.as_bytes()).map_err(output_error(Path::new("<stdout>")))
}

#[expect(clippy::too_many_arguments, reason = "one argument per `fleetsim serve` flag")]
fn serve(
    scenario: Option<&Path>,
    seed: Option<u64>,
    machines: u32,
    bind: std::net::IpAddr,
    port: u16,
    speed: u32,
    write_site: Option<PathBuf>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<i32, CliError> {
    let (names, scenario_seed) = match scenario {
        Some(path) => {
            let scenario = spec::load_scenario(path)?;
            let Some(onboarding) = &scenario.run.onboarding else {
                return Err(CliError::BadInput(SpecError {
                    path: path.display().to_string(),
                    position: None,
                    message: "onboarding: the scenario has no [onboarding] table, so no MAAS site to serve".into(),
                }));
            };
            (onboarding.machines.clone(), Some(scenario.seed))
        }
        None => (crate::live::serve::machine_names(machines), None),
    };
    let config = crate::live::serve::ServeConfig {
        seed: seed.or(scenario_seed).unwrap_or(1),
        machines: names,
        bind,
        port,
        speed,
        write_site,
    };
    Ok(crate::live::serve::command(&config, out, err))
}

fn drive(action: DriveAction, out: &mut dyn Write, err: &mut dyn Write) -> Result<i32, CliError> {
    use crate::live::drive::DriveCommand;
    let parse_action = |args: DriveActionArgs, action: engine::matrix::RecoveryAction| {
        let workflow = match args.workflow.as_str() {
            "decommission" => engine::matrix::Workflow::Decommission,
            _ => engine::matrix::Workflow::Onboarding,
        };
        let role = engine::recovery::ActorRole::ALL
            .into_iter()
            .find(|role| role.as_str() == args.role)
            .unwrap_or(engine::recovery::ActorRole::Operator);
        let command = DriveCommand::Action {
            action,
            workflow,
            node: args.node,
            actor: args.actor,
            role,
            reason: args.reason,
            resolves_freeze: args.resolves_freeze,
        };
        (args.site, command)
    };
    use engine::matrix::RecoveryAction as A;
    let (site, command) = match action {
        DriveAction::Onboard(args) => (args.site, DriveCommand::Onboard { nodes: args.nodes }),
        DriveAction::Decommission(args) => (args.site, DriveCommand::Decommission { nodes: args.nodes }),
        DriveAction::Status(args) => (args.site, DriveCommand::Status { nodes: args.nodes }),
        DriveAction::RetryStage(args) => parse_action(args, A::RetryStage),
        DriveAction::Resume(args) => parse_action(args, A::Resume),
        DriveAction::Rerun(args) => parse_action(args, A::Rerun),
        DriveAction::RestartClean(args) => parse_action(args, A::RestartClean),
        DriveAction::Cancel(args) => parse_action(args, A::Cancel),
        DriveAction::AdoptObservedState(args) => parse_action(args, A::AdoptObservedState),
        DriveAction::MarkManualInterventionRequired(args) => parse_action(args, A::MarkManualInterventionRequired),
    };
    let site = crate::live::drive::load_site(&site)?;
    Ok(crate::live::drive::command(&site, command, out, err))
}

fn run_scenario(
    path: &Path,
    seed: Option<u64>,
    dir: Option<&Path>,
    format: Format,
    transport: runner::Transport,
    out: &mut dyn Write,
) -> Result<i32, CliError> {
    let scenario = spec::load_scenario(path)?;
    let seed = seed.unwrap_or(scenario.seed);
    let transport_arg = match transport {
        runner::Transport::Fast => String::new(),
        runner::Transport::Wire => format!(" --transport {}", transport.as_str()),
    };
    let identity = RunIdentity {
        source: path.display().to_string(),
        run_index: None,
        repro: format!("fleetsim run {} --seed {seed}{transport_arg}", path.display()),
    };
    let output = runner::run_on(&scenario.run, seed, &identity, dir.is_some(), transport);
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
    shard: Option<String>,
    resume: bool,
    format: Format,
}

fn jobs_or_cores(jobs: Option<usize>) -> usize {
    jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from)).max(1)
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
                    "  resumed       {resumed} runs read from {}, {} run now\n",
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
        // A gate policy has `kind = "gate_policy"`, a campaign a top-level `runs` key; look at the text when it does
        // not parse, so the error comes from the right parser.
        let header = || text.lines().take_while(|line| !line.trim_start().starts_with('['));
        let (is_policy, is_campaign) = match toml::from_str::<toml::Table>(&text) {
            Ok(table) => {
                (table.get("kind").and_then(toml::Value::as_str) == Some(gate::POLICY_KIND), table.contains_key("runs"))
            }
            Err(_) => (
                header().any(|line| assigns(line, "kind") == Some(&format!("\"{}\"", gate::POLICY_KIND))),
                header().any(|line| assigns(line, "runs").is_some()),
            ),
        };
        if is_policy {
            let policy = gate::parse_policy(&name, &text)?;
            console(out, &format!("ok  {name}: gate policy, {}\n", policy.description))?;
        } else if is_campaign {
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

/// The value a `key = value` line assigns, trimmed, if the line assigns `key`.
fn assigns<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.trim_start().strip_prefix(key).and_then(|rest| rest.trim_start().strip_prefix('=')).map(str::trim)
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

fn merge_reports(paths: &[PathBuf], output: &Path, out: &mut dyn Write) -> Result<i32, CliError> {
    let mut inputs = Vec::with_capacity(paths.len());
    for path in paths {
        inputs.push((path.display().to_string(), reports::read::read_report(path)?));
    }
    let merged = reports::merge(&inputs, crate::model::digest::sha256_hex).map_err(|error| SpecError {
        path: "report merge".into(),
        position: None,
        message: error.to_string(),
    })?;
    if let Some(parent) = output.parent().filter(|parent| !parent.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(output_error(parent))?;
    }
    reports::write_json_atomic(output, &merged).map_err(output_error(output))?;
    console(
        out,
        &format!(
            "merged {} shard reports of {} ({} runs, {} passed) into {}: campaign digest {}\n",
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

/// The campaign a report names, resolved as it was run: the report's seed and its campaign's number of runs. Also
/// says whether the seed is not the file's (a replay's reproduce line then carries `--seed`).
fn campaign_of_report(report_path: &Path, report: &reports::CampaignReport) -> Result<(Campaign, bool), CliError> {
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
fn git_head() -> Result<String, String> {
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

fn run_gate(report_path: &Path, policy_path: &Path, jobs: usize, out: &mut dyn Write) -> Result<i32, CliError> {
    let policy = gate::load_policy(policy_path)?;
    let report = reports::read::read_report(report_path)?;
    let (campaign, seed_overridden) = campaign_of_report(report_path, &report)?;
    let mut evidence = gate::Evidence { campaign_config_hash: campaign.config_hash(), ..gate::Evidence::default() };
    if evidence.campaign_config_hash == report.config_hash {
        evidence.run_mismatches = gate::run_mismatches(&report, &campaign);
        if policy.recheck_runs > 0 && evidence.run_mismatches.is_empty() {
            let sample = gate::recheck_sample(&report, policy.recheck_runs);
            let replays = crate::run::campaign::execute(&campaign, &sample, jobs, seed_overridden, false, &|_| {});
            evidence.rechecks = replays
                .into_iter()
                .filter_map(|replay| {
                    let reported = report.runs.iter().find(|run| run.run_index == replay.record.run_index)?;
                    Some(gate::Recheck {
                        run_index: replay.record.run_index.unwrap_or(0),
                        seed: replay.record.seed,
                        reported: reported.trace_digest.clone(),
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

fn repro(
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

struct ExperimentArgs {
    runs: Option<u64>,
    seed: Option<u64>,
    jobs: usize,
    allow_multi: bool,
    dir: Option<PathBuf>,
    format: Format,
}

fn run_experiment(
    base_path: &Path,
    variant_path: &Path,
    args: ExperimentArgs,
    out: &mut dyn Write,
) -> Result<i32, CliError> {
    let mut base = campaign::load_campaign(base_path)?;
    let mut variant = campaign::load_campaign(variant_path)?;
    let files = [(base.seed, base.runs), (variant.seed, variant.runs)];
    let runs = args.runs.unwrap_or(base.runs);
    if runs == 0 {
        return Err(SpecError { path: "--runs".into(), position: None, message: "must be at least 1".into() }.into());
    }
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
    let base_runs: Vec<RunRecord> = crate::run::campaign::execute(&base, &indices, args.jobs, false, false, &|_| {})
        .into_iter()
        .map(|o| o.record)
        .collect();
    let variant_runs: Vec<RunRecord> =
        crate::run::campaign::execute(&variant, &indices, args.jobs, false, false, &|_| {})
            .into_iter()
            .map(|o| o.record)
            .collect();
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
