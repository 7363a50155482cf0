//! The hub host: the hub's database (which survives crashes of the hub host), its sweeper and the trusted client's
//! canary dispatcher, the hub host's own SSH endpoint, and the `SimHub` adapter through which the engine reaches it.
//! [`HubHost`] owns that state; the hub's fault steps change it here and nowhere else.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

use engine::ports::{self, AgentReferences, HeartbeatSnapshot, InstanceHeartbeat, IssuedCredential, RotationStatus};
use engine::secret::SECRET_MARKER;
use fakes::hub::{AgentStatus, Hub, HubConfig, HubEvent, Request, Response};
use fakes::ssh::{SshEndpoint, SshEvent, SshOp, SshOutcome};
use fakes::worker::Worker;
use rand::{Rng, RngCore};
use rand_chacha::ChaCha8Rng;

use crate::model::faults::{StepKind, Subject};
use crate::model::seed::{Consumer, SeedTree};
use crate::model::spec::{HUB, RunSpec};
use crate::observe::trace::Body;
use crate::world::net::HostId;
use crate::world::{Delivery, HUB_ID, World};

/// How often the canary dispatcher asks the hub for a task.
const CANARY_PERIOD_MS: u64 = 20_000;

/// The owner of an operator's dispatch hold (`operator_hold`): no rollout may release it.
pub const OPERATOR_HOLD_OWNER: &str = "operator:maintenance";

/// The holder of the deployment lock a `stale_lock` leaves: a controller that crashed before the run's.
pub const STALE_LOCK_HOLDER: &str = "controller@crashed-earlier";

/// The controller's principal at the hub.
pub(crate) const CONTROLLER_PRINCIPAL: &str = "controller";

/// The controller credential of one rotation generation (secret-marked, so a leak into the trace is caught).
pub(crate) fn controller_credential(generation: u64) -> String {
    format!("{SECRET_MARKER}hub-credential-{generation}")
}

/// How long a controller credential is valid when issued (a day, as the rollout request's budget assumes).
pub(crate) const CONTROLLER_CREDENTIAL_LIFETIME_MS: u64 = 24 * 3_600_000;

/// The hub host's state.
pub(crate) struct HubHost {
    /// The hub's database: it survives crashes of the hub host (every request is a committed transaction).
    model: RefCell<Hub>,
    /// The hub host's SSH endpoint (the legacy recovery reconciles attestation through it).
    ssh: RefCell<SshEndpoint>,
    /// The hub's own stream (the canary dispatcher's choice of worker).
    rng: RefCell<ChaCha8Rng>,
    /// Canary tasks dispatched so far (the client's counter: it survives hub restarts).
    canary_tasks: Cell<u64>,
    /// Controller mutations the hub will carry out without its answer arriving (`hub_timeout`).
    timeouts: Cell<u32>,
    /// The hub's number of each epoch an `open_epoch` step opened, in plan order (`None` when the hub was down or
    /// refused it).
    plan_epochs: RefCell<Vec<Option<u64>>>,
}

impl HubHost {
    /// The hub of a run, with the controller's first credential issued (as enrolment before the run left it).
    pub(crate) fn new(spec: &RunSpec, seeds: &SeedTree) -> HubHost {
        let mut model = Hub::new(HubConfig {
            agent_ttl_ms: spec.hub.agent_ttl_ms,
            expiry: spec.engine.hub_expiry,
            sweep_interval_ms: spec.hub.sweep_interval_ms,
        });
        model.issue_credential(CONTROLLER_PRINCIPAL, &controller_credential(1), CONTROLLER_CREDENTIAL_LIFETIME_MS);
        model.set_token_seed(seeds.rng(Consumer::HubCredentials).next_u64());
        HubHost {
            model: RefCell::new(model),
            ssh: RefCell::new(SshEndpoint::new("hostkey-hub-1", Worker::bare(HUB, format!("{SECRET_MARKER}hub")))),
            rng: RefCell::new(seeds.rng(Consumer::Hub)),
            canary_tasks: Cell::new(0),
            timeouts: Cell::new(0),
            plan_epochs: RefCell::new(Vec::new()),
        }
    }

    /// Takes one pending `hub_timeout`, if any is left.
    fn take_timeout(&self) -> bool {
        let lost = self.timeouts.get();
        if lost > 0 {
            self.timeouts.set(lost - 1);
        }
        lost > 0
    }

    /// `hub_timeout`: the next `count` controller mutations lose their answers.
    pub(crate) fn lose_answers(&self, count: u32) {
        self.timeouts.set(self.timeouts.get() + count);
    }

    /// `route_swap`: the hub publishes a different route bundle.
    pub(crate) fn swap_route_bundle(&self) {
        let _ = self.model.borrow_mut().swap_route_bundle();
    }

    /// The route bundle the hub publishes now (what the operator approves with a rollout request).
    pub(crate) fn route_digest(&self) -> String {
        self.model.borrow().route_digest()
    }

    /// The hub host's SSH host key, as the controller enrolled it.
    pub(crate) fn ssh_host_key(&self) -> String {
        self.ssh.borrow().host_key.clone()
    }

    /// Handles one SSH operation at the hub host's endpoint.
    pub(crate) fn ssh_handle(
        &self,
        now_ms: u64,
        expected_host_key: &str,
        op: SshOp,
        events: &mut Vec<SshEvent>,
    ) -> SshOutcome {
        self.ssh.borrow_mut().handle(now_ms, expected_host_key, op, events)
    }
}

impl World {
    /// Handles one request on the hub's model, at the hub's clock, and traces what happened.
    pub(crate) fn hub_request(&self, request: Request) -> Response {
        let mut events = Vec::new();
        let now_ms = self.host_now_ms(HUB_ID);
        let response = self.hub.model.borrow_mut().handle(now_ms, request, &mut events);
        self.record_hub_events(events);
        response
    }

    /// Whether the hub's sweeper can change nothing more ([`fakes::hub::Hub::at_rest`]), at the hub's clock.
    pub(crate) fn hub_at_rest(&self, fresh_ms: u64, grace_ms: u64) -> bool {
        self.hub.model.borrow().at_rest(self.host_now_ms(HUB_ID), fresh_ms, grace_ms)
    }

    pub(crate) fn record_hub_events(&self, events: Vec<HubEvent>) {
        for event in events {
            let body = match event {
                HubEvent::Registered { agent } => {
                    // An onboarded node's agent enrols as a durable worker identity.
                    let onboarded = self.spec.onboarding.as_ref().is_some_and(|o| o.has_machine(&agent));
                    let durable = self.spec.fleet.durable.contains(&agent) || onboarded;
                    Body::HubRegistered { agent, durable }
                }
                HubEvent::Heartbeat { agent, generation } => Body::HubHeartbeat { agent, generation },
                HubEvent::HeartbeatRefused { agent, unauthorized } => Body::HubHeartbeatRefused { agent, unauthorized },
                HubEvent::BackOnline { agent } => Body::HubBackOnline { agent },
                HubEvent::Offline { agent, silent_ms } => Body::HubOffline { agent, silent_ms },
                HubEvent::Tombstoned { agent, silent_ms, epoch_member: _ } => Body::HubTombstoned { agent, silent_ms },
                HubEvent::ExpiryDeferred { agent, silent_ms, epoch } => {
                    Body::HubExpiryDeferred { agent, silent_ms, epoch }
                }
                HubEvent::EpochOpened { epoch, members: _ } => {
                    let members = self
                        .hub
                        .model
                        .borrow()
                        .epoch(epoch)
                        .map(|e| e.members.iter().cloned().collect())
                        .unwrap_or_default();
                    Body::HubEpochOpened { epoch, members }
                }
                HubEvent::EpochClosed { epoch } => Body::HubEpochClosed { epoch },
                HubEvent::HoldPlaced { agent, owner } => Body::HubHoldPlaced { agent, owner },
                HubEvent::HoldReleased { agent, owner } => Body::HubHoldReleased { agent, owner },
                HubEvent::Dispatched { agent, task } => Body::HubDispatched { agent, task },
                HubEvent::LeaseGranted { agent, until_ms } => {
                    Body::HubLeaseGranted { agent, lease_ms: until_ms.saturating_sub(self.host_now_ms(HUB_ID)) }
                }
                HubEvent::DispatchRefused { agent, task } => Body::HubDispatchRefused { agent, task },
                HubEvent::CredentialRejected { principal, expired } => {
                    Body::HubCredentialRejected { principal, expired }
                }
                HubEvent::LockAcquired { holder, fence, superseded } => {
                    Body::HubLockAcquired { holder, fence, superseded }
                }
                HubEvent::LockReleased { holder, fence } => Body::HubLockReleased { holder, fence },
                HubEvent::MutationFenced { holder, presented, current } => {
                    Body::HubMutationFenced { holder, presented, current }
                }
                HubEvent::PrincipalRevoked { agent } => Body::HubPrincipalRevoked { agent },
                HubEvent::CredentialIssued { agent, rotation, generation } => {
                    Body::HubCredentialIssued { agent, rotation, generation }
                }
                HubEvent::RotationCommitted { agent, rotation, revoked_generation } => {
                    Body::HubRotationCommitted { agent, rotation, revoked_generation }
                }
                HubEvent::RotationAborted { agent, rotation, revoked_generation } => {
                    Body::HubRotationAborted { agent, rotation, revoked_generation }
                }
                HubEvent::Resurrected { agent, epoch } => Body::HubResurrected { agent, epoch },
            };
            self.record(HUB_ID, body);
        }
    }

    pub(super) async fn run_hub_sweeper(self: Rc<Self>) {
        let interval_ms = self.spec.hub.sweep_interval_ms;
        loop {
            tokio::time::sleep(std::time::Duration::from_millis(interval_ms)).await;
            let mut events = Vec::new();
            let now_ms = self.host_now_ms(HUB_ID);
            self.hub.model.borrow_mut().sweep(now_ms, &mut events);
            self.record_hub_events(events);
        }
    }

    /// A trusted client's canary tasks, as in the RCCA's recovery ("stage and release the canary tasks, dispatch
    /// work"): every 20 s the hub is asked to dispatch a task to a worker drawn from the hub's seed stream. The hub
    /// refuses held and unknown workers; the oracles check that nothing lands on a held or quiesced one.
    pub(super) async fn run_canary_dispatcher(self: Rc<Self>) {
        loop {
            tokio::time::sleep(std::time::Duration::from_millis(CANARY_PERIOD_MS)).await;
            let index = self.hub.rng.borrow_mut().random_range(1..=self.spec.fleet.nodes);
            // Task names count across hub restarts (the client's counter, not the hub's).
            let task = self.hub.canary_tasks.get() + 1;
            self.hub.canary_tasks.set(task);
            let agent = self.spec.fleet.node_name(index);
            let _ = self.hub_request(Request::Dispatch { agent, task: format!("canary-{task}") });
        }
    }

    /// A driver action reaches the hub only when the hub is up, as an operator's call would.
    pub(crate) fn driver_hub_request(&self, request: Request) {
        if self.is_up(HUB_ID) {
            let _ = self.hub_request(request);
        }
    }

    /// `open_epoch`: the deployment opens an epoch of `members` at the hub; the plan numbers it (its `close_epoch`
    /// names it by that number, whatever epochs a rollout opened meanwhile).
    pub(crate) fn open_epoch(&self, members: &[String]) {
        let opened = if self.is_up(HUB_ID) {
            match self.hub_request(Request::OpenEpoch { members: members.to_vec() }) {
                Response::EpochOpened { epoch } => Some(epoch),
                _ => None,
            }
        } else {
            None
        };
        self.hub.plan_epochs.borrow_mut().push(opened);
    }

    /// `close_epoch`: the deployment closes the plan's `epoch`-th epoch, naming no member untouched.
    pub(crate) fn close_epoch(&self, epoch: u64) {
        let opened = self.hub.plan_epochs.borrow().get(epoch as usize - 1).copied().flatten();
        if let Some(epoch) = opened {
            self.driver_hub_request(Request::CloseEpoch { epoch, untouched: Vec::new() });
        }
    }

    /// `task_lease`: the hub grants a task lease on `agent` for `duration_ms` of the hub's clock.
    pub(crate) fn grant_task_lease(&self, agent: &str, duration_ms: u64) {
        let until_ms = self.host_now_ms(HUB_ID) + duration_ms;
        self.driver_hub_request(Request::GrantLease { agent: agent.to_owned(), until_ms });
    }

    /// `stale_lock`: a controller that crashed earlier left the deployment lock taken for `lease_ms`.
    pub(crate) fn leave_stale_lock(&self, lease_ms: u64) {
        let holder = STALE_LOCK_HOLDER.to_owned();
        self.driver_hub_request(Request::AcquireLock { holder, lease_ms });
    }

    /// `operator_hold`: an operator places a dispatch hold on `agent` that no rollout may release.
    pub(crate) fn place_operator_hold(&self, agent: &str) {
        self.driver_hub_request(Request::PlaceHold { agent: agent.to_owned(), owner: OPERATOR_HOLD_OWNER.to_owned() });
    }

    /// `credential_expiry`: the controller's credential expires at the hub, now by the hub's clock.
    pub(crate) fn expire_controller_credential(&self) {
        let hub_now_ms = self.host_now_ms(HUB_ID);
        self.hub.model.borrow_mut().expire_credential(CONTROLLER_PRINCIPAL, hub_now_ms);
    }

    /// The rotation state machine installs the controller's credential of `generation` at the hub.
    pub(crate) fn issue_controller_credential(&self, generation: u64) {
        let expires_at_ms = self.host_now_ms(HUB_ID) + CONTROLLER_CREDENTIAL_LIFETIME_MS;
        let token = controller_credential(generation);
        self.hub.model.borrow_mut().issue_credential(CONTROLLER_PRINCIPAL, &token, expires_at_ms);
    }

    /// The hub revokes `agent`'s principal (`principal_revoked`, or an uninstalled agent), and traces it.
    pub(crate) fn revoke_principal(&self, agent: &str) {
        let mut events = Vec::new();
        self.hub.model.borrow_mut().revoke_principal(agent, &mut events);
        self.record_hub_events(events);
    }
}

/// The hub adapter: it presents the credential the engine authenticated with and the lock fence it holds with every
/// mutation (a real client would send them as headers). Reads are public at the hub.
pub(crate) struct SimHub {
    world: Rc<World>,
    from: HostId,
    session: RefCell<HubSession>,
}

#[derive(Default)]
struct HubSession {
    token: String,
    fence: Option<u64>,
}

impl SimHub {
    pub(crate) fn new(world: Rc<World>, from: HostId) -> SimHub {
        SimHub { world, from, session: RefCell::new(HubSession::default()) }
    }

    /// `request` in the envelope of the controller's credential and fence.
    fn envelope(&self, request: Request) -> Request {
        let session = self.session.borrow();
        Request::Authorized {
            principal: CONTROLLER_PRINCIPAL.to_owned(),
            token: session.token.clone(),
            fence: session.fence,
            request: Box::new(request),
        }
    }

    /// A mutation, in the envelope of the controller's credential and fence.
    async fn mutate(&self, request: Request) -> Result<Response, ports::HubError> {
        let request = self.envelope(request);
        if self.world.hub.take_timeout() {
            self.world.fault_met(StepKind::HubTimeout, "", Subject::Rollout, None);
            // The hub carries the mutation out; its answer never arrives, and the caller times out.
            let timeout_ms = self.world.spec.engine.call_timeout_ms;
            let hung = self.world.call_with(self.from, HUB_ID, timeout_ms, move |world| {
                let _ = world.hub_request(request);
                Delivery::<Response>::Hang
            });
            return Err(match hung.await {
                Err(error) => ports::HubError::Transport(error),
                Ok(_) => unreachable!("a hung hub call only ends in a timeout"),
            });
        }
        self.request(request).await
    }
}

impl ports::Hub for SimHub {
    async fn authenticate(&self, credential: &engine::secret::Secret) -> Result<u64, ports::HubError> {
        let token = credential.expose().to_owned();
        let request = Request::Authenticate { principal: CONTROLLER_PRINCIPAL.to_owned(), token: token.clone() };
        match self.request(request).await? {
            Response::Authenticated { expires_at_ms } => {
                self.session.borrow_mut().token = token;
                Ok(expires_at_ms)
            }
            other => Err(rejected(other)),
        }
    }

    async fn acquire_lock(&self, holder: &str, lease_ms: u64) -> Result<ports::LockGrant, ports::HubError> {
        let request = Request::AcquireLock { holder: holder.to_owned(), lease_ms };
        match self.mutate(request).await? {
            Response::LockGranted { fence, .. } => {
                self.session.borrow_mut().fence = Some(fence);
                Ok(ports::LockGrant::Granted { fence })
            }
            Response::LockHeld { holder, fence, expires_at_ms } => {
                let remaining_ms = expires_at_ms.saturating_sub(self.world.host_now_ms(HUB_ID));
                Ok(ports::LockGrant::Held { holder, fence, remaining_ms })
            }
            other => Err(rejected(other)),
        }
    }

    async fn supersede_lock(&self, holder: &str, fence: u64, lease_ms: u64) -> Result<u64, ports::HubError> {
        match self.mutate(Request::SupersedeLock { holder: holder.to_owned(), fence, lease_ms }).await? {
            Response::LockGranted { fence, .. } => {
                self.session.borrow_mut().fence = Some(fence);
                Ok(fence)
            }
            other => Err(rejected(other)),
        }
    }

    async fn renew_lock(&self, fence: u64, lease_ms: u64) -> Result<(), ports::HubError> {
        match self.mutate(Request::RenewLock { fence, lease_ms }).await? {
            Response::LockGranted { .. } => Ok(()),
            other => Err(rejected(other)),
        }
    }

    async fn release_lock(&self, fence: u64) -> Result<bool, ports::HubError> {
        match self.mutate(Request::ReleaseLock { fence }).await? {
            Response::Ok => {
                self.session.borrow_mut().fence = None;
                Ok(true)
            }
            Response::Error(fakes::hub::HubError::Conflict { .. }) => Ok(false),
            other => Err(rejected(other)),
        }
    }

    async fn read_holds(&self) -> Result<BTreeMap<String, Vec<String>>, ports::HubError> {
        match self.request(Request::ReadHolds).await? {
            Response::Holds { holds } => Ok(holds),
            other => Err(rejected(other)),
        }
    }

    async fn read_heartbeats(&self) -> Result<HeartbeatSnapshot, ports::HubError> {
        let timeout_ms = self.world.spec.engine.call_timeout_ms;
        let response =
            self.world.call(self.from, HUB_ID, timeout_ms, |world| world.hub_request(Request::ReadHeartbeats)).await?;
        match response {
            Response::Heartbeats { now_ms, rows } => Ok(HeartbeatSnapshot {
                hub_now_ms: now_ms,
                instances: rows
                    .into_iter()
                    .map(|row| InstanceHeartbeat {
                        instance: row.agent,
                        last_heartbeat_ms: row.last_seen_ms,
                        registered: row.status != AgentStatus::Tombstoned,
                        revision: row.revision,
                    })
                    .collect(),
            }),
            Response::Error(error) => Err(ports::HubError::Rejected(error.to_string())),
            other => Err(ports::HubError::Rejected(format!("unexpected answer to a heartbeat read: {other:?}"))),
        }
    }

    async fn place_hold(&self, agent: &str, owner: &str) -> Result<(), ports::HubError> {
        let request = Request::PlaceHold { agent: agent.to_owned(), owner: owner.to_owned() };
        match self.mutate(request).await? {
            Response::Ok => Ok(()),
            other => Err(rejected(other)),
        }
    }

    async fn release_hold(&self, agent: &str, owner: &str) -> Result<bool, ports::HubError> {
        let request = Request::ReleaseHold { agent: agent.to_owned(), owner: owner.to_owned() };
        match self.mutate(request).await? {
            Response::Ok => Ok(true),
            // No such hold: released already (a replay), which is what the caller wanted.
            Response::Error(fakes::hub::HubError::Conflict { .. }) => Ok(false),
            other => Err(rejected(other)),
        }
    }

    async fn open_epoch(&self, members: &[String]) -> Result<u64, ports::HubError> {
        match self.mutate(Request::OpenEpoch { members: members.to_vec() }).await? {
            Response::EpochOpened { epoch } => Ok(epoch),
            other => Err(rejected(other)),
        }
    }

    async fn route_bundle(&self) -> Result<String, ports::HubError> {
        match self.request(Request::ReadRouteBundle).await? {
            Response::RouteBundle { digest } => {
                // A swapped bundle lands when the controller reads one its request did not approve.
                if self.world.approved_route_digest().is_some_and(|approved| approved != digest) {
                    self.world.fault_met(StepKind::RouteSwap, "", Subject::Rollout, None);
                }
                Ok(digest)
            }
            other => Err(rejected(other)),
        }
    }

    async fn close_epoch(&self, epoch: u64, untouched: &[String]) -> Result<bool, ports::HubError> {
        match self.mutate(Request::CloseEpoch { epoch, untouched: untouched.to_vec() }).await? {
            Response::Ok => Ok(true),
            Response::Error(fakes::hub::HubError::Conflict { .. }) => Ok(false),
            other => Err(rejected(other)),
        }
    }

    async fn begin_rotation(&self, agent: &str, rotation: &str) -> Result<IssuedCredential, ports::HubError> {
        let request = Request::BeginRotation { agent: agent.to_owned(), rotation: rotation.to_owned() };
        match self.mutate(request).await? {
            Response::RotationIssued { generation, token } => {
                Ok(IssuedCredential { generation, token: engine::secret::Secret::new(token.expose()) })
            }
            other => Err(rejected(other)),
        }
    }

    async fn agent_references(&self, agent: &str) -> Result<AgentReferences, ports::HubError> {
        match self.request(Request::ReadReferences { agent: agent.to_owned() }).await? {
            Response::References { epochs, holds, lease_until_ms } => {
                Ok(AgentReferences { epochs, holds, lease_until_ms })
            }
            other => Err(rejected(other)),
        }
    }

    async fn resurrect_agent(&self, agent: &str, epoch: u64) -> Result<bool, ports::HubError> {
        match self.mutate(Request::Resurrect { agent: agent.to_owned(), epoch }).await? {
            Response::Resurrected { restored } => Ok(restored),
            other => Err(rejected(other)),
        }
    }

    async fn rotation_status(&self, agent: &str, rotation: &str) -> Result<Option<RotationStatus>, ports::HubError> {
        let request = Request::ReadRotation { agent: agent.to_owned(), rotation: rotation.to_owned() };
        // A read in the controller's envelope: authenticated, and never one of the mutations a `hub_timeout` loses.
        match self.request(self.envelope(request)).await? {
            Response::RotationRead { state, generation, successor_heartbeats } => Ok(Some(RotationStatus {
                state: match state {
                    fakes::hub::RotationState::Open => ports::RotationState::Open,
                    fakes::hub::RotationState::Committed => ports::RotationState::Committed,
                    fakes::hub::RotationState::Aborted => ports::RotationState::Aborted,
                },
                generation,
                successor_heartbeats,
            })),
            Response::Error(fakes::hub::HubError::UnknownRotation { .. }) => Ok(None),
            other => Err(rejected(other)),
        }
    }

    async fn commit_rotation(&self, agent: &str, rotation: &str) -> Result<bool, ports::HubError> {
        let request = Request::CommitRotation { agent: agent.to_owned(), rotation: rotation.to_owned() };
        match self.mutate(request).await? {
            Response::RotationEnded { revoked } => Ok(revoked),
            other => Err(rejected(other)),
        }
    }

    async fn abort_rotation(&self, agent: &str, rotation: &str) -> Result<bool, ports::HubError> {
        let request = Request::AbortRotation { agent: agent.to_owned(), rotation: rotation.to_owned() };
        match self.mutate(request).await? {
            Response::RotationEnded { revoked } => Ok(revoked),
            other => Err(rejected(other)),
        }
    }
}

impl SimHub {
    async fn request(&self, request: Request) -> Result<Response, ports::HubError> {
        let timeout_ms = self.world.spec.engine.call_timeout_ms;
        Ok(self.world.call(self.from, HUB_ID, timeout_ms, move |world| world.hub_request(request)).await?)
    }
}

fn rejected(response: Response) -> ports::HubError {
    match response {
        Response::Error(error @ fakes::hub::HubError::CredentialRejected { .. }) => {
            ports::HubError::Unauthorized(error.to_string())
        }
        Response::Error(error @ fakes::hub::HubError::StaleFence { .. }) => ports::HubError::Fenced(error.to_string()),
        Response::Error(error) => ports::HubError::Rejected(error.to_string()),
        other => ports::HubError::Rejected(format!("unexpected answer: {other:?}")),
    }
}
