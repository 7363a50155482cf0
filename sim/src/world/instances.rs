//! The instance lifecycle in the simulated world (`[instances]`): the cloud provider fake (`fakes::cloud`) and the
//! platform rows a terminate cascades through, served from the `hub` host; the guests' agents, whose boots the hub
//! hears as heartbeats; and the controller's instance task, which runs the engine's `InstanceDriver` over the
//! simulated network on the runbook's schedule — the guests' heartbeats read every 30 s, pending rows advanced and
//! owed destroys finished every pass, the replenisher every 60 s, the stuck sensor every pass, the cloud sync hourly
//! — and takes the operators' `instance_operator` requests. A restarted controller replays its journal and resumes.
//!
//! The on-call (`on_call = true`, the default) follows the runbook's recovery of each stuck row by itself: a stuck
//! provisioning row is cleared and provisioned again under its operation id, a never-ready one terminated and
//! provisioned under a fresh one, a stalled drain hard-terminated, a stalled teardown reaped at the provider console.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::rc::Rc;

use engine::instance::control::Control;
use engine::instance::driver::{Cleared, DriverError, Heard, InstanceDriver};
use engine::instance::inventory::{Backing, DeferredOperation, Instance, InstanceRecord};
use engine::instance::operator::{AuditOutcome, OperatorStep};
use engine::instance::pool::Pool;
use engine::instance::provision::AgentPhase;
use engine::instance::state::InstanceState;
use engine::instance::stuck::Stuck;
use engine::ports::TransportError;
use engine::ports::platform::{PlatformError, PlatformRows};
use engine::ports::provider::{CreateVm, Provider, ProviderError, ProviderVm};
use fakes::cloud::{CloudError, CloudProvider, CloudRequest, CloudResponse, GuestEvent};
use tokio::sync::Notify;

use crate::model::faults::{DeathPoint, DeathSubsystem, InstanceOp, ProviderFaultKind, Step};
use crate::model::spec::instances::{ACCOUNT, INSTANCE_TYPE, InstancesSpec, REGION, TEMPLATE};
use crate::observe::trace::Body;
use crate::world::controller::SimJournal;
use crate::world::metal::SimMetal;
use crate::world::net::HostId;
use crate::world::{CONTROLLER_ID, HUB_ID, World};

/// How often the controller's instance task runs a pass (the agents' heartbeat period).
pub const PASS_MS: u64 = 30_000;
/// How often the hub hears the guests (their agents heartbeat at this period).
pub const GUEST_TICK_MS: u64 = 10_000;
/// The replenisher's period.
pub const REPLENISH_MS: u64 = 60_000;
/// The cloud sync's period.
pub const SYNC_MS: u64 = 60 * 60_000;
/// Platform rows an enrolled agent has: certificates, bootstrap tokens, peers.
pub(crate) const PLATFORM_ROWS: [u32; 3] = [1, 1, 2];

/// The instance lifecycle's part of the world.
pub(crate) struct InstancesWorld {
    spec: InstancesSpec,
    cloud: RefCell<CloudProvider>,
    /// Create answers still to lose on the way back.
    answers_lost: Cell<u32>,
    /// The hub's view of each guest agent, by tag (the instance id): its last heartbeat and whether it said
    /// `phase=ready`.
    last_heartbeat: RefCell<BTreeMap<String, (u64, bool)>>,
    /// What the guests did that the controller has not read yet, in order.
    unread: RefCell<Vec<(String, Heard)>>,
    /// The platform's rows per instance (certificates, bootstrap tokens, peers), which a terminate revokes.
    platform: RefCell<BTreeMap<String, [u32; 3]>>,
    /// Operators' requests the controller has not taken yet (kept by the controller's queue across restarts).
    requests: RefCell<VecDeque<Step>>,
    wake: Rc<Notify>,
    /// The kinds of the instance records journaled, in order (what a request wrote is the slice its call added).
    journaled: RefCell<Vec<String>>,
    /// In a bare-metal run, the instance each machine's agent enrols as (the onboarding request carries it).
    metal_agents: RefCell<BTreeMap<String, String>>,
}

impl InstancesWorld {
    pub(crate) fn new(spec: &InstancesSpec) -> InstancesWorld {
        let mut cloud = CloudProvider::new();
        cloud.add_region(REGION, spec.quota);
        cloud.add_instance_type(INSTANCE_TYPE);
        InstancesWorld {
            spec: spec.clone(),
            cloud: RefCell::new(cloud),
            answers_lost: Cell::new(0),
            last_heartbeat: RefCell::new(BTreeMap::new()),
            unread: RefCell::new(Vec::new()),
            platform: RefCell::new(BTreeMap::new()),
            requests: RefCell::new(VecDeque::new()),
            wake: Rc::new(Notify::new()),
            journaled: RefCell::new(Vec::new()),
            metal_agents: RefCell::new(BTreeMap::new()),
        }
    }

    pub(crate) fn spec(&self) -> &InstancesSpec {
        &self.spec
    }

    /// The onboarding of `machine` is requested for `instance`: its agent will enrol as that instance.
    pub(crate) fn enrols_as(&self, machine: &str, instance: &str) {
        self.metal_agents.borrow_mut().insert(machine.to_owned(), instance.to_owned());
    }

    /// The instance `machine`'s agent enrols as, if its onboarding was requested for one.
    pub(crate) fn agent_of(&self, machine: &str) -> Option<String> {
        self.metal_agents.borrow().get(machine).cloned()
    }

    /// An agent enrolled at the hub: the platform rows it now has.
    pub(crate) fn platform_rows_for(&self, instance: &str, rows: [u32; 3]) {
        self.platform.borrow_mut().insert(instance.to_owned(), rows);
    }

    /// The hub heard an agent: its last heartbeat, and (once until the controller reads it) what it said.
    pub(crate) fn heard_at_hub(&self, instance: &str, heard: Heard, now_ms: u64) {
        let ready = heard == Heard::Heartbeat(AgentPhase::Ready);
        self.last_heartbeat.borrow_mut().insert(instance.to_owned(), (now_ms, ready));
        let mut unread = self.unread.borrow_mut();
        if !unread.iter().any(|(id, queued)| id == instance && *queued == heard) {
            unread.push((instance.to_owned(), heard));
        }
    }
}

/// The provider's error in the engine's terms, as the HTTP adapter maps the same answers (the tests' direct shim
/// uses it too).
pub fn provider_error(error: CloudError) -> ProviderError {
    let text = error.to_string();
    match error {
        CloudError::QuotaExceeded { .. } => ProviderError::QuotaExceeded(text),
        CloudError::NotFound(_) => ProviderError::NotFound(text),
        CloudError::IncorrectState { .. } => ProviderError::WrongState(text),
        CloudError::Unavailable(_) => ProviderError::Unavailable(text),
        CloudError::UnknownRegion(_) | CloudError::UnknownInstanceType(_) | CloudError::Blank(_) => {
            ProviderError::Rejected(text)
        }
    }
}

/// The `record` tag of an instance record.
pub(crate) fn kind_of(record: &InstanceRecord) -> String {
    serde_json::to_value(record)
        .ok()
        .and_then(|value| value.get("record").and_then(|kind| kind.as_str().map(str::to_owned)))
        .unwrap_or_default()
}

/// The engine's `Provider` port: requests over the network to the `hub` host.
pub(crate) struct SimProvider {
    pub world: Rc<World>,
    pub from: HostId,
}

impl SimProvider {
    async fn ask(&self, request: CloudRequest) -> Result<CloudResponse, ProviderError> {
        let world = &self.world;
        let create = matches!(request, CloudRequest::Create { .. });
        let answer = world
            .call(self.from, HUB_ID, world.spec.engine.call_timeout_ms, move |world| {
                let now_ms = world.now_ms();
                let answer = world.instances().cloud.borrow_mut().handle(request.clone(), now_ms);
                if let (CloudRequest::Create { tag, .. }, Ok(CloudResponse::Created { id })) = (&request, &answer) {
                    world.record(HUB_ID, Body::CloudVmCreated { vm: id.clone(), tag: tag.clone() });
                }
                answer
            })
            .await
            .map_err(ProviderError::Transport)?;
        if create && answer.is_ok() {
            // The create executed at the provider; a death armed here dies before its answer is journaled.
            if world.take_death(
                DeathSubsystem::Instances,
                DeathPoint::AfterRemoteMutation,
                crate::model::faults::Subject::Instances,
            ) {
                world.die_here(self.from).await;
            }
            let lost = &world.instances().answers_lost;
            if lost.get() > 0 {
                lost.set(lost.get() - 1);
                world.sleep_until_ms(world.now_ms() + world.spec.engine.call_timeout_ms).await;
                return Err(ProviderError::Transport(TransportError::Timeout));
            }
        }
        answer.map_err(provider_error)
    }

    async fn vms(&self, request: CloudRequest) -> Result<Vec<ProviderVm>, ProviderError> {
        provider_vms(self.ask(request).await?)
    }
}

/// A listing's answer in the engine's terms.
pub fn provider_vms(answer: CloudResponse) -> Result<Vec<ProviderVm>, ProviderError> {
    match answer {
        CloudResponse::Vms { vms } => Ok(vms
            .into_iter()
            .map(|vm| ProviderVm {
                cloud_instance_id: vm.id,
                tag: vm.tag,
                region: vm.region,
                state: vm.state.as_str().to_owned(),
            })
            .collect()),
        other => Err(ProviderError::Rejected(format!("unexpected answer {other:?}"))),
    }
}

impl Provider for SimProvider {
    async fn create(&self, request: &CreateVm) -> Result<String, ProviderError> {
        let request = CloudRequest::Create {
            region: request.region.clone(),
            instance_type: request.instance_type.clone(),
            name: request.name.clone(),
            tag: request.tag.clone(),
        };
        match self.ask(request).await? {
            CloudResponse::Created { id } => Ok(id),
            other => Err(ProviderError::Rejected(format!("unexpected answer {other:?}"))),
        }
    }
    async fn find_by_tag(&self, region: &str, tag: &str) -> Result<Vec<ProviderVm>, ProviderError> {
        self.vms(CloudRequest::FindByTag { region: region.into(), tag: tag.into() }).await
    }
    async fn list(&self, region: &str) -> Result<Vec<ProviderVm>, ProviderError> {
        self.vms(CloudRequest::List { region: region.into() }).await
    }
    async fn start(&self, id: &str) -> Result<(), ProviderError> {
        self.ask(CloudRequest::Start { id: id.into() }).await.map(drop)
    }
    async fn stop(&self, id: &str, hard: bool) -> Result<(), ProviderError> {
        self.ask(CloudRequest::Stop { id: id.into(), hard }).await.map(drop)
    }
    async fn reboot(&self, id: &str) -> Result<(), ProviderError> {
        self.ask(CloudRequest::Reboot { id: id.into() }).await.map(drop)
    }
    async fn destroy(&self, id: &str) -> Result<(), ProviderError> {
        self.ask(CloudRequest::Destroy { id: id.into() }).await.map(drop)
    }
}

/// The engine's `PlatformRows` port: the hub's certificates, bootstrap tokens and peers of an instance's agent.
pub(crate) struct SimPlatform {
    pub world: Rc<World>,
    pub from: HostId,
}

impl SimPlatform {
    /// Revokes the instance's rows of one kind; answers how many there were (0 the second time).
    async fn revoke(&self, instance: &str, kind: usize) -> Result<u32, PlatformError> {
        let instance = instance.to_owned();
        let world = &self.world;
        world
            .call(self.from, HUB_ID, world.spec.engine.call_timeout_ms, move |world| {
                let mut platform = world.instances().platform.borrow_mut();
                platform.get_mut(&instance).map_or(0, |rows| std::mem::take(&mut rows[kind]))
            })
            .await
            .map_err(PlatformError::Transport)
    }
}

impl PlatformRows for SimPlatform {
    async fn revoke_certificates(&self, instance: &str) -> Result<u32, PlatformError> {
        self.revoke(instance, 0).await
    }
    async fn expire_bootstrap_tokens(&self, instance: &str) -> Result<u32, PlatformError> {
        self.revoke(instance, 1).await
    }
    async fn remove_peers(&self, instance: &str) -> Result<u32, PlatformError> {
        self.revoke(instance, 2).await
    }
}

type Driver<'a> = InstanceDriver<'a, SimJournal, SimProvider, SimMetal, SimPlatform>;

/// The stuck rows raised and those the on-call recovered, each as (instance, row, since when).
type StuckSeen = BTreeSet<(String, Stuck, u64)>;

/// What the hub answers the controller's read of its guests: what they did since the last read, and each agent's
/// last heartbeat and its phase.
type GuestRead = (Vec<(String, Heard)>, BTreeMap<String, (u64, bool)>);

impl World {
    pub(crate) fn instances(&self) -> &InstancesWorld {
        self.instances.as_ref().expect("only runs with [instances] touch the instance lifecycle")
    }

    /// The journal's instance records, traced as they become durable (called by the controller's journal with the
    /// record it decoded and its `record` tag).
    pub(crate) fn record_instance(&self, host: HostId, record: InstanceRecord, kind: String) {
        if let Some(instances) = &self.instances {
            instances.journaled.borrow_mut().push(kind);
            self.record(host, Body::InstanceRecord { record });
        }
    }

    /// The hub's guest task: every [`GUEST_TICK_MS`] it advances the provider's VMs and hears what their guests
    /// did; a running guest's agent heartbeats.
    pub(crate) async fn run_guests(self: Rc<Self>) {
        loop {
            let now_ms = self.now_ms();
            let events = self.instances().cloud.borrow_mut().poll(now_ms);
            for event in events {
                let heard = match &event {
                    GuestEvent::AgentUp { tag, .. } => {
                        self.instances().platform.borrow_mut().insert(tag.clone(), PLATFORM_ROWS);
                        Some((tag.clone(), Heard::Heartbeat(AgentPhase::Booting)))
                    }
                    GuestEvent::AgentReady { tag, .. } => Some((tag.clone(), Heard::Heartbeat(AgentPhase::Ready))),
                    GuestEvent::BootFailed { tag, .. } => Some((tag.clone(), Heard::BootFailed)),
                    GuestEvent::Stopped { tag, .. } => Some((tag.clone(), Heard::Stopped)),
                    GuestEvent::Destroyed { .. } => None,
                };
                self.record(HUB_ID, Body::CloudGuest { event });
                if let Some(heard) = heard {
                    self.instances().unread.borrow_mut().push(heard);
                }
            }
            let heartbeating: Vec<(String, bool)> = {
                let cloud = self.instances().cloud.borrow();
                cloud.vms().filter(|vm| vm.agent_heartbeating()).map(|vm| (vm.tag.clone(), vm.agent_ready())).collect()
            };
            {
                let mut last = self.instances().last_heartbeat.borrow_mut();
                for (tag, ready) in heartbeating {
                    last.insert(tag, (now_ms, ready));
                }
            }
            self.sleep_until_ms(now_ms + GUEST_TICK_MS).await;
        }
    }

    /// Applies one of the instance lifecycle's steps (validated: the run has `[instances]`).
    pub(crate) fn apply_instance_step(&self, step: &Step) {
        let instances = self.instances();
        let mut cloud = instances.cloud.borrow_mut();
        match step {
            Step::InstanceOperator { .. } => {
                instances.requests.borrow_mut().push_back(step.clone());
                instances.wake.notify_one();
            }
            Step::ProviderFault { fault, count } => match fault {
                ProviderFaultKind::QuotaRefusal => cloud.refuse_quota(*count),
                ProviderFaultKind::HangCreate => cloud.hang_creates(*count),
                ProviderFaultKind::BootFailure => cloud.fail_boots(*count),
                ProviderFaultKind::ModulePullFailure => cloud.fail_module_pulls(*count),
                ProviderFaultKind::TeardownStuck => cloud.stick_teardowns(*count),
            },
            Step::ProviderAnswerLost { count } => instances.answers_lost.set(instances.answers_lost.get() + count),
            Step::ProviderSyncStops { stopped: true } => cloud.stop_listing(REGION),
            Step::ProviderSyncStops { stopped: false } => cloud.resume_listing(REGION),
            _ => {}
        }
    }

    /// The controller's instance task: open the driver on the journal, create what the spec names and is not
    /// there yet, resume what a dead controller left, then run a pass every [`PASS_MS`] (sooner when a request
    /// comes).
    pub(crate) async fn run_instance_controller(self: Rc<Self>) {
        let journal = SimJournal { world: self.clone(), host: CONTROLLER_ID };
        let provider = SimProvider { world: self.clone(), from: CONTROLLER_ID };
        let platform = SimPlatform { world: self.clone(), from: CONTROLLER_ID };
        let metal = SimMetal::new(self.clone());
        let mut driver = match InstanceDriver::open(&journal, &provider, &metal, &platform).await {
            Ok(driver) => driver,
            Err(error) => return self.pass_failed("open", &error),
        };
        if let Err(error) = self.set_up(&mut driver).await {
            self.pass_failed("set_up", &error);
        }
        let mut raised = StuckSeen::new();
        let mut recovered = StuckSeen::new();
        let mut next_replenish_ms = self.now_ms();
        let mut next_sync_ms = self.now_ms() + SYNC_MS;
        let wake = self.instances().wake.clone();
        loop {
            let now_ms = self.now_ms();
            self.take_requests(&mut driver).await;
            let heartbeats = self.read_guests(&mut driver).await;
            if let Err(error) = driver.resume(now_ms).await {
                self.pass_failed("resume", &error);
            }
            if now_ms >= next_replenish_ms {
                next_replenish_ms = now_ms + REPLENISH_MS;
                for pool in &self.instances().spec.pools {
                    if let Err(error) = driver.replenish(&pool.name, now_ms).await {
                        self.pass_failed("replenish", &error);
                    }
                }
            }
            if let Some(heartbeats) = heartbeats {
                self.sense(&mut driver, &heartbeats, (&mut raised, &mut recovered), now_ms).await;
            }
            if now_ms >= next_sync_ms {
                next_sync_ms = now_ms + SYNC_MS;
                match driver.sync(REGION, now_ms).await {
                    Ok(report) => self.record(
                        CONTROLLER_ID,
                        Body::InstanceSync {
                            region: REGION.to_owned(),
                            mapped_terminated: report.mapped_terminated,
                            signals: report.signals,
                        },
                    ),
                    Err(error) => self.pass_failed("sync", &error),
                }
                for signal in driver.inventory().stale_syncs([REGION], now_ms) {
                    self.record(CONTROLLER_ID, Body::InstanceSyncSignal { signal });
                }
            }
            let next_ms = now_ms + PASS_MS;
            tokio::select! {
                biased;
                () = wake.notified() => {}
                () = self.sleep_until_ms(next_ms) => {}
            }
        }
    }

    fn pass_failed(&self, pass: &str, error: &DriverError) {
        self.record(CONTROLLER_ID, Body::InstancePassFailed { pass: pass.to_owned(), error: error.to_string() });
    }

    /// The pools and plain nodes of the spec that the journal does not have yet, and each plain node's first
    /// provision under `op-<node>` (a retry of the same operation when a dead controller had begun it). In a
    /// bare-metal run every machine of the site is a node too (its worker named as it), provisioned on its machine.
    async fn set_up(&self, driver: &mut Driver<'_>) -> Result<(), DriverError> {
        let spec = self.instances().spec.clone();
        let now_ms = self.now_ms();
        for pool in &spec.pools {
            if !driver.inventory().pools.contains_key(&pool.name) {
                let decided = driver
                    .inventory()
                    .create_pool(Pool {
                        id: pool.name.clone(),
                        account: ACCOUNT.to_owned(),
                        class: pool.class,
                        target_size: pool.target,
                        max_size: pool.max,
                        ready_ttl_seconds: pool.ready_ttl_s,
                        disposition: pool.disposition,
                        region: REGION.to_owned(),
                        instance_type: INSTANCE_TYPE.to_owned(),
                        template_id: TEMPLATE.to_owned(),
                    })
                    .map_err(|refusal| DriverError::Refused(refusal.to_string()))?;
                driver.commit(decided).await?;
            }
        }
        let plain = spec.plain_names().into_iter().map(|name| (name, None, cloud_backing()));
        let machines: Vec<(String, Option<String>, Backing)> = match (&self.site, spec.bare_metal) {
            (Some(site), true) => {
                let racked = site.state.borrow();
                racked
                    .racked
                    .iter()
                    .map(|(machine, racked)| {
                        (machine.clone(), Some(machine.clone()), Backing::BareMetal { mac: racked.pxe_mac.clone() })
                    })
                    .collect()
            }
            _ => Vec::new(),
        };
        for (name, worker, backing) in plain.chain(machines) {
            let node_id = match node_by_name(driver, &name) {
                Some(id) => id,
                None => {
                    let decided = driver
                        .inventory()
                        .create_node(ACCOUNT, &name, TEMPLATE, worker.as_deref(), BTreeMap::new())
                        .map_err(|refusal| DriverError::Refused(refusal.to_string()))?;
                    driver.commit(decided).await?
                }
            };
            let begun = driver.inventory().instances.values().any(|instance| instance.node == node_id);
            if !begun {
                let operation_id = format!("op-{name}");
                driver.provision(&node_id, backing, Some(&operation_id), now_ms).await?;
            }
        }
        Ok(())
    }

    /// Reads what the guests did from the hub and applies it; answers each agent's last heartbeat, or `None` when
    /// the hub did not answer (the stuck sensor then waits: it has no fresh view).
    async fn read_guests(self: &Rc<Self>, driver: &mut Driver<'_>) -> Option<BTreeMap<String, u64>> {
        let read: Result<GuestRead, TransportError> = self
            .call(CONTROLLER_ID, HUB_ID, self.spec.engine.call_timeout_ms, |world| {
                let instances = world.instances();
                (std::mem::take(&mut *instances.unread.borrow_mut()), instances.last_heartbeat.borrow().clone())
            })
            .await;
        let (heard, heartbeats) = match read {
            Ok(read) => read,
            Err(error) => {
                self.pass_failed("read_guests", &DriverError::Provider(ProviderError::Transport(error)));
                return None;
            }
        };
        let now_ms = self.now_ms();
        // What happened first, then each agent's latest heartbeat (one a dead or partitioned controller missed is
        // repeated every period): a fresh one in its phase.
        let fresh = heartbeats.iter().filter(|(_, (at_ms, _))| now_ms.saturating_sub(*at_ms) <= GUEST_TICK_MS).map(
            |(tag, (_, ready))| {
                let phase = if *ready { AgentPhase::Ready } else { AgentPhase::Booting };
                (tag.clone(), Heard::Heartbeat(phase))
            },
        );
        let all: Vec<(String, Heard)> = heard.into_iter().chain(fresh).collect();
        for (tag, heard) in all {
            // A report the rows cannot take (a boot failure of a cancelled row) is no pass failure.
            match driver.heard(&tag, heard, now_ms).await {
                Ok(()) | Err(DriverError::Refused(_)) => {}
                Err(error) => self.pass_failed("heard", &error),
            }
        }
        Some(heartbeats.into_iter().map(|(tag, (at_ms, _))| (tag, at_ms)).collect())
    }

    /// The stuck sensor: raises each stuck row once per clock start, and lets the on-call recover it — again at
    /// the next pass while a recovery fails (the provider unreachable, the controller's link cut).
    async fn sense(
        self: &Rc<Self>,
        driver: &mut Driver<'_>,
        heartbeats: &BTreeMap<String, u64>,
        (raised, recovered): (&mut StuckSeen, &mut StuckSeen),
        now_ms: u64,
    ) {
        let signals = driver.inventory().stuck(now_ms, |id| heartbeats.get(id).copied());
        for signal in signals {
            let key = (signal.instance.clone(), signal.stuck, signal.since_ms);
            if raised.insert(key.clone()) {
                self.record(
                    CONTROLLER_ID,
                    Body::InstanceStuck {
                        instance: signal.instance.clone(),
                        stuck: signal.stuck,
                        since_ms: signal.since_ms,
                    },
                );
            }
            if self.instances().spec.on_call
                && !recovered.contains(&key)
                && self.recover(driver, &signal.instance, signal.stuck).await
            {
                recovered.insert(key);
            }
        }
    }

    /// The on-call's recovery of one stuck row, as the runbook recommends it; answers whether it is done.
    async fn recover(self: &Rc<Self>, driver: &mut Driver<'_>, instance_id: &str, stuck: Stuck) -> bool {
        let Ok(instance) = driver.inventory().instance(instance_id).cloned() else { return true };
        let before = self.instances().journaled.borrow().len();
        let now_ms = self.now_ms();
        let (op, result) = match stuck {
            // The passes retry the same operation already; a silent agent is someone's to restart by hand.
            Stuck::Pending | Stuck::Silent => return true,
            Stuck::Provisioning => {
                let cleared = driver.clear_stuck_provisioning(instance_id, now_ms).await;
                let again = match cleared {
                    Ok(Cleared::BySync | Cleared::Terminated) if instance.pool.is_none() => {
                        self.provision_again(driver, &instance, true).await
                    }
                    other => other.map(drop),
                };
                ("clear_stuck", again)
            }
            Stuck::NeverReady => {
                let terminated = driver.control(instance_id, Control::Terminate, true, now_ms).await.map(drop);
                let again = match terminated {
                    Ok(()) if instance.pool.is_none() => self.provision_again(driver, &instance, false).await,
                    other => other,
                };
                ("terminate", again)
            }
            Stuck::DrainStalled => {
                ("terminate", driver.control(instance_id, Control::Terminate, true, now_ms).await.map(drop))
            }
            Stuck::TerminateStalled => {
                let reaped = self.reap(&instance).await;
                ("reap", reaped.map_err(|error| DriverError::Provider(ProviderError::Transport(error))))
            }
        };
        // A refusal (an ops hold on the row) is the hold owner's to resolve: the on-call does not retry it.
        let done = matches!(result, Ok(()) | Err(DriverError::Refused(_)));
        self.record_operated("on-call", op, instance_id, before, result.map(|()| "performed".to_owned()));
        done
    }

    /// Provisions a recovered plain node again: under the same operation id (a fresh row carrying it) after a
    /// cleared provisioning, under a fresh one after a never-ready instance.
    async fn provision_again(
        &self,
        driver: &mut Driver<'_>,
        instance: &Instance,
        same_operation: bool,
    ) -> Result<(), DriverError> {
        let operation_id = match (&instance.operation_id, same_operation) {
            (Some(id), true) => id.clone(),
            (Some(id), false) => format!("{id}/after-{}", instance.id),
            (None, _) => format!("op-{}/after-{}", instance.node, instance.id),
        };
        driver.provision(&instance.node, instance.backing.clone(), Some(&operation_id), self.now_ms()).await.map(drop)
    }

    /// The provider console's force-terminate of every VM of the instance whose teardown is stuck.
    async fn reap(self: &Rc<Self>, instance: &Instance) -> Result<(), TransportError> {
        let tag = instance.id.clone();
        let reaped = self
            .call(CONTROLLER_ID, HUB_ID, self.spec.engine.call_timeout_ms, move |world| {
                let mut cloud = world.instances().cloud.borrow_mut();
                let ids: Vec<String> = cloud.live_with_tag(&tag).map(|vm| vm.id.clone()).collect();
                ids.into_iter().filter(|id| cloud.reap(id)).map(|id| (id, tag.clone())).collect::<Vec<_>>()
            })
            .await?;
        for (vm, tag) in reaped {
            self.record(HUB_ID, Body::CloudReaped { vm, tag });
        }
        Ok(())
    }

    /// Takes the operators' requests in the order they came.
    async fn take_requests(self: &Rc<Self>, driver: &mut Driver<'_>) {
        loop {
            let Some(step) = self.instances().requests.borrow_mut().pop_front() else { return };
            let Step::InstanceOperator { target, op, actor, .. } = &step else { continue };
            let before = self.instances().journaled.borrow().len();
            let outcome = self.operate(driver, &step).await;
            self.record_operated(actor, op.as_str(), target, before, outcome);
        }
    }

    fn record_operated(
        &self,
        actor: &str,
        op: &str,
        target: &str,
        before: usize,
        outcome: Result<String, DriverError>,
    ) {
        let wrote = self.instances().journaled.borrow()[before..].to_vec();
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(DriverError::Refused(_)) => "refused".to_owned(),
            Err(_) => "failed".to_owned(),
        };
        self.record(
            CONTROLLER_ID,
            Body::InstanceOperated {
                actor: actor.to_owned(),
                op: op.to_owned(),
                target: target.to_owned(),
                outcome,
                wrote,
            },
        );
    }

    /// One operator request (an `instance_operator` step): the audited steps through `operate`, the rest through
    /// the driver's own calls.
    async fn operate(&self, driver: &mut Driver<'_>, request: &Step) -> Result<String, DriverError> {
        let Step::InstanceOperator { target, op, reason, actor, force, operation_id } = request else {
            return Err(DriverError::Refused(format!("a {} step is no request to the controller", request.kind())));
        };
        let (target, op, force, operation_id) = (target.as_str(), *op, *force, operation_id.as_deref());
        let now_ms = self.now_ms();
        let governance = self.instances().spec.governance;
        let unknown = || DriverError::Refused(format!("{target} names no instance"));
        let instance = || resolve_instance(driver, target).ok_or_else(unknown);
        let step = match op {
            InstanceOp::Provision => {
                let node = node_by_name(driver, target)
                    .ok_or_else(|| DriverError::Refused(format!("{target} names no node")))?;
                // A node is provisioned again on what backed it (its machine, for a bare-metal node).
                let backing = driver
                    .inventory()
                    .instances
                    .values()
                    .rfind(|instance| instance.node == node)
                    .map_or_else(cloud_backing, |instance| instance.backing.clone());
                driver.provision(&node, backing, operation_id, now_ms).await?;
                return Ok("performed".to_owned());
            }
            InstanceOp::ClearStuck => {
                driver.clear_stuck_provisioning(&instance()?, now_ms).await?;
                return Ok("performed".to_owned());
            }
            InstanceOp::Acquire => {
                driver.acquire(target).await?;
                return Ok("performed".to_owned());
            }
            InstanceOp::Release => {
                driver.release(&instance()?, now_ms).await?;
                return Ok("performed".to_owned());
            }
            InstanceOp::PlaceHold => OperatorStep::PlaceHold { instance: instance()?, reason: reason.to_owned() },
            InstanceOp::LiftHold => OperatorStep::LiftHold { instance: instance()? },
            InstanceOp::Start => OperatorStep::Control { instance: instance()?, action: Control::Start, force },
            InstanceOp::Stop => OperatorStep::Control { instance: instance()?, action: Control::Stop, force },
            InstanceOp::Reboot => OperatorStep::Control { instance: instance()?, action: Control::Reboot, force },
            InstanceOp::Drain => OperatorStep::Drain { instance: instance()? },
            InstanceOp::Terminate => OperatorStep::Request {
                operation: DeferredOperation::Terminate { instance: instance()?, by: actor.to_owned() },
            },
            InstanceOp::Cordon => OperatorStep::Request {
                operation: DeferredOperation::Cordon {
                    instance: instance()?,
                    reason: reason.to_owned(),
                    by: actor.to_owned(),
                },
            },
            InstanceOp::Uncordon => OperatorStep::Request {
                operation: DeferredOperation::Uncordon { instance: instance()?, by: actor.to_owned() },
            },
            InstanceOp::Approve => OperatorStep::Approve { deferred: target.to_owned() },
            InstanceOp::Deny => OperatorStep::Deny { deferred: target.to_owned() },
        };
        let outcome = driver.operate(actor, step, governance, now_ms).await?;
        Ok(match outcome {
            AuditOutcome::Performed => "performed",
            AuditOutcome::Pending { .. } => "pending",
            AuditOutcome::Refused { .. } => "refused",
        }
        .to_owned())
    }
}

fn cloud_backing() -> Backing {
    Backing::Cloud { region: REGION.to_owned(), instance_type: INSTANCE_TYPE.to_owned() }
}

fn node_by_name(driver: &Driver<'_>, name: &str) -> Option<String> {
    driver
        .inventory()
        .nodes
        .values()
        .find(|node| node.account == ACCOUNT && node.name == name)
        .map(|node| node.id.clone())
}

/// The instance a request's `target` names: an instance id (`i-00003`), a pool's k-th live member (`edge[2]`, in
/// id order, 1-based, not terminated), or a node's name (its latest instance).
fn resolve_instance(driver: &Driver<'_>, target: &str) -> Option<String> {
    let inventory = driver.inventory();
    if inventory.instances.contains_key(target) {
        return Some(target.to_owned());
    }
    if let Some((pool, rest)) = target.split_once('[') {
        let k: usize = rest.strip_suffix(']')?.parse().ok()?;
        return inventory
            .members(pool)
            .filter(|member| member.state != InstanceState::Terminated)
            .nth(k.checked_sub(1)?)
            .map(|member| member.id.clone());
    }
    let node = node_by_name(driver, target)?;
    inventory.instances.values().rfind(|instance| instance.node == node).map(|instance| instance.id.clone())
}
