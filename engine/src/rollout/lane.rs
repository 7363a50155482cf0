//! The per-node rollout state machine and the lane verdict (RCCA "Replacement plan": idempotent per-node state
//! machines in parallel lanes; a failed lane stays held; healthy lanes commit independently).
//!
//! A node walks hold → quiesce → install → write identity (canonical marker and env, atomically) → start → prove
//! (a heartbeat with the new revision and attestation) → release. Every mutating step has an operation id; the
//! driver journals the intent before the step and the completion after it, so a new controller can tell a step
//! that completed from one that must be re-checked.

pub use crate::ports::events::{LaneVerdict, NodeStep};

/// The operation id of one step of one node in one rollout: stable across controller deaths, so the far end and
/// the journal can recognise a replay.
pub fn operation_id(rollout: &str, node: &str, step: NodeStep) -> String {
    format!("{rollout}/{node}/{}", step.as_str())
}

/// Where one node is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeState {
    /// Next step to run (never started or resumed).
    Pending(NodeStep),
    /// Every step done: the node proved the successor revision and its hold is released.
    Succeeded,
    /// Stopped before any step took it down: it still runs the prior generation, authenticated.
    RetainedPrior { reason: String },
    /// Stopped after it went down: held, needs a replay or an operator.
    Failed { step: NodeStep, reason: String },
    /// Excluded by preflight: dispatch-held, with a repair plan; never mutated.
    Quarantined,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeMachine {
    pub node: String,
    pub state: NodeState,
}

impl NodeMachine {
    pub fn new(node: impl Into<String>) -> NodeMachine {
        NodeMachine { node: node.into(), state: NodeState::Pending(NodeStep::Hold) }
    }

    pub fn quarantined(node: impl Into<String>) -> NodeMachine {
        NodeMachine { node: node.into(), state: NodeState::Quarantined }
    }

    /// The step to run now, if any.
    pub fn poll_step(&self) -> Option<NodeStep> {
        match self.state {
            NodeState::Pending(step) => Some(step),
            _ => None,
        }
    }

    /// A step completed (or was found already done on the node).
    pub fn handle_done(&mut self, step: NodeStep) {
        if self.state == NodeState::Pending(step) {
            self.state = step.next().map_or(NodeState::Succeeded, NodeState::Pending);
        }
    }

    /// A step failed for good (retries exhausted, identity changed, permanent refusal).
    pub fn handle_failed(&mut self, step: NodeStep, reason: impl Into<String>) {
        if self.state != NodeState::Pending(step) {
            return;
        }
        let reason = reason.into();
        // Hold is the only step before the node goes down: failing there leaves the prior generation serving.
        self.state = if step == NodeStep::Hold {
            NodeState::RetainedPrior { reason }
        } else {
            NodeState::Failed { step, reason }
        };
    }
}

/// Judges a lane. Quarantined nodes are allowed when the rest of the lane converged, but a lane of only quarantined
/// nodes is `Prior` (nothing changed).
pub fn lane_verdict(nodes: &[NodeMachine]) -> LaneVerdict {
    let active: Vec<&NodeMachine> = nodes.iter().filter(|node| node.state != NodeState::Quarantined).collect();
    if active.iter().all(|node| node.state == NodeState::Succeeded) && !active.is_empty() {
        LaneVerdict::Successor
    } else if active.iter().all(|node| matches!(node.state, NodeState::RetainedPrior { .. })) {
        LaneVerdict::Prior
    } else {
        LaneVerdict::Stuck
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn walk(node: &mut NodeMachine) {
        while let Some(step) = node.poll_step() {
            node.handle_done(step);
        }
    }

    #[test]
    fn a_node_walks_every_step_in_order() {
        let mut node = NodeMachine::new("worker-01");
        let mut seen = Vec::new();
        while let Some(step) = node.poll_step() {
            seen.push(step);
            node.handle_done(step);
        }
        assert_eq!(seen, NodeStep::ALL);
        assert_eq!(node.state, NodeState::Succeeded);
    }

    #[test]
    fn a_stale_completion_is_ignored() {
        let mut node = NodeMachine::new("worker-01");
        node.handle_done(NodeStep::Hold);
        node.handle_done(NodeStep::Hold); // a replayed completion record
        assert_eq!(node.state, NodeState::Pending(NodeStep::Quiesce));
    }

    #[test]
    fn lane_verdicts_follow_the_issue() {
        let mut done = NodeMachine::new("a");
        walk(&mut done);
        let quarantined = NodeMachine::quarantined("b");
        assert_eq!(lane_verdict(&[done.clone(), quarantined.clone()]), LaneVerdict::Successor);
        let mut prior = NodeMachine::new("c");
        prior.handle_failed(NodeStep::Hold, "hub unreachable");
        assert_eq!(lane_verdict(&[prior.clone(), quarantined.clone()]), LaneVerdict::Prior);
        assert_eq!(lane_verdict(std::slice::from_ref(&quarantined)), LaneVerdict::Prior);
        let mut stuck = NodeMachine::new("d");
        stuck.handle_done(NodeStep::Hold);
        stuck.handle_failed(NodeStep::Quiesce, "ssh timeout");
        assert_eq!(lane_verdict(&[done, stuck]), LaneVerdict::Stuck);
        assert_eq!(lane_verdict(&[prior, NodeMachine::new("e")]), LaneVerdict::Stuck, "a node not yet run");
    }

    #[test]
    fn operation_ids_are_stable_per_rollout_node_and_step() {
        assert_eq!(
            operation_id("r-2944aebb", "worker-50", NodeStep::WriteIdentity),
            "r-2944aebb/worker-50/write_identity"
        );
    }
}
