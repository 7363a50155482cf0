//! The fault vocabulary: a closed enum of timed steps that drive the network, the hosts and the fakes, plus the few
//! driver actions (deployment epochs, task leases) that scenarios script around them. Knobs are integers
//! (per-mille probabilities, `_ms` durations). `docs/faults.md` documents each step: what it does, the seed document
//! it comes from, and whether it is recoverable.

use fakes::artifacts::ArtifactKind;
use fakes::ssh::Storage;
use fakes::worker::Drift;
use serde::{Deserialize, Serialize};

/// Where a controller death is armed: the named points in the rollout's journal protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeathPoint {
    /// Right after a step's intent record is durable, before the remote operation runs.
    AfterIntent,
    /// Right after a remote mutation was acknowledged, before its completion is recorded.
    AfterRemoteMutation,
    /// Right before a completion record would be written.
    BeforeCompletion,
}

/// Which of the controller's workflows a `controller_death` aims at: the point is armed in that workflow's journal
/// records and remote calls only. Absent from a step, it is the rollout (so older scenarios and plans read and
/// serialise as before).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeathSubsystem {
    /// The rolling deployment: intents, SSH mutations of workers, completions.
    #[default]
    Rollout,
    /// The onboarding workflow: its stage checkpoints, its MAAS mutations, its completion.
    Onboarding,
    /// The decommission workflow: its stage checkpoints, its MAAS and inventory mutations, its completion.
    Decommission,
}

impl DeathSubsystem {
    /// Whether this is the default (left out when a step is written).
    pub fn is_rollout(&self) -> bool {
        *self == DeathSubsystem::Rollout
    }
}

/// The part `hardware_missing` takes out of a machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HardwarePart {
    /// The BOSS boot disk.
    Boss,
    /// The first RoCE NIC.
    Roce,
}

/// What `bmc_fault` does to a machine's BMC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BmcFaultKind {
    /// No answer at all.
    Unreachable,
    /// Commands answer 204 and do nothing.
    IgnoreCommands,
    /// The BMC's password changes under MAAS (401 with the stored login).
    WrongCredentials,
    /// Heals the BMC: answers, obeys, and accepts the login it was racked with.
    Healthy,
}

/// One step of a fault plan. Two-host steps (`a`, `b`) act on both directions of the link.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Step {
    /// Drop every message between `a` and `b`, both ways.
    Partition {
        a: String,
        b: String,
    },
    /// Drop every message from `from` to `to`; the other direction still flows.
    PartitionOneway {
        from: String,
        to: String,
    },
    /// Heal both directions between `a` and `b`.
    Repair {
        a: String,
        b: String,
    },
    /// Heal the direction `from` → `to`.
    RepairOneway {
        from: String,
        to: String,
    },
    /// Queue messages between `a` and `b` until `release`.
    Hold {
        a: String,
        b: String,
    },
    Release {
        a: String,
        b: String,
    },
    /// Set request and response loss on both directions between `a` and `b` (0 heals).
    LinkLoss {
        a: String,
        b: String,
        request_per_mille: u32,
        response_per_mille: u32,
    },
    /// Set the latency range on both directions between `a` and `b`.
    LinkLatency {
        a: String,
        b: String,
        min_ms: u64,
        max_ms: u64,
    },
    /// Kill a host: every task stops, unsynced disk writes are lost, calls it holds are reset.
    Crash {
        target: String,
    },
    /// Boot a crashed host again from its durable state.
    Restart {
        target: String,
    },
    /// Offset a host's clock from virtual time (a step, not a drift).
    ClockSkew {
        target: String,
        skew_ms: i64,
    },
    /// Stop a node's agent service (a deployment's quiescence): it stops heartbeating until started.
    AgentStop {
        target: String,
    },
    AgentStart {
        target: String,
    },
    /// Driver action: open a deployment epoch on the hub with these members.
    OpenEpoch {
        members: Vec<String>,
    },
    /// Driver action: make epoch `epoch` terminal (epochs are numbered from 1 in opening order).
    CloseEpoch {
        epoch: u64,
    },
    /// Driver action: give an agent an active task lease for `duration_ms`.
    TaskLease {
        target: String,
        duration_ms: u64,
    },
    /// Driver action: an operator asks the controller to roll `revision` out to every node (generation = prior + 1).
    StartRollout {
        revision: String,
    },
    /// Give a worker's identity one of the RCCA's drift shapes (worker-50's, the early cohort's, unsafe files, …).
    MarkerDrift {
        target: String,
        shape: Drift,
    },
    /// The next `count` SSH connections to `target` time out (the incident's 10 s connect timeout).
    SshTimeout {
        target: String,
        count: u32,
    },
    /// `target`'s SSH host key changes: the engine must stop using the authority it held for the old one.
    EndpointIdentityChange {
        target: String,
    },
    /// `target`'s storage becomes non-returning (writes never return), full, or healthy again.
    StorageFault {
        target: String,
        storage: Storage,
    },
    /// The rollout revision's capsule of this kind is missing from the artifact store (`restored = true` heals it).
    ArtifactMissing {
        artifact: ArtifactKind,
        restored: bool,
    },
    /// The controller dies the next time `subsystem` (default the rollout) reaches `point`; a later `restart`
    /// brings it back.
    ControllerDeath {
        point: DeathPoint,
        #[serde(default, skip_serializing_if = "DeathSubsystem::is_rollout")]
        subsystem: DeathSubsystem,
        /// When set, the controller boots again this long after it died (instead of at a timed `restart` step,
        /// which a trap that fires late could precede).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        restart_after_ms: Option<u64>,
    },
    /// The hub starts publishing a different signed route bundle (another route authority).
    RouteSwap,
    /// The controller's hub credential expires now; the rotation state machine (outside deployment) puts a new one
    /// in the secrets store `renew_after_ms` later. Until then every hub mutation of the controller is refused.
    CredentialExpiry {
        renew_after_ms: u64,
    },
    /// A controller that has since died took the hub's deployment lock for `lease_ms` (stale authority): a live
    /// controller must wait it out, and can never mutate under it.
    StaleLock {
        lease_ms: u64,
    },
    /// The hub carries out the controller's next `count` mutations but their answers are lost: the controller times
    /// out on an operation that ran (the RCCA's first-attempt hub SSH timeout).
    HubTimeout {
        count: u32,
    },
    /// An operator places a dispatch hold on `target` (owner `operator:maintenance`) that no rollout may release.
    OperatorHold {
        target: String,
    },
    /// Registry cleanup revokes `target`'s hub principal: its row is tombstoned and its agent's heartbeats refused.
    PrincipalRevoked {
        target: String,
    },
    // --- the MAAS site (runs with `[onboarding]`; `target` is one of the site's machines) ---------------------------
    /// Every NIC MAC of the machine is regenerated at its next power-on (seed: the `SiteFaults` stream).
    MacDrift {
        target: String,
    },
    /// The rack resolver answers SERVFAIL to every query, or to names in `zones` only.
    ResolverServfail {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        zones: Option<Vec<String>>,
    },
    /// The rack resolver answers again.
    ResolverRepair,
    /// A commissioning script of the machine never completes.
    ScriptHang {
        target: String,
    },
    /// A commissioning script of the machine fails.
    ScriptFailure {
        target: String,
    },
    /// cloud-init on the machine fails after reaching the metadata service (every boot).
    DatasourceFailure {
        target: String,
    },
    /// A part of the machine is absent from now on.
    HardwareMissing {
        target: String,
        part: HardwarePart,
    },
    /// The machine's node agent enrols `delay_ms` after cloud-init starts it.
    AgentEnrolDelay {
        target: String,
        delay_ms: u64,
    },
    /// Seeding the machine's hardware-sync timer fails (MAAS rejects its token): the service never reports.
    HwSyncFailure {
        target: String,
    },
    /// The machine's hardware-sync service reports `after_syncs` times, then stops (its last sync goes stale).
    HwSyncStops {
        target: String,
        after_syncs: u32,
    },
    /// The machine's sshd answers none of the next `count` connections.
    SshUnreachable {
        target: String,
        count: u32,
    },
    /// The region's next `count` answers are 503 with `Retry-After: retry_after_s`.
    MaasUnavailable {
        count: u32,
        retry_after_s: u32,
    },
    /// The site's secrets store loses its bootstrap-token role: no node can be given a token.
    TokenPolicyMissing,
    /// The region's next `count` deploys fail to render their preseed (400).
    PreseedFailure {
        count: u32,
    },
    /// The region answers nothing (`down = true`) or answers again.
    MaasUnreachable {
        down: bool,
    },
    /// The site's secrets store answers its next `count` requests 503.
    VaultUnavailable {
        count: u32,
    },
    /// The machine's power-credential override is deleted from the secrets store.
    PowerCredentialMissing {
        target: String,
    },
    /// The machine's BMC fails (or heals).
    BmcFault {
        target: String,
        fault: BmcFaultKind,
    },
    /// The rack's DHCP server forgets the machine's leases and answers its current MACs no more until `dhcp_repair`.
    DhcpLeaseLoss {
        target: String,
    },
    /// The DHCP server answers everyone again.
    DhcpRepair,
    /// The site is disabled in its configuration.
    SiteDisabled,
    /// An operator deletes the machine's MAAS record out of band.
    MachineDeleted {
        target: String,
    },
    /// An operator disconnects the machine's PXE interface in MAAS out of band (`op=disconnect`: no VLAN, no links).
    InterfaceDisconnected {
        target: String,
    },
    /// An operator commissions the machine out of band.
    MachineAdvanced {
        target: String,
    },
    /// The machine's MAAS record disappears from the API (`hidden = true`) or reappears.
    MachineHidden {
        target: String,
        hidden: bool,
    },
    /// Operator repair after a MAC drift: the machine's current MACs are put on its original record and the records
    /// MAAS enlisted for the new MACs are deleted.
    RegisterMacs {
        target: String,
    },
    /// Driver action: an operator asks the controller to run the machine's onboarding workflow again.
    ResumeOnboarding {
        target: String,
    },
    /// Driver action: a person (or automation) asks for a recovery action (seed 000, section 2) on the machine's
    /// onboarding or decommission workflow. The controller audits it (section 8) and performs what is authorized.
    Operator {
        target: String,
        workflow: engine::matrix::Workflow,
        action: engine::matrix::RecoveryAction,
        #[serde(default = "default_operator_actor")]
        actor: String,
        #[serde(default = "default_operator_role")]
        role: engine::recovery::ActorRole,
        /// Free text for the audit record: required, never a secret.
        reason: String,
        /// The person says the issue behind a freeze is resolved.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        resolves_freeze: bool,
    },
    // --- decommission (runs with `[onboarding]`) ---------------------------------------------------------------------
    /// Driver action: an operator asks the controller to decommission the machine (after its onboarding, if that is
    /// still in flight).
    Decommission {
        target: String,
    },
    /// The machine's allocations survive the next `count` forced releases.
    AllocationStuck {
        target: String,
        count: u32,
    },
    /// The next `count` storage cleanups of the machine leave residue that validation finds.
    CleanupResidue {
        target: String,
        count: u32,
    },
    /// The next `count` uninstalls of the machine's agent fail.
    UninstallFailure {
        target: String,
        count: u32,
    },
    /// The machine's node agent takes no task (`down = true`) or takes them again.
    AgentUnreachable {
        target: String,
        down: bool,
    },
    /// The inventory's next `count` answers are 503.
    InventoryUnavailable {
        count: u32,
    },
    /// The region's next `count` disk wipes fail ("Failed to erase disks.").
    EraseFailure {
        count: u32,
    },
    /// The controller's secrets policy loses `delete` on node secrets.
    SecretsDeleteDenied,
    /// Out of band: an operator moves the machine's inventory record one step back toward service (quarantined →
    /// active, retired → quarantined).
    NodeReactivated {
        target: String,
    },
}

impl Step {
    /// The step's `kind`, as written in files and counted in run records.
    pub fn kind(&self) -> &'static str {
        match self {
            Step::Partition { .. } => "partition",
            Step::PartitionOneway { .. } => "partition_oneway",
            Step::Repair { .. } => "repair",
            Step::RepairOneway { .. } => "repair_oneway",
            Step::Hold { .. } => "hold",
            Step::Release { .. } => "release",
            Step::LinkLoss { .. } => "link_loss",
            Step::LinkLatency { .. } => "link_latency",
            Step::Crash { .. } => "crash",
            Step::Restart { .. } => "restart",
            Step::ClockSkew { .. } => "clock_skew",
            Step::AgentStop { .. } => "agent_stop",
            Step::AgentStart { .. } => "agent_start",
            Step::OpenEpoch { .. } => "open_epoch",
            Step::CloseEpoch { .. } => "close_epoch",
            Step::TaskLease { .. } => "task_lease",
            Step::StartRollout { .. } => "start_rollout",
            Step::MarkerDrift { .. } => "marker_drift",
            Step::SshTimeout { .. } => "ssh_timeout",
            Step::EndpointIdentityChange { .. } => "endpoint_identity_change",
            Step::StorageFault { .. } => "storage_fault",
            Step::ArtifactMissing { .. } => "artifact_missing",
            Step::ControllerDeath { .. } => "controller_death",
            Step::RouteSwap => "route_swap",
            Step::CredentialExpiry { .. } => "credential_expiry",
            Step::HubTimeout { .. } => "hub_timeout",
            Step::StaleLock { .. } => "stale_lock",
            Step::OperatorHold { .. } => "operator_hold",
            Step::PrincipalRevoked { .. } => "principal_revoked",
            Step::MacDrift { .. } => "mac_drift",
            Step::ResolverServfail { .. } => "resolver_servfail",
            Step::ResolverRepair => "resolver_repair",
            Step::ScriptHang { .. } => "script_hang",
            Step::ScriptFailure { .. } => "script_failure",
            Step::DatasourceFailure { .. } => "datasource_failure",
            Step::HardwareMissing { .. } => "hardware_missing",
            Step::AgentEnrolDelay { .. } => "agent_enrol_delay",
            Step::HwSyncFailure { .. } => "hw_sync_failure",
            Step::HwSyncStops { .. } => "hw_sync_stops",
            Step::SshUnreachable { .. } => "ssh_unreachable",
            Step::MaasUnavailable { .. } => "maas_unavailable",
            Step::PreseedFailure { .. } => "preseed_failure",
            Step::TokenPolicyMissing => "token_policy_missing",
            Step::MaasUnreachable { .. } => "maas_unreachable",
            Step::VaultUnavailable { .. } => "vault_unavailable",
            Step::PowerCredentialMissing { .. } => "power_credential_missing",
            Step::BmcFault { .. } => "bmc_fault",
            Step::DhcpLeaseLoss { .. } => "dhcp_lease_loss",
            Step::DhcpRepair => "dhcp_repair",
            Step::SiteDisabled => "site_disabled",
            Step::MachineDeleted { .. } => "machine_deleted",
            Step::MachineAdvanced { .. } => "machine_advanced",
            Step::InterfaceDisconnected { .. } => "interface_disconnected",
            Step::MachineHidden { .. } => "machine_hidden",
            Step::RegisterMacs { .. } => "register_macs",
            Step::ResumeOnboarding { .. } => "resume_onboarding",
            Step::Operator { .. } => "operator",
            Step::Decommission { .. } => "decommission",
            Step::AllocationStuck { .. } => "allocation_stuck",
            Step::CleanupResidue { .. } => "cleanup_residue",
            Step::UninstallFailure { .. } => "uninstall_failure",
            Step::AgentUnreachable { .. } => "agent_unreachable",
            Step::InventoryUnavailable { .. } => "inventory_unavailable",
            Step::EraseFailure { .. } => "erase_failure",
            Step::SecretsDeleteDenied => "secrets_delete_denied",
            Step::NodeReactivated { .. } => "node_reactivated",
        }
    }

    /// Whether the step injects a fault (counted in `faults` of the run record), as opposed to healing one or being a
    /// driver action. A latency step is a fault unless it sets the run's default range back.
    pub fn is_fault(&self, default_link: &crate::model::link::LinkConfig) -> bool {
        match self {
            Step::Partition { .. }
            | Step::PartitionOneway { .. }
            | Step::Hold { .. }
            | Step::Crash { .. }
            | Step::AgentStop { .. }
            | Step::MarkerDrift { .. }
            | Step::SshTimeout { .. }
            | Step::EndpointIdentityChange { .. }
            | Step::ControllerDeath { .. }
            | Step::RouteSwap
            | Step::CredentialExpiry { .. }
            | Step::HubTimeout { .. }
            | Step::StaleLock { .. }
            | Step::OperatorHold { .. }
            | Step::PrincipalRevoked { .. }
            | Step::MacDrift { .. }
            | Step::ResolverServfail { .. }
            | Step::ScriptHang { .. }
            | Step::ScriptFailure { .. }
            | Step::DatasourceFailure { .. }
            | Step::HardwareMissing { .. }
            | Step::AgentEnrolDelay { .. }
            | Step::HwSyncFailure { .. }
            | Step::HwSyncStops { .. }
            | Step::SshUnreachable { .. }
            | Step::MaasUnavailable { .. }
            | Step::PreseedFailure { .. }
            | Step::TokenPolicyMissing
            | Step::VaultUnavailable { .. }
            | Step::PowerCredentialMissing { .. }
            | Step::DhcpLeaseLoss { .. }
            | Step::SiteDisabled
            | Step::MachineDeleted { .. }
            | Step::MachineAdvanced { .. }
            | Step::InterfaceDisconnected { .. }
            | Step::AllocationStuck { .. }
            | Step::CleanupResidue { .. }
            | Step::UninstallFailure { .. }
            | Step::InventoryUnavailable { .. }
            | Step::EraseFailure { .. }
            | Step::SecretsDeleteDenied
            | Step::NodeReactivated { .. } => true,
            Step::AgentUnreachable { down, .. } => *down,
            Step::MaasUnreachable { down } => *down,
            Step::MachineHidden { hidden, .. } => *hidden,
            Step::BmcFault { fault, .. } => *fault != BmcFaultKind::Healthy,
            Step::StorageFault { storage, .. } => *storage != Storage::Healthy,
            Step::ArtifactMissing { restored, .. } => !restored,
            Step::ClockSkew { skew_ms, .. } => *skew_ms != 0,
            Step::LinkLoss { request_per_mille, response_per_mille, .. } => {
                *request_per_mille + *response_per_mille > 0
            }
            Step::LinkLatency { min_ms, max_ms, .. } => {
                (*min_ms, *max_ms) != (default_link.latency_min_ms, default_link.latency_max_ms)
            }
            Step::Repair { .. }
            | Step::RepairOneway { .. }
            | Step::Release { .. }
            | Step::Restart { .. }
            | Step::AgentStart { .. }
            | Step::OpenEpoch { .. }
            | Step::CloseEpoch { .. }
            | Step::TaskLease { .. }
            | Step::StartRollout { .. }
            | Step::ResolverRepair
            | Step::DhcpRepair
            | Step::RegisterMacs { .. }
            | Step::ResumeOnboarding { .. }
            | Step::Operator { .. }
            | Step::Decommission { .. } => false,
        }
    }

    /// Every host name the step refers to, with the key it is under (for validation errors).
    pub fn hosts(&self) -> Vec<(&'static str, &str)> {
        match self {
            Step::Partition { a, b }
            | Step::Repair { a, b }
            | Step::Hold { a, b }
            | Step::Release { a, b }
            | Step::LinkLoss { a, b, .. }
            | Step::LinkLatency { a, b, .. } => vec![("a", a), ("b", b)],
            Step::PartitionOneway { from, to } | Step::RepairOneway { from, to } => vec![("from", from), ("to", to)],
            Step::Crash { target }
            | Step::Restart { target }
            | Step::ClockSkew { target, .. }
            | Step::AgentStop { target }
            | Step::AgentStart { target }
            | Step::TaskLease { target, .. }
            | Step::MarkerDrift { target, .. }
            | Step::SshTimeout { target, .. }
            | Step::EndpointIdentityChange { target }
            | Step::OperatorHold { target }
            | Step::PrincipalRevoked { target }
            | Step::StorageFault { target, .. } => vec![("target", target)],
            Step::MacDrift { target }
            | Step::ScriptHang { target }
            | Step::ScriptFailure { target }
            | Step::DatasourceFailure { target }
            | Step::HardwareMissing { target, .. }
            | Step::AgentEnrolDelay { target, .. }
            | Step::HwSyncFailure { target }
            | Step::HwSyncStops { target, .. }
            | Step::SshUnreachable { target, .. }
            | Step::PowerCredentialMissing { target }
            | Step::BmcFault { target, .. }
            | Step::DhcpLeaseLoss { target }
            | Step::MachineDeleted { target }
            | Step::MachineAdvanced { target }
            | Step::InterfaceDisconnected { target }
            | Step::MachineHidden { target, .. }
            | Step::RegisterMacs { target }
            | Step::ResumeOnboarding { target }
            | Step::Operator { target, .. }
            | Step::Decommission { target }
            | Step::AllocationStuck { target, .. }
            | Step::CleanupResidue { target, .. }
            | Step::UninstallFailure { target, .. }
            | Step::AgentUnreachable { target, .. }
            | Step::NodeReactivated { target } => vec![("target", target)],
            Step::OpenEpoch { members } => members.iter().map(|m| ("members", m.as_str())).collect(),
            Step::CloseEpoch { .. }
            | Step::StartRollout { .. }
            | Step::ArtifactMissing { .. }
            | Step::ControllerDeath { .. }
            | Step::CredentialExpiry { .. }
            | Step::HubTimeout { .. }
            | Step::StaleLock { .. }
            | Step::RouteSwap
            | Step::ResolverServfail { .. }
            | Step::ResolverRepair
            | Step::MaasUnavailable { .. }
            | Step::PreseedFailure { .. }
            | Step::TokenPolicyMissing
            | Step::MaasUnreachable { .. }
            | Step::VaultUnavailable { .. }
            | Step::DhcpRepair
            | Step::SiteDisabled
            | Step::InventoryUnavailable { .. }
            | Step::EraseFailure { .. }
            | Step::SecretsDeleteDenied => vec![],
        }
    }

    /// Whether the step acts on the MAAS site (and so needs an `[onboarding]` section).
    pub fn is_site_step(&self) -> bool {
        self.site_machine().is_some()
            || matches!(
                self,
                Step::ResolverServfail { .. }
                    | Step::ResolverRepair
                    | Step::MaasUnavailable { .. }
                    | Step::PreseedFailure { .. }
                    | Step::TokenPolicyMissing
                    | Step::MaasUnreachable { .. }
                    | Step::VaultUnavailable { .. }
                    | Step::DhcpRepair
                    | Step::SiteDisabled
                    | Step::InventoryUnavailable { .. }
                    | Step::EraseFailure { .. }
                    | Step::SecretsDeleteDenied
            )
    }

    /// The site machine a machine-targeted step names (its `target` is a machine, not a host).
    pub fn site_machine(&self) -> Option<&str> {
        match self {
            Step::MacDrift { target }
            | Step::ScriptHang { target }
            | Step::ScriptFailure { target }
            | Step::DatasourceFailure { target }
            | Step::HardwareMissing { target, .. }
            | Step::AgentEnrolDelay { target, .. }
            | Step::HwSyncFailure { target }
            | Step::HwSyncStops { target, .. }
            | Step::SshUnreachable { target, .. }
            | Step::PowerCredentialMissing { target }
            | Step::BmcFault { target, .. }
            | Step::DhcpLeaseLoss { target }
            | Step::MachineDeleted { target }
            | Step::MachineAdvanced { target }
            | Step::InterfaceDisconnected { target }
            | Step::MachineHidden { target, .. }
            | Step::RegisterMacs { target }
            | Step::ResumeOnboarding { target }
            | Step::Operator { target, .. }
            | Step::Decommission { target }
            | Step::AllocationStuck { target, .. }
            | Step::CleanupResidue { target, .. }
            | Step::UninstallFailure { target, .. }
            | Step::AgentUnreachable { target, .. }
            | Step::NodeReactivated { target } => Some(target),
            _ => None,
        }
    }

    /// The steps' kinds, for `--help` and error messages.
    pub const KINDS: &'static [&'static str] = &[
        "partition",
        "partition_oneway",
        "repair",
        "repair_oneway",
        "hold",
        "release",
        "link_loss",
        "link_latency",
        "crash",
        "restart",
        "clock_skew",
        "agent_stop",
        "agent_start",
        "open_epoch",
        "close_epoch",
        "task_lease",
        "start_rollout",
        "marker_drift",
        "ssh_timeout",
        "endpoint_identity_change",
        "storage_fault",
        "artifact_missing",
        "controller_death",
        "route_swap",
        "credential_expiry",
        "hub_timeout",
        "stale_lock",
        "operator_hold",
        "principal_revoked",
        "mac_drift",
        "resolver_servfail",
        "resolver_repair",
        "script_hang",
        "script_failure",
        "datasource_failure",
        "hardware_missing",
        "agent_enrol_delay",
        "hw_sync_failure",
        "hw_sync_stops",
        "ssh_unreachable",
        "maas_unavailable",
        "preseed_failure",
        "token_policy_missing",
        "maas_unreachable",
        "vault_unavailable",
        "power_credential_missing",
        "bmc_fault",
        "dhcp_lease_loss",
        "dhcp_repair",
        "site_disabled",
        "machine_deleted",
        "machine_advanced",
        "interface_disconnected",
        "machine_hidden",
        "register_macs",
        "resume_onboarding",
        "operator",
        "decommission",
        "allocation_stuck",
        "cleanup_residue",
        "uninstall_failure",
        "agent_unreachable",
        "inventory_unavailable",
        "erase_failure",
        "secrets_delete_denied",
        "node_reactivated",
    ];
}

/// The actor an `operator` step names when it names none.
pub const DEFAULT_OPERATOR_ACTOR: &str = "oncall";

fn default_operator_actor() -> String {
    DEFAULT_OPERATOR_ACTOR.to_owned()
}

fn default_operator_role() -> engine::recovery::ActorRole {
    engine::recovery::ActorRole::Operator
}

/// A step and when it happens, in virtual ms from the start of the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimedStep {
    pub at_ms: u64,
    pub step: Step,
}

/// A step fired by the workflow itself: when `workflow`'s onboarding starts `stage` for the `occurrence`-th time
/// (retries and later runs count), before the stage's first request. It aims a fault at one (stage, failure class)
/// pair of the recovery matrix without guessing when the stage will run. It fires at most once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageStep {
    /// The machine whose workflow triggers the step.
    pub workflow: String,
    pub stage: engine::matrix::Stage,
    pub occurrence: u64,
    pub step: Step,
}
