//! The GPUaaS control plane's port, for the decommission workflow: the node inventory (a node's record and
//! lifecycle state), the allocation service, and the node tasks (drain, storage cleanup, GPU scrub, clean
//! validation, uninstall) run on the node by its agent or, for the uninstall, by the hub.
//!
//! API Boundary: an adapter maps the inventory service's HTTP answers onto [`FleetError`]: 503 is `Unavailable`,
//! 404 `NotFound`, 409 `Conflict`; a node agent that cannot be reached is `AgentUnreachable`.

use std::future::Future;

use crate::matrix::NodeState;
use crate::ports::TransportError;

/// A node's record as the inventory holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetRecord {
    /// `enrolling`, `active`, `quarantined` or `retired` (a removed record is `None`, not a state).
    pub state: NodeState,
    /// Allocation ids still attached to the node.
    pub allocations: Vec<String>,
    pub agent_installed: bool,
}

/// A task run on or for a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum NodeTask {
    Drain,
    CleanupStorage,
    ScrubGpu,
    ValidateClean,
    /// Removes the node's agent (its principal and registration): run by the hub.
    Uninstall,
}

impl NodeTask {
    pub fn as_str(self) -> &'static str {
        match self {
            NodeTask::Drain => "drain",
            NodeTask::CleanupStorage => "cleanup_storage",
            NodeTask::ScrubGpu => "scrub_gpu",
            NodeTask::ValidateClean => "validate_clean",
            NodeTask::Uninstall => "uninstall",
        }
    }
}

/// How a task ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskOutcome {
    Done,
    /// Validation found what a cleanup left behind.
    Residue(String),
    /// The task ran and failed.
    Failed(String),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FleetError {
    #[error("inventory unreachable: {0}")]
    Transport(#[from] TransportError),
    /// 503: try again after `retry_after_s`.
    #[error("inventory unavailable (retry after {retry_after_s} s)")]
    Unavailable { retry_after_s: u32 },
    #[error("not found: {0}")]
    NotFound(String),
    /// 409: the record is not in the state the request expects.
    #[error("conflict: {0}")]
    Conflict(String),
    /// The node's agent did not answer the task.
    #[error("node agent unreachable: {0}")]
    AgentUnreachable(String),
}

/// The GPUaaS inventory, allocation service and node tasks.
pub trait Fleet {
    /// The node's record; `None` once it was removed.
    fn record(&self, node: &str) -> impl Future<Output = Result<Option<FleetRecord>, FleetError>>;
    /// Moves the record from `from` to `to` (compare-and-set; a record already at `to` is a success).
    fn transition(&self, node: &str, from: NodeState, to: NodeState) -> impl Future<Output = Result<(), FleetError>>;
    /// Detaches every allocation (`force`: without the workload's acknowledgement); answers those still attached.
    fn release_allocations(&self, node: &str, force: bool) -> impl Future<Output = Result<Vec<String>, FleetError>>;
    /// Runs a task and waits for its result. `operation_id` is the journal's id for it (a retried task is the same
    /// operation).
    fn run_task(
        &self,
        node: &str,
        task: NodeTask,
        operation_id: &str,
    ) -> impl Future<Output = Result<TaskOutcome, FleetError>>;
    /// Removes the record (a removed record is a success); refused while the agent is installed.
    fn remove_record(&self, node: &str) -> impl Future<Output = Result<(), FleetError>>;
}
