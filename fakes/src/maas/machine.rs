//! A physical machine of the site: its hardware profile (NIC MACs, disks including the BOSS boot disk, RoCE
//! interfaces) and its boot, a state machine advanced by time and by what the rack answers.
//!
//! Sans-I/O: [`Machine::poll_action`] says what the machine does next at `now_ms` (a DHCP discover, a PXE request,
//! a DNS query, a metadata fetch, a script result, ...), the site performs it against the rack/region fakes, and
//! [`Machine::handle_result`] feeds the answer back. Power comes from the BMC: [`Machine::power_on`] and
//! [`Machine::power_off`].
//!
//! The commissioning boot (notes §5.2): firmware → DHCP with the PXE NIC's *current* MAC → PXE request (MAAS
//! matches the MAC, or the unknown MAC boots the enlistment ephemeral) → "Loading ephemeral" → cloud-init resolves
//! the metadata host through the rack resolver (SERVFAIL ⇒ cloud-init gives up after its max wait and the node sits
//! at a login prompt: no "Gathering information", no script events) → fetches its scripts → runs them (a result is
//! reported when a script *completes*) → signals → powers off. Deploy (§5.3): PXE → curtin stages → reboot to disk →
//! the deployed OS's cloud-init requests user-data (MAAS marks it Deployed) → the node agent enrols with its
//! bootstrap token (an outward effect) and the hardware-sync timer reports to MAAS.
//!
//! Faults ([`MachineFaults`]): MAC drift at the next power-on (every NIC MAC regenerated from a seed, the
//! 2026-07-20 in-place apply), a commissioning script that hangs, a failing script, slow scripts (a trickle of
//! results, late), a cloud-init/datasource failure,
//! hardware absent (BOSS disk, RoCE NIC: [`Machine::remove_disk`], [`Machine::remove_nic`]), late agent enrolment,
//! hardware-sync seed or health failure.

use serde::{Deserialize, Serialize};

use super::bmc::BootTarget;
use super::dhcp::Lease;
use super::dns::{DnsAnswer, METADATA_HOST};
use super::vault::{Secret, splitmix64};

/// The bound on actions one machine takes at one instant: a boot that loops without time passing is a bug.
pub const ACTIONS_PER_INSTANT_MAX: u32 = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NicKind {
    /// The NIC the firmware PXE-boots from (on the metal-admin VLAN).
    Pxe,
    Data,
    /// An RDMA-over-Converged-Ethernet NIC of the GPU fabric.
    Roce,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Nic {
    pub name: String,
    pub mac: String,
    pub kind: NicKind,
    pub vlan_id: u64,
    /// False when the NIC is absent (hardware mismatch): the OS and commissioning do not see it.
    pub present: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Disk {
    pub name: String,
    pub model: String,
    pub serial: String,
    pub size_bytes: u64,
    /// The Dell BOSS card: the intended boot disk.
    pub boss: bool,
    pub present: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HardwareProfile {
    pub cpu_count: u32,
    pub memory_mib: u64,
    pub nics: Vec<Nic>,
    pub disks: Vec<Disk>,
}

/// What commissioning (or enlistment) reports about the hardware: only what is present.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HardwareReport {
    pub cpu_count: u32,
    pub memory_mib: u64,
    pub nics: Vec<Nic>,
    pub disks: Vec<Disk>,
}

impl HardwareProfile {
    /// A GPU node: a PXE NIC and a data NIC on `pxe_vlan`, two RoCE NICs on `roce_vlan`, a BOSS boot disk and two
    /// NVMe data disks. MACs and serials come from `seed`.
    pub fn gpu_node(seed: u64, pxe_vlan: u64, roce_vlan: u64) -> HardwareProfile {
        let nic = |index: u64, name: &str, kind: NicKind, vlan_id: u64| Nic {
            name: name.to_owned(),
            mac: generate_mac(seed.wrapping_add(index)),
            kind,
            vlan_id,
            present: true,
        };
        let serial = |index: u64| format!("S{:010X}", splitmix64(seed ^ (0xD15C << 8) ^ index) & 0xFF_FFFF_FFFF);
        let disk = |index: u64, name: &str, model: &str, size_bytes: u64, boss: bool| Disk {
            name: name.to_owned(),
            model: model.to_owned(),
            serial: serial(index),
            size_bytes,
            boss,
            present: true,
        };
        HardwareProfile {
            cpu_count: 128,
            memory_mib: 2_097_152,
            nics: vec![
                nic(0, "eno1", NicKind::Pxe, pxe_vlan),
                nic(1, "eno2", NicKind::Data, pxe_vlan),
                nic(2, "ens1f0np0", NicKind::Roce, roce_vlan),
                nic(3, "ens1f1np1", NicKind::Roce, roce_vlan),
            ],
            disks: vec![
                disk(0, "sda", "Dell BOSS-N1", 480_103_981_056, true),
                disk(1, "nvme0n1", "Dell Ent NVMe CM6 RI 3.84TB", 3_840_755_982_336, false),
                disk(2, "nvme1n1", "Dell Ent NVMe CM6 RI 3.84TB", 3_840_755_982_336, false),
            ],
        }
    }

    pub fn report(&self) -> HardwareReport {
        HardwareReport {
            cpu_count: self.cpu_count,
            memory_mib: self.memory_mib,
            nics: self.nics.iter().filter(|nic| nic.present).cloned().collect(),
            disks: self.disks.iter().filter(|disk| disk.present).cloned().collect(),
        }
    }

    /// The MAC the firmware PXE-boots with, and its VLAN.
    pub fn pxe_nic(&self) -> Option<&Nic> {
        self.nics.iter().find(|nic| nic.kind == NicKind::Pxe && nic.present)
    }
}

/// A deterministic MAC under the libvirt/QEMU prefix `52:54:00` (the incident's nodes were libvirt guests).
pub fn generate_mac(seed: u64) -> String {
    let bits = splitmix64(seed);
    format!("52:54:00:{:02x}:{:02x}:{:02x}", (bits >> 16) & 0xff, (bits >> 8) & 0xff, bits & 0xff)
}

/// How long each step of a boot takes.
///
/// The defaults model the 2026-07-20 incident's nodes, libvirt/KVM guests (`seeds/001`: "the boots are genuinely
/// KVM-accelerated -- a `type=kvm` domain"), and put a fault-free commissioning at seed 001's figure for the canary
/// after the repair, "canary Ready in ~3 min": from the commission to Ready is 9 s of firmware, 13 s of PXE and TFTP,
/// 30 s of ephemeral boot and 131 s of scripts ([`super::region::default_commissioning_scripts`]), 183 s in all.
/// MAAS's own packet-capture walk through a commissioning of a qemu-kvm machine (canonical/maas,
/// `docs/development/notes/anatomy-of-recommissioning-in-maas-2.0.rst`, "the note" below) took 130 s in all, with an
/// older and shorter script set. Each field says where its figure comes from; "our figure" is a round number of the
/// right order that no source gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootTimings {
    /// Power-on to the first DHCP discover: 9 s (the note: the guest's PXE BIOS sends its DHCP Discover at 9.2 s).
    pub firmware_ms: u64,
    /// Between the firmware's DHCP discovers: 4 s (our figure).
    pub dhcp_retry_ms: u64,
    /// DISCOVERs the firmware sends before it gives up on the network and tries the disk: 4 (our figure).
    pub dhcp_attempts_max: u32,
    /// PXE answer to the ephemeral's kernel/initrd/squashfs fetch: 13 s (the note: DHCP ACK at 12.1 s, then
    /// `pxelinux.0`, `ldlinux.c32`, the `pxelinux.cfg` file, the kernel and the initrd, done at 25.2 s).
    pub tftp_ms: u64,
    /// The squashfs fetch and the ephemeral's boot up to cloud-init: 30 s (the note: 14 s from the initrd to
    /// cloud-init's metadata request, at 39.5 s, with MAAS 2.0's iSCSI root; our figure adds the MAAS 3.x
    /// ephemeral's download of its squashfs from the rack, whose start MAAS logs as "Loading ephemeral").
    pub ephemeral_boot_ms: u64,
    /// cloud-init's wait between metadata-host attempts: 10 s (our figure).
    pub metadata_retry_ms: u64,
    /// cloud-init's total wait for the metadata service: 120 s (`max_wait = 120` in `wait_for_metadata_service` of
    /// cloud-init's `DataSourceMAAS`).
    pub metadata_max_wait_ms: u64,
    /// Enlistment's scripts between its API call and its power-off: 120 s (our figure).
    pub enlistment_ms: u64,
    /// The end of commissioning to power-off: 10 s (our figure).
    pub shutdown_ms: u64,
    /// Each curtin stage (storage, extract, curthooks): 60 s (our figure).
    pub install_stage_ms: u64,
    /// Disk boot of the installed OS up to cloud-init: 60 s (our figure).
    pub os_boot_ms: u64,
}

impl Default for BootTimings {
    fn default() -> Self {
        BootTimings {
            firmware_ms: 9_000,
            dhcp_retry_ms: 4_000,
            dhcp_attempts_max: 4,
            tftp_ms: 13_000,
            ephemeral_boot_ms: 30_000,
            metadata_retry_ms: 10_000,
            metadata_max_wait_ms: 120_000,
            enlistment_ms: 120_000,
            shutdown_ms: 10_000,
            install_stage_ms: 60_000,
            os_boot_ms: 60_000,
        }
    }
}

/// The hardware-sync service's failure modes (recovery matrix: `hardware_sync_failure`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum HwSyncFault {
    #[default]
    None,
    /// Seeding the timer fails (MAAS rejects the machine's token): the service never reports, and every seed is
    /// refused.
    SeedFails,
    /// The service reports `syncs` times, then stops (last_sync goes stale). Recoverable by a reseed.
    StopsAfter { syncs: u32 },
}

/// Why a hardware-sync seed did not take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeedError {
    /// No deployed OS is up to answer SSH (the connection is refused).
    NotRunning,
    /// The deployment was made without `enable_hw_sync`: there is no timer to seed.
    NotEnabled,
    /// The seed command exits non-zero: MAAS rejects the machine's credentials.
    Rejected,
}

impl std::fmt::Display for SeedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SeedError::NotRunning => write!(f, "connection refused: no deployed OS is running"),
            SeedError::NotEnabled => write!(f, "maas-run-scripts: hardware sync is not enabled for this deployment"),
            SeedError::Rejected => {
                write!(f, "maas-run-scripts register-machine: 401 Unauthorized (machine token rejected)")
            }
        }
    }
}

/// Fault knobs on one machine. Each is consumed or kept as its comment says.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct MachineFaults {
    /// At the next power-on every NIC MAC is regenerated from this seed (then the knob clears).
    pub mac_drift_seed: Option<u64>,
    /// This commissioning script never completes (so it never reports).
    pub hang_script: Option<String>,
    /// This commissioning script completes with a failure.
    pub fail_script: Option<String>,
    /// Slow but progressing commissioning: every commissioning script takes this long instead of its own duration,
    /// so MAAS logs one script result per interval, late but steadily (every commissioning while set). Seed 001:
    /// "A slow-but-progressing commission still emits a trickle of script-result events, just late".
    pub script_interval_ms: Option<u64>,
    /// cloud-init fails after reaching the metadata service and reports the failure (every boot while set).
    pub datasource_failure: bool,
    /// The node agent enrols this long after cloud-init starts it.
    pub agent_enrol_delay_ms: u64,
    pub hw_sync: HwSyncFault,
}

/// What the ephemeral environment was booted for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Purpose {
    Commissioning,
    Installation,
    /// An unknown MAC: the enlistment ephemeral, which creates the machine in MAAS.
    Enlistment,
}

/// The rack's answer to a PXE request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PxeAnswer {
    Ephemeral { system_id: Option<String>, purpose: Purpose },
    LocalBoot,
}

/// A commissioning script as MAAS hands it out. Deviation from real MAAS: the duration is part of the spec so the
/// fake node knows how long to "run" it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScriptSpec {
    pub name: String,
    pub duration_ms: u64,
}

/// Which metadata the machine asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MetadataKind {
    /// The enlistment ephemeral's API call that creates the machine.
    Enlist,
    /// The commissioning user-data (MAAS logs "Gathering information").
    CommissioningUserData,
    /// Curtin's install configuration.
    InstallConfig,
    /// The deployed OS's first user-data request (MAAS marks the machine Deployed).
    DeployedUserData,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetadataReply {
    Enlisted {
        system_id: String,
    },
    Scripts(Vec<ScriptSpec>),
    /// The boot disk curtin installs to, by serial.
    Install {
        boot_disk_serial: Option<String>,
    },
    UserData {
        user_data: Option<Secret>,
        hw_sync_interval_s: Option<u64>,
    },
    /// "Not authenticated as a known node." and the like: the metadata service refused.
    Refused {
        status: u16,
    },
}

/// Curtin's install stages and the event MAAS logs at each start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CurtinStage {
    Partitioning,
    Extract,
    Curthooks,
}

impl CurtinStage {
    pub const ALL: [CurtinStage; 3] = [CurtinStage::Partitioning, CurtinStage::Extract, CurtinStage::Curthooks];

    /// The INFO event type MAAS logs (`EVENT_STATUS_MESSAGES`).
    pub fn event(self) -> &'static str {
        match self {
            CurtinStage::Partitioning => "Configuring storage",
            CurtinStage::Extract => "Installing OS",
            CurtinStage::Curthooks => "Configuring OS",
        }
    }
}

/// What a machine does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MachineAction {
    DhcpDiscover {
        mac: String,
        vlan_id: u64,
    },
    PxeRequest {
        mac: String,
    },
    /// The squashfs fetch from the rack (MAAS logs "Loading ephemeral" for a known node).
    LoadEphemeral {
        system_id: Option<String>,
    },
    Resolve {
        name: String,
    },
    FetchMetadata {
        system_id: Option<String>,
        kind: MetadataKind,
        hardware: Option<HardwareReport>,
    },
    ScriptDone {
        system_id: String,
        name: String,
        passed: bool,
    },
    /// `signal` OK or FAILED at the end of commissioning, with the hardware the scripts found.
    Signal {
        system_id: String,
        ok: bool,
        hardware: HardwareReport,
    },
    /// cloud-init's webhook reports a top-level `finish` with FAIL.
    CloudInitFailed {
        system_id: String,
    },
    CurtinStageStarted {
        system_id: String,
        stage: CurtinStage,
    },
    CurtinFinished {
        system_id: String,
        ok: bool,
    },
    /// The OS reboots the machine (power stays on).
    Reboot,
    /// The OS powers the machine off.
    PowerOff,
    /// Outward effect: the node agent enrols with the hub using its bootstrap token.
    AgentEnrol {
        system_id: String,
        token: Secret,
    },
    /// The hardware-sync timer reports to MAAS.
    HwSync {
        system_id: String,
    },
}

/// The answer to an action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ActionResult {
    Done,
    Dhcp(Option<Lease>),
    Pxe(PxeAnswer),
    Dns(DnsAnswer),
    Metadata(MetadataReply),
    /// Where the firmware boots after an OS reboot.
    Boot(BootTarget),
    /// The far end did not answer (region unreachable).
    NoAnswer,
}

/// Why a powered-on machine stopped making progress; it stays so until the next power transition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stall {
    /// No DHCP offer and no OS on disk.
    NoDhcpOffer,
    /// Nothing to boot: PXE said local boot and the disk has no OS.
    NoBootableDevice,
    /// cloud-init never reached the metadata service (the SERVFAIL signature): a login prompt.
    NoDatasource,
    /// The metadata service refused the node (e.g. its record was deleted).
    MetadataRefused,
    /// A commissioning script never completes.
    ScriptHung,
    /// cloud-init failed and reported it.
    CloudInitFailed,
    /// Curtin could not install (the boot disk is absent).
    InstallFailed,
}

/// Where in its life the deployed OS or the ephemeral is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Context {
    Ephemeral(Purpose),
    DeployedOs,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    Off,
    Firmware { at_ms: u64, boot: BootTarget },
    Dhcp { at_ms: u64, attempts: u32 },
    Pxe { at_ms: u64 },
    LoadEphemeral { at_ms: u64, system_id: Option<String>, purpose: Purpose },
    Resolve { at_ms: u64, deadline_ms: u64, system_id: Option<String>, context: Context },
    FetchMetadata { at_ms: u64, system_id: Option<String>, context: Context },
    Script { at_ms: u64, system_id: String, scripts: Vec<ScriptSpec>, index: usize, failed: bool },
    Signal { at_ms: u64, system_id: String, ok: bool },
    ReportFailure { at_ms: u64, system_id: String },
    Install { at_ms: u64, system_id: String, boot_disk_serial: Option<String>, stage: usize },
    InstallDone { at_ms: u64, system_id: String, ok: bool },
    Reboot { at_ms: u64 },
    DiskBoot { at_ms: u64 },
    Running { system_id: String, agent_at_ms: Option<u64>, sync_at_ms: Option<u64> },
    PowerOff { at_ms: u64 },
    Stalled(Stall),
}

/// One physical machine.
#[derive(Debug, Clone)]
pub struct Machine {
    name: String,
    hardware: HardwareProfile,
    timings: BootTimings,
    pub faults: MachineFaults,
    phase: Phase,
    awaiting: bool,
    /// Whether the disk holds an installed OS (curtin finished).
    os_installed: bool,
    /// The machine the installed OS belongs to: its cloud-init config carries that node's metadata token.
    installed_system_id: Option<String>,
    /// The deployment this OS came from: the agent enrols once per deployment.
    agent_token: Option<Secret>,
    agent_enrolled: bool,
    hw_sync_interval_s: Option<u64>,
    /// Whether the hardware-sync timer of this deployment was seeded (over SSH, by the onboarding workflow).
    hw_sync_seeded: bool,
    hw_syncs: u32,
    lease: Option<Lease>,
}

impl Machine {
    pub fn new(name: &str, hardware: HardwareProfile, timings: BootTimings) -> Machine {
        Machine {
            name: name.to_owned(),
            hardware,
            timings,
            faults: MachineFaults::default(),
            phase: Phase::Off,
            awaiting: false,
            os_installed: false,
            installed_system_id: None,
            agent_token: None,
            agent_enrolled: false,
            hw_sync_seeded: false,
            hw_sync_interval_s: None,
            hw_syncs: 0,
            lease: None,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn hardware(&self) -> &HardwareProfile {
        &self.hardware
    }

    pub fn is_powered(&self) -> bool {
        self.phase != Phase::Off
    }

    pub fn os_installed(&self) -> bool {
        self.os_installed
    }

    /// The current DHCP lease of the PXE NIC, if the machine got one this boot.
    pub fn lease(&self) -> Option<&Lease> {
        self.lease.as_ref()
    }

    /// Why the machine is stuck, if it is.
    pub fn stall(&self) -> Option<Stall> {
        match self.phase {
            Phase::Stalled(stall) => Some(stall),
            _ => None,
        }
    }

    /// Whether the deployed OS runs with the agent enrolled.
    pub fn agent_enrolled(&self) -> bool {
        self.agent_enrolled
    }

    /// Fault: hardware mismatch. The named NIC is absent from now on (as seen by the next commissioning).
    pub fn remove_nic(&mut self, name: &str) -> bool {
        self.hardware.nics.iter_mut().find(|nic| nic.name == name).map(|nic| nic.present = false).is_some()
    }

    /// Fault: hardware mismatch. The named disk is absent from now on.
    pub fn remove_disk(&mut self, name: &str) -> bool {
        self.hardware.disks.iter_mut().find(|disk| disk.name == name).map(|disk| disk.present = false).is_some()
    }

    /// The BMC powered the machine on; the firmware boots from `boot`. Returns the `(old, new)` MACs when a pending
    /// MAC drift applied.
    pub fn power_on(&mut self, now_ms: u64, boot: BootTarget) -> Vec<(String, String)> {
        let drifted = self.apply_pending_mac_drift();
        self.lease = None;
        self.awaiting = false;
        self.phase = Phase::Firmware { at_ms: now_ms + self.timings.firmware_ms, boot };
        drifted
    }

    /// A pending MAC drift (the machine's definition was regenerated; its NICs show the new MACs from the next
    /// boot) made effective now: what an operator reading the definition sees. Returns `(old, new)` per NIC.
    pub fn apply_pending_mac_drift(&mut self) -> Vec<(String, String)> {
        let mut drifted = Vec::new();
        if let Some(seed) = self.faults.mac_drift_seed.take() {
            for (index, nic) in self.hardware.nics.iter_mut().enumerate() {
                let new = generate_mac(splitmix64(seed).wrapping_add(index as u64));
                drifted.push((std::mem::replace(&mut nic.mac, new.clone()), new));
            }
        }
        drifted
    }

    pub fn power_off(&mut self) {
        self.phase = Phase::Off;
        self.awaiting = false;
        self.lease = None;
    }

    /// When the machine next wants to act, if ever.
    pub fn next_wakeup_ms(&self) -> Option<u64> {
        match &self.phase {
            Phase::Off | Phase::Stalled(_) => None,
            Phase::Running { agent_at_ms, sync_at_ms, .. } => match (agent_at_ms, sync_at_ms) {
                (Some(a), Some(s)) => Some(*a.min(s)),
                (a, s) => a.or(*s),
            },
            Phase::Firmware { at_ms, .. }
            | Phase::Dhcp { at_ms, .. }
            | Phase::Pxe { at_ms }
            | Phase::LoadEphemeral { at_ms, .. }
            | Phase::Resolve { at_ms, .. }
            | Phase::FetchMetadata { at_ms, .. }
            | Phase::Script { at_ms, .. }
            | Phase::Signal { at_ms, .. }
            | Phase::ReportFailure { at_ms, .. }
            | Phase::Install { at_ms, .. }
            | Phase::InstallDone { at_ms, .. }
            | Phase::Reboot { at_ms }
            | Phase::DiskBoot { at_ms }
            | Phase::PowerOff { at_ms } => Some(*at_ms),
        }
    }

    /// When the machine next changes on its own: its next wakeup, except a running machine's periodic hardware
    /// sync (a steady heartbeat of the site, not a change); its agent's enrolment still is one.
    pub fn next_change_ms(&self) -> Option<u64> {
        match &self.phase {
            Phase::Running { agent_at_ms, .. } => *agent_at_ms,
            _ => self.next_wakeup_ms(),
        }
    }

    /// The action due at `now_ms`, if any. The caller must answer it with [`Machine::handle_result`] before polling
    /// again.
    pub fn poll_action(&mut self, now_ms: u64) -> Option<MachineAction> {
        if self.awaiting || self.next_wakeup_ms().is_none_or(|at_ms| at_ms > now_ms) {
            return None;
        }
        let action = match &mut self.phase {
            Phase::Off | Phase::Stalled(_) => return None,
            Phase::Firmware { boot, .. } => {
                // The firmware itself takes no network action; the boot source decides the next phase.
                let boot = *boot;
                self.after_firmware(now_ms, boot);
                return self.poll_action(now_ms);
            }
            Phase::Dhcp { .. } => {
                let nic = self.hardware.pxe_nic()?;
                MachineAction::DhcpDiscover { mac: nic.mac.clone(), vlan_id: nic.vlan_id }
            }
            Phase::Pxe { .. } => MachineAction::PxeRequest { mac: self.hardware.pxe_nic()?.mac.clone() },
            Phase::LoadEphemeral { system_id, .. } => MachineAction::LoadEphemeral { system_id: system_id.clone() },
            Phase::Resolve { .. } => MachineAction::Resolve { name: METADATA_HOST.to_owned() },
            Phase::FetchMetadata { system_id, context, .. } => {
                let (kind, hardware) = match context {
                    Context::Ephemeral(Purpose::Enlistment) => (MetadataKind::Enlist, Some(self.hardware.report())),
                    Context::Ephemeral(Purpose::Commissioning) => (MetadataKind::CommissioningUserData, None),
                    Context::Ephemeral(Purpose::Installation) => (MetadataKind::InstallConfig, None),
                    Context::DeployedOs => (MetadataKind::DeployedUserData, None),
                };
                MachineAction::FetchMetadata { system_id: system_id.clone(), kind, hardware }
            }
            Phase::Script { system_id, scripts, index, .. } => {
                let name = scripts[*index].name.clone();
                let passed = self.faults.fail_script.as_deref() != Some(name.as_str());
                MachineAction::ScriptDone { system_id: system_id.clone(), name, passed }
            }
            Phase::Signal { system_id, ok, .. } => {
                MachineAction::Signal { system_id: system_id.clone(), ok: *ok, hardware: self.hardware.report() }
            }
            Phase::ReportFailure { system_id, .. } => MachineAction::CloudInitFailed { system_id: system_id.clone() },
            Phase::Install { system_id, stage, .. } => {
                MachineAction::CurtinStageStarted { system_id: system_id.clone(), stage: CurtinStage::ALL[*stage] }
            }
            Phase::InstallDone { system_id, ok, .. } => {
                MachineAction::CurtinFinished { system_id: system_id.clone(), ok: *ok }
            }
            Phase::Reboot { .. } => MachineAction::Reboot,
            Phase::DiskBoot { .. } => {
                // The installed OS reached cloud-init: from here it is like the ephemeral's datasource search.
                let deadline_ms = now_ms + self.timings.metadata_max_wait_ms;
                let system_id = self.installed_system_id.clone();
                self.phase = Phase::Resolve { at_ms: now_ms, deadline_ms, system_id, context: Context::DeployedOs };
                return self.poll_action(now_ms);
            }
            Phase::Running { system_id, agent_at_ms, sync_at_ms } => {
                if agent_at_ms.is_some_and(|at_ms| at_ms <= now_ms) {
                    *agent_at_ms = None;
                    self.agent_enrolled = true;
                    let token = self.agent_token.clone().unwrap_or_default();
                    MachineAction::AgentEnrol { system_id: system_id.clone(), token }
                } else if sync_at_ms.is_some_and(|at_ms| at_ms <= now_ms) {
                    MachineAction::HwSync { system_id: system_id.clone() }
                } else {
                    return None;
                }
            }
            Phase::PowerOff { .. } => MachineAction::PowerOff,
        };
        self.awaiting = true;
        Some(action)
    }

    /// Feeds back the answer to the last polled action. Returns the stall the machine entered, if it stalled.
    pub fn handle_result(&mut self, now_ms: u64, result: ActionResult) -> Option<Stall> {
        if !self.awaiting {
            // A power transition while the action was in flight already moved the machine on.
            return None;
        }
        self.awaiting = false;
        let timings = self.timings;
        let phase = std::mem::replace(&mut self.phase, Phase::Off);
        self.phase = match (phase, result) {
            (Phase::Dhcp { .. }, ActionResult::Dhcp(Some(lease))) => {
                self.lease = Some(lease);
                Phase::Pxe { at_ms: now_ms }
            }
            (Phase::Dhcp { attempts, .. }, _) if attempts + 1 < timings.dhcp_attempts_max => {
                Phase::Dhcp { at_ms: now_ms + timings.dhcp_retry_ms, attempts: attempts + 1 }
            }
            (Phase::Dhcp { .. }, _) => self.boot_disk_or(now_ms, Stall::NoDhcpOffer),
            (Phase::Pxe { .. }, ActionResult::Pxe(PxeAnswer::Ephemeral { system_id, purpose })) => {
                Phase::LoadEphemeral { at_ms: now_ms + timings.tftp_ms, system_id, purpose }
            }
            (Phase::Pxe { .. }, _) => self.boot_disk_or(now_ms, Stall::NoBootableDevice),
            // Deviation from real MAAS: "Loading ephemeral" is logged at the start of the squashfs fetch, which
            // always completes (no MTU black hole: the 2026-07-20 record exonerated it for a 1500 VLAN).
            // Deviation from real MAAS (documented choice): the enlistment ephemeral reaches the metadata service at
            // the rack's address, so an unknown MAC enlists even when the rack resolver fails; only commissioning and
            // later boots use the maas-internal name (seed 001: every post-apply boot was "an unknown node" while
            // the resolver SERVFAILed).
            (Phase::LoadEphemeral { system_id, purpose: Purpose::Enlistment, .. }, _) => Phase::FetchMetadata {
                at_ms: now_ms + timings.ephemeral_boot_ms,
                system_id,
                context: Context::Ephemeral(Purpose::Enlistment),
            },
            (Phase::LoadEphemeral { system_id, purpose, .. }, _) => {
                let at_ms = now_ms + timings.ephemeral_boot_ms;
                let deadline_ms = at_ms + timings.metadata_max_wait_ms;
                Phase::Resolve { at_ms, deadline_ms, system_id, context: Context::Ephemeral(purpose) }
            }
            (Phase::Resolve { system_id, context, .. }, ActionResult::Dns(DnsAnswer::NoError { .. })) => {
                Phase::FetchMetadata { at_ms: now_ms, system_id, context }
            }
            (Phase::Resolve { deadline_ms, system_id, context, .. }, _) => {
                if now_ms + timings.metadata_retry_ms <= deadline_ms {
                    Phase::Resolve { at_ms: now_ms + timings.metadata_retry_ms, deadline_ms, system_id, context }
                } else {
                    Phase::Stalled(Stall::NoDatasource)
                }
            }
            (Phase::FetchMetadata { system_id, context, .. }, ActionResult::Metadata(reply)) => {
                self.after_metadata(now_ms, system_id, context, reply)
            }
            (Phase::FetchMetadata { system_id, context, .. }, _) => {
                // No answer: cloud-init keeps polling the metadata service.
                Phase::FetchMetadata { at_ms: now_ms + timings.metadata_retry_ms, system_id, context }
            }
            (Phase::Script { system_id, scripts, index, failed, .. }, _) => {
                let failed = failed || self.faults.fail_script.as_deref() == Some(scripts[index].name.as_str());
                self.next_script(now_ms, system_id, scripts, index + 1, failed)
            }
            (Phase::Signal { .. }, _) => Phase::PowerOff { at_ms: now_ms + timings.shutdown_ms },
            (Phase::ReportFailure { .. }, _) => Phase::Stalled(Stall::CloudInitFailed),
            (Phase::Install { system_id, boot_disk_serial, stage, .. }, _) => {
                let disk_present = boot_disk_serial.as_ref().is_some_and(|serial| {
                    self.hardware.disks.iter().any(|disk| disk.present && &disk.serial == serial)
                });
                if stage == 0 && !disk_present {
                    Phase::InstallDone { at_ms: now_ms + timings.install_stage_ms, system_id, ok: false }
                } else if stage + 1 < CurtinStage::ALL.len() {
                    Phase::Install {
                        at_ms: now_ms + timings.install_stage_ms,
                        system_id,
                        boot_disk_serial,
                        stage: stage + 1,
                    }
                } else {
                    Phase::InstallDone { at_ms: now_ms + timings.install_stage_ms, system_id, ok: true }
                }
            }
            (Phase::InstallDone { ok: true, system_id, .. }, _) => {
                self.os_installed = true;
                self.installed_system_id = Some(system_id);
                Phase::Reboot { at_ms: now_ms }
            }
            (Phase::InstallDone { ok: false, .. }, _) => Phase::Stalled(Stall::InstallFailed),
            (Phase::Reboot { .. }, ActionResult::Boot(boot)) => {
                self.lease = None;
                Phase::Firmware { at_ms: now_ms + timings.firmware_ms, boot }
            }
            (Phase::Reboot { at_ms }, _) => Phase::Reboot { at_ms },
            (Phase::Running { system_id, agent_at_ms, sync_at_ms }, _) => {
                let sync_at_ms = match sync_at_ms {
                    Some(at_ms) if at_ms <= now_ms => {
                        self.hw_syncs += 1;
                        let stopped = self.hw_sync_stopped();
                        match self.hw_sync_interval_s {
                            Some(interval_s) if !stopped => Some(now_ms + interval_s * 1000),
                            _ => None,
                        }
                    }
                    other => other,
                };
                Phase::Running { system_id, agent_at_ms, sync_at_ms }
            }
            (Phase::PowerOff { at_ms }, _) => Phase::PowerOff { at_ms },
            (phase @ (Phase::Off | Phase::Stalled(_) | Phase::Firmware { .. } | Phase::DiskBoot { .. }), _) => phase,
        };
        self.stall()
    }

    fn after_firmware(&mut self, now_ms: u64, boot: BootTarget) {
        self.phase = match boot {
            BootTarget::Pxe => Phase::Dhcp { at_ms: now_ms, attempts: 0 },
            // The firmware's boot order falls through to the network when the disk has nothing to boot.
            // Deviation from real hardware: the boot order is fixed (disk, then network) and not configurable.
            BootTarget::Hdd if self.os_installed => Phase::DiskBoot { at_ms: now_ms + self.timings.os_boot_ms },
            BootTarget::Hdd => Phase::Dhcp { at_ms: now_ms, attempts: 0 },
        };
    }

    fn boot_disk_or(&self, now_ms: u64, stall: Stall) -> Phase {
        if self.os_installed {
            Phase::DiskBoot { at_ms: now_ms + self.timings.os_boot_ms }
        } else {
            Phase::Stalled(stall)
        }
    }

    fn after_metadata(
        &mut self,
        now_ms: u64,
        system_id: Option<String>,
        context: Context,
        reply: MetadataReply,
    ) -> Phase {
        let timings = self.timings;
        if let MetadataReply::Refused { .. } = reply {
            return Phase::Stalled(Stall::MetadataRefused);
        }
        let known = match (&reply, system_id) {
            (MetadataReply::Enlisted { system_id }, _) => system_id.clone(),
            (_, Some(system_id)) => system_id,
            (_, None) => String::new(),
        };
        if self.faults.datasource_failure && context != Context::Ephemeral(Purpose::Enlistment) {
            return Phase::ReportFailure { at_ms: now_ms, system_id: known };
        }
        match reply {
            MetadataReply::Enlisted { .. } => Phase::PowerOff { at_ms: now_ms + timings.enlistment_ms },
            MetadataReply::Scripts(scripts) => self.next_script(now_ms, known, scripts, 0, false),
            MetadataReply::Install { boot_disk_serial } => {
                // A new install: the next deployed OS enrols its agent again.
                self.forget_deployment();
                Phase::Install { at_ms: now_ms, system_id: known, boot_disk_serial, stage: 0 }
            }
            MetadataReply::UserData { user_data, hw_sync_interval_s } => {
                // The first boot of a deployment starts the agent; later boots find it enrolled already.
                let token = user_data.as_ref().and_then(|data| bootstrap_token(data.expose()));
                let agent_at_ms = match token {
                    Some(token) if !self.agent_enrolled => {
                        self.agent_token = Some(token);
                        Some(now_ms + self.faults.agent_enrol_delay_ms)
                    }
                    _ => None,
                };
                self.hw_sync_interval_s = hw_sync_interval_s;
                // The timer runs from its seed on; a first boot waits for the seed (the workflow's SSH call).
                let sync_at_ms = (hw_sync_interval_s.is_some() && self.hw_sync_seeded).then_some(now_ms);
                Phase::Running { system_id: known, agent_at_ms, sync_at_ms }
            }
            MetadataReply::Refused { .. } => Phase::Stalled(Stall::MetadataRefused),
        }
    }

    fn next_script(
        &self,
        now_ms: u64,
        system_id: String,
        scripts: Vec<ScriptSpec>,
        index: usize,
        failed: bool,
    ) -> Phase {
        match scripts.get(index) {
            None => Phase::Signal { at_ms: now_ms, system_id, ok: !failed },
            Some(script) if self.faults.hang_script.as_deref() == Some(script.name.as_str()) => {
                Phase::Stalled(Stall::ScriptHung)
            }
            Some(script) => {
                let at_ms = now_ms + self.faults.script_interval_ms.unwrap_or(script.duration_ms);
                Phase::Script { at_ms, system_id, scripts, index, failed }
            }
        }
    }

    /// A new deployment: forget the previous deployment's agent enrolment and OS.
    pub fn forget_deployment(&mut self) {
        self.agent_token = None;
        self.agent_enrolled = false;
        self.hw_sync_interval_s = None;
        self.hw_sync_seeded = false;
        self.hw_syncs = 0;
    }

    /// The hardware-sync seed, run over SSH on the deployed OS: registers the sync timer with the machine's own
    /// MAAS credentials and starts it. Idempotent once seeded.
    pub fn seed_hw_sync(&mut self, now_ms: u64) -> Result<(), SeedError> {
        let stopped = self.hw_sync_stopped();
        let Phase::Running { sync_at_ms, .. } = &mut self.phase else {
            return Err(SeedError::NotRunning);
        };
        if self.faults.hw_sync == HwSyncFault::SeedFails {
            return Err(SeedError::Rejected);
        }
        if self.hw_sync_interval_s.is_none() {
            return Err(SeedError::NotEnabled);
        }
        if !self.hw_sync_seeded {
            self.hw_sync_seeded = true;
            *sync_at_ms = (!stopped).then_some(now_ms);
        } else if stopped {
            // A second seed re-registers the timer with fresh credentials: the engine's reseed
            // (`node.hw_sync_reseed`), which restarts a service that stopped reporting.
            self.faults.hw_sync = HwSyncFault::None;
            self.hw_syncs = 0;
            *sync_at_ms = Some(now_ms);
        }
        Ok(())
    }

    /// Whether a `StopsAfter` fault has used up its reports.
    fn hw_sync_stopped(&self) -> bool {
        matches!(self.faults.hw_sync, HwSyncFault::StopsAfter { syncs } if self.hw_syncs >= syncs)
    }
}

/// The key of the user-data line the node agent reads its bootstrap token from.
pub const BOOTSTRAP_TOKEN_KEY: &str = "fleetsim_bootstrap_token";

/// Reads the bootstrap token from user-data: a line `fleetsim_bootstrap_token: <value>`, in the user-data as given
/// or base64-decoded (MAAS serves base64 user-data decoded). Deviation from real cloud-init: the fake node does not
/// run the user-data; it reads this one key.
pub fn bootstrap_token(user_data: &str) -> Option<Secret> {
    let decoded = decode_base64(user_data).and_then(|bytes| String::from_utf8(bytes).ok());
    let text = decoded.as_deref().unwrap_or(user_data);
    text.lines().find_map(|line| {
        let value = line.trim().strip_prefix(BOOTSTRAP_TOKEN_KEY)?.trim_start().strip_prefix(':')?.trim();
        (!value.is_empty()).then(|| Secret::new(value.trim_matches('"')))
    })
}

/// Standard base64 (with or without whitespace and padding), as MAAS's `prepare_user_data` accepts it.
pub fn decode_base64(text: &str) -> Option<Vec<u8>> {
    let mut bits: u32 = 0;
    let mut count = 0;
    let mut out = Vec::new();
    let mut padding = false;
    for byte in text.bytes().filter(|byte| !byte.is_ascii_whitespace()) {
        let value = match byte {
            b'A'..=b'Z' => byte - b'A',
            b'a'..=b'z' => byte - b'a' + 26,
            b'0'..=b'9' => byte - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' => {
                padding = true;
                continue;
            }
            _ => return None,
        };
        if padding {
            return None;
        }
        bits = (bits << 6) | u32::from(value);
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push((bits >> count) as u8);
        }
    }
    (!out.is_empty()).then_some(out)
}

/// Standard base64 with padding (for tests and for the engine-side rendering the simulator does).
pub fn encode_base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let word = chunk.iter().enumerate().fold(0u32, |word, (i, byte)| word | (u32::from(*byte) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((word >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine() -> Machine {
        Machine::new("node-01", HardwareProfile::gpu_node(5, 5001, 5002), BootTimings::default())
    }

    #[test]
    fn mac_drift_regenerates_every_mac_deterministically_at_the_next_power_on_only() {
        let mut a = machine();
        let mut b = machine();
        let before: Vec<String> = a.hardware().nics.iter().map(|nic| nic.mac.clone()).collect();
        a.faults.mac_drift_seed = Some(99);
        b.faults.mac_drift_seed = Some(99);
        let drifted = a.power_on(0, BootTarget::Pxe);
        assert_eq!(drifted, b.power_on(0, BootTarget::Pxe));
        assert_eq!(drifted.len(), 4);
        for ((old, new), original) in drifted.iter().zip(&before) {
            assert_eq!(old, original);
            assert_ne!(old, new);
            assert!(new.starts_with("52:54:00:"));
        }
        a.power_off();
        assert!(a.power_on(1, BootTarget::Pxe).is_empty(), "the drift applied once");
    }

    #[test]
    fn the_firmware_pxe_boots_with_the_current_mac_and_stalls_without_an_offer() {
        let mut machine = machine();
        machine.power_on(0, BootTarget::Pxe);
        assert_eq!(machine.poll_action(0), None, "the firmware takes its time");
        let mac = machine.hardware().pxe_nic().unwrap().mac.clone();
        let mut at_ms = BootTimings::default().firmware_ms;
        for _ in 0..BootTimings::default().dhcp_attempts_max {
            assert_eq!(
                machine.poll_action(at_ms),
                Some(MachineAction::DhcpDiscover { mac: mac.clone(), vlan_id: 5001 })
            );
            machine.handle_result(at_ms, ActionResult::Dhcp(None));
            at_ms += BootTimings::default().dhcp_retry_ms;
        }
        assert_eq!(machine.stall(), Some(Stall::NoDhcpOffer));
        assert_eq!(machine.next_wakeup_ms(), None);
    }

    #[test]
    fn the_hardware_report_leaves_out_absent_parts() {
        let mut machine = machine();
        assert!(machine.remove_disk("sda"));
        assert!(machine.remove_nic("ens1f0np0"));
        assert!(!machine.remove_nic("nope"));
        let report = machine.hardware().report();
        assert!(!report.disks.iter().any(|disk| disk.boss));
        assert_eq!(report.nics.iter().filter(|nic| nic.kind == NicKind::Roce).count(), 1);
    }

    #[test]
    fn the_bootstrap_token_is_read_from_plain_or_base64_user_data() {
        let plain = format!("#cloud-config\n{BOOTSTRAP_TOKEN_KEY}: \"fleetsim-secret-abc\"\n");
        assert_eq!(bootstrap_token(&plain).unwrap().expose(), "fleetsim-secret-abc");
        let encoded = encode_base64(plain.as_bytes());
        assert_eq!(decode_base64(&encoded).unwrap(), plain.as_bytes());
        assert_eq!(bootstrap_token(&encoded).unwrap().expose(), "fleetsim-secret-abc");
        assert_eq!(bootstrap_token("#cloud-config\n"), None);
        assert_eq!(encode_base64(b"ab"), "YWI=");
    }
}
