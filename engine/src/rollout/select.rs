//! The rollout's node selection, sans-I/O: from the preflight's observations and the hub's holds, which selected
//! nodes are skipped (someone else holds them), quarantined (incoherent, unreachable, or failed to stage or repair)
//! or eligible for the lanes (with the repair each needs first), and the availability floor's say over repairs.
//! The driver reads the nodes and the hub, hands the answers to [`Selection::of`], reports what it returns, and tells
//! it which stagings and repairs failed.

use std::collections::BTreeMap;

use crate::ports::events::QuarantineCause;
use crate::ports::{Endpoint, NodeObservation, NodeReport, SshError};
use crate::rollout::holds::HoldOwner;
use crate::rollout::preflight::{Contradiction, Repair, Verdict};
use crate::rollout::storage::StageFailure;
use crate::secret::Secret;

/// What the preflight makes of one selected node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeSelection {
    /// Held by someone else (an operator, another rollout): not this rollout's to take down or release.
    SkippedHeld { owners: Vec<String> },
    /// Excluded from the lanes and dispatch-held: what contradicts a coherent identity, or why it could not be
    /// observed.
    Quarantined { surfaces: Vec<String>, cause: QuarantineCause },
    /// Goes into the lanes, after `repair` when it needs one.
    Eligible { repair: Option<Repair> },
}

/// The rollout's selection as it narrows, from the preflight to the plan.
#[derive(Debug, Clone)]
pub struct Selection {
    /// Every selected node's verdict at the preflight, in the request's order (what the driver reports).
    pub preflight: Vec<(String, NodeSelection)>,
    /// The nodes that go into the lanes, in the request's order.
    pub eligible: Vec<Endpoint>,
    /// The eligible nodes that need a repair first, in the request's order.
    pub repairs: Vec<(Endpoint, Repair)>,
    /// Quarantined nodes, in the order they were quarantined.
    pub quarantined: Vec<String>,
    /// How many nodes someone else holds.
    pub skipped: usize,
    /// The attestation key each observed node carries (skipped nodes are not read).
    pub attestation_keys: BTreeMap<String, Secret>,
    selected: usize,
}

impl Selection {
    /// The preflight's verdict on `nodes` (in rollout order) from what each observation returned, the hub's holds,
    /// by agent, and `classify`, the verdict on one observed identity.
    pub fn of(
        rollout: &str,
        nodes: &[Endpoint],
        reports: Vec<Result<NodeReport, SshError>>,
        holds: &BTreeMap<String, Vec<String>>,
        classify: &dyn Fn(&NodeObservation) -> Verdict,
    ) -> Selection {
        let mut selection = Selection {
            preflight: Vec::with_capacity(nodes.len()),
            eligible: Vec::new(),
            repairs: Vec::new(),
            quarantined: Vec::new(),
            skipped: 0,
            attestation_keys: BTreeMap::new(),
            selected: nodes.len(),
        };
        for (endpoint, report) in nodes.iter().zip(reports) {
            let node = endpoint.node.clone();
            let foreign: Vec<String> = holds
                .get(&endpoint.node)
                .into_iter()
                .flatten()
                .filter(|owner| !HoldOwner::parse(owner).is_owned_by(rollout))
                .cloned()
                .collect();
            if !foreign.is_empty() {
                selection.skipped += 1;
                selection.preflight.push((node, NodeSelection::SkippedHeld { owners: foreign }));
                continue;
            }
            let (verdict, cause) = match &report {
                Ok(report) => (classify(&report.identity), QuarantineCause::Identity),
                Err(error) => {
                    let surfaces = vec![Contradiction::Unreachable { error: error.to_string() }];
                    let repair = Repair::OperatorInspect { surfaces: surfaces.clone() };
                    (Verdict::Quarantined { repair, surfaces }, QuarantineCause::Unreachable)
                }
            };
            if let Ok(report) = &report
                && let Some(key) = report.identity.env_value("MAC_ATTESTATION_KEY")
            {
                selection.attestation_keys.insert(node.clone(), Secret::new(key));
            }
            let verdict = match verdict {
                Verdict::Coherent { .. } => {
                    selection.eligible.push(endpoint.clone());
                    NodeSelection::Eligible { repair: None }
                }
                Verdict::Repairable { repair, .. } => {
                    selection.repairs.push((endpoint.clone(), repair.clone()));
                    selection.eligible.push(endpoint.clone());
                    NodeSelection::Eligible { repair: Some(repair) }
                }
                Verdict::Quarantined { surfaces, .. } => {
                    selection.quarantined.push(node.clone());
                    let surfaces = surfaces.iter().map(ToString::to_string).collect();
                    NodeSelection::Quarantined { surfaces, cause }
                }
            };
            selection.preflight.push((node, verdict));
        }
        selection
    }

    /// How each eligible node's staging ended (in the order of [`Self::eligible`]): a node that could not be staged
    /// (bad storage, identity changed) is quarantined now, so the plan's lane size already accounts for it. Returns
    /// each quarantine's surfaces, in order, for the driver to report.
    pub fn handle_staged(
        &mut self,
        staged: Vec<Result<(), StageFailure>>,
    ) -> Vec<(String, Vec<String>, QuarantineCause)> {
        let mut quarantined = Vec::new();
        let mut still_eligible = Vec::new();
        for (endpoint, result) in std::mem::take(&mut self.eligible).into_iter().zip(staged) {
            match result {
                Ok(()) => still_eligible.push(endpoint),
                Err(failure) => {
                    let surfaces = vec![failure.to_string()];
                    self.repairs.retain(|(repaired, _)| repaired.node != endpoint.node);
                    self.quarantined.push(endpoint.node.clone());
                    quarantined.push((endpoint.node, surfaces, failure.cause()));
                }
            }
        }
        self.eligible = still_eligible;
        quarantined
    }

    /// The availability floor's say over repairs: a repair takes one node out of service briefly, so none is
    /// attempted unless the nodes neither quarantined nor skipped stay above the floor.
    pub fn room_for_repairs(&self, availability_floor: usize) -> bool {
        self.selected.saturating_sub(self.quarantined.len() + self.skipped) > availability_floor
    }

    /// A node whose repair could not be applied is quarantined (the plan's lane size accounts for it).
    pub fn handle_repair_failed(&mut self, node: &str) {
        self.eligible.retain(|eligible| eligible.node != node);
        self.quarantined.push(node.to_owned());
    }

    /// The nodes the plan may count as healthy: the selection less the quarantined and the skipped.
    pub fn healthy(&self) -> usize {
        self.selected - self.quarantined.len() - self.skipped
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ports::NodeObservation;
    use crate::ports::TransportError;
    use crate::rollout::preflight::fixtures::{TestVerifier, file};
    use crate::rollout::preflight::{self, Expectation};

    fn endpoint(node: &str) -> Endpoint {
        Endpoint { node: node.into(), host_key: format!("key-{node}") }
    }

    /// A coherent node (its key `key-<node>`), or one whose marker is missing (a repair writes it).
    fn report(node: &str, marker: bool) -> Result<NodeReport, SshError> {
        let env = format!(
            "MAC_ATTESTATION_KEY=key-{node}\nMAC_STARTUP_CLEAR_HOLD=1\nMAC_WORKER_ID={node}\nMAC_HUB_URL=https://hub\nMAC_DEPLOYED_REVISION=7f3bbd12\nMAC_GENERATION=4\n"
        );
        let identity = NodeObservation {
            node: node.into(),
            env: Some(file(&env)),
            marker: marker.then(|| file("7f3bbd12\n")),
            manifest: Some(file("revision=7f3bbd12\ngeneration=4\nsignature=sig-7f3bbd12-4\n")),
            receipt: None,
            installed: Some(("7f3bbd12".into(), 4)),
            barrier_generation: 4,
        };
        Ok(NodeReport { identity, service_running: true, staged: Vec::new(), credential: None })
    }

    fn unreachable() -> Result<NodeReport, SshError> {
        Err(SshError::Transport(TransportError::Timeout))
    }

    fn select(reports: Vec<Result<NodeReport, SshError>>, holds: &[(&str, &[&str])]) -> Selection {
        let nodes: Vec<Endpoint> = (1..=reports.len()).map(|n| endpoint(&format!("w{n}"))).collect();
        let holds = holds
            .iter()
            .map(|(node, owners)| ((*node).to_owned(), owners.iter().map(|o| (*o).to_owned()).collect()))
            .collect();
        Selection::of("r1", &nodes, reports, &holds, &|observation| {
            preflight::classify(observation, &Expectation::default(), &TestVerifier)
        })
    }

    fn names(endpoints: &[Endpoint]) -> Vec<&str> {
        endpoints.iter().map(|endpoint| endpoint.node.as_str()).collect()
    }

    #[test]
    fn the_preflight_sorts_nodes_into_skipped_quarantined_and_eligible_in_rollout_order() {
        let selection = select(
            vec![report("w1", true), report("w2", false), unreachable(), report("w4", true)],
            &[("w4", &["operator:alice", "deploy:r1"]), ("w1", &["deploy:r1", "quarantine:r1"])],
        );
        let verdicts: Vec<(&str, &NodeSelection)> =
            selection.preflight.iter().map(|(node, verdict)| (node.as_str(), verdict)).collect();
        assert_eq!(verdicts[0], ("w1", &NodeSelection::Eligible { repair: None }), "this rollout's own holds");
        assert!(matches!(verdicts[1], ("w2", NodeSelection::Eligible { repair: Some(Repair::WriteMarker { .. }) })));
        assert!(
            matches!(verdicts[2], ("w3", NodeSelection::Quarantined { surfaces, cause: QuarantineCause::Unreachable }) if surfaces[0].contains("timed out")),
            "{verdicts:?}"
        );
        assert_eq!(
            verdicts[3],
            ("w4", &NodeSelection::SkippedHeld { owners: vec!["operator:alice".into()] }),
            "only the foreign owners are named"
        );
        assert_eq!(names(&selection.eligible), ["w1", "w2"]);
        assert_eq!(names(&selection.repairs.iter().map(|(e, _)| e.clone()).collect::<Vec<_>>()), ["w2"]);
        assert_eq!(selection.quarantined, ["w3"]);
        assert_eq!(selection.skipped, 1);
        assert_eq!(selection.healthy(), 2);
        let keys: Vec<&str> = selection.attestation_keys.keys().map(String::as_str).collect();
        assert_eq!(keys, ["w1", "w2"], "read from every observed node, never from a skipped one");
        assert_eq!(selection.attestation_keys["w2"].expose(), "key-w2");
    }

    #[test]
    fn a_node_that_cannot_be_staged_is_quarantined_and_loses_its_repair() {
        let mut selection = select(vec![report("w1", true), report("w2", false), report("w3", true)], &[]);
        let refused = StageFailure::Staging(SshError::Refused("disk full".into()));
        let quarantined = selection.handle_staged(vec![Ok(()), Err(refused), Ok(())]);
        let staging =
            ("w2".to_owned(), vec!["staging failed: refused: disk full".to_owned()], QuarantineCause::Staging);
        assert_eq!(quarantined, [staging]);
        assert_eq!(names(&selection.eligible), ["w1", "w3"]);
        assert!(selection.repairs.is_empty());
        assert_eq!(selection.quarantined, ["w2"]);
        selection.handle_repair_failed("w3");
        assert_eq!(names(&selection.eligible), ["w1"]);
        assert_eq!(selection.quarantined, ["w2", "w3"]);
        assert_eq!(selection.healthy(), 1);
    }

    #[test]
    fn storage_not_admitted_quarantines_with_its_own_cause_and_names_every_failed_check() {
        let mut selection = select(vec![report("w1", true), report("w2", true)], &[]);
        let refused = StageFailure::StorageNotAdmitted(vec!["rename failed: EIO".into(), "1 bytes free".into()]);
        let quarantined = selection.handle_staged(vec![Err(refused), Ok(())]);
        let surfaces = vec!["storage not admitted: rename failed: EIO; 1 bytes free".to_owned()];
        assert_eq!(quarantined, [("w1".to_owned(), surfaces, QuarantineCause::Storage)]);
        assert_eq!(names(&selection.eligible), ["w2"]);
        assert_eq!(selection.quarantined, ["w1"]);
    }

    #[test]
    fn repairs_need_room_above_the_availability_floor() {
        // Four selected, one quarantined, one skipped: two in service.
        let selection =
            select(vec![report("w1", false), unreachable(), report("w3", true), report("w4", true)], &[("w4", &["x"])]);
        let cases = [(0, true), (1, true), (2, false), (3, false)];
        for (floor, room) in cases {
            assert_eq!(selection.room_for_repairs(floor), room, "floor {floor}");
        }
        // A floor above the selection leaves no room, and the count never underflows.
        assert!(!select(vec![unreachable()], &[]).room_for_repairs(0));
    }
}
