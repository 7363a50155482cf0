//! The fake MAAS region (with the rack's boot and metadata services behind it): machines with their real statuses
//! and transition rules, the REST operations the lifecycle engine calls, interfaces, block devices, subnets and
//! VLANs, the event log and its query, the status monitor, hardware-sync fields, and the metadata handlers the
//! booting machines hit.
//!
//! Every status write goes through one function that records it; the transition table in [`super::status`] is the
//! oracle a property test checks that record against. API errors carry the exact text of real MAAS
//! (`/work/shared/reference/maas-api-notes.md` §1.3, §4.2); where the text is not known the deviation is written
//! where the message is.
//!
//! Time is `now_ms` on the region's clock; the model never reads a clock. Faults are knobs:
//! [`Region::fail_next_with_503`], [`Region::fail_next_with_409`], [`Region::set_reachable`],
//! [`Region::set_status_monitor_alive`] (LP #2084788), [`Region::hide_machine`] / [`Region::reveal_machine`] (a
//! machine that disappears and reappears), and operator actions, which are ordinary requests by another user.
//!
//! Deviation from real MAAS (whole model): no OAuth and no `X-MAAS-API-Hash` (the HTTP front end's job), no locked
//! machines, no pools/zones/tags/domains, one rack, and permissions reduced to the one rule the engine trips over
//! (mark_broken by a non-owner is 403).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};

use super::bmc::{BasicAuth, Bmc, BootTarget, OverrideEnabled, PowerState, RedfishBody, RedfishRequest, ResetType};
use super::machine::{
    CurtinStage, HardwareReport, MetadataKind, MetadataReply, NicKind, Purpose, PxeAnswer, ScriptSpec,
};
use super::status::{NodeStatus, RELEASABLE, invalid_transition_message};
use super::vault::{PowerCredential, Secret, splitmix64};

/// `node_timeout` default, minutes (`NODE_TIMEOUT = 30`, `src/maascommon/constants.py`).
pub const NODE_TIMEOUT_MIN: u64 = 30;
/// How often the status monitor runs (`StatusMonitorService`).
pub const STATUS_MONITOR_INTERVAL_MS: u64 = 60_000;
/// Default `hardware_sync_interval` config: 15 minutes.
pub const HARDWARE_SYNC_INTERVAL_S: u64 = 900;
/// `Retry-After` on a serialisation-conflict 409 and on a middleware 503 (notes §4.1).
pub const CONFLICT_RETRY_AFTER_S: u32 = 5;
pub const UNAVAILABLE_RETRY_AFTER_S: u32 = 10;
/// The events query's hard limit.
pub const EVENTS_LIMIT_MAX: u32 = 1000;
/// How long a disk wipe of a release with `erase` takes (our figure: a quick erase of a BOSS mirror and the NVMe
/// data disks; MAAS has no fixed value).
pub const ERASE_MS: u64 = 8 * 60_000;

/// The commissioning scripts a node runs, named after MAAS's builtin scripts (the ones the 2026-07-20 record
/// suspects of hanging on virtual hardware are among them), one after the other: 131 s in all, which with the boot
/// ([`super::machine::BootTimings`]) puts a commissioning at seed 001's "canary Ready in ~3 min".
///
/// The durations are our figures (no source times MAAS's scripts one by one; in MAAS 2.0's walk through a qemu-kvm
/// commissioning, `docs/development/notes/anatomy-of-recommissioning-in-maas-2.0.rst`, its nine scripts and the rest
/// of cloud-init ran in the 90 s after the metadata request), except `maas-capture-lldpd`'s: its script waits until lldpd "has been running for 60 seconds"
/// (`lldpd_capture("/var/run/lldpd.socket", 60)` in `capture_lldpd.py`, counted from the lldpd socket's mtime, that
/// is from `20-maas-01-install-lldpd`), and the three scripts between take 70 s, so it only runs `lldpctl`: 1 s.
/// Deviation from real MAAS: scripts run one at a time (`parallel: any` scripts such as `maas-capture-lldpd` may
/// run beside others in MAAS).
pub fn default_commissioning_scripts() -> Vec<ScriptSpec> {
    [
        ("maas-support-info", 15_000),
        ("maas-lshw", 20_000),
        ("20-maas-01-install-lldpd", 20_000),
        ("30-maas-01-bmc-config", 30_000),
        ("40-maas-01-network-interfaces", 10_000),
        ("50-maas-01-commissioning", 30_000),
        ("maas-capture-lldpd", 1_000),
        ("maas-kernel-cmdline", 5_000),
    ]
    .into_iter()
    .map(|(name, duration_ms)| ScriptSpec { name: name.to_owned(), duration_ms })
    .collect()
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegionConfig {
    pub node_timeout_min: u64,
    pub hardware_sync_interval_s: u64,
    /// MAAS 3.6+ Temporal deploy: DEPLOYING times out after 2 × node_timeout with "time-out during deployment"
    /// instead of the status monitor's message after node_timeout.
    pub temporal_deploy: bool,
    pub default_distro_series: String,
    pub commissioning_scripts: Vec<ScriptSpec>,
}

impl Default for RegionConfig {
    fn default() -> Self {
        RegionConfig {
            node_timeout_min: NODE_TIMEOUT_MIN,
            hardware_sync_interval_s: HARDWARE_SYNC_INTERVAL_S,
            temporal_deploy: false,
            default_distro_series: "jammy".to_owned(),
            commissioning_scripts: default_commissioning_scripts(),
        }
    }
}

/// Event levels (`level` in the events API) with their numeric values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum EventLevel {
    Audit = 0,
    Debug = 10,
    Info = 20,
    Warning = 30,
    Error = 40,
    Critical = 50,
}

impl EventLevel {
    pub fn name(self) -> &'static str {
        match self {
            EventLevel::Audit => "AUDIT",
            EventLevel::Debug => "DEBUG",
            EventLevel::Info => "INFO",
            EventLevel::Warning => "WARNING",
            EventLevel::Error => "ERROR",
            EventLevel::Critical => "CRITICAL",
        }
    }

    /// Parses the `level` query parameter; `Err` carries the 400 text.
    pub fn parse(text: &str) -> Result<EventLevel, String> {
        match text.to_ascii_uppercase().as_str() {
            "AUDIT" => Ok(EventLevel::Audit),
            "DEBUG" => Ok(EventLevel::Debug),
            "INFO" => Ok(EventLevel::Info),
            "WARNING" => Ok(EventLevel::Warning),
            "ERROR" => Ok(EventLevel::Error),
            "CRITICAL" => Ok(EventLevel::Critical),
            _ => Err(format!("Unrecognised log level: {text}")),
        }
    }
}

/// One event of the log, as the events API returns it (`created` is kept as virtual ms).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventRecord {
    pub id: u64,
    /// The machine's system_id.
    pub node: String,
    pub hostname: String,
    pub username: String,
    pub level: EventLevel,
    pub created_ms: u64,
    /// The event type's description, e.g. "Loading ephemeral".
    #[serde(rename = "type")]
    pub event_type: String,
    pub description: String,
}

/// `GET /events/?op=query`.
///
/// Deviation from real MAAS: `created` is kept as virtual ms (the API's `"%a, %d %b. %Y %H:%M:%S"` is the front
/// end's job) and the `mac_address`, `zone`, `agent_name` and `owner` filters are not modelled.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct EventsQuery {
    pub system_id: Option<String>,
    pub hostname: Option<String>,
    /// Minimum level (default INFO); AUDIT selects AUDIT events only.
    pub level: Option<EventLevel>,
    pub limit: Option<i64>,
    pub before: Option<u64>,
    pub after: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventsPage {
    pub count: u64,
    /// Newest first.
    pub events: Vec<EventRecord>,
    /// `next_uri` carries `after=<newest id in the page>` (the `after` asked for when the page is empty).
    pub next_after: Option<u64>,
    /// `prev_uri` carries `before=<oldest id>`; `None` when nothing is older.
    pub prev_before: Option<u64>,
}

/// One status write, for the transition oracle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransitionRecord {
    pub at_ms: u64,
    pub system_id: String,
    /// `None` when the row was created.
    pub from: Option<NodeStatus>,
    pub to: NodeStatus,
}

/// Interface link modes (`src/maascommon/enums/interface.py`); the API accepts any case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkMode {
    Auto,
    Dhcp,
    Static,
    LinkUp,
}

impl LinkMode {
    /// Case-insensitive, as `CaseInsensitiveChoiceField`.
    pub fn parse(text: &str) -> Option<LinkMode> {
        match text.to_ascii_lowercase().as_str() {
            "auto" => Some(LinkMode::Auto),
            "dhcp" => Some(LinkMode::Dhcp),
            "static" => Some(LinkMode::Static),
            "link_up" => Some(LinkMode::LinkUp),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vlan {
    pub id: u64,
    pub vid: u16,
    pub name: String,
    pub fabric_id: u64,
    pub mtu: u16,
    pub dhcp_on: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subnet {
    pub id: u64,
    pub name: String,
    pub cidr: String,
    pub vlan_id: u64,
    pub gateway_ip: String,
    pub dns_servers: Vec<String>,
}

/// A subnet with its VLAN embedded, as the API returns it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubnetView {
    pub id: u64,
    pub name: String,
    pub cidr: String,
    pub vlan: Vlan,
    pub gateway_ip: String,
    pub dns_servers: Vec<String>,
}

/// A region controller as `GET /regioncontrollers/` shows it (the fields the fake models).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegionControllerView {
    pub system_id: String,
    pub hostname: String,
    pub service_set: Vec<ServiceView>,
}

/// One entry of a controller's `service_set`: MAAS's `Service` (`name`, `status`: `running`, `degraded`, `dead`,
/// `off` or `unknown`, and `status_info`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceView {
    pub name: String,
    pub status: String,
    pub status_info: String,
}

/// The region's services the fake reports: MAAS 3.5+'s region daemons and its Temporal workflow engine.
pub const REGION_SERVICES: [&str; 4] = ["regiond", "bind9", "temporal", "temporal-worker"];

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Link {
    pub id: u64,
    pub mode: LinkMode,
    pub subnet_id: u64,
    /// Assigned for AUTO at deploy time, for STATIC at link time.
    pub ip_address: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interface {
    pub id: u64,
    pub name: String,
    pub mac_address: String,
    pub vlan_id: Option<u64>,
    pub links: Vec<Link>,
    pub tags: Vec<String>,
    pub enabled: bool,
}

/// An interface as the API returns it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterfaceView {
    pub system_id: String,
    pub id: u64,
    pub name: String,
    /// Always "physical" in the fake.
    #[serde(rename = "type")]
    pub interface_type: String,
    pub mac_address: String,
    pub vlan: Option<Vlan>,
    pub links: Vec<Link>,
    pub tags: Vec<String>,
    pub enabled: bool,
    /// The VLAN's MTU, else 1500.
    pub effective_mtu: u16,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockDevice {
    pub id: u64,
    pub name: String,
    pub model: String,
    pub serial: String,
    pub size: u64,
    /// Always "physical" in the fake.
    #[serde(rename = "type")]
    pub device_type: String,
    pub path: String,
    pub tags: Vec<String>,
}

/// Power parameters of a machine (`power_parameters_*`); `Debug` redacts the password through [`Secret`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PowerParameters {
    /// The BMC system id the Redfish driver addresses (`power_address` + `node_id` in real MAAS).
    pub power_address: String,
    pub power_user: String,
    pub power_pass: Secret,
}

/// The machine object, with the fields of `DISPLAYED_MACHINE_FIELDS` the engine reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MachineView {
    pub system_id: String,
    pub hostname: String,
    pub architecture: String,
    pub status: u8,
    pub status_name: String,
    pub status_message: String,
    pub owner: Option<String>,
    pub power_type: String,
    /// "on" | "off" | "unknown" | "error"
    pub power_state: String,
    pub osystem: String,
    pub distro_series: String,
    pub netboot: bool,
    pub locked: bool,
    pub error_description: String,
    pub cpu_count: u32,
    pub memory: u64,
    pub ip_addresses: Vec<String>,
    pub boot_interface: Option<InterfaceView>,
    pub interface_set: Vec<InterfaceView>,
    pub boot_disk: Option<BlockDevice>,
    pub blockdevice_set: Vec<BlockDevice>,
    /// Script status: PENDING=0, RUNNING=1, PASSED=2, FAILED=3; -1 when there is no result.
    pub commissioning_status: i8,
    pub commissioning_status_name: String,
    pub enable_hw_sync: bool,
    pub sync_interval: Option<u64>,
    pub last_sync_ms: Option<u64>,
    pub next_sync_ms: Option<u64>,
}

impl MachineView {
    /// `is_sync_healthy` of the websocket handler (not a REST field): enabled, synced, and not overdue by more than
    /// half an interval.
    pub fn is_sync_healthy(&self, now_ms: u64) -> bool {
        match (self.enable_hw_sync, self.last_sync_ms, self.sync_interval) {
            (true, Some(last_ms), Some(interval_s)) if interval_s > 0 => now_ms <= last_ms + interval_s * 1500,
            _ => false,
        }
    }
}

/// `POST /machines/` (`MachinesHandler.create`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateMachine {
    pub hostname: Option<String>,
    /// `amd64` becomes `amd64/generic`.
    pub architecture: String,
    pub mac_addresses: Vec<String>,
    /// `redfish`, `ipmi`, `manual`, ...; the fake drives every non-manual type through its Redfish BMC.
    pub power_type: String,
    pub power_parameters: PowerParameters,
    /// Default true: an admin-created machine starts commissioning at once.
    pub commission: bool,
}

/// A request to the region's REST API. Secrets inside (power password, user-data) are [`Secret`]s.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MaasRequest {
    ListMachines {
        hostname: Option<String>,
        mac_address: Option<String>,
        status: Option<NodeStatus>,
    },
    ReadMachine {
        system_id: String,
    },
    CreateMachine(CreateMachine),
    UpdatePowerParameters {
        system_id: String,
        power_type: String,
        power_parameters: PowerParameters,
    },
    DeleteMachine {
        system_id: String,
    },
    Commission {
        system_id: String,
    },
    Deploy {
        system_id: String,
        distro_series: Option<String>,
        user_data: Option<Secret>,
        enable_hw_sync: bool,
    },
    Release {
        system_id: String,
        comment: Option<String>,
        /// `erase=true`: wipe the disks first (DISK_ERASING, then RELEASING).
        erase: bool,
    },
    Abort {
        system_id: String,
        comment: Option<String>,
    },
    MarkBroken {
        system_id: String,
        comment: Option<String>,
    },
    MarkFixed {
        system_id: String,
        comment: Option<String>,
    },
    PowerOn {
        system_id: String,
    },
    PowerOff {
        system_id: String,
    },
    QueryPowerState {
        system_id: String,
    },
    /// `GET /machines/{id}/?op=power_parameters`: the machine's power parameters, secrets included (as MAAS answers
    /// an admin).
    PowerParameters {
        system_id: String,
    },
    ListInterfaces {
        system_id: String,
    },
    /// `mode` is the raw parameter (any case).
    LinkSubnet {
        system_id: String,
        interface_id: u64,
        mode: String,
        subnet_id: u64,
        ip_address: Option<String>,
    },
    /// `POST /nodes/{id}/interfaces/{iid}/?op=disconnect`: delete the interface's links and take it off its VLAN.
    DisconnectInterface {
        system_id: String,
        interface_id: u64,
    },
    ListBlockDevices {
        system_id: String,
    },
    SetBootDisk {
        system_id: String,
        block_device_id: u64,
    },
    ListSubnets,
    /// `GET /regioncontrollers/`: the region controllers with their `service_set`.
    ListRegionControllers,
    ReadSubnet {
        id: u64,
    },
    ReadVlan {
        id: u64,
    },
    UpdateVlan {
        id: u64,
        mtu: u16,
    },
    QueryEvents(EventsQuery),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MaasBody {
    Machine(Box<MachineView>),
    Machines(Vec<MachineView>),
    /// `{"state": "on"|"off"|"unknown"|"error"}`
    PowerState {
        state: String,
    },
    Interfaces(Vec<InterfaceView>),
    Interface(Box<InterfaceView>),
    BlockDevices(Vec<BlockDevice>),
    Subnets(Vec<SubnetView>),
    Subnet(SubnetView),
    /// The region controllers: one, with its services.
    RegionControllers(Vec<RegionControllerView>),
    Vlan(Vlan),
    Events(EventsPage),
    /// `op=power_parameters`; `None` for a machine without a power type or with `manual` (MAAS answers `{}`).
    PowerParameters(Option<PowerParameters>),
    /// `text/plain`: every error message, and piston's `OK`.
    Text(String),
    /// `application/json` form errors, e.g. `{"mtu": ["..."]}`.
    FormErrors(BTreeMap<String, Vec<String>>),
    /// 204 No Content.
    Empty,
}

/// One HTTP answer of the region.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MaasResponse {
    pub status: u16,
    pub body: MaasBody,
    /// The `Retry-After` header, seconds.
    pub retry_after_s: Option<u32>,
}

impl MaasResponse {
    fn ok(body: MaasBody) -> MaasResponse {
        MaasResponse { status: 200, body, retry_after_s: None }
    }

    fn text(status: u16, message: impl Into<String>) -> MaasResponse {
        MaasResponse { status, body: MaasBody::Text(message.into()), retry_after_s: None }
    }

    fn form_error(field: &str, message: impl Into<String>) -> MaasResponse {
        let mut errors = BTreeMap::new();
        errors.insert(field.to_owned(), vec![message.into()]);
        MaasResponse { status: 400, body: MaasBody::FormErrors(errors), retry_after_s: None }
    }

    fn not_found(kind: &str) -> MaasResponse {
        MaasResponse::text(404, format!("No {kind} matches the given query."))
    }

    pub fn machine(&self) -> Option<&MachineView> {
        match &self.body {
            MaasBody::Machine(view) => Some(view),
            _ => None,
        }
    }

    /// The body text of a `text/plain` answer.
    pub fn text_body(&self) -> Option<&str> {
        match &self.body {
            MaasBody::Text(text) => Some(text),
            _ => None,
        }
    }
}

/// `NodeStateViolation`: its text, answered as 409.
#[derive(Debug, Clone, PartialEq, Eq)]
struct NodeStateViolation(String);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PowerFailure {
    Unreachable,
    Unauthorized,
    /// The BMC accepted the command but the state never became the one asked for.
    NotConverged,
    NoPowerType,
}

impl PowerFailure {
    fn describe(self) -> &'static str {
        match self {
            PowerFailure::Unreachable => "BMC did not answer",
            PowerFailure::Unauthorized => "BMC refused the credentials (401)",
            PowerFailure::NotConverged => "power state did not change",
            PowerFailure::NoPowerType => "no power type is set",
        }
    }
}

#[derive(Debug, Clone)]
struct MachineRecord {
    system_id: String,
    hostname: String,
    architecture: String,
    status: NodeStatus,
    previous_status: NodeStatus,
    owner: Option<String>,
    power_type: String,
    power: PowerParameters,
    power_state: &'static str,
    status_expires_ms: Option<u64>,
    error_description: String,
    netboot: bool,
    osystem: String,
    distro_series: String,
    user_data: Option<Secret>,
    enable_hw_sync: bool,
    sync_interval_s: Option<u64>,
    last_sync_ms: Option<u64>,
    commissioning_status: i8,
    cpu_count: u32,
    memory_mib: u64,
    interfaces: Vec<Interface>,
    block_devices: Vec<BlockDevice>,
    boot_disk_id: Option<u64>,
    boot_interface_id: Option<u64>,
    /// While DISK_ERASING: when the wipe ends.
    erase_done_ms: Option<u64>,
}

/// The region of one site.
#[derive(Debug, Clone)]
pub struct Region {
    config: RegionConfig,
    seed: u64,
    ids_drawn: u64,
    machines: BTreeMap<String, MachineRecord>,
    hidden: BTreeSet<String>,
    vlans: BTreeMap<u64, Vlan>,
    subnets: BTreeMap<u64, Subnet>,
    events: Vec<EventRecord>,
    /// Per machine: the indices in `events` of its events, oldest first (an index: the log is never rewritten).
    events_by_node: BTreeMap<String, Vec<usize>>,
    /// Per machine: the index in `events` of its newest event at INFO or above (its status message).
    latest_info: BTreeMap<String, usize>,
    transitions: Vec<TransitionRecord>,
    next_object_id: u64,
    next_static_host: BTreeMap<u64, u32>,
    fail_next: VecDeque<(u16, u32)>,
    /// Every API key was revoked: each request answers 401.
    keys_revoked: bool,
    /// The region's Temporal workers are wedged: workflows (a commission's or a deploy's power action) are accepted
    /// and never dispatched.
    workflows_wedged: bool,
    /// Deploys still to fail rendering their preseed.
    preseed_failures: u32,
    /// Fault: the next wipes fail ("Failed to erase disks.").
    erase_failures: u32,
    /// Fault: how long a wipe of the machine of this hostname takes, where it is not [`ERASE_MS`].
    erase_ms_by_hostname: BTreeMap<String, u64>,
    reachable: bool,
    monitor_alive: bool,
    monitor_last_tick_ms: u64,
}

impl Region {
    /// A region with no machines and no networks; `seed` feeds system ids and hostnames.
    pub fn new(seed: u64, config: RegionConfig) -> Region {
        Region {
            config,
            seed,
            ids_drawn: 0,
            machines: BTreeMap::new(),
            hidden: BTreeSet::new(),
            vlans: BTreeMap::new(),
            subnets: BTreeMap::new(),
            events: Vec::new(),
            events_by_node: BTreeMap::new(),
            latest_info: BTreeMap::new(),
            transitions: Vec::new(),
            next_object_id: 1,
            next_static_host: BTreeMap::new(),
            fail_next: VecDeque::new(),
            keys_revoked: false,
            workflows_wedged: false,
            preseed_failures: 0,
            erase_failures: 0,
            erase_ms_by_hostname: BTreeMap::new(),
            reachable: true,
            monitor_alive: true,
            monitor_last_tick_ms: 0,
        }
    }

    pub fn config(&self) -> &RegionConfig {
        &self.config
    }

    pub fn add_vlan(&mut self, vlan: Vlan) {
        self.vlans.insert(vlan.id, vlan);
    }

    pub fn add_subnet(&mut self, subnet: Subnet) {
        self.next_static_host.entry(subnet.id).or_insert(10);
        self.subnets.insert(subnet.id, subnet);
    }

    pub fn vlan(&self, id: u64) -> Option<&Vlan> {
        self.vlans.get(&id)
    }

    pub fn vlans(&self) -> impl Iterator<Item = &Vlan> {
        self.vlans.values()
    }

    pub fn subnets(&self) -> impl Iterator<Item = &Subnet> {
        self.subnets.values()
    }

    /// Every event logged so far, oldest first.
    pub fn events(&self) -> &[EventRecord] {
        &self.events
    }

    /// Every status write so far, oldest first.
    pub fn transitions(&self) -> &[TransitionRecord] {
        &self.transitions
    }

    pub fn system_ids(&self) -> Vec<String> {
        self.machines.keys().cloned().collect()
    }

    pub fn status_of(&self, system_id: &str) -> Option<NodeStatus> {
        self.machines.get(system_id).map(|record| record.status)
    }

    /// The machine as the API would show it, hidden or not.
    pub fn view(&self, system_id: &str) -> Option<MachineView> {
        self.machines.get(system_id).map(|record| self.render(record))
    }

    /// The machine whose interfaces carry `mac`.
    pub fn system_id_by_mac(&self, mac: &str) -> Option<String> {
        let mac = mac.to_ascii_lowercase();
        self.machines
            .values()
            .find(|record| record.interfaces.iter().any(|iface| iface.mac_address == mac))
            .map(|record| record.system_id.clone())
    }

    // ---- fault knobs -------------------------------------------------------------------------------------------

    /// Fault: the next API request answers 503 with `Retry-After: retry_after_s` and has no effect. Calls queue.
    /// Fault: the region's Temporal workflow engine is wedged (seed 001's "Temporal was region-wide WEDGED", the
    /// `Not enough hosts to serve the request` of its log): `temporal-worker` reports `dead` with that text, and a
    /// commission is accepted, moves the status, and its power action never runs, so the machine stays silent until
    /// MAAS's own timeout. `false` repairs it (`snap restart maas`).
    pub fn set_workflows_wedged(&mut self, wedged: bool) {
        self.workflows_wedged = wedged;
    }

    /// The region controller and its services (`GET /regioncontrollers/`).
    pub fn region_controllers(&self) -> Vec<RegionControllerView> {
        let service_set = REGION_SERVICES
            .iter()
            .map(|name| {
                let wedged = self.workflows_wedged && *name == "temporal-worker";
                ServiceView {
                    name: (*name).to_owned(),
                    status: if wedged { "dead" } else { "running" }.to_owned(),
                    status_info: if wedged { "Not enough hosts to serve the request" } else { "" }.to_owned(),
                }
            })
            .collect();
        vec![RegionControllerView { system_id: "r3gi0n".into(), hostname: "maas-region".into(), service_set }]
    }

    /// Fault: every API key is revoked (a person regenerated them): each request answers 401 with piston's text for
    /// an unknown consumer, `Authorization Error: Invalid API key.` (`reference/maas-api-notes.md` §4).
    pub fn revoke_api_keys(&mut self) {
        self.keys_revoked = true;
    }

    pub fn fail_next_with_503(&mut self, retry_after_s: u32) {
        self.fail_next.push_back((503, retry_after_s));
    }

    /// Fault: the next `count` deploys fail to render their preseed (400, as `MachineHandler.deploy` answers a
    /// `PreseedError`); the machine stays allocated to the caller.
    pub fn fail_next_preseeds(&mut self, count: u32) {
        self.preseed_failures += count;
    }

    /// Fault: the next `count` disk wipes of a release with `erase` fail: MAAS marks the machine failed with
    /// "Failed to erase disks." (FAILED_DISK_ERASING).
    pub fn fail_next_erases(&mut self, count: u32) {
        self.erase_failures += count;
    }

    /// Fault: every wipe of the machine named `hostname` takes `erase_ms` (a full overwrite of large disks, which
    /// MAAS runs when neither secure nor quick erase applies). The wipe's progress keeps MAAS's status timeout from
    /// firing while it runs, so the machine stays DISK_ERASING until it ends.
    pub fn slow_erases_of(&mut self, hostname: &str, erase_ms: u64) {
        self.erase_ms_by_hostname.insert(hostname.to_owned(), erase_ms);
    }

    /// Fault: the next API request answers 409 (a serialisation conflict that outlived the server's retries) with
    /// `Retry-After: retry_after_s` and has no effect.
    pub fn fail_next_with_409(&mut self, retry_after_s: u32) {
        self.fail_next.push_back((409, retry_after_s));
    }

    /// Fault: the region answers nothing — API requests and the rack's boot and metadata calls get no answer.
    pub fn set_reachable(&mut self, reachable: bool) {
        self.reachable = reachable;
    }

    pub fn is_reachable(&self) -> bool {
        self.reachable
    }

    /// Fault: the status monitor stops for good (LP #2084788: one exception stopped the `TimerService`); nodes then
    /// stay in COMMISSIONING forever.
    pub fn set_status_monitor_alive(&mut self, alive: bool) {
        self.monitor_alive = alive;
    }

    /// Fault: the machine disappears from the API (404 on every read, absent from lists) while keeping its state.
    pub fn hide_machine(&mut self, system_id: &str) {
        self.hidden.insert(system_id.to_owned());
    }

    /// The machine reappears, with whatever state it has now.
    pub fn reveal_machine(&mut self, system_id: &str) {
        self.hidden.remove(system_id);
    }

    /// What the enlistment ephemeral's BMC detection (`30-maas-01-bmc-config`) records on a machine it enlisted:
    /// power type `redfish` at `power_address`. Only a row without power parameters is changed (a machine an operator
    /// created keeps its own).
    ///
    /// Deviation from real MAAS: real `bmc-config` also creates a `maas` user with a generated password on the BMC;
    /// the fake records the BMC's address only, with no login, so MAAS cannot drive that row's power.
    pub fn record_detected_bmc(&mut self, system_id: &str, power_address: &str) {
        let Some(record) = self.machines.get_mut(system_id) else { return };
        if record.power_type.is_empty() {
            record.power_type = "redfish".to_owned();
            record.power.power_address = power_address.to_owned();
        }
    }

    /// The BMC address of a machine's power parameters (`op=power_parameters`); `None` without a power type.
    ///
    /// Deviation from real MAAS: not a REST request of the fake; the simulator's adapter reads it beside the machine
    /// object, as a real adapter would make a second `op=power_parameters` call.
    pub fn power_address(&self, system_id: &str) -> Option<String> {
        let record = self.machines.get(system_id)?;
        (!record.power_type.is_empty() && record.power_type != "manual").then(|| record.power.power_address.clone())
    }

    /// An operator's repair of a machine whose MACs changed: the interface carrying `old_mac` now carries `new_mac`
    /// (what `PUT /machines/{id}/interfaces/{iface}/ mac_address=...` does). False when no interface has `old_mac`.
    ///
    /// Deviation from real MAAS: a knob, not a REST request of the fake.
    pub fn set_interface_mac(&mut self, system_id: &str, old_mac: &str, new_mac: &str) -> bool {
        let Some(record) = self.machines.get_mut(system_id) else { return false };
        let old_mac = old_mac.to_ascii_lowercase();
        match record.interfaces.iter_mut().find(|iface| iface.mac_address == old_mac) {
            Some(iface) => {
                iface.mac_address = new_mac.to_ascii_lowercase();
                true
            }
            None => false,
        }
    }

    // ---- the API ------------------------------------------------------------------------------------------------

    /// Handles one API request by `caller` at `now_ms`. `None` when the region does not answer. Power actions go to
    /// `bmc`; the caller applies the BMC's power transitions to the machines afterwards.
    pub fn handle(&mut self, now_ms: u64, caller: &str, request: MaasRequest, bmc: &mut Bmc) -> Option<MaasResponse> {
        if !self.reachable {
            return None;
        }
        if self.keys_revoked {
            return Some(MaasResponse::text(401, "Authorization Error: Invalid API key."));
        }
        if let Some((status, retry_after_s)) = self.fail_next.pop_front() {
            // Deviation from real MAAS: the body text of these two answers was not read; the fake sends a short
            // description.
            let message = if status == 503 { "Service Unavailable" } else { "Conflict: serialization failure" };
            return Some(MaasResponse {
                status,
                body: MaasBody::Text(message.into()),
                retry_after_s: Some(retry_after_s),
            });
        }
        Some(self.dispatch(now_ms, caller, request, bmc))
    }

    fn dispatch(&mut self, now_ms: u64, caller: &str, request: MaasRequest, bmc: &mut Bmc) -> MaasResponse {
        let system_id = match &request {
            MaasRequest::ReadMachine { system_id }
            | MaasRequest::UpdatePowerParameters { system_id, .. }
            | MaasRequest::DeleteMachine { system_id }
            | MaasRequest::Commission { system_id }
            | MaasRequest::Deploy { system_id, .. }
            | MaasRequest::Release { system_id, .. }
            | MaasRequest::Abort { system_id, .. }
            | MaasRequest::MarkBroken { system_id, .. }
            | MaasRequest::MarkFixed { system_id, .. }
            | MaasRequest::PowerOn { system_id }
            | MaasRequest::PowerOff { system_id }
            | MaasRequest::QueryPowerState { system_id }
            | MaasRequest::PowerParameters { system_id }
            | MaasRequest::ListInterfaces { system_id }
            | MaasRequest::LinkSubnet { system_id, .. }
            | MaasRequest::DisconnectInterface { system_id, .. }
            | MaasRequest::ListBlockDevices { system_id }
            | MaasRequest::SetBootDisk { system_id, .. } => Some(system_id.clone()),
            _ => None,
        };
        if let Some(system_id) = &system_id {
            if !self.machines.contains_key(system_id) || self.hidden.contains(system_id) {
                let kind = match &request {
                    MaasRequest::ListInterfaces { .. }
                    | MaasRequest::LinkSubnet { .. }
                    | MaasRequest::DisconnectInterface { .. }
                    | MaasRequest::ListBlockDevices { .. }
                    | MaasRequest::SetBootDisk { .. } => "Node",
                    _ => "Machine",
                };
                return MaasResponse::not_found(kind);
            }
        }
        let id = system_id.unwrap_or_default();
        match request {
            MaasRequest::ListMachines { hostname, mac_address, status } => {
                let mac_address = mac_address.map(|mac| mac.to_ascii_lowercase());
                let views = self
                    .machines
                    .values()
                    .filter(|record| !self.hidden.contains(&record.system_id))
                    .filter(|record| hostname.as_ref().is_none_or(|hostname| &record.hostname == hostname))
                    .filter(|record| {
                        mac_address.as_ref().is_none_or(|mac| record.interfaces.iter().any(|i| &i.mac_address == mac))
                    })
                    .filter(|record| status.is_none_or(|status| record.status == status))
                    .map(|record| self.render(record))
                    .collect();
                MaasResponse::ok(MaasBody::Machines(views))
            }
            MaasRequest::ReadMachine { .. } => self.machine_response(&id),
            MaasRequest::CreateMachine(create) => self.create_machine(now_ms, caller, create, bmc),
            MaasRequest::UpdatePowerParameters { power_type, power_parameters, .. } => {
                let record = self.record_mut(&id);
                record.power_type = power_type;
                record.power = power_parameters;
                self.machine_response(&id)
            }
            MaasRequest::DeleteMachine { .. } => {
                self.machines.remove(&id);
                self.hidden.remove(&id);
                MaasResponse { status: 204, body: MaasBody::Empty, retry_after_s: None }
            }
            MaasRequest::Commission { .. } => self.commission(now_ms, caller, &id, bmc),
            MaasRequest::Deploy { distro_series, user_data, enable_hw_sync, .. } => {
                self.deploy(now_ms, caller, &id, distro_series, user_data, enable_hw_sync, bmc)
            }
            MaasRequest::Release { comment, erase, .. } => self.release(now_ms, caller, &id, comment, erase, bmc),
            MaasRequest::Abort { comment, .. } => self.abort(now_ms, caller, &id, comment, bmc),
            MaasRequest::MarkBroken { comment, .. } => self.mark_broken(now_ms, caller, &id, comment, bmc),
            MaasRequest::MarkFixed { comment, .. } => self.mark_fixed(now_ms, caller, &id, comment),
            MaasRequest::PowerOn { .. } => {
                let record = &self.machines[&id];
                if record.owner.is_none() {
                    return MaasResponse::text(409, "Can't start node: it hasn't been allocated.");
                }
                self.log(now_ms, &id, caller, EventLevel::Debug, "User powering up node", &format!("({caller})"));
                match self.power_cycle_pxe(now_ms, &id, bmc) {
                    Ok(()) => self.machine_response(&id),
                    // Deviation from real MAAS: the exact 503 text of a PowerProblem was not read.
                    Err(failure) => MaasResponse {
                        status: 503,
                        body: MaasBody::Text(format!("Failed to power on node: {}", failure.describe())),
                        retry_after_s: None,
                    },
                }
            }
            MaasRequest::PowerOff { .. } => {
                self.log(now_ms, &id, caller, EventLevel::Debug, "User powering down node", &format!("({caller})"));
                match self.power_off(now_ms, &id, bmc) {
                    Ok(()) => self.machine_response(&id),
                    Err(failure) => MaasResponse {
                        status: 503,
                        body: MaasBody::Text(format!("Failed to power off node: {}", failure.describe())),
                        retry_after_s: None,
                    },
                }
            }
            MaasRequest::QueryPowerState { .. } => match self.query_power(&id, bmc) {
                Ok(state) => MaasResponse::ok(MaasBody::PowerState { state: state.to_owned() }),
                Err(failure) => {
                    self.record_mut(&id).power_state = "error";
                    self.log(now_ms, &id, "", EventLevel::Warning, "Failed to query node's BMC", failure.describe());
                    MaasResponse::text(503, format!("Failed to query node's BMC: {}", failure.describe()))
                }
            },
            MaasRequest::PowerParameters { .. } => {
                let record = &self.machines[&id];
                let powered = !record.power_type.is_empty() && record.power_type != "manual";
                let parameters = powered.then(|| record.power.clone());
                MaasResponse::ok(MaasBody::PowerParameters(parameters))
            }
            MaasRequest::ListInterfaces { .. } => {
                let record = &self.machines[&id];
                let views = record.interfaces.iter().map(|iface| self.render_interface(record, iface)).collect();
                MaasResponse::ok(MaasBody::Interfaces(views))
            }
            MaasRequest::LinkSubnet { interface_id, mode, subnet_id, ip_address, .. } => {
                self.link_subnet(&id, interface_id, &mode, subnet_id, ip_address)
            }
            MaasRequest::DisconnectInterface { interface_id, .. } => self.disconnect_interface(&id, interface_id),
            MaasRequest::ListBlockDevices { .. } => {
                MaasResponse::ok(MaasBody::BlockDevices(self.machines[&id].block_devices.clone()))
            }
            MaasRequest::SetBootDisk { block_device_id, .. } => {
                let record = self.record_mut(&id);
                if !record.block_devices.iter().any(|device| device.id == block_device_id) {
                    return MaasResponse::not_found("BlockDevice");
                }
                if record.status != NodeStatus::Ready {
                    return MaasResponse::text(409, "Cannot set as boot disk because the machine is not Ready.");
                }
                record.boot_disk_id = Some(block_device_id);
                MaasResponse::ok(MaasBody::Text("OK".into()))
            }
            MaasRequest::ListRegionControllers => {
                MaasResponse::ok(MaasBody::RegionControllers(self.region_controllers()))
            }
            MaasRequest::ListSubnets => MaasResponse::ok(MaasBody::Subnets(
                self.subnets.values().filter_map(|s| self.subnet_view(s.id)).collect(),
            )),
            MaasRequest::ReadSubnet { id } => match self.subnet_view(id) {
                Some(view) => MaasResponse::ok(MaasBody::Subnet(view)),
                None => MaasResponse::not_found("Subnet"),
            },
            MaasRequest::ReadVlan { id } => match self.vlans.get(&id) {
                Some(vlan) => MaasResponse::ok(MaasBody::Vlan(vlan.clone())),
                None => MaasResponse::not_found("VLAN"),
            },
            MaasRequest::UpdateVlan { id, mtu } => {
                // `clean_mtu`: 552–65535. Deviation from real MAAS: the Django validator's exact text is assumed.
                if mtu < 552 {
                    return MaasResponse::form_error("mtu", "Ensure this value is greater than or equal to 552.");
                }
                match self.vlans.get_mut(&id) {
                    Some(vlan) => {
                        vlan.mtu = mtu;
                        MaasResponse::ok(MaasBody::Vlan(vlan.clone()))
                    }
                    None => MaasResponse::not_found("VLAN"),
                }
            }
            MaasRequest::QueryEvents(query) => self.query_events(&query),
        }
    }

    fn record_mut(&mut self, system_id: &str) -> &mut MachineRecord {
        self.machines.get_mut(system_id).expect("the dispatcher checked the machine exists")
    }

    fn machine_response(&self, system_id: &str) -> MaasResponse {
        MaasResponse::ok(MaasBody::Machine(Box::new(self.render(&self.machines[system_id]))))
    }

    // ---- status and events --------------------------------------------------------------------------------------

    /// The one writer of a machine's status: records the write and logs "Node changed status". Callers have checked
    /// the operation's own rules; the transition oracle checks the record against `NODE_TRANSITIONS`.
    fn set_status(&mut self, now_ms: u64, system_id: &str, to: NodeStatus) {
        let record = self.record_mut(system_id);
        let from = record.status;
        if from == to {
            return;
        }
        record.previous_status = from;
        record.status = to;
        // A timed status starts its clock; any other status clears it.
        record.status_expires_ms = None;
        let owner = record.owner.clone();
        self.transitions.push(TransitionRecord {
            at_ms: now_ms,
            system_id: system_id.to_owned(),
            from: Some(from),
            to,
        });
        let mut description = format!("From '{}' to '{}'", from.label(), to.label());
        if to == NodeStatus::Allocated {
            if let Some(owner) = owner {
                description.push_str(&format!(" (to {owner})"));
            }
        }
        self.log(now_ms, system_id, "", EventLevel::Debug, "Node changed status", &description);
    }

    /// A status change that real MAAS validates on save: an illegal one is a 409 `NodeStateViolation`.
    fn try_set_status(&mut self, now_ms: u64, system_id: &str, to: NodeStatus) -> Result<(), NodeStateViolation> {
        let from = self.machines[system_id].status;
        if !from.can_transition_to(to) {
            return Err(NodeStateViolation(invalid_transition_message(from, to)));
        }
        self.set_status(now_ms, system_id, to);
        Ok(())
    }

    /// Sets `status_expires` for a timed status.
    ///
    /// Deviation from real MAAS: `status_expires` stays set until the status changes (real MAAS clears it when the
    /// node first signals and then watches the two-minute heartbeat of `maas-run-remote-scripts`, failing with
    /// "Node has not been heard from for the last 30 minutes"); the per-script timeout check is not modelled either.
    /// A hung script therefore ends in the node_timeout message, as a node that never phoned home does.
    fn start_timer(&mut self, now_ms: u64, system_id: &str) {
        let node_timeout_min = self.config.node_timeout_min;
        let temporal = self.config.temporal_deploy;
        let record = self.record_mut(system_id);
        let minutes = match record.status {
            // Deviation from real MAAS: whether the 3.6+ deploy workflow also leaves `status_expires` set was not
            // read; with `temporal_deploy` only the workflow's 2 × node_timeout applies.
            NodeStatus::Deploying if temporal => Some(2 * node_timeout_min),
            status => status.timeout_minutes(node_timeout_min),
        };
        record.status_expires_ms = minutes.map(|minutes| now_ms + minutes * 60_000);
    }

    fn log(
        &mut self,
        now_ms: u64,
        system_id: &str,
        username: &str,
        level: EventLevel,
        event_type: &str,
        description: &str,
    ) {
        let hostname = self.machines.get(system_id).map(|record| record.hostname.clone()).unwrap_or_default();
        let index = self.events.len();
        self.events_by_node.entry(system_id.to_owned()).or_default().push(index);
        if level >= EventLevel::Info {
            self.latest_info.insert(system_id.to_owned(), index);
        }
        self.events.push(EventRecord {
            id: self.events.len() as u64 + 1,
            node: system_id.to_owned(),
            hostname,
            username: username.to_owned(),
            level,
            created_ms: now_ms,
            event_type: event_type.to_owned(),
            description: description.to_owned(),
        });
    }

    /// System `mark_failed`: an in-progress status becomes its FAILED_* status with "Marking node failed".
    fn mark_failed(&mut self, now_ms: u64, system_id: &str, comment: &str) {
        let Some(record) = self.machines.get(system_id) else { return };
        let Some(failed) = record.status.failure_status() else { return };
        let from = record.status;
        self.log(now_ms, system_id, "", EventLevel::Error, "Marking node failed", comment);
        self.set_status(now_ms, system_id, failed);
        let record = self.record_mut(system_id);
        record.error_description = comment.to_owned();
        if from == NodeStatus::Commissioning {
            record.owner = None;
        }
    }

    fn query_events(&self, query: &EventsQuery) -> MaasResponse {
        if query.after.is_some() && query.before.is_some() {
            return MaasResponse::text(
                400,
                "There is undetermined behaviour when both `after` and `before` are specified.",
            );
        }
        let limit = query.limit.unwrap_or(100);
        if limit > i64::from(EVENTS_LIMIT_MAX) {
            return MaasResponse::text(
                400,
                format!("Requested number of events {limit} is greater than limit: {EVENTS_LIMIT_MAX}"),
            );
        }
        let limit = limit.max(1) as usize;
        let level = query.level.unwrap_or(EventLevel::Info);
        // A query for one machine reads only its events (the index), in the log's order.
        let candidates: Box<dyn Iterator<Item = &EventRecord>> = match &query.system_id {
            Some(id) => Box::new(self.events_by_node.get(id).into_iter().flatten().map(|&index| &self.events[index])),
            None => Box::new(self.events.iter()),
        };
        let matching: Vec<&EventRecord> =
            candidates
                .filter(|event| {
                    if level == EventLevel::Audit { event.level == EventLevel::Audit } else { event.level >= level }
                })
                .filter(|event| query.system_id.as_ref().is_none_or(|id| &event.node == id))
                .filter(|event| query.hostname.as_ref().is_none_or(|hostname| &event.hostname == hostname))
                .collect();
        let page: Vec<EventRecord> = if let Some(after) = query.after {
            // The oldest `limit` events after `after`, returned newest first.
            let mut page: Vec<EventRecord> =
                matching.iter().filter(|event| event.id > after).take(limit).map(|event| (*event).clone()).collect();
            page.reverse();
            page
        } else {
            let before = query.before.unwrap_or(u64::MAX);
            matching.iter().rev().filter(|event| event.id < before).take(limit).map(|event| (*event).clone()).collect()
        };
        let next_after = page.first().map(|event| event.id).or(query.after);
        let oldest = page.last().map(|event| event.id);
        let prev_before = oldest.filter(|oldest| matching.iter().any(|event| event.id < *oldest));
        MaasResponse::ok(MaasBody::Events(EventsPage {
            count: page.len() as u64,
            events: page,
            next_after,
            prev_before,
        }))
    }

    // ---- operations ---------------------------------------------------------------------------------------------

    fn create_machine(&mut self, now_ms: u64, caller: &str, create: CreateMachine, bmc: &mut Bmc) -> MaasResponse {
        let macs: Vec<String> = create.mac_addresses.iter().map(|mac| mac.to_ascii_lowercase()).collect();
        for mac in &macs {
            if let Some(owner) = self.system_id_by_mac(mac) {
                // Deviation from real MAAS: the form's exact duplicate-MAC text was not read.
                let hostname = self.machines[&owner].hostname.clone();
                return MaasResponse::form_error(
                    "mac_addresses",
                    format!("MAC address {mac} already in use on {hostname}."),
                );
            }
        }
        let architecture = if create.architecture.contains('/') {
            create.architecture.clone()
        } else {
            format!("{}/generic", create.architecture)
        };
        let system_id = self.new_system_id();
        let hostname = create.hostname.clone().unwrap_or_else(|| self.petname());
        let pxe_vlan = self.vlans.keys().next().copied();
        let interfaces: Vec<Interface> = macs
            .iter()
            .enumerate()
            .map(|(index, mac)| Interface {
                id: self.object_id(),
                name: format!("eth{index}"),
                mac_address: mac.clone(),
                vlan_id: pxe_vlan,
                links: Vec::new(),
                tags: Vec::new(),
                enabled: true,
            })
            .collect();
        let boot_interface_id = interfaces.first().map(|iface| iface.id);
        self.insert_record(
            now_ms,
            MachineRecord {
                system_id: system_id.clone(),
                hostname,
                architecture,
                status: NodeStatus::New,
                previous_status: NodeStatus::New,
                owner: None,
                power_type: create.power_type,
                power: create.power_parameters,
                power_state: "unknown",
                status_expires_ms: None,
                error_description: String::new(),
                netboot: true,
                osystem: String::new(),
                distro_series: String::new(),
                user_data: None,
                enable_hw_sync: false,
                sync_interval_s: None,
                last_sync_ms: None,
                commissioning_status: -1,
                cpu_count: 0,
                memory_mib: 0,
                interfaces,
                block_devices: Vec::new(),
                boot_disk_id: None,
                boot_interface_id,
                erase_done_ms: None,
            },
        );
        if create.commission {
            return self.commission(now_ms, caller, &system_id, bmc);
        }
        self.machine_response(&system_id)
    }

    fn insert_record(&mut self, now_ms: u64, record: MachineRecord) {
        let system_id = record.system_id.clone();
        let to = record.status;
        self.machines.insert(system_id.clone(), record);
        self.transitions.push(TransitionRecord { at_ms: now_ms, system_id, from: None, to });
    }

    fn commission(&mut self, now_ms: u64, caller: &str, system_id: &str, bmc: &mut Bmc) -> MaasResponse {
        let status = self.machines[system_id].status;
        let actionable =
            [NodeStatus::New, NodeStatus::FailedCommissioning, NodeStatus::Ready, NodeStatus::Broken].contains(&status);
        if !actionable {
            return MaasResponse::form_error(
                "__all__",
                "Commission is not available because of the current state of the node.",
            );
        }
        self.log(
            now_ms,
            system_id,
            caller,
            EventLevel::Debug,
            "User starting node commissioning",
            &format!("({caller})"),
        );
        self.log(now_ms, system_id, caller, EventLevel::Info, "Commissioning", "");
        {
            let record = self.record_mut(system_id);
            record.owner = Some(caller.to_owned());
            record.commissioning_status = 0;
        }
        if let Err(NodeStateViolation(message)) = self.try_set_status(now_ms, system_id, NodeStatus::Commissioning) {
            return MaasResponse::text(409, message);
        }
        self.start_timer(now_ms, system_id);
        // A wedged workflow engine accepts the commission and never dispatches its power action.
        if self.workflows_wedged {
            return self.machine_response(system_id);
        }
        // Deviation from real MAAS: the power action runs synchronously after the status change commits; a failure
        // is an ERROR event and the status monitor's timeout, the request itself still succeeds (as the async
        // power action of real MAAS does).
        if let Err(failure) = self.power_cycle_pxe(now_ms, system_id, bmc) {
            self.log(now_ms, system_id, "", EventLevel::Error, "Failed to power cycle node", failure.describe());
        }
        self.machine_response(system_id)
    }

    #[expect(clippy::too_many_arguments, reason = "one parameter per form field of `op=deploy`")]
    fn deploy(
        &mut self,
        now_ms: u64,
        caller: &str,
        system_id: &str,
        distro_series: Option<String>,
        user_data: Option<Secret>,
        enable_hw_sync: bool,
        bmc: &mut Bmc,
    ) -> MaasResponse {
        let record = &self.machines[system_id];
        if record.status == NodeStatus::Ready {
            if record.owner.as_deref().is_some_and(|owner| owner != caller) {
                return MaasResponse::text(409, "Can't allocate a machine belonging to another user.");
            }
            self.log(now_ms, system_id, caller, EventLevel::Debug, "User acquiring node", &format!("({caller})"));
            self.record_mut(system_id).owner = Some(caller.to_owned());
            self.set_status(now_ms, system_id, NodeStatus::Allocated);
        }
        let status = self.machines[system_id].status;
        if !status.allowed_next().contains(&NodeStatus::Deploying) {
            return MaasResponse::text(
                409,
                format!("Can't deploy a machine that is in the '{}' state", status.label()),
            );
        }
        if self.preseed_failures > 0 {
            self.preseed_failures -= 1;
            // Deviation from real MAAS: the text after the colon is ours (curtin's render error was not read).
            return MaasResponse::text(400, "Failed to render preseed: curtin userdata template could not be rendered");
        }
        self.log(now_ms, system_id, caller, EventLevel::Debug, "User starting deployment", &format!("({caller})"));
        self.log(now_ms, system_id, caller, EventLevel::Info, "Deploying", "");
        let distro_series = distro_series.unwrap_or_else(|| self.config.default_distro_series.clone());
        let sync_interval_s = self.config.hardware_sync_interval_s;
        // AUTO links get their address when the deployment starts.
        let mut assignments = Vec::new();
        for iface in &self.machines[system_id].interfaces {
            for link in &iface.links {
                if link.mode == LinkMode::Auto && link.ip_address.is_none() {
                    assignments.push((iface.id, link.id, link.subnet_id));
                }
            }
        }
        for (iface_id, link_id, subnet_id) in assignments {
            let address = self.static_address(subnet_id);
            let record = self.record_mut(system_id);
            if let Some(link) = record
                .interfaces
                .iter_mut()
                .filter(|iface| iface.id == iface_id)
                .flat_map(|iface| iface.links.iter_mut())
                .find(|link| link.id == link_id)
            {
                link.ip_address = address;
            }
        }
        {
            let record = self.record_mut(system_id);
            record.osystem = "ubuntu".to_owned();
            record.distro_series = distro_series;
            record.user_data = user_data;
            record.enable_hw_sync = enable_hw_sync;
            record.sync_interval_s = enable_hw_sync.then_some(sync_interval_s);
            record.netboot = true;
        }
        // Deviation from real MAAS: no IP exhaustion (the 503 of `StaticIPAddressExhaustion` never happens).
        self.set_status(now_ms, system_id, NodeStatus::Deploying);
        self.start_timer(now_ms, system_id);
        if let Err(failure) = self.power_cycle_pxe(now_ms, system_id, bmc) {
            self.log(now_ms, system_id, "", EventLevel::Error, "Failed to power on node", failure.describe());
        }
        self.machine_response(system_id)
    }

    fn release(
        &mut self,
        now_ms: u64,
        caller: &str,
        system_id: &str,
        comment: Option<String>,
        erase: bool,
        bmc: &mut Bmc,
    ) -> MaasResponse {
        let status = self.machines[system_id].status;
        if matches!(status, NodeStatus::Ready | NodeStatus::Releasing | NodeStatus::DiskErasing) {
            return self.machine_response(system_id);
        }
        if !RELEASABLE.contains(&status) {
            return MaasResponse::text(
                409,
                format!("Machine cannot be released in its current state ('{}').", status.label()),
            );
        }
        let description = match comment {
            Some(comment) => format!("({caller}) - {comment}"),
            None => format!("({caller})"),
        };
        if erase {
            self.log(now_ms, system_id, caller, EventLevel::Debug, "User erasing disk", &description);
            self.start_erase(now_ms, system_id, bmc);
        } else {
            self.log(now_ms, system_id, caller, EventLevel::Debug, "User releasing node", &description);
            self.start_release(now_ms, system_id, bmc);
        }
        self.machine_response(system_id)
    }

    /// `start_disk_erasing`: DISK_ERASING until the wipe finishes [`ERASE_MS`] later (the status monitor's tick
    /// completes it), then the release proper.
    ///
    /// Deviation from real MAAS: the machine does not PXE-boot an ephemeral environment to run `wipe-disks`; the
    /// wipe is a timer on the record, and a failure (the `fail_next_erases` fault) is MAAS's own verdict,
    /// "Failed to erase disks.", with FAILED_DISK_ERASING.
    fn start_erase(&mut self, now_ms: u64, system_id: &str, bmc: &mut Bmc) {
        self.log(now_ms, system_id, "", EventLevel::Info, "Disk erasing", "");
        self.set_status(now_ms, system_id, NodeStatus::DiskErasing);
        let _ = self.power_off(now_ms, system_id, bmc);
        let erase_ms = self.erase_ms_by_hostname.get(&self.machines[system_id].hostname).copied().unwrap_or(ERASE_MS);
        let record = self.record_mut(system_id);
        record.erase_done_ms = Some(now_ms + erase_ms);
        // Timed like a release, with the wipe's own length on top, so the monitor ticks until it ends.
        record.status_expires_ms = Some(now_ms + erase_ms + 30 * 60_000);
    }

    /// The wipe of an erasing machine ended at the monitor's tick: disks erased and the release goes on, or MAAS
    /// marks it failed.
    fn finish_erase(&mut self, now_ms: u64, system_id: &str, bmc: &mut Bmc) {
        self.record_mut(system_id).erase_done_ms = None;
        if self.erase_failures > 0 {
            self.erase_failures -= 1;
            self.mark_failed(now_ms, system_id, "Failed to erase disks.");
            return;
        }
        self.log(now_ms, system_id, "", EventLevel::Info, "Disks erased", "");
        self.start_release(now_ms, system_id, bmc);
    }

    /// `_release`: RELEASING, power off, READY once the power is seen off.
    ///
    /// Deviation from real MAAS: no release scripts (`scripts` is not modelled; a wipe, `erase`, runs first in
    /// `start_erase`); while the power is not seen off the status monitor re-queries it on each tick.
    fn start_release(&mut self, now_ms: u64, system_id: &str, bmc: &mut Bmc) {
        self.log(now_ms, system_id, "", EventLevel::Info, "Releasing", "");
        self.set_status(now_ms, system_id, NodeStatus::Releasing);
        self.start_timer(now_ms, system_id);
        match self.power_off(now_ms, system_id, bmc) {
            Ok(()) => self.finish_release(now_ms, system_id),
            // The command was accepted but the power is not off yet: the monitor looks again.
            Err(PowerFailure::NotConverged) => {}
            Err(_) => self.mark_failed(now_ms, system_id, "Failed to release machine."),
        }
    }

    fn finish_release(&mut self, now_ms: u64, system_id: &str) {
        self.log(now_ms, system_id, "", EventLevel::Info, "Released", "");
        self.set_status(now_ms, system_id, NodeStatus::Ready);
        let record = self.record_mut(system_id);
        record.owner = None;
        record.enable_hw_sync = false;
        record.sync_interval_s = None;
        record.last_sync_ms = None;
        record.osystem.clear();
        record.distro_series.clear();
        record.user_data = None;
        record.netboot = true;
    }

    fn abort(
        &mut self,
        now_ms: u64,
        caller: &str,
        system_id: &str,
        comment: Option<String>,
        bmc: &mut Bmc,
    ) -> MaasResponse {
        let record = &self.machines[system_id];
        let status = record.status;
        let description = match comment {
            Some(comment) => format!("({caller}) - {comment}"),
            None => format!("({caller})"),
        };
        let (user_event, event, to) = match status {
            NodeStatus::Commissioning => ("User aborting node commissioning", "Aborted commissioning", NodeStatus::New),
            NodeStatus::Deploying => ("User aborting deployment", "Aborted deployment", NodeStatus::Allocated),
            NodeStatus::Testing => ("User aborting node testing", "Aborted testing", record.previous_status),
            NodeStatus::DiskErasing => {
                ("User aborting disk erasing", "Aborted disk erasing", NodeStatus::FailedDiskErasing)
            }
            _ => {
                return MaasResponse::text(
                    409,
                    format!("Cannot abort in current state: node {system_id} is in state {}.", status.label()),
                );
            }
        };
        self.log(now_ms, system_id, caller, EventLevel::Debug, user_event, &description);
        // Deviation from real MAAS: the power-off is best effort and does not hold up the abort.
        let _ = self.power_off(now_ms, system_id, bmc);
        self.log(now_ms, system_id, "", EventLevel::Info, event, "");
        if let Err(NodeStateViolation(message)) = self.try_set_status(now_ms, system_id, to) {
            return MaasResponse::text(409, message);
        }
        if to == NodeStatus::New {
            self.record_mut(system_id).owner = None;
        }
        self.machine_response(system_id)
    }

    fn mark_broken(
        &mut self,
        now_ms: u64,
        caller: &str,
        system_id: &str,
        comment: Option<String>,
        bmc: &mut Bmc,
    ) -> MaasResponse {
        let record = &self.machines[system_id];
        if record.owner.as_deref() != Some(caller) {
            // Deviation from real MAAS: `MAASAPIForbidden()` carries no message; the fake's text is its own.
            return MaasResponse::text(403, "Forbidden");
        }
        let status = record.status;
        let comment = comment.unwrap_or_default();
        let description = if comment.is_empty() { format!("({caller})") } else { format!("({caller}) - {comment}") };
        self.log(now_ms, system_id, caller, EventLevel::Debug, "User marking node broken", &description);
        // Deviation from real MAAS: `_release` before BROKEN is reduced to the RELEASING write and a power-off.
        if RELEASABLE.contains(&status) && status != NodeStatus::Broken {
            self.log(now_ms, system_id, "", EventLevel::Info, "Releasing", "");
            self.set_status(now_ms, system_id, NodeStatus::Releasing);
        }
        let _ = self.power_off(now_ms, system_id, bmc);
        if let Err(NodeStateViolation(message)) = self.try_set_status(now_ms, system_id, NodeStatus::Broken) {
            return MaasResponse::text(409, message);
        }
        self.record_mut(system_id).error_description = comment;
        self.machine_response(system_id)
    }

    fn mark_fixed(&mut self, now_ms: u64, caller: &str, system_id: &str, comment: Option<String>) -> MaasResponse {
        let record = &self.machines[system_id];
        if record.status != NodeStatus::Broken {
            return MaasResponse::text(409, "Can't mark a non-broken node as 'Ready'.");
        }
        let to = if record.previous_status == NodeStatus::Deployed { NodeStatus::Deployed } else { NodeStatus::Ready };
        let description = match comment {
            Some(comment) => format!("({caller}) - {comment}"),
            None => format!("({caller})"),
        };
        self.log(now_ms, system_id, caller, EventLevel::Debug, "User marking node fixed", &description);
        self.set_status(now_ms, system_id, to);
        let record = self.record_mut(system_id);
        record.error_description.clear();
        if to == NodeStatus::Ready {
            record.owner = None;
            record.osystem.clear();
            record.distro_series.clear();
        }
        self.machine_response(system_id)
    }

    /// The status rule of interface edits (link, disconnect): allowed in New, Ready, Failed testing, Allocated and
    /// Broken, else 409. Deviation from real MAAS: the operation word in the message (`operation`) is assumed.
    fn interface_edit_refused(&self, system_id: &str, operation: &str) -> Option<MaasResponse> {
        let status = self.machines[system_id].status;
        let allowed =
            [NodeStatus::New, NodeStatus::Ready, NodeStatus::FailedTesting, NodeStatus::Allocated, NodeStatus::Broken];
        (!allowed.contains(&status)).then(|| {
            MaasResponse::text(
                409,
                format!("Cannot {operation} interface because the machine is not New, Ready, Allocated, or Broken."),
            )
        })
    }

    /// `op=disconnect` (`InterfaceHandler.disconnect`): the status rule of the other interface edits.
    fn disconnect_interface(&mut self, system_id: &str, interface_id: u64) -> MaasResponse {
        if let Some(refused) = self.interface_edit_refused(system_id, "disconnect") {
            return refused;
        }
        let record = self.record_mut(system_id);
        let Some(iface) = record.interfaces.iter_mut().find(|iface| iface.id == interface_id) else {
            return MaasResponse::not_found("Interface");
        };
        iface.vlan_id = None;
        iface.links.clear();
        let iface = iface.clone();
        let record = &self.machines[system_id];
        MaasResponse::ok(MaasBody::Interface(Box::new(self.render_interface(record, &iface))))
    }

    fn link_subnet(
        &mut self,
        system_id: &str,
        interface_id: u64,
        mode: &str,
        subnet_id: u64,
        ip_address: Option<String>,
    ) -> MaasResponse {
        if let Some(refused) = self.interface_edit_refused(system_id, "link subnet") {
            return refused;
        }
        let Some(mode) = LinkMode::parse(mode) else {
            return MaasResponse::form_error(
                "mode",
                format!("Select a valid choice. {mode} is not one of the available choices."),
            );
        };
        let Some(subnet_vlan) = self.subnets.get(&subnet_id).map(|subnet| subnet.vlan_id) else {
            return MaasResponse::form_error(
                "subnet",
                "Select a valid choice. That choice is not one of the available choices.",
            );
        };
        let link_id = self.object_id();
        let ip_address = match mode {
            LinkMode::Static => ip_address.or_else(|| self.static_address(subnet_id)),
            _ => None,
        };
        let record = self.record_mut(system_id);
        let Some(iface) = record.interfaces.iter_mut().find(|iface| iface.id == interface_id) else {
            return MaasResponse::not_found("Interface");
        };
        // Deviation from real MAAS: linking moves the interface to the subnet's VLAN without further checks.
        iface.vlan_id = Some(subnet_vlan);
        iface.links.retain(|link| link.subnet_id != subnet_id);
        iface.links.push(Link { id: link_id, mode, subnet_id, ip_address });
        let iface = iface.clone();
        let record = &self.machines[system_id];
        MaasResponse::ok(MaasBody::Interface(Box::new(self.render_interface(record, &iface))))
    }

    // ---- power (the rack's Redfish driver) -------------------------------------------------------------------

    fn auth(&self, system_id: &str) -> Result<(String, BasicAuth), PowerFailure> {
        let record = &self.machines[system_id];
        if record.power_type.is_empty() || record.power_type == "manual" {
            return Err(PowerFailure::NoPowerType);
        }
        let credential =
            PowerCredential { user: record.power.power_user.clone(), password: record.power.power_pass.clone() };
        Ok((record.power.power_address.clone(), BasicAuth::from(&credential)))
    }

    fn redfish(bmc: &mut Bmc, auth: &BasicAuth, request: RedfishRequest) -> Result<RedfishBody, PowerFailure> {
        match bmc.handle(auth, request) {
            None => Err(PowerFailure::Unreachable),
            Some(response) if response.status == 401 => Err(PowerFailure::Unauthorized),
            Some(response) if response.status >= 400 => Err(PowerFailure::Unreachable),
            Some(response) => Ok(response.body),
        }
    }

    fn redfish_power(bmc: &mut Bmc, auth: &BasicAuth, system: &str) -> Result<PowerState, PowerFailure> {
        match Self::redfish(bmc, auth, RedfishRequest::GetSystem { system: system.to_owned() })? {
            RedfishBody::System(view) => Ok(view.power_state),
            _ => Err(PowerFailure::Unreachable),
        }
    }

    fn query_power(&mut self, system_id: &str, bmc: &mut Bmc) -> Result<&'static str, PowerFailure> {
        let (system, auth) = self.auth(system_id)?;
        let state = match Self::redfish_power(bmc, &auth, &system)? {
            PowerState::On => "on",
            PowerState::Off => "off",
        };
        self.record_mut(system_id).power_state = state;
        Ok(state)
    }

    /// The Redfish driver's power-on: query, ForceOff if on, one-time PXE, On, then check it is on.
    fn power_cycle_pxe(&mut self, _now_ms: u64, system_id: &str, bmc: &mut Bmc) -> Result<(), PowerFailure> {
        let result = (|| {
            let (system, auth) = self.auth(system_id)?;
            if Self::redfish_power(bmc, &auth, &system)? == PowerState::On {
                Self::redfish(
                    bmc,
                    &auth,
                    RedfishRequest::Reset { system: system.clone(), reset: ResetType::ForceOff },
                )?;
            }
            let patch = RedfishRequest::PatchBoot {
                system: system.clone(),
                enabled: OverrideEnabled::Once,
                target: BootTarget::Pxe,
            };
            Self::redfish(bmc, &auth, patch)?;
            Self::redfish(bmc, &auth, RedfishRequest::Reset { system: system.clone(), reset: ResetType::On })?;
            // Deviation from real MAAS: the driver's polling (1, 2, 2, 4, 6, 8, 12 s) collapses into one read.
            match Self::redfish_power(bmc, &auth, &system)? {
                PowerState::On => Ok(()),
                PowerState::Off => Err(PowerFailure::NotConverged),
            }
        })();
        self.record_mut(system_id).power_state = if result.is_ok() { "on" } else { "error" };
        result
    }

    /// The Redfish driver's power-off: ForceOff when not off, then check.
    fn power_off(&mut self, _now_ms: u64, system_id: &str, bmc: &mut Bmc) -> Result<(), PowerFailure> {
        let result = (|| {
            let (system, auth) = self.auth(system_id)?;
            if Self::redfish_power(bmc, &auth, &system)? == PowerState::On {
                Self::redfish(
                    bmc,
                    &auth,
                    RedfishRequest::Reset { system: system.clone(), reset: ResetType::ForceOff },
                )?;
            }
            match Self::redfish_power(bmc, &auth, &system)? {
                PowerState::Off => Ok(()),
                PowerState::On => Err(PowerFailure::NotConverged),
            }
        })();
        self.record_mut(system_id).power_state = match result {
            Ok(()) => "off",
            Err(PowerFailure::NotConverged) => "on",
            Err(_) => "error",
        };
        result
    }

    // ---- the status monitor -------------------------------------------------------------------------------------

    /// When the status monitor next has something to do: the next 60 s tick, if any machine is timed.
    pub fn monitor_wakeup_ms(&self, now_ms: u64) -> Option<u64> {
        let timed = self.machines.values().any(|record| record.status_expires_ms.is_some());
        let base_ms = self.monitor_last_tick_ms.max(now_ms);
        (timed && self.monitor_alive).then(|| (base_ms / STATUS_MONITOR_INTERVAL_MS + 1) * STATUS_MONITOR_INTERVAL_MS)
    }

    /// One run of `StatusMonitorService` at `now_ms`: releasing machines whose power is off become Ready, and every
    /// machine whose `status_expires` passed is failed and powered off.
    pub fn monitor_tick(&mut self, now_ms: u64, bmc: &mut Bmc) {
        self.monitor_last_tick_ms = now_ms;
        if !self.monitor_alive || !self.reachable {
            return;
        }
        let releasing: Vec<String> = self
            .machines
            .values()
            .filter(|record| record.status == NodeStatus::Releasing)
            .map(|record| record.system_id.clone())
            .collect();
        for system_id in releasing {
            if self.query_power(&system_id, bmc) == Ok("off") {
                self.finish_release(now_ms, &system_id);
            }
        }
        let wiped: Vec<String> = self
            .machines
            .values()
            .filter(|record| record.status == NodeStatus::DiskErasing)
            .filter(|record| record.erase_done_ms.is_some_and(|done_ms| done_ms <= now_ms))
            .map(|record| record.system_id.clone())
            .collect();
        for system_id in wiped {
            self.finish_erase(now_ms, &system_id, bmc);
        }
        let expired: Vec<(String, NodeStatus)> = self
            .machines
            .values()
            .filter(|record| record.status_expires_ms.is_some_and(|expires_ms| expires_ms <= now_ms))
            .map(|record| (record.system_id.clone(), record.status))
            .collect();
        for (system_id, status) in expired {
            let comment = if status == NodeStatus::Deploying && self.config.temporal_deploy {
                "time-out during deployment".to_owned()
            } else {
                let minutes = status.timeout_minutes(self.config.node_timeout_min).unwrap_or_default();
                format!("Node operation '{}' timed out after {minutes} minutes.", status.label())
            };
            let _ = self.power_off(now_ms, &system_id, bmc);
            self.mark_failed(now_ms, &system_id, &comment);
        }
    }

    // ---- the rack: boot and metadata ---------------------------------------------------------------------------

    /// A PXE request from `mac` (the rack's `get_boot_config`). A known MAC gets the boot its status calls for; an
    /// unknown MAC boots the enlistment ephemeral. `None` when the region is unreachable.
    pub fn pxe_request(&mut self, now_ms: u64, mac: &str) -> Option<PxeAnswer> {
        if !self.reachable {
            return None;
        }
        let Some(system_id) = self.system_id_by_mac(mac) else {
            // No row matches: real MAAS logs nothing against a node (there is none) and serves enlistment.
            return Some(PxeAnswer::Ephemeral { system_id: None, purpose: Purpose::Enlistment });
        };
        let record = &self.machines[&system_id];
        let (purpose, answer) = match record.status {
            NodeStatus::Commissioning
            | NodeStatus::Testing
            | NodeStatus::DiskErasing
            | NodeStatus::EnteringRescueMode => (
                "commissioning",
                PxeAnswer::Ephemeral { system_id: Some(system_id.clone()), purpose: Purpose::Commissioning },
            ),
            NodeStatus::Deploying if record.netboot => (
                "installation",
                PxeAnswer::Ephemeral { system_id: Some(system_id.clone()), purpose: Purpose::Installation },
            ),
            _ => ("local boot", PxeAnswer::LocalBoot),
        };
        self.log(now_ms, &system_id, "", EventLevel::Debug, "PXE Request", purpose);
        self.log(now_ms, &system_id, "", EventLevel::Info, "Performing PXE boot", "");
        Some(answer)
    }

    /// The squashfs fetch of a booting ephemeral ("Loading ephemeral" for a known node).
    pub fn load_ephemeral(&mut self, now_ms: u64, system_id: Option<&str>) -> bool {
        if !self.reachable {
            return false;
        }
        if let Some(system_id) = system_id.filter(|id| self.machines.contains_key(*id)) {
            self.log(now_ms, system_id, "", EventLevel::Info, "Loading ephemeral", "");
        }
        true
    }

    /// A metadata request of a booting node. `None` when the region is unreachable.
    pub fn metadata(
        &mut self,
        now_ms: u64,
        system_id: Option<&str>,
        kind: MetadataKind,
        hardware: Option<&HardwareReport>,
    ) -> Option<MetadataReply> {
        if !self.reachable {
            return None;
        }
        if kind == MetadataKind::Enlist {
            let Some(hardware) = hardware else { return Some(MetadataReply::Refused { status: 400 }) };
            // The enlistment ephemeral's `maas-enlist` creates the machine (anonymous API); it stays NEW.
            if let Some(existing) = hardware.nics.iter().find_map(|nic| self.system_id_by_mac(&nic.mac)) {
                return Some(MetadataReply::Enlisted { system_id: existing });
            }
            let system_id = self.enlist(now_ms, hardware);
            return Some(MetadataReply::Enlisted { system_id });
        }
        // "Not authenticated as a known node.": the node's token belongs to no machine (deleted).
        let Some(system_id) = system_id.filter(|id| self.machines.contains_key(*id)) else {
            return Some(MetadataReply::Refused { status: 403 });
        };
        let record = &self.machines[system_id];
        match (kind, record.status) {
            (MetadataKind::CommissioningUserData, NodeStatus::Commissioning) => {
                self.log(now_ms, system_id, "", EventLevel::Info, "Gathering information", "");
                Some(MetadataReply::Scripts(self.config.commissioning_scripts.clone()))
            }
            (MetadataKind::InstallConfig, NodeStatus::Deploying) => {
                let serial = record
                    .boot_disk_id
                    .or_else(|| record.block_devices.first().map(|device| device.id))
                    .and_then(|id| record.block_devices.iter().find(|device| device.id == id))
                    .map(|device| device.serial.clone());
                Some(MetadataReply::Install { boot_disk_serial: serial })
            }
            (MetadataKind::DeployedUserData, NodeStatus::Deploying) => {
                let series = format!(
                    "deployed {}/{}/{}",
                    record.osystem,
                    record.distro_series,
                    record.architecture.split('/').next().unwrap_or("amd64")
                );
                let reply = MetadataReply::UserData {
                    user_data: record.user_data.clone(),
                    hw_sync_interval_s: record.enable_hw_sync.then_some(record.sync_interval_s).flatten(),
                };
                // `end_deployment`: the first user-data request of the deployed OS.
                self.log(now_ms, system_id, "", EventLevel::Info, "Deployed", "");
                self.log(now_ms, system_id, "", EventLevel::Info, "Image Deployed", &series);
                self.set_status(now_ms, system_id, NodeStatus::Deployed);
                Some(reply)
            }
            (MetadataKind::DeployedUserData, NodeStatus::Deployed) => Some(MetadataReply::UserData {
                user_data: record.user_data.clone(),
                hw_sync_interval_s: record.enable_hw_sync.then_some(record.sync_interval_s).flatten(),
            }),
            // Deviation from real MAAS: a node whose status no longer matches its boot is refused outright.
            _ => Some(MetadataReply::Refused { status: 409 }),
        }
    }

    /// Deviation from real MAAS: enlistment logs no events; the row stays NEW, as with real MAAS 2.5+. The row is
    /// created with no power type; the site then records the booting machine's BMC on it
    /// ([`Region::record_detected_bmc`], the `bmc-config` auto-detection of the enlistment ephemeral).
    fn enlist(&mut self, now_ms: u64, hardware: &HardwareReport) -> String {
        let system_id = self.new_system_id();
        let hostname = self.petname();
        let mut record = MachineRecord {
            system_id: system_id.clone(),
            hostname,
            architecture: "amd64/generic".to_owned(),
            status: NodeStatus::New,
            previous_status: NodeStatus::New,
            owner: None,
            power_type: String::new(),
            power: PowerParameters::default(),
            power_state: "unknown",
            status_expires_ms: None,
            error_description: String::new(),
            netboot: true,
            osystem: String::new(),
            distro_series: String::new(),
            user_data: None,
            enable_hw_sync: false,
            sync_interval_s: None,
            last_sync_ms: None,
            commissioning_status: -1,
            cpu_count: 0,
            memory_mib: 0,
            interfaces: Vec::new(),
            block_devices: Vec::new(),
            boot_disk_id: None,
            boot_interface_id: None,
            erase_done_ms: None,
        };
        self.apply_hardware(&mut record, hardware);
        self.insert_record(now_ms, record);
        system_id
    }

    /// Replaces the machine's inventory with what commissioning found, keeping the ids of known MACs and serials.
    fn apply_hardware(&mut self, record: &mut MachineRecord, hardware: &HardwareReport) {
        record.cpu_count = hardware.cpu_count;
        record.memory_mib = hardware.memory_mib;
        let mut interfaces = Vec::new();
        for nic in &hardware.nics {
            let existing = record.interfaces.iter().find(|iface| iface.mac_address == nic.mac);
            let mut tags = Vec::new();
            // Deviation from real MAAS: MAAS has no RoCE type; the fake tags such NICs "roce".
            if nic.kind == NicKind::Roce {
                tags.push("roce".to_owned());
            }
            interfaces.push(Interface {
                id: existing.map_or_else(|| self.object_id(), |iface| iface.id),
                name: nic.name.clone(),
                mac_address: nic.mac.clone(),
                vlan_id: existing.and_then(|iface| iface.vlan_id).or(Some(nic.vlan_id)),
                links: existing.map(|iface| iface.links.clone()).unwrap_or_default(),
                tags,
                enabled: true,
            });
        }
        record.boot_interface_id = hardware
            .nics
            .iter()
            .position(|nic| nic.kind == NicKind::Pxe)
            .map(|index| interfaces[index].id)
            .or(record.boot_interface_id.filter(|id| interfaces.iter().any(|iface| iface.id == *id)));
        record.interfaces = interfaces;
        let mut devices = Vec::new();
        for disk in &hardware.disks {
            let existing = record.block_devices.iter().find(|device| device.serial == disk.serial);
            devices.push(BlockDevice {
                id: existing.map_or_else(|| self.object_id(), |device| device.id),
                name: disk.name.clone(),
                model: disk.model.clone(),
                serial: disk.serial.clone(),
                size: disk.size_bytes,
                device_type: "physical".to_owned(),
                path: format!("/dev/disk/by-dname/{}", disk.name),
                tags: if disk.name.starts_with("nvme") { vec!["ssd".into()] } else { Vec::new() },
            });
        }
        record.boot_disk_id = record.boot_disk_id.filter(|id| devices.iter().any(|device| device.id == *id));
        record.block_devices = devices;
    }

    /// A commissioning script completed: MAAS logs its result now (never at its start).
    pub fn script_result(&mut self, now_ms: u64, system_id: &str, name: &str, passed: bool) {
        if !self.reachable || self.status_of(system_id) != Some(NodeStatus::Commissioning) {
            return;
        }
        let to = if passed { "Passed" } else { "Failed" };
        self.log(
            now_ms,
            system_id,
            "",
            EventLevel::Debug,
            "Script result",
            &format!("{name} changed status from 'Running' to '{to}'"),
        );
        if !passed {
            self.log(now_ms, system_id, "", EventLevel::Info, "Script", &format!("{name} failed"));
        }
    }

    /// The commissioning `signal` (OK or FAILED) with the hardware found.
    ///
    /// Deviation from real MAAS: no testing scripts run, so commissioning goes straight to READY (never TESTING).
    pub fn signal(&mut self, now_ms: u64, system_id: &str, ok: bool, hardware: &HardwareReport) {
        if !self.reachable || self.status_of(system_id) != Some(NodeStatus::Commissioning) {
            return;
        }
        let mut record = self.machines.remove(system_id).expect("checked above");
        self.apply_hardware(&mut record, hardware);
        self.machines.insert(system_id.to_owned(), record);
        let (event, to, script_status) = if ok {
            ("Ready", NodeStatus::Ready, 2)
        } else {
            ("Failed commissioning", NodeStatus::FailedCommissioning, 3)
        };
        self.log(now_ms, system_id, "", EventLevel::Info, event, "");
        self.set_status(now_ms, system_id, to);
        let record = self.record_mut(system_id);
        record.owner = None;
        record.commissioning_status = script_status;
    }

    /// cloud-init's webhook reported a top-level failure: its datasource search failed. MAAS logs the webhook's
    /// message as the status's event (`'<origin>' <description>`), then marks the machine failed.
    pub fn cloud_init_failed(&mut self, now_ms: u64, system_id: &str) {
        if !self.reachable {
            return;
        }
        let event = match self.status_of(system_id) {
            Some(NodeStatus::Commissioning) => Some("Node commissioning failure"),
            Some(NodeStatus::Deploying) => Some("Node installation failure"),
            _ => None,
        };
        if let Some(event) = event {
            // Deviation from real MAAS: cloud-init's exact failure text for a datasource that never answers was not
            // read; the name and origin are those of its `init-network/search-MAAS` stage.
            let description = "'cloudinit' init-network/search-MAAS: no datasource found (DataSourceMAAS)";
            self.log(now_ms, system_id, "", EventLevel::Error, event, description);
        }
        match self.status_of(system_id) {
            Some(NodeStatus::Commissioning) => self.mark_failed(
                now_ms,
                system_id,
                "Commissioning failed, cloud-init reported a failure (refer to the event log for more information)",
            ),
            Some(NodeStatus::Deploying) => self.mark_failed(
                now_ms,
                system_id,
                "Installation failed (refer to the installation log for more information).",
            ),
            _ => {}
        }
    }

    pub fn curtin_stage(&mut self, now_ms: u64, system_id: &str, stage: CurtinStage) {
        if self.reachable && self.status_of(system_id) == Some(NodeStatus::Deploying) {
            self.log(now_ms, system_id, "", EventLevel::Info, stage.event(), "");
        }
    }

    pub fn curtin_finished(&mut self, now_ms: u64, system_id: &str, ok: bool) {
        if !self.reachable || self.status_of(system_id) != Some(NodeStatus::Deploying) {
            return;
        }
        if ok {
            self.log(now_ms, system_id, "", EventLevel::Info, "Rebooting", "");
            self.record_mut(system_id).netboot = false;
        } else {
            self.mark_failed(
                now_ms,
                system_id,
                "Installation failed (refer to the installation log for more information).",
            );
        }
    }

    /// The hardware-sync service reported.
    pub fn hardware_sync(&mut self, now_ms: u64, system_id: &str) {
        if !self.reachable {
            return;
        }
        if let Some(record) = self.machines.get_mut(system_id) {
            if record.enable_hw_sync {
                record.last_sync_ms = Some(now_ms);
            }
        }
    }

    // ---- rendering and ids --------------------------------------------------------------------------------------

    fn render(&self, record: &MachineRecord) -> MachineView {
        let status_message = self
            .latest_info
            .get(&record.system_id)
            .map(|&index| &self.events[index])
            .map(|event| {
                if event.description.is_empty() {
                    event.event_type.clone()
                } else {
                    format!("{} - {}", event.event_type, event.description)
                }
            })
            .unwrap_or_default();
        let interface_set: Vec<InterfaceView> =
            record.interfaces.iter().map(|iface| self.render_interface(record, iface)).collect();
        let boot_interface =
            record.boot_interface_id.and_then(|id| interface_set.iter().find(|iface| iface.id == id)).cloned();
        let boot_disk = record
            .boot_disk_id
            .or_else(|| record.block_devices.first().map(|device| device.id))
            .and_then(|id| record.block_devices.iter().find(|device| device.id == id))
            .cloned();
        let ip_addresses = record
            .interfaces
            .iter()
            .flat_map(|iface| iface.links.iter())
            .filter_map(|link| link.ip_address.clone())
            .collect();
        let commissioning_status_name = match record.commissioning_status {
            0 => "Pending",
            1 => "Running",
            2 => "Passed",
            3 => "Failed",
            _ => "Unknown",
        };
        MachineView {
            system_id: record.system_id.clone(),
            hostname: record.hostname.clone(),
            architecture: record.architecture.clone(),
            status: record.status.code(),
            status_name: record.status.label().to_owned(),
            status_message,
            owner: record.owner.clone(),
            power_type: record.power_type.clone(),
            power_state: record.power_state.to_owned(),
            osystem: record.osystem.clone(),
            distro_series: record.distro_series.clone(),
            netboot: record.netboot,
            locked: false,
            error_description: record.error_description.clone(),
            cpu_count: record.cpu_count,
            memory: record.memory_mib,
            ip_addresses,
            boot_interface,
            interface_set,
            boot_disk,
            blockdevice_set: record.block_devices.clone(),
            commissioning_status: record.commissioning_status,
            commissioning_status_name: commissioning_status_name.to_owned(),
            enable_hw_sync: record.enable_hw_sync,
            sync_interval: record.sync_interval_s,
            last_sync_ms: record.last_sync_ms,
            next_sync_ms: match (record.last_sync_ms, record.sync_interval_s) {
                (Some(last_ms), Some(interval_s)) => Some(last_ms + interval_s * 1000),
                _ => None,
            },
        }
    }

    fn render_interface(&self, record: &MachineRecord, iface: &Interface) -> InterfaceView {
        let vlan = iface.vlan_id.and_then(|id| self.vlans.get(&id)).cloned();
        InterfaceView {
            system_id: record.system_id.clone(),
            id: iface.id,
            name: iface.name.clone(),
            interface_type: "physical".to_owned(),
            mac_address: iface.mac_address.clone(),
            effective_mtu: vlan.as_ref().map_or(1500, |vlan| vlan.mtu),
            vlan,
            links: iface.links.clone(),
            tags: iface.tags.clone(),
            enabled: iface.enabled,
        }
    }

    fn subnet_view(&self, id: u64) -> Option<SubnetView> {
        let subnet = self.subnets.get(&id)?;
        Some(SubnetView {
            id: subnet.id,
            name: subnet.name.clone(),
            cidr: subnet.cidr.clone(),
            vlan: self.vlans.get(&subnet.vlan_id)?.clone(),
            gateway_ip: subnet.gateway_ip.clone(),
            dns_servers: subnet.dns_servers.clone(),
        })
    }

    fn static_address(&mut self, subnet_id: u64) -> Option<String> {
        let cidr = self.subnets.get(&subnet_id)?.cidr.clone();
        let host = self.next_static_host.entry(subnet_id).or_insert(10);
        let prefix: Vec<&str> = cidr.split('/').next().unwrap_or_default().split('.').take(3).collect();
        let address = format!("{}.{}", prefix.join("."), host);
        *host += 1;
        Some(address)
    }

    fn object_id(&mut self) -> u64 {
        let id = self.next_object_id;
        self.next_object_id += 1;
        id
    }

    fn draw(&mut self) -> u64 {
        self.ids_drawn += 1;
        splitmix64(self.seed ^ self.ids_drawn.wrapping_mul(0xA24B_AED4_963E_E407))
    }

    /// A 6-character z-number over `34678abcdefghkmnpqrstwxy` from 24^5..24^6−1, as `generate_node_system_id`.
    fn new_system_id(&mut self) -> String {
        const ALPHABET: &[u8; 24] = b"34678abcdefghkmnpqrstwxy";
        loop {
            let low = 24u64.pow(5);
            let mut value = low + self.draw() % (24u64.pow(6) - low);
            let mut text = Vec::new();
            while value > 0 {
                text.push(ALPHABET[(value % 24) as usize]);
                value /= 24;
            }
            text.reverse();
            let id = String::from_utf8(text).expect("ascii alphabet");
            if !self.machines.contains_key(&id) {
                return id;
            }
        }
    }

    /// A petname-style hostname (`set_random_hostname`).
    fn petname(&mut self) -> String {
        const ADJECTIVES: [&str; 8] = ["famous", "brave", "quiet", "stable", "smart", "sharp", "tidy", "noble"];
        const ANIMALS: [&str; 8] = ["cat", "heron", "koala", "lynx", "otter", "quail", "yak", "wren"];
        loop {
            let bits = self.draw();
            let name = format!("{}-{}", ADJECTIVES[(bits % 8) as usize], ANIMALS[((bits >> 8) % 8) as usize]);
            let name = format!("{name}-{:02}", (bits >> 16) % 100);
            if !self.machines.values().any(|record| record.hostname == name) {
                return name;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::maas::machine::HardwareProfile;

    const ADMIN: &str = "admin";

    fn region() -> (Region, Bmc) {
        let mut region = Region::new(42, RegionConfig::default());
        region.add_vlan(Vlan { id: 5001, vid: 0, name: "untagged".into(), fabric_id: 0, mtu: 1500, dhcp_on: true });
        region.add_subnet(Subnet {
            id: 1,
            name: "metal-admin".into(),
            cidr: "10.10.0.0/24".into(),
            vlan_id: 5001,
            gateway_ip: "10.10.0.1".into(),
            dns_servers: Vec::new(),
        });
        let mut bmc = Bmc::new();
        bmc.add_system("node-01", credential());
        (region, bmc)
    }

    fn credential() -> PowerCredential {
        PowerCredential { user: "root".into(), password: Secret::mint("bmc", 9) }
    }

    fn create(region: &mut Region, bmc: &mut Bmc, commission: bool) -> String {
        let request = MaasRequest::CreateMachine(CreateMachine {
            hostname: Some("gpu-01".into()),
            architecture: "amd64".into(),
            mac_addresses: vec!["52:54:00:AA:00:01".into()],
            power_type: "redfish".into(),
            power_parameters: PowerParameters {
                power_address: "node-01".into(),
                power_user: "root".into(),
                power_pass: credential().password,
            },
            commission,
        });
        let response = region.handle(0, ADMIN, request, bmc).unwrap();
        assert_eq!(response.status, 200, "{response:?}");
        response.machine().unwrap().system_id.clone()
    }

    fn call(region: &mut Region, bmc: &mut Bmc, now_ms: u64, request: MaasRequest) -> MaasResponse {
        region.handle(now_ms, ADMIN, request, bmc).unwrap()
    }

    fn text(status: u16, message: &str) -> MaasResponse {
        MaasResponse::text(status, message)
    }

    /// Drives a commissioning machine to Ready through the metadata handlers.
    fn to_ready(region: &mut Region, bmc: &mut Bmc, system_id: &str) {
        call(region, bmc, 0, MaasRequest::Commission { system_id: system_id.into() });
        let hardware = HardwareProfile::gpu_node(1, 5001, 5001).report();
        region.signal(1_000, system_id, true, &hardware);
        assert_eq!(region.status_of(system_id), Some(NodeStatus::Ready));
    }

    #[test]
    fn illegal_operations_answer_409_with_the_real_text() {
        let (mut region, mut bmc) = region();
        let id = create(&mut region, &mut bmc, false);
        assert_eq!(region.status_of(&id), Some(NodeStatus::New));
        let cases = [
            (
                MaasRequest::Deploy {
                    system_id: id.clone(),
                    distro_series: None,
                    user_data: None,
                    enable_hw_sync: false,
                },
                text(409, "Can't deploy a machine that is in the 'New' state"),
            ),
            (
                MaasRequest::Release { system_id: id.clone(), comment: None, erase: false },
                text(409, "Machine cannot be released in its current state ('New')."),
            ),
            (
                MaasRequest::Abort { system_id: id.clone(), comment: None },
                text(409, &format!("Cannot abort in current state: node {id} is in state New.")),
            ),
            (
                MaasRequest::MarkFixed { system_id: id.clone(), comment: None },
                text(409, "Can't mark a non-broken node as 'Ready'."),
            ),
            (MaasRequest::PowerOn { system_id: id.clone() }, text(409, "Can't start node: it hasn't been allocated.")),
            (MaasRequest::MarkBroken { system_id: id.clone(), comment: None }, text(403, "Forbidden")),
            (MaasRequest::ReadMachine { system_id: "nope".into() }, text(404, "No Machine matches the given query.")),
        ];
        for (request, expected) in cases {
            assert_eq!(call(&mut region, &mut bmc, 0, request.clone()), expected, "{request:?}");
        }
        assert_eq!(region.status_of(&id), Some(NodeStatus::New), "refused operations change nothing");
        let deployed = MaasRequest::Commission { system_id: id.clone() };
        assert_eq!(call(&mut region, &mut bmc, 0, deployed).status, 200);
        let again = call(&mut region, &mut bmc, 0, MaasRequest::Commission { system_id: id.clone() });
        assert_eq!(
            again.body,
            MaasBody::FormErrors(BTreeMap::from([(
                "__all__".to_owned(),
                vec!["Commission is not available because of the current state of the node.".to_owned()]
            )]))
        );
    }

    #[test]
    fn the_lifecycle_follows_the_table_and_abort_and_mark_fixed_go_where_maas_sends_them() {
        let (mut region, mut bmc) = region();
        let id = create(&mut region, &mut bmc, true);
        assert_eq!(region.status_of(&id), Some(NodeStatus::Commissioning));
        assert_eq!(bmc.power_state("node-01"), Some(PowerState::On), "commissioning powers the machine on");
        let abort = call(&mut region, &mut bmc, 10, MaasRequest::Abort { system_id: id.clone(), comment: None });
        assert_eq!(abort.machine().unwrap().status_name, "New");
        assert_eq!(bmc.power_state("node-01"), Some(PowerState::Off));
        to_ready(&mut region, &mut bmc, &id);
        let deploy =
            MaasRequest::Deploy { system_id: id.clone(), distro_series: None, user_data: None, enable_hw_sync: true };
        let view = call(&mut region, &mut bmc, 2_000, deploy).machine().cloned().unwrap();
        assert_eq!((view.status, view.owner.as_deref(), view.distro_series.as_str()), (9, Some(ADMIN), "jammy"));
        let abort = call(&mut region, &mut bmc, 3_000, MaasRequest::Abort { system_id: id.clone(), comment: None });
        assert_eq!(abort.machine().unwrap().status_name, "Allocated");
        let broken = MaasRequest::MarkBroken { system_id: id.clone(), comment: Some("bad dimm".into()) };
        let view = call(&mut region, &mut bmc, 4_000, broken).machine().cloned().unwrap();
        assert_eq!((view.status_name.as_str(), view.error_description.as_str()), ("Broken", "bad dimm"));
        let fixed = call(&mut region, &mut bmc, 5_000, MaasRequest::MarkFixed { system_id: id.clone(), comment: None });
        assert_eq!(fixed.machine().unwrap().status_name, "Ready", "the status before Broken was not Deployed");
        let transitions: Vec<(Option<NodeStatus>, NodeStatus)> =
            region.transitions().iter().map(|record| (record.from, record.to)).collect();
        for (from, to) in &transitions {
            match from {
                None => assert!(crate::maas::status::INITIAL.contains(to)),
                Some(from) => assert!(from.can_transition_to(*to), "{from:?} -> {to:?}"),
            }
        }
        use NodeStatus::*;
        let path: Vec<NodeStatus> = transitions.iter().map(|(_, to)| *to).collect();
        assert_eq!(
            path,
            [New, Commissioning, New, Commissioning, Ready, Allocated, Deploying, Allocated, Releasing, Broken, Ready]
        );
    }

    #[test]
    fn the_status_monitor_fails_a_silent_commissioning_after_node_timeout_with_the_real_message() {
        let (mut region, mut bmc) = region();
        let id = create(&mut region, &mut bmc, true);
        let timeout_ms = 30 * 60_000;
        assert_eq!(region.monitor_wakeup_ms(0), Some(60_000), "the monitor runs every 60 s");
        region.monitor_tick(timeout_ms - 60_000, &mut bmc);
        assert_eq!(region.status_of(&id), Some(NodeStatus::Commissioning));
        region.monitor_tick(timeout_ms, &mut bmc);
        assert_eq!(region.status_of(&id), Some(NodeStatus::FailedCommissioning));
        let view = region.view(&id).unwrap();
        assert_eq!(view.error_description, "Node operation 'Commissioning' timed out after 30 minutes.");
        assert_eq!(view.owner, None);
        assert_eq!(
            view.status_message,
            "Marking node failed - Node operation 'Commissioning' timed out after 30 minutes."
        );
        assert_eq!(bmc.power_state("node-01"), Some(PowerState::Off), "a timed-out node is powered off");
        let last = region.events().last().unwrap();
        assert_eq!((last.level, last.event_type.as_str()), (EventLevel::Debug, "Node changed status"));
        assert_eq!(last.description, "From 'Commissioning' to 'Failed commissioning'");
        assert_eq!(region.monitor_wakeup_ms(timeout_ms), None, "nothing is timed any more");
    }

    #[test]
    fn a_dead_status_monitor_leaves_the_machine_commissioning_forever() {
        let (mut region, mut bmc) = region();
        let id = create(&mut region, &mut bmc, true);
        region.set_status_monitor_alive(false);
        assert_eq!(region.monitor_wakeup_ms(0), None);
        region.monitor_tick(10 * 3_600_000, &mut bmc);
        assert_eq!(region.status_of(&id), Some(NodeStatus::Commissioning));
    }

    #[test]
    fn temporal_deploy_times_out_at_twice_node_timeout() {
        let (mut region, mut bmc) = region();
        region.config.temporal_deploy = true;
        let id = create(&mut region, &mut bmc, true);
        to_ready(&mut region, &mut bmc, &id);
        let deploy =
            MaasRequest::Deploy { system_id: id.clone(), distro_series: None, user_data: None, enable_hw_sync: false };
        call(&mut region, &mut bmc, 0, deploy);
        region.monitor_tick(30 * 60_000, &mut bmc);
        assert_eq!(region.status_of(&id), Some(NodeStatus::Deploying));
        region.monitor_tick(60 * 60_000, &mut bmc);
        assert_eq!(region.status_of(&id), Some(NodeStatus::FailedDeployment));
        assert_eq!(region.view(&id).unwrap().error_description, "time-out during deployment");
    }

    #[test]
    fn events_are_newest_first_with_after_limit_and_level_filters() {
        let (mut region, mut bmc) = region();
        let id = create(&mut region, &mut bmc, false);
        let first_id = region.events().len() as u64 + 1;
        for n in 0..6u64 {
            let level = if n % 2 == 0 { EventLevel::Info } else { EventLevel::Debug };
            region.log(n, &id, "", level, &format!("e{n}"), "");
        }
        let query = |region: &Region, query: EventsQuery| match region.query_events(&query).body {
            MaasBody::Events(page) => page,
            other => panic!("{other:?}"),
        };
        let names = |page: &EventsPage| page.events.iter().map(|e| e.event_type.clone()).collect::<Vec<_>>();
        let all = query(&region, EventsQuery { system_id: Some(id.clone()), ..EventsQuery::default() });
        assert_eq!(names(&all), ["e4", "e2", "e0"], "default level INFO hides DEBUG, newest first");
        let debug = EventsQuery {
            system_id: Some(id.clone()),
            level: Some(EventLevel::Debug),
            limit: Some(2),
            ..Default::default()
        };
        let page = query(&region, debug.clone());
        assert_eq!(names(&page), ["e5", "e4"]);
        assert_eq!(page.prev_before, Some(first_id + 4));
        // `after`: the oldest `limit` events after the id, returned newest first.
        let after = EventsQuery { after: Some(first_id), ..debug.clone() };
        let page = query(&region, after);
        assert_eq!(names(&page), ["e2", "e1"]);
        assert_eq!(page.next_after, Some(first_id + 2));
        let empty = query(&region, EventsQuery { after: Some(first_id + 5), ..debug.clone() });
        assert_eq!((empty.count, empty.next_after, empty.prev_before), (0, Some(first_id + 5), None));
        let audit = query(&region, EventsQuery { level: Some(EventLevel::Audit), ..Default::default() });
        assert_eq!(audit.count, 0, "AUDIT selects AUDIT events only");
        let limit_zero = query(&region, EventsQuery { limit: Some(0), ..debug.clone() });
        assert_eq!(limit_zero.count, 1, "a limit below 1 is raised to 1");
        let too_many = EventsQuery { limit: Some(1001), ..Default::default() };
        assert_eq!(
            region.query_events(&too_many),
            text(400, "Requested number of events 1001 is greater than limit: 1000")
        );
        let both = EventsQuery { after: Some(1), before: Some(9), ..Default::default() };
        assert_eq!(
            region.query_events(&both),
            text(400, "There is undetermined behaviour when both `after` and `before` are specified.")
        );
        assert_eq!(EventLevel::parse("loud"), Err("Unrecognised log level: loud".to_owned()));
    }

    #[test]
    fn faults_503_409_unreachable_and_hidden_machines() {
        let (mut region, mut bmc) = region();
        let id = create(&mut region, &mut bmc, false);
        region.fail_next_with_503(UNAVAILABLE_RETRY_AFTER_S);
        region.fail_next_with_409(CONFLICT_RETRY_AFTER_S);
        let commission = || MaasRequest::Commission { system_id: id.clone() };
        let first = call(&mut region, &mut bmc, 0, commission());
        assert_eq!((first.status, first.retry_after_s), (503, Some(10)));
        let second = call(&mut region, &mut bmc, 0, commission());
        assert_eq!((second.status, second.retry_after_s), (409, Some(5)));
        assert_eq!(region.status_of(&id), Some(NodeStatus::New), "a failed request has no effect");
        region.set_reachable(false);
        assert_eq!(region.handle(0, ADMIN, commission(), &mut bmc), None);
        region.set_reachable(true);
        region.hide_machine(&id);
        assert_eq!(call(&mut region, &mut bmc, 0, commission()), text(404, "No Machine matches the given query."));
        let list = call(
            &mut region,
            &mut bmc,
            0,
            MaasRequest::ListMachines { hostname: None, mac_address: None, status: None },
        );
        assert_eq!(list.body, MaasBody::Machines(Vec::new()));
        region.reveal_machine(&id);
        assert_eq!(call(&mut region, &mut bmc, 0, commission()).status, 200);
    }

    #[test]
    fn power_failures_are_visible_as_events_and_503s() {
        let (mut region, mut bmc) = region();
        let id = create(&mut region, &mut bmc, false);
        bmc.rotate_credential("node-01", PowerCredential { user: "root".into(), password: Secret::mint("bmc", 10) });
        call(&mut region, &mut bmc, 0, MaasRequest::Commission { system_id: id.clone() });
        let view = region.view(&id).unwrap();
        assert_eq!((view.status_name.as_str(), view.power_state.as_str()), ("Commissioning", "error"));
        assert!(
            region
                .events()
                .iter()
                .any(|e| e.event_type == "Failed to power cycle node" && e.level == EventLevel::Error)
        );
        let query = call(&mut region, &mut bmc, 0, MaasRequest::QueryPowerState { system_id: id.clone() });
        assert_eq!(query.status, 503);
        assert_eq!(region.events().last().unwrap().event_type, "Failed to query node's BMC");
        bmc.rotate_credential("node-01", credential());
        let query = call(&mut region, &mut bmc, 0, MaasRequest::QueryPowerState { system_id: id.clone() });
        assert_eq!(query.body, MaasBody::PowerState { state: "off".into() });
    }

    #[test]
    fn wedged_workflows_report_a_dead_worker_and_never_dispatch_a_commission() {
        let (mut region, _) = region();
        let healthy = region.region_controllers();
        assert!(healthy[0].service_set.iter().all(|service| service.status == "running"));
        region.set_workflows_wedged(true);
        let wedged = region.region_controllers();
        let worker = wedged[0].service_set.iter().find(|service| service.name == "temporal-worker").unwrap();
        assert_eq!(
            (worker.status.as_str(), worker.status_info.as_str()),
            ("dead", "Not enough hosts to serve the request")
        );
        region.set_workflows_wedged(false);
        assert_eq!(region.region_controllers(), healthy);
    }

    #[test]
    fn link_subnet_auto_and_interface_state_rules() {
        let (mut region, mut bmc) = region();
        let id = create(&mut region, &mut bmc, false);
        let iface = region.view(&id).unwrap().interface_set[0].id;
        let link = |mode: &str| MaasRequest::LinkSubnet {
            system_id: id.clone(),
            interface_id: iface,
            mode: mode.into(),
            subnet_id: 1,
            ip_address: None,
        };
        let response = call(&mut region, &mut bmc, 0, link("AUTO"));
        let MaasBody::Interface(view) = response.body else { panic!("{response:?}") };
        assert_eq!(view.links.len(), 1);
        assert_eq!(
            (view.links[0].mode, view.links[0].ip_address.clone(), view.effective_mtu),
            (LinkMode::Auto, None, 1500)
        );
        assert_eq!(call(&mut region, &mut bmc, 0, link("bogus")).status, 400);
        call(&mut region, &mut bmc, 0, MaasRequest::Commission { system_id: id.clone() });
        assert_eq!(
            call(&mut region, &mut bmc, 0, link("auto")),
            text(409, "Cannot link subnet interface because the machine is not New, Ready, Allocated, or Broken.")
        );
    }

    #[test]
    fn system_ids_are_z_numbers_from_the_seed() {
        let (mut a, mut bmc) = region();
        let (mut b, _) = region();
        let id_a = create(&mut a, &mut bmc, false);
        let id_b = create(&mut b, &mut bmc, false);
        assert_eq!(id_a, id_b, "same seed, same id");
        assert_eq!(id_a.len(), 6);
        assert!(id_a.bytes().all(|c| b"34678abcdefghkmnpqrstwxy".contains(&c)), "{id_a}");
    }
}
