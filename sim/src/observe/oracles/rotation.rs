//! The oracles of agent-credential rotation (seed 003's replacement plan: "Rotation becomes a separate per-node state
//! machine with old/new overlap until the successor heartbeat is proved"), from the hub's typed events: a predecessor
//! revoked only after its successor authenticated an accepted heartbeat (and an abort revoking only its own
//! successor), the overlap holding while a rotation is open, and one successor minted per rotation.

use std::collections::{BTreeMap, BTreeSet};

use crate::observe::oracles::{Finding, Oracle};
use crate::observe::trace::{Body, Event, RotationBody};

/// `predecessor_revoked_after_successor_proved`: at a rotation's commit (the predecessor revoked), the hub must have
/// accepted a heartbeat of the agent authenticated by the rotation's successor; an abort must revoke the rotation's
/// successor, never another generation.
#[derive(Default)]
pub(super) struct PredecessorRevokedAfterProof {
    /// The successor generation of each issued rotation, by `(agent, rotation)`.
    issued: BTreeMap<(String, String), u64>,
    /// `(agent, generation)` of every accepted heartbeat.
    heard: BTreeSet<(String, u64)>,
}

impl Oracle for PredecessorRevokedAfterProof {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        let evidence = match &event.body {
            Body::HubCredentialIssued { agent, rotation, generation } => {
                self.issued.insert((agent.clone(), rotation.clone()), *generation);
                return;
            }
            // A successor is never generation 1 (an agent's first enrolment credential): the steady beat of agents
            // that never rotated costs nothing here.
            Body::HubHeartbeat { agent, generation } if *generation > 1 => {
                self.heard.insert((agent.clone(), *generation));
                return;
            }
            Body::HubRotationCommitted { agent, rotation, revoked_generation } => {
                match self.issued.get(&(agent.clone(), rotation.clone())) {
                    None => format!(
                        "{agent}'s credential generation {revoked_generation} was revoked by rotation {rotation}, \
                         whose successor the hub never issued"
                    ),
                    Some(successor) if !self.heard.contains(&(agent.clone(), *successor)) => format!(
                        "{agent}'s credential generation {revoked_generation} was revoked by rotation {rotation} \
                         before any heartbeat authenticated by its successor (generation {successor}) was accepted"
                    ),
                    Some(_) => return,
                }
            }
            Body::HubRotationAborted { agent, rotation, revoked_generation } => {
                match self.issued.get(&(agent.clone(), rotation.clone())) {
                    Some(successor) if successor == revoked_generation => return,
                    successor => format!(
                        "aborting rotation {rotation} revoked {agent}'s credential generation {revoked_generation}, \
                         not its successor ({successor:?})"
                    ),
                }
            }
            _ => return,
        };
        out.push(Finding { t_ms: event.t_ms, evidence });
    }
}

/// `rotation_overlap_holds`: from a rotation's issue to its commit or abort, both credentials are valid: no heartbeat
/// of the agent may be refused for its credential (`hub.heartbeat_refused` with `unauthorized`).
#[derive(Default)]
pub(super) struct RotationOverlapHolds {
    /// The open rotation of each agent.
    open: BTreeMap<String, String>,
}

impl Oracle for RotationOverlapHolds {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        match &event.body {
            Body::HubCredentialIssued { agent, rotation, .. } => {
                self.open.insert(agent.clone(), rotation.clone());
            }
            Body::HubRotationCommitted { agent, rotation, .. } | Body::HubRotationAborted { agent, rotation, .. }
                if self.open.get(agent) == Some(rotation) =>
            {
                self.open.remove(agent);
            }
            Body::HubHeartbeatRefused { agent, unauthorized: true } => {
                if let Some(rotation) = self.open.get(agent) {
                    out.push(Finding {
                        t_ms: event.t_ms,
                        evidence: format!(
                            "{agent}'s heartbeat was refused for its credential while rotation {rotation} was open \
                             (predecessor and successor must both be valid until the rotation ends)"
                        ),
                    });
                }
            }
            _ => {}
        }
    }
}

/// `one_successor_per_rotation`: the hub mints a rotation's successor once (a replay of its issue answers the same
/// one), and no second successor is minted for a node while the controller's rotation of it is in flight (from its
/// first `engine.rotation` event to its `ended`, across controller deaths).
#[derive(Default)]
pub(super) struct OneSuccessorPerRotation {
    /// Every `(agent, rotation)` the hub minted a successor for.
    minted: BTreeSet<(String, String)>,
    /// The controller's rotations in flight, by node: the rotation id and the successors minted for the node since.
    in_flight: BTreeMap<String, (String, u64)>,
}

impl Oracle for OneSuccessorPerRotation {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        match &event.body {
            Body::Rotation { rotation, node, event } => {
                let ended = matches!(event, RotationBody::Ended { .. });
                let tracked = self.in_flight.get(node).is_some_and(|(id, _)| id == rotation);
                match (ended, tracked) {
                    (true, true) => {
                        self.in_flight.remove(node);
                    }
                    (false, false) => {
                        self.in_flight.entry(node.clone()).or_insert_with(|| (rotation.clone(), 0));
                    }
                    (true, false) | (false, true) => {}
                }
            }
            Body::HubCredentialIssued { agent, rotation, generation } => {
                if !self.minted.insert((agent.clone(), rotation.clone())) {
                    out.push(Finding {
                        t_ms: event.t_ms,
                        evidence: format!(
                            "the hub minted a second successor (generation {generation}) for rotation {rotation} of \
                             {agent}"
                        ),
                    });
                }
                if let Some((in_flight, count)) = self.in_flight.get_mut(agent) {
                    *count += 1;
                    if *count > 1 {
                        out.push(Finding {
                            t_ms: event.t_ms,
                            evidence: format!(
                                "successor generation {generation} of {agent} was minted (hub rotation {rotation}) \
                                 while rotation {in_flight}, which already has one, was in flight"
                            ),
                        });
                    }
                }
            }
            _ => {}
        }
    }
}
