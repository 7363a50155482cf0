//! The controller's own surroundings in the simulated world: the engine's jitter stream, the hub credential in the
//! secrets store and its rotation, the artifact store on the controller's network, the armed controller death, the
//! journal file on the controller's disk, and the adapters of the controller's own ports (journal, jitter, secrets,
//! artifacts, manifest signatures). [`Controller`] owns that state; the controller's fault steps change it here and
//! nowhere else. The controller itself is the engine's service (`host.rs` starts it).

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use engine::ports::{self, Journal, JournalError, TransportError};
use fakes::artifacts::{ArtifactError, ArtifactKind, ArtifactStore, Capsule, capsule_set};
use fakes::cohort_journal::{CohortPlan, OldJournal};
use fakes::worker::signature_for;
use rand::RngCore;
use rand_chacha::ChaCha8Rng;

use crate::model::faults::{DeathPoint, DeathSubsystem, Effect, Step, StepKind, Subject};
use crate::model::seed::{Consumer, SeedTree};
use crate::model::spec::{CONTROLLER, PRIOR_REVISION, RunSpec};
use crate::observe::trace::Body;
use crate::world::hub::controller_credential;
use crate::world::journal::JournalFile;
use crate::world::net::HostId;
use crate::world::{CONTROLLER_ID, World};

/// Disk key of the controller's journal.
pub(crate) const JOURNAL_KEY: &str = "controller.journal";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct CredentialState {
    generation: u64,
    /// Virtual time at which the rotation state machine installs the next credential, after an expiry.
    renew_at_ms: Option<u64>,
}

/// The controller's state.
pub(crate) struct Controller {
    /// The armed controller death: where it fires (a named point of the rollout's, onboarding's or decommission's
    /// protocol), and when the controller boots again after it (if the step says).
    death_trap: Cell<Option<(DeathSubsystem, DeathPoint, Option<u64>)>>,
    /// The engine's jitter stream.
    jitter: RefCell<ChaCha8Rng>,
    /// The controller's hub credential in the secrets store, and when the rotation state machine (outside
    /// deployment) renews it after a `credential_expiry`.
    credential: Cell<CredentialState>,
    /// The artifact store: the prior revision's capsules, and those of every revision the plan rolls out.
    artifacts: RefCell<ArtifactStore>,
    /// The journal file on the controller's disk, with its index of records by subject.
    journal: JournalFile,
    /// Restarts a controller death armed that have not happened yet.
    restarts_pending: Cell<u32>,
}

impl Controller {
    pub(crate) fn new(spec: &RunSpec, seeds: &SeedTree) -> Controller {
        let mut artifacts = ArtifactStore::new();
        for capsule in capsule_set(PRIOR_REVISION) {
            artifacts.publish(capsule);
        }
        for step in spec.all_steps() {
            if let Step::StartRollout { revision } | Step::OldJournal { revision, .. } = step {
                for capsule in capsule_set(revision) {
                    artifacts.publish(capsule);
                }
            }
        }
        Controller {
            death_trap: Cell::new(None),
            jitter: RefCell::new(seeds.rng(Consumer::EngineJitter)),
            credential: Cell::new(CredentialState { generation: 1, renew_at_ms: None }),
            artifacts: RefCell::new(artifacts),
            journal: JournalFile::new(JOURNAL_KEY),
            restarts_pending: Cell::new(0),
        }
    }

    /// How late the store answers a node's fetch of `digest` (a slow fetch).
    pub(crate) fn fetch_delay_ms(&self, digest: &str) -> u64 {
        self.artifacts.borrow().fetch_delay_ms(digest)
    }

    /// A node's fetch of `digest` from the store (the world's [`World::fetch_artifact`] reports a missing one).
    fn fetch(&self, digest: &str) -> Result<Capsule, ArtifactError> {
        self.artifacts.borrow().fetch(digest)
    }

    /// `controller_death`: arms the trap at `point` of `subsystem`.
    pub(crate) fn arm_death(&self, subsystem: DeathSubsystem, point: DeathPoint, restart_after_ms: Option<u64>) {
        self.death_trap.set(Some((subsystem, point, restart_after_ms)))
    }
}

impl World {
    /// `artifact_missing`: `artifact` of every revision the plan rolls out goes missing from the store, or comes back.
    pub(crate) fn set_artifact_missing(&self, artifact: ArtifactKind, restored: bool) {
        for step in self.spec.all_steps() {
            if let Step::StartRollout { revision } = step {
                let digest = fakes::artifacts::capsule_digest(artifact, revision);
                let mut store = self.controller.artifacts.borrow_mut();
                if restored { store.repair(&digest) } else { store.set_missing(digest) }
            }
        }
    }

    /// `old_journal`: the pre-typed controller's lines of `shape` for a rollout of `revision` are appended to the
    /// controller's journal on its disk, synced (the old controller wrote them before this one was installed). They
    /// reach the journal as bytes, not as the engine's records, so no `controller.journal` event names them.
    pub(crate) fn write_old_journal(&self, shape: OldJournal, revision: &str) {
        let nodes: Vec<String> = self.nodes.endpoints().into_iter().map(|endpoint| endpoint.node).collect();
        let plan = CohortPlan {
            rollout: format!("rollout-{revision}"),
            revision: revision.to_owned(),
            generation: self.nodes.newest_generation() + 1,
            routes: self.hub.route_digest(),
            cohorts: nodes.chunks(self.spec.fleet.lane_size.max(1) as usize).map(<[String]>::to_vec).collect(),
        };
        for line in shape.lines(&plan) {
            let appended = self.with_disk(CONTROLLER_ID, |disk| self.controller.journal.append(disk, &line));
            appended.expect("an old journal line is one line");
        }
    }

    /// `credential_expiry`: the controller's credential expires at the hub; the rotation state machine renews it
    /// `renew_after_ms` later.
    pub(crate) fn expire_credential(&self, renew_after_ms: u64) {
        self.expire_controller_credential();
        let state = self.controller.credential.get();
        self.controller.credential.set(CredentialState { renew_at_ms: Some(self.now_ms() + renew_after_ms), ..state });
    }

    /// A fetch of `digest` from the artifact store: a capsule `artifact_missing` took away lands that fault.
    pub(crate) fn fetch_artifact(&self, digest: &str) -> Result<Capsule, ArtifactError> {
        let fetched = self.controller.fetch(digest);
        if fetched.is_err() {
            self.fault_met(StepKind::ArtifactMissing, "", Subject::Rollout, None);
        }
        fetched
    }

    /// Disarms and reports the death trap when it is armed at `point` of `subsystem`; `on` is the work that reached
    /// it (the rollout, or the workflow whose record or call it was).
    pub(crate) fn take_death(self: &Rc<Self>, subsystem: DeathSubsystem, point: DeathPoint, on: Subject) -> bool {
        let Some((armed_subsystem, armed_point, restart_after_ms)) = self.controller.death_trap.get() else {
            return false;
        };
        if (armed_subsystem, armed_point) != (subsystem, point) {
            return false;
        }
        self.controller.death_trap.set(None);
        self.fault_met(StepKind::ControllerDeath, "", on, Some(Effect::Stopped));
        if let Some(delay_ms) = restart_after_ms {
            // The world's timer, not a controller task: it must outlive the controller's death.
            let world = self.clone();
            let pending = &self.controller.restarts_pending;
            pending.set(pending.get() + 1);
            tokio::task::spawn_local(async move {
                tokio::time::sleep(std::time::Duration::from_millis(delay_ms)).await;
                world.apply(&Step::Restart { target: CONTROLLER.to_owned() });
                let pending = &world.controller.restarts_pending;
                pending.set(pending.get() - 1);
            });
        }
        true
    }

    /// A restart armed by a controller death, or the start of an agent a `ttl_expiry` silenced, is still to come.
    pub(crate) fn restart_pending(&self) -> bool {
        self.controller.restarts_pending.get() > 0 || self.agent_start_pending()
    }

    /// No credential renewal is due later: the rotation state machine has nothing left to install by itself.
    pub(crate) fn credential_at_rest(&self) -> bool {
        self.controller.credential.get().renew_at_ms.is_none_or(|at_ms| self.now_ms() >= at_ms)
    }

    /// Crashes `host` from one of its own tasks, which then never runs again.
    pub(crate) async fn die_here(self: &Rc<Self>, host: HostId) {
        self.crash(host);
        std::future::pending::<()>().await;
    }

    /// The journal on the controller's disk, read whole (what a booting controller finds).
    pub(crate) fn replay_controller_journal(&self) -> Vec<String> {
        self.with_disk(CONTROLLER_ID, |disk| self.controller.journal.replay(disk)).unwrap_or_default()
    }
}

/// The controller's journal on its simulated disk: each append is written and fsynced before it returns. `host` is
/// always the controller's: the journal file and its index are the controller's.
pub(crate) struct SimJournal {
    pub(crate) world: Rc<World>,
    pub(crate) host: HostId,
}

impl Journal for SimJournal {
    async fn append(&self, record: &str) -> Result<(), JournalError> {
        engine::ports::check_record(record)?;
        if !self.world.is_up(self.host) {
            std::future::pending::<()>().await;
        }
        let rollout = engine::rollout::journal::Record::decode(record).and_then(Result::ok);
        let kind = rollout.as_ref().map(engine::rollout::journal::Record::kind);
        // The work a death at this record stops: the rollout, or the workflow or instance the record is of.
        let on = || match (kind, engine::ports::record_subject(record)) {
            (Some(_), _) => Subject::Rollout,
            (None, Some(workflow)) if workflow_record_kind(record).is_some() => {
                Subject::Machine(crate::model::ids::machine_of_workflow(&workflow).to_owned())
            }
            _ => Subject::Instances,
        };
        if kind == Some("completed")
            && self.world.take_death(DeathSubsystem::Rollout, DeathPoint::BeforeCompletion, on())
        {
            self.world.die_here(self.host).await;
        }
        // A credential rotation's records: the deaths before a completion and after an intent.
        let rotation = engine::rotation::journal::Record::decode(record).and_then(Result::ok);
        let rotation_kind = rotation.as_ref().map(engine::rotation::journal::Record::kind);
        if rotation_kind == Some("completed")
            && self.world.take_death(DeathSubsystem::Rotation, DeathPoint::BeforeCompletion, Subject::Controller)
        {
            self.world.die_here(self.host).await;
        }
        // The MAAS workflows' deaths: before a `completed` record, after a `checkpoint` (a stage attempt's intent).
        let workflow = workflow_record_kind(record);
        if let Some((subsystem, "completed")) = workflow {
            if self.world.take_death(subsystem, DeathPoint::BeforeCompletion, on()) {
                self.world.die_here(self.host).await;
            }
        }
        let instance = engine::instance::inventory::InstanceRecord::from_line(record).and_then(Result::ok);
        let instance_kind = instance.as_ref().map(crate::world::instances::kind_of);
        if instance_kind.as_deref() == Some("cascaded")
            && self.world.take_death(DeathSubsystem::Instances, DeathPoint::BeforeCompletion, on())
        {
            self.world.die_here(self.host).await;
        }
        self.world.with_disk(self.host, |disk| self.world.controller.journal.append(disk, record))?;
        if let (Some(instance), Some(kind)) = (instance, instance_kind) {
            let terminate_committed = kind == "destroy_requested";
            self.world.record_instance(self.host, instance);
            if terminate_committed && self.world.take_death(DeathSubsystem::Instances, DeathPoint::AfterIntent, on()) {
                self.world.die_here(self.host).await;
            }
        }
        if let Some((subsystem, "checkpoint")) = workflow {
            if self.world.take_death(subsystem, DeathPoint::AfterIntent, on()) {
                self.world.die_here(self.host).await;
            }
        }
        if let Some(rotation) = &rotation {
            let body = Body::RotationJournalAppended {
                record: rotation.kind().to_owned(),
                rotation: rotation.rotation().to_owned(),
                operation_id: rotation.operation_id().map(str::to_owned),
            };
            self.world.record(self.host, body);
            if rotation.kind() == "intent"
                && self.world.take_death(DeathSubsystem::Rotation, DeathPoint::AfterIntent, Subject::Controller)
            {
                self.world.die_here(self.host).await;
            }
        }
        if let (Some(rollout), Some(kind)) = (&rollout, kind) {
            let operation_id = rollout.operation_id().map(str::to_owned);
            let route_digest = rollout.route_digest().map(str::to_owned);
            let body = Body::JournalAppended { record: kind.to_owned(), operation_id, route_digest };
            self.world.record(self.host, body);
            if (kind == "intent" || kind == "intents")
                && self.world.take_death(DeathSubsystem::Rollout, DeathPoint::AfterIntent, on())
            {
                self.world.die_here(self.host).await;
            }
        }
        Ok(())
    }

    async fn replay(&self) -> Result<Vec<String>, JournalError> {
        self.world.with_disk(self.host, |disk| self.world.controller.journal.replay(disk))
    }

    async fn replay_subject(&self, subject: &str) -> Result<Vec<String>, JournalError> {
        self.world.with_disk(self.host, |disk| self.world.controller.journal.replay_subject(disk, subject))
    }
}

/// The subsystem and `record` tag of an onboarding or decommission journal line, if it is one.
fn workflow_record_kind(line: &str) -> Option<(DeathSubsystem, &'static str)> {
    let (subsystem, json) = if let Some(json) = line.strip_prefix("onboard ") {
        (DeathSubsystem::Onboarding, json)
    } else {
        (DeathSubsystem::Decommission, line.strip_prefix("decommission ")?)
    };
    let kinds = ["run_started", "checkpoint", "stopped", "completed"];
    kinds.into_iter().find(|kind| json.starts_with(&format!("{{\"record\":\"{kind}\","))).map(|kind| (subsystem, kind))
}

pub(crate) struct SimJitter {
    pub(crate) world: Rc<World>,
}

impl ports::Jitter for SimJitter {
    fn draw(&self) -> u64 {
        self.world.controller.jitter.borrow_mut().next_u64()
    }
}

/// The secrets store: the attestation key each worker's identity is enrolled with. A stand-in for Vault on the
/// controller's own network, so it has no network faults of its own yet.
pub(crate) struct SimSecrets {
    pub(crate) world: Rc<World>,
}

impl ports::Secrets for SimSecrets {
    async fn hub_credential(&self) -> Result<engine::secret::Secret, ports::SecretsError> {
        let world = &self.world;
        let mut state = world.controller.credential.get();
        if state.renew_at_ms.is_some_and(|at_ms| world.now_ms() >= at_ms) {
            // The rotation state machine has installed the next credential at the hub and in the store.
            state = CredentialState { generation: state.generation + 1, renew_at_ms: None };
            world.issue_controller_credential(state.generation);
            world.controller.credential.set(state);
        }
        Ok(engine::secret::Secret::new(controller_credential(state.generation)))
    }

    async fn attestation_key(&self, node: &str) -> Result<engine::secret::Secret, ports::SecretsError> {
        let env = self.world.nodes.recovery_env(node).unwrap_or_default();
        env.lines()
            .find_map(|line| line.strip_prefix("MAC_ATTESTATION_KEY="))
            .map(engine::secret::Secret::new)
            .ok_or_else(|| ports::SecretsError::NotFound(format!("attestation key of {node}")))
    }
}

/// The artifact store's index, as the controller sees it (on its own network: no faults of its own yet).
pub(crate) struct SimArtifacts {
    pub(crate) world: Rc<World>,
}

impl ports::Artifacts for SimArtifacts {
    async fn available(&self, digest: &str) -> Result<bool, TransportError> {
        Ok(self.world.fetch_artifact(digest).is_ok())
    }
}

/// The simulator's trust root for deployment manifests: the fake fleet's signing scheme.
pub(crate) struct SimVerifier;

impl engine::rollout::preflight::SignatureVerifier for SimVerifier {
    fn verify(&self, manifest: &engine::rollout::preflight::Manifest) -> bool {
        manifest.signature == signature_for(&manifest.revision, manifest.generation)
    }
}
