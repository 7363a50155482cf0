//! The MAAS site fakes: a region (with the rack's boot and metadata services), the BMC service, the rack's DHCP
//! server and resolver, the site's secrets store, and the physical machines — pure deterministic models with request
//! handlers and no I/O. An HTTP front end and the simulator's translation into the engine's port types come later.
//!
//! [`Site`] owns them all. [`Site::advance`] drives every boot and the status monitor to `now_ms`, in time order;
//! the `handle_*` methods answer requests (first advancing to `now_ms`). Everything that happened comes back as
//! [`SiteEvent`]s, in the order it happened.
//!
//! The site's networks: the metal-admin VLAN (`PXE_VLAN_ID`, MTU 1500, DHCP on) with subnet `10.10.0.0/24`, and the
//! RoCE VLAN (`ROCE_VLAN_ID`, MTU 9000, no DHCP) with subnet `10.20.0.0/24`; the rack (DHCP, resolver, metadata) is at
//! `RACK_ADDRESS`.
//!
//! Architecture Invariant: nothing here reads a clock, draws from an unseeded RNG or iterates a hash container; the
//! same seed and the same calls give the same events, byte for byte.

pub mod bmc;
pub mod dhcp;
pub mod dns;
pub mod machine;
pub mod region;
pub mod status;
pub mod vault;

use std::collections::BTreeMap;

pub use bmc::{BasicAuth, Bmc, BmcFault, BootTarget, PowerState, PowerTransition, RedfishRequest, RedfishResponse};
pub use dhcp::{Dhcp, DhcpFault, DhcpScope, Lease};
pub use dns::{Dns, DnsAnswer, DnsFault, METADATA_HOST};
pub use machine::{
    ActionResult, BootTimings, HardwareProfile, HwSyncFault, Machine, MachineAction, MachineFaults, SeedError, Stall,
};
pub use region::{EventLevel, EventsQuery, MaasBody, MaasRequest, MaasResponse, Region, RegionConfig};
pub use status::NodeStatus;
pub use vault::{PowerCredential, Secret, Vault, VaultError, VaultRequest, VaultResponse};

use region::{PowerParameters, Subnet, Vlan};

pub const PXE_VLAN_ID: u64 = 5001;
pub const ROCE_VLAN_ID: u64 = 5002;
pub const PXE_SUBNET_ID: u64 = 1;
pub const ROCE_SUBNET_ID: u64 = 2;
pub const RACK_ADDRESS: &str = "10.10.0.2";

/// The bound on steps one call to [`Site::advance`] may take: a site that never settles is a bug.
pub const STEPS_PER_ADVANCE_MAX: u64 = 1_000_000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteConfig {
    /// Feeds the region's ids and names, the vault's tokens and the machines' hardware.
    pub seed: u64,
    pub region: RegionConfig,
    pub timings: BootTimings,
}

impl SiteConfig {
    pub fn new(seed: u64) -> SiteConfig {
        SiteConfig { seed, region: RegionConfig::default(), timings: BootTimings::default() }
    }
}

/// Something that happened at the site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteEvent {
    pub at_ms: u64,
    pub kind: SiteEventKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SiteEventKind {
    /// An event MAAS logged (what `op=query` returns).
    MaasEvent {
        id: u64,
        system_id: String,
        level: EventLevel,
        event_type: String,
        description: String,
    },
    /// A machine row was written: created (`from: None`) or changed status.
    StatusWritten {
        system_id: String,
        from: Option<NodeStatus>,
        to: NodeStatus,
    },
    /// An unknown MAC's enlistment created a machine.
    Enlisted {
        machine: String,
        system_id: String,
    },
    Power {
        machine: String,
        state: PowerState,
        boot: Option<BootTarget>,
    },
    /// A pending MAC drift applied at power-on: `(old, new)` per NIC.
    MacsDrifted {
        machine: String,
        macs: Vec<(String, String)>,
    },
    Dhcp {
        machine: String,
        mac: String,
        ip: Option<String>,
        mtu_option: Option<u16>,
    },
    Pxe {
        machine: String,
        mac: String,
        system_id: Option<String>,
    },
    DnsQuery {
        client: String,
        name: String,
        answer: DnsAnswer,
    },
    Stalled {
        machine: String,
        stall: Stall,
    },
    /// Outward effect: the machine's node agent enrols with the hub using `token`.
    AgentEnrol {
        machine: String,
        system_id: String,
        token: Secret,
    },
    HardwareSync {
        machine: String,
        system_id: String,
    },
}

/// A MAAS site.
#[derive(Debug, Clone)]
pub struct Site {
    pub region: Region,
    pub bmc: Bmc,
    pub dhcp: Dhcp,
    pub dns: Dns,
    pub vault: Vault,
    machines: BTreeMap<String, Machine>,
    timings: BootTimings,
    seed: u64,
    now_ms: u64,
    events_seen: usize,
    transitions_seen: usize,
}

impl Site {
    pub fn new(config: SiteConfig) -> Site {
        let mut region = Region::new(config.seed, config.region);
        region.add_vlan(Vlan {
            id: PXE_VLAN_ID,
            vid: 0,
            name: "untagged".into(),
            fabric_id: 0,
            mtu: 1500,
            dhcp_on: true,
        });
        region.add_vlan(Vlan {
            id: ROCE_VLAN_ID,
            vid: 0,
            name: "untagged".into(),
            fabric_id: 1,
            mtu: 9000,
            dhcp_on: false,
        });
        region.add_subnet(Subnet {
            id: PXE_SUBNET_ID,
            name: "metal-admin".into(),
            cidr: "10.10.0.0/24".into(),
            vlan_id: PXE_VLAN_ID,
            gateway_ip: "10.10.0.1".into(),
            dns_servers: vec![RACK_ADDRESS.into()],
        });
        region.add_subnet(Subnet {
            id: ROCE_SUBNET_ID,
            name: "roce".into(),
            cidr: "10.20.0.0/24".into(),
            vlan_id: ROCE_VLAN_ID,
            gateway_ip: "10.20.0.1".into(),
            dns_servers: Vec::new(),
        });
        let mut site_config = BTreeMap::new();
        site_config.insert("maas_url".to_owned(), format!("http://{METADATA_HOST}:5240/MAAS"));
        site_config.insert("enabled".to_owned(), "true".to_owned());
        let mut site = Site {
            region,
            bmc: Bmc::new(),
            dhcp: Dhcp::new(),
            dns: Dns::new(RACK_ADDRESS),
            vault: Vault::new(splitmix(config.seed, 1), site_config),
            machines: BTreeMap::new(),
            timings: config.timings,
            seed: config.seed,
            now_ms: 0,
            events_seen: 0,
            transitions_seen: 0,
        };
        site.sync_dhcp();
        site
    }

    pub fn now_ms(&self) -> u64 {
        self.now_ms
    }

    /// The seed the site was built from (the HTTP front end mints its API keys and tokens from it).
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Racks a machine: a GPU-node profile from the site seed, a BMC system named `name` whose login is returned
    /// (and stored in the vault as that node's override).
    pub fn add_machine(&mut self, name: &str) -> PowerCredential {
        let index = self.machines.len() as u64 + 1;
        let profile = HardwareProfile::gpu_node(splitmix(self.seed, 100 + index) & !0xF, PXE_VLAN_ID, ROCE_VLAN_ID);
        self.add_machine_with(name, profile)
    }

    pub fn add_machine_with(&mut self, name: &str, profile: HardwareProfile) -> PowerCredential {
        let index = self.machines.len() as u64 + 1;
        let credential = PowerCredential {
            user: "root".to_owned(),
            password: Secret::mint("bmc", splitmix(self.seed, 200 + index)),
        };
        self.bmc.add_system(name, credential.clone());
        let put = VaultRequest::PutPowerCredential { node: Some(name.to_owned()), credential: credential.clone() };
        self.vault.handle(self.now_ms, put).expect("a fresh store accepts a credential");
        self.machines.insert(name.to_owned(), Machine::new(name, profile, self.timings));
        credential
    }

    pub fn machine(&self, name: &str) -> Option<&Machine> {
        self.machines.get(name)
    }

    /// For fault knobs on a machine ([`Machine::faults`], [`Machine::remove_disk`], ...).
    pub fn machine_mut(&mut self, name: &str) -> Option<&mut Machine> {
        self.machines.get_mut(name)
    }

    pub fn machine_names(&self) -> Vec<String> {
        self.machines.keys().cloned().collect()
    }

    /// Fault: every NIC MAC of `machine` is regenerated from `seed` at its next power-on.
    pub fn drift_macs_at_next_power_cycle(&mut self, machine: &str, seed: u64) {
        if let Some(machine) = self.machines.get_mut(machine) {
            machine.faults.mac_drift_seed = Some(seed);
        }
    }

    /// The `create machine` request an operator would make for `machine`: its PXE MAC and its BMC login.
    pub fn create_request(&self, machine: &str, hostname: &str, commission: bool) -> Option<MaasRequest> {
        let physical = self.machines.get(machine)?;
        let (credential, _) = self.vault.power_credential(machine)?;
        Some(MaasRequest::CreateMachine(region::CreateMachine {
            hostname: Some(hostname.to_owned()),
            architecture: "amd64".to_owned(),
            mac_addresses: vec![physical.hardware().pxe_nic()?.mac.clone()],
            power_type: "redfish".to_owned(),
            power_parameters: PowerParameters {
                power_address: machine.to_owned(),
                power_user: credential.user,
                power_pass: credential.password,
            },
            commission,
        }))
    }

    /// When something next happens without a request, if ever.
    pub fn next_wakeup_ms(&self) -> Option<u64> {
        let machines = self.machines.values().filter_map(Machine::next_wakeup_ms).min();
        let monitor = self.region.monitor_wakeup_ms(self.now_ms);
        match (machines, monitor) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether the site changes on its own from now on only by its running machines' periodic hardware sync: no
    /// machine is in a timed boot phase or awaits its agent, and no machine's status has a deadline the status
    /// monitor will enforce.
    pub fn at_rest(&self) -> bool {
        self.machines.values().all(|machine| machine.next_change_ms().is_none())
            && self.region.monitor_wakeup_ms(self.now_ms).is_none()
    }

    /// Runs every boot and the status monitor up to `now_ms`, in time order.
    pub fn advance(&mut self, now_ms: u64) -> Vec<SiteEvent> {
        let mut events = Vec::new();
        self.run_until(now_ms, &mut events);
        events
    }

    /// A REST request to the region by `caller`. `None`: no answer.
    pub fn handle_maas(
        &mut self,
        now_ms: u64,
        caller: &str,
        request: MaasRequest,
        events: &mut Vec<SiteEvent>,
    ) -> Option<MaasResponse> {
        self.run_until(now_ms, events);
        let vlan_change = matches!(request, MaasRequest::UpdateVlan { .. });
        let response = self.region.handle(self.now_ms, caller, request, &mut self.bmc);
        if vlan_change {
            // A VLAN MTU change makes MAAS reconfigure dhcpd.
            self.sync_dhcp();
        }
        self.apply_power(self.now_ms, events);
        self.collect_region(events);
        response
    }

    /// A Redfish request straight to the BMC (the engine's own power cycle for discovery). `None`: no answer.
    pub fn handle_redfish(
        &mut self,
        now_ms: u64,
        auth: &BasicAuth,
        request: RedfishRequest,
        events: &mut Vec<SiteEvent>,
    ) -> Option<RedfishResponse> {
        self.run_until(now_ms, events);
        let response = self.bmc.handle(auth, request);
        self.apply_power(self.now_ms, events);
        response
    }

    /// A query to the rack resolver from `client` (the engine's resolver probe).
    pub fn handle_dns(&mut self, now_ms: u64, client: &str, name: &str, events: &mut Vec<SiteEvent>) -> DnsAnswer {
        self.run_until(now_ms, events);
        let answer = self.dns.resolve(name);
        events.push(SiteEvent {
            at_ms: self.now_ms,
            kind: SiteEventKind::DnsQuery { client: client.to_owned(), name: name.to_owned(), answer: answer.clone() },
        });
        answer
    }

    pub fn handle_vault(
        &mut self,
        now_ms: u64,
        request: VaultRequest,
        events: &mut Vec<SiteEvent>,
    ) -> Result<VaultResponse, VaultError> {
        self.run_until(now_ms, events);
        self.vault.handle(self.now_ms, request)
    }

    /// Re-reads the DHCP-served VLANs from the region.
    fn sync_dhcp(&mut self) {
        let scopes: Vec<DhcpScope> = self
            .region
            .subnets()
            .filter_map(|subnet| {
                let vlan = self.region.vlan(subnet.vlan_id)?;
                vlan.dhcp_on.then(|| DhcpScope {
                    vlan_id: vlan.id,
                    mtu: vlan.mtu,
                    cidr: subnet.cidr.clone(),
                    gateway_ip: subnet.gateway_ip.clone(),
                    dns_server: RACK_ADDRESS.to_owned(),
                })
            })
            .collect();
        for scope in scopes {
            self.dhcp.configure(scope);
        }
    }

    fn run_until(&mut self, now_ms: u64, events: &mut Vec<SiteEvent>) {
        let mut steps = 0u64;
        while let Some(at_ms) = self.next_wakeup_ms().filter(|at_ms| *at_ms <= now_ms) {
            let at_ms = at_ms.max(self.now_ms);
            self.now_ms = at_ms;
            self.step(at_ms, events);
            steps += 1;
            assert!(steps < STEPS_PER_ADVANCE_MAX, "the site did not settle before {now_ms} ms");
        }
        self.now_ms = self.now_ms.max(now_ms);
    }

    /// Everything due at `at_ms`: machines in name order, then the status monitor.
    fn step(&mut self, at_ms: u64, events: &mut Vec<SiteEvent>) {
        let due: Vec<String> = self
            .machines
            .iter()
            .filter(|(_, machine)| machine.next_wakeup_ms().is_some_and(|wake_ms| wake_ms <= at_ms))
            .map(|(name, _)| name.clone())
            .collect();
        for name in due {
            let mut actions = 0;
            while let Some(action) = self.machines.get_mut(&name).and_then(|machine| machine.poll_action(at_ms)) {
                let result = self.perform(at_ms, &name, action, events);
                let stall = self.machines.get_mut(&name).and_then(|machine| machine.handle_result(at_ms, result));
                if let Some(stall) = stall {
                    events.push(SiteEvent { at_ms, kind: SiteEventKind::Stalled { machine: name.clone(), stall } });
                }
                self.collect_region(events);
                actions += 1;
                assert!(actions < machine::ACTIONS_PER_INSTANT_MAX, "machine {name} loops at {at_ms} ms");
            }
        }
        if self.region.monitor_wakeup_ms(at_ms.saturating_sub(1)).is_some_and(|tick_ms| tick_ms <= at_ms) {
            self.region.monitor_tick(at_ms, &mut self.bmc);
            self.apply_power(at_ms, events);
            self.collect_region(events);
        }
    }

    fn perform(&mut self, at_ms: u64, name: &str, action: MachineAction, events: &mut Vec<SiteEvent>) -> ActionResult {
        let push = |events: &mut Vec<SiteEvent>, kind| events.push(SiteEvent { at_ms, kind });
        match action {
            MachineAction::DhcpDiscover { mac, vlan_id } => {
                let lease = self.dhcp.discover(at_ms, &mac, vlan_id);
                let mtu_option = lease.as_ref().and_then(|lease| {
                    lease.options.iter().find_map(|option| match option {
                        dhcp::DhcpOption::InterfaceMtu { mtu } => Some(*mtu),
                        _ => None,
                    })
                });
                let ip = lease.as_ref().map(|lease| lease.ip.clone());
                push(events, SiteEventKind::Dhcp { machine: name.to_owned(), mac, ip, mtu_option });
                ActionResult::Dhcp(lease)
            }
            MachineAction::PxeRequest { mac } => {
                let answer = self.region.pxe_request(at_ms, &mac);
                let system_id = match &answer {
                    Some(machine::PxeAnswer::Ephemeral { system_id, .. }) => system_id.clone(),
                    _ => self.region.system_id_by_mac(&mac),
                };
                push(events, SiteEventKind::Pxe { machine: name.to_owned(), mac, system_id });
                answer.map_or(ActionResult::NoAnswer, ActionResult::Pxe)
            }
            MachineAction::LoadEphemeral { system_id } => {
                if self.region.load_ephemeral(at_ms, system_id.as_deref()) {
                    ActionResult::Done
                } else {
                    ActionResult::NoAnswer
                }
            }
            MachineAction::Resolve { name: query } => {
                let answer = self.dns.resolve(&query);
                push(events, SiteEventKind::DnsQuery { client: name.to_owned(), name: query, answer: answer.clone() });
                ActionResult::Dns(answer)
            }
            MachineAction::FetchMetadata { system_id, kind, hardware } => {
                let reply = self.region.metadata(at_ms, system_id.as_deref(), kind, hardware.as_ref());
                if let Some(machine::MetadataReply::Enlisted { system_id }) = &reply {
                    // The enlistment ephemeral's BMC detection: the new row names this machine's BMC (the BMC
                    // system is named as the machine).
                    self.region.record_detected_bmc(system_id, name);
                    push(events, SiteEventKind::Enlisted { machine: name.to_owned(), system_id: system_id.clone() });
                }
                reply.map_or(ActionResult::NoAnswer, ActionResult::Metadata)
            }
            MachineAction::ScriptDone { system_id, name: script, passed } => {
                self.region.script_result(at_ms, &system_id, &script, passed);
                ActionResult::Done
            }
            MachineAction::Signal { system_id, ok, hardware } => {
                self.region.signal(at_ms, &system_id, ok, &hardware);
                ActionResult::Done
            }
            MachineAction::CloudInitFailed { system_id } => {
                self.region.cloud_init_failed(at_ms, &system_id);
                ActionResult::Done
            }
            MachineAction::CurtinStageStarted { system_id, stage } => {
                self.region.curtin_stage(at_ms, &system_id, stage);
                ActionResult::Done
            }
            MachineAction::CurtinFinished { system_id, ok } => {
                self.region.curtin_finished(at_ms, &system_id, ok);
                ActionResult::Done
            }
            MachineAction::Reboot => match self.bmc.os_reboot(name) {
                Some(boot) => {
                    push(
                        events,
                        SiteEventKind::Power { machine: name.to_owned(), state: PowerState::On, boot: Some(boot) },
                    );
                    ActionResult::Boot(boot)
                }
                None => ActionResult::NoAnswer,
            },
            MachineAction::PowerOff => {
                self.bmc.os_power_off(name);
                self.apply_power(at_ms, events);
                ActionResult::Done
            }
            MachineAction::AgentEnrol { system_id, token } => {
                push(events, SiteEventKind::AgentEnrol { machine: name.to_owned(), system_id, token });
                ActionResult::Done
            }
            MachineAction::HwSync { system_id } => {
                self.region.hardware_sync(at_ms, &system_id);
                push(events, SiteEventKind::HardwareSync { machine: name.to_owned(), system_id });
                ActionResult::Done
            }
        }
    }

    /// Applies the BMC's power transitions to the machines.
    fn apply_power(&mut self, at_ms: u64, events: &mut Vec<SiteEvent>) {
        for transition in self.bmc.take_transitions() {
            match transition {
                PowerTransition::PoweredOn { system, boot } => {
                    let Some(machine) = self.machines.get_mut(&system) else { continue };
                    let drifted = machine.power_on(at_ms, boot);
                    if !drifted.is_empty() {
                        events.push(SiteEvent {
                            at_ms,
                            kind: SiteEventKind::MacsDrifted { machine: system.clone(), macs: drifted },
                        });
                    }
                    events.push(SiteEvent {
                        at_ms,
                        kind: SiteEventKind::Power { machine: system, state: PowerState::On, boot: Some(boot) },
                    });
                }
                PowerTransition::PoweredOff { system } => {
                    let Some(machine) = self.machines.get_mut(&system) else { continue };
                    machine.power_off();
                    events.push(SiteEvent {
                        at_ms,
                        kind: SiteEventKind::Power { machine: system, state: PowerState::Off, boot: None },
                    });
                }
            }
        }
    }

    /// Turns what the region logged since the last call into site events.
    fn collect_region(&mut self, events: &mut Vec<SiteEvent>) {
        for transition in &self.region.transitions()[self.transitions_seen..] {
            events.push(SiteEvent {
                at_ms: transition.at_ms,
                kind: SiteEventKind::StatusWritten {
                    system_id: transition.system_id.clone(),
                    from: transition.from,
                    to: transition.to,
                },
            });
        }
        self.transitions_seen = self.region.transitions().len();
        for event in &self.region.events()[self.events_seen..] {
            events.push(SiteEvent {
                at_ms: event.created_ms,
                kind: SiteEventKind::MaasEvent {
                    id: event.id,
                    system_id: event.node.clone(),
                    level: event.level,
                    event_type: event.event_type.clone(),
                    description: event.description.clone(),
                },
            });
        }
        self.events_seen = self.region.events().len();
    }
}

/// A child seed: `seed` mixed with a fixed per-use label.
fn splitmix(seed: u64, label: u64) -> u64 {
    vault::splitmix64(seed ^ label.wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

#[cfg(test)]
mod tests;
