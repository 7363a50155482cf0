//! The instance lifecycle in the simulated world (`[instances]`): the cloud provider fake (`fakes::cloud`) and the
//! platform rows a terminate cascades through, served from the `hub` host; the guests' agents, whose boots the hub
//! hears as heartbeats; and the adapters of the controller's `Provider`, `PlatformRows` and `AgentFeed` ports over
//! the simulated network. The controller's instance lifecycle is the engine's (`engine::controller`); an
//! `instance_operator` step is an operator's request to it, and the on-call that answers its pages is a person
//! (`people.rs`).

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

use engine::instance::inventory::InstanceRecord;
use engine::ports::TransportError;
use engine::ports::platform::{AgentFeed, AgentPhase, AgentReport, Heard, PlatformError, PlatformRows};
use engine::ports::provider::{CreateVm, Provider, ProviderError, ProviderVm};
use fakes::cloud::{CloudError, CloudProvider, CloudRequest, CloudResponse, GuestEvent};

use crate::model::faults::{DeathPoint, DeathSubsystem, ProviderFaultKind, Step};
use crate::model::spec::instances::{INSTANCE_TYPE, InstancesSpec, REGION};
use crate::observe::trace::Body;
use crate::world::net::HostId;
use crate::world::{HUB_ID, World};

/// How often the hub hears the guests (their agents heartbeat at this period).
pub const GUEST_TICK_MS: u64 = 10_000;
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

    /// The provider console's force-terminate of every VM of the tag whose teardown is stuck.
    async fn force_terminate(&self, _region: &str, tag: &str) -> Result<Vec<String>, ProviderError> {
        let world = &self.world;
        let tag = tag.to_owned();
        let reaped = world
            .call(self.from, HUB_ID, world.spec.engine.call_timeout_ms, move |world| {
                let mut cloud = world.instances().cloud.borrow_mut();
                let ids: Vec<String> = cloud.live_with_tag(&tag).map(|vm| vm.id.clone()).collect();
                ids.into_iter().filter(|id| cloud.reap(id)).map(|id| (id, tag.clone())).collect::<Vec<_>>()
            })
            .await
            .map_err(ProviderError::Transport)?;
        let freed = reaped.iter().map(|(vm, _)| vm.clone()).collect();
        for (vm, tag) in reaped {
            world.record(HUB_ID, Body::CloudReaped { vm, tag });
        }
        Ok(freed)
    }
}

/// The hub's feed of the instances' agents, as the controller reads it: what they did since the last read, and each
/// agent's last heartbeat and its phase (a request over the network to the `hub` host).
pub(crate) struct SimAgents {
    pub world: Rc<World>,
    pub from: HostId,
}

impl AgentFeed for SimAgents {
    async fn read(&self) -> Result<AgentReport, TransportError> {
        let world = &self.world;
        let (heard, last_heartbeats) = world
            .call(self.from, HUB_ID, world.spec.engine.call_timeout_ms, |world| {
                let instances = world.instances();
                (std::mem::take(&mut *instances.unread.borrow_mut()), instances.last_heartbeat.borrow().clone())
            })
            .await?;
        Ok(AgentReport { heard, last_heartbeats })
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

impl World {
    pub(crate) fn instances(&self) -> &InstancesWorld {
        self.instances.as_ref().expect("only runs with [instances] touch the instance lifecycle")
    }

    /// The journal's instance records, traced as they become durable (called by the controller's journal with the
    /// record it decoded and its `record` tag).
    pub(crate) fn record_instance(&self, host: HostId, record: InstanceRecord) {
        if self.instances.is_some() {
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
                drop(cloud);
                self.ask_controller(step);
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
}
