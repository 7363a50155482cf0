//! Operator recovery actions performed: a request is read against the workflow's journal, authorized, audited
//! before anything is done, and turned into what the caller must do next; the settled record follows once the
//! workflow's state after the action is known.
//!
//! Architecture Invariant: the decision is [`crate::recovery::authorize`]'s; this module only reads the journal (the
//! workflow's status), appends audit lines and, for an `adopt_observed_state` past the workflow's last stage, the
//! completion the adoption is. It never acts on MAAS, the fleet or the hub itself: [`observe_onboarding_checkpoint`]
//! and [`observe_decommission_checkpoint`] only read them for the caller, and the caller has the workflow's driver
//! compensate and run it ([`NextStep`]).
//!
//! Every action that restarts an onboarding workflow (`retry_stage`, `resume`, `rerun`, `restart_clean`, and an
//! `adopt_observed_state` with a stage after the adopted one) is performed as a **rerun from the top with status-aware
//! adoption**: the driver adopts every checkpoint MAAS shows satisfied (seed 000, section 9: "fresh-node onboarding
//! should optimize for safe full rerun"), so a rerun ends where a resume or a retry of the stage would, without a
//! second way into the middle of a run. `restart_clean` ("explicitly compensate/reset progress, then start again")
//! first has the driver perform the resting stage's compensation, as a `cancel` does
//! ([`NextStep::CompensateThenRun`]), then reruns. A decommission's `resume`, `retry_stage` and `adopt_observed_state`
//! are entered at the authorized stage instead (`run_decommission_from`): its rerun would redo node tasks a
//! powered-off node cannot take. The authorized `restart_at` is returned to the caller ([`Applied::authorized`]). An
//! `adopt_observed_state` of the last stage (`wait_for_agent_enrollment`, `remove_maas_record`) runs nothing: it
//! records the workflow completed.

use crate::decommission::judge as decommission_judge;
use crate::decommission::record::DecommissionRecord;
use crate::matrix::{
    Compensation, DecommissionStage, NodeState, OnboardingStage, RecoveryAction, Stage, Workflow, WorkflowState,
};
use crate::onboarding::record::OnboardRecord;
use crate::ports::events::WorkflowEvent;
use crate::ports::fleet::Fleet;
use crate::ports::site::{MaasApi, MachineStatus, PowerState};
use crate::ports::{Hub, Journal, JournalError, Signal, Signals};
use crate::workflow::Observed;

use crate::recovery::{AuditRecord, AuditTrail, Authorized, Lifecycle, OperatorRequest, WorkflowStatus, authorize};

/// What the caller does after the request is audited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextStep {
    /// Run the workflow again (a rerun from the top with status-aware adoption), then [`settle_after_run`].
    Run,
    /// Nothing runs: the request was refused, or its effect is the journal lines already appended (`cancel`,
    /// `mark_manual_intervention_required`, an adoption of the last stage). The record is already settled.
    Nothing,
    /// `cancel` ("stop workflow and compensate where possible") of a workflow resting at `stage` whose row names a
    /// compensation: the caller has the workflow's driver perform it (`compensate_cancelled`), which journals and
    /// reports what it did or could not do. The record is already settled (`cancelled`).
    Compensate { stage: Stage, compensation: Compensation },
    /// `restart_clean` ("explicitly compensate/reset progress, then start again") of a workflow resting at `stage`:
    /// the caller has the workflow's driver perform the row's compensation first, exactly as for a cancel
    /// (`compensate_cancelled`: after a fresh read, journaled and reported as recovery work), then runs the workflow
    /// as for [`NextStep::Run`] and [`settle_after_run`]. The record is not settled yet.
    CompensateThenRun { stage: Stage, compensation: Compensation },
}

/// What [`apply_operator_action`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The audit record as first appended (no actual next state yet).
    pub record: AuditRecord,
    /// The settled record, when it is already known ([`NextStep::Nothing`]).
    pub settled: Option<AuditRecord>,
    pub authorized: Option<Authorized>,
    pub next: NextStep,
}

/// The status of `workflow_id` as its journal lines tell it: the last run's state and stage, overridden by accepted
/// `cancel` and `mark_manual_intervention_required` requests made after it, and the freeze.
///
/// A workflow with no run yet is its first run about to start (`running` at the first stage, run 1): the controller
/// starts every workflow it is given.
pub fn workflow_status<'a>(
    workflow: Workflow,
    workflow_id: &str,
    lines: impl IntoIterator<Item = &'a str> + Clone,
    observed_satisfies_checkpoint: bool,
) -> Result<WorkflowStatus, String> {
    let mut run_id = 1;
    let mut state = Lifecycle::Workflow(WorkflowState::Running);
    let mut stage = crate::recovery::first_stage(workflow);
    for line in lines.clone() {
        if let Some(record) = AuditRecord::decode(line) {
            let record = record?;
            // A settled line repeats a request already counted.
            if record.workflow_id != workflow_id || record.actual_next_state.is_some() || !record.is_accepted() {
                continue;
            }
            match record.requested_action {
                RecoveryAction::Cancel => state = Lifecycle::Cancelled,
                RecoveryAction::MarkManualInterventionRequired => {
                    state = Lifecycle::Workflow(WorkflowState::FailedManualIntervention);
                }
                _ => {}
            }
            continue;
        }
        match workflow {
            Workflow::Onboarding => {
                let Some(record) = OnboardRecord::decode(line) else { continue };
                match record? {
                    OnboardRecord::RunStarted { workflow, run } if workflow == workflow_id => {
                        run_id = run;
                        state = Lifecycle::Workflow(WorkflowState::Running);
                        stage = crate::recovery::first_stage(Workflow::Onboarding);
                    }
                    OnboardRecord::Checkpoint { workflow, stage: at, .. } if workflow == workflow_id => {
                        stage = Stage::Onboarding(at);
                    }
                    OnboardRecord::Stopped { workflow, stage: at, workflow_state, .. } if workflow == workflow_id => {
                        stage = Stage::Onboarding(at);
                        state = Lifecycle::Workflow(workflow_state);
                    }
                    OnboardRecord::Completed { workflow, .. } if workflow == workflow_id => {
                        stage = Stage::Onboarding(OnboardingStage::WaitForAgentEnrollment);
                        state = Lifecycle::Workflow(WorkflowState::Completed);
                    }
                    _ => {}
                }
            }
            Workflow::Decommission => {
                let Some(record) = DecommissionRecord::decode(line) else { continue };
                match record? {
                    DecommissionRecord::RunStarted { workflow, run } if workflow == workflow_id => {
                        run_id = run;
                        state = Lifecycle::Workflow(WorkflowState::Running);
                        stage = crate::recovery::first_stage(Workflow::Decommission);
                    }
                    DecommissionRecord::Checkpoint { workflow, stage: at, .. } if workflow == workflow_id => {
                        stage = Stage::Decommission(at);
                    }
                    DecommissionRecord::Stopped { workflow, stage: at, workflow_state, .. }
                        if workflow == workflow_id =>
                    {
                        stage = Stage::Decommission(at);
                        state = Lifecycle::Workflow(workflow_state);
                    }
                    DecommissionRecord::Completed { workflow, workflow_state, .. } if workflow == workflow_id => {
                        stage = Stage::Decommission(DecommissionStage::RemoveMaasRecord);
                        state = Lifecycle::Workflow(workflow_state);
                    }
                    _ => {}
                }
            }
        }
    }
    let frozen = AuditTrail::of(workflow_id, lines)?.frozen;
    Ok(WorkflowStatus {
        workflow,
        workflow_id: workflow_id.to_owned(),
        run_id,
        state,
        stage,
        node_state: node_state(stage, state),
        frozen,
        observed_satisfies_checkpoint,
    })
}

/// The node's state where the workflow rests (the recovery API only passes it through).
fn node_state(stage: Stage, state: Lifecycle) -> NodeState {
    let completed =
        matches!(state, Lifecycle::Workflow(WorkflowState::Completed | WorkflowState::CompletedWithFollowUpRecord));
    match stage {
        Stage::Onboarding(_) if completed => NodeState::Active,
        Stage::Onboarding(_) => NodeState::Enrolling,
        Stage::Decommission(_) if completed => NodeState::Deleted,
        Stage::Decommission(DecommissionStage::LoadSiteConfig | DecommissionStage::DisableNode) => NodeState::Active,
        Stage::Decommission(_) => NodeState::Quarantined,
    }
}

/// Performs `request` on `workflow_id`: reads the journal, authorizes, appends the audit record before acting, and
/// says what the caller does next. An adoption that completes the workflow is signalled as its completion.
/// `observed_satisfies_checkpoint` is the caller's fresh observation (section 7; see [`observe_onboarding_checkpoint`]
/// and [`observe_decommission_checkpoint`]).
///
/// # Errors
///
/// The journal cannot be read or written, or holds a line of this workflow that does not decode.
pub async fn apply_operator_action<J: Journal, G: Signals>(
    journal: &J,
    signals: &G,
    workflow: Workflow,
    workflow_id: &str,
    request: &OperatorRequest,
    observed_satisfies_checkpoint: bool,
) -> Result<Applied, ApplyError> {
    let lines = journal.replay_subject(workflow_id).await?;
    let status =
        workflow_status(workflow, workflow_id, lines.iter().map(String::as_str), observed_satisfies_checkpoint)
            .map_err(ApplyError::Corrupt)?;
    let decision = authorize(&status, request);
    let record = AuditRecord::of(&status, request, &decision);
    // Section 8: recorded before the action, accepted or refused.
    journal.append(&record.encode()).await?;
    let authorized = match decision {
        Ok(authorized) => authorized,
        Err(_) => {
            let settled = record.settled(status.state);
            journal.append(&settled.encode()).await?;
            return Ok(Applied { record, settled: Some(settled), authorized: None, next: NextStep::Nothing });
        }
    };
    let runs = matches!(
        authorized.action,
        RecoveryAction::RetryStage | RecoveryAction::Resume | RecoveryAction::Rerun | RecoveryAction::RestartClean
    ) || (authorized.action == RecoveryAction::AdoptObservedState && authorized.restart_at.is_some());
    if runs {
        // `restart_clean` is authorized only where the resting stage's row names a compensation: it comes first.
        let next = match (authorized.action, authorized.compensation) {
            (RecoveryAction::RestartClean, Some(compensation)) => {
                NextStep::CompensateThenRun { stage: status.stage, compensation }
            }
            _ => NextStep::Run,
        };
        return Ok(Applied { record, settled: None, authorized: Some(authorized), next });
    }
    if authorized.action == RecoveryAction::AdoptObservedState {
        // The observation satisfies the last stage's checkpoint: the workflow is complete, nothing is redone.
        let completion = match workflow {
            Workflow::Onboarding => OnboardRecord::Completed {
                workflow: workflow_id.to_owned(),
                run: status.run_id,
                system_id: crate::onboarding::record::last_system_id(workflow_id, &lines).unwrap_or_default(),
            }
            .encode(),
            Workflow::Decommission => DecommissionRecord::Completed {
                workflow: workflow_id.to_owned(),
                run: status.run_id,
                workflow_state: WorkflowState::Completed,
            }
            .encode(),
        };
        journal.append(&completion).await?;
        let event = WorkflowEvent::Completed {
            system_id: crate::onboarding::record::last_system_id(workflow_id, &lines).unwrap_or_default(),
        };
        let workflow_id = workflow_id.to_owned();
        signals.emit(match workflow {
            Workflow::Onboarding => Signal::Onboarding { workflow: workflow_id, event },
            Workflow::Decommission => Signal::Decommission { workflow: workflow_id, event },
        });
    }
    let lines = journal.replay_subject(workflow_id).await?;
    let after =
        workflow_status(workflow, workflow_id, lines.iter().map(String::as_str), false).map_err(ApplyError::Corrupt)?;
    let settled = record.settled(after.state);
    journal.append(&settled.encode()).await?;
    // A running workflow is halted by its own driver at its next stage; a resting one is compensated now.
    let next = match authorized.compensation {
        Some(compensation)
            if authorized.action == RecoveryAction::Cancel
                && status.state != Lifecycle::Workflow(WorkflowState::Running) =>
        {
            NextStep::Compensate { stage: status.stage, compensation }
        }
        _ => NextStep::Nothing,
    };
    Ok(Applied { record, settled: Some(settled), authorized: Some(authorized), next })
}

/// Appends `record` settled once the caller's run of the workflow ([`NextStep::Run`], [`NextStep::CompensateThenRun`])
/// has returned: `running` when the action started a new run (the state the action put the workflow in, whatever the
/// run then reached), else the state the journal shows (a driver that found the workflow halted started none).
pub async fn settle_after_run<J: Journal>(
    journal: &J,
    workflow: Workflow,
    record: &AuditRecord,
) -> Result<AuditRecord, ApplyError> {
    let lines = journal.replay_subject(&record.workflow_id).await?;
    let after = workflow_status(workflow, &record.workflow_id, lines.iter().map(String::as_str), false)
        .map_err(ApplyError::Corrupt)?;
    let actual = if after.run_id > record.run_id { Lifecycle::Workflow(WorkflowState::Running) } else { after.state };
    let settled = record.settled(actual);
    journal.append(&settled.encode()).await?;
    Ok(settled)
}

/// A fresh observation (section 7: "allow adopt_observed_state when observed state now satisfies the intended
/// checkpoint") of an onboarding workflow resting at `stage`: the node's agent registered at the hub
/// (`wait_for_agent_enrollment`), its machine `Deployed` (`deploy_via_maas`, `wait_for_deployed`) or `Ready`
/// (`commission_node`, `wait_for_ready`), found by its PXE MAC. Any other stage, and a read that fails, is not
/// satisfied.
pub async fn observe_onboarding_checkpoint<M: MaasApi, H: Hub>(
    maas: &M,
    hub: &H,
    node: &str,
    pxe_mac: &str,
    stage: Stage,
) -> bool {
    let machine_is = |wanted: MachineStatus| async move {
        let mac = pxe_mac.to_lowercase();
        maas.machines().await.is_ok_and(|machines| {
            machines.iter().any(|machine| machine.macs.contains(&mac) && machine.status == wanted)
        })
    };
    use OnboardingStage as S;
    match stage {
        Stage::Onboarding(S::WaitForAgentEnrollment) => hub
            .read_heartbeats()
            .await
            .is_ok_and(|snapshot| snapshot.instances.iter().any(|row| row.instance == node && row.registered)),
        Stage::Onboarding(S::DeployViaMaas | S::WaitForDeployed) => machine_is(MachineStatus::Deployed).await,
        Stage::Onboarding(S::CommissionNode | S::WaitForReady) => machine_is(MachineStatus::Ready).await,
        _ => false,
    }
}

/// A fresh observation (section 7: "allow adopt_observed_state when observed state now satisfies the intended
/// checkpoint") of a decommission workflow resting at `stage`, read now from the inventory (`node`'s record) or from
/// MAAS (the machine named `hostname`, as `load_site_config` finds it) and judged as the driver judges its own
/// refresh ([`crate::decommission::judge`]):
///
/// - `disable_node`: the record quarantined or retired; `force_release_allocations`: no allocation left on a node
///   out of service; `retire_gpuaas_node`: the record retired; `remove_gpuaas_node_record`: no record any more;
/// - `release_maas_node`: the machine Ready (a person released it, or MAAS finished the release out of the
///   workflow's sight); `power_off_maas_node`: the machine Ready and MAAS's power query answering off;
///   `remove_maas_record`: MAAS has no machine of that name.
///
/// The node tasks (`drain_node`, the cleanup and validation), `load_site_config` (a read) and `cleanup_secrets` leave
/// nothing to observe, and a read that fails is no observation: not satisfied.
pub async fn observe_decommission_checkpoint<M: MaasApi, F: Fleet>(
    maas: &M,
    fleet: &F,
    node: &str,
    hostname: &str,
    stage: Stage,
) -> bool {
    use DecommissionStage as D;
    let Stage::Decommission(stage) = stage else { return false };
    match stage {
        D::DisableNode | D::ForceReleaseAllocations | D::RetireGpuaasNode | D::RemoveGpuaasNodeRecord => {
            let Ok(record) = fleet.record(node).await else { return false };
            decommission_judge::observed_record(stage, record.as_ref()) == Observed::SatisfiesCheckpoint
        }
        D::ReleaseMaasNode | D::PowerOffMaasNode | D::RemoveMaasRecord => {
            let Ok(machines) = maas.machines().await else { return false };
            match (stage, decommission_judge::machine_of(&machines, hostname)) {
                (D::RemoveMaasRecord, None) => true,
                (D::ReleaseMaasNode, Some(machine)) => machine.status == MachineStatus::Ready,
                (D::PowerOffMaasNode, Some(machine)) if machine.status == MachineStatus::Ready => {
                    maas.power_state(&machine.system_id).await == Ok(PowerState::Off)
                }
                _ => false,
            }
        }
        D::DrainNode | D::CleanupStorageScrubGpuValidateCleanNode | D::LoadSiteConfig | D::CleanupSecrets => false,
    }
}

/// Why an action could not be performed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    #[error("journal: {0}")]
    Journal(#[from] JournalError),
    #[error("{0}")]
    Corrupt(String),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recovery::{ActorRole, AuditOutcome, Refusal, halted};

    fn request(action: RecoveryAction, role: ActorRole, resolves_freeze: bool) -> OperatorRequest {
        OperatorRequest {
            actor_id: "alice".into(),
            actor_role: role,
            action,
            reason: "ticket OPS-1".into(),
            correlation_id: "corr-1".into(),
            resolves_freeze,
        }
    }

    fn failed_run() -> Vec<String> {
        vec![
            OnboardRecord::RunStarted { workflow: "w".into(), run: 1 }.encode(),
            OnboardRecord::Checkpoint {
                workflow: "w".into(),
                run: 1,
                stage: OnboardingStage::WaitForAgentEnrollment,
                attempt: 1,
                system_id: Some("abc".into()),
            }
            .encode(),
            OnboardRecord::Stopped {
                workflow: "w".into(),
                run: 1,
                stage: OnboardingStage::WaitForAgentEnrollment,
                class: crate::matrix::FailureClass::AgentEnrollmentFailure,
                workflow_state: WorkflowState::FailedRetryable,
            }
            .encode(),
        ]
    }

    struct NoSignals;

    impl Signals for NoSignals {
        fn emit(&self, _signal: Signal) {}
    }

    /// A journal in memory.
    #[derive(Default)]
    struct Lines(std::cell::RefCell<Vec<String>>);

    impl Journal for Lines {
        async fn append(&self, record: &str) -> Result<(), JournalError> {
            self.0.borrow_mut().push(record.to_owned());
            Ok(())
        }
        async fn replay(&self) -> Result<Vec<String>, JournalError> {
            Ok(self.0.borrow().clone())
        }
    }

    fn block_on<T>(future: impl Future<Output = T>) -> T {
        let waker = std::task::Waker::noop();
        let mut context = std::task::Context::from_waker(waker);
        let mut future = std::pin::pin!(future);
        loop {
            if let std::task::Poll::Ready(value) = future.as_mut().poll(&mut context) {
                return value;
            }
        }
    }

    #[test]
    fn the_status_is_the_last_runs_and_an_accepted_freeze_overrides_it() {
        let lines = failed_run();
        let status = workflow_status(Workflow::Onboarding, "w", lines.iter().map(String::as_str), false).unwrap();
        assert_eq!(status.state, Lifecycle::Workflow(WorkflowState::FailedRetryable));
        assert_eq!(status.stage, Stage::Onboarding(OnboardingStage::WaitForAgentEnrollment));
        assert_eq!((status.run_id, status.frozen), (1, false));
        let fresh = workflow_status(Workflow::Onboarding, "w", std::iter::empty(), false).unwrap();
        assert_eq!((fresh.run_id, fresh.state), (1, Lifecycle::Workflow(WorkflowState::Running)));
    }

    #[test]
    fn a_freeze_is_audited_before_it_acts_refuses_automation_and_is_lifted_by_a_person() {
        let journal = Lines(std::cell::RefCell::new(failed_run()));
        let mark = request(RecoveryAction::MarkManualInterventionRequired, ActorRole::Operator, false);
        let applied =
            block_on(apply_operator_action(&journal, &NoSignals, Workflow::Onboarding, "w", &mark, false)).unwrap();
        assert_eq!(applied.next, NextStep::Nothing);
        assert_eq!(
            applied.settled.unwrap().actual_next_state,
            Some(Lifecycle::Workflow(WorkflowState::FailedManualIntervention))
        );
        let lines = journal.0.borrow().clone();
        assert!(halted("w", lines.iter().map(String::as_str)).unwrap().is_some());

        let automation = request(RecoveryAction::Resume, ActorRole::Automation, false);
        let refused =
            block_on(apply_operator_action(&journal, &NoSignals, Workflow::Onboarding, "w", &automation, false))
                .unwrap();
        assert!(matches!(
            refused.record.outcome,
            AuditOutcome::Refused { refusal: Refusal::FrozenAgainstAutomation { .. }, .. }
        ));
        assert_eq!(refused.next, NextStep::Nothing);

        let person = request(RecoveryAction::Resume, ActorRole::Sre, true);
        let accepted =
            block_on(apply_operator_action(&journal, &NoSignals, Workflow::Onboarding, "w", &person, false)).unwrap();
        assert_eq!(accepted.next, NextStep::Run);
        let lines = journal.0.borrow().clone();
        assert_eq!(halted("w", lines.iter().map(String::as_str)).unwrap(), None);
        // The driver did not run: the workflow rests where it was, and the settled record says so.
        let settled = block_on(settle_after_run(&journal, Workflow::Onboarding, &accepted.record)).unwrap();
        assert_eq!(settled.actual_next_state, Some(Lifecycle::Workflow(WorkflowState::FailedManualIntervention)));
        let trail = AuditTrail::of("w", journal.0.borrow().iter().map(String::as_str)).unwrap();
        assert_eq!(trail.records.len(), 3);
        assert!(trail.records.iter().all(|record| record.actual_next_state.is_some()));
    }

    #[test]
    fn adopting_the_last_stage_completes_without_a_run_and_an_unsatisfied_observation_is_refused() {
        let journal = Lines(std::cell::RefCell::new(failed_run()));
        let adopt = request(RecoveryAction::AdoptObservedState, ActorRole::Operator, false);
        let refused =
            block_on(apply_operator_action(&journal, &NoSignals, Workflow::Onboarding, "w", &adopt, false)).unwrap();
        assert!(matches!(
            refused.record.outcome,
            AuditOutcome::Refused { refusal: Refusal::ObservationDoesNotSatisfyCheckpoint { .. }, .. }
        ));
        let adopted =
            block_on(apply_operator_action(&journal, &NoSignals, Workflow::Onboarding, "w", &adopt, true)).unwrap();
        assert_eq!(adopted.next, NextStep::Nothing);
        assert_eq!(adopted.settled.unwrap().actual_next_state, Some(Lifecycle::Workflow(WorkflowState::Completed)));
        let lines = journal.0.borrow().clone();
        let history = crate::onboarding::record::OnboardHistory::of("w", lines.iter().map(String::as_str)).unwrap();
        assert_eq!(history.completed.as_deref(), Some("abc"));
    }

    fn onboarding_stopped_at(stage: OnboardingStage) -> Vec<String> {
        vec![
            OnboardRecord::RunStarted { workflow: "w".into(), run: 1 }.encode(),
            OnboardRecord::Checkpoint {
                workflow: "w".into(),
                run: 1,
                stage,
                attempt: 3,
                system_id: Some("abc".into()),
            }
            .encode(),
            OnboardRecord::Stopped {
                workflow: "w".into(),
                run: 1,
                stage,
                class: crate::matrix::FailureClass::DeployCloudInitFailure,
                workflow_state: WorkflowState::FailedManualIntervention,
            }
            .encode(),
        ]
    }

    #[test]
    fn restart_clean_compensates_the_resting_stage_before_its_run_and_settles_after_it() {
        let stage = OnboardingStage::DeployViaMaas;
        let journal = Lines(std::cell::RefCell::new(onboarding_stopped_at(stage)));
        let restart = request(RecoveryAction::RestartClean, ActorRole::Operator, false);
        let applied =
            block_on(apply_operator_action(&journal, &NoSignals, Workflow::Onboarding, "w", &restart, false)).unwrap();
        assert_eq!(
            applied.next,
            NextStep::CompensateThenRun {
                stage: Stage::Onboarding(stage),
                compensation: crate::matrix::Compensation::ReleaseToReadyIfDeployStarted,
            }
        );
        assert_eq!(applied.settled, None, "settled once the run returned, not before the compensation");
        assert_eq!(applied.record.expected_next_state, Lifecycle::Workflow(WorkflowState::Running));
        // The rerun started: the record settles `running`.
        journal.0.borrow_mut().push(OnboardRecord::RunStarted { workflow: "w".into(), run: 2 }.encode());
        let settled = block_on(settle_after_run(&journal, Workflow::Onboarding, &applied.record)).unwrap();
        assert_eq!(settled.actual_next_state, Some(Lifecycle::Workflow(WorkflowState::Running)));
        // A plain rerun compensates nothing first; a stage whose row names no compensation refuses restart_clean.
        let journal = Lines(std::cell::RefCell::new(onboarding_stopped_at(stage)));
        let rerun = request(RecoveryAction::Rerun, ActorRole::Operator, false);
        let applied =
            block_on(apply_operator_action(&journal, &NoSignals, Workflow::Onboarding, "w", &rerun, false)).unwrap();
        assert_eq!(applied.next, NextStep::Run);
        let journal = Lines(std::cell::RefCell::new(failed_run()));
        let refused =
            block_on(apply_operator_action(&journal, &NoSignals, Workflow::Onboarding, "w", &restart, false)).unwrap();
        assert!(matches!(
            refused.record.outcome,
            AuditOutcome::Refused { refusal: Refusal::NoCompensationPath { .. }, .. }
        ));
        assert_eq!(refused.next, NextStep::Nothing);
    }

    /// MAAS as one machine named `node-02` (or none), for the decommission's observations: only reads are answered.
    struct OneMachine {
        status: Option<MachineStatus>,
        power: PowerState,
        answers: bool,
    }

    impl MaasApi for OneMachine {
        async fn machines(&self) -> Result<Vec<crate::ports::site::Machine>, crate::ports::site::MaasError> {
            if !self.answers {
                return Err(crate::ports::site::MaasError::Http {
                    status: 503,
                    message: "unavailable".into(),
                    retry_after_s: Some(5),
                });
            }
            Ok(self
                .status
                .iter()
                .map(|status| crate::ports::site::Machine {
                    system_id: "abc123".into(),
                    hostname: "node-02".into(),
                    status: status.clone(),
                    status_message: String::new(),
                    power_address: Some("node-02".into()),
                    macs: Vec::new(),
                    enable_hw_sync: false,
                    hw_sync_healthy: false,
                })
                .collect())
        }
        async fn machine(&self, _: &str) -> Result<crate::ports::site::Machine, crate::ports::site::MaasError> {
            unreachable!("the observation lists the machines")
        }
        async fn create_machine(
            &self,
            _: &crate::ports::site::NewMachine,
        ) -> Result<crate::ports::site::Machine, crate::ports::site::MaasError> {
            unreachable!("an observation changes nothing")
        }
        async fn commission(&self, _: &str) -> Result<crate::ports::site::Machine, crate::ports::site::MaasError> {
            unreachable!("an observation changes nothing")
        }
        async fn events(
            &self,
            _: &str,
            _: Option<u64>,
        ) -> Result<Vec<crate::ports::site::MaasEvent>, crate::ports::site::MaasError> {
            unreachable!()
        }
        async fn disks(&self, _: &str) -> Result<Vec<crate::ports::site::Disk>, crate::ports::site::MaasError> {
            unreachable!()
        }
        async fn set_boot_disk(&self, _: &str, _: u64) -> Result<(), crate::ports::site::MaasError> {
            unreachable!("an observation changes nothing")
        }
        async fn interfaces(
            &self,
            _: &str,
        ) -> Result<Vec<crate::ports::site::Interface>, crate::ports::site::MaasError> {
            unreachable!()
        }
        async fn subnets(&self) -> Result<Vec<crate::ports::site::Subnet>, crate::ports::site::MaasError> {
            unreachable!()
        }
        async fn region_services(
            &self,
        ) -> Result<Vec<crate::ports::site::RegionService>, crate::ports::site::MaasError> {
            unreachable!()
        }
        async fn link_subnet_auto(&self, _: &str, _: u64, _: u64) -> Result<(), crate::ports::site::MaasError> {
            unreachable!("an observation changes nothing")
        }
        async fn disconnect_interface(&self, _: &str, _: u64) -> Result<(), crate::ports::site::MaasError> {
            unreachable!("an observation changes nothing")
        }
        async fn deploy(
            &self,
            _: &str,
            _: &crate::secret::Secret,
            _: bool,
        ) -> Result<crate::ports::site::Machine, crate::ports::site::MaasError> {
            unreachable!("an observation changes nothing")
        }
        async fn release(
            &self,
            _: &str,
            _: bool,
        ) -> Result<crate::ports::site::Machine, crate::ports::site::MaasError> {
            unreachable!("an observation changes nothing")
        }
        async fn abort(&self, _: &str) -> Result<crate::ports::site::Machine, crate::ports::site::MaasError> {
            unreachable!("an observation changes nothing")
        }
        async fn mark_fixed(&self, _: &str) -> Result<crate::ports::site::Machine, crate::ports::site::MaasError> {
            unreachable!("an observation changes nothing")
        }
        async fn power_off(&self, _: &str) -> Result<(), crate::ports::site::MaasError> {
            unreachable!("an observation changes nothing")
        }
        async fn power_on(&self, _: &str) -> Result<(), crate::ports::site::MaasError> {
            unreachable!("an observation changes nothing")
        }
        async fn power_state(&self, _: &str) -> Result<PowerState, crate::ports::site::MaasError> {
            Ok(self.power)
        }
        async fn delete_machine(&self, _: &str) -> Result<(), crate::ports::site::MaasError> {
            unreachable!("an observation changes nothing")
        }
    }

    /// The inventory as one record (or none), for the decommission's observations: only reads are answered.
    struct OneRecord(Option<crate::ports::fleet::FleetRecord>);

    impl Fleet for OneRecord {
        async fn record(
            &self,
            _: &str,
        ) -> Result<Option<crate::ports::fleet::FleetRecord>, crate::ports::fleet::FleetError> {
            Ok(self.0.clone())
        }
        async fn transition(&self, _: &str, _: NodeState, _: NodeState) -> Result<(), crate::ports::fleet::FleetError> {
            unreachable!("an observation changes nothing")
        }
        async fn release_allocations(&self, _: &str, _: bool) -> Result<Vec<String>, crate::ports::fleet::FleetError> {
            unreachable!("an observation changes nothing")
        }
        async fn run_task(
            &self,
            _: &str,
            _: crate::ports::fleet::NodeTask,
            _: &str,
        ) -> Result<crate::ports::fleet::TaskOutcome, crate::ports::fleet::FleetError> {
            unreachable!("an observation changes nothing")
        }
        async fn remove_record(&self, _: &str) -> Result<(), crate::ports::fleet::FleetError> {
            unreachable!("an observation changes nothing")
        }
    }

    fn record_in(state: NodeState, allocations: &[&str]) -> OneRecord {
        OneRecord(Some(crate::ports::fleet::FleetRecord {
            state,
            allocations: allocations.iter().map(|id| (*id).to_owned()).collect(),
            agent_installed: true,
        }))
    }

    fn observe(maas: &OneMachine, fleet: &OneRecord, stage: DecommissionStage) -> bool {
        block_on(observe_decommission_checkpoint(maas, fleet, "node-02", "node-02", Stage::Decommission(stage)))
    }

    #[test]
    fn a_decommission_checkpoint_is_observed_in_maas_or_the_inventory() {
        use DecommissionStage as D;
        let machine = |status: Option<MachineStatus>, power: PowerState| OneMachine { status, power, answers: true };
        let ready_off = machine(Some(MachineStatus::Ready), PowerState::Off);
        let ready_on = machine(Some(MachineStatus::Ready), PowerState::On);
        let deployed = machine(Some(MachineStatus::Deployed), PowerState::Off);
        let erasing = machine(Some(MachineStatus::DiskErasing), PowerState::On);
        let gone = machine(None, PowerState::Unknown);
        let silent = OneMachine { status: Some(MachineStatus::Ready), power: PowerState::Off, answers: false };
        let quarantined = record_in(NodeState::Quarantined, &[]);
        // The release: a Ready machine (released by a person, or by MAAS out of sight); not one still erasing,
        // deployed, gone (ownership unclear), or a MAAS that does not answer.
        assert!(observe(&ready_off, &quarantined, D::ReleaseMaasNode));
        for maas in [&deployed, &erasing, &gone, &silent] {
            assert!(!observe(maas, &quarantined, D::ReleaseMaasNode), "{:?}", maas.status);
        }
        // The power-off: released and the power reads off.
        assert!(observe(&ready_off, &quarantined, D::PowerOffMaasNode));
        assert!(!observe(&ready_on, &quarantined, D::PowerOffMaasNode));
        assert!(!observe(&deployed, &quarantined, D::PowerOffMaasNode), "a deployed machine is not released");
        // The MAAS record's removal: no machine of that name.
        assert!(observe(&gone, &quarantined, D::RemoveMaasRecord));
        assert!(!observe(&ready_off, &quarantined, D::RemoveMaasRecord));
        assert!(!observe(&silent, &quarantined, D::RemoveMaasRecord), "no answer is no observation");
        // The inventory's stages, from the node's record.
        assert!(observe(&ready_off, &quarantined, D::DisableNode));
        assert!(!observe(&ready_off, &record_in(NodeState::Active, &[]), D::DisableNode));
        assert!(observe(&ready_off, &quarantined, D::ForceReleaseAllocations));
        assert!(!observe(&ready_off, &record_in(NodeState::Quarantined, &["a-1"]), D::ForceReleaseAllocations));
        assert!(!observe(&ready_off, &record_in(NodeState::Active, &[]), D::ForceReleaseAllocations), "in service");
        assert!(observe(&ready_off, &record_in(NodeState::Retired, &[]), D::RetireGpuaasNode));
        assert!(!observe(&ready_off, &quarantined, D::RetireGpuaasNode));
        assert!(observe(&ready_off, &OneRecord(None), D::RemoveGpuaasNodeRecord));
        assert!(!observe(&ready_off, &record_in(NodeState::Retired, &[]), D::RemoveGpuaasNodeRecord));
        // Nothing to observe: the node tasks, the site configuration's read, the secrets; and another workflow's stage.
        for stage in [D::DrainNode, D::CleanupStorageScrubGpuValidateCleanNode, D::LoadSiteConfig, D::CleanupSecrets] {
            assert!(!observe(&ready_off, &quarantined, stage), "{stage:?}");
        }
        let onboarding = Stage::Onboarding(OnboardingStage::WaitForReady);
        assert!(!block_on(observe_decommission_checkpoint(&ready_off, &quarantined, "node-02", "node-02", onboarding)));
    }

    #[test]
    fn an_observed_decommission_release_is_adopted_and_the_run_goes_on_at_the_power_off() {
        let w = "decommission-node-02";
        let stopped_at = |stage: DecommissionStage| {
            vec![
                DecommissionRecord::RunStarted { workflow: w.into(), run: 1 }.encode(),
                DecommissionRecord::Checkpoint { workflow: w.into(), run: 1, stage, attempt: 1 }.encode(),
                DecommissionRecord::Stopped {
                    workflow: w.into(),
                    run: 1,
                    stage,
                    class: crate::matrix::FailureClass::StateAmbiguity,
                    workflow_state: WorkflowState::FailedManualIntervention,
                }
                .encode(),
            ]
        };
        let adopt = request(RecoveryAction::AdoptObservedState, ActorRole::Operator, false);
        let journal = Lines(std::cell::RefCell::new(stopped_at(DecommissionStage::ReleaseMaasNode)));
        let refused =
            block_on(apply_operator_action(&journal, &NoSignals, Workflow::Decommission, w, &adopt, false)).unwrap();
        assert!(matches!(
            refused.record.outcome,
            AuditOutcome::Refused { refusal: Refusal::ObservationDoesNotSatisfyCheckpoint { .. }, .. }
        ));
        let observed = observe(
            &OneMachine { status: Some(MachineStatus::Ready), power: PowerState::Off, answers: true },
            &record_in(NodeState::Quarantined, &[]),
            DecommissionStage::ReleaseMaasNode,
        );
        let adopted =
            block_on(apply_operator_action(&journal, &NoSignals, Workflow::Decommission, w, &adopt, observed)).unwrap();
        assert_eq!(adopted.next, NextStep::Run);
        let authorized = adopted.authorized.unwrap();
        assert_eq!(authorized.restart_at, Some(Stage::Decommission(DecommissionStage::PowerOffMaasNode)));
        assert_eq!(authorized.compensation, None, "nothing is undone");
        // The last stage's checkpoint observed (the MAAS record gone): completed without a run.
        let journal = Lines(std::cell::RefCell::new(stopped_at(DecommissionStage::RemoveMaasRecord)));
        let observed = observe(
            &OneMachine { status: None, power: PowerState::Unknown, answers: true },
            &OneRecord(None),
            DecommissionStage::RemoveMaasRecord,
        );
        let completed =
            block_on(apply_operator_action(&journal, &NoSignals, Workflow::Decommission, w, &adopt, observed)).unwrap();
        assert_eq!(completed.next, NextStep::Nothing);
        assert_eq!(completed.settled.unwrap().actual_next_state, Some(Lifecycle::Workflow(WorkflowState::Completed)));
    }
}
