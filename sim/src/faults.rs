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
    /// The controller dies the next time the rollout reaches `point`; a later `restart` brings it back.
    ControllerDeath {
        point: DeathPoint,
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
        }
    }

    /// Whether the step injects a fault (counted in `faults` of the run record), as opposed to healing one or being a
    /// driver action. A latency step is a fault unless it sets the run's default range back.
    pub fn is_fault(&self, default_link: &crate::net::LinkConfig) -> bool {
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
            | Step::PrincipalRevoked { .. } => true,
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
            | Step::StartRollout { .. } => false,
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
            Step::OpenEpoch { members } => members.iter().map(|m| ("members", m.as_str())).collect(),
            Step::CloseEpoch { .. }
            | Step::StartRollout { .. }
            | Step::ArtifactMissing { .. }
            | Step::ControllerDeath { .. }
            | Step::CredentialExpiry { .. }
            | Step::HubTimeout { .. }
            | Step::StaleLock { .. }
            | Step::RouteSwap => vec![],
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
    ];
}

/// A step and when it happens, in virtual ms from the start of the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimedStep {
    pub at_ms: u64,
    pub step: Step,
}
