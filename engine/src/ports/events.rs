//! The events the engine's workflows and rollouts report through the `Signals` port, typed: stages, failure
//! classes, states, evidence and outcomes are enums, never prose an observer must search. Each serialises as the
//! words it has always been reported with (a stage's and a class's matrix name, an evidence's sentence, an outcome's
//! word), so a trace of them reads, and digests, the same.

use std::fmt;

use serde::{Deserialize, Serialize, Serializer};

use crate::matrix::{FailureClass, NodeState, Stage, WorkflowState};

/// What an onboarding or decommission workflow reports. Stage, class and state are the recovery matrix's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkflowEvent {
    StageStarted {
        stage: Stage,
        attempt: u64,
    },
    /// `adopted`: the observed state already satisfied the stage's checkpoint (late success, an operator's change).
    StageDone {
        stage: Stage,
        adopted: bool,
    },
    /// A zero-cost read made before any mutation (`load_site_config`), recorded for the diagnosis.
    Observed {
        what: String,
        value: String,
    },
    /// A waiting stage went silent for the stall window (or met evidence that waiting cannot help).
    Stalled {
        stage: Stage,
        class: FailureClass,
        evidence: Vec<Evidence>,
    },
    StageFailed {
        stage: Stage,
        class: FailureClass,
        error: String,
    },
    Retrying {
        stage: Stage,
        attempt: u64,
        delay_ms: u64,
    },
    /// The workflow rests: `failed_retryable` or `failed_manual_intervention`, with what a person needs to act.
    Stopped {
        stage: Stage,
        class: FailureClass,
        workflow_state: WorkflowState,
        node_state: NodeState,
        evidence: Vec<Evidence>,
    },
    Completed {
        system_id: String,
    },
    /// A timeout of section 6 ended the stage's attempt after `bound_ms` (the site's setting, or the matrix's
    /// default); the `stage_failed` that follows carries its class.
    TimedOut {
        stage: Stage,
        timeout: crate::matrix::TimeoutKind,
        bound_ms: u64,
    },
    /// The request was refused before the run's first mutating stage, and nothing was changed: something still
    /// references the worker it would delete (RCCA replacement plan: "Reject decommission while an epoch, hold,
    /// journal, task, or lease references the worker"), or what references it could not be read. The workflow rests
    /// where `stage`'s row puts a failure of `class` before any change (`docs/recovery-matrix.md`, "Refusals"); the
    /// refusal is no run, and a later request after the references clear proceeds as a fresh one.
    Refused {
        stage: Stage,
        class: FailureClass,
        workflow_state: WorkflowState,
        node_state: NodeState,
        references: Vec<WorkerReference>,
    },
    /// Recovery work a decision called for besides its retry or stop: a compensation of the matrix's Compensation
    /// column, or a safe default's own work (the hardware-sync reseed), with what came of it.
    RecoveryWork {
        stage: Stage,
        work: RecoveryWork,
        outcome: WorkOutcome,
        detail: String,
    },
}

/// One thing that references a worker a decommission would delete, as the refusal names it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum WorkerReference {
    /// An open deployment epoch lists the worker as a member.
    Epoch { epoch: u64 },
    /// A dispatch hold on the worker, whoever owns it (a deployment, a quarantine, an operator).
    Hold { owner: String },
    /// An active task lease at the hub, until `until_ms` on the hub's clock.
    Lease { until_ms: u64 },
    /// The controller's journal holds `rollout`, not terminal, and its plan names the worker.
    Rollout { rollout: String },
    /// What references the worker could not be read from `source`: not "no references" (fail closed).
    Unreadable { source: ReferenceSource, error: String },
}

/// Where a decommission reads what references its worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReferenceSource {
    /// The hub: epochs, holds, task leases.
    Hub,
    /// The controller's journal: its rollout records.
    Journal,
}

impl ReferenceSource {
    pub fn as_str(self) -> &'static str {
        match self {
            ReferenceSource::Hub => "hub",
            ReferenceSource::Journal => "journal",
        }
    }
}

impl WorkerReference {
    /// The reference's kind, as the trace names it.
    pub fn kind(&self) -> &'static str {
        match self {
            WorkerReference::Epoch { .. } => "epoch",
            WorkerReference::Hold { .. } => "hold",
            WorkerReference::Lease { .. } => "lease",
            WorkerReference::Rollout { .. } => "rollout",
            WorkerReference::Unreadable { .. } => "unreadable",
        }
    }
}

/// The sentence a person is shown.
impl fmt::Display for WorkerReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WorkerReference::Epoch { epoch } => write!(f, "open deployment epoch {epoch} lists it as a member"),
            WorkerReference::Hold { owner } => write!(f, "dispatch hold {owner}"),
            WorkerReference::Lease { until_ms } => write!(f, "task lease active until {until_ms} ms (hub clock)"),
            WorkerReference::Rollout { rollout } => {
                write!(f, "rollout {rollout} is not terminal and its plan names it")
            }
            WorkerReference::Unreadable { source, error } => {
                write!(f, "references unreadable from the {}: {error}", source.as_str())
            }
        }
    }
}

/// What recovery work a workflow did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecoveryWork {
    /// The stage row's compensation.
    Compensation(crate::matrix::Compensation),
    /// `wait_for_hardware_sync_healthy`'s "resume with reseed": the hardware-sync seed run again before the wait.
    Reseed,
}

impl RecoveryWork {
    /// The snake_case name a trace and a conformance case use (`unlink_relink_interface`, `reseed`).
    pub fn as_str(self) -> &'static str {
        match self {
            RecoveryWork::Compensation(compensation) => compensation.as_str(),
            RecoveryWork::Reseed => "reseed",
        }
    }
}

/// What came of recovery work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkOutcome {
    /// The work changed what it was to change.
    Performed,
    /// The state already was what the work would make it (idempotent: nothing to do, nothing called).
    NotDue,
    /// The work was tried and could not be done; the detail says why (a person may have to finish it).
    Failed,
}

impl WorkOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            WorkOutcome::Performed => "performed",
            WorkOutcome::NotDue => "not_due",
            WorkOutcome::Failed => "failed",
        }
    }
}

/// What a workflow's classification rests on, for the person who acts on it. Each reads (and serialises) as the
/// sentence a person is shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Evidence {
    /// Neither an event nor a status change for longer than the stall window.
    Silent { quiet_for_ms: u64, stall_window_ms: u64 },
    /// The last thing MAAS said about the machine.
    LastEvent { text: String },
    /// A machine MAAS enlisted on this node's BMC that is not the node's own record: the node booted with MACs MAAS
    /// does not know (seed 001's MAC drift).
    UnknownMachine { system_id: String, mac: String, bmc_address: String },
    /// The resolver the nodes are given answers `answer` (`SERVFAIL`, `NXDOMAIN`) for the metadata host.
    ResolverAnswer { host: String, answer: String },
    /// A created machine made no PXE request within the stall window.
    NoPxeBoot { system_id: String, waited_ms: u64 },
    /// One of MAAS's events for the machine, as MAAS logged it.
    MaasEvent { level: String, text: String, description: String },
    /// One of MAAS's newest events for a machine whose deploy failed (`classify_deploy_failure`), lowercase.
    DeployEvent { level: String, text: String, description: String },
    /// The stage's error itself (a decommission's stop rests on it alone).
    Error { error: String },
    /// A region service MAAS's work runs on is not running (seed 001: "region Temporal worker health", a zero-cost
    /// read).
    RegionService { service: String, status: String, info: String },
}

impl fmt::Display for Evidence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Evidence::Silent { quiet_for_ms, stall_window_ms } => {
                write!(f, "no event and no status change for {quiet_for_ms} ms (stall window {stall_window_ms} ms)")
            }
            Evidence::LastEvent { text } => write!(f, "last event: {text}"),
            Evidence::UnknownMachine { system_id, mac, bmc_address } => {
                write!(f, "unknown machine {system_id} enlisted with MAC {mac} on this node's BMC {bmc_address}")
            }
            Evidence::ResolverAnswer { host, answer } => write!(f, "the rack resolver answers {answer} for {host}"),
            Evidence::NoPxeBoot { system_id, waited_ms } => {
                write!(f, "no \"Performing PXE boot\" event for {system_id} in {waited_ms} ms")
            }
            Evidence::MaasEvent { level, text, description } => write!(f, "{level}: {text} {description}"),
            Evidence::DeployEvent { level, text, description } => {
                write!(f, "{}", format!("{level}: {text} {description}").to_lowercase())
            }
            Evidence::Error { error } => f.write_str(error),
            Evidence::RegionService { service, status, info } if info.is_empty() => {
                write!(f, "the region's {service} service is {status}")
            }
            Evidence::RegionService { service, status, info } => {
                write!(f, "the region's {service} service is {status}: {info}")
            }
        }
    }
}

/// As the sentence a person is shown.
impl Serialize for Evidence {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// One step of a node's rollout, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeStep {
    Hold,
    Quiesce,
    Install,
    WriteIdentity,
    Start,
    Prove,
    Release,
}

impl NodeStep {
    pub const ALL: [NodeStep; 7] = [
        NodeStep::Hold,
        NodeStep::Quiesce,
        NodeStep::Install,
        NodeStep::WriteIdentity,
        NodeStep::Start,
        NodeStep::Prove,
        NodeStep::Release,
    ];

    pub fn next(self) -> Option<NodeStep> {
        let index = NodeStep::ALL.iter().position(|step| *step == self)?;
        NodeStep::ALL.get(index + 1).copied()
    }

    pub fn as_str(self) -> &'static str {
        match self {
            NodeStep::Hold => "hold",
            NodeStep::Quiesce => "quiesce",
            NodeStep::Install => "install",
            NodeStep::WriteIdentity => "write_identity",
            NodeStep::Start => "start",
            NodeStep::Prove => "prove",
            NodeStep::Release => "release",
        }
    }
}

/// The outcome of one lane (the issue's lane verdicts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LaneVerdict {
    /// Every non-quarantined node proved the new revision.
    Successor,
    /// Every non-quarantined node authenticates the unchanged prior generation.
    Prior,
    /// Anything else: a node is mid-way or failed after going down. The lane stays held.
    Stuck,
}

impl LaneVerdict {
    /// The verdict's name in traces and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            LaneVerdict::Successor => "successor",
            LaneVerdict::Prior => "prior",
            LaneVerdict::Stuck => "stuck",
        }
    }
}

/// The step a rollout event names: one of a node's steps, the read-only preflight's observation and the capsule
/// staging before any lane (which touch a node but are no step of its state machine), or the legacy controller's
/// attestation recovery through the hub host (which the lane protocol has no step for).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum RolloutStep {
    Node(NodeStep),
    /// The read-only observation of the preflight.
    Preflight,
    /// Fetching a capsule onto the node before the quiescence barrier.
    Stage,
    /// A step of the reverse recovery of a node's lane, back to its prior generation.
    Revert(NodeStep),
    LegacyRecover,
}

impl RolloutStep {
    /// The step's name in traces: a node step's own name, `recover` for the legacy recovery.
    pub fn as_str(self) -> &'static str {
        match self {
            RolloutStep::Node(step) => step.as_str(),
            RolloutStep::Preflight => "preflight",
            RolloutStep::Stage => "stage",
            RolloutStep::Revert(step) => match step {
                NodeStep::Hold => "revert:hold",
                NodeStep::Quiesce => "revert:quiesce",
                NodeStep::Install => "revert:restore",
                NodeStep::WriteIdentity => "revert:write_identity",
                NodeStep::Start => "revert:start",
                NodeStep::Prove => "revert:prove",
                NodeStep::Release => "revert:release",
            },
            RolloutStep::LegacyRecover => "recover",
        }
    }
}

impl From<NodeStep> for RolloutStep {
    fn from(step: NodeStep) -> Self {
        RolloutStep::Node(step)
    }
}

impl fmt::Display for RolloutStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// As its name.
impl Serialize for RolloutStep {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// A historical identity form the rollout's decoder (`rollout::decode`) recognized, and a canonicalization rewrites.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HistoricalForm {
    /// `mac.env` in the pre-7f3bbd12 layout (`rollout::decode::EnvLayout::ExportPrefixed`).
    ExportPrefixedEnv,
    /// `mac.env` in the ovswarm installer's names (`rollout::decode::EnvLayout::OvswarmNames`).
    OvswarmNamesEnv,
    /// A version 1 receipt, in place of the manifest or beside an agreeing one.
    ReceiptV1,
    /// A version 2 receipt, likewise.
    ReceiptV2,
}

/// A historical artifact the decoder does not recognize: each fails closed, the preflight quarantining the node with
/// it named.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FormDefect {
    /// `mac.env` mixes exported and plain lines, or `MAC_` and `OVSWARM_` names: no installer wrote that.
    MixedEnvLayout,
    /// `mac.env` is exported lines under `OVSWARM_` names: no installer wrote that either.
    UnknownEnvLayout,
    /// `mac.env` in a historical layout is not exactly a full installed identity in strict lines (a recovery-only or
    /// partial key set, an extra or unknown key, a value a shell would read otherwise, a generation that is not a
    /// number, a startup hold that is not `0` or `1`). Recovery keys are exact and only ever in the canonical layout.
    HistoricalEnvNotExact,
    /// The receipt has no `schema_version` this decoder knows.
    UnknownReceiptVersion,
    /// The receipt is not exactly its version's lines.
    MalformedReceipt,
    /// The receipt's signature does not verify.
    ReceiptUnsigned,
    /// The receipt and the manifest name a different revision or generation.
    ReceiptDisagrees,
    /// A historical receipt on a node without a full installed identity to bind it to.
    NoIdentityToCanonicalize,
}

/// A file a canonicalization writes or removes, in the order it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CanonicalFile {
    Manifest,
    Env,
    Marker,
    Receipt,
}

/// The format of an old (pre-typed) controller journal's lines (`rollout::journal`, `docs/journal.md` "Old journals").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OldJournalFormat {
    /// `mac-cohort v1 <rollout> <verb> <key>=<value> …`: the serial MAC controller's cohort journal.
    MacCohortV1,
}

/// Why old journal lines cannot be decoded unambiguously: they are set aside (quarantined), never guessed at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OldJournalDefect {
    /// The version token is not `v1`.
    UnknownVersion,
    /// The verb is none of `plan`, `arm`, `done`, `fail`, `cohort`, `final`.
    UnknownVerb,
    /// The phase is none of `hold`, `stop`, `install`, `identity`, `start`, `verify`, `unhold`.
    UnknownPhase,
    /// A field is missing, unknown, repeated, empty or out of range.
    BadField,
    /// A transition names a rollout that has no plan before it.
    EventBeforePlan,
    /// A transition names a rollout whose plan a later plan superseded (the old controller was serial).
    NotCurrentRollout,
    /// A transition names a node its rollout's plan does not.
    NodeNotInPlan,
    /// A second plan for a rollout that already has one.
    ConflictingPlans,
    /// A line for a rollout after its `final` line.
    AfterFinal,
    /// The rollout's id is already a typed rollout's in this journal.
    RolloutIdTaken,
    /// Typed rollout records follow old lines that were never migrated: which came first is not known.
    TypedRecordsInterleaved,
}

/// Why a rollout was refused, when it is typed (`plan_refused`'s `cause`; absent for a refusal of the plan).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "cause", rename_all = "snake_case")]
pub enum RefusalCause {
    /// The controller journal's old lines are set aside: `line` could not be decoded unambiguously. Every rollout is
    /// refused until a person settles them.
    JournalQuarantined { line: u64, defect: OldJournalDefect },
    /// The journal could not be read or written, or holds a typed rollout record that does not decode or fit.
    JournalFailed,
}

/// Why a node was quarantined: its identity, or what kept the rollout from reaching or preparing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum QuarantineCause {
    /// The read-only preflight found its identity surfaces contradicting each other (or unsafe, or unsigned).
    Identity,
    /// The read-only preflight could not observe it.
    Unreachable,
    /// Its capsules could not be staged before the barrier.
    Staging,
    /// Its staging area's storage was not admitted (`rollout::storage`): a probe check failed, too little space was
    /// free, or the probe never answered.
    Storage,
    /// Its repair (or canonicalization) could not be fenced, applied or released, or the floor left no room for it.
    Repair,
}

/// What the rollout controller reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RolloutEvent {
    PlanFrozen {
        revision: String,
        lanes: u64,
        lane_size: u64,
        rollout_bound_ms: u64,
    },
    PlanRefused {
        reason: String,
        /// The refusal's cause, typed, when it is the journal's (a plan's refusal says it in `reason` only).
        cause: Option<RefusalCause>,
    },
    /// Old (pre-typed) journal lines were migrated into typed records, once, in one durable append: the journal line
    /// numbers they were on, and how many typed records they made.
    JournalMigrated {
        format: OldJournalFormat,
        lines: Vec<u64>,
        records: u64,
    },
    /// Old journal lines could not be decoded unambiguously and were set aside: `line` is the first that could not
    /// be, `defect` why; `lines` every line set aside.
    JournalQuarantined {
        format: OldJournalFormat,
        line: u64,
        defect: OldJournalDefect,
        lines: Vec<u64>,
    },
    Quarantined {
        node: String,
        surfaces: Vec<String>,
        /// Why, typed: what the surfaces are about.
        cause: QuarantineCause,
    },
    Repaired {
        node: String,
        repair: String,
    },
    /// The preflight decoded a node's identity from historical forms (`forms`), or met historical artifacts it does
    /// not recognize (`defects`, each a quarantine surface). Reported only for a node with either, before its verdict.
    IdentityDecoded {
        node: String,
        forms: Vec<HistoricalForm>,
        defects: Vec<FormDefect>,
    },
    /// A node's historical forms were rewritten in the canonical ones under the deployment fence, in `wrote`'s order
    /// (the receipt removed last), every identity value kept.
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
    /// A hub call failed and is tried again after `delay_ms` (the controller's `attempt`-th failure of it).
    HubRetrying {
        attempt: u64,
        delay_ms: u64,
        error: String,
    },
    /// Retries exhausted or a hard stop: journal and holds stay; the replay command and failed endpoint are named.
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
    /// The rollout's canary — the first node of the plan not quarantined, upgraded alone under its deployment hold —
    /// proved the successor: the wider release may begin (RCCA: "one held canary completes before the wider
    /// release"). An adopter that finds the canary proved and the rest of its lane untouched says so again.
    CanaryProved {
        node: String,
    },
    /// The journal-bound resurrection path (RCCA exit criteria): an adopting controller, or a node's proof in a
    /// lane, found `node`, which the journal's open epoch `epoch` pins, tombstoned at the hub, and the hub restored it
    /// under that epoch.
    Resurrected {
        node: String,
        epoch: u64,
    },
    /// The hub refused to restore `node` under epoch `epoch` (a revoked principal, an epoch it does not list): the node
    /// stays tombstoned, so it cannot prove a successor and its lane is never released on it.
    ResurrectionRefused {
        node: String,
        epoch: u64,
        error: String,
    },
    /// One batch of a lane went through its steps (forward, or back when `revert`): a boundary at which the rollout's
    /// per-batch telemetry is taken (RCCA: "per-batch telemetry"). `batch` counts the lane's batches from 0 (the
    /// canary's lane starts with the canary alone).
    BatchDone {
        lane: u64,
        batch: u64,
        nodes: Vec<String>,
        revert: bool,
    },
    /// A lane that could not reach its successor is rolled back to its prior generation (RCCA: "Apply the same
    /// design to reverse recovery"): `nodes` are the ones it took down, `failed` the ones that stopped it.
    LaneReverting {
        lane: u64,
        nodes: Vec<String>,
        failed: Vec<String>,
    },
    /// The deployment lock is held by another controller: wait for its lease to run out (a live holder renews it).
    LockWaiting {
        holder: String,
        remaining_ms: u64,
    },
    /// This controller holds the deployment lock under `fence`; `superseded` when it took over a journal's fence.
    LockTaken {
        fence: u64,
        superseded: bool,
    },
    /// The hub refused the credential; the controller read the current one from the secrets store and
    /// authenticated again (it never mints or rotates one).
    Reauthenticated {
        expires_at_ms: u64,
    },
    /// A selected node already carries a hold this rollout does not own (an operator's, another rollout's): it is
    /// left alone, and its hold is never released by this rollout.
    SkippedHeld {
        node: String,
        owners: Vec<String>,
    },
    /// The hub's route bundle is no longer the one the plan froze: no further lane goes down.
    RouteChanged {
        frozen: String,
        published: String,
    },
    /// Just before the terminal event (and after a refusal): every selected node and what became of it, by node.
    Accounted {
        nodes: Vec<NodeAccount>,
    },
    Terminal {
        outcome: TerminalOutcome,
    },
}

/// What a rollout did to one selected node: the all-selected account (RCCA P1 "Make quarantine explicit ... Its
/// defect must not silently shrink an all-selected acceptance denominator").
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum NodeOutcome {
    /// It proved the successor revision and generation, and its hold was released.
    Upgraded,
    /// It was never taken down: it still serves the unchanged prior generation.
    Prior { reason: String },
    /// The preflight (or a failed staging or repair) excluded it; it stays dispatch-held under `hold` until the
    /// repair plan is carried out.
    Quarantined { repair: RepairPlan },
    /// Someone else (an operator, another rollout) holds it: not this rollout's to touch.
    Held { owners: Vec<String> },
    /// It was taken down and did not prove the successor: held at `step`; the journal resumes it.
    Stuck { step: NodeStep, reason: String },
}

impl NodeOutcome {
    /// The outcome's name in traces, reports and scenario expectations.
    pub fn as_str(&self) -> &'static str {
        match self {
            NodeOutcome::Upgraded => "upgraded",
            NodeOutcome::Prior { .. } => "prior",
            NodeOutcome::Quarantined { .. } => "quarantined",
            NodeOutcome::Held { .. } => "held",
            NodeOutcome::Stuck { .. } => "stuck",
        }
    }

    /// Every outcome's name, in the order reports list them.
    pub const NAMES: [&'static str; 5] = ["upgraded", "prior", "quarantined", "held", "stuck"];
}

/// A quarantined node's typed repair plan: what contradicts a coherent identity, the hold that keeps it out of
/// dispatch, and what repairs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RepairPlan {
    /// The contradictory surfaces, as the preflight (or the failed staging or repair) named them.
    pub surfaces: Vec<String>,
    /// The dispatch hold's owner (`quarantine:<rollout>`).
    pub hold: String,
    /// What an operator does: mend the surfaces, release the hold, and roll out again.
    pub command: String,
}

/// One selected node and what the rollout did to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeAccount {
    pub node: String,
    #[serde(flatten)]
    pub outcome: NodeOutcome,
}

/// How a rollout ended, as its terminal event says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TerminalOutcome {
    /// Every selected node proved the successor.
    Successor,
    /// A selected node is not upgraded (prior, quarantined, held by someone else, or stuck): the account says which.
    /// When a node is stuck, later lanes did not run and journal and holds stay.
    Partial,
    /// The rollout stopped before its lanes were through; journal and holds stay for the next controller.
    Failed(RolloutFailure),
}

/// Why a rollout failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RolloutFailure {
    /// The legacy controller stopped on a node's error: journal non-terminal, holds retained.
    LegacyStopped,
    /// The hub did not open the epoch.
    EpochNotOpened,
    /// The deployment lock could not be taken (`reason` names who holds it, or why it is unreachable).
    LockUnavailable { reason: String },
    /// The lock's renewal before a lane failed: this controller lost its authority.
    LockLost { error: String },
}

impl fmt::Display for TerminalOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TerminalOutcome::Successor => f.write_str("successor"),
            TerminalOutcome::Partial => f.write_str("partial"),
            TerminalOutcome::Failed(RolloutFailure::LegacyStopped) => {
                f.write_str("failed: journal non-terminal, holds retained")
            }
            TerminalOutcome::Failed(RolloutFailure::EpochNotOpened) => {
                f.write_str("failed: the hub did not open the epoch")
            }
            TerminalOutcome::Failed(RolloutFailure::LockUnavailable { reason }) => write!(f, "failed: {reason}"),
            TerminalOutcome::Failed(RolloutFailure::LockLost { error }) => {
                write!(f, "failed: lost the deployment lock: {error}")
            }
        }
    }
}

/// As the words the terminal event has always carried (`successor`, `failed: …`).
impl Serialize for TerminalOutcome {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// How a rollout run ended, as the driver answers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RolloutEnd {
    /// Every selected node upgraded: it proved the successor.
    Successor,
    /// A selected node not upgraded (RCCA all-selected acceptance: a quarantine, a prior lane or a node someone else
    /// holds never shrinks the denominator). Journals written before the per-node account said `converged` for a
    /// rollout whose every lane was successor or prior; they decode as this.
    #[serde(alias = "converged")]
    Partial,
    /// No plan: the rollout was refused before any mutation.
    Refused,
    /// Legacy stopped, the epoch could not open, the lock was lost or unavailable, or a journal could not be adopted.
    Failed,
}

impl RolloutEnd {
    pub fn as_str(self) -> &'static str {
        match self {
            RolloutEnd::Successor => "successor",
            RolloutEnd::Partial => "partial",
            RolloutEnd::Refused => "refused",
            RolloutEnd::Failed => "failed",
        }
    }
}

impl fmt::Display for RolloutEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One step of an agent-credential rotation, in order (RCCA replacement plan: "Rotation becomes a separate per-node
/// state machine with old/new overlap until the successor heartbeat is proved").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RotationStep {
    /// The hub issues a successor credential; the predecessor stays valid beside it.
    Issue,
    /// The successor is written atomically into the node's credential file, which the agent reads on every heartbeat.
    Install,
    /// A heartbeat authenticated by the successor has been accepted by the hub.
    Prove,
    /// The hub revokes the predecessor.
    Revoke,
}

impl RotationStep {
    pub const ALL: [RotationStep; 4] =
        [RotationStep::Issue, RotationStep::Install, RotationStep::Prove, RotationStep::Revoke];

    pub fn next(self) -> Option<RotationStep> {
        let index = RotationStep::ALL.iter().position(|step| *step == self)?;
        RotationStep::ALL.get(index + 1).copied()
    }

    pub fn as_str(self) -> &'static str {
        match self {
            RotationStep::Issue => "issue",
            RotationStep::Install => "install",
            RotationStep::Prove => "prove",
            RotationStep::Revoke => "revoke",
        }
    }
}

/// Why a rotation step failed for good, typed (the error texts are for people; observers read the variant).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "failure", rename_all = "snake_case", deny_unknown_fields)]
pub enum RotationFailure {
    /// No heartbeat authenticated by the successor within the proof bound: the predecessor is never revoked unproved.
    SuccessorNotProved { waited_ms: u64 },
    /// The node presented another host key: not the node the controller holds authority for. Never retried.
    EndpointChanged { presented: String },
    /// The node refused the write for a reason a retry cannot fix (a full disk, an unsafe path).
    NodeRefused { error: String },
    /// The hub refused the request (an unknown agent, another rotation open, a credential the controller could not
    /// renew) or answered that the rotation is no longer open.
    HubRefused { error: String },
    /// Every bounded retry of a transient failure (timeout, refused or reset connection) failed.
    RetriesExhausted { error: String },
}

/// How a rotation ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "end", rename_all = "snake_case", deny_unknown_fields)]
pub enum RotationEnd {
    /// The successor was proved by a heartbeat and then the predecessor revoked: the successor (`generation`) is the
    /// agent's only credential.
    Rotated { generation: u64 },
    /// Stopped at `step` with the predecessor still valid; a successor already issued stays valid beside it (the
    /// overlap is kept, because the node may be using it). Nothing was revoked.
    Stopped { step: RotationStep, failure: RotationFailure },
    /// Stopped at `step` before the successor reached the node: the successor was revoked (when the hub had issued
    /// it), never the predecessor.
    Aborted { step: RotationStep, failure: RotationFailure },
}

/// What an agent-credential rotation reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RotationEvent {
    /// The rotation was journaled: it begins.
    Planned,
    /// A controller found the rotation in its journal, not ended; `in_doubt` is the step whose intent has no
    /// completion (it is looked for before it is redone).
    Adopted {
        in_doubt: Option<RotationStep>,
    },
    StepStarted {
        step: RotationStep,
    },
    /// `generation`: the successor's, when the step is the issue.
    StepDone {
        step: RotationStep,
        generation: Option<u64>,
    },
    /// A step failed transiently and will be tried again after `delay_ms`.
    Retrying {
        step: RotationStep,
        attempt: u64,
        delay_ms: u64,
        error: String,
    },
    /// The hub refused the controller's credential; the controller read the current one and authenticated again.
    Reauthenticated {
        expires_at_ms: u64,
    },
    /// The terminal event.
    Ended {
        end: RotationEnd,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each evidence reads and serialises as the sentence the workflows have always reported.
    #[test]
    fn evidence_serialises_as_the_sentence_a_person_reads() {
        let text = |s: &str| s.to_owned();
        let cases = [
            (
                Evidence::Silent { quiet_for_ms: 300_001, stall_window_ms: 300_000 },
                "no event and no status change for 300001 ms (stall window 300000 ms)",
            ),
            (Evidence::LastEvent { text: text("Loading ephemeral") }, "last event: Loading ephemeral"),
            (
                Evidence::UnknownMachine {
                    system_id: text("new"),
                    mac: text("52:54:00:aa"),
                    bmc_address: text("10.0.0.9"),
                },
                "unknown machine new enlisted with MAC 52:54:00:aa on this node's BMC 10.0.0.9",
            ),
            (
                Evidence::ResolverAnswer { host: text("maas-internal"), answer: text("NXDOMAIN") },
                "the rack resolver answers NXDOMAIN for maas-internal",
            ),
            (
                Evidence::NoPxeBoot { system_id: text("abc"), waited_ms: 300_000 },
                "no \"Performing PXE boot\" event for abc in 300000 ms",
            ),
            (
                Evidence::MaasEvent {
                    level: text("ERROR"),
                    text: text("Failed to power on node"),
                    description: text("x"),
                },
                "ERROR: Failed to power on node x",
            ),
            (
                Evidence::DeployEvent {
                    level: text("ERROR"),
                    text: text("DataSource not found"),
                    description: text("X"),
                },
                "error: datasource not found x",
            ),
            (Evidence::Error { error: text("maas answered 503: busy") }, "maas answered 503: busy"),
        ];
        for (evidence, sentence) in cases {
            assert_eq!(evidence.to_string(), sentence);
            assert_eq!(serde_json::to_string(&evidence).unwrap(), serde_json::to_string(sentence).unwrap());
        }
    }

    #[test]
    fn a_terminal_outcome_serialises_as_the_words_it_always_carried() {
        let cases = [
            (TerminalOutcome::Successor, "successor"),
            (TerminalOutcome::Partial, "partial"),
            (TerminalOutcome::Failed(RolloutFailure::LegacyStopped), "failed: journal non-terminal, holds retained"),
            (TerminalOutcome::Failed(RolloutFailure::EpochNotOpened), "failed: the hub did not open the epoch"),
            (
                TerminalOutcome::Failed(RolloutFailure::LockUnavailable { reason: "held by c2 for 5 ms more".into() }),
                "failed: held by c2 for 5 ms more",
            ),
            (
                TerminalOutcome::Failed(RolloutFailure::LockLost { error: "hub fenced the request: x".into() }),
                "failed: lost the deployment lock: hub fenced the request: x",
            ),
        ];
        for (outcome, words) in cases {
            assert_eq!(outcome.to_string(), words);
            assert_eq!(serde_json::to_string(&outcome).unwrap(), format!("\"{words}\""));
        }
        for end in [RolloutEnd::Successor, RolloutEnd::Partial, RolloutEnd::Refused, RolloutEnd::Failed] {
            assert_eq!(serde_json::to_string(&end).unwrap(), format!("\"{}\"", end.as_str()));
            assert_eq!(serde_json::from_str::<RolloutEnd>(&format!("\"{end}\"")).unwrap(), end);
        }
    }
}
