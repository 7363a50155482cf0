//! The per-node rollout state machine and the lane verdict (RCCA "Replacement plan": idempotent per-node state
//! machines in parallel lanes; a failed lane stays held; healthy lanes commit independently).
//!
//! A node walks hold → quiesce → install → write identity (canonical marker and env, atomically) → start → prove
//! (a heartbeat with the new revision and attestation) → release. When its lane cannot reach the successor, the lane
//! is rolled back: each node it took down walks the same steps back to its prior generation (the install step
//! restores the prior install the node kept), and the lane is `Prior` once every one did. Every mutating step has an operation id; the
//! driver journals the intent before the step and the completion after it, so a new controller can tell a step
//! that completed from one that must be re-checked.

pub use crate::ports::events::{LaneVerdict, NodeStep};

/// The operation id of one step of one node in one rollout: stable across controller deaths, so the far end and
/// the journal can recognise a replay.
pub fn operation_id(rollout: &str, node: &str, step: NodeStep) -> String {
    format!("{rollout}/{node}/{}", step.as_str())
}

/// The operation id of one step of one node's reverse recovery: distinct from the forward step's, stable across
/// controller deaths.
pub fn revert_operation_id(rollout: &str, node: &str, step: NodeStep) -> String {
    format!("{rollout}/{node}/revert/{}", step.as_str())
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
    /// Its lane is being rolled back to the prior generation: the next step of the reverse path (`Install` restores
    /// the prior install kept on the node).
    Reverting { step: NodeStep, reason: String },
    /// Rolled back with its lane: it runs and proves its prior generation again, its hold released.
    RolledBack { reason: String },
    /// Its rollback stopped at `step`: held, for a later controller (or a person) to finish.
    RevertFailed { step: NodeStep, reason: String },
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

    /// Whether the rollout touched the node past its hold: a rollback of its lane must take it back.
    pub fn touched(&self) -> bool {
        match &self.state {
            NodeState::Pending(step) => *step > NodeStep::Hold,
            NodeState::Succeeded | NodeState::Failed { .. } => true,
            NodeState::Reverting { .. } | NodeState::RevertFailed { .. } | NodeState::RolledBack { .. } => true,
            NodeState::RetainedPrior { .. } | NodeState::Quarantined => false,
        }
    }

    /// Its lane is rolled back because of `reason`: a touched node starts the reverse path at its hold, one whose
    /// rollback failed resumes it at the step that failed (what it completed stays done); a rolled-back one stays so;
    /// an untouched one has nothing to undo.
    pub fn begin_revert(&mut self, reason: &str) {
        self.state = match &self.state {
            NodeState::RevertFailed { step, .. } => NodeState::Reverting { step: *step, reason: reason.to_owned() },
            NodeState::RolledBack { .. } | NodeState::Reverting { .. } => return,
            _ if !self.touched() => return,
            _ => NodeState::Reverting { step: NodeStep::Hold, reason: reason.to_owned() },
        };
    }

    /// The reverse step to run now, if any.
    pub fn poll_revert(&self) -> Option<NodeStep> {
        match self.state {
            NodeState::Reverting { step, .. } => Some(step),
            _ => None,
        }
    }

    /// A reverse step completed (or was found already done on the node).
    pub fn handle_revert_done(&mut self, step: NodeStep) {
        if let NodeState::Reverting { step: at, reason } = &self.state
            && *at == step
        {
            let reason = reason.clone();
            self.state = match step.next() {
                Some(next) => NodeState::Reverting { step: next, reason },
                None => NodeState::RolledBack { reason },
            };
        }
    }

    /// A reverse step failed for good: the node stays held where its rollback stopped.
    pub fn handle_revert_failed(&mut self, step: NodeStep, reason: impl Into<String>) {
        if matches!(&self.state, NodeState::Reverting { step: at, .. } if *at == step) {
            self.state = NodeState::RevertFailed { step, reason: reason.into() };
        }
    }

    /// Whether the node is down or held by this rollout now (stopped, mid-step, failed, or mid-rollback): what a
    /// stuck lane keeps out of service.
    pub fn held_down(&self) -> bool {
        match &self.state {
            NodeState::Pending(step) => *step > NodeStep::Hold,
            NodeState::Failed { .. } | NodeState::Reverting { .. } | NodeState::RevertFailed { .. } => true,
            NodeState::Succeeded
            | NodeState::RetainedPrior { .. }
            | NodeState::Quarantined
            | NodeState::RolledBack { .. } => false,
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
/// nodes is `Prior` (nothing changed). A lane whose every node kept or got back its prior generation (retained, or
/// rolled back) is `Prior`.
pub fn lane_verdict(nodes: &[NodeMachine]) -> LaneVerdict {
    let active: Vec<&NodeMachine> = nodes.iter().filter(|node| node.state != NodeState::Quarantined).collect();
    if active.iter().all(|node| node.state == NodeState::Succeeded) && !active.is_empty() {
        LaneVerdict::Successor
    } else if active
        .iter()
        .all(|node| matches!(node.state, NodeState::RetainedPrior { .. } | NodeState::RolledBack { .. }))
    {
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
    fn a_rollback_walks_every_step_back_and_a_failed_one_resumes_where_it_stopped() {
        let untouched = {
            let mut node = NodeMachine::new("a");
            node.begin_revert("lane stuck");
            node
        };
        assert_eq!(untouched.state, NodeState::Pending(NodeStep::Hold), "nothing to undo on an untouched node");
        let mut node = NodeMachine::new("b");
        node.handle_done(NodeStep::Hold);
        node.handle_done(NodeStep::Quiesce);
        node.handle_failed(NodeStep::Install, "ssh timeout");
        assert!(node.held_down());
        node.begin_revert("b failed at install: ssh timeout");
        let mut seen = Vec::new();
        while let Some(step) = node.poll_revert() {
            seen.push(step);
            if step == NodeStep::Start && seen.iter().filter(|s| **s == NodeStep::Start).count() == 1 {
                node.handle_revert_failed(step, "start refused");
                assert!(node.held_down(), "held where its rollback stopped");
                node.begin_revert("another pass");
                continue;
            }
            node.handle_revert_done(step);
            node.handle_revert_done(step); // a replayed completion record changes nothing
        }
        let mut expected = NodeStep::ALL.to_vec();
        let start = expected.iter().position(|s| *s == NodeStep::Start).unwrap();
        expected.insert(start, NodeStep::Start);
        assert_eq!(seen, expected, "the second pass resumes at the failed step");
        assert!(matches!(node.state, NodeState::RolledBack { .. }));
        assert!(!node.held_down() && node.touched());
        node.begin_revert("again");
        assert!(matches!(node.state, NodeState::RolledBack { .. }), "a rolled-back node stays so");
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
    fn a_rolled_back_lane_is_prior_and_a_failed_rollback_keeps_it_stuck() {
        let mut upgraded = NodeMachine::new("a");
        walk(&mut upgraded);
        let mut failed = NodeMachine::new("b");
        failed.handle_done(NodeStep::Hold);
        failed.handle_done(NodeStep::Quiesce);
        failed.handle_failed(NodeStep::Install, "ssh timed out");
        let mut kept = NodeMachine::new("c");
        kept.handle_failed(NodeStep::Hold, "hub unreachable");
        assert!(upgraded.touched() && failed.touched() && !kept.touched());
        assert!(failed.held_down() && !upgraded.held_down() && !kept.held_down());
        for node in [&mut upgraded, &mut failed, &mut kept] {
            node.begin_revert("b failed at install");
        }
        assert_eq!(kept.poll_revert(), None, "nothing to undo on a node that never went down");
        assert_eq!(upgraded.poll_revert(), Some(NodeStep::Hold));
        let mut seen = Vec::new();
        while let Some(step) = upgraded.poll_revert() {
            seen.push(step);
            upgraded.handle_revert_done(step);
            upgraded.handle_revert_done(step); // a replayed completion changes nothing
        }
        assert_eq!(seen, NodeStep::ALL);
        assert!(matches!(upgraded.state, NodeState::RolledBack { .. }));
        assert!(!upgraded.held_down() && upgraded.touched());
        failed.handle_revert_done(NodeStep::Hold);
        failed.handle_revert_failed(NodeStep::Quiesce, "ssh timed out");
        assert_eq!(lane_verdict(&[upgraded.clone(), failed.clone(), kept.clone()]), LaneVerdict::Stuck);
        // A later rollback resumes it where it failed (its hold stays done), and a rolled-back node stays so.
        failed.begin_revert("retry");
        upgraded.begin_revert("retry");
        assert_eq!((failed.poll_revert(), upgraded.poll_revert()), (Some(NodeStep::Quiesce), None));
        while let Some(step) = failed.poll_revert() {
            failed.handle_revert_done(step);
        }
        assert_eq!(lane_verdict(&[upgraded, failed, kept, NodeMachine::quarantined("d")]), LaneVerdict::Prior);
    }

    #[test]
    fn operation_ids_are_stable_per_rollout_node_and_step() {
        assert_eq!(
            operation_id("r-2944aebb", "worker-50", NodeStep::WriteIdentity),
            "r-2944aebb/worker-50/write_identity"
        );
        assert_eq!(
            revert_operation_id("r-2944aebb", "worker-50", NodeStep::Install),
            "r-2944aebb/worker-50/revert/install"
        );
    }
}
