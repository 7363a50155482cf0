//! The rollout's all-selected account, sans-I/O (RCCA P1 "Make quarantine explicit ... Its defect must not silently
//! shrink an all-selected acceptance denominator"; "The all-selected release contract correctly prevents a partial
//! success from being called complete"): what became of every selected node — upgraded, unchanged prior,
//! quarantined with its repair plan, held by someone else, or stuck — and the rollout's end that account decides.
//! The driver builds the account from its node machines and the preflight's exclusions, reports it, and asks
//! [`crate::rollout::rules::Rules::rollout_end`] for the end; production's rule is [`rollout_end`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::ports::events::RolloutEnd;
pub use crate::ports::events::{NodeAccount, NodeOutcome, RepairPlan};
use crate::rollout::holds::HoldOwner;
use crate::rollout::lane::{NodeMachine, NodeState, NodeStep};

/// The selected nodes that never entered a lane, and why: what the account knows besides the node machines. The
/// plan record keeps it, so a controller that adopts the journal accounts for them as the first one did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exclusions {
    /// Quarantined node → the surfaces that contradict a coherent identity.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub quarantined: BTreeMap<String, Vec<String>>,
    /// Node someone else holds → the holds' owners.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub held: BTreeMap<String, Vec<String>>,
}

/// A quarantined node's repair plan: its surfaces, the quarantine hold that keeps it out of dispatch, and the
/// operator's way back in.
pub fn repair_plan(rollout: &str, node: &str, surfaces: Vec<String>) -> RepairPlan {
    let hold = HoldOwner::Quarantine { rollout: rollout.to_owned() }.to_string();
    let command = format!(
        "mend the surfaces on {node}, release the hold {hold} on {node} at the hub, then roll out again: the next \
         preflight classifies {node} afresh"
    );
    RepairPlan { surfaces, hold, command }
}

/// Every selected node's outcome, by node name: the node machines of the plan's lanes and quarantines, and the
/// exclusions. `unrun` says why a node whose lane never went down is still prior (a stuck lane before it, a route
/// change, a lost lock).
pub fn account(
    rollout: &str,
    machines: &BTreeMap<String, NodeMachine>,
    exclusions: &Exclusions,
    unrun: &str,
) -> Vec<NodeAccount> {
    let mut nodes: BTreeMap<&str, NodeOutcome> = BTreeMap::new();
    for (node, machine) in machines {
        let outcome = match &machine.state {
            NodeState::Succeeded => NodeOutcome::Upgraded,
            NodeState::RetainedPrior { reason } => NodeOutcome::Prior { reason: reason.clone() },
            NodeState::Pending(NodeStep::Hold) => NodeOutcome::Prior { reason: unrun.to_owned() },
            NodeState::Pending(step) => {
                NodeOutcome::Stuck { step: *step, reason: "in flight when the controller stopped".to_owned() }
            }
            NodeState::Failed { step, reason } => NodeOutcome::Stuck { step: *step, reason: reason.clone() },
            NodeState::RolledBack { reason } => {
                NodeOutcome::Prior { reason: format!("rolled back with its lane: {reason}") }
            }
            NodeState::Reverting { step, reason } => NodeOutcome::Stuck {
                step: *step,
                reason: format!("its lane's rollback ({reason}) was in flight when the controller stopped"),
            },
            NodeState::RevertFailed { step, reason } => {
                NodeOutcome::Stuck { step: *step, reason: format!("its lane's rollback failed: {reason}") }
            }
            NodeState::Quarantined => {
                let surfaces = exclusions.quarantined.get(node).cloned().unwrap_or_default();
                NodeOutcome::Quarantined { repair: repair_plan(rollout, node, surfaces) }
            }
        };
        nodes.insert(node, outcome);
    }
    for (node, owners) in &exclusions.held {
        nodes.entry(node).or_insert_with(|| NodeOutcome::Held { owners: owners.clone() });
    }
    nodes.into_iter().map(|(node, outcome)| NodeAccount { node: node.to_owned(), outcome }).collect()
}

/// The account of a rollout refused before any mutation: every selected node is unchanged prior, except those
/// someone else holds.
pub fn refused(selected: &[String], held: &BTreeMap<String, Vec<String>>, reason: &str) -> Vec<NodeAccount> {
    let mut nodes: BTreeMap<&str, NodeOutcome> = BTreeMap::new();
    for node in selected {
        let outcome = match held.get(node) {
            Some(owners) => NodeOutcome::Held { owners: owners.clone() },
            None => NodeOutcome::Prior { reason: format!("the rollout was refused: {reason}") },
        };
        nodes.insert(node, outcome);
    }
    nodes.into_iter().map(|(node, outcome)| NodeAccount { node: node.to_owned(), outcome }).collect()
}

/// Production's rule: `successor` only when every selected node upgraded; any node prior, quarantined, held by
/// someone else or stuck makes the rollout `partial`.
pub fn rollout_end(account: &[NodeAccount]) -> RolloutEnd {
    if !account.is_empty() && account.iter().all(|entry| entry.outcome == NodeOutcome::Upgraded) {
        RolloutEnd::Successor
    } else {
        RolloutEnd::Partial
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine(node: &str, state: NodeState) -> (String, NodeMachine) {
        (node.to_owned(), NodeMachine { node: node.to_owned(), state })
    }

    #[test]
    fn every_node_is_accounted_for_by_what_its_machine_and_the_exclusions_say() {
        let machines: BTreeMap<String, NodeMachine> = [
            machine("w1", NodeState::Succeeded),
            machine("w2", NodeState::RetainedPrior { reason: "hub unreachable".into() }),
            machine("w3", NodeState::Pending(NodeStep::Hold)),
            machine("w4", NodeState::Pending(NodeStep::Install)),
            machine("w5", NodeState::Failed { step: NodeStep::Prove, reason: "no heartbeat".into() }),
            machine("w6", NodeState::Quarantined),
        ]
        .into_iter()
        .collect();
        let exclusions = Exclusions {
            quarantined: [("w6".to_owned(), vec!["marker absent".to_owned()])].into_iter().collect(),
            held: [("w7".to_owned(), vec!["operator:alice".to_owned()])].into_iter().collect(),
        };
        let account = account("r-1", &machines, &exclusions, "a stuck lane holds back the later lanes");
        let outcomes: Vec<(&str, &NodeOutcome)> = account.iter().map(|e| (e.node.as_str(), &e.outcome)).collect();
        assert_eq!(
            outcomes,
            [
                ("w1", &NodeOutcome::Upgraded),
                ("w2", &NodeOutcome::Prior { reason: "hub unreachable".into() }),
                ("w3", &NodeOutcome::Prior { reason: "a stuck lane holds back the later lanes".into() }),
                (
                    "w4",
                    &NodeOutcome::Stuck {
                        step: NodeStep::Install,
                        reason: "in flight when the controller stopped".into()
                    }
                ),
                ("w5", &NodeOutcome::Stuck { step: NodeStep::Prove, reason: "no heartbeat".into() }),
                ("w6", &NodeOutcome::Quarantined { repair: repair_plan("r-1", "w6", vec!["marker absent".into()]) }),
                ("w7", &NodeOutcome::Held { owners: vec!["operator:alice".into()] }),
            ]
        );
        let NodeOutcome::Quarantined { repair } = &account[5].outcome else { unreachable!() };
        assert_eq!(repair.hold, "quarantine:r-1");
        assert!(repair.command.contains("release the hold quarantine:r-1 on w6"), "{}", repair.command);
    }

    #[test]
    fn only_an_account_of_every_node_upgraded_is_a_successor() {
        let upgraded = |node: &str| NodeAccount { node: node.into(), outcome: NodeOutcome::Upgraded };
        assert_eq!(rollout_end(&[upgraded("w1"), upgraded("w2")]), RolloutEnd::Successor);
        let others = [
            NodeOutcome::Prior { reason: "x".into() },
            NodeOutcome::Quarantined { repair: repair_plan("r", "w2", vec![]) },
            NodeOutcome::Held { owners: vec!["operator".into()] },
            NodeOutcome::Stuck { step: NodeStep::Start, reason: "x".into() },
        ];
        for outcome in others {
            let account = [upgraded("w1"), NodeAccount { node: "w2".into(), outcome: outcome.clone() }];
            assert_eq!(rollout_end(&account), RolloutEnd::Partial, "{outcome:?}");
        }
        assert_eq!(rollout_end(&[]), RolloutEnd::Partial, "nothing selected is nothing upgraded");
    }

    #[test]
    fn a_refusal_leaves_every_node_prior_but_those_someone_else_holds() {
        let held = [("w2".to_owned(), vec!["operator".to_owned()])].into_iter().collect();
        let account = refused(&["w2".into(), "w1".into()], &held, "capsule missing");
        assert_eq!(account[0].node, "w1");
        assert_eq!(
            account[0].outcome,
            NodeOutcome::Prior { reason: "the rollout was refused: capsule missing".into() }
        );
        assert_eq!(account[1].outcome, NodeOutcome::Held { owners: vec!["operator".into()] });
    }

    #[test]
    fn an_account_serialises_with_its_outcome_named() {
        let entry = NodeAccount {
            node: "w1".into(),
            outcome: NodeOutcome::Stuck { step: NodeStep::Prove, reason: "x".into() },
        };
        assert_eq!(
            serde_json::to_string(&entry).unwrap(),
            r#"{"node":"w1","outcome":"stuck","step":"prove","reason":"x"}"#
        );
        for (outcome, name) in [
            (NodeOutcome::Upgraded, "upgraded"),
            (NodeOutcome::Prior { reason: String::new() }, "prior"),
            (NodeOutcome::Held { owners: vec![] }, "held"),
        ] {
            assert_eq!(outcome.as_str(), name);
            assert!(NodeOutcome::NAMES.contains(&name));
        }
    }
}
