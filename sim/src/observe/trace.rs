//! The run's trace: structured events (virtual ms, host, kind, fields in a fixed order), the SHA-256 digest over their
//! JSON lines, and the fan-out of every event to the run's [`Sink`] (the runner's oracles and collectors, see
//! [`crate::observe::observers`]). The world only emits; what is made of the events is the runner's.
//!
//! The trace is part of the determinism contract: an event's JSON never holds a wall-clock value, a hash-ordered
//! collection or a secret. It is separate from the `tracing` logs, which are for people and are not digested.

use std::rc::Rc;

use serde::Serialize;
use sha2::{Digest, Sha256};

use engine::ports::events::{
    CanonicalFile, FormDefect, HistoricalForm, LaneVerdict, OldJournalDefect, OldJournalFormat, RolloutStep,
    RotationEnd, RotationStep,
};
use fakes::maas::{BootTarget, DnsAnswer, NodeStatus, PowerState, Stall};

use crate::model::faults::Step;

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
    /// The run ends here, before its `duration_ms`: it has settled, quiet since `quiet_since_ms` (see
    /// `docs/oracles.md`, "When a run ends early").
    #[serde(rename = "run.settled")]
    RunSettled { quiet_since_ms: u64, duration_ms: u64 },
    /// The run reached the end of a phase that phase-triggered steps wait for (`after`).
    #[serde(rename = "run.phase")]
    PhaseReached { phase: crate::model::faults::Phase },
    /// The operator's rollout request selected these nodes (every node of the fleet, or in a run whose machines are
    /// the fleet's, the nodes enrolled at the hub when it was made).
    #[serde(rename = "rollout.selected")]
    RolloutSelected { rollout: String, nodes: Vec<String> },
    /// A step of the fault plan was applied; `fault` numbers it (from 1, in injection order) when it injected a
    /// fault.
    #[serde(rename = "step")]
    Step {
        step: Step,
        #[serde(skip_serializing_if = "Option::is_none")]
        fault: Option<u64>,
    },
    /// Fault `fault` (of `fault_kind`) landed: for the first time, work of `on` met it (a call timed out on it, a read saw
    /// it, a workflow failed on it). `effect` is set when landing is itself its effect (the controller died, the hub
    /// acted on a silent agent, a lock wait began); otherwise the effect is `on`'s first reaction after it
    /// (`docs/faults.md`, "Where a fault lands and what it does").
    #[serde(rename = "fault.landed")]
    FaultLanded {
        fault: u64,
        fault_kind: crate::model::faults::StepKind,
        on: crate::model::faults::Subject,
        #[serde(skip_serializing_if = "Option::is_none")]
        effect: Option<crate::model::faults::Effect>,
    },
    #[serde(rename = "host.crash")]
    HostCrash { lost_unsynced_writes: u64 },
    #[serde(rename = "host.boot")]
    HostBoot { boot: u64 },
    #[serde(rename = "hub.registered")]
    HubRegistered { agent: String, durable: bool },
    /// `generation`: the generation of the credential that authenticated it, written only when it is not the first
    /// (an agent that never rotated its enrolment credential heartbeats as it always did).
    #[serde(rename = "hub.heartbeat")]
    HubHeartbeat {
        agent: String,
        #[serde(skip_serializing_if = "is_first_generation")]
        generation: u64,
    },
    /// `unauthorized`: the agent is known and the token is none of its valid credentials (written only then; absent,
    /// the agent is unknown or tombstoned).
    #[serde(rename = "hub.heartbeat_refused")]
    HubHeartbeatRefused {
        agent: String,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        unauthorized: bool,
    },
    /// A rotation's successor credential was minted for `agent` (never its token).
    #[serde(rename = "hub.credential_issued")]
    HubCredentialIssued { agent: String, rotation: String, generation: u64 },
    /// A rotation was committed: the predecessor's generation is revoked.
    #[serde(rename = "hub.rotation_committed")]
    HubRotationCommitted { agent: String, rotation: String, revoked_generation: u64 },
    /// A rotation was aborted: its successor's generation is revoked.
    #[serde(rename = "hub.rotation_aborted")]
    HubRotationAborted { agent: String, rotation: String, revoked_generation: u64 },
    #[serde(rename = "hub.back_online")]
    HubBackOnline { agent: String },
    #[serde(rename = "hub.offline")]
    HubOffline { agent: String, silent_ms: u64 },
    #[serde(rename = "hub.tombstoned")]
    HubTombstoned { agent: String, silent_ms: u64 },
    /// A tombstoned row was restored through the journal-bound resurrection path, under open epoch `epoch`, which
    /// lists it; its silence counts again from this moment.
    #[serde(rename = "hub.resurrected")]
    HubResurrected { agent: String, epoch: u64 },
    /// A sweep found an agent silent past the TTL and left it because an open epoch pins it (reported once per
    /// silence).
    #[serde(rename = "hub.expiry_deferred")]
    HubExpiryDeferred { agent: String, silent_ms: u64, epoch: u64 },
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
    /// The hub granted `agent` a task lease that runs `lease_ms` on the hub's clock from now.
    #[serde(rename = "hub.lease_granted")]
    HubLeaseGranted { agent: String, lease_ms: u64 },
    #[serde(rename = "hub.dispatch_refused")]
    HubDispatchRefused { agent: String, task: String },
    #[serde(rename = "agent.heartbeat_failed")]
    AgentHeartbeatFailed { error: String },
    /// A fleet node whose service an SSH `stop_service` stopped, and no `start_service` started again, tried to
    /// reach the network: a connection it opened (`to` the host it dialled), a download onto it (`to` = `artifacts`,
    /// `name` = the digest) or a name it resolved (`to` = `dns`). Recorded only in that window, so a healthy run has
    /// none; what `no_egress_after_quiescence` judges.
    #[serde(rename = "node.egress")]
    NodeEgress {
        egress: Egress,
        to: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
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
    /// An agent-credential rotation's signal (`rotation` its id, `node` the agent's node).
    #[serde(rename = "engine.rotation")]
    Rotation { rotation: String, node: String, event: RotationBody },
    /// An operator recovery action's audit record (seed 000, section 8), as the controller journaled it: once when
    /// requested (`actual_next_state` null), once settled. Its texts are free text, never a secret.
    #[serde(rename = "engine.audit")]
    Audit { record: engine::recovery::AuditRecord },
    /// A worker's agent service started or stopped (by the rollout, a fault or an operator).
    #[serde(rename = "worker.service")]
    WorkerService { running: bool },
    #[serde(rename = "worker.mutated")]
    WorkerMutated { op: String, operation_id: String, target: String },
    /// A write left the worker's environment with its attestation key and no `MAC_STARTUP_CLEAR_HOLD` (the
    /// recovery hold must precede the recovery identity); traced right after the write's `worker.mutated`.
    #[serde(rename = "worker.identity_unheld")]
    WorkerIdentityUnheld,
    #[serde(rename = "worker.refused")]
    WorkerRefused { op: String, operation_id: Option<String>, error: String },
    /// An operation met non-returning storage: no effect, no answer.
    #[serde(rename = "worker.hung")]
    WorkerHung { op: String, operation_id: String },
    /// A rollout record reached the controller's journal (its kind, operation id and route digest, never its content).
    #[serde(rename = "controller.journal")]
    JournalAppended { record: String, operation_id: Option<String>, route_digest: Option<String> },
    /// A rotation record reached the controller's journal (its kind, rotation and operation id, never a credential).
    #[serde(rename = "controller.rotation_journal")]
    RotationJournalAppended { record: String, rotation: String, operation_id: Option<String> },
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
    /// One record of the instance controller's journal, as it became durable (`docs/instances.md`).
    #[serde(rename = "instance.record")]
    InstanceRecord { record: engine::instance::inventory::InstanceRecord },
    /// A stuck row of the runbook's table, raised once per row and clock start.
    #[serde(rename = "instance.stuck")]
    InstanceStuck { instance: String, stuck: engine::instance::stuck::Stuck, since_ms: u64 },
    /// A cloud sync of a region: the rows it mapped to terminated, and the signals it raised.
    #[serde(rename = "instance.sync")]
    InstanceSync { region: String, mapped_terminated: Vec<String>, signals: Vec<engine::instance::sync::SyncSignal> },
    /// `system.cloud_sync_check_stale` (or another signal of the stale sensor).
    #[serde(rename = "instance.sync_signal")]
    InstanceSyncSignal { signal: engine::instance::sync::SyncSignal },
    /// A request to the instance controller (an `instance_operator` step, or the on-call's recovery), when it was
    /// decided: what it came to (`performed`, `pending`, `refused`, `failed`) and the journal records it wrote.
    #[serde(rename = "instance.operated")]
    InstanceOperated { actor: String, op: String, target: String, outcome: String, wrote: Vec<String> },
    /// A pass of the instance controller failed (its port's error); the next pass tries again.
    #[serde(rename = "instance.pass_failed")]
    InstancePassFailed { pass: String, error: String },
    /// The provider executed a create: a VM now exists for the tag (whether or not the answer arrives).
    #[serde(rename = "cloud.vm_created")]
    CloudVmCreated { vm: String, tag: String },
    /// What a guest did, as the hub heard it.
    #[serde(rename = "cloud.guest")]
    CloudGuest { event: fakes::cloud::GuestEvent },
    /// The provider console force-terminated a VM whose teardown was stuck.
    #[serde(rename = "cloud.reaped")]
    CloudReaped { vm: String, tag: String },
}

/// A rollout signal of the engine, as the trace records it.
/// What kind of traffic a stopped node originated (`node.egress`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Egress {
    Connect,
    Download,
    Dns,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum RolloutBody {
    PlanFrozen {
        revision: String,
        lanes: u64,
        lane_size: u64,
        rollout_bound_ms: u64,
    },
    PlanRefused {
        reason: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        cause: Option<engine::ports::events::RefusalCause>,
    },
    JournalMigrated {
        format: OldJournalFormat,
        lines: Vec<u64>,
        records: u64,
    },
    JournalQuarantined {
        format: OldJournalFormat,
        line: u64,
        defect: OldJournalDefect,
        lines: Vec<u64>,
    },
    Quarantined {
        node: String,
        surfaces: Vec<String>,
        cause: engine::ports::events::QuarantineCause,
    },
    Repaired {
        node: String,
        repair: String,
    },
    IdentityDecoded {
        node: String,
        forms: Vec<HistoricalForm>,
        defects: Vec<FormDefect>,
    },
    Canonicalized {
        node: String,
        forms: Vec<HistoricalForm>,
        wrote: Vec<CanonicalFile>,
    },
    Adopted {
        revision: String,
        in_doubt: u64,
    },
    StepStarted {
        node: String,
        step: RolloutStep,
        lane: u64,
    },
    StepDone {
        node: String,
        step: RolloutStep,
        lane: u64,
    },
    Retrying {
        node: String,
        step: RolloutStep,
        attempt: u64,
        delay_ms: u64,
        error: String,
    },
    HubRetrying {
        attempt: u64,
        delay_ms: u64,
        error: String,
    },
    NodeFailed {
        node: String,
        step: RolloutStep,
        error: String,
        endpoint: String,
        replay: String,
    },
    LaneCommitted {
        lane: u64,
        verdict: LaneVerdict,
        nodes: Vec<String>,
    },
    LaneReverting {
        lane: u64,
        nodes: Vec<String>,
        failed: Vec<String>,
    },
    CanaryProved {
        node: String,
    },
    Resurrected {
        node: String,
        epoch: u64,
    },
    ResurrectionRefused {
        node: String,
        epoch: u64,
        error: String,
    },
    BatchDone {
        lane: u64,
        batch: u64,
        nodes: Vec<String>,
        revert: bool,
    },
    RouteChanged {
        frozen: String,
        published: String,
    },
    LockWaiting {
        holder: String,
        remaining_ms: u64,
    },
    LockTaken {
        fence: u64,
        superseded: bool,
    },
    Reauthenticated {
        expires_at_ms: u64,
    },
    SkippedHeld {
        node: String,
        owners: Vec<String>,
    },
    Accounted {
        nodes: Vec<engine::ports::events::NodeAccount>,
    },
    Terminal {
        outcome: engine::ports::events::TerminalOutcome,
    },
}

impl From<engine::ports::events::RolloutEvent> for RolloutBody {
    fn from(event: engine::ports::events::RolloutEvent) -> Self {
        use engine::ports::events::RolloutEvent as E;
        match event {
            E::PlanFrozen { revision, lanes, lane_size, rollout_bound_ms } => {
                RolloutBody::PlanFrozen { revision, lanes, lane_size, rollout_bound_ms }
            }
            E::PlanRefused { reason, cause } => RolloutBody::PlanRefused { reason, cause },
            E::JournalMigrated { format, lines, records } => RolloutBody::JournalMigrated { format, lines, records },
            E::JournalQuarantined { format, line, defect, lines } => {
                RolloutBody::JournalQuarantined { format, line, defect, lines }
            }
            E::Quarantined { node, surfaces, cause } => RolloutBody::Quarantined { node, surfaces, cause },
            E::LaneReverting { lane, nodes, failed } => RolloutBody::LaneReverting { lane, nodes, failed },
            E::CanaryProved { node } => RolloutBody::CanaryProved { node },
            E::Resurrected { node, epoch } => RolloutBody::Resurrected { node, epoch },
            E::ResurrectionRefused { node, epoch, error } => RolloutBody::ResurrectionRefused { node, epoch, error },
            E::BatchDone { lane, batch, nodes, revert } => RolloutBody::BatchDone { lane, batch, nodes, revert },
            E::Repaired { node, repair } => RolloutBody::Repaired { node, repair },
            E::IdentityDecoded { node, forms, defects } => RolloutBody::IdentityDecoded { node, forms, defects },
            E::Canonicalized { node, forms, wrote } => RolloutBody::Canonicalized { node, forms, wrote },
            E::Adopted { revision, in_doubt } => RolloutBody::Adopted { revision, in_doubt },
            E::StepStarted { node, step, lane } => RolloutBody::StepStarted { node, step, lane },
            E::StepDone { node, step, lane } => RolloutBody::StepDone { node, step, lane },
            E::Retrying { node, step, attempt, delay_ms, error } => {
                RolloutBody::Retrying { node, step, attempt, delay_ms, error }
            }
            E::HubRetrying { attempt, delay_ms, error } => RolloutBody::HubRetrying { attempt, delay_ms, error },
            E::NodeFailed { node, step, error, endpoint, replay } => {
                RolloutBody::NodeFailed { node, step, error, endpoint, replay }
            }
            E::LaneCommitted { lane, verdict, nodes } => RolloutBody::LaneCommitted { lane, verdict, nodes },
            E::RouteChanged { frozen, published } => RolloutBody::RouteChanged { frozen, published },
            E::LockWaiting { holder, remaining_ms } => RolloutBody::LockWaiting { holder, remaining_ms },
            E::LockTaken { fence, superseded } => RolloutBody::LockTaken { fence, superseded },
            E::Reauthenticated { expires_at_ms } => RolloutBody::Reauthenticated { expires_at_ms },
            E::SkippedHeld { node, owners } => RolloutBody::SkippedHeld { node, owners },
            E::Accounted { nodes } => RolloutBody::Accounted { nodes },
            E::Terminal { outcome } => RolloutBody::Terminal { outcome },
        }
    }
}

/// Whether a credential generation is an agent's first (enrolment) one, which `hub.heartbeat` leaves unwritten.
fn is_first_generation(generation: &u64) -> bool {
    *generation == 1
}

/// An agent-credential rotation's signal, as the trace records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum RotationBody {
    Planned,
    Adopted {
        in_doubt: Option<RotationStep>,
    },
    StepStarted {
        step: RotationStep,
    },
    StepDone {
        step: RotationStep,
        generation: Option<u64>,
    },
    Retrying {
        step: RotationStep,
        attempt: u64,
        delay_ms: u64,
        error: String,
    },
    Reauthenticated {
        expires_at_ms: u64,
    },
    /// The terminal event: `end` is `{"end": "rotated", generation}`, `{"end": "stopped", step, failure}` or
    /// `{"end": "aborted", step, failure}`.
    Ended {
        end: RotationEnd,
    },
}

impl From<engine::ports::events::RotationEvent> for RotationBody {
    fn from(event: engine::ports::events::RotationEvent) -> Self {
        use engine::ports::events::RotationEvent as E;
        match event {
            E::Planned => RotationBody::Planned,
            E::Adopted { in_doubt } => RotationBody::Adopted { in_doubt },
            E::StepStarted { step } => RotationBody::StepStarted { step },
            E::StepDone { step, generation } => RotationBody::StepDone { step, generation },
            E::Retrying { step, attempt, delay_ms, error } => RotationBody::Retrying { step, attempt, delay_ms, error },
            E::Reauthenticated { expires_at_ms } => RotationBody::Reauthenticated { expires_at_ms },
            E::Ended { end } => RotationBody::Ended { end },
        }
    }
}

/// An onboarding or decommission signal of the engine, as the trace records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum OnboardingBody {
    StageStarted {
        stage: String,
        attempt: u64,
    },
    StageDone {
        stage: String,
        adopted: bool,
    },
    Observed {
        what: String,
        value: String,
    },
    Stalled {
        stage: String,
        class: String,
        evidence: Vec<engine::ports::events::Evidence>,
    },
    StageFailed {
        stage: String,
        class: String,
        error: String,
    },
    Retrying {
        stage: String,
        attempt: u64,
        delay_ms: u64,
    },
    Stopped {
        stage: String,
        class: String,
        workflow_state: String,
        node_state: String,
        evidence: Vec<engine::ports::events::Evidence>,
    },
    Completed {
        system_id: String,
    },
    /// A timeout of section 6 (`discovery`, `commission`, ...) ended a stage's attempt.
    TimedOut {
        stage: String,
        timeout: String,
        bound_ms: u64,
    },
    /// A compensation or a reseed, and what came of it (`performed`, `not_due`, `failed`).
    RecoveryWork {
        stage: String,
        work: String,
        outcome: String,
        detail: String,
    },
    /// A decommission refused before its first mutation: where it rests, and every reference to its worker.
    Refused {
        stage: String,
        class: String,
        workflow_state: String,
        node_state: String,
        references: Vec<engine::ports::events::WorkerReference>,
    },
}

impl From<engine::ports::events::WorkflowEvent> for OnboardingBody {
    fn from(event: engine::ports::events::WorkflowEvent) -> Self {
        use engine::ports::events::WorkflowEvent as E;
        let name = |stage: engine::matrix::Stage| stage.as_str().to_owned();
        match event {
            E::StageStarted { stage, attempt } => OnboardingBody::StageStarted { stage: name(stage), attempt },
            E::StageDone { stage, adopted } => OnboardingBody::StageDone { stage: name(stage), adopted },
            E::Observed { what, value } => OnboardingBody::Observed { what, value },
            E::Stalled { stage, class, evidence } => {
                OnboardingBody::Stalled { stage: name(stage), class: class.as_str().into(), evidence }
            }
            E::StageFailed { stage, class, error } => {
                OnboardingBody::StageFailed { stage: name(stage), class: class.as_str().into(), error }
            }
            E::Retrying { stage, attempt, delay_ms } => {
                OnboardingBody::Retrying { stage: name(stage), attempt, delay_ms }
            }
            E::Stopped { stage, class, workflow_state, node_state, evidence } => OnboardingBody::Stopped {
                stage: name(stage),
                class: class.as_str().into(),
                workflow_state: workflow_state.as_str().into(),
                node_state: node_state.as_str().into(),
                evidence,
            },
            E::Completed { system_id } => OnboardingBody::Completed { system_id },
            E::TimedOut { stage, timeout, bound_ms } => {
                OnboardingBody::TimedOut { stage: name(stage), timeout: timeout.as_str().into(), bound_ms }
            }
            E::RecoveryWork { stage, work, outcome, detail } => OnboardingBody::RecoveryWork {
                stage: name(stage),
                work: work.as_str().into(),
                outcome: outcome.as_str().into(),
                detail,
            },
            E::Refused { stage, class, workflow_state, node_state, references } => OnboardingBody::Refused {
                stage: name(stage),
                class: class.as_str().into(),
                workflow_state: workflow_state.as_str().into(),
                node_state: node_state.as_str().into(),
                references,
            },
        }
    }
}

/// What the trace's events are fanned out to. Sinks only read: they add no event, so the trace and its digest are
/// the same whatever sinks a run has.
pub trait Sink {
    /// One event, with its JSON line as digested.
    fn on_event(&mut self, event: &Event, line: &str);
}

/// A sink the runner keeps a handle on, to read what it gathered when the run ends.
impl<S: Sink + ?Sized> Sink for Rc<std::cell::RefCell<S>> {
    fn on_event(&mut self, event: &Event, line: &str) {
        self.borrow_mut().on_event(event, line);
    }
}

/// The most bytes of JSON lines a run keeps in memory for its `trace.jsonl`. Past it the kept lines are dropped (the
/// digest, the oracles and the collectors still see every event), and the trace is not written: the lines kept are
/// then fewer than the record's `trace_events`, which is how a writer tells.
pub const TRACE_BYTES_MAX: usize = 256 << 20;

/// Records events, digests them, fans them out to the run's sink, and keeps the JSON lines when asked to (at most
/// [`TRACE_BYTES_MAX`] bytes of them).
pub struct Trace {
    hasher: Sha256,
    events: u64,
    lines: Option<Vec<String>>,
    kept_bytes: usize,
    sink: Box<dyn Sink>,
    /// The line being written, reused from event to event (a run records tens of thousands).
    buffer: Vec<u8>,
}

impl Trace {
    pub fn new(sink: Box<dyn Sink>, keep_lines: bool) -> Trace {
        Trace {
            hasher: Sha256::new(),
            events: 0,
            lines: keep_lines.then(Vec::new),
            kept_bytes: 0,
            sink,
            buffer: Vec::with_capacity(256),
        }
    }

    pub fn record(&mut self, event: Event) {
        self.buffer.clear();
        serde_json::to_writer(&mut self.buffer, &event).expect("trace events serialise");
        let line = std::str::from_utf8(&self.buffer).expect("serde_json writes UTF-8");
        self.hasher.update(line.as_bytes());
        self.hasher.update(b"\n");
        self.events += 1;
        self.sink.on_event(&event, line);
        if let Some(lines) = &mut self.lines {
            self.kept_bytes += line.len() + 1;
            if self.kept_bytes > TRACE_BYTES_MAX {
                // Keep none rather than a prefix that could pass for the whole trace.
                *lines = Vec::new();
                self.lines = None;
            } else {
                lines.push(line.to_owned());
            }
        }
    }

    pub fn events(&self) -> u64 {
        self.events
    }

    /// The digest so far, as lowercase hex.
    pub fn digest(&self) -> String {
        crate::model::digest::hex(&self.hasher.clone().finalize())
    }

    pub fn take_lines(&mut self) -> Vec<String> {
        self.lines.take().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_serialise_with_time_host_and_kind_first() {
        let event = Event {
            t_ms: 5,
            host: Rc::from("hub"),
            body: Body::HubHeartbeat { agent: "node-01".into(), generation: 1 },
        };
        assert_eq!(
            serde_json::to_string(&event).unwrap(),
            r#"{"t_ms":5,"host":"hub","kind":"hub.heartbeat","agent":"node-01"}"#,
            "an enrolment credential's heartbeat reads as it always did"
        );
        let rotated = Event {
            t_ms: 5,
            host: Rc::from("hub"),
            body: Body::HubHeartbeat { agent: "node-01".into(), generation: 2 },
        };
        assert_eq!(
            serde_json::to_string(&rotated).unwrap(),
            r#"{"t_ms":5,"host":"hub","kind":"hub.heartbeat","agent":"node-01","generation":2}"#
        );
        let refused = |unauthorized| Event {
            t_ms: 6,
            host: Rc::from("hub"),
            body: Body::HubHeartbeatRefused { agent: "node-01".into(), unauthorized },
        };
        assert_eq!(
            serde_json::to_string(&refused(false)).unwrap(),
            r#"{"t_ms":6,"host":"hub","kind":"hub.heartbeat_refused","agent":"node-01"}"#
        );
        assert_eq!(
            serde_json::to_string(&refused(true)).unwrap(),
            r#"{"t_ms":6,"host":"hub","kind":"hub.heartbeat_refused","agent":"node-01","unauthorized":true}"#
        );
        let step = Event {
            t_ms: 0,
            host: Rc::from("sim"),
            body: Body::Step { step: Step::Crash { target: "hub".into() }, fault: None },
        };
        assert_eq!(
            serde_json::to_string(&step).unwrap(),
            r#"{"t_ms":0,"host":"sim","kind":"step","step":{"kind":"crash","target":"hub"}}"#
        );
    }
}
