//! Stuck-state detection (runbook "Per-state error recovery"): one typed signal per row of its table, each with
//! the table's recommended recovery.
//!
//! Read-only: [`Inventory::stuck`] looks at the rows and the hub's last heartbeats and says what is stuck; the
//! recoveries are operator steps built from the choke point, the provider sync and `provision`.
//!
//! A bare-metal row (`super::metal`) is provisioned and torn down by the onboarding and decommission workflows, whose
//! own stall windows, bounded retries and manual-intervention verdicts (the recovery matrix) bound those phases: the
//! VM bounds of pending, provisioning and terminate-stalled are not its, and are not raised for it. Its never-ready,
//! silent and stalled-drain rows are.

use serde::{Deserialize, Serialize};

use super::inventory::{Backing, Inventory};
use super::state::InstanceState;
use crate::sensor::SILENT_THRESHOLD_MS;

pub const PENDING_STUCK_MS: u64 = 5 * 60_000;
pub const PROVISIONING_STUCK_MS: u64 = 10 * 60_000;
/// After the agent's first heartbeat (any phase) without a `phase=ready`.
pub const NEVER_READY_STUCK_MS: u64 = 5 * 60_000;
pub const DRAIN_STALLED_MS: u64 = 30 * 60_000;
pub const TERMINATE_STALLED_MS: u64 = 5 * 60_000;

/// The rows of the runbook's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stuck {
    /// Pending > 5 min: the worker queue stalled or a provider quota refused the create.
    Pending,
    /// Provisioning > 10 min with no agent: a provider API timeout, a hung domain creation.
    Provisioning,
    /// The agent is up but never sent `phase=ready`, > 5 min after its first heartbeat: a module pull failure.
    NeverReady,
    /// Running and silent > 3 min (the existing `system.instance_silent`): a partition or an agent crash.
    Silent,
    /// A drain's stop has not completed in 30 min.
    DrainStalled,
    /// Terminated but the provider has not confirmed the destroy in 5 min: teardown stuck.
    TerminateStalled,
}

impl Stuck {
    pub const ALL: [Stuck; 6] = [
        Stuck::Pending,
        Stuck::Provisioning,
        Stuck::NeverReady,
        Stuck::Silent,
        Stuck::DrainStalled,
        Stuck::TerminateStalled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Stuck::Pending => "pending",
            Stuck::Provisioning => "provisioning",
            Stuck::NeverReady => "never_ready",
            Stuck::Silent => "silent",
            Stuck::DrainStalled => "drain_stalled",
            Stuck::TerminateStalled => "terminate_stalled",
        }
    }

    /// The runbook's recommended recovery for the row.
    pub fn recovery(self) -> Recovery {
        match self {
            Stuck::Pending => Recovery::RetrySameOperation,
            Stuck::Provisioning => Recovery::CancelSyncErrorTerminate,
            Stuck::NeverReady => Recovery::InspectModulePull,
            Stuck::Silent => Recovery::RestartAgent,
            Stuck::DrainStalled => Recovery::AddCapacityOrTerminate,
            Stuck::TerminateStalled => Recovery::CancelTeardownAndReap,
        }
    }
}

/// The operator steps of a recovery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Recovery {
    /// Read the task's error, restart the worker, retry `provision` with the same operation id (reuses the row).
    RetrySameOperation,
    /// Cancel the provision task, sync the region (a VM the provider no longer lists maps to terminated), let
    /// `mark_errored` land it in error, terminate, re-provision (same operation id after terminate, or fresh).
    CancelSyncErrorTerminate,
    /// Read the agent's journal for the failed module; fix; terminate and re-provision with a fresh operation id.
    InspectModulePull,
    /// Reach the node (SSH or console) and restart its agent.
    RestartAgent,
    /// Add capacity, or hard-terminate.
    AddCapacityOrTerminate,
    /// Cancel the teardown task and reap the orphan at the provider (the next sync confirms it gone).
    CancelTeardownAndReap,
}

/// One stuck instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StuckSignal {
    pub instance: String,
    pub stuck: Stuck,
    /// When the clock of this row started.
    pub since_ms: u64,
    pub recovery: Recovery,
}

impl Inventory {
    /// Every stuck instance, in id order. `last_heartbeat_ms` is the hub's view of an instance's agent.
    pub fn stuck(&self, now_ms: u64, last_heartbeat_ms: impl Fn(&str) -> Option<u64>) -> Vec<StuckSignal> {
        let past = |since_ms: u64, bound_ms: u64| now_ms.saturating_sub(since_ms) > bound_ms;
        let mut signals = Vec::new();
        for instance in self.instances.values() {
            let metal = matches!(instance.backing, Backing::BareMetal { .. });
            let row = match instance.state {
                // The onboarding and decommission workflows bound a bare-metal row's provisioning and teardown.
                InstanceState::Pending | InstanceState::Terminated if metal => None,
                InstanceState::Provisioning if metal && instance.first_heartbeat_ms.is_none() => None,
                InstanceState::Pending => {
                    past(instance.state_since_ms, PENDING_STUCK_MS).then_some((Stuck::Pending, instance.state_since_ms))
                }
                InstanceState::Provisioning => match instance.first_heartbeat_ms {
                    Some(first) => past(first, NEVER_READY_STUCK_MS).then_some((Stuck::NeverReady, first)),
                    None => past(instance.state_since_ms, PROVISIONING_STUCK_MS)
                        .then_some((Stuck::Provisioning, instance.state_since_ms)),
                },
                InstanceState::Running => {
                    let last =
                        last_heartbeat_ms(&instance.id).unwrap_or(instance.state_since_ms).max(instance.state_since_ms);
                    past(last, SILENT_THRESHOLD_MS).then_some((Stuck::Silent, last))
                }
                InstanceState::Stopping => instance
                    .drain_started_ms
                    .filter(|started| past(*started, DRAIN_STALLED_MS))
                    .map(|started| (Stuck::DrainStalled, started)),
                InstanceState::Terminated => instance
                    .destroy_pending_since_ms
                    .filter(|since| past(*since, TERMINATE_STALLED_MS))
                    .map(|since| (Stuck::TerminateStalled, since)),
                _ => None,
            };
            if let Some((stuck, since_ms)) = row {
                signals.push(StuckSignal {
                    instance: instance.id.clone(),
                    stuck,
                    since_ms,
                    recovery: stuck.recovery(),
                });
            }
        }
        signals
    }
}
