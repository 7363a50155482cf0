//! The bare-metal provider in the simulated world (`[instances] bare_metal = true`): every machine of the site is a
//! Node whose instance is backed by it. [`SimMetal`] is the engine's `BareMetal` port as the controller holds it —
//! where a machine got to is read from the controller's own journal (its onboarding and decommission workflows'
//! records, folded by the engine's `metal_status`), a provision or a terminate asks the controller's workflow
//! runner for the machine's onboarding or decommission, and power goes to the MAAS region like any workflow's call
//! (read first, then act, traced under the workflow `instances`). At the hub, a machine's agent is its instance's:
//! it enrols with the instance id the onboarding request carried (as a cloud create carries its tag), its
//! heartbeats are heard as the instance's, and its platform rows are what the terminate cascade revokes.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use engine::instance::driver::Heard;
use engine::instance::provision::AgentPhase;
use engine::ports::Journal;
use engine::ports::bare_metal::{BareMetal, MetalPower, MetalStatus};
use engine::ports::provider::ProviderError;
use engine::ports::site::{MaasApi, MaasError, PowerState};

use crate::model::ids::{decommission_workflow_id, onboarding_workflow_id};
use crate::world::controller::SimJournal;
use crate::world::instances::PLATFORM_ROWS;
use crate::world::{CONTROLLER_ID, HUB_ID, World};

/// The workflow the instance controller's MAAS calls are traced under.
pub(crate) const INSTANCES_WORKFLOW: &str = "instances";

/// The engine's `BareMetal` port on the controller.
pub(crate) struct SimMetal {
    pub world: Rc<World>,
    /// Per machine, the journal lines `metal_status` last folded and what it said: a pass reads every row's
    /// machine, and most passes find the same lines. A memo of a pure function of those lines (compared whole, so
    /// a crash that lost a tail and wrote other lines after it is read afresh); it changes no answer.
    folded: RefCell<BTreeMap<String, Folded>>,
}

/// One machine's lines as `metal_status` last read them, and its answer.
struct Folded {
    onboarded: Vec<String>,
    retired: Vec<String>,
    status: MetalStatus,
}

/// A region answer in the instance lifecycle's terms.
fn provider_error(error: MaasError) -> ProviderError {
    let text = error.to_string();
    match error {
        MaasError::Transport(transport) => ProviderError::Transport(transport),
        MaasError::Http { status: 404, .. } => ProviderError::NotFound(text),
        MaasError::Http { status: 409, .. } => ProviderError::WrongState(text),
        MaasError::Http { status: 503, .. } => ProviderError::Unavailable(text),
        MaasError::Http { .. } => ProviderError::Rejected(text),
    }
}

impl SimMetal {
    pub(crate) fn new(world: Rc<World>) -> SimMetal {
        SimMetal { world, folded: RefCell::new(BTreeMap::new()) }
    }

    /// The racked machine with this PXE MAC.
    fn machine(&self, mac: &str) -> Result<String, ProviderError> {
        let site = self.world.site.as_ref().ok_or_else(|| ProviderError::Rejected("no MAAS site".to_owned()))?;
        let state = site.state.borrow();
        state
            .racked
            .iter()
            .find(|(_, racked)| racked.pxe_mac.eq_ignore_ascii_case(mac))
            .map(|(machine, _)| machine.clone())
            .ok_or_else(|| ProviderError::NotFound(format!("no machine is racked with PXE MAC {mac}")))
    }

    /// The machine's MAAS system id, read whole from the region: by the id the row holds, or found by its MAC
    /// (`list_by_mac`) first. What a power call acts on is read first.
    async fn read_system(&self, mac: &str, known: Option<&str>) -> Result<String, ProviderError> {
        let maas = self.world.site_maas(CONTROLLER_ID, INSTANCES_WORKFLOW);
        let system_id = match known {
            Some(system_id) => system_id.to_owned(),
            None => self.find_system(mac).await?,
        };
        let read = maas.machine(&system_id).await.map_err(provider_error)?;
        Ok(read.system_id)
    }

    /// The system id of the machine with this MAC, as the region lists it.
    async fn find_system(&self, mac: &str) -> Result<String, ProviderError> {
        let maas = self.world.site_maas(CONTROLLER_ID, INSTANCES_WORKFLOW);
        let listed = maas.machines_with_mac(mac).await.map_err(provider_error)?;
        let Some(machine) = listed.into_iter().next() else {
            return Err(ProviderError::NotFound(format!("MAAS has no machine with MAC {mac}")));
        };
        Ok(machine.system_id)
    }
}

impl BareMetal for SimMetal {
    async fn status(&self, mac: &str) -> Result<MetalStatus, ProviderError> {
        let machine = self.machine(mac)?;
        let journal = SimJournal { world: self.world.clone(), host: CONTROLLER_ID };
        let (onboarding, decommission) = (onboarding_workflow_id(&machine), decommission_workflow_id(&machine));
        let read = |error: engine::ports::JournalError| ProviderError::Rejected(format!("journal: {error}"));
        let onboarded = journal.replay_subject(&onboarding).await.map_err(read)?;
        let retired = journal.replay_subject(&decommission).await.map_err(read)?;
        if let Some(folded) = self.folded.borrow().get(&machine)
            && folded.onboarded == onboarded
            && folded.retired == retired
        {
            return Ok(folded.status.clone());
        }
        let status = engine::instance::metal::metal_status(&onboarding, &onboarded, &decommission, &retired)
            .map_err(|error| ProviderError::Rejected(format!("journal: {error}")))?;
        self.folded.borrow_mut().insert(machine, Folded { onboarded, retired, status: status.clone() });
        Ok(status)
    }

    async fn onboard(&self, mac: &str, instance: &str) -> Result<(), ProviderError> {
        let machine = self.machine(mac)?;
        self.world.instances().enrols_as(&machine, instance);
        self.world.site().request_onboarding(&machine);
        Ok(())
    }

    async fn decommission(&self, mac: &str) -> Result<(), ProviderError> {
        let machine = self.machine(mac)?;
        self.world.site().request_decommission(&machine);
        Ok(())
    }

    async fn power(&self, mac: &str, system_id: Option<&str>, action: MetalPower) -> Result<(), ProviderError> {
        let system_id = self.read_system(mac, system_id).await?;
        let maas = self.world.site_maas(CONTROLLER_ID, INSTANCES_WORKFLOW);
        match action {
            MetalPower::On => maas.power_on(&system_id).await,
            MetalPower::Off => maas.power_off(&system_id).await,
            MetalPower::Cycle => match maas.power_off(&system_id).await {
                Ok(()) => maas.power_on(&system_id).await,
                Err(error) => Err(error),
            },
        }
        .map_err(provider_error)
    }

    async fn powered(&self, mac: &str, system_id: Option<&str>) -> Result<bool, ProviderError> {
        // A power reading mutates nothing: by the id the row holds it needs no read before it.
        let system_id = match system_id {
            Some(system_id) => system_id.to_owned(),
            None => self.find_system(mac).await?,
        };
        let maas = self.world.site_maas(CONTROLLER_ID, INSTANCES_WORKFLOW);
        match maas.power_state(&system_id).await.map_err(provider_error)? {
            PowerState::On => Ok(true),
            PowerState::Off => Ok(false),
            PowerState::Unknown => Err(ProviderError::Unavailable(format!("MAAS cannot read {system_id}'s power"))),
        }
    }
}

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
