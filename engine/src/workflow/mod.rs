//! The workflow core the onboarding and decommission workflows share: the decision after a failed stage of the
//! recovery matrix (`seeds/000_85d03426b210b2a0.txt`). [`decide`] says whether to retry the stage (bounded, with
//! backoff and the compensation to run first), to refresh the observed MAAS state first, to go on (adopt observed
//! state, skip a non-fatal stage), or to stop with the workflow and node states the stage's row allows.
//!
//! Architecture Invariant: no I/O, no clock, no async: time and observations come in as arguments. The matrix's
//! words live in [`crate::matrix`]; this module holds only their interpretation, each rule written once below, and
//! tests that walk every (stage, failure class) pair of the table.

pub mod after_failure;
pub mod failure;
pub mod ids;
pub mod record;

use crate::matrix::{
    Compensation, DecommissionStage, FailureClass, NodeState, NodeStates, OnboardingStage, Precondition, Qualifier,
    RecoveryAction, Retryability, Stage, StageRow, WorkflowState,
};

/// Attempts of one stage within one run, the first included ("put a limit on everything", even for "yes").
pub const ATTEMPTS_MAX_DEFAULT: u32 = 3;
/// Runs of one workflow that may end `failed_retryable` before the next exhaustion needs a person (section 6:
/// "failed_retryable then failed_manual_intervention after bounded attempts").
pub const FAILED_RUNS_MAX_DEFAULT: u32 = 2;

/// How often and how patiently a stage is retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts of one stage in one run, the first included.
    pub attempts_max: u32,
    /// The wait after the first failed attempt; each later one doubles it.
    pub backoff_base_ms: u64,
    pub backoff_cap_ms: u64,
    /// A workflow whose earlier runs already ended `failed_retryable` this many times escalates to
    /// `failed_manual_intervention` where the row allows it.
    pub failed_runs_max: u32,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts_max: ATTEMPTS_MAX_DEFAULT,
            backoff_base_ms: 15_000,
            backoff_cap_ms: 240_000,
            failed_runs_max: FAILED_RUNS_MAX_DEFAULT,
        }
    }
}

impl RetryPolicy {
    /// The wait after attempt `attempt` (1-based) failed: `base × 2^(attempt-1)`, capped. No jitter here: a driver
    /// that wants it adds a draw from its seeded stream.
    pub fn delay_ms(&self, attempt: u32) -> u64 {
        let exponent = attempt.saturating_sub(1).min(32);
        self.backoff_base_ms.saturating_mul(1u64 << exponent).min(self.backoff_cap_ms)
    }
}

/// The site policies the matrix's words defer to ("if policy allows", "policy says mandatory").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SitePolicy {
    /// `apply_roce_phase2`: "required interface missing and policy says mandatory".
    pub roce_mandatory: bool,
    /// `release_maas_node`: "fallback no-erase if policy allows".
    pub no_erase_release_allowed: bool,
    /// `remove_maas_record`: "resume if policy requires delete".
    pub maas_delete_required: bool,
}

/// What the last read of MAAS and the node says, compared with what the workflow expects at this stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Observed {
    /// Not read since the failure.
    Stale,
    /// As the workflow expects: the failure is what its class says.
    AsExpected,
    /// Already satisfies the stage's checkpoint: a late success, or an operator advanced it out of band.
    SatisfiesCheckpoint,
    /// Conflicts with the workflow (deleted, advanced elsewhere, a second machine claims the node): ownership unclear.
    Conflicting,
}

/// Everything [`decide`] needs besides the stage, the class and the attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecideContext {
    /// The node's state when the stage failed.
    pub node_state: NodeState,
    pub observed: Observed,
    pub retry: RetryPolicy,
    pub policy: SitePolicy,
    /// Earlier runs of this workflow that ended `failed_retryable`.
    pub failed_runs: u32,
    /// `deploy_via_maas`: MAAS accepted the deploy before the failure.
    pub deploy_attempt_started: bool,
    /// `render_cloud_init`: a partial node row was written before the failure.
    pub partial_node_row_exists: bool,
    /// `release_maas_node`: the no-erase fallback already ran in this run.
    pub fallback_taken: bool,
    /// The section 6 timeout that ended the failed attempt, if one did.
    pub timed_out: Option<crate::matrix::TimeoutKind>,
}

impl DecideContext {
    /// A context with the default policies and nothing observed yet.
    pub fn new(node_state: NodeState) -> DecideContext {
        DecideContext {
            node_state,
            observed: Observed::Stale,
            retry: RetryPolicy::default(),
            policy: SitePolicy::default(),
            failed_runs: 0,
            deploy_attempt_started: false,
            partial_node_row_exists: false,
            fallback_taken: false,
            timed_out: None,
        }
    }
}

/// Why a workflow goes on past a failed stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContinueReason {
    /// Section 7: "allow adopt_observed_state when observed state now satisfies the intended checkpoint".
    AdoptObservedState,
    /// `apply_roce_phase2`, "yes/non-fatal": "resume or skip if policy allows".
    SkipNonFatalStage,
}

/// Why a workflow stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The class is not one this stage retries.
    NotRetryable,
    /// The stage retries the class, and the attempts ran out.
    AttemptsExhausted,
    /// Section 7: "move to state_ambiguity / failed_manual_intervention when ownership is unclear".
    OwnershipUnclear,
    /// A "best-effort" stage failed and fell back.
    BestEffort,
    /// The request was refused before the stage began: nothing was changed (a decommission of a worker something
    /// still references).
    Refused,
}

/// Where a stopped workflow leaves things.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stop {
    pub workflow_state: WorkflowState,
    pub node_state: NodeState,
    pub reason: StopReason,
    /// What comes next: the row's default for a resume of a `failed_retryable` workflow,
    /// `mark_manual_intervention_required` for `failed_manual_intervention`, nothing for a completed one.
    pub next_action: Option<RecoveryAction>,
    /// Run before the workflow rests.
    pub compensation: Option<Compensation>,
    /// The row's qualifier, for the driver to honour (record a follow-up, classify as a generic deploy failure, ...).
    pub qualifier: Option<Qualifier>,
}

/// What to do after a stage failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Read MAAS and the node, then decide again with the observation (section 7: "refresh observed MAAS state before
    /// destructive or irreversible steps"; `deploy_via_maas`: "do not blindly retry; refresh state first").
    RefreshObservedState,
    /// Run `compensation` (if any), wait `delay_ms`, then take `action` for attempt `attempt_next` of `attempts_max`.
    Retry {
        action: RecoveryAction,
        attempt_next: u32,
        attempts_max: u32,
        delay_ms: u64,
        compensation: Option<Compensation>,
    },
    /// The workflow goes on, `running`.
    Continue {
        reason: ContinueReason,
    },
    Stop(Stop),
}

impl Decision {
    pub fn is_retry(&self) -> bool {
        matches!(self, Decision::Retry { .. })
    }

    /// The workflow's state once the decision is taken.
    pub fn workflow_state(&self) -> WorkflowState {
        match self {
            Decision::RefreshObservedState | Decision::Retry { .. } | Decision::Continue { .. } => {
                WorkflowState::Running
            }
            Decision::Stop(stop) => stop.workflow_state,
        }
    }

    pub fn compensation(&self) -> Option<Compensation> {
        match self {
            Decision::Retry { compensation, .. } => *compensation,
            Decision::Stop(stop) => stop.compensation,
            Decision::RefreshObservedState | Decision::Continue { .. } => None,
        }
    }
}

/// The decision after attempt `attempt` (1-based) of `stage` failed with `failure`.
///
/// Section 7's rules come first, for every stage: an observation that satisfies the checkpoint is adopted; a
/// conflicting one stops the workflow as ownership-unclear, with no compensation (nothing destructive on a machine
/// the workflow may not own); an ambiguity, a row that says "refresh state first", or a compensation that changes
/// MAAS waits for a fresh observation. A refresh that shows what the workflow expects resolves an ambiguity, and what
/// remains is treated as `upstream_transient`. Then the stage's row decides: [`retries`] says whether the class is
/// retried, the retry policy bounds it, and a stop lands in a state the row lists.
pub fn decide(stage: Stage, failure: FailureClass, attempt: u32, ctx: &DecideContext) -> Decision {
    let row = stage.row();
    let needs_fresh_observation = failure == FailureClass::StateAmbiguity
        || row.safe_default.precondition == Some(Precondition::RefreshObservedState);
    match ctx.observed {
        Observed::SatisfiesCheckpoint => {
            return Decision::Continue { reason: ContinueReason::AdoptObservedState };
        }
        Observed::Conflicting => return Decision::Stop(ownership_unclear(row, ctx)),
        Observed::Stale if needs_fresh_observation => return Decision::RefreshObservedState,
        Observed::Stale | Observed::AsExpected => {}
    }
    let class = match failure {
        FailureClass::StateAmbiguity => FailureClass::UpstreamTransient,
        other => other,
    };
    let mut decision = decide_by_row(row, class, attempt, ctx);
    // Section 6: a timeout whose default workflow state is `failed_manual_intervention` alone stops for a person,
    // once the recovery work its stage's safe default names first (the health wait's reseed) has had its attempt.
    if let Some(kind) = ctx.timed_out {
        let manual_only = crate::matrix::timeout(kind).workflow_states == [WorkflowState::FailedManualIntervention];
        let work_first = row.safe_default.qualifier == Some(Qualifier::Reseed) && attempt < 2;
        if manual_only && !work_first && decision.is_retry() {
            decision = decide_by_row(row, class, attempt.max(ctx.retry.attempts_max), ctx);
        }
    }
    if ctx.observed == Observed::Stale && decision.compensation().is_some_and(Compensation::changes_maas) {
        return Decision::RefreshObservedState;
    }
    decision
}

/// Whether `row`'s stage retries a failure of `class`: the "Retryable?" column applied to one class.
///
/// - A person must fix config and capabilities: `input_config_error` and `site_capability_missing` are never
///   retried, whatever the column says ("yes for transient only", "yes if transient dependency").
/// - An ambiguity is never retried blind (section 7); [`decide`] refreshes first.
/// - A hardware mismatch is retried only by the stages that can repair it themselves: `ensure_pxe_interface_auto`
///   (unlink/relink) and `cleanup_storage / scrub_gpu / validate_clean_node` (clean again; "repeated residue").
/// - A transient is retried everywhere ("usually no" concerns the stage's hardware cause), except by a
///   "best-effort" stage, which falls back instead, unless policy requires the delete it attempts.
/// - The other classes are retried where the column says "yes", "bounded" or "yes/non-fatal".
pub fn retries(row: &StageRow, class: FailureClass, policy: &SitePolicy) -> bool {
    match class {
        FailureClass::InputConfigError | FailureClass::SiteCapabilityMissing | FailureClass::StateAmbiguity => false,
        FailureClass::HardwareMismatch => matches!(
            row.stage,
            Stage::Onboarding(OnboardingStage::EnsurePxeInterfaceAuto)
                | Stage::Decommission(DecommissionStage::CleanupStorageScrubGpuValidateCleanNode)
        ),
        FailureClass::UpstreamTransient => match row.retryability {
            Retryability::BestEffort => {
                row.safe_default.qualifier == Some(Qualifier::DeleteOnlyIfPolicyRequires) && policy.maas_delete_required
            }
            Retryability::Yes
            | Retryability::Bounded
            | Retryability::TransientOnly
            | Retryability::NonFatal
            | Retryability::UsuallyNo => true,
        },
        FailureClass::BmcPowerFailure
        | FailureClass::PxeDiscoveryFailure
        | FailureClass::DeployCloudInitFailure
        | FailureClass::PostDeployConnectivityFailure
        | FailureClass::HardwareSyncFailure
        | FailureClass::AgentEnrollmentFailure => {
            matches!(row.retryability, Retryability::Yes | Retryability::Bounded | Retryability::NonFatal)
        }
    }
}

/// Whether a stop for `class` needs a person even where the row also allows `failed_retryable`: config, capability,
/// hardware and ambiguity by their nature, and the deploy and post-deploy classes because the rows put their boundary
/// at "repeated ... failure after bounded retry", which a stop after the bound is.
fn needs_a_person(class: FailureClass) -> bool {
    match class {
        FailureClass::InputConfigError
        | FailureClass::SiteCapabilityMissing
        | FailureClass::HardwareMismatch
        | FailureClass::StateAmbiguity
        | FailureClass::DeployCloudInitFailure
        | FailureClass::PostDeployConnectivityFailure
        | FailureClass::HardwareSyncFailure => true,
        FailureClass::UpstreamTransient
        | FailureClass::BmcPowerFailure
        | FailureClass::PxeDiscoveryFailure
        | FailureClass::AgentEnrollmentFailure => false,
    }
}

fn decide_by_row(row: &StageRow, class: FailureClass, attempt: u32, ctx: &DecideContext) -> Decision {
    let retryable = retries(row, class, &ctx.policy);
    if retryable && attempt < ctx.retry.attempts_max {
        return Decision::Retry {
            action: row.safe_default.action,
            attempt_next: attempt + 1,
            attempts_max: ctx.retry.attempts_max,
            delay_ms: ctx.retry.delay_ms(attempt),
            compensation: compensation_on_retry(row, class, ctx),
        };
    }
    let qualifier = row.safe_default.qualifier;
    // `release_maas_node`: "fallback no-erase if policy allows", once, after the bounded retries.
    if retryable
        && qualifier == Some(Qualifier::NoEraseReleaseIfPolicyAllows)
        && ctx.policy.no_erase_release_allowed
        && !ctx.fallback_taken
    {
        return Decision::Retry {
            action: row.safe_default.action,
            attempt_next: attempt + 1,
            attempts_max: attempt + 1,
            delay_ms: ctx.retry.delay_ms(attempt),
            compensation: Some(Compensation::AbortMarkFixedNoEraseRelease),
        };
    }
    if qualifier == Some(Qualifier::SkipIfPolicyAllows) && !ctx.policy.roce_mandatory {
        return Decision::Continue { reason: ContinueReason::SkipNonFatalStage };
    }
    let reason = match (row.retryability, retryable) {
        (Retryability::BestEffort, false) => StopReason::BestEffort,
        (_, true) => StopReason::AttemptsExhausted,
        (_, false) => StopReason::NotRetryable,
    };
    // `remove_maas_record`: "retain MAAS record by policy": done, with a record of what was left behind.
    if qualifier == Some(Qualifier::DeleteOnlyIfPolicyRequires) && !ctx.policy.maas_delete_required {
        return Decision::Stop(completed_with_follow_up(row, reason, ctx));
    }
    let workflow_state = stop_state(row, class, ctx);
    Decision::Stop(Stop {
        workflow_state,
        node_state: node_state_on_stop(row, workflow_state, ctx),
        reason,
        next_action: next_action(row, workflow_state),
        compensation: compensation_on_stop(row, class, ctx),
        qualifier,
    })
}

/// Where a request refused before `stage` (its run's first mutating stage), for `class`, leaves things: the states
/// `stage`'s row gives a stop there, with the node as the request found it (`ctx.node_state`, where the row lists
/// it), no compensation (nothing was done to undo) and the row's resume as the next action when retryable. A refusal
/// is no run, so no earlier refusal escalates it: `ctx.failed_runs` is the workflow's failed runs only.
pub fn refused_before(stage: Stage, class: FailureClass, ctx: &DecideContext) -> Stop {
    let row = stage.row();
    let workflow_state = stop_state(row, class, ctx);
    Stop {
        workflow_state,
        node_state: node_state_on_stop(row, workflow_state, ctx),
        reason: StopReason::Refused,
        next_action: next_action(row, workflow_state),
        compensation: None,
        qualifier: row.safe_default.qualifier,
    }
}

/// Section 7: "move to state_ambiguity / failed_manual_intervention when ownership is unclear". No compensation: a
/// release or an abort on a machine the workflow may not own is the destructive step the rule guards against.
fn ownership_unclear(row: &StageRow, ctx: &DecideContext) -> Stop {
    // `remove_maas_record`: "retain MAAS record ... if delete unsafe".
    if row.safe_default.qualifier == Some(Qualifier::DeleteOnlyIfPolicyRequires) {
        return completed_with_follow_up(row, StopReason::OwnershipUnclear, ctx);
    }
    let workflow_state = stop_state(row, FailureClass::StateAmbiguity, ctx);
    Stop {
        workflow_state,
        node_state: node_state_on_stop(row, workflow_state, ctx),
        reason: StopReason::OwnershipUnclear,
        next_action: next_action(row, workflow_state),
        compensation: None,
        qualifier: row.safe_default.qualifier,
    }
}

fn completed_with_follow_up(row: &StageRow, reason: StopReason, ctx: &DecideContext) -> Stop {
    let workflow_state = WorkflowState::CompletedWithFollowUpRecord;
    Stop {
        workflow_state,
        node_state: node_state_on_stop(row, workflow_state, ctx),
        reason,
        next_action: None,
        compensation: None,
        qualifier: row.safe_default.qualifier,
    }
}

/// Of the row's workflow states: `failed_manual_intervention` when the class needs a person or the workflow has
/// already failed retryably `failed_runs_max` times, `failed_retryable` otherwise; each only where the row lists it.
fn stop_state(row: &StageRow, class: FailureClass, ctx: &DecideContext) -> WorkflowState {
    let retryable_listed = row.admits_workflow_state(WorkflowState::FailedRetryable);
    let manual_listed = row.admits_workflow_state(WorkflowState::FailedManualIntervention);
    let escalate = needs_a_person(class) || ctx.failed_runs >= ctx.retry.failed_runs_max;
    if manual_listed && (escalate || !retryable_listed) {
        WorkflowState::FailedManualIntervention
    } else if retryable_listed {
        WorkflowState::FailedRetryable
    } else {
        // No row lists neither (the tests walk them all); freezing automation is the safe answer if one ever does.
        WorkflowState::FailedManualIntervention
    }
}

/// Of the row's node states: the one listed; else quarantined when a person must look at a node the row allows to be
/// quarantined (a deployed machine without hardware sync or agent must not take work); else the node's own state if
/// listed; else the first listed.
fn node_state_on_stop(row: &StageRow, workflow_state: WorkflowState, ctx: &DecideContext) -> NodeState {
    match row.node_states {
        NodeStates::Unchanged => ctx.node_state,
        NodeStates::OneOf(states) => {
            if workflow_state == WorkflowState::FailedManualIntervention && states.contains(&NodeState::Quarantined) {
                NodeState::Quarantined
            } else if states.contains(&ctx.node_state) {
                ctx.node_state
            } else {
                states.first().copied().unwrap_or(ctx.node_state)
            }
        }
    }
}

fn next_action(row: &StageRow, workflow_state: WorkflowState) -> Option<RecoveryAction> {
    match workflow_state {
        WorkflowState::FailedRetryable => Some(row.safe_default.action),
        WorkflowState::FailedManualIntervention => Some(RecoveryAction::MarkManualInterventionRequired),
        WorkflowState::Running | WorkflowState::Completed | WorkflowState::CompletedWithFollowUpRecord => None,
    }
}

/// The row's compensation, when it applies before another attempt.
fn compensation_on_retry(row: &StageRow, class: FailureClass, ctx: &DecideContext) -> Option<Compensation> {
    let compensation = row.compensation?;
    let applies = match compensation {
        Compensation::UnlinkRelinkInterface => class == FailureClass::HardwareMismatch,
        Compensation::ReleaseToReadyIfDeployStarted => ctx.deploy_attempt_started,
        Compensation::ReleaseToReady => class == FailureClass::DeployCloudInitFailure,
        // The stage's own work ("abort/release"), run again.
        Compensation::AbortReleaseToCleanDeployableState => true,
        Compensation::RevertToRetiredOnUninstallFailure => class == FailureClass::AgentEnrollmentFailure,
        // A render retried after a token request that got no answer: the token it may have minted goes first.
        Compensation::DeletePartialNodeRow => ctx.partial_node_row_exists,
        // Only at the end (validation), or only as the fallback (no-erase).
        Compensation::QuarantineOnFailedValidation | Compensation::AbortMarkFixedNoEraseRelease => false,
    };
    applies.then_some(compensation)
}

/// The row's compensation, when it applies as the workflow stops.
fn compensation_on_stop(row: &StageRow, class: FailureClass, ctx: &DecideContext) -> Option<Compensation> {
    let compensation = row.compensation?;
    let applies = match compensation {
        Compensation::DeletePartialNodeRow => ctx.partial_node_row_exists,
        Compensation::ReleaseToReadyIfDeployStarted => ctx.deploy_attempt_started,
        Compensation::ReleaseToReady => class == FailureClass::DeployCloudInitFailure,
        Compensation::QuarantineOnFailedValidation => class == FailureClass::HardwareMismatch,
        Compensation::RevertToRetiredOnUninstallFailure => class == FailureClass::AgentEnrollmentFailure,
        // The interface is left for the person ("cannot be made deploy-safe"); an abort/release that "cannot
        // converge" is not tried once more; the no-erase release is only the fallback.
        Compensation::UnlinkRelinkInterface
        | Compensation::AbortReleaseToCleanDeployableState
        | Compensation::AbortMarkFixedNoEraseRelease => false,
    };
    applies.then_some(compensation)
}

#[cfg(test)]
mod tests;
