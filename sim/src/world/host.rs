//! The controller host: what the engine's controller service runs on in the simulated world. [`SimHost`] gives the
//! service the world's adapters of every port (over the simulated network, from the `controller` host), the
//! world's inbox, the on-call as its pager, and the trace as the sink of its events; [`controller_config`] is the
//! controller's configuration as a scenario or campaign states it. Booting the `controller` host starts the service
//! on the journal its disk holds ([`World::start_controller`]); a crash stops its tasks with the host's.
//!
//! Nothing here decides for the controller: the service and its state machine (`engine::controller`) do.

use std::rc::Rc;

use engine::controller::config::{ControllerConfig, InstanceSettings, RolloutSettings, RotationSettings, SiteSettings};
use engine::controller::host::{Host, Task, WorkerWork};
use engine::controller::request::{Desk, Event, Page, Request};
use engine::controller::service::Service;
use engine::instance::pool::Pool;
use engine::onboarding::driver::NodeSpec;

use crate::model::faults::{DeathSubsystem, Phase, RolloutPoint};
use crate::model::spec::RunSpec;
use crate::model::spec::instances::{ACCOUNT, INSTANCE_TYPE, REGION, TEMPLATE};
use crate::observe::trace::Body;
use crate::world::controller::{JOURNAL_KEY, SimArtifacts, SimJitter, SimJournal, SimSecrets, SimVerifier};
use crate::world::decommission::SimFleet;
use crate::world::hub::{CONTROLLER_CREDENTIAL_LIFETIME_MS, SimHub};
use crate::world::instances::{GUEST_TICK_MS, SimAgents, SimPlatform, SimProvider};
use crate::world::nodes::SimSsh;
use crate::world::site::{SimSiteSsh, SiteMaas, SiteResolver, SiteSecretsPort};
use crate::world::{CONTROLLER_ID, SimClock, SimSignals, World};

/// The controller's configuration in a run of `spec`: its site (with `[onboarding]`), its rollout limits (the
/// fleet's lanes and floor, the hub's TTL), its rotations, its instance lifecycle (with `[instances]`); the engine's
/// production values for the rest.
pub fn controller_config(spec: &RunSpec) -> ControllerConfig {
    let bare_metal = spec.instances.as_ref().is_some_and(|instances| instances.bare_metal);
    let site = spec.onboarding.as_ref().map(|onboarding| SiteSettings {
        start_at_ms: onboarding.start_at_ms,
        policy: onboarding.policy,
        stall_window_ms: onboarding.stall_window_ms,
        poll_ms: onboarding.poll_ms,
        concurrency: onboarding.concurrency,
        site_policy: onboarding.site_policy(),
        bare_metal,
        ..SiteSettings::new(onboarding.machines.clone())
    });
    let rollout = RolloutSettings {
        policy: spec.engine.rollout_policy,
        lane_size_max: spec.fleet.lane_size as usize,
        availability_floor: spec.fleet.availability_floor as usize,
        agent_ttl_ms: spec.hub.agent_ttl_ms,
        credential_remaining_ms: CONTROLLER_CREDENTIAL_LIFETIME_MS,
        hub_url: fakes::worker::DEFAULT_HUB_URL.to_owned(),
        journal_name: JOURNAL_KEY.to_owned(),
        ..RolloutSettings::default()
    };
    let rotation =
        RotationSettings { prove_ms: 4 * fakes::agent::HEARTBEAT_INTERVAL_MS, ..RotationSettings::default() };
    let instances = spec.instances.as_ref().map(|instances| InstanceSettings {
        pools: instances
            .pools
            .iter()
            .map(|pool| Pool {
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
            .collect(),
        plain: instances.plain_names(),
        bare_metal,
        governance: instances.governance,
        heartbeat_fresh_ms: GUEST_TICK_MS,
        ..InstanceSettings::new(ACCOUNT, REGION, INSTANCE_TYPE, TEMPLATE)
    });
    ControllerConfig { site, rollout, rotation, sensor: Some(engine::sensor::SensorConfig::default()), instances }
}

/// The controller's ports and services in the simulated world.
pub(crate) struct SimHost {
    world: Rc<World>,
}

impl World {
    /// The `controller` host boots: the controller service starts on the journal its disk holds.
    pub(crate) fn start_controller(self: &Rc<Self>) {
        self.on_call_new_controller();
        let lines = self.replay_controller_journal();
        let host = SimHost { world: self.clone() };
        Service::start(host, controller_config(&self.spec), self.rules(), &lines);
    }
}

impl Host for SimHost {
    type Clock = SimClock;
    type Journal = SimJournal;
    type Signals = SimSignals;
    type Hub = SimHub;
    type Jitter = SimJitter;
    type Secrets = SimSecrets;
    type Artifacts = SimArtifacts;
    type Verifier = SimVerifier;
    type WorkerSsh = SimSsh;
    type Maas = SiteMaas;
    type Resolver = SiteResolver;
    type SiteSecrets = SiteSecretsPort;
    type SiteSsh = SimSiteSsh;
    type Fleet = SimFleet;
    type Provider = SimProvider;
    type Platform = SimPlatform;
    type Agents = SimAgents;

    fn clock(&self) -> SimClock {
        SimClock { world: self.world.clone(), host: CONTROLLER_ID }
    }
    fn journal(&self) -> SimJournal {
        SimJournal { world: self.world.clone(), host: CONTROLLER_ID }
    }
    fn signals(&self) -> SimSignals {
        SimSignals { world: self.world.clone(), host: CONTROLLER_ID }
    }
    fn hub(&self) -> SimHub {
        SimHub::new(self.world.clone(), CONTROLLER_ID)
    }
    fn jitter(&self) -> SimJitter {
        SimJitter { world: self.world.clone() }
    }
    fn secrets(&self) -> SimSecrets {
        SimSecrets { world: self.world.clone() }
    }
    fn artifacts(&self) -> SimArtifacts {
        SimArtifacts { world: self.world.clone() }
    }
    fn verifier(&self) -> SimVerifier {
        SimVerifier
    }
    fn worker_ssh(&self, work: WorkerWork) -> SimSsh {
        let subsystem = match work {
            WorkerWork::Rollout => DeathSubsystem::Rollout,
            WorkerWork::Rotation => DeathSubsystem::Rotation,
        };
        SimSsh { world: self.world.clone(), from: CONTROLLER_ID, subsystem }
    }
    fn maas(&self, workflow: &str) -> SiteMaas {
        self.world.site_maas(CONTROLLER_ID, workflow)
    }
    fn resolver(&self) -> SiteResolver {
        self.world.site_resolver(CONTROLLER_ID)
    }
    fn site_secrets(&self) -> SiteSecretsPort {
        self.world.site_secrets(CONTROLLER_ID)
    }
    fn site_ssh(&self) -> SimSiteSsh {
        SimSiteSsh { world: self.world.clone(), from: CONTROLLER_ID }
    }
    fn fleet(&self) -> SimFleet {
        SimFleet { world: self.world.clone(), from: CONTROLLER_ID }
    }
    fn provider(&self) -> SimProvider {
        SimProvider { world: self.world.clone(), from: CONTROLLER_ID }
    }
    fn platform(&self) -> SimPlatform {
        SimPlatform { world: self.world.clone(), from: CONTROLLER_ID }
    }
    fn agents(&self) -> SimAgents {
        SimAgents { world: self.world.clone(), from: CONTROLLER_ID }
    }

    fn spawn(&self, task: Task) {
        self.world.spawn_on(CONTROLLER_ID, task);
    }

    fn submit(&self, request: Request) {
        self.world.submit(request);
    }
    fn take_request(&self, desk: Desk) -> Option<Request> {
        self.world.inbox.take(desk)
    }
    async fn requests_waiting(&self, desk: Desk) {
        self.world.inbox.waiting(desk).await;
    }

    fn page(&self, page: &Page) -> Vec<Request> {
        self.world.on_call_paged(page)
    }

    fn emit(&self, event: Event) {
        let world = &self.world;
        let body = match event {
            Event::Audit(record) => Body::Audit { record },
            Event::InstanceOperated { actor, verb, target, outcome, wrote } => {
                Body::InstanceOperated { actor, op: verb, target, outcome, wrote }
            }
            Event::InstanceStuck { instance, stuck, since_ms } => Body::InstanceStuck { instance, stuck, since_ms },
            Event::InstanceSync { region, mapped_terminated, signals } => {
                Body::InstanceSync { region, mapped_terminated, signals }
            }
            Event::InstanceSyncSignal(signal) => Body::InstanceSyncSignal { signal },
            Event::InstancePassFailed { pass, error } => Body::InstancePassFailed { pass, error },
            Event::OnboardingRested => return world.phase_reached(Phase::Onboarding),
            Event::RolloutBegins { .. } => return world.on_rollout_point(RolloutPoint::Begin, None),
            Event::RolloutRested { .. } => return world.phase_reached(Phase::Rollout),
            Event::Answered { request, answer } => return world.on_call_answered(&request, &answer),
            // What the trace shows of them already (the workflows' own events, the audit records).
            Event::OnboardingEnded { .. }
            | Event::DecommissionEnded { .. }
            | Event::Compensated { .. }
            | Event::RecoveryEnded { .. } => return,
        };
        world.record(CONTROLLER_ID, body);
    }

    fn racked(&self, machine: &str) -> Option<NodeSpec> {
        let site = self.world.site.as_ref()?;
        let state = site.state.borrow();
        let racked = state.racked.get(machine)?;
        Some(NodeSpec {
            name: machine.to_owned(),
            hostname: machine.to_owned(),
            pxe_mac: racked.pxe_mac.clone(),
            // The BMC system is named as the machine: it is the power address MAAS drives.
            bmc_address: machine.to_owned(),
            boot_disk_model: racked.boot_disk_model.clone(),
            roce_nics: racked.roce_nics,
        })
    }

    fn racked_by_mac(&self, mac: &str) -> Option<String> {
        let site = self.world.site.as_ref()?;
        let state = site.state.borrow();
        state
            .racked
            .iter()
            .find(|(_, racked)| racked.pxe_mac.eq_ignore_ascii_case(mac))
            .map(|(machine, _)| machine.clone())
    }

    fn process(&self) -> String {
        // One holder identity per controller process: a restarted controller must supersede its dead predecessor's
        // lock through the journal, or wait it out.
        format!("controller@boot-{}", self.world.boots(CONTROLLER_ID))
    }
}
