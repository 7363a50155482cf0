//! Rollout planning (RCCA P1 "Use bounded rolling lanes with an availability floor" and "Enforce a duration budget"):
//! split the selected nodes into lanes of at most `lane_size_max`, never more unavailable at once than the floor
//! allows, and check the worst-case lane and rollout time against the agent TTL, the credential lifetime and the hold
//! lease before any mutation — shrinking lanes when that makes the plan fit, refusing it when nothing does.

/// Worst-case time of each per-node phase, in ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PhaseBounds {
    pub hold_ms: u64,
    pub quiesce_ms: u64,
    pub install_ms: u64,
    pub write_identity_ms: u64,
    pub start_ms: u64,
    pub prove_ms: u64,
    pub release_ms: u64,
}

impl PhaseBounds {
    /// One node through every phase once.
    pub fn node_ms(&self) -> u64 {
        self.hold_ms
            + self.quiesce_ms
            + self.install_ms
            + self.write_identity_ms
            + self.start_ms
            + self.prove_ms
            + self.release_ms
    }
}

/// The inputs of a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanInput {
    /// Nodes to deploy, in rollout order (quarantined nodes already removed).
    pub nodes: Vec<String>,
    /// Healthy, eligible nodes in the fleet right now (the selection plus any others).
    pub healthy: usize,
    /// Nodes that must stay healthy and eligible at every checkpoint.
    pub availability_floor: usize,
    pub lane_size_max: usize,
    /// Remote operations in flight at once inside a lane.
    pub fan_out: usize,
    pub phases: PhaseBounds,
    /// Worst-case extra time of bounded retries for one node.
    pub retry_budget_ms: u64,
    /// The hub's fungible-agent TTL: a lane must finish well inside it even with epoch pinning.
    pub agent_ttl_ms: u64,
    /// Time left on the controller's credentials: the whole rollout must fit.
    pub credential_remaining_ms: u64,
    /// How long a deployment hold lasts unrenewed: a lane must fit.
    pub hold_lease_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub lanes: Vec<Vec<String>>,
    pub lane_size: usize,
    /// Worst-case time of one lane.
    pub lane_bound_ms: u64,
    /// Worst-case time of the rollout: lanes × lane bound (lanes run one at a time).
    pub rollout_bound_ms: u64,
    /// True when the lane size was reduced below `lane_size_max` to fit the budget or the floor.
    pub shrunk: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("nothing to deploy")]
    NoNodes,
    #[error("the availability floor of {floor} leaves no node to take down ({healthy} healthy)")]
    FloorUnreachable { healthy: usize, floor: usize },
    #[error("one node needs {node_ms} ms in the worst case, more than the {limit_name} of {limit_ms} ms")]
    NodeExceedsLimit { node_ms: u64, limit_name: &'static str, limit_ms: u64 },
    #[error(
        "the rollout needs {rollout_ms} ms in the worst case, more than the {credential_ms} ms left on its credentials"
    )]
    CredentialsExpireFirst { rollout_ms: u64, credential_ms: u64 },
}

/// Plans lanes for `input`, or refuses with the reason.
pub fn plan(input: &PlanInput) -> Result<Plan, PlanError> {
    if input.nodes.is_empty() {
        return Err(PlanError::NoNodes);
    }
    let down_max = input.healthy.saturating_sub(input.availability_floor);
    if down_max == 0 {
        return Err(PlanError::FloorUnreachable { healthy: input.healthy, floor: input.availability_floor });
    }
    let fan_out = input.fan_out.max(1) as u64;
    let node_ms = input.phases.node_ms() + input.retry_budget_ms;
    // A lane must fit inside the TTL and the hold lease; the tighter of the two bounds its size.
    let (limit_name, limit_ms) = if input.agent_ttl_ms <= input.hold_lease_ms {
        ("agent TTL", input.agent_ttl_ms)
    } else {
        ("hold lease", input.hold_lease_ms)
    };
    if node_ms >= limit_ms {
        return Err(PlanError::NodeExceedsLimit { node_ms, limit_name, limit_ms });
    }
    let waves_max = ((limit_ms - 1) / node_ms).max(1);
    let size_by_time = (waves_max * fan_out) as usize;
    let lane_size = input.lane_size_max.min(down_max).min(size_by_time).max(1);
    let lanes: Vec<Vec<String>> = input.nodes.chunks(lane_size).map(<[String]>::to_vec).collect();
    let lane_bound_ms = (lane_size as u64).div_ceil(fan_out) * node_ms;
    let rollout_bound_ms = lanes.len() as u64 * lane_bound_ms;
    if rollout_bound_ms > input.credential_remaining_ms {
        return Err(PlanError::CredentialsExpireFirst {
            rollout_ms: rollout_bound_ms,
            credential_ms: input.credential_remaining_ms,
        });
    }
    Ok(Plan { lane_bound_ms, rollout_bound_ms, shrunk: lane_size < input.lane_size_max, lane_size, lanes })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(nodes: usize) -> PlanInput {
        PlanInput {
            nodes: (1..=nodes).map(|i| format!("worker-{i:02}")).collect(),
            healthy: 50,
            availability_floor: 42,
            lane_size_max: 8,
            fan_out: 8,
            phases: PhaseBounds {
                hold_ms: 10_000,
                quiesce_ms: 30_000,
                install_ms: 120_000,
                write_identity_ms: 10_000,
                start_ms: 30_000,
                prove_ms: 90_000,
                release_ms: 10_000,
            },
            retry_budget_ms: 60_000,
            agent_ttl_ms: 3_600_000,
            credential_remaining_ms: 24 * 3_600_000,
            hold_lease_ms: 1_800_000,
        }
    }

    #[test]
    fn fifty_workers_go_in_seven_lanes_of_at_most_eight_keeping_42_up() {
        let plan = plan(&input(50)).unwrap();
        assert_eq!(plan.lane_size, 8);
        assert_eq!(plan.lanes.len(), 7);
        assert_eq!(plan.lanes.last().unwrap().len(), 2);
        assert_eq!(plan.lane_bound_ms, 360_000, "one wave of 8 at fan-out 8");
        assert_eq!(plan.rollout_bound_ms, 7 * 360_000, "lanes × phase bound, not workers × per-node timeout");
        assert!(!plan.shrunk);
    }

    #[test]
    fn quarantined_or_unhealthy_nodes_shrink_the_lanes_to_hold_the_floor() {
        let mut short = input(45);
        short.healthy = 45; // five quarantined, dispatch-held
        let plan = plan(&short).unwrap();
        assert_eq!(plan.lane_size, 3);
        assert!(plan.shrunk);
        short.healthy = 42;
        assert_eq!(super::plan(&short), Err(PlanError::FloorUnreachable { healthy: 42, floor: 42 }));
    }

    #[test]
    fn a_narrow_fan_out_and_a_short_hold_lease_shrink_lanes_to_fit() {
        let mut slow = input(50);
        slow.fan_out = 2;
        slow.hold_lease_ms = 1_000_000; // room for two waves of 360 s
        let plan = plan(&slow).unwrap();
        assert_eq!(plan.lane_size, 4);
        assert!(plan.lane_bound_ms < slow.hold_lease_ms);
        // A lane must end strictly inside the lease: a lease of exactly three waves (3 × 360 s) takes only two.
        // Found by cargo-mutants (docs/testing.md): the bound once let a lane end on the lease's last millisecond.
        slow.hold_lease_ms = 3 * 360_000;
        let plan = super::plan(&slow).unwrap();
        assert_eq!(plan.lane_size, 4, "two waves of fan-out 2");
        assert!(plan.lane_bound_ms < slow.hold_lease_ms);
    }

    #[test]
    fn plans_that_cannot_fit_are_refused_before_any_mutation() {
        let mut ttl = input(50);
        ttl.agent_ttl_ms = 300_000;
        assert!(matches!(plan(&ttl), Err(PlanError::NodeExceedsLimit { limit_name: "agent TTL", .. })));
        let mut credentials = input(50);
        credentials.credential_remaining_ms = 3_600_000;
        assert!(plan(&credentials).is_ok(), "7 lanes × 360 s = 2,520 s fits in an hour");
        credentials.credential_remaining_ms = 2_520_000;
        assert!(plan(&credentials).is_ok(), "a rollout that ends as the credential does still fits");
        credentials.credential_remaining_ms = 2_000_000;
        assert_eq!(
            plan(&credentials),
            Err(PlanError::CredentialsExpireFirst { rollout_ms: 2_520_000, credential_ms: 2_000_000 })
        );
    }

    proptest::proptest! {
        /// Whatever the inputs, an accepted plan covers every node once, never has a lane larger than the lane size,
        /// the floor allows, and fits its lane inside the TTL and hold lease.
        #[test]
        fn accepted_plans_respect_every_bound(nodes in 1usize..120, healthy in 0usize..130, floor in 0usize..130,
            lane_max in 1usize..12, fan_out in 1usize..10, ttl in 1u64..5_000_000, lease in 1u64..5_000_000) {
            let mut case = input(nodes);
            (case.healthy, case.availability_floor, case.lane_size_max, case.fan_out) = (healthy, floor, lane_max, fan_out);
            (case.agent_ttl_ms, case.hold_lease_ms) = (ttl, lease);
            if let Ok(plan) = plan(&case) {
                let flat: Vec<&String> = plan.lanes.iter().flatten().collect();
                proptest::prop_assert_eq!(flat.len(), nodes);
                proptest::prop_assert!(plan.lanes.iter().all(|lane| lane.len() <= plan.lane_size));
                proptest::prop_assert!(plan.lane_size <= lane_max && plan.lane_size <= healthy - floor);
                proptest::prop_assert!(plan.lane_bound_ms < ttl.min(lease));
            }
        }
    }
}
