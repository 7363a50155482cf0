//! The fake BMC service: one Redfish-like endpoint for every machine, as sushy-tools' emulator serves many systems
//! (`/redfish/v1/Systems/<id>`). It keeps each system's power state and its one-time boot override, checks Basic
//! auth, and reports every power transition so the site can boot or halt the machine behind it.
//!
//! What MAAS sends (notes §7.1): `GET Systems/<id>` for `PowerState`, `PATCH` with
//! `{"Boot":{"BootSourceOverrideEnabled":"Once","BootSourceOverrideTarget":"Pxe"}}`, and
//! `POST .../Actions/ComputerSystem.Reset` with `On`, `ForceOff` or `GracefulRestart`.
//!
//! Faults (per system): unreachable (no answer), commands accepted with 204 but ignored, and wrong credentials (the
//! BMC's password rotated under MAAS: every request gets 401).
//!
//! Deviation from real MAAS/sushy-tools: power changes apply at once (sushy's fake driver applies them 1–11 s later
//! on the next read; here the boot's own timings carry the delay), there is no transitional `PoweringOn` state, and
//! `If-Match` is not checked against the ETag.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::vault::{PowerCredential, Secret};

/// Redfish `PowerState`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum PowerState {
    On,
    Off,
}

/// Redfish `ResetType` values sushy-tools' drivers accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ResetType {
    On,
    ForceOn,
    ForceOff,
    GracefulShutdown,
    GracefulRestart,
    ForceRestart,
}

/// Redfish `BootSourceOverrideTarget` (the ones that matter here).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum BootTarget {
    Pxe,
    Hdd,
}

/// Redfish `BootSourceOverrideEnabled`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum OverrideEnabled {
    Disabled,
    Once,
    Continuous,
}

/// HTTP Basic credentials as sent with a request; `Debug` redacts the password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BasicAuth {
    pub user: String,
    pub password: Secret,
}

impl From<&PowerCredential> for BasicAuth {
    fn from(credential: &PowerCredential) -> BasicAuth {
        BasicAuth { user: credential.user.clone(), password: credential.password.clone() }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RedfishRequest {
    /// `GET /redfish/v1/Systems`
    ListSystems,
    /// `GET /redfish/v1/Systems/<id>`
    GetSystem { system: String },
    /// `PATCH /redfish/v1/Systems/<id>` with a `Boot` object.
    PatchBoot { system: String, enabled: OverrideEnabled, target: BootTarget },
    /// `POST /redfish/v1/Systems/<id>/Actions/ComputerSystem.Reset`
    Reset { system: String, reset: ResetType },
}

/// The fields of `GET Systems/<id>` that MAAS reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SystemView {
    pub id: String,
    pub power_state: PowerState,
    pub boot_override_enabled: OverrideEnabled,
    pub boot_override_target: BootTarget,
    /// `@odata.etag`
    pub etag: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RedfishBody {
    Systems(Vec<String>),
    System(SystemView),
    /// 204 No Content.
    Empty,
    Error(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedfishResponse {
    pub status: u16,
    pub body: RedfishBody,
}

impl RedfishResponse {
    fn error(status: u16, message: impl Into<String>) -> RedfishResponse {
        RedfishResponse { status, body: RedfishBody::Error(message.into()) }
    }
}

/// A power transition that happened on a system, for the machine behind it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum PowerTransition {
    /// The system powered on and its firmware boots from `boot`.
    PoweredOn {
        system: String,
        boot: BootTarget,
    },
    PoweredOff {
        system: String,
    },
}

/// Per-system BMC faults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BmcFault {
    /// No answer at all (the caller times out). Recoverable by [`Bmc::clear_fault`].
    Unreachable,
    /// Every command gets its normal 204 and does nothing; reads still answer truthfully.
    IgnoreCommands,
}

#[derive(Debug, Clone)]
struct SystemState {
    credential: PowerCredential,
    power: PowerState,
    override_enabled: OverrideEnabled,
    override_target: BootTarget,
    generation: u64,
}

/// The BMC service of a site.
#[derive(Debug, Clone, Default)]
pub struct Bmc {
    systems: BTreeMap<String, SystemState>,
    faults: BTreeMap<String, BmcFault>,
    transitions: Vec<PowerTransition>,
}

impl Bmc {
    pub fn new() -> Bmc {
        Bmc::default()
    }

    /// Adds a powered-off system whose BMC accepts `credential`.
    pub fn add_system(&mut self, system: &str, credential: PowerCredential) {
        self.systems.insert(
            system.to_owned(),
            SystemState {
                credential,
                power: PowerState::Off,
                override_enabled: OverrideEnabled::Disabled,
                override_target: BootTarget::Hdd,
                generation: 1,
            },
        );
    }

    pub fn set_fault(&mut self, system: &str, fault: BmcFault) {
        self.faults.insert(system.to_owned(), fault);
    }

    pub fn clear_fault(&mut self, system: &str) {
        self.faults.remove(system);
    }

    /// Fault: the BMC's password changes under its users; every request with the old one gets 401. Recoverable by
    /// giving MAAS the new credential.
    pub fn rotate_credential(&mut self, system: &str, credential: PowerCredential) {
        if let Some(state) = self.systems.get_mut(system) {
            state.credential = credential;
        }
    }

    /// The login the system's BMC accepts now (the front end's emulator login stands in for it).
    pub fn credential(&self, system: &str) -> Option<&PowerCredential> {
        self.systems.get(system).map(|state| &state.credential)
    }

    /// The systems, in id order.
    pub fn system_ids(&self) -> Vec<String> {
        self.systems.keys().cloned().collect()
    }

    pub fn power_state(&self, system: &str) -> Option<PowerState> {
        self.systems.get(system).map(|state| state.power)
    }

    /// Takes the power transitions since the last call, oldest first.
    pub fn take_transitions(&mut self) -> Vec<PowerTransition> {
        std::mem::take(&mut self.transitions)
    }

    /// The machine's OS shut itself down (end of commissioning or enlistment).
    pub fn os_power_off(&mut self, system: &str) {
        let Some(state) = self.systems.get_mut(system) else { return };
        if state.power == PowerState::On {
            state.power = PowerState::Off;
            state.generation += 1;
            self.transitions.push(PowerTransition::PoweredOff { system: system.to_owned() });
        }
    }

    /// The machine's OS rebooted itself (curtin's reboot into the installed OS): where the firmware boots from.
    pub fn os_reboot(&mut self, system: &str) -> Option<BootTarget> {
        let state = self.systems.get_mut(system)?;
        state.generation += 1;
        Some(take_boot_target(state))
    }

    /// Handles one request. `None` when the BMC does not answer.
    pub fn handle(&mut self, auth: &BasicAuth, request: RedfishRequest) -> Option<RedfishResponse> {
        let system = match &request {
            RedfishRequest::ListSystems => None,
            RedfishRequest::GetSystem { system }
            | RedfishRequest::PatchBoot { system, .. }
            | RedfishRequest::Reset { system, .. } => Some(system.clone()),
        };
        let Some(system) = system else {
            return Some(RedfishResponse {
                status: 200,
                body: RedfishBody::Systems(self.systems.keys().cloned().collect()),
            });
        };
        let fault = self.faults.get(&system).copied();
        if fault == Some(BmcFault::Unreachable) {
            return None;
        }
        let Some(state) = self.systems.get_mut(&system) else {
            return Some(RedfishResponse::error(404, format!("System {system} not found")));
        };
        if state.credential.user != auth.user || state.credential.password != auth.password {
            return Some(RedfishResponse::error(401, "Unauthorized"));
        }
        let ignored = fault == Some(BmcFault::IgnoreCommands);
        let no_content = RedfishResponse { status: 204, body: RedfishBody::Empty };
        match request {
            RedfishRequest::ListSystems => unreachable!("handled above"),
            RedfishRequest::GetSystem { system } => Some(RedfishResponse {
                status: 200,
                body: RedfishBody::System(SystemView {
                    id: system,
                    power_state: state.power,
                    boot_override_enabled: state.override_enabled,
                    boot_override_target: state.override_target,
                    etag: format!("W/\"{}\"", state.generation),
                }),
            }),
            RedfishRequest::PatchBoot { enabled, target, .. } => {
                if !ignored {
                    state.override_enabled = enabled;
                    state.override_target = target;
                    state.generation += 1;
                }
                Some(no_content)
            }
            RedfishRequest::Reset { system, reset } => {
                if ignored {
                    return Some(no_content);
                }
                match reset {
                    ResetType::On | ResetType::ForceOn => {
                        if state.power == PowerState::Off {
                            state.power = PowerState::On;
                            let boot = take_boot_target(state);
                            self.transitions.push(PowerTransition::PoweredOn { system, boot });
                        }
                    }
                    ResetType::ForceOff | ResetType::GracefulShutdown => {
                        if state.power == PowerState::On {
                            state.power = PowerState::Off;
                            self.transitions.push(PowerTransition::PoweredOff { system });
                        }
                    }
                    ResetType::GracefulRestart | ResetType::ForceRestart => {
                        // As sushy's fake driver: a restart first goes off, then on, whatever the state was.
                        if state.power == PowerState::On {
                            self.transitions.push(PowerTransition::PoweredOff { system: system.clone() });
                        }
                        state.power = PowerState::On;
                        let boot = take_boot_target(state);
                        self.transitions.push(PowerTransition::PoweredOn { system, boot });
                    }
                }
                state.generation += 1;
                Some(no_content)
            }
        }
    }
}

/// Where the firmware boots from now; a `Once` override is consumed.
fn take_boot_target(state: &mut SystemState) -> BootTarget {
    match state.override_enabled {
        OverrideEnabled::Disabled => BootTarget::Hdd,
        OverrideEnabled::Continuous => state.override_target,
        OverrideEnabled::Once => {
            state.override_enabled = OverrideEnabled::Disabled;
            state.override_target
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credential() -> PowerCredential {
        PowerCredential { user: "admin".into(), password: Secret::mint("bmc", 1) }
    }

    fn bmc() -> (Bmc, BasicAuth) {
        let mut bmc = Bmc::new();
        bmc.add_system("node-01", credential());
        (bmc, BasicAuth::from(&credential()))
    }

    fn reset(reset: ResetType) -> RedfishRequest {
        RedfishRequest::Reset { system: "node-01".into(), reset }
    }

    fn pxe_once() -> RedfishRequest {
        RedfishRequest::PatchBoot { system: "node-01".into(), enabled: OverrideEnabled::Once, target: BootTarget::Pxe }
    }

    #[test]
    fn a_one_time_pxe_override_applies_to_the_next_power_on_only() {
        let (mut bmc, auth) = bmc();
        assert_eq!(bmc.handle(&auth, pxe_once()).unwrap().status, 204);
        assert_eq!(bmc.handle(&auth, reset(ResetType::On)).unwrap().status, 204);
        assert_eq!(
            bmc.take_transitions(),
            vec![PowerTransition::PoweredOn { system: "node-01".into(), boot: BootTarget::Pxe }]
        );
        bmc.handle(&auth, reset(ResetType::GracefulRestart)).unwrap();
        assert_eq!(
            bmc.take_transitions(),
            vec![
                PowerTransition::PoweredOff { system: "node-01".into() },
                PowerTransition::PoweredOn { system: "node-01".into(), boot: BootTarget::Hdd },
            ]
        );
        let Some(RedfishResponse { body: RedfishBody::System(view), .. }) =
            bmc.handle(&auth, RedfishRequest::GetSystem { system: "node-01".into() })
        else {
            panic!("no system");
        };
        assert_eq!((view.power_state, view.boot_override_enabled), (PowerState::On, OverrideEnabled::Disabled));
    }

    #[test]
    fn wrong_credentials_get_401_and_change_nothing() {
        let (mut bmc, auth) = bmc();
        bmc.rotate_credential("node-01", PowerCredential { user: "admin".into(), password: Secret::mint("bmc", 2) });
        let response = bmc.handle(&auth, reset(ResetType::On)).unwrap();
        assert_eq!(response, RedfishResponse::error(401, "Unauthorized"));
        assert_eq!(bmc.power_state("node-01"), Some(PowerState::Off));
        assert!(bmc.take_transitions().is_empty());
        let missing = RedfishRequest::GetSystem { system: "node-99".into() };
        assert_eq!(bmc.handle(&auth, missing).unwrap().status, 404);
    }

    #[test]
    fn an_ignored_command_is_accepted_but_has_no_effect_and_unreachable_gives_no_answer() {
        let (mut bmc, auth) = bmc();
        bmc.set_fault("node-01", BmcFault::IgnoreCommands);
        assert_eq!(bmc.handle(&auth, reset(ResetType::On)).unwrap().status, 204);
        assert_eq!(bmc.power_state("node-01"), Some(PowerState::Off));
        assert!(bmc.take_transitions().is_empty());
        bmc.set_fault("node-01", BmcFault::Unreachable);
        assert_eq!(bmc.handle(&auth, reset(ResetType::On)), None);
        bmc.clear_fault("node-01");
        bmc.handle(&auth, reset(ResetType::On)).unwrap();
        assert_eq!(bmc.power_state("node-01"), Some(PowerState::On));
        assert!(!format!("{auth:?}").contains("fleetsim-secret-"));
    }
}
