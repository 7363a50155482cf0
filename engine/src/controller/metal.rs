//! The bare-metal provider of the instance lifecycle, as the controller holds it: where a machine got to is read
//! from the controller's own journal (its onboarding and decommission workflows' records, folded by
//! [`crate::instance::metal::metal_status`]), a provision or a terminate is a request to the controller's own
//! workflow desk, and power goes to the MAAS region like any workflow's call (read first, then act, under the
//! workflow [`INSTANCES_WORKFLOW`]).

use std::cell::RefCell;
use std::collections::BTreeMap;

use crate::controller::host::Host;
use crate::controller::request::Request;
use crate::ports::Journal;
use crate::ports::bare_metal::{BareMetal, MetalPower, MetalStatus};
use crate::ports::provider::ProviderError;
use crate::ports::site::{MaasApi, MaasError, PowerState};
use crate::workflow::ids::{decommission_workflow_id, onboarding_workflow_id};

/// The workflow the instance lifecycle's MAAS calls are made under.
pub const INSTANCES_WORKFLOW: &str = "instances";

/// The `BareMetal` port over the controller's journal, its workflow desk and the MAAS region.
pub struct ControllerMetal<'a, H: Host> {
    host: &'a H,
    /// The controller has a MAAS site.
    site: bool,
    /// Per machine, the journal lines `metal_status` last folded and what it said: a pass reads every row's
    /// machine, and most passes find the same lines. A memo of a pure function of those lines (compared whole); it
    /// changes no answer.
    folded: RefCell<BTreeMap<String, Folded>>,
}

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

impl<'a, H: Host> ControllerMetal<'a, H> {
    pub fn new(host: &'a H, site: bool) -> ControllerMetal<'a, H> {
        ControllerMetal { host, site, folded: RefCell::new(BTreeMap::new()) }
    }

    /// The racked machine with this PXE MAC.
    fn machine(&self, mac: &str) -> Result<String, ProviderError> {
        if !self.site {
            return Err(ProviderError::Rejected("no MAAS site".to_owned()));
        }
        self.host
            .racked_by_mac(mac)
            .ok_or_else(|| ProviderError::NotFound(format!("no machine is racked with PXE MAC {mac}")))
    }

    /// The machine's MAAS system id, read whole from the region: by the id the row holds, or found by its MAC
    /// first. What a power call acts on is read first.
    async fn read_system(&self, mac: &str, known: Option<&str>) -> Result<String, ProviderError> {
        let maas = self.host.maas(INSTANCES_WORKFLOW);
        let system_id = match known {
            Some(system_id) => system_id.to_owned(),
            None => self.find_system(mac).await?,
        };
        let read = maas.machine(&system_id).await.map_err(provider_error)?;
        Ok(read.system_id)
    }

    /// The system id of the machine with this MAC, as the region lists it.
    async fn find_system(&self, mac: &str) -> Result<String, ProviderError> {
        let maas = self.host.maas(INSTANCES_WORKFLOW);
        let listed = maas.machines_with_mac(mac).await.map_err(provider_error)?;
        let Some(machine) = listed.into_iter().next() else {
            return Err(ProviderError::NotFound(format!("MAAS has no machine with MAC {mac}")));
        };
        Ok(machine.system_id)
    }
}

impl<H: Host> BareMetal for ControllerMetal<'_, H> {
    async fn status(&self, mac: &str) -> Result<MetalStatus, ProviderError> {
        let machine = self.machine(mac)?;
        let journal = self.host.journal();
        let (onboarding, decommission) = (onboarding_workflow_id(&machine), decommission_workflow_id(&machine));
        let read = |error: crate::ports::JournalError| ProviderError::Rejected(format!("journal: {error}"));
        let onboarded = journal.replay_subject(&onboarding).await.map_err(read)?;
        let retired = journal.replay_subject(&decommission).await.map_err(read)?;
        if let Some(folded) = self.folded.borrow().get(&machine)
            && folded.onboarded == onboarded
            && folded.retired == retired
        {
            return Ok(folded.status.clone());
        }
        let status = crate::instance::metal::metal_status(&onboarding, &onboarded, &decommission, &retired)
            .map_err(|error| ProviderError::Rejected(format!("journal: {error}")))?;
        self.folded.borrow_mut().insert(machine, Folded { onboarded, retired, status: status.clone() });
        Ok(status)
    }

    async fn onboard(&self, mac: &str, instance: &str) -> Result<(), ProviderError> {
        let machine = self.machine(mac)?;
        self.host.submit(Request::Onboard { machine, instance: Some(instance.to_owned()) });
        Ok(())
    }

    async fn decommission(&self, mac: &str) -> Result<(), ProviderError> {
        let machine = self.machine(mac)?;
        self.host.submit(Request::Decommission { machine });
        Ok(())
    }

    async fn power(&self, mac: &str, system_id: Option<&str>, action: MetalPower) -> Result<(), ProviderError> {
        let system_id = self.read_system(mac, system_id).await?;
        let maas = self.host.maas(INSTANCES_WORKFLOW);
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
        let maas = self.host.maas(INSTANCES_WORKFLOW);
        match maas.power_state(&system_id).await.map_err(provider_error)? {
            PowerState::On => Ok(true),
            PowerState::Off => Ok(false),
            PowerState::Unknown => Err(ProviderError::Unavailable(format!("MAAS cannot read {system_id}'s power"))),
        }
    }
}
