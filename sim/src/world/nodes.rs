//! The nodes and their agents: each node's bearer token and random stream, its worker behind its SSH endpoint (its
//! disk and installed software, which survive crashes), the agent's heartbeat loop (which reads the bearer it presents
//! from the worker's credential file on every heartbeat, so a rotation's install switches it), and the `SimSsh` adapter
//! through which the engine reaches the workers. [`Nodes`] owns that state; the nodes' fault steps change it here and nowhere
//! else.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use engine::ports::{self, Endpoint, SshRequest, SshResponse, TransportError};
use engine::secret::SECRET_MARKER;
use fakes::agent::{Agent, AgentAction, HEARTBEAT_INTERVAL_MS, HEARTBEAT_TIMEOUT_MS, HeartbeatOutcome, ServiceState};
use fakes::hub::{Request, Response};
use fakes::ssh::{SshEndpoint, SshEvent, SshOp, SshOutcome, SshReply, Storage};
use fakes::worker::{AGENT_CREDENTIAL, Drift, FileEntry, Worker};
use rand::{Rng, RngCore};
use rand_chacha::ChaCha8Rng;
use tokio::time::Instant;

use crate::model::faults::{DeathPoint, DeathSubsystem, StepKind, Subject};
use crate::model::seed::{Consumer, SeedTree};
use crate::model::spec::{PRIOR_GENERATION, PRIOR_REVISION, RunSpec};
use crate::observe::trace::{Body, Egress};
use crate::world::net::HostId;
use crate::world::{Delivery, HUB_ID, World};

/// The nodes' state.
pub(crate) struct Nodes {
    /// Each node's agent bearer token (minted from the node's seed stream).
    tokens: Vec<String>,
    /// Each node's own random stream (agent heartbeat phase).
    rngs: RefCell<Vec<ChaCha8Rng>>,
    /// Each node's worker state behind its SSH endpoint (its disk and installed software: survives crashes).
    workers: RefCell<Vec<SshEndpoint>>,
    /// Per host: SSH connections still to time out (`ssh_timeout`).
    ssh_timeouts: RefCell<BTreeMap<HostId, u32>>,
    /// Agents a `ttl_expiry` silenced that have not started again yet.
    silenced: std::cell::Cell<u32>,
    /// Nodes whose service an SSH `stop_service` stopped and no `start_service` started again: past the quiescence
    /// barrier, where any traffic they originate is traced (`node.egress`).
    stopped_by_ssh: RefCell<BTreeSet<HostId>>,
}

impl Nodes {
    /// The fleet's nodes as enrolment left them before the run: each with its token and attestation key drawn from its
    /// own seed stream, running the prior revision, its token in its agent's credential file. In a one-life run the
    /// file is written when the node's machine enrols its agent (`World::install_enrolled_credential`).
    pub(crate) fn new(spec: &RunSpec, seeds: &SeedTree) -> Nodes {
        let one_life = spec.onboarding.as_ref().is_some_and(|onboarding| onboarding.fleet);
        let mut rngs = Vec::new();
        let mut tokens = Vec::new();
        let mut workers = Vec::new();
        for index in 1..=spec.fleet.nodes {
            let name = spec.fleet.node_name(index);
            let mut rng = seeds.rng(Consumer::Node(index));
            let token = format!("{SECRET_MARKER}{:016x}{:016x}", rng.next_u64(), rng.next_u64());
            let attestation_key = format!("{SECRET_MARKER}{:016x}", rng.next_u64());
            let mut worker = Worker::installed(name.clone(), PRIOR_REVISION, PRIOR_GENERATION, attestation_key);
            if !one_life {
                worker.files.insert(AGENT_CREDENTIAL.to_owned(), FileEntry::canonical(token.clone()));
            }
            tokens.push(token);
            workers.push(SshEndpoint::new(format!("hostkey-{name}-1"), worker));
            rngs.push(rng);
        }
        Nodes {
            tokens,
            rngs: RefCell::new(rngs),
            workers: RefCell::new(workers),
            ssh_timeouts: RefCell::new(BTreeMap::new()),
            silenced: std::cell::Cell::new(0),
            stopped_by_ssh: RefCell::new(BTreeSet::new()),
        }
    }

    /// Node `index`'s agent bearer token (1-based).
    pub(crate) fn token(&self, index: u32) -> &str {
        &self.tokens[index as usize - 1]
    }

    /// Every worker's SSH endpoint as the controller enrolled it, in node order.
    pub(crate) fn endpoints(&self) -> Vec<Endpoint> {
        self.workers
            .borrow()
            .iter()
            .map(|e| Endpoint { node: e.worker.id.clone(), host_key: e.host_key.clone() })
            .collect()
    }

    /// The newest barrier generation any worker has passed.
    pub(crate) fn newest_generation(&self) -> u64 {
        self.workers.borrow().iter().map(|e| e.worker.barrier_generation).max().unwrap_or(PRIOR_GENERATION)
    }

    /// The recovery environment file of `node`'s worker (where its attestation key is enrolled), if it is one.
    pub(crate) fn recovery_env(&self, node: &str) -> Option<String> {
        let workers = self.workers.borrow();
        workers
            .iter()
            .find(|endpoint| endpoint.worker.id == node)
            .map(|endpoint| endpoint.worker.recovery_env_content())
    }

    /// `ssh_timeout`: the next `count` SSH connections to `host` time out.
    fn add_ssh_timeouts(&self, host: HostId, count: u32) {
        *self.ssh_timeouts.borrow_mut().entry(host).or_insert(0) += count;
    }

    /// Takes one pending SSH timeout of `host`, if any is left.
    fn take_ssh_timeout(&self, host: HostId) -> bool {
        let mut timeouts = self.ssh_timeouts.borrow_mut();
        match timeouts.get_mut(&host) {
            Some(pending) if *pending > 0 => {
                *pending -= 1;
                true
            }
            _ => false,
        }
    }
}

impl World {
    pub(super) async fn run_agent(self: Rc<Self>, host: HostId, index: u32) {
        let name = self.names[host].to_string();
        // The agent presents what its credential file holds, read afresh on every heartbeat: a rotation's install
        // switches it at the next one. A one-life node's agent heartbeats only while it is enrolled (a decommission
        // uninstalls it); its enrolment wrote the bearer it redeemed into the file.
        let one_life = self.one_life();
        let mut agent = Agent::new(name.clone());
        let phase_ms = self.nodes.rngs.borrow_mut()[index as usize - 1].random_range(0..HEARTBEAT_INTERVAL_MS);
        tokio::time::sleep(std::time::Duration::from_millis(phase_ms)).await;
        let mut next = Instant::now();
        loop {
            let bearer = {
                let workers = self.nodes.workers.borrow();
                let worker = &workers[index as usize - 1].worker;
                agent.service = worker.service;
                let enrolled = !one_life || self.fleet_node_bearer(&name).is_some();
                worker.agent_bearer().filter(|_| enrolled).map(str::to_owned)
            };
            if let Some(token) = bearer.as_deref().filter(|_| agent.poll_tick() == AgentAction::SendHeartbeat) {
                let outcome = match self.foreign_hub_url(index) {
                    // The agent dials the hub its environment names: any other address is not the hub.
                    Some(url) => {
                        let error = format!("connection refused: {url} is not the hub");
                        self.record(host, Body::AgentHeartbeatFailed { error });
                        HeartbeatOutcome::Unreachable
                    }
                    None => self.send_heartbeat(host, index, &name, token, one_life).await,
                };
                agent.handle_heartbeat_outcome(outcome);
            }
            next += std::time::Duration::from_millis(HEARTBEAT_INTERVAL_MS);
            while next <= Instant::now() {
                next += std::time::Duration::from_millis(HEARTBEAT_INTERVAL_MS);
            }
            tokio::time::sleep_until(next).await;
        }
    }

    /// One heartbeat of node `index`'s agent to the hub, and how it went.
    /// `also_instance`: an accepted heartbeat is also the node's bare-metal instance's (`metal_heartbeat`, a no-op
    /// for a node that is no instance), as in a one-life run, where the fleet node is the machine.
    async fn send_heartbeat(
        self: &Rc<Self>,
        host: HostId,
        index: u32,
        name: &str,
        token: &str,
        also_instance: bool,
    ) -> HeartbeatOutcome {
        let revision = self.node_revision(index);
        let request = Request::Heartbeat { agent: name.to_owned(), token: token.to_owned(), revision };
        let agent = also_instance.then(|| name.to_owned());
        let result = self
            .call(host, HUB_ID, HEARTBEAT_TIMEOUT_MS, move |world| {
                let response = world.hub_request(request);
                if let (Some(agent), Response::Ok) = (&agent, &response) {
                    world.metal_heartbeat(agent);
                }
                response
            })
            .await;
        match result {
            Ok(Response::Ok) => HeartbeatOutcome::Accepted,
            Ok(Response::Error(error)) => {
                self.record(host, Body::AgentHeartbeatFailed { error: error.to_string() });
                HeartbeatOutcome::Refused
            }
            Ok(other) => panic!("hub answered a heartbeat with {other:?}"),
            Err(error) => {
                self.record(host, Body::AgentHeartbeatFailed { error: error.to_string() });
                HeartbeatOutcome::Unreachable
            }
        }
    }

    /// The hub address node `index`'s environment names, when it names one that is not the hub's.
    fn foreign_hub_url(&self, index: u32) -> Option<String> {
        let workers = self.nodes.workers.borrow();
        let env = workers[index as usize - 1].worker.file(fakes::worker::MAC_ENV)?;
        // Read on every heartbeat: one key looked up in place, no parse of the whole file and no allocation.
        let url = env
            .content
            .lines()
            .find_map(|line| line.strip_prefix(fakes::worker::HUB_URL_VAR).and_then(|rest| rest.strip_prefix('=')))?;
        (url != fakes::worker::DEFAULT_HUB_URL).then(|| url.to_owned())
    }

    /// A fleet node reached for the network: traced as `node.egress` when its service is stopped by an SSH stop (past
    /// the quiescence barrier), nothing otherwise. Every path a node's traffic takes calls it: the network's calls, the
    /// capsule fetch of a staging, the site resolver's queries.
    pub(crate) fn egress(&self, from: HostId, egress: Egress, to: &str, name: Option<&str>) {
        if self.nodes.stopped_by_ssh.borrow().contains(&from) {
            self.record(from, Body::NodeEgress { egress, to: to.to_owned(), name: name.map(str::to_owned) });
        }
    }

    /// The source revision node `index` runs, as its agent reports it (attested by its bearer token).
    fn node_revision(&self, index: u32) -> Option<String> {
        self.nodes.workers.borrow()[index as usize - 1]
            .worker
            .installed
            .as_ref()
            .map(|installed| installed.revision.clone())
    }

    /// A one-life node's machine enrolled its agent with `bearer`: the agent's credential file holds it from now on
    /// (what the deployed OS's agent install writes). Nothing for a machine that is not a fleet node.
    pub(crate) fn install_enrolled_credential(&self, machine: &str, bearer: &str) {
        let Some(index) = self.spec.fleet.node_index(machine) else { return };
        let mut workers = self.nodes.workers.borrow_mut();
        workers[index as usize - 1].worker.files.insert(AGENT_CREDENTIAL.to_owned(), FileEntry::canonical(bearer));
    }

    /// An operator or a fault stops or starts a node's agent service outside any rollout.
    pub(crate) fn set_agent_service(&self, host: HostId, running: bool) {
        let Some(index) = self.node_index(host) else { return };
        self.nodes.workers.borrow_mut()[index as usize - 1].worker.service =
            if running { ServiceState::Running } else { ServiceState::Stopped };
        self.record(host, Body::WorkerService { running });
    }

    /// `ttl_expiry`: `host`'s agent stops now and starts again `silent_ms` later. The start is the world's timer,
    /// not a task of the node: it comes whatever the node does meanwhile.
    pub(crate) fn silence_agent(self: &Rc<Self>, host: HostId, silent_ms: u64) {
        self.set_agent_service(host, false);
        let silenced = &self.nodes.silenced;
        silenced.set(silenced.get() + 1);
        let world = self.clone();
        self.spawn_timer(async move {
            tokio::time::sleep(std::time::Duration::from_millis(silent_ms)).await;
            world.set_agent_service(host, true);
            let silenced = &world.nodes.silenced;
            silenced.set(silenced.get() - 1);
        });
    }

    /// An agent a `ttl_expiry` silenced is still to start again.
    pub(crate) fn agent_start_pending(&self) -> bool {
        self.nodes.silenced.get() > 0
    }

    fn with_worker(&self, host: HostId, f: impl FnOnce(&mut SshEndpoint)) {
        if let Some(index) = self.node_index(host) {
            f(&mut self.nodes.workers.borrow_mut()[index as usize - 1]);
        }
    }

    /// `marker_drift`: the worker's identity marker drifts in `shape`.
    pub(crate) fn drift_marker(&self, host: HostId, shape: Drift) {
        self.with_worker(host, |endpoint| endpoint.worker.apply_drift(shape))
    }

    /// `ssh_timeout`: the next `count` SSH connections to `host` time out.
    pub(crate) fn time_out_ssh(&self, host: HostId, count: u32) {
        self.nodes.add_ssh_timeouts(host, count);
    }

    /// `endpoint_identity_change`: the worker presents the next host key.
    pub(crate) fn change_endpoint_identity(&self, host: HostId) {
        self.with_worker(host, |endpoint| {
            let generation = endpoint.host_key.rsplit('-').next().and_then(|g| g.parse::<u64>().ok()).unwrap_or(1);
            let name = endpoint.worker.id.clone();
            endpoint.change_identity(format!("hostkey-{name}-{}", generation + 1));
        })
    }

    /// `storage_fault`: the worker's storage turns `storage`.
    pub(crate) fn set_worker_storage(&self, host: HostId, storage: Storage) {
        self.with_worker(host, |endpoint| endpoint.set_storage(storage))
    }

    /// Whether `host`'s environment now carries an attestation key with no `MAC_STARTUP_CLEAR_HOLD` beside it (a
    /// worker that would start with its identity and nothing holding it back).
    fn identity_without_hold(&self, host: HostId) -> bool {
        let Some(index) = self.node_index(host) else { return false };
        let workers = self.nodes.workers.borrow();
        let Some(env) = workers[index as usize - 1].worker.file(fakes::worker::MAC_ENV) else { return false };
        let keys = fakes::worker::parse_env(&env.content).unwrap_or_default();
        keys.contains_key(fakes::worker::ATTESTATION_KEY_VAR)
            && !keys.contains_key(fakes::worker::STARTUP_CLEAR_HOLD_VAR)
    }

    /// Handles one SSH operation at a worker (or the hub host) and traces what happened there.
    pub(crate) fn ssh_deliver(
        &self,
        host: HostId,
        expected_host_key: &str,
        op: SshOp,
    ) -> Delivery<Result<SshReply, fakes::ssh::SshError>> {
        let now_ms = self.host_now_ms(host);
        let mut events = Vec::new();
        // A staged capsule is fetched over the network by the node: a slow fetch answers late.
        let fetch_delay_ms = match &op {
            SshOp::StageArtifact { capsule, .. } => self.controller.fetch_delay_ms(&capsule.digest),
            _ => 0,
        };
        let observing = matches!(op, SshOp::Observe);
        let outcome = match self.node_index(host) {
            Some(index) => {
                let mut workers = self.nodes.workers.borrow_mut();
                let endpoint = &mut workers[index as usize - 1];
                // Journal-bound operations are replay-safe at the node: an operation id already applied is acknowledged
                // without running again (the RCCA's "operation ID ... make replay safe").
                let replay = op.operation_id().is_some_and(|id| endpoint.ops_log.iter().any(|r| r.operation_id == id));
                if replay && expected_host_key == endpoint.host_key {
                    SshOutcome::Reply(Ok(SshReply::Done))
                } else {
                    endpoint.handle(now_ms, expected_host_key, op, &mut events)
                }
            }
            None => self.hub.ssh_handle(now_ms, expected_host_key, op, &mut events),
        };
        let node = self.names[host].to_string();
        if observing {
            // A read-only observation shows the worker as it is: a drift of its identity lands here.
            self.fault_met(StepKind::MarkerDrift, &node, Subject::Node(node.clone()), None);
        }
        for event in &events {
            let met = match event {
                SshEvent::Refused { error: fakes::ssh::SshError::HostKeyMismatch { .. }, .. } => {
                    Some(StepKind::EndpointIdentityChange)
                }
                SshEvent::Refused { error: fakes::ssh::SshError::DiskFull, .. } | SshEvent::Hung { .. } => {
                    Some(StepKind::StorageFault)
                }
                _ => None,
            };
            if let Some(kind) = met {
                self.fault_met(kind, &node, Subject::Node(node.clone()), None);
            }
        }
        for event in events {
            let body = match event {
                SshEvent::Mutated { operation_id, op_kind, path_or_unit, .. } => {
                    if op_kind == "stop_service" || op_kind == "start_service" {
                        let running = op_kind == "start_service";
                        if running {
                            self.nodes.stopped_by_ssh.borrow_mut().remove(&host);
                        } else {
                            self.nodes.stopped_by_ssh.borrow_mut().insert(host);
                        }
                        self.record(host, Body::WorkerService { running });
                    }
                    let unheld = op_kind == "write_file_atomic"
                        && path_or_unit == fakes::worker::MAC_ENV
                        && self.identity_without_hold(host);
                    let mutated = Body::WorkerMutated { op: op_kind.to_owned(), operation_id, target: path_or_unit };
                    if unheld {
                        self.record(host, mutated);
                        Body::WorkerIdentityUnheld
                    } else {
                        mutated
                    }
                }
                SshEvent::Refused { operation_id, op_kind, error, .. } => {
                    Body::WorkerRefused { op: op_kind.to_owned(), operation_id, error: error.to_string() }
                }
                SshEvent::Hung { operation_id, op_kind, .. } => {
                    Body::WorkerHung { op: op_kind.to_owned(), operation_id }
                }
            };
            self.record(host, body);
        }
        match outcome {
            SshOutcome::Hang => Delivery::Hang,
            SshOutcome::Reply(reply) if fetch_delay_ms > 0 => Delivery::After(fetch_delay_ms, reply),
            SshOutcome::Reply(reply) => Delivery::Reply(reply),
        }
    }
}

/// The engine's SSH port over the simulated network. Staging fetches the capsule from the artifact store at the
/// node (a network fetch, traced as such).
pub(crate) struct SimSsh {
    pub(crate) world: Rc<World>,
    pub(crate) from: HostId,
    /// Whose operations these are: a `controller_death` at `after_remote_mutation` of this subsystem fires here.
    pub(crate) subsystem: DeathSubsystem,
}

impl ports::Ssh for SimSsh {
    async fn run(&self, endpoint: &Endpoint, request: SshRequest) -> Result<SshResponse, ports::SshError> {
        let world = &self.world;
        let to = world.host_id(&endpoint.node);
        let timeout_ms = world.spec.engine.call_timeout_ms;
        if world.nodes.take_ssh_timeout(to) {
            let node = endpoint.node.clone();
            world.fault_met(StepKind::SshTimeout, &node, Subject::Node(node.clone()), None);
            tokio::time::sleep(std::time::Duration::from_millis(timeout_ms)).await;
            return Err(ports::SshError::Transport(TransportError::Timeout));
        }
        let mutating = !matches!(request, SshRequest::Observe | SshRequest::ProbeStorage { .. });
        let op = match request {
            SshRequest::Observe => SshOp::Observe,
            SshRequest::WriteFileAtomic { operation_id, path, content, mode } => SshOp::WriteFileAtomic {
                operation_id,
                path,
                content: content.expose().to_owned(),
                mode,
                owner: fakes::worker::CANONICAL_OWNER.to_owned(),
            },
            SshRequest::RemoveFile { operation_id, path } => SshOp::Remove { operation_id, path },
            SshRequest::StopService { operation_id } => SshOp::StopService { operation_id },
            SshRequest::StartService { operation_id } => SshOp::StartService { operation_id },
            SshRequest::StageArtifact { operation_id, digest } => {
                // The node downloads the capsule from the artifact store.
                world.egress(to, Egress::Download, "artifacts", Some(&digest));
                let fetched = world.fetch_artifact(&digest);
                match fetched {
                    Ok(capsule) => SshOp::StageArtifact { operation_id, capsule },
                    Err(error) => return Err(ports::SshError::Refused(format!("staging {digest}: {error}"))),
                }
            }
            SshRequest::RestorePrevious { operation_id, revision, generation } => {
                SshOp::RestorePrevious { operation_id, revision, generation }
            }
            SshRequest::ProbeStorage { operation_id } => SshOp::ProbeStorage { operation_id },
            SshRequest::RunInstaller { operation_id, revision, generation, required_digests, route_digest } => {
                SshOp::RunInstaller { operation_id, revision, generation, required_digests, route_digest }
            }
            SshRequest::SeedHardwareSync { .. } => {
                return Err(ports::SshError::Refused(format!(
                    "{}: no MAAS hardware-sync timer on a fleet worker",
                    endpoint.node
                )));
            }
        };
        let expected = endpoint.host_key.clone();
        let reply =
            world.call_with(self.from, to, timeout_ms, move |world| world.ssh_deliver(to, &expected, op)).await?;
        let response = match reply {
            Ok(SshReply::Observation(observation)) => SshResponse::Observed(Box::new(node_report(*observation))),
            Ok(SshReply::Probe(probe)) => {
                let check = |check: Option<Result<(), String>>| match check {
                    Some(Ok(())) => ports::ProbeCheck::Passed,
                    Some(Err(error)) => ports::ProbeCheck::Failed(error),
                    None => ports::ProbeCheck::NotRun,
                };
                SshResponse::StorageProbed(ports::StorageProbe {
                    write: check(probe.write),
                    file_fsync: check(probe.file_fsync),
                    rename: check(probe.rename),
                    dir_fsync: check(probe.dir_fsync),
                    free_bytes: probe.free_bytes,
                })
            }
            Ok(_) => SshResponse::Done,
            Err(fakes::ssh::SshError::HostKeyMismatch { presented }) => {
                return Err(ports::SshError::HostKeyMismatch { presented });
            }
            Err(error) => return Err(ports::SshError::Refused(error.to_string())),
        };
        let on = if self.subsystem == DeathSubsystem::Rollout { Subject::Rollout } else { Subject::Controller };
        if mutating && world.take_death(self.subsystem, DeathPoint::AfterRemoteMutation, on) {
            world.die_here(self.from).await;
        }
        Ok(response)
    }
}

fn file_kind(kind: &fakes::worker::FileKind) -> engine::ports::FileKind {
    use engine::ports::FileKind as Kind;
    match kind {
        fakes::worker::FileKind::Regular => Kind::Regular,
        fakes::worker::FileKind::Symlink { .. } => Kind::Symlink,
        fakes::worker::FileKind::Directory => Kind::Directory,
    }
}

fn file_facts(stat: fakes::worker::FileStat) -> engine::ports::FileFacts {
    engine::ports::FileFacts {
        kind: file_kind(&stat.kind),
        mode: stat.mode,
        owner: stat.owner,
        nlink: stat.nlink,
        content: stat.content,
    }
}

/// The fake's observation in the engine's words (the engine never sees the fake's types).
fn node_report(observation: fakes::worker::Observation) -> ports::NodeReport {
    ports::NodeReport {
        identity: engine::ports::NodeObservation {
            node: observation.worker_id,
            env: observation.mac_env.map(file_facts),
            marker: observation.marker.map(file_facts),
            manifest: observation.manifest.map(file_facts),
            receipt: observation.receipt.map(file_facts),
            installed: observation.installed.map(|installed| (installed.revision, installed.generation)),
            barrier_generation: observation.barrier_generation,
        },
        service_running: observation.service == ServiceState::Running,
        staged: observation.staged.into_iter().collect(),
        credential: observation.credential.map(|stat| ports::CredentialFacts {
            kind: file_kind(&stat.kind),
            mode: stat.mode,
            owner: stat.owner,
            token: engine::secret::Secret::new(stat.content),
        }),
    }
}
