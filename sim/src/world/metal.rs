//! The bare-metal instances in the simulated world (`[instances] bare_metal = true`): every machine of the site is a
//! Node whose instance is backed by it. The controller's side (where a machine got to, read from its journal; a
//! provision or a terminate as a request to its own workflow desk; power through MAAS) is the engine's
//! (`engine::controller::metal`). At the hub, a machine's agent is its instance's: it enrols with the instance id the
//! onboarding request carried (as a cloud create carries its tag), its heartbeats are heard as the instance's, and
//! its platform rows are what the terminate cascade revokes.

use engine::ports::platform::{AgentPhase, Heard};

use crate::world::instances::PLATFORM_ROWS;
use crate::world::{HUB_ID, World};

impl World {
    /// At the hub: a machine's agent enrolled. In a bare-metal run it is its instance's agent, and the platform rows
    /// the terminate cascade revokes are its.
    pub(crate) fn metal_enrolled(&self, machine: &str) {
        if let Some(instance) = self.metal_instance(machine) {
            self.instances().platform_rows_for(&instance, PLATFORM_ROWS);
        }
    }

    /// At the hub: a machine's agent heartbeat was accepted. Its agent runs the deployed OS with its modules, so the
    /// heartbeat is `phase=ready`; the controller hears it at its next read.
    pub(crate) fn metal_heartbeat(&self, machine: &str) {
        if let Some(instance) = self.metal_instance(machine) {
            let now_ms = self.host_now_ms(HUB_ID);
            self.instances().heard_at_hub(&instance, Heard::Heartbeat(AgentPhase::Ready), now_ms);
        }
    }

    fn metal_instance(&self, machine: &str) -> Option<String> {
        let instances = self.instances.as_ref().filter(|instances| instances.spec().bare_metal)?;
        instances.agent_of(machine)
    }
}
