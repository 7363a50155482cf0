//! Ports: the traits the engine owns, one per external system, each with an error enum that keeps what the engine
//! must act on. Production adapters implement them against real services; the simulator implements them over its
//! simulated network and fakes.
//!
//! API Boundary: these traits and types are what every adapter implements. The futures are not `Send`: the engine runs
//! each workflow on one thread (a current-thread runtime in production, the simulator's single thread in tests).

use std::future::Future;

use crate::ports::events::{RolloutEvent, RotationEvent, WorkflowEvent};

pub mod bare_metal;
pub mod events;
pub mod fleet;
pub mod platform;
pub mod provider;
pub mod shared;
pub mod site;

/// Time as the engine sees it: a wall clock that can be skewed or stepped, and a monotonic clock for intervals.
/// In production: the host's clocks; in the simulator: virtual time (plus the host's skew for the wall clock).
pub trait Clock {
    /// Wall-clock milliseconds on this host (not guaranteed to agree with any other host's clock, nor to be monotonic).
    fn now_ms(&self) -> u64;
    /// Milliseconds on a clock that never jumps; only differences are meaningful. Periods and timeouts use this,
    /// so a stepped wall clock cannot stall a loop.
    fn monotonic_ms(&self) -> u64;
    /// Completes after `duration_ms` of monotonic time.
    fn sleep_ms(&self, duration_ms: u64) -> impl Future<Output = ()>;
}

/// Why a call to a remote service produced no answer. Kept separate per port so that each port's error enum can
/// say exactly what the engine must act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, thiserror::Error)]
pub enum TransportError {
    /// No answer within the call's timeout: the request may or may not have run.
    #[error("timed out")]
    Timeout,
    /// Nothing listens at the far end (the host is down): the request did not run.
    #[error("connection refused")]
    ConnectionRefused,
    /// The far end went away mid-call: the request may or may not have run.
    #[error("connection reset")]
    ConnectionReset,
}

/// One instance's heartbeat state as the hub reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceHeartbeat {
    pub instance: String,
    /// Hub-clock time of the last heartbeat (or of registration when none arrived yet).
    pub last_heartbeat_ms: u64,
    /// False once the hub has tombstoned the row: it refuses that agent's heartbeats.
    pub registered: bool,
    /// The source revision the agent's last heartbeat reported (attested by its bearer), if any.
    pub revision: Option<String>,
}

/// The hub's answer to a heartbeat read: every instance, and the hub's clock at the time of the read, so that ages
/// are computed on one clock (the hub's) and a skewed controller clock cannot fake silence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatSnapshot {
    pub hub_now_ms: u64,
    pub instances: Vec<InstanceHeartbeat>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HubError {
    #[error("hub unreachable: {0}")]
    Transport(#[from] TransportError),
    /// The hub answered with an error the engine cannot retry its way out of.
    #[error("hub rejected the request: {0}")]
    Rejected(String),
    /// The credential presented is not (or no longer) valid: read the current one from the secrets store and
    /// authenticate again. Deployment never mints or rotates one.
    #[error("hub refused the credential: {0}")]
    Unauthorized(String),
    /// A mutation under the deployment lock without its current fence: this controller has lost its authority.
    #[error("hub fenced the request: {0}")]
    Fenced(String),
}

/// A successor credential the hub issued for an agent during a rotation: its generation (the agent's enrolment
/// credential is generation 1, each rotation's successor the next) and the bearer token itself, which only the node's
/// credential file and the hub may hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuedCredential {
    pub generation: u64,
    pub token: crate::secret::Secret,
}

/// Where a rotation stands at the hub.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RotationState {
    /// The successor is issued and both credentials are valid (the overlap).
    Open,
    /// The predecessor is revoked: the successor is the agent's only credential.
    Committed,
    /// The successor is revoked: the predecessor is the agent's only credential.
    Aborted,
}

/// The hub's account of one rotation: its state, the successor's generation and how many heartbeats the successor
/// authenticated (what proves it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RotationStatus {
    pub state: RotationState,
    pub generation: u64,
    pub successor_heartbeats: u64,
}

/// What references one agent at the hub now (RCCA replacement plan: "Reject decommission while an epoch, hold,
/// journal, task, or lease references the worker"): what a decommission reads before its first mutation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentReferences {
    /// Open deployment epochs that list the agent as a member, ascending.
    pub epochs: Vec<u64>,
    /// The owners of dispatch holds on the agent, whoever placed them (`deploy:`, `quarantine:`, `successor:`, an
    /// operator's), sorted.
    pub holds: Vec<String>,
    /// When the agent's active task lease ends, on the hub's clock; `None` without one.
    pub lease_until_ms: Option<u64>,
}

/// The answer to a request for the deployment lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockGrant {
    /// This controller holds the lock under `fence`; the adapter presents the fence with every later mutation.
    Granted { fence: u64 },
    /// Another controller holds it for `remaining_ms` more (hub clock), unless renewed.
    Held { holder: String, fence: u64, remaining_ms: u64 },
}

/// The agent hub (`seeds/003`, `seeds/004`): registry, heartbeats, epochs, holds, dispatch, the deployment lock.
///
/// A controller authenticates as its principal and then takes the deployment lock; the adapter presents both the
/// credential and the lock's fence with every later call (in HTTP, as headers), so a controller that lost the lock
/// cannot mutate.
pub trait Hub {
    /// Presents `credential` for every later call. Answers when it expires (hub clock).
    fn authenticate(&self, credential: &crate::secret::Secret) -> impl Future<Output = Result<u64, HubError>>;
    /// Takes the deployment lock for `lease_ms` when it is free or its lease ran out.
    fn acquire_lock(&self, holder: &str, lease_ms: u64) -> impl Future<Output = Result<LockGrant, HubError>>;
    /// Takes over the lock held under `fence` (a dead controller's, named by the journal being adopted).
    fn supersede_lock(&self, holder: &str, fence: u64, lease_ms: u64) -> impl Future<Output = Result<u64, HubError>>;
    fn renew_lock(&self, fence: u64, lease_ms: u64) -> impl Future<Output = Result<(), HubError>>;
    /// `Ok(false)` when the fence no longer holds the lock.
    fn release_lock(&self, fence: u64) -> impl Future<Output = Result<bool, HubError>>;
    /// Every hold, by agent: owners are `deploy:`, `quarantine:`, `successor:` (this controller's kinds) or anyone
    /// else's (an operator's, never released by a deployment).
    fn read_holds(&self) -> impl Future<Output = Result<std::collections::BTreeMap<String, Vec<String>>, HubError>>;
    fn read_heartbeats(&self) -> impl Future<Output = Result<HeartbeatSnapshot, HubError>>;
    /// Places a dispatch hold on `agent` owned by `owner` (idempotent: placing it again changes nothing).
    fn place_hold(&self, agent: &str, owner: &str) -> impl Future<Output = Result<(), HubError>>;
    /// Releases `owner`'s hold on `agent`. `Ok(false)` when there was no such hold (already released).
    fn release_hold(&self, agent: &str, owner: &str) -> impl Future<Output = Result<bool, HubError>>;
    /// Opens a deployment epoch whose members are exempt from expiry until it closes.
    fn open_epoch(&self, members: &[String]) -> impl Future<Output = Result<u64, HubError>>;
    /// Makes an epoch terminal. `untouched` names members whose candidate credential was never installed: their
    /// principals may be gone without blocking the abort (RCCA "Make abort monotonic"). `Ok(false)` when it already
    /// was terminal.
    fn close_epoch(&self, epoch: u64, untouched: &[String]) -> impl Future<Output = Result<bool, HubError>>;
    /// The digest of the signed route bundle the hub publishes now.
    fn route_bundle(&self) -> impl Future<Output = Result<String, HubError>>;
    /// Issues a successor credential for `agent` under rotation `rotation` (its idempotency key): the predecessor stays
    /// valid beside it (the overlap). A replay of the same rotation answers the same successor; it never mints a second.
    fn begin_rotation(&self, agent: &str, rotation: &str) -> impl Future<Output = Result<IssuedCredential, HubError>>;
    /// The hub's account of `rotation`; `Ok(None)` when the hub never issued it.
    fn rotation_status(
        &self,
        agent: &str,
        rotation: &str,
    ) -> impl Future<Output = Result<Option<RotationStatus>, HubError>>;
    /// Revokes the predecessor: the successor becomes the agent's only credential. `Ok(false)` when it was committed
    /// already (a replay).
    fn commit_rotation(&self, agent: &str, rotation: &str) -> impl Future<Output = Result<bool, HubError>>;
    /// Revokes the successor and never the predecessor. `Ok(false)` when there was nothing to revoke (never issued, or
    /// aborted already); a committed rotation cannot be aborted (`Rejected`).
    fn abort_rotation(&self, agent: &str, rotation: &str) -> impl Future<Output = Result<bool, HubError>>;
    /// What references `agent` now: open epochs listing it, holds on it, its active task lease. A read (public at
    /// the hub); an agent the hub does not know is referenced by nothing.
    fn agent_references(&self, agent: &str) -> impl Future<Output = Result<AgentReferences, HubError>>;
    /// The journal-bound resurrection path (RCCA exit criteria): restores `agent`'s tombstoned row, with the credential
    /// it had, because open epoch `epoch` — which the caller's journal names — lists it; fenced like every deployment
    /// mutation. `Ok(false)` when the row was not tombstoned (a replay). Refused (`Rejected`) for an agent the epoch
    /// does not list, an epoch not open, and a revoked principal: a resurrection restores a row, never a credential.
    fn resurrect_agent(&self, agent: &str, epoch: u64) -> impl Future<Output = Result<bool, HubError>>;
}

/// An SSH endpoint and the host key the engine holds authority for. Every operation presents the expected key; a
/// different key on the far end is an identity change, never retried.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Endpoint {
    pub node: String,
    pub host_key: String,
}

/// Typed operations over SSH. Every mutating operation carries its journal operation id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SshRequest {
    /// Read-only: stat and read the identity files, installed source, barrier, service state.
    Observe,
    WriteFileAtomic {
        operation_id: String,
        path: String,
        content: crate::secret::Secret,
        mode: u32,
    },
    /// Unlink one regular file and fsync its directory (a canonicalization removes a historical receipt).
    RemoveFile {
        operation_id: String,
        path: String,
    },
    StopService {
        operation_id: String,
    },
    StartService {
        operation_id: String,
    },
    /// Probe the staging area's storage before anything is staged: write a probe file, fsync it, rename it into
    /// place, fsync the directory, remove it, and report the free space. Leaves nothing behind. On storage that does
    /// not return, it never answers (the caller's timeout is the finding).
    ProbeStorage {
        operation_id: String,
    },
    /// Fetch a capsule into the node's staging area (a network fetch: never after quiescence).
    StageArtifact {
        operation_id: String,
        digest: String,
    },
    /// Install from staged capsules only.
    RunInstaller {
        operation_id: String,
        revision: String,
        generation: u64,
        required_digests: Vec<String>,
        /// The frozen route bundle the generated runtime configuration must name (RCCA "every subprocess and
        /// receipt in the epoch to name its digest").
        route_digest: String,
    },
    /// Reverse recovery: put back the install the node kept when the installer replaced it (source, venv, the
    /// release's signed manifest, the barrier), exactly `revision` at `generation`, from the node's own disk — nothing
    /// is fetched. Refused when the node kept no such install.
    RestorePrevious {
        operation_id: String,
        revision: String,
        generation: u64,
    },
    /// Onboarding's hardware-sync seed (seed 000, `ensure_hardware_sync_configured`): on a freshly deployed machine,
    /// register the hardware-sync timer with the machine's own MAAS credentials and start it.
    SeedHardwareSync {
        operation_id: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Regular,
    Symlink,
    Directory,
}

/// What a read-only `stat` + read of one file shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileFacts {
    pub kind: FileKind,
    pub mode: u32,
    pub owner: String,
    pub nlink: u32,
    pub content: String,
}

/// Everything the preflight reads from one node, without changing anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeObservation {
    pub node: String,
    pub env: Option<FileFacts>,
    pub marker: Option<FileFacts>,
    pub manifest: Option<FileFacts>,
    /// A historical deployment receipt (`~/.mac/deployment-receipt`), which installers before the signed manifest
    /// wrote instead of it (`rollout::decode`).
    pub receipt: Option<FileFacts>,
    /// Installed source and venv: `(revision, generation)`.
    pub installed: Option<(String, u64)>,
    pub barrier_generation: u64,
}

impl NodeObservation {
    /// The value of `key` in the node's environment file, if it has one.
    pub fn env_value(&self, key: &str) -> Option<&str> {
        let content = &self.env.as_ref()?.content;
        content.lines().find_map(|line| line.strip_prefix(key)?.strip_prefix('='))
    }
}

/// What an observation of a node shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeReport {
    pub identity: NodeObservation,
    pub service_running: bool,
    pub staged: Vec<String>,
    /// The agent's credential file (`engine::rotation::CREDENTIAL_FILE`), if the node has one: the bearer its agent
    /// presents on every heartbeat. A secret: its `Debug` is redacted.
    pub credential: Option<CredentialFacts>,
}

/// What a read-only `stat` + read of the agent's credential file shows; the token is a [`crate::secret::Secret`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialFacts {
    pub kind: FileKind,
    pub mode: u32,
    pub owner: String,
    pub token: crate::secret::Secret,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SshResponse {
    Observed(Box<NodeReport>),
    /// What a storage probe found (`SshRequest::ProbeStorage`).
    StorageProbed(StorageProbe),
    Done,
}

/// One check of a storage probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeCheck {
    Passed,
    /// The check failed with this error.
    Failed(String),
    /// Not attempted: an earlier check failed.
    NotRun,
}

/// What a node's storage probe found, in the order it checks (RCCA: "make storage health an admission gate"): a
/// probe file written, fsynced, renamed into place, its directory fsynced (then removed), and the free space left
/// in the staging area.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageProbe {
    pub write: ProbeCheck,
    pub file_fsync: ProbeCheck,
    pub rename: ProbeCheck,
    pub dir_fsync: ProbeCheck,
    pub free_bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SshError {
    #[error("ssh: {0}")]
    Transport(#[from] TransportError),
    /// The far end presented another host key: not the node the engine holds authority for.
    #[error("host key mismatch: {presented}")]
    HostKeyMismatch { presented: String },
    /// The node refused the operation for a reason a retry cannot fix.
    #[error("refused: {0}")]
    Refused(String),
}

/// SSH to nodes and the hub host.
pub trait Ssh {
    fn run(&self, endpoint: &Endpoint, request: SshRequest) -> impl Future<Output = Result<SshResponse, SshError>>;
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretsError {
    #[error("secrets store unreachable: {0}")]
    Transport(#[from] TransportError),
    #[error("no secret for {0}")]
    NotFound(String),
    /// The store answered that it cannot serve now (503): worth retrying.
    #[error("secrets store unavailable: {0}")]
    Unavailable(String),
    /// The store refused (403: a disabled site, an expired token): a retry cannot fix it.
    #[error("secrets store refused: {0}")]
    Refused(String),
    /// The store has no policy for what was asked (501: the site cannot issue bootstrap tokens): a capability the
    /// site lacks, which a person must add.
    #[error("secrets store cannot serve this: {0}")]
    Unsupported(String),
}

/// The secrets store (Vault-like): the attestation key each worker's identity must carry. Deployment validates and
/// re-writes the current key; it never rotates one (RCCA: rotation is a separate per-node state machine).
pub trait Secrets {
    fn attestation_key(&self, node: &str) -> impl Future<Output = Result<crate::secret::Secret, SecretsError>>;
    /// The controller's current hub credential (issued and rotated outside deployment).
    fn hub_credential(&self) -> impl Future<Output = Result<crate::secret::Secret, SecretsError>>;
}

/// The content-addressed artifact store the nodes stage capsules from. The controller checks every capsule of a
/// rollout exists before it freezes a plan: a missing artifact is a reason to refuse the rollout, not a node defect.
pub trait Artifacts {
    fn available(&self, digest: &str) -> impl Future<Output = Result<bool, TransportError>>;
}

/// Randomness the engine is allowed: jitter, drawn from a seeded stream in the simulator.
pub trait Jitter {
    fn draw(&self) -> u64;
}

/// A fleet signal the engine raises (the runbook's FleetEvents, e.g. `system.instance_silent`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signal {
    /// No heartbeat for more than the silence threshold; raised once per silence.
    InstanceSilent { instance: String, silent_for_ms: u64 },
    /// Heartbeats are back after an `InstanceSilent`.
    InstanceRecovered { instance: String, silent_for_ms: u64 },
    /// A sensor could not read the hub; the sensor keeps its state and tries again next period.
    HubReadFailed { error: HubError },
    /// A rollout event worth a person's attention (quarantine, lane verdict, retry exhausted, adoption, terminal).
    Rollout { rollout: String, event: RolloutEvent },
    /// An onboarding workflow's progress and verdict.
    Onboarding { workflow: String, event: WorkflowEvent },
    /// A decommission workflow's progress and verdict.
    Decommission { workflow: String, event: WorkflowEvent },
    /// An agent-credential rotation's progress and verdict (`rotation` is its id, `node` the agent's node).
    Rotation { rotation: String, node: String, event: RotationEvent },
}

/// Where signals go: FleetEvents in production, the trace in the simulator.
pub trait Signals {
    fn emit(&self, signal: Signal);
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JournalError {
    /// The write did not reach stable storage (disk full, I/O error); the record must be treated as not written.
    #[error("journal write failed: {0}")]
    WriteFailed(String),
    #[error("journal is corrupt: {0}")]
    Corrupt(String),
}

/// The controller's durable journal: an append-only log of records, replayed on start so that a restarted controller
/// continues where the dead one stopped. `append` returns only once the record is on stable storage.
pub trait Journal {
    fn append(&self, record: &str) -> impl Future<Output = Result<(), JournalError>>;
    fn replay(&self) -> impl Future<Output = Result<Vec<String>, JournalError>>;

    /// The records of one workflow or rollout, in append order: every record whose [`record_subject`] is `subject`,
    /// and every record whose subject cannot be read (so a fold over them still meets, and reports, a damaged line
    /// of its own kind). What a driver reads before each stage: a backend that indexes records by subject answers
    /// in the size of that workflow's history, not of the whole journal. The default filters a full replay.
    fn replay_subject(&self, subject: &str) -> impl Future<Output = Result<Vec<String>, JournalError>> {
        async move {
            let mut records = self.replay().await?;
            records.retain(|record| record_subject(record).is_none_or(|of| of == subject));
            Ok(records)
        }
    }
}

/// Whose record a journal line is: the `workflow` of an onboarding or decommission record, the `workflow_id` of an
/// audit record, the `rollout` of a rollout record, the `rotation` of a credential rotation's record. Every record is
/// `<kind> <json object>`; `None` for a line that is not, or whose object names none of the four.
pub fn record_subject(record: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Subject<'a> {
        #[serde(borrow, default)]
        workflow: Option<std::borrow::Cow<'a, str>>,
        #[serde(borrow, default)]
        workflow_id: Option<std::borrow::Cow<'a, str>>,
        #[serde(borrow, default)]
        rollout: Option<std::borrow::Cow<'a, str>>,
        #[serde(borrow, default)]
        rotation: Option<std::borrow::Cow<'a, str>>,
    }
    let (_, json) = record.split_once(' ')?;
    let subject: Subject<'_> = serde_json::from_str(json).ok()?;
    subject.workflow.or(subject.workflow_id).or(subject.rollout).or(subject.rotation).map(std::borrow::Cow::into_owned)
}

/// Rejects a record the journal cannot store as one record: records are lines, in every backend.
pub fn check_record(record: &str) -> Result<(), JournalError> {
    if record.contains('\n') {
        return Err(JournalError::WriteFailed("a journal record is one line".into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_records_subject_is_its_workflow_its_audit_workflow_id_or_its_rollout() {
        assert_eq!(
            record_subject(r#"onboard {"record":"checkpoint","workflow":"onboard-n1","stage":"x"}"#).as_deref(),
            Some("onboard-n1")
        );
        assert_eq!(
            record_subject(r#"audit {"actor_id":"p","workflow_id":"decommission-n2"}"#).as_deref(),
            Some("decommission-n2")
        );
        assert_eq!(
            record_subject(r#"rollout {"record":"intent","rollout":"rollout-r2","lane":1}"#).as_deref(),
            Some("rollout-r2")
        );
        assert_eq!(
            record_subject(r#"rotation {"record":"intent","rotation":"rotation-node-03-1","node":"node-03"}"#)
                .as_deref(),
            Some("rotation-node-03-1")
        );
        assert_eq!(record_subject(r#"onboard {"workflow":"with \"quotes\""}"#).as_deref(), Some("with \"quotes\""));
        for unreadable in ["", "no json", "onboard {", r#"sensor {"instance":"node-01"}"#, r#"onboard {"workflow":7}"#]
        {
            assert_eq!(record_subject(unreadable), None, "{unreadable:?}");
        }
    }
}
