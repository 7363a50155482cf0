//! The rotation's per-node state machine and its one judgement after a failure: sans-I/O, table-tested. The driver
//! asks [`RotationMachine::poll_step`] what to run, reports each outcome with `handle_*`, and asks [`after_failure`]
//! whether a failed step stops the rotation with the overlap kept or aborts it.

pub use crate::ports::events::{RotationEnd, RotationFailure, RotationStep};

/// The operation id of one step of one rotation: stable across controller deaths, so the journal, the hub and the
/// node can recognise a replay.
pub fn operation_id(rotation: &str, step: RotationStep) -> String {
    format!("{rotation}/{}", step.as_str())
}

/// Where a rotation is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// The next step to run (never started, or resumed).
    Pending(RotationStep),
    /// Ended (see [`RotationEnd`]).
    Ended(RotationEnd),
}

/// One rotation of one node's agent credential.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RotationMachine {
    pub progress: Progress,
    /// The successor's generation, once issued.
    pub generation: Option<u64>,
}

impl Default for RotationMachine {
    fn default() -> Self {
        RotationMachine::new()
    }
}

impl RotationMachine {
    pub fn new() -> RotationMachine {
        RotationMachine { progress: Progress::Pending(RotationStep::Issue), generation: None }
    }

    /// The step to run now, if any.
    pub fn poll_step(&self) -> Option<RotationStep> {
        match self.progress {
            Progress::Pending(step) => Some(step),
            Progress::Ended(_) => None,
        }
    }

    /// How the rotation ended, if it has.
    pub fn end(&self) -> Option<&RotationEnd> {
        match &self.progress {
            Progress::Pending(_) => None,
            Progress::Ended(end) => Some(end),
        }
    }

    /// A step completed (or was found done). The issue carries the successor's generation. A completion of a step
    /// that is not the pending one (a replayed record) changes nothing.
    pub fn handle_done(&mut self, step: RotationStep, generation: Option<u64>) {
        if self.progress != Progress::Pending(step) {
            return;
        }
        if step == RotationStep::Issue {
            self.generation = generation.or(self.generation);
        }
        self.progress = match step.next() {
            Some(next) => Progress::Pending(next),
            // Revoked after the proof: the successor is the only credential.
            None => Progress::Ended(RotationEnd::Rotated { generation: self.generation.unwrap_or_default() }),
        };
    }

    /// The rotation ended otherwise than rotated (a stop or an abort the driver carried out).
    pub fn handle_ended(&mut self, end: RotationEnd) {
        if matches!(self.progress, Progress::Pending(_)) {
            self.progress = Progress::Ended(end);
        }
    }
}

/// Whether the successor may be on the node when a step failed: what an abort would cut the node off from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnNode {
    /// No write of it ran (every attempt was refused before running, or a later observation showed the file
    /// without it): revoking it strands nobody.
    Absent,
    /// A write may have run (a timeout or reset after sending), or it was seen there.
    MaybePresent,
}

/// What the rotation does after `step` failed for good.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterFailure {
    /// End, keeping the overlap: the predecessor stays valid, and so does a successor the node may be using.
    Stop,
    /// Revoke the successor (never the predecessor), then end: nothing on the node depends on it.
    Abort,
}

/// The one judgement after a failed step. Never revoke unproved: a failure at the proof or the revocation keeps both
/// credentials. A successor that cannot be on the node (an issue that failed, an install that never ran) is revoked,
/// so no valid credential is left that nobody holds; one that may be on the node is kept, because revoking it could
/// silence the agent.
pub fn after_failure(step: RotationStep, on_node: OnNode) -> AfterFailure {
    match (step, on_node) {
        (RotationStep::Issue, _) | (RotationStep::Install, OnNode::Absent) => AfterFailure::Abort,
        (RotationStep::Install, OnNode::MaybePresent) | (RotationStep::Prove | RotationStep::Revoke, _) => {
            AfterFailure::Stop
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rotation_walks_issue_install_prove_revoke_and_ends_rotated_at_its_generation() {
        let mut machine = RotationMachine::new();
        let mut seen = Vec::new();
        while let Some(step) = machine.poll_step() {
            seen.push(step);
            machine.handle_done(step, (step == RotationStep::Issue).then_some(2));
        }
        assert_eq!(seen, RotationStep::ALL);
        assert_eq!(machine.end(), Some(&RotationEnd::Rotated { generation: 2 }));
    }

    #[test]
    fn a_replayed_or_out_of_order_completion_changes_nothing() {
        let mut machine = RotationMachine::new();
        machine.handle_done(RotationStep::Issue, Some(3));
        machine.handle_done(RotationStep::Issue, Some(9));
        machine.handle_done(RotationStep::Prove, None);
        assert_eq!((machine.poll_step(), machine.generation), (Some(RotationStep::Install), Some(3)));
        let stop = RotationEnd::Stopped {
            step: RotationStep::Install,
            failure: RotationFailure::RetriesExhausted { error: "ssh: timed out".into() },
        };
        machine.handle_ended(stop.clone());
        machine.handle_done(RotationStep::Install, None);
        machine.handle_ended(RotationEnd::Rotated { generation: 3 });
        assert_eq!(machine.end(), Some(&stop), "an ended rotation stays as it ended");
    }

    #[test]
    fn only_a_successor_that_cannot_be_on_the_node_is_revoked() {
        use AfterFailure::{Abort, Stop};
        use OnNode::{Absent, MaybePresent};
        let table = [
            (RotationStep::Issue, Absent, Abort),
            (RotationStep::Issue, MaybePresent, Abort),
            (RotationStep::Install, Absent, Abort),
            (RotationStep::Install, MaybePresent, Stop),
            (RotationStep::Prove, Absent, Stop),
            (RotationStep::Prove, MaybePresent, Stop),
            (RotationStep::Revoke, Absent, Stop),
            (RotationStep::Revoke, MaybePresent, Stop),
        ];
        for (step, on_node, expected) in table {
            assert_eq!(after_failure(step, on_node), expected, "{step:?} {on_node:?}");
        }
    }

    #[test]
    fn operation_ids_are_stable_per_rotation_and_step() {
        assert_eq!(operation_id("rotation-node-03-1", RotationStep::Install), "rotation-node-03-1/install");
    }
}
