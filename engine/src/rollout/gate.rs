//! The decisions the lanes driver makes between its awaits, as plain functions: which node is the canary, whether a
//! lane has begun, whether a lane may go down or keeps its prior generation, how many nodes the next batch takes,
//! which lanes get another rollback pass, and why the nodes no lane ran stayed as they were. The driver
//! ([`crate::rollout::driver`]) only awaits and applies what these say.

use std::collections::BTreeMap;

use crate::rollout::journal::Adopted;
use crate::rollout::lane::{LaneVerdict, NodeState, NodeStep};

/// The plan's lane size: the most nodes it lets be down at once (the floor and the lane bound sized it).
pub fn lane_room(adopted: &Adopted) -> usize {
    adopted.lanes.iter().map(Vec::len).max().unwrap_or(1).max(1)
}

/// The canary: the plan's first node, in lane order, that is not quarantined. It goes down alone and must prove the
/// successor before any other node of the rollout is taken (RCCA: "one held canary completes before the wider
/// release").
pub fn canary(adopted: &Adopted) -> Option<String> {
    adopted.lanes.iter().flatten().find(|node| adopted.nodes[*node].state != NodeState::Quarantined).cloned()
}

/// Whether a dead controller had begun `lane` (a step of a node done or in doubt): a begun lane is finished under the
/// frozen route bundle, whatever the room, since leaving it would strand held, stopped workers.
pub fn lane_begun(adopted: &Adopted, lane: &[String]) -> bool {
    lane.iter().any(|node| {
        let untouched =
            matches!(adopted.nodes[node].state, NodeState::Pending(NodeStep::Hold) | NodeState::Quarantined);
        !untouched || adopted.in_doubt.iter().any(|(doubtful, _)| doubtful == node)
    })
}

/// The nodes held down now (past their hold and not back up): what the room is counted against.
pub fn nodes_down(adopted: &Adopted) -> usize {
    adopted.nodes.values().filter(|machine| machine.held_down()).count()
}

/// What the driver does with the next lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaneGate {
    /// The lane goes down.
    Run,
    /// The lane keeps its prior generation, untouched. `held_back`: for want of room (a stuck lane keeps what the
    /// floor leaves), not because the route changed or the canary failed.
    Prior { held_back: bool },
}

/// Whether a lane not begun may go down: only under the frozen route bundle, with room left under the floor, and
/// after a canary that proved the successor. A begun lane always goes on.
pub fn lane_gate(begun: bool, route_changed: bool, room: usize, canary_failed: bool) -> LaneGate {
    if begun || !(route_changed || room == 0 || canary_failed) {
        return LaneGate::Run;
    }
    LaneGate::Prior { held_back: !route_changed && !canary_failed }
}

/// How many of the lane's `pending` nodes the next batch takes: all of a begun lane's; else the room the nodes down
/// leave under the lane size, at most the pending ones (0: none fits, and they keep their prior generation).
pub fn batch_room(begun: bool, room_max: usize, down: usize, pending: usize) -> usize {
    if begun { pending } else { room_max.saturating_sub(down).min(pending) }
}

/// The lanes left stuck, in plan order: each gets another rollback pass.
pub fn stuck_lanes(verdicts: &BTreeMap<usize, LaneVerdict>) -> Vec<usize> {
    verdicts.iter().filter(|(_, verdict)| **verdict == LaneVerdict::Stuck).map(|(index, _)| *index).collect()
}

/// Why the selected nodes no lane took kept their prior generation, for the all-selected account.
pub fn unrun_reason(route_changed: bool, canary_failed: bool, held_back: bool) -> &'static str {
    if route_changed {
        "the route bundle changed before its lane went down"
    } else if canary_failed {
        "the canary did not prove the successor"
    } else if held_back {
        "a stuck lane keeps the room the availability floor and the lane size leave"
    } else {
        "its lane never went down"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rollout::account::Exclusions;
    use crate::rollout::lane::NodeMachine;

    fn adopted(lanes: &[&[&str]], states: &[(&str, NodeState)], in_doubt: &[&str]) -> Adopted {
        let mut nodes = BTreeMap::new();
        for node in lanes.iter().flat_map(|lane| lane.iter()) {
            nodes.insert((*node).to_owned(), NodeMachine::new(*node));
        }
        for (node, state) in states {
            nodes.get_mut(*node).unwrap().state = state.clone();
        }
        Adopted {
            rollout: "rollout-r".into(),
            revision: "r".into(),
            generation: 2,
            route_digest: "sha256:d".into(),
            lanes: lanes.iter().map(|lane| lane.iter().map(|node| (*node).to_owned()).collect()).collect(),
            epoch: None,
            fence: None,
            nodes,
            in_doubt: in_doubt.iter().map(|node| ((*node).to_owned(), NodeStep::Quiesce)).collect(),
            committed_lanes: BTreeMap::new(),
            excluded: Exclusions::default(),
            staged: true,
            prior: BTreeMap::new(),
            reverting: BTreeMap::new(),
        }
    }

    #[test]
    fn the_canary_is_the_first_node_not_quarantined_and_the_room_the_widest_lane() {
        let plan = adopted(&[&["a", "b"], &["c", "d", "e"]], &[("a", NodeState::Quarantined)], &[]);
        assert_eq!(canary(&plan).as_deref(), Some("b"));
        assert_eq!(lane_room(&plan), 3);
        let all_quarantined = adopted(&[&["a"]], &[("a", NodeState::Quarantined)], &[]);
        assert_eq!(canary(&all_quarantined), None);
        assert_eq!(lane_room(&adopted(&[], &[], &[])), 1, "an empty plan still has room for one");
    }

    #[test]
    fn a_lane_has_begun_once_a_node_passed_its_hold_or_has_a_step_in_doubt() {
        type States = &'static [(&'static str, NodeState)];
        let cases: [(States, &[&str], bool); 5] = [
            (&[], &[], false),
            (&[("a", NodeState::Quarantined)], &[], false),
            (&[("a", NodeState::Pending(NodeStep::Quiesce))], &[], true),
            (&[("b", NodeState::Succeeded)], &[], true),
            (&[], &["b"], true),
        ];
        for (states, in_doubt, begun) in cases {
            let plan = adopted(&[&["a", "b"]], states, in_doubt);
            assert_eq!(lane_begun(&plan, &plan.lanes[0]), begun, "{states:?} in doubt {in_doubt:?}");
        }
        let down = adopted(&[&["a", "b", "c"]], &[("a", NodeState::Pending(NodeStep::Install))], &[]);
        assert_eq!(nodes_down(&down), 1);
    }

    #[test]
    fn a_lane_not_begun_goes_down_only_under_the_frozen_bundle_with_room_after_a_proved_canary() {
        use LaneGate::{Prior, Run};
        // (begun, route changed, room, canary failed) → gate
        let cases = [
            (false, false, 2, false, Run),
            (false, true, 2, false, Prior { held_back: false }),
            (false, false, 0, false, Prior { held_back: true }),
            (false, false, 2, true, Prior { held_back: false }),
            (false, true, 0, true, Prior { held_back: false }),
            (true, true, 0, true, Run),
        ];
        for (begun, route_changed, room, canary_failed, gate) in cases {
            assert_eq!(lane_gate(begun, route_changed, room, canary_failed), gate, "{begun} {route_changed} {room}");
        }
    }

    #[test]
    fn a_batch_takes_the_room_left_under_the_lane_size_and_a_begun_lane_takes_all() {
        // (begun, room max, down, pending) → batch
        let cases =
            [(false, 4, 0, 3, 3), (false, 4, 2, 3, 2), (false, 4, 4, 3, 0), (false, 4, 6, 3, 0), (true, 4, 4, 3, 3)];
        for (begun, room_max, down, pending, batch) in cases {
            assert_eq!(batch_room(begun, room_max, down, pending), batch, "{begun} {room_max} {down} {pending}");
        }
    }

    #[test]
    fn stuck_lanes_are_found_in_plan_order_and_the_unrun_reason_names_the_first_cause() {
        let verdicts = BTreeMap::from([
            (0, LaneVerdict::Successor),
            (1, LaneVerdict::Stuck),
            (2, LaneVerdict::Prior),
            (3, LaneVerdict::Stuck),
        ]);
        assert_eq!(stuck_lanes(&verdicts), [1, 3]);
        assert_eq!(unrun_reason(true, true, true), "the route bundle changed before its lane went down");
        assert_eq!(unrun_reason(false, true, true), "the canary did not prove the successor");
        assert_eq!(
            unrun_reason(false, false, true),
            "a stuck lane keeps the room the availability floor and the lane size leave"
        );
        assert_eq!(unrun_reason(false, false, false), "its lane never went down");
    }
}
