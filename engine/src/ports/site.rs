//! The MAAS site's ports, for the onboarding and decommission workflows: the region API ([`MaasApi`]), the rack
//! resolver the nodes are given ([`Resolver`]) and the site's secrets store ([`SiteSecrets`]).
//!
//! API Boundary: the types here are the engine's view of MAAS, reduced to what the workflows read. An adapter maps
//! the real API (or the simulator's fake) onto them; status codes and names are MAAS's own
//! (`reference/maas-api-notes.md`), and an HTTP error keeps its status, its message and its `Retry-After`.

use std::future::Future;

use crate::matrix::TimeoutKind;
use crate::ports::{SecretsError, TransportError};
use crate::secret::Secret;

/// A machine's status as MAAS names it (`NODE_STATUS`); the ones the workflows act on are named, the rest kept.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum MachineStatus {
    New,
    Commissioning,
    FailedCommissioning,
    Ready,
    Allocated,
    Deploying,
    Deployed,
    FailedDeployment,
    Releasing,
    Broken,
    DiskErasing,
    FailedDiskErasing,
    /// MAAS's "Releasing failed": the release did not finish (the power never read off within its timeout).
    FailedReleasing,
    /// Any other status: its code and MAAS's name for it.
    Other {
        code: u8,
        name: String,
    },
}

impl MachineStatus {
    /// From MAAS's numeric status code and its name.
    pub fn from_code(code: u8, name: &str) -> MachineStatus {
        match code {
            0 => MachineStatus::New,
            1 => MachineStatus::Commissioning,
            2 => MachineStatus::FailedCommissioning,
            4 => MachineStatus::Ready,
            10 => MachineStatus::Allocated,
            9 => MachineStatus::Deploying,
            6 => MachineStatus::Deployed,
            11 => MachineStatus::FailedDeployment,
            12 => MachineStatus::Releasing,
            8 => MachineStatus::Broken,
            14 => MachineStatus::DiskErasing,
            15 => MachineStatus::FailedDiskErasing,
            13 => MachineStatus::FailedReleasing,
            _ => MachineStatus::Other { code, name: name.to_owned() },
        }
    }

    pub fn name(&self) -> &str {
        match self {
            MachineStatus::New => "New",
            MachineStatus::Commissioning => "Commissioning",
            MachineStatus::FailedCommissioning => "Failed commissioning",
            MachineStatus::Ready => "Ready",
            MachineStatus::Allocated => "Allocated",
            MachineStatus::Deploying => "Deploying",
            MachineStatus::Deployed => "Deployed",
            MachineStatus::FailedDeployment => "Failed deployment",
            MachineStatus::Releasing => "Releasing",
            MachineStatus::Broken => "Broken",
            MachineStatus::DiskErasing => "Disk erasing",
            MachineStatus::FailedDiskErasing => "Failed disk erasing",
            MachineStatus::FailedReleasing => "Releasing failed",
            MachineStatus::Other { name, .. } => name,
        }
    }
}

/// A machine as the workflows read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    pub system_id: String,
    pub hostname: String,
    pub status: MachineStatus,
    pub status_message: String,
    /// The BMC address MAAS drives the machine's power through; `None` when it has no power parameters yet.
    pub power_address: Option<String>,
    /// Every interface's MAC, lowercase, boot interface first.
    pub macs: Vec<String>,
    pub enable_hw_sync: bool,
    /// Hardware sync enabled, synced, and not overdue (as MAAS's UI judges it).
    pub hw_sync_healthy: bool,
}

/// One entry of MAAS's event log for a machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MaasEvent {
    pub id: u64,
    /// `DEBUG`, `INFO`, `WARNING`, `ERROR`, `CRITICAL`.
    pub level: String,
    /// The event type's text ("Commissioning", "Loading ephemeral", "Ready", "Marking node failed", ...).
    pub text: String,
    pub description: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    pub id: u64,
    pub name: String,
    pub mac: String,
    /// The VLAN's `vid`, if the interface is on one.
    pub vlan_vid: Option<u16>,
    /// Linked to a subnet in mode AUTO.
    pub auto_linked: bool,
    /// A RoCE interface (MAAS has no such type: the site tags them).
    pub roce: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Disk {
    pub id: u64,
    pub name: String,
    pub model: String,
    pub serial: String,
    /// MAAS's current boot disk.
    pub boot: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subnet {
    pub id: u64,
    pub cidr: String,
    pub vlan_vid: u16,
    pub mtu: u16,
}

/// What an operator's inventory says about a node, for `create_or_find_in_maas`.
/// One service of a region controller, as MAAS's `service_set` reports it: `status` is `running`, `degraded`,
/// `dead`, `off` or `unknown`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegionService {
    pub name: String,
    pub status: String,
    pub status_info: String,
}

/// The region's workflow services (MAAS 3.5+ runs commissioning and deploys as Temporal workflows on the region).
pub const WORKFLOW_SERVICES: [&str; 2] = ["temporal", "temporal-worker"];

impl RegionService {
    /// A workflow service that is not running: MAAS accepts commands it will not carry out.
    pub fn is_unhealthy_workflow_service(&self) -> bool {
        WORKFLOW_SERVICES.contains(&self.name.as_str()) && self.status != "running"
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewMachine {
    pub hostname: String,
    pub pxe_mac: String,
    pub power_address: String,
    pub power_user: String,
    pub power_password: Secret,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MaasError {
    #[error("maas unreachable: {0}")]
    Transport(#[from] TransportError),
    /// MAAS answered with an HTTP error: its status, its message, and its `Retry-After` when it sent one.
    #[error("maas answered {status}: {message}")]
    Http { status: u16, message: String, retry_after_s: Option<u32> },
}

impl MaasError {
    /// Worth retrying as it is: no answer, or 503 (MAAS's "try again", usually with `Retry-After`).
    pub fn is_transient(&self) -> bool {
        matches!(self, MaasError::Transport(_) | MaasError::Http { status: 503, .. })
    }

    pub fn status(&self) -> Option<u16> {
        match self {
            MaasError::Http { status, .. } => Some(*status),
            MaasError::Transport(_) => None,
        }
    }
}

/// The MAAS region API (2.0), reduced to the calls the workflows make. Every mutating call is a POST on the
/// machine's op; MAAS checks the transition and answers 409 with its message when it is illegal.
pub trait MaasApi {
    fn machines(&self) -> impl Future<Output = Result<Vec<Machine>, MaasError>>;
    /// `GET /machines/?mac_address=<mac>`: the machines with an interface of that MAC. The default filters the
    /// whole list; an adapter asks MAAS, whose answer then grows with the match, not with the site.
    fn machines_with_mac(&self, mac: &str) -> impl Future<Output = Result<Vec<Machine>, MaasError>> {
        async move {
            let mac = mac.to_lowercase();
            Ok(self.machines().await?.into_iter().filter(|machine| machine.macs.contains(&mac)).collect())
        }
    }
    /// `GET /machines/?status=new`: the machines MAAS has enlisted and nobody has commissioned yet. The default
    /// filters the whole list.
    fn new_machines(&self) -> impl Future<Output = Result<Vec<Machine>, MaasError>> {
        async move {
            Ok(self.machines().await?.into_iter().filter(|machine| machine.status == MachineStatus::New).collect())
        }
    }
    fn machine(&self, system_id: &str) -> impl Future<Output = Result<Machine, MaasError>>;
    /// Creates a machine with Redfish power parameters; MAAS starts commissioning it at once.
    fn create_machine(&self, new: &NewMachine) -> impl Future<Output = Result<Machine, MaasError>>;
    fn commission(&self, system_id: &str) -> impl Future<Output = Result<Machine, MaasError>>;
    /// Events of one machine with an id above `after`, newest first (MAAS's order).
    fn events(&self, system_id: &str, after: Option<u64>) -> impl Future<Output = Result<Vec<MaasEvent>, MaasError>>;
    fn disks(&self, system_id: &str) -> impl Future<Output = Result<Vec<Disk>, MaasError>>;
    fn set_boot_disk(&self, system_id: &str, disk_id: u64) -> impl Future<Output = Result<(), MaasError>>;
    fn interfaces(&self, system_id: &str) -> impl Future<Output = Result<Vec<Interface>, MaasError>>;
    fn subnets(&self) -> impl Future<Output = Result<Vec<Subnet>, MaasError>>;
    /// `GET /regioncontrollers/`: every region controller's services (a zero-cost read of the region's health).
    fn region_services(&self) -> impl Future<Output = Result<Vec<RegionService>, MaasError>>;
    /// `link_subnet` with mode AUTO.
    fn link_subnet_auto(
        &self,
        system_id: &str,
        interface_id: u64,
        subnet_id: u64,
    ) -> impl Future<Output = Result<(), MaasError>>;
    /// `op=disconnect`: deletes the interface's links and takes it off its VLAN (the unlink half of
    /// `ensure_pxe_interface_auto`'s "unlink/relink" compensation).
    fn disconnect_interface(&self, system_id: &str, interface_id: u64) -> impl Future<Output = Result<(), MaasError>>;
    fn deploy(
        &self,
        system_id: &str,
        user_data: &Secret,
        enable_hw_sync: bool,
    ) -> impl Future<Output = Result<Machine, MaasError>>;
    /// `op=release`; with `erase` MAAS wipes the disks first (DISK_ERASING, then RELEASING, then READY).
    fn release(&self, system_id: &str, erase: bool) -> impl Future<Output = Result<Machine, MaasError>>;
    fn abort(&self, system_id: &str) -> impl Future<Output = Result<Machine, MaasError>>;
    /// `op=mark_fixed`: BROKEN back to READY.
    fn mark_fixed(&self, system_id: &str) -> impl Future<Output = Result<Machine, MaasError>>;
    /// `op=power_off` (hard): MAAS asks the BMC and answers; the power may still read on afterwards.
    fn power_off(&self, system_id: &str) -> impl Future<Output = Result<(), MaasError>>;
    /// `op=power_on`: power a deployed (or allocated) machine on; MAAS refuses one not allocated to the caller (409
    /// "Can't start node: it hasn't been allocated.").
    fn power_on(&self, system_id: &str) -> impl Future<Output = Result<(), MaasError>>;
    /// `op=query_power_state`: MAAS asks the BMC now.
    fn power_state(&self, system_id: &str) -> impl Future<Output = Result<PowerState, MaasError>>;
    /// `DELETE machines/{id}/` (204).
    fn delete_machine(&self, system_id: &str) -> impl Future<Output = Result<(), MaasError>>;
}

/// A machine's power as MAAS's `query_power_state` answers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PowerState {
    On,
    Off,
    /// MAAS could not tell (`error`, `unknown`).
    Unknown,
}

/// A resolver's answer for one name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DnsAnswer {
    Address(String),
    NxDomain,
    ServFail,
}

/// The resolver the site gives its nodes (the rack's), as seen from the controller: a zero-cost probe of whether a
/// booting node can resolve the metadata host.
pub trait Resolver {
    fn resolve(&self, name: &str) -> impl Future<Output = Result<DnsAnswer, TransportError>>;
}

/// The site configuration the workflows need, from the secrets store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteConfig {
    pub enabled: bool,
    /// The name cloud-init's `cloud-config-url` points at (resolved through the rack).
    pub metadata_host: String,
    pub pxe_vlan_vid: u16,
    pub roce_vlan_vid: u16,
    /// Whether a node without its RoCE interfaces may go on (`apply_roce_phase2`'s policy).
    pub roce_mandatory: bool,
    /// Section 6's timeouts, as the site sets them (the matrix's defaults where it does not).
    pub timeouts: StageTimeouts,
}

/// Section 6 of the recovery matrix: "Timeouts are product behavior, not only implementation details." Each is a site
/// setting (the site configuration's `<kind>_timeout_ms`, e.g. `discovery_timeout_ms`), with the default of its
/// [`crate::matrix::TIMEOUTS`] row when the site does not set it; the drivers read these, never a constant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct StageTimeouts {
    /// `create_or_find_in_maas`: no discovery event (power-on, PXE boot) for this long is a `pxe_discovery_failure`.
    pub discovery_ms: u64,
    /// `wait_for_ready`: commissioning that has not reached Ready.
    pub commission_ms: u64,
    /// `wait_for_deployed` (and a release back to Ready): a deploy that has not reached Deployed.
    pub deploy_ms: u64,
    /// `ensure_hardware_sync_configured`: the SSH seed that has not answered.
    pub hardware_sync_seed_ms: u64,
    /// `wait_for_hardware_sync_healthy`: one wait for the sync fields to report healthy.
    pub hardware_sync_health_ms: u64,
    /// `wait_for_agent_enrollment`: one wait for the agent's first heartbeat.
    pub agent_enrollment_ms: u64,
}

/// The longest timeout a site may set: a day (a larger value is a typo, and would let a wait run without bound).
pub const TIMEOUT_MAX_MS: u64 = 24 * 60 * 60_000;

impl Default for StageTimeouts {
    fn default() -> StageTimeouts {
        let default_of = |kind: TimeoutKind| crate::matrix::timeout(kind).default_ms;
        StageTimeouts {
            discovery_ms: default_of(TimeoutKind::Discovery),
            commission_ms: default_of(TimeoutKind::Commission),
            deploy_ms: default_of(TimeoutKind::Deploy),
            hardware_sync_seed_ms: default_of(TimeoutKind::HardwareSyncSeed),
            hardware_sync_health_ms: default_of(TimeoutKind::HardwareSyncHealth),
            agent_enrollment_ms: default_of(TimeoutKind::AgentEnrollment),
        }
    }
}

impl StageTimeouts {
    /// The timeout of `kind`.
    pub fn of(&self, kind: TimeoutKind) -> u64 {
        match kind {
            TimeoutKind::Discovery => self.discovery_ms,
            TimeoutKind::Commission => self.commission_ms,
            TimeoutKind::Deploy => self.deploy_ms,
            TimeoutKind::HardwareSyncSeed => self.hardware_sync_seed_ms,
            TimeoutKind::HardwareSyncHealth => self.hardware_sync_health_ms,
            TimeoutKind::AgentEnrollment => self.agent_enrollment_ms,
        }
    }

    fn slot(&mut self, kind: TimeoutKind) -> &mut u64 {
        match kind {
            TimeoutKind::Discovery => &mut self.discovery_ms,
            TimeoutKind::Commission => &mut self.commission_ms,
            TimeoutKind::Deploy => &mut self.deploy_ms,
            TimeoutKind::HardwareSyncSeed => &mut self.hardware_sync_seed_ms,
            TimeoutKind::HardwareSyncHealth => &mut self.hardware_sync_health_ms,
            TimeoutKind::AgentEnrollment => &mut self.agent_enrollment_ms,
        }
    }

    /// The site configuration key of `kind` (`discovery_timeout_ms`, ...).
    pub fn key(kind: TimeoutKind) -> String {
        format!("{}_timeout_ms", kind.as_str())
    }

    /// The timeouts a site configuration sets (`value(key)` reads one of its keys), over the matrix's defaults. A
    /// value that is not a whole number of milliseconds in `1..=TIMEOUT_MAX_MS` is refused with the key named: a
    /// site misconfigured is an `input_config_error` at `load_site_config`, never a wait without bound.
    pub fn from_settings<S: AsRef<str>>(value: impl Fn(&str) -> Option<S>) -> Result<StageTimeouts, String> {
        let mut timeouts = StageTimeouts::default();
        for kind in TimeoutKind::ALL {
            let key = StageTimeouts::key(kind);
            let Some(text) = value(&key) else { continue };
            let text = text.as_ref();
            match text.trim().parse::<u64>() {
                Ok(ms) if (1..=TIMEOUT_MAX_MS).contains(&ms) => *timeouts.slot(kind) = ms,
                _ => {
                    return Err(format!(
                        "the site configuration's {key} is not a timeout in ms between 1 and {TIMEOUT_MAX_MS}: {text:?}"
                    ));
                }
            }
        }
        Ok(timeouts)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PowerCredential {
    pub user: String,
    pub password: Secret,
}

/// The site's secrets store (Vault-like).
pub trait SiteSecrets {
    fn site_config(&self) -> impl Future<Output = Result<SiteConfig, SecretsError>>;
    /// The node's power credential: its override if there is one, else the site default.
    fn power_credential(&self, node: &str) -> impl Future<Output = Result<PowerCredential, SecretsError>>;
    /// A single-use token the node's agent enrols with, valid for `ttl_ms`.
    fn bootstrap_token(&self, node: &str, ttl_ms: u64) -> impl Future<Output = Result<Secret, SecretsError>>;
    /// What the controller may do on node secrets (Vault's `sys/capabilities-self`): a zero-cost probe made
    /// before a decommission mutates anything.
    fn node_secrets_capabilities(&self) -> impl Future<Output = Result<Vec<String>, SecretsError>>;
    /// Deletes the node's power-credential override and revokes its unredeemed bootstrap tokens (idempotent);
    /// answers how many secrets went.
    fn delete_node_secrets(&self, node: &str) -> impl Future<Output = Result<u32, SecretsError>>;
    /// Revokes the node's unredeemed bootstrap tokens and nothing else (idempotent); answers how many went.
    /// `render_cloud_init`'s "delete partial node row": a token minted for a render that never finished.
    fn revoke_bootstrap_tokens(&self, node: &str) -> impl Future<Output = Result<u32, SecretsError>>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_site_sets_each_timeout_by_its_key_over_the_matrixs_defaults() {
        let defaults = StageTimeouts::default();
        for kind in TimeoutKind::ALL {
            assert_eq!(defaults.of(kind), crate::matrix::timeout(kind).default_ms, "{}", kind.as_str());
        }
        assert_eq!(defaults.hardware_sync_health_ms, 15 * 60_000, "the matrix page says 15 minutes");
        let set = StageTimeouts::from_settings(|key| (key == "hardware_sync_seed_timeout_ms").then_some(" 90000 "));
        assert_eq!(set, Ok(StageTimeouts { hardware_sync_seed_ms: 90_000, ..defaults }));
        assert_eq!(StageTimeouts::key(TimeoutKind::AgentEnrollment), "agent_enrollment_timeout_ms");
    }

    #[test]
    fn a_timeout_that_is_zero_negative_unbounded_or_not_a_number_is_refused_with_its_key() {
        for bad in ["0", "-5", "abc", "1.5", "86400001", "99999999999999999999"] {
            let error = StageTimeouts::from_settings(|key| (key == "discovery_timeout_ms").then_some(bad)).unwrap_err();
            assert!(error.contains("discovery_timeout_ms") && error.contains(bad), "{error}");
        }
    }
}
