//! The fake GPUaaS control plane a decommission drives besides MAAS (`seeds/000_85d03426b210b2a0.txt` section 5,
//! `seeds/004_c1eb714c76320200.txt` drain and terminate semantics): the node inventory (one record per node with its
//! lifecycle state), the allocation service (workloads attached to a node), and the node tasks the node agent runs
//! (drain, storage cleanup, GPU scrub, clean validation) or the hub runs for it (uninstall: the agent's principal and
//! registration go).
//!
//! The model only answers; the simulator decides whether the node's agent can be reached (its machine powered and
//! enrolled) and how long a task takes ([`NodeTask::duration_ms`]).
//!
//! State transitions follow the node runbook: `active` → `quarantined` (disable: no new work) → `retired` (out of
//! service) → record removed (`deleted`). An illegal one is a 409 with the record's state named, as an inventory
//! service with optimistic concurrency answers; a retried transition that already happened is a success.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// A node record's lifecycle state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordState {
    Enrolling,
    Active,
    Quarantined,
    Retired,
}

impl RecordState {
    pub fn as_str(self) -> &'static str {
        match self {
            RecordState::Enrolling => "enrolling",
            RecordState::Active => "active",
            RecordState::Quarantined => "quarantined",
            RecordState::Retired => "retired",
        }
    }

    /// The transitions a client may ask for: forward along the runbook, and quarantined → active (a release from
    /// quarantine). An operator's out-of-band moves ([`Inventory::reactivate`]) are not requests.
    fn may_become(self, to: RecordState) -> bool {
        use RecordState::{Active, Enrolling, Quarantined, Retired};
        matches!(
            (self, to),
            (Enrolling, Active) | (Enrolling | Active, Quarantined) | (Quarantined, Active) | (Quarantined, Retired)
        )
    }
}

/// A task run on (or for) a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeTask {
    /// Stop taking work and let running work finish or move (the agent's drain).
    Drain,
    CleanupStorage,
    ScrubGpu,
    /// Check that nothing of a tenant is left: no residue on disk, GPUs scrubbed.
    ValidateClean,
    /// Remove the agent: its principal and registration at the hub (run by the hub, not the agent).
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

    /// How long the task runs (virtual ms); our figures, of the order the runbook gives for an idle node.
    pub fn duration_ms(self) -> u64 {
        match self {
            NodeTask::Drain => 45_000,
            NodeTask::CleanupStorage => 120_000,
            NodeTask::ScrubGpu => 90_000,
            NodeTask::ValidateClean => 30_000,
            NodeTask::Uninstall => 5_000,
        }
    }

    /// Whether the node's agent runs it (so the agent must be reachable).
    pub fn needs_agent(self) -> bool {
        self != NodeTask::Uninstall
    }
}

/// What a finished task reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum TaskResult {
    Done,
    /// Validation found what a cleanup left behind.
    Residue {
        what: String,
    },
    /// The task ran and failed (an uninstall the hub could not finish).
    Failed {
        error: String,
    },
}

/// An error answer; the HTTP status each maps to is in the comment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InventoryError {
    /// 503 with `Retry-After`: try again.
    Unavailable { retry_after_s: u32 },
    /// 404: no record for the node.
    NotFound { node: String },
    /// 409: the record is not in a state the request can act on.
    Conflict { node: String, state: RecordState, wanted: RecordState },
    /// 409: the record cannot be removed while the agent is installed or allocations remain.
    NotRemovable { node: String, reason: String },
    /// 409: the request does not fit the record's state (a forced release on a node in service).
    Refused { node: String, reason: String },
}

impl std::fmt::Display for InventoryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InventoryError::Unavailable { retry_after_s } => {
                write!(f, "inventory unavailable, retry after {retry_after_s} s")
            }
            InventoryError::NotFound { node } => write!(f, "no inventory record for {node}"),
            InventoryError::Conflict { node, state, wanted } => {
                write!(f, "{node} is {}, cannot become {}", state.as_str(), wanted.as_str())
            }
            InventoryError::NotRemovable { node, reason } => write!(f, "{node} cannot be removed: {reason}"),
            InventoryError::Refused { node, reason } => write!(f, "{node}: {reason}"),
        }
    }
}

/// One node's record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRecord {
    pub state: RecordState,
    pub allocations: BTreeSet<String>,
    /// The agent is installed (uninstall clears it).
    pub agent_installed: bool,
    /// What the last workload left on the node until a cleanup removes it.
    pub residue: BTreeSet<String>,
}

/// The requests the inventory serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InventoryRequest {
    Read {
        node: String,
    },
    /// Move the record from `from` to `to` (compare-and-set; already `to` is a success).
    Transition {
        node: String,
        from: RecordState,
        to: RecordState,
    },
    /// Detach every allocation (`force`: without waiting for the workload to acknowledge). Answers what remains.
    ReleaseAllocations {
        node: String,
        force: bool,
    },
    /// Record a finished task's effect and answer its result.
    CompleteTask {
        node: String,
        task: NodeTask,
    },
    Remove {
        node: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InventoryResponse {
    Record(Option<NodeRecord>),
    Done,
    Remaining(Vec<String>),
    Task(TaskResult),
}

/// Faults aimed at one node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct NodeFaults {
    /// Allocations survive this many forced releases (a workload that re-attaches, a stuck allocation row).
    stuck_releases: u32,
    /// This many cleanups leave residue that validation then finds.
    residue_cleanups: u32,
    /// This many uninstalls fail.
    uninstall_failures: u32,
}

/// The inventory and allocation service of one site.
#[derive(Debug, Clone, Default)]
pub struct Inventory {
    records: BTreeMap<String, NodeRecord>,
    faults: BTreeMap<String, NodeFaults>,
    /// The next `fail_next` requests answer 503.
    fail_next: u32,
    next_allocation: u64,
}

/// The `Retry-After` of a 503.
pub const UNAVAILABLE_RETRY_AFTER_S: u32 = 5;

impl Inventory {
    pub fn new() -> Inventory {
        Inventory::default()
    }

    /// A node enrolled: its record, `active`, with `allocations` workloads attached and their residue on disk.
    pub fn enrol(&mut self, node: &str, allocations: u32) {
        let mut record = NodeRecord {
            state: RecordState::Active,
            allocations: BTreeSet::new(),
            agent_installed: true,
            residue: BTreeSet::new(),
        };
        for _ in 0..allocations {
            self.next_allocation += 1;
            let id = format!("alloc-{:05}", self.next_allocation);
            record.residue.insert(format!("/var/lib/gpuaas/{id}"));
            record.allocations.insert(id);
        }
        self.records.insert(node.to_owned(), record);
    }

    pub fn record(&self, node: &str) -> Option<&NodeRecord> {
        self.records.get(node)
    }

    /// Out of band: an operator moves the record one step back toward service (quarantined → active,
    /// retired → quarantined). False when there is no record or it is already active.
    pub fn reactivate(&mut self, node: &str) -> bool {
        let Some(record) = self.records.get_mut(node) else { return false };
        let back = match record.state {
            RecordState::Quarantined => RecordState::Active,
            RecordState::Retired => RecordState::Quarantined,
            RecordState::Enrolling | RecordState::Active => return false,
        };
        record.state = back;
        true
    }

    /// Fault: the next `count` requests answer 503 and change nothing.
    pub fn fail_next(&mut self, count: u32) {
        self.fail_next += count;
    }

    /// Fault: `node`'s allocations survive the next `count` forced releases.
    pub fn stick_allocations(&mut self, node: &str, count: u32) {
        self.faults.entry(node.to_owned()).or_default().stuck_releases += count;
    }

    /// Fault: the next `count` storage cleanups of `node` leave residue behind.
    pub fn leave_residue(&mut self, node: &str, count: u32) {
        self.faults.entry(node.to_owned()).or_default().residue_cleanups += count;
    }

    /// Fault: the next `count` uninstalls of `node`'s agent fail.
    pub fn fail_uninstalls(&mut self, node: &str, count: u32) {
        self.faults.entry(node.to_owned()).or_default().uninstall_failures += count;
    }

    pub fn handle(&mut self, request: InventoryRequest) -> Result<InventoryResponse, InventoryError> {
        if self.fail_next > 0 {
            self.fail_next -= 1;
            return Err(InventoryError::Unavailable { retry_after_s: UNAVAILABLE_RETRY_AFTER_S });
        }
        match request {
            InventoryRequest::Read { node } => Ok(InventoryResponse::Record(self.records.get(&node).cloned())),
            InventoryRequest::Transition { node, from, to } => {
                let record =
                    self.records.get_mut(&node).ok_or_else(|| InventoryError::NotFound { node: node.clone() })?;
                if record.state == to {
                    return Ok(InventoryResponse::Done);
                }
                if record.state != from || !record.state.may_become(to) {
                    return Err(InventoryError::Conflict { node, state: record.state, wanted: to });
                }
                record.state = to;
                Ok(InventoryResponse::Done)
            }
            InventoryRequest::ReleaseAllocations { node, force } => {
                let record =
                    self.records.get_mut(&node).ok_or_else(|| InventoryError::NotFound { node: node.clone() })?;
                // Workloads are not stripped from a node in service: it must be disabled first.
                if record.state == RecordState::Active && !record.allocations.is_empty() {
                    return Err(InventoryError::Refused {
                        reason: "it is active: disable it before releasing its allocations".into(),
                        node,
                    });
                }
                let faults = self.faults.entry(node).or_default();
                if faults.stuck_releases > 0 {
                    faults.stuck_releases -= 1;
                } else if force || record.allocations.is_empty() {
                    record.allocations.clear();
                }
                Ok(InventoryResponse::Remaining(record.allocations.iter().cloned().collect()))
            }
            InventoryRequest::CompleteTask { node, task } => {
                let record =
                    self.records.get_mut(&node).ok_or_else(|| InventoryError::NotFound { node: node.clone() })?;
                let faults = self.faults.entry(node.clone()).or_default();
                let result = match task {
                    NodeTask::Drain => TaskResult::Done,
                    NodeTask::CleanupStorage => {
                        if faults.residue_cleanups > 0 {
                            faults.residue_cleanups -= 1;
                            record.residue.insert("/var/lib/gpuaas/scratch/.tenant-cache".to_owned());
                        } else {
                            record.residue.clear();
                        }
                        TaskResult::Done
                    }
                    NodeTask::ScrubGpu => TaskResult::Done,
                    NodeTask::ValidateClean => match record.residue.iter().next() {
                        Some(what) => TaskResult::Residue { what: what.clone() },
                        None => TaskResult::Done,
                    },
                    NodeTask::Uninstall => {
                        if faults.uninstall_failures > 0 {
                            faults.uninstall_failures -= 1;
                            TaskResult::Failed { error: format!("uninstall of {node}'s agent did not finish") }
                        } else {
                            record.agent_installed = false;
                            TaskResult::Done
                        }
                    }
                };
                Ok(InventoryResponse::Task(result))
            }
            InventoryRequest::Remove { node } => {
                let Some(record) = self.records.get(&node) else { return Ok(InventoryResponse::Done) };
                if record.state != RecordState::Retired {
                    return Err(InventoryError::NotRemovable {
                        node,
                        reason: format!("it is {}, not retired", record.state.as_str()),
                    });
                }
                if record.agent_installed {
                    return Err(InventoryError::NotRemovable { node, reason: "its agent is still installed".into() });
                }
                self.records.remove(&node);
                Ok(InventoryResponse::Done)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transition(inventory: &mut Inventory, from: RecordState, to: RecordState) -> Result<(), InventoryError> {
        inventory.handle(InventoryRequest::Transition { node: "node-01".into(), from, to }).map(|_| ())
    }

    fn task(inventory: &mut Inventory, task: NodeTask) -> TaskResult {
        match inventory.handle(InventoryRequest::CompleteTask { node: "node-01".into(), task }) {
            Ok(InventoryResponse::Task(result)) => result,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_record_walks_the_runbook_forward_and_an_illegal_jump_is_a_conflict() {
        let mut inventory = Inventory::new();
        inventory.enrol("node-01", 2);
        let illegal = transition(&mut inventory, RecordState::Active, RecordState::Retired);
        assert_eq!(
            illegal,
            Err(InventoryError::Conflict {
                node: "node-01".into(),
                state: RecordState::Active,
                wanted: RecordState::Retired
            })
        );
        transition(&mut inventory, RecordState::Active, RecordState::Quarantined).expect("disable");
        transition(&mut inventory, RecordState::Active, RecordState::Quarantined).expect("a retried disable succeeds");
        transition(&mut inventory, RecordState::Quarantined, RecordState::Retired).expect("retire");
        let removed = inventory.handle(InventoryRequest::Remove { node: "node-01".into() });
        assert!(matches!(removed, Err(InventoryError::NotRemovable { .. })), "the agent is still installed");
        assert_eq!(task(&mut inventory, NodeTask::Uninstall), TaskResult::Done);
        inventory.handle(InventoryRequest::Remove { node: "node-01".into() }).expect("removed");
        assert_eq!(inventory.record("node-01"), None);
        let again = inventory.handle(InventoryRequest::Remove { node: "node-01".into() });
        assert_eq!(again, Ok(InventoryResponse::Done), "removing a removed record is a success");
    }

    #[test]
    fn stuck_allocations_survive_forced_releases_until_the_fault_is_spent() {
        let mut inventory = Inventory::new();
        inventory.enrol("node-01", 3);
        let active = inventory.handle(InventoryRequest::ReleaseAllocations { node: "node-01".into(), force: true });
        assert!(matches!(active, Err(InventoryError::Refused { .. })), "an active node keeps its work: {active:?}");
        transition(&mut inventory, RecordState::Active, RecordState::Quarantined).expect("disable");
        inventory.stick_allocations("node-01", 1);
        let release = |inventory: &mut Inventory| {
            inventory.handle(InventoryRequest::ReleaseAllocations { node: "node-01".into(), force: true })
        };
        assert!(matches!(release(&mut inventory), Ok(InventoryResponse::Remaining(left)) if left.len() == 3));
        assert_eq!(release(&mut inventory), Ok(InventoryResponse::Remaining(Vec::new())));
        assert!(inventory.reactivate("node-01"), "an operator puts it back in service");
        assert_eq!(inventory.record("node-01").map(|record| record.state), Some(RecordState::Active));
    }

    #[test]
    fn validation_finds_what_a_faulted_cleanup_left_and_passes_after_a_clean_one() {
        let mut inventory = Inventory::new();
        inventory.enrol("node-01", 1);
        assert!(matches!(task(&mut inventory, NodeTask::ValidateClean), TaskResult::Residue { .. }), "uncleaned");
        inventory.leave_residue("node-01", 1);
        task(&mut inventory, NodeTask::CleanupStorage);
        assert!(matches!(task(&mut inventory, NodeTask::ValidateClean), TaskResult::Residue { .. }));
        task(&mut inventory, NodeTask::CleanupStorage);
        assert_eq!(task(&mut inventory, NodeTask::ValidateClean), TaskResult::Done);
    }

    #[test]
    fn a_503_changes_nothing_and_a_failed_uninstall_keeps_the_agent() {
        let mut inventory = Inventory::new();
        inventory.enrol("node-01", 0);
        inventory.fail_next(1);
        let failed = transition(&mut inventory, RecordState::Active, RecordState::Quarantined);
        assert_eq!(failed, Err(InventoryError::Unavailable { retry_after_s: UNAVAILABLE_RETRY_AFTER_S }));
        assert_eq!(inventory.record("node-01").map(|record| record.state), Some(RecordState::Active));
        inventory.fail_uninstalls("node-01", 1);
        assert!(matches!(task(&mut inventory, NodeTask::Uninstall), TaskResult::Failed { .. }));
        assert!(inventory.record("node-01").is_some_and(|record| record.agent_installed));
    }
}
