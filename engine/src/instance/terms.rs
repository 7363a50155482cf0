//! The words the instance rows are written in, which the inventory's records and every decision share: a pool and
//! where a member stands in it, the four verbs of the choke point, an operation parked behind an approval, and an
//! operator's step with its audit. Types only; the decisions over them are the sibling modules' `impl Inventory`s.

use serde::{Deserialize, Serialize};

/// A pool's lifecycle class: there is no `persistent` class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LifecycleClass {
    Ephemeral,
    Spot,
}

/// Where a member stands in its pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PoolState {
    /// Minted, booting; not acquirable until its first `phase=ready` heartbeat.
    Warming,
    /// Acquirable.
    Ready,
    /// A consumer holds it.
    Claimed,
    /// Fenced out of the allocator: a cordon, a drain or a recycle.
    Draining,
    /// Gone from the pool: its instance was terminated or errored.
    Released,
}

impl PoolState {
    pub fn as_str(self) -> &'static str {
        match self {
            PoolState::Warming => "warming",
            PoolState::Ready => "ready",
            PoolState::Claimed => "claimed",
            PoolState::Draining => "draining",
            PoolState::Released => "released",
        }
    }
}

/// What a release does with a returned member.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReleaseDisposition {
    /// The default: the member is terminated.
    Recycled,
    /// The member goes back to ready with a fresh anchor, or is fenced if it carries a cordon marker.
    ReuseWithoutReset,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pool {
    pub id: String,
    pub account: String,
    pub class: LifecycleClass,
    pub target_size: u32,
    pub max_size: u32,
    pub ready_ttl_seconds: u64,
    pub disposition: ReleaseDisposition,
    /// Where members are minted, and from which template.
    pub region: String,
    pub instance_type: String,
    pub template_id: String,
}

/// The four verbs of the choke point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Control {
    Start,
    Stop,
    Reboot,
    Terminate,
}

impl Control {
    pub fn as_str(self) -> &'static str {
        match self {
            Control::Start => "start",
            Control::Stop => "stop",
            Control::Reboot => "reboot",
            Control::Terminate => "terminate",
        }
    }

    /// What an ops hold refuses: everything but stop.
    pub fn held_by_ops_hold(self) -> bool {
        self != Control::Stop
    }
}

/// An operation parked behind an approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "operation", rename_all = "snake_case", deny_unknown_fields)]
pub enum DeferredOperation {
    Cordon { instance: String, reason: String, by: String },
    Uncordon { instance: String, by: String },
    Terminate { instance: String, by: String },
}

/// What an operator can ask of the instance controller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "snake_case", deny_unknown_fields)]
pub enum OperatorStep {
    PlaceHold {
        instance: String,
        reason: String,
    },
    LiftHold {
        instance: String,
    },
    Control {
        instance: String,
        action: Control,
        force: bool,
    },
    Drain {
        instance: String,
    },
    /// A gated cordon, uncordon or terminate, under the governance's policy.
    Request {
        operation: DeferredOperation,
    },
    Approve {
        deferred: String,
    },
    Deny {
        deferred: String,
    },
}

impl OperatorStep {
    pub fn verb(&self) -> &'static str {
        match self {
            OperatorStep::PlaceHold { .. } => "place_hold",
            OperatorStep::LiftHold { .. } => "lift_hold",
            OperatorStep::Control { action, .. } => action.as_str(),
            OperatorStep::Drain { .. } => "drain",
            OperatorStep::Request { operation: DeferredOperation::Cordon { .. } } => "cordon",
            OperatorStep::Request { operation: DeferredOperation::Uncordon { .. } } => "uncordon",
            OperatorStep::Request { operation: DeferredOperation::Terminate { .. } } => "terminate",
            OperatorStep::Approve { .. } => "approve",
            OperatorStep::Deny { .. } => "deny",
        }
    }

    /// The row the step is about: an instance, or a deferred operation.
    pub fn subject(&self) -> &str {
        match self {
            OperatorStep::PlaceHold { instance, .. }
            | OperatorStep::LiftHold { instance }
            | OperatorStep::Control { instance, .. }
            | OperatorStep::Drain { instance }
            | OperatorStep::Request {
                operation:
                    DeferredOperation::Cordon { instance, .. }
                    | DeferredOperation::Uncordon { instance, .. }
                    | DeferredOperation::Terminate { instance, .. },
            } => instance,
            OperatorStep::Approve { deferred } | OperatorStep::Deny { deferred } => deferred,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case", deny_unknown_fields)]
pub enum AuditOutcome {
    Performed,
    /// Parked behind an approval: nothing done to the instance yet.
    Pending {
        deferred: String,
    },
    /// Refused; the refusal's text (never a secret: refusals name rows, states and reasons).
    Refused {
        refusal: String,
    },
}

/// One audited operator step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstanceAudit {
    pub actor: String,
    pub step: OperatorStep,
    pub outcome: AuditOutcome,
    /// `<actor>/<verb>/<subject>/<at_ms>`: what ties the audit line to the step's own records and signals.
    pub correlation_id: String,
    pub at_ms: u64,
}
