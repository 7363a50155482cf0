//! Runs one resolved [`RunSpec`] with one seed on its own current-thread runtime with a paused clock, and turns what
//! the oracles saw into a [`RunRecord`]. A panic anywhere inside the run becomes a failing record with its seed.

use std::cell::RefCell;
use std::panic::AssertUnwindSafe;
use std::rc::Rc;
use std::sync::Once;

use reports::{FailureKind, Firing, PropertyKind, RunRecord, Verdict};
use tokio::sync::Notify;

use crate::spec::RunSpec;
use crate::world::{World, panic_text};

/// How a run is identified in its record and reproduced.
#[derive(Debug, Clone)]
pub struct RunIdentity {
    /// `scenarios/x.toml`, or `campaigns/y.toml` for a campaign run.
    pub source: String,
    pub run_index: Option<u64>,
    /// The command line that replays this run.
    pub repro: String,
}

/// A finished run: its record and, when asked for, its trace as JSON lines.
#[derive(Debug, Clone)]
pub struct RunOutput {
    pub record: RunRecord,
    pub trace: Vec<String>,
}

pub const TOOL_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The commit the binary was built from (`FLEETSIM_COMMIT` at build time), or `unknown`.
pub fn commit() -> &'static str {
    env!("FLEETSIM_COMMIT")
}

thread_local! {
    /// Set while a simulated run executes on this thread: its panics are captured, not printed.
    static IN_RUN: RefCell<Option<Rc<Notify>>> = const { RefCell::new(None) };
    pub(crate) static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
    /// Virtual-time origin of the run on this thread, for log timestamps.
    pub(crate) static RUN_START: RefCell<Option<tokio::time::Instant>> = const { RefCell::new(None) };
}

/// Installs (once per process) a panic hook that, inside a simulated run, records the message and location and
/// wakes the run so it ends at once; outside runs it defers to the previous hook.
fn install_panic_hook() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let notify = IN_RUN.with(|cell| cell.borrow().clone());
            match notify {
                Some(notify) => {
                    let location =
                        info.location().map(|l| format!(" at {}:{}", l.file(), l.line())).unwrap_or_default();
                    let message = format!("{}{location}", panic_text(info.payload()));
                    LAST_PANIC.with(|cell| {
                        cell.borrow_mut().get_or_insert(message);
                    });
                    notify.notify_one();
                }
                None => previous(info),
            }
        }));
    });
}

/// Runs `spec` with `seed`. Never panics: a panic inside the run is the verdict `panic`.
pub fn run(spec: &RunSpec, seed: u64, identity: &RunIdentity, keep_trace: bool) -> RunOutput {
    run_with(spec, seed, identity, keep_trace, Transport::Fast, |_| {})
}

/// [`run`] over the chosen transport.
pub fn run_on(spec: &RunSpec, seed: u64, identity: &RunIdentity, keep_trace: bool, transport: Transport) -> RunOutput {
    run_with(spec, seed, identity, keep_trace, transport, |_| {})
}

/// [`run`], with `setup` called on the booted world before time starts (tests use it to add host tasks).
pub(crate) fn run_with(
    spec: &RunSpec,
    seed: u64,
    identity: &RunIdentity,
    keep_trace: bool,
    transport: Transport,
    setup: impl FnOnce(&Rc<World>) + 'static,
) -> RunOutput {
    install_panic_hook();
    let notify = Rc::new(Notify::new());
    IN_RUN.with(|cell| *cell.borrow_mut() = Some(notify.clone()));
    LAST_PANIC.with(|cell| *cell.borrow_mut() = None);
    let spec = Rc::new(spec.clone());
    let result = std::panic::catch_unwind(AssertUnwindSafe(|| match transport {
        Transport::Fast => simulate(spec.clone(), seed, keep_trace, notify, setup),
        Transport::Wire => crate::wire::world::simulate(spec.clone(), seed, keep_trace, notify, setup),
    }));
    IN_RUN.with(|cell| *cell.borrow_mut() = None);
    RUN_START.with(|cell| *cell.borrow_mut() = None);
    let captured = LAST_PANIC.with(|cell| cell.borrow_mut().take());
    match result {
        Ok(mut outcome) => {
            if outcome.panic.is_none() {
                outcome.panic = captured;
            }
            finish_record(&spec, seed, identity, outcome)
        }
        Err(payload) => {
            let message = captured.unwrap_or_else(|| panic_text(payload.as_ref()));
            let outcome = Outcome::panicked(message);
            finish_record(&spec, seed, identity, outcome)
        }
    }
}

#[derive(Default)]
pub(crate) struct Outcome {
    virtual_duration_ms: u64,
    trace_digest: String,
    trace_events: u64,
    trace: Vec<String>,
    faults: std::collections::BTreeMap<String, u64>,
    matrix_pairs: std::collections::BTreeMap<String, u64>,
    collectors: crate::trace::Collectors,
    /// `(oracle, property, findings kept, total count)`
    fired: Vec<(&'static str, PropertyKind, Vec<crate::oracles::Finding>, u64)>,
    panic: Option<String>,
}

/// Which network the run's services talk over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Transport {
    /// The simulator's message model: the engine's ports are in-process adapters (the default, and the fastest).
    #[default]
    Fast,
    /// turmoil's simulated TCP and UDP: the MAAS site's services behind their HTTP and DNS front ends, reached by
    /// the engine's real adapters (see docs/wire-transport.md).
    Wire,
}

impl Transport {
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Fast => "fast",
            Transport::Wire => "wire",
        }
    }
}

impl Outcome {
    /// A run that ended in a panic before the world could say anything.
    pub(crate) fn panicked(message: String) -> Outcome {
        Outcome { panic: Some(message), ..Outcome::default() }
    }
}

fn simulate(
    spec: Rc<RunSpec>,
    seed: u64,
    keep_trace: bool,
    notify: Rc<Notify>,
    setup: impl FnOnce(&Rc<World>),
) -> Outcome {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime builds");
    let local = tokio::task::LocalSet::new();
    let outcome = local.block_on(&runtime, drive(spec, seed, keep_trace, notify, |_| {}, setup));
    drop(local);
    drop(runtime);
    outcome
}

/// Builds the world (`prepare` sees it before it boots), boots it, runs its fault plan until the spec's duration (or a panic), and collects what the oracles saw.
/// Runs on a paused current-thread runtime: the fast transport's own, or a turmoil host's.
pub(crate) async fn drive(
    spec: Rc<RunSpec>,
    seed: u64,
    keep_trace: bool,
    notify: Rc<Notify>,
    prepare: impl FnOnce(&Rc<World>),
    setup: impl FnOnce(&Rc<World>),
) -> Outcome {
    RUN_START.with(|cell| *cell.borrow_mut() = Some(tokio::time::Instant::now()));
    let world = World::new(spec.clone(), seed, keep_trace);
    prepare(&world);
    world.boot_all();
    setup(&world);
    let plan = tokio::task::spawn_local(world.clone().run_fault_plan());
    tokio::select! {
        biased;
        _ = notify.notified() => {}
        _ = world.sleep_until_ms(spec.duration_ms) => {}
    }
    plan.abort();
    let end_ms = world.now_ms();
    world.shutdown();
    let panic = world.panic_message();
    world.with_trace(|trace| {
        trace.oracles.finish(end_ms);
        Outcome {
            virtual_duration_ms: end_ms,
            trace_digest: trace.digest(),
            trace_events: trace.events(),
            trace: trace.take_lines(),
            faults: world.faults(),
            matrix_pairs: std::mem::take(&mut trace.matrix_pairs),
            collectors: std::mem::take(&mut trace.collectors),
            fired: trace
                .oracles
                .fired()
                .map(|(info, findings, count)| (info.name, info.property, findings.to_vec(), count))
                .collect(),
            panic,
        }
    })
}

fn finish_record(spec: &RunSpec, seed: u64, identity: &RunIdentity, outcome: Outcome) -> RunOutput {
    let expected = |name: &str| spec.expect.must_fire.iter().any(|fire| fire == name);
    let mut violations = Vec::new();
    let mut reached = Vec::new();
    let mut violation_counts = std::collections::BTreeMap::new();
    for (oracle, property, findings, count) in &outcome.fired {
        if *property != PropertyKind::Sometimes {
            violation_counts.insert((*oracle).to_owned(), *count);
        }
        for finding in findings {
            let firing = Firing {
                oracle: (*oracle).to_owned(),
                property: *property,
                t_ms: finding.t_ms,
                evidence: finding.evidence.clone(),
                expected: expected(oracle),
            };
            match property {
                PropertyKind::Sometimes => reached.push(firing),
                PropertyKind::Always | PropertyKind::Eventually => violations.push(firing),
            }
        }
    }
    violations.sort_by(|a, b| (a.t_ms, &a.oracle).cmp(&(b.t_ms, &b.oracle)));
    reached.sort_by(|a, b| (a.t_ms, &a.oracle).cmp(&(b.t_ms, &b.oracle)));
    let fired_names: Vec<&str> = outcome.fired.iter().map(|(name, ..)| *name).collect();
    let mut unmet: Vec<String> =
        spec.expect.must_fire.iter().filter(|name| !fired_names.contains(&name.as_str())).cloned().collect();
    unmet.extend(
        spec.expect
            .matrix_pairs
            .iter()
            .filter(|pair| !outcome.matrix_pairs.contains_key(*pair))
            .map(|pair| format!("matrix pair {pair}")),
    );

    let verdict = if outcome.panic.is_some() {
        Verdict::fail(FailureKind::Panic)
    } else if violations.iter().any(|v| !v.expected && v.property == PropertyKind::Always) {
        Verdict::fail(FailureKind::SafetyViolation)
    } else if violations.iter().any(|v| !v.expected && v.property == PropertyKind::Eventually) {
        Verdict::fail(FailureKind::LivenessFailure)
    } else if !unmet.is_empty() {
        Verdict::fail(FailureKind::ExpectationUnmet)
    } else {
        Verdict::PASS
    };
    let collectors = outcome.collectors;
    let mut fault_phases = std::collections::BTreeMap::new();
    for (step, phase) in &collectors.step_phases {
        if step.is_fault(&spec.network) {
            *fault_phases.entry(format!("{}/{phase}", step.kind())).or_insert(0) += 1;
        }
    }
    // A series that never changed says nothing a plot could show.
    let availability = if collectors.availability.len() > 1 { collectors.availability } else { Vec::new() };
    RunOutput {
        record: RunRecord {
            schema_version: reports::SCHEMA_VERSION,
            tool_version: TOOL_VERSION.to_owned(),
            commit: commit().to_owned(),
            config_hash: spec.config_hash(),
            config: spec.config_value(),
            source: identity.source.clone(),
            run_index: identity.run_index,
            seed,
            verdict,
            trace_digest: outcome.trace_digest,
            trace_events: outcome.trace_events,
            virtual_duration_ms: outcome.virtual_duration_ms,
            faults: outcome.faults,
            matrix_pairs: outcome.matrix_pairs,
            fault_phases,
            availability,
            availability_cut_ms: collectors.availability_cut_ms,
            lanes: collectors.lanes,
            workflows: collectors.workflows,
            violations,
            violation_counts,
            reached,
            unmet,
            panic: outcome.panic,
            repro: identity.repro.clone(),
        },
        trace: outcome.trace,
    }
}

/// The recovery matrix's listed (typical) `stage/failure_class` pairs of the onboarding workflow, in table order:
/// what a campaign report's `summary.matrix_listed` holds, so the report can show coverage without the engine.
pub fn matrix_listed_pairs() -> Vec<String> {
    workflow_listed_pairs(engine::matrix::Workflow::Onboarding)
}

/// The listed pairs of one workflow, in table order; a decommission pair is named `decommission:stage/class`
/// (the two workflows share the stage name `load_site_config`).
pub fn workflow_listed_pairs(workflow: engine::matrix::Workflow) -> Vec<String> {
    engine::matrix::Stage::all()
        .filter(|stage| stage.workflow() == workflow)
        .flat_map(|stage| {
            let prefix = match workflow {
                engine::matrix::Workflow::Onboarding => "",
                engine::matrix::Workflow::Decommission => crate::trace::DECOMMISSION_PAIR_PREFIX,
            };
            stage
                .row()
                .failure_classes
                .iter()
                .map(move |class| format!("{prefix}{}/{}", stage.as_str(), class.as_str()))
        })
        .collect()
}

/// The workflow whose listed pairs include `pair`, if any.
pub fn listed_pair_workflow(pair: &str) -> Option<engine::matrix::Workflow> {
    [engine::matrix::Workflow::Onboarding, engine::matrix::Workflow::Decommission]
        .into_iter()
        .find(|workflow| workflow_listed_pairs(*workflow).iter().any(|listed| listed == pair))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> RunSpec {
        let text =
            "schema_version = 1\ndescription = \"d\"\nseed = 4\nduration_ms_max = 3_600_000\n[fleet]\nnodes = 3\n";
        crate::spec::parse_scenario("p.toml", text).unwrap().run
    }

    fn identity() -> RunIdentity {
        RunIdentity { source: "p.toml".into(), run_index: None, repro: "fleetsim run p.toml --seed 4".into() }
    }

    #[test]
    fn a_panic_in_a_host_task_fails_the_run_with_its_message_and_stops_it_at_once() {
        let output = run_with(&spec(), 4, &identity(), false, Transport::Fast, |world| {
            let host = world.host_id("node-02");
            world.spawn_on(host, async {
                tokio::time::sleep(std::time::Duration::from_millis(90_000)).await;
                panic!("agent invariant broken");
            });
        });
        assert_eq!(output.record.verdict, Verdict::fail(FailureKind::Panic));
        let message = output.record.panic.as_deref().unwrap();
        assert!(message.starts_with("agent invariant broken at "), "{message}");
        assert_eq!(output.record.virtual_duration_ms, 90_000, "the run ends when the panic happens");
        assert_eq!(output.record.seed, 4);
        assert_eq!(output.record.repro, "fleetsim run p.toml --seed 4");
        // The thread is fine afterwards: the next run on it passes.
        assert!(run(&spec(), 4, &identity(), false).record.verdict.passed());
    }

    #[test]
    fn a_rollout_records_its_availability_its_lanes_and_the_phase_of_each_fault() {
        let text = r#"
schema_version = 1
description = "lanes of two, a floor of three, a partition before the rollout and an ssh timeout during it"
seed = 9
duration_ms_max = 1_800_000
[fleet]
nodes = 6
lane_size = 2
availability_floor = 3
[[step]]
at_ms = 10_000
kind = "partition"
a = "node-06"
b = "hub"
[[step]]
at_ms = 20_000
kind = "repair"
a = "node-06"
b = "hub"
[[step]]
at_ms = 60_000
kind = "start_rollout"
revision = "2944aebb"
[[step]]
at_ms = 60_001
kind = "ssh_timeout"
target = "node-05"
count = 1
"#;
        let spec = crate::spec::parse_scenario("r.toml", text).unwrap().run;
        let record = run(&spec, 9, &identity(), false).record;
        assert!(record.verdict.passed(), "{record:#?}");
        let availability: Vec<(u64, u64)> = record.availability.iter().map(|p| (p.t_ms, p.available)).collect();
        assert_eq!(availability.first(), Some(&(0, 6)), "{availability:?}");
        let lowest = availability.iter().map(|(_, available)| *available).min().unwrap();
        assert!((3..6).contains(&lowest), "the rollout took nodes down, never below the floor: {availability:?}");
        assert!(availability.windows(2).all(|pair| pair[0].0 <= pair[1].0 && pair[0].1 != pair[1].1));
        assert_eq!(availability.last().map(|(_, available)| *available), Some(6), "all back at the end");
        assert_eq!(record.availability_cut_ms, None);

        assert!(!record.lanes.is_empty());
        assert_eq!(record.lanes.iter().map(|lane| lane.nodes).sum::<u64>(), 6, "{:?}", record.lanes);
        for (index, lane) in (0u64..).zip(&record.lanes) {
            assert_eq!((lane.rollout.as_str(), lane.lane), ("rollout-2944aebb", index));
            assert_eq!(lane.verdict.as_deref(), Some("successor"));
            assert!(60_000 <= lane.start_ms && lane.start_ms < lane.end_ms, "{lane:?}");
            assert!(lane.nodes <= 2, "lanes of at most two: {lane:?}");
        }
        assert_eq!(
            record.fault_phases,
            std::collections::BTreeMap::from([
                ("partition/steady".to_owned(), 1),
                ("ssh_timeout/rollout".to_owned(), 1)
            ]),
            "repairs and the rollout itself are not faults"
        );
        assert!(record.workflows.is_empty());
    }

    #[test]
    fn an_onboarding_run_records_its_workflows() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../scenarios/onboarding-two-machines-deploy-and-enrol-their-agents.toml");
        let scenario = crate::spec::load_scenario(&path).unwrap();
        let record = run(&scenario.run, scenario.seed, &identity(), false).record;
        assert!(record.verdict.passed(), "{record:#?}");
        assert_eq!(record.workflows.len(), 2, "{:?}", record.workflows);
        for workflow in &record.workflows {
            assert_eq!(workflow.outcome, "completed");
            assert!(workflow.end_ms.is_some_and(|end| end > workflow.start_ms), "{workflow:?}");
        }
        assert!(record.lanes.is_empty() && record.fault_phases.is_empty());
    }

    #[test]
    fn the_listed_matrix_pairs_are_the_onboarding_table() {
        let pairs = matrix_listed_pairs();
        assert_eq!(pairs.len(), 39, "docs/recovery-matrix.md: 39 onboarding pairs");
        assert_eq!(pairs.first().map(String::as_str), Some("load_site_config/input_config_error"));
        assert!(pairs.contains(&"wait_for_agent_enrollment/state_ambiguity".to_owned()));
    }

    #[test]
    fn the_same_seed_gives_the_same_digest_and_another_seed_another() {
        let a = run(&spec(), 4, &identity(), false).record;
        let b = run(&spec(), 4, &identity(), false).record;
        let c = run(&spec(), 5, &identity(), false).record;
        assert_eq!(a.trace_digest, b.trace_digest);
        assert_ne!(a.trace_digest, c.trace_digest);
    }
}
