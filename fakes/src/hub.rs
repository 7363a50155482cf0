//! The fake agent hub: agent registry, heartbeats, the TTL sweeper with its two expiry policies, deployment epochs,
//! dispatch holds and task leases, controller principals with expiring credentials, the deployment lock with its
//! fence, agent-credential rotations (a successor issued beside the predecessor, both valid until the rotation is
//! committed or aborted), and the journal-bound resurrection of a tombstoned row an open epoch pins — a plain
//! synchronous model plus its request handler.
//!
//! Sources: `seeds/003_65d56b75d2c60639.txt` ("Deployment-epoch membership outranks ordinary heartbeat expiry",
//! "Replacement plan": TTL makes durable workers offline, never deleted) and `seeds/004_c1eb714c76320200.txt`
//! (30 s heartbeats). The model is its own database: every handled request is a committed transaction, so the
//! registry survives a crash of the hub host; what a crash loses is in-flight requests, not rows.
//!
//! Time comes in as `now_ms` on the hub's own clock (which may be skewed); the model never reads a clock.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::maas::vault::{SECRET_PREFIX, splitmix64};

/// The hub's default fungible-agent TTL: one hour (`src/mac/services.py` in the RCCA).
pub const DEFAULT_AGENT_TTL_MS: u64 = 3_600_000;
/// How often the sweeper runs.
pub const DEFAULT_SWEEP_INTERVAL_MS: u64 = 60_000;

/// Which agents the TTL sweeper may expire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExpiryPolicy {
    /// The incident's policy: tombstone any silent fungible agent without an active task lease. Deployment-epoch
    /// membership is not an exemption, and durable agents are never looked at.
    Legacy,
    /// The RCCA's replacement: never expire a member of an open deployment epoch; a silent durable agent becomes
    /// `offline` (never deleted); an unrelated silent fungible agent is still tombstoned.
    EpochAware,
}

/// Whether an agent is a long-lived worker identity or interchangeable capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentKind {
    Durable,
    Fungible,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentStatus {
    Online,
    /// Silent past the TTL but kept (durable agents under `epoch_aware`); a heartbeat brings it back online.
    Offline,
    /// Deleted from dispatch: heartbeats are refused as from an unknown agent until it is registered again.
    Tombstoned,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentRow {
    pub id: String,
    /// The agent's bearer token. Never part of an event, a response or a `Debug` line of a request.
    #[serde(skip)]
    token: Token,
    /// The generation of `token`: every credential the hub accepts for an agent has its own, from 1 (the first
    /// enrolment's) up; a rotation's successor is the next one issued.
    pub generation: u64,
    /// The highest generation ever issued to this agent (so a later credential never reuses one).
    pub issued_generation: u64,
    /// The generation of the credential that authenticated the last accepted heartbeat.
    pub heartbeat_generation: Option<u64>,
    pub kind: AgentKind,
    pub status: AgentStatus,
    /// Hub-clock time of the last accepted heartbeat, or of registration when none arrived yet.
    pub last_seen_ms: u64,
    pub heartbeats: u64,
    /// The source revision the agent's last accepted heartbeat reported.
    pub revision: Option<String>,
}

/// A bearer token held by the hub; its `Debug` never shows the value.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    pub fn new(value: impl Into<String>) -> Token {
        Token(value.into())
    }

    /// The token's value, for the one place that must send it (the answer to the issue that minted it).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

/// Where an agent-credential rotation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RotationState {
    /// The successor is issued; predecessor and successor both authenticate heartbeats (the overlap).
    Open,
    /// The predecessor is revoked: the successor is the agent's credential.
    Committed,
    /// The successor is revoked: the predecessor stays the agent's credential.
    Aborted,
}

/// One rotation of one agent's credential, by the rotation id its controller gave it (the idempotency key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rotation {
    pub state: RotationState,
    /// The successor's generation.
    pub generation: u64,
    successor: Token,
    /// Heartbeats the successor authenticated while the rotation was open.
    pub successor_heartbeats: u64,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[redacted]")
    }
}

/// A principal the hub authenticates (the deployment controller): its current credential and when that expires.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Principal {
    token: Token,
    expires_at_ms: u64,
}

/// The deployment lock: one controller at a time holds it, and every mutation it makes presents the lock's fence,
/// so a controller that lost the lock (its lease ran out, a successor superseded it) cannot mutate any more.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeployLock {
    pub holder: String,
    pub fence: u64,
    pub expires_at_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Epoch {
    pub id: u64,
    pub members: BTreeSet<String>,
    pub open: bool,
}

/// Configuration of one hub.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HubConfig {
    pub agent_ttl_ms: u64,
    pub expiry: ExpiryPolicy,
    pub sweep_interval_ms: u64,
}

impl Default for HubConfig {
    fn default() -> Self {
        HubConfig {
            agent_ttl_ms: DEFAULT_AGENT_TTL_MS,
            expiry: ExpiryPolicy::EpochAware,
            sweep_interval_ms: DEFAULT_SWEEP_INTERVAL_MS,
        }
    }
}

/// A request to the hub, as its HTTP front end (a later issue) will decode it. `token` is the agent's bearer
/// credential; [`Request`]'s `Debug` redacts it.
#[derive(Clone, PartialEq, Eq)]
pub enum Request {
    Register {
        agent: String,
        kind: AgentKind,
        token: String,
    },
    /// `revision` is the source revision the agent runs, reported with its heartbeat.
    Heartbeat {
        agent: String,
        token: String,
        revision: Option<String>,
    },
    /// The instance-status sensor's read: every row with its last-seen time, and the hub's `now`.
    ReadHeartbeats,
    OpenEpoch {
        members: Vec<String>,
    },
    /// Makes an epoch terminal (finalise or abort). `untouched` names the members whose candidate credential the
    /// controller never installed: under `epoch_aware`, their principals may be gone (registry cleanup) without
    /// blocking the abort, as long as a hold keeps them out of dispatch (RCCA P0 "Make abort monotonic for
    /// untouched participants"). Installed members keep the exact continuity check.
    CloseEpoch {
        epoch: u64,
        untouched: Vec<String>,
    },
    PlaceHold {
        agent: String,
        owner: String,
    },
    ReleaseHold {
        agent: String,
        owner: String,
    },
    GrantLease {
        agent: String,
        until_ms: u64,
    },
    Dispatch {
        agent: String,
        task: String,
    },
    /// The digest of the signed route bundle the hub publishes (the one route authority of the RCCA).
    ReadRouteBundle,
    /// Issues a successor credential for `agent` under `rotation` (the idempotency key): the predecessor stays valid
    /// beside it. A replay answers the same successor and mints nothing; another rotation of the agent still open,
    /// or this one aborted, is a conflict.
    BeginRotation {
        agent: String,
        rotation: String,
    },
    /// The rotation's state, its successor's generation and the heartbeats the successor authenticated.
    ReadRotation {
        agent: String,
        rotation: String,
    },
    /// Revokes the predecessor: the successor becomes the agent's credential. A replay changes nothing.
    CommitRotation {
        agent: String,
        rotation: String,
    },
    /// Revokes the successor, never the predecessor. Nothing to revoke (never issued, aborted already) changes
    /// nothing; a committed rotation is a conflict.
    AbortRotation {
        agent: String,
        rotation: String,
    },
    /// Every hold, by agent (the controller accounts for operator holds it must not release).
    ReadHolds,
    /// What references one agent now: the open epochs that list it, the holds on it (any owner) and its active task
    /// lease (a decommission refuses a worker anything references; RCCA replacement plan).
    ReadReferences {
        agent: String,
    },
    /// The journal-bound resurrection path (RCCA exit criteria: "Every journal-pinned agent identity is present or
    /// is restored through an explicit journal-bound resurrection path"): restores `agent`'s tombstoned row, with the
    /// credential it had, because open epoch `epoch` — which the caller's journal names — lists it. Its silence starts
    /// again from now. Refused for an agent the epoch does not list, an epoch not open, and a principal that was
    /// revoked (a resurrection restores a row, never a credential). A row that is not tombstoned is left as it is.
    Resurrect {
        agent: String,
        epoch: u64,
    },
    /// Checks a principal's credential; answers when it expires.
    Authenticate {
        principal: String,
        token: String,
    },
    /// Takes the deployment lock when it is free or its lease ran out; answers the new fence, or who holds it.
    AcquireLock {
        holder: String,
        lease_ms: u64,
    },
    /// Takes over the lock held under `fence` (a dead controller's, named by the journal the caller adopted), even
    /// before its lease runs out. Refused when `fence` is not the current one.
    SupersedeLock {
        holder: String,
        fence: u64,
        lease_ms: u64,
    },
    /// Extends the lease of the lock held under `fence`.
    RenewLock {
        fence: u64,
        lease_ms: u64,
    },
    ReleaseLock {
        fence: u64,
    },
    /// A controller's request: its principal's credential, and the lock fence it holds. A bare request (without
    /// this envelope) is the hub's local operator console, trusted as such.
    Authorized {
        principal: String,
        token: String,
        fence: Option<u64>,
        request: Box<Request>,
    },
}

impl Request {
    /// Requests that change deployment state: under a held lock they must present its fence.
    fn is_fenced_mutation(&self) -> bool {
        matches!(
            self,
            Request::OpenEpoch { .. }
                | Request::CloseEpoch { .. }
                | Request::PlaceHold { .. }
                | Request::ReleaseHold { .. }
                | Request::Resurrect { .. }
        )
    }
}

impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Request::Register { agent, kind, .. } => {
                write!(f, "Register {{ agent: {agent:?}, kind: {kind:?}, token: [redacted] }}")
            }
            Request::Heartbeat { agent, revision, .. } => {
                write!(f, "Heartbeat {{ agent: {agent:?}, token: [redacted], revision: {revision:?} }}")
            }
            Request::ReadHeartbeats => write!(f, "ReadHeartbeats"),
            Request::OpenEpoch { members } => write!(f, "OpenEpoch {{ members: {members:?} }}"),
            Request::CloseEpoch { epoch, untouched } => {
                write!(f, "CloseEpoch {{ epoch: {epoch}, untouched: {untouched:?} }}")
            }
            Request::PlaceHold { agent, owner } => write!(f, "PlaceHold {{ agent: {agent:?}, owner: {owner:?} }}"),
            Request::ReleaseHold { agent, owner } => write!(f, "ReleaseHold {{ agent: {agent:?}, owner: {owner:?} }}"),
            Request::GrantLease { agent, until_ms } => {
                write!(f, "GrantLease {{ agent: {agent:?}, until_ms: {until_ms} }}")
            }
            Request::Dispatch { agent, task } => write!(f, "Dispatch {{ agent: {agent:?}, task: {task:?} }}"),
            Request::ReadRouteBundle => write!(f, "ReadRouteBundle"),
            Request::BeginRotation { agent, rotation } => {
                write!(f, "BeginRotation {{ agent: {agent:?}, rotation: {rotation:?} }}")
            }
            Request::ReadRotation { agent, rotation } => {
                write!(f, "ReadRotation {{ agent: {agent:?}, rotation: {rotation:?} }}")
            }
            Request::CommitRotation { agent, rotation } => {
                write!(f, "CommitRotation {{ agent: {agent:?}, rotation: {rotation:?} }}")
            }
            Request::AbortRotation { agent, rotation } => {
                write!(f, "AbortRotation {{ agent: {agent:?}, rotation: {rotation:?} }}")
            }
            Request::ReadHolds => write!(f, "ReadHolds"),
            Request::ReadReferences { agent } => write!(f, "ReadReferences {{ agent: {agent:?} }}"),
            Request::Resurrect { agent, epoch } => write!(f, "Resurrect {{ agent: {agent:?}, epoch: {epoch} }}"),
            Request::Authenticate { principal, .. } => {
                write!(f, "Authenticate {{ principal: {principal:?}, token: [redacted] }}")
            }
            Request::AcquireLock { holder, lease_ms } => {
                write!(f, "AcquireLock {{ holder: {holder:?}, lease_ms: {lease_ms} }}")
            }
            Request::SupersedeLock { holder, fence, lease_ms } => {
                write!(f, "SupersedeLock {{ holder: {holder:?}, fence: {fence}, lease_ms: {lease_ms} }}")
            }
            Request::RenewLock { fence, lease_ms } => write!(f, "RenewLock {{ fence: {fence}, lease_ms: {lease_ms} }}"),
            Request::ReleaseLock { fence } => write!(f, "ReleaseLock {{ fence: {fence} }}"),
            Request::Authorized { principal, fence, request, .. } => write!(
                f,
                "Authorized {{ principal: {principal:?}, token: [redacted], fence: {fence:?}, request: {request:?} }}"
            ),
        }
    }
}

/// One row as the heartbeat read returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatRow {
    pub agent: String,
    pub status: AgentStatus,
    pub last_seen_ms: u64,
    pub revision: Option<String>,
    /// The generation of the credential that authenticated the last accepted heartbeat (`None` before the first).
    pub generation: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    Ok,
    Heartbeats {
        now_ms: u64,
        rows: Vec<HeartbeatRow>,
    },
    EpochOpened {
        epoch: u64,
    },
    RouteBundle {
        digest: String,
    },
    Holds {
        holds: BTreeMap<String, Vec<String>>,
    },
    /// What references one agent: open epochs listing it (ascending), owners of holds on it (sorted), and when its
    /// task lease ends on the hub's clock while one is active. An agent nothing references (an unknown one too) has
    /// empty lists and no lease.
    References {
        epochs: Vec<u64>,
        holds: Vec<String>,
        lease_until_ms: Option<u64>,
    },
    Authenticated {
        expires_at_ms: u64,
    },
    LockGranted {
        fence: u64,
        expires_at_ms: u64,
    },
    /// The lock is held by another controller until `expires_at_ms` (hub clock).
    LockHeld {
        holder: String,
        fence: u64,
        expires_at_ms: u64,
    },
    /// The successor of a rotation: its generation and its token (redacted in `Debug`).
    RotationIssued {
        generation: u64,
        token: Token,
    },
    RotationRead {
        state: RotationState,
        generation: u64,
        successor_heartbeats: u64,
    },
    /// A commit or an abort: `revoked` is false when it changed nothing (a replay, nothing to revoke).
    RotationEnded {
        revoked: bool,
    },
    /// A resurrection: `restored` is false when the row was not tombstoned (a replay changes nothing).
    Resurrected {
        restored: bool,
    },
    Error(HubError),
}

/// Errors the hub answers with; the HTTP status each maps to is in the comment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HubError {
    /// 401: the bearer token does not match the agent's.
    Unauthorized { agent: String },
    /// 404: no such agent, or a tombstoned one (the incident's "newly installed bearer was rejected as unknown").
    UnknownAgent { agent: String },
    /// 404
    UnknownEpoch { epoch: u64 },
    /// 409: closing an epoch twice, releasing a hold that is not there.
    Conflict { reason: String },
    /// 409: dispatch to a held agent is refused.
    Held { agent: String, owners: Vec<String> },
    /// 401: the principal's credential is not the current one, or it has expired.
    CredentialRejected { principal: String, expired: bool },
    /// 409: a mutation under the deployment lock without its current fence (a stale controller).
    StaleFence { presented: Option<u64>, current: u64, holder: String },
    /// 409: an abort found a participant whose candidate credential was installed but whose principal is gone.
    PrincipalDrift { agent: String },
    /// 404: the incident's abort: it locks every participant row, and one was deleted.
    ParticipantMissing { agent: String },
    /// 404: the hub never issued this rotation of this agent.
    UnknownRotation { agent: String, rotation: String },
}

impl std::fmt::Display for HubError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HubError::Unauthorized { agent } => write!(f, "invalid credentials for agent {agent}"),
            HubError::UnknownAgent { agent } => write!(f, "unknown agent {agent}"),
            HubError::UnknownEpoch { epoch } => write!(f, "unknown epoch {epoch}"),
            HubError::Conflict { reason } => write!(f, "conflict: {reason}"),
            HubError::Held { agent, owners } => write!(f, "agent {agent} is held by {}", owners.join(", ")),
            HubError::CredentialRejected { principal, expired: true } => {
                write!(f, "credential of principal {principal} has expired")
            }
            HubError::CredentialRejected { principal, expired: false } => {
                write!(f, "invalid credential for principal {principal}")
            }
            HubError::StaleFence { presented, current, holder } => match presented {
                Some(presented) => {
                    write!(f, "stale fence {presented}: the deployment lock is at fence {current} ({holder})")
                }
                None => write!(f, "the deployment lock is held by {holder} (fence {current}); no fence presented"),
            },
            HubError::PrincipalDrift { agent } => {
                write!(f, "participant {agent} installed its candidate credential and its principal is gone")
            }
            HubError::ParticipantMissing { agent } => write!(f, "participant row {agent} not found"),
            HubError::UnknownRotation { agent, rotation } => write!(f, "unknown rotation {rotation} of agent {agent}"),
        }
    }
}

/// What happened inside the hub, for the trace. The simulator turns these into trace events. `LeaseGranted`: a task
/// lease on `agent` runs until `until_ms` on the hub's clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HubEvent {
    Registered {
        agent: String,
    },
    /// An accepted heartbeat, and the generation of the credential that authenticated it.
    Heartbeat {
        agent: String,
        generation: u64,
    },
    /// A refused heartbeat: `unauthorized` when the agent is known and its token is none of its valid credentials
    /// (false: an unknown or tombstoned agent).
    HeartbeatRefused {
        agent: String,
        unauthorized: bool,
    },
    BackOnline {
        agent: String,
    },
    Offline {
        agent: String,
        silent_ms: u64,
    },
    Tombstoned {
        agent: String,
        silent_ms: u64,
        epoch_member: bool,
    },
    /// A sweep found the agent silent past the TTL and kept it because open epoch `epoch` pins it: once per silence.
    ExpiryDeferred {
        agent: String,
        silent_ms: u64,
        epoch: u64,
    },
    EpochOpened {
        epoch: u64,
        members: u64,
    },
    EpochClosed {
        epoch: u64,
    },
    HoldPlaced {
        agent: String,
        owner: String,
    },
    HoldReleased {
        agent: String,
        owner: String,
    },
    Dispatched {
        agent: String,
        task: String,
    },
    LeaseGranted {
        agent: String,
        until_ms: u64,
    },
    DispatchRefused {
        agent: String,
        task: String,
    },
    CredentialRejected {
        principal: String,
        expired: bool,
    },
    LockAcquired {
        holder: String,
        fence: u64,
        superseded: Option<String>,
    },
    LockReleased {
        holder: String,
        fence: u64,
    },
    MutationFenced {
        holder: String,
        presented: Option<u64>,
        current: u64,
    },
    PrincipalRevoked {
        agent: String,
    },
    /// A rotation's successor was minted (a replay of the issue mints nothing and records nothing).
    CredentialIssued {
        agent: String,
        rotation: String,
        generation: u64,
    },
    /// A rotation was committed: the predecessor's generation revoked.
    RotationCommitted {
        agent: String,
        rotation: String,
        revoked_generation: u64,
    },
    /// A rotation was aborted: its successor's generation revoked (also when a new enrolment or a revoked principal
    /// ends a rotation still open).
    RotationAborted {
        agent: String,
        rotation: String,
        revoked_generation: u64,
    },
    /// A tombstoned row was restored through the journal-bound path, under open epoch `epoch` that lists it.
    Resurrected {
        agent: String,
        epoch: u64,
    },
}

/// The hub's state. All collections are ordered so that sweeps and reads are deterministic.
#[derive(Debug, Clone)]
pub struct Hub {
    config: HubConfig,
    agents: BTreeMap<String, AgentRow>,
    epochs: BTreeMap<u64, Epoch>,
    holds: BTreeMap<String, BTreeSet<String>>,
    leases: BTreeMap<String, u64>,
    next_epoch: u64,
    route_digest: String,
    route_generation: u64,
    principals: BTreeMap<String, Principal>,
    lock: Option<DeployLock>,
    next_fence: u64,
    /// Agents an epoch kept past the TTL, with the `last_seen_ms` of the silence that was reported.
    deferred: BTreeMap<String, u64>,
    /// Rotations by `(agent, rotation id)`.
    rotations: BTreeMap<(String, String), Rotation>,
    /// Seeds the tokens the hub mints for rotations ([`Hub::set_token_seed`]).
    token_seed: u64,
}

impl Hub {
    pub fn new(config: HubConfig) -> Hub {
        Hub {
            config,
            agents: BTreeMap::new(),
            epochs: BTreeMap::new(),
            holds: BTreeMap::new(),
            leases: BTreeMap::new(),
            next_epoch: 1,
            route_digest: "sha256:routes-1".to_owned(),
            route_generation: 1,
            principals: BTreeMap::new(),
            lock: None,
            next_fence: 1,
            deferred: BTreeMap::new(),
            rotations: BTreeMap::new(),
            token_seed: 0,
        }
    }

    /// Seeds the successor tokens this hub mints (the simulator draws it from the run's seed tree): the same seed,
    /// agent and generation give the same token, and every token starts with `fleetsim-secret-`.
    pub fn set_token_seed(&mut self, seed: u64) {
        self.token_seed = seed;
    }

    /// The token of `agent`'s credential of `generation`.
    fn mint(&self, agent: &str, generation: u64) -> Token {
        let agent_seed = agent
            .bytes()
            .fold(splitmix64(self.token_seed ^ 0x726f_7461_7465), |acc, byte| splitmix64(acc ^ u64::from(byte)));
        let value = splitmix64(agent_seed ^ generation);
        Token(format!("{SECRET_PREFIX}agent-{value:016x}{:016x}", splitmix64(value)))
    }

    /// The rotation of `agent` that is open, if any: its id and row.
    fn open_rotation(&self, agent: &str) -> Option<(&String, &Rotation)> {
        self.rotations
            .range((agent.to_owned(), String::new())..)
            .take_while(|((of, _), _)| of == agent)
            .find(|(_, rotation)| rotation.state == RotationState::Open)
            .map(|((_, id), rotation)| (id, rotation))
    }

    /// Aborts `agent`'s open rotation, if it has one (a new enrolment or a revoked principal ends it).
    fn abort_open_rotation(&mut self, agent: &str, events: &mut Vec<HubEvent>) {
        let Some(id) = self.open_rotation(agent).map(|(id, _)| id.clone()) else { return };
        if let Some(rotation) = self.rotations.get_mut(&(agent.to_owned(), id.clone())) {
            rotation.state = RotationState::Aborted;
            let revoked_generation = rotation.generation;
            events.push(HubEvent::RotationAborted { agent: agent.to_owned(), rotation: id, revoked_generation });
        }
    }

    /// A rotation, by agent and id.
    pub fn rotation(&self, agent: &str, rotation: &str) -> Option<&Rotation> {
        self.rotations.get(&(agent.to_owned(), rotation.to_owned()))
    }

    /// Issues (or replaces) `principal`'s credential, valid until `expires_at_ms` on the hub clock. The old one stops
    /// working at once: the rotation state machine that calls this is outside deployment (RCCA "Delete credential
    /// rotation from software deployment").
    pub fn issue_credential(&mut self, principal: &str, token: &str, expires_at_ms: u64) {
        self.principals.insert(principal.to_owned(), Principal { token: Token(token.to_owned()), expires_at_ms });
    }

    /// Makes `principal`'s current credential expire at `at_ms` (the expired-credentials fault).
    pub fn expire_credential(&mut self, principal: &str, at_ms: u64) {
        if let Some(row) = self.principals.get_mut(principal) {
            row.expires_at_ms = row.expires_at_ms.min(at_ms);
        }
    }

    /// Registry cleanup: the agent's principal is revoked (its row tombstoned, its token void, a rotation still open
    /// aborted).
    pub fn revoke_principal(&mut self, agent: &str, events: &mut Vec<HubEvent>) {
        if let Some(row) = self.agents.get_mut(agent) {
            row.status = AgentStatus::Tombstoned;
            row.token = Token::default();
            events.push(HubEvent::PrincipalRevoked { agent: agent.to_owned() });
            self.abort_open_rotation(agent, events);
        }
    }

    /// The deployment lock, if any controller holds one (possibly with its lease run out).
    pub fn lock(&self) -> Option<&DeployLock> {
        self.lock.as_ref()
    }

    fn grant_lock(&mut self, now_ms: u64, holder: String, lease_ms: u64, events: &mut Vec<HubEvent>) -> Response {
        let superseded = self.lock.take().map(|lock| lock.holder);
        let fence = self.next_fence;
        self.next_fence += 1;
        let expires_at_ms = now_ms.saturating_add(lease_ms);
        events.push(HubEvent::LockAcquired { holder: holder.clone(), fence, superseded });
        self.lock = Some(DeployLock { holder, fence, expires_at_ms });
        Response::LockGranted { fence, expires_at_ms }
    }

    fn handle_authorized(
        &mut self,
        now_ms: u64,
        principal: String,
        token: String,
        fence: Option<u64>,
        request: Request,
        events: &mut Vec<HubEvent>,
    ) -> Response {
        let credential = match self.principals.get(&principal) {
            Some(row) if row.token.0 != token => Err(false),
            Some(row) if now_ms >= row.expires_at_ms => Err(true),
            Some(_) => Ok(()),
            None => Err(false),
        };
        if let Err(expired) = credential {
            events.push(HubEvent::CredentialRejected { principal: principal.clone(), expired });
            return Response::Error(HubError::CredentialRejected { principal, expired });
        }
        if request.is_fenced_mutation() {
            if let Some(lock) = &self.lock {
                if fence != Some(lock.fence) {
                    events.push(HubEvent::MutationFenced {
                        holder: lock.holder.clone(),
                        presented: fence,
                        current: lock.fence,
                    });
                    return Response::Error(HubError::StaleFence {
                        presented: fence,
                        current: lock.fence,
                        holder: lock.holder.clone(),
                    });
                }
            }
        }
        self.handle(now_ms, request, events)
    }

    pub fn config(&self) -> HubConfig {
        self.config
    }

    pub fn agent(&self, id: &str) -> Option<&AgentRow> {
        self.agents.get(id)
    }

    /// Whether `token` is the current credential of agent `id` (a registered, not tombstoned row); for the HTTP
    /// front end's registration check. The token itself never leaves the hub.
    pub fn holds_agent_token(&self, id: &str, token: &str) -> bool {
        self.agents.get(id).is_some_and(|row| row.status != AgentStatus::Tombstoned && row.token.0 == token)
    }

    /// Whether a heartbeat of `agent` with `token` would be taken: its current credential, or its open rotation's
    /// successor (the overlap); otherwise the error [`Hub::handle`] answers such a heartbeat with. No event: for the
    /// HTTP front end's check from the headers, before it reads a body.
    pub fn heartbeat_credential(&self, agent: &str, token: &str) -> Result<(), HubError> {
        match self.agents.get(agent) {
            Some(row) if row.status != AgentStatus::Tombstoned => {
                let successor = self.open_rotation(agent).is_some_and(|(_, rotation)| rotation.successor.0 == token);
                if row.token.0 == token || successor {
                    Ok(())
                } else {
                    Err(HubError::Unauthorized { agent: agent.to_owned() })
                }
            }
            _ => Err(HubError::UnknownAgent { agent: agent.to_owned() }),
        }
    }

    /// Whether agent `id` has a row that is not tombstoned.
    pub fn is_registered(&self, id: &str) -> bool {
        self.agents.get(id).is_some_and(|row| row.status != AgentStatus::Tombstoned)
    }

    pub fn agents(&self) -> impl Iterator<Item = &AgentRow> {
        self.agents.values()
    }

    pub fn epoch(&self, id: u64) -> Option<&Epoch> {
        self.epochs.get(&id)
    }

    pub fn holds_on(&self, agent: &str) -> Vec<String> {
        self.holds.get(agent).map(|owners| owners.iter().cloned().collect()).unwrap_or_default()
    }

    /// The digest of the route bundle the hub publishes now.
    pub fn route_digest(&self) -> String {
        self.route_digest.clone()
    }

    /// A route swap: the hub starts publishing a different signed route bundle (a new route authority).
    pub fn swap_route_bundle(&mut self) -> String {
        self.route_generation += 1;
        self.route_digest = format!("sha256:routes-{}", self.route_generation);
        self.route_digest.clone()
    }

    /// Handles one request at hub time `now_ms`, appending what happened to `events`.
    pub fn handle(&mut self, now_ms: u64, request: Request, events: &mut Vec<HubEvent>) -> Response {
        match request {
            Request::Register { agent, kind, token } => {
                // A restart re-registering with its current credential keeps it; anything else is a new enrolment,
                // whose credential is a new generation (and which ends a rotation still open).
                let existing = self.agents.get(&agent);
                let issued = existing.map_or(0, |row| row.issued_generation);
                let kept = existing
                    .filter(|row| row.status != AgentStatus::Tombstoned && row.token.0 == token)
                    .map(|row| row.generation);
                if kept.is_none() {
                    self.abort_open_rotation(&agent, events);
                }
                let generation = kept.unwrap_or(issued + 1);
                self.agents.insert(
                    agent.clone(),
                    AgentRow {
                        id: agent.clone(),
                        token: Token(token),
                        generation,
                        issued_generation: issued.max(generation),
                        heartbeat_generation: None,
                        kind,
                        status: AgentStatus::Online,
                        last_seen_ms: now_ms,
                        heartbeats: 0,
                        revision: None,
                    },
                );
                events.push(HubEvent::Registered { agent });
                Response::Ok
            }
            Request::Heartbeat { agent, token, revision } => {
                // The open rotation's successor authenticates beside the current credential (the overlap).
                let successor = self
                    .open_rotation(&agent)
                    .filter(|(_, rotation)| rotation.successor.0 == token)
                    .map(|(id, rotation)| (id.clone(), rotation.generation));
                match self.agents.get_mut(&agent) {
                    Some(row) if row.status != AgentStatus::Tombstoned => {
                        let generation = if row.token.0 == token {
                            row.generation
                        } else if let Some((_, generation)) = &successor {
                            *generation
                        } else {
                            events.push(HubEvent::HeartbeatRefused { agent: agent.clone(), unauthorized: true });
                            return Response::Error(HubError::Unauthorized { agent });
                        };
                        row.last_seen_ms = now_ms;
                        row.heartbeats += 1;
                        row.revision = revision;
                        row.heartbeat_generation = Some(generation);
                        if row.status == AgentStatus::Offline {
                            row.status = AgentStatus::Online;
                            events.push(HubEvent::BackOnline { agent: agent.clone() });
                        }
                        if let Some((id, _)) = successor {
                            if let Some(rotation) = self.rotations.get_mut(&(agent.clone(), id)) {
                                rotation.successor_heartbeats += 1;
                            }
                        }
                        events.push(HubEvent::Heartbeat { agent, generation });
                        Response::Ok
                    }
                    _ => {
                        events.push(HubEvent::HeartbeatRefused { agent: agent.clone(), unauthorized: false });
                        Response::Error(HubError::UnknownAgent { agent })
                    }
                }
            }
            Request::ReadHeartbeats => Response::Heartbeats {
                now_ms,
                rows: self
                    .agents
                    .values()
                    .map(|row| HeartbeatRow {
                        agent: row.id.clone(),
                        status: row.status,
                        last_seen_ms: row.last_seen_ms,
                        revision: row.revision.clone(),
                        generation: row.heartbeat_generation,
                    })
                    .collect(),
            },
            Request::OpenEpoch { members } => {
                let id = self.next_epoch;
                self.next_epoch += 1;
                let members: BTreeSet<String> = members.into_iter().collect();
                events.push(HubEvent::EpochOpened { epoch: id, members: members.len() as u64 });
                self.epochs.insert(id, Epoch { id, members, open: true });
                Response::EpochOpened { epoch: id }
            }
            Request::CloseEpoch { epoch, untouched } => {
                let members = match self.epochs.get(&epoch) {
                    None => return Response::Error(HubError::UnknownEpoch { epoch }),
                    Some(row) if !row.open => {
                        let reason = format!("epoch {epoch} is already terminal");
                        return Response::Error(HubError::Conflict { reason });
                    }
                    Some(row) => row.members.clone(),
                };
                for member in &members {
                    let present = self.agents.get(member).is_some_and(|row| row.status != AgentStatus::Tombstoned);
                    if present {
                        continue;
                    }
                    let held = self.holds.get(member).is_some_and(|owners| !owners.is_empty());
                    let error = match self.config.expiry {
                        // The incident's abort locks every participant row: one deleted row is a 404, forever.
                        ExpiryPolicy::Legacy => HubError::ParticipantMissing { agent: member.clone() },
                        ExpiryPolicy::EpochAware if untouched.contains(member) && held => continue,
                        ExpiryPolicy::EpochAware if untouched.contains(member) => HubError::Conflict {
                            reason: format!("untouched participant {member} has no superseding hold"),
                        },
                        ExpiryPolicy::EpochAware => HubError::PrincipalDrift { agent: member.clone() },
                    };
                    return Response::Error(error);
                }
                if let Some(row) = self.epochs.get_mut(&epoch) {
                    row.open = false;
                }
                events.push(HubEvent::EpochClosed { epoch });
                Response::Ok
            }
            Request::PlaceHold { agent, owner } => {
                // A tombstoned row can still be held (a superseding hold over a revoked principal); an unknown cannot.
                if !self.agents.contains_key(&agent) {
                    return Response::Error(HubError::UnknownAgent { agent });
                }
                if self.holds.entry(agent.clone()).or_default().insert(owner.clone()) {
                    events.push(HubEvent::HoldPlaced { agent, owner });
                }
                Response::Ok
            }
            Request::ReleaseHold { agent, owner } => {
                let removed = self.holds.get_mut(&agent).is_some_and(|owners| owners.remove(&owner));
                if !removed {
                    return Response::Error(HubError::Conflict { reason: format!("{owner} holds no hold on {agent}") });
                }
                if self.holds.get(&agent).is_some_and(BTreeSet::is_empty) {
                    self.holds.remove(&agent);
                }
                events.push(HubEvent::HoldReleased { agent, owner });
                Response::Ok
            }
            Request::GrantLease { agent, until_ms } => {
                if !self.agents.contains_key(&agent) {
                    return Response::Error(HubError::UnknownAgent { agent });
                }
                self.leases.insert(agent.clone(), until_ms);
                events.push(HubEvent::LeaseGranted { agent, until_ms });
                Response::Ok
            }
            Request::ReadRouteBundle => Response::RouteBundle { digest: self.route_digest.clone() },
            Request::BeginRotation { agent, rotation } => self.begin_rotation(agent, rotation, events),
            Request::ReadRotation { agent, rotation } => match self.rotation(&agent, &rotation) {
                Some(row) => Response::RotationRead {
                    state: row.state,
                    generation: row.generation,
                    successor_heartbeats: row.successor_heartbeats,
                },
                None => Response::Error(HubError::UnknownRotation { agent, rotation }),
            },
            Request::CommitRotation { agent, rotation } => self.commit_rotation(agent, rotation, events),
            Request::AbortRotation { agent, rotation } => {
                let key = (agent.clone(), rotation.clone());
                match self.rotations.get_mut(&key) {
                    Some(row) if row.state == RotationState::Open => {
                        row.state = RotationState::Aborted;
                        let revoked_generation = row.generation;
                        events.push(HubEvent::RotationAborted { agent, rotation, revoked_generation });
                        Response::RotationEnded { revoked: true }
                    }
                    Some(row) if row.state == RotationState::Committed => Response::Error(HubError::Conflict {
                        reason: format!(
                            "rotation {rotation} of {agent} is committed: its predecessor is revoked, and an abort \
                             revokes only a successor"
                        ),
                    }),
                    Some(_) | None => Response::RotationEnded { revoked: false },
                }
            }
            Request::ReadHolds => Response::Holds {
                holds: self
                    .holds
                    .iter()
                    .map(|(agent, owners)| (agent.clone(), owners.iter().cloned().collect()))
                    .collect(),
            },
            Request::ReadReferences { agent } => Response::References {
                epochs: self
                    .epochs
                    .values()
                    .filter(|epoch| epoch.open && epoch.members.contains(&agent))
                    .map(|epoch| epoch.id)
                    .collect(),
                holds: self.holds_on(&agent),
                lease_until_ms: self.leases.get(&agent).copied().filter(|until_ms| *until_ms > now_ms),
            },
            Request::Resurrect { agent, epoch } => self.resurrect(now_ms, agent, epoch, events),
            Request::Authenticate { principal, token } => match self.principals.get(&principal) {
                Some(row) if row.token.0 == token && now_ms < row.expires_at_ms => {
                    Response::Authenticated { expires_at_ms: row.expires_at_ms }
                }
                row => {
                    let expired = row.is_some_and(|row| row.token.0 == token);
                    events.push(HubEvent::CredentialRejected { principal: principal.clone(), expired });
                    Response::Error(HubError::CredentialRejected { principal, expired })
                }
            },
            Request::AcquireLock { holder, lease_ms } => match &self.lock {
                Some(lock) if lock.expires_at_ms > now_ms && lock.holder != holder => Response::LockHeld {
                    holder: lock.holder.clone(),
                    fence: lock.fence,
                    expires_at_ms: lock.expires_at_ms,
                },
                _ => self.grant_lock(now_ms, holder, lease_ms, events),
            },
            Request::SupersedeLock { holder, fence, lease_ms } => match &self.lock {
                Some(lock) if lock.fence == fence => self.grant_lock(now_ms, holder, lease_ms, events),
                // The lease ran out and nobody took it since: the caller's claim is as good as a fresh acquire.
                None => self.grant_lock(now_ms, holder, lease_ms, events),
                Some(lock) => Response::Error(HubError::StaleFence {
                    presented: Some(fence),
                    current: lock.fence,
                    holder: lock.holder.clone(),
                }),
            },
            Request::RenewLock { fence, lease_ms } => match &mut self.lock {
                Some(lock) if lock.fence == fence => {
                    lock.expires_at_ms = now_ms.saturating_add(lease_ms);
                    Response::LockGranted { fence, expires_at_ms: lock.expires_at_ms }
                }
                Some(lock) => Response::Error(HubError::StaleFence {
                    presented: Some(fence),
                    current: lock.fence,
                    holder: lock.holder.clone(),
                }),
                None => Response::Error(HubError::Conflict { reason: "no deployment lock is held".into() }),
            },
            Request::ReleaseLock { fence } => match &self.lock {
                Some(lock) if lock.fence == fence => {
                    events.push(HubEvent::LockReleased { holder: lock.holder.clone(), fence });
                    self.lock = None;
                    Response::Ok
                }
                _ => Response::Error(HubError::Conflict { reason: format!("fence {fence} holds no lock") }),
            },
            Request::Authorized { principal, token, fence, request } => {
                self.handle_authorized(now_ms, principal, token, fence, *request, events)
            }
            Request::Dispatch { agent, task } => {
                let dispatchable = self.agents.get(&agent).is_some_and(|row| row.status == AgentStatus::Online);
                if !dispatchable {
                    return Response::Error(HubError::UnknownAgent { agent });
                }
                let owners = self.holds_on(&agent);
                if !owners.is_empty() {
                    events.push(HubEvent::DispatchRefused { agent: agent.clone(), task });
                    return Response::Error(HubError::Held { agent, owners });
                }
                events.push(HubEvent::Dispatched { agent, task });
                Response::Ok
            }
        }
    }

    fn resurrect(&mut self, now_ms: u64, agent: String, epoch: u64, events: &mut Vec<HubEvent>) -> Response {
        match self.epochs.get(&epoch) {
            None => return Response::Error(HubError::UnknownEpoch { epoch }),
            Some(row) if !row.open => {
                let reason = format!("epoch {epoch} is terminal: it pins no identity");
                return Response::Error(HubError::Conflict { reason });
            }
            Some(row) if !row.members.contains(&agent) => {
                let reason = format!("epoch {epoch} does not list {agent}: only a pinned identity is resurrected");
                return Response::Error(HubError::Conflict { reason });
            }
            Some(_) => {}
        }
        let Some(row) = self.agents.get_mut(&agent) else {
            return Response::Error(HubError::UnknownAgent { agent });
        };
        if row.status != AgentStatus::Tombstoned {
            return Response::Resurrected { restored: false };
        }
        if row.token == Token::default() {
            let reason =
                format!("the principal of {agent} was revoked: a resurrection restores a row, not a credential");
            return Response::Error(HubError::Conflict { reason });
        }
        row.status = AgentStatus::Online;
        row.last_seen_ms = now_ms;
        events.push(HubEvent::Resurrected { agent, epoch });
        Response::Resurrected { restored: true }
    }

    fn begin_rotation(&mut self, agent: String, rotation: String, events: &mut Vec<HubEvent>) -> Response {
        let Some(row) = self.agents.get(&agent).filter(|row| row.status != AgentStatus::Tombstoned) else {
            return Response::Error(HubError::UnknownAgent { agent });
        };
        if let Some(existing) = self.rotation(&agent, &rotation) {
            if existing.state == RotationState::Aborted {
                let reason = format!("rotation {rotation} of {agent} was aborted");
                return Response::Error(HubError::Conflict { reason });
            }
            // A replay (a lost answer, a controller adopting its journal): the same successor, nothing minted.
            return Response::RotationIssued { generation: existing.generation, token: existing.successor.clone() };
        }
        if let Some((open, _)) = self.open_rotation(&agent) {
            let reason = format!("agent {agent} has rotation {open} open");
            return Response::Error(HubError::Conflict { reason });
        }
        let generation = row.issued_generation + 1;
        let successor = self.mint(&agent, generation);
        if let Some(row) = self.agents.get_mut(&agent) {
            row.issued_generation = generation;
        }
        let issued =
            Rotation { state: RotationState::Open, generation, successor: successor.clone(), successor_heartbeats: 0 };
        self.rotations.insert((agent.clone(), rotation.clone()), issued);
        events.push(HubEvent::CredentialIssued { agent, rotation, generation });
        Response::RotationIssued { generation, token: successor }
    }

    fn commit_rotation(&mut self, agent: String, rotation: String, events: &mut Vec<HubEvent>) -> Response {
        let key = (agent.clone(), rotation.clone());
        let Some(row) = self.rotations.get_mut(&key) else {
            return Response::Error(HubError::UnknownRotation { agent, rotation });
        };
        match row.state {
            RotationState::Committed => return Response::RotationEnded { revoked: false },
            RotationState::Aborted => {
                let reason = format!("rotation {rotation} of {agent} was aborted");
                return Response::Error(HubError::Conflict { reason });
            }
            RotationState::Open => {}
        }
        let Some(agent_row) = self.agents.get_mut(&agent).filter(|row| row.status != AgentStatus::Tombstoned) else {
            return Response::Error(HubError::UnknownAgent { agent });
        };
        row.state = RotationState::Committed;
        let revoked_generation = agent_row.generation;
        agent_row.token = row.successor.clone();
        agent_row.generation = row.generation;
        events.push(HubEvent::RotationCommitted { agent, rotation, revoked_generation });
        Response::RotationEnded { revoked: true }
    }

    /// Whether no later sweep can change a row, nor a silent member of an open epoch still become the RCCA's
    /// "survived the TTL" case, while every agent that heartbeated within `fresh_ms` goes on doing so: each row is
    /// tombstoned, heard within `fresh_ms`, a durable agent the policy keeps (offline under `epoch_aware`, any under
    /// `legacy`), or an open-epoch member silent past the TTL, one sweep and `grace_ms`. A silent fungible agent is
    /// never at rest until it is tombstoned: its TTL, or a task lease, is still running.
    pub fn at_rest(&self, now_ms: u64, fresh_ms: u64, grace_ms: u64) -> bool {
        let open_members: BTreeSet<&String> =
            self.epochs.values().filter(|epoch| epoch.open).flat_map(|epoch| epoch.members.iter()).collect();
        let settled_silence = self.config.agent_ttl_ms + self.config.sweep_interval_ms + grace_ms;
        self.agents.values().all(|row| {
            let silent_ms = now_ms.saturating_sub(row.last_seen_ms);
            if row.status == AgentStatus::Tombstoned || silent_ms <= fresh_ms {
                return true;
            }
            if open_members.contains(&row.id) {
                return silent_ms > settled_silence;
            }
            match (self.config.expiry, row.kind) {
                (ExpiryPolicy::Legacy, AgentKind::Durable) => true,
                (ExpiryPolicy::EpochAware, AgentKind::Durable) => row.status == AgentStatus::Offline,
                (_, AgentKind::Fungible) => false,
            }
        })
    }

    /// One pass of the TTL sweeper at hub time `now_ms`.
    pub fn sweep(&mut self, now_ms: u64, events: &mut Vec<HubEvent>) {
        let ttl_ms = self.config.agent_ttl_ms;
        let open_members: BTreeMap<&str, u64> = self
            .epochs
            .values()
            .filter(|epoch| epoch.open)
            .flat_map(|epoch| epoch.members.iter().map(|member| (member.as_str(), epoch.id)))
            .rev()
            .collect();
        for row in self.agents.values_mut() {
            let silent_ms = now_ms.saturating_sub(row.last_seen_ms);
            if silent_ms <= ttl_ms || row.status == AgentStatus::Tombstoned {
                continue;
            }
            let leased = self.leases.get(&row.id).is_some_and(|until| *until > now_ms);
            let pinned_by = open_members.get(row.id.as_str()).copied();
            let epoch_member = pinned_by.is_some();
            match (self.config.expiry, row.kind) {
                (ExpiryPolicy::Legacy, AgentKind::Fungible) if !leased => {
                    row.status = AgentStatus::Tombstoned;
                    events.push(HubEvent::Tombstoned { agent: row.id.clone(), silent_ms, epoch_member });
                }
                (ExpiryPolicy::Legacy, _) => {}
                (ExpiryPolicy::EpochAware, AgentKind::Fungible) if !leased && !epoch_member => {
                    row.status = AgentStatus::Tombstoned;
                    events.push(HubEvent::Tombstoned { agent: row.id.clone(), silent_ms, epoch_member });
                }
                (ExpiryPolicy::EpochAware, AgentKind::Durable) if row.status == AgentStatus::Online => {
                    row.status = AgentStatus::Offline;
                    events.push(HubEvent::Offline { agent: row.id.clone(), silent_ms });
                }
                (ExpiryPolicy::EpochAware, AgentKind::Fungible) if !leased => {
                    // Kept by its epoch: said once for this silence.
                    let epoch = pinned_by.expect("a fungible agent not tombstoned here is an epoch member");
                    if self.deferred.insert(row.id.clone(), row.last_seen_ms) != Some(row.last_seen_ms) {
                        events.push(HubEvent::ExpiryDeferred { agent: row.id.clone(), silent_ms, epoch });
                    }
                }
                (ExpiryPolicy::EpochAware, _) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: u64 = DEFAULT_AGENT_TTL_MS;

    fn hub(expiry: ExpiryPolicy) -> Hub {
        let mut hub = Hub::new(HubConfig { expiry, ..HubConfig::default() });
        let mut events = Vec::new();
        for (agent, kind) in
            [("member", AgentKind::Fungible), ("stray", AgentKind::Fungible), ("durable", AgentKind::Durable)]
        {
            hub.handle(0, Request::Register { agent: agent.into(), kind, token: token(agent) }, &mut events);
        }
        hub
    }

    fn token(agent: &str) -> String {
        format!("tok-{agent}")
    }

    fn heartbeat(agent: &str) -> Request {
        Request::Heartbeat { agent: agent.into(), token: token(agent), revision: Some("r1".into()) }
    }

    fn open_epoch(hub: &mut Hub, members: &[&str]) -> u64 {
        let members = members.iter().map(|m| (*m).to_owned()).collect();
        match hub.handle(0, Request::OpenEpoch { members }, &mut Vec::new()) {
            Response::EpochOpened { epoch } => epoch,
            other => panic!("unexpected {other:?}"),
        }
    }

    fn status(hub: &Hub, agent: &str) -> AgentStatus {
        hub.agent(agent).unwrap().status
    }

    #[test]
    fn the_hub_is_at_rest_only_when_no_sweep_can_change_a_row() {
        let (fresh, grace, sweep) = (60_000, 60_000, DEFAULT_SWEEP_INTERVAL_MS);
        let mut hub = hub(ExpiryPolicy::EpochAware);
        assert!(hub.at_rest(fresh, fresh, grace), "every agent heard within `fresh`");
        assert!(!hub.at_rest(fresh + 1, fresh, grace), "a silent fungible agent is due a tombstone");
        open_epoch(&mut hub, &["member"]);
        let mut events = Vec::new();
        hub.sweep(TTL + 1, &mut events);
        assert_eq!(status(&hub, "stray"), AgentStatus::Tombstoned);
        assert_eq!(status(&hub, "durable"), AgentStatus::Offline);
        assert!(!hub.at_rest(TTL + 1, fresh, grace), "the silent member may still be seen surviving the TTL");
        assert!(!hub.at_rest(TTL + sweep + grace, fresh, grace));
        assert!(hub.at_rest(TTL + sweep + grace + 1, fresh, grace), "tombstoned, offline, and a member long silent");
        hub.handle(TTL + sweep + grace + 2, heartbeat("durable"), &mut events);
        assert!(hub.at_rest(TTL + sweep + grace + 2, fresh, grace), "a durable agent back online is heard");
        assert!(!hub.at_rest(TTL + sweep + grace + 3 + fresh, fresh, grace), "and silent again, due offline");
    }

    #[test]
    fn legacy_expiry_tombstones_a_silent_epoch_member_as_in_the_incident() {
        let mut hub = hub(ExpiryPolicy::Legacy);
        open_epoch(&mut hub, &["member"]);
        let mut events = Vec::new();
        hub.sweep(TTL, &mut events);
        assert_eq!(status(&hub, "member"), AgentStatus::Online, "silent for exactly the TTL is not past it");
        hub.sweep(TTL + 1, &mut events);
        assert_eq!(status(&hub, "member"), AgentStatus::Tombstoned);
        assert_eq!(status(&hub, "stray"), AgentStatus::Tombstoned);
        assert_eq!(status(&hub, "durable"), AgentStatus::Online, "legacy expiry never looks at durable agents");
        assert!(events.contains(&HubEvent::Tombstoned {
            agent: "member".into(),
            silent_ms: TTL + 1,
            epoch_member: true
        }));
        let refused = hub.handle(TTL + 2, heartbeat("member"), &mut events);
        assert_eq!(refused, Response::Error(HubError::UnknownAgent { agent: "member".into() }));
    }

    #[test]
    fn only_a_tombstoned_identity_its_open_epoch_pins_is_resurrected_and_only_under_the_lock_fence() {
        let mut hub = hub(ExpiryPolicy::Legacy);
        hub.issue_credential("controller", "cred", u64::MAX);
        let epoch = open_epoch(&mut hub, &["member", "durable"]);
        let mut events = Vec::new();
        hub.sweep(TTL + 1, &mut events);
        assert_eq!(status(&hub, "member"), AgentStatus::Tombstoned);
        let resurrect = |agent: &str, epoch: u64| Request::Resurrect { agent: agent.into(), epoch };
        let fence = match hub.handle(TTL + 2, Request::AcquireLock { holder: "c".into(), lease_ms: TTL }, &mut events) {
            Response::LockGranted { fence, .. } => fence,
            other => panic!("unexpected {other:?}"),
        };
        let mut events = Vec::new();
        // Not pinned by the epoch it names, an epoch that does not exist, a stale fence: refused, nothing restored.
        let unpinned = hub.handle(TTL + 2, as_controller("cred", Some(fence), resurrect("stray", epoch)), &mut events);
        assert!(matches!(unpinned, Response::Error(HubError::Conflict { .. })), "{unpinned:?}");
        let unknown = hub.handle(TTL + 2, as_controller("cred", Some(fence), resurrect("member", 9)), &mut events);
        assert_eq!(unknown, Response::Error(HubError::UnknownEpoch { epoch: 9 }));
        let stale = hub.handle(TTL + 2, as_controller("cred", None, resurrect("member", epoch)), &mut events);
        assert!(matches!(stale, Response::Error(HubError::StaleFence { .. })), "{stale:?}");
        assert_eq!(status(&hub, "member"), AgentStatus::Tombstoned);
        assert_eq!(status(&hub, "stray"), AgentStatus::Tombstoned);
        assert_eq!(events, vec![HubEvent::MutationFenced { holder: "c".into(), presented: None, current: fence }]);
        let mut events = Vec::new();
        // The pinned identity comes back with the credential it had, its silence counted from now.
        let restored = hub.handle(TTL + 2, as_controller("cred", Some(fence), resurrect("member", epoch)), &mut events);
        assert_eq!(restored, Response::Resurrected { restored: true });
        assert_eq!(events, vec![HubEvent::Resurrected { agent: "member".into(), epoch }]);
        assert_eq!(hub.agent("member").map(|row| (row.status, row.last_seen_ms)), Some((AgentStatus::Online, TTL + 2)));
        assert_eq!(hub.handle(TTL + 3, heartbeat("member"), &mut events), Response::Ok);
        hub.sweep(TTL + 4, &mut events);
        assert_eq!(status(&hub, "member"), AgentStatus::Online, "not expired again at once");
        // A replay, and a row that never was tombstoned: nothing changes.
        let mut events = Vec::new();
        let replay = hub.handle(TTL + 5, as_controller("cred", Some(fence), resurrect("member", epoch)), &mut events);
        assert_eq!(replay, Response::Resurrected { restored: false });
        let present = hub.handle(TTL + 5, as_controller("cred", Some(fence), resurrect("durable", epoch)), &mut events);
        assert_eq!(present, Response::Resurrected { restored: false });
        assert!(events.is_empty(), "{events:?}");
        // A revoked principal is not brought back: a resurrection restores a row, never a credential.
        hub.revoke_principal("member", &mut events);
        let revoked = hub.handle(TTL + 6, as_controller("cred", Some(fence), resurrect("member", epoch)), &mut events);
        assert!(matches!(revoked, Response::Error(HubError::Conflict { .. })), "{revoked:?}");
        assert_eq!(status(&hub, "member"), AgentStatus::Tombstoned);
        // A terminal epoch pins nothing: it is refused before the row is looked at.
        let other = open_epoch(&mut hub, &["durable"]);
        let closing = Request::CloseEpoch { epoch: other, untouched: Vec::new() };
        assert_eq!(hub.handle(TTL + 7, closing, &mut events), Response::Ok);
        let closed = hub.handle(TTL + 7, as_controller("cred", Some(fence), resurrect("durable", other)), &mut events);
        assert!(matches!(closed, Response::Error(HubError::Conflict { .. })), "{closed:?}");
        assert_eq!(status(&hub, "stray"), AgentStatus::Tombstoned);
    }

    #[test]
    fn epoch_aware_expiry_keeps_open_members_offlines_durables_and_still_expires_strays() {
        let mut hub = hub(ExpiryPolicy::EpochAware);
        let epoch = open_epoch(&mut hub, &["member"]);
        let mut events = Vec::new();
        hub.sweep(2 * TTL, &mut events);
        assert_eq!(status(&hub, "member"), AgentStatus::Online);
        assert_eq!(status(&hub, "stray"), AgentStatus::Tombstoned);
        assert_eq!(status(&hub, "durable"), AgentStatus::Offline);
        // The hub says once per silence that the epoch kept the member past the TTL.
        let deferred = |events: &[HubEvent]| {
            events
                .iter()
                .filter(|event| matches!(event, HubEvent::ExpiryDeferred { agent, .. } if agent == "member"))
                .count()
        };
        assert_eq!(deferred(&events), 1);
        assert!(events.contains(&HubEvent::ExpiryDeferred { agent: "member".into(), silent_ms: 2 * TTL, epoch }));
        let mut again = Vec::new();
        hub.sweep(2 * TTL + DEFAULT_SWEEP_INTERVAL_MS, &mut again);
        assert_eq!(deferred(&again), 0, "the same silence is said once");
        // A heartbeat brings the durable agent back; once the epoch is terminal the member may expire.
        hub.handle(2 * TTL, heartbeat("durable"), &mut events);
        assert_eq!(status(&hub, "durable"), AgentStatus::Online);
        assert_eq!(
            hub.handle(2 * TTL, Request::CloseEpoch { epoch, untouched: Vec::new() }, &mut events),
            Response::Ok
        );
        hub.sweep(2 * TTL + 1, &mut events);
        assert_eq!(status(&hub, "member"), AgentStatus::Tombstoned);
        assert!(matches!(
            hub.handle(0, Request::CloseEpoch { epoch, untouched: Vec::new() }, &mut events),
            Response::Error(HubError::Conflict { .. })
        ));
    }

    #[test]
    fn an_active_task_lease_exempts_an_agent_under_both_policies() {
        for policy in [ExpiryPolicy::Legacy, ExpiryPolicy::EpochAware] {
            let mut hub = hub(policy);
            hub.handle(0, Request::GrantLease { agent: "stray".into(), until_ms: 2 * TTL }, &mut Vec::new());
            hub.sweep(TTL + 1, &mut Vec::new());
            assert_eq!(status(&hub, "stray"), AgentStatus::Online, "{policy:?}");
            hub.sweep(2 * TTL + 1, &mut Vec::new());
            assert_eq!(status(&hub, "stray"), AgentStatus::Tombstoned, "{policy:?}: lease over");
        }
    }

    fn as_controller(token: &str, fence: Option<u64>, request: Request) -> Request {
        Request::Authorized { principal: "controller".into(), token: token.into(), fence, request: Box::new(request) }
    }

    fn hold(agent: &str, owner: &str) -> Request {
        Request::PlaceHold { agent: agent.into(), owner: owner.into() }
    }

    #[test]
    fn an_expired_or_replaced_credential_is_refused_and_the_new_one_works() {
        let mut hub = hub(ExpiryPolicy::EpochAware);
        let mut events = Vec::new();
        hub.issue_credential("controller", "cred-1", 10_000);
        assert_eq!(hub.handle(0, as_controller("cred-1", None, hold("member", "d")), &mut events), Response::Ok);
        let wrong = hub.handle(0, as_controller("cred-0", None, hold("member", "d")), &mut events);
        let invalid = HubError::CredentialRejected { principal: "controller".into(), expired: false };
        assert_eq!(wrong, Response::Error(invalid));
        hub.expire_credential("controller", 5_000);
        let late = hub.handle(5_000, as_controller("cred-1", None, hold("member", "d")), &mut events);
        let expired = HubError::CredentialRejected { principal: "controller".into(), expired: true };
        assert_eq!(late, Response::Error(expired.clone()));
        let check = Request::Authenticate { principal: "controller".into(), token: "cred-1".into() };
        assert_eq!(hub.handle(5_000, check, &mut events), Response::Error(expired));
        hub.issue_credential("controller", "cred-2", 90_000);
        let check = Request::Authenticate { principal: "controller".into(), token: "cred-2".into() };
        assert_eq!(hub.handle(5_000, check, &mut events), Response::Authenticated { expires_at_ms: 90_000 });
        assert_eq!(hub.handle(5_000, as_controller("cred-2", None, hold("member", "e")), &mut events), Response::Ok);
        assert_eq!(hub.holds_on("member"), vec!["d".to_owned(), "e".to_owned()]);
    }

    #[test]
    fn a_stale_lock_blocks_until_its_lease_ends_and_fences_out_its_old_holder() {
        let mut hub = hub(ExpiryPolicy::EpochAware);
        let mut events = Vec::new();
        hub.issue_credential("controller", "cred", u64::MAX);
        let acquire = |holder: &str| Request::AcquireLock { holder: holder.into(), lease_ms: 1_000 };
        assert_eq!(
            hub.handle(0, acquire("dead"), &mut events),
            Response::LockGranted { fence: 1, expires_at_ms: 1_000 }
        );
        let held = hub.handle(500, acquire("new"), &mut events);
        assert_eq!(held, Response::LockHeld { holder: "dead".into(), fence: 1, expires_at_ms: 1_000 });
        // Under a held lock, a mutation without its fence is refused, and nothing changes.
        let unfenced = hub.handle(500, as_controller("cred", None, hold("member", "d")), &mut events);
        assert!(matches!(unfenced, Response::Error(HubError::StaleFence { presented: None, current: 1, .. })));
        assert!(hub.holds_on("member").is_empty());
        assert_eq!(
            hub.handle(1_000, acquire("new"), &mut events),
            Response::LockGranted { fence: 2, expires_at_ms: 2_000 }
        );
        let stale = hub.handle(1_000, as_controller("cred", Some(1), hold("member", "d")), &mut events);
        assert!(matches!(stale, Response::Error(HubError::StaleFence { presented: Some(1), current: 2, .. })));
        assert_eq!(hub.handle(1_000, as_controller("cred", Some(2), hold("member", "d")), &mut events), Response::Ok);
        // A journal-bound successor supersedes fence 2 before its lease ends; fence 2 is then stale.
        let supersede = Request::SupersedeLock { holder: "adopter".into(), fence: 2, lease_ms: 1_000 };
        assert_eq!(hub.handle(1_500, supersede, &mut events), Response::LockGranted { fence: 3, expires_at_ms: 2_500 });
        let again = Request::SupersedeLock { holder: "other".into(), fence: 2, lease_ms: 1_000 };
        assert!(matches!(hub.handle(1_600, again, &mut events), Response::Error(HubError::StaleFence { .. })));
        assert!(matches!(
            hub.handle(1_600, Request::RenewLock { fence: 2, lease_ms: 9 }, &mut events),
            Response::Error(HubError::StaleFence { .. })
        ));
        assert_eq!(hub.handle(1_600, Request::ReleaseLock { fence: 3 }, &mut events), Response::Ok);
        assert!(hub.lock().is_none());
        assert!(events.contains(&HubEvent::LockAcquired {
            holder: "adopter".into(),
            fence: 3,
            superseded: Some("new".into())
        }));
    }

    #[test]
    fn abort_is_monotonic_for_untouched_participants_only_under_epoch_aware() {
        for policy in [ExpiryPolicy::Legacy, ExpiryPolicy::EpochAware] {
            let mut hub = hub(policy);
            let mut events = Vec::new();
            let epoch = open_epoch(&mut hub, &["member", "durable"]);
            hub.revoke_principal("member", &mut events);
            let close = |untouched: &[&str]| Request::CloseEpoch {
                epoch,
                untouched: untouched.iter().map(|m| (*m).to_owned()).collect(),
            };
            match policy {
                ExpiryPolicy::Legacy => {
                    let error = HubError::ParticipantMissing { agent: "member".into() };
                    assert_eq!(hub.handle(0, close(&["member"]), &mut events), Response::Error(error));
                }
                ExpiryPolicy::EpochAware => {
                    // Installed (not named untouched): exact continuity is still required.
                    let drift = HubError::PrincipalDrift { agent: "member".into() };
                    assert_eq!(hub.handle(0, close(&[]), &mut events), Response::Error(drift));
                    // Untouched but not held: the superseding hold is mandatory.
                    assert!(matches!(
                        hub.handle(0, close(&["member"]), &mut events),
                        Response::Error(HubError::Conflict { .. })
                    ));
                    assert_eq!(hub.handle(0, hold("member", "successor:r"), &mut events), Response::Ok);
                    assert_eq!(hub.handle(0, close(&["member"]), &mut events), Response::Ok);
                    assert!(!hub.epoch(epoch).unwrap().open);
                }
            }
        }
    }

    #[test]
    fn dispatch_honours_holds_and_a_hold_is_released_once() {
        let mut hub = hub(ExpiryPolicy::EpochAware);
        let mut events = Vec::new();
        let hold = Request::PlaceHold { agent: "member".into(), owner: "deploy-7".into() };
        assert_eq!(hub.handle(0, hold, &mut events), Response::Ok);
        let refused = hub.handle(0, Request::Dispatch { agent: "member".into(), task: "t1".into() }, &mut events);
        assert_eq!(
            refused,
            Response::Error(HubError::Held { agent: "member".into(), owners: vec!["deploy-7".into()] })
        );
        let release = || Request::ReleaseHold { agent: "member".into(), owner: "deploy-7".into() };
        assert_eq!(hub.handle(0, release(), &mut events), Response::Ok);
        assert!(matches!(hub.handle(0, release(), &mut events), Response::Error(HubError::Conflict { .. })));
        assert_eq!(
            hub.handle(0, Request::Dispatch { agent: "member".into(), task: "t2".into() }, &mut events),
            Response::Ok
        );
        assert!(events.contains(&HubEvent::DispatchRefused { agent: "member".into(), task: "t1".into() }));
        assert!(events.contains(&HubEvent::Dispatched { agent: "member".into(), task: "t2".into() }));
    }

    #[test]
    fn an_agent_s_references_are_its_open_epochs_its_holds_and_its_active_lease() {
        let mut hub = hub(ExpiryPolicy::EpochAware);
        let mut events = Vec::new();
        let references = |hub: &mut Hub, now_ms: u64| {
            hub.handle(now_ms, Request::ReadReferences { agent: "member".into() }, &mut Vec::new())
        };
        let none = Response::References { epochs: Vec::new(), holds: Vec::new(), lease_until_ms: None };
        assert_eq!(references(&mut hub, 0), none);
        let closed = open_epoch(&mut hub, &["member", "stray"]);
        let open = open_epoch(&mut hub, &["member"]);
        open_epoch(&mut hub, &["stray"]);
        hub.handle(0, Request::CloseEpoch { epoch: closed, untouched: Vec::new() }, &mut events);
        hub.handle(0, Request::PlaceHold { agent: "member".into(), owner: "quarantine:r".into() }, &mut events);
        hub.handle(0, Request::PlaceHold { agent: "member".into(), owner: "operator:x".into() }, &mut events);
        hub.handle(0, Request::GrantLease { agent: "member".into(), until_ms: 500 }, &mut events);
        assert!(events.contains(&HubEvent::LeaseGranted { agent: "member".into(), until_ms: 500 }));
        let all = Response::References {
            epochs: vec![open],
            holds: vec!["operator:x".into(), "quarantine:r".into()],
            lease_until_ms: Some(500),
        };
        assert_eq!(references(&mut hub, 499), all);
        let Response::References { lease_until_ms, .. } = references(&mut hub, 500) else { panic!("references") };
        assert_eq!(lease_until_ms, None, "a lease that has run out references nothing");
        let unknown = hub.handle(0, Request::ReadReferences { agent: "nobody".into() }, &mut Vec::new());
        assert_eq!(unknown, none, "nothing references an agent the hub does not know");
    }

    #[test]
    fn a_heartbeat_with_the_wrong_token_is_refused_and_the_token_never_prints() {
        let mut hub = hub(ExpiryPolicy::EpochAware);
        let forged = Request::Heartbeat { agent: "stray".into(), token: "tok-member".into(), revision: None };
        assert!(!format!("{forged:?}").contains("tok-member"));
        let mut events = Vec::new();
        assert_eq!(
            hub.handle(5, forged, &mut events),
            Response::Error(HubError::Unauthorized { agent: "stray".into() })
        );
        assert_eq!(hub.agent("stray").unwrap().last_seen_ms, 0, "a refused heartbeat does not count");
        assert_eq!(events, vec![HubEvent::HeartbeatRefused { agent: "stray".into(), unauthorized: true }]);
    }

    fn begin(hub: &mut Hub, rotation: &str, events: &mut Vec<HubEvent>) -> Response {
        hub.handle(0, Request::BeginRotation { agent: "member".into(), rotation: rotation.into() }, events)
    }

    fn issued(response: Response) -> (u64, String) {
        match response {
            Response::RotationIssued { generation, token } => (generation, token.expose().to_owned()),
            other => panic!("not an issue: {other:?}"),
        }
    }

    fn beat(hub: &mut Hub, token: &str, events: &mut Vec<HubEvent>) -> Response {
        hub.handle(5, Request::Heartbeat { agent: "member".into(), token: token.into(), revision: None }, events)
    }

    #[test]
    fn a_rotation_overlaps_old_and_new_until_its_commit_revokes_the_predecessor() {
        let mut hub = hub(ExpiryPolicy::EpochAware);
        hub.set_token_seed(7);
        let mut events = Vec::new();
        let (generation, successor) = issued(begin(&mut hub, "r1", &mut events));
        assert_eq!(generation, 2, "the enrolment credential is generation 1");
        assert!(successor.starts_with("fleetsim-secret-agent-"), "minted tokens are marked secret");
        assert_eq!(
            events,
            vec![HubEvent::CredentialIssued { agent: "member".into(), rotation: "r1".into(), generation: 2 }]
        );
        events.clear();
        assert_eq!(beat(&mut hub, &token("member"), &mut events), Response::Ok, "the predecessor is still valid");
        assert_eq!(beat(&mut hub, &successor, &mut events), Response::Ok, "and so is the successor");
        let heard = |generation| HubEvent::Heartbeat { agent: "member".into(), generation };
        assert_eq!(events, vec![heard(1), heard(2)], "each heartbeat records the generation that authenticated it");
        assert_eq!(hub.rotation("member", "r1").unwrap().successor_heartbeats, 1);
        assert_eq!(hub.agent("member").unwrap().heartbeat_generation, Some(2));
        events.clear();
        let commit = || Request::CommitRotation { agent: "member".into(), rotation: "r1".into() };
        assert_eq!(hub.handle(9, commit(), &mut events), Response::RotationEnded { revoked: true });
        assert_eq!(hub.handle(9, commit(), &mut events), Response::RotationEnded { revoked: false }, "a replay");
        assert_eq!(
            events,
            vec![HubEvent::RotationCommitted { agent: "member".into(), rotation: "r1".into(), revoked_generation: 1 }]
        );
        events.clear();
        assert_eq!(
            beat(&mut hub, &token("member"), &mut events),
            Response::Error(HubError::Unauthorized { agent: "member".into() })
        );
        assert_eq!(events, vec![HubEvent::HeartbeatRefused { agent: "member".into(), unauthorized: true }]);
        assert_eq!(beat(&mut hub, &successor, &mut events), Response::Ok);
        assert_eq!(hub.agent("member").unwrap().generation, 2);
    }

    #[test]
    fn an_issue_is_idempotent_by_rotation_and_one_rotation_is_open_at_a_time() {
        let mut hub = hub(ExpiryPolicy::EpochAware);
        let mut events = Vec::new();
        let first = issued(begin(&mut hub, "r1", &mut events));
        assert_eq!(issued(begin(&mut hub, "r1", &mut events)), first, "a replay answers the same successor");
        assert_eq!(events.len(), 1, "and mints nothing");
        assert!(matches!(begin(&mut hub, "r2", &mut events), Response::Error(HubError::Conflict { .. })));
        let commit = Request::CommitRotation { agent: "member".into(), rotation: "r1".into() };
        hub.handle(0, commit, &mut events);
        let (generation, token) = issued(begin(&mut hub, "r2", &mut events));
        assert_eq!(generation, 3);
        assert_ne!(token, first.1, "every generation its own token");
        let unknown = Request::BeginRotation { agent: "nobody".into(), rotation: "r".into() };
        assert_eq!(
            hub.handle(0, unknown, &mut events),
            Response::Error(HubError::UnknownAgent { agent: "nobody".into() })
        );
    }

    #[test]
    fn an_abort_revokes_the_successor_never_the_predecessor() {
        let mut hub = hub(ExpiryPolicy::EpochAware);
        let mut events = Vec::new();
        let (_, successor) = issued(begin(&mut hub, "r1", &mut events));
        events.clear();
        let abort = |rotation: &str| Request::AbortRotation { agent: "member".into(), rotation: rotation.into() };
        assert_eq!(hub.handle(0, abort("r1"), &mut events), Response::RotationEnded { revoked: true });
        assert_eq!(hub.handle(0, abort("r1"), &mut events), Response::RotationEnded { revoked: false });
        assert_eq!(hub.handle(0, abort("never"), &mut events), Response::RotationEnded { revoked: false });
        assert_eq!(
            events,
            vec![HubEvent::RotationAborted { agent: "member".into(), rotation: "r1".into(), revoked_generation: 2 }]
        );
        assert!(matches!(beat(&mut hub, &successor, &mut events), Response::Error(HubError::Unauthorized { .. })));
        assert_eq!(beat(&mut hub, &token("member"), &mut events), Response::Ok, "the predecessor stays valid");
        assert!(matches!(begin(&mut hub, "r1", &mut events), Response::Error(HubError::Conflict { .. })));
        let commit = |rotation: &str| Request::CommitRotation { agent: "member".into(), rotation: rotation.into() };
        assert!(matches!(hub.handle(0, commit("r1"), &mut events), Response::Error(HubError::Conflict { .. })));
        let unknown = HubError::UnknownRotation { agent: "member".into(), rotation: "r9".into() };
        assert_eq!(hub.handle(0, commit("r9"), &mut events), Response::Error(unknown.clone()));
        let read = Request::ReadRotation { agent: "member".into(), rotation: "r9".into() };
        assert_eq!(hub.handle(0, read, &mut events), Response::Error(unknown));
        issued(begin(&mut hub, "r2", &mut events));
        hub.handle(0, commit("r2"), &mut events);
        assert!(matches!(hub.handle(0, abort("r2"), &mut events), Response::Error(HubError::Conflict { .. })));
    }

    #[test]
    fn a_new_enrolment_or_a_revoked_principal_ends_an_open_rotation() {
        let mut hub = hub(ExpiryPolicy::EpochAware);
        let mut events = Vec::new();
        let (_, successor) = issued(begin(&mut hub, "r1", &mut events));
        let again = Request::Register { agent: "member".into(), kind: AgentKind::Fungible, token: token("member") };
        hub.handle(0, again, &mut events);
        assert_eq!(hub.rotation("member", "r1").unwrap().state, RotationState::Open, "a restart keeps it");
        let fresh = Request::Register { agent: "member".into(), kind: AgentKind::Fungible, token: "tok-new".into() };
        hub.handle(0, fresh, &mut events);
        assert_eq!(hub.rotation("member", "r1").unwrap().state, RotationState::Aborted);
        assert_eq!(hub.agent("member").unwrap().generation, 3, "a new enrolment is a new generation");
        assert!(matches!(beat(&mut hub, &successor, &mut events), Response::Error(HubError::Unauthorized { .. })));
        issued(begin(&mut hub, "r2", &mut events));
        hub.revoke_principal("member", &mut events);
        assert_eq!(hub.rotation("member", "r2").unwrap().state, RotationState::Aborted);
    }

    #[test]
    fn a_minted_token_never_prints() {
        let mut hub = hub(ExpiryPolicy::EpochAware);
        let response = begin(&mut hub, "r1", &mut Vec::new());
        let (_, token) = issued(response.clone());
        assert!(!format!("{response:?}").contains(&token));
        assert!(!format!("{:?}", hub.rotation("member", "r1")).contains(&token));
        assert!(!format!("{hub:?}").contains(&token));
    }

    #[test]
    fn a_route_swap_changes_the_published_bundle() {
        let mut hub = hub(ExpiryPolicy::EpochAware);
        let read = |hub: &mut Hub| hub.handle(0, Request::ReadRouteBundle, &mut Vec::new());
        assert_eq!(read(&mut hub), Response::RouteBundle { digest: "sha256:routes-1".into() });
        assert_eq!(hub.swap_route_bundle(), "sha256:routes-2");
        assert_eq!(read(&mut hub), Response::RouteBundle { digest: "sha256:routes-2".into() });
    }

    #[test]
    fn heartbeat_read_reports_the_hub_clock_and_every_row_in_order() {
        let mut hub = hub(ExpiryPolicy::Legacy);
        hub.handle(500, heartbeat("stray"), &mut Vec::new());
        let Response::Heartbeats { now_ms, rows } = hub.handle(900, Request::ReadHeartbeats, &mut Vec::new()) else {
            panic!("not a heartbeat read");
        };
        assert_eq!(now_ms, 900);
        let names: Vec<_> = rows.iter().map(|r| r.agent.as_str()).collect();
        assert_eq!(names, ["durable", "member", "stray"]);
        assert_eq!(rows[2].last_seen_ms, 500);
        assert_eq!(rows[2].revision.as_deref(), Some("r1"), "the revision of the last heartbeat");
    }
}
