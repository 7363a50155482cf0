//! Decommission in the simulated world: the GPUaaS inventory and allocation service (`fakes::inventory`, served from
//! the `hub` host), the node tasks its agents run, and the engine's `Fleet` port over the simulated network. The
//! controller's decommission workflows are the engine's (`engine::controller`); a `decommission` step is an
//! operator's request to it.
//!
//! A node task is two calls, as a task API is: the dispatch (the hub asks the node's agent, which must be running on
//! a powered, enrolled machine) and, the task's duration later, the read of its result. An agent that does not
//! answer makes the hub wait its dispatch timeout and answer that the agent is unreachable.

use std::rc::Rc;

use engine::matrix::NodeState;
use engine::ports::fleet::{Fleet, FleetError, FleetRecord, NodeTask, TaskOutcome};
use fakes::inventory::{InventoryError, InventoryRequest, InventoryResponse, RecordState, TaskResult};

use crate::model::faults::{DeathPoint, DeathSubsystem};
use crate::observe::trace::Body;
use crate::world::net::HostId;
use crate::world::{HUB_ID, World};

/// How long the hub waits for a node agent to take a task before it answers that the agent is unreachable.
pub const TASK_DISPATCH_TIMEOUT_MS: u64 = 60_000;
/// Allocations each node carries when its agent enrols (workloads a decommission must detach).
pub const ALLOCATIONS_PER_NODE: u32 = 2;

fn record_state(state: NodeState) -> Option<RecordState> {
    match state {
        NodeState::Enrolling => Some(RecordState::Enrolling),
        NodeState::Active => Some(RecordState::Active),
        NodeState::Quarantined => Some(RecordState::Quarantined),
        NodeState::Retired => Some(RecordState::Retired),
        NodeState::Deleted => None,
    }
}

fn node_state(state: RecordState) -> NodeState {
    match state {
        RecordState::Enrolling => NodeState::Enrolling,
        RecordState::Active => NodeState::Active,
        RecordState::Quarantined => NodeState::Quarantined,
        RecordState::Retired => NodeState::Retired,
    }
}

fn fake_task(task: NodeTask) -> fakes::inventory::NodeTask {
    match task {
        NodeTask::Drain => fakes::inventory::NodeTask::Drain,
        NodeTask::CleanupStorage => fakes::inventory::NodeTask::CleanupStorage,
        NodeTask::ScrubGpu => fakes::inventory::NodeTask::ScrubGpu,
        NodeTask::ValidateClean => fakes::inventory::NodeTask::ValidateClean,
        NodeTask::Uninstall => fakes::inventory::NodeTask::Uninstall,
    }
}

/// An inventory error in the engine's terms.
fn fleet_error(error: InventoryError) -> FleetError {
    match error {
        InventoryError::Unavailable { retry_after_s } => FleetError::Unavailable { retry_after_s },
        InventoryError::NotFound { .. } => FleetError::NotFound(error.to_string()),
        InventoryError::Conflict { .. } | InventoryError::NotRemovable { .. } | InventoryError::Refused { .. } => {
            FleetError::Conflict(error.to_string())
        }
    }
}

/// The engine's `Fleet` port: requests over the network to the `hub` host.
pub(crate) struct SimFleet {
    pub world: Rc<World>,
    pub from: HostId,
}

impl SimFleet {
    async fn ask(&self, request: InventoryRequest) -> Result<InventoryResponse, FleetError> {
        let world = &self.world;
        let op = inventory_op(&request);
        let node = inventory_node(&request).to_owned();
        let inventory_node_name = node.clone();
        let answer = world
            .call(self.from, HUB_ID, world.spec.engine.call_timeout_ms, move |world| {
                world.site().state.borrow_mut().inventory.handle(request)
            })
            .await;
        let error = match &answer {
            Ok(Ok(_)) => None,
            Ok(Err(error)) => Some(error.to_string()),
            Err(error) => Some(error.to_string()),
        };
        world.record(self.from, Body::InventoryRequest { node, op: op.to_owned(), error });
        // A decommission death armed after a remote mutation: the inventory changed and said so.
        if matches!(answer, Ok(Ok(_)))
            && matches!(op, "transition" | "release_allocations" | "remove")
            && world.take_death(
                DeathSubsystem::Decommission,
                DeathPoint::AfterRemoteMutation,
                crate::model::faults::Subject::Machine(inventory_node_name.clone()),
            )
        {
            world.die_here(self.from).await;
        }
        answer.map_err(FleetError::Transport)?.map_err(fleet_error)
    }
}

fn inventory_op(request: &InventoryRequest) -> &'static str {
    match request {
        InventoryRequest::Read { .. } => "read",
        InventoryRequest::Transition { .. } => "transition",
        InventoryRequest::ReleaseAllocations { .. } => "release_allocations",
        InventoryRequest::CompleteTask { .. } => "task_result",
        InventoryRequest::Remove { .. } => "remove",
    }
}

fn inventory_node(request: &InventoryRequest) -> &str {
    match request {
        InventoryRequest::Read { node }
        | InventoryRequest::Transition { node, .. }
        | InventoryRequest::ReleaseAllocations { node, .. }
        | InventoryRequest::CompleteTask { node, .. }
        | InventoryRequest::Remove { node } => node,
    }
}

fn unexpected(what: &str) -> FleetError {
    FleetError::Conflict(format!("the inventory answered something else to a {what} request"))
}

impl Fleet for SimFleet {
    async fn record(&self, node: &str) -> Result<Option<FleetRecord>, FleetError> {
        match self.ask(InventoryRequest::Read { node: node.to_owned() }).await? {
            InventoryResponse::Record(record) => Ok(record.map(|record| FleetRecord {
                state: node_state(record.state),
                allocations: record.allocations.into_iter().collect(),
                agent_installed: record.agent_installed,
            })),
            _ => Err(unexpected("read")),
        }
    }

    async fn transition(&self, node: &str, from: NodeState, to: NodeState) -> Result<(), FleetError> {
        let (Some(from), Some(to)) = (record_state(from), record_state(to)) else {
            return Err(FleetError::Conflict(format!("{node}: deleted is not a record state; remove the record")));
        };
        self.ask(InventoryRequest::Transition { node: node.to_owned(), from, to }).await.map(|_| ())
    }

    async fn release_allocations(&self, node: &str, force: bool) -> Result<Vec<String>, FleetError> {
        match self.ask(InventoryRequest::ReleaseAllocations { node: node.to_owned(), force }).await? {
            InventoryResponse::Remaining(remaining) => Ok(remaining),
            _ => Err(unexpected("release")),
        }
    }

    async fn run_task(&self, node: &str, task: NodeTask, operation_id: &str) -> Result<TaskOutcome, FleetError> {
        let world = &self.world;
        let fake = fake_task(task);
        let machine = node.to_owned();
        // The dispatch: the hub asks the node's agent (for an agent task) and answers at once whether it took it.
        let taken = world
            .call(self.from, HUB_ID, world.spec.engine.call_timeout_ms, move |world| {
                !fake.needs_agent() || world.agent_answers(&machine)
            })
            .await
            .map_err(FleetError::Transport)?;
        world.record(
            self.from,
            Body::NodeTask { node: node.to_owned(), task: task.as_str().to_owned(), operation_id: operation_id.into() },
        );
        if !taken {
            tokio::time::sleep(std::time::Duration::from_millis(TASK_DISPATCH_TIMEOUT_MS)).await;
            return Err(FleetError::AgentUnreachable(format!("{node}'s agent did not take the task")));
        }
        tokio::time::sleep(std::time::Duration::from_millis(fake.duration_ms())).await;
        let answer = self.ask(InventoryRequest::CompleteTask { node: node.to_owned(), task: fake }).await?;
        if matches!(answer, InventoryResponse::Task(TaskResult::Done)) && task == NodeTask::Uninstall {
            self.world.uninstall_agent(node);
        }
        match answer {
            InventoryResponse::Task(TaskResult::Done) => Ok(TaskOutcome::Done),
            InventoryResponse::Task(TaskResult::Residue { what }) => Ok(TaskOutcome::Residue(what)),
            InventoryResponse::Task(TaskResult::Failed { error }) => Ok(TaskOutcome::Failed(error)),
            _ => Err(unexpected("task")),
        }
    }

    async fn remove_record(&self, node: &str) -> Result<(), FleetError> {
        self.ask(InventoryRequest::Remove { node: node.to_owned() }).await.map(|_| ())
    }
}

impl World {
    /// Whether `machine`'s agent would take a task now: its machine runs its deployed OS with the agent enrolled,
    /// and no fault silences it.
    pub(crate) fn agent_answers(&self, machine: &str) -> bool {
        !self.site().state.borrow().agents_unreachable.contains(machine)
            && self.site().lock().site.machine(machine).is_some_and(|m| m.agent_enrolled() && m.is_powered())
            && self.is_up(self.site().host)
    }

    /// An uninstalled agent: its principal is revoked at the hub and it heartbeats no more.
    fn uninstall_agent(self: &Rc<Self>, machine: &str) {
        self.site().state.borrow_mut().enrolled.remove(machine);
        self.revoke_principal(machine);
    }
}
