//! The simulated world of one run on the fast transport: named hosts (`controller`, `hub`, `node-01` …) whose tasks
//! share one current-thread tokio runtime with a paused clock, the message-level network between them, the fakes
//! they run, and the adapters that plug the real engine into its ports.
//!
//! Everything is single-threaded and ordered: hosts are a `Vec` indexed by id, maps are `BTreeMap`, every random draw
//! comes from the run's seed tree. Virtual time is tokio's paused clock: when every task is idle, time jumps to the
//! next timer.

pub mod decommission;
pub mod disk;
pub mod journal;
pub mod net;
pub mod operator;
pub mod plug;
pub mod run;
pub mod site;

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::future::Future;
use std::rc::Rc;

use engine::ports::{
    self, Clock, Endpoint, HeartbeatSnapshot, InstanceHeartbeat, Journal, JournalError, Signal, Signals, SshRequest,
    SshResponse, TransportError,
};
use engine::rollout::driver::{Ports, RolloutRequest};
use engine::rollout::plan::PhaseBounds;
use engine::rollout::retry::Backoff;
use engine::secret::SECRET_MARKER;
use fakes::agent::{Agent, AgentAction, HEARTBEAT_INTERVAL_MS, HEARTBEAT_TIMEOUT_MS, HeartbeatOutcome, ServiceState};
use fakes::artifacts::{ArtifactStore, capsule_set};
use fakes::hub::{AgentKind, AgentStatus, Hub, HubConfig, HubEvent, Request, Response};
use fakes::ssh::{SshEndpoint, SshEvent, SshOp, SshOutcome, SshReply};
use fakes::worker::{Worker, signature_for};
use rand::{Rng, RngCore};
use rand_chacha::ChaCha8Rng;
use tokio::sync::oneshot;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::model::faults::{DeathPoint, DeathSubsystem, Step, decommission_step, site_step};
use crate::model::seed::{Consumer, SeedTree};
use crate::model::spec::{CONTROLLER, HUB, PRIOR_GENERATION, PRIOR_REVISION, RunSpec};
use crate::observe::trace::{Body, Event, Sink, Trace};
use crate::world::disk::SimDisk;
use crate::world::journal::JournalFile;
use crate::world::net::{HostId, NetState};

pub(crate) const CONTROLLER_ID: HostId = 0;
pub(crate) const HUB_ID: HostId = 1;
const SIM_HOST: &str = "sim";
/// How often the canary dispatcher asks the hub for a task.
const CANARY_PERIOD_MS: u64 = 20_000;
/// Disk key of the controller's journal.
const JOURNAL_KEY: &str = "controller.journal";

/// The owner of an operator's dispatch hold (`operator_hold`): no rollout may release it.
pub const OPERATOR_HOLD_OWNER: &str = "operator:maintenance";

/// The controller's principal at the hub.
const CONTROLLER_PRINCIPAL: &str = "controller";
/// How long a controller credential is valid when issued (a day, as the rollout request's budget assumes).
const CONTROLLER_CREDENTIAL_LIFETIME_MS: u64 = 24 * 3_600_000;

/// The controller credential of one rotation generation (secret-marked, so a leak into the trace is caught).
fn controller_credential(generation: u64) -> String {
    format!("{SECRET_MARKER}hub-credential-{generation}")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct CredentialState {
    generation: u64,
    /// Virtual time at which the rotation state machine installs the next credential, after an expiry.
    renew_at_ms: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Controller,
    Hub,
    /// A node, by 1-based index.
    Node(u32),
    /// The MAAS region, rack and site secrets store (runs with `[onboarding]`).
    Maas,
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
    pub(crate) hub: RefCell<Hub>,
    /// Each node's agent bearer token (minted from the node's seed stream).
    tokens: Vec<String>,
    /// Each node's own random stream (agent heartbeat phase).
    node_rngs: RefCell<Vec<ChaCha8Rng>>,
    /// The first panic message of a task of this run, if any.
    panic: RefCell<Option<String>>,
    faults: RefCell<BTreeMap<String, u64>>,
    /// Which of the spec's stage-triggered steps have fired (each fires once).
    stage_steps_fired: RefCell<Vec<bool>>,
    /// How many times each (workflow, stage) has started.
    stage_starts: RefCell<BTreeMap<(String, String), u64>>,
    stopped: Cell<bool>,
    /// Each node's worker state behind its SSH endpoint (its disk and installed software: survives crashes).
    workers: RefCell<Vec<SshEndpoint>>,
    /// The hub host's SSH endpoint (the legacy recovery reconciles attestation through it).
    hub_ssh: RefCell<SshEndpoint>,
    artifacts: RefCell<ArtifactStore>,
    /// Per host: SSH connections still to time out (`ssh_timeout`).
    ssh_timeouts: RefCell<BTreeMap<HostId, u32>>,
    /// Controller mutations the hub will carry out without its answer arriving (`hub_timeout`).
    hub_timeouts: Cell<u32>,
    /// A controller death armed at a named point of one workflow's protocol (the rollout's, onboarding's or
    /// decommission's).
    /// The armed controller death: where it fires, and when the controller boots again after it (if the step says).
    death_trap: Cell<Option<(DeathSubsystem, DeathPoint, Option<u64>)>>,
    /// The operator's rollout request (`start_rollout`): kept by the controller's configuration across restarts.
    rollout_request: RefCell<Option<RolloutRequest>>,
    rollout_requested: Rc<tokio::sync::Notify>,
    /// The engine's jitter stream.
    jitter: RefCell<ChaCha8Rng>,
    /// The hub's own stream (the canary dispatcher's choice of worker).
    hub_rng: RefCell<ChaCha8Rng>,
    canary_tasks: Cell<u64>,
    /// The controller's hub credential in the secrets store, and when the rotation state machine (outside
    /// deployment) renews it after a `credential_expiry`.
    credential: Cell<CredentialState>,
    /// The MAAS site, in runs with `[onboarding]`.
    pub(crate) site: Option<crate::world::site::SiteWorld>,
}

/// What a delivered request does at its destination.
pub(crate) enum Delivery<T> {
    Reply(T),
    /// Answer after a delay (a slow fetch).
    After(u64, T),
    /// Never answer (non-returning storage).
    Hang,
}

impl World {
    /// Builds the world at virtual time 0. Nothing runs until [`World::boot_all`].
    pub fn new(spec: Rc<RunSpec>, seed: u64, keep_trace: bool, sink: Box<dyn Sink>) -> Rc<World> {
        let stage_steps = spec.stage_steps.len();
        let seeds = SeedTree::new(seed);
        let mut names: Vec<Rc<str>> = vec![Rc::from(CONTROLLER), Rc::from(HUB)];
        let mut roles = vec![Role::Controller, Role::Hub];
        let mut node_rngs = Vec::new();
        let mut tokens = Vec::new();
        let mut workers = Vec::new();
        for index in 1..=spec.fleet.nodes {
            let name = spec.fleet.node_name(index);
            names.push(Rc::from(name.as_str()));
            roles.push(Role::Node(index));
            let mut rng = seeds.rng(Consumer::Node(index));
            tokens.push(format!("{SECRET_MARKER}{:016x}{:016x}", rng.next_u64(), rng.next_u64()));
            let attestation_key = format!("{SECRET_MARKER}{:016x}", rng.next_u64());
            let worker = Worker::installed(name.clone(), PRIOR_REVISION, PRIOR_GENERATION, attestation_key);
            workers.push(SshEndpoint::new(format!("hostkey-{name}-1"), worker));
            node_rngs.push(rng);
        }
        let site = spec.onboarding.as_ref().map(|onboarding| {
            // Added last, only in onboarding runs: every other run keeps its host numbering.
            names.push(Rc::from(crate::model::spec::MAAS));
            roles.push(Role::Maas);
            crate::world::site::SiteWorld::new(names.len() - 1, onboarding, &seeds)
        });
        let mut artifacts = ArtifactStore::new();
        for capsule in capsule_set(PRIOR_REVISION) {
            artifacts.publish(capsule);
        }
        for timed in &spec.steps {
            if let Step::StartRollout { revision } = &timed.step {
                for capsule in capsule_set(revision) {
                    artifacts.publish(capsule);
                }
            }
        }
        let ids = names.iter().enumerate().map(|(id, name)| (name.to_string(), id)).collect();
        let hosts = roles
            .into_iter()
            .map(|role| Host { role, up: false, boot: 0, skew_ms: 0, disk: SimDisk::default(), tasks: JoinSet::new() })
            .collect();
        let mut hub = Hub::new(HubConfig {
            agent_ttl_ms: spec.hub.agent_ttl_ms,
            expiry: spec.engine.hub_expiry,
            sweep_interval_ms: spec.hub.sweep_interval_ms,
        });
        hub.issue_credential(CONTROLLER_PRINCIPAL, &controller_credential(1), CONTROLLER_CREDENTIAL_LIFETIME_MS);
        Rc::new(World {
            net: RefCell::new(NetState::new(seeds.rng(Consumer::Network), spec.network)),
            spec,
            seeds,
            start: Instant::now(),
            names,
            ids,
            sim_host: Rc::from(SIM_HOST),
            hosts: RefCell::new(hosts),
            trace: RefCell::new(Trace::new(sink, keep_trace)),
            hub: RefCell::new(hub),
            tokens,
            node_rngs: RefCell::new(node_rngs),
            panic: RefCell::new(None),
            faults: RefCell::new(BTreeMap::new()),
            stage_steps_fired: RefCell::new(vec![false; stage_steps]),
            stage_starts: RefCell::new(BTreeMap::new()),
            stopped: Cell::new(false),
            workers: RefCell::new(workers),
            hub_ssh: RefCell::new(SshEndpoint::new("hostkey-hub-1", Worker::bare(HUB, format!("{SECRET_MARKER}hub")))),
            artifacts: RefCell::new(artifacts),
            ssh_timeouts: RefCell::new(BTreeMap::new()),
            hub_timeouts: Cell::new(0),
            death_trap: Cell::new(None),
            rollout_request: RefCell::new(None),
            rollout_requested: Rc::new(tokio::sync::Notify::new()),
            jitter: RefCell::new(seeds.rng(Consumer::EngineJitter)),
            hub_rng: RefCell::new(seeds.rng(Consumer::Hub)),
            canary_tasks: Cell::new(0),
            credential: Cell::new(CredentialState { generation: 1, renew_at_ms: None }),
            site,
        })
    }

    // --- time ------------------------------------------------------------------------------------------------------

    /// Virtual ms since the run started.
    pub fn now_ms(&self) -> u64 {
        Instant::now().duration_since(self.start).as_millis() as u64
    }

    pub(crate) fn host_now_ms(&self, host: HostId) -> u64 {
        let skew = self.hosts.borrow()[host].skew_ms;
        self.now_ms().saturating_add_signed(skew)
    }

    pub async fn sleep_until_ms(&self, at_ms: u64) {
        tokio::time::sleep_until(self.start + std::time::Duration::from_millis(at_ms)).await;
    }

    // --- trace -----------------------------------------------------------------------------------------------------

    pub(crate) fn record(&self, host: HostId, body: Body) {
        let event = Event { t_ms: self.now_ms(), host: self.names[host].clone(), body };
        self.trace.borrow_mut().record(event);
    }

    fn record_sim(&self, body: Body) {
        let event = Event { t_ms: self.now_ms(), host: self.sim_host.clone(), body };
        self.trace.borrow_mut().record(event);
    }

    /// The trace's digest, its event count and its kept lines, at the end of the run.
    pub fn end_trace(&self) -> (String, u64, Vec<String>) {
        let mut trace = self.trace.borrow_mut();
        (trace.digest(), trace.events(), trace.take_lines())
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

    pub(crate) fn spawn_on(self: &Rc<Self>, host: HostId, task: impl Future<Output = ()> + 'static) {
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
        if self.site.is_some() {
            self.start_site();
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
                if let Some(plug) = self.site.as_ref().and_then(|site| site.plug()) {
                    plug.controller_booted(self, boot);
                }
                let world = self.clone();
                self.spawn_on(host, async move { world.run_controller().await });
                if self.site.is_some() {
                    let world = self.clone();
                    self.spawn_on(host, async move { world.run_onboarding_controller().await });
                }
            }
            Role::Maas => self.boot_maas(host),
            Role::Hub => {
                let world = self.clone();
                self.spawn_on(host, async move { world.run_hub_sweeper().await });
                let world = self.clone();
                self.spawn_on(host, async move { world.run_canary_dispatcher().await });
            }
            Role::Node(index) => {
                let world = self.clone();
                self.spawn_on(host, async move { world.run_agent(host, index).await });
            }
        }
    }

    pub(crate) fn crash(self: &Rc<Self>, host: HostId) {
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
        if self.hosts.borrow()[host].role == Role::Maas {
            self.crash_maas();
        }
        self.record(host, Body::HostCrash { lost_unsynced_writes: lost });
    }

    pub(crate) fn is_up(&self, host: HostId) -> bool {
        self.hosts.borrow()[host].up
    }

    /// Stops every task and drops them, breaking the world's reference cycles so it can be freed.
    pub fn shutdown(&self) {
        self.stopped.set(true);
        if let Some(site) = &self.site {
            site.shutdown();
        }
        let tasks: Vec<JoinSet<()>> =
            self.hosts.borrow_mut().iter_mut().map(|host| std::mem::take(&mut host.tasks)).collect();
        drop(tasks);
    }

    // --- network ---------------------------------------------------------------------------------------------------

    /// Sends a request from `from` to `to` and waits for the answer, at most `timeout_ms`. `deliver` runs on `to`
    /// (as one of its tasks) if and when the request arrives there.
    pub(crate) async fn call<T: 'static>(
        self: &Rc<Self>,
        from: HostId,
        to: HostId,
        timeout_ms: u64,
        deliver: impl FnOnce(&Rc<World>) -> T + 'static,
    ) -> Result<T, TransportError> {
        self.call_with(from, to, timeout_ms, move |world| Delivery::Reply(deliver(world))).await
    }

    /// [`World::call`] whose delivery may answer late or never.
    pub(crate) async fn call_with<T: 'static>(
        self: &Rc<Self>,
        from: HostId,
        to: HostId,
        timeout_ms: u64,
        deliver: impl FnOnce(&Rc<World>) -> Delivery<T> + 'static,
    ) -> Result<T, TransportError> {
        if !self.is_up(from) {
            // A dead host sends nothing; its task is being cancelled.
            std::future::pending::<()>().await;
        }
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
            let value = match deliver(&world) {
                Delivery::Reply(value) => value,
                Delivery::After(delay_ms, value) => {
                    tokio::time::sleep(std::time::Duration::from_millis(delay_ms)).await;
                    value
                }
                Delivery::Hang => std::future::pending().await,
            };
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
    pub(crate) fn hub_request(&self, request: Request) -> Response {
        let mut events = Vec::new();
        let now_ms = self.host_now_ms(HUB_ID);
        let response = self.hub.borrow_mut().handle(now_ms, request, &mut events);
        self.record_hub_events(events);
        response
    }

    pub(crate) fn record_hub_events(&self, events: Vec<HubEvent>) {
        for event in events {
            let body = match event {
                HubEvent::Registered { agent } => {
                    // An onboarded node's agent enrols as a durable worker identity.
                    let onboarded = self.spec.onboarding.as_ref().is_some_and(|o| o.has_machine(&agent));
                    let durable = self.spec.fleet.durable.contains(&agent) || onboarded;
                    Body::HubRegistered { agent, durable }
                }
                HubEvent::Heartbeat { agent } => Body::HubHeartbeat { agent },
                HubEvent::HeartbeatRefused { agent } => Body::HubHeartbeatRefused { agent },
                HubEvent::BackOnline { agent } => Body::HubBackOnline { agent },
                HubEvent::Offline { agent, silent_ms } => Body::HubOffline { agent, silent_ms },
                HubEvent::Tombstoned { agent, silent_ms, epoch_member: _ } => Body::HubTombstoned { agent, silent_ms },
                HubEvent::EpochOpened { epoch, members: _ } => {
                    let members =
                        self.hub.borrow().epoch(epoch).map(|e| e.members.iter().cloned().collect()).unwrap_or_default();
                    Body::HubEpochOpened { epoch, members }
                }
                HubEvent::EpochClosed { epoch } => Body::HubEpochClosed { epoch },
                HubEvent::HoldPlaced { agent, owner } => Body::HubHoldPlaced { agent, owner },
                HubEvent::HoldReleased { agent, owner } => Body::HubHoldReleased { agent, owner },
                HubEvent::Dispatched { agent, task } => Body::HubDispatched { agent, task },
                HubEvent::DispatchRefused { agent, task } => Body::HubDispatchRefused { agent, task },
                HubEvent::CredentialRejected { principal, expired } => {
                    Body::HubCredentialRejected { principal, expired }
                }
                HubEvent::LockAcquired { holder, fence, superseded } => {
                    Body::HubLockAcquired { holder, fence, superseded }
                }
                HubEvent::LockReleased { holder, fence } => Body::HubLockReleased { holder, fence },
                HubEvent::MutationFenced { holder, presented, current } => {
                    Body::HubMutationFenced { holder, presented, current }
                }
                HubEvent::PrincipalRevoked { agent } => Body::HubPrincipalRevoked { agent },
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

    /// A trusted client's canary tasks, as in the RCCA's recovery ("stage and release the canary tasks, dispatch
    /// work"): every 20 s the hub is asked to dispatch a task to a worker drawn from the hub's seed stream. The hub
    /// refuses held and unknown workers; the oracles check that nothing lands on a held or quiesced one.
    async fn run_canary_dispatcher(self: Rc<Self>) {
        loop {
            tokio::time::sleep(std::time::Duration::from_millis(CANARY_PERIOD_MS)).await;
            let index = self.hub_rng.borrow_mut().random_range(1..=self.spec.fleet.nodes);
            // Task names count across hub restarts (the client's counter, not the hub's).
            let task = self.canary_tasks.get() + 1;
            self.canary_tasks.set(task);
            let agent = self.spec.fleet.node_name(index);
            let _ = self.hub_request(Request::Dispatch { agent, task: format!("canary-{task}") });
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
            agent.service = self.workers.borrow()[index as usize - 1].worker.service;
            if agent.poll_tick() == AgentAction::SendHeartbeat {
                let revision = self.node_revision(index);
                let request = Request::Heartbeat { agent: name.clone(), token: token.clone(), revision };
                let result =
                    self.call(host, HUB_ID, HEARTBEAT_TIMEOUT_MS, move |world| world.hub_request(request)).await;
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

    /// The source revision node `index` runs, as its agent reports it (attested by its bearer token).
    fn node_revision(&self, index: u32) -> Option<String> {
        self.workers.borrow()[index as usize - 1].worker.installed.as_ref().map(|installed| installed.revision.clone())
    }

    /// An operator or a fault stops or starts a node's agent service outside any rollout.
    fn set_agent_service(&self, host: HostId, running: bool) {
        let Role::Node(index) = self.hosts.borrow()[host].role else { return };
        self.workers.borrow_mut()[index as usize - 1].worker.service =
            if running { ServiceState::Running } else { ServiceState::Stopped };
        self.record(host, Body::WorkerService { running });
    }

    // --- the controller (the real engine) ---------------------------------------------------------------------------

    async fn run_controller(self: Rc<Self>) {
        let world = self.clone();
        self.spawn_on(CONTROLLER_ID, async move { world.run_rollout_controller().await });
        let clock = SimClock { world: self.clone(), host: CONTROLLER_ID };
        let hub = SimHub::new(self.clone(), CONTROLLER_ID);
        let signals = SimSignals { world: self.clone(), host: CONTROLLER_ID };
        let journal = SimJournal { world: self.clone(), host: CONTROLLER_ID };
        engine::sensor::run_instance_status_sensor(
            &clock,
            &hub,
            &signals,
            &journal,
            engine::sensor::SensorConfig::default(),
        )
        .await;
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

    /// Fires the stage-triggered steps waiting for this start of this stage of `workflow`, in file order.
    fn on_stage_started(self: &Rc<Self>, workflow: &str, stage: &str) {
        let occurrence = {
            let mut starts = self.stage_starts.borrow_mut();
            let count = starts.entry((workflow.to_owned(), stage.to_owned())).or_insert(0);
            *count += 1;
            *count
        };
        let due: Vec<Step> = {
            let mut fired = self.stage_steps_fired.borrow_mut();
            self.spec
                .stage_steps
                .iter()
                .zip(fired.iter_mut())
                .filter(|(staged, fired)| {
                    let workflow_id = match staged.stage {
                        engine::matrix::Stage::Onboarding(_) => {
                            crate::model::ids::onboarding_workflow_id(&staged.workflow)
                        }
                        engine::matrix::Stage::Decommission(_) => {
                            crate::model::ids::decommission_workflow_id(&staged.workflow)
                        }
                    };
                    !**fired
                        && staged.stage.as_str() == stage
                        && staged.occurrence == occurrence
                        && workflow_id == workflow
                })
                .map(|(staged, fired)| {
                    *fired = true;
                    staged.step.clone()
                })
                .collect()
        };
        for step in &due {
            self.apply(step);
        }
    }

    pub(crate) fn apply(self: &Rc<Self>, step: &Step) {
        self.record_sim(Body::Step { step: step.clone() });
        if let Some(plug) = self.site.as_ref().and_then(|site| site.plug()) {
            plug.mirror_step(step);
        }
        if step.is_fault(&self.spec.network, |host| self.is_up(self.host_id(host))) {
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
            Step::AgentStop { target } => self.set_agent_service(id(target), false),
            Step::AgentStart { target } => self.set_agent_service(id(target), true),
            Step::StartRollout { revision } => {
                *self.rollout_request.borrow_mut() = Some(self.rollout_request_for(revision));
                self.rollout_requested.notify_one();
            }
            Step::MarkerDrift { target, shape } => {
                self.with_worker(id(target), |endpoint| endpoint.worker.apply_drift(*shape))
            }
            Step::SshTimeout { target, count } => {
                *self.ssh_timeouts.borrow_mut().entry(id(target)).or_insert(0) += count;
            }
            Step::EndpointIdentityChange { target } => self.with_worker(id(target), |endpoint| {
                let generation = endpoint.host_key.rsplit('-').next().and_then(|g| g.parse::<u64>().ok()).unwrap_or(1);
                let name = endpoint.worker.id.clone();
                endpoint.change_identity(format!("hostkey-{name}-{}", generation + 1));
            }),
            Step::StorageFault { target, storage } => {
                self.with_worker(id(target), |endpoint| endpoint.set_storage(*storage))
            }
            Step::ArtifactMissing { artifact, restored } => {
                for timed in &self.spec.steps {
                    if let Step::StartRollout { revision } = &timed.step {
                        let digest = fakes::artifacts::capsule_digest(*artifact, revision);
                        let mut store = self.artifacts.borrow_mut();
                        if *restored { store.repair(&digest) } else { store.set_missing(digest) }
                    }
                }
            }
            Step::ControllerDeath { point, subsystem, restart_after_ms } => {
                self.death_trap.set(Some((*subsystem, *point, *restart_after_ms)))
            }
            Step::RouteSwap => {
                let _ = self.hub.borrow_mut().swap_route_bundle();
            }
            Step::OpenEpoch { members } => self.driver_hub_request(Request::OpenEpoch { members: members.clone() }),
            Step::CloseEpoch { epoch } => {
                self.driver_hub_request(Request::CloseEpoch { epoch: *epoch, untouched: Vec::new() })
            }
            Step::CredentialExpiry { renew_after_ms } => {
                let hub_now_ms = self.host_now_ms(HUB_ID);
                self.hub.borrow_mut().expire_credential(CONTROLLER_PRINCIPAL, hub_now_ms);
                let state = self.credential.get();
                self.credential.set(CredentialState { renew_at_ms: Some(self.now_ms() + renew_after_ms), ..state });
            }
            Step::HubTimeout { count } => self.hub_timeouts.set(self.hub_timeouts.get() + count),
            Step::StaleLock { lease_ms } => {
                let holder = "controller@crashed-earlier".to_owned();
                self.driver_hub_request(Request::AcquireLock { holder, lease_ms: *lease_ms });
            }
            Step::OperatorHold { target } => self.driver_hub_request(Request::PlaceHold {
                agent: target.clone(),
                owner: OPERATOR_HOLD_OWNER.to_owned(),
            }),
            Step::PrincipalRevoked { target } => {
                let mut events = Vec::new();
                self.hub.borrow_mut().revoke_principal(target, &mut events);
                self.record_hub_events(events);
            }
            Step::TaskLease { target, duration_ms } => {
                let until_ms = self.host_now_ms(HUB_ID) + duration_ms;
                self.driver_hub_request(Request::GrantLease { agent: target.clone(), until_ms });
            }
            site_step!() | decommission_step!() => self.apply_site_step(step),
        }
    }

    /// A driver action reaches the hub only when the hub is up, as an operator's call would.
    fn driver_hub_request(&self, request: Request) {
        if self.is_up(HUB_ID) {
            let _ = self.hub_request(request);
        }
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

pub(crate) struct SimClock {
    pub(crate) world: Rc<World>,
    pub(crate) host: HostId,
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

/// The hub adapter: it presents the credential the engine authenticated with and the lock fence it holds with every
/// mutation (a real client would send them as headers). Reads are public at the hub.
pub(crate) struct SimHub {
    world: Rc<World>,
    from: HostId,
    session: RefCell<HubSession>,
}

#[derive(Default)]
struct HubSession {
    token: String,
    fence: Option<u64>,
}

impl SimHub {
    pub(crate) fn new(world: Rc<World>, from: HostId) -> SimHub {
        SimHub { world, from, session: RefCell::new(HubSession::default()) }
    }

    /// A mutation, in the envelope of the controller's credential and fence.
    async fn mutate(&self, request: Request) -> Result<Response, ports::HubError> {
        let (token, fence) = {
            let session = self.session.borrow();
            (session.token.clone(), session.fence)
        };
        let request = Request::Authorized {
            principal: CONTROLLER_PRINCIPAL.to_owned(),
            token,
            fence,
            request: Box::new(request),
        };
        let lost = self.world.hub_timeouts.get();
        if lost > 0 {
            // The hub carries the mutation out; its answer never arrives, and the caller times out.
            self.world.hub_timeouts.set(lost - 1);
            let timeout_ms = self.world.spec.engine.call_timeout_ms;
            let hung = self.world.call_with(self.from, HUB_ID, timeout_ms, move |world| {
                let _ = world.hub_request(request);
                Delivery::<Response>::Hang
            });
            return Err(match hung.await {
                Err(error) => ports::HubError::Transport(error),
                Ok(_) => unreachable!("a hung hub call only ends in a timeout"),
            });
        }
        self.request(request).await
    }
}

impl ports::Hub for SimHub {
    async fn authenticate(&self, credential: &engine::secret::Secret) -> Result<u64, ports::HubError> {
        let token = credential.expose().to_owned();
        let request = Request::Authenticate { principal: CONTROLLER_PRINCIPAL.to_owned(), token: token.clone() };
        match self.request(request).await? {
            Response::Authenticated { expires_at_ms } => {
                self.session.borrow_mut().token = token;
                Ok(expires_at_ms)
            }
            other => Err(rejected(other)),
        }
    }

    async fn acquire_lock(&self, holder: &str, lease_ms: u64) -> Result<ports::LockGrant, ports::HubError> {
        let request = Request::AcquireLock { holder: holder.to_owned(), lease_ms };
        match self.mutate(request).await? {
            Response::LockGranted { fence, .. } => {
                self.session.borrow_mut().fence = Some(fence);
                Ok(ports::LockGrant::Granted { fence })
            }
            Response::LockHeld { holder, fence, expires_at_ms } => {
                let remaining_ms = expires_at_ms.saturating_sub(self.world.host_now_ms(HUB_ID));
                Ok(ports::LockGrant::Held { holder, fence, remaining_ms })
            }
            other => Err(rejected(other)),
        }
    }

    async fn supersede_lock(&self, holder: &str, fence: u64, lease_ms: u64) -> Result<u64, ports::HubError> {
        match self.mutate(Request::SupersedeLock { holder: holder.to_owned(), fence, lease_ms }).await? {
            Response::LockGranted { fence, .. } => {
                self.session.borrow_mut().fence = Some(fence);
                Ok(fence)
            }
            other => Err(rejected(other)),
        }
    }

    async fn renew_lock(&self, fence: u64, lease_ms: u64) -> Result<(), ports::HubError> {
        match self.mutate(Request::RenewLock { fence, lease_ms }).await? {
            Response::LockGranted { .. } => Ok(()),
            other => Err(rejected(other)),
        }
    }

    async fn release_lock(&self, fence: u64) -> Result<bool, ports::HubError> {
        match self.mutate(Request::ReleaseLock { fence }).await? {
            Response::Ok => {
                self.session.borrow_mut().fence = None;
                Ok(true)
            }
            Response::Error(fakes::hub::HubError::Conflict { .. }) => Ok(false),
            other => Err(rejected(other)),
        }
    }

    async fn read_holds(&self) -> Result<BTreeMap<String, Vec<String>>, ports::HubError> {
        match self.request(Request::ReadHolds).await? {
            Response::Holds { holds } => Ok(holds),
            other => Err(rejected(other)),
        }
    }

    async fn read_heartbeats(&self) -> Result<HeartbeatSnapshot, ports::HubError> {
        let timeout_ms = self.world.spec.engine.call_timeout_ms;
        let response =
            self.world.call(self.from, HUB_ID, timeout_ms, |world| world.hub_request(Request::ReadHeartbeats)).await?;
        match response {
            Response::Heartbeats { now_ms, rows } => Ok(HeartbeatSnapshot {
                hub_now_ms: now_ms,
                instances: rows
                    .into_iter()
                    .map(|row| InstanceHeartbeat {
                        instance: row.agent,
                        last_heartbeat_ms: row.last_seen_ms,
                        registered: row.status != AgentStatus::Tombstoned,
                        revision: row.revision,
                    })
                    .collect(),
            }),
            Response::Error(error) => Err(ports::HubError::Rejected(error.to_string())),
            other => Err(ports::HubError::Rejected(format!("unexpected answer to a heartbeat read: {other:?}"))),
        }
    }

    async fn place_hold(&self, agent: &str, owner: &str) -> Result<(), ports::HubError> {
        let request = Request::PlaceHold { agent: agent.to_owned(), owner: owner.to_owned() };
        match self.mutate(request).await? {
            Response::Ok => Ok(()),
            other => Err(rejected(other)),
        }
    }

    async fn release_hold(&self, agent: &str, owner: &str) -> Result<bool, ports::HubError> {
        let request = Request::ReleaseHold { agent: agent.to_owned(), owner: owner.to_owned() };
        match self.mutate(request).await? {
            Response::Ok => Ok(true),
            // No such hold: released already (a replay), which is what the caller wanted.
            Response::Error(fakes::hub::HubError::Conflict { .. }) => Ok(false),
            other => Err(rejected(other)),
        }
    }

    async fn open_epoch(&self, members: &[String]) -> Result<u64, ports::HubError> {
        match self.mutate(Request::OpenEpoch { members: members.to_vec() }).await? {
            Response::EpochOpened { epoch } => Ok(epoch),
            other => Err(rejected(other)),
        }
    }

    async fn route_bundle(&self) -> Result<String, ports::HubError> {
        match self.request(Request::ReadRouteBundle).await? {
            Response::RouteBundle { digest } => Ok(digest),
            other => Err(rejected(other)),
        }
    }

    async fn close_epoch(&self, epoch: u64, untouched: &[String]) -> Result<bool, ports::HubError> {
        match self.mutate(Request::CloseEpoch { epoch, untouched: untouched.to_vec() }).await? {
            Response::Ok => Ok(true),
            Response::Error(fakes::hub::HubError::Conflict { .. }) => Ok(false),
            other => Err(rejected(other)),
        }
    }
}

impl SimHub {
    async fn request(&self, request: Request) -> Result<Response, ports::HubError> {
        let timeout_ms = self.world.spec.engine.call_timeout_ms;
        Ok(self.world.call(self.from, HUB_ID, timeout_ms, move |world| world.hub_request(request)).await?)
    }
}

fn rejected(response: Response) -> ports::HubError {
    match response {
        Response::Error(error @ fakes::hub::HubError::CredentialRejected { .. }) => {
            ports::HubError::Unauthorized(error.to_string())
        }
        Response::Error(error @ fakes::hub::HubError::StaleFence { .. }) => ports::HubError::Fenced(error.to_string()),
        Response::Error(error) => ports::HubError::Rejected(error.to_string()),
        other => ports::HubError::Rejected(format!("unexpected answer: {other:?}")),
    }
}

pub(crate) struct SimSignals {
    pub(crate) world: Rc<World>,
    pub(crate) host: HostId,
}

impl Signals for SimSignals {
    fn emit(&self, signal: Signal) {
        let body = match signal {
            Signal::InstanceSilent { instance, silent_for_ms } => Body::InstanceSilent { instance, silent_for_ms },
            Signal::InstanceRecovered { instance, silent_for_ms } => {
                Body::InstanceRecovered { instance, silent_for_ms }
            }
            Signal::HubReadFailed { error } => Body::HubReadFailed { error: error.to_string() },
            Signal::Rollout { rollout, event } => {
                Body::Rollout { rollout, event: crate::observe::trace::RolloutBody::from(event) }
            }
            Signal::Onboarding { workflow, event } => {
                Body::Onboarding { workflow, event: crate::observe::trace::OnboardingBody::from(event) }
            }
            Signal::Decommission { workflow, event } => {
                Body::Decommission { workflow, event: crate::observe::trace::OnboardingBody::from(event) }
            }
        };
        let started = match &body {
            Body::Onboarding { workflow, event: crate::observe::trace::OnboardingBody::StageStarted { stage, .. } }
            | Body::Decommission {
                workflow,
                event: crate::observe::trace::OnboardingBody::StageStarted { stage, .. },
            } => Some((workflow.clone(), stage.clone())),
            _ => None,
        };
        self.world.record(self.host, body);
        if let Some((workflow, stage)) = started {
            self.world.on_stage_started(&workflow, &stage);
        }
    }
}

/// The controller's journal on its simulated disk: each append is written and fsynced before it returns.
pub(crate) struct SimJournal {
    pub(crate) world: Rc<World>,
    pub(crate) host: HostId,
}

impl Journal for SimJournal {
    async fn append(&self, record: &str) -> Result<(), JournalError> {
        engine::ports::check_record(record)?;
        if !self.world.is_up(self.host) {
            std::future::pending::<()>().await;
        }
        let kind = record_kind(record);
        if kind == Some("completed") && self.world.take_death(DeathSubsystem::Rollout, DeathPoint::BeforeCompletion) {
            self.world.die_here(self.host).await;
        }
        // The MAAS workflows' deaths: before a `completed` record, after a `checkpoint` (a stage attempt's intent).
        let workflow = workflow_record_kind(record);
        if let Some((subsystem, "completed")) = workflow {
            if self.world.take_death(subsystem, DeathPoint::BeforeCompletion) {
                self.world.die_here(self.host).await;
            }
        }
        JournalFile::new(JOURNAL_KEY).append(&mut self.world.hosts.borrow_mut()[self.host].disk, record)?;
        if let Some((subsystem, "checkpoint")) = workflow {
            if self.world.take_death(subsystem, DeathPoint::AfterIntent) {
                self.world.die_here(self.host).await;
            }
        }
        if let Some(kind) = kind {
            let operation_id = record_field(record, "operation_id");
            let route_digest = record_field(record, "route_digest");
            let body = Body::JournalAppended { record: kind.to_owned(), operation_id, route_digest };
            self.world.record(self.host, body);
            if (kind == "intent" || kind == "intents")
                && self.world.take_death(DeathSubsystem::Rollout, DeathPoint::AfterIntent)
            {
                self.world.die_here(self.host).await;
            }
        }
        Ok(())
    }

    async fn replay(&self) -> Result<Vec<String>, JournalError> {
        JournalFile::new(JOURNAL_KEY).replay(&self.world.hosts.borrow()[self.host].disk)
    }
}

/// The `record` tag of a rollout journal line, if it is one.
fn record_kind(line: &str) -> Option<&'static str> {
    let json = line.strip_prefix("rollout ")?;
    let kinds = [
        "plan_frozen",
        "lock_taken",
        "epoch_opened",
        "intent",
        "intents",
        "completed",
        "node_failed",
        "lane_committed",
        "terminal",
    ];
    kinds.into_iter().find(|kind| json.starts_with(&format!("{{\"record\":\"{kind}\",")))
}

/// The subsystem and `record` tag of an onboarding or decommission journal line, if it is one.
fn workflow_record_kind(line: &str) -> Option<(DeathSubsystem, &'static str)> {
    let (subsystem, json) = if let Some(json) = line.strip_prefix("onboard ") {
        (DeathSubsystem::Onboarding, json)
    } else {
        (DeathSubsystem::Decommission, line.strip_prefix("decommission ")?)
    };
    let kinds = ["run_started", "checkpoint", "stopped", "completed"];
    kinds.into_iter().find(|kind| json.starts_with(&format!("{{\"record\":\"{kind}\","))).map(|kind| (subsystem, kind))
}

fn record_field(line: &str, field: &str) -> Option<String> {
    let json: serde_json::Value = serde_json::from_str(line.strip_prefix("rollout ")?).ok()?;
    json.get(field)?.as_str().map(str::to_owned)
}

impl World {
    fn with_worker(&self, host: HostId, f: impl FnOnce(&mut SshEndpoint)) {
        if let Role::Node(index) = self.hosts.borrow()[host].role {
            f(&mut self.workers.borrow_mut()[index as usize - 1]);
        }
    }

    /// Disarms and reports the death trap when it is armed at `point` of `subsystem`.
    pub(crate) fn take_death(self: &Rc<Self>, subsystem: DeathSubsystem, point: DeathPoint) -> bool {
        let Some((armed_subsystem, armed_point, restart_after_ms)) = self.death_trap.get() else { return false };
        if (armed_subsystem, armed_point) != (subsystem, point) {
            return false;
        }
        self.death_trap.set(None);
        if let Some(delay_ms) = restart_after_ms {
            // The world's timer, not a controller task: it must outlive the controller's death.
            let world = self.clone();
            tokio::task::spawn_local(async move {
                tokio::time::sleep(std::time::Duration::from_millis(delay_ms)).await;
                world.apply(&Step::Restart { target: CONTROLLER.to_owned() });
            });
        }
        true
    }

    /// Crashes `host` from one of its own tasks, which then never runs again.
    pub(crate) async fn die_here(self: &Rc<Self>, host: HostId) {
        self.crash(host);
        std::future::pending::<()>().await;
    }

    /// The request the operator's `start_rollout` makes: every node, the spec's lane size and floor.
    fn rollout_request_for(&self, revision: &str) -> RolloutRequest {
        let endpoints = self
            .workers
            .borrow()
            .iter()
            .map(|e| Endpoint { node: e.worker.id.clone(), host_key: e.host_key.clone() })
            .collect();
        let hub_key = self.hub_ssh.borrow().host_key.clone();
        RolloutRequest {
            rollout: format!("rollout-{revision}"),
            // One holder identity per controller process: a restarted controller must supersede its dead
            // predecessor's lock through the journal, or wait it out.
            controller: format!("controller@boot-{}", self.hosts.borrow()[CONTROLLER_ID].boot),
            revision: revision.to_owned(),
            // The next generation after the newest barrier any worker has passed.
            generation: self
                .workers
                .borrow()
                .iter()
                .map(|e| e.worker.barrier_generation)
                .max()
                .unwrap_or(PRIOR_GENERATION)
                + 1,
            // The operator approves the bundle the hub publishes when the rollout is requested.
            route_digest: self.hub.borrow().route_digest(),
            hub_url: fakes::worker::DEFAULT_HUB_URL.to_owned(),
            nodes: endpoints,
            hub_endpoint: Endpoint { node: HUB.to_owned(), host_key: hub_key },
            capsules: capsule_set(revision).into_iter().map(|capsule| capsule.digest).collect(),
            policy: self.spec.engine.rollout_policy,
            lane_size_max: self.spec.fleet.lane_size as usize,
            availability_floor: self.spec.fleet.availability_floor as usize,
            fan_out: 8,
            phases: PhaseBounds {
                hold_ms: 30_000,
                quiesce_ms: 30_000,
                install_ms: 60_000,
                write_identity_ms: 30_000,
                start_ms: 30_000,
                prove_ms: 120_000,
                release_ms: 30_000,
            },
            backoff: Backoff::default(),
            agent_ttl_ms: self.spec.hub.agent_ttl_ms,
            credential_remaining_ms: 24 * 3_600_000,
            hold_lease_ms: 3_600_000,
            lock_lease_ms: 15 * 60_000,
            credential_wait_ms: 10 * 60_000,
            prove_poll_ms: 10_000,
        }
    }

    /// The controller's rollout task: on boot and on every operator request, run the latest request unless the
    /// journal shows it finished (a non-terminal journal is adopted); then wait for the next request.
    async fn run_rollout_controller(self: Rc<Self>) {
        loop {
            let request = self.rollout_request.borrow().clone();
            if let Some(request) = request {
                let journal = SimJournal { world: self.clone(), host: CONTROLLER_ID };
                let lines = journal.replay().await.unwrap_or_default();
                let finished = format!("\"record\":\"terminal\",\"rollout\":\"{}\"", request.rollout);
                if !lines.iter().any(|line| line.contains(&finished)) {
                    let ports = Ports {
                        clock: &SimClock { world: self.clone(), host: CONTROLLER_ID },
                        hub: &SimHub::new(self.clone(), CONTROLLER_ID),
                        ssh: &SimSsh { world: self.clone(), from: CONTROLLER_ID },
                        journal: &journal,
                        signals: &SimSignals { world: self.clone(), host: CONTROLLER_ID },
                        jitter: &SimJitter { world: self.clone() },
                        secrets: &SimSecrets { world: self.clone() },
                        artifacts: &SimArtifacts { world: self.clone() },
                        verifier: &SimVerifier,
                    };
                    // Refused, partial or failed rollouts are not retried here: a new request, or a restarted
                    // controller adopting the journal, starts the next attempt.
                    ports.run_rollout(&request).await;
                }
            }
            self.rollout_requested.notified().await;
        }
    }

    /// Handles one SSH operation at a worker (or the hub host) and traces what happened there.
    fn ssh_deliver(
        &self,
        host: HostId,
        expected_host_key: &str,
        op: SshOp,
    ) -> Delivery<Result<SshReply, fakes::ssh::SshError>> {
        let now_ms = self.host_now_ms(host);
        let mut events = Vec::new();
        // A staged capsule is fetched over the network by the node: a slow fetch answers late.
        let fetch_delay_ms = match &op {
            SshOp::StageArtifact { capsule, .. } => self.artifacts.borrow().fetch_delay_ms(&capsule.digest),
            _ => 0,
        };
        let outcome = match self.hosts.borrow()[host].role {
            Role::Node(index) => {
                let mut workers = self.workers.borrow_mut();
                let endpoint = &mut workers[index as usize - 1];
                // Journal-bound operations are replay-safe at the node: an operation id already applied is acknowledged
                // without running again (the RCCA's "operation ID ... make replay safe").
                let replay = op.operation_id().is_some_and(|id| endpoint.ops_log.iter().any(|r| r.operation_id == id));
                if replay && expected_host_key == endpoint.host_key {
                    SshOutcome::Reply(Ok(SshReply::Done))
                } else {
                    endpoint.handle(now_ms, expected_host_key, op, &mut events)
                }
            }
            _ => self.hub_ssh.borrow_mut().handle(now_ms, expected_host_key, op, &mut events),
        };
        for event in events {
            let body = match event {
                SshEvent::Mutated { operation_id, op_kind, path_or_unit, .. } => {
                    if op_kind == "stop_service" || op_kind == "start_service" {
                        self.record(host, Body::WorkerService { running: op_kind == "start_service" });
                    }
                    Body::WorkerMutated { op: op_kind.to_owned(), operation_id, target: path_or_unit }
                }
                SshEvent::Refused { operation_id, op_kind, error, .. } => {
                    Body::WorkerRefused { op: op_kind.to_owned(), operation_id, error: error.to_string() }
                }
                SshEvent::Hung { operation_id, op_kind, .. } => {
                    Body::WorkerHung { op: op_kind.to_owned(), operation_id }
                }
            };
            self.record(host, body);
        }
        match outcome {
            SshOutcome::Hang => Delivery::Hang,
            SshOutcome::Reply(reply) if fetch_delay_ms > 0 => Delivery::After(fetch_delay_ms, reply),
            SshOutcome::Reply(reply) => Delivery::Reply(reply),
        }
    }
}

/// The engine's SSH port over the simulated network. Staging fetches the capsule from the artifact store at the
/// node (a network fetch, traced as such).
struct SimSsh {
    world: Rc<World>,
    from: HostId,
}

impl ports::Ssh for SimSsh {
    async fn run(&self, endpoint: &Endpoint, request: SshRequest) -> Result<SshResponse, ports::SshError> {
        let world = &self.world;
        let to = world.host_id(&endpoint.node);
        let timeout_ms = world.spec.engine.call_timeout_ms;
        let pending_timeouts = world.ssh_timeouts.borrow().get(&to).copied().unwrap_or(0);
        if pending_timeouts > 0 {
            world.ssh_timeouts.borrow_mut().insert(to, pending_timeouts - 1);
            tokio::time::sleep(std::time::Duration::from_millis(timeout_ms)).await;
            return Err(ports::SshError::Transport(TransportError::Timeout));
        }
        let mutating = !matches!(request, SshRequest::Observe);
        let op = match request {
            SshRequest::Observe => SshOp::Observe,
            SshRequest::WriteFileAtomic { operation_id, path, content, mode } => SshOp::WriteFileAtomic {
                operation_id,
                path,
                content: content.expose().to_owned(),
                mode,
                owner: fakes::worker::CANONICAL_OWNER.to_owned(),
            },
            SshRequest::StopService { operation_id } => SshOp::StopService { operation_id },
            SshRequest::StartService { operation_id } => SshOp::StartService { operation_id },
            SshRequest::StageArtifact { operation_id, digest } => {
                let fetched = world.artifacts.borrow().fetch(&digest);
                match fetched {
                    Ok(capsule) => SshOp::StageArtifact { operation_id, capsule },
                    Err(error) => return Err(ports::SshError::Refused(format!("staging {digest}: {error}"))),
                }
            }
            SshRequest::RunInstaller { operation_id, revision, generation, required_digests, route_digest } => {
                SshOp::RunInstaller { operation_id, revision, generation, required_digests, route_digest }
            }
            SshRequest::SeedHardwareSync { .. } => {
                return Err(ports::SshError::Refused(format!(
                    "{}: no MAAS hardware-sync timer on a fleet worker",
                    endpoint.node
                )));
            }
        };
        let expected = endpoint.host_key.clone();
        let reply =
            world.call_with(self.from, to, timeout_ms, move |world| world.ssh_deliver(to, &expected, op)).await?;
        let response = match reply {
            Ok(SshReply::Observation(observation)) => SshResponse::Observed(Box::new(node_report(*observation))),
            Ok(_) => SshResponse::Done,
            Err(fakes::ssh::SshError::HostKeyMismatch { presented }) => {
                return Err(ports::SshError::HostKeyMismatch { presented });
            }
            Err(error) => return Err(ports::SshError::Refused(error.to_string())),
        };
        if mutating && world.take_death(DeathSubsystem::Rollout, DeathPoint::AfterRemoteMutation) {
            world.die_here(self.from).await;
        }
        Ok(response)
    }
}

fn file_facts(stat: fakes::worker::FileStat) -> engine::ports::FileFacts {
    use engine::ports::FileKind as Kind;
    engine::ports::FileFacts {
        kind: match stat.kind {
            fakes::worker::FileKind::Regular => Kind::Regular,
            fakes::worker::FileKind::Symlink { .. } => Kind::Symlink,
            fakes::worker::FileKind::Directory => Kind::Directory,
        },
        mode: stat.mode,
        owner: stat.owner,
        nlink: stat.nlink,
        content: stat.content,
    }
}

/// The fake's observation in the engine's words (the engine never sees the fake's types).
fn node_report(observation: fakes::worker::Observation) -> ports::NodeReport {
    ports::NodeReport {
        identity: engine::ports::NodeObservation {
            node: observation.worker_id,
            env: observation.mac_env.map(file_facts),
            marker: observation.marker.map(file_facts),
            manifest: observation.manifest.map(file_facts),
            installed: observation.installed.map(|installed| (installed.revision, installed.generation)),
            barrier_generation: observation.barrier_generation,
        },
        service_running: observation.service == ServiceState::Running,
        staged: observation.staged.into_iter().collect(),
    }
}

struct SimJitter {
    world: Rc<World>,
}

impl ports::Jitter for SimJitter {
    fn draw(&self) -> u64 {
        self.world.jitter.borrow_mut().next_u64()
    }
}

/// The secrets store: the attestation key each worker's identity is enrolled with. A stand-in for Vault on the
/// controller's own network, so it has no network faults of its own yet.
struct SimSecrets {
    world: Rc<World>,
}

impl ports::Secrets for SimSecrets {
    async fn hub_credential(&self) -> Result<engine::secret::Secret, ports::SecretsError> {
        let world = &self.world;
        let mut state = world.credential.get();
        if state.renew_at_ms.is_some_and(|at_ms| world.now_ms() >= at_ms) {
            // The rotation state machine has installed the next credential at the hub and in the store.
            state = CredentialState { generation: state.generation + 1, renew_at_ms: None };
            let expires_at_ms = world.host_now_ms(HUB_ID) + CONTROLLER_CREDENTIAL_LIFETIME_MS;
            let token = controller_credential(state.generation);
            world.hub.borrow_mut().issue_credential(CONTROLLER_PRINCIPAL, &token, expires_at_ms);
            world.credential.set(state);
        }
        Ok(engine::secret::Secret::new(controller_credential(state.generation)))
    }

    async fn attestation_key(&self, node: &str) -> Result<engine::secret::Secret, ports::SecretsError> {
        let workers = self.world.workers.borrow();
        let endpoint = workers.iter().find(|endpoint| endpoint.worker.id == node);
        let env = endpoint.map(|endpoint| endpoint.worker.recovery_env_content()).unwrap_or_default();
        env.lines()
            .find_map(|line| line.strip_prefix("MAC_ATTESTATION_KEY="))
            .map(engine::secret::Secret::new)
            .ok_or_else(|| ports::SecretsError::NotFound(format!("attestation key of {node}")))
    }
}

/// The artifact store's index, as the controller sees it (on its own network: no faults of its own yet).
struct SimArtifacts {
    world: Rc<World>,
}

impl ports::Artifacts for SimArtifacts {
    async fn available(&self, digest: &str) -> Result<bool, TransportError> {
        Ok(self.world.artifacts.borrow().fetch(digest).is_ok())
    }
}

/// The simulator's trust root for deployment manifests: the fake fleet's signing scheme.
struct SimVerifier;

impl engine::rollout::preflight::SignatureVerifier for SimVerifier {
    fn verify(&self, manifest: &engine::rollout::preflight::Manifest) -> bool {
        manifest.signature == signature_for(&manifest.revision, manifest.generation)
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;
    use std::time::Duration;

    use engine::ports::TransportError;
    use proptest::prelude::*;

    use super::*;
    use crate::model::spec::parse_scenario;

    const SPEC: &str = r#"
schema_version = 1
description = "network test"
seed = 1
duration_ms_max = 86_400_000
[fleet]
nodes = 3
[network]
latency_ms = { min = 5, max = 5 }
"#;

    /// Runs `body` in a fresh world whose hosts are up but run nothing (no agents, no sensor, no sweeper).
    fn in_world<T>(spec_text: &str, body: impl AsyncFnOnce(Rc<World>) -> T) -> T {
        let spec = Rc::new(parse_scenario("t.toml", spec_text).unwrap().run);
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
        let local = tokio::task::LocalSet::new();
        local.block_on(&runtime, async {
            let sink = Box::new(crate::observe::observers::Observers::for_run(&spec));
            let world = World::new(spec, 1, false, sink);
            for host in world.hosts.borrow_mut().iter_mut() {
                host.up = true;
            }
            let out = body(world.clone()).await;
            world.shutdown();
            out
        })
    }

    fn step(world: &Rc<World>, text: &str) {
        let step: Step = toml::from_str(text).unwrap();
        world.apply(&step);
    }

    #[test]
    fn a_call_to_a_down_host_is_refused_and_does_not_run() {
        in_world(SPEC, async |world| {
            let (node, hub) = (world.host_id("node-01"), world.host_id("hub"));
            world.crash(hub);
            let ran = Rc::new(Cell::new(false));
            let flag = ran.clone();
            let result = world.call(node, hub, 1_000, move |_| flag.set(true)).await;
            assert_eq!(result, Err(TransportError::ConnectionRefused));
            assert!(!ran.get());
            assert_eq!(world.now_ms(), 10, "a refusal costs one round trip");
        });
    }

    #[test]
    fn a_host_that_crashes_mid_call_resets_it() {
        in_world(SPEC, async |world| {
            let (node, hub) = (world.host_id("node-01"), world.host_id("hub"));
            let killer = world.clone();
            tokio::task::spawn_local(async move {
                tokio::time::sleep(Duration::from_millis(2)).await;
                killer.crash(hub);
            });
            let result = world.call(node, hub, 1_000, |_| ()).await;
            assert_eq!(result, Err(TransportError::ConnectionReset));
        });
    }

    #[test]
    fn a_lost_response_times_out_although_the_call_ran() {
        let text = SPEC.replace("max = 5 }", "max = 5 }\nresponse_loss_per_mille = 1000");
        in_world(&text, async |world| {
            let (node, hub) = (world.host_id("node-01"), world.host_id("hub"));
            let ran = Rc::new(Cell::new(0));
            let counter = ran.clone();
            let result = world.call(node, hub, 1_000, move |_| counter.set(counter.get() + 1)).await;
            assert_eq!(result, Err(TransportError::Timeout));
            assert_eq!(ran.get(), 1, "executed but unacknowledged");
            assert_eq!(world.now_ms(), 1_000);
        });
    }

    #[test]
    fn one_way_partitions_drop_the_request_or_only_the_answer() {
        in_world(SPEC, async |world| {
            let (node, hub) = (world.host_id("node-01"), world.host_id("hub"));
            let ran = Rc::new(Cell::new(0));
            step(&world, "kind = \"partition_oneway\"\nfrom = \"node-01\"\nto = \"hub\"");
            let counter = ran.clone();
            assert_eq!(
                world.call(node, hub, 1_000, move |_| counter.set(counter.get() + 1)).await,
                Err(TransportError::Timeout)
            );
            assert_eq!(ran.get(), 0, "the request never arrived");
            let counter = ran.clone();
            assert_eq!(
                world.call(hub, node, 1_000, move |_| counter.set(counter.get() + 1)).await,
                Err(TransportError::Timeout)
            );
            assert_eq!(ran.get(), 1, "the other direction's request arrived; its answer was dropped");
            step(&world, "kind = \"repair_oneway\"\nfrom = \"node-01\"\nto = \"hub\"");
            assert_eq!(world.call(node, hub, 1_000, |_| 7).await, Ok(7));
        });
    }

    #[test]
    fn a_held_message_is_delivered_on_release_even_after_the_caller_gave_up() {
        in_world(SPEC, async |world| {
            let (node, hub) = (world.host_id("node-01"), world.host_id("hub"));
            step(&world, "kind = \"hold\"\na = \"node-01\"\nb = \"hub\"");
            let ran_at = Rc::new(Cell::new(None));
            let cell = ran_at.clone();
            let result = world.call(node, hub, 1_000, move |w| cell.set(Some(w.now_ms()))).await;
            assert_eq!(result, Err(TransportError::Timeout));
            assert_eq!(ran_at.get(), None);
            tokio::time::sleep(Duration::from_millis(4_000)).await;
            step(&world, "kind = \"release\"\na = \"node-01\"\nb = \"hub\"");
            tokio::time::sleep(Duration::from_millis(1)).await;
            assert_eq!(ran_at.get(), Some(5_000), "late execution at release");
        });
    }

    #[test]
    fn a_crash_loses_unsynced_writes_and_a_restart_boots_again() {
        let traced = in_world(SPEC, async |world| {
            let node = world.host_id("node-02");
            world.hosts.borrow_mut()[node].disk.write("x", b"1");
            world.hosts.borrow_mut()[node].disk.sync();
            world.hosts.borrow_mut()[node].disk.write("y", b"2");
            world.crash(node);
            assert!(!world.is_up(node));
            let disk_after = {
                let hosts = world.hosts.borrow();
                let disk = &hosts[node].disk;
                (disk.read("x").is_some(), disk.read("y").is_none())
            };
            assert_eq!(disk_after, (true, true), "synced state survives, unsynced is lost");
            world.apply(&Step::Restart { target: "node-02".into() });
            assert!(world.is_up(node));
            world.hosts.borrow()[node].boot
        });
        assert_eq!(traced, 1, "the test world starts hosts without a boot; the restart is boot 1");
    }

    #[derive(Debug, Clone)]
    enum Op {
        Partition(usize, usize),
        Repair(usize, usize),
        Send(usize, usize),
    }

    fn op() -> impl Strategy<Value = (u64, Op)> {
        let host = 0usize..5;
        (
            0u64..200,
            prop_oneof![
                (host.clone(), host.clone()).prop_map(|(a, b)| Op::Partition(a, b)),
                (host.clone(), host.clone()).prop_map(|(a, b)| Op::Repair(a, b)),
                (host.clone(), host.clone()).prop_map(|(a, b)| Op::Send(a, b)),
                (host.clone(), host).prop_map(|(a, b)| Op::Send(a, b)),
            ],
        )
    }

    /// What happened, in the order it happened (several things can happen in one virtual millisecond).
    #[derive(Debug, Clone)]
    enum Logged {
        Blocked { from: usize, to: usize, on: bool },
        Sent { index: usize, from: usize, to: usize },
        Delivered { index: usize },
        Answered { index: usize },
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Under any schedule of one-way partitions and repairs, a request is delivered at most once, never while
        /// its direction is blocked at send or at arrival, and no caller hears an answer to an undelivered request.
        #[test]
        fn never_delivers_across_a_partition_nor_twice(mut ops in proptest::collection::vec(op(), 1..40)) {
            ops.sort_by_key(|(at, _)| *at);
            let text = SPEC.replace("min = 5, max = 5", "min = 1, max = 30");
            let log = in_world(&text, async |world| {
                let log: Rc<RefCell<Vec<Logged>>> = Rc::default();
                let mut tasks = Vec::new();
                for (index, (at, op)) in ops.iter().cloned().enumerate() {
                    let (world, log) = (world.clone(), log.clone());
                    tasks.push(tokio::task::spawn_local(async move {
                        world.sleep_until_ms(at).await;
                        match op {
                            Op::Partition(from, to) | Op::Repair(from, to) if from != to => {
                                let on = matches!(op, Op::Partition(..));
                                if on {
                                    world.net.borrow_mut().partition_oneway(from, to);
                                } else {
                                    world.net.borrow_mut().repair_oneway(from, to);
                                }
                                log.borrow_mut().push(Logged::Blocked { from, to, on });
                            }
                            Op::Send(from, to) if from != to => {
                                log.borrow_mut().push(Logged::Sent { index, from, to });
                                let record = log.clone();
                                let result = world.call(from, to, 500, move |_| record.borrow_mut().push(Logged::Delivered { index })).await;
                                if result.is_ok() {
                                    log.borrow_mut().push(Logged::Answered { index });
                                }
                            }
                            _ => {}
                        }
                    }));
                }
                for task in tasks {
                    task.await.unwrap();
                }
                log.take()
            });
            let mut blocked = std::collections::BTreeSet::new();
            let mut routes = std::collections::BTreeMap::new();
            let mut delivered = std::collections::BTreeSet::new();
            for entry in log {
                match entry {
                    Logged::Blocked { from, to, on: true } => { blocked.insert((from, to)); }
                    Logged::Blocked { from, to, on: false } => { blocked.remove(&(from, to)); }
                    Logged::Sent { index, from, to } => {
                        routes.insert(index, (from, to, blocked.contains(&(from, to))));
                    }
                    Logged::Delivered { index } => {
                        let (from, to, blocked_at_send) = routes[&index];
                        prop_assert!(delivered.insert(index), "message {index} delivered twice");
                        prop_assert!(!blocked_at_send, "message {index} sent across a partition was delivered");
                        prop_assert!(!blocked.contains(&(from, to)), "message {index} arrived across a partition");
                    }
                    // The answer direction is pinned by `one_way_partitions_drop_the_request_or_only_the_answer`; here a
                    // partition can land between the reply and the caller waking in the same millisecond.
                    Logged::Answered { index } => {
                        prop_assert!(delivered.contains(&index), "message {index} answered without a delivery");
                    }
                }
            }
        }
    }
}
