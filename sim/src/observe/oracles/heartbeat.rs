//! The oracles of the hub and its agents (seed 001's heartbeats and TTL, seed 004's silence signal): silence
//! justified and detected in time, epoch members never tombstoned, pinned identities present or resurrected under
//! their epoch, the observer's health.

#[expect(
    clippy::disallowed_types,
    reason = "AgentMap: fixed hasher, looked up per heartbeat, never iterated into a finding"
)]
use std::collections::HashMap;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::hash::{BuildHasherDefault, DefaultHasher};
use std::rc::Rc;

use engine::ports::events::TerminalOutcome;
use engine::sensor::{SENSOR_PERIOD_MS, SILENT_THRESHOLD_MS};

use crate::model::faults::{Step, decommission_step, fleet_step, host_step, instance_step, rollout_step, site_step};
use crate::observe::oracles::{Finding, Oracle, OracleContext};
use crate::observe::trace::{Body, Event, RolloutBody};

/// Per agent, what an oracle keeps of its heartbeats: looked up on every heartbeat (most of a trace), so hashed, not
/// ordered — a 5,000-agent run spent a fifth of its time in ordered lookups of these three oracles. The hasher is
/// fixed (no per-process seed) and no finding depends on the map's order: findings come from ordered collections.
#[expect(clippy::disallowed_types, reason = "a fixed hasher, and no finding depends on the order (see above)")]
type AgentMap<V> = HashMap<String, V, BuildHasherDefault<DefaultHasher>>;

/// `agent`'s entry of `map`, made by `new` when it has none: the name is copied only then, not on every heartbeat.
fn slot<'a, V>(map: &'a mut AgentMap<V>, agent: &str, new: impl FnOnce() -> V) -> &'a mut V {
    if !map.contains_key(agent) {
        map.insert(agent.to_owned(), new());
    }
    map.get_mut(agent).expect("inserted above")
}

/// The deadline the runbook sets for silence detection: within 4 minutes of the last heartbeat.
pub const SILENCE_DETECTION_DEADLINE_MS: u64 = 240_000;

/// `silence_signal_is_justified`: when `instance_silent` is raised at `t`, the hub received no heartbeat from that
/// instance in `[t - 3 min, t - call timeout]`. The last call-timeout of the window is excused: a heartbeat that landed
/// after the sensor's read cannot be in the snapshot it acted on, and the engine drops answers older than its timeout.
pub(super) struct SilenceJustified {
    window_end_slack_ms: u64,
    heartbeats: AgentMap<VecDeque<u64>>,
}

impl SilenceJustified {
    pub(super) fn new(ctx: &OracleContext) -> SilenceJustified {
        SilenceJustified { window_end_slack_ms: ctx.call_timeout_ms, heartbeats: AgentMap::default() }
    }
}

impl Oracle for SilenceJustified {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        match &event.body {
            Body::HubHeartbeat { agent, .. } => {
                let seen = slot(&mut self.heartbeats, agent, VecDeque::new);
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

/// The open deployment epochs and their members, as the hub's `hub.epoch_opened` and `hub.epoch_closed` say.
#[derive(Default)]
pub(super) struct OpenEpochs(BTreeMap<u64, BTreeSet<String>>);

impl OpenEpochs {
    /// Follows one event; whether it opened or closed an epoch.
    fn observe(&mut self, body: &Body) -> bool {
        match body {
            Body::HubEpochOpened { epoch, members } => {
                self.0.insert(*epoch, members.iter().cloned().collect());
            }
            Body::HubEpochClosed { epoch } => {
                self.0.remove(epoch);
            }
            _ => return false,
        }
        true
    }
}

impl std::ops::Deref for OpenEpochs {
    type Target = BTreeMap<u64, BTreeSet<String>>;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

/// `epoch_member_never_tombstoned`: membership as the hub recorded it (the epoch's members), and as the workers
/// show it, so an epoch that pins too few is caught too: a worker a running rollout stopped is a member of that
/// rollout's deployment until the rollout restarts it or ends.
#[derive(Default)]
pub(super) struct EpochMemberNeverTombstoned {
    open: OpenEpochs,
    /// Workers a rollout's stop left stopped, by the rollout that stopped them.
    stopped_by: BTreeMap<String, String>,
}

impl Oracle for EpochMemberNeverTombstoned {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        match &event.body {
            body if self.open.observe(body) => {}
            Body::WorkerMutated { op, operation_id, .. } if op == "stop_service" => {
                if let Some((rollout, _)) = operation_id.split_once('/') {
                    self.stopped_by.insert(event.host.to_string(), rollout.to_owned());
                }
            }
            Body::WorkerMutated { op, .. } if op == "start_service" => {
                self.stopped_by.remove(&*event.host);
            }
            Body::Rollout { rollout, event: RolloutBody::Terminal { .. } } => {
                self.stopped_by.retain(|_, stopper| stopper != rollout);
            }
            Body::HubTombstoned { agent, silent_ms } => {
                let member = self.open.iter().find(|(_, members)| members.contains(agent));
                let evidence = match (member, self.stopped_by.get(agent)) {
                    (Some((epoch, _)), _) => format!(
                        "{agent}, a member of open epoch {epoch}, was tombstoned after {silent_ms} ms of silence"
                    ),
                    (None, Some(rollout)) => format!(
                        "{agent}, stopped by {rollout} and not restarted, was tombstoned after {silent_ms} ms of \
                         silence (the epoch does not pin it)"
                    ),
                    (None, None) => return,
                };
                out.push(Finding { t_ms: event.t_ms, evidence });
            }
            _ => {}
        }
    }
}

/// `pinned_identity_present`: the RCCA's exit criterion "Every journal-pinned agent identity is present or is restored
/// through an explicit journal-bound resurrection path; no required row remains tombstoned". The epochs a rollout
/// pinned are those the hub opened while it ran (between its plan or adoption and its end; adoption keeps the epochs of
/// the rollout it adopts, by name). A required row is a member the rollout began a step on: a member it never touched
/// keeps its prior generation whatever the registry did to it (RCCA "Make abort monotonic for untouched
/// participants"). When the rollout ends successor or partial, no required row may be tombstoned.
#[derive(Default)]
pub(super) struct PinnedIdentityPresent {
    /// The rollout running now, by name.
    running: Option<String>,
    /// Every epoch a rollout pinned, with its members.
    pinned: BTreeMap<String, Vec<(u64, BTreeSet<String>)>>,
    /// The nodes each rollout began a step on.
    touched: BTreeMap<String, BTreeSet<String>>,
    tombstoned: BTreeSet<String>,
}

impl Oracle for PinnedIdentityPresent {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        match &event.body {
            Body::HubTombstoned { agent, .. } | Body::HubPrincipalRevoked { agent } => {
                self.tombstoned.insert(agent.clone());
            }
            Body::HubRegistered { agent, .. } | Body::HubResurrected { agent, .. } => {
                self.tombstoned.remove(agent);
            }
            Body::HubEpochOpened { epoch, members } => {
                if let Some(rollout) = &self.running {
                    let members = members.iter().cloned().collect();
                    self.pinned.entry(rollout.clone()).or_default().push((*epoch, members));
                }
            }
            Body::Rollout { rollout, event: RolloutBody::PlanFrozen { .. } | RolloutBody::Adopted { .. } } => {
                self.running = Some(rollout.clone());
            }
            Body::Rollout { rollout, event: RolloutBody::StepStarted { node, .. } }
                if !self.touched.get(rollout).is_some_and(|touched| touched.contains(node)) =>
            {
                self.touched.entry(rollout.clone()).or_default().insert(node.clone());
            }
            Body::Rollout { rollout, event: RolloutBody::Terminal { outcome } } => {
                self.running = None;
                let ended = match outcome {
                    TerminalOutcome::Successor => "successor",
                    TerminalOutcome::Partial => "partial",
                    // A failed rollout leaves its journal for the next controller, whose adoption may still restore.
                    TerminalOutcome::Failed(_) => return,
                };
                let touched = self.touched.get(rollout);
                let required = |member: &&String| {
                    self.tombstoned.contains(*member) && touched.is_some_and(|touched| touched.contains(*member))
                };
                for (epoch, members) in self.pinned.get(rollout).into_iter().flatten() {
                    for member in members.iter().filter(required) {
                        out.push(Finding {
                            t_ms: event.t_ms,
                            evidence: format!(
                                "{member}, pinned by epoch {epoch} of {rollout}, is still tombstoned when the rollout \
                                 ended {ended}"
                            ),
                        });
                    }
                }
            }
            _ => {}
        }
    }
}

/// `resurrection_journal_bound`: a `hub.resurrected` must restore a row the trace shows tombstoned, of an identity the
/// epoch it names lists, while that epoch is open (the fake hub's side of the path, judged independently of it).
#[derive(Default)]
pub(super) struct ResurrectionJournalBound {
    open: OpenEpochs,
    tombstoned: BTreeSet<String>,
    /// Agents whose principal was revoked: their row is tombstoned with no credential left to restore.
    revoked: BTreeSet<String>,
}

impl Oracle for ResurrectionJournalBound {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        match &event.body {
            body if self.open.observe(body) => {}
            Body::HubTombstoned { agent, .. } => {
                self.tombstoned.insert(agent.clone());
            }
            Body::HubPrincipalRevoked { agent } => {
                self.revoked.insert(agent.clone());
            }
            Body::HubRegistered { agent, .. } => {
                self.tombstoned.remove(agent);
                self.revoked.remove(agent);
            }
            Body::HubResurrected { agent, epoch } => {
                let defect = if self.revoked.contains(agent) {
                    Some("a principal that was revoked")
                } else if !self.tombstoned.remove(agent) {
                    Some("a row that was not tombstoned")
                } else if !self.open.contains_key(epoch) {
                    Some("an epoch that is not open")
                } else if !self.open[epoch].contains(agent) {
                    Some("an epoch that does not list it")
                } else {
                    None
                };
                if let Some(defect) = defect {
                    out.push(Finding {
                        t_ms: event.t_ms,
                        evidence: format!("{agent} was resurrected under epoch {epoch}: {defect}"),
                    });
                }
            }
            _ => {}
        }
    }
}

/// Tracks whether the observer — the controller, the hub and the link between them — is healthy, from the trace's
/// host and step events. Detection deadlines run only while it is, and restart when it heals.
pub(super) struct ObserverHealth {
    controller: String,
    hub: String,
    down_hosts: BTreeSet<String>,
    /// Faults on the controller–hub link, by kind and direction.
    link_faults: BTreeSet<(&'static str, bool)>,
    healthy_since_ms: Option<u64>,
}

impl ObserverHealth {
    pub(super) fn new(ctx: &OracleContext) -> ObserverHealth {
        ObserverHealth {
            controller: ctx.controller.clone(),
            hub: ctx.hub.clone(),
            down_hosts: BTreeSet::new(),
            link_faults: BTreeSet::new(),
            healthy_since_ms: Some(0),
        }
    }

    /// Direction of `a → b` on the observer link: `Some(true)` controller→hub, `Some(false)` hub→controller.
    pub(super) fn direction(&self, a: &str, b: &str) -> Option<bool> {
        if a == self.controller && b == self.hub {
            Some(true)
        } else if a == self.hub && b == self.controller {
            Some(false)
        } else {
            None
        }
    }

    /// Updates from one event; returns true when health changed.
    pub(super) fn observe(&mut self, event: &Event) -> bool {
        let was_healthy = self.healthy_since_ms.is_some();
        let host = &*event.host;
        match &event.body {
            Body::HostCrash { .. } if host == self.controller || host == self.hub => {
                self.down_hosts.insert(host.to_owned());
            }
            Body::HostBoot { .. } => {
                self.down_hosts.remove(host);
            }
            Body::Step { step, .. } => self.observe_step(step),
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

    pub(super) fn observe_step(&mut self, step: &Step) {
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
            // Latency slows reads down but loses none.
            Step::LinkLatency { .. } => {}
            host_step!() | fleet_step!() | rollout_step!() | site_step!() | decommission_step!() | instance_step!() => {
            }
        }
    }
}

/// `silence_detected_in_time`: every silence is reported by `max(last heartbeat, observer healthy since) + 4 min +
/// slack`, and every recovery by `max(first heartbeat back, observer healthy since) + 1 sensor period + slack`, where
/// slack covers one read round trip at the run's worst link latency.
pub(super) struct SilenceDetectedInTime {
    health: ObserverHealth,
    slack_ms: u64,
    agents: AgentMap<AgentWatch>,
    /// `(deadline, agent, what)` ordered by deadline. The agent is its watch's shared name: a heartbeat reschedules
    /// without allocating.
    due: BTreeSet<(u64, Rc<str>, Due)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Due {
    Silence,
    Recovery,
}

pub(super) struct AgentWatch {
    /// The agent's name, shared with its entries in `due`.
    name: Rc<str>,
    last_heartbeat_ms: u64,
    /// The engine reported the instance silent and has not reported it recovered.
    reported_silent: bool,
    /// The current silence (since the last heartbeat) has been reported.
    silence_reported: bool,
    heard_back_ms: Option<u64>,
    /// The watch's deadlines now, exact.
    deadlines: Vec<(u64, Due)>,
    /// The watch's entries in `due`, at most one per kind, each at or before that kind's deadline (or stale, its
    /// deadline gone): a heartbeat moves the silence deadline later without touching `due`; an entry that comes due
    /// before its deadline is put back at the deadline (`judge_until`).
    queued: Vec<(u64, Due)>,
}

impl AgentWatch {
    fn named(agent: &str) -> AgentWatch {
        AgentWatch {
            name: Rc::from(agent),
            last_heartbeat_ms: 0,
            reported_silent: false,
            silence_reported: false,
            heard_back_ms: None,
            deadlines: Vec::new(),
            queued: Vec::new(),
        }
    }
}

impl SilenceDetectedInTime {
    pub(super) fn new(ctx: &OracleContext) -> SilenceDetectedInTime {
        SilenceDetectedInTime {
            health: ObserverHealth::new(ctx),
            slack_ms: 2 * ctx.latency_max_ms + 1,
            agents: AgentMap::default(),
            due: BTreeSet::new(),
        }
    }

    /// The watch of `agent`, a fresh one when it has none (allocating only then).
    fn watch(&mut self, agent: &str) -> &mut AgentWatch {
        slot(&mut self.agents, agent, || AgentWatch::named(agent))
    }

    pub(super) fn reschedule(&mut self, agent: &str) {
        let Some(watch) = self.agents.get_mut(agent) else { return };
        reschedule(watch, &mut self.due, self.health.healthy_since_ms, self.slack_ms);
    }

    pub(super) fn judge_until(&mut self, now_ms: u64, out: &mut Vec<Finding>) {
        while let Some(first) = self.due.first().cloned() {
            if first.0 >= now_ms {
                break;
            }
            self.due.remove(&first);
            let (deadline, agent, due) = first;
            let Some(watch) = self.agents.get_mut(&*agent) else { continue };
            watch.queued.retain(|entry| *entry != (deadline, due));
            match watch.deadlines.iter().find(|(_, kind)| *kind == due) {
                // The deadline moved on since this entry was queued: queued again at it (unless an entry at or
                // before it stands, a registration's), judged in its turn.
                Some(&(actual, _)) if actual > deadline => {
                    if !watch.queued.iter().any(|&(queued, kind)| kind == due && queued <= actual) {
                        self.due.insert((actual, agent, due));
                        watch.queued.push((actual, due));
                    }
                    continue;
                }
                Some(&(actual, _)) if actual == deadline => {}
                // No such deadline any more (or never an earlier one: entries are queued at or before theirs).
                _ => continue,
            }
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

/// Sets `watch`'s deadlines afresh from what it knows now, and queues in `due` a deadline the watch has no entry at or
/// before. Deadlines only move later while they stand (a later heartbeat, a later healthy-since), so a heartbeat —
/// most of a trace — touches `due` only when its agent's silence deadline had none queued.
fn reschedule(
    watch: &mut AgentWatch,
    due: &mut BTreeSet<(u64, Rc<str>, Due)>,
    healthy_since_ms: Option<u64>,
    slack_ms: u64,
) {
    watch.deadlines.clear();
    if let Some(healthy_since) = healthy_since_ms {
        if !watch.silence_reported {
            let deadline = watch.last_heartbeat_ms.max(healthy_since) + SILENCE_DETECTION_DEADLINE_MS + slack_ms;
            watch.deadlines.push((deadline, Due::Silence));
        }
        if let (true, Some(back)) = (watch.reported_silent, watch.heard_back_ms) {
            let deadline = back.max(healthy_since) + SENSOR_PERIOD_MS + slack_ms;
            watch.deadlines.push((deadline, Due::Recovery));
        }
    }
    for &(deadline, kind) in &watch.deadlines {
        match watch.queued.iter().position(|(_, queued)| *queued == kind) {
            Some(at) if watch.queued[at].0 <= deadline => {}
            Some(at) => {
                // Earlier than its queued entry: requeued at it.
                let (queued, _) = watch.queued.swap_remove(at);
                due.remove(&(queued, watch.name.clone(), kind));
                due.insert((deadline, watch.name.clone(), kind));
                watch.queued.push((deadline, kind));
            }
            None => {
                due.insert((deadline, watch.name.clone(), kind));
                watch.queued.push((deadline, kind));
            }
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
        let agent: &str = match &event.body {
            // A resurrected row is seen by the hub as of its restoration, like a registration.
            Body::HubRegistered { agent, .. } | Body::HubResurrected { agent, .. } => {
                let watch = AgentWatch { last_heartbeat_ms: event.t_ms, ..AgentWatch::named(agent) };
                self.agents.insert(agent.clone(), watch);
                agent
            }
            Body::HubHeartbeat { agent, .. } => {
                // The steady event: one watch lookup, rescheduled in place.
                let (healthy_since_ms, slack_ms) = (self.health.healthy_since_ms, self.slack_ms);
                let watch = slot(&mut self.agents, agent, || AgentWatch::named(agent));
                watch.last_heartbeat_ms = event.t_ms;
                watch.silence_reported = false;
                if watch.reported_silent && watch.heard_back_ms.is_none() {
                    watch.heard_back_ms = Some(event.t_ms);
                }
                reschedule(watch, &mut self.due, healthy_since_ms, slack_ms);
                return;
            }
            Body::InstanceSilent { instance, .. } => {
                let watch = self.watch(instance);
                watch.reported_silent = true;
                watch.silence_reported = true;
                watch.heard_back_ms = None;
                instance
            }
            Body::InstanceRecovered { instance, .. } => {
                let watch = self.watch(instance);
                watch.reported_silent = false;
                watch.heard_back_ms = None;
                instance
            }
            _ => return,
        };
        self.reschedule(agent);
    }

    fn on_finish(&mut self, end_ms: u64, out: &mut Vec<Finding>) {
        self.judge_until(end_ms, out);
    }
}

/// `epoch_member_survived_ttl`: the RCCA's exit criterion, reached when an open-epoch member has been silent longer
/// than the TTL plus one sweep and is still not tombstoned.
pub(super) struct EpochMemberSurvivedTtl {
    ttl_ms: u64,
    sweep_interval_ms: u64,
    open: OpenEpochs,
    last_heartbeat_ms: AgentMap<u64>,
    tombstoned: BTreeSet<String>,
    reached: bool,
    checked_minute: u64,
}

impl EpochMemberSurvivedTtl {
    pub(super) fn new(ctx: &OracleContext) -> EpochMemberSurvivedTtl {
        EpochMemberSurvivedTtl {
            ttl_ms: ctx.agent_ttl_ms,
            sweep_interval_ms: ctx.sweep_interval_ms,
            open: OpenEpochs::default(),
            last_heartbeat_ms: AgentMap::default(),
            tombstoned: BTreeSet::new(),
            reached: false,
            checked_minute: 0,
        }
    }
}

impl Oracle for EpochMemberSurvivedTtl {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        match &event.body {
            Body::HubRegistered { agent, .. } | Body::HubHeartbeat { agent, .. } => {
                *slot(&mut self.last_heartbeat_ms, agent, || event.t_ms) = event.t_ms;
            }
            Body::HubTombstoned { agent, .. } => {
                self.tombstoned.insert(agent.clone());
            }
            Body::HubResurrected { agent, .. } => {
                self.tombstoned.remove(agent);
                self.last_heartbeat_ms.insert(agent.clone(), event.t_ms);
            }
            body if self.open.observe(body) => {}
            _ => {}
        }
        let minute = event.t_ms / 60_000;
        if self.reached || minute == self.checked_minute || self.open.is_empty() {
            return;
        }
        self.checked_minute = minute;
        for (epoch, members) in self.open.iter() {
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
