//! One fleet, one life (`[onboarding] fleet = true`): the site's machines are the fleet's nodes. A node's host runs
//! only while MAAS has its machine powered with its deployed OS and the agent that OS enrolled; the host's agent
//! heartbeats with the bearer its enrolment redeemed at the hub, and its worker is what a rollout deploys to. A
//! power-off at the site (a release, a stop) takes the host down; a power-on of a deployed machine brings it back.

use std::rc::Rc;

use crate::world::World;

impl World {
    /// The site's machines are the fleet's nodes in this run.
    pub(crate) fn one_life(&self) -> bool {
        self.spec.onboarding.as_ref().is_some_and(|onboarding| onboarding.fleet)
    }

    /// Whether `machine` is one of the fleet's nodes in a one-life run (its host is the node's, its agent the
    /// node's agent).
    pub(crate) fn is_fleet_machine(&self, machine: &str) -> bool {
        self.one_life() && self.spec.fleet.node_index(machine).is_some()
    }

    /// The bearer `node`'s agent enrolled with at the hub, while it is enrolled (a one-life run's node only).
    pub(crate) fn fleet_node_bearer(&self, node: &str) -> Option<String> {
        self.site().state.borrow().enrolled.get(node).cloned()
    }

    /// Whether `node` is one a rollout may select now: enrolled at the hub and up.
    pub(crate) fn fleet_node_enrolled(&self, node: &str) -> bool {
        self.fleet_node_bearer(node).is_some() && self.is_up(self.host_id(node))
    }

    /// Brings `machine`'s node host up or down as the site has it: up while the machine is powered and its deployed
    /// OS enrolled its agent. Nothing in a run whose machines are not the fleet's.
    pub(crate) fn sync_fleet_host(self: &Rc<Self>, machine: &str) {
        if !self.is_fleet_machine(machine) {
            return;
        }
        let running = self.site().lock().site.machine(machine).is_some_and(|m| m.agent_enrolled() && m.is_powered());
        let host = self.host_id(machine);
        match (running, self.is_up(host)) {
            (true, false) => self.boot(host),
            (false, true) => self.crash(host),
            _ => {}
        }
    }
}
