//! Oracles: properties checked from trace events only, separate from the engine and the fakes they judge.
//!
//! Typed as in stateright: an **always** property is a safety invariant (any counterexample fails the run), an
//! **eventually** property is a liveness deadline measured from when the faults that could excuse it healed, and a
//! **sometimes** property records that the run reached an interesting state (so a run, or a campaign, that never got
//! there cannot pass vacuously). `docs/oracles.md` documents each one.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use engine::secret::SECRET_MARKER;
use engine::sensor::{SENSOR_PERIOD_MS, SILENT_THRESHOLD_MS};
use reports::PropertyKind;

use crate::model::faults::Step;
use crate::model::oracles::{CATALOG, OracleId, OracleInfo};
use crate::observe::trace::{Body, Event, OnboardingBody, RolloutBody};

mod operator;

const DEPLOY_HOLD_PREFIX: &str = "deploy:";

/// The deadline the runbook sets for silence detection: within 4 minutes of the last heartbeat.
pub const SILENCE_DETECTION_DEADLINE_MS: u64 = 240_000;
/// The most violations kept per oracle and run (the count is not capped, the evidence is).
const EVIDENCE_KEPT_PER_ORACLE: usize = 10;

/// What the oracles need to know about the run's configuration.
#[derive(Debug, Clone)]
pub struct OracleContext {
    pub controller: String,
    pub hub: String,
    pub agent_ttl_ms: u64,
    pub sweep_interval_ms: u64,
    /// The engine's call timeout: an answer older than this is never acted on.
    pub call_timeout_ms: u64,
    /// The largest one-way link latency the run can have.
    pub latency_max_ms: u64,
    /// Worker nodes in the fleet.
    pub nodes: u32,
    /// The most nodes a rollout may hold at once.
    pub lane_size: u32,
    /// Healthy, eligible nodes a rollout must keep (0: no floor).
    pub availability_floor: u32,
    /// The onboarding workflows the run starts (empty without `[onboarding]`).
    pub workflows: Vec<String>,
    /// The decommission workflows the run's `decommission` steps ask for.
    pub decommissions: Vec<String>,
    /// The site's policies the matrix's words defer to.
    pub site_policy: engine::onboarding::SitePolicy,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub t_ms: u64,
    pub evidence: String,
}

pub trait Oracle {
    fn on_event(&mut self, event: &Event, line: &str, out: &mut Vec<Finding>);
    /// Called once when the run ends at `end_ms`: eventually-properties judge what is due by then.
    fn on_finish(&mut self, _end_ms: u64, _out: &mut Vec<Finding>) {}
}

/// The oracle of `id`, for this run's configuration. Exhaustive: an oracle added to the catalogue
/// ([`crate::model::oracles`]) does not compile until it is built here.
fn build(id: OracleId, ctx: &OracleContext) -> Box<dyn Oracle> {
    match id {
        OracleId::SilenceSignalIsJustified => Box::new(SilenceJustified::new(ctx)),
        OracleId::EpochMemberNeverTombstoned => Box::new(EpochMemberNeverTombstoned::default()),
        OracleId::SecretsNeverInTrace => Box::new(SecretsNeverInTrace),
        OracleId::SilenceDetectedInTime => Box::new(SilenceDetectedInTime::new(ctx)),
        OracleId::AvailabilityFloor => Box::new(AvailabilityFloor::new(ctx)),
        OracleId::LaneBound => {
            Box::new(LaneBound { lane_size: ctx.lane_size as usize, held: BTreeSet::new(), over: false })
        }
        OracleId::NoDuplicateMutation => Box::new(NoDuplicateMutation::default()),
        OracleId::NoFetchAfterQuiescence => Box::new(NoFetchAfterQuiescence::default()),
        OracleId::NoIncoherentNodeMutated => Box::new(NoIncoherentNodeMutated::default()),
        OracleId::NoDispatchToHeldWorker => Box::new(NoDispatchToHeld::default()),
        OracleId::EveryLaneConverged => Box::new(EveryLaneConverged::default()),
        OracleId::HoldsAccounted => Box::new(HoldsAccounted::default()),
        OracleId::InstanceSilentRaised => Box::new(Reached(|body| matches!(body, Body::InstanceSilent { .. }))),
        OracleId::InstanceRecoveredRaised => Box::new(Reached(|body| matches!(body, Body::InstanceRecovered { .. }))),
        OracleId::AgentTombstoned => Box::new(Reached(|body| matches!(body, Body::HubTombstoned { .. }))),
        OracleId::AgentOfflined => Box::new(Reached(|body| matches!(body, Body::HubOffline { .. }))),
        OracleId::HostRestarted => Box::new(Reached(|body| matches!(body, Body::HostBoot { boot } if *boot > 1))),
        OracleId::DispatchRefusedByHold => Box::new(Reached(|body| matches!(body, Body::HubDispatchRefused { .. }))),
        OracleId::NodeQuarantined => {
            Box::new(Reached(|body| matches!(body, Body::Rollout { event: RolloutBody::Quarantined { .. }, .. })))
        }
        OracleId::ControllerAdoptedJournal => {
            Box::new(Reached(|body| matches!(body, Body::Rollout { event: RolloutBody::Adopted { .. }, .. })))
        }
        OracleId::RolloutReachedSuccessor => Box::new(Reached(
            |body| matches!(body, Body::Rollout { event: RolloutBody::Terminal { outcome }, .. } if outcome == "successor"),
        )),
        OracleId::RolloutStoppedOnRouteChange => {
            Box::new(Reached(|body| matches!(body, Body::Rollout { event: RolloutBody::RouteChanged { .. }, .. })))
        }
        OracleId::RetryRecovered => Box::new(RetryRecovered::default()),
        OracleId::OnlyIntendedHoldsReleased => Box::new(OnlyIntendedHoldsReleased),
        OracleId::ReceiptsNameFrozenRoute => Box::new(ReceiptsNameFrozenRoute::default()),
        OracleId::RolloutTimeBounded => Box::new(RolloutTimeBounded::default()),
        OracleId::CredentialRenewedMidRollout => {
            Box::new(Reached(|body| matches!(body, Body::Rollout { event: RolloutBody::Reauthenticated { .. }, .. })))
        }
        OracleId::StaleLockWaitedOut => {
            Box::new(Reached(|body| matches!(body, Body::Rollout { event: RolloutBody::LockWaiting { .. }, .. })))
        }
        OracleId::LockSupersededOnAdoption => Box::new(Reached(|body| {
            matches!(body, Body::Rollout { event: RolloutBody::LockTaken { superseded: true, .. }, .. })
        })),
        OracleId::OperatorHoldRespected => {
            Box::new(Reached(|body| matches!(body, Body::Rollout { event: RolloutBody::SkippedHeld { .. }, .. })))
        }
        OracleId::MaasTransitionsLegal => Box::new(MaasTransitionsLegal),
        OracleId::NoDestructiveCallWithoutFreshRead => Box::new(NoDestructiveCallWithoutFreshRead::default()),
        OracleId::NoDoubleCommissionOrDeploy => Box::new(NoDoubleCommissionOrDeploy::default()),
        OracleId::OnboardingFollowsTheMatrix => {
            Box::new(FollowsTheMatrix::new(engine::matrix::Workflow::Onboarding, ctx))
        }
        OracleId::DecommissionFollowsTheMatrix => {
            Box::new(FollowsTheMatrix::new(engine::matrix::Workflow::Decommission, ctx))
        }
        OracleId::DecommissionCompleted => {
            Box::new(Reached(|body| matches!(body, Body::Decommission { event: OnboardingBody::Completed { .. }, .. })))
        }
        OracleId::EveryDecommissionRests => Box::new(EveryDecommissionRests::new(ctx)),
        OracleId::EveryNodeOnboardedOrDiagnosed => Box::new(EveryNodeOnboardedOrDiagnosed::new(ctx)),
        OracleId::StallDetected => {
            Box::new(Reached(|body| matches!(body, Body::Onboarding { event: OnboardingBody::Stalled { .. }, .. })))
        }
        OracleId::OnboardingCompleted => {
            Box::new(Reached(|body| matches!(body, Body::Onboarding { event: OnboardingBody::Completed { .. }, .. })))
        }
        OracleId::MacDriftClassified => Box::new(Reached(|body| {
            matches!(body, Body::Onboarding { event: OnboardingBody::Stopped { class, evidence, .. }, .. }
                    if class == "state_ambiguity" && evidence.iter().any(|e| e.to_ascii_lowercase().contains("unknown machine")))
        })),
        OracleId::EpochMemberSurvivedTtl => Box::new(EpochMemberSurvivedTtl::new(ctx)),
        OracleId::AuditRecordsComplete => Box::new(operator::AuditRecordsComplete::default()),
        OracleId::NoAutomationOnFrozenWorkflow => Box::new(operator::NoAutomationOnFrozenWorkflow::default()),
        OracleId::ActionReachesExpectedState => Box::new(operator::ActionReachesExpectedState::default()),
    }
}

/// The oracles of one run and what they found.
pub struct OracleSet {
    oracles: Vec<(&'static OracleInfo, Box<dyn Oracle>)>,
    /// Per oracle: findings kept (violations capped, sometimes-properties only the first) and the total count.
    findings: Vec<(Vec<Finding>, u64)>,
    scratch: Vec<Finding>,
}

impl OracleSet {
    /// Every oracle of the catalogue: all safety and liveness properties are checked in every run.
    pub fn all(ctx: &OracleContext) -> OracleSet {
        let oracles: Vec<_> = CATALOG.iter().map(|info| (info, build(info.id, ctx))).collect();
        let findings = oracles.iter().map(|_| (Vec::new(), 0)).collect();
        OracleSet { oracles, findings, scratch: Vec::new() }
    }

    pub fn on_event(&mut self, event: &Event, line: &str) {
        for index in 0..self.oracles.len() {
            self.oracles[index].1.on_event(event, line, &mut self.scratch);
            self.take_scratch(index);
        }
    }

    pub fn finish(&mut self, end_ms: u64) {
        for index in 0..self.oracles.len() {
            self.oracles[index].1.on_finish(end_ms, &mut self.scratch);
            self.take_scratch(index);
        }
    }

    fn take_scratch(&mut self, index: usize) {
        if self.scratch.is_empty() {
            return;
        }
        let property = self.oracles[index].0.property;
        let (kept, count) = &mut self.findings[index];
        for finding in self.scratch.drain(..) {
            *count += 1;
            let cap = if property == PropertyKind::Sometimes { 1 } else { EVIDENCE_KEPT_PER_ORACLE };
            if kept.len() < cap {
                kept.push(finding);
            }
        }
    }

    /// `(oracle, findings kept, total count)` for every oracle that fired, in catalogue order.
    pub fn fired(&self) -> impl Iterator<Item = (&'static OracleInfo, &[Finding], u64)> {
        self.oracles
            .iter()
            .zip(&self.findings)
            .filter(|(_, (_, count))| *count > 0)
            .map(|((info, _), (kept, count))| (*info, kept.as_slice(), *count))
    }
}

/// A sometimes-property reached by one kind of event.
struct Reached(fn(&Body) -> bool);

impl Oracle for Reached {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        if (self.0)(&event.body) {
            out.push(Finding { t_ms: event.t_ms, evidence: format!("{} on {}", kind_of(&event.body), event.host) });
        }
    }
}

fn kind_of(body: &Body) -> String {
    serde_json::to_value(body)
        .ok()
        .and_then(|value| value.get("kind").and_then(|kind| kind.as_str().map(str::to_owned)))
        .unwrap_or_default()
}

struct SecretsNeverInTrace;

impl Oracle for SecretsNeverInTrace {
    fn on_event(&mut self, event: &Event, line: &str, out: &mut Vec<Finding>) {
        if line.contains(SECRET_MARKER) {
            out.push(Finding {
                t_ms: event.t_ms,
                evidence: format!("a {} event on {} carries a credential", kind_of(&event.body), event.host),
            });
        }
    }
}

/// `silence_signal_is_justified`: when `instance_silent` is raised at `t`, the hub received no heartbeat from that
/// instance in `[t - 3 min, t - call timeout]`. The last call-timeout of the window is excused: a heartbeat that landed
/// after the sensor's read cannot be in the snapshot it acted on, and the engine drops answers older than its timeout.
struct SilenceJustified {
    window_end_slack_ms: u64,
    heartbeats: BTreeMap<String, VecDeque<u64>>,
}

impl SilenceJustified {
    fn new(ctx: &OracleContext) -> SilenceJustified {
        SilenceJustified { window_end_slack_ms: ctx.call_timeout_ms, heartbeats: BTreeMap::new() }
    }
}

impl Oracle for SilenceJustified {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        match &event.body {
            Body::HubHeartbeat { agent } => {
                let seen = self.heartbeats.entry(agent.clone()).or_default();
                seen.push_back(event.t_ms);
                while seen.front().is_some_and(|t| *t + SILENT_THRESHOLD_MS < event.t_ms) {
                    seen.pop_front();
                }
            }
            Body::InstanceSilent { instance, silent_for_ms } => {
                let from = event.t_ms.saturating_sub(SILENT_THRESHOLD_MS);
                let to = event.t_ms.saturating_sub(self.window_end_slack_ms);
                let fresh = self
                    .heartbeats
                    .get(instance)
                    .and_then(|seen| seen.iter().rev().find(|t| **t >= from && **t <= to).copied());
                if let Some(heartbeat_ms) = fresh {
                    out.push(Finding {
                        t_ms: event.t_ms,
                        evidence: format!(
                            "{instance} reported silent for {silent_for_ms} ms, but the hub received its heartbeat at t={heartbeat_ms} ms, {} ms earlier",
                            event.t_ms - heartbeat_ms
                        ),
                    });
                }
            }
            _ => {}
        }
    }
}

#[derive(Default)]
struct EpochMemberNeverTombstoned {
    open: BTreeMap<u64, BTreeSet<String>>,
}

impl Oracle for EpochMemberNeverTombstoned {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        match &event.body {
            Body::HubEpochOpened { epoch, members } => {
                self.open.insert(*epoch, members.iter().cloned().collect());
            }
            Body::HubEpochClosed { epoch } => {
                self.open.remove(epoch);
            }
            Body::HubTombstoned { agent, silent_ms } => {
                if let Some((epoch, _)) = self.open.iter().find(|(_, members)| members.contains(agent)) {
                    out.push(Finding {
                        t_ms: event.t_ms,
                        evidence: format!(
                            "{agent}, a member of open epoch {epoch}, was tombstoned after {silent_ms} ms of silence"
                        ),
                    });
                }
            }
            _ => {}
        }
    }
}

/// Tracks whether the observer — the controller, the hub and the link between them — is healthy, from the trace's
/// host and step events. Detection deadlines run only while it is, and restart when it heals.
struct ObserverHealth {
    controller: String,
    hub: String,
    down_hosts: BTreeSet<String>,
    /// Faults on the controller–hub link, by kind and direction.
    link_faults: BTreeSet<(&'static str, bool)>,
    healthy_since_ms: Option<u64>,
}

impl ObserverHealth {
    fn new(ctx: &OracleContext) -> ObserverHealth {
        ObserverHealth {
            controller: ctx.controller.clone(),
            hub: ctx.hub.clone(),
            down_hosts: BTreeSet::new(),
            link_faults: BTreeSet::new(),
            healthy_since_ms: Some(0),
        }
    }

    /// Direction of `a → b` on the observer link: `Some(true)` controller→hub, `Some(false)` hub→controller.
    fn direction(&self, a: &str, b: &str) -> Option<bool> {
        if a == self.controller && b == self.hub {
            Some(true)
        } else if a == self.hub && b == self.controller {
            Some(false)
        } else {
            None
        }
    }

    /// Updates from one event; returns true when health changed.
    fn observe(&mut self, event: &Event) -> bool {
        let was_healthy = self.healthy_since_ms.is_some();
        let host = &*event.host;
        match &event.body {
            Body::HostCrash { .. } if host == self.controller || host == self.hub => {
                self.down_hosts.insert(host.to_owned());
            }
            Body::HostBoot { .. } => {
                self.down_hosts.remove(host);
            }
            Body::Step { step } => self.observe_step(step),
            _ => return false,
        }
        let healthy = self.down_hosts.is_empty() && self.link_faults.is_empty();
        match (was_healthy, healthy) {
            (false, true) => self.healthy_since_ms = Some(event.t_ms),
            (true, false) => self.healthy_since_ms = None,
            _ => return false,
        }
        true
    }

    fn observe_step(&mut self, step: &Step) {
        let mut set = |kind: &'static str, a: &str, b: &str, on: bool, both: bool| {
            for (x, y) in if both { vec![(a, b), (b, a)] } else { vec![(a, b)] } {
                if let Some(direction) = self.direction(x, y) {
                    if on {
                        self.link_faults.insert((kind, direction));
                    } else {
                        self.link_faults.remove(&(kind, direction));
                    }
                }
            }
        };
        match step {
            Step::Partition { a, b } => set("partition", a, b, true, true),
            Step::Repair { a, b } => set("partition", a, b, false, true),
            Step::PartitionOneway { from, to } => set("partition", from, to, true, false),
            Step::RepairOneway { from, to } => set("partition", from, to, false, false),
            Step::Hold { a, b } => set("hold", a, b, true, true),
            Step::Release { a, b } => set("hold", a, b, false, true),
            Step::LinkLoss { a, b, request_per_mille, response_per_mille } => {
                set("loss", a, b, request_per_mille + response_per_mille > 0, true)
            }
            _ => {}
        }
    }
}

/// `silence_detected_in_time`: every silence is reported by `max(last heartbeat, observer healthy since) + 4 min +
/// slack`, and every recovery by `max(first heartbeat back, observer healthy since) + 1 sensor period + slack`, where
/// slack covers one read round trip at the run's worst link latency.
struct SilenceDetectedInTime {
    health: ObserverHealth,
    slack_ms: u64,
    agents: BTreeMap<String, AgentWatch>,
    /// `(deadline, agent, what)` ordered by deadline.
    due: BTreeSet<(u64, String, Due)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Due {
    Silence,
    Recovery,
}

#[derive(Default)]
struct AgentWatch {
    last_heartbeat_ms: u64,
    /// The engine reported the instance silent and has not reported it recovered.
    reported_silent: bool,
    /// The current silence (since the last heartbeat) has been reported.
    silence_reported: bool,
    heard_back_ms: Option<u64>,
    deadlines: Vec<(u64, Due)>,
}

impl SilenceDetectedInTime {
    fn new(ctx: &OracleContext) -> SilenceDetectedInTime {
        SilenceDetectedInTime {
            health: ObserverHealth::new(ctx),
            slack_ms: 2 * ctx.latency_max_ms + 1,
            agents: BTreeMap::new(),
            due: BTreeSet::new(),
        }
    }

    fn reschedule(&mut self, agent: &str) {
        let Some(watch) = self.agents.get_mut(agent) else { return };
        for (deadline, due) in watch.deadlines.drain(..) {
            self.due.remove(&(deadline, agent.to_owned(), due));
        }
        let Some(healthy_since) = self.health.healthy_since_ms else { return };
        if !watch.silence_reported {
            let deadline = watch.last_heartbeat_ms.max(healthy_since) + SILENCE_DETECTION_DEADLINE_MS + self.slack_ms;
            watch.deadlines.push((deadline, Due::Silence));
        }
        if let (true, Some(back)) = (watch.reported_silent, watch.heard_back_ms) {
            let deadline = back.max(healthy_since) + SENSOR_PERIOD_MS + self.slack_ms;
            watch.deadlines.push((deadline, Due::Recovery));
        }
        for (deadline, due) in &watch.deadlines {
            self.due.insert((*deadline, agent.to_owned(), *due));
        }
    }

    fn judge_until(&mut self, now_ms: u64, out: &mut Vec<Finding>) {
        while let Some(first) = self.due.first().cloned() {
            if first.0 >= now_ms {
                break;
            }
            self.due.remove(&first);
            let (deadline, agent, due) = first;
            let Some(watch) = self.agents.get_mut(&agent) else { continue };
            watch.deadlines.retain(|entry| *entry != (deadline, due));
            let evidence = match due {
                Due::Silence => {
                    watch.silence_reported = true; // judged once per silence
                    format!(
                        "{agent}: last heartbeat at t={} ms, no instance_silent by the deadline t={deadline} ms",
                        watch.last_heartbeat_ms
                    )
                }
                Due::Recovery => {
                    let back = watch.heard_back_ms.take().unwrap_or_default();
                    format!(
                        "{agent}: heartbeats back at t={back} ms, no instance_recovered by the deadline t={deadline} ms"
                    )
                }
            };
            out.push(Finding { t_ms: deadline, evidence });
        }
    }
}

impl Oracle for SilenceDetectedInTime {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        self.judge_until(event.t_ms, out);
        if self.health.observe(event) {
            let agents: Vec<String> = self.agents.keys().cloned().collect();
            for agent in agents {
                self.reschedule(&agent);
            }
            return;
        }
        let agent = match &event.body {
            Body::HubRegistered { agent, .. } => {
                self.agents
                    .insert(agent.clone(), AgentWatch { last_heartbeat_ms: event.t_ms, ..AgentWatch::default() });
                agent
            }
            Body::HubHeartbeat { agent } => {
                let watch = self.agents.entry(agent.clone()).or_default();
                watch.last_heartbeat_ms = event.t_ms;
                watch.silence_reported = false;
                if watch.reported_silent && watch.heard_back_ms.is_none() {
                    watch.heard_back_ms = Some(event.t_ms);
                }
                agent
            }
            Body::InstanceSilent { instance, .. } => {
                let watch = self.agents.entry(instance.clone()).or_default();
                watch.reported_silent = true;
                watch.silence_reported = true;
                watch.heard_back_ms = None;
                instance
            }
            Body::InstanceRecovered { instance, .. } => {
                let watch = self.agents.entry(instance.clone()).or_default();
                watch.reported_silent = false;
                watch.heard_back_ms = None;
                instance
            }
            _ => return,
        };
        let agent = agent.clone();
        self.reschedule(&agent);
    }

    fn on_finish(&mut self, end_ms: u64, out: &mut Vec<Finding>) {
        self.judge_until(end_ms, out);
    }
}

/// `epoch_member_survived_ttl`: the RCCA's exit criterion, reached when an open-epoch member has been silent longer
/// than the TTL plus one sweep and is still not tombstoned.
struct EpochMemberSurvivedTtl {
    ttl_ms: u64,
    sweep_interval_ms: u64,
    open: BTreeMap<u64, BTreeSet<String>>,
    last_heartbeat_ms: BTreeMap<String, u64>,
    tombstoned: BTreeSet<String>,
    reached: bool,
    checked_minute: u64,
}

impl EpochMemberSurvivedTtl {
    fn new(ctx: &OracleContext) -> EpochMemberSurvivedTtl {
        EpochMemberSurvivedTtl {
            ttl_ms: ctx.agent_ttl_ms,
            sweep_interval_ms: ctx.sweep_interval_ms,
            open: BTreeMap::new(),
            last_heartbeat_ms: BTreeMap::new(),
            tombstoned: BTreeSet::new(),
            reached: false,
            checked_minute: 0,
        }
    }
}

impl Oracle for EpochMemberSurvivedTtl {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        match &event.body {
            Body::HubRegistered { agent, .. } | Body::HubHeartbeat { agent } => {
                self.last_heartbeat_ms.insert(agent.clone(), event.t_ms);
            }
            Body::HubTombstoned { agent, .. } => {
                self.tombstoned.insert(agent.clone());
            }
            Body::HubEpochOpened { epoch, members } => {
                self.open.insert(*epoch, members.iter().cloned().collect());
            }
            Body::HubEpochClosed { epoch } => {
                self.open.remove(epoch);
            }
            _ => {}
        }
        let minute = event.t_ms / 60_000;
        if self.reached || minute == self.checked_minute || self.open.is_empty() {
            return;
        }
        self.checked_minute = minute;
        for (epoch, members) in &self.open {
            for member in members {
                let last = self.last_heartbeat_ms.get(member).copied().unwrap_or(0);
                let silent_ms = event.t_ms.saturating_sub(last);
                if silent_ms > self.ttl_ms + self.sweep_interval_ms && !self.tombstoned.contains(member) {
                    self.reached = true;
                    out.push(Finding {
                        t_ms: event.t_ms,
                        evidence: format!(
                            "{member}, a member of open epoch {epoch}, silent for {silent_ms} ms and still registered"
                        ),
                    });
                    return;
                }
            }
        }
    }
}

/// The dispatch holds the hub placed, by agent and owner, as its events report them.
#[derive(Debug, Default)]
struct HoldBook {
    holds: BTreeMap<String, BTreeSet<String>>,
}

impl HoldBook {
    /// Follows a hold event; returns false for any other event.
    fn observe(&mut self, body: &Body) -> bool {
        match body {
            Body::HubHoldPlaced { agent, owner } => {
                self.holds.entry(agent.clone()).or_default().insert(owner.clone());
            }
            Body::HubHoldReleased { agent, owner } => {
                if let Some(owners) = self.holds.get_mut(agent) {
                    owners.remove(owner);
                    if owners.is_empty() {
                        self.holds.remove(agent);
                    }
                }
            }
            _ => return false,
        }
        true
    }

    fn held(&self) -> impl Iterator<Item = &String> {
        self.holds.keys()
    }

    fn owners(&self, agent: &str) -> Option<&BTreeSet<String>> {
        self.holds.get(agent)
    }
}

/// Healthy, eligible workers from the controller's point of view — agent service running, no dispatch hold of any
/// owner, not tombstoned — followed event by event. Crashes and partitions are not counted: the floor bounds what the
/// controller takes down, not what faults do. `availability_floor` judges it; the trace's collectors record it.
#[derive(Debug, Default)]
pub(crate) struct Availability {
    nodes: usize,
    stopped: BTreeSet<String>,
    holds: HoldBook,
    tombstoned: BTreeSet<String>,
}

impl Availability {
    pub(crate) fn new(nodes: usize) -> Availability {
        Availability { nodes, ..Availability::default() }
    }

    /// Follows one event; returns whether it can have changed the count.
    pub(crate) fn observe(&mut self, event: &Event) -> bool {
        match &event.body {
            body if self.holds.observe(body) => {}
            Body::WorkerService { running: false } => {
                self.stopped.insert(event.host.to_string());
            }
            Body::WorkerService { running: true } => {
                self.stopped.remove(&*event.host);
            }
            Body::HubTombstoned { agent, .. } => {
                self.tombstoned.insert(agent.clone());
            }
            Body::HubRegistered { agent, .. } => {
                self.tombstoned.remove(agent);
            }
            _ => return false,
        }
        true
    }

    pub(crate) fn healthy(&self) -> usize {
        let unhealthy: BTreeSet<&String> =
            self.stopped.iter().chain(self.holds.held()).chain(self.tombstoned.iter()).collect();
        self.nodes.saturating_sub(unhealthy.len())
    }
}

/// `availability_floor`: reports each dip of [`Availability`] below the floor.
struct AvailabilityFloor {
    floor: usize,
    availability: Availability,
    below: bool,
}

impl AvailabilityFloor {
    fn new(ctx: &OracleContext) -> AvailabilityFloor {
        AvailabilityFloor {
            floor: ctx.availability_floor as usize,
            availability: Availability::new(ctx.nodes as usize),
            below: false,
        }
    }
}

impl Oracle for AvailabilityFloor {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        if self.floor == 0 || !self.availability.observe(event) {
            return;
        }
        let healthy = self.availability.healthy();
        if healthy < self.floor && !self.below {
            self.below = true;
            out.push(Finding {
                t_ms: event.t_ms,
                evidence: format!("healthy eligible workers fell to {healthy}, below the floor of {}", self.floor),
            });
        } else if healthy >= self.floor {
            self.below = false;
        }
    }
}

/// `lane_bound`: at most `lane_size` workers under a deployment-owned hold at once.
struct LaneBound {
    lane_size: usize,
    held: BTreeSet<String>,
    over: bool,
}

impl Oracle for LaneBound {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        match &event.body {
            Body::HubHoldPlaced { agent, owner } if owner.starts_with(DEPLOY_HOLD_PREFIX) => {
                self.held.insert(agent.clone());
            }
            Body::HubHoldReleased { agent, owner } if owner.starts_with(DEPLOY_HOLD_PREFIX) => {
                self.held.remove(agent);
            }
            _ => return,
        }
        if self.held.len() > self.lane_size && !self.over {
            self.over = true;
            out.push(Finding {
                t_ms: event.t_ms,
                evidence: format!(
                    "{} workers under deployment holds, more than the lane size of {}",
                    self.held.len(),
                    self.lane_size
                ),
            });
        } else if self.held.len() <= self.lane_size {
            self.over = false;
        }
    }
}

#[derive(Default)]
struct NoDuplicateMutation {
    applied: BTreeSet<(String, String)>,
    completed: BTreeSet<String>,
    holds: BTreeSet<(String, String)>,
    site: SiteMutations,
}

/// The MAAS workflows' side of `no_duplicate_mutation`: the commissions, deploys and releases MAAS accepted in each
/// workflow's current stage attempt. When the controller dies, each workflow's attempt is carried over to the first
/// attempt of the same stage its restarted controller starts (the rerun of that stage is the same attempt, resumed).
#[derive(Default)]
struct SiteMutations {
    /// workflow → (current stage, (op, machine) accepted in its current attempt)
    current: BTreeMap<String, (String, BTreeSet<(String, String)>)>,
    /// workflow → (stage, mutations) of the attempt a dead controller was in
    carried: BTreeMap<String, (String, BTreeSet<(String, String)>)>,
}

/// The MAAS calls `no_duplicate_mutation` counts.
const COUNTED_SITE_MUTATIONS: [&str; 3] = ["commission", "deploy", "release"];

impl SiteMutations {
    fn observe(&mut self, event: &Event) -> Option<String> {
        match &event.body {
            Body::Onboarding { workflow, event: OnboardingBody::StageStarted { stage, .. } }
            | Body::Decommission { workflow, event: OnboardingBody::StageStarted { stage, .. } } => {
                let accepted = match self.carried.remove(workflow) {
                    Some((carried_stage, accepted)) if carried_stage == *stage => accepted,
                    Some(other) => {
                        // Not yet the stage the dead controller was in: keep waiting for it.
                        self.carried.insert(workflow.clone(), other);
                        BTreeSet::new()
                    }
                    None => BTreeSet::new(),
                };
                self.current.insert(workflow.clone(), (stage.clone(), accepted));
                None
            }
            Body::Onboarding { workflow, event: OnboardingBody::Stopped { .. } | OnboardingBody::Completed { .. } }
            | Body::Decommission {
                workflow,
                event: OnboardingBody::Stopped { .. } | OnboardingBody::Completed { .. },
            } => {
                self.carried.remove(workflow);
                self.current.remove(workflow);
                None
            }
            Body::HostCrash { .. } if &*event.host == "controller" => {
                for (workflow, attempt) in std::mem::take(&mut self.current) {
                    if !attempt.1.is_empty() {
                        self.carried.insert(workflow, attempt);
                    }
                }
                None
            }
            Body::SiteRequest { workflow, op, system_id: Some(system_id), status: Some(status) }
                if COUNTED_SITE_MUTATIONS.contains(&op.as_str()) && (200..300).contains(status) =>
            {
                let (stage, accepted) = self.current.entry(workflow.clone()).or_default();
                (!accepted.insert((op.clone(), system_id.clone())))
                    .then(|| format!("{workflow}: {system_id} accepted a second {op} in one attempt of stage {stage}"))
            }
            _ => None,
        }
    }
}

impl Oracle for NoDuplicateMutation {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        if let Some(evidence) = self.site.observe(event) {
            out.push(Finding { t_ms: event.t_ms, evidence });
            return;
        }
        let duplicate = match &event.body {
            Body::WorkerMutated { op, operation_id, .. } => {
                (!self.applied.insert((event.host.to_string(), operation_id.clone())))
                    .then(|| format!("{} ran {op} {operation_id} a second time", event.host))
            }
            Body::JournalAppended { record, operation_id: Some(operation_id), .. } if record == "completed" => {
                (!self.completed.insert(operation_id.clone()))
                    .then(|| format!("the journal recorded {operation_id} completed twice"))
            }
            Body::HubHoldPlaced { agent, owner } => {
                self.holds.insert((agent.clone(), owner.clone()));
                None
            }
            Body::HubHoldReleased { agent, owner } => (!self.holds.remove(&(agent.clone(), owner.clone())))
                .then(|| format!("{owner}'s hold on {agent} was released twice")),
            _ => None,
        };
        if let Some(evidence) = duplicate {
            out.push(Finding { t_ms: event.t_ms, evidence });
        }
    }
}

/// `no_fetch_after_quiescence`: the RCCA's "after the barrier, outbound downloads are protocol violations".
#[derive(Default)]
struct NoFetchAfterQuiescence {
    quiesced: BTreeSet<String>,
}

impl Oracle for NoFetchAfterQuiescence {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        match &event.body {
            Body::WorkerMutated { op, .. } if op == "stop_service" => {
                self.quiesced.insert(event.host.to_string());
            }
            Body::WorkerMutated { op, .. } if op == "start_service" => {
                self.quiesced.remove(&*event.host);
            }
            Body::WorkerMutated { op, target, .. }
                if op == "stage_artifact" && self.quiesced.contains(&*event.host) =>
            {
                out.push(Finding {
                    t_ms: event.t_ms,
                    evidence: format!("{} fetched {target} while quiesced", event.host),
                });
            }
            _ => {}
        }
    }
}

/// `no_incoherent_node_mutated`: the RCCA's "no incoherent node mutated before quarantine", judged over the whole run.
/// A node is incoherent when the preflight quarantined it for its identity (not for a failed staging or repair, which
/// come after the node was found coherent); every rollout mutation on it, at any time, is a violation.
#[derive(Default)]
struct NoIncoherentNodeMutated {
    mutations: BTreeMap<String, Vec<(u64, String)>>,
    incoherent: BTreeSet<String>,
}

impl Oracle for NoIncoherentNodeMutated {
    fn on_event(&mut self, event: &Event, _line: &str, _out: &mut Vec<Finding>) {
        match &event.body {
            Body::WorkerMutated { op, operation_id, .. } if operation_id.starts_with("rollout-") => {
                self.mutations
                    .entry(event.host.to_string())
                    .or_default()
                    .push((event.t_ms, format!("{op} {operation_id}")));
            }
            Body::Rollout { event: RolloutBody::Quarantined { node, surfaces }, .. } => {
                let after_preflight = ["staging failed", "repair", "could not fence", "no room"];
                if !surfaces.iter().any(|surface| after_preflight.iter().any(|prefix| surface.starts_with(prefix))) {
                    self.incoherent.insert(node.clone());
                }
            }
            _ => {}
        }
    }

    fn on_finish(&mut self, _end_ms: u64, out: &mut Vec<Finding>) {
        for node in &self.incoherent {
            for (t_ms, what) in self.mutations.get(node).into_iter().flatten() {
                out.push(Finding {
                    t_ms: *t_ms,
                    evidence: format!("{node}, quarantined as incoherent, was mutated: {what}"),
                });
            }
        }
    }
}

/// `no_dispatch_to_held_worker`: from the hub's dispatch events against the holds it placed and the services the
/// rollout stopped. The rollout must hold a worker before it quiesces it, so no task can land on a stopped worker.
#[derive(Default)]
struct NoDispatchToHeld {
    holds: HoldBook,
    quiesced: BTreeSet<String>,
}

impl Oracle for NoDispatchToHeld {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        match &event.body {
            body if self.holds.observe(body) => {}
            Body::WorkerMutated { op, .. } if op == "stop_service" => {
                self.quiesced.insert(event.host.to_string());
            }
            Body::WorkerMutated { op, .. } if op == "start_service" => {
                self.quiesced.remove(&*event.host);
            }
            Body::HubDispatched { agent, task } => {
                if let Some(owners) = self.holds.owners(agent) {
                    let owners: Vec<&str> = owners.iter().map(String::as_str).collect();
                    out.push(Finding {
                        t_ms: event.t_ms,
                        evidence: format!("{task} dispatched to {agent}, held by {}", owners.join(", ")),
                    });
                } else if self.quiesced.contains(agent) {
                    out.push(Finding {
                        t_ms: event.t_ms,
                        evidence: format!("{task} dispatched to {agent}, whose service the rollout stopped"),
                    });
                }
            }
            _ => {}
        }
    }
}

#[derive(Default)]
struct EveryLaneConverged {
    started_ms: Option<u64>,
    terminal: Option<String>,
    stuck: Vec<(u64, u64)>,
}

impl Oracle for EveryLaneConverged {
    fn on_event(&mut self, event: &Event, _line: &str, _out: &mut Vec<Finding>) {
        match &event.body {
            Body::Step { step: Step::StartRollout { .. } } => self.started_ms = Some(event.t_ms),
            Body::Rollout { event: RolloutBody::LaneCommitted { lane, verdict, .. }, .. } if verdict == "stuck" => {
                self.stuck.push((*lane, event.t_ms));
            }
            Body::Rollout { event: RolloutBody::Terminal { outcome }, .. } => self.terminal = Some(outcome.clone()),
            Body::Rollout { event: RolloutBody::PlanRefused { .. }, .. } => {
                self.terminal = Some("refused (every lane prior)".into())
            }
            _ => {}
        }
    }

    fn on_finish(&mut self, end_ms: u64, out: &mut Vec<Finding>) {
        let Some(started_ms) = self.started_ms else { return };
        for (lane, t_ms) in &self.stuck {
            out.push(Finding { t_ms: *t_ms, evidence: format!("lane {lane} is stuck: neither successor nor prior") });
        }
        match &self.terminal {
            None => out.push(Finding {
                t_ms: end_ms,
                evidence: format!("the rollout started at t={started_ms} ms never reached a terminal state"),
            }),
            Some(outcome) if outcome.starts_with("failed") => {
                out.push(Finding { t_ms: end_ms, evidence: format!("the rollout ended {outcome}") });
            }
            Some(_) => {}
        }
    }
}

#[derive(Default)]
struct HoldsAccounted {
    holds: BTreeMap<String, String>,
    stuck_nodes: BTreeSet<String>,
}

impl Oracle for HoldsAccounted {
    fn on_event(&mut self, event: &Event, _line: &str, _out: &mut Vec<Finding>) {
        match &event.body {
            Body::HubHoldPlaced { agent, owner } if owner.starts_with(DEPLOY_HOLD_PREFIX) => {
                self.holds.insert(agent.clone(), owner.clone());
            }
            Body::HubHoldReleased { agent, owner } if owner.starts_with(DEPLOY_HOLD_PREFIX) => {
                self.holds.remove(agent);
            }
            Body::Rollout { event: RolloutBody::LaneCommitted { verdict, nodes, .. }, .. } if verdict == "stuck" => {
                self.stuck_nodes.extend(nodes.iter().cloned());
            }
            _ => {}
        }
    }

    fn on_finish(&mut self, end_ms: u64, out: &mut Vec<Finding>) {
        let leaked: Vec<&String> = self.holds.keys().filter(|node| !self.stuck_nodes.contains(*node)).collect();
        if !leaked.is_empty() {
            let names: Vec<&str> = leaked.iter().map(|n| n.as_str()).collect();
            out.push(Finding {
                t_ms: end_ms,
                evidence: format!(
                    "deployment holds still on {} with no stuck lane to account for them",
                    names.join(", ")
                ),
            });
        }
    }
}

/// `only_intended_holds_released`: a deployment releases only its own `deploy:` holds. Quarantine holds keep an
/// incoherent node out of dispatch, successor holds keep an untouched participant out after its principal went,
/// and an operator's hold is the operator's (RCCA: "Only the intended holds are released").
struct OnlyIntendedHoldsReleased;

impl Oracle for OnlyIntendedHoldsReleased {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        if let Body::HubHoldReleased { agent, owner } = &event.body {
            if !owner.starts_with(DEPLOY_HOLD_PREFIX) {
                out.push(Finding { t_ms: event.t_ms, evidence: format!("hold {owner} on {agent} was released") });
            }
        }
    }
}

/// `receipts_name_frozen_route`: RCCA P1 "Freeze one signed, hashed route bundle ... and require every subprocess and
/// receipt in the epoch to name its digest". The digest a rollout's `plan_frozen` record names is the only one its
/// later journal receipts and the installer's generated runtime configuration may name.
#[derive(Default)]
struct ReceiptsNameFrozenRoute {
    frozen: Option<String>,
}

impl Oracle for ReceiptsNameFrozenRoute {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        match &event.body {
            Body::JournalAppended { record, route_digest, .. } if record == "plan_frozen" => {
                self.frozen.clone_from(route_digest);
            }
            Body::JournalAppended { record, route_digest, operation_id }
                if ["intent", "intents", "completed", "lane_committed"].contains(&record.as_str())
                    && (route_digest.is_none() || *route_digest != self.frozen) =>
            {
                out.push(Finding {
                    t_ms: event.t_ms,
                    evidence: format!(
                        "{record} {} names route {route_digest:?}, the plan froze {:?}",
                        operation_id.as_deref().unwrap_or("-"),
                        self.frozen
                    ),
                });
            }
            Body::WorkerMutated { op, target, operation_id } if op == "run_installer" => {
                let named = target.split_once(" routes ").map(|(_, digest)| digest.to_owned());
                if self.frozen.is_some() && named != self.frozen {
                    out.push(Finding {
                        t_ms: event.t_ms,
                        evidence: format!(
                            "{} installer {operation_id} generated routes {named:?}, the plan froze {:?}",
                            event.host, self.frozen
                        ),
                    });
                }
            }
            _ => {}
        }
    }
}

/// `rollout_time_bounded`: RCCA "Quiescence and recovery wall time are bounded by batch phase limits rather than
/// worker_count x per-node timeout". From the plan's freeze to the rollout's terminal event, the time the controller
/// was up and not waiting on something outside its control (a held lock, a credential outage) must stay within the
/// plan's own bound, lanes x lane bound. Judged at the terminal event; a rollout still running at the end of the run
/// is judged by `every_lane_converged` instead.
#[derive(Default)]
struct RolloutTimeBounded {
    /// `(frozen at, bound)` of the rollout in progress.
    plan: Option<(u64, u64)>,
    excluded_ms: u64,
    controller_down_since: Option<u64>,
    credential_out_since: Option<u64>,
}

impl Oracle for RolloutTimeBounded {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        let Some((frozen_at_ms, bound_ms)) = self.plan else {
            if let Body::Rollout { event: RolloutBody::PlanFrozen { rollout_bound_ms, .. }, .. } = &event.body {
                self.plan = Some((event.t_ms, *rollout_bound_ms));
                self.excluded_ms = 0;
            }
            return;
        };
        match &event.body {
            Body::HostCrash { .. } if &*event.host == "controller" => self.controller_down_since = Some(event.t_ms),
            Body::HostBoot { .. } if &*event.host == "controller" => {
                if let Some(since) = self.controller_down_since.take() {
                    self.excluded_ms += event.t_ms - since;
                }
            }
            Body::HubCredentialRejected { .. } if self.credential_out_since.is_none() => {
                self.credential_out_since = Some(event.t_ms);
            }
            Body::Rollout { event: RolloutBody::Reauthenticated { .. }, .. } => {
                if let Some(since) = self.credential_out_since.take() {
                    self.excluded_ms += event.t_ms - since;
                }
            }
            Body::Rollout { event: RolloutBody::LockWaiting { remaining_ms, .. }, .. } => {
                self.excluded_ms += remaining_ms + 1_000;
            }
            Body::Rollout { event: RolloutBody::Terminal { outcome }, .. } => {
                let active_ms = (event.t_ms - frozen_at_ms).saturating_sub(self.excluded_ms);
                if active_ms > bound_ms {
                    out.push(Finding {
                        t_ms: event.t_ms,
                        evidence: format!(
                            "rollout ended {outcome} after {active_ms} ms of active time, over its plan's bound of \
                             {bound_ms} ms"
                        ),
                    });
                }
                self.plan = None;
            }
            _ => {}
        }
    }
}

#[derive(Default)]
struct RetryRecovered {
    retried: BTreeSet<(String, String)>,
    reached: bool,
}

impl Oracle for RetryRecovered {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        match &event.body {
            Body::Rollout { event: RolloutBody::Retrying { node, step, .. }, .. } => {
                self.retried.insert((node.clone(), step.clone()));
            }
            Body::Rollout { event: RolloutBody::StepDone { node, step, .. }, .. }
                if !self.reached && self.retried.contains(&(node.clone(), step.clone())) =>
            {
                self.reached = true;
                out.push(Finding { t_ms: event.t_ms, evidence: format!("{node} {step} completed after a retry") });
            }
            _ => {}
        }
    }
}

// --- the MAAS site and onboarding --------------------------------------------------------------------------------------

/// Every `site.status` write is allowed by `fakes::maas::status`'s transition table.
struct MaasTransitionsLegal;

impl Oracle for MaasTransitionsLegal {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        let Body::SiteStatus { system_id, from, to } = &event.body else { return };
        let legal = match from {
            None => fakes::maas::status::INITIAL.contains(to),
            Some(from) => from.can_transition_to(*to),
        };
        if !legal {
            let from = from.map_or_else(|| "(created)".to_owned(), |from| from.label().to_owned());
            out.push(Finding {
                t_ms: event.t_ms,
                evidence: format!("machine {system_id}: {from} -> {} is not a MAAS transition", to.label()),
            });
        }
    }
}

/// A workflow's current stage attempt, from its `StageStarted` events.
#[derive(Debug, Default)]
struct StageBook {
    /// workflow → (stage, attempt)
    current: BTreeMap<String, (String, u64)>,
}

impl StageBook {
    /// True when the event started a new stage attempt of a workflow.
    fn observe(&mut self, body: &Body) -> bool {
        match body {
            Body::Onboarding { workflow, event: OnboardingBody::StageStarted { stage, attempt } }
            | Body::Decommission { workflow, event: OnboardingBody::StageStarted { stage, attempt } } => {
                self.current.insert(workflow.clone(), (stage.clone(), *attempt));
                true
            }
            _ => false,
        }
    }
}

/// The calls that change a machine irreversibly or take it from under a workload (section 7: "refresh observed MAAS
/// state before destructive or irreversible steps").
const DESTRUCTIVE_OPS: [&str; 7] = ["commission", "deploy", "release", "abort", "mark_fixed", "power_off", "delete"];

/// Destructive MAAS calls follow an answered read of the machine within the same stage attempt.
#[derive(Default)]
struct NoDestructiveCallWithoutFreshRead {
    stages: StageBook,
    /// workflow → machines read (`None`: the whole list) since its current stage attempt began.
    read: BTreeMap<String, BTreeSet<Option<String>>>,
}

impl Oracle for NoDestructiveCallWithoutFreshRead {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        if self.stages.observe(&event.body) {
            if let Body::Onboarding { workflow, .. } | Body::Decommission { workflow, .. } = &event.body {
                self.read.remove(workflow);
            }
            return;
        }
        let Body::SiteRequest { workflow, op, system_id, status } = &event.body else { return };
        let answered = status.is_some_and(|status| (200..300).contains(&status));
        match op.as_str() {
            // A power query reads the machine's power, which is what a power-off must not act on blind.
            "read" | "list" | "query_power_state" if answered => {
                let key = if op == "list" { None } else { system_id.clone() };
                self.read.entry(workflow.clone()).or_default().insert(key);
            }
            op if DESTRUCTIVE_OPS.contains(&op) => {
                let reads = self.read.get(workflow);
                let fresh = reads.is_some_and(|reads| reads.contains(&None) || reads.contains(system_id));
                if !fresh {
                    let (stage, attempt) = self.stages.current.get(workflow).cloned().unwrap_or_default();
                    out.push(Finding {
                        t_ms: event.t_ms,
                        evidence: format!(
                            "{workflow}: {op} of {} in stage {stage} attempt {attempt} without a read of it first",
                            system_id.as_deref().unwrap_or("?")
                        ),
                    });
                }
            }
            _ => {}
        }
    }
}

/// No machine is commissioned or deployed twice within one stage attempt.
#[derive(Default)]
struct NoDoubleCommissionOrDeploy {
    stages: StageBook,
    /// (workflow, op, machine) accepted in the workflow's current stage attempt.
    accepted: BTreeSet<(String, String, String)>,
}

impl Oracle for NoDoubleCommissionOrDeploy {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        if self.stages.observe(&event.body) {
            if let Body::Onboarding { workflow, .. } = &event.body {
                self.accepted.retain(|(w, _, _)| w != workflow);
            }
            return;
        }
        let Body::SiteRequest { workflow, op, system_id: Some(system_id), status: Some(status) } = &event.body else {
            return;
        };
        if (op == "commission" || op == "deploy") && (200..300).contains(status) {
            let key = (workflow.clone(), op.clone(), system_id.clone());
            if !self.accepted.insert(key) {
                let (stage, attempt) = self.stages.current.get(workflow).cloned().unwrap_or_default();
                out.push(Finding {
                    t_ms: event.t_ms,
                    evidence: format!(
                        "{workflow}: {system_id} accepted a second {op} in stage {stage} attempt {attempt}"
                    ),
                });
            }
        }
    }
}

/// At the end of the run every onboarding workflow rests: completed, or diagnosed for a person.
/// Judges the decision that follows each `stage_failed` of a workflow against the stage's matrix row, from the
/// workflow's next event. The row's own words are the reference (`engine::onboarding::retries`, the resulting states),
/// so a driver that ignored a decision — retried a stop, stopped somewhere the row does not list — is caught.
struct FollowsTheMatrix {
    workflow: engine::matrix::Workflow,
    policy: engine::onboarding::SitePolicy,
    /// workflow → the failure awaiting its decision: `(stage, class)`.
    pending: BTreeMap<String, (String, String)>,
    /// workflow → the node's state as its completed stages left it (decommission: active, then quarantined, ...).
    node_state: BTreeMap<String, engine::matrix::NodeState>,
}

impl FollowsTheMatrix {
    fn new(workflow: engine::matrix::Workflow, ctx: &OracleContext) -> FollowsTheMatrix {
        FollowsTheMatrix { workflow, policy: ctx.site_policy, pending: BTreeMap::new(), node_state: BTreeMap::new() }
    }

    /// The node state a decommission's completed stage leaves behind.
    fn after_stage(stage: &str) -> Option<engine::matrix::NodeState> {
        use engine::matrix::NodeState;
        match stage {
            "disable_node" => Some(NodeState::Quarantined),
            "retire_gpuaas_node" => Some(NodeState::Retired),
            "remove_gpuaas_node_record" => Some(NodeState::Deleted),
            _ => None,
        }
    }

    fn judge(
        &self,
        stage: &str,
        class: &str,
        prior: engine::matrix::NodeState,
        next: &OnboardingBody,
    ) -> Result<(), String> {
        use engine::matrix::{FailureClass, NodeState, OnboardingStage, Stage, WorkflowState};
        let Some(row_stage) = Stage::all().find(|s| s.workflow() == self.workflow && s.as_str() == stage) else {
            return Err(format!("stage {stage} is not a stage of the {:?} workflow", self.workflow));
        };
        let Some(failure) = FailureClass::ALL.into_iter().find(|c| c.as_str() == class) else {
            return Err(format!("{class} is not a failure class"));
        };
        let row = row_stage.row();
        if row_stage == Stage::Onboarding(OnboardingStage::ClassifyDeployFailure) {
            // Best effort: the deploy failure it was classifying goes on, unclassified.
            return match next {
                OnboardingBody::StageFailed { stage, class, .. }
                    if stage == "wait_for_deployed" && class == "deploy_cloud_init_failure" =>
                {
                    Ok(())
                }
                other => {
                    Err(format!("classify_deploy_failure failed, then {other:?} instead of the generic deploy failure"))
                }
            };
        }
        match next {
            OnboardingBody::Retrying { stage: retried, .. } => {
                let policy = self.policy;
                // An ambiguity a fresh read resolved is retried as the transient it turned out to be.
                let retried_class = match failure {
                    FailureClass::StateAmbiguity => FailureClass::UpstreamTransient,
                    other => other,
                };
                if retried != stage {
                    Err(format!("{stage} failed ({class}) but {retried} was retried"))
                } else if !engine::onboarding::retries(row, retried_class, &policy) {
                    Err(format!("{stage} retried {class}, which its row ({}) does not retry", row.retryability_text))
                } else {
                    Ok(())
                }
            }
            OnboardingBody::StageDone { adopted: true, .. } => Ok(()),
            // "Resume or skip if policy allows": only a non-fatal stage may be skipped.
            OnboardingBody::StageDone { adopted: false, .. } => {
                if row.retryability == engine::matrix::Retryability::NonFatal {
                    Ok(())
                } else {
                    Err(format!(
                        "{stage} failed ({class}) and was skipped; its row ({}) is not non-fatal",
                        row.retryability_text
                    ))
                }
            }
            OnboardingBody::Stopped { stage: stopped, workflow_state, node_state, .. } => {
                let workflow_state = WorkflowState::ALL.into_iter().find(|w| w.as_str() == workflow_state);
                let node_state = NodeState::ALL.into_iter().find(|n| n.as_str() == node_state);
                match (workflow_state, node_state) {
                    _ if stopped != stage => {
                        Err(format!("{stage} failed ({class}) but the workflow stopped at {stopped}"))
                    }
                    (Some(w), Some(n)) if row.admits_workflow_state(w) && row.node_states.admits(prior, n) => Ok(()),
                    (w, n) => Err(format!(
                        "{stage} stopped on {class} as {w:?} / {n:?}; its row lists {} and {}",
                        row.workflow_states_text(),
                        row.node_states.table_text()
                    )),
                }
            }
            // `remove_maas_record`: "retain MAAS record by policy or if delete unsafe" completes the workflow with a
            // follow-up record.
            OnboardingBody::Completed { .. }
                if row.admits_workflow_state(WorkflowState::CompletedWithFollowUpRecord) =>
            {
                Ok(())
            }
            OnboardingBody::Observed { what, .. }
                if what == "follow_up" && row.admits_workflow_state(WorkflowState::CompletedWithFollowUpRecord) =>
            {
                Ok(())
            }
            other => Err(format!("{stage} failed ({class}), then {other:?}: no decision of the matrix")),
        }
    }
}

impl Oracle for FollowsTheMatrix {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        let (workflow, body) = match (&event.body, self.workflow) {
            (Body::Onboarding { workflow, event }, engine::matrix::Workflow::Onboarding)
            | (Body::Decommission { workflow, event }, engine::matrix::Workflow::Decommission) => (workflow, event),
            _ => return,
        };
        let initial = match self.workflow {
            engine::matrix::Workflow::Onboarding => engine::matrix::NodeState::Enrolling,
            engine::matrix::Workflow::Decommission => engine::matrix::NodeState::Active,
        };
        let prior = self.node_state.get(workflow).copied().unwrap_or(initial);
        if let Some((stage, class)) = self.pending.remove(workflow) {
            if let Err(evidence) = self.judge(&stage, &class, prior, body) {
                out.push(Finding { t_ms: event.t_ms, evidence: format!("{workflow}: {evidence}") });
            }
        }
        match body {
            OnboardingBody::StageFailed { stage, class, .. } => {
                self.pending.insert(workflow.clone(), (stage.clone(), class.clone()));
            }
            OnboardingBody::StageDone { stage, .. } if self.workflow == engine::matrix::Workflow::Decommission => {
                if let Some(state) = Self::after_stage(stage) {
                    self.node_state.insert(workflow.clone(), state);
                }
            }
            _ => {}
        }
    }

    fn on_finish(&mut self, end_ms: u64, out: &mut Vec<Finding>) {
        for (workflow, (stage, class)) in std::mem::take(&mut self.pending) {
            out.push(Finding {
                t_ms: end_ms,
                evidence: format!("{workflow}: {stage} failed ({class}) and no decision followed before the run ended"),
            });
        }
    }
}

/// At the end of the run every requested decommission rests: completed, or stopped with a class.
struct EveryDecommissionRests {
    /// workflow → its last resting state (`None`: not resting — never started, or running).
    last: BTreeMap<String, Option<String>>,
}

impl EveryDecommissionRests {
    fn new(ctx: &OracleContext) -> EveryDecommissionRests {
        EveryDecommissionRests { last: ctx.decommissions.iter().map(|w| (w.clone(), None)).collect() }
    }
}

impl Oracle for EveryDecommissionRests {
    fn on_event(&mut self, event: &Event, _line: &str, _out: &mut Vec<Finding>) {
        let Body::Decommission { workflow, event } = &event.body else { return };
        let state = match event {
            OnboardingBody::Completed { .. } => Some("completed".to_owned()),
            OnboardingBody::Stopped { class, workflow_state, .. } if !class.is_empty() => Some(workflow_state.clone()),
            OnboardingBody::Stopped { .. } => Some("stopped without a class".to_owned()),
            OnboardingBody::StageStarted { .. } => None,
            _ => return,
        };
        self.last.insert(workflow.clone(), state);
    }

    fn on_finish(&mut self, end_ms: u64, out: &mut Vec<Finding>) {
        for (workflow, state) in &self.last {
            match state.as_deref() {
                Some("stopped without a class") => {
                    out.push(Finding { t_ms: end_ms, evidence: format!("{workflow} stopped without a failure class") })
                }
                Some(_) => {}
                None => out.push(Finding {
                    t_ms: end_ms,
                    evidence: format!("{workflow} is still running (or never started) when the run ends"),
                }),
            }
        }
    }
}

struct EveryNodeOnboardedOrDiagnosed {
    /// workflow → its last state (`None`: never started).
    last: BTreeMap<String, Option<String>>,
}

impl EveryNodeOnboardedOrDiagnosed {
    fn new(ctx: &OracleContext) -> EveryNodeOnboardedOrDiagnosed {
        EveryNodeOnboardedOrDiagnosed { last: ctx.workflows.iter().map(|w| (w.clone(), None)).collect() }
    }
}

impl Oracle for EveryNodeOnboardedOrDiagnosed {
    fn on_event(&mut self, event: &Event, _line: &str, _out: &mut Vec<Finding>) {
        let Body::Onboarding { workflow, event } = &event.body else { return };
        let state = match event {
            OnboardingBody::Completed { .. } => "completed".to_owned(),
            OnboardingBody::Stopped { class, workflow_state, .. } => {
                if workflow_state == "failed_manual_intervention" && class.is_empty() {
                    "failed_manual_intervention without a class".to_owned()
                } else {
                    workflow_state.clone()
                }
            }
            _ => "running".to_owned(),
        };
        self.last.insert(workflow.clone(), Some(state));
    }

    fn on_finish(&mut self, end_ms: u64, out: &mut Vec<Finding>) {
        for (workflow, state) in &self.last {
            let resting = matches!(
                state.as_deref(),
                Some("completed" | "completed_with_follow_up_record" | "failed_manual_intervention")
            );
            if !resting {
                out.push(Finding {
                    t_ms: end_ms,
                    evidence: format!(
                        "{workflow} is {} at the end of the run",
                        state.as_deref().unwrap_or("not started")
                    ),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use super::*;

    fn ctx() -> OracleContext {
        OracleContext {
            controller: "controller".into(),
            hub: "hub".into(),
            agent_ttl_ms: 3_600_000,
            sweep_interval_ms: 60_000,
            call_timeout_ms: 10_000,
            latency_max_ms: 20,
            nodes: 4,
            lane_size: 2,
            availability_floor: 2,
            workflows: Vec::new(),
            decommissions: Vec::new(),
            site_policy: engine::onboarding::SitePolicy::default(),
        }
    }

    fn ev(t_ms: u64, host: &str, body: Body) -> Event {
        Event { t_ms, host: Rc::from(host), body }
    }

    fn stage(workflow: &str, stage: &str, attempt: u64) -> Body {
        Body::Onboarding {
            workflow: workflow.into(),
            event: OnboardingBody::StageStarted { stage: stage.into(), attempt },
        }
    }

    fn request(op: &str, system_id: Option<&str>, status: Option<u16>) -> Body {
        Body::SiteRequest {
            workflow: "onboard-node-02".into(),
            op: op.into(),
            system_id: system_id.map(str::to_owned),
            status,
        }
    }

    #[test]
    fn onboarding_decisions_are_judged_against_the_stage_row() {
        let w = "onboard-node-02";
        let on = |event: OnboardingBody| Body::Onboarding { workflow: w.into(), event };
        let failed = |stage: &str, class: &str| {
            on(OnboardingBody::StageFailed { stage: stage.into(), class: class.into(), error: "e".into() })
        };
        let retrying = |stage: &str| on(OnboardingBody::Retrying { stage: stage.into(), attempt: 2, delay_ms: 1 });
        let stopped = |stage: &str, class: &str, workflow_state: &str| {
            on(OnboardingBody::Stopped {
                stage: stage.into(),
                class: class.into(),
                workflow_state: workflow_state.into(),
                node_state: "enrolling".into(),
                evidence: vec![],
            })
        };
        let events = [
            // Legal: a transient retried; configure_storage's hardware mismatch stopped for a person.
            ev(1, "controller", failed("commission_node", "upstream_transient")),
            ev(2, "controller", retrying("commission_node")),
            ev(3, "controller", failed("configure_storage", "hardware_mismatch")),
            ev(4, "controller", stopped("configure_storage", "hardware_mismatch", "failed_manual_intervention")),
            // Illegal: a hardware mismatch retried where only the PXE-interface stage may.
            ev(5, "controller", failed("configure_storage", "hardware_mismatch")),
            ev(6, "controller", retrying("configure_storage")),
            // Illegal: load_site_config's row does not list `completed` as a failure's state.
            ev(7, "controller", failed("load_site_config", "input_config_error")),
            ev(8, "controller", stopped("load_site_config", "input_config_error", "completed")),
            // Legal fallback, then an illegal one (classify's failure must fall back to the deploy failure).
            ev(9, "controller", failed("classify_deploy_failure", "upstream_transient")),
            ev(10, "controller", failed("wait_for_deployed", "deploy_cloud_init_failure")),
            ev(11, "controller", retrying("wait_for_deployed")),
            ev(12, "controller", failed("classify_deploy_failure", "upstream_transient")),
            ev(13, "controller", retrying("wait_for_deployed")),
            // Still pending when the run ends.
            ev(14, "controller", failed("wait_for_ready", "upstream_transient")),
        ];
        let findings = run(&mut FollowsTheMatrix::new(engine::matrix::Workflow::Onboarding, &ctx()), &events, 20);
        assert_eq!(findings.iter().map(|f| f.t_ms).collect::<Vec<_>>(), [6, 8, 13, 20], "{findings:#?}");
        assert!(findings[0].evidence.contains("does not retry"), "{}", findings[0].evidence);
    }

    #[test]
    fn a_decommission_s_destructive_call_needs_a_read_in_its_own_stage_attempt() {
        let w = "decommission-node-02";
        let started = |t_ms, stage: &str| {
            let event = OnboardingBody::StageStarted { stage: stage.into(), attempt: 1 };
            ev(t_ms, "controller", Body::Decommission { workflow: w.into(), event })
        };
        let request = |t_ms, op: &str| {
            let body = Body::SiteRequest {
                workflow: w.into(),
                op: op.into(),
                system_id: Some("abc".into()),
                status: Some(200),
            };
            ev(t_ms, "controller", body)
        };
        let events = [
            started(1, "load_site_config"),
            request(2, "read"),
            // A read of an earlier stage does not cover the release.
            started(3, "release_maas_node"),
            request(4, "release"),
            started(5, "power_off_maas_node"),
            request(6, "query_power_state"),
            request(7, "power_off"),
            started(8, "remove_maas_record"),
            request(9, "delete"),
        ];
        let unread = run(&mut NoDestructiveCallWithoutFreshRead::default(), &events, 10);
        assert_eq!(unread.iter().map(|f| f.t_ms).collect::<Vec<_>>(), [4, 9], "{unread:#?}");
        assert!(unread[0].evidence.contains("release_maas_node"), "{}", unread[0].evidence);
    }

    #[test]
    fn site_oracles_judge_reads_doubles_transitions_and_resting_states() {
        use fakes::maas::NodeStatus;
        let w = "onboard-node-02";
        let events = [
            ev(1, "controller", stage(w, "commission_node", 1)),
            ev(2, "controller", request("commission", Some("abc"), Some(200))),
            ev(3, "controller", stage(w, "commission_node", 2)),
            ev(4, "controller", request("read", Some("abc"), Some(200))),
            ev(5, "controller", request("commission", Some("abc"), Some(200))),
            ev(6, "controller", request("commission", Some("abc"), Some(200))),
        ];
        let unread = run(&mut NoDestructiveCallWithoutFreshRead::default(), &events, 10);
        assert_eq!(unread.len(), 1, "{unread:?}");
        assert_eq!(unread[0].t_ms, 2);
        let doubles = run(&mut NoDoubleCommissionOrDeploy::default(), &events, 10);
        assert_eq!(doubles.iter().map(|f| f.t_ms).collect::<Vec<_>>(), [6]);
        let status = |from: Option<NodeStatus>, to| Body::SiteStatus { system_id: "abc".into(), from, to };
        let writes = [
            ev(1, "maas", status(None, NodeStatus::New)),
            ev(2, "maas", status(Some(NodeStatus::New), NodeStatus::Commissioning)),
            ev(3, "maas", status(Some(NodeStatus::New), NodeStatus::Deployed)),
        ];
        let illegal = run(&mut MaasTransitionsLegal, &writes, 10);
        assert_eq!(illegal.iter().map(|f| f.t_ms).collect::<Vec<_>>(), [3]);
        let ctx = OracleContext { workflows: vec![w.into(), "onboard-node-03".into()], ..ctx() };
        let stopped = Body::Onboarding {
            workflow: w.into(),
            event: OnboardingBody::Stopped {
                stage: "wait_for_ready".into(),
                class: "state_ambiguity".into(),
                workflow_state: "failed_manual_intervention".into(),
                node_state: "enrolling".into(),
                evidence: vec!["unknown machine x enlisted".into()],
            },
        };
        let rests = run(&mut EveryNodeOnboardedOrDiagnosed::new(&ctx), &[ev(1, "controller", stopped)], 10);
        assert_eq!(rests.len(), 1, "the workflow that never started: {rests:?}");
        assert!(rests[0].evidence.contains("onboard-node-03 is not started"));
    }

    #[test]
    fn a_mutation_resent_after_a_controller_death_in_the_same_stage_attempt_is_a_duplicate() {
        let deploy = || request("deploy", Some("m-1"), Some(200));
        let died = |t| ev(t, "controller", Body::HostCrash { lost_unsynced_writes: 0 });
        // The dead controller's deploy, then its restarted controller's rerun that deploys again in the same stage.
        let resent = [
            ev(1, "sim", stage("onboard-node-02", "deploy_via_maas", 1)),
            ev(2, "controller", deploy()),
            died(3),
            ev(4, "sim", stage("onboard-node-02", "commission_node", 1)),
            ev(5, "sim", stage("onboard-node-02", "deploy_via_maas", 1)),
            ev(6, "controller", deploy()),
        ];
        let findings = run(&mut NoDuplicateMutation::default(), &resent, 10);
        assert_eq!(findings.len(), 1, "{findings:?}");
        assert!(findings[0].evidence.contains("second deploy in one attempt of stage deploy_via_maas"));
        // Twice in one attempt without a death is a duplicate too.
        let twice =
            [ev(1, "sim", stage("onboard-node-02", "deploy_via_maas", 1)), ev(2, "c", deploy()), ev(3, "c", deploy())];
        assert_eq!(run(&mut NoDuplicateMutation::default(), &twice, 10).len(), 1);
        // A retry is a new attempt; a refused deploy is no mutation; a death before the mutation carries nothing.
        let fine = [
            ev(1, "sim", stage("onboard-node-02", "deploy_via_maas", 1)),
            ev(2, "controller", request("deploy", Some("m-1"), Some(409))),
            ev(3, "controller", deploy()),
            ev(4, "sim", stage("onboard-node-02", "deploy_via_maas", 2)),
            ev(5, "controller", deploy()),
            ev(6, "sim", stage("onboard-node-02", "wait_for_deployed", 1)),
            died(7),
            ev(8, "sim", stage("onboard-node-02", "deploy_via_maas", 1)),
            ev(9, "controller", deploy()),
        ];
        assert!(run(&mut NoDuplicateMutation::default(), &fine, 10).is_empty());
    }

    fn run(oracle: &mut dyn Oracle, events: &[Event], end_ms: u64) -> Vec<Finding> {
        let mut out = Vec::new();
        for event in events {
            oracle.on_event(event, &serde_json::to_string(event).unwrap(), &mut out);
        }
        oracle.on_finish(end_ms, &mut out);
        out
    }

    fn rollout(t: u64, event: RolloutBody) -> Event {
        ev(t, "controller", Body::Rollout { rollout: "r".into(), event })
    }

    fn journal(t: u64, record: &str, route: Option<&str>) -> Event {
        let body =
            Body::JournalAppended { record: record.into(), operation_id: None, route_digest: route.map(str::to_owned) };
        ev(t, "controller", body)
    }

    #[test]
    fn only_a_deployment_hold_may_be_released() {
        let released = |owner: &str| ev(5, "hub", Body::HubHoldReleased { agent: "n1".into(), owner: owner.into() });
        assert!(run(&mut OnlyIntendedHoldsReleased, &[released("deploy:r")], 10).is_empty());
        for owner in ["operator:maintenance", "quarantine:r", "successor:r"] {
            assert_eq!(run(&mut OnlyIntendedHoldsReleased, &[released(owner)], 10).len(), 1, "{owner}");
        }
    }

    #[test]
    fn a_receipt_or_installer_naming_another_route_is_caught() {
        let installer = |target: &str| {
            let body = Body::WorkerMutated {
                op: "run_installer".into(),
                operation_id: "r/n1/install".into(),
                target: target.into(),
            };
            ev(3, "node-01", body)
        };
        let good = [
            journal(1, "plan_frozen", Some("sha256:routes-1")),
            journal(2, "intents", Some("sha256:routes-1")),
            installer("2944aebb@5 routes sha256:routes-1"),
        ];
        assert!(run(&mut ReceiptsNameFrozenRoute::default(), &good, 10).is_empty());
        let swapped =
            [journal(1, "plan_frozen", Some("sha256:routes-1")), journal(2, "completed", Some("sha256:routes-2"))];
        assert_eq!(run(&mut ReceiptsNameFrozenRoute::default(), &swapped, 10).len(), 1);
        let unnamed = [journal(1, "plan_frozen", Some("sha256:routes-1")), journal(2, "lane_committed", None)];
        assert_eq!(run(&mut ReceiptsNameFrozenRoute::default(), &unnamed, 10).len(), 1);
        let installer_off = [journal(1, "plan_frozen", Some("sha256:routes-1")), installer("2944aebb@5")];
        assert_eq!(run(&mut ReceiptsNameFrozenRoute::default(), &installer_off, 10).len(), 1);
    }

    #[test]
    fn rollout_time_is_judged_against_the_plan_minus_downtime_and_waits() {
        let frozen = |t| {
            rollout(
                t,
                RolloutBody::PlanFrozen { revision: "x".into(), lanes: 2, lane_size: 8, rollout_bound_ms: 1_000 },
            )
        };
        let terminal = |t| rollout(t, RolloutBody::Terminal { outcome: "successor".into() });
        assert!(run(&mut RolloutTimeBounded::default(), &[frozen(0), terminal(1_000)], 2_000).is_empty());
        assert_eq!(run(&mut RolloutTimeBounded::default(), &[frozen(0), terminal(1_001)], 2_000).len(), 1);
        // Ten seconds of controller downtime and a credential outage do not count against the plan.
        let excused = [
            frozen(0),
            ev(100, "controller", Body::HostCrash { lost_unsynced_writes: 0 }),
            ev(10_100, "controller", Body::HostBoot { boot: 2 }),
            ev(10_200, "hub", Body::HubCredentialRejected { principal: "controller".into(), expired: true }),
            rollout(15_200, RolloutBody::Reauthenticated { expires_at_ms: 0 }),
            terminal(15_900),
        ];
        assert!(run(&mut RolloutTimeBounded::default(), &excused, 20_000).is_empty());
    }

    fn hb(t: u64) -> Event {
        ev(t, "hub", Body::HubHeartbeat { agent: "n1".into() })
    }

    fn silent(t: u64) -> Event {
        ev(t, "controller", Body::InstanceSilent { instance: "n1".into(), silent_for_ms: 0 })
    }

    #[test]
    fn a_silence_raised_over_a_fresh_heartbeat_is_unjustified() {
        let mut oracle = SilenceJustified::new(&ctx());
        assert!(run(&mut oracle, &[hb(0), silent(200_000)], 0).is_empty(), "silent for 200 s: justified");
        let mut oracle = SilenceJustified::new(&ctx());
        let found = run(&mut oracle, &[hb(0), hb(100_000), silent(200_000)], 0);
        assert_eq!(found.len(), 1);
        assert!(found[0].evidence.contains("t=100000"), "{found:?}");
        let mut oracle = SilenceJustified::new(&ctx());
        assert!(run(&mut oracle, &[hb(0), hb(195_000), silent(200_000)], 0).is_empty(), "landed after the read");
    }

    #[test]
    fn silence_must_be_detected_within_four_minutes_while_the_observer_is_healthy() {
        let registered = ev(0, "hub", Body::HubRegistered { agent: "n1".into(), durable: false });
        let mut oracle = SilenceDetectedInTime::new(&ctx());
        assert!(run(&mut oracle, &[registered.clone(), hb(10_000), silent(249_000)], 600_000).is_empty());
        let mut oracle = SilenceDetectedInTime::new(&ctx());
        let late = run(&mut oracle, &[registered.clone(), hb(10_000), silent(251_000)], 600_000);
        assert_eq!(late.len(), 1, "{late:?}");
        assert_eq!(late[0].t_ms, 10_000 + 240_000 + 41);
        // While the hub is down the clock does not run; it restarts when the hub boots.
        let mut oracle = SilenceDetectedInTime::new(&ctx());
        let events = [
            registered,
            hb(10_000),
            ev(20_000, "hub", Body::HostCrash { lost_unsynced_writes: 0 }),
            ev(400_000, "hub", Body::HostBoot { boot: 2 }),
            silent(600_000),
        ];
        assert!(run(&mut oracle, &events, 700_000).is_empty());
    }

    #[test]
    fn a_recovery_must_follow_heartbeats_within_a_sensor_period() {
        let registered = ev(0, "hub", Body::HubRegistered { agent: "n1".into(), durable: false });
        let recovered = |t| ev(t, "controller", Body::InstanceRecovered { instance: "n1".into(), silent_for_ms: 0 });
        let mut oracle = SilenceDetectedInTime::new(&ctx());
        let events = [registered.clone(), silent(200_000), hb(300_000), recovered(350_000)];
        assert!(run(&mut oracle, &events, 1_000_000).iter().all(|f| !f.evidence.contains("instance_recovered")));
        let mut oracle = SilenceDetectedInTime::new(&ctx());
        let events = [registered, silent(200_000), hb(300_000), hb(330_000), hb(360_000), hb(390_000)];
        let found = run(&mut oracle, &events, 400_000);
        assert!(found.iter().any(|f| f.evidence.contains("no instance_recovered")), "{found:?}");
    }

    #[test]
    fn tombstoning_an_open_epoch_member_is_a_violation_but_not_after_the_epoch_closes() {
        let opened = ev(0, "hub", Body::HubEpochOpened { epoch: 1, members: vec!["n1".into()] });
        let tomb = |t| ev(t, "hub", Body::HubTombstoned { agent: "n1".into(), silent_ms: 1 });
        let mut oracle = EpochMemberNeverTombstoned::default();
        assert_eq!(run(&mut oracle, &[opened.clone(), tomb(5)], 0).len(), 1);
        let mut oracle = EpochMemberNeverTombstoned::default();
        let closed = ev(3, "hub", Body::HubEpochClosed { epoch: 1 });
        assert!(run(&mut oracle, &[opened, closed, tomb(5)], 0).is_empty());
    }

    #[test]
    fn a_dispatch_to_a_held_or_quiesced_worker_is_a_violation() {
        let held = ev(1, "hub", Body::HubHoldPlaced { agent: "n1".into(), owner: "deploy:r".into() });
        let dispatched = |t| ev(t, "hub", Body::HubDispatched { agent: "n1".into(), task: "canary-1".into() });
        let released = ev(3, "hub", Body::HubHoldReleased { agent: "n1".into(), owner: "deploy:r".into() });
        assert_eq!(run(&mut NoDispatchToHeld::default(), &[held.clone(), dispatched(2)], 0).len(), 1);
        assert!(run(&mut NoDispatchToHeld::default(), &[held, released, dispatched(4)], 0).is_empty());
        let stopped = ev(
            5,
            "n1",
            Body::WorkerMutated {
                op: "stop_service".into(),
                operation_id: "r/n1/quiesce".into(),
                target: "ovswarm-agent".into(),
            },
        );
        let found = run(&mut NoDispatchToHeld::default(), &[stopped, dispatched(6)], 0);
        assert!(found[0].evidence.contains("whose service the rollout stopped"), "{found:?}");
    }

    #[test]
    fn an_incoherent_node_is_never_mutated_but_a_staging_failure_may_have_been() {
        let quarantined = |node: &str, surface: &str| {
            ev(
                9,
                "controller",
                Body::Rollout {
                    rollout: "r".into(),
                    event: RolloutBody::Quarantined { node: node.into(), surfaces: vec![surface.into()] },
                },
            )
        };
        let mutated = |node: &str| {
            ev(
                5,
                node,
                Body::WorkerMutated {
                    op: "stage_artifact".into(),
                    operation_id: format!("rollout-x/{node}/stage"),
                    target: "d".into(),
                },
            )
        };
        let events = [mutated("n1"), quarantined("n1", "~/.mac/mac.env is unsafe: mode 644, not 600")];
        let found = run(&mut NoIncoherentNodeMutated::default(), &events, 10);
        assert_eq!(found.len(), 1, "mutated before its quarantine: {found:?}");
        let events = [mutated("n2"), quarantined("n2", "staging failed: ssh: timed out")];
        assert!(run(&mut NoIncoherentNodeMutated::default(), &events, 10).is_empty());
    }

    #[test]
    fn availability_floor_and_lane_bound_count_holds() {
        let hold = |t, agent: &str| ev(t, "hub", Body::HubHoldPlaced { agent: agent.into(), owner: "deploy:r".into() });
        let events = [hold(1, "a"), hold(2, "b"), hold(3, "c")];
        let floor = run(&mut AvailabilityFloor::new(&ctx()), &events, 0);
        assert_eq!(floor.len(), 1, "4 nodes, floor 2: the third hold leaves 1");
        assert_eq!(floor[0].t_ms, 3);
        let mut bound = LaneBound { lane_size: 2, held: BTreeSet::new(), over: false };
        assert_eq!(run(&mut bound, &events, 0).len(), 1);
    }

    #[test]
    fn a_credential_in_any_trace_line_is_caught() {
        let leak = ev(1, "node-01", Body::AgentHeartbeatFailed { error: format!("bad token {SECRET_MARKER}x") });
        assert_eq!(run(&mut SecretsNeverInTrace, &[hb(0), leak], 0).len(), 1);
    }
}
