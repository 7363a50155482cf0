//! The decision core against the matrix: every (stage, class) pair of the table retries or stops as its row says,
//! every decision for every class at every stage lands in states its row lists, and one test per rule.

use super::*;
use crate::matrix::{DECOMMISSION, ONBOARDING, TIMEOUTS, TimeoutKind};

use DecommissionStage as D;
use FailureClass as F;
use OnboardingStage as O;

/// What the first failure of each listed class does, in the order of the row's classes: `retry`, `stop`, or `skip`
/// (go on without the stage). The context: the failure is what its class says (an ambiguity refreshed and found
/// conflicting, anything else refreshed and found as expected), default policies.
const ONBOARDING_FIRST_FAILURE: [&str; 16] = [
    "stop stop retry", // load_site_config: input_config_error, site_capability_missing, upstream_transient
    "stop",            // resolve_power_credentials: input_config_error
    "retry retry retry stop", // create_or_find_in_maas: transient, bmc, pxe, ambiguity
    "retry retry stop", // commission_node: transient, bmc, ambiguity
    "retry stop stop", // wait_for_ready: transient, hardware_mismatch, ambiguity
    "stop retry",      // configure_storage: hardware_mismatch, transient
    "retry skip",      // apply_roce_phase2: transient, hardware_mismatch (not mandatory by default)
    "retry retry",     // ensure_pxe_interface_auto: hardware_mismatch (relink), transient
    "stop stop",       // render_cloud_init: input_config_error, site_capability_missing
    "retry retry stop", // deploy_via_maas: transient, deploy_cloud_init_failure, ambiguity
    "retry retry stop", // wait_for_deployed: deploy_cloud_init_failure, transient, ambiguity
    "stop",            // classify_deploy_failure: transient (best-effort)
    "retry stop",      // recover_for_datasource_retry: deploy_cloud_init_failure, ambiguity
    "retry retry retry", // ensure_hardware_sync_configured: connectivity, hardware sync, transient
    "retry retry",     // wait_for_hardware_sync_healthy: hardware sync, transient
    "retry retry stop", // wait_for_agent_enrollment: agent, transient, ambiguity
];

const DECOMMISSION_FIRST_FAILURE: [&str; 11] = [
    "retry",            // disable_node: transient
    "retry stop",       // force_release_allocations: transient, ambiguity
    "retry retry",      // drain_node: transient, agent
    "retry retry",      // cleanup_storage / scrub_gpu / validate_clean_node: transient, hardware_mismatch (residue)
    "stop stop retry",  // load_site_config: input_config_error, site_capability_missing, transient
    "retry retry stop", // release_maas_node: transient, deploy_cloud_init_failure, ambiguity
    "retry retry",      // power_off_maas_node: transient, bmc
    "retry",            // retire_gpuaas_node: transient
    "retry stop",       // remove_gpuaas_node_record: agent, ambiguity
    "retry",            // cleanup_secrets: transient
    "stop stop",        // remove_maas_record: transient (best-effort, delete not required), ambiguity (retain)
];

fn observed_for(class: FailureClass) -> Observed {
    if class == F::StateAmbiguity { Observed::Conflicting } else { Observed::AsExpected }
}

fn ctx(node_state: NodeState, observed: Observed) -> DecideContext {
    DecideContext { observed, ..DecideContext::new(node_state) }
}

fn first_node_state(row: &StageRow) -> NodeState {
    match row.node_states {
        NodeStates::OneOf(states) => states[0],
        NodeStates::Unchanged => NodeState::Active,
    }
}

fn outcome_word(decision: &Decision) -> &'static str {
    match decision {
        Decision::Retry { .. } => "retry",
        Decision::Stop(_) => "stop",
        Decision::Continue { reason: ContinueReason::SkipNonFatalStage } => "skip",
        Decision::Continue { reason: ContinueReason::AdoptObservedState } => "adopt",
        Decision::RefreshObservedState => "refresh",
    }
}

fn check_first_failures(rows: &[StageRow], expected: &[&str]) {
    assert_eq!(rows.len(), expected.len());
    for (row, words) in rows.iter().zip(expected) {
        let words: Vec<&str> = words.split(' ').collect();
        assert_eq!(words.len(), row.failure_classes.len(), "{}: one word per listed class", row.stage.as_str());
        for (class, word) in row.failure_classes.iter().zip(words) {
            let decision = decide(row.stage, *class, 1, &ctx(first_node_state(row), observed_for(*class)));
            assert_eq!(outcome_word(&decision), word, "{} × {}: {decision:?}", row.stage.as_str(), class.as_str());
            assert_eq!(
                decision.is_retry(),
                retries(row, *class, &SitePolicy::default()) && *class != F::StateAmbiguity,
                "{} × {}: decide and retries agree",
                row.stage.as_str(),
                class.as_str()
            );
        }
    }
}

#[test]
fn every_onboarding_pair_retries_or_stops_as_its_row_says() {
    check_first_failures(ONBOARDING, &ONBOARDING_FIRST_FAILURE);
}

#[test]
fn every_decommission_pair_retries_or_stops_as_its_row_says() {
    check_first_failures(DECOMMISSION, &DECOMMISSION_FIRST_FAILURE);
}

/// Follows decisions from the first failure to a stop or a continue, acting on each as a driver would: a refresh
/// observes `refreshed`, a retry fails again, the no-erase fallback is remembered.
fn drive(
    stage: Stage,
    class: FailureClass,
    start: DecideContext,
    refreshed: Observed,
) -> (Decision, u32, DecideContext) {
    let mut ctx = start;
    let mut attempt = 1;
    let mut retries_taken = 0;
    for _ in 0..32 {
        let decision = decide(stage, class, attempt, &ctx);
        match decision {
            Decision::RefreshObservedState => {
                assert_eq!(ctx.observed, Observed::Stale, "a refresh is asked for only when the observation is stale");
                ctx.observed = refreshed;
            }
            Decision::Retry { attempt_next, attempts_max, compensation, .. } => {
                assert_eq!(attempt_next, attempt + 1);
                assert!(attempt_next <= attempts_max);
                if compensation == Some(Compensation::AbortMarkFixedNoEraseRelease) {
                    assert!(!ctx.fallback_taken, "the no-erase fallback runs once");
                    ctx.fallback_taken = true;
                }
                if compensation.is_some_and(Compensation::changes_maas) {
                    assert_ne!(ctx.observed, Observed::Stale, "a MAAS compensation on a stale observation");
                }
                attempt = attempt_next;
                retries_taken += 1;
            }
            Decision::Continue { .. } | Decision::Stop(_) => return (decision, retries_taken, ctx),
        }
    }
    panic!("{} × {}: no stop after 32 decisions", stage.as_str(), class.as_str());
}

/// Every class (listed or not) at every stage, in every context: the workflow stops in a state its row lists, the
/// node in a state its row lists, within the retry bound; it continues only by adoption or a permitted skip.
#[test]
fn every_decision_lands_in_states_its_row_lists() {
    let observations = [
        (Observed::Stale, Observed::AsExpected),
        (Observed::Stale, Observed::SatisfiesCheckpoint),
        (Observed::Stale, Observed::Conflicting),
        (Observed::AsExpected, Observed::AsExpected),
        (Observed::SatisfiesCheckpoint, Observed::SatisfiesCheckpoint),
        (Observed::Conflicting, Observed::Conflicting),
    ];
    let mut checked = 0;
    for stage in Stage::all() {
        let row = stage.row();
        for class in FailureClass::ALL {
            for node_state in NodeState::ALL {
                for failed_runs in [0, FAILED_RUNS_MAX_DEFAULT] {
                    for policy_bits in 0..8u8 {
                        for side_effects in [false, true] {
                            for (start, refreshed) in observations {
                                let policy = SitePolicy {
                                    roce_mandatory: policy_bits & 1 != 0,
                                    no_erase_release_allowed: policy_bits & 2 != 0,
                                    maas_delete_required: policy_bits & 4 != 0,
                                };
                                let start = DecideContext {
                                    observed: start,
                                    policy,
                                    failed_runs,
                                    deploy_attempt_started: side_effects,
                                    partial_node_row_exists: side_effects,
                                    ..DecideContext::new(node_state)
                                };
                                let (last, retries_taken, end) = drive(stage, class, start, refreshed);
                                let what = format!("{} × {} from {start:?}: {last:?}", stage.as_str(), class.as_str());
                                assert!(retries_taken <= start.retry.attempts_max, "{what}: unbounded");
                                match last {
                                    Decision::Stop(stop) => {
                                        assert!(
                                            row.admits_workflow_state(stop.workflow_state),
                                            "{what}: workflow state"
                                        );
                                        assert!(
                                            row.node_states.admits(node_state, stop.node_state),
                                            "{what}: node state"
                                        );
                                        if stop.reason == StopReason::OwnershipUnclear {
                                            assert_eq!(
                                                stop.compensation, None,
                                                "{what}: compensation on an unowned machine"
                                            );
                                            assert_eq!(end.observed, Observed::Conflicting, "{what}");
                                        }
                                        if stop.workflow_state == WorkflowState::FailedManualIntervention {
                                            assert_eq!(
                                                stop.next_action,
                                                Some(RecoveryAction::MarkManualInterventionRequired)
                                            );
                                        }
                                    }
                                    Decision::Continue { reason: ContinueReason::AdoptObservedState } => {
                                        assert_eq!(end.observed, Observed::SatisfiesCheckpoint, "{what}");
                                    }
                                    Decision::Continue { reason: ContinueReason::SkipNonFatalStage } => {
                                        assert!(row.admits_workflow_state(WorkflowState::Running), "{what}");
                                        assert!(!policy.roce_mandatory, "{what}: skipped a mandatory stage");
                                    }
                                    Decision::RefreshObservedState | Decision::Retry { .. } => unreachable!("{what}"),
                                }
                                checked += 1;
                            }
                        }
                    }
                }
            }
        }
    }
    assert_eq!(checked, 27 * 11 * 5 * 2 * 8 * 2 * 6);
}

#[test]
fn a_transient_is_retried_with_doubling_backoff_until_the_bound_then_fails_retryably() {
    let stage = Stage::Onboarding(O::CommissionNode);
    let ctx = ctx(NodeState::Enrolling, Observed::AsExpected);
    let decisions: Vec<Decision> = (1..=3).map(|attempt| decide(stage, F::UpstreamTransient, attempt, &ctx)).collect();
    let retry = |attempt_next, delay_ms| Decision::Retry {
        action: RecoveryAction::Resume,
        attempt_next,
        attempts_max: 3,
        delay_ms,
        compensation: None,
    };
    assert_eq!(decisions[0], retry(2, 15_000));
    assert_eq!(decisions[1], retry(3, 30_000));
    assert_eq!(
        decisions[2],
        Decision::Stop(Stop {
            workflow_state: WorkflowState::FailedRetryable,
            node_state: NodeState::Enrolling,
            reason: StopReason::AttemptsExhausted,
            next_action: Some(RecoveryAction::Resume),
            compensation: None,
            qualifier: None,
        })
    );
}

#[test]
fn backoff_is_capped() {
    let policy = RetryPolicy::default();
    assert_eq!(policy.delay_ms(1), 15_000);
    assert_eq!(policy.delay_ms(4), 120_000);
    assert_eq!(policy.delay_ms(5), 240_000);
    assert_eq!(policy.delay_ms(60), 240_000);
}

#[test]
fn create_or_find_reruns_from_the_top() {
    let decision = decide(
        Stage::Onboarding(O::CreateOrFindInMaas),
        F::PxeDiscoveryFailure,
        1,
        &ctx(NodeState::Enrolling, Observed::AsExpected),
    );
    assert!(matches!(decision, Decision::Retry { action: RecoveryAction::Rerun, .. }), "{decision:?}");
}

#[test]
fn a_workflow_that_already_failed_retryably_escalates_to_manual_intervention() {
    let timeout = TIMEOUTS.iter().find(|row| row.timeout == TimeoutKind::AgentEnrollment).unwrap();
    assert!(timeout.escalates_after_bounded_attempts);
    let stage = Stage::Onboarding(timeout.stage);
    let fresh = ctx(NodeState::Enrolling, Observed::AsExpected);
    let first_run = decide(stage, F::AgentEnrollmentFailure, 3, &fresh);
    assert_eq!(first_run.workflow_state(), WorkflowState::FailedRetryable);
    let later_run = decide(stage, F::AgentEnrollmentFailure, 3, &DecideContext { failed_runs: 2, ..fresh });
    let Decision::Stop(stop) = later_run else { panic!("{later_run:?}") };
    assert_eq!(stop.workflow_state, WorkflowState::FailedManualIntervention);
    assert_eq!(stop.node_state, NodeState::Quarantined, "an enrolled-but-agentless machine takes no work");
}

#[test]
fn config_and_capability_failures_go_to_a_person_at_once() {
    for class in [F::InputConfigError, F::SiteCapabilityMissing] {
        let decision =
            decide(Stage::Onboarding(O::LoadSiteConfig), class, 1, &ctx(NodeState::Enrolling, Observed::AsExpected));
        let Decision::Stop(stop) = decision else { panic!("{decision:?}") };
        assert_eq!(stop.workflow_state, WorkflowState::FailedManualIntervention);
        assert_eq!(stop.reason, StopReason::NotRetryable);
    }
}

#[test]
fn an_ambiguity_is_refreshed_then_adopted_stopped_or_retried() {
    let stage = Stage::Onboarding(O::CommissionNode);
    let at = |observed| decide(stage, F::StateAmbiguity, 1, &ctx(NodeState::Enrolling, observed));
    assert_eq!(at(Observed::Stale), Decision::RefreshObservedState);
    assert_eq!(at(Observed::SatisfiesCheckpoint), Decision::Continue { reason: ContinueReason::AdoptObservedState });
    let Decision::Stop(stop) = at(Observed::Conflicting) else { panic!("a conflict stops") };
    assert_eq!(
        (stop.workflow_state, stop.reason),
        (WorkflowState::FailedManualIntervention, StopReason::OwnershipUnclear)
    );
    assert!(at(Observed::AsExpected).is_retry(), "a refresh that shows the expected state leaves a transient");
}

#[test]
fn a_late_success_is_adopted_at_any_stage() {
    for stage in Stage::all() {
        let decision =
            decide(stage, F::AgentEnrollmentFailure, 3, &ctx(NodeState::Enrolling, Observed::SatisfiesCheckpoint));
        assert_eq!(decision, Decision::Continue { reason: ContinueReason::AdoptObservedState }, "{}", stage.as_str());
    }
}

#[test]
fn deploy_is_never_retried_before_a_refresh_and_releases_to_ready_only_if_it_started() {
    let stage = Stage::Onboarding(O::DeployViaMaas);
    let stale = ctx(NodeState::Enrolling, Observed::Stale);
    assert_eq!(decide(stage, F::UpstreamTransient, 1, &stale), Decision::RefreshObservedState);
    let fresh = ctx(NodeState::Enrolling, Observed::AsExpected);
    assert!(matches!(decide(stage, F::DeployCloudInitFailure, 1, &fresh), Decision::Retry { compensation: None, .. }));
    let started = DecideContext { deploy_attempt_started: true, ..fresh };
    assert!(matches!(
        decide(stage, F::DeployCloudInitFailure, 1, &started),
        Decision::Retry { compensation: Some(Compensation::ReleaseToReadyIfDeployStarted), .. }
    ));
    let Decision::Stop(stop) = decide(stage, F::DeployCloudInitFailure, 3, &started) else { panic!("exhausted") };
    assert_eq!(stop.workflow_state, WorkflowState::FailedManualIntervention, "deploy rejected after bounded retry");
    assert_eq!(stop.compensation, Some(Compensation::ReleaseToReadyIfDeployStarted));
}

#[test]
fn a_destructive_compensation_waits_for_a_fresh_observation() {
    let stage = Stage::Onboarding(O::WaitForDeployed);
    assert_eq!(
        decide(stage, F::DeployCloudInitFailure, 1, &ctx(NodeState::Enrolling, Observed::Stale)),
        Decision::RefreshObservedState
    );
    assert!(matches!(
        decide(stage, F::DeployCloudInitFailure, 1, &ctx(NodeState::Enrolling, Observed::AsExpected)),
        Decision::Retry { compensation: Some(Compensation::ReleaseToReady), .. }
    ));
    assert!(
        matches!(
            decide(stage, F::UpstreamTransient, 1, &ctx(NodeState::Enrolling, Observed::Stale)),
            Decision::Retry { compensation: None, .. }
        ),
        "a flaky poll is retried without a release, and without waiting for a refresh"
    );
}

#[test]
fn a_pxe_interface_mismatch_is_relinked_then_left_to_a_person() {
    let stage = Stage::Onboarding(O::EnsurePxeInterfaceAuto);
    let fresh = ctx(NodeState::Enrolling, Observed::AsExpected);
    assert!(matches!(
        decide(stage, F::HardwareMismatch, 1, &fresh),
        Decision::Retry { compensation: Some(Compensation::UnlinkRelinkInterface), .. }
    ));
    let Decision::Stop(stop) = decide(stage, F::HardwareMismatch, 3, &fresh) else { panic!("exhausted") };
    assert_eq!((stop.workflow_state, stop.compensation), (WorkflowState::FailedManualIntervention, None));
}

#[test]
fn roce_phase2_is_skipped_unless_policy_says_mandatory() {
    let stage = Stage::Onboarding(O::ApplyRocePhase2);
    let optional = ctx(NodeState::Enrolling, Observed::AsExpected);
    assert_eq!(
        decide(stage, F::HardwareMismatch, 1, &optional),
        Decision::Continue { reason: ContinueReason::SkipNonFatalStage }
    );
    assert!(decide(stage, F::UpstreamTransient, 1, &optional).is_retry());
    let mandatory = DecideContext { policy: SitePolicy { roce_mandatory: true, ..SitePolicy::default() }, ..optional };
    assert_eq!(
        decide(stage, F::HardwareMismatch, 1, &mandatory).workflow_state(),
        WorkflowState::FailedManualIntervention
    );
}

#[test]
fn a_failed_deploy_classification_falls_back_to_a_generic_deploy_failure() {
    let decision = decide(
        Stage::Onboarding(O::ClassifyDeployFailure),
        F::UpstreamTransient,
        1,
        &ctx(NodeState::Enrolling, Observed::AsExpected),
    );
    let Decision::Stop(stop) = decision else { panic!("{decision:?}") };
    assert_eq!(stop.workflow_state, WorkflowState::FailedRetryable);
    assert_eq!(stop.reason, StopReason::BestEffort);
    assert_eq!(stop.qualifier, Some(Qualifier::GenericDeployFailure));
    assert_eq!(stop.compensation, None);
}

/// Found by cargo-mutants (`docs/testing.md`): `wait_for_deployed`'s "release back to Ready" is due as the workflow
/// stops only after a failed deploy, not after MAAS was unreachable.
#[test]
fn a_deploy_that_failed_for_good_is_released_back_to_ready_as_the_workflow_stops() {
    let stage = Stage::Onboarding(O::WaitForDeployed);
    let last = RetryPolicy::default().attempts_max;
    let clean = ctx(NodeState::Enrolling, Observed::AsExpected);
    let Decision::Stop(stop) = decide(stage, F::DeployCloudInitFailure, last, &clean) else { panic!("not stopped") };
    assert_eq!(stop.compensation, Some(Compensation::ReleaseToReady));
    let Decision::Stop(stop) = decide(stage, F::UpstreamTransient, last, &clean) else { panic!("not stopped") };
    assert_eq!(stop.compensation, None);
}

#[test]
fn render_failures_delete_a_partial_node_row_if_one_was_written() {
    let stage = Stage::Onboarding(O::RenderCloudInit);
    let clean = ctx(NodeState::Enrolling, Observed::AsExpected);
    let Decision::Stop(stop) = decide(stage, F::InputConfigError, 1, &clean) else { panic!("not retried") };
    assert_eq!(stop.compensation, None);
    let partial = DecideContext { partial_node_row_exists: true, ..clean };
    let Decision::Stop(stop) = decide(stage, F::InputConfigError, 1, &partial) else { panic!("not retried") };
    assert_eq!(stop.compensation, Some(Compensation::DeletePartialNodeRow));
    // "yes if transient dependency": a token request that got no answer is retried, its possible token revoked first.
    let retried = decide(stage, F::UpstreamTransient, 1, &partial);
    assert!(
        matches!(retried, Decision::Retry { compensation: Some(Compensation::DeletePartialNodeRow), .. }),
        "{retried:?}"
    );
    let retried = decide(stage, F::UpstreamTransient, 1, &clean);
    assert!(matches!(retried, Decision::Retry { compensation: None, .. }), "{retried:?}");
}

#[test]
fn a_failed_hardware_sync_quarantines_the_deployed_node() {
    let stage = Stage::Onboarding(O::EnsureHardwareSyncConfigured);
    let Decision::Stop(stop) =
        decide(stage, F::HardwareSyncFailure, 3, &ctx(NodeState::Enrolling, Observed::AsExpected))
    else {
        panic!("exhausted")
    };
    assert_eq!(
        (stop.workflow_state, stop.node_state),
        (WorkflowState::FailedManualIntervention, NodeState::Quarantined)
    );
}

#[test]
fn decommission_site_config_leaves_the_node_state_unchanged() {
    for node_state in [NodeState::Active, NodeState::Quarantined] {
        let decision = decide(
            Stage::Decommission(D::LoadSiteConfig),
            F::SiteCapabilityMissing,
            1,
            &ctx(node_state, Observed::AsExpected),
        );
        let Decision::Stop(stop) = decision else { panic!("{decision:?}") };
        assert_eq!(stop.node_state, node_state);
    }
}

#[test]
fn a_failed_disable_keeps_the_node_as_it_was() {
    for node_state in [NodeState::Active, NodeState::Quarantined] {
        let decision = decide(
            Stage::Decommission(D::DisableNode),
            F::UpstreamTransient,
            3,
            &ctx(node_state, Observed::AsExpected),
        );
        assert_eq!(decision.workflow_state(), WorkflowState::FailedRetryable);
        let Decision::Stop(stop) = decision else { panic!("exhausted") };
        assert_eq!(stop.node_state, node_state);
    }
}

#[test]
fn failed_validation_quarantines() {
    let stage = Stage::Decommission(D::CleanupStorageScrubGpuValidateCleanNode);
    let fresh = ctx(NodeState::Quarantined, Observed::AsExpected);
    assert!(decide(stage, F::HardwareMismatch, 1, &fresh).is_retry(), "residue is cleaned again");
    let Decision::Stop(stop) = decide(stage, F::HardwareMismatch, 3, &fresh) else { panic!("exhausted") };
    assert_eq!(stop.compensation, Some(Compensation::QuarantineOnFailedValidation));
    assert_eq!(stop.node_state, NodeState::Quarantined);
}

#[test]
fn release_falls_back_to_a_no_erase_release_once_if_policy_allows() {
    let stage = Stage::Decommission(D::ReleaseMaasNode);
    let strict = ctx(NodeState::Quarantined, Observed::AsExpected);
    let Decision::Stop(stop) = decide(stage, F::DeployCloudInitFailure, 3, &strict) else { panic!("no fallback") };
    assert_eq!(
        (stop.workflow_state, stop.node_state),
        (WorkflowState::FailedManualIntervention, NodeState::Quarantined)
    );
    let allowed =
        DecideContext { policy: SitePolicy { no_erase_release_allowed: true, ..SitePolicy::default() }, ..strict };
    assert!(matches!(
        decide(stage, F::DeployCloudInitFailure, 3, &allowed),
        Decision::Retry { attempt_next: 4, compensation: Some(Compensation::AbortMarkFixedNoEraseRelease), .. }
    ));
    let after = DecideContext { fallback_taken: true, ..allowed };
    assert_eq!(
        decide(stage, F::DeployCloudInitFailure, 4, &after).workflow_state(),
        WorkflowState::FailedManualIntervention
    );
}

#[test]
fn an_uninstall_failure_reverts_the_node_to_retired() {
    let stage = Stage::Decommission(D::RemoveGpuaasNodeRecord);
    let fresh = ctx(NodeState::Retired, Observed::AsExpected);
    assert!(matches!(
        decide(stage, F::AgentEnrollmentFailure, 1, &fresh),
        Decision::Retry { compensation: Some(Compensation::RevertToRetiredOnUninstallFailure), .. }
    ));
    let Decision::Stop(stop) = decide(stage, F::AgentEnrollmentFailure, 3, &fresh) else { panic!("exhausted") };
    assert_eq!(stop.node_state, NodeState::Retired);
    assert_eq!(stop.compensation, Some(Compensation::RevertToRetiredOnUninstallFailure));
}

#[test]
fn the_maas_record_is_retained_unless_policy_requires_the_delete() {
    let stage = Stage::Decommission(D::RemoveMaasRecord);
    let retain = ctx(NodeState::Deleted, Observed::AsExpected);
    assert_eq!(
        decide(stage, F::UpstreamTransient, 1, &retain).workflow_state(),
        WorkflowState::CompletedWithFollowUpRecord
    );
    let required =
        DecideContext { policy: SitePolicy { maas_delete_required: true, ..SitePolicy::default() }, ..retain };
    assert!(decide(stage, F::UpstreamTransient, 1, &required).is_retry());
    assert_eq!(decide(stage, F::UpstreamTransient, 3, &required).workflow_state(), WorkflowState::FailedRetryable);
    let unsafe_delete = DecideContext { observed: Observed::Conflicting, ..required };
    assert_eq!(
        decide(stage, F::StateAmbiguity, 1, &unsafe_delete).workflow_state(),
        WorkflowState::CompletedWithFollowUpRecord,
        "retain MAAS record if delete unsafe"
    );
}

#[test]
fn no_row_lists_an_empty_set_of_states() {
    for row in ONBOARDING.iter().chain(DECOMMISSION) {
        assert!(!row.workflow_states.is_empty(), "{}", row.stage.as_str());
        if let NodeStates::OneOf(states) = row.node_states {
            assert!(!states.is_empty(), "{}", row.stage.as_str());
        }
    }
}

#[test]
fn a_timeout_whose_state_is_manual_alone_stops_for_a_person_once_its_recovery_work_had_its_attempt() {
    let fresh = |timed_out: Option<TimeoutKind>| {
        let mut ctx = DecideContext::new(NodeState::Enrolling);
        ctx.observed = Observed::AsExpected;
        ctx.timed_out = timed_out;
        ctx
    };
    let seed = Stage::Onboarding(O::EnsureHardwareSyncConfigured);
    // A refused seed is retried within the bound; a seed that timed out is "operator fix then resume" at once.
    assert!(decide(seed, F::HardwareSyncFailure, 1, &fresh(None)).is_retry());
    let stop = decide(seed, F::HardwareSyncFailure, 1, &fresh(Some(TimeoutKind::HardwareSyncSeed)));
    assert_eq!(stop.workflow_state(), WorkflowState::FailedManualIntervention);
    // The health wait's timeout is "reseed or operator intervention": its first attempt is retried (with the
    // reseed), a second stops.
    let health = Stage::Onboarding(O::WaitForHardwareSyncHealthy);
    let timed_out = fresh(Some(TimeoutKind::HardwareSyncHealth));
    assert!(decide(health, F::HardwareSyncFailure, 1, &timed_out).is_retry());
    assert_eq!(
        decide(health, F::HardwareSyncFailure, 2, &timed_out).workflow_state(),
        WorkflowState::FailedManualIntervention
    );
    // A timeout whose state may be retryable (agent enrolment) keeps the row's bounded retries.
    let agent = Stage::Onboarding(O::WaitForAgentEnrollment);
    assert!(decide(agent, F::AgentEnrollmentFailure, 1, &fresh(Some(TimeoutKind::AgentEnrollment))).is_retry());
}
