//! The run's trace: structured events (virtual ms, host, kind, fields in a fixed order), the SHA-256 digest over their
//! JSON lines, and the fan-out of every event to the oracles.
//!
//! The trace is part of the determinism contract: an event's JSON never holds a wall-clock value, a hash-ordered
//! collection or a secret. It is separate from the `tracing` logs, which are for people and are not digested.

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use serde::Serialize;
use sha2::{Digest, Sha256};

use fakes::maas::{BootTarget, DnsAnswer, NodeStatus, PowerState, Stall};

use crate::faults::Step;
use crate::oracles::OracleSet;

/// One trace event. Serialised as `{"t_ms":..,"host":..,"kind":..,<fields>}`.
#[derive(Debug, Clone, Serialize)]
pub struct Event {
    pub t_ms: u64,
    pub host: Rc<str>,
    #[serde(flatten)]
    pub body: Body,
}

/// What happened. Host-level and network events come from the simulator, `hub.*` from the fake hub, `agent.*` from
/// node agents, `engine.*` from the engine's signal port.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind")]
pub enum Body {
    #[serde(rename = "run.start")]
    RunStart { seed: u64, nodes: u64, config_hash: String },
    /// A step of the fault plan was applied.
    #[serde(rename = "step")]
    Step { step: Step },
    #[serde(rename = "host.crash")]
    HostCrash { lost_unsynced_writes: u64 },
    #[serde(rename = "host.boot")]
    HostBoot { boot: u64 },
    #[serde(rename = "hub.registered")]
    HubRegistered { agent: String, durable: bool },
    #[serde(rename = "hub.heartbeat")]
    HubHeartbeat { agent: String },
    #[serde(rename = "hub.heartbeat_refused")]
    HubHeartbeatRefused { agent: String },
    #[serde(rename = "hub.back_online")]
    HubBackOnline { agent: String },
    #[serde(rename = "hub.offline")]
    HubOffline { agent: String, silent_ms: u64 },
    #[serde(rename = "hub.tombstoned")]
    HubTombstoned { agent: String, silent_ms: u64 },
    #[serde(rename = "hub.epoch_opened")]
    HubEpochOpened { epoch: u64, members: Vec<String> },
    #[serde(rename = "hub.epoch_closed")]
    HubEpochClosed { epoch: u64 },
    #[serde(rename = "hub.hold_placed")]
    HubHoldPlaced { agent: String, owner: String },
    #[serde(rename = "hub.hold_released")]
    HubHoldReleased { agent: String, owner: String },
    #[serde(rename = "hub.dispatched")]
    HubDispatched { agent: String, task: String },
    #[serde(rename = "hub.dispatch_refused")]
    HubDispatchRefused { agent: String, task: String },
    #[serde(rename = "agent.heartbeat_failed")]
    AgentHeartbeatFailed { error: String },
    #[serde(rename = "engine.instance_silent")]
    InstanceSilent { instance: String, silent_for_ms: u64 },
    #[serde(rename = "engine.instance_recovered")]
    InstanceRecovered { instance: String, silent_for_ms: u64 },
    #[serde(rename = "engine.hub_read_failed")]
    HubReadFailed { error: String },
    #[serde(rename = "engine.rollout")]
    Rollout { rollout: String, event: RolloutBody },
    #[serde(rename = "engine.onboarding")]
    Onboarding { workflow: String, event: OnboardingBody },
    #[serde(rename = "engine.decommission")]
    Decommission { workflow: String, event: OnboardingBody },
    /// An operator recovery action's audit record (seed 000, section 8), as the controller journaled it: once when
    /// requested (`actual_next_state` null), once settled. Its texts are free text, never a secret.
    #[serde(rename = "engine.audit")]
    Audit { record: engine::recovery::AuditRecord },
    /// A worker's agent service started or stopped (by the rollout, a fault or an operator).
    #[serde(rename = "worker.service")]
    WorkerService { running: bool },
    #[serde(rename = "worker.mutated")]
    WorkerMutated { op: String, operation_id: String, target: String },
    #[serde(rename = "worker.refused")]
    WorkerRefused { op: String, operation_id: Option<String>, error: String },
    /// An operation met non-returning storage: no effect, no answer.
    #[serde(rename = "worker.hung")]
    WorkerHung { op: String, operation_id: String },
    /// A rollout record reached the controller's journal (its kind, operation id and route digest, never its content).
    #[serde(rename = "controller.journal")]
    JournalAppended { record: String, operation_id: Option<String>, route_digest: Option<String> },
    #[serde(rename = "hub.credential_rejected")]
    HubCredentialRejected { principal: String, expired: bool },
    #[serde(rename = "hub.lock_acquired")]
    HubLockAcquired { holder: String, fence: u64, superseded: Option<String> },
    #[serde(rename = "hub.lock_released")]
    HubLockReleased { holder: String, fence: u64 },
    /// A mutation without the deployment lock's current fence was refused.
    #[serde(rename = "hub.mutation_fenced")]
    HubMutationFenced { holder: String, presented: Option<u64>, current: u64 },
    #[serde(rename = "hub.principal_revoked")]
    HubPrincipalRevoked { agent: String },
    /// An event MAAS logged for a machine.
    #[serde(rename = "site.maas_event")]
    SiteMaasEvent { id: u64, system_id: String, level: String, event_type: String, description: String },
    /// A machine row was written: created (`from` null) or changed status.
    #[serde(rename = "site.status")]
    SiteStatus { system_id: String, from: Option<NodeStatus>, to: NodeStatus },
    /// MAAS enlisted a machine that booted with MACs it did not know.
    #[serde(rename = "site.enlisted")]
    SiteEnlisted { machine: String, system_id: String },
    #[serde(rename = "site.power")]
    SitePower { machine: String, state: PowerState, boot: Option<BootTarget> },
    /// A pending MAC drift applied at power-on: `[old, new]` per NIC.
    #[serde(rename = "site.macs_drifted")]
    SiteMacsDrifted { machine: String, macs: Vec<(String, String)> },
    #[serde(rename = "site.dhcp")]
    SiteDhcp { machine: String, mac: String, ip: Option<String>, mtu_option: Option<u16> },
    #[serde(rename = "site.pxe")]
    SitePxe { machine: String, mac: String, system_id: Option<String> },
    /// A query the rack resolver did not answer with an address (SERVFAIL or NXDOMAIN); answered ones are not traced.
    #[serde(rename = "site.dns_query")]
    SiteDnsQuery { client: String, name: String, answer: DnsAnswer },
    /// A powered-on machine stopped making progress.
    #[serde(rename = "site.stalled")]
    SiteStalled { machine: String, stall: Stall },
    /// A deployed machine's node agent enrolled at the hub (its bootstrap token redeemed; never the token).
    #[serde(rename = "site.agent_enrol")]
    SiteAgentEnrol { machine: String, system_id: String },
    /// A node agent's enrolment was refused (bad, spent or expired bootstrap token, or a token of another node).
    #[serde(rename = "site.agent_enrol_refused")]
    SiteAgentEnrolRefused { machine: String, error: String },
    #[serde(rename = "site.hardware_sync")]
    SiteHardwareSync { machine: String, system_id: String },
    /// One MAAS API request of an onboarding workflow, when its answer (or its failure) reached the controller.
    /// `status` is the HTTP status, null when no answer came.
    #[serde(rename = "site.request")]
    SiteRequest { workflow: String, op: String, system_id: Option<String>, status: Option<u16> },
    /// An SSH command of the controller on a site machine (the hardware-sync seed), when its outcome is known.
    #[serde(rename = "site.ssh")]
    SiteSsh { machine: String, op: String, error: Option<String> },
    /// A request of the controller to the GPUaaS inventory, when its outcome is known (`error` when it failed).
    #[serde(rename = "inventory.request")]
    InventoryRequest { node: String, op: String, error: Option<String> },
    /// A node task dispatched (whether or not the agent took it).
    #[serde(rename = "inventory.task")]
    NodeTask { node: String, task: String, operation_id: String },
}

/// A rollout signal of the engine, as the trace records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum RolloutBody {
    PlanFrozen { revision: String, lanes: u64, lane_size: u64, rollout_bound_ms: u64 },
    PlanRefused { reason: String },
    Quarantined { node: String, surfaces: Vec<String> },
    Repaired { node: String, repair: String },
    Adopted { revision: String, in_doubt: u64 },
    StepStarted { node: String, step: String, lane: u64 },
    StepDone { node: String, step: String, lane: u64 },
    Retrying { node: String, step: String, attempt: u64, delay_ms: u64, error: String },
    NodeFailed { node: String, step: String, error: String, endpoint: String, replay: String },
    LaneCommitted { lane: u64, verdict: String, nodes: Vec<String> },
    RouteChanged { frozen: String, published: String },
    LockWaiting { holder: String, remaining_ms: u64 },
    LockTaken { fence: u64, superseded: bool },
    Reauthenticated { expires_at_ms: u64 },
    SkippedHeld { node: String, owners: Vec<String> },
    Terminal { outcome: String },
}

impl From<engine::ports::RolloutEvent> for RolloutBody {
    fn from(event: engine::ports::RolloutEvent) -> Self {
        use engine::ports::RolloutEvent as E;
        match event {
            E::PlanFrozen { revision, lanes, lane_size, rollout_bound_ms } => {
                RolloutBody::PlanFrozen { revision, lanes, lane_size, rollout_bound_ms }
            }
            E::PlanRefused { reason } => RolloutBody::PlanRefused { reason },
            E::Quarantined { node, surfaces } => RolloutBody::Quarantined { node, surfaces },
            E::Repaired { node, repair } => RolloutBody::Repaired { node, repair },
            E::Adopted { revision, in_doubt } => RolloutBody::Adopted { revision, in_doubt },
            E::StepStarted { node, step, lane } => RolloutBody::StepStarted { node, step, lane },
            E::StepDone { node, step, lane } => RolloutBody::StepDone { node, step, lane },
            E::Retrying { node, step, attempt, delay_ms, error } => {
                RolloutBody::Retrying { node, step, attempt, delay_ms, error }
            }
            E::NodeFailed { node, step, error, endpoint, replay } => {
                RolloutBody::NodeFailed { node, step, error, endpoint, replay }
            }
            E::LaneCommitted { lane, verdict, nodes } => RolloutBody::LaneCommitted { lane, verdict, nodes },
            E::RouteChanged { frozen, published } => RolloutBody::RouteChanged { frozen, published },
            E::LockWaiting { holder, remaining_ms } => RolloutBody::LockWaiting { holder, remaining_ms },
            E::LockTaken { fence, superseded } => RolloutBody::LockTaken { fence, superseded },
            E::Reauthenticated { expires_at_ms } => RolloutBody::Reauthenticated { expires_at_ms },
            E::SkippedHeld { node, owners } => RolloutBody::SkippedHeld { node, owners },
            E::Terminal { outcome } => RolloutBody::Terminal { outcome },
        }
    }
}

/// How a decommission `stage/failure_class` pair is named among the matrix pairs (the two workflows share the stage
/// name `load_site_config`).
pub const DECOMMISSION_PAIR_PREFIX: &str = "decommission:";

/// An onboarding or decommission signal of the engine, as the trace records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum OnboardingBody {
    StageStarted { stage: String, attempt: u64 },
    StageDone { stage: String, adopted: bool },
    Observed { what: String, value: String },
    Stalled { stage: String, class: String, evidence: Vec<String> },
    StageFailed { stage: String, class: String, error: String },
    Retrying { stage: String, attempt: u64, delay_ms: u64 },
    Stopped { stage: String, class: String, workflow_state: String, node_state: String, evidence: Vec<String> },
    Completed { system_id: String },
}

impl From<engine::ports::WorkflowEvent> for OnboardingBody {
    fn from(event: engine::ports::WorkflowEvent) -> Self {
        use engine::ports::WorkflowEvent as E;
        match event {
            E::StageStarted { stage, attempt } => OnboardingBody::StageStarted { stage, attempt },
            E::StageDone { stage, adopted } => OnboardingBody::StageDone { stage, adopted },
            E::Observed { what, value } => OnboardingBody::Observed { what, value },
            E::Stalled { stage, class, evidence } => OnboardingBody::Stalled { stage, class, evidence },
            E::StageFailed { stage, class, error } => OnboardingBody::StageFailed { stage, class, error },
            E::Retrying { stage, attempt, delay_ms } => OnboardingBody::Retrying { stage, attempt, delay_ms },
            E::Stopped { stage, class, workflow_state, node_state, evidence } => {
                OnboardingBody::Stopped { stage, class, workflow_state, node_state, evidence }
            }
            E::Completed { system_id } => OnboardingBody::Completed { system_id },
        }
    }
}

/// Records events, digests them, feeds the oracles, and keeps the JSON lines when asked to.
pub struct Trace {
    hasher: Sha256,
    events: u64,
    lines: Option<Vec<String>>,
    pub oracles: OracleSet,
    /// Recovery-matrix pairs the onboarding workflows hit: `stage/failure_class` → stage failures classified so.
    pub matrix_pairs: std::collections::BTreeMap<String, u64>,
    /// The series the report's plots draw, gathered from the same events.
    pub collectors: Collectors,
}

impl Trace {
    pub fn new(oracles: OracleSet, keep_lines: bool) -> Trace {
        Trace {
            hasher: Sha256::new(),
            events: 0,
            lines: keep_lines.then(Vec::new),
            oracles,
            matrix_pairs: Default::default(),
            collectors: Collectors::default(),
        }
    }

    pub fn record(&mut self, event: Event) {
        let line = serde_json::to_string(&event).expect("trace events serialise");
        self.hasher.update(line.as_bytes());
        self.hasher.update(b"\n");
        self.events += 1;
        self.oracles.on_event(&event, &line);
        match &event.body {
            Body::Onboarding { event: OnboardingBody::StageFailed { stage, class, .. }, .. } => {
                *self.matrix_pairs.entry(format!("{stage}/{class}")).or_default() += 1;
            }
            Body::Decommission { event: OnboardingBody::StageFailed { stage, class, .. }, .. } => {
                *self.matrix_pairs.entry(format!("{DECOMMISSION_PAIR_PREFIX}{stage}/{class}")).or_default() += 1;
            }
            _ => {}
        }
        self.collectors.on_event(&event);
        if let Some(lines) = &mut self.lines {
            lines.push(line);
        }
    }

    pub fn events(&self) -> u64 {
        self.events
    }

    /// The digest so far, as lowercase hex.
    pub fn digest(&self) -> String {
        hex(&self.hasher.clone().finalize())
    }

    pub fn take_lines(&mut self) -> Vec<String> {
        self.lines.take().unwrap_or_default()
    }
}

/// The per-run series the report's plots draw (`reports::RunRecord`'s `availability`, `lanes`, `workflows` and
/// `fault_phases`), gathered from the events as they are recorded. Collectors only read events: they add none, so
/// the trace and its digest are the same with them as without.
#[derive(Debug, Default)]
pub struct Collectors {
    /// What `availability_floor` counts (set up at `run.start`).
    counted: crate::oracles::Availability,
    pub availability: Vec<reports::AvailabilityPoint>,
    pub availability_cut_ms: Option<u64>,
    pub lanes: Vec<reports::LaneSpan>,
    /// `(rollout, lane)` → its index in `lanes`, and the nodes seen starting steps in it.
    lane_index: BTreeMap<(String, u64), (usize, BTreeSet<String>)>,
    pub workflows: Vec<reports::WorkflowSpan>,
    workflow_index: BTreeMap<String, usize>,
    /// Rollouts started and not yet terminal (or refused).
    rollouts_active: u64,
    /// Onboarding workflows started and not yet completed or stopped.
    workflows_in_flight: BTreeSet<String>,
    /// Every step applied, with the lifecycle phase it was applied in (one of `reports::PHASES`); the runner keeps
    /// the faults among them.
    pub step_phases: Vec<(Step, &'static str)>,
}

impl Collectors {
    fn on_event(&mut self, event: &Event) {
        let t_ms = event.t_ms;
        match &event.body {
            Body::RunStart { nodes, .. } => {
                self.counted = crate::oracles::Availability::new(*nodes as usize);
                self.availability.clear();
                self.availability.push(reports::AvailabilityPoint { t_ms, available: *nodes });
                return;
            }
            Body::Step { step } => {
                let phase = match (self.rollouts_active > 0, !self.workflows_in_flight.is_empty()) {
                    (true, false) => reports::PHASES[0],
                    (false, true) => reports::PHASES[1],
                    (true, true) => reports::PHASES[2],
                    (false, false) => reports::PHASES[3],
                };
                self.step_phases.push((step.clone(), phase));
                if matches!(step, Step::StartRollout { .. }) {
                    self.rollouts_active += 1;
                }
                return;
            }
            Body::Rollout { rollout, event } => {
                self.on_rollout(t_ms, rollout, event);
                return;
            }
            Body::Onboarding { workflow, event } => {
                self.on_onboarding(t_ms, workflow, event);
                return;
            }
            _ if self.counted.observe(event) => {}
            _ => return,
        }
        let available = self.counted.healthy() as u64;
        if self.availability.last().is_some_and(|point| point.available == available)
            || self.availability_cut_ms.is_some()
        {
            return;
        }
        if self.availability.len() >= reports::AVAILABILITY_POINTS_MAX {
            self.availability_cut_ms = Some(t_ms);
        } else {
            self.availability.push(reports::AvailabilityPoint { t_ms, available });
        }
    }

    fn on_rollout(&mut self, t_ms: u64, rollout: &str, event: &RolloutBody) {
        match event {
            RolloutBody::StepStarted { node, lane, .. } | RolloutBody::StepDone { node, lane, .. } => {
                let started = matches!(event, RolloutBody::StepStarted { .. });
                if let Some((index, nodes)) = self.lane(t_ms, rollout, *lane) {
                    if started {
                        nodes.insert(node.clone());
                    }
                    let count = nodes.len() as u64;
                    let span = &mut self.lanes[index];
                    span.end_ms = t_ms;
                    if span.verdict.is_none() {
                        span.nodes = count;
                    }
                }
            }
            RolloutBody::LaneCommitted { lane, verdict, nodes } => {
                if let Some((index, _)) = self.lane(t_ms, rollout, *lane) {
                    let span = &mut self.lanes[index];
                    span.end_ms = t_ms;
                    span.verdict = Some(verdict.clone());
                    span.nodes = nodes.len() as u64;
                }
            }
            RolloutBody::Terminal { .. } | RolloutBody::PlanRefused { .. } => {
                self.rollouts_active = self.rollouts_active.saturating_sub(1);
            }
            RolloutBody::PlanFrozen { .. }
            | RolloutBody::Quarantined { .. }
            | RolloutBody::Repaired { .. }
            | RolloutBody::Adopted { .. }
            | RolloutBody::Retrying { .. }
            | RolloutBody::NodeFailed { .. }
            | RolloutBody::RouteChanged { .. }
            | RolloutBody::LockWaiting { .. }
            | RolloutBody::LockTaken { .. }
            | RolloutBody::Reauthenticated { .. }
            | RolloutBody::SkippedHeld { .. } => {}
        }
    }

    /// The lane's index in `lanes` and its nodes, created at `t_ms` when new; `None` once [`reports::SPANS_MAX`]
    /// lanes are kept.
    fn lane(&mut self, t_ms: u64, rollout: &str, lane: u64) -> Option<(usize, &mut BTreeSet<String>)> {
        let key = (rollout.to_owned(), lane);
        if !self.lane_index.contains_key(&key) {
            if self.lanes.len() >= reports::SPANS_MAX {
                return None;
            }
            self.lanes.push(reports::LaneSpan {
                rollout: rollout.to_owned(),
                lane,
                nodes: 0,
                start_ms: t_ms,
                end_ms: t_ms,
                verdict: None,
            });
            self.lane_index.insert(key.clone(), (self.lanes.len() - 1, BTreeSet::new()));
        }
        self.lane_index.get_mut(&key).map(|(index, nodes)| (*index, nodes))
    }

    fn on_onboarding(&mut self, t_ms: u64, workflow: &str, event: &OnboardingBody) {
        let ended = match event {
            OnboardingBody::StageStarted { .. } => {
                self.workflows_in_flight.insert(workflow.to_owned());
                match self.workflow_index.get(workflow) {
                    Some(index) => {
                        let span = &mut self.workflows[*index];
                        if span.end_ms.is_some() {
                            span.end_ms = None;
                            span.outcome = "in flight".to_owned();
                        }
                    }
                    None if self.workflows.len() < reports::SPANS_MAX => {
                        self.workflow_index.insert(workflow.to_owned(), self.workflows.len());
                        self.workflows.push(reports::WorkflowSpan {
                            workflow: workflow.to_owned(),
                            start_ms: t_ms,
                            end_ms: None,
                            outcome: "in flight".to_owned(),
                        });
                    }
                    None => {}
                }
                return;
            }
            OnboardingBody::Completed { .. } => "completed".to_owned(),
            OnboardingBody::Stopped { class, .. } => format!("stopped: {class}"),
            OnboardingBody::StageDone { .. }
            | OnboardingBody::Observed { .. }
            | OnboardingBody::Stalled { .. }
            | OnboardingBody::StageFailed { .. }
            | OnboardingBody::Retrying { .. } => return,
        };
        self.workflows_in_flight.remove(workflow);
        if let Some(index) = self.workflow_index.get(workflow) {
            let span = &mut self.workflows[*index];
            span.end_ms = Some(t_ms);
            span.outcome = ended;
        }
    }
}

pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::with_capacity(bytes.len() * 2), |mut out, byte| {
        let _ = write!(out, "{byte:02x}");
        out
    })
}

/// SHA-256 of `bytes` as lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_serialise_with_time_host_and_kind_first() {
        let event = Event { t_ms: 5, host: Rc::from("hub"), body: Body::HubHeartbeat { agent: "node-01".into() } };
        assert_eq!(
            serde_json::to_string(&event).unwrap(),
            r#"{"t_ms":5,"host":"hub","kind":"hub.heartbeat","agent":"node-01"}"#
        );
        let step =
            Event { t_ms: 0, host: Rc::from("sim"), body: Body::Step { step: Step::Crash { target: "hub".into() } } };
        assert_eq!(
            serde_json::to_string(&step).unwrap(),
            r#"{"t_ms":0,"host":"sim","kind":"step","step":{"kind":"crash","target":"hub"}}"#
        );
    }
}
