//! The fault vocabulary: a closed enum of timed steps that drive the network, the hosts and the fakes, plus the few
//! driver actions (deployment epochs, task leases) that scenarios script around them. Knobs are integers
//! (per-mille probabilities, `_ms` durations). `docs/faults.md` documents each step: what it does, the seed document
//! it comes from, and whether it is recoverable.

use serde::{Deserialize, Serialize};

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
            | Step::AgentStop { .. } => true,
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
            | Step::TaskLease { .. } => false,
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
            | Step::TaskLease { target, .. } => vec![("target", target)],
            Step::OpenEpoch { members } => members.iter().map(|m| ("members", m.as_str())).collect(),
            Step::CloseEpoch { .. } => vec![],
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
    ];
}

/// A step and when it happens, in virtual ms from the start of the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimedStep {
    pub at_ms: u64,
    pub step: Step,
}
