//! The MAAS site in the simulated world (runs with an `[onboarding]` table only): the `maas` host that runs the
//! region, its rack (DHCP, resolver, boot and metadata services) and the site's secrets store; the physical machines
//! that boot in virtual time; their node agents, which enrol at the hub with their bootstrap token and heartbeat; the
//! adapters that give the engine its `MaasApi`, `Resolver` and `SiteSecrets` ports over the simulated network; and
//! the site's fault steps.
//!
//! The fakes (`fakes::maas::Site`) are a synchronous model; this module is its thin async driver. The machines are
//! not hosts: they are driven by one site task that sleeps until the site's next wakeup (or until a request pokes
//! it) and advances it, so they keep booting while the `maas` host is down (its region then answers nothing).
//! Their agents talk to the hub from the `maas` host's network position (one site network), so a `maas` crash stops
//! their heartbeats until it boots again.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use engine::ports::site::{self as port, MaasError};
use engine::ports::{SecretsError, TransportError};
use fakes::agent::{HEARTBEAT_INTERVAL_MS, HEARTBEAT_TIMEOUT_MS};
use fakes::hub::{AgentKind, Request, Response};
use fakes::maas::region::{CreateMachine, MachineView, PowerParameters};
use fakes::maas::{
    BmcFault, DhcpFault, DnsFault, EventsQuery, HwSyncFault, MaasBody, MaasRequest, MaasResponse, PowerCredential,
    Site, SiteConfig, SiteEvent, SiteEventKind, VaultError, VaultRequest, VaultResponse,
};
use rand::RngCore;
use rand_chacha::ChaCha8Rng;
use tokio::sync::Notify;

use crate::model::faults::{
    BmcFaultKind, DeathPoint, DeathSubsystem, HardwarePart, Step, fleet_step, host_step, instance_step, network_step,
    rollout_step,
};
use crate::model::seed::{Consumer, SeedTree};
use crate::model::spec::OnboardingSpec;
use crate::observe::trace::Body;
use crate::world::net::HostId;
use crate::world::plug::{SiteClients, SitePlug};
use crate::world::{Delivery, HUB_ID, World};

pub(crate) use fakes::http::{SharedSite, SiteFront};

/// Locks the front; a lock poisoned by a panic is taken anyway (the panic is what ends the run).
pub(crate) fn lock_front(front: &Mutex<SiteFront>) -> MutexGuard<'_, SiteFront> {
    front.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The MAAS user the controller's requests run as.
pub const CONTROLLER_MAAS_USER: &str = "controller";
/// The MAAS user of the operator's out-of-band actions (`machine_deleted`, `machine_advanced`, `register_macs`).
pub const OPERATOR_MAAS_USER: &str = "operator";
/// The commissioning script `script_hang` and `script_failure` act on (a builtin script of the default set).
pub const FAULTED_SCRIPT: &str = "50-maas-01-commissioning";
/// How long the site task sleeps when nothing is scheduled and nobody pokes it.
const SITE_IDLE_MS: u64 = 60_000;
/// Enrolment attempts an agent makes when the hub does not answer, one heartbeat interval apart.
const ENROL_ATTEMPTS_MAX: u32 = 20;

/// A machine as it was racked, before any fault: what the operator's inventory says.
#[derive(Debug, Clone)]
pub(crate) struct Racked {
    pub pxe_mac: String,
    /// Every NIC's MAC, in the profile's order.
    pub macs: Vec<String>,
    pub boot_disk_model: String,
    pub roce_nics: u32,
    pub credential: PowerCredential,
}

pub(crate) struct SiteState {
    pub racked: BTreeMap<String, Racked>,
    /// `maas_unreachable`: the region answers nothing, whatever the host's state.
    region_down: bool,
    /// Enrolled agents: node → the bearer token its heartbeats carry.
    pub enrolled: BTreeMap<String, String>,
    /// Enrolments under way: node → its machine's system id and its bootstrap token (restarted when the `maas` host
    /// boots again).
    pending: BTreeMap<String, (String, fakes::maas::Secret)>,
    faults_rng: ChaCha8Rng,
    /// `ssh_unreachable`: SSH connections to a machine still to go unanswered.
    ssh_unreachable: BTreeMap<String, u32>,
    /// The GPUaaS inventory and allocation service (served from the `hub` host).
    pub inventory: fakes::inventory::Inventory,
    /// `agent_unreachable`: machines whose agent takes no task.
    pub agents_unreachable: BTreeSet<String>,
}

/// The site's part of the world.
pub(crate) struct SiteWorld {
    pub host: HostId,
    /// The site model, in one place for both transports: the fast transport's adapters and the fault steps act on it
    /// here, the wire transport's HTTP and DNS front ends serve the same front from the `maas` turmoil host.
    pub front: SharedSite,
    /// The model's time line, monotonic across the turmoil hosts that act on it (see [`SiteWorld::model_now_ms`]).
    model_now_ms: Arc<AtomicU64>,
    pub state: RefCell<SiteState>,
    /// Poked after every request (the wire's front ends poke it too), so the site task re-reads the next wakeup and
    /// drains the events the front ends recorded.
    pub(crate) wake: Arc<Notify>,
    /// The site task (not a host task: the machines do not stop when a host crashes).
    task: RefCell<Option<tokio::task::JoinHandle<()>>>,
    /// On a transport that plugs in the engine's real clients of the site's services (the wire's), its plug.
    plug: RefCell<Option<Rc<dyn SitePlug>>>,
}

impl SiteWorld {
    /// The site of `spec`, its machines racked, seeded from the run's `Site` stream.
    pub fn new(host: HostId, spec: &OnboardingSpec, seeds: &SeedTree) -> SiteWorld {
        let mut site = Site::new(SiteConfig::new(seeds.rng(Consumer::Site).next_u64()));
        // The site's own settings, where the engine reads them: its configuration in the secrets store.
        if spec.roce_mandatory {
            site.vault.set_site_value("roce_mandatory", "true");
        }
        for (kind, ms) in &spec.timeouts {
            site.vault.set_site_value(&format!("{kind}_timeout_ms"), &ms.to_string());
        }
        let mut racked = BTreeMap::new();
        for name in &spec.machines {
            let credential = site.add_machine(name);
            let hardware = site.machine(name).expect("just racked").hardware();
            let pxe_mac = hardware.pxe_nic().map(|nic| nic.mac.clone()).expect("a GPU node has a PXE NIC");
            let boot_disk_model =
                hardware.disks.iter().find(|disk| disk.boss).map(|disk| disk.model.clone()).unwrap_or_default();
            let macs = hardware.nics.iter().map(|nic| nic.mac.clone()).collect();
            let roce_nics =
                hardware.nics.iter().filter(|nic| nic.kind == fakes::maas::machine::NicKind::Roce).count() as u32;
            racked.insert(name.clone(), Racked { pxe_mac, macs, boot_disk_model, roce_nics, credential });
        }
        SiteWorld {
            host,
            front: SiteFront::new(site).shared(),
            model_now_ms: Arc::new(AtomicU64::new(0)),
            state: RefCell::new(SiteState {
                racked,
                region_down: false,
                enrolled: BTreeMap::new(),
                pending: BTreeMap::new(),
                faults_rng: seeds.rng(Consumer::SiteFaults),
                ssh_unreachable: BTreeMap::new(),
                inventory: fakes::inventory::Inventory::new(),
                agents_unreachable: BTreeSet::new(),
            }),
            wake: Arc::new(Notify::new()),
            task: RefCell::new(None),
            plug: RefCell::new(None),
        }
    }

    /// The transport's plug, on a transport that has one (the wire).
    pub(crate) fn plug(&self) -> Option<Rc<dyn SitePlug>> {
        self.plug.borrow().clone()
    }

    pub(crate) fn set_plug(&self, plug: Rc<dyn SitePlug>) {
        *self.plug.borrow_mut() = Some(plug);
    }

    fn sync_reachable(&self, host_up: bool) {
        let reachable = host_up && !self.state.borrow().region_down;
        self.lock().site.region.set_reachable(reachable);
    }

    /// Sets one of the site's faults on its state and model, and pokes the site task (what it waits for may have
    /// changed).
    fn set_fault(&self, set: impl FnOnce(&mut SiteState, &mut Site)) {
        let mut state = self.state.borrow_mut();
        let mut front = self.lock();
        set(&mut state, &mut front.site);
        drop(front);
        self.wake.notify_one();
    }

    /// The site's front (model, event sink, keys). Never held across an await, nor while locking it again.
    pub(crate) fn lock(&self) -> MutexGuard<'_, SiteFront> {
        lock_front(&self.front)
    }

    /// The model's now for an action at `now_ms`: never earlier than any time the model has seen. On the fast
    /// transport every action is at the world's time, which only grows, so this is `now_ms`; on the wire the front
    /// ends run on the `maas` turmoil host, whose clock runs within a tick of the world's.
    pub(crate) fn model_now_ms(&self, now_ms: u64) -> u64 {
        self.model_now_ms.fetch_max(now_ms, Ordering::Relaxed).max(now_ms)
    }

    /// The model clock the wire's front ends get: turmoil's simulated time on the host that asks, kept monotonic
    /// with the world's actions.
    pub(crate) fn wire_clock(&self) -> fakes::http::Clock {
        let last = self.model_now_ms.clone();
        Arc::new(move || {
            let now_ms = turmoil::sim_elapsed().map_or(0, |elapsed| elapsed.as_millis() as u64);
            last.fetch_max(now_ms, Ordering::Relaxed).max(now_ms)
        })
    }

    pub fn shutdown(&self) {
        if let Some(task) = self.task.borrow_mut().take() {
            task.abort();
        }
    }
}

impl World {
    pub(crate) fn site(&self) -> &SiteWorld {
        self.site.as_ref().expect("only onboarding runs touch the MAAS site")
    }

    /// Traces what happened at the site and acts on the agents' enrolments.
    pub(crate) fn record_site_events(self: &Rc<Self>, events: Vec<SiteEvent>) {
        let host = self.site().host;
        for event in events {
            let body = match event.kind {
                SiteEventKind::MaasEvent { id, system_id, level, event_type, description } => {
                    Body::SiteMaasEvent { id, system_id, level: level.name().to_owned(), event_type, description }
                }
                SiteEventKind::StatusWritten { system_id, from, to } => Body::SiteStatus { system_id, from, to },
                SiteEventKind::Enlisted { machine, system_id } => Body::SiteEnlisted { machine, system_id },
                SiteEventKind::Power { machine, state, boot } => {
                    self.record(host, Body::SitePower { machine: machine.clone(), state, boot });
                    self.sync_fleet_host(&machine);
                    continue;
                }
                SiteEventKind::MacsDrifted { machine, macs } => Body::SiteMacsDrifted { machine, macs },
                SiteEventKind::Dhcp { machine, mac, ip, mtu_option } => Body::SiteDhcp { machine, mac, ip, mtu_option },
                SiteEventKind::Pxe { machine, mac, system_id } => Body::SitePxe { machine, mac, system_id },
                SiteEventKind::DnsQuery { client, name, answer } => {
                    if let Some(&client_host) = self.ids.get(client.as_str()) {
                        self.egress(client_host, crate::observe::trace::Egress::Dns, "dns", Some(&name));
                    }
                    if matches!(answer, fakes::maas::DnsAnswer::NoError { .. }) {
                        continue;
                    }
                    Body::SiteDnsQuery { client, name, answer }
                }
                SiteEventKind::Stalled { machine, stall } => Body::SiteStalled { machine, stall },
                SiteEventKind::HardwareSync { machine, system_id } => Body::SiteHardwareSync { machine, system_id },
                SiteEventKind::AgentEnrol { machine, system_id, token } => {
                    let entry = (system_id.clone(), token.clone());
                    self.site().state.borrow_mut().pending.insert(machine.clone(), entry);
                    let world = self.clone();
                    self.spawn_on(host, async move { world.enrol_agent(machine, system_id, token).await });
                    continue;
                }
            };
            self.record(host, body);
        }
    }

    /// The site task: advances the machines and the status monitor in virtual time.
    pub(crate) fn start_site(self: &Rc<Self>) {
        let world = self.clone();
        let task = tokio::task::spawn_local(async move {
            loop {
                let now_ms = world.now_ms();
                let wakeup_ms = world.site().lock().site.next_wakeup_ms();
                let until_ms = wakeup_ms.unwrap_or(now_ms + SITE_IDLE_MS).max(now_ms);
                tokio::select! {
                    biased;
                    _ = world.site().wake.notified() => {}
                    _ = world.sleep_until_ms(until_ms) => {}
                }
                let now_ms = world.site().model_now_ms(world.now_ms());
                let events = {
                    let mut front = world.site().lock();
                    // What the wire's front ends did since the last wakeup comes first: it happened earlier.
                    let mut events = front.drain_events();
                    events.extend(front.site.advance(now_ms));
                    events
                };
                world.record_site_events(events);
            }
        });
        *self.site().task.borrow_mut() = Some(task);
    }

    /// The `maas` host boots: its region answers again, and the agents it carries resume.
    pub(crate) fn boot_maas(self: &Rc<Self>, host: HostId) {
        let site = self.site();
        site.sync_reachable(true);
        let (enrolled, pending) = {
            let state = site.state.borrow();
            (state.enrolled.keys().cloned().collect::<Vec<String>>(), state.pending.clone())
        };
        // A one-life run's nodes run their agents on their own hosts.
        for node in enrolled.into_iter().filter(|node| !self.is_fleet_machine(node)) {
            let world = self.clone();
            self.spawn_on(host, async move { world.run_site_agent(node).await });
        }
        for (node, (system_id, token)) in pending {
            let world = self.clone();
            self.spawn_on(host, async move { world.enrol_agent(node, system_id, token).await });
        }
    }

    pub(crate) fn crash_maas(&self) {
        self.site().sync_reachable(false);
    }

    /// One request to the site, on the `maas` host, at the site's time: its events are traced and the site task is
    /// poked (the request may have scheduled something).
    fn at_site<T>(self: &Rc<Self>, f: impl FnOnce(&mut Site, u64, &mut Vec<SiteEvent>) -> T) -> T {
        let now_ms = self.site().model_now_ms(self.now_ms());
        let mut events = Vec::new();
        let out = f(&mut self.site().lock().site, now_ms, &mut events);
        self.record_site_events(events);
        self.site().wake.notify_one();
        out
    }

    // --- node agents of onboarded machines -------------------------------------------------------------------------

    /// A deployed machine's agent enrols: the hub redeems its bootstrap token at the site's secrets store and, when it
    /// is valid and was issued for this node, registers the agent (durable, named as the node).
    async fn enrol_agent(self: Rc<Self>, machine: String, system_id: String, token: fakes::maas::Secret) {
        let host = self.site().host;
        for _ in 0..ENROL_ATTEMPTS_MAX {
            let (node, value) = (machine.clone(), token.clone());
            let result =
                self.call(host, HUB_ID, HEARTBEAT_TIMEOUT_MS, move |world| world.enrol_at_hub(&node, value)).await;
            match result {
                Ok(Ok(())) => {
                    self.site().state.borrow_mut().pending.remove(&machine);
                    self.record(host, Body::SiteAgentEnrol { machine: machine.clone(), system_id });
                    if self.is_fleet_machine(&machine) {
                        self.sync_fleet_host(&machine);
                    } else {
                        self.run_site_agent(machine).await;
                    }
                    return;
                }
                Ok(Err(Some(error))) => {
                    self.site().state.borrow_mut().pending.remove(&machine);
                    self.record(host, Body::SiteAgentEnrolRefused { machine, error });
                    return;
                }
                // No answer, or the store could not answer now: the agent tries again.
                Ok(Err(None)) | Err(_) => {
                    tokio::time::sleep(std::time::Duration::from_millis(HEARTBEAT_INTERVAL_MS)).await;
                }
            }
        }
        self.site().state.borrow_mut().pending.remove(&machine);
        self.record(host, Body::SiteAgentEnrolRefused { machine, error: "the hub never answered".to_owned() });
    }

    /// At the hub: `Ok` when enrolled (now or by an earlier attempt whose answer was lost), `Err(Some)` refused,
    /// `Err(None)` when the secrets store was unavailable (worth another attempt).
    fn enrol_at_hub(self: &Rc<Self>, machine: &str, token: fakes::maas::Secret) -> Result<(), Option<String>> {
        if self.site().state.borrow().enrolled.contains_key(machine) {
            return Ok(());
        }
        let bearer = token.expose().to_owned();
        let redeemed = self.at_site(|site, now_ms, events| {
            site.handle_vault(now_ms, VaultRequest::RedeemToken { value: token }, events)
        });
        match redeemed {
            Ok(VaultResponse::Redeemed { node, .. }) if node == machine => {
                let mut state = self.site().state.borrow_mut();
                state.enrolled.insert(machine.to_owned(), bearer.clone());
                // The node enters the GPUaaS inventory, active, and takes work.
                state.inventory.enrol(machine, crate::world::decommission::ALLOCATIONS_PER_NODE);
                drop(state);
                // A fleet node's agent reads its bearer from its credential file.
                self.install_enrolled_credential(machine, &bearer);
                let _ = self.hub_request(Request::Register {
                    agent: machine.to_owned(),
                    kind: AgentKind::Durable,
                    token: bearer,
                });
                self.metal_enrolled(machine);
                Ok(())
            }
            Ok(VaultResponse::Redeemed { node, token_id }) => {
                Err(Some(format!("bootstrap token {token_id} was issued for {node}")))
            }
            Ok(_) => Err(Some("the secrets store answered something else".to_owned())),
            Err(VaultError::Unavailable) => Err(None),
            Err(error) => Err(Some(error.to_string())),
        }
    }

    /// An enrolled agent heartbeats every 30 s while its machine runs its deployed OS.
    async fn run_site_agent(self: Rc<Self>, machine: String) {
        let host = self.site().host;
        loop {
            let (running, token) = {
                let running =
                    self.site().lock().site.machine(&machine).is_some_and(|m| m.agent_enrolled() && m.is_powered());
                (running, self.site().state.borrow().enrolled.get(&machine).cloned())
            };
            if let (true, Some(token)) = (running, token) {
                let (request, agent) =
                    (Request::Heartbeat { agent: machine.clone(), token, revision: None }, machine.clone());
                let _ = self
                    .call(host, HUB_ID, HEARTBEAT_TIMEOUT_MS, move |world| {
                        if world.hub_request(request) == Response::Ok {
                            world.metal_heartbeat(&agent);
                        }
                    })
                    .await;
            }
            tokio::time::sleep(std::time::Duration::from_millis(HEARTBEAT_INTERVAL_MS)).await;
        }
    }

    // --- fault steps -----------------------------------------------------------------------------------------------

    /// Applies one of the site's steps (validated: the site exists and names its machines).
    pub(crate) fn apply_site_step(self: &Rc<Self>, step: &Step) {
        let site = self.site();
        match step {
            Step::ResumeOnboarding { .. } | Step::Decommission { .. } | Step::Operator { .. } => {
                self.ask_controller(step);
            }
            Step::MaasUnreachable { down } => {
                site.state.borrow_mut().region_down = *down;
                site.sync_reachable(self.is_up(site.host));
                site.wake.notify_one();
            }
            Step::MachineDeleted { target } => {
                for system_id in self.records_of(target, false) {
                    let request = MaasRequest::DeleteMachine { system_id };
                    self.at_site(|s, now_ms, events| s.handle_maas(now_ms, OPERATOR_MAAS_USER, request, events));
                }
            }
            Step::InterfaceDisconnected { target } => {
                // The record's interface with the machine's racked PXE MAC, disconnected through the API.
                let pxe_mac = self.site().state.borrow().racked[target].pxe_mac.to_lowercase();
                for system_id in self.records_of(target, false) {
                    let interface = self.site().lock().site.region.view(&system_id).and_then(|view| {
                        view.interface_set.iter().find(|iface| iface.mac_address == pxe_mac).map(|iface| iface.id)
                    });
                    if let Some(interface_id) = interface {
                        let request = MaasRequest::DisconnectInterface { system_id, interface_id };
                        self.at_site(|s, now_ms, events| s.handle_maas(now_ms, OPERATOR_MAAS_USER, request, events));
                    }
                }
            }
            Step::MachineAdvanced { target } => {
                for system_id in self.records_of(target, false) {
                    let request = MaasRequest::Commission { system_id };
                    self.at_site(|s, now_ms, events| s.handle_maas(now_ms, OPERATOR_MAAS_USER, request, events));
                }
            }
            Step::RegisterMacs { target } => {
                self.register_macs(target);
            }
            Step::MacDrift { target } => site.set_fault(|state, model| {
                let seed = state.faults_rng.next_u64();
                model.drift_macs_at_next_power_cycle(target, seed);
            }),
            Step::ResolverServfail { zones: None } => {
                site.set_fault(|_, model| model.dns.set_fault(DnsFault::ServFailAll))
            }
            Step::ResolverServfail { zones: Some(zones) } => site.set_fault(|_, model| {
                model.dns.set_fault(DnsFault::ServFailZones { zones: zones.iter().cloned().collect() })
            }),
            Step::ResolverRepair => site.set_fault(|_, model| model.dns.repair()),
            Step::ScriptHang { target } => {
                site.set_fault(|_, model| machine(model, target).faults.hang_script = Some(FAULTED_SCRIPT.into()))
            }
            Step::ScriptFailure { target } => {
                site.set_fault(|_, model| machine(model, target).faults.fail_script = Some(FAULTED_SCRIPT.into()))
            }
            Step::CommissioningSlow { target, event_interval_ms } => {
                site.set_fault(|_, model| machine(model, target).faults.script_interval_ms = Some(*event_interval_ms))
            }
            Step::DatasourceFailure { target } => {
                site.set_fault(|_, model| machine(model, target).faults.datasource_failure = true)
            }
            Step::HardwareMissing { target, part } => site.set_fault(|_, model| {
                let machine = machine(model, target);
                let hardware = machine.hardware();
                let name = match part {
                    HardwarePart::Boss => hardware.disks.iter().find(|disk| disk.boss).map(|disk| disk.name.clone()),
                    HardwarePart::Roce => hardware
                        .nics
                        .iter()
                        .find(|nic| nic.kind == fakes::maas::machine::NicKind::Roce)
                        .map(|nic| nic.name.clone()),
                };
                if let Some(name) = name {
                    match part {
                        HardwarePart::Boss => machine.remove_disk(&name),
                        HardwarePart::Roce => machine.remove_nic(&name),
                    };
                }
            }),
            Step::AgentEnrolDelay { target, delay_ms } => {
                site.set_fault(|_, model| machine(model, target).faults.agent_enrol_delay_ms = *delay_ms)
            }
            Step::HwSyncFailure { target } => {
                site.set_fault(|_, model| machine(model, target).faults.hw_sync = HwSyncFault::SeedFails)
            }
            Step::PreseedFailure { count } => site.set_fault(|_, model| model.region.fail_next_preseeds(*count)),
            Step::SshUnreachable { target, count } => site.set_fault(|state, _| {
                *state.ssh_unreachable.entry(target.clone()).or_insert(0) += count;
            }),
            Step::HwSyncStops { target, after_syncs } => site.set_fault(|_, model| {
                machine(model, target).faults.hw_sync = HwSyncFault::StopsAfter { syncs: *after_syncs }
            }),
            Step::TokenPolicyMissing => site.set_fault(|_, model| model.vault.set_token_policy(false)),
            Step::MaasKeyRevoked => site.set_fault(|_, model| model.region.revoke_api_keys()),
            Step::MaasUnavailable { count, retry_after_s } => site.set_fault(|_, model| {
                for _ in 0..*count {
                    model.region.fail_next_with_503(*retry_after_s);
                }
            }),
            Step::VaultUnavailable { count } => site.set_fault(|_, model| model.vault.fail_next(*count)),
            Step::TokenAnswerLost { target, count } => {
                site.set_fault(|_, model| model.vault.lose_token_answers(target, *count))
            }
            Step::PowerCredentialMissing { target } => site.set_fault(|_, model| {
                model.vault.remove_power_credential(target);
            }),
            Step::BmcFault { target, fault } => site.set_fault(|state, model| {
                let bmc = &mut model.bmc;
                match fault {
                    BmcFaultKind::Unreachable => bmc.set_fault(target, BmcFault::Unreachable),
                    BmcFaultKind::IgnoreCommands => bmc.set_fault(target, BmcFault::IgnoreCommands),
                    BmcFaultKind::WrongCredentials => {
                        let user = state.racked[target].credential.user.clone();
                        let password = fakes::maas::Secret::mint("bmc-rotated", state.faults_rng.next_u64());
                        bmc.rotate_credential(target, PowerCredential { user, password });
                    }
                    BmcFaultKind::Healthy => {
                        bmc.clear_fault(target);
                        bmc.rotate_credential(target, state.racked[target].credential.clone());
                    }
                }
            }),
            Step::DhcpLeaseLoss { target } => site.set_fault(|_, model| {
                let macs = machine(model, target).hardware().nics.iter().map(|nic| nic.mac.clone()).collect();
                model.dhcp.set_fault(DhcpFault::LoseMacs { macs });
            }),
            Step::DhcpRepair => site.set_fault(|_, model| model.dhcp.repair()),
            Step::SiteDisabled => site.set_fault(|_, model| model.vault.set_site_value("enabled", "false")),
            Step::SecretsDeleteDenied => site.set_fault(|_, model| model.vault.set_delete_policy(false)),
            Step::EraseFailure { count } => site.set_fault(|_, model| model.region.fail_next_erases(*count)),
            Step::EraseSlow { target, erase_ms } => {
                site.set_fault(|_, model| model.region.slow_erases_of(target, *erase_ms))
            }
            Step::AllocationStuck { target, count } => {
                site.set_fault(|state, _| state.inventory.stick_allocations(target, *count))
            }
            Step::CleanupResidue { target, count } => {
                site.set_fault(|state, _| state.inventory.leave_residue(target, *count))
            }
            Step::UninstallFailure { target, count } => {
                site.set_fault(|state, _| state.inventory.fail_uninstalls(target, *count))
            }
            Step::InventoryUnavailable { count } => site.set_fault(|state, _| state.inventory.fail_next(*count)),
            Step::NodeReactivated { target } => site.set_fault(|state, _| {
                state.inventory.reactivate(target);
            }),
            Step::AgentUnreachable { target, down } => site.set_fault(|state, _| {
                if *down {
                    state.agents_unreachable.insert(target.clone());
                } else {
                    state.agents_unreachable.remove(target);
                }
            }),
            Step::RegionWorkflowWedged { wedged } => {
                site.set_fault(|_, model| model.region.set_workflows_wedged(*wedged));
            }
            Step::MachineHidden { target, hidden } => site.set_fault(|_, model| {
                for system_id in own_records(model, target) {
                    if *hidden {
                        model.region.hide_machine(&system_id);
                    } else {
                        model.region.reveal_machine(&system_id);
                    }
                }
            }),
            network_step!() | host_step!() | fleet_step!() | rollout_step!() | instance_step!() => {
                unreachable!("{} is not a site step", step.kind())
            }
        }
    }

    /// The MAAS records of a machine: the ones named as it (the workflow creates it with the node's hostname), else
    /// the ones carrying one of its MACs, racked or current. `strays`: the records carrying its current MACs that are
    /// not named as it.
    fn records_of(&self, machine: &str, strays: bool) -> Vec<String> {
        let front = self.site().lock();
        if strays { stray_records(&front.site, machine) } else { own_records(&front.site, machine) }
    }

    /// The operator's repair after a MAC drift: the original record's interfaces get the machine's current MACs and
    /// the records MAAS enlisted for them are deleted first (a MAC is unique in MAAS).
    fn register_macs(self: &Rc<Self>, machine: &str) {
        for system_id in self.records_of(machine, true) {
            let request = MaasRequest::DeleteMachine { system_id };
            self.at_site(|s, now_ms, events| s.handle_maas(now_ms, OPERATOR_MAAS_USER, request, events));
        }
        let site = self.site();
        let mut state = site.state.borrow_mut();
        let state = &mut *state;
        let mut front = site.lock();
        let model = &mut front.site;
        // The operator reads the MACs from the machine's definition, which a pending drift has already changed.
        let Some(physical) = model.machine_mut(machine) else { return };
        physical.apply_pending_mac_drift();
        let physical = &*physical;
        let current: Vec<String> = physical.hardware().nics.iter().map(|nic| nic.mac.clone()).collect();
        let pxe_mac = physical.hardware().pxe_nic().map(|nic| nic.mac.clone());
        let racked = state.racked[machine].macs.clone();
        let own = model
            .region
            .system_ids()
            .into_iter()
            .find(|id| model.region.view(id).is_some_and(|view| view.hostname == machine));
        if let Some(own) = own {
            for (old, new) in racked.iter().zip(&current) {
                if old != new {
                    model.region.set_interface_mac(&own, old, new);
                }
            }
        }
        // The machine's inventory now names the MACs it boots with.
        if let Some(racked) = state.racked.get_mut(machine) {
            racked.macs = current;
            if let Some(pxe_mac) = pxe_mac {
                racked.pxe_mac = pxe_mac;
            }
        }
        drop(front);
        site.wake.notify_one();
    }
}

fn machine<'a>(site: &'a mut Site, name: &str) -> &'a mut fakes::maas::Machine {
    site.machine_mut(name).expect("steps name machines of the site")
}

/// The records named as the machine, else those carrying one of its current MACs.
fn own_records(site: &Site, machine: &str) -> Vec<String> {
    let region = &site.region;
    let named: Vec<String> =
        region.system_ids().into_iter().filter(|id| region.view(id).is_some_and(|v| v.hostname == machine)).collect();
    if !named.is_empty() {
        return named;
    }
    let macs: Vec<String> = site
        .machine(machine)
        .map(|m| m.hardware().nics.iter().map(|nic| nic.mac.clone()).collect())
        .unwrap_or_default();
    let mut ids: Vec<String> = macs.iter().filter_map(|mac| region.system_id_by_mac(mac)).collect();
    ids.dedup();
    ids
}

/// Records carrying one of the machine's current MACs that are not named as it.
fn stray_records(site: &Site, machine: &str) -> Vec<String> {
    let region = &site.region;
    let macs: Vec<String> = site
        .machine(machine)
        .map(|m| m.hardware().nics.iter().map(|nic| nic.mac.clone()).collect())
        .unwrap_or_default();
    let mut ids: Vec<String> = macs
        .iter()
        .filter_map(|mac| region.system_id_by_mac(mac))
        .filter(|id| region.view(id).is_some_and(|view| view.hostname != machine))
        .collect();
    ids.sort();
    ids.dedup();
    ids
}

// --- the engine's site ports over the simulated network ------------------------------------------------------------------

/// The region API, each call a request over the network to the `maas` host with the engine's call timeout. A
/// region that does not answer makes the call time out. Each call is traced (`site.request`) with the workflow it
/// belongs to, when its answer (or failure) reaches the controller.
pub(crate) struct SimMaas {
    pub world: Rc<World>,
    pub from: HostId,
    pub workflow: String,
}

type SiteAnswer<T> = Option<(u16, Result<T, MaasError>)>;

/// The region calls that change a machine (the ones a `controller_death` at `after_remote_mutation` follows).
const MUTATING_OPS: [&str; 11] = [
    "create",
    "commission",
    "set_boot_disk",
    "link_subnet",
    "deploy",
    "release",
    "abort",
    "mark_fixed",
    "power_off",
    "power_on",
    "delete",
];

impl SimMaas {
    async fn send<T: 'static>(
        &self,
        op: &str,
        system_id: Option<&str>,
        run: impl FnOnce(&mut Site, u64, &mut Vec<SiteEvent>) -> SiteAnswer<T> + 'static,
    ) -> Result<T, MaasError> {
        let world = &self.world;
        let timeout_ms = world.spec.engine.call_timeout_ms;
        let to = world.site().host;
        let answer = world
            .call_with(self.from, to, timeout_ms, move |world| match world.at_site(run) {
                Some(answer) => Delivery::Reply(answer),
                // The region did not answer: the caller learns it from its timeout.
                None => Delivery::Hang,
            })
            .await;
        let (status, result) = match answer {
            Ok((status, result)) => (Some(status), result),
            Err(error) => (None, Err(MaasError::Transport(error))),
        };
        world.after_site_request(self.from, &self.workflow, op, system_id, status, result.is_ok()).await;
        result
    }

    /// One plain request whose success body `ok` converts.
    async fn request<T: 'static>(
        &self,
        op: &str,
        system_id: Option<&str>,
        request: MaasRequest,
        ok: impl FnOnce(&Site, u64, MaasBody) -> Option<T> + 'static,
    ) -> Result<T, MaasError> {
        self.send(op, system_id, move |site, now_ms, events| {
            let response = site.handle_maas(now_ms, CONTROLLER_MAAS_USER, request, events)?;
            Some(answer(site, now_ms, response, ok))
        })
        .await
    }

    async fn machine_op(&self, op: &str, system_id: &str, request: MaasRequest) -> Result<port::Machine, MaasError> {
        self.request(op, Some(system_id), request, |site, now_ms, body| match body {
            MaasBody::Machine(view) => {
                Some(machine_from_view(&view, site.region.power_address(&view.system_id), now_ms))
            }
            _ => None,
        })
        .await
    }
}

impl World {
    /// What follows every region call of a workflow, on either transport: it is traced (`site.request`, what the
    /// oracles judge) and, after a remote mutation the region accepted, a death armed there fires: the region acted
    /// and answered, the controller dies before it journals or does anything else about it.
    pub(crate) async fn after_site_request(
        self: &Rc<Self>,
        from: HostId,
        workflow: &str,
        op: &str,
        system_id: Option<&str>,
        status: Option<u16>,
        accepted: bool,
    ) {
        let body = Body::SiteRequest {
            workflow: workflow.to_owned(),
            op: op.to_owned(),
            system_id: system_id.map(str::to_owned),
            status,
        };
        self.record(from, body);
        if accepted
            && MUTATING_OPS.contains(&op)
            && self.take_death(
                subsystem(workflow),
                DeathPoint::AfterRemoteMutation,
                crate::model::faults::Subject::Machine(crate::model::ids::machine_of_workflow(workflow).to_owned()),
            )
        {
            self.die_here(from).await;
        }
    }
}

/// The workflow kind a workflow id belongs to.
fn subsystem(workflow: &str) -> DeathSubsystem {
    if workflow.starts_with("decommission-") {
        DeathSubsystem::Decommission
    } else if workflow == engine::controller::metal::INSTANCES_WORKFLOW {
        DeathSubsystem::Instances
    } else {
        DeathSubsystem::Onboarding
    }
}

/// A region answer in the engine's terms: a 2xx with the expected body, else an HTTP error.
fn answer<T>(
    site: &Site,
    now_ms: u64,
    response: MaasResponse,
    ok: impl FnOnce(&Site, u64, MaasBody) -> Option<T>,
) -> (u16, Result<T, MaasError>) {
    let status = response.status;
    if (200..300).contains(&status) {
        return match ok(site, now_ms, response.body) {
            Some(value) => (status, Ok(value)),
            None => (
                status,
                Err(MaasError::Http { status, message: "unexpected answer body".to_owned(), retry_after_s: None }),
            ),
        };
    }
    (status, Err(maas_error(&response)))
}

/// An HTTP error answer as the engine sees it: status, message (a form error's fields joined), `Retry-After`.
pub(crate) fn maas_error(response: &MaasResponse) -> MaasError {
    let message = match &response.body {
        MaasBody::Text(text) => text.clone(),
        MaasBody::FormErrors(errors) => errors
            .iter()
            .map(|(field, messages)| format!("{field}: {}", messages.join(" ")))
            .collect::<Vec<_>>()
            .join("; "),
        _ => format!("http {}", response.status),
    };
    MaasError::Http { status: response.status, message, retry_after_s: response.retry_after_s }
}

/// The machine object in the engine's terms.
pub(crate) fn machine_from_view(view: &MachineView, power_address: Option<String>, now_ms: u64) -> port::Machine {
    let mut macs: Vec<String> = Vec::new();
    if let Some(boot) = &view.boot_interface {
        macs.push(boot.mac_address.to_ascii_lowercase());
    }
    for iface in &view.interface_set {
        let mac = iface.mac_address.to_ascii_lowercase();
        if !macs.contains(&mac) {
            macs.push(mac);
        }
    }
    port::Machine {
        system_id: view.system_id.clone(),
        hostname: view.hostname.clone(),
        status: port::MachineStatus::from_code(view.status, &view.status_name),
        status_message: view.status_message.clone(),
        power_address,
        macs,
        enable_hw_sync: view.enable_hw_sync,
        hw_sync_healthy: view.is_sync_healthy(now_ms),
    }
}

/// Deviation (adapter): the fake's two VLANs are both untagged (vid 0) on separate fabrics, so where the engine's
/// port says "VLAN vid" the adapter gives the VLAN's MAAS id (5001 metal-admin, 5002 RoCE), unique on the site. The
/// site configuration names the same ids.
fn vlan_number(vlan: &fakes::maas::region::Vlan) -> u16 {
    u16::try_from(vlan.id).unwrap_or(u16::MAX)
}

impl SimMaas {
    /// `GET /machines/` with MAAS's `mac_address` and `status` filters, traced as `op`.
    async fn list(
        &self,
        op: &str,
        mac_address: Option<String>,
        status: Option<fakes::maas::status::NodeStatus>,
    ) -> Result<Vec<port::Machine>, MaasError> {
        let request = MaasRequest::ListMachines { hostname: None, mac_address, status };
        self.request(op, None, request, |site, now_ms, body| match body {
            MaasBody::Machines(views) => Some(
                views
                    .iter()
                    .map(|view| machine_from_view(view, site.region.power_address(&view.system_id), now_ms))
                    .collect(),
            ),
            _ => None,
        })
        .await
    }
}

impl port::MaasApi for SimMaas {
    async fn machines(&self) -> Result<Vec<port::Machine>, MaasError> {
        self.list("list", None, None).await
    }

    async fn machines_with_mac(&self, mac: &str) -> Result<Vec<port::Machine>, MaasError> {
        self.list("list_by_mac", Some(mac.to_owned()), None).await
    }

    async fn new_machines(&self) -> Result<Vec<port::Machine>, MaasError> {
        self.list("list_new", None, Some(fakes::maas::status::NodeStatus::New)).await
    }

    async fn machine(&self, system_id: &str) -> Result<port::Machine, MaasError> {
        self.machine_op("read", system_id, MaasRequest::ReadMachine { system_id: system_id.to_owned() }).await
    }

    async fn create_machine(&self, new: &port::NewMachine) -> Result<port::Machine, MaasError> {
        let request = MaasRequest::CreateMachine(CreateMachine {
            hostname: Some(new.hostname.clone()),
            architecture: "amd64".to_owned(),
            mac_addresses: vec![new.pxe_mac.clone()],
            power_type: "redfish".to_owned(),
            power_parameters: PowerParameters {
                power_address: new.power_address.clone(),
                power_user: new.power_user.clone(),
                power_pass: fakes::maas::Secret::new(new.power_password.expose()),
            },
            commission: true,
        });
        self.request("create", None, request, |site, now_ms, body| match body {
            MaasBody::Machine(view) => {
                Some(machine_from_view(&view, site.region.power_address(&view.system_id), now_ms))
            }
            _ => None,
        })
        .await
    }

    async fn commission(&self, system_id: &str) -> Result<port::Machine, MaasError> {
        self.machine_op("commission", system_id, MaasRequest::Commission { system_id: system_id.to_owned() }).await
    }

    async fn events(&self, system_id: &str, after: Option<u64>) -> Result<Vec<port::MaasEvent>, MaasError> {
        // DEBUG and up: script results and status changes are DEBUG events, and they are the signs of progress.
        let query = EventsQuery {
            system_id: Some(system_id.to_owned()),
            level: Some(fakes::maas::EventLevel::Debug),
            limit: Some(i64::from(fakes::maas::region::EVENTS_LIMIT_MAX)),
            after,
            ..EventsQuery::default()
        };
        self.request("events", Some(system_id), MaasRequest::QueryEvents(query), |_, _, body| match body {
            MaasBody::Events(page) => Some(
                page.events
                    .into_iter()
                    .map(|event| port::MaasEvent {
                        id: event.id,
                        level: event.level.name().to_owned(),
                        text: event.event_type,
                        description: event.description,
                    })
                    .collect(),
            ),
            _ => None,
        })
        .await
    }

    async fn disks(&self, system_id: &str) -> Result<Vec<port::Disk>, MaasError> {
        let id = system_id.to_owned();
        self.send("disks", Some(system_id), move |site, now_ms, events| {
            let read = site.handle_maas(
                now_ms,
                CONTROLLER_MAAS_USER,
                MaasRequest::ReadMachine { system_id: id.clone() },
                events,
            )?;
            let boot_id = match answer(site, now_ms, read, |_, _, body| match body {
                MaasBody::Machine(view) => Some(view.boot_disk.map(|disk| disk.id)),
                _ => None,
            }) {
                (_, Ok(boot_id)) => boot_id,
                (status, Err(error)) => return Some((status, Err(error))),
            };
            let list = site.handle_maas(
                now_ms,
                CONTROLLER_MAAS_USER,
                MaasRequest::ListBlockDevices { system_id: id },
                events,
            )?;
            Some(answer(site, now_ms, list, |_, _, body| match body {
                MaasBody::BlockDevices(devices) => Some(
                    devices
                        .into_iter()
                        .map(|device| port::Disk {
                            boot: Some(device.id) == boot_id,
                            id: device.id,
                            name: device.name,
                            model: device.model,
                            serial: device.serial,
                        })
                        .collect(),
                ),
                _ => None,
            }))
        })
        .await
    }

    async fn set_boot_disk(&self, system_id: &str, disk_id: u64) -> Result<(), MaasError> {
        let request = MaasRequest::SetBootDisk { system_id: system_id.to_owned(), block_device_id: disk_id };
        self.request("set_boot_disk", Some(system_id), request, |_, _, _| Some(())).await
    }

    async fn interfaces(&self, system_id: &str) -> Result<Vec<port::Interface>, MaasError> {
        let request = MaasRequest::ListInterfaces { system_id: system_id.to_owned() };
        self.request("interfaces", Some(system_id), request, |_, _, body| match body {
            MaasBody::Interfaces(views) => Some(
                views
                    .into_iter()
                    .map(|view| port::Interface {
                        id: view.id,
                        name: view.name,
                        mac: view.mac_address.to_ascii_lowercase(),
                        vlan_vid: view.vlan.as_ref().map(vlan_number),
                        auto_linked: view.links.iter().any(|link| link.mode == fakes::maas::region::LinkMode::Auto),
                        roce: view.tags.iter().any(|tag| tag == "roce"),
                    })
                    .collect(),
            ),
            _ => None,
        })
        .await
    }

    async fn region_services(&self) -> Result<Vec<port::RegionService>, MaasError> {
        self.request("regioncontrollers", None, MaasRequest::ListRegionControllers, |_, _, body| match body {
            MaasBody::RegionControllers(controllers) => Some(
                controllers
                    .into_iter()
                    .flat_map(|controller| controller.service_set)
                    .map(|s| port::RegionService { name: s.name, status: s.status, status_info: s.status_info })
                    .collect(),
            ),
            _ => None,
        })
        .await
    }

    async fn subnets(&self) -> Result<Vec<port::Subnet>, MaasError> {
        self.request("subnets", None, MaasRequest::ListSubnets, |_, _, body| match body {
            MaasBody::Subnets(views) => Some(
                views
                    .into_iter()
                    .map(|view| port::Subnet {
                        id: view.id,
                        cidr: view.cidr,
                        vlan_vid: vlan_number(&view.vlan),
                        mtu: view.vlan.mtu,
                    })
                    .collect(),
            ),
            _ => None,
        })
        .await
    }

    async fn link_subnet_auto(&self, system_id: &str, interface_id: u64, subnet_id: u64) -> Result<(), MaasError> {
        let request = MaasRequest::LinkSubnet {
            system_id: system_id.to_owned(),
            interface_id,
            mode: "AUTO".to_owned(),
            subnet_id,
            ip_address: None,
        };
        self.request("link_subnet", Some(system_id), request, |_, _, _| Some(())).await
    }

    async fn disconnect_interface(&self, system_id: &str, interface_id: u64) -> Result<(), MaasError> {
        let request = MaasRequest::DisconnectInterface { system_id: system_id.to_owned(), interface_id };
        self.request("disconnect", Some(system_id), request, |_, _, _| Some(())).await
    }

    async fn deploy(
        &self,
        system_id: &str,
        user_data: &engine::secret::Secret,
        enable_hw_sync: bool,
    ) -> Result<port::Machine, MaasError> {
        let request = MaasRequest::Deploy {
            system_id: system_id.to_owned(),
            distro_series: None,
            user_data: Some(fakes::maas::Secret::new(user_data.expose())),
            enable_hw_sync,
        };
        self.machine_op("deploy", system_id, request).await
    }

    async fn release(&self, system_id: &str, erase: bool) -> Result<port::Machine, MaasError> {
        let request = MaasRequest::Release { system_id: system_id.to_owned(), comment: None, erase };
        self.machine_op("release", system_id, request).await
    }

    async fn abort(&self, system_id: &str) -> Result<port::Machine, MaasError> {
        self.machine_op("abort", system_id, MaasRequest::Abort { system_id: system_id.to_owned(), comment: None }).await
    }

    async fn mark_fixed(&self, system_id: &str) -> Result<port::Machine, MaasError> {
        let request = MaasRequest::MarkFixed { system_id: system_id.to_owned(), comment: None };
        self.machine_op("mark_fixed", system_id, request).await
    }

    async fn power_off(&self, system_id: &str) -> Result<(), MaasError> {
        let request = MaasRequest::PowerOff { system_id: system_id.to_owned() };
        self.request("power_off", Some(system_id), request, |_, _, _| Some(())).await
    }

    async fn power_on(&self, system_id: &str) -> Result<(), MaasError> {
        let request = MaasRequest::PowerOn { system_id: system_id.to_owned() };
        self.request("power_on", Some(system_id), request, |_, _, _| Some(())).await
    }

    async fn power_state(&self, system_id: &str) -> Result<port::PowerState, MaasError> {
        let request = MaasRequest::QueryPowerState { system_id: system_id.to_owned() };
        self.request("query_power_state", Some(system_id), request, |_, _, body| match body {
            MaasBody::PowerState { state } => Some(match state.as_str() {
                "on" => port::PowerState::On,
                "off" => port::PowerState::Off,
                _ => port::PowerState::Unknown,
            }),
            _ => None,
        })
        .await
    }

    async fn delete_machine(&self, system_id: &str) -> Result<(), MaasError> {
        let request = MaasRequest::DeleteMachine { system_id: system_id.to_owned() };
        self.request("delete", Some(system_id), request, |_, _, _| Some(())).await
    }
}

/// The rack resolver, asked from the controller (a query over the network to the `maas` host).
pub(crate) struct SimResolver {
    pub world: Rc<World>,
    pub from: HostId,
}

pub(crate) fn dns_answer(answer: fakes::maas::DnsAnswer) -> port::DnsAnswer {
    match answer {
        fakes::maas::DnsAnswer::NoError { address } => port::DnsAnswer::Address(address),
        fakes::maas::DnsAnswer::NxDomain => port::DnsAnswer::NxDomain,
        fakes::maas::DnsAnswer::ServFail => port::DnsAnswer::ServFail,
    }
}

impl port::Resolver for SimResolver {
    async fn resolve(&self, name: &str) -> Result<port::DnsAnswer, TransportError> {
        let world = &self.world;
        let name = name.to_owned();
        let answer = world
            .call(self.from, world.site().host, world.spec.engine.call_timeout_ms, move |world| {
                world.at_site(|site, now_ms, events| site.handle_dns(now_ms, "controller", &name, events))
            })
            .await?;
        Ok(dns_answer(answer))
    }
}

/// SSH from the controller to the site's deployed machines (their sshd is on the `maas` host's network): only the
/// hardware-sync seed is an operation a site machine answers; the fleet's worker operations are refused.
pub(crate) struct SimSiteSsh {
    pub world: Rc<World>,
    pub from: HostId,
}

impl engine::ports::Ssh for SimSiteSsh {
    async fn run(
        &self,
        endpoint: &engine::ports::Endpoint,
        request: engine::ports::SshRequest,
    ) -> Result<engine::ports::SshResponse, engine::ports::SshError> {
        use engine::ports::{SshError, SshRequest, SshResponse};
        let world = &self.world;
        let machine = endpoint.node.clone();
        let SshRequest::SeedHardwareSync { .. } = request else {
            return Err(SshError::Refused(format!("{machine} is a MAAS machine, not a fleet worker")));
        };
        let target = machine.clone();
        let answer = world
            .call_with(self.from, world.site().host, world.spec.engine.call_timeout_ms, move |world| {
                let mut state = world.site().state.borrow_mut();
                if let Some(left) = state.ssh_unreachable.get_mut(&target).filter(|left| **left > 0) {
                    *left -= 1;
                    return Delivery::Hang;
                }
                drop(state);
                let now_ms = world.site().model_now_ms(world.now_ms());
                match world.site().lock().site.machine_mut(&target) {
                    Some(node) => Delivery::Reply(node.seed_hw_sync(now_ms)),
                    None => Delivery::Hang,
                }
            })
            .await;
        let (result, error) = match answer {
            Ok(Ok(())) => (Ok(SshResponse::Done), None),
            // No deployed OS is up: nothing listens on port 22.
            Ok(Err(fakes::maas::SeedError::NotRunning)) => {
                let error = TransportError::ConnectionRefused;
                (Err(SshError::Transport(error)), Some(error.to_string()))
            }
            Ok(Err(refusal)) => (Err(SshError::Refused(refusal.to_string())), Some(refusal.to_string())),
            Err(error) => (Err(SshError::Transport(error)), Some(error.to_string())),
        };
        world.record(self.from, Body::SiteSsh { machine, op: "seed_hardware_sync".to_owned(), error });
        result
    }
}

/// The site's secrets store on the `maas` host.
pub(crate) struct SimSiteSecrets {
    pub world: Rc<World>,
    pub from: HostId,
}

/// A store error in the engine's terms. Deviation (adapter): `UnknownToken` (a spent or unknown token) is never
/// answered to the controller's requests; it is mapped to `Refused` like an expired one.
pub(crate) fn secrets_error(error: VaultError) -> SecretsError {
    match error {
        VaultError::Unavailable => SecretsError::Unavailable(error.to_string()),
        VaultError::NoPowerCredential { node } => SecretsError::NotFound(format!("power credential of {node}")),
        VaultError::SiteDisabled | VaultError::TokenExpired { .. } | VaultError::UnknownToken => {
            SecretsError::Refused(error.to_string())
        }
        VaultError::NoTokenPolicy => SecretsError::Unsupported(error.to_string()),
        VaultError::DeleteDenied { .. } => SecretsError::Refused(error.to_string()),
        // `ask` turns a lost answer into the caller's timeout before it gets here.
        VaultError::AnswerLost => SecretsError::Transport(TransportError::Timeout),
    }
}

/// The fake store's site configuration (`maas_url`, `enabled`, optionally `roce_mandatory`) in the engine's terms.
///
/// Deviation (adapter): the fake's configuration names neither the metadata host nor the VLANs; the adapter gives
/// the rack resolver's metadata host (`fakes::maas::dns::METADATA_HOST`) and the site's VLAN ids (see
/// [`vlan_number`]).
pub(crate) fn site_config(values: &BTreeMap<String, String>) -> Result<port::SiteConfig, String> {
    let timeouts = port::StageTimeouts::from_settings(|key| values.get(key).map(String::as_str))?;
    Ok(port::SiteConfig {
        enabled: values.get("enabled").is_none_or(|value| value != "false"),
        metadata_host: values.get("metadata_host").cloned().unwrap_or_else(|| fakes::maas::METADATA_HOST.to_owned()),
        pxe_vlan_vid: u16::try_from(fakes::maas::PXE_VLAN_ID).unwrap_or(u16::MAX),
        roce_vlan_vid: u16::try_from(fakes::maas::ROCE_VLAN_ID).unwrap_or(u16::MAX),
        roce_mandatory: values.get("roce_mandatory").is_some_and(|value| value == "true"),
        timeouts,
    })
}

impl SimSiteSecrets {
    async fn ask(&self, request: VaultRequest) -> Result<VaultResponse, SecretsError> {
        let world = &self.world;
        let answer = world
            .call_with(self.from, world.site().host, world.spec.engine.call_timeout_ms, move |world| {
                match world.at_site(|site, now_ms, events| site.handle_vault(now_ms, request, events)) {
                    // The store carried it out; its answer never arrives, and the caller times out.
                    Err(VaultError::AnswerLost) => Delivery::Hang,
                    answer => Delivery::Reply(answer),
                }
            })
            .await?;
        answer.map_err(secrets_error)
    }
}

fn unexpected(what: &str) -> SecretsError {
    SecretsError::Refused(format!("the secrets store answered something else to a {what} request"))
}

impl port::SiteSecrets for SimSiteSecrets {
    async fn site_config(&self) -> Result<port::SiteConfig, SecretsError> {
        match self.ask(VaultRequest::ReadSiteConfig).await? {
            VaultResponse::SiteConfig(values) => site_config(&values).map_err(SecretsError::Refused),
            _ => Err(unexpected("site configuration")),
        }
    }

    async fn power_credential(&self, node: &str) -> Result<port::PowerCredential, SecretsError> {
        match self.ask(VaultRequest::ResolvePowerCredential { node: node.to_owned() }).await? {
            VaultResponse::PowerCredential { credential, .. } => Ok(port::PowerCredential {
                user: credential.user,
                password: engine::secret::Secret::new(credential.password.expose()),
            }),
            _ => Err(unexpected("power credential")),
        }
    }

    async fn bootstrap_token(&self, node: &str, ttl_ms: u64) -> Result<engine::secret::Secret, SecretsError> {
        match self.ask(VaultRequest::IssueBootstrapToken { node: node.to_owned(), ttl_ms }).await? {
            VaultResponse::Token(grant) => Ok(engine::secret::Secret::new(grant.value.expose())),
            _ => Err(unexpected("bootstrap token")),
        }
    }

    async fn node_secrets_capabilities(&self) -> Result<Vec<String>, SecretsError> {
        match self.ask(VaultRequest::NodeSecretsCapabilities).await? {
            VaultResponse::Capabilities(capabilities) => Ok(capabilities),
            _ => Err(unexpected("capabilities")),
        }
    }

    async fn delete_node_secrets(&self, node: &str) -> Result<u32, SecretsError> {
        match self.ask(VaultRequest::DeleteNodeSecrets { node: node.to_owned() }).await? {
            VaultResponse::Deleted { count } => Ok(count),
            _ => Err(unexpected("delete")),
        }
    }

    async fn revoke_bootstrap_tokens(&self, node: &str) -> Result<u32, SecretsError> {
        match self.ask(VaultRequest::RevokeBootstrapTokens { node: node.to_owned() }).await? {
            VaultResponse::Revoked { count } => Ok(count),
            _ => Err(unexpected("revoke")),
        }
    }
}

// --- the site ports of either transport ----------------------------------------------------------------------------

/// Runs one method of a two-transport port on whichever it is.
macro_rules! either {
    ($port:ident, $self:ident . $method:ident ( $($arg:expr),* )) => {
        match $self {
            $port::Fast(inner) => inner.$method($($arg),*).await,
            $port::Wire(inner) => inner.$method($($arg),*).await,
        }
    };
}

impl World {
    /// The region API a workflow's engine code calls: the in-process adapter on the fast transport, the engine's
    /// real MAAS client over turmoil TCP on the wire.
    pub(crate) fn site_maas(self: &Rc<Self>, from: HostId, workflow: &str) -> SiteMaas {
        let workflow = workflow.to_owned();
        match self.site().plug() {
            Some(wire) => SiteMaas::Wire(WireMaas { world: self.clone(), from, workflow, wire: wire.clients() }),
            None => SiteMaas::Fast(SimMaas { world: self.clone(), from, workflow }),
        }
    }

    /// The rack resolver as the controller asks it.
    pub(crate) fn site_resolver(self: &Rc<Self>, from: HostId) -> SiteResolver {
        match self.site().plug() {
            Some(wire) => SiteResolver::Wire(wire.clients()),
            None => SiteResolver::Fast(SimResolver { world: self.clone(), from }),
        }
    }

    /// The site's secrets store as the controller asks it.
    pub(crate) fn site_secrets(self: &Rc<Self>, from: HostId) -> SiteSecretsPort {
        match self.site().plug() {
            Some(wire) => SiteSecretsPort::Wire(wire.clients()),
            None => SiteSecretsPort::Fast(SimSiteSecrets { world: self.clone(), from }),
        }
    }
}

/// [`port::MaasApi`] on either transport.
pub(crate) enum SiteMaas {
    Fast(SimMaas),
    Wire(WireMaas),
}

impl port::MaasApi for SiteMaas {
    async fn machines(&self) -> Result<Vec<port::Machine>, MaasError> {
        either!(SiteMaas, self.machines())
    }
    async fn machines_with_mac(&self, mac: &str) -> Result<Vec<port::Machine>, MaasError> {
        either!(SiteMaas, self.machines_with_mac(mac))
    }
    async fn new_machines(&self) -> Result<Vec<port::Machine>, MaasError> {
        either!(SiteMaas, self.new_machines())
    }
    async fn machine(&self, system_id: &str) -> Result<port::Machine, MaasError> {
        either!(SiteMaas, self.machine(system_id))
    }
    async fn create_machine(&self, new: &port::NewMachine) -> Result<port::Machine, MaasError> {
        either!(SiteMaas, self.create_machine(new))
    }
    async fn commission(&self, system_id: &str) -> Result<port::Machine, MaasError> {
        either!(SiteMaas, self.commission(system_id))
    }
    async fn events(&self, system_id: &str, after: Option<u64>) -> Result<Vec<port::MaasEvent>, MaasError> {
        either!(SiteMaas, self.events(system_id, after))
    }
    async fn disks(&self, system_id: &str) -> Result<Vec<port::Disk>, MaasError> {
        either!(SiteMaas, self.disks(system_id))
    }
    async fn set_boot_disk(&self, system_id: &str, disk_id: u64) -> Result<(), MaasError> {
        either!(SiteMaas, self.set_boot_disk(system_id, disk_id))
    }
    async fn interfaces(&self, system_id: &str) -> Result<Vec<port::Interface>, MaasError> {
        either!(SiteMaas, self.interfaces(system_id))
    }
    async fn subnets(&self) -> Result<Vec<port::Subnet>, MaasError> {
        either!(SiteMaas, self.subnets())
    }
    async fn region_services(&self) -> Result<Vec<port::RegionService>, MaasError> {
        either!(SiteMaas, self.region_services())
    }
    async fn link_subnet_auto(&self, system_id: &str, interface_id: u64, subnet_id: u64) -> Result<(), MaasError> {
        either!(SiteMaas, self.link_subnet_auto(system_id, interface_id, subnet_id))
    }
    async fn disconnect_interface(&self, system_id: &str, interface_id: u64) -> Result<(), MaasError> {
        either!(SiteMaas, self.disconnect_interface(system_id, interface_id))
    }
    async fn deploy(
        &self,
        system_id: &str,
        user_data: &engine::secret::Secret,
        enable_hw_sync: bool,
    ) -> Result<port::Machine, MaasError> {
        either!(SiteMaas, self.deploy(system_id, user_data, enable_hw_sync))
    }
    async fn release(&self, system_id: &str, erase: bool) -> Result<port::Machine, MaasError> {
        either!(SiteMaas, self.release(system_id, erase))
    }
    async fn abort(&self, system_id: &str) -> Result<port::Machine, MaasError> {
        either!(SiteMaas, self.abort(system_id))
    }
    async fn mark_fixed(&self, system_id: &str) -> Result<port::Machine, MaasError> {
        either!(SiteMaas, self.mark_fixed(system_id))
    }
    async fn power_off(&self, system_id: &str) -> Result<(), MaasError> {
        either!(SiteMaas, self.power_off(system_id))
    }
    async fn power_on(&self, system_id: &str) -> Result<(), MaasError> {
        either!(SiteMaas, self.power_on(system_id))
    }
    async fn power_state(&self, system_id: &str) -> Result<port::PowerState, MaasError> {
        either!(SiteMaas, self.power_state(system_id))
    }
    async fn delete_machine(&self, system_id: &str) -> Result<(), MaasError> {
        either!(SiteMaas, self.delete_machine(system_id))
    }
}

/// The engine's real MAAS client on the wire, with the trace the in-process adapter writes: each call is traced
/// (`site.request`) under the same op name when its answer (or failure) reaches the controller, so the oracles
/// judge both transports alike. Deviation (decorator): the client does not say which 2xx answered, so a success is
/// traced as 200; an HTTP error keeps its status, a transport failure has none (as on the fast transport).
pub(crate) struct WireMaas {
    pub world: Rc<World>,
    pub from: HostId,
    pub workflow: String,
    pub wire: Rc<SiteClients>,
}

impl WireMaas {
    async fn traced<T>(
        &self,
        op: &str,
        system_id: Option<&str>,
        call: impl std::future::Future<Output = Result<T, MaasError>>,
    ) -> Result<T, MaasError> {
        let result = call.await;
        let status = match &result {
            Ok(_) => Some(200),
            Err(MaasError::Http { status, .. }) => Some(*status),
            Err(MaasError::Transport(_)) => None,
        };
        self.world.after_site_request(self.from, &self.workflow, op, system_id, status, result.is_ok()).await;
        result
    }
}

impl port::MaasApi for WireMaas {
    async fn machines(&self) -> Result<Vec<port::Machine>, MaasError> {
        self.traced("list", None, self.wire.maas.machines()).await
    }
    async fn machines_with_mac(&self, mac: &str) -> Result<Vec<port::Machine>, MaasError> {
        self.traced("list_by_mac", None, self.wire.maas.machines_with_mac(mac)).await
    }
    async fn new_machines(&self) -> Result<Vec<port::Machine>, MaasError> {
        self.traced("list_new", None, self.wire.maas.new_machines()).await
    }
    async fn machine(&self, system_id: &str) -> Result<port::Machine, MaasError> {
        self.traced("read", Some(system_id), self.wire.maas.machine(system_id)).await
    }
    async fn create_machine(&self, new: &port::NewMachine) -> Result<port::Machine, MaasError> {
        self.traced("create", None, self.wire.maas.create_machine(new)).await
    }
    async fn commission(&self, system_id: &str) -> Result<port::Machine, MaasError> {
        self.traced("commission", Some(system_id), self.wire.maas.commission(system_id)).await
    }
    async fn events(&self, system_id: &str, after: Option<u64>) -> Result<Vec<port::MaasEvent>, MaasError> {
        self.traced("events", Some(system_id), self.wire.maas.events(system_id, after)).await
    }
    async fn disks(&self, system_id: &str) -> Result<Vec<port::Disk>, MaasError> {
        self.traced("disks", Some(system_id), self.wire.maas.disks(system_id)).await
    }
    async fn set_boot_disk(&self, system_id: &str, disk_id: u64) -> Result<(), MaasError> {
        self.traced("set_boot_disk", Some(system_id), self.wire.maas.set_boot_disk(system_id, disk_id)).await
    }
    async fn interfaces(&self, system_id: &str) -> Result<Vec<port::Interface>, MaasError> {
        self.traced("interfaces", Some(system_id), self.wire.maas.interfaces(system_id)).await
    }
    async fn subnets(&self) -> Result<Vec<port::Subnet>, MaasError> {
        self.traced("subnets", None, self.wire.maas.subnets()).await
    }
    async fn region_services(&self) -> Result<Vec<port::RegionService>, MaasError> {
        self.traced("regioncontrollers", None, self.wire.maas.region_services()).await
    }
    async fn link_subnet_auto(&self, system_id: &str, interface_id: u64, subnet_id: u64) -> Result<(), MaasError> {
        let call = self.wire.maas.link_subnet_auto(system_id, interface_id, subnet_id);
        self.traced("link_subnet", Some(system_id), call).await
    }
    async fn disconnect_interface(&self, system_id: &str, interface_id: u64) -> Result<(), MaasError> {
        let call = self.wire.maas.disconnect_interface(system_id, interface_id);
        self.traced("disconnect", Some(system_id), call).await
    }
    async fn deploy(
        &self,
        system_id: &str,
        user_data: &engine::secret::Secret,
        enable_hw_sync: bool,
    ) -> Result<port::Machine, MaasError> {
        self.traced("deploy", Some(system_id), self.wire.maas.deploy(system_id, user_data, enable_hw_sync)).await
    }
    async fn release(&self, system_id: &str, erase: bool) -> Result<port::Machine, MaasError> {
        self.traced("release", Some(system_id), self.wire.maas.release(system_id, erase)).await
    }
    async fn abort(&self, system_id: &str) -> Result<port::Machine, MaasError> {
        self.traced("abort", Some(system_id), self.wire.maas.abort(system_id)).await
    }
    async fn mark_fixed(&self, system_id: &str) -> Result<port::Machine, MaasError> {
        self.traced("mark_fixed", Some(system_id), self.wire.maas.mark_fixed(system_id)).await
    }
    async fn power_off(&self, system_id: &str) -> Result<(), MaasError> {
        self.traced("power_off", Some(system_id), self.wire.maas.power_off(system_id)).await
    }
    async fn power_on(&self, system_id: &str) -> Result<(), MaasError> {
        self.traced("power_on", Some(system_id), self.wire.maas.power_on(system_id)).await
    }
    async fn power_state(&self, system_id: &str) -> Result<port::PowerState, MaasError> {
        self.traced("query_power_state", Some(system_id), self.wire.maas.power_state(system_id)).await
    }
    async fn delete_machine(&self, system_id: &str) -> Result<(), MaasError> {
        self.traced("delete", Some(system_id), self.wire.maas.delete_machine(system_id)).await
    }
}

/// [`port::Resolver`] on either transport (on the wire: the engine's DNS client over turmoil UDP).
pub(crate) enum SiteResolver {
    Fast(SimResolver),
    Wire(Rc<SiteClients>),
}

impl port::Resolver for SiteResolver {
    async fn resolve(&self, name: &str) -> Result<port::DnsAnswer, TransportError> {
        match self {
            SiteResolver::Fast(inner) => inner.resolve(name).await,
            SiteResolver::Wire(wire) => wire.resolver.resolve(name).await,
        }
    }
}

/// [`port::SiteSecrets`] on either transport (on the wire: the engine's secrets client over turmoil TCP).
pub(crate) enum SiteSecretsPort {
    Fast(SimSiteSecrets),
    Wire(Rc<SiteClients>),
}

impl port::SiteSecrets for SiteSecretsPort {
    async fn site_config(&self) -> Result<port::SiteConfig, SecretsError> {
        match self {
            SiteSecretsPort::Fast(inner) => inner.site_config().await,
            SiteSecretsPort::Wire(wire) => wire.secrets.site_config().await,
        }
    }
    async fn power_credential(&self, node: &str) -> Result<port::PowerCredential, SecretsError> {
        match self {
            SiteSecretsPort::Fast(inner) => inner.power_credential(node).await,
            SiteSecretsPort::Wire(wire) => wire.secrets.power_credential(node).await,
        }
    }
    async fn bootstrap_token(&self, node: &str, ttl_ms: u64) -> Result<engine::secret::Secret, SecretsError> {
        match self {
            SiteSecretsPort::Fast(inner) => inner.bootstrap_token(node, ttl_ms).await,
            SiteSecretsPort::Wire(wire) => wire.secrets.bootstrap_token(node, ttl_ms).await,
        }
    }
    async fn node_secrets_capabilities(&self) -> Result<Vec<String>, SecretsError> {
        match self {
            SiteSecretsPort::Fast(inner) => inner.node_secrets_capabilities().await,
            SiteSecretsPort::Wire(wire) => wire.secrets.node_secrets_capabilities().await,
        }
    }
    async fn delete_node_secrets(&self, node: &str) -> Result<u32, SecretsError> {
        match self {
            SiteSecretsPort::Fast(inner) => inner.delete_node_secrets(node).await,
            SiteSecretsPort::Wire(wire) => wire.secrets.delete_node_secrets(node).await,
        }
    }
    async fn revoke_bootstrap_tokens(&self, node: &str) -> Result<u32, SecretsError> {
        match self {
            SiteSecretsPort::Fast(inner) => inner.revoke_bootstrap_tokens(node).await,
            SiteSecretsPort::Wire(wire) => wire.secrets.revoke_bootstrap_tokens(node).await,
        }
    }
}

#[cfg(test)]
mod tests;
