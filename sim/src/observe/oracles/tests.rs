//! The oracles' unit tests: each oracle fed the events of a story, and what it finds.

use std::rc::Rc;

use super::heartbeat::*;
use super::rollout::*;
use super::site::*;
use super::*;
use crate::model::faults::Step;
use fakes::worker::Drift;

fn ctx() -> OracleContext {
    OracleContext {
        controller: "controller".into(),
        hub: "hub".into(),
        agent_ttl_ms: 3_600_000,
        sweep_interval_ms: 60_000,
        call_timeout_ms: 10_000,
        latency_max_ms: 20,
        nodes: 4,
        lane_size: 2,
        availability_floor: 2,
        workflows: Vec::new(),
        decommissions: Vec::new(),
        site_policy: engine::workflow::SitePolicy::default(),
    }
}

fn ev(t_ms: u64, host: &str, body: Body) -> Event {
    Event { t_ms, host: Rc::from(host), body }
}

fn stage(workflow: &str, stage: &str, attempt: u64) -> Body {
    Body::Onboarding { workflow: workflow.into(), event: OnboardingBody::StageStarted { stage: stage.into(), attempt } }
}

fn request(op: &str, system_id: Option<&str>, status: Option<u16>) -> Body {
    Body::SiteRequest {
        workflow: "onboard-node-02".into(),
        op: op.into(),
        system_id: system_id.map(str::to_owned),
        status,
    }
}

/// An event of node-02's onboarding workflow.
fn on(event: OnboardingBody) -> Body {
    Body::Onboarding { workflow: "onboard-node-02".into(), event }
}

fn failed(stage: &str, class: &str) -> Body {
    on(OnboardingBody::StageFailed { stage: stage.into(), class: class.into(), error: "e".into() })
}

fn retrying(stage: &str) -> Body {
    on(OnboardingBody::Retrying { stage: stage.into(), attempt: 2, delay_ms: 1 })
}

#[test]
fn onboarding_decisions_are_judged_against_the_stage_row() {
    let stopped = |stage: &str, class: &str, workflow_state: &str| {
        on(OnboardingBody::Stopped {
            stage: stage.into(),
            class: class.into(),
            workflow_state: workflow_state.into(),
            node_state: "enrolling".into(),
            evidence: vec![],
        })
    };
    let events = [
        // Legal: a transient retried; configure_storage's hardware mismatch stopped for a person.
        ev(1, "controller", failed("commission_node", "upstream_transient")),
        ev(2, "controller", retrying("commission_node")),
        ev(3, "controller", failed("configure_storage", "hardware_mismatch")),
        ev(4, "controller", stopped("configure_storage", "hardware_mismatch", "failed_manual_intervention")),
        // Illegal: a hardware mismatch retried where only the PXE-interface stage may.
        ev(5, "controller", failed("configure_storage", "hardware_mismatch")),
        ev(6, "controller", retrying("configure_storage")),
        // Illegal: load_site_config's row does not list `completed` as a failure's state.
        ev(7, "controller", failed("load_site_config", "input_config_error")),
        ev(8, "controller", stopped("load_site_config", "input_config_error", "completed")),
        // Legal fallback, then an illegal one (classify's failure must fall back to the deploy failure).
        ev(9, "controller", failed("classify_deploy_failure", "upstream_transient")),
        ev(10, "controller", failed("wait_for_deployed", "deploy_cloud_init_failure")),
        ev(11, "controller", retrying("wait_for_deployed")),
        ev(12, "controller", failed("classify_deploy_failure", "upstream_transient")),
        ev(13, "controller", retrying("wait_for_deployed")),
        // Still pending when the run ends.
        ev(14, "controller", failed("wait_for_ready", "upstream_transient")),
    ];
    let findings = run(&mut FollowsTheMatrix::new(engine::matrix::Workflow::Onboarding, &ctx()), &events, 20);
    assert_eq!(findings.iter().map(|f| f.t_ms).collect::<Vec<_>>(), [6, 8, 13, 20], "{findings:#?}");
    assert!(findings[0].evidence.contains("does not retry"), "{}", findings[0].evidence);
}

#[test]
fn an_operator_s_cancel_or_restart_clean_may_compensate_the_resting_stage_before_any_stage_runs() {
    use engine::matrix::{OnboardingStage, RecoveryAction, Stage, WorkflowState};
    use engine::recovery::{ActorRole, AuditOutcome, AuditRecord, FreezeChange, Lifecycle};
    let w = "onboard-node-02";
    let audit = |action: RecoveryAction| Body::Audit {
        record: AuditRecord {
            actor_id: "alice".into(),
            actor_role: ActorRole::Operator,
            workflow_id: w.into(),
            run_id: 1,
            prior_state: Lifecycle::Workflow(WorkflowState::FailedManualIntervention),
            prior_stage: Stage::Onboarding(OnboardingStage::DeployViaMaas),
            requested_action: action,
            reason: "ticket".into(),
            expected_next_state: Lifecycle::Workflow(WorkflowState::Running),
            correlation_id: "c".into(),
            outcome: AuditOutcome::Accepted { freeze: FreezeChange::Unchanged },
            actual_next_state: None,
        },
    };
    let work = |stage: &str, work: &str| Body::Onboarding {
        workflow: w.into(),
        event: OnboardingBody::RecoveryWork {
            stage: stage.into(),
            work: work.into(),
            outcome: "performed".into(),
            detail: String::new(),
        },
    };
    let compensation = "release_to_ready_if_deploy_started";
    let events = [
        // Legal: restart_clean's compensation of the resting stage, then its rerun.
        ev(1, "controller", audit(RecoveryAction::RestartClean)),
        ev(2, "controller", work("deploy_via_maas", compensation)),
        ev(3, "controller", stage(w, "load_site_config", 1)),
        // Illegal: the rerun is under way and nothing failed.
        ev(4, "controller", work("deploy_via_maas", compensation)),
        // Illegal: a rerun compensates nothing; nor does restart_clean another stage's compensation.
        ev(5, "controller", audit(RecoveryAction::Rerun)),
        ev(6, "controller", work("deploy_via_maas", compensation)),
        ev(7, "controller", audit(RecoveryAction::RestartClean)),
        ev(8, "controller", work("wait_for_deployed", "release_to_ready")),
        // Legal: a cancel's.
        ev(9, "controller", audit(RecoveryAction::Cancel)),
        ev(10, "controller", work("deploy_via_maas", compensation)),
    ];
    let findings = run(&mut FollowsTheMatrix::new(engine::matrix::Workflow::Onboarding, &ctx()), &events, 20);
    assert_eq!(findings.iter().map(|f| f.t_ms).collect::<Vec<_>>(), [4, 6, 8], "{findings:#?}");
    assert!(findings[0].evidence.contains("no cancel or restart_clean"), "{}", findings[0].evidence);
}

#[test]
fn a_decommission_s_destructive_call_needs_a_read_in_its_own_stage_attempt() {
    let w = "decommission-node-02";
    let started = |t_ms, stage: &str| {
        let event = OnboardingBody::StageStarted { stage: stage.into(), attempt: 1 };
        ev(t_ms, "controller", Body::Decommission { workflow: w.into(), event })
    };
    let request = |t_ms, op: &str| {
        let body =
            Body::SiteRequest { workflow: w.into(), op: op.into(), system_id: Some("abc".into()), status: Some(200) };
        ev(t_ms, "controller", body)
    };
    let events = [
        started(1, "load_site_config"),
        request(2, "read"),
        // A read of an earlier stage does not cover the release.
        started(3, "release_maas_node"),
        request(4, "release"),
        started(5, "power_off_maas_node"),
        request(6, "query_power_state"),
        request(7, "power_off"),
        started(8, "remove_maas_record"),
        request(9, "delete"),
    ];
    let unread = run(&mut NoDestructiveCallWithoutFreshRead::default(), &events, 10);
    assert_eq!(unread.iter().map(|f| f.t_ms).collect::<Vec<_>>(), [4, 9], "{unread:#?}");
    assert!(unread[0].evidence.contains("release_maas_node"), "{}", unread[0].evidence);
}

#[test]
fn site_oracles_judge_reads_doubles_transitions_and_resting_states() {
    use fakes::maas::NodeStatus;
    let w = "onboard-node-02";
    let events = [
        ev(1, "controller", stage(w, "commission_node", 1)),
        ev(2, "controller", request("commission", Some("abc"), Some(200))),
        ev(3, "controller", stage(w, "commission_node", 2)),
        ev(4, "controller", request("read", Some("abc"), Some(200))),
        ev(5, "controller", request("commission", Some("abc"), Some(200))),
        ev(6, "controller", request("commission", Some("abc"), Some(200))),
    ];
    let unread = run(&mut NoDestructiveCallWithoutFreshRead::default(), &events, 10);
    assert_eq!(unread.len(), 1, "{unread:?}");
    assert_eq!(unread[0].t_ms, 2);
    let doubles = run(&mut NoDoubleCommissionOrDeploy::default(), &events, 10);
    assert_eq!(doubles.iter().map(|f| f.t_ms).collect::<Vec<_>>(), [6]);
    let status = |from: Option<NodeStatus>, to| Body::SiteStatus { system_id: "abc".into(), from, to };
    let writes = [
        ev(1, "maas", status(None, NodeStatus::New)),
        ev(2, "maas", status(Some(NodeStatus::New), NodeStatus::Commissioning)),
        ev(3, "maas", status(Some(NodeStatus::New), NodeStatus::Deployed)),
    ];
    let illegal = run(&mut MaasTransitionsLegal, &writes, 10);
    assert_eq!(illegal.iter().map(|f| f.t_ms).collect::<Vec<_>>(), [3]);
    let ctx = OracleContext { workflows: vec![w.into(), "onboard-node-03".into()], ..ctx() };
    let stopped = Body::Onboarding {
        workflow: w.into(),
        event: OnboardingBody::Stopped {
            stage: "wait_for_ready".into(),
            class: "state_ambiguity".into(),
            workflow_state: "failed_manual_intervention".into(),
            node_state: "enrolling".into(),
            evidence: vec![Evidence::UnknownMachine {
                system_id: "x".into(),
                mac: "52:54:00:00:00:09".into(),
                bmc_address: "10.10.1.9".into(),
            }],
        },
    };
    let rests = run(&mut EveryNodeOnboardedOrDiagnosed::new(&ctx), &[ev(1, "controller", stopped)], 10);
    assert_eq!(rests.len(), 1, "the workflow that never started: {rests:?}");
    assert!(rests[0].evidence.contains("onboard-node-03 is not started"));
}

#[test]
fn a_mutation_resent_after_a_controller_death_in_the_same_stage_attempt_is_a_duplicate() {
    let deploy = || request("deploy", Some("m-1"), Some(200));
    let died = |t| ev(t, "controller", Body::HostCrash { lost_unsynced_writes: 0 });
    // The dead controller's deploy, then its restarted controller's rerun that deploys again in the same stage.
    let resent = [
        ev(1, "sim", stage("onboard-node-02", "deploy_via_maas", 1)),
        ev(2, "controller", deploy()),
        died(3),
        ev(4, "sim", stage("onboard-node-02", "commission_node", 1)),
        ev(5, "sim", stage("onboard-node-02", "deploy_via_maas", 1)),
        ev(6, "controller", deploy()),
    ];
    let findings = run(&mut NoDuplicateMutation::default(), &resent, 10);
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert!(findings[0].evidence.contains("second deploy in one attempt of stage deploy_via_maas"));
    // Twice in one attempt without a death is a duplicate too.
    let twice =
        [ev(1, "sim", stage("onboard-node-02", "deploy_via_maas", 1)), ev(2, "c", deploy()), ev(3, "c", deploy())];
    assert_eq!(run(&mut NoDuplicateMutation::default(), &twice, 10).len(), 1);
    // A retry is a new attempt; a refused deploy is no mutation; a death before the mutation carries nothing.
    let fine = [
        ev(1, "sim", stage("onboard-node-02", "deploy_via_maas", 1)),
        ev(2, "controller", request("deploy", Some("m-1"), Some(409))),
        ev(3, "controller", deploy()),
        ev(4, "sim", stage("onboard-node-02", "deploy_via_maas", 2)),
        ev(5, "controller", deploy()),
        ev(6, "sim", stage("onboard-node-02", "wait_for_deployed", 1)),
        died(7),
        ev(8, "sim", stage("onboard-node-02", "deploy_via_maas", 1)),
        ev(9, "controller", deploy()),
    ];
    assert!(run(&mut NoDuplicateMutation::default(), &fine, 10).is_empty());
}

fn run(oracle: &mut dyn Oracle, events: &[Event], end_ms: u64) -> Vec<Finding> {
    let mut out = Vec::new();
    for event in events {
        oracle.on_event(event, &serde_json::to_string(event).unwrap(), &mut out);
    }
    oracle.on_finish(end_ms, &mut out);
    out
}

fn rollout(t: u64, event: RolloutBody) -> Event {
    ev(t, "controller", Body::Rollout { rollout: "r".into(), event })
}

fn journal(t: u64, record: &str, route: Option<&str>) -> Event {
    let body =
        Body::JournalAppended { record: record.into(), operation_id: None, route_digest: route.map(str::to_owned) };
    ev(t, "controller", body)
}

#[test]
fn only_a_deployment_hold_may_be_released() {
    let released = |owner: &str| ev(5, "hub", Body::HubHoldReleased { agent: "n1".into(), owner: owner.into() });
    assert!(run(&mut OnlyIntendedHoldsReleased, &[released("deploy:r")], 10).is_empty());
    for owner in ["operator:maintenance", "quarantine:r", "successor:r"] {
        assert_eq!(run(&mut OnlyIntendedHoldsReleased, &[released(owner)], 10).len(), 1, "{owner}");
    }
}

#[test]
fn a_receipt_or_installer_naming_another_route_is_caught() {
    let installer = |target: &str| {
        let body = Body::WorkerMutated {
            op: "run_installer".into(),
            operation_id: "r/n1/install".into(),
            target: target.into(),
        };
        ev(3, "node-01", body)
    };
    let good = [
        journal(1, "plan_frozen", Some("sha256:routes-1")),
        journal(2, "intents", Some("sha256:routes-1")),
        installer("2944aebb@5 routes sha256:routes-1"),
    ];
    assert!(run(&mut ReceiptsNameFrozenRoute::default(), &good, 10).is_empty());
    let swapped =
        [journal(1, "plan_frozen", Some("sha256:routes-1")), journal(2, "completed", Some("sha256:routes-2"))];
    assert_eq!(run(&mut ReceiptsNameFrozenRoute::default(), &swapped, 10).len(), 1);
    let unnamed = [journal(1, "plan_frozen", Some("sha256:routes-1")), journal(2, "lane_committed", None)];
    assert_eq!(run(&mut ReceiptsNameFrozenRoute::default(), &unnamed, 10).len(), 1);
    let installer_off = [journal(1, "plan_frozen", Some("sha256:routes-1")), installer("2944aebb@5")];
    assert_eq!(run(&mut ReceiptsNameFrozenRoute::default(), &installer_off, 10).len(), 1);
}

#[test]
fn rollout_time_is_judged_against_the_plan_minus_downtime_and_waits() {
    let frozen = |t| {
        rollout(t, RolloutBody::PlanFrozen { revision: "x".into(), lanes: 2, lane_size: 8, rollout_bound_ms: 1_000 })
    };
    let terminal = |t| rollout(t, RolloutBody::Terminal { outcome: TerminalOutcome::Successor });
    assert!(run(&mut RolloutTimeBounded::default(), &[frozen(0), terminal(1_000)], 2_000).is_empty());
    assert_eq!(run(&mut RolloutTimeBounded::default(), &[frozen(0), terminal(1_001)], 2_000).len(), 1);
    // Ten seconds of controller downtime and a credential outage do not count against the plan.
    let excused = [
        frozen(0),
        ev(100, "controller", Body::HostCrash { lost_unsynced_writes: 0 }),
        ev(10_100, "controller", Body::HostBoot { boot: 2 }),
        ev(10_200, "hub", Body::HubCredentialRejected { principal: "controller".into(), expired: true }),
        rollout(15_200, RolloutBody::Reauthenticated { expires_at_ms: 0 }),
        terminal(15_900),
    ];
    assert!(run(&mut RolloutTimeBounded::default(), &excused, 20_000).is_empty());
}

fn hb(t: u64) -> Event {
    ev(t, "hub", Body::HubHeartbeat { agent: "n1".into(), generation: 1 })
}

fn silent(t: u64) -> Event {
    ev(t, "controller", Body::InstanceSilent { instance: "n1".into(), silent_for_ms: 0 })
}

#[test]
fn a_silence_raised_over_a_fresh_heartbeat_is_unjustified() {
    let mut oracle = SilenceJustified::new(&ctx());
    assert!(run(&mut oracle, &[hb(0), silent(200_000)], 0).is_empty(), "silent for 200 s: justified");
    let mut oracle = SilenceJustified::new(&ctx());
    let found = run(&mut oracle, &[hb(0), hb(100_000), silent(200_000)], 0);
    assert_eq!(found.len(), 1);
    assert!(found[0].evidence.contains("t=100000"), "{found:?}");
    let mut oracle = SilenceJustified::new(&ctx());
    assert!(run(&mut oracle, &[hb(0), hb(195_000), silent(200_000)], 0).is_empty(), "landed after the read");
}

#[test]
fn silence_must_be_detected_within_four_minutes_while_the_observer_is_healthy() {
    let registered = ev(0, "hub", Body::HubRegistered { agent: "n1".into(), durable: false });
    let mut oracle = SilenceDetectedInTime::new(&ctx());
    assert!(run(&mut oracle, &[registered.clone(), hb(10_000), silent(249_000)], 600_000).is_empty());
    let mut oracle = SilenceDetectedInTime::new(&ctx());
    let late = run(&mut oracle, &[registered.clone(), hb(10_000), silent(251_000)], 600_000);
    assert_eq!(late.len(), 1, "{late:?}");
    assert_eq!(late[0].t_ms, 10_000 + 240_000 + 41);
    // While the hub is down the clock does not run; it restarts when the hub boots.
    let mut oracle = SilenceDetectedInTime::new(&ctx());
    let events = [
        registered,
        hb(10_000),
        ev(20_000, "hub", Body::HostCrash { lost_unsynced_writes: 0 }),
        ev(400_000, "hub", Body::HostBoot { boot: 2 }),
        silent(600_000),
    ];
    assert!(run(&mut oracle, &events, 700_000).is_empty());
}

/// Heartbeats move the silence deadline later without requeueing it each time (`queued`): the deadline an agent
/// misses is its last heartbeat's, judged once, at that time, however many heartbeats came before; two agents are
/// judged in deadline order; a registration starts the agent afresh (its earlier deadline is not judged).
#[test]
fn a_moving_silence_deadline_is_judged_once_at_the_last_heartbeat() {
    let registered = |t, agent: &str| ev(t, "hub", Body::HubRegistered { agent: agent.into(), durable: false });
    let beat = |t, agent: &str| ev(t, "hub", Body::HubHeartbeat { agent: agent.into(), generation: 1 });
    let mut events = vec![registered(0, "n1"), registered(0, "n2")];
    for t in (30_000..=1_800_000).step_by(30_000) {
        events.push(beat(t, "n1"));
        if t <= 900_000 {
            events.push(beat(t + 1, "n2"));
        }
    }
    let mut oracle = SilenceDetectedInTime::new(&ctx());
    let found = run(&mut oracle, &events, 3_000_000);
    let times: Vec<u64> = found.iter().map(|f| f.t_ms).collect();
    assert_eq!(times, [900_001 + 240_041, 1_800_000 + 240_041], "{found:?}");
    assert!(found[0].evidence.starts_with("n2: last heartbeat at t=900001 ms"), "{found:?}");

    // n1 falls silent at 100 s, registers again at 300 s (before its deadline, 340 s) and beats on: nothing is due.
    let mut oracle = SilenceDetectedInTime::new(&ctx());
    let mut events = vec![registered(0, "n1"), beat(100_000, "n1"), registered(300_000, "n1")];
    events.extend((330_000..=1_200_000).step_by(30_000).map(|t| beat(t, "n1")));
    assert!(run(&mut oracle, &events, 1_250_000).is_empty());
}

#[test]
fn a_recovery_must_follow_heartbeats_within_a_sensor_period() {
    let registered = ev(0, "hub", Body::HubRegistered { agent: "n1".into(), durable: false });
    let recovered = |t| ev(t, "controller", Body::InstanceRecovered { instance: "n1".into(), silent_for_ms: 0 });
    let mut oracle = SilenceDetectedInTime::new(&ctx());
    let events = [registered.clone(), silent(200_000), hb(300_000), recovered(350_000)];
    assert!(run(&mut oracle, &events, 1_000_000).iter().all(|f| !f.evidence.contains("instance_recovered")));
    let mut oracle = SilenceDetectedInTime::new(&ctx());
    let events = [registered, silent(200_000), hb(300_000), hb(330_000), hb(360_000), hb(390_000)];
    let found = run(&mut oracle, &events, 400_000);
    assert!(found.iter().any(|f| f.evidence.contains("no instance_recovered")), "{found:?}");
}

#[test]
fn tombstoning_an_open_epoch_member_is_a_violation_but_not_after_the_epoch_closes() {
    let opened = ev(0, "hub", Body::HubEpochOpened { epoch: 1, members: vec!["n1".into()] });
    let tomb = |t| ev(t, "hub", Body::HubTombstoned { agent: "n1".into(), silent_ms: 1 });
    let mut oracle = EpochMemberNeverTombstoned::default();
    assert_eq!(run(&mut oracle, &[opened.clone(), tomb(5)], 0).len(), 1);
    let mut oracle = EpochMemberNeverTombstoned::default();
    let closed = ev(3, "hub", Body::HubEpochClosed { epoch: 1 });
    assert!(run(&mut oracle, &[opened, closed, tomb(5)], 0).is_empty());
}

fn rollout_event(t_ms: u64, event: RolloutBody) -> Event {
    ev(t_ms, "controller", Body::Rollout { rollout: "rollout-r".into(), event })
}

#[test]
fn a_touched_pinned_identity_still_tombstoned_when_its_rollout_ends_is_a_violation() {
    let frozen =
        rollout_event(0, RolloutBody::PlanFrozen { revision: "r".into(), lanes: 1, lane_size: 2, rollout_bound_ms: 1 });
    let opened = ev(1, "hub", Body::HubEpochOpened { epoch: 1, members: vec!["n1".into(), "n2".into()] });
    let started = |node: &str| {
        rollout_event(
            2,
            RolloutBody::StepStarted {
                node: node.into(),
                step: engine::ports::events::RolloutStep::Node(engine::ports::events::NodeStep::Hold),
                lane: 0,
            },
        )
    };
    let tomb = |agent: &str| ev(3, "hub", Body::HubTombstoned { agent: agent.into(), silent_ms: 3_700_000 });
    let adopted = rollout_event(4, RolloutBody::Adopted { revision: "r".into(), in_doubt: 0 });
    let resurrected = ev(5, "hub", Body::HubResurrected { agent: "n1".into(), epoch: 1 });
    let ended = |outcome| rollout_event(6, RolloutBody::Terminal { outcome });
    let story = |extra: Vec<Event>| {
        let mut events = vec![frozen.clone(), opened.clone(), started("n1"), tomb("n1"), adopted.clone()];
        events.extend(extra);
        run(&mut PinnedIdentityPresent::default(), &events, 0)
    };
    let found = story(vec![ended(TerminalOutcome::Partial)]);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].evidence.contains("n1, pinned by epoch 1 of rollout-r"), "{found:?}");
    assert_eq!(story(vec![ended(TerminalOutcome::Successor)]).len(), 1);
    assert!(story(vec![resurrected.clone(), ended(TerminalOutcome::Successor)]).is_empty(), "restored under its epoch");
    let failed = ended(TerminalOutcome::Failed(engine::ports::events::RolloutFailure::EpochNotOpened));
    assert!(story(vec![failed]).is_empty(), "a failed rollout leaves its journal to the next adopter");
    // A member the rollout never touched is not a required row (abort is monotonic for untouched participants).
    assert!(story(vec![resurrected, tomb("n2"), ended(TerminalOutcome::Partial)]).is_empty());
    // An epoch opened while no rollout ran pins nothing of a rollout's.
    let events = [opened.clone(), frozen.clone(), started("n1"), tomb("n1"), ended(TerminalOutcome::Partial)];
    assert!(run(&mut PinnedIdentityPresent::default(), &events, 0).is_empty());
}

#[test]
fn a_resurrection_must_restore_a_tombstoned_member_of_the_open_epoch_it_names() {
    let opened = ev(0, "hub", Body::HubEpochOpened { epoch: 1, members: vec!["n1".into()] });
    let tomb = |agent: &str| ev(1, "hub", Body::HubTombstoned { agent: agent.into(), silent_ms: 3_700_000 });
    let revoked = ev(1, "hub", Body::HubPrincipalRevoked { agent: "n1".into() });
    let closed = ev(2, "hub", Body::HubEpochClosed { epoch: 1 });
    let resurrect = |agent: &str, epoch| ev(3, "hub", Body::HubResurrected { agent: agent.into(), epoch });
    let judge = |events: &[Event]| run(&mut ResurrectionJournalBound::default(), events, 0);
    assert!(judge(&[opened.clone(), tomb("n1"), resurrect("n1", 1)]).is_empty());
    let cases = [
        (vec![opened.clone(), resurrect("n1", 1)], "not tombstoned"),
        (vec![opened.clone(), tomb("n1"), resurrect("n1", 1), resurrect("n1", 1)], "not tombstoned"),
        (vec![opened.clone(), tomb("n1"), closed, resurrect("n1", 1)], "not open"),
        (vec![opened.clone(), tomb("n2"), resurrect("n2", 1)], "does not list it"),
        (vec![opened, revoked, resurrect("n1", 1)], "revoked"),
    ];
    for (events, defect) in cases {
        let found = judge(&events);
        assert_eq!(found.len(), 1, "{defect}: {found:?}");
        assert!(found[0].evidence.contains(defect), "{defect}: {found:?}");
    }
}

#[test]
fn tombstoning_a_worker_a_running_rollout_stopped_is_a_violation_even_outside_the_epoch() {
    let empty_epoch = ev(0, "hub", Body::HubEpochOpened { epoch: 1, members: Vec::new() });
    let service = |t, op: &str| {
        let operation_id = format!("rollout-r/n1/{op}");
        ev(t, "n1", Body::WorkerMutated { op: op.into(), operation_id, target: "ovswarm-agent".into() })
    };
    let tomb = |t| ev(t, "hub", Body::HubTombstoned { agent: "n1".into(), silent_ms: 3_700_000 });
    let terminal = ev(
        4,
        "controller",
        Body::Rollout {
            rollout: "rollout-r".into(),
            event: RolloutBody::Terminal { outcome: TerminalOutcome::Partial },
        },
    );
    let found =
        run(&mut EpochMemberNeverTombstoned::default(), &[empty_epoch.clone(), service(1, "stop_service"), tomb(5)], 0);
    assert!(found[0].evidence.contains("stopped by rollout-r and not restarted"), "{found:?}");
    let restarted = [empty_epoch.clone(), service(1, "stop_service"), service(2, "start_service"), tomb(5)];
    assert!(run(&mut EpochMemberNeverTombstoned::default(), &restarted, 0).is_empty());
    let ended = [empty_epoch, service(1, "stop_service"), terminal, tomb(5)];
    assert!(run(&mut EpochMemberNeverTombstoned::default(), &ended, 0).is_empty(), "the rollout is over");
}

#[test]
fn an_environment_left_with_its_key_and_no_hold_is_a_violation() {
    let unheld = ev(7, "n1", Body::WorkerIdentityUnheld);
    let found = run(&mut RecoveryHoldPrecedesIdentity, &[hb(0), unheld], 0);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].t_ms, 7);
    assert!(run(&mut RecoveryHoldPrecedesIdentity, &[hb(0)], 0).is_empty());
}

#[test]
fn a_node_given_one_unrepairable_drift_before_the_rollout_is_incoherent_whatever_the_engine_says() {
    let drift = |t, node: &str, shape| {
        ev(t, "sim", Body::Step { step: Step::MarkerDrift { target: node.into(), shape }, fault: None })
    };
    let began = ev(
        10,
        "controller",
        Body::Rollout {
            rollout: "rollout-x".into(),
            event: RolloutBody::Adopted { revision: "r".into(), in_doubt: 0 },
        },
    );
    let mutated = |t, node: &str| {
        let operation_id = format!("rollout-x/{node}/quiesce");
        ev(t, node, Body::WorkerMutated { op: "stop_service".into(), operation_id, target: "ovswarm-agent".into() })
    };
    let oracle = || NoIncoherentNodeMutated::default();
    // No quarantine event at all: the fault plan says the node could not have been coherent.
    let events = [drift(1, "n1", Drift::ConcurrentArtifactChange), began.clone(), mutated(20, "n1")];
    assert_eq!(run(&mut oracle(), &events, 30).len(), 1);
    // A repairable shape, two drifts (a later one may undo the first), or a drift after the rollout began: the
    // engine's word stands.
    for events in [
        vec![drift(1, "n1", Drift::MarkerAbsentFullEnv), began.clone(), mutated(20, "n1")],
        vec![drift(1, "n1", Drift::UnsafeMode), drift(2, "n1", Drift::EnvAbsent), began.clone(), mutated(20, "n1")],
        vec![began.clone(), drift(11, "n1", Drift::StaleMarker), mutated(20, "n1")],
    ] {
        assert!(run(&mut oracle(), &events, 30).is_empty(), "{events:?}");
    }
}

#[test]
fn a_dispatch_to_a_held_or_quiesced_worker_is_a_violation() {
    let held = ev(1, "hub", Body::HubHoldPlaced { agent: "n1".into(), owner: "deploy:r".into() });
    let dispatched = |t| ev(t, "hub", Body::HubDispatched { agent: "n1".into(), task: "canary-1".into() });
    let released = ev(3, "hub", Body::HubHoldReleased { agent: "n1".into(), owner: "deploy:r".into() });
    assert_eq!(run(&mut NoDispatchToHeld::default(), &[held.clone(), dispatched(2)], 0).len(), 1);
    assert!(run(&mut NoDispatchToHeld::default(), &[held, released, dispatched(4)], 0).is_empty());
    let stopped = ev(
        5,
        "n1",
        Body::WorkerMutated {
            op: "stop_service".into(),
            operation_id: "r/n1/quiesce".into(),
            target: "ovswarm-agent".into(),
        },
    );
    let found = run(&mut NoDispatchToHeld::default(), &[stopped, dispatched(6)], 0);
    assert!(found[0].evidence.contains("whose service the rollout stopped"), "{found:?}");
}

#[test]
fn an_incoherent_node_is_never_mutated_but_a_staging_failure_may_have_been() {
    let quarantined = |node: &str, surface: &str, cause| {
        ev(
            9,
            "controller",
            Body::Rollout {
                rollout: "r".into(),
                event: RolloutBody::Quarantined { node: node.into(), surfaces: vec![surface.into()], cause },
            },
        )
    };
    let mutated = |node: &str| {
        ev(
            5,
            node,
            Body::WorkerMutated {
                op: "stage_artifact".into(),
                operation_id: format!("rollout-x/{node}/stage"),
                target: "d".into(),
            },
        )
    };
    use engine::ports::events::QuarantineCause;
    let events =
        [mutated("n1"), quarantined("n1", "~/.mac/mac.env is unsafe: mode 644, not 600", QuarantineCause::Identity)];
    let found = run(&mut NoIncoherentNodeMutated::default(), &events, 10);
    assert_eq!(found.len(), 1, "mutated before its quarantine: {found:?}");
    // Its cause, not its words: a staging failure, a node that could not be reached in a later rollout's preflight
    // (decommissioned, say), a failed repair are no identity verdict.
    for cause in
        [QuarantineCause::Staging, QuarantineCause::Storage, QuarantineCause::Unreachable, QuarantineCause::Repair]
    {
        let events = [mutated("n2"), quarantined("n2", "~/.mac/mac.env is unsafe", cause)];
        assert!(run(&mut NoIncoherentNodeMutated::default(), &events, 10).is_empty(), "{cause:?}");
    }
}

#[test]
fn availability_floor_and_lane_bound_count_holds() {
    let hold = |t, agent: &str| ev(t, "hub", Body::HubHoldPlaced { agent: agent.into(), owner: "deploy:r".into() });
    let selected = |nodes: &[&str]| {
        let nodes = nodes.iter().map(|node| node.to_string()).collect();
        ev(0, "sim", Body::RolloutSelected { rollout: "r".into(), nodes })
    };
    let events = [selected(&["a", "b", "c", "d"]), hold(1, "a"), hold(2, "b"), hold(3, "c")];
    let floor = run(&mut AvailabilityFloor::new(&ctx()), &events, 0);
    assert_eq!(floor.len(), 1, "4 nodes, floor 2: the third hold leaves 1");
    assert_eq!(floor[0].t_ms, 3);
    let mut bound = LaneBound::new(2);
    assert_eq!(run(&mut bound, &events, 0).len(), 1);
    // The floor is a rollout's to keep: holds while no rollout is in flight are not judged.
    let outside = [hold(1, "a"), hold(2, "b"), hold(3, "c")];
    assert!(run(&mut AvailabilityFloor::new(&ctx()), &outside, 0).is_empty());
    // The selection is the denominator: of three selected, the second hold leaves one.
    let events = [selected(&["a", "b", "c"]), hold(1, "a"), hold(2, "b")];
    let floor = run(&mut AvailabilityFloor::new(&ctx()), &events, 0);
    assert_eq!(floor.iter().map(|f| f.t_ms).collect::<Vec<_>>(), vec![2], "{floor:?}");
    // A selection already under the floor is not the rollout's dip; a hold it places then is.
    let events = [selected(&["a"]), hold(1, "a")];
    let floor = run(&mut AvailabilityFloor::new(&ctx()), &events, 0);
    assert_eq!(floor.iter().map(|f| f.t_ms).collect::<Vec<_>>(), vec![1], "{floor:?}");
    // A refused rollout is over: the account it reports after the refusal does not make it in flight again, so a
    // later dip (an agent stopped long after) is no rollout's. Its adoption by a restarted controller would be.
    let rollout = |t, event| ev(t, "controller", Body::Rollout { rollout: "r".into(), event });
    let refused = rollout(1, RolloutBody::PlanRefused { reason: "floor".into(), cause: None });
    let accounted = rollout(1, RolloutBody::Accounted { nodes: Vec::new() });
    let events =
        [selected(&["a", "b", "c", "d"]), refused.clone(), accounted.clone(), hold(5, "a"), hold(6, "b"), hold(7, "c")];
    assert!(run(&mut AvailabilityFloor::new(&ctx()), &events, 0).is_empty());
    let adopted = rollout(4, RolloutBody::Adopted { revision: "r2".into(), in_doubt: 0 });
    let events =
        [selected(&["a", "b", "c", "d"]), refused, accounted, adopted, hold(5, "a"), hold(6, "b"), hold(7, "c")];
    assert_eq!(run(&mut AvailabilityFloor::new(&ctx()), &events, 0).len(), 1);
}

#[test]
fn a_credential_in_any_trace_line_is_caught() {
    let leak = ev(1, "node-01", Body::AgentHeartbeatFailed { error: format!("bad token {SECRET_MARKER}x") });
    assert_eq!(run(&mut SecretsNeverInTrace, &[hb(0), leak], 0).len(), 1);
}

#[test]
fn recovery_work_between_a_failure_and_its_decision_must_be_the_failed_rows() {
    let work = |stage: &str, work: &str| {
        on(OnboardingBody::RecoveryWork {
            stage: stage.into(),
            work: work.into(),
            outcome: "performed".into(),
            detail: String::new(),
        })
    };
    let events = [
        // Legal: the row's unlink/relink, then its retry; the health wait's reseed, then its retry.
        ev(1, "controller", failed("ensure_pxe_interface_auto", "hardware_mismatch")),
        ev(2, "controller", work("ensure_pxe_interface_auto", "unlink_relink_interface")),
        ev(3, "controller", retrying("ensure_pxe_interface_auto")),
        ev(4, "controller", failed("wait_for_hardware_sync_healthy", "hardware_sync_failure")),
        ev(5, "controller", work("wait_for_hardware_sync_healthy", "reseed")),
        ev(6, "controller", retrying("wait_for_hardware_sync_healthy")),
        // Illegal: another row's compensation, and a reseed where the row names none.
        ev(7, "controller", failed("ensure_pxe_interface_auto", "hardware_mismatch")),
        ev(8, "controller", work("ensure_pxe_interface_auto", "release_to_ready")),
        ev(9, "controller", retrying("ensure_pxe_interface_auto")),
        ev(10, "controller", failed("configure_storage", "upstream_transient")),
        ev(11, "controller", work("configure_storage", "reseed")),
        ev(12, "controller", retrying("configure_storage")),
    ];
    let findings = run(&mut FollowsTheMatrix::new(engine::matrix::Workflow::Onboarding, &ctx()), &events, 20);
    assert_eq!(findings.iter().map(|f| f.t_ms).collect::<Vec<_>>(), [8, 11], "{findings:#?}");
    assert!(findings[0].evidence.contains("not its row's recovery work"), "{}", findings[0].evidence);
}

#[test]
fn an_account_is_believed_only_where_the_trace_shows_it_and_a_successor_needs_every_node_upgraded() {
    use engine::ports::events::{NodeAccount, NodeOutcome, NodeStep, RolloutStep};
    let step = |t, node: &str, step: NodeStep, done: bool| {
        let (node, step) = (node.to_owned(), RolloutStep::Node(step));
        rollout(
            t,
            if done {
                RolloutBody::StepDone { node, step, lane: 0 }
            } else {
                RolloutBody::StepStarted { node, step, lane: 0 }
            },
        )
    };
    let entry = |node: &str, outcome: NodeOutcome| NodeAccount { node: node.into(), outcome };
    let upgraded = |node: &str| entry(node, NodeOutcome::Upgraded);
    let quarantined = |node: &str| {
        entry(node, NodeOutcome::Quarantined { repair: engine::rollout::account::repair_plan("r", node, vec![]) })
    };
    let accounted = |t, nodes: Vec<NodeAccount>| rollout(t, RolloutBody::Accounted { nodes });
    let terminal = |t, outcome| rollout(t, RolloutBody::Terminal { outcome });
    let oracle = || EverySelectedNodeAccounted::new(&ctx());
    // The honest story: n1–n3 released, n4 quarantined; the rollout is partial.
    let mut story = vec![rollout(
        1,
        RolloutBody::Quarantined {
            node: "n4".into(),
            surfaces: vec!["marker absent".into()],
            cause: engine::ports::events::QuarantineCause::Identity,
        },
    )];
    for node in ["n1", "n2", "n3"] {
        story.push(step(2, node, NodeStep::Quiesce, false));
        story.push(step(3, node, NodeStep::Release, true));
    }
    let honest = vec![upgraded("n1"), upgraded("n2"), upgraded("n3"), quarantined("n4")];
    let mut good = story.clone();
    good.extend([accounted(4, honest.clone()), terminal(5, TerminalOutcome::Partial)]);
    assert!(run(&mut oracle(), &good, 10).is_empty(), "{:?}", run(&mut oracle(), &good, 10));
    // The quarantine shrinks the denominator: a successor with n4 not upgraded.
    let mut shrunk = story.clone();
    shrunk.extend([accounted(4, honest.clone()), terminal(5, TerminalOutcome::Successor)]);
    let found = run(&mut oracle(), &shrunk, 10);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].evidence.contains("ended successor with 1 of 4 selected nodes not upgraded (n4)"), "{found:?}");
    // A node left out of the account.
    let mut short = story.clone();
    short.push(accounted(4, honest[..3].to_vec()));
    assert!(run(&mut oracle(), &short, 10)[0].evidence.contains("the account names 3 distinct nodes in 3 entries"));
    // Each outcome the trace contradicts.
    let lies = [
        (
            vec![upgraded("n1"), upgraded("n2"), upgraded("n3"), upgraded("n4")],
            "n4 is accounted upgraded, but it never completed its release step",
        ),
        (
            vec![
                entry("n1", NodeOutcome::Prior { reason: "x".into() }),
                upgraded("n2"),
                upgraded("n3"),
                quarantined("n4"),
            ],
            "n1 is accounted not upgraded, but it completed its release step",
        ),
        (
            vec![
                upgraded("n1"),
                upgraded("n2"),
                upgraded("n3"),
                entry("n4", NodeOutcome::Held { owners: vec!["op".into()] }),
            ],
            "n4 is accounted held by someone else, but the rollout never skipped it for a hold",
        ),
    ];
    for (nodes, lie) in lies {
        let mut events = story.clone();
        events.push(accounted(4, nodes));
        let found = run(&mut oracle(), &events, 10);
        assert!(found.iter().any(|finding| finding.evidence.contains(lie)), "{lie}: {found:?}");
    }
    // Prior after a quiesce began, and a quarantine never reported.
    let mut begun = vec![step(1, "n1", NodeStep::Quiesce, false)];
    begun.push(accounted(
        2,
        vec![entry("n1", NodeOutcome::Prior { reason: "x".into() }), quarantined("n2"), upgraded("n3"), upgraded("n4")],
    ));
    let found = run(&mut oracle(), &begun, 10);
    assert!(
        found.iter().any(|f| f.evidence.contains("n1 is accounted prior, but the rollout began quiescing it")),
        "{found:?}"
    );
    assert!(
        found.iter().any(|f| f.evidence.contains("n2 is accounted quarantined, but the rollout never reported")),
        "{found:?}"
    );
    // A successor with no account at all.
    let found = run(&mut oracle(), &[terminal(1, TerminalOutcome::Successor)], 10);
    assert!(found[0].evidence.contains("ended successor without accounting for its nodes"), "{found:?}");
    // A rollout that selected three of the four nodes (a one-life run's enrolled ones): the denominator is its
    // selection, and a node outside it has no place in its account.
    let selected = ev(
        0,
        "controller",
        Body::RolloutSelected { rollout: "r".into(), nodes: vec!["n1".into(), "n2".into(), "n3".into()] },
    );
    let mut three = vec![selected];
    for node in ["n1", "n2", "n3"] {
        three.push(step(2, node, NodeStep::Quiesce, false));
        three.push(step(3, node, NodeStep::Release, true));
    }
    let mut fits = three.clone();
    fits.extend([accounted(4, honest[..3].to_vec()), terminal(5, TerminalOutcome::Successor)]);
    assert!(run(&mut oracle(), &fits, 10).is_empty(), "{:?}", run(&mut oracle(), &fits, 10));
    let mut foreign = three.clone();
    foreign.push(accounted(4, vec![upgraded("n1"), upgraded("n2"), quarantined("n4")]));
    let found = run(&mut oracle(), &foreign, 10);
    assert!(
        found.iter().any(|f| f.evidence.contains("the account names nodes the rollout did not select: n4")),
        "{found:?}"
    );
    let mut fleet_sized = three;
    fleet_sized.push(accounted(4, honest.clone()));
    let found = run(&mut oracle(), &fleet_sized, 10);
    assert!(
        found.iter().any(|f| f
            .evidence
            .contains("the account names 4 distinct nodes in 4 entries, but the rollout selected 3")),
        "{found:?}"
    );
}

// --- credential rotation ---------------------------------------------------------------------------------------------

fn issued(t: u64, rotation: &str, generation: u64) -> Event {
    ev(t, "hub", Body::HubCredentialIssued { agent: "n1".into(), rotation: rotation.into(), generation })
}

fn heard(t: u64, generation: u64) -> Event {
    ev(t, "hub", Body::HubHeartbeat { agent: "n1".into(), generation })
}

fn committed(t: u64, rotation: &str, revoked_generation: u64) -> Event {
    ev(t, "hub", Body::HubRotationCommitted { agent: "n1".into(), rotation: rotation.into(), revoked_generation })
}

fn aborted(t: u64, rotation: &str, revoked_generation: u64) -> Event {
    ev(t, "hub", Body::HubRotationAborted { agent: "n1".into(), rotation: rotation.into(), revoked_generation })
}

fn refused(t: u64, unauthorized: bool) -> Event {
    ev(t, "hub", Body::HubHeartbeatRefused { agent: "n1".into(), unauthorized })
}

fn rotating(t: u64, rotation: &str, event: crate::observe::trace::RotationBody) -> Event {
    ev(t, "controller", Body::Rotation { rotation: rotation.into(), node: "n1".into(), event })
}

/// What `oracle` finds in `events` (judged at the last event's time).
fn findings(oracle: &mut dyn Oracle, events: &[Event]) -> Vec<Finding> {
    let end_ms = events.last().map_or(0, |event| event.t_ms);
    run(oracle, events, end_ms)
}

fn ended(t: u64, rotation: &str) -> Event {
    let end = engine::ports::events::RotationEnd::Rotated { generation: 2 };
    rotating(t, rotation, crate::observe::trace::RotationBody::Ended { end })
}

#[test]
fn a_predecessor_revoked_only_after_its_successor_was_heard_holds() {
    let mut oracle = super::rotation::PredecessorRevokedAfterProof::default();
    let events = [
        heard(1, 1),
        issued(2, "r1", 2),
        heard(3, 1),
        heard(4, 2),
        committed(5, "r1", 1),
        // A second rotation aborted: its own successor revoked.
        issued(6, "r2", 3),
        aborted(7, "r2", 3),
    ];
    assert!(findings(&mut oracle, &events).is_empty());
}

#[test]
fn a_predecessor_revoked_before_its_successor_was_heard_is_found() {
    let mut oracle = super::rotation::PredecessorRevokedAfterProof::default();
    // The predecessor still heartbeats in the overlap; that proves nothing about the successor.
    let events = [issued(2, "r1", 2), heard(3, 1), committed(5, "r1", 1)];
    let found = findings(&mut oracle, &events);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].evidence.contains("before any heartbeat authenticated by its successor (generation 2)"));
    assert_eq!(found[0].t_ms, 5);
}

#[test]
fn an_abort_that_revokes_the_predecessor_or_a_commit_never_issued_is_found() {
    let mut oracle = super::rotation::PredecessorRevokedAfterProof::default();
    let events = [issued(2, "r1", 2), aborted(4, "r1", 1), committed(6, "r9", 1)];
    let found = findings(&mut oracle, &events);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found[0].evidence.contains("revoked n1's credential generation 1, not its successor (Some(2))"));
    assert!(found[1].evidence.contains("whose successor the hub never issued"));
}

#[test]
fn the_overlap_holds_when_no_heartbeat_is_refused_for_its_credential_during_a_rotation() {
    let mut oracle = super::rotation::RotationOverlapHolds::default();
    // An unknown-agent refusal is not a credential's; a refusal before the issue or after the commit is no overlap's.
    let events = [refused(1, true), issued(2, "r1", 2), refused(3, false), committed(4, "r1", 1), refused(5, true)];
    assert!(findings(&mut oracle, &events).is_empty());
}

#[test]
fn a_heartbeat_refused_for_its_credential_while_the_rotation_is_open_breaks_the_overlap() {
    let mut oracle = super::rotation::RotationOverlapHolds::default();
    let events = [issued(2, "r1", 2), refused(3, true), aborted(4, "r1", 2), refused(5, true)];
    let found = findings(&mut oracle, &events);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].t_ms, 3);
    assert!(found[0].evidence.contains("while rotation r1 was open"));
}

#[test]
fn one_successor_per_rotation_holds_across_a_replay_and_successive_rotations() {
    let mut oracle = super::rotation::OneSuccessorPerRotation::default();
    let started = || crate::observe::trace::RotationBody::Planned;
    let events = [
        rotating(1, "r1", started()),
        issued(2, "r1", 2),
        // The controller died and a new one adopted r1: the hub answered the same successor, minting nothing.
        rotating(3, "r1", crate::observe::trace::RotationBody::Adopted { in_doubt: None }),
        ended(4, "r1"),
        rotating(5, "r2", started()),
        issued(6, "r2", 3),
        ended(7, "r2"),
    ];
    assert!(findings(&mut oracle, &events).is_empty());
}

#[test]
fn a_successor_minted_twice_for_one_rotation_is_found() {
    let mut oracle = super::rotation::OneSuccessorPerRotation::default();
    let started = || crate::observe::trace::RotationBody::Planned;
    // The hub minting under one id twice, and a controller that re-issued under a fresh id mid-rotation.
    let events = [rotating(1, "r1", started()), issued(2, "r1", 2), issued(3, "r1", 3), issued(4, "r1-again", 4)];
    let found = findings(&mut oracle, &events);
    assert_eq!(found.len(), 3, "{found:?}");
    assert!(found[0].evidence.contains("a second successor (generation 3) for rotation r1"));
    assert!(found[1].evidence.contains("while rotation r1, which already has one, was in flight"));
    assert!(found[2].evidence.contains("generation 4"));
}

#[test]
fn credential_rotated_is_reached_by_a_rotated_end_only() {
    let mut oracle = build(OracleId::CredentialRotated, &ctx());
    let stopped = engine::ports::events::RotationEnd::Stopped {
        step: engine::ports::events::RotationStep::Prove,
        failure: engine::ports::events::RotationFailure::SuccessorNotProved { waited_ms: 120_000 },
    };
    let events = [rotating(1, "r1", crate::observe::trace::RotationBody::Ended { end: stopped })];
    assert!(findings(oracle.as_mut(), &events).is_empty());
    let found = findings(oracle.as_mut(), &[ended(9, "r2")]);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].t_ms, 9);
}

#[test]
fn an_old_journal_line_settled_twice_is_a_violation_and_disjoint_settlements_are_not() {
    use engine::ports::events::{OldJournalDefect, OldJournalFormat};
    let format = OldJournalFormat::MacCohortV1;
    let migrated = |t, lines: &[u64]| {
        rollout(t, RolloutBody::JournalMigrated { format, lines: lines.to_vec(), records: lines.len() as u64 })
    };
    let quarantined = |t, lines: &[u64]| {
        let defect = OldJournalDefect::UnknownPhase;
        rollout(t, RolloutBody::JournalQuarantined { format, line: lines[0], defect, lines: lines.to_vec() })
    };
    let oracle = OldJournalSettledOnce::default;
    // Migrated, then (after a controller death) migrated again: the second names lines already settled.
    let found = run(&mut oracle(), &[migrated(1, &[1, 2, 3]), migrated(9, &[2, 3, 7])], 10);
    assert_eq!(found.len(), 2, "{found:?}");
    assert_eq!((found[0].t_ms, found[0].evidence.as_str()), (9, "journal line 2 was migrated, then migrated again"));
    let found = run(&mut oracle(), &[quarantined(1, &[4]), migrated(2, &[4])], 10);
    assert_eq!(found[0].evidence, "journal line 4 was quarantined, then migrated again");
    // Old lines written later (after a migration) are settled on their own: no violation.
    assert!(run(&mut oracle(), &[migrated(1, &[1, 2]), quarantined(5, &[9, 10])], 10).is_empty());
}

#[test]
fn a_historical_node_mutated_before_its_canonicalization_is_a_violation() {
    let drift = |t, node: &str, shape| {
        ev(t, "sim", Body::Step { step: Step::MarkerDrift { target: node.into(), shape }, fault: None })
    };
    let mutated = |t, node: &str, op: &str, what: &str| {
        let operation_id = format!("rollout-x/{node}/{what}");
        ev(t, node, Body::WorkerMutated { op: op.into(), operation_id, target: "t".into() })
    };
    let canonicalized = |t, node: &str| {
        let (forms, wrote) = (vec![engine::ports::events::HistoricalForm::ReceiptV1], Vec::new());
        rollout(t, RolloutBody::Canonicalized { node: node.into(), forms, wrote })
    };
    let started = rollout(2, RolloutBody::Adopted { revision: "r".into(), in_doubt: 0 });
    let oracle = HistoricalIdentityCanonicalizedFirst::default;
    // Quiesced before its canonicalization (the legacy controller's path): a violation.
    let events = [drift(0, "n1", Drift::ReceiptV1), started.clone(), mutated(5, "n1", "stop_service", "quiesce")];
    let found = run(&mut oracle(), &events, 10);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].evidence.starts_with("n1, in a historical identity form, saw stop_service"));
    // Staged, canonicalized (its own writes first), then deployed: none.
    let events = [
        drift(0, "n1", Drift::ExportPrefixedEnv),
        started.clone(),
        mutated(3, "n1", "stage_artifact", "stage/d"),
        mutated(4, "n1", "write_file_atomic", "canonicalize/env"),
        canonicalized(5, "n1"),
        mutated(6, "n1", "stop_service", "quiesce"),
    ];
    assert!(run(&mut oracle(), &events, 10).is_empty());
    // A shape no installer wrote is never canonicalized (another oracle judges its quarantine), and a drift after
    // the rollout began is not ground truth: none.
    for events in [
        vec![drift(0, "n1", Drift::MixedEnvLayout), started.clone(), mutated(5, "n1", "stop_service", "quiesce")],
        vec![started.clone(), drift(3, "n1", Drift::ReceiptV2), mutated(5, "n1", "stop_service", "quiesce")],
    ] {
        assert!(run(&mut oracle(), &events, 10).is_empty(), "{events:?}");
    }
}

/// node-02's decommission, refused at `t_ms` as the engine refuses it, or as `workflow_state` / `node_state` say.
fn decommission_refused(t_ms: u64, workflow_state: &str, node_state: &str) -> Event {
    let event = OnboardingBody::Refused {
        stage: "disable_node".into(),
        class: "state_ambiguity".into(),
        workflow_state: workflow_state.into(),
        node_state: node_state.into(),
        references: vec![engine::ports::events::WorkerReference::Hold { owner: "operator:maintenance".into() }],
    };
    ev(t_ms, "controller", Body::Decommission { workflow: "decommission-node-02".into(), event })
}

/// The decommission's first mutation of `node`: its `disable_node` transition.
fn disabled(t_ms: u64, node: &str) -> Event {
    ev(t_ms, "controller", Body::InventoryRequest { node: node.into(), op: "transition".into(), error: None })
}

#[test]
fn a_decommission_s_first_mutation_of_a_referenced_worker_is_found_whatever_references_it() {
    let hub = |t_ms, body| ev(t_ms, "hub", body);
    // Each story references node-02 at t=10 and the decommission mutates it at t=20.
    let stories: Vec<(&str, Vec<Event>)> = vec![
        ("an open epoch", vec![hub(10, Body::HubEpochOpened { epoch: 2, members: vec!["node-02".into()] })]),
        (
            "an operator's hold",
            vec![hub(10, Body::HubHoldPlaced { agent: "node-02".into(), owner: "operator:maintenance".into() })],
        ),
        ("a task lease", vec![hub(10, Body::HubLeaseGranted { agent: "node-02".into(), lease_ms: 60_000 })]),
        (
            "a rollout's journal, not terminal",
            vec![
                ev(
                    5,
                    "sim",
                    Body::RolloutSelected { rollout: "r".into(), nodes: vec!["node-01".into(), "node-02".into()] },
                ),
                ev(
                    10,
                    "controller",
                    Body::JournalAppended { record: "plan_frozen".into(), operation_id: None, route_digest: None },
                ),
            ],
        ),
    ];
    for (story, mut events) in stories {
        events.push(disabled(20, "node-02"));
        let found = run(&mut NoDecommissionOfAReferencedWorker::default(), &events, 30);
        assert_eq!(found.len(), 1, "{story}: {found:?}");
        assert_eq!(found[0].t_ms, 20, "{story}");
        assert!(found[0].evidence.contains("node-02 (transition)"), "{story}: {}", found[0].evidence);
    }
}

#[test]
fn a_rollback_is_explained_only_by_a_fault_landed_on_its_failed_node_or_on_what_they_share() {
    use crate::model::faults::{StepKind, Subject};
    let landed = |t, on: Subject| {
        ev(t, "sim", Body::FaultLanded { fault: t, fault_kind: StepKind::SshTimeout, on, effect: None })
    };
    let reverting = |t, failed: &[&str]| {
        let failed: Vec<String> = failed.iter().map(|node| node.to_string()).collect();
        rollout(t, RolloutBody::LaneReverting { lane: 1, nodes: vec!["n1".into(), "n2".into()], failed })
    };
    let oracle = || NoRollbackWithoutAFault::default();
    assert!(run(&mut oracle(), &[landed(1, Subject::Node("n1".into())), reverting(2, &["n1"])], 10).is_empty());
    assert!(run(&mut oracle(), &[landed(1, Subject::Host("n1".into())), reverting(2, &["n1"])], 10).is_empty());
    assert!(run(&mut oracle(), &[landed(1, Subject::Host("hub".into())), reverting(2, &["n1", "n2"])], 10).is_empty());
    assert!(run(&mut oracle(), &[landed(1, Subject::Rollout), reverting(2, &["n2"])], 10).is_empty());
    // Nothing landed, a fault on another node, or a fault that landed only after the rollback: unexplained.
    assert_eq!(run(&mut oracle(), &[reverting(2, &["n1"])], 10).len(), 1);
    assert_eq!(run(&mut oracle(), &[landed(1, Subject::Node("n1".into())), reverting(2, &["n1", "n2"])], 10).len(), 1);
    assert_eq!(run(&mut oracle(), &[reverting(2, &["n1"]), landed(3, Subject::Node("n1".into()))], 10).len(), 1);
}

#[test]
fn a_decommission_after_the_references_cleared_or_of_another_node_is_not_found() {
    let hub = |t_ms, body| ev(t_ms, "hub", body);
    let journal = |t_ms, record: &str| {
        ev(t_ms, "controller", Body::JournalAppended { record: record.into(), operation_id: None, route_digest: None })
    };
    let events = [
        hub(1, Body::HubEpochOpened { epoch: 1, members: vec!["node-02".into(), "node-03".into()] }),
        hub(2, Body::HubHoldPlaced { agent: "node-02".into(), owner: "deploy:r".into() }),
        hub(3, Body::HubLeaseGranted { agent: "node-02".into(), lease_ms: 10 }),
        ev(4, "sim", Body::RolloutSelected { rollout: "r".into(), nodes: vec!["node-02".into(), "node-04".into()] }),
        ev(
            5,
            "controller",
            Body::Rollout {
                rollout: "r".into(),
                event: RolloutBody::SkippedHeld { node: "node-04".into(), owners: vec!["operator:x".into()] },
            },
        ),
        journal(6, "plan_frozen"),
        // node-04 was left out of the plan: its decommission meets no reference of this rollout.
        disabled(7, "node-04"),
        // A refusal mutates nothing, and is no finding.
        decommission_refused(8, "failed_retryable", "active"),
        hub(20, Body::HubHoldReleased { agent: "node-02".into(), owner: "deploy:r".into() }),
        hub(21, Body::HubEpochClosed { epoch: 1 }),
        journal(22, "terminal"),
        // The lease ran out at 13; everything cleared: the second request's first mutation is fine.
        disabled(30, "node-02"),
        // A later mutation of a node is not its first.
        hub(31, Body::HubHoldPlaced { agent: "node-02".into(), owner: "operator:late".into() }),
        ev(32, "controller", Body::NodeTask { node: "node-02".into(), task: "drain".into(), operation_id: "o".into() }),
        // Another node that was never referenced.
        disabled(33, "node-05"),
    ];
    let found = run(&mut NoDecommissionOfAReferencedWorker::default(), &events, 40);
    assert!(found.is_empty(), "{found:?}");
    // node-03 stays a member of an open epoch until 21: a destructive MAAS call of its decommission before is found.
    let mut early = events[..2].to_vec();
    let call = Body::SiteRequest {
        workflow: "decommission-node-03".into(),
        op: "release".into(),
        system_id: Some("abc".into()),
        status: Some(200),
    };
    early.push(ev(9, "controller", call));
    let found = run(&mut NoDecommissionOfAReferencedWorker::default(), &early, 40);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].evidence.contains("open epoch 1"), "{}", found[0].evidence);
}

#[test]
fn a_refused_decommission_rests_and_its_states_are_judged_against_disable_node_s_row() {
    let mut context = ctx();
    context.decommissions = vec!["decommission-node-02".into()];
    let events = [decommission_refused(5, "failed_retryable", "active")];
    assert!(run(&mut EveryDecommissionRests::new(&context), &events, 10).is_empty(), "a refusal rests");
    let matrix = || FollowsTheMatrix::new(engine::matrix::Workflow::Decommission, &context);
    assert!(run(&mut matrix(), &events, 10).is_empty());
    // disable_node's row lists failed_retryable only, and the node active or quarantined.
    let wrong = [
        decommission_refused(5, "failed_manual_intervention", "active"),
        decommission_refused(6, "failed_retryable", "retired"),
    ];
    let found = run(&mut matrix(), &wrong, 10);
    assert_eq!(found.iter().map(|f| f.t_ms).collect::<Vec<_>>(), [5, 6], "{found:?}");
    assert!(
        found[1].evidence.contains("its row lists failed_retryable and active or quarantined"),
        "{}",
        found[1].evidence
    );
    // Never requested again after a stage started: still running when the run ends.
    let running = [ev(
        1,
        "controller",
        Body::Decommission {
            workflow: "decommission-node-02".into(),
            event: OnboardingBody::StageStarted { stage: "disable_node".into(), attempt: 1 },
        },
    )];
    assert_eq!(run(&mut EveryDecommissionRests::new(&context), &running, 10).len(), 1);
}

#[test]
fn a_deployment_hold_on_another_worker_before_the_canary_completed_is_a_wider_release() {
    let placed =
        |t, agent: &str, owner: &str| ev(t, "hub", Body::HubHoldPlaced { agent: agent.into(), owner: owner.into() });
    let released =
        |t, agent: &str, owner: &str| ev(t, "hub", Body::HubHoldReleased { agent: agent.into(), owner: owner.into() });
    let oracle = || CanaryBeforeWiderRelease::default();
    let canary_first = [
        placed(1, "n1", "deploy:r"),
        placed(2, "n1", "deploy:r"),
        released(3, "n1", "deploy:r"),
        placed(4, "n2", "deploy:r"),
    ];
    assert!(run(&mut oracle(), &canary_first, 10).is_empty());
    // Other owners' holds are no release, and another rollout has its own canary.
    let others = [
        placed(1, "n1", "deploy:r"),
        placed(2, "n3", "quarantine:r"),
        placed(3, "n2", "operator:maintenance"),
        placed(4, "n4", "deploy:s"),
    ];
    assert!(run(&mut oracle(), &others, 10).is_empty());
    let wider = [placed(1, "n1", "deploy:r"), placed(2, "n2", "deploy:r"), released(3, "n1", "deploy:r")];
    let found = run(&mut oracle(), &wider, 10);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].t_ms, 2);
    // A canary's hold released by someone else's owner does not complete it.
    let foreign = [placed(1, "n1", "deploy:r"), released(2, "n1", "operator:x"), placed(3, "n2", "deploy:r")];
    assert_eq!(run(&mut oracle(), &foreign, 10).len(), 1);
}

#[test]
fn traffic_from_a_worker_past_its_barrier_is_a_violation_until_its_service_starts() {
    use crate::observe::trace::Egress;
    let service = |t, running| ev(t, "n1", Body::WorkerService { running });
    let egress = |t, egress, to: &str| ev(t, "n1", Body::NodeEgress { egress, to: to.into(), name: Some("x".into()) });
    let oracle = || NoEgressAfterQuiescence::default();
    // Before the stop and after the start: no barrier.
    let outside =
        [egress(1, Egress::Connect, "hub"), service(2, false), service(3, true), egress(4, Egress::Dns, "dns")];
    assert!(run(&mut oracle(), &outside, 10).is_empty());
    for kind in [Egress::Connect, Egress::Download, Egress::Dns] {
        let found = run(&mut oracle(), &[service(2, false), egress(3, kind, "hub")], 10);
        assert_eq!(found.len(), 1, "{kind:?}");
        assert!(found[0].evidence.contains("past its quiescence barrier"), "{}", found[0].evidence);
    }
    // Another node's stop is not this node's barrier.
    let other = [ev(2, "n2", Body::WorkerService { running: false }), egress(3, Egress::Download, "artifacts")];
    assert!(run(&mut oracle(), &other, 10).is_empty());
}

/// The oracles that are not given heartbeats find nothing in one: every oracle of the catalogue that says it does
/// not read them is fed a heartbeat (of an agent nobody has seen, and of one that registered) and must find nothing.
#[test]
fn heartbeats_reach_nothing_in_the_oracles_that_skip_them() {
    let mut skipping = 0;
    for info in CATALOG {
        let mut oracle = build(info.id, &ctx());
        if oracle.reads_heartbeats() {
            continue;
        }
        skipping += 1;
        let mut out = Vec::new();
        oracle.on_event(&ev(5, "hub", Body::HubRegistered { agent: "n1".into(), durable: false }), "", &mut out);
        for t in [10, 600_000, 7_200_000] {
            oracle.on_event(&ev(t, "hub", Body::HubHeartbeat { agent: "n1".into(), generation: 1 }), "", &mut out);
        }
        assert!(out.is_empty(), "{} found something in a heartbeat: {out:?}", info.name);
    }
    assert!(skipping > 20, "the reachability properties skip heartbeats ({skipping} do)");
}

/// The set gives heartbeats to the oracles that read them: a silence reported while heartbeats arrive is caught
/// through `OracleSet` as it is by the oracle alone.
#[test]
fn the_oracle_set_gives_heartbeats_to_their_readers() {
    let mut set = OracleSet::all(&ctx());
    set.on_event(&ev(0, "hub", Body::HubRegistered { agent: "n1".into(), durable: false }), "");
    for t in (30_000..=180_000).step_by(30_000) {
        set.on_event(&ev(t, "hub", Body::HubHeartbeat { agent: "n1".into(), generation: 1 }), "");
    }
    set.on_event(
        &ev(200_000, "controller", Body::InstanceSilent { instance: "n1".into(), silent_for_ms: 200_000 }),
        "",
    );
    let fired: Vec<&str> = set.fired().map(|(info, _, _)| info.name).collect();
    assert!(fired.contains(&"silence_signal_is_justified"), "the silence oracle saw the heartbeats: {fired:?}");
}
