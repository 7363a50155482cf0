//! The rollout's durable journal records and their replay (RCCA: "The typed cohort journal preserved exact recovery
//! authority across controller death"; P1 "Decouple WAL ordering from remote serialization": arm a batch of intents,
//! run the remote operations concurrently, record completions).
//!
//! Records are one line each, `rollout <json>`, in the controller's [`crate::ports::Journal`] next to other
//! subsystems' records. A new controller replays them and adopts the latest non-terminal rollout at its exact
//! revision: completed steps are never run again; a step with an intent and no completion is re-checked against the
//! node before anything is redone.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::ports::JournalError;
use crate::ports::events::RolloutEnd;
use crate::rollout::account::Exclusions;
use crate::rollout::lane::{LaneVerdict, NodeMachine, NodeState, NodeStep};

fn is_empty(exclusions: &Exclusions) -> bool {
    *exclusions == Exclusions::default()
}

const PREFIX: &str = "rollout ";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "record", rename_all = "snake_case", deny_unknown_fields)]
pub enum Record {
    /// The plan is frozen before any mutation: revision, generation, the signed route bundle's digest, the lanes.
    PlanFrozen {
        rollout: String,
        revision: String,
        generation: u64,
        route_digest: String,
        lanes: Vec<Vec<String>>,
        quarantined: Vec<String>,
        /// The quarantines' surfaces and the nodes someone else held, for the account. Absent from journals written
        /// before the account (their quarantines are accounted with no surfaces, and their held nodes not at all).
        #[serde(default, skip_serializing_if = "is_empty")]
        excluded: Exclusions,
    },
    /// The deployment lock's fence this rollout holds: a controller adopting the journal supersedes exactly it.
    LockTaken {
        rollout: String,
        fence: u64,
    },
    EpochOpened {
        rollout: String,
        epoch: u64,
    },
    /// Armed before the remote operation runs (the legacy controller: one node at a time).
    Intent {
        rollout: String,
        route_digest: String,
        node: String,
        step: NodeStep,
        operation_id: String,
    },
    /// A batch of intents armed in one durable append before the lane's operations for `step` run concurrently
    /// (RCCA P1 "Durably arm a batch of per-node intents").
    Intents {
        rollout: String,
        route_digest: String,
        lane: usize,
        step: NodeStep,
        /// `(node, operation id)` in lane order.
        operations: Vec<(String, String)>,
    },
    /// Recorded after the remote operation was acknowledged (or found already done).
    Completed {
        rollout: String,
        route_digest: String,
        node: String,
        step: NodeStep,
        operation_id: String,
    },
    NodeFailed {
        rollout: String,
        node: String,
        step: NodeStep,
        reason: String,
    },
    LaneCommitted {
        rollout: String,
        route_digest: String,
        lane: usize,
        verdict: LaneVerdict,
    },
    /// The rollout reached a terminal state; nothing is adopted after this.
    Terminal {
        rollout: String,
        outcome: RolloutEnd,
    },
}

impl Record {
    pub fn rollout(&self) -> &str {
        match self {
            Record::PlanFrozen { rollout, .. }
            | Record::LockTaken { rollout, .. }
            | Record::EpochOpened { rollout, .. }
            | Record::Intent { rollout, .. }
            | Record::Intents { rollout, .. }
            | Record::Completed { rollout, .. }
            | Record::NodeFailed { rollout, .. }
            | Record::LaneCommitted { rollout, .. }
            | Record::Terminal { rollout, .. } => rollout,
        }
    }

    /// The journal line.
    pub fn encode(&self) -> String {
        format!("{PREFIX}{}", serde_json::to_string(self).expect("journal records serialise"))
    }

    /// `None` for another subsystem's line; an error for a rollout line that does not decode.
    pub fn decode(line: &str) -> Option<Result<Record, JournalError>> {
        let json = line.strip_prefix(PREFIX)?;
        Some(serde_json::from_str(json).map_err(|error| JournalError::Corrupt(format!("rollout record: {error}"))))
    }
}

/// A rollout rebuilt from its journal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Adopted {
    pub rollout: String,
    pub revision: String,
    pub generation: u64,
    pub route_digest: String,
    pub lanes: Vec<Vec<String>>,
    pub epoch: Option<u64>,
    /// The deployment lock's fence the journal's controller held, if it recorded one.
    pub fence: Option<u64>,
    pub nodes: BTreeMap<String, NodeMachine>,
    /// Steps whose intent was armed but whose completion was never recorded: the controller died between the two.
    /// Each must be re-checked against the node (did it happen?) before it is done or redone.
    pub in_doubt: Vec<(String, NodeStep)>,
    pub committed_lanes: BTreeMap<usize, LaneVerdict>,
    /// The selected nodes outside the lanes, as the plan recorded them.
    pub excluded: Exclusions,
}

/// Replays journal lines and returns the latest rollout that is not terminal, if any.
pub fn replay<'a>(lines: impl IntoIterator<Item = &'a str>) -> Result<Option<Adopted>, JournalError> {
    let mut current: Option<Adopted> = None;
    for line in lines {
        let Some(record) = Record::decode(line) else { continue };
        let record = record?;
        if let Record::PlanFrozen { rollout, revision, generation, route_digest, lanes, quarantined, excluded } =
            &record
        {
            let mut nodes: BTreeMap<String, NodeMachine> =
                lanes.iter().flatten().map(|node| (node.clone(), NodeMachine::new(node.clone()))).collect();
            for node in quarantined {
                nodes.insert(node.clone(), NodeMachine::quarantined(node.clone()));
            }
            current = Some(Adopted {
                rollout: rollout.clone(),
                revision: revision.clone(),
                generation: *generation,
                route_digest: route_digest.clone(),
                lanes: lanes.clone(),
                epoch: None,
                fence: None,
                nodes,
                in_doubt: Vec::new(),
                committed_lanes: BTreeMap::new(),
                excluded: excluded.clone(),
            });
            continue;
        }
        let Some(adopted) = current.as_mut().filter(|adopted| adopted.rollout == record.rollout()) else {
            return Err(JournalError::Corrupt(format!("record for rollout {} before its plan", record.rollout())));
        };
        match record {
            Record::PlanFrozen { .. } => unreachable!("handled above"),
            Record::EpochOpened { epoch, .. } => adopted.epoch = Some(epoch),
            Record::LockTaken { fence, .. } => adopted.fence = Some(fence),
            Record::Intent { node, step, .. } => {
                if !adopted.in_doubt.contains(&(node.clone(), step)) {
                    adopted.in_doubt.push((node, step));
                }
            }
            Record::Intents { step, operations, .. } => {
                for (node, _) in operations {
                    if !adopted.in_doubt.contains(&(node.clone(), step)) {
                        adopted.in_doubt.push((node, step));
                    }
                }
            }
            Record::Completed { node, step, .. } => {
                adopted.in_doubt.retain(|entry| *entry != (node.clone(), step));
                if let Some(machine) = adopted.nodes.get_mut(&node) {
                    machine.handle_done(step);
                }
            }
            Record::NodeFailed { node, step, reason, .. } => {
                adopted.in_doubt.retain(|entry| *entry != (node.clone(), step));
                if let Some(machine) = adopted.nodes.get_mut(&node) {
                    machine.handle_failed(step, reason);
                }
            }
            Record::LaneCommitted { lane, verdict, .. } => {
                adopted.committed_lanes.insert(lane, verdict);
            }
            Record::Terminal { .. } => current = None,
        }
    }
    Ok(current)
}

impl Adopted {
    /// Nodes not yet finished, with the step each resumes at.
    pub fn resumable(&self) -> Vec<(&str, NodeStep)> {
        self.nodes.values().filter_map(|machine| Some((machine.node.as_str(), machine.poll_step()?))).collect()
    }

    pub fn is_quarantined(&self, node: &str) -> bool {
        self.nodes.get(node).is_some_and(|machine| machine.state == NodeState::Quarantined)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rollout::lane::operation_id;

    fn plan() -> Record {
        Record::PlanFrozen {
            rollout: "r1".into(),
            revision: "2944aebb".into(),
            generation: 5,
            route_digest: "sha256:routes".into(),
            lanes: vec![vec!["w1".into(), "w2".into()], vec!["w3".into()]],
            quarantined: vec!["w50".into()],
            excluded: Exclusions {
                quarantined: [("w50".to_owned(), vec!["marker absent".to_owned()])].into_iter().collect(),
                held: [("w9".to_owned(), vec!["operator:alice".to_owned()])].into_iter().collect(),
            },
        }
    }

    fn intent(node: &str, step: NodeStep) -> Record {
        Record::Intent {
            rollout: "r1".into(),
            route_digest: "sha256:routes".into(),
            node: node.into(),
            step,
            operation_id: operation_id("r1", node, step),
        }
    }

    fn done(node: &str, step: NodeStep) -> Record {
        Record::Completed {
            rollout: "r1".into(),
            route_digest: "sha256:routes".into(),
            node: node.into(),
            step,
            operation_id: operation_id("r1", node, step),
        }
    }

    fn lines(records: &[Record]) -> Vec<String> {
        let mut lines: Vec<String> = records.iter().map(Record::encode).collect();
        lines.insert(1, "sensor.silent node-03".into()); // another subsystem's record in the same journal
        lines
    }

    #[test]
    fn a_controller_killed_after_intent_adopts_the_step_as_in_doubt() {
        let records =
            [plan(), intent("w1", NodeStep::Hold), done("w1", NodeStep::Hold), intent("w1", NodeStep::Quiesce)];
        let lines = lines(&records);
        let adopted = replay(lines.iter().map(String::as_str)).unwrap().unwrap();
        assert_eq!(adopted.revision, "2944aebb");
        assert_eq!(adopted.in_doubt, [("w1".to_owned(), NodeStep::Quiesce)]);
        assert_eq!(adopted.resumable(), [("w1", NodeStep::Quiesce), ("w2", NodeStep::Hold), ("w3", NodeStep::Hold)]);
        assert!(adopted.is_quarantined("w50"));
    }

    #[test]
    fn a_batch_of_intents_puts_every_node_of_it_in_doubt_and_the_lock_fence_is_adopted() {
        let batch = Record::Intents {
            rollout: "r1".into(),
            route_digest: "sha256:routes".into(),
            lane: 0,
            step: NodeStep::Quiesce,
            operations: ["w1", "w2"]
                .iter()
                .map(|node| ((*node).to_owned(), operation_id("r1", node, NodeStep::Quiesce)))
                .collect(),
        };
        let lock = Record::LockTaken { rollout: "r1".into(), fence: 7 };
        let records = [plan(), lock, batch, done("w2", NodeStep::Quiesce)];
        let lines = lines(&records);
        let adopted = replay(lines.iter().map(String::as_str)).unwrap().unwrap();
        assert_eq!(adopted.fence, Some(7));
        assert_eq!(adopted.in_doubt, [("w1".to_owned(), NodeStep::Quiesce)]);
    }

    #[test]
    fn a_completed_step_is_never_resumed_and_a_replayed_completion_changes_nothing() {
        let records = [plan(), intent("w2", NodeStep::Hold), done("w2", NodeStep::Hold), done("w2", NodeStep::Hold)];
        let lines = lines(&records);
        let adopted = replay(lines.iter().map(String::as_str)).unwrap().unwrap();
        assert!(adopted.in_doubt.is_empty());
        assert_eq!(adopted.nodes["w2"].poll_step(), Some(NodeStep::Quiesce));
    }

    #[test]
    fn a_terminal_rollout_is_not_adopted_and_a_later_one_is() {
        let terminal = Record::Terminal { rollout: "r1".into(), outcome: RolloutEnd::Successor };
        let lines = lines(&[plan(), terminal.clone()]);
        assert_eq!(replay(lines.iter().map(String::as_str)).unwrap(), None);
        let lines = lines_with_second_plan(&[plan(), terminal]);
        assert_eq!(replay(lines.iter().map(String::as_str)).unwrap().unwrap().rollout, "r2");
    }

    fn lines_with_second_plan(records: &[Record]) -> Vec<String> {
        let mut all = lines(records);
        let Record::PlanFrozen { revision, generation, route_digest, lanes, quarantined, excluded, .. } = plan() else {
            unreachable!()
        };
        let rollout = "r2".into();
        all.push(
            Record::PlanFrozen { rollout, revision, generation, route_digest, lanes, quarantined, excluded }.encode(),
        );
        all
    }

    #[test]
    fn the_plan_keeps_its_exclusions_and_a_journal_from_before_the_account_still_decodes() {
        let lines = lines(&[plan()]);
        let adopted = replay(lines.iter().map(String::as_str)).unwrap().unwrap();
        assert_eq!(adopted.excluded.quarantined["w50"], ["marker absent"]);
        assert_eq!(adopted.excluded.held["w9"], ["operator:alice"]);
        // Written before the account: no exclusions, and `converged` for a rollout of successor and prior lanes.
        let old = [
            r#"rollout {"record":"plan_frozen","rollout":"r0","revision":"a","generation":1,"route_digest":"d","lanes":[["w1"]],"quarantined":["w2"]}"#,
            r#"rollout {"record":"terminal","rollout":"r0","outcome":"converged"}"#,
        ];
        let Some(Ok(Record::PlanFrozen { excluded, .. })) = Record::decode(old[0]) else { panic!("{old:?}") };
        assert_eq!(excluded, Exclusions::default());
        assert_eq!(
            Record::decode(old[1]).unwrap().unwrap(),
            Record::Terminal { rollout: "r0".into(), outcome: RolloutEnd::Partial }
        );
        assert_eq!(replay(old).unwrap(), None, "a terminal rollout is not adopted");
    }

    #[test]
    fn a_corrupt_rollout_line_is_an_error_not_a_silent_skip() {
        let lines = ["rollout {\"record\":\"intent\"".to_owned()];
        assert!(matches!(replay(lines.iter().map(String::as_str)), Err(JournalError::Corrupt(_))));
        let orphan = [done("w1", NodeStep::Hold).encode()];
        assert!(matches!(replay(orphan.iter().map(String::as_str)), Err(JournalError::Corrupt(_))));
    }

    #[test]
    fn records_are_one_line_of_tagged_json() {
        let line = intent("w1", NodeStep::WriteIdentity).encode();
        assert_eq!(
            line,
            r#"rollout {"record":"intent","rollout":"r1","route_digest":"sha256:routes","node":"w1","step":"write_identity","operation_id":"r1/w1/write_identity"}"#
        );
        assert_eq!(Record::decode(&line).unwrap().unwrap(), intent("w1", NodeStep::WriteIdentity));
    }
}
