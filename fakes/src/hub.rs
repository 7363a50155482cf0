//! The fake agent hub: agent registry, heartbeats, the TTL sweeper with its two expiry policies, deployment epochs,
//! dispatch holds and task leases, controller principals with expiring credentials, and the deployment lock with its
//! fence — a plain synchronous model plus its request handler.
//!
//! Sources: `seeds/003_65d56b75d2c60639.txt` ("Deployment-epoch membership outranks ordinary heartbeat expiry",
//! "Replacement plan": TTL makes durable workers offline, never deleted) and `seeds/004_c1eb714c76320200.txt`
//! (30 s heartbeats). The model is its own database: every handled request is a committed transaction, so the
//! registry survives a crash of the hub host; what a crash loses is in-flight requests, not rows.
//!
//! Time comes in as `now_ms` on the hub's own clock (which may be skewed); the model never reads a clock.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

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
struct Token(String);

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
    /// Every hold, by agent (the controller accounts for operator holds it must not release).
    ReadHolds,
    /// What references one agent now: the open epochs that list it, the holds on it (any owner) and its active task
    /// lease (a decommission refuses a worker anything references; RCCA replacement plan).
    ReadReferences {
        agent: String,
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
            Request::ReadHolds => write!(f, "ReadHolds"),
            Request::ReadReferences { agent } => write!(f, "ReadReferences {{ agent: {agent:?} }}"),
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
        }
    }
}

/// What happened inside the hub, for the trace. The simulator turns these into trace events. `LeaseGranted`: a task
/// lease on `agent` runs until `until_ms` on the hub's clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HubEvent {
    Registered { agent: String },
    Heartbeat { agent: String },
    HeartbeatRefused { agent: String },
    BackOnline { agent: String },
    Offline { agent: String, silent_ms: u64 },
    Tombstoned { agent: String, silent_ms: u64, epoch_member: bool },
    EpochOpened { epoch: u64, members: u64 },
    EpochClosed { epoch: u64 },
    HoldPlaced { agent: String, owner: String },
    HoldReleased { agent: String, owner: String },
    Dispatched { agent: String, task: String },
    LeaseGranted { agent: String, until_ms: u64 },
    DispatchRefused { agent: String, task: String },
    CredentialRejected { principal: String, expired: bool },
    LockAcquired { holder: String, fence: u64, superseded: Option<String> },
    LockReleased { holder: String, fence: u64 },
    MutationFenced { holder: String, presented: Option<u64>, current: u64 },
    PrincipalRevoked { agent: String },
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
        }
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

    /// Registry cleanup: the agent's principal is revoked (its row tombstoned, its token void).
    pub fn revoke_principal(&mut self, agent: &str, events: &mut Vec<HubEvent>) {
        if let Some(row) = self.agents.get_mut(agent) {
            row.status = AgentStatus::Tombstoned;
            row.token = Token::default();
            events.push(HubEvent::PrincipalRevoked { agent: agent.to_owned() });
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
                self.agents.insert(
                    agent.clone(),
                    AgentRow {
                        id: agent.clone(),
                        token: Token(token),
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
            Request::Heartbeat { agent, token, revision } => match self.agents.get_mut(&agent) {
                Some(row) if row.status != AgentStatus::Tombstoned && row.token.0 != token => {
                    events.push(HubEvent::HeartbeatRefused { agent: agent.clone() });
                    Response::Error(HubError::Unauthorized { agent })
                }
                Some(row) if row.status != AgentStatus::Tombstoned => {
                    row.last_seen_ms = now_ms;
                    row.heartbeats += 1;
                    row.revision = revision;
                    if row.status == AgentStatus::Offline {
                        row.status = AgentStatus::Online;
                        events.push(HubEvent::BackOnline { agent: agent.clone() });
                    }
                    events.push(HubEvent::Heartbeat { agent });
                    Response::Ok
                }
                _ => {
                    events.push(HubEvent::HeartbeatRefused { agent: agent.clone() });
                    Response::Error(HubError::UnknownAgent { agent })
                }
            },
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
        let open_members: BTreeSet<String> =
            self.epochs.values().filter(|epoch| epoch.open).flat_map(|epoch| epoch.members.iter().cloned()).collect();
        for row in self.agents.values_mut() {
            let silent_ms = now_ms.saturating_sub(row.last_seen_ms);
            if silent_ms <= ttl_ms || row.status == AgentStatus::Tombstoned {
                continue;
            }
            let leased = self.leases.get(&row.id).is_some_and(|until| *until > now_ms);
            let epoch_member = open_members.contains(&row.id);
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
    fn epoch_aware_expiry_keeps_open_members_offlines_durables_and_still_expires_strays() {
        let mut hub = hub(ExpiryPolicy::EpochAware);
        let epoch = open_epoch(&mut hub, &["member"]);
        let mut events = Vec::new();
        hub.sweep(2 * TTL, &mut events);
        assert_eq!(status(&hub, "member"), AgentStatus::Online);
        assert_eq!(status(&hub, "stray"), AgentStatus::Tombstoned);
        assert_eq!(status(&hub, "durable"), AgentStatus::Offline);
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
        assert_eq!(events, vec![HubEvent::HeartbeatRefused { agent: "stray".into() }]);
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
