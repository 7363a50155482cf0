//! Runs one resolved [`RunSpec`] with one seed on the chosen transport and turns what its observers saw into a
//! [`RunRecord`]. The runner owns observation: it builds the oracles and collectors ([`Observers`]), hands the world
//! its trace's sink, and judges when the world has ended. A panic anywhere inside the run becomes a failing record
//! with its seed.

use std::cell::RefCell;
use std::panic::AssertUnwindSafe;
use std::rc::Rc;

use reports::{Firing, PropertyKind, RunRecord};
use tokio::sync::Notify;

use crate::model::spec::RunSpec;
use crate::observe::collect::Collectors;
use crate::observe::observers::Observers;
use crate::world::EngineRules;
use crate::world::run::Ended;
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

/// Runs `spec` with `seed`. Never panics: a panic inside the run is the verdict `panic`.
pub fn run(spec: &RunSpec, seed: u64, identity: &RunIdentity, keep_trace: bool) -> RunOutput {
    run_with(spec, seed, identity, keep_trace, Transport::Fast, EngineRules::default(), |_| {})
}

/// [`run`] over the chosen transport.
pub fn run_on(spec: &RunSpec, seed: u64, identity: &RunIdentity, keep_trace: bool, transport: Transport) -> RunOutput {
    run_with(spec, seed, identity, keep_trace, transport, EngineRules::default(), |_| {})
}

/// [`run`] with the engine's decisions `rules` in place of production's: how a test measures whether the harness
/// catches a historical defect. Production never calls it.
pub fn run_with_rules(
    spec: &RunSpec,
    seed: u64,
    identity: &RunIdentity,
    keep_trace: bool,
    rules: EngineRules,
) -> RunOutput {
    run_with(spec, seed, identity, keep_trace, Transport::Fast, rules, |_| {})
}

/// [`run`] with the engine's decisions `rules`, and with `setup` called on the booted world before time starts
/// (tests use it to add host tasks).
pub(crate) fn run_with(
    spec: &RunSpec,
    seed: u64,
    identity: &RunIdentity,
    keep_trace: bool,
    transport: Transport,
    rules: EngineRules,
    setup: impl FnOnce(&Rc<World>) + 'static,
) -> RunOutput {
    let notify = Rc::new(Notify::new());
    crate::world::run::arm(notify.clone());
    let spec = Rc::new(spec.clone());
    let observers = Rc::new(RefCell::new(Observers::for_run(&spec)));
    let sink = Box::new(Budgeted { inner: observers.clone(), events: 0, budget: budget_of(&spec) });
    let result = std::panic::catch_unwind(AssertUnwindSafe(|| match transport {
        Transport::Fast => crate::world::run::simulate(spec.clone(), seed, keep_trace, sink, notify, rules, setup),
        Transport::Wire => crate::wire::world::simulate(spec.clone(), seed, keep_trace, sink, notify, rules, setup),
    }));
    let captured = crate::world::run::disarm();
    crate::observe::logging::RUN_START.with(|cell| *cell.borrow_mut() = None);
    let outcome = match result {
        Ok(mut ended) => {
            if ended.panic.is_none() {
                ended.panic = captured;
            }
            Outcome::observed(ended, &mut observers.borrow_mut())
        }
        Err(payload) => {
            let message = captured.unwrap_or_else(|| panic_text(payload.as_ref()));
            Outcome::unobserved(Ended::panicked(message))
        }
    };
    finish_record(&spec, seed, identity, outcome)
}

#[cfg(test)]
thread_local! {
    /// A test's budget in place of the spec's, to watch a run reach it.
    static TEST_BUDGET: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
}

fn budget_of(spec: &RunSpec) -> u64 {
    #[cfg(test)]
    if let Some(budget) = TEST_BUDGET.with(std::cell::Cell::get) {
        return budget;
    }
    crate::model::work::event_budget(spec)
}

/// The run's sink, held to the run's event budget (`crate::model::work::event_budget`): the event past it ends the
/// run (as any panic in a run does, at that instant of virtual time) with the verdict `panic` naming the budget, so
/// no input makes a run do unbounded work.
struct Budgeted {
    inner: Rc<RefCell<Observers>>,
    events: u64,
    budget: u64,
}

impl crate::observe::trace::Sink for Budgeted {
    fn on_event(&mut self, event: &crate::observe::trace::Event, line: &str) {
        self.events += 1;
        if self.events > self.budget {
            panic!(
                "the run passed its budget of {} events (docs/formats.md, \"Bounds on a run's work\"): an input that passes `fleetsim check` should not; this is a bug of the bounds, please report it with this file and seed",
                self.budget
            );
        }
        self.inner.on_event(event, line);
    }
}

/// What a run showed: how its world ended, and what its observers made of the events.
struct Outcome {
    ended: Ended,
    collectors: Collectors,
    /// `(oracle, property, findings kept, total count)`
    fired: Vec<(&'static str, PropertyKind, Vec<crate::observe::oracles::Finding>, u64)>,
}

impl Outcome {
    /// The world's end, judged: the oracles' eventually-properties see the end of the run, then every oracle's
    /// findings and the collectors' series are taken.
    fn observed(ended: Ended, observers: &mut Observers) -> Outcome {
        if ended.aborted {
            return Outcome::unobserved(ended);
        }
        observers.oracles.finish(ended.virtual_duration_ms);
        let fired = observers
            .oracles
            .fired()
            .map(|(info, findings, count)| (info.name, info.property, findings.to_vec(), count))
            .collect();
        Outcome { ended, collectors: std::mem::take(&mut observers.collectors), fired }
    }

    /// A run that ended before its world could say anything: nothing observed.
    fn unobserved(ended: Ended) -> Outcome {
        Outcome { ended, collectors: Collectors::default(), fired: Vec::new() }
    }
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
            .filter(|pair| !outcome.collectors.matrix_pairs.contains_key(*pair))
            .map(|pair| format!("matrix pair {pair}")),
    );

    unmet.extend(conformance_unmet(&spec.expect, &outcome.collectors));
    if let Some(expected) = &spec.expect.rollout {
        unmet.extend(rollout_unmet(expected, &outcome.collectors));
    }

    let verdict = reports::judge(outcome.ended.panic.is_some(), &violations, &unmet);
    let collectors = outcome.collectors;
    let ended = outcome.ended;
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
            trace_digest: ended.trace_digest,
            trace_events: ended.trace_events,
            virtual_duration_ms: ended.virtual_duration_ms,
            faults: ended.faults,
            matrix_pairs: collectors.matrix_pairs,
            fault_phases: collectors.fault_phases,
            fault_log: collectors.landings.finish(),
            availability,
            availability_cut_ms: collectors.availability_cut_ms,
            batches: collectors.telemetry.points,
            lanes: collectors.lanes,
            rollouts: collectors.rollouts,
            workflows: collectors.workflows,
            violations,
            violation_counts,
            reached,
            unmet,
            panic: ended.panic,
            repro: identity.repro.clone(),
        },
        trace: ended.trace,
    }
}

/// What a conformance case's `[expect]` asks of the run's typed events and the run did not show: the exact recovery
/// work, every workflow's end, the attempt bound, the section 6 timeouts, the section 7 conditions and the audit
/// records.
pub fn conformance_unmet(
    expect: &crate::model::spec::Expectations,
    seen: &crate::observe::collect::Collectors,
) -> Vec<String> {
    let mut unmet = Vec::new();
    // A case's end is its workflow's: the decommission's when it names decommission pairs, else onboarding's.
    let prefix = crate::model::pairs::DECOMMISSION_PAIR_PREFIX;
    let decommission = expect.matrix_pairs.iter().any(|pair| pair.starts_with(prefix));
    let ends: Vec<(&String, &(String, String))> =
        seen.ends.iter().filter(|(workflow, _)| workflow.starts_with(prefix) == decommission).collect();
    if let Some(expected) = &expect.recovery_work {
        let did: Vec<&String> = seen.recovery_work.keys().collect();
        if did.iter().map(|entry| entry.as_str()).ne(expected.iter().map(String::as_str)) {
            let did: Vec<&str> = did.iter().map(|entry| entry.as_str()).collect();
            unmet.push(format!("recovery work [{}], the run did [{}]", expected.join(", "), did.join(", ")));
        }
    }
    // Every workflow of the case's kind must end as expected; a run in which none ended meets nothing.
    let mut every_end = |expected: Option<&String>, what: &str, verb: &str, of: fn(&(String, String)) -> &String| {
        let Some(expected) = expected else { return };
        let wrong: Vec<String> = ends
            .iter()
            .filter(|(_, end)| of(end) != expected)
            .map(|(workflow, end)| format!("{workflow} {}", of(end)))
            .collect();
        if ends.is_empty() || !wrong.is_empty() {
            unmet.push(format!("{what} {expected}, the run {verb} [{}]", wrong.join(", ")));
        }
    };
    every_end(expect.workflow_state.as_ref(), "workflow state", "ended", |(workflow_state, _)| workflow_state);
    every_end(expect.node_state.as_ref(), "node state", "left", |(_, node_state)| node_state);
    if let Some(bound) = expect.attempts_max
        && seen.attempt_max > bound
    {
        unmet.push(format!("attempts at most {bound}, the run reached {}", seen.attempt_max));
    }
    for timeout in &expect.timeouts {
        if !seen.timeouts.contains_key(timeout) {
            unmet.push(format!("timeout {timeout}"));
        }
    }
    for condition in &expect.conditions {
        if !condition_shown(condition, seen) {
            unmet.push(format!("condition {condition}"));
        }
    }
    for action in &expect.audits {
        if !seen.audits.contains(action) {
            unmet.push(format!("audit record of {action}"));
        }
    }
    unmet
}

/// What `[expect.rollout]` states of the run's last rollout and its account did not show: the outcome, every
/// lane's verdict in plan order, the node counts by outcome, the named nodes' outcomes.
pub fn rollout_unmet(
    expected: &crate::model::spec::RolloutExpect,
    seen: &crate::observe::collect::Collectors,
) -> Vec<String> {
    let Some(account) = seen.rollouts.last() else {
        return vec!["a rollout account, and the run has none".to_owned()];
    };
    let name = &account.rollout;
    let mut unmet = Vec::new();
    if let Some(outcome) = &expected.outcome {
        let ended = account.outcome.split(':').next().unwrap_or_default();
        if ended != outcome {
            unmet.push(format!("{name} ended {outcome}, the run's ended {}", account.outcome));
        }
    }
    if let Some(lanes) = &expected.lanes {
        let mut spans: Vec<&reports::LaneSpan> = seen.lanes.iter().filter(|span| &span.rollout == name).collect();
        spans.sort_by_key(|span| span.lane);
        let verdicts: Vec<&str> = spans.iter().map(|span| span.verdict.as_deref().unwrap_or("uncommitted")).collect();
        if verdicts.iter().ne(lanes.iter()) {
            unmet.push(format!("{name} lanes [{}], the run's were [{}]", lanes.join(", "), verdicts.join(", ")));
        }
    }
    if !expected.nodes.is_empty() {
        let differs = reports::NODE_OUTCOMES
            .iter()
            .any(|outcome| expected.nodes.get(*outcome).copied().unwrap_or(0) != account.count(outcome));
        if differs {
            let show = |counts: &std::collections::BTreeMap<String, u64>| {
                counts
                    .iter()
                    .filter(|(_, count)| **count > 0)
                    .map(|(k, v)| format!("{k} {v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            unmet.push(format!(
                "{name} nodes {{{}}}, the run's were {{{}}}",
                show(&expected.nodes),
                show(&account.counts)
            ));
        }
    }
    for (node, outcome) in &expected.node {
        let found =
            account.nodes.iter().find(|record| &record.node == node).map_or("unaccounted", |r| r.outcome.as_str());
        if found != outcome {
            unmet.push(format!("{name} {node} {outcome}, the run's was {found}"));
        }
    }
    unmet
}

/// Whether the run's typed events show a section 7 condition, and the engine meeting it: the out-of-band change
/// was made to MAAS (a fault step injected) and the workflow adopted the observed state or
/// stopped it as an ambiguity; a late enrolment was adopted by an operator after the workflow had failed.
fn condition_shown(condition: &str, seen: &crate::observe::collect::Collectors) -> bool {
    let applied = |kinds: &[&str]| {
        seen.fault_phases.keys().any(|key| kinds.iter().any(|kind| key.split('/').next() == Some(*kind)))
    };
    let ambiguity = seen.matrix_pairs.keys().any(|pair| pair.ends_with("/state_ambiguity"));
    let completed = seen.ends.values().any(|(state, _)| state == "completed");
    match condition {
        "late_agent_enrollment" => {
            seen.matrix_pairs.contains_key("wait_for_agent_enrollment/agent_enrollment_failure")
                && seen.audits.contains("adopt_observed_state")
                && completed
        }
        "operator_changed_maas_state" => {
            applied(&["machine_advanced", "interface_disconnected", "machine_deleted"])
                && (seen.adopted > 0 || ambiguity || seen.recovery_work.keys().any(|work| work.ends_with("/performed")))
        }
        "machine_reappeared_with_different_state" => applied(&["machine_hidden"]) && (seen.adopted > 0 || ambiguity),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reports::{FailureKind, Verdict};

    #[test]
    fn the_reports_name_the_node_outcomes_as_the_engine_does() {
        // The reports crate depends on no workspace crate, so it spells the names itself; they must not drift.
        assert_eq!(reports::NODE_OUTCOMES, engine::ports::events::NodeOutcome::NAMES);
    }

    #[test]
    fn each_rollout_expectation_is_unmet_when_the_account_shows_otherwise() {
        use crate::model::spec::RolloutExpect;
        use crate::observe::collect::Collectors;
        let mut seen = Collectors::default();
        let node = |node: &str, outcome: &str| reports::NodeRecord {
            node: node.into(),
            outcome: outcome.into(),
            detail: String::new(),
            repair: String::new(),
            replay: String::new(),
            failed_endpoint: String::new(),
        };
        seen.rollouts.push(reports::RolloutAccount {
            rollout: "rollout-b".into(),
            outcome: "partial".into(),
            counts: [("upgraded".to_owned(), 1), ("quarantined".to_owned(), 1)].into_iter().collect(),
            nodes: vec![node("node-01", "upgraded"), node("node-02", "quarantined")],
        });
        let lane = |lane, verdict: Option<&str>| reports::LaneSpan {
            rollout: "rollout-b".into(),
            lane,
            nodes: 1,
            start_ms: 0,
            end_ms: 1,
            verdict: verdict.map(str::to_owned),
        };
        seen.lanes = vec![lane(1, None), lane(0, Some("successor"))];
        let met = RolloutExpect {
            outcome: Some("partial".into()),
            lanes: Some(vec!["successor".into(), "uncommitted".into()]),
            nodes: [("upgraded".to_owned(), 1), ("quarantined".to_owned(), 1)].into_iter().collect(),
            node: [("node-02".to_owned(), "quarantined".to_owned())].into_iter().collect(),
        };
        assert_eq!(rollout_unmet(&met, &seen), Vec::<String>::new());
        let broken = [
            (
                RolloutExpect { outcome: Some("successor".into()), ..met.clone() },
                "rollout-b ended successor, the run's ended partial",
            ),
            (
                RolloutExpect { lanes: Some(vec!["successor".into()]), ..met.clone() },
                "rollout-b lanes [successor], the run's were [successor, uncommitted]",
            ),
            (
                RolloutExpect { nodes: [("upgraded".to_owned(), 2)].into_iter().collect(), ..met.clone() },
                "rollout-b nodes {upgraded 2}, the run's were {quarantined 1, upgraded 1}",
            ),
            (
                RolloutExpect {
                    node: [("node-01".to_owned(), "held".to_owned())].into_iter().collect(),
                    ..met.clone()
                },
                "rollout-b node-01 held, the run's was upgraded",
            ),
        ];
        for (expect, unmet) in broken {
            assert_eq!(rollout_unmet(&expect, &seen), [unmet.to_owned()]);
        }
        assert_eq!(rollout_unmet(&met, &Collectors::default()), ["a rollout account, and the run has none".to_owned()]);
    }

    #[test]
    fn each_conformance_expectation_is_unmet_when_the_run_shows_otherwise() {
        use crate::model::spec::Expectations;
        use crate::observe::collect::Collectors;
        let mut seen = Collectors::default();
        seen.recovery_work.insert("ensure_pxe_interface_auto/unlink_relink_interface/performed".into(), 1);
        seen.timeouts.insert("discovery".into(), 1);
        seen.attempt_max = 2;
        seen.ends.insert("onboard-node-02".into(), ("completed".into(), "active".into()));
        seen.ends.insert(
            "decommission:decommission-node-02".into(),
            ("failed_manual_intervention".into(), "quarantined".into()),
        );
        seen.audits.insert("resume".into());
        let met = Expectations {
            recovery_work: Some(vec!["ensure_pxe_interface_auto/unlink_relink_interface/performed".into()]),
            workflow_state: Some("completed".into()),
            node_state: Some("active".into()),
            attempts_max: Some(2),
            timeouts: vec!["discovery".into()],
            audits: vec!["resume".into()],
            ..Expectations::default()
        };
        assert_eq!(conformance_unmet(&met, &seen), Vec::<String>::new());
        // Each one broken on its own is one unmet entry.
        let broken = [
            Expectations { recovery_work: Some(vec![]), ..met.clone() },
            Expectations { workflow_state: Some("failed_manual_intervention".into()), ..met.clone() },
            Expectations { node_state: Some("enrolling".into()), ..met.clone() },
            Expectations { attempts_max: Some(1), ..met.clone() },
            Expectations { timeouts: vec!["deploy".into()], ..met.clone() },
            Expectations { conditions: vec!["late_agent_enrollment".into()], ..met.clone() },
            Expectations { audits: vec!["cancel".into()], ..met.clone() },
        ];
        for expect in &broken {
            assert_eq!(conformance_unmet(expect, &seen).len(), 1, "{expect:?}");
        }
        // A decommission case is judged by the decommission's end, not the onboarding's.
        let decommission = Expectations {
            matrix_pairs: vec!["decommission:release_maas_node/state_ambiguity".into()],
            workflow_state: Some("failed_manual_intervention".into()),
            node_state: Some("quarantined".into()),
            ..Expectations::default()
        };
        assert_eq!(conformance_unmet(&decommission, &seen), Vec::<String>::new());
        // A run that did nothing meets only the attempt bound: a state expectation cannot be met by nothing.
        let nothing = Collectors::default();
        assert_eq!(conformance_unmet(&met, &nothing).len(), 5, "{:?}", conformance_unmet(&met, &nothing));
    }

    #[test]
    fn a_run_past_its_event_budget_ends_with_a_panic_naming_the_budget() {
        let whole = run(&spec(), 4, &identity(), false);
        assert!(whole.record.verdict.passed(), "{:?}", whole.record.verdict);
        let half = whole.record.trace_events / 2;
        TEST_BUDGET.with(|budget| budget.set(Some(half)));
        let cut = run(&spec(), 4, &identity(), false);
        TEST_BUDGET.with(|budget| budget.set(None));
        let message = cut.record.panic.as_deref().expect("a panic verdict");
        assert!(message.contains(&format!("the run passed its budget of {half} events")), "{message}");
        assert!(cut.record.trace_events < whole.record.trace_events, "stopped: {}", cut.record.trace_events);
        assert!(cut.record.virtual_duration_ms < whole.record.virtual_duration_ms);
    }

    fn spec() -> RunSpec {
        let text =
            "schema_version = 1\ndescription = \"d\"\nseed = 4\nduration_ms_max = 3_600_000\n[fleet]\nnodes = 3\n";
        crate::model::spec::parse_scenario("p.toml", text).unwrap().run
    }

    fn identity() -> RunIdentity {
        RunIdentity { source: "p.toml".into(), run_index: None, repro: "fleetsim run p.toml --seed 4".into() }
    }

    #[test]
    fn a_panic_in_a_host_task_fails_the_run_with_its_message_and_stops_it_at_once() {
        let output = run_with(&spec(), 4, &identity(), false, Transport::Fast, EngineRules::default(), |world| {
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
        let spec = crate::model::spec::parse_scenario("r.toml", text).unwrap().run;
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
        let scenario = crate::model::spec::load_scenario(&path).unwrap();
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
    fn the_same_seed_gives_the_same_digest_and_another_seed_another() {
        let a = run(&spec(), 4, &identity(), false).record;
        let b = run(&spec(), 4, &identity(), false).record;
        let c = run(&spec(), 5, &identity(), false).record;
        assert_eq!(a.trace_digest, b.trace_digest);
        assert_ne!(a.trace_digest, c.trace_digest);
    }
}
