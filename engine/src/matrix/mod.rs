//! The MAAS Recovery Matrix v1 (`seeds/000_85d03426b210b2a0.txt`) as data: the vocabulary (failure classes, recovery
//! actions, workflow and node states, stages) and the stage tables, timeouts, out-of-band rules and audit fields.
//!
//! Architecture Invariant: this module is the project's one source of truth for the matrix. The words come from the
//! seed; `docs/recovery-matrix/*.tsv` are verbatim copies of its tables, and the tests below prove that every row
//! here says what its TSV row says (stage, failure classes, retryability, defaults, resulting states).
//! `docs/recovery-matrix.md` is rendered from these tables by [`render_markdown`] and checked by a test.
//!
//! API Boundary: the decision code ([`crate::workflow`]) reads these tables; it never restates them. Where the
//! seed's words need an interpretation to become a decision (which class a row retries, which of two listed states a
//! stop lands in), the interpretation is written there, beside the decision, and tested against these rows.

use serde::{Deserialize, Serialize};

mod render;
mod table;

pub use render::render_markdown;
pub use table::{DECOMMISSION, ONBOARDING, TIMEOUTS};

/// Section 3: why a stage failed. The serde names are the seed's class names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureClass {
    InputConfigError,
    SiteCapabilityMissing,
    UpstreamTransient,
    BmcPowerFailure,
    PxeDiscoveryFailure,
    HardwareMismatch,
    DeployCloudInitFailure,
    PostDeployConnectivityFailure,
    HardwareSyncFailure,
    AgentEnrollmentFailure,
    StateAmbiguity,
}

impl FailureClass {
    /// In the seed's order.
    pub const ALL: [FailureClass; 11] = [
        FailureClass::InputConfigError,
        FailureClass::SiteCapabilityMissing,
        FailureClass::UpstreamTransient,
        FailureClass::BmcPowerFailure,
        FailureClass::PxeDiscoveryFailure,
        FailureClass::HardwareMismatch,
        FailureClass::DeployCloudInitFailure,
        FailureClass::PostDeployConnectivityFailure,
        FailureClass::HardwareSyncFailure,
        FailureClass::AgentEnrollmentFailure,
        FailureClass::StateAmbiguity,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FailureClass::InputConfigError => "input_config_error",
            FailureClass::SiteCapabilityMissing => "site_capability_missing",
            FailureClass::UpstreamTransient => "upstream_transient",
            FailureClass::BmcPowerFailure => "bmc_power_failure",
            FailureClass::PxeDiscoveryFailure => "pxe_discovery_failure",
            FailureClass::HardwareMismatch => "hardware_mismatch",
            FailureClass::DeployCloudInitFailure => "deploy_cloud_init_failure",
            FailureClass::PostDeployConnectivityFailure => "post_deploy_connectivity_failure",
            FailureClass::HardwareSyncFailure => "hardware_sync_failure",
            FailureClass::AgentEnrollmentFailure => "agent_enrollment_failure",
            FailureClass::StateAmbiguity => "state_ambiguity",
        }
    }

    /// The seed's "Meaning" column, verbatim.
    pub fn meaning(self) -> &'static str {
        match self {
            FailureClass::InputConfigError => "bad request, invalid SKU, disabled site, malformed input",
            FailureClass::SiteCapabilityMissing => "required site policy/capability absent",
            FailureClass::UpstreamTransient => "MAAS/Vault/network transient",
            FailureClass::BmcPowerFailure => "IPMI/power-cycle reachability failure",
            FailureClass::PxeDiscoveryFailure => "discovery timeout or no deterministic MAAS match",
            FailureClass::HardwareMismatch => "expected boot disk/interface/hardware not present",
            FailureClass::DeployCloudInitFailure => "MAAS deploy or cloud-init/datasource class failure",
            FailureClass::PostDeployConnectivityFailure => "SSH seed/connectivity failure after deploy",
            FailureClass::HardwareSyncFailure => "machine token or sync health failure",
            FailureClass::AgentEnrollmentFailure => "node-agent fails to enroll/renew",
            FailureClass::StateAmbiguity => "observed MAAS/node state conflicts with workflow expectation",
        }
    }
}

/// Section 2: what the workflow (or an operator, through the recovery API) does about a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecoveryAction {
    RetryStage,
    Resume,
    Rerun,
    RestartClean,
    Cancel,
    AdoptObservedState,
    MarkManualInterventionRequired,
}

impl RecoveryAction {
    /// In the seed's order.
    pub const ALL: [RecoveryAction; 7] = [
        RecoveryAction::RetryStage,
        RecoveryAction::Resume,
        RecoveryAction::Rerun,
        RecoveryAction::RestartClean,
        RecoveryAction::Cancel,
        RecoveryAction::AdoptObservedState,
        RecoveryAction::MarkManualInterventionRequired,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RecoveryAction::RetryStage => "retry_stage",
            RecoveryAction::Resume => "resume",
            RecoveryAction::Rerun => "rerun",
            RecoveryAction::RestartClean => "restart_clean",
            RecoveryAction::Cancel => "cancel",
            RecoveryAction::AdoptObservedState => "adopt_observed_state",
            RecoveryAction::MarkManualInterventionRequired => "mark_manual_intervention_required",
        }
    }

    /// The seed's "Meaning" column, verbatim.
    pub fn meaning(self) -> &'static str {
        match self {
            RecoveryAction::RetryStage => "rerun only the failed stage",
            RecoveryAction::Resume => "continue from the last safe stage checkpoint",
            RecoveryAction::Rerun => "re-enter workflow from the top with status-aware adoption",
            RecoveryAction::RestartClean => "explicitly compensate/reset progress, then start again",
            RecoveryAction::Cancel => "stop workflow and compensate where possible",
            RecoveryAction::AdoptObservedState => "accept externally advanced MAAS/node state and continue",
            RecoveryAction::MarkManualInterventionRequired => "freeze automation until operator resolves issue",
        }
    }
}

/// A workflow's state, as the "Resulting workflow state" columns name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkflowState {
    /// Named by `apply_roce_phase2` ("running or failed_manual_intervention"): a non-fatal failure lets it go on.
    Running,
    /// Not named by the seed, implied by "completed with follow-up record": the workflow reached its goal.
    Completed,
    /// `remove_maas_record`: "completed with follow-up record" — done, but a record says what was left behind.
    CompletedWithFollowUpRecord,
    FailedRetryable,
    FailedManualIntervention,
}

impl WorkflowState {
    pub const ALL: [WorkflowState; 5] = [
        WorkflowState::Running,
        WorkflowState::Completed,
        WorkflowState::CompletedWithFollowUpRecord,
        WorkflowState::FailedRetryable,
        WorkflowState::FailedManualIntervention,
    ];

    /// The serde name.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkflowState::Running => "running",
            WorkflowState::Completed => "completed",
            WorkflowState::CompletedWithFollowUpRecord => "completed_with_follow_up_record",
            WorkflowState::FailedRetryable => "failed_retryable",
            WorkflowState::FailedManualIntervention => "failed_manual_intervention",
        }
    }

    /// How the seed's tables write it.
    pub fn table_text(self) -> &'static str {
        match self {
            WorkflowState::CompletedWithFollowUpRecord => "completed with follow-up record",
            other => other.as_str(),
        }
    }
}

/// A node's inventory state, as the "Resulting node state" columns name them (`MAAS_Node_State_Model_v1.md`, which
/// the seed cites, is not in the project; these five are every state the matrix names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeState {
    Enrolling,
    Active,
    Quarantined,
    Retired,
    Deleted,
}

impl NodeState {
    pub const ALL: [NodeState; 5] =
        [NodeState::Enrolling, NodeState::Active, NodeState::Quarantined, NodeState::Retired, NodeState::Deleted];

    pub fn as_str(self) -> &'static str {
        match self {
            NodeState::Enrolling => "enrolling",
            NodeState::Active => "active",
            NodeState::Quarantined => "quarantined",
            NodeState::Retired => "retired",
            NodeState::Deleted => "deleted",
        }
    }
}

/// The node states a stage's failure may leave behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeStates {
    /// "a or b": one of these, the first being the usual one.
    OneOf(&'static [NodeState]),
    /// "current node state unchanged" (decommission `load_site_config`): whatever the node was in.
    Unchanged,
}

impl NodeStates {
    /// Whether a failure that found the node in `before` may leave it in `after`.
    pub fn admits(self, before: NodeState, after: NodeState) -> bool {
        match self {
            NodeStates::OneOf(states) => states.contains(&after),
            NodeStates::Unchanged => before == after,
        }
    }

    pub fn table_text(self) -> String {
        match self {
            NodeStates::OneOf(states) => states.iter().map(|state| state.as_str()).collect::<Vec<_>>().join(" or "),
            NodeStates::Unchanged => "current node state unchanged".to_owned(),
        }
    }
}

/// Section 4: the onboarding workflow's 16 stages, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnboardingStage {
    LoadSiteConfig,
    ResolvePowerCredentials,
    CreateOrFindInMaas,
    CommissionNode,
    WaitForReady,
    ConfigureStorage,
    ApplyRocePhase2,
    EnsurePxeInterfaceAuto,
    RenderCloudInit,
    DeployViaMaas,
    WaitForDeployed,
    ClassifyDeployFailure,
    RecoverForDatasourceRetry,
    EnsureHardwareSyncConfigured,
    WaitForHardwareSyncHealthy,
    WaitForAgentEnrollment,
}

impl OnboardingStage {
    pub const ALL: [OnboardingStage; 16] = [
        OnboardingStage::LoadSiteConfig,
        OnboardingStage::ResolvePowerCredentials,
        OnboardingStage::CreateOrFindInMaas,
        OnboardingStage::CommissionNode,
        OnboardingStage::WaitForReady,
        OnboardingStage::ConfigureStorage,
        OnboardingStage::ApplyRocePhase2,
        OnboardingStage::EnsurePxeInterfaceAuto,
        OnboardingStage::RenderCloudInit,
        OnboardingStage::DeployViaMaas,
        OnboardingStage::WaitForDeployed,
        OnboardingStage::ClassifyDeployFailure,
        OnboardingStage::RecoverForDatasourceRetry,
        OnboardingStage::EnsureHardwareSyncConfigured,
        OnboardingStage::WaitForHardwareSyncHealthy,
        OnboardingStage::WaitForAgentEnrollment,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            OnboardingStage::LoadSiteConfig => "load_site_config",
            OnboardingStage::ResolvePowerCredentials => "resolve_power_credentials",
            OnboardingStage::CreateOrFindInMaas => "create_or_find_in_maas",
            OnboardingStage::CommissionNode => "commission_node",
            OnboardingStage::WaitForReady => "wait_for_ready",
            OnboardingStage::ConfigureStorage => "configure_storage",
            OnboardingStage::ApplyRocePhase2 => "apply_roce_phase2",
            OnboardingStage::EnsurePxeInterfaceAuto => "ensure_pxe_interface_auto",
            OnboardingStage::RenderCloudInit => "render_cloud_init",
            OnboardingStage::DeployViaMaas => "deploy_via_maas",
            OnboardingStage::WaitForDeployed => "wait_for_deployed",
            OnboardingStage::ClassifyDeployFailure => "classify_deploy_failure",
            OnboardingStage::RecoverForDatasourceRetry => "recover_for_datasource_retry",
            OnboardingStage::EnsureHardwareSyncConfigured => "ensure_hardware_sync_configured",
            OnboardingStage::WaitForHardwareSyncHealthy => "wait_for_hardware_sync_healthy",
            OnboardingStage::WaitForAgentEnrollment => "wait_for_agent_enrollment",
        }
    }

    /// This stage's row of [`ONBOARDING`].
    pub fn row(self) -> &'static StageRow {
        &ONBOARDING[self as usize]
    }
}

/// Section 5: the decommission workflow's 11 stages, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecommissionStage {
    DisableNode,
    ForceReleaseAllocations,
    DrainNode,
    /// One row of the seed for three activities, written "cleanup_storage / scrub_gpu / validate_clean_node": the
    /// seed counts it as one of the 11 stages, so it is one stage here (see [`DecommissionStage::table_text`]).
    CleanupStorageScrubGpuValidateCleanNode,
    LoadSiteConfig,
    ReleaseMaasNode,
    PowerOffMaasNode,
    RetireGpuaasNode,
    RemoveGpuaasNodeRecord,
    CleanupSecrets,
    RemoveMaasRecord,
}

impl DecommissionStage {
    pub const ALL: [DecommissionStage; 11] = [
        DecommissionStage::DisableNode,
        DecommissionStage::ForceReleaseAllocations,
        DecommissionStage::DrainNode,
        DecommissionStage::CleanupStorageScrubGpuValidateCleanNode,
        DecommissionStage::LoadSiteConfig,
        DecommissionStage::ReleaseMaasNode,
        DecommissionStage::PowerOffMaasNode,
        DecommissionStage::RetireGpuaasNode,
        DecommissionStage::RemoveGpuaasNodeRecord,
        DecommissionStage::CleanupSecrets,
        DecommissionStage::RemoveMaasRecord,
    ];

    /// The serde name.
    pub fn as_str(self) -> &'static str {
        match self {
            DecommissionStage::DisableNode => "disable_node",
            DecommissionStage::ForceReleaseAllocations => "force_release_allocations",
            DecommissionStage::DrainNode => "drain_node",
            DecommissionStage::CleanupStorageScrubGpuValidateCleanNode => {
                "cleanup_storage_scrub_gpu_validate_clean_node"
            }
            DecommissionStage::LoadSiteConfig => "load_site_config",
            DecommissionStage::ReleaseMaasNode => "release_maas_node",
            DecommissionStage::PowerOffMaasNode => "power_off_maas_node",
            DecommissionStage::RetireGpuaasNode => "retire_gpuaas_node",
            DecommissionStage::RemoveGpuaasNodeRecord => "remove_gpuaas_node_record",
            DecommissionStage::CleanupSecrets => "cleanup_secrets",
            DecommissionStage::RemoveMaasRecord => "remove_maas_record",
        }
    }

    /// How the seed's table writes it (differs from [`DecommissionStage::as_str`] only for the three-activity row).
    pub fn table_text(self) -> &'static str {
        match self {
            DecommissionStage::CleanupStorageScrubGpuValidateCleanNode => {
                "cleanup_storage / scrub_gpu / validate_clean_node"
            }
            other => other.as_str(),
        }
    }

    /// This stage's row of [`DECOMMISSION`].
    pub fn row(self) -> &'static StageRow {
        &DECOMMISSION[self as usize]
    }
}

/// Which workflow a stage belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Workflow {
    Onboarding,
    Decommission,
}

/// A stage of either workflow (`load_site_config` is in both, with different rows).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    Onboarding(OnboardingStage),
    Decommission(DecommissionStage),
}

impl Stage {
    /// Every stage, onboarding first, each workflow in order.
    pub fn all() -> impl Iterator<Item = Stage> {
        OnboardingStage::ALL
            .into_iter()
            .map(Stage::Onboarding)
            .chain(DecommissionStage::ALL.into_iter().map(Stage::Decommission))
    }

    pub fn workflow(self) -> Workflow {
        match self {
            Stage::Onboarding(_) => Workflow::Onboarding,
            Stage::Decommission(_) => Workflow::Decommission,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Onboarding(stage) => stage.as_str(),
            Stage::Decommission(stage) => stage.as_str(),
        }
    }

    pub fn table_text(self) -> &'static str {
        match self {
            Stage::Onboarding(stage) => stage.as_str(),
            Stage::Decommission(stage) => stage.table_text(),
        }
    }

    pub fn row(self) -> &'static StageRow {
        match self {
            Stage::Onboarding(stage) => stage.row(),
            Stage::Decommission(stage) => stage.row(),
        }
    }
}

/// The "Retryable?" column, typed. The seed writes nine distinct phrases; they mean six things.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Retryability {
    /// "yes": retried (still within a bound: "put a limit on everything").
    Yes,
    /// "yes, bounded", "bounded": retried up to a bound, then the manual intervention boundary applies.
    Bounded,
    /// "yes for transient only", "yes for transient", "yes if transient dependency": only a transient cause is retried.
    TransientOnly,
    /// "yes/non-fatal": retried; when it still fails the workflow may go on without the stage if policy allows.
    NonFatal,
    /// "usually no": the listed causes need a person; only a transient read is retried.
    UsuallyNo,
    /// "best-effort": not retried for its own sake; a failure falls back (or is retried only when policy requires).
    BestEffort,
}

impl Retryability {
    pub const ALL: [Retryability; 6] = [
        Retryability::Yes,
        Retryability::Bounded,
        Retryability::TransientOnly,
        Retryability::NonFatal,
        Retryability::UsuallyNo,
        Retryability::BestEffort,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Retryability::Yes => "yes",
            Retryability::Bounded => "bounded",
            Retryability::TransientOnly => "transient_only",
            Retryability::NonFatal => "non_fatal",
            Retryability::UsuallyNo => "usually_no",
            Retryability::BestEffort => "best_effort",
        }
    }

    /// Every phrase of the seed's "Retryable?" columns that means this.
    pub fn table_texts(self) -> &'static [&'static str] {
        match self {
            Retryability::Yes => &["yes"],
            Retryability::Bounded => &["yes, bounded", "bounded"],
            Retryability::TransientOnly => {
                &["yes for transient only", "yes for transient", "yes if transient dependency"]
            }
            Retryability::NonFatal => &["yes/non-fatal"],
            Retryability::UsuallyNo => &["usually no"],
            Retryability::BestEffort => &["best-effort"],
        }
    }

    /// The typed meaning of a "Retryable?" phrase, or `None` for a phrase the seed does not use.
    pub fn from_table_text(text: &str) -> Option<Retryability> {
        Retryability::ALL.into_iter().find(|retryability| retryability.table_texts().contains(&text))
    }
}

/// What must happen before a row's default action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Precondition {
    /// "fix config then resume", "fix hardware/site assumptions then rerun".
    OperatorFix,
    /// "do not blindly retry; refresh state first" (and section 7's first rule).
    RefreshObservedState,
    /// "classify failure, then resume/rerun".
    ClassifyFailure,
}

/// The part of a row's safe default that is not one of the seven recovery actions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Qualifier {
    /// `apply_roce_phase2`: "resume or skip if policy allows".
    SkipIfPolicyAllows,
    /// `classify_deploy_failure`: "fall back to generic deploy failure".
    GenericDeployFailure,
    /// `ensure_hardware_sync_configured`: "later node.hw_sync_reseed after agent exists".
    ReseedAfterAgentExists,
    /// `wait_for_hardware_sync_healthy`: "resume with reseed".
    Reseed,
    /// `wait_for_agent_enrollment`: "possibly refresh token".
    RefreshEnrollmentToken,
    /// `release_maas_node`: "fallback no-erase if policy allows".
    NoEraseReleaseIfPolicyAllows,
    /// `cleanup_secrets`: "resume or record follow-up".
    RecordFollowUp,
    /// `remove_maas_record`: "resume if policy requires delete".
    DeleteOnlyIfPolicyRequires,
}

/// The "Safe recovery default" column: typed where the words allow, and the words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SafeDefault {
    pub action: RecoveryAction,
    /// The other action the words allow ("resume or rerun", "adopt_observed_state on late success").
    pub alternative: Option<RecoveryAction>,
    pub precondition: Option<Precondition>,
    pub qualifier: Option<Qualifier>,
    pub text: &'static str,
}

/// The "Compensation" column, typed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Compensation {
    /// `ensure_pxe_interface_auto`: "maybe unlink/relink".
    UnlinkRelinkInterface,
    /// `render_cloud_init`: "delete partial node row if necessary".
    DeletePartialNodeRow,
    /// `deploy_via_maas`: "release back to Ready if deploy attempt started".
    ReleaseToReadyIfDeployStarted,
    /// `wait_for_deployed`: "release back to Ready".
    ReleaseToReady,
    /// `recover_for_datasource_retry`: "abort/release to clean deployable state".
    AbortReleaseToCleanDeployableState,
    /// `cleanup_storage / scrub_gpu / validate_clean_node`: "quarantine on failed validation".
    QuarantineOnFailedValidation,
    /// `release_maas_node`: "abort/mark-fixed + no-erase release".
    AbortMarkFixedNoEraseRelease,
    /// `remove_gpuaas_node_record`: "revert to retired on uninstall failure".
    RevertToRetiredOnUninstallFailure,
}

impl Compensation {
    pub const ALL: [Compensation; 8] = [
        Compensation::UnlinkRelinkInterface,
        Compensation::DeletePartialNodeRow,
        Compensation::ReleaseToReadyIfDeployStarted,
        Compensation::ReleaseToReady,
        Compensation::AbortReleaseToCleanDeployableState,
        Compensation::QuarantineOnFailedValidation,
        Compensation::AbortMarkFixedNoEraseRelease,
        Compensation::RevertToRetiredOnUninstallFailure,
    ];

    /// The snake_case name (serde's), as traces and conformance cases spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Compensation::UnlinkRelinkInterface => "unlink_relink_interface",
            Compensation::DeletePartialNodeRow => "delete_partial_node_row",
            Compensation::ReleaseToReadyIfDeployStarted => "release_to_ready_if_deploy_started",
            Compensation::ReleaseToReady => "release_to_ready",
            Compensation::AbortReleaseToCleanDeployableState => "abort_release_to_clean_deployable_state",
            Compensation::QuarantineOnFailedValidation => "quarantine_on_failed_validation",
            Compensation::AbortMarkFixedNoEraseRelease => "abort_mark_fixed_no_erase_release",
            Compensation::RevertToRetiredOnUninstallFailure => "revert_to_retired_on_uninstall_failure",
        }
    }

    /// Whether it changes MAAS: section 7 says to "refresh observed MAAS state before destructive or irreversible
    /// steps", so such a compensation waits for a fresh observation.
    pub fn changes_maas(self) -> bool {
        match self {
            Compensation::UnlinkRelinkInterface
            | Compensation::ReleaseToReadyIfDeployStarted
            | Compensation::ReleaseToReady
            | Compensation::AbortReleaseToCleanDeployableState
            | Compensation::AbortMarkFixedNoEraseRelease => true,
            Compensation::DeletePartialNodeRow
            | Compensation::QuarantineOnFailedValidation
            | Compensation::RevertToRetiredOnUninstallFailure => false,
        }
    }
}

/// One row of section 4 or 5.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StageRow {
    pub stage: Stage,
    /// "Typical failure classes", in the seed's order. Typical, not exhaustive: the decision code answers for every
    /// class at every stage.
    pub failure_classes: &'static [FailureClass],
    pub detect_from: &'static str,
    pub retryability: Retryability,
    /// The "Retryable?" words.
    pub retryability_text: &'static str,
    pub safe_default: SafeDefault,
    /// `None` for "none" and "none during onboarding".
    pub compensation: Option<Compensation>,
    /// The "Compensation" words.
    pub compensation_text: &'static str,
    pub manual_intervention_boundary: &'static str,
    /// "Resulting workflow state": the states a failure of this stage may leave the workflow in.
    pub workflow_states: &'static [WorkflowState],
    /// "Resulting node state".
    pub node_states: NodeStates,
}

impl StageRow {
    pub fn lists(&self, class: FailureClass) -> bool {
        self.failure_classes.contains(&class)
    }

    pub fn admits_workflow_state(&self, state: WorkflowState) -> bool {
        self.workflow_states.contains(&state)
    }

    pub fn workflow_states_text(&self) -> String {
        self.workflow_states.iter().map(|state| state.table_text()).collect::<Vec<_>>().join(" or ")
    }
}

/// Section 6's timeouts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimeoutKind {
    Discovery,
    Commission,
    Deploy,
    HardwareSyncSeed,
    HardwareSyncHealth,
    AgentEnrollment,
}

impl TimeoutKind {
    pub const ALL: [TimeoutKind; 6] = [
        TimeoutKind::Discovery,
        TimeoutKind::Commission,
        TimeoutKind::Deploy,
        TimeoutKind::HardwareSyncSeed,
        TimeoutKind::HardwareSyncHealth,
        TimeoutKind::AgentEnrollment,
    ];

    /// The snake_case name (`hardware_sync_seed`), as the site setting and the reports spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            TimeoutKind::Discovery => "discovery",
            TimeoutKind::Commission => "commission",
            TimeoutKind::Deploy => "deploy",
            TimeoutKind::HardwareSyncSeed => "hardware_sync_seed",
            TimeoutKind::HardwareSyncHealth => "hardware_sync_health",
            TimeoutKind::AgentEnrollment => "agent_enrollment",
        }
    }
}

/// The section 6 row of `kind`.
pub fn timeout(kind: TimeoutKind) -> &'static TimeoutRow {
    TIMEOUTS.iter().find(|row| row.timeout == kind).expect("section 6 has a row for every timeout kind")
}

/// One row of section 6, with the default duration the seed does not give.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeoutRow {
    pub timeout: TimeoutKind,
    /// The "Timeout" words ("discovery timeout").
    pub name: &'static str,
    /// The onboarding stage whose wait the timeout bounds (ours: the seed does not say).
    pub stage: OnboardingStage,
    pub failure_classes: &'static [FailureClass],
    /// "upstream_transient or hardware_mismatch depending on MAAS status": which one is for the stage's decision.
    pub failure_class_text: &'static str,
    pub workflow_states: &'static [WorkflowState],
    /// "failed_retryable then failed_manual_intervention after bounded attempts" (agent enrollment only).
    pub escalates_after_bounded_attempts: bool,
    pub workflow_state_text: &'static str,
    pub actions: &'static [RecoveryAction],
    pub action_text: &'static str,
    /// Section 6 gives no durations ("Timeouts are product behavior"); these defaults are ours, each sourced in
    /// [`TimeoutRow::default_source`].
    pub default_ms: u64,
    pub default_source: &'static str,
}

/// Section 7: the out-of-band conditions that are "first-class recovery conditions".
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutOfBandCondition {
    LateAgentEnrollment,
    OperatorChangedMaasState,
    MachineReappearedWithDifferentState,
}

impl OutOfBandCondition {
    pub const ALL: [OutOfBandCondition; 3] = [
        OutOfBandCondition::LateAgentEnrollment,
        OutOfBandCondition::OperatorChangedMaasState,
        OutOfBandCondition::MachineReappearedWithDifferentState,
    ];

    /// The snake_case name (serde's), as conformance cases spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            OutOfBandCondition::LateAgentEnrollment => "late_agent_enrollment",
            OutOfBandCondition::OperatorChangedMaasState => "operator_changed_maas_state",
            OutOfBandCondition::MachineReappearedWithDifferentState => "machine_reappeared_with_different_state",
        }
    }

    /// The seed's words.
    pub fn text(self) -> &'static str {
        match self {
            OutOfBandCondition::LateAgentEnrollment => "node-agent enrolls after workflow already marked failure",
            OutOfBandCondition::OperatorChangedMaasState => {
                "operator changes MAAS state directly while workflow is running"
            }
            OutOfBandCondition::MachineReappearedWithDifferentState => {
                "machine disappears and reappears with different upstream state"
            }
        }
    }
}

/// Section 7's rules, in the seed's order; [`crate::workflow::decide`] applies them before any row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutOfBandRule {
    RefreshBeforeDestructiveSteps,
    AdoptWhenObservedSatisfiesCheckpoint,
    ManualInterventionWhenOwnershipUnclear,
}

impl OutOfBandRule {
    pub const ALL: [OutOfBandRule; 3] = [
        OutOfBandRule::RefreshBeforeDestructiveSteps,
        OutOfBandRule::AdoptWhenObservedSatisfiesCheckpoint,
        OutOfBandRule::ManualInterventionWhenOwnershipUnclear,
    ];

    /// The seed's words.
    pub fn text(self) -> &'static str {
        match self {
            OutOfBandRule::RefreshBeforeDestructiveSteps => {
                "refresh observed MAAS state before destructive or irreversible steps"
            }
            OutOfBandRule::AdoptWhenObservedSatisfiesCheckpoint => {
                "allow adopt_observed_state when observed state now satisfies the intended checkpoint"
            }
            OutOfBandRule::ManualInterventionWhenOwnershipUnclear => {
                "move to state_ambiguity / failed_manual_intervention when ownership is unclear"
            }
        }
    }
}

/// Section 8: what every operator recovery action must record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditField {
    ActorIdAndRole,
    WorkflowIdAndRunId,
    PriorWorkflowStateAndStage,
    RequestedAction,
    Reason,
    ExpectedNextState,
    CorrelationId,
}

impl AuditField {
    pub const ALL: [AuditField; 7] = [
        AuditField::ActorIdAndRole,
        AuditField::WorkflowIdAndRunId,
        AuditField::PriorWorkflowStateAndStage,
        AuditField::RequestedAction,
        AuditField::Reason,
        AuditField::ExpectedNextState,
        AuditField::CorrelationId,
    ];

    /// The seed's words.
    pub fn text(self) -> &'static str {
        match self {
            AuditField::ActorIdAndRole => "actor id and role",
            AuditField::WorkflowIdAndRunId => "workflow id and run id",
            AuditField::PriorWorkflowStateAndStage => "prior workflow state and stage",
            AuditField::RequestedAction => "requested action",
            AuditField::Reason => "reason",
            AuditField::ExpectedNextState => "expected next state",
            AuditField::CorrelationId => "correlation id",
        }
    }
}

/// The number of (stage, typical failure class) pairs of a table.
pub fn pair_count(rows: &[StageRow]) -> usize {
    rows.iter().map(|row| row.failure_classes.len()).sum()
}

#[cfg(test)]
mod tests;
