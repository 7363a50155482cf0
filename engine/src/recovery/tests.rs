//! The recovery actions against their rules: every action from every state for a person and for automation (one
//! table each), the stage-dependent rules, the freeze and its lifting, and the audit record's journal line.

use proptest::prelude::*;

use super::*;

use DecommissionStage as D;
use OnboardingStage as O;

fn status(stage: Stage, state: Lifecycle) -> WorkflowStatus {
    WorkflowStatus {
        workflow: stage.workflow(),
        workflow_id: "onboard-node-07".into(),
        run_id: 2,
        state,
        stage,
        node_state: NodeState::Enrolling,
        frozen: false,
        observed_satisfies_checkpoint: true,
    }
}

fn request(role: ActorRole, action: RecoveryAction) -> OperatorRequest {
    OperatorRequest {
        actor_id: "alice".into(),
        actor_role: role,
        action,
        reason: "MAAS region restarted, deploy can go on".into(),
        correlation_id: "INC-4711".into(),
        resolves_freeze: false,
    }
}

/// One line: the answer, with every field of an accepted request, or the refusal's serde tag.
fn render(decision: &Result<Authorized, Refusal>) -> String {
    match decision {
        Ok(a) => format!(
            "ok next={} node={} at={} comp={} refresh={} freeze={}",
            a.next_state,
            a.node_state.map_or("-", NodeState::as_str),
            a.restart_at.map_or("-", Stage::as_str),
            a.compensation.map_or("-".to_owned(), |c| serde_json::to_value(c).unwrap().as_str().unwrap().to_owned()),
            if a.refresh_observed_state_first { "yes" } else { "no" },
            serde_json::to_value(a.freeze).unwrap().as_str().unwrap(),
        ),
        Err(refusal) => format!("refused {}", serde_json::to_value(refusal).unwrap()["refusal"].as_str().unwrap()),
    }
}

/// Every action from every state, at `wait_for_deployed` (a bounded row with a compensation, `release_to_ready`) with
/// an observation that satisfies the checkpoint, so only the state and the role decide.
fn table(role: ActorRole) -> String {
    let mut out = String::new();
    for action in RecoveryAction::ALL {
        for state in Lifecycle::ALL {
            let decision = authorize(&status(Stage::Onboarding(O::WaitForDeployed), state), &request(role, action));
            out.push_str(&format!("{:<34} {:<32} {}\n", action.as_str(), state.as_str(), render(&decision)));
        }
    }
    out
}

#[test]
fn every_action_from_every_state_for_a_person() {
    let expect = "\
retry_stage                        running                          refused workflow_running
retry_stage                        completed                        refused workflow_completed
retry_stage                        completed_with_follow_up_record  refused workflow_completed
retry_stage                        failed_retryable                 ok next=running node=enrolling at=wait_for_deployed comp=- refresh=no freeze=unchanged
retry_stage                        failed_manual_intervention       ok next=running node=enrolling at=wait_for_deployed comp=- refresh=no freeze=unchanged
retry_stage                        cancelled                        refused workflow_cancelled
resume                             running                          refused workflow_running
resume                             completed                        refused workflow_completed
resume                             completed_with_follow_up_record  refused workflow_completed
resume                             failed_retryable                 ok next=running node=enrolling at=wait_for_deployed comp=- refresh=no freeze=unchanged
resume                             failed_manual_intervention       ok next=running node=enrolling at=wait_for_deployed comp=- refresh=no freeze=unchanged
resume                             cancelled                        refused workflow_cancelled
rerun                              running                          refused workflow_running
rerun                              completed                        refused workflow_completed
rerun                              completed_with_follow_up_record  refused workflow_completed
rerun                              failed_retryable                 ok next=running node=enrolling at=load_site_config comp=- refresh=no freeze=unchanged
rerun                              failed_manual_intervention       ok next=running node=enrolling at=load_site_config comp=- refresh=no freeze=unchanged
rerun                              cancelled                        refused workflow_cancelled
restart_clean                      running                          refused workflow_running
restart_clean                      completed                        refused workflow_completed
restart_clean                      completed_with_follow_up_record  refused workflow_completed
restart_clean                      failed_retryable                 ok next=running node=enrolling at=load_site_config comp=release_to_ready refresh=yes freeze=unchanged
restart_clean                      failed_manual_intervention       ok next=running node=enrolling at=load_site_config comp=release_to_ready refresh=yes freeze=unchanged
restart_clean                      cancelled                        refused workflow_cancelled
cancel                             running                          ok next=cancelled node=enrolling at=- comp=release_to_ready refresh=yes freeze=unchanged
cancel                             completed                        refused workflow_completed
cancel                             completed_with_follow_up_record  refused workflow_completed
cancel                             failed_retryable                 ok next=cancelled node=enrolling at=- comp=release_to_ready refresh=yes freeze=unchanged
cancel                             failed_manual_intervention       ok next=cancelled node=enrolling at=- comp=release_to_ready refresh=yes freeze=unchanged
cancel                             cancelled                        refused workflow_cancelled
adopt_observed_state               running                          refused workflow_running
adopt_observed_state               completed                        refused workflow_completed
adopt_observed_state               completed_with_follow_up_record  refused workflow_completed
adopt_observed_state               failed_retryable                 ok next=running node=- at=ensure_hardware_sync_configured comp=- refresh=no freeze=unchanged
adopt_observed_state               failed_manual_intervention       ok next=running node=- at=ensure_hardware_sync_configured comp=- refresh=no freeze=unchanged
adopt_observed_state               cancelled                        refused workflow_cancelled
mark_manual_intervention_required  running                          ok next=failed_manual_intervention node=enrolling at=- comp=- refresh=no freeze=set
mark_manual_intervention_required  completed                        refused workflow_completed
mark_manual_intervention_required  completed_with_follow_up_record  refused workflow_completed
mark_manual_intervention_required  failed_retryable                 ok next=failed_manual_intervention node=enrolling at=- comp=- refresh=no freeze=set
mark_manual_intervention_required  failed_manual_intervention       ok next=failed_manual_intervention node=enrolling at=- comp=- refresh=no freeze=set
mark_manual_intervention_required  cancelled                        refused workflow_cancelled
";
    assert_eq!(table(ActorRole::Operator), expect);
    // Operators and SREs have the same rights.
    assert_eq!(table(ActorRole::Sre), expect);
}

#[test]
fn automation_acts_like_a_person_except_past_the_manual_intervention_boundary() {
    let person = table(ActorRole::Operator);
    let automation = table(ActorRole::Automation);
    let differences: Vec<String> = person
        .lines()
        .zip(automation.lines())
        .filter(|(p, a)| p != a)
        .map(|(_, a)| a.split_whitespace().take(4).collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(
        differences,
        [
            "retry_stage failed_manual_intervention refused needs_a_person",
            "resume failed_manual_intervention refused needs_a_person",
            "rerun failed_manual_intervention refused needs_a_person",
            "restart_clean failed_manual_intervention refused needs_a_person",
            "cancel failed_manual_intervention refused needs_a_person",
            "adopt_observed_state failed_manual_intervention refused needs_a_person",
        ]
    );
}

#[test]
fn retry_stage_only_where_the_row_retries() {
    let retry = |stage| {
        render(&authorize(
            &status(stage, WorkflowState::FailedRetryable.into()),
            &request(ActorRole::Operator, RecoveryAction::RetryStage),
        ))
    };
    for stage in Stage::all() {
        let refused = retry(stage) == "refused stage_not_retryable";
        let expected = matches!(stage.row().retryability, Retryability::UsuallyNo | Retryability::BestEffort);
        assert_eq!(refused, expected, "{}", stage.as_str());
    }
    // "usually no", "best-effort": a fix or a fallback, not a retry.
    assert_eq!(retry(Stage::Onboarding(O::ConfigureStorage)), "refused stage_not_retryable");
    assert_eq!(retry(Stage::Onboarding(O::ClassifyDeployFailure)), "refused stage_not_retryable");
    assert_eq!(retry(Stage::Decommission(D::RemoveMaasRecord)), "refused stage_not_retryable");
    // `deploy_via_maas`: "do not blindly retry; refresh state first".
    assert_eq!(
        retry(Stage::Onboarding(O::DeployViaMaas)),
        "ok next=running node=enrolling at=deploy_via_maas comp=- refresh=yes freeze=unchanged"
    );
}

#[test]
fn restart_clean_needs_the_row_to_name_a_compensation() {
    for stage in Stage::all() {
        let decision = authorize(
            &status(stage, WorkflowState::FailedRetryable.into()),
            &request(ActorRole::Operator, RecoveryAction::RestartClean),
        );
        match stage.row().compensation {
            None => assert_eq!(decision, Err(Refusal::NoCompensationPath { stage }), "{}", stage.as_str()),
            Some(compensation) => {
                let authorized = decision.unwrap();
                assert_eq!(authorized.compensation, Some(compensation));
                assert_eq!(authorized.restart_at, Some(first_stage(stage.workflow())));
                assert_eq!(authorized.refresh_observed_state_first, compensation.changes_maas());
            }
        }
    }
    let validation = authorize(
        &status(Stage::Decommission(D::CleanupStorageScrubGpuValidateCleanNode), WorkflowState::FailedRetryable.into()),
        &request(ActorRole::Operator, RecoveryAction::RestartClean),
    );
    assert_eq!(
        render(&validation),
        "ok next=running node=- at=disable_node comp=quarantine_on_failed_validation refresh=no freeze=unchanged"
    );
}

#[test]
fn cancel_compensates_where_the_row_can_and_stops_anyway_where_it_cannot() {
    let cancel = |stage| {
        render(&authorize(&status(stage, Lifecycle::RUNNING), &request(ActorRole::Operator, RecoveryAction::Cancel)))
    };
    assert_eq!(
        cancel(Stage::Onboarding(O::CommissionNode)),
        "ok next=cancelled node=enrolling at=- comp=- refresh=no freeze=unchanged"
    );
    assert_eq!(
        cancel(Stage::Onboarding(O::RenderCloudInit)),
        "ok next=cancelled node=enrolling at=- comp=delete_partial_node_row refresh=no freeze=unchanged"
    );
}

#[test]
fn adopt_observed_state_needs_the_observation_and_continues_after_the_checkpoint() {
    let adopt = |stage, satisfies| {
        let mut status = status(stage, WorkflowState::FailedRetryable.into());
        status.observed_satisfies_checkpoint = satisfies;
        render(&authorize(&status, &request(ActorRole::Automation, RecoveryAction::AdoptObservedState)))
    };
    assert_eq!(
        adopt(Stage::Onboarding(O::WaitForAgentEnrollment), false),
        "refused observation_does_not_satisfy_checkpoint"
    );
    // "node-agent enrolls after workflow already marked failure": the last stage's checkpoint is the goal.
    assert_eq!(
        adopt(Stage::Onboarding(O::WaitForAgentEnrollment), true),
        "ok next=completed node=- at=- comp=- refresh=no freeze=unchanged"
    );
    assert_eq!(
        adopt(Stage::Onboarding(O::WaitForReady), true),
        "ok next=running node=- at=configure_storage comp=- refresh=no freeze=unchanged"
    );
    assert_eq!(
        adopt(Stage::Decommission(D::RemoveMaasRecord), true),
        "ok next=completed node=- at=- comp=- refresh=no freeze=unchanged"
    );
}

#[test]
fn stage_after_walks_each_workflow_to_its_end_and_the_deploy_failure_back_to_the_deploy() {
    let walk = |mut stage: Stage| {
        let mut stages = vec![stage.as_str()];
        while let Some(next) = stage_after(stage) {
            stages.push(next.as_str());
            stage = next;
            // A walk that does not end fails here, at once (cargo-mutants found one that spun, docs/testing.md).
            assert!(stages.len() <= OnboardingStage::ALL.len(), "no end: {stages:?}");
        }
        stages
    };
    let onboarding = walk(first_stage(Workflow::Onboarding));
    assert_eq!(onboarding.len(), 14);
    assert!(!onboarding.contains(&"classify_deploy_failure"));
    assert_eq!(walk(first_stage(Workflow::Decommission)).len(), 11);
    assert_eq!(
        stage_after(Stage::Onboarding(O::ClassifyDeployFailure)),
        Some(Stage::Onboarding(O::RecoverForDatasourceRetry))
    );
    assert_eq!(stage_after(Stage::Onboarding(O::RecoverForDatasourceRetry)), Some(Stage::Onboarding(O::DeployViaMaas)));
}

#[test]
fn a_frozen_workflow_refuses_automation_and_waits_for_a_person_who_resolved_it() {
    let mut frozen =
        status(Stage::Onboarding(O::WaitForHardwareSyncHealthy), WorkflowState::FailedManualIntervention.into());
    frozen.frozen = true;
    for action in RecoveryAction::ALL {
        let by_automation = authorize(&frozen, &request(ActorRole::Automation, action));
        let by_person = authorize(&frozen, &request(ActorRole::Operator, action));
        let mut resolved = request(ActorRole::Operator, action);
        resolved.resolves_freeze = true;
        let by_resolver = authorize(&frozen, &resolved);
        if action == RecoveryAction::MarkManualInterventionRequired {
            for decision in [by_automation, by_person, by_resolver] {
                assert_eq!(decision, Err(Refusal::AlreadyFrozen));
            }
            continue;
        }
        assert_eq!(by_automation, Err(Refusal::FrozenAgainstAutomation { action }));
        assert_eq!(by_person, Err(Refusal::FrozenUntilResolved { action }));
        match by_resolver {
            Ok(authorized) => assert_eq!(authorized.freeze, FreezeChange::Lifted, "{}", action.as_str()),
            // The freeze is lifted only by an action that is itself allowed: this row has no compensation.
            Err(refusal) => assert_eq!(
                (action, refusal),
                (RecoveryAction::RestartClean, Refusal::NoCompensationPath { stage: frozen.stage })
            ),
        }
    }
    // Automation may freeze (the driver's own stop past the boundary); it may not do anything else there.
    let unfrozen =
        status(Stage::Onboarding(O::WaitForHardwareSyncHealthy), WorkflowState::FailedManualIntervention.into());
    let mark = authorize(&unfrozen, &request(ActorRole::Automation, RecoveryAction::MarkManualInterventionRequired));
    assert_eq!(mark.unwrap().freeze, FreezeChange::Set);
    // resolves_freeze on a workflow that is not frozen changes nothing.
    let mut resume = request(ActorRole::Operator, RecoveryAction::Resume);
    resume.resolves_freeze = true;
    assert_eq!(authorize(&unfrozen, &resume).unwrap().freeze, FreezeChange::Unchanged);
}

#[test]
fn a_request_without_its_audit_fields_or_with_a_secret_in_its_reason_is_refused() {
    let base = status(Stage::Onboarding(O::WaitForReady), WorkflowState::FailedRetryable.into());
    let resume = request(ActorRole::Operator, RecoveryAction::Resume);
    let refuse = |edit: fn(&mut OperatorRequest)| {
        let mut request = resume.clone();
        edit(&mut request);
        authorize(&base, &request).unwrap_err()
    };
    assert_eq!(refuse(|r| r.actor_id.clear()), Refusal::MissingAuditField { field: AuditField::ActorIdAndRole });
    assert_eq!(refuse(|r| r.reason = "  ".into()), Refusal::MissingAuditField { field: AuditField::Reason });
    assert_eq!(refuse(|r| r.correlation_id.clear()), Refusal::MissingAuditField { field: AuditField::CorrelationId });
    assert_eq!(
        refuse(|r| r.reason = format!("token {SECRET_MARKER}abc123 expired")),
        Refusal::CarriesSecret { field: AuditField::Reason }
    );
    assert_eq!(
        refuse(|r| r.correlation_id = format!("{SECRET_MARKER}abc123")),
        Refusal::CarriesSecret { field: AuditField::CorrelationId }
    );
    assert_eq!(
        refuse(|r| r.actor_id = format!("{SECRET_MARKER}abc123")),
        Refusal::CarriesSecret { field: AuditField::ActorIdAndRole }
    );
    assert!(authorize(&base, &resume).is_ok());
}

#[test]
#[should_panic(expected = "a stage of another workflow")]
fn a_status_whose_stage_belongs_to_another_workflow_is_a_bug() {
    let mut impossible = status(Stage::Onboarding(O::WaitForReady), WorkflowState::FailedRetryable.into());
    impossible.workflow = Workflow::Decommission;
    let _ = authorize(&impossible, &request(ActorRole::Operator, RecoveryAction::Resume));
}

/// One of every refusal.
fn every_refusal() -> Vec<Refusal> {
    let stage = Stage::Onboarding(O::ConfigureStorage);
    let action = RecoveryAction::Resume;
    let mut refusals: Vec<Refusal> =
        AuditField::ALL.into_iter().map(|field| Refusal::MissingAuditField { field }).collect();
    refusals.extend(AuditField::ALL.into_iter().map(|field| Refusal::CarriesSecret { field }));
    refusals.extend([
        Refusal::WorkflowCancelled { action },
        Refusal::AlreadyFrozen,
        Refusal::FrozenAgainstAutomation { action },
        Refusal::FrozenUntilResolved { action },
        Refusal::NeedsAPerson { action },
        Refusal::WorkflowRunning { action },
        Refusal::WorkflowCompleted { action, state: WorkflowState::Completed },
        Refusal::StageNotRetryable { stage },
        Refusal::ObservationDoesNotSatisfyCheckpoint { stage },
        Refusal::NoCompensationPath { stage },
    ]);
    refusals
}

#[test]
fn refusals_read_as_sentences_a_person_can_act_on() {
    for refusal in every_refusal() {
        let text = refusal.to_string();
        assert!(text.starts_with(|c: char| c.is_lowercase()), "{text}");
        assert!(!text.ends_with('.'), "{text}");
        assert!(!text.contains("  "), "{text}");
        let json = serde_json::to_string(&refusal).unwrap();
        assert_eq!(serde_json::from_str::<Refusal>(&json).unwrap(), refusal);
    }
    assert_eq!(
        Refusal::StageNotRetryable { stage: Stage::Onboarding(O::ConfigureStorage) }.to_string(),
        "stage configure_storage is not retryable (the matrix says \"usually no\"; its safe default: \
         \"fix hardware/site assumptions then rerun\")"
    );
    assert_eq!(
        Refusal::NeedsAPerson { action: RecoveryAction::Rerun }.to_string(),
        "the workflow is failed_manual_intervention: only a person (operator or sre) may rerun it"
    );
}

#[test]
fn lifecycle_serialises_as_the_matrix_words_plus_cancelled() {
    for state in WorkflowState::ALL {
        assert_eq!(serde_json::to_value(Lifecycle::from(state)).unwrap(), serde_json::to_value(state).unwrap());
    }
    assert_eq!(serde_json::to_string(&Lifecycle::Cancelled).unwrap(), "\"cancelled\"");
    assert!(serde_json::from_str::<Lifecycle>("\"paused\"").is_err());
}

#[test]
fn an_audit_record_round_trips_as_one_journal_line_and_is_complete_when_accepted() {
    let base = status(Stage::Onboarding(O::WaitForAgentEnrollment), WorkflowState::FailedRetryable.into());
    let adopt = request(ActorRole::Sre, RecoveryAction::AdoptObservedState);
    let decision = authorize(&base, &adopt);
    let record = AuditRecord::of(&base, &adopt, &decision);
    assert_eq!(record.expected_next_state, Lifecycle::Workflow(WorkflowState::Completed));
    assert_eq!(record.missing_fields(), []);
    assert!(!record.carries_secret());
    let line = record.encode();
    assert!(line.starts_with("audit {"), "{line}");
    assert!(!line.contains('\n'));
    assert_eq!(AuditRecord::decode(&line), Some(Ok(record.clone())));
    let settled = record.settled(Lifecycle::Workflow(WorkflowState::Completed));
    assert_eq!(AuditRecord::decode(&settled.encode()), Some(Ok(settled)));
    assert_eq!(AuditRecord::decode("onboard {\"record\":\"run_started\"}"), None);
    assert!(AuditRecord::decode("audit {\"actor_id\":\"x\"}").unwrap().is_err());
    assert!(AuditRecord::decode(&line.replace("\"reason\"", "\"unknown\":1,\"reason\"")).unwrap().is_err());
}

#[test]
fn missing_fields_names_each_empty_field_in_the_seeds_order() {
    let base = status(Stage::Onboarding(O::WaitForReady), Lifecycle::RUNNING);
    let mut mark = request(ActorRole::Automation, RecoveryAction::MarkManualInterventionRequired);
    mark.reason.clear();
    mark.correlation_id.clear();
    let decision = authorize(&base, &mark);
    assert_eq!(decision, Err(Refusal::MissingAuditField { field: AuditField::Reason }));
    let mut record = AuditRecord::of(&base, &mark, &decision);
    assert_eq!(record.expected_next_state, Lifecycle::RUNNING, "a refusal changes nothing");
    assert_eq!(record.missing_fields(), [AuditField::Reason, AuditField::CorrelationId]);
    record.workflow_id.clear();
    record.actor_id = " ".into();
    assert_eq!(
        record.missing_fields(),
        [AuditField::ActorIdAndRole, AuditField::WorkflowIdAndRunId, AuditField::Reason, AuditField::CorrelationId]
    );
    record.reason = format!("{SECRET_MARKER}x");
    assert!(record.carries_secret());
}

/// A request authorized on the status the journal gives, recorded, and its status advanced, as a driver would.
fn act(lines: &mut Vec<String>, status: &mut WorkflowStatus, request: &OperatorRequest) -> Result<Authorized, Refusal> {
    status.frozen = is_frozen(&status.workflow_id, lines.iter().map(String::as_str)).unwrap();
    let decision = authorize(status, request);
    let record = AuditRecord::of(status, request, &decision);
    lines.push(record.encode());
    if let Ok(authorized) = &decision {
        status.state = authorized.next_state;
        lines.push(record.settled(authorized.next_state).encode());
    }
    decision
}

/// Found by cargo-mutants (`docs/testing.md`): the same refused request made twice is two requests in the trail, not
/// one settling the other (only a line that repeats a record with its actual next state settles it).
#[test]
fn the_same_refused_request_twice_is_two_requests() {
    let mut lines = Vec::new();
    let mut status = status(Stage::Onboarding(O::WaitForAgentEnrollment), WorkflowState::Running.into());
    let resume = request(ActorRole::Operator, RecoveryAction::Resume);
    assert!(act(&mut lines, &mut status, &resume).is_err(), "a running workflow is not resumed");
    assert!(act(&mut lines, &mut status, &resume).is_err());
    assert_eq!(lines[0], lines[1], "the same words twice");
    let trail = AuditTrail::of(&status.workflow_id, lines.iter().map(String::as_str)).unwrap();
    assert_eq!(trail.records.len(), 2);
    assert!(trail.records.iter().all(|record| record.actual_next_state.is_none()));
}

#[test]
fn the_journal_says_when_a_workflow_is_frozen_and_when_the_freeze_was_lifted() {
    let mut lines = vec!["onboard {\"record\":\"run_started\",\"workflow\":\"onboard-node-07\",\"run\":2}".to_owned()];
    let mut status = status(Stage::Onboarding(O::WaitForAgentEnrollment), WorkflowState::FailedRetryable.into());
    let mut other = status.clone();
    other.workflow_id = "onboard-node-08".into();
    let frozen = |lines: &Vec<String>, id: &str| is_frozen(id, lines.iter().map(String::as_str)).unwrap();

    let mark = request(ActorRole::Automation, RecoveryAction::MarkManualInterventionRequired);
    assert!(act(&mut lines, &mut status, &mark).is_ok());
    assert!(frozen(&lines, "onboard-node-07"));
    assert!(!frozen(&lines, "onboard-node-08"), "one workflow's freeze is its own");

    let resume = request(ActorRole::Automation, RecoveryAction::Resume);
    assert_eq!(act(&mut lines, &mut status, &resume), Err(Refusal::FrozenAgainstAutomation { action: resume.action }));
    let mut again = mark.clone();
    again.correlation_id = "INC-4712".into();
    assert_eq!(act(&mut lines, &mut status, &again), Err(Refusal::AlreadyFrozen));
    assert!(frozen(&lines, "onboard-node-07"), "refusals change nothing");

    let mut resolved = request(ActorRole::Operator, RecoveryAction::Resume);
    resolved.resolves_freeze = true;
    assert_eq!(act(&mut lines, &mut status, &resolved).unwrap().freeze, FreezeChange::Lifted);
    assert!(!frozen(&lines, "onboard-node-07"));

    // A second freeze with the first request's exact words is a new request, not a settlement of the old one.
    status.state = WorkflowState::FailedRetryable.into();
    assert!(act(&mut lines, &mut status, &mark).is_ok());
    assert!(frozen(&lines, "onboard-node-07"));

    let trail = AuditTrail::of("onboard-node-07", lines.iter().map(String::as_str)).unwrap();
    let summary: Vec<String> = trail
        .records
        .iter()
        .map(|r| {
            format!(
                "{} {} {} -> {}",
                r.actor_role.as_str(),
                r.requested_action.as_str(),
                if r.is_accepted() { "accepted" } else { "refused" },
                r.actual_next_state.map_or("-", Lifecycle::as_str)
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            "automation mark_manual_intervention_required accepted -> failed_manual_intervention",
            "automation resume refused -> -",
            "automation mark_manual_intervention_required refused -> -",
            "operator resume accepted -> running",
            "automation mark_manual_intervention_required accepted -> failed_manual_intervention",
        ]
    );
    assert!(trail.records.iter().all(|r| r.missing_fields().is_empty()));
    let corrupt = ["audit {\"actor_id\":".to_owned()];
    assert!(is_frozen("onboard-node-07", corrupt.iter().map(String::as_str)).is_err());
}

fn any_stage() -> impl Strategy<Value = Stage> {
    let stages: Vec<Stage> = Stage::all().collect();
    proptest::sample::select(stages)
}

/// Mostly a usable text, so that about half the requests pass the audit checks and reach the state rules.
fn any_text() -> impl Strategy<Value = String> {
    prop_oneof![
        1 => Just(String::new()),
        1 => Just(" ".to_owned()),
        1 => Just(format!("{SECRET_MARKER}k")),
        12 => "[a-z0-9-]{1,12}",
    ]
}

prop_compose! {
    fn any_case()(
        stage in any_stage(),
        state in proptest::sample::select(Lifecycle::ALL.to_vec()),
        node_state in proptest::sample::select(NodeState::ALL.to_vec()),
        frozen: bool,
        observed_satisfies_checkpoint: bool,
        actor_id in any_text(),
        actor_role in proptest::sample::select(ActorRole::ALL.to_vec()),
        action in proptest::sample::select(RecoveryAction::ALL.to_vec()),
        reason in any_text(),
        correlation_id in any_text(),
        resolves_freeze: bool,
    ) -> (WorkflowStatus, OperatorRequest) {
        let status = WorkflowStatus {
            workflow: stage.workflow(),
            workflow_id: "w".into(),
            run_id: 1,
            state,
            stage,
            node_state,
            frozen,
            observed_satisfies_checkpoint,
        };
        let request = OperatorRequest { actor_id, actor_role, action, reason, correlation_id, resolves_freeze };
        (status, request)
    }
}

proptest! {
    /// The safety properties every rule serves, for any status and request.
    #[test]
    fn every_accepted_request_is_safe_and_fully_audited((status, request) in any_case()) {
        let decision = authorize(&status, &request);
        let record = AuditRecord::of(&status, &request, &decision);
        prop_assert_eq!(AuditRecord::decode(&record.encode()), Some(Ok(record.clone())));
        if let Ok(authorized) = decision {
            prop_assert_eq!(record.missing_fields(), Vec::<AuditField>::new());
            prop_assert!(!record.carries_secret());
            prop_assert!(!status.frozen || request.actor_role.is_person());
            prop_assert!(!(status.frozen && request.action == RecoveryAction::MarkManualInterventionRequired));
            prop_assert_eq!(authorized.freeze == FreezeChange::Lifted, status.frozen);
            prop_assert!(status.state != Lifecycle::Cancelled);
            prop_assert!(!matches!(
                status.state,
                Lifecycle::Workflow(WorkflowState::Completed | WorkflowState::CompletedWithFollowUpRecord)
            ));
            if authorized.restart_at.is_some() {
                prop_assert_eq!(authorized.next_state, Lifecycle::RUNNING);
                prop_assert!(status.state != Lifecycle::RUNNING, "never a second run beside a running one");
            }
            if request.action == RecoveryAction::AdoptObservedState {
                prop_assert!(status.observed_satisfies_checkpoint);
            }
            if authorized.compensation.is_some_and(Compensation::changes_maas) {
                prop_assert!(authorized.refresh_observed_state_first);
            }
        }
    }
}

const RECOVERY_ACTIONS_MD: &str = include_str!("../../../docs/recovery-actions.md");

#[test]
fn the_recovery_actions_doc_names_every_action_and_refusal() {
    for action in RecoveryAction::ALL {
        let row = format!("| `{}` |", action.as_str());
        assert!(RECOVERY_ACTIONS_MD.contains(&row), "docs/recovery-actions.md has no row for {}", action.as_str());
    }
    for refusal in every_refusal() {
        let tag = serde_json::to_value(refusal).unwrap()["refusal"].as_str().unwrap().to_owned();
        assert!(RECOVERY_ACTIONS_MD.contains(&format!("`{tag}`")), "docs/recovery-actions.md does not name {tag}");
    }
    for state in Lifecycle::ALL {
        assert!(RECOVERY_ACTIONS_MD.contains(&format!("`{state}`")), "docs/recovery-actions.md does not name {state}");
    }
}
