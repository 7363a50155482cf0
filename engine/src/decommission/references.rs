//! What references the worker a decommission would delete, and the refusal it makes (RCCA replacement plan: "TTL
//! changes durable workers to offline; only an explicit fenced decommission may delete dispatch identity. Reject
//! decommission while an epoch, hold, journal, task, or lease references the worker").
//!
//! [`check`] decides from what the ports answered — the hub's references of the agent (open epochs listing it, holds
//! on it whoever owns them, its active task lease) and the controller's rollout journal (a rollout not terminal whose
//! plan names it) — and [`Refusal::stop`] says where a refused request rests in the matrix's words: before
//! `disable_node`, the workflow's first mutation, whose row lists `failed_retryable` and the node `active or
//! quarantined`, for `state_ambiguity` (what the hub and the journal show conflicts with what a decommission
//! expects, a worker nothing uses; its owners are named, so ownership is not unclear and no person is needed).
//!
//! A read that failed is not "no references": it is a reference of its own kind ([`WorkerReference::Unreadable`]),
//! so the request is refused (fail closed). The inventory models no task in flight (a task is dispatched and read in
//! one stage attempt), so there is nothing there to read.
//!
//! Architecture Invariant: no I/O. The driver reads the ports and applies what [`check`] says.

use crate::matrix::{DecommissionStage, FailureClass, NodeState, Stage};
use crate::ports::events::{ReferenceSource, WorkerReference};
use crate::ports::{AgentReferences, HubError, JournalError};
use crate::rollout::journal::Adopted;
use crate::workflow::{DecideContext, Stop, refused_before};

/// The stage a refusal rests at: the workflow's first, and its first mutation.
pub const REFUSED_BEFORE: DecommissionStage = DecommissionStage::DisableNode;
/// The class a refusal is stopped for.
pub const REFUSAL_CLASS: FailureClass = FailureClass::StateAmbiguity;

/// A decommission refused: every reference to the worker, in a fixed order (epochs, holds, the lease, the rollout,
/// then what could not be read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub references: Vec<WorkerReference>,
}

impl Refusal {
    /// Where the refused request leaves the workflow and the node: `disable_node`'s row, with the node as the
    /// request found it (`node_state`: what the inventory says, or `active`, the driver's assumption before its first
    /// read, when that cannot be read).
    pub fn stop(&self, node_state: NodeState) -> Stop {
        refused_before(Stage::Decommission(REFUSED_BEFORE), REFUSAL_CLASS, &DecideContext::new(node_state))
    }
}

/// Whether `node` may be decommissioned: `Ok` when nothing references it, the refusal naming every reference
/// otherwise. `hub` is the hub's answer for the node's agent; `rollout` the journal's non-terminal rollout, if any
/// (a journal that could not be replayed is `Err`).
pub fn check(
    node: &str,
    hub: Result<AgentReferences, HubError>,
    rollout: Result<Option<Adopted>, JournalError>,
) -> Result<(), Refusal> {
    let mut references = Vec::new();
    let mut unreadable = Vec::new();
    match hub {
        Ok(AgentReferences { epochs, holds, lease_until_ms }) => {
            references.extend(epochs.into_iter().map(|epoch| WorkerReference::Epoch { epoch }));
            references.extend(holds.into_iter().map(|owner| WorkerReference::Hold { owner }));
            references.extend(lease_until_ms.map(|until_ms| WorkerReference::Lease { until_ms }));
        }
        Err(error) => {
            unreadable.push(WorkerReference::Unreadable { source: ReferenceSource::Hub, error: error.to_string() })
        }
    }
    match rollout {
        Ok(Some(adopted)) if adopted.nodes.contains_key(node) => {
            references.push(WorkerReference::Rollout { rollout: adopted.rollout });
        }
        Ok(_) => {}
        Err(error) => {
            unreadable.push(WorkerReference::Unreadable { source: ReferenceSource::Journal, error: error.to_string() })
        }
    }
    references.extend(unreadable);
    if references.is_empty() { Ok(()) } else { Err(Refusal { references }) }
}

/// Whether a failed read of the hub's references is worth reading again within the request, by `disable_node`'s
/// row (retryable: yes, for a transient): the hub did not answer. An answer that refused the read is final.
pub fn read_again(error: &HubError) -> bool {
    matches!(error, HubError::Transport(_))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::matrix::WorkflowState;
    use crate::ports::TransportError;
    use crate::rollout::account::Exclusions;
    use crate::rollout::lane::NodeMachine;
    use crate::workflow::StopReason;

    fn rollout(named: &[&str]) -> Adopted {
        Adopted {
            rollout: "rollout-r2".into(),
            revision: "r2".into(),
            generation: 2,
            route_digest: "sha256:routes-1".into(),
            lanes: vec![named.iter().map(|node| (*node).to_owned()).collect()],
            epoch: Some(1),
            fence: Some(1),
            nodes: named.iter().map(|node| ((*node).to_owned(), NodeMachine::new((*node).to_owned()))).collect(),
            in_doubt: Vec::new(),
            committed_lanes: BTreeMap::new(),
            excluded: Exclusions::default(),
            staged: false,
            prior: BTreeMap::new(),
            reverting: BTreeMap::new(),
        }
    }

    fn refs(epochs: &[u64], holds: &[&str], lease_until_ms: Option<u64>) -> AgentReferences {
        AgentReferences {
            epochs: epochs.to_vec(),
            holds: holds.iter().map(|owner| (*owner).to_owned()).collect(),
            lease_until_ms,
        }
    }

    fn hold(owner: &str) -> WorkerReference {
        WorkerReference::Hold { owner: owner.into() }
    }

    #[test]
    fn every_reference_refuses_and_the_refusal_names_them_all_in_order() {
        let timeout = || HubError::Transport(TransportError::Timeout);
        let corrupt = || JournalError::Corrupt("rollout record: eof".into());
        type Case = (
            &'static str,
            Result<AgentReferences, HubError>,
            Result<Option<Adopted>, JournalError>,
            Vec<WorkerReference>,
        );
        let cases: Vec<Case> = vec![
            ("nothing references it", Ok(refs(&[], &[], None)), Ok(None), vec![]),
            ("another node's rollout", Ok(refs(&[], &[], None)), Ok(Some(rollout(&["node-01"]))), vec![]),
            ("an open epoch", Ok(refs(&[4], &[], None)), Ok(None), vec![WorkerReference::Epoch { epoch: 4 }]),
            (
                "an operator's hold",
                Ok(refs(&[], &["operator:maintenance"], None)),
                Ok(None),
                vec![hold("operator:maintenance")],
            ),
            (
                "a quarantine hold",
                Ok(refs(&[], &["quarantine:rollout-r2"], None)),
                Ok(None),
                vec![hold("quarantine:rollout-r2")],
            ),
            (
                "a task lease",
                Ok(refs(&[], &[], Some(90_000))),
                Ok(None),
                vec![WorkerReference::Lease { until_ms: 90_000 }],
            ),
            (
                "its rollout's journal",
                Ok(refs(&[], &[], None)),
                Ok(Some(rollout(&["node-01", "node-02"]))),
                vec![WorkerReference::Rollout { rollout: "rollout-r2".into() }],
            ),
            (
                "mid-rollout: epoch, deployment hold and journal",
                Ok(refs(&[1, 3], &["deploy:rollout-r2", "operator:x"], Some(7))),
                Ok(Some(rollout(&["node-02"]))),
                vec![
                    WorkerReference::Epoch { epoch: 1 },
                    WorkerReference::Epoch { epoch: 3 },
                    hold("deploy:rollout-r2"),
                    hold("operator:x"),
                    WorkerReference::Lease { until_ms: 7 },
                    WorkerReference::Rollout { rollout: "rollout-r2".into() },
                ],
            ),
            (
                "the hub did not answer",
                Err(timeout()),
                Ok(None),
                vec![WorkerReference::Unreadable {
                    source: ReferenceSource::Hub,
                    error: "hub unreachable: timed out".into(),
                }],
            ),
            (
                "the journal does not replay",
                Ok(refs(&[2], &[], None)),
                Err(corrupt()),
                vec![
                    WorkerReference::Epoch { epoch: 2 },
                    WorkerReference::Unreadable {
                        source: ReferenceSource::Journal,
                        error: "journal is corrupt: rollout record: eof".into(),
                    },
                ],
            ),
            (
                "neither reads",
                Err(HubError::Rejected("no".into())),
                Err(corrupt()),
                vec![
                    WorkerReference::Unreadable {
                        source: ReferenceSource::Hub,
                        error: "hub rejected the request: no".into(),
                    },
                    WorkerReference::Unreadable {
                        source: ReferenceSource::Journal,
                        error: "journal is corrupt: rollout record: eof".into(),
                    },
                ],
            ),
        ];
        for (story, hub, journal, expected) in cases {
            let decided = check("node-02", hub, journal);
            if expected.is_empty() {
                assert_eq!(decided, Ok(()), "{story}");
            } else {
                assert_eq!(decided, Err(Refusal { references: expected }), "{story}");
            }
        }
    }

    #[test]
    fn a_refusal_rests_failed_retryable_at_disable_node_with_the_node_as_it_was() {
        let refusal = Refusal { references: vec![hold("operator:x")] };
        let row = Stage::Decommission(REFUSED_BEFORE).row();
        for (found, rests) in [
            (NodeState::Active, NodeState::Active),
            (NodeState::Quarantined, NodeState::Quarantined),
            // Not a state the row lists: the row's first, as every stop there reports it.
            (NodeState::Enrolling, NodeState::Active),
        ] {
            let stop = refusal.stop(found);
            assert_eq!(stop.workflow_state, WorkflowState::FailedRetryable, "{found:?}");
            assert_eq!(stop.node_state, rests, "{found:?}");
            assert_eq!((stop.reason, stop.compensation), (StopReason::Refused, None));
            assert_eq!(stop.next_action, Some(crate::matrix::RecoveryAction::Resume));
            assert!(row.admits_workflow_state(stop.workflow_state) && row.node_states.admits(found, stop.node_state));
        }
    }

    #[test]
    fn the_matrix_document_says_the_refusal_as_the_code_does() {
        let doc = crate::matrix::render_markdown();
        let section = doc.split("\n## Refusals\n").nth(1).expect("a Refusals section");
        let section = section.split("\n## ").next().unwrap_or_default();
        let stop = Refusal { references: Vec::new() }.stop(NodeState::Active);
        let next = stop.next_action.map(crate::matrix::RecoveryAction::as_str).unwrap_or_default();
        for word in [REFUSED_BEFORE.as_str(), REFUSAL_CLASS.as_str(), stop.workflow_state.as_str(), next] {
            assert!(section.contains(&format!("`{word}`")), "docs/recovery-matrix.md, Refusals, names `{word}`");
        }
    }

    #[test]
    fn only_a_read_that_got_no_answer_is_read_again() {
        assert!(read_again(&HubError::Transport(TransportError::ConnectionRefused)));
        assert!(read_again(&HubError::Transport(TransportError::Timeout)));
        assert!(!read_again(&HubError::Rejected("unexpected answer to a references request".into())));
        assert!(!read_again(&HubError::Unauthorized("x".into())));
    }
}
