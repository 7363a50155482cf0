//! The operator recovery actions of the recovery matrix (`seeds/000_85d03426b210b2a0.txt`, section 2) as a
//! synchronous decision: [`authorize`] says whether an [`OperatorRequest`] may act on a workflow in its
//! [`WorkflowStatus`], and what follows if it may; [`AuditRecord`] is the record section 8 requires of every request,
//! one journal line each; [`AuditTrail`] replays those lines into the requests made of one workflow and whether it is
//! frozen, so drivers and oracles share one answer.
//!
//! Architecture Invariant: no I/O, no clock, no async. The status (including whether the observed state satisfies
//! the checkpoint) and the request come in as arguments; the matrix's words live in [`crate::matrix`] and are read,
//! never restated. Each rule of [`authorize`] is written once below, citing the seed.
//!
//! API Boundary: the drivers and the simulator's scenario steps call [`authorize`], append
//! [`AuditRecord::of`]'s record before acting (an intent), perform what [`Authorized`] says, then append the record
//! again with [`AuditRecord::settled`] (the actual next state). Audit reasons are free text written by a person or
//! by automation: they are journaled and reported, so they must never carry a secret; [`authorize`] refuses a
//! request whose reason (or actor id, or correlation id) contains [`crate::secret::SECRET_MARKER`], the prefix of
//! every credential the project mints.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::matrix::{
    AuditField, Compensation, DecommissionStage, NodeState, OnboardingStage, Precondition, RecoveryAction,
    Retryability, Stage, Workflow, WorkflowState,
};
use crate::secret::SECRET_MARKER;

/// A workflow's state as the recovery API sees it: the matrix's workflow states, plus `cancelled`.
///
/// The seed's tables name no cancelled state, but its action `cancel` ("stop workflow and compensate where
/// possible") ends a workflow without completing it; none of the five states says that without lying (a
/// `failed_*` workflow is picked up again by a resume, a completed one reached its goal). Serialised as one word:
/// the [`WorkflowState`]'s serde name, or `cancelled`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum Lifecycle {
    Workflow(WorkflowState),
    /// Stopped for good by `cancel`: a new workflow, not a recovery action, is what comes next.
    Cancelled,
}

impl Lifecycle {
    pub const ALL: [Lifecycle; 6] = [
        Lifecycle::Workflow(WorkflowState::Running),
        Lifecycle::Workflow(WorkflowState::Completed),
        Lifecycle::Workflow(WorkflowState::CompletedWithFollowUpRecord),
        Lifecycle::Workflow(WorkflowState::FailedRetryable),
        Lifecycle::Workflow(WorkflowState::FailedManualIntervention),
        Lifecycle::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Lifecycle::Workflow(state) => state.as_str(),
            Lifecycle::Cancelled => "cancelled",
        }
    }

    pub fn parse(text: &str) -> Option<Lifecycle> {
        Lifecycle::ALL.into_iter().find(|state| state.as_str() == text)
    }

    const RUNNING: Lifecycle = Lifecycle::Workflow(WorkflowState::Running);
}

impl From<WorkflowState> for Lifecycle {
    fn from(state: WorkflowState) -> Lifecycle {
        Lifecycle::Workflow(state)
    }
}

impl From<Lifecycle> for String {
    fn from(state: Lifecycle) -> String {
        state.as_str().to_owned()
    }
}

impl TryFrom<String> for Lifecycle {
    type Error = String;

    fn try_from(text: String) -> Result<Lifecycle, String> {
        Lifecycle::parse(&text).ok_or_else(|| format!("unknown workflow state `{text}`"))
    }
}

impl fmt::Display for Lifecycle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a workflow rests when a request arrives. The caller reads it from its journal and its last observation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkflowStatus {
    pub workflow: Workflow,
    pub workflow_id: String,
    /// The current run (1 for the first, as [`crate::onboarding::driver::OnboardRecord::RunStarted`] counts them).
    pub run_id: u32,
    pub state: Lifecycle,
    /// The stage the workflow is at (running) or stopped at (failed, cancelled), or its last (completed). Must be a
    /// stage of `workflow`.
    pub stage: Stage,
    pub node_state: NodeState,
    /// Frozen by an accepted `mark_manual_intervention_required` not lifted since ([`AuditTrail::frozen`]).
    pub frozen: bool,
    /// The last observation of MAAS and the node satisfies `stage`'s checkpoint (section 7): a late success or an
    /// operator's out-of-band change. The caller judges it; the recovery API only relies on it.
    pub observed_satisfies_checkpoint: bool,
}

/// Who asks. Operators and SREs are people; automation is a controller, a sensor or a scheduled job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActorRole {
    Operator,
    Sre,
    Automation,
}

impl ActorRole {
    pub const ALL: [ActorRole; 3] = [ActorRole::Operator, ActorRole::Sre, ActorRole::Automation];

    pub fn as_str(self) -> &'static str {
        match self {
            ActorRole::Operator => "operator",
            ActorRole::Sre => "sre",
            ActorRole::Automation => "automation",
        }
    }

    /// Operators and SREs have the same rights here; only the people/automation line is drawn.
    pub fn is_person(self) -> bool {
        match self {
            ActorRole::Operator | ActorRole::Sre => true,
            ActorRole::Automation => false,
        }
    }
}

/// One recovery request: section 8's request-side fields, and the one decision a person makes about a freeze.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorRequest {
    pub actor_id: String,
    pub actor_role: ActorRole,
    pub action: RecoveryAction,
    /// Free text for the audit journal. Never a secret: a request whose text contains [`SECRET_MARKER`] is refused.
    pub reason: String,
    pub correlation_id: String,
    /// The person says the issue behind a freeze is resolved. On a frozen workflow, an action other than
    /// `mark_manual_intervention_required` is accepted only with this set, from a person, and lifts the freeze; on a
    /// workflow that is not frozen it changes nothing.
    pub resolves_freeze: bool,
}

/// What an accepted request does to the freeze.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FreezeChange {
    Unchanged,
    /// `mark_manual_intervention_required`: automation stops until a person resolves the issue.
    Set,
    /// A person resolved the issue (`resolves_freeze`) and acts.
    Lifted,
}

/// What follows an accepted request, for the driver to perform.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Authorized {
    pub action: RecoveryAction,
    /// The workflow's state once the action is taken.
    pub next_state: Lifecycle,
    /// The node's state once the action is taken, where the action decides it (`None`: the observation or the
    /// compensation's condition decides).
    pub node_state: Option<NodeState>,
    /// The stage the workflow runs from next (`None`: it does not run).
    pub restart_at: Option<Stage>,
    /// The resting stage's compensation (the matrix's row), run before `restart_at`. A row's compensation may be
    /// conditional ("if deploy attempt started", "if necessary"): the driver checks the condition.
    pub compensation: Option<Compensation>,
    /// Read MAAS and the node before acting (section 7: "refresh observed MAAS state before destructive or
    /// irreversible steps"; `deploy_via_maas`: "do not blindly retry; refresh state first").
    pub refresh_observed_state_first: bool,
    pub freeze: FreezeChange,
}

/// Why a request is refused. The `Display` text says what is wrong and what to do instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "refusal", rename_all = "snake_case", deny_unknown_fields)]
pub enum Refusal {
    /// A request-side audit field is empty (section 8: every action "must record" it).
    MissingAuditField { field: AuditField },
    /// A request-side audit field contains a credential's marker.
    CarriesSecret { field: AuditField },
    /// The workflow was cancelled.
    WorkflowCancelled { action: RecoveryAction },
    /// `mark_manual_intervention_required` on a frozen workflow.
    AlreadyFrozen,
    /// Automation asked to act on a frozen workflow.
    FrozenAgainstAutomation { action: RecoveryAction },
    /// A person asked to act on a frozen workflow without saying the issue is resolved.
    FrozenUntilResolved { action: RecoveryAction },
    /// Automation asked to act on a `failed_manual_intervention` workflow.
    NeedsAPerson { action: RecoveryAction },
    /// The action needs a stopped workflow.
    WorkflowRunning { action: RecoveryAction },
    /// The workflow completed.
    WorkflowCompleted { action: RecoveryAction, state: WorkflowState },
    /// `retry_stage` where the stage's row does not retry.
    StageNotRetryable { stage: Stage },
    /// `adopt_observed_state` without an observation that satisfies the checkpoint.
    ObservationDoesNotSatisfyCheckpoint { stage: Stage },
    /// `restart_clean` where the stage's row has no compensation.
    NoCompensationPath { stage: Stage },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Refusal::MissingAuditField { field } => write!(
                f,
                "the request has no {}: every recovery action is audited with it (seed 000, section 8)",
                field.text()
            ),
            Refusal::CarriesSecret { field } => write!(
                f,
                "the request's {} contains a credential (`fleetsim-secret-…`): it is written to the audit journal, \
                 so send it without the credential",
                field.text()
            ),
            Refusal::WorkflowCancelled { action } => {
                write!(f, "cannot {} a cancelled workflow: start a new workflow instead", action.as_str())
            }
            Refusal::AlreadyFrozen => f.write_str(
                "the workflow is already frozen for manual intervention: resolve the issue and send the next action \
                 with resolves_freeze",
            ),
            Refusal::FrozenAgainstAutomation { action } => write!(
                f,
                "the workflow is frozen for manual intervention: automation may not {} it until a person resolves \
                 the issue",
                action.as_str()
            ),
            Refusal::FrozenUntilResolved { action } => write!(
                f,
                "the workflow is frozen for manual intervention: to {} it, resolve the issue and say so \
                 (resolves_freeze)",
                action.as_str()
            ),
            Refusal::NeedsAPerson { action } => write!(
                f,
                "the workflow is failed_manual_intervention: only a person (operator or sre) may {} it",
                action.as_str()
            ),
            Refusal::WorkflowRunning { action } => write!(
                f,
                "cannot {} a running workflow: stop it first (cancel or mark_manual_intervention_required), or let \
                 it decide for itself",
                action.as_str()
            ),
            Refusal::WorkflowCompleted { action, state } => {
                write!(f, "the workflow has already completed ({}): nothing to {}", state.as_str(), action.as_str())
            }
            Refusal::StageNotRetryable { stage } => write!(
                f,
                "stage {} is not retryable (the matrix says \"{}\"; its safe default: \"{}\")",
                stage.as_str(),
                stage.row().retryability_text,
                stage.row().safe_default.text
            ),
            Refusal::ObservationDoesNotSatisfyCheckpoint { stage } => write!(
                f,
                "the observed state does not satisfy the checkpoint of {}: refresh the observation first, or resume \
                 or rerun",
                stage.as_str()
            ),
            Refusal::NoCompensationPath { stage } => write!(
                f,
                "stage {} has no compensation in the matrix, so restart_clean has nothing to reset: use rerun, which \
                 adopts what is already done",
                stage.as_str()
            ),
        }
    }
}

impl std::error::Error for Refusal {}

/// Whether `request` may act on the workflow in `status`, and what follows if it may.
///
/// The rules are checked in this order and the first that refuses answers: the request's audit fields, the
/// cancelled workflow, the freeze, the manual intervention boundary, then the action's own rule.
///
/// # Panics
///
/// When `status.stage` is not a stage of `status.workflow`: the caller built an impossible status (a bug).
pub fn authorize(status: &WorkflowStatus, request: &OperatorRequest) -> Result<Authorized, Refusal> {
    assert_eq!(
        status.stage.workflow(),
        status.workflow,
        "workflow {} rests at {}, a stage of another workflow",
        status.workflow_id,
        status.stage.as_str()
    );
    let action = request.action;

    // Section 8: "Every operator recovery action must record: actor id and role, ..., reason, ..., correlation id".
    // A request without them is refused, so every accepted request's audit record is complete (the role is typed and
    // always present; the workflow's fields come from the status).
    // And this project keeps secrets out of every record (`crate::secret`): the reason is free text, the most likely
    // place for a pasted token.
    for (field, text) in [
        (AuditField::ActorIdAndRole, &request.actor_id),
        (AuditField::Reason, &request.reason),
        (AuditField::CorrelationId, &request.correlation_id),
    ] {
        if text.trim().is_empty() {
            return Err(Refusal::MissingAuditField { field });
        }
        if text.contains(SECRET_MARKER) {
            return Err(Refusal::CarriesSecret { field });
        }
    }

    // `cancel`: "stop workflow" — a cancelled workflow is not recovered, it is replaced.
    let Lifecycle::Workflow(state) = status.state else {
        return Err(Refusal::WorkflowCancelled { action });
    };

    // `mark_manual_intervention_required`: "freeze automation until operator resolves issue". Automation never acts
    // on a frozen workflow; a person acts only by saying the issue is resolved, which lifts the freeze.
    let mut freeze = FreezeChange::Unchanged;
    if status.frozen {
        if action == RecoveryAction::MarkManualInterventionRequired {
            return Err(Refusal::AlreadyFrozen);
        }
        if !request.actor_role.is_person() {
            return Err(Refusal::FrozenAgainstAutomation { action });
        }
        if !request.resolves_freeze {
            return Err(Refusal::FrozenUntilResolved { action });
        }
        freeze = FreezeChange::Lifted;
    }

    // The tables' "Manual intervention boundary" column and the state `failed_manual_intervention`: past the
    // boundary a person decides. Automation may still freeze such a workflow (that only stops automation).
    if state == WorkflowState::FailedManualIntervention
        && !request.actor_role.is_person()
        && action != RecoveryAction::MarkManualInterventionRequired
    {
        return Err(Refusal::NeedsAPerson { action });
    }

    let stage = status.stage;
    let row = stage.row();
    let unchanged_node = Some(status.node_state);
    let authorized = match action {
        // `retry_stage`: "rerun only the failed stage" — there must be a failed stage (a stopped workflow), and the
        // stage's "Retryable?" column must allow it: "usually no" needs a fix first and "best-effort" falls back
        // instead (the row's safe default says what to do).
        RecoveryAction::RetryStage => {
            stopped(action, state)?;
            if matches!(row.retryability, Retryability::UsuallyNo | Retryability::BestEffort) {
                return Err(Refusal::StageNotRetryable { stage });
            }
            Authorized {
                action,
                next_state: Lifecycle::RUNNING,
                node_state: unchanged_node,
                restart_at: Some(stage),
                compensation: None,
                refresh_observed_state_first: row.safe_default.precondition == Some(Precondition::RefreshObservedState),
                freeze,
            }
        }
        // `resume`: "continue from the last safe stage checkpoint" — the checkpoint is the stage it stopped at.
        RecoveryAction::Resume => {
            stopped(action, state)?;
            Authorized {
                action,
                next_state: Lifecycle::RUNNING,
                node_state: unchanged_node,
                restart_at: Some(stage),
                compensation: None,
                refresh_observed_state_first: row.safe_default.precondition == Some(Precondition::RefreshObservedState),
                freeze,
            }
        }
        // `rerun`: "re-enter workflow from the top with status-aware adoption" — not while a run is in progress (two
        // runs would drive one machine), and not after completion (there is nothing to converge on).
        RecoveryAction::Rerun => {
            stopped(action, state)?;
            Authorized {
                action,
                next_state: Lifecycle::RUNNING,
                node_state: unchanged_node,
                restart_at: Some(first_stage(status.workflow)),
                compensation: None,
                refresh_observed_state_first: false,
                freeze,
            }
        }
        // `restart_clean`: "explicitly compensate/reset progress, then start again" — needs a compensation path: the
        // resting stage's row must name one; and a stopped workflow, as for rerun. Section 7: refresh before a
        // compensation that changes MAAS.
        RecoveryAction::RestartClean => {
            stopped(action, state)?;
            let Some(compensation) = row.compensation else {
                return Err(Refusal::NoCompensationPath { stage });
            };
            Authorized {
                action,
                next_state: Lifecycle::RUNNING,
                node_state: node_state_after(compensation, status.node_state),
                restart_at: Some(first_stage(status.workflow)),
                compensation: Some(compensation),
                refresh_observed_state_first: compensation.changes_maas(),
                freeze,
            }
        }
        // `cancel`: "stop workflow and compensate where possible" — from any state but completed; the compensation
        // is the resting stage's, when its row has one.
        RecoveryAction::Cancel => {
            not_completed(action, state)?;
            Authorized {
                action,
                next_state: Lifecycle::Cancelled,
                node_state: match row.compensation {
                    Some(compensation) => node_state_after(compensation, status.node_state),
                    None => unchanged_node,
                },
                restart_at: None,
                compensation: row.compensation,
                refresh_observed_state_first: row.compensation.is_some_and(Compensation::changes_maas),
                freeze,
            }
        }
        // `adopt_observed_state`: "accept externally advanced MAAS/node state and continue"; section 7: "allow
        // adopt_observed_state when observed state now satisfies the intended checkpoint". From a stopped workflow
        // ("node-agent enrolls after workflow already marked failure"): a running one adopts at its own next
        // decision (`onboarding::decide`), and a second writer would race it.
        RecoveryAction::AdoptObservedState => {
            stopped(action, state)?;
            if !status.observed_satisfies_checkpoint {
                return Err(Refusal::ObservationDoesNotSatisfyCheckpoint { stage });
            }
            let restart_at = stage_after(stage);
            Authorized {
                action,
                next_state: match restart_at {
                    Some(_) => Lifecycle::RUNNING,
                    None => Lifecycle::Workflow(WorkflowState::Completed),
                },
                node_state: None,
                restart_at,
                compensation: None,
                refresh_observed_state_first: false,
                freeze,
            }
        }
        // `mark_manual_intervention_required`: "freeze automation until operator resolves issue" — from a running
        // workflow (it stops) or a failed one; a completed workflow has no automation left to freeze.
        RecoveryAction::MarkManualInterventionRequired => {
            not_completed(action, state)?;
            Authorized {
                action,
                next_state: Lifecycle::Workflow(WorkflowState::FailedManualIntervention),
                node_state: unchanged_node,
                restart_at: None,
                compensation: None,
                refresh_observed_state_first: false,
                freeze: FreezeChange::Set,
            }
        }
    };
    Ok(authorized)
}

/// The actions that restart a workflow need it stopped: `failed_retryable` or `failed_manual_intervention`.
fn stopped(action: RecoveryAction, state: WorkflowState) -> Result<(), Refusal> {
    match state {
        WorkflowState::Running => Err(Refusal::WorkflowRunning { action }),
        WorkflowState::Completed | WorkflowState::CompletedWithFollowUpRecord => {
            Err(Refusal::WorkflowCompleted { action, state })
        }
        WorkflowState::FailedRetryable | WorkflowState::FailedManualIntervention => Ok(()),
    }
}

/// `cancel` and `mark_manual_intervention_required` act on a running workflow too, not on a completed one.
fn not_completed(action: RecoveryAction, state: WorkflowState) -> Result<(), Refusal> {
    match state {
        WorkflowState::Completed | WorkflowState::CompletedWithFollowUpRecord => {
            Err(Refusal::WorkflowCompleted { action, state })
        }
        WorkflowState::Running | WorkflowState::FailedRetryable | WorkflowState::FailedManualIntervention => Ok(()),
    }
}

/// The node's state after a compensation: `None` when the compensation moves the node only on a condition the
/// driver checks ("quarantine on failed validation", "revert to retired on uninstall failure").
fn node_state_after(compensation: Compensation, node_state: NodeState) -> Option<NodeState> {
    match compensation {
        Compensation::QuarantineOnFailedValidation | Compensation::RevertToRetiredOnUninstallFailure => None,
        Compensation::UnlinkRelinkInterface
        | Compensation::DeletePartialNodeRow
        | Compensation::ReleaseToReadyIfDeployStarted
        | Compensation::ReleaseToReady
        | Compensation::AbortReleaseToCleanDeployableState
        | Compensation::AbortMarkFixedNoEraseRelease => Some(node_state),
    }
}

/// Where "the top" of a workflow is.
pub fn first_stage(workflow: Workflow) -> Stage {
    match workflow {
        Workflow::Onboarding => Stage::Onboarding(OnboardingStage::LoadSiteConfig),
        Workflow::Decommission => Stage::Decommission(DecommissionStage::DisableNode),
    }
}

/// The stage a workflow runs after `stage`'s checkpoint is satisfied, `None` after its last.
///
/// Decommission follows the seed's order. Onboarding follows it too, except for the deploy failure's handling:
/// `classify_deploy_failure` and `recover_for_datasource_retry` run only when a deploy fails, and lead back to
/// `deploy_via_maas` (the driver's main path skips them), so a satisfied `wait_for_deployed` goes on to
/// `ensure_hardware_sync_configured`.
pub fn stage_after(stage: Stage) -> Option<Stage> {
    match stage {
        Stage::Onboarding(stage) => {
            use OnboardingStage as O;
            let next = match stage {
                O::WaitForDeployed => O::EnsureHardwareSyncConfigured,
                O::ClassifyDeployFailure => O::RecoverForDatasourceRetry,
                O::RecoverForDatasourceRetry => O::DeployViaMaas,
                O::WaitForAgentEnrollment => return None,
                other => OnboardingStage::ALL[other as usize + 1],
            };
            Some(Stage::Onboarding(next))
        }
        Stage::Decommission(stage) => DecommissionStage::ALL.get(stage as usize + 1).copied().map(Stage::Decommission),
    }
}

/// Whether a request was accepted, and if not, why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case", deny_unknown_fields)]
pub enum AuditOutcome {
    Accepted {
        freeze: FreezeChange,
    },
    Refused {
        refusal: Refusal,
        /// The refusal's text, for a person reading the journal.
        text: String,
    },
}

/// Section 8's record of one recovery request: exactly the seed's fields (the compound ones split in two), the
/// outcome, and the actual next state once known. One journal line: `audit <json>`.
///
/// A request is recorded before it is acted on (`actual_next_state` empty); once the driver knows where the workflow
/// went, the same record is appended again with it ([`AuditRecord::settled`]). [`AuditTrail`] pairs them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditRecord {
    pub actor_id: String,
    pub actor_role: ActorRole,
    pub workflow_id: String,
    pub run_id: u32,
    pub prior_state: Lifecycle,
    pub prior_stage: Stage,
    pub requested_action: RecoveryAction,
    /// Free text, never a secret.
    pub reason: String,
    /// What the action leads to; for a refused request, the prior state (nothing changes).
    pub expected_next_state: Lifecycle,
    pub correlation_id: String,
    pub outcome: AuditOutcome,
    /// Written later, by the driver that performed the action.
    pub actual_next_state: Option<Lifecycle>,
}

const AUDIT_PREFIX: &str = "audit ";

impl AuditRecord {
    /// The record of `request` on `status` and [`authorize`]'s answer to it.
    pub fn of(
        status: &WorkflowStatus,
        request: &OperatorRequest,
        decision: &Result<Authorized, Refusal>,
    ) -> AuditRecord {
        let (expected_next_state, outcome) = match decision {
            Ok(authorized) => (authorized.next_state, AuditOutcome::Accepted { freeze: authorized.freeze }),
            Err(refusal) => (status.state, AuditOutcome::Refused { refusal: *refusal, text: refusal.to_string() }),
        };
        AuditRecord {
            actor_id: request.actor_id.clone(),
            actor_role: request.actor_role,
            workflow_id: status.workflow_id.clone(),
            run_id: status.run_id,
            prior_state: status.state,
            prior_stage: status.stage,
            requested_action: request.action,
            reason: request.reason.clone(),
            expected_next_state,
            correlation_id: request.correlation_id.clone(),
            outcome,
            actual_next_state: None,
        }
    }

    /// The same record with the state the workflow actually reached, to append once it is known.
    pub fn settled(&self, actual_next_state: Lifecycle) -> AuditRecord {
        AuditRecord { actual_next_state: Some(actual_next_state), ..self.clone() }
    }

    pub fn is_accepted(&self) -> bool {
        matches!(self.outcome, AuditOutcome::Accepted { .. })
    }

    pub fn encode(&self) -> String {
        format!("{AUDIT_PREFIX}{}", serde_json::to_string(self).expect("audit records serialise"))
    }

    /// `None` for another subsystem's line (or an audit line that does not decode: it is reported by replay).
    pub fn decode(line: &str) -> Option<Result<AuditRecord, String>> {
        let json = line.strip_prefix(AUDIT_PREFIX)?;
        Some(serde_json::from_str(json).map_err(|error| format!("audit record: {error}")))
    }

    /// The section 8 fields that are empty, in the seed's order. The typed fields (role, run id, states, stage,
    /// action) are present whenever the record decoded; the text fields must not be blank, and the run id is
    /// counted from 1.
    pub fn missing_fields(&self) -> Vec<AuditField> {
        let blank = |text: &str| text.trim().is_empty();
        AuditField::ALL
            .into_iter()
            .filter(|field| match field {
                AuditField::ActorIdAndRole => blank(&self.actor_id),
                AuditField::WorkflowIdAndRunId => blank(&self.workflow_id) || self.run_id == 0,
                AuditField::Reason => blank(&self.reason),
                AuditField::CorrelationId => blank(&self.correlation_id),
                AuditField::PriorWorkflowStateAndStage
                | AuditField::RequestedAction
                | AuditField::ExpectedNextState => false,
            })
            .collect()
    }

    /// Whether any text of the record carries a credential's marker (an oracle's leak check).
    pub fn carries_secret(&self) -> bool {
        let refusal_text = match &self.outcome {
            AuditOutcome::Refused { text, .. } => text.as_str(),
            AuditOutcome::Accepted { .. } => "",
        };
        [&self.actor_id, &self.workflow_id, &self.reason, &self.correlation_id]
            .into_iter()
            .map(String::as_str)
            .chain([refusal_text])
            .any(|text| text.contains(SECRET_MARKER))
    }

    /// Whether `later` is this record appended again with its actual next state.
    fn is_settled_by(&self, later: &AuditRecord) -> bool {
        self.actual_next_state.is_none()
            && later.actual_next_state.is_some()
            && AuditRecord { actual_next_state: None, ..later.clone() } == *self
    }
}

/// What the audit journal says about one workflow.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditTrail {
    /// Every request made of the workflow, in journal order, each with its actual next state once settled.
    pub records: Vec<AuditRecord>,
    /// An accepted `mark_manual_intervention_required` has not been lifted since.
    pub frozen: bool,
}

impl AuditTrail {
    /// Replays the journal's audit lines of `workflow_id` (other lines are skipped; an audit line that does not decode
    /// is an error). A line that repeats an unsettled record with its actual next state settles it; every other line
    /// is a request. The freeze is set by an accepted `mark_manual_intervention_required` and lifted by any other
    /// accepted request made while frozen ([`authorize`] accepts those only from a person who resolved the issue).
    pub fn of<'a>(workflow_id: &str, lines: impl IntoIterator<Item = &'a str>) -> Result<AuditTrail, String> {
        let mut trail = AuditTrail::default();
        for line in lines {
            let Some(record) = AuditRecord::decode(line) else { continue };
            let record = record?;
            if record.workflow_id != workflow_id {
                continue;
            }
            if let Some(earlier) = trail.records.iter_mut().rev().find(|earlier| earlier.is_settled_by(&record)) {
                earlier.actual_next_state = record.actual_next_state;
                continue;
            }
            if record.is_accepted() {
                trail.frozen = record.requested_action == RecoveryAction::MarkManualInterventionRequired;
            }
            trail.records.push(record);
        }
        Ok(trail)
    }
}

/// Whether the journal says `workflow_id` is frozen: the one answer drivers and oracles share.
pub fn is_frozen<'a>(workflow_id: &str, lines: impl IntoIterator<Item = &'a str>) -> Result<bool, String> {
    Ok(AuditTrail::of(workflow_id, lines)?.frozen)
}

/// Whether the journal says the drivers must not act on `workflow_id`: frozen by an accepted
/// `mark_manual_intervention_required` not lifted since, or cancelled. `Some` names the reason, for the stop; `Err`
/// says a journal line of the workflow does not decode.
pub fn halted<'a>(workflow_id: &str, lines: impl IntoIterator<Item = &'a str>) -> Result<Option<String>, String> {
    let trail = AuditTrail::of(workflow_id, lines)?;
    if trail.frozen {
        return Ok(Some("frozen for manual intervention until a person resolves the issue".to_owned()));
    }
    let cancelled =
        trail.records.iter().any(|record| record.is_accepted() && record.requested_action == RecoveryAction::Cancel);
    Ok(cancelled.then(|| "cancelled by an operator".to_owned()))
}

#[cfg(test)]
mod tests;
