//! The simulated world of one run on the fast transport: named hosts (`controller`, `hub`, `node-01` …) whose tasks
//! share one current-thread tokio runtime with a paused clock, the message-level network between them, the fakes
//! they run, and the adapters that plug the real engine into its ports.
//!
//! Everything is single-threaded and ordered: hosts are a `Vec` indexed by id, maps are `BTreeMap`, every random draw
//! comes from the run's seed tree. Virtual time is tokio's paused clock: when every task is idle, time jumps to the
//! next timer.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::future::Future;
use std::rc::Rc;

use engine::ports::{self, Clock, HeartbeatSnapshot, InstanceHeartbeat, Journal, JournalError, Signal, Signals, TransportError};
use engine::secret::SECRET_MARKER;
use fakes::agent::{Agent, AgentAction, HEARTBEAT_INTERVAL_MS, HEARTBEAT_TIMEOUT_MS, HeartbeatOutcome, ServiceState};
use fakes::hub::{AgentKind, AgentStatus, Hub, HubConfig, HubEvent, Request, Response};
use rand::{Rng, RngCore};
use rand_chacha::ChaCha8Rng;
use tokio::sync::oneshot;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::disk::SimDisk;
use crate::faults::Step;
use crate::net::{HostId, NetState};
use crate::oracles::{OracleContext, OracleSet};
use crate::seed::{Consumer, SeedTree};
use crate::spec::{CONTROLLER, HUB, RunSpec};
use crate::trace::{Body, Event, Trace};

const CONTROLLER_ID: HostId = 0;
const HUB_ID: HostId = 1;
const SIM_HOST: &str = "sim";
/// Disk key of a node's agent service state (`running` / `stopped`), as systemd keeps a unit's enablement.
const AGENT_SERVICE_KEY: &str = "agent.service";
/// Disk key of the controller's journal.
const JOURNAL_KEY: &str = "controller.journal";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Controller,
    Hub,
    /// A node, by 1-based index.
    Node(u32),
}

struct Host {
    role: Role,
    up: bool,
    boot: u64,
    skew_ms: i64,
    disk: SimDisk,
    tasks: JoinSet<()>,
}

/// One run's world.
pub struct World {
    pub spec: Rc<RunSpec>,
    seeds: SeedTree,
    start: Instant,
    names: Vec<Rc<str>>,
    ids: BTreeMap<String, HostId>,
    sim_host: Rc<str>,
    hosts: RefCell<Vec<Host>>,
    net: RefCell<NetState>,
    trace: RefCell<Trace>,
    /// The hub's database: it survives crashes of the hub host (every request is a committed transaction).
    hub: RefCell<Hub>,
    /// Each node's agent bearer token (minted from the node's seed stream).
    tokens: Vec<String>,
    /// Each node's own random stream (agent heartbeat phase).
    node_rngs: RefCell<Vec<ChaCha8Rng>>,
    /// The first panic message of a task of this run, if any.
    panic: RefCell<Option<String>>,
    faults: RefCell<BTreeMap<String, u64>>,
    stopped: Cell<bool>,
}

impl World {
    /// Builds the world at virtual time 0. Nothing runs until [`World::boot_all`].
    pub fn new(spec: Rc<RunSpec>, seed: u64, keep_trace: bool) -> Rc<World> {
        let seeds = SeedTree::new(seed);
        let mut names: Vec<Rc<str>> = vec![Rc::from(CONTROLLER), Rc::from(HUB)];
        let mut roles = vec![Role::Controller, Role::Hub];
        let mut node_rngs = Vec::new();
        let mut tokens = Vec::new();
        for index in 1..=spec.fleet.nodes {
            names.push(Rc::from(spec.fleet.node_name(index)));
            roles.push(Role::Node(index));
            let mut rng = seeds.rng(Consumer::Node(index));
            tokens.push(format!("{SECRET_MARKER}{:016x}{:016x}", rng.next_u64(), rng.next_u64()));
            node_rngs.push(rng);
        }
        let ids = names.iter().enumerate().map(|(id, name)| (name.to_string(), id)).collect();
        let hosts = roles
            .into_iter()
            .map(|role| Host { role, up: false, boot: 0, skew_ms: 0, disk: SimDisk::default(), tasks: JoinSet::new() })
            .collect();
        let oracle_ctx = OracleContext {
            controller: CONTROLLER.to_owned(),
            hub: HUB.to_owned(),
            agent_ttl_ms: spec.hub.agent_ttl_ms,
            sweep_interval_ms: spec.hub.sweep_interval_ms,
            call_timeout_ms: spec.engine.call_timeout_ms,
            latency_max_ms: spec.latency_max_ms(),
        };
        let hub = Hub::new(HubConfig {
            agent_ttl_ms: spec.hub.agent_ttl_ms,
            expiry: spec.engine.hub_expiry,
            sweep_interval_ms: spec.hub.sweep_interval_ms,
        });
        Rc::new(World {
            net: RefCell::new(NetState::new(seeds.rng(Consumer::Network), spec.network)),
            spec,
            seeds,
            start: Instant::now(),
            names,
            ids,
            sim_host: Rc::from(SIM_HOST),
            hosts: RefCell::new(hosts),
            trace: RefCell::new(Trace::new(OracleSet::all(&oracle_ctx), keep_trace)),
            hub: RefCell::new(hub),
            tokens,
            node_rngs: RefCell::new(node_rngs),
            panic: RefCell::new(None),
            faults: RefCell::new(BTreeMap::new()),
            stopped: Cell::new(false),
        })
    }

    // --- time ------------------------------------------------------------------------------------------------------

    /// Virtual ms since the run started.
    pub fn now_ms(&self) -> u64 {
        Instant::now().duration_since(self.start).as_millis() as u64
    }

    fn host_now_ms(&self, host: HostId) -> u64 {
        let skew = self.hosts.borrow()[host].skew_ms;
        self.now_ms().saturating_add_signed(skew)
    }

    pub async fn sleep_until_ms(&self, at_ms: u64) {
        tokio::time::sleep_until(self.start + std::time::Duration::from_millis(at_ms)).await;
    }

    // --- trace -----------------------------------------------------------------------------------------------------

    fn record(&self, host: HostId, body: Body) {
        let event = Event { t_ms: self.now_ms(), host: self.names[host].clone(), body };
        self.trace.borrow_mut().record(event);
    }

    fn record_sim(&self, body: Body) {
        let event = Event { t_ms: self.now_ms(), host: self.sim_host.clone(), body };
        self.trace.borrow_mut().record(event);
    }

    pub fn with_trace<T>(&self, f: impl FnOnce(&mut Trace) -> T) -> T {
        f(&mut self.trace.borrow_mut())
    }

    pub fn faults(&self) -> BTreeMap<String, u64> {
        self.faults.borrow().clone()
    }

    pub fn set_panic(&self, message: String) {
        self.panic.borrow_mut().get_or_insert(message);
    }

    pub fn panic_message(&self) -> Option<String> {
        self.panic.borrow().clone()
    }

    // --- hosts -----------------------------------------------------------------------------------------------------

    pub fn host_id(&self, name: &str) -> HostId {
        *self.ids.get(name).unwrap_or_else(|| panic!("unknown host {name}: specs are validated before a run"))
    }

    fn spawn_on(self: &Rc<Self>, host: HostId, task: impl Future<Output = ()> + 'static) {
        let mut hosts = self.hosts.borrow_mut();
        let tasks = &mut hosts[host].tasks;
        tasks.spawn_local(task);
        // Reap finished tasks so a long run does not accumulate them; a panic ends the run with its message.
        while let Some(result) = tasks.try_join_next() {
            if let Err(error) = result {
                if error.is_panic() {
                    self.set_panic(panic_text(error.into_panic().as_ref()));
                }
            }
        }
    }

    /// Records the start of the run, registers every agent with the hub (enrolled before the run), boots every host.
    pub fn boot_all(self: &Rc<Self>) {
        self.record_sim(Body::RunStart {
            seed: self.seeds.seed(),
            nodes: u64::from(self.spec.fleet.nodes),
            config_hash: self.spec.config_hash(),
        });
        for index in 1..=self.spec.fleet.nodes {
            let name = self.spec.fleet.node_name(index);
            let durable = self.spec.fleet.durable.contains(&name);
            let kind = if durable { AgentKind::Durable } else { AgentKind::Fungible };
            let token = self.tokens[index as usize - 1].clone();
            self.hub_request(Request::Register { agent: name, kind, token });
        }
        for host in 0..self.names.len() {
            self.boot(host);
        }
    }

    fn boot(self: &Rc<Self>, host: HostId) {
        let role = {
            let mut hosts = self.hosts.borrow_mut();
            let state = &mut hosts[host];
            state.up = true;
            state.boot += 1;
            state.role
        };
        let boot = self.hosts.borrow()[host].boot;
        self.record(host, Body::HostBoot { boot });
        match role {
            Role::Controller => {
                let world = self.clone();
                self.spawn_on(host, async move { world.run_controller().await });
            }
            Role::Hub => {
                let world = self.clone();
                self.spawn_on(host, async move { world.run_hub_sweeper().await });
            }
            Role::Node(index) => {
                let world = self.clone();
                self.spawn_on(host, async move { world.run_agent(host, index).await });
            }
        }
    }

    fn crash(self: &Rc<Self>, host: HostId) {
        let lost = {
            let mut hosts = self.hosts.borrow_mut();
            let state = &mut hosts[host];
            if !state.up {
                return;
            }
            state.up = false;
            state.tasks.abort_all();
            let lost = state.disk.unsynced_writes() as u64;
            state.disk.crash();
            lost
        };
        self.record(host, Body::HostCrash { lost_unsynced_writes: lost });
    }

    fn is_up(&self, host: HostId) -> bool {
        self.hosts.borrow()[host].up
    }

    /// Stops every task and drops them, breaking the world's reference cycles so it can be freed.
    pub fn shutdown(&self) {
        self.stopped.set(true);
        let tasks: Vec<JoinSet<()>> =
            self.hosts.borrow_mut().iter_mut().map(|host| std::mem::take(&mut host.tasks)).collect();
        drop(tasks);
    }

    // --- network ---------------------------------------------------------------------------------------------------

    /// Sends a request from `from` to `to` and waits for the answer, at most `timeout_ms`. `deliver` runs on `to`
    /// (as one of its tasks) if and when the request arrives there.
    async fn call<T: 'static>(
        self: &Rc<Self>,
        from: HostId,
        to: HostId,
        timeout_ms: u64,
        deliver: impl FnOnce(&Rc<World>) -> T + 'static,
    ) -> Result<T, TransportError> {
        let deadline = Instant::now() + std::time::Duration::from_millis(timeout_ms);
        let plan = self.net.borrow_mut().plan_call(from, to);
        let round_trip = std::time::Duration::from_millis(plan.request_latency_ms + plan.response_latency_ms);
        if !self.is_up(to) {
            tokio::time::sleep(round_trip.min(deadline - Instant::now())).await;
            return Err(TransportError::ConnectionRefused);
        }
        if plan.request_lost || self.net.borrow().is_blocked(from, to) {
            tokio::time::sleep_until(deadline).await;
            return Err(TransportError::Timeout);
        }
        let (reply, answer) = oneshot::channel::<Option<T>>();
        let world = self.clone();
        self.spawn_on(to, async move {
            tokio::time::sleep(std::time::Duration::from_millis(plan.request_latency_ms)).await;
            world.wait_released(from, to).await;
            if world.net.borrow().is_blocked(from, to) {
                let _ = reply.send(None);
                return;
            }
            let value = deliver(&world);
            tokio::time::sleep(std::time::Duration::from_millis(plan.response_latency_ms)).await;
            world.wait_released(to, from).await;
            let delivered = !plan.response_lost && !world.net.borrow().is_blocked(to, from);
            let _ = reply.send(delivered.then_some(value));
        });
        match tokio::time::timeout_at(deadline, answer).await {
            Ok(Ok(Some(value))) => Ok(value),
            // Lost on the way: the caller only learns it from its timeout.
            Ok(Ok(None)) => {
                tokio::time::sleep_until(deadline).await;
                Err(TransportError::Timeout)
            }
            // The task holding the call was killed: the far end crashed mid-call.
            Ok(Err(_)) => Err(TransportError::ConnectionReset),
            Err(_) => Err(TransportError::Timeout),
        }
    }

    async fn wait_released(&self, from: HostId, to: HostId) {
        loop {
            let held = self.net.borrow().held(from, to);
            let Some(notify) = held else { return };
            notify.notified().await;
        }
    }

    // --- the hub ---------------------------------------------------------------------------------------------------

    /// Handles one request on the hub's model, at the hub's clock, and traces what happened.
    fn hub_request(&self, request: Request) -> Response {
        let mut events = Vec::new();
        let now_ms = self.host_now_ms(HUB_ID);
        let response = self.hub.borrow_mut().handle(now_ms, request, &mut events);
        self.record_hub_events(events);
        response
    }

    fn record_hub_events(&self, events: Vec<HubEvent>) {
        for event in events {
            let body = match event {
                HubEvent::Registered { agent } => {
                    let durable = self.spec.fleet.durable.contains(&agent);
                    Body::HubRegistered { agent, durable }
                }
                HubEvent::Heartbeat { agent } => Body::HubHeartbeat { agent },
                HubEvent::HeartbeatRefused { agent } => Body::HubHeartbeatRefused { agent },
                HubEvent::BackOnline { agent } => Body::HubBackOnline { agent },
                HubEvent::Offline { agent, silent_ms } => Body::HubOffline { agent, silent_ms },
                HubEvent::Tombstoned { agent, silent_ms, epoch_member: _ } => Body::HubTombstoned { agent, silent_ms },
                HubEvent::EpochOpened { epoch, members: _ } => {
                    let members = self.hub.borrow().epoch(epoch).map(|e| e.members.iter().cloned().collect()).unwrap_or_default();
                    Body::HubEpochOpened { epoch, members }
                }
                HubEvent::EpochClosed { epoch } => Body::HubEpochClosed { epoch },
                HubEvent::HoldPlaced { agent, owner } => Body::HubHoldPlaced { agent, owner },
                HubEvent::HoldReleased { agent, owner } => Body::HubHoldReleased { agent, owner },
                HubEvent::Dispatched { agent, task } => Body::HubDispatched { agent, task },
                HubEvent::DispatchRefused { agent, task } => Body::HubDispatchRefused { agent, task },
            };
            self.record(HUB_ID, body);
        }
    }

    async fn run_hub_sweeper(self: Rc<Self>) {
        let interval_ms = self.spec.hub.sweep_interval_ms;
        loop {
            tokio::time::sleep(std::time::Duration::from_millis(interval_ms)).await;
            let mut events = Vec::new();
            let now_ms = self.host_now_ms(HUB_ID);
            self.hub.borrow_mut().sweep(now_ms, &mut events);
            self.record_hub_events(events);
        }
    }

    // --- node agents -----------------------------------------------------------------------------------------------

    async fn run_agent(self: Rc<Self>, host: HostId, index: u32) {
        let name = self.names[host].to_string();
        let token = self.tokens[index as usize - 1].clone();
        let mut agent = Agent::new(name.clone());
        let phase_ms = self.node_rngs.borrow_mut()[index as usize - 1].random_range(0..HEARTBEAT_INTERVAL_MS);
        tokio::time::sleep(std::time::Duration::from_millis(phase_ms)).await;
        let mut next = Instant::now();
        loop {
            agent.service = match self.hosts.borrow()[host].disk.read(AGENT_SERVICE_KEY) {
                Some(b"stopped") => ServiceState::Stopped,
                _ => ServiceState::Running,
            };
            if agent.poll_tick() == AgentAction::SendHeartbeat {
                let request = Request::Heartbeat { agent: name.clone(), token: token.clone() };
                let result = self.call(host, HUB_ID, HEARTBEAT_TIMEOUT_MS, move |world| world.hub_request(request)).await;
                let outcome = match result {
                    Ok(Response::Ok) => HeartbeatOutcome::Accepted,
                    Ok(Response::Error(error)) => {
                        self.record(host, Body::AgentHeartbeatFailed { error: error.to_string() });
                        HeartbeatOutcome::Refused
                    }
                    Ok(other) => panic!("hub answered a heartbeat with {other:?}"),
                    Err(error) => {
                        self.record(host, Body::AgentHeartbeatFailed { error: error.to_string() });
                        HeartbeatOutcome::Unreachable
                    }
                };
                agent.handle_heartbeat_outcome(outcome);
            }
            next += std::time::Duration::from_millis(HEARTBEAT_INTERVAL_MS);
            while next <= Instant::now() {
                next += std::time::Duration::from_millis(HEARTBEAT_INTERVAL_MS);
            }
            tokio::time::sleep_until(next).await;
        }
    }

    fn set_agent_service(&self, host: HostId, state: &[u8]) {
        let mut hosts = self.hosts.borrow_mut();
        let disk = &mut hosts[host].disk;
        disk.write(AGENT_SERVICE_KEY, state);
        disk.sync();
    }

    // --- the controller (the real engine) ---------------------------------------------------------------------------

    async fn run_controller(self: Rc<Self>) {
        let clock = SimClock { world: self.clone(), host: CONTROLLER_ID };
        let hub = SimHub { world: self.clone(), from: CONTROLLER_ID };
        let signals = SimSignals { world: self.clone(), host: CONTROLLER_ID };
        let journal = SimJournal { world: self.clone(), host: CONTROLLER_ID };
        engine::sensor::run_instance_status_sensor(&clock, &hub, &signals, &journal, engine::sensor::SensorConfig::default()).await;
    }

    // --- the fault plan --------------------------------------------------------------------------------------------

    /// Runs the plan's steps at their times. Not a host task: crashes do not stop it.
    pub async fn run_fault_plan(self: Rc<Self>) {
        let steps = self.spec.steps.clone();
        for timed in steps {
            self.sleep_until_ms(timed.at_ms).await;
            self.apply(&timed.step);
        }
    }

    fn apply(self: &Rc<Self>, step: &Step) {
        self.record_sim(Body::Step { step: step.clone() });
        if step.is_fault(&self.spec.network) {
            *self.faults.borrow_mut().entry(step.kind().to_owned()).or_insert(0) += 1;
        }
        let id = |name: &str| self.host_id(name);
        match step {
            Step::Partition { a, b } => {
                let mut net = self.net.borrow_mut();
                net.partition_oneway(id(a), id(b));
                net.partition_oneway(id(b), id(a));
            }
            Step::PartitionOneway { from, to } => self.net.borrow_mut().partition_oneway(id(from), id(to)),
            Step::Repair { a, b } => {
                let mut net = self.net.borrow_mut();
                net.repair_oneway(id(a), id(b));
                net.repair_oneway(id(b), id(a));
            }
            Step::RepairOneway { from, to } => self.net.borrow_mut().repair_oneway(id(from), id(to)),
            Step::Hold { a, b } => {
                let mut net = self.net.borrow_mut();
                net.hold(id(a), id(b));
                net.hold(id(b), id(a));
            }
            Step::Release { a, b } => {
                let mut net = self.net.borrow_mut();
                net.release(id(a), id(b));
                net.release(id(b), id(a));
            }
            Step::LinkLoss { a, b, request_per_mille, response_per_mille } => {
                let mut net = self.net.borrow_mut();
                for (x, y) in [(id(a), id(b)), (id(b), id(a))] {
                    let mut link = net.link(x, y);
                    link.request_loss_per_mille = *request_per_mille;
                    link.response_loss_per_mille = *response_per_mille;
                    net.set_link(x, y, link);
                }
            }
            Step::LinkLatency { a, b, min_ms, max_ms } => {
                let mut net = self.net.borrow_mut();
                for (x, y) in [(id(a), id(b)), (id(b), id(a))] {
                    let mut link = net.link(x, y);
                    link.latency_min_ms = *min_ms;
                    link.latency_max_ms = *max_ms;
                    net.set_link(x, y, link);
                }
            }
            Step::Crash { target } => self.crash(id(target)),
            Step::Restart { target } => {
                if !self.is_up(id(target)) {
                    self.boot(id(target));
                }
            }
            Step::ClockSkew { target, skew_ms } => self.hosts.borrow_mut()[id(target)].skew_ms = *skew_ms,
            Step::AgentStop { target } => self.set_agent_service(id(target), b"stopped"),
            Step::AgentStart { target } => self.set_agent_service(id(target), b"running"),
            Step::OpenEpoch { members } => self.driver_hub_request(Request::OpenEpoch { members: members.clone() }),
            Step::CloseEpoch { epoch } => self.driver_hub_request(Request::CloseEpoch { epoch: *epoch }),
            Step::TaskLease { target, duration_ms } => {
                let until_ms = self.host_now_ms(HUB_ID) + duration_ms;
                self.driver_hub_request(Request::GrantLease { agent: target.clone(), until_ms });
            }
        }
    }

    /// A driver action reaches the hub only when the hub is up, as an operator's call would.
    fn driver_hub_request(&self, request: Request) {
        if self.is_up(HUB_ID) {
            let _ = self.hub_request(request);
        }
    }

    /// The hub's view of every agent, for the end-of-run summary.
    pub fn agent_statuses(&self) -> BTreeMap<String, AgentStatus> {
        self.hub.borrow().agents().map(|row| (row.id.clone(), row.status)).collect()
    }
}

/// A panic payload as text.
pub fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_owned()
    }
}

// --- the engine's ports over the simulated world ----------------------------------------------------------------------

struct SimClock {
    world: Rc<World>,
    host: HostId,
}

impl Clock for SimClock {
    fn now_ms(&self) -> u64 {
        self.world.host_now_ms(self.host)
    }

    fn monotonic_ms(&self) -> u64 {
        self.world.now_ms()
    }

    fn sleep_ms(&self, duration_ms: u64) -> impl Future<Output = ()> {
        tokio::time::sleep(std::time::Duration::from_millis(duration_ms))
    }
}

struct SimHub {
    world: Rc<World>,
    from: HostId,
}

impl ports::Hub for SimHub {
    async fn read_heartbeats(&self) -> Result<HeartbeatSnapshot, ports::HubError> {
        let timeout_ms = self.world.spec.engine.call_timeout_ms;
        let response = self.world.call(self.from, HUB_ID, timeout_ms, |world| world.hub_request(Request::ReadHeartbeats)).await?;
        match response {
            Response::Heartbeats { now_ms, rows } => Ok(HeartbeatSnapshot {
                hub_now_ms: now_ms,
                instances: rows
                    .into_iter()
                    .map(|row| InstanceHeartbeat {
                        instance: row.agent,
                        last_heartbeat_ms: row.last_seen_ms,
                        registered: row.status != AgentStatus::Tombstoned,
                    })
                    .collect(),
            }),
            Response::Error(error) => Err(ports::HubError::Rejected(error.to_string())),
            other => Err(ports::HubError::Rejected(format!("unexpected answer to a heartbeat read: {other:?}"))),
        }
    }
}

struct SimSignals {
    world: Rc<World>,
    host: HostId,
}

impl Signals for SimSignals {
    fn emit(&self, signal: Signal) {
        let body = match signal {
            Signal::InstanceSilent { instance, silent_for_ms } => Body::InstanceSilent { instance, silent_for_ms },
            Signal::InstanceRecovered { instance, silent_for_ms } => Body::InstanceRecovered { instance, silent_for_ms },
            Signal::HubReadFailed { error } => Body::HubReadFailed { error: error.to_string() },
        };
        self.world.record(self.host, body);
    }
}

/// The controller's journal on its simulated disk: each append is written and fsynced before it returns.
struct SimJournal {
    world: Rc<World>,
    host: HostId,
}

impl Journal for SimJournal {
    async fn append(&self, record: &str) -> Result<(), JournalError> {
        if record.contains('\n') {
            return Err(JournalError::WriteFailed("a journal record is one line".into()));
        }
        let mut hosts = self.world.hosts.borrow_mut();
        let disk = &mut hosts[self.host].disk;
        let mut bytes = disk.read(JOURNAL_KEY).map(<[u8]>::to_vec).unwrap_or_default();
        bytes.extend_from_slice(record.as_bytes());
        bytes.push(b'\n');
        disk.write(JOURNAL_KEY, &bytes);
        disk.sync();
        Ok(())
    }

    async fn replay(&self) -> Result<Vec<String>, JournalError> {
        let hosts = self.world.hosts.borrow();
        let Some(bytes) = hosts[self.host].disk.read(JOURNAL_KEY) else { return Ok(Vec::new()) };
        let text = std::str::from_utf8(bytes).map_err(|error| JournalError::Corrupt(error.to_string()))?;
        Ok(text.lines().map(str::to_owned).collect())
    }
}
