//! The driver against in-memory ports: a hub that keeps rotations as the real one does (idempotent by rotation id),
//! a node with a credential file and an agent whose heartbeats the hub counts, a journal that can stop the controller
//! at any record, and a clock whose sleeps return at once. A controller death is a journal append (or a hub call)
//! that never completes: the driver's future is dropped there, and a second driver adopts the journal.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::future::Future;

use futures_util::FutureExt;

use super::*;
use crate::ports::{CredentialFacts, FileKind, NodeObservation, NodeReport, RotationStatus, SecretsError};

const ROTATION: &str = "rotation-node-03-1";
const NODE: &str = "node-03";
const HOST_KEY: &str = "hostkey-node-03-1";
const PREDECESSOR: &str = "fleetsim-secret-enrolment";

#[derive(Debug, Clone, PartialEq, Eq)]
struct HubRotation {
    state: RotationState,
    generation: u64,
    token: String,
}

#[derive(Default)]
struct World {
    now_ms: Cell<u64>,
    // the hub
    rotations: RefCell<BTreeMap<String, HubRotation>>,
    current_generation: Cell<u64>,
    mints: Cell<u32>,
    /// The successor heartbeats the hub had counted when each commit arrived.
    commits_at: RefCell<Vec<u64>>,
    aborts: RefCell<Vec<String>>,
    hub_failures: RefCell<VecDeque<HubError>>,
    hang_commit: Cell<bool>,
    /// The next issue is carried out and its answer lost.
    lose_issue_answer: Cell<bool>,
    authentications: Cell<u32>,
    // the node
    file: RefCell<Option<String>>,
    host_key: RefCell<String>,
    agent_running: Cell<bool>,
    writes: RefCell<Vec<String>>,
    ssh_failures: RefCell<VecDeque<SshError>>,
    observations: Cell<u32>,
    // the controller
    journal: RefCell<Vec<String>>,
    /// The controller dies at the first append of a record of this kind and step (the record is not written).
    die_at: RefCell<Option<(&'static str, RotationStep)>>,
    events: RefCell<Vec<RotationEvent>>,
}

impl World {
    fn new() -> World {
        let world = World::default();
        world.current_generation.set(1);
        *world.file.borrow_mut() = Some(PREDECESSOR.to_owned());
        *world.host_key.borrow_mut() = HOST_KEY.to_owned();
        world.agent_running.set(true);
        world
    }

    /// The heartbeats the hub counted for the successor: the agent reads its file on each heartbeat, so a running
    /// agent whose file holds the successor has one accepted by the next read.
    fn successor_heartbeats(&self, token: &str) -> u64 {
        u64::from(self.agent_running.get() && self.file.borrow().as_deref() == Some(token))
    }

    fn request() -> RotationRequest {
        RotationRequest {
            rotation: ROTATION.into(),
            endpoint: Endpoint { node: NODE.into(), host_key: HOST_KEY.into() },
            backoff: Backoff::default(),
            prove_ms: 120_000,
            prove_poll_ms: 10_000,
            credential_wait_ms: 60_000,
        }
    }

    /// Runs the driver once: `Some(end)`, or `None` when the controller died on the way.
    fn run(&self) -> Option<RotationEnd> {
        let ports = RotationPorts {
            clock: self,
            hub: self,
            ssh: self,
            journal: self,
            signals: self,
            jitter: self,
            secrets: self,
        };
        ports.run_rotation(&World::request()).now_or_never()
    }

    fn kinds(&self) -> Vec<String> {
        self.journal
            .borrow()
            .iter()
            .map(|line| {
                let record = Record::decode(line).unwrap().unwrap();
                let step = match &record {
                    Record::Intent { step, .. } | Record::Completed { step, .. } => format!(" {}", step.as_str()),
                    _ => String::new(),
                };
                format!("{}{step}", record.kind())
            })
            .collect()
    }

    fn hub_rotation(&self) -> Option<HubRotation> {
        self.rotations.borrow().get(ROTATION).cloned()
    }

    fn take_hub_failure(&self) -> Result<(), HubError> {
        match self.hub_failures.borrow_mut().pop_front() {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }
}

impl Clock for World {
    fn now_ms(&self) -> u64 {
        self.now_ms.get()
    }

    fn monotonic_ms(&self) -> u64 {
        self.now_ms.get()
    }

    fn sleep_ms(&self, duration_ms: u64) -> impl Future<Output = ()> {
        self.now_ms.set(self.now_ms.get() + duration_ms);
        std::future::ready(())
    }
}

impl Jitter for World {
    fn draw(&self) -> u64 {
        0
    }
}

impl Signals for World {
    fn emit(&self, signal: Signal) {
        let Signal::Rotation { rotation, node, event } = signal else { panic!("only rotation signals here") };
        assert_eq!((rotation.as_str(), node.as_str()), (ROTATION, NODE));
        self.events.borrow_mut().push(event);
    }
}

impl Secrets for World {
    async fn attestation_key(&self, _node: &str) -> Result<Secret, SecretsError> {
        Err(SecretsError::NotFound("not used".into()))
    }

    async fn hub_credential(&self) -> Result<Secret, SecretsError> {
        Ok(Secret::new("fleetsim-secret-controller"))
    }
}

impl Journal for World {
    async fn append(&self, record: &str) -> Result<(), crate::ports::JournalError> {
        let decoded = Record::decode(record).unwrap().unwrap();
        let step = match &decoded {
            Record::Intent { step, .. } | Record::Completed { step, .. } => Some(*step),
            _ => None,
        };
        let die_at = *self.die_at.borrow();
        if let (Some((kind, at)), Some(step)) = (die_at, step) {
            if decoded.kind() == kind && step == at {
                *self.die_at.borrow_mut() = None;
                std::future::pending::<()>().await;
            }
        }
        self.journal.borrow_mut().push(record.to_owned());
        Ok(())
    }

    async fn replay(&self) -> Result<Vec<String>, crate::ports::JournalError> {
        Ok(self.journal.borrow().clone())
    }
}

impl Hub for World {
    async fn authenticate(&self, _credential: &Secret) -> Result<u64, HubError> {
        self.authentications.set(self.authentications.get() + 1);
        Ok(86_400_000)
    }

    async fn acquire_lock(&self, _holder: &str, _lease_ms: u64) -> Result<crate::ports::LockGrant, HubError> {
        unreachable!("a rotation takes no deployment lock")
    }

    async fn supersede_lock(&self, _holder: &str, _fence: u64, _lease_ms: u64) -> Result<u64, HubError> {
        unreachable!("a rotation takes no deployment lock")
    }

    async fn renew_lock(&self, _fence: u64, _lease_ms: u64) -> Result<(), HubError> {
        unreachable!("a rotation takes no deployment lock")
    }

    async fn release_lock(&self, _fence: u64) -> Result<bool, HubError> {
        unreachable!("a rotation takes no deployment lock")
    }

    async fn read_holds(&self) -> Result<BTreeMap<String, Vec<String>>, HubError> {
        unreachable!("a rotation reads no holds")
    }

    async fn read_heartbeats(&self) -> Result<crate::ports::HeartbeatSnapshot, HubError> {
        unreachable!("a rotation proves by its own account at the hub")
    }

    async fn place_hold(&self, _agent: &str, _owner: &str) -> Result<(), HubError> {
        unreachable!("a rotation places no hold")
    }

    async fn release_hold(&self, _agent: &str, _owner: &str) -> Result<bool, HubError> {
        unreachable!("a rotation places no hold")
    }

    async fn open_epoch(&self, _members: &[String]) -> Result<u64, HubError> {
        unreachable!("a rotation opens no epoch")
    }

    async fn close_epoch(&self, _epoch: u64, _untouched: &[String]) -> Result<bool, HubError> {
        unreachable!("a rotation opens no epoch")
    }

    async fn route_bundle(&self) -> Result<String, HubError> {
        unreachable!("a rotation reads no route bundle")
    }

    async fn agent_references(&self, _agent: &str) -> Result<crate::ports::AgentReferences, HubError> {
        unreachable!("a rotation reads no references")
    }

    async fn resurrect_agent(&self, _agent: &str, _epoch: u64) -> Result<bool, HubError> {
        unreachable!("a rotation resurrects no identity")
    }

    async fn begin_rotation(&self, agent: &str, rotation: &str) -> Result<IssuedCredential, HubError> {
        assert_eq!(agent, NODE);
        self.take_hub_failure()?;
        let mut rotations = self.rotations.borrow_mut();
        let issued = if let Some(existing) = rotations.get(rotation) {
            if existing.state == RotationState::Aborted {
                return Err(HubError::Rejected(format!("conflict: rotation {rotation} was aborted")));
            }
            IssuedCredential { generation: existing.generation, token: Secret::new(existing.token.clone()) }
        } else {
            if rotations.values().any(|other| other.state == RotationState::Open) {
                return Err(HubError::Rejected("conflict: another rotation is open".into()));
            }
            self.mints.set(self.mints.get() + 1);
            let generation = self.current_generation.get() + 1;
            let token = format!("fleetsim-secret-successor-{generation}");
            let row = HubRotation { state: RotationState::Open, generation, token: token.clone() };
            rotations.insert(rotation.to_owned(), row);
            IssuedCredential { generation, token: Secret::new(token) }
        };
        if self.lose_issue_answer.replace(false) {
            return Err(HubError::Transport(TransportError::Timeout));
        }
        Ok(issued)
    }

    async fn rotation_status(&self, _agent: &str, rotation: &str) -> Result<Option<RotationStatus>, HubError> {
        self.take_hub_failure()?;
        Ok(self.rotations.borrow().get(rotation).map(|row| RotationStatus {
            state: row.state,
            generation: row.generation,
            successor_heartbeats: self.successor_heartbeats(&row.token),
        }))
    }

    async fn commit_rotation(&self, _agent: &str, rotation: &str) -> Result<bool, HubError> {
        if self.hang_commit.replace(false) {
            // The controller dies with the revoke in flight, before the hub takes it.
            std::future::pending::<()>().await;
        }
        self.take_hub_failure()?;
        let mut rotations = self.rotations.borrow_mut();
        let row = rotations.get_mut(rotation).ok_or_else(|| HubError::Rejected("unknown rotation".into()))?;
        match row.state {
            RotationState::Open => {
                self.commits_at.borrow_mut().push(self.successor_heartbeats(&row.token));
                row.state = RotationState::Committed;
                self.current_generation.set(row.generation);
                Ok(true)
            }
            RotationState::Committed => Ok(false),
            RotationState::Aborted => Err(HubError::Rejected("conflict: aborted".into())),
        }
    }

    async fn abort_rotation(&self, _agent: &str, rotation: &str) -> Result<bool, HubError> {
        self.take_hub_failure()?;
        self.aborts.borrow_mut().push(rotation.to_owned());
        let mut rotations = self.rotations.borrow_mut();
        match rotations.get_mut(rotation) {
            Some(row) if row.state == RotationState::Open => {
                row.state = RotationState::Aborted;
                Ok(true)
            }
            Some(row) if row.state == RotationState::Committed => Err(HubError::Rejected("conflict: committed".into())),
            _ => Ok(false),
        }
    }
}

impl Ssh for World {
    async fn run(&self, endpoint: &Endpoint, request: SshRequest) -> Result<SshResponse, SshError> {
        assert_eq!(endpoint.node, NODE);
        if let Some(error) = self.ssh_failures.borrow_mut().pop_front() {
            return Err(error);
        }
        let presented = self.host_key.borrow().clone();
        if endpoint.host_key != presented {
            return Err(SshError::HostKeyMismatch { presented });
        }
        match request {
            SshRequest::Observe => {
                self.observations.set(self.observations.get() + 1);
                let credential = self.file.borrow().clone().map(|token| CredentialFacts {
                    kind: FileKind::Regular,
                    mode: 0o600,
                    owner: "ovswarm".into(),
                    token: Secret::new(token),
                });
                let identity = NodeObservation {
                    node: NODE.into(),
                    env: None,
                    marker: None,
                    manifest: None,
                    receipt: None,
                    installed: None,
                    barrier_generation: 0,
                };
                Ok(SshResponse::Observed(Box::new(NodeReport {
                    identity,
                    service_running: self.agent_running.get(),
                    staged: Vec::new(),
                    credential,
                })))
            }
            SshRequest::WriteFileAtomic { operation_id, path, content, mode } => {
                assert_eq!((path.as_str(), mode), (CREDENTIAL_FILE, 0o600));
                self.writes.borrow_mut().push(operation_id);
                *self.file.borrow_mut() = Some(content.expose().to_owned());
                Ok(SshResponse::Done)
            }
            other => panic!("a rotation sends no {other:?}"),
        }
    }
}

fn successor(world: &World) -> String {
    world.hub_rotation().expect("issued").token
}

/// The successor was proved before the predecessor was revoked, once, and it is what the node's agent now holds.
fn assert_rotated_after_proof(world: &World, end: Option<RotationEnd>) {
    assert_eq!(end, Some(RotationEnd::Rotated { generation: 2 }));
    assert_eq!(world.mints.get(), 1, "one successor");
    assert_eq!(world.writes.borrow().as_slice(), ["rotation-node-03-1/install"], "installed once");
    assert_eq!(world.commits_at.borrow().as_slice(), [1], "revoked once, after a successor heartbeat");
    assert_eq!(world.hub_rotation().unwrap().state, RotationState::Committed);
    assert_eq!(world.file.borrow().clone(), Some(successor(world)));
    assert!(world.aborts.borrow().is_empty());
}

#[test]
fn a_clean_rotation_journals_every_step_and_revokes_only_after_the_proof() {
    let world = World::new();
    let end = world.run();
    assert_rotated_after_proof(&world, end);
    assert_eq!(
        world.kinds(),
        [
            "planned",
            "intent issue",
            "completed issue",
            "intent install",
            "completed install",
            "intent prove",
            "completed prove",
            "intent revoke",
            "completed revoke",
            "rotated"
        ]
    );
    for line in world.journal.borrow().iter() {
        assert!(!line.contains("fleetsim-secret"), "a journal record carries no credential: {line}");
    }
    let events = world.events.borrow();
    assert_eq!(events.first(), Some(&RotationEvent::Planned));
    assert!(events.contains(&RotationEvent::StepDone { step: RotationStep::Issue, generation: Some(2) }));
    assert_eq!(events.last(), Some(&RotationEvent::Ended { end: RotationEnd::Rotated { generation: 2 } }));
    assert!(!format!("{events:?}").contains("fleetsim-secret"), "no event carries a credential");
}

#[test]
fn a_transient_ssh_timeout_at_install_is_retried_with_the_node_re_observed_first() {
    let world = World::new();
    world.ssh_failures.borrow_mut().push_back(SshError::Transport(TransportError::Timeout));
    let end = world.run();
    assert_rotated_after_proof(&world, end);
    assert_eq!(world.observations.get(), 1, "the host key re-checked and the file looked at before the retry");
    assert!(world.events.borrow().iter().any(|event| matches!(
        event,
        RotationEvent::Retrying { step: RotationStep::Install, attempt: 1, delay_ms: 1_000, .. }
    )));
}

#[test]
fn a_controller_killed_after_the_issue_adopts_it_without_minting_a_second_successor() {
    let world = World::new();
    *world.die_at.borrow_mut() = Some(("completed", RotationStep::Issue));
    assert_eq!(world.run(), None, "the controller died before journaling the issue");
    assert_eq!(world.mints.get(), 1, "the hub had minted it");
    let end = world.run();
    assert_eq!(world.events.borrow().iter().filter(|e| matches!(e, RotationEvent::Adopted { .. })).count(), 1);
    assert!(world.events.borrow().contains(&RotationEvent::Adopted { in_doubt: Some(RotationStep::Issue) }));
    assert_rotated_after_proof(&world, end);
    assert_eq!(world.kinds().iter().filter(|kind| *kind == "intent issue").count(), 1, "the intent is not re-armed");
}

#[test]
fn a_controller_killed_after_the_install_finds_it_on_the_node_and_does_not_write_again() {
    let world = World::new();
    *world.die_at.borrow_mut() = Some(("completed", RotationStep::Install));
    assert_eq!(world.run(), None);
    assert_eq!(world.writes.borrow().len(), 1);
    let end = world.run();
    assert!(world.events.borrow().contains(&RotationEvent::Adopted { in_doubt: Some(RotationStep::Install) }));
    assert_rotated_after_proof(&world, end);
    assert_eq!(world.observations.get(), 1, "the install in doubt was looked for on the node");
}

#[test]
fn a_controller_killed_before_the_revoke_reaches_the_hub_revokes_once_after_the_proof() {
    let world = World::new();
    world.hang_commit.set(true);
    assert_eq!(world.run(), None);
    assert_eq!(world.hub_rotation().unwrap().state, RotationState::Open, "both credentials still valid");
    let end = world.run();
    assert!(world.events.borrow().contains(&RotationEvent::Adopted { in_doubt: Some(RotationStep::Revoke) }));
    assert_rotated_after_proof(&world, end);
}

#[test]
fn a_controller_killed_between_the_revoke_and_its_record_replays_it_without_effect() {
    let world = World::new();
    *world.die_at.borrow_mut() = Some(("completed", RotationStep::Revoke));
    assert_eq!(world.run(), None);
    let end = world.run();
    assert_rotated_after_proof(&world, end);
    assert_eq!(world.kinds().last().map(String::as_str), Some("rotated"));
}

#[test]
fn a_silent_agent_never_proves_the_successor_and_the_rotation_stops_with_nothing_revoked() {
    let world = World::new();
    world.agent_running.set(false);
    let end = world.run();
    let failure = RotationFailure::SuccessorNotProved { waited_ms: 120_000 };
    assert_eq!(end, Some(RotationEnd::Stopped { step: RotationStep::Prove, failure }));
    assert!(world.commits_at.borrow().is_empty() && world.aborts.borrow().is_empty(), "nothing revoked");
    assert_eq!(
        world.hub_rotation().unwrap().state,
        RotationState::Open,
        "the predecessor and the successor both valid"
    );
    assert_eq!(world.now_ms.get(), 120_000, "the proof waited its bound and no longer");
    assert_eq!(world.kinds().last().map(String::as_str), Some("stopped"));
    assert_eq!(
        world.run(),
        Some(RotationEnd::Stopped {
            step: RotationStep::Prove,
            failure: RotationFailure::SuccessorNotProved { waited_ms: 120_000 }
        }),
        "a stopped rotation is answered as it ended"
    );
    assert_eq!(world.kinds().last().map(String::as_str), Some("stopped"), "and nothing is journaled again");
}

#[test]
fn an_endpoint_that_changed_before_the_install_aborts_revoking_only_the_successor() {
    let world = World::new();
    *world.host_key.borrow_mut() = "hostkey-node-03-2".into();
    let end = world.run();
    let failure = RotationFailure::EndpointChanged { presented: "hostkey-node-03-2".into() };
    assert_eq!(end, Some(RotationEnd::Aborted { step: RotationStep::Install, failure }));
    assert_eq!(world.hub_rotation().unwrap().state, RotationState::Aborted, "the successor revoked");
    assert_eq!(world.current_generation.get(), 1, "the predecessor kept");
    assert_eq!(world.file.borrow().as_deref(), Some(PREDECESSOR), "the node still holds its valid credential");
    assert!(world.writes.borrow().is_empty());
}

#[test]
fn an_install_whose_writes_may_have_run_stops_with_the_overlap_kept() {
    let world = World::new();
    let timeouts = (0..10).map(|_| SshError::Transport(TransportError::Timeout));
    world.ssh_failures.borrow_mut().extend(timeouts);
    let end = world.run();
    assert!(
        matches!(
            end,
            Some(RotationEnd::Stopped {
                step: RotationStep::Install,
                failure: RotationFailure::RetriesExhausted { .. }
            })
        ),
        "{end:?}"
    );
    assert!(world.aborts.borrow().is_empty(), "a successor that may be on the node is never revoked");
    assert_eq!(world.hub_rotation().unwrap().state, RotationState::Open);
}

#[test]
fn an_issue_the_hub_refuses_aborts_its_own_rotation_only() {
    let world = World::new();
    world.rotations.borrow_mut().insert(
        "rotation-node-03-0".into(),
        HubRotation { state: RotationState::Open, generation: 2, token: "fleetsim-secret-other".into() },
    );
    let end = world.run();
    assert!(
        matches!(
            end,
            Some(RotationEnd::Aborted { step: RotationStep::Issue, failure: RotationFailure::HubRefused { .. } })
        ),
        "{end:?}"
    );
    assert_eq!(world.aborts.borrow().as_slice(), [ROTATION]);
    assert_eq!(world.rotations.borrow()["rotation-node-03-0"].state, RotationState::Open, "another's is left alone");
}

#[test]
fn a_lost_issue_answer_and_a_refused_credential_are_retried_without_a_second_successor() {
    let world = World::new();
    world.lose_issue_answer.set(true);
    world
        .hub_failures
        .borrow_mut()
        .push_back(HubError::Unauthorized("credential of principal controller has expired".into()));
    let end = world.run();
    assert_rotated_after_proof(&world, end);
    assert!(world.authentications.get() >= 2, "re-authenticated after the refusal");
    assert!(world.events.borrow().iter().any(|event| matches!(event, RotationEvent::Reauthenticated { .. })));
}
