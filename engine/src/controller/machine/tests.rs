//! The controller's decisions, table by table, and a property test that plays the service against the machine
//! through random requests, run ends, busy polls and deaths: no workflow runs twice at once, admission never
//! exceeds the limit, nothing taken is lost across a boot, and every request is answered once the work drains.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::*;
use crate::controller::config::{
    CLOUD_SYNC_MS, INSTANCE_PASS_MS, InstanceSettings, RERUN_DELAY_MS, RUNS_PER_REQUEST_MAX, RolloutSettings,
    RotationSettings,
};
use crate::matrix::OnboardingStage;
use crate::ports::Endpoint;
use crate::recovery::{ActorRole, FreezeChange, Lifecycle};

fn config(machines: &[&str], concurrency: u32, bare_metal: bool) -> ControllerConfig {
    let site = SiteSettings {
        concurrency,
        bare_metal,
        ..SiteSettings::new(machines.iter().map(|machine| (*machine).to_owned()).collect())
    };
    ControllerConfig {
        site: Some(site),
        rollout: RolloutSettings {
            journal_name: "journal".into(),
            hub_url: "https://hub".into(),
            ..Default::default()
        },
        rotation: RotationSettings::default(),
        sensor: None,
        instances: Some(InstanceSettings::new("acme", "region", "type", "template")),
    }
}

fn boot(config: ControllerConfig, lines: &[String]) -> Controller {
    Controller::boot(config, "controller@boot-1".into(), lines)
}

/// The records the machine has to journal, in order (a machine that never stops handing them out fails at once).
fn lines(machine: &mut Controller) -> Vec<String> {
    let lines: Vec<String> = std::iter::from_fn(|| machine.poll_record()).take(RECORDS_MAX).collect();
    assert!(lines.len() < RECORDS_MAX, "the machine hands out records without end");
    lines
}

const RECORDS_MAX: usize = 10_000;

fn records(machine: &mut Controller) -> Vec<ControllerRecord> {
    lines(machine)
        .into_iter()
        .map(|line| ControllerRecord::decode(&line).expect("a controller line").expect("decodes"))
        .collect()
}

fn answered(records: &[ControllerRecord]) -> Vec<RequestId> {
    records
        .iter()
        .filter_map(|record| match record {
            ControllerRecord::Answered { request, .. } => Some(*request),
            ControllerRecord::Taken { .. } => None,
        })
        .collect()
}

fn onboard(machine: &str) -> Request {
    Request::Onboard { machine: machine.into(), instance: None }
}

fn decommission(machine: &str) -> Request {
    Request::Decommission { machine: machine.into() }
}

#[test]
fn a_retryable_stop_runs_again_after_the_delay_until_the_request_has_had_its_runs() {
    let settings = SiteSettings::new(Vec::new());
    let cases = [
        (1, WorkflowState::FailedRetryable, Some(RERUN_DELAY_MS)),
        (2, WorkflowState::FailedRetryable, Some(RERUN_DELAY_MS)),
        (RUNS_PER_REQUEST_MAX, WorkflowState::FailedRetryable, None),
        (1, WorkflowState::Completed, None),
        (1, WorkflowState::FailedManualIntervention, None),
        (1, WorkflowState::CompletedWithFollowUpRecord, None),
    ];
    for (run, state, expected) in cases {
        assert_eq!(rerun_after(&settings, run, state), expected, "run {run} ended {state:?}");
    }
    assert_eq!(RUNS_PER_REQUEST_MAX, crate::workflow::FAILED_RUNS_MAX_DEFAULT + 1, "one run past the escalation");
}

#[test]
fn admission_is_first_come_first_admitted_under_the_limit() {
    let mut machine = boot(config(&[], 2, false), &[]);
    let asked: Vec<(Ticket, bool)> = (0..4).map(|_| machine.admit()).collect();
    assert_eq!(asked, [(0, true), (1, true), (2, false), (3, false)]);
    assert_eq!(machine.release(), Some(2), "the oldest waiter takes the place");
    assert_eq!(machine.release(), Some(3));
    assert_eq!(machine.release(), None, "nobody waits: the place is free");
    assert_eq!(machine.admit(), (4, true));
    assert_eq!(machine.admit(), (5, false), "two held again");
}

#[test]
fn a_request_for_work_in_flight_joins_it_and_both_are_answered_when_it_ends() {
    let mut machine = boot(config(&[], 4, false), &[]);
    assert_eq!(machine.take_site_request(onboard("a"), String::new()), SiteWork::Onboard("a".into()));
    assert_eq!(machine.take_site_request(onboard("a"), String::new()), SiteWork::Joined);
    assert_eq!(machine.take_site_request(onboard("b"), String::new()), SiteWork::Onboard("b".into()));
    let taken = records(&mut machine);
    assert_eq!(taken.len(), 3, "every request is journaled as it is taken");
    machine.onboarding_ended("a");
    assert_eq!(answered(&records(&mut machine)), [1, 2], "both requests on a's run");
    assert_eq!(machine.pending().map(|(id, _)| id).collect::<Vec<_>>(), [3]);
    assert_eq!(machine.take_site_request(onboard("a"), String::new()), SiteWork::Onboard("a".into()), "a new run");
}

#[test]
fn a_decommission_waits_for_the_onboarding_and_a_recovery_run_for_both() {
    let mut machine = boot(config(&[], 4, false), &[]);
    machine.take_site_request(onboard("a"), String::new());
    assert_eq!(machine.take_site_request(decommission("a"), String::new()), SiteWork::Decommission("a".into()));
    assert!(machine.decommission_waits("a"), "the onboarding is in flight");
    assert!(!machine.recovery_decommission_may_start("b") || !machine.recovery_onboarding_may_start("a"));
    assert!(!machine.recovery_onboarding_may_start("a"), "a run of a's onboarding is in flight");
    machine.onboarding_ended("a");
    assert!(!machine.decommission_waits("a"));
    assert!(!machine.recovery_decommission_may_start("a"), "a's decommission is in flight");
    machine.decommission_ended("a");
    assert!(machine.recovery_decommission_may_start("a"));
    assert_eq!(machine.take_site_request(decommission("a"), String::new()), SiteWork::Joined, "the recovery's run");
}

#[test]
fn a_recovery_s_onboarding_run_holds_the_machine_and_answers_the_requests_that_joined_it() {
    let mut machine = boot(config(&[], 4, false), &[]);
    assert!(machine.recovery_onboarding_may_start("a"), "nothing runs a's onboarding");
    assert!(!machine.recovery_onboarding_may_start("a"), "the recovery's run is in flight");
    assert_eq!(machine.take_site_request(onboard("a"), String::new()), SiteWork::Joined, "joins the recovery's run");
    records(&mut machine);
    machine.recovery_onboarding_ended("a");
    assert_eq!(answered(&records(&mut machine)), [1], "the joined request is answered by the recovery's run");
    assert!(machine.recovery_onboarding_may_start("a"), "free again");
}

/// A journal of workflow lines: each machine's onboarding begun, completed, or its decommission begun.
fn site_lines(began: &[&str], completed: &[&str], retired: &[&str]) -> Vec<String> {
    use crate::decommission::record::DecommissionRecord;
    use crate::onboarding::record::OnboardRecord;
    let mut lines = Vec::new();
    for machine in began.iter().chain(completed) {
        let workflow = ids::onboarding_workflow_id(machine);
        lines.push(OnboardRecord::RunStarted { workflow: workflow.clone(), run: 1 }.encode());
    }
    for machine in completed {
        let workflow = ids::onboarding_workflow_id(machine);
        lines.push(OnboardRecord::Completed { workflow, run: 1, system_id: format!("sys-{machine}") }.encode());
    }
    for machine in retired {
        let workflow = ids::decommission_workflow_id(machine);
        lines.push(DecommissionRecord::RunStarted { workflow, run: 1 }.encode());
    }
    lines
}

#[test]
fn the_site_is_taken_up_from_the_journal_and_rests_once_every_machine_is_and_none_runs() {
    // (bare metal, began, completed, decommission begun) → machines started
    type Case =
        (bool, &'static [&'static str], &'static [&'static str], &'static [&'static str], &'static [&'static str]);
    let cases: [Case; 4] = [
        (false, &[], &[], &[], &["a", "b", "c"]),
        (false, &["a"], &["b"], &["c"], &["a"]),
        (true, &["a"], &["b"], &[], &["a"]),
        (true, &[], &[], &[], &[]),
    ];
    for (bare_metal, began, completed, retired, expected) in cases {
        let config = config(&["a", "b", "c"], 4, bare_metal);
        let mut machine = boot(config, &[]);
        let journal = machine.site_journal(&site_lines(began, completed, retired));
        let started = machine.site_begins(&journal);
        assert_eq!(started, expected, "bare metal {bare_metal}, began {began:?}, completed {completed:?}");
        let rested =
            std::iter::from_fn(|| machine.poll_event()).take(RECORDS_MAX).any(|event| event == Event::OnboardingRested);
        let all_taken_up = !bare_metal || began.len() + completed.len() == 3;
        assert_eq!(rested, all_taken_up && started.is_empty(), "rests when all taken up and none runs");
        for machine_name in expected {
            machine.onboarding_ended(machine_name);
        }
        let rested =
            std::iter::from_fn(|| machine.poll_event()).take(RECORDS_MAX).any(|event| event == Event::OnboardingRested);
        assert_eq!(rested, all_taken_up && !expected.is_empty(), "rests once, when the last run ends");
    }
}

#[test]
fn a_boot_takes_up_every_request_taken_and_not_answered_and_answers_those_the_journal_shows_done() {
    let config = config(&[], 4, false);
    let mut first = boot(config.clone(), &[]);
    first.take_site_request(onboard("a"), String::new());
    first.take_site_request(onboard("b"), String::new());
    first.take_site_request(decommission("c"), String::new());
    first.take_site_request(onboard("d"), String::new());
    first.onboarding_ended("d");
    let mut lines: Vec<String> = lines(&mut first);
    // The journal shows b's onboarding completed after its request was taken (the answer was never journaled).
    lines.extend(site_lines(&[], &["b"], &[]));
    let mut second = boot(config, &lines);
    let journal = second.site_journal(&lines);
    assert_eq!(second.pending().map(|(id, _)| id).collect::<Vec<_>>(), [1, 2, 3], "d's was answered");
    assert_eq!(second.site_begins(&journal), ["a"], "a runs again; b is done");
    assert_eq!(second.site_decommissions(&journal), ["c"]);
    assert_eq!(answered(&records(&mut second)), [2], "b's request is answered at once");
    second.onboarding_ended("a");
    second.decommission_ended("c");
    assert_eq!(answered(&records(&mut second)), [1, 3]);
    assert_eq!(second.pending().count(), 0);
    assert_eq!(second.take_site_request(onboard("e"), String::new()), SiteWork::Onboard("e".into()));
    let taken = records(&mut second);
    assert!(
        matches!(&taken[..], [ControllerRecord::Taken { request: 5, .. }]),
        "numbering goes on after the last taken: {taken:?}"
    );
}

#[test]
fn a_recovery_taken_and_not_answered_is_resumed_with_its_correlation_id() {
    let config = config(&[], 4, false);
    let mut first = boot(config.clone(), &[]);
    let order = RecoveryOrder {
        machine: "a".into(),
        workflow: crate::matrix::Workflow::Onboarding,
        action: RecoveryAction::Resume,
        actor: "alice".into(),
        role: ActorRole::Operator,
        reason: "checked".into(),
        resolves_freeze: false,
    };
    let work = first.take_site_request(Request::Recovery(order.clone()), "onboard-a/resume/7".into());
    assert_eq!(
        work,
        SiteWork::Recovery {
            request: 1,
            order: order.clone(),
            correlation_id: "onboard-a/resume/7".into(),
            resumed: false
        }
    );
    let lines: Vec<String> = lines(&mut first);
    let mut second = boot(config, &lines);
    assert_eq!(
        second.site_recoveries(),
        [SiteWork::Recovery { request: 1, order, correlation_id: "onboard-a/resume/7".into(), resumed: true }]
    );
    assert!(second.site_recoveries().is_empty(), "taken up once");
}

#[test]
fn a_newer_rollout_replaces_the_latest_and_a_boot_runs_the_latest_under_its_holder() {
    let order = |revision: &str| RolloutOrder {
        revision: revision.into(),
        generation: 2,
        route_digest: "sha256:r".into(),
        nodes: vec![Endpoint { node: "node-01".into(), host_key: "k1".into() }],
        hub_endpoint: Endpoint { node: "hub".into(), host_key: "kh".into() },
        capsules: vec!["sha256:c".into()],
    };
    let config = config(&[], 4, false);
    let mut first = boot(config.clone(), &[]);
    let request = first.take_rollout(order("r1"));
    assert_eq!(request.rollout, "rollout-r1");
    assert_eq!(request.controller, "controller@boot-1", "the lock's holder is this process");
    assert_eq!(request.resume_command, "deploy-mac-fleet.sh resume --rollout rollout-r1 --journal journal");
    assert_eq!(request.lane_size_max, 8, "the configuration's limits");
    first.take_rollout(order("r2"));
    let taken = records(&mut first);
    assert_eq!(answered(&taken), [1], "r1 is replaced");
    let mut ended = boot(config.clone(), &[]);
    ended.take_rollout(order("r3"));
    ended.rollout_ended();
    assert_eq!(answered(&records(&mut ended)), [1], "a rollout run to its end is answered");
    let lines: Vec<String> = taken.iter().map(ControllerRecord::encode).collect();
    let second = Controller::boot(config, "controller@boot-2".into(), &lines);
    let latest = second.latest_rollout().expect("the latest rollout");
    assert_eq!((latest.rollout.as_str(), latest.controller.as_str()), ("rollout-r2", "controller@boot-1"));
    let terminal = ["rollout {\"record\":\"terminal\",\"rollout\":\"rollout-r2\"}".to_owned()];
    assert!(Controller::rollout_finished(&terminal, "rollout-r2"));
    assert!(!Controller::rollout_finished(&terminal, "rollout-r1"));
}

#[test]
fn rotations_are_numbered_per_node_across_boots() {
    let order = |node: &str| RotationOrder { endpoint: Endpoint { node: node.into(), host_key: "k".into() } };
    let config = config(&[], 4, false);
    let mut first = boot(config.clone(), &[]);
    let ids: Vec<String> =
        ["node-01", "node-02", "node-01"].iter().map(|node| first.take_rotation(order(node)).rotation).collect();
    assert_eq!(ids, ["rotation-node-01-1", "rotation-node-02-1", "rotation-node-01-2"]);
    first.rotation_ended(0);
    let lines: Vec<String> = lines(&mut first);
    let ended: Vec<ControllerRecord> =
        lines.iter().map(|line| ControllerRecord::decode(line).expect("a controller line").expect("decodes")).collect();
    assert_eq!(answered(&ended), [1], "the first rotation, run to its end, is answered");
    let mut second = boot(config, &lines);
    assert_eq!(second.rotation(0).map(|request| request.rotation.as_str()), Some("rotation-node-01-1"));
    assert_eq!(second.rotation(3), None);
    assert_eq!(second.take_rotation(order("node-01")).rotation, "rotation-node-01-3");
}

#[test]
fn the_instance_passes_replenish_every_period_and_sync_hourly() {
    let mut machine = boot(config(&[], 4, false), &[]);
    machine.instances_begin(1_000);
    let cases = [
        (1_000, true, false),
        (31_000, false, false),
        (61_000, true, false),
        (91_000, false, false),
        (CLOUD_SYNC_MS + 1_000, true, true),
        (CLOUD_SYNC_MS + 2_000, false, false),
    ];
    for (now_ms, replenish, sync) in cases {
        assert_eq!((machine.replenish_due(now_ms), machine.sync_due(now_ms)), (replenish, sync), "at {now_ms}");
    }
    assert_eq!(machine.next_pass_ms(5_000), 5_000 + INSTANCE_PASS_MS);
    assert!(machine.stuck_seen("i-1", Stuck::Pending, 10));
    assert!(!machine.stuck_seen("i-1", Stuck::Pending, 10), "raised once");
    assert!(machine.stuck_seen("i-1", Stuck::Pending, 20), "a new clock start is a new row");
}

#[test]
fn instance_verbs_taken_and_not_answered_are_performed_again_except_a_page_s_answer() {
    let order = |verb| InstanceOrder {
        target: "i-1".into(),
        verb,
        reason: String::new(),
        actor: "ops".into(),
        force: false,
        operation_id: None,
    };
    let config = config(&[], 4, false);
    let mut first = boot(config.clone(), &[]);
    first.take_instance(order(InstanceVerb::Terminate));
    first.take_instance(order(InstanceVerb::Recover(Stuck::NeverReady)));
    let done = first.take_instance(order(InstanceVerb::Stop));
    first.answer(done);
    let lines: Vec<String> = lines(&mut first);
    let mut second = boot(config, &lines);
    assert_eq!(second.instances_adopted(), [(1, order(InstanceVerb::Terminate))]);
    assert_eq!(answered(&records(&mut second)), [2], "the next pass pages again");
}

#[test]
fn a_recovery_enters_a_decommission_at_its_stage_only_to_resume_retry_or_adopt() {
    let authorized = |action, restart_at| Authorized {
        action,
        next_state: Lifecycle::Workflow(WorkflowState::Running),
        node_state: None,
        restart_at,
        compensation: None,
        refresh_observed_state_first: false,
        freeze: FreezeChange::Unchanged,
    };
    let stage = Stage::Decommission(DecommissionStage::DrainNode);
    let cases = [
        (RecoveryAction::Resume, Some(stage), Some(DecommissionStage::DrainNode)),
        (RecoveryAction::RetryStage, Some(stage), Some(DecommissionStage::DrainNode)),
        (RecoveryAction::AdoptObservedState, Some(stage), Some(DecommissionStage::DrainNode)),
        (RecoveryAction::Rerun, Some(stage), None),
        (RecoveryAction::RestartClean, Some(stage), None),
        (RecoveryAction::Resume, Some(Stage::Onboarding(OnboardingStage::CommissionNode)), None),
        (RecoveryAction::Resume, None, None),
    ];
    for (action, restart_at, expected) in cases {
        assert_eq!(decommission_entry(Some(&authorized(action, restart_at))), expected, "{action:?} {restart_at:?}");
    }
    assert_eq!(decommission_entry(None), None, "a refusal runs nothing");
}

#[test]
fn controller_records_are_one_line_each_and_a_foreign_or_broken_one_is_told_apart() {
    let record = ControllerRecord::Taken {
        workflow: RECORD_SUBJECT.into(),
        request: 7,
        taken: Taken::Decommission { machine: "a".into() },
    };
    let line = record.encode();
    assert!(!line.contains('\n'));
    assert_eq!(crate::ports::record_subject(&line).as_deref(), Some(RECORD_SUBJECT), "indexed under its subject");
    assert_eq!(ControllerRecord::decode(&line), Some(Ok(record)));
    assert_eq!(ControllerRecord::decode("onboard {}"), None);
    assert!(matches!(ControllerRecord::decode("controller {\"record\":\"nope\"}"), Some(Err(_))));
}

// --- the property: the service played against the machine ---------------------------------------------------------

const MACHINES: [&str; 3] = ["a", "b", "c"];

#[derive(Debug, Clone)]
enum Op {
    Onboard(usize),
    Decommission(usize),
    /// The oldest running onboarding's run ends (retryably or for good).
    EndOnboardingRun(bool),
    /// The oldest decommission able to run ends.
    EndDecommission,
    /// The controller dies and boots again from its journal.
    Death,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..MACHINES.len()).prop_map(Op::Onboard),
        2 => (0..MACHINES.len()).prop_map(Op::Decommission),
        3 => any::<bool>().prop_map(Op::EndOnboardingRun),
        2 => Just(Op::EndDecommission),
        1 => Just(Op::Death),
    ]
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    Waiting(Ticket),
    Running { run: u32 },
}

/// The service as the property plays it: the tasks the machine's decisions start, and the journal.
struct Played {
    config: ControllerConfig,
    machine: Controller,
    journal: Vec<String>,
    onboardings: Vec<(String, Phase)>,
    decommissions: Vec<String>,
    submitted: BTreeSet<RequestId>,
}

impl Played {
    fn new(concurrency: u32) -> Played {
        let config = config(&[], concurrency, false);
        Played {
            machine: boot(config.clone(), &[]),
            config,
            journal: Vec::new(),
            onboardings: Vec::new(),
            decommissions: Vec::new(),
            submitted: BTreeSet::new(),
        }
    }

    fn journal_records(&mut self) {
        for line in lines(&mut self.machine) {
            if let Some(Ok(ControllerRecord::Taken { request, .. })) = ControllerRecord::decode(&line) {
                self.submitted.insert(request);
            }
            self.journal.push(line);
        }
    }

    fn start(&mut self, work: SiteWork) {
        match work {
            SiteWork::Onboard(machine) => {
                let (ticket, now) = self.machine.admit();
                let phase = if now { Phase::Running { run: 1 } } else { Phase::Waiting(ticket) };
                self.onboardings.push((machine, phase));
            }
            SiteWork::Decommission(machine) => self.decommissions.push(machine),
            SiteWork::Recovery { .. } | SiteWork::Joined => {}
        }
    }

    fn apply(&mut self, op: &Op) {
        match op {
            Op::Onboard(index) => {
                let work = self.machine.take_site_request(onboard(MACHINES[*index]), String::new());
                self.journal_records();
                self.start(work);
            }
            Op::Decommission(index) => {
                let work = self.machine.take_site_request(decommission(MACHINES[*index]), String::new());
                self.journal_records();
                self.start(work);
            }
            Op::EndOnboardingRun(retryable) => {
                let Some(index) = self.onboardings.iter().position(|(_, phase)| matches!(phase, Phase::Running { .. }))
                else {
                    return;
                };
                let Phase::Running { run } = self.onboardings[index].1 else { unreachable!() };
                let state = if *retryable { WorkflowState::FailedRetryable } else { WorkflowState::Completed };
                if rerun_after(self.config.site.as_ref().unwrap(), run, state).is_some() {
                    self.onboardings[index].1 = Phase::Running { run: run + 1 };
                    return;
                }
                let (machine, _) = self.onboardings.remove(index);
                self.machine.onboarding_ended(&machine);
                self.journal_records();
                if let Some(ticket) = self.machine.release() {
                    let waiter = self.onboardings.iter_mut().find(|(_, phase)| *phase == Phase::Waiting(ticket));
                    waiter.expect("the admitted ticket waits").1 = Phase::Running { run: 1 };
                }
            }
            Op::EndDecommission => {
                let ready = self.decommissions.iter().position(|machine| !self.machine.decommission_waits(machine));
                let Some(index) = ready else { return };
                let machine = self.decommissions.remove(index);
                self.machine.decommission_ended(&machine);
                self.journal_records();
            }
            Op::Death => {
                self.onboardings.clear();
                self.decommissions.clear();
                self.machine = boot(self.config.clone(), &self.journal);
                let journal = self.machine.site_journal(&self.journal);
                for machine in self.machine.site_begins(&journal) {
                    self.start(SiteWork::Onboard(machine));
                }
                for machine in self.machine.site_decommissions(&journal) {
                    self.start(SiteWork::Decommission(machine));
                }
                self.journal_records();
            }
        }
    }

    fn answered(&self) -> BTreeSet<RequestId> {
        self.journal
            .iter()
            .filter_map(|line| match ControllerRecord::decode(line) {
                Some(Ok(ControllerRecord::Answered { request, .. })) => Some(request),
                _ => None,
            })
            .collect()
    }

    fn check(&self, concurrency: u32) -> Result<(), TestCaseError> {
        let mut in_flight = BTreeMap::<&str, u32>::new();
        for (machine, _) in &self.onboardings {
            *in_flight.entry(machine).or_default() += 1;
        }
        prop_assert!(in_flight.values().all(|count| *count == 1), "an onboarding runs twice: {:?}", self.onboardings);
        let decommissions: BTreeSet<&String> = self.decommissions.iter().collect();
        prop_assert_eq!(decommissions.len(), self.decommissions.len(), "a decommission runs twice");
        let running = self.onboardings.iter().filter(|(_, phase)| matches!(phase, Phase::Running { .. })).count();
        prop_assert!(running as u32 <= concurrency, "{running} runs admitted under a limit of {concurrency}");
        // Nothing taken is lost: every request taken and not answered is pending in the machine as it stands.
        let answered = self.answered();
        let pending: BTreeSet<RequestId> = self.machine.pending().map(|(id, _)| id).collect();
        for request in self.submitted.difference(&answered) {
            prop_assert!(pending.contains(request), "request {request} is neither answered nor pending");
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn no_run_twice_nothing_lost_across_a_boot_and_every_request_answered(
        concurrency in 1u32..3,
        ops in proptest::collection::vec(op(), 1..60),
    ) {
        let mut played = Played::new(concurrency);
        for op in &ops {
            played.apply(op);
            played.check(concurrency)?;
        }
        // The work drains: every run ends for good, every decommission ends.
        for _ in 0..(ops.len() * 4 + 16) {
            played.apply(&Op::EndOnboardingRun(false));
            played.apply(&Op::EndDecommission);
            played.check(concurrency)?;
        }
        prop_assert!(played.onboardings.is_empty() && played.decommissions.is_empty(), "the work did not drain");
        let answered = played.answered();
        let unanswered: Vec<&RequestId> = played.submitted.difference(&answered).collect();
        prop_assert!(unanswered.is_empty(), "requests never answered: {:?}", unanswered);
    }
}

#[test]
fn the_site_journal_reads_each_machine_s_runs_completion_and_decommission() {
    use crate::decommission::record::DecommissionRecord;
    let refused = DecommissionRecord::Refused {
        workflow: ids::decommission_workflow_id("d"),
        stage: DecommissionStage::DisableNode,
        class: crate::matrix::FailureClass::StateAmbiguity,
        workflow_state: WorkflowState::FailedRetryable,
        references: Vec::new(),
    }
    .encode();
    let done = DecommissionRecord::Completed {
        workflow: ids::decommission_workflow_id("e"),
        run: 1,
        workflow_state: WorkflowState::Completed,
    }
    .encode();
    // g's only line is a work record: a history of no run.
    let work = crate::onboarding::record::OnboardRecord::Work {
        workflow: ids::onboarding_workflow_id("g"),
        run: 0,
        stage: OnboardingStage::LoadSiteConfig,
        work: crate::ports::events::RecoveryWork::Reseed,
        outcome: crate::ports::events::WorkOutcome::Performed,
    }
    .encode();
    let mut lines = site_lines(&["a"], &["b"], &["c", "e"]);
    lines.extend([refused, done, work]);
    let machines: Vec<String> = ["a", "b", "c", "d", "e", "f", "g"].iter().map(|m| (*m).to_owned()).collect();
    let journal = SiteJournal::read(&machines, &lines);
    let row = |machine: &str| {
        (journal.completed(machine), journal.decommission_began(machine), journal.decommission_ended(machine))
    };
    assert_eq!(row("a"), (false, false, false), "a began, nothing more");
    assert_eq!(row("b"), (true, false, false), "b completed");
    assert_eq!(row("c"), (false, true, false), "c's decommission began and is unfinished");
    assert_eq!(row("d"), (false, false, false), "a refused decommission is no run");
    assert_eq!(row("e"), (false, true, true), "e's decommission ran and completed");
    assert_eq!(row("f"), (false, false, false), "f is not in the journal");
    assert_eq!(row("g"), (false, false, false), "g's history has no run");
    let began: Vec<&str> = machines.iter().filter(|m| journal.began.contains(*m)).map(String::as_str).collect();
    assert_eq!(began, ["a", "b"]);
}

#[test]
fn a_journal_whose_onboarding_lines_do_not_decode_is_read_for_completions_as_text() {
    let mut lines = site_lines(&[], &["b"], &[]);
    lines.push("onboard {\"record\":\"no_such_record\",\"workflow\":\"onboard-a\"}".to_owned());
    let machines: Vec<String> = ["a", "b"].iter().map(|m| (*m).to_owned()).collect();
    let journal = SiteJournal::read(&machines, &lines);
    assert!(journal.completed("b"), "b's completion is found in the text");
    assert!(!journal.completed("a"));
    assert!(journal.began.is_empty(), "nothing is known to have begun when the histories do not decode");
    assert!(workflow_completed(&lines, "onboard-b"));
    assert!(!workflow_completed(&lines, "onboard-a"), "a record that is not a completion");
    assert!(!workflow_completed(
        &["decommission {\"record\":\"completed\",\"workflow\":\"onboard-b\"}".to_owned()],
        "onboard-b"
    ));
}

#[test]
fn a_booting_controller_counts_the_machines_taken_up_before_it_toward_the_rest() {
    // A bare-metal site of two machines: the first process took a's onboarding and ended it (its workflow left no
    // line: the run never began). The next counts a as taken up, so the site rests once b's run ends.
    let config = config(&["a", "b"], 4, true);
    let mut first = boot(config.clone(), &[]);
    assert_eq!(first.take_site_request(onboard("a"), String::new()), SiteWork::Onboard("a".into()));
    first.onboarding_ended("a");
    let lines: Vec<String> = lines(&mut first);
    let mut second = boot(config, &lines);
    let journal = second.site_journal(&[]);
    assert!(second.site_begins(&journal).is_empty(), "bare metal: nothing begun to take up");
    assert_eq!(second.take_site_request(onboard("b"), String::new()), SiteWork::Onboard("b".into()));
    second.onboarding_ended("b");
    let rested =
        std::iter::from_fn(|| second.poll_event()).take(RECORDS_MAX).any(|event| event == Event::OnboardingRested);
    assert!(rested, "a was taken up by the first process");
}
