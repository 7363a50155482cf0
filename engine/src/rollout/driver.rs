//! The rollout driver: runs the synchronous decisions of [`crate::rollout`] against the `Ssh`, `Hub`, `Journal`,
//! `Clock`, `Signals`, `Jitter`, `Secrets` and `Artifacts` ports. Two policies:
//!
//! - `lanes` (the RCCA's replacement plan): read-only preflight of every node, quarantine before mutation, authenticated
//!   repair, plan frozen in the journal, epoch opened with its members before the first stop, every capsule staged
//!   before any quiescence, lanes of at most `lane_size` with one lane down at a time, bounded retry with the endpoint
//!   re-observed (identity re-checked, effect looked for) before every re-attempt, lane verdicts, adoption of a dead
//!   controller's journal.
//! - `legacy` (the incident's controller, kept to replay it): serial quiescence of the whole selection with identity
//!   checked only during quiescence, no epoch, no retry, stop on the first error with journal and holds retained, and
//!   a serial retain-forward recovery that reconciles each stopped node through the hub host over SSH.

use std::collections::{BTreeMap, BTreeSet};

use futures_util::future::join_all;

use crate::ports::events::{
    QuarantineCause, RefusalCause, RolloutEnd, RolloutEvent, RolloutFailure, RolloutStep, TerminalOutcome,
};
use crate::ports::{
    Artifacts, Clock, Endpoint, Hub, HubError, Jitter, Journal, LockGrant, NodeReport, Secrets, Signal, Signals, Ssh,
    SshError, SshRequest, SshResponse,
};
use crate::rollout::account::{self, Exclusions, NodeAccount, NodeOutcome};
use crate::rollout::decode::{self, CanonicalWrite, Canonicalization};
use crate::rollout::gate::{self, LaneGate};
use crate::rollout::holds::HoldOwner;
use crate::rollout::journal::{self, Adopted, Record};
use crate::rollout::lane::{
    LaneVerdict, NodeMachine, NodeState, NodeStep, lane_verdict, operation_id, revert_operation_id,
};
use crate::rollout::plan::{PhaseBounds, PlanInput};
use crate::rollout::preflight::{self, Expectation, MAC_ENV, MARKER, Repair, SignatureVerifier, Verdict};
use crate::rollout::proof;
use crate::rollout::retry::{AttemptFailure, Backoff, RetryDecision};
pub use crate::rollout::rules::Rcca;
use crate::rollout::rules::{InstalledIdentity, Rules, Staging};
use crate::rollout::select::{NodeSelection, Selection};
use crate::rollout::storage::{self, StageFailure};
use crate::secret::Secret;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RolloutPolicy {
    Lanes,
    Legacy,
}

/// What to deploy, where, and under which limits.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RolloutRequest {
    pub rollout: String,
    /// This controller's identity as the deployment lock's holder (one per process incarnation).
    pub controller: String,
    pub revision: String,
    pub generation: u64,
    /// Digest of the one signed route bundle frozen for this rollout; every record names it.
    pub route_digest: String,
    pub hub_url: String,
    /// The selection, in rollout order.
    pub nodes: Vec<Endpoint>,
    /// The hub host's SSH endpoint (the legacy recovery reconciles attestation through it).
    pub hub_endpoint: Endpoint,
    pub capsules: Vec<String>,
    pub policy: RolloutPolicy,
    pub lane_size_max: usize,
    pub availability_floor: usize,
    pub fan_out: usize,
    pub phases: PhaseBounds,
    pub backoff: Backoff,
    pub agent_ttl_ms: u64,
    pub credential_remaining_ms: u64,
    pub hold_lease_ms: u64,
    /// How long the controller waits for a valid hub credential after the hub refused its current one (the rotation
    /// state machine renews it): a credential outage is not a node fault, so it does not spend a node's retries.
    pub credential_wait_ms: u64,
    /// The deployment lock's lease: renewed before every lane, so one lane must fit in it. A dead holder's lock is
    /// waited out for at most one lease.
    pub lock_lease_ms: u64,
    /// How often the prove step reads the hub while it waits for the new revision's heartbeat.
    pub prove_poll_ms: u64,
    /// The exact command an operator runs to have a controller adopt this rollout's journal and replay it from where
    /// it stopped (RCCA: "Exhausted retries ... provide the exact next replay command and failed endpoint identity"):
    /// every `node_failed` names it, beside the failed endpoint.
    pub resume_command: String,
}

/// The ports the driver needs.
pub struct Ports<'a, C, H, S, J, G, X, K, A> {
    pub clock: &'a C,
    pub hub: &'a H,
    pub ssh: &'a S,
    pub journal: &'a J,
    pub signals: &'a G,
    pub jitter: &'a X,
    pub secrets: &'a K,
    pub artifacts: &'a A,
    pub verifier: &'a dyn SignatureVerifier,
    /// Every decision; production passes [`Rcca`].
    pub rules: &'a dyn Rules,
}

/// How a rollout ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RolloutOutcome {
    pub lanes: Vec<(Vec<String>, LaneVerdict)>,
    /// Every selected node and what became of it, by node (empty when the legacy controller stopped, which has no
    /// per-node outcome, and when it found a journal it cannot adopt).
    pub nodes: Vec<NodeAccount>,
    pub outcome: RolloutEnd,
}

/// How often one operation may re-authenticate before the refusal is taken as final.
const REAUTHENTICATIONS_MAX: u32 = 3;

/// How many rollback passes a stuck lane gets from one controller (the first at once, the others each after the
/// backoff's worst wait) before the rollout stops with its journal and holds as they are.
const REVERT_PASSES: u32 = 3;

/// The lanes of an adopted plan with their verdicts, in plan order (a lane with none is `Prior`: it never went down).
fn lanes_of(adopted: &Adopted, verdicts: &BTreeMap<usize, LaneVerdict>) -> Vec<(Vec<String>, LaneVerdict)> {
    let verdict = |index| verdicts.get(&index).copied().unwrap_or(LaneVerdict::Prior);
    adopted.lanes.iter().enumerate().map(|(index, lane)| (lane.clone(), verdict(index))).collect()
}

fn failure_class(error: &SshError) -> AttemptFailure {
    match error {
        SshError::Transport(_) => AttemptFailure::Transient,
        SshError::HostKeyMismatch { .. } => AttemptFailure::IdentityChanged,
        SshError::Refused(_) => AttemptFailure::Permanent,
    }
}

/// Which way a node's step goes: toward the request's successor, or back to the node's prior generation (the reverse
/// recovery of its lane); either way under the journal's open epoch, when the rollout has one (it pins the lane's
/// nodes).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Way {
    Forward { epoch: Option<u64> },
    Back { revision: String, generation: u64, epoch: Option<u64> },
}

impl Way {
    /// The revision and generation the step brings the node to.
    fn target<'r>(&'r self, request: &'r RolloutRequest) -> (&'r str, u64) {
        match self {
            Way::Forward { .. } => (request.revision.as_str(), request.generation),
            Way::Back { revision, generation, .. } => (revision.as_str(), *generation),
        }
    }

    /// The journal's open epoch the step runs under.
    fn epoch(&self) -> Option<u64> {
        match self {
            Way::Forward { epoch } | Way::Back { epoch, .. } => *epoch,
        }
    }

    fn is_back(&self) -> bool {
        matches!(self, Way::Back { .. })
    }

    /// The step as events name it.
    fn event_step(&self, step: NodeStep) -> RolloutStep {
        if self.is_back() { RolloutStep::Revert(step) } else { RolloutStep::Node(step) }
    }

    fn operation_id(&self, rollout: &str, node: &str, step: NodeStep) -> String {
        if self.is_back() { revert_operation_id(rollout, node, step) } else { operation_id(rollout, node, step) }
    }
}

/// The legacy controller's only way: forward, with no epoch.
const LEGACY: Way = Way::Forward { epoch: None };

/// Whether a step's effect is already visible on the node (so a replay must not run it again), for a step toward
/// `target`. Going back, a node whose install and identity are already the prior ones need not stop at all.
fn already_done(step: NodeStep, target: (&str, u64), back: bool, report: &NodeReport) -> bool {
    let installed = report
        .identity
        .installed
        .as_ref()
        .is_some_and(|(revision, generation)| (revision.as_str(), *generation) == target);
    let identity = report.identity.marker.as_ref().is_some_and(|marker| marker.content.trim() == target.0)
        && report.identity.env_value("MAC_DEPLOYED_REVISION") == Some(target.0);
    match step {
        NodeStep::Quiesce => !report.service_running || (back && installed && identity),
        NodeStep::Install => installed,
        NodeStep::WriteIdentity => identity,
        NodeStep::Start => report.service_running,
        NodeStep::Hold | NodeStep::Prove | NodeStep::Release => false,
    }
}

/// The driver's port calls and steps, with the ports' bounds written once.
impl<C, H, S, J, G, X, K, A> Ports<'_, C, H, S, J, G, X, K, A>
where
    C: Clock,
    H: Hub,
    S: Ssh,
    J: Journal,
    G: Signals,
    X: Jitter,
    K: Secrets,
    A: Artifacts,
{
    /// Runs a rollout from scratch, or adopts the journal's non-terminal rollout when there is one.
    pub async fn run_rollout(&self, request: &RolloutRequest) -> RolloutOutcome {
        // Every hub mutation presents the controller's current credential; a failure here shows on the first call.
        let _ = self.authenticate(&request.rollout, false).await;
        let adopted = match self.read_journal(request).await {
            Ok(adopted) => adopted,
            Err(refused) => return refused,
        };
        match (adopted, request.policy) {
            (Some(adopted), RolloutPolicy::Lanes) => self.resume_lanes(request, adopted).await,
            (Some(adopted), RolloutPolicy::Legacy) => {
                // The legacy controller has no supported recovery-only mode: it reports the retained journal and stops.
                self.emit(
                    &adopted.rollout,
                    RolloutEvent::Adopted {
                        revision: adopted.revision.clone(),
                        in_doubt: adopted.in_doubt.len() as u64,
                    },
                );
                RolloutOutcome { lanes: Vec::new(), nodes: Vec::new(), outcome: RolloutEnd::Failed }
            }
            (None, RolloutPolicy::Lanes) => self.run_lanes(request).await,
            (None, RolloutPolicy::Legacy) => self.run_legacy(request).await,
        }
    }

    /// Replays the journal for the rollout to adopt, settling old (pre-typed) lines first: their migration, or their
    /// quarantine when they cannot be decoded unambiguously, is appended once, before anything else
    /// ([`journal::settle_and_replay`]). A journal that cannot be read or written, or whose old lines stand
    /// quarantined, refuses the rollout with its typed cause: nothing is adopted and nothing mutated.
    async fn read_journal(&self, request: &RolloutRequest) -> Result<Option<Adopted>, RolloutOutcome> {
        let (replayed, settled) = match journal::settle_and_replay(self.journal).await {
            Ok(settled) => settled,
            Err(error) => {
                let reason = format!("rollout journal unusable: {error}");
                let cause = Some(RefusalCause::JournalFailed);
                return Err(self.refuse_with(request, &BTreeMap::new(), reason, cause).await);
            }
        };
        match settled {
            None => {}
            Some(Record::Migrated { format, lines, records, .. }) => {
                let (lines, records) = (lines.iter().map(|old| old.line).collect(), records.len() as u64);
                self.emit(&request.rollout, RolloutEvent::JournalMigrated { format, lines, records });
            }
            Some(Record::JournalQuarantined { format, line, defect, lines, .. }) => {
                let lines = lines.iter().map(|old| old.line).collect();
                self.emit(&request.rollout, RolloutEvent::JournalQuarantined { format, line, defect, lines });
            }
            Some(other) => unreachable!("old lines are settled by a migration or a quarantine, not {other:?}"),
        }
        if let Some(quarantine) = replayed.quarantine {
            let reason = format!("the controller journal's old lines are quarantined: {}", quarantine.detail);
            let cause = RefusalCause::JournalQuarantined { line: quarantine.line, defect: quarantine.defect };
            return Err(self.refuse_with(request, &BTreeMap::new(), reason, Some(cause)).await);
        }
        Ok(replayed.adopted)
    }

    /// The legacy controller's report of a failed node: it names the endpoint, and has no recovery-only mode to offer.
    fn legacy_node_failed(&self, id: &str, endpoint: &Endpoint, step: RolloutStep, error: impl ToString) {
        let event = RolloutEvent::NodeFailed {
            node: endpoint.node.clone(),
            step,
            error: error.to_string(),
            endpoint: format!("{}@{}", endpoint.node, endpoint.host_key),
            replay: "no supported recovery-only mode: a later typed deployment resumes the journal".into(),
        };
        self.emit(id, event);
    }

    /// How the legacy controller stops: journal non-terminal, holds retained, the whole selection one stuck lane.
    fn legacy_failed(&self, id: &str, all: Vec<String>) -> RolloutOutcome {
        self.emit(id, RolloutEvent::Terminal { outcome: TerminalOutcome::Failed(RolloutFailure::LegacyStopped) });
        RolloutOutcome { lanes: vec![(all, LaneVerdict::Stuck)], nodes: Vec::new(), outcome: RolloutEnd::Failed }
    }

    fn emit(&self, rollout: &str, event: RolloutEvent) {
        self.signals.emit(Signal::Rollout { rollout: rollout.to_owned(), event });
    }

    /// Reports the account of every selected node and returns it.
    fn accounted(&self, rollout: &str, nodes: Vec<NodeAccount>) -> Vec<NodeAccount> {
        self.emit(rollout, RolloutEvent::Accounted { nodes: nodes.clone() });
        nodes
    }

    /// Refuses the rollout before any mutation: the refusal, then the account (every node prior but those someone
    /// else holds).
    async fn refuse(
        &self,
        request: &RolloutRequest,
        held: &BTreeMap<String, Vec<String>>,
        reason: String,
    ) -> RolloutOutcome {
        self.refuse_with(request, held, reason, None).await
    }

    /// [`Self::refuse`] after the deployment lock was taken: the lock is released first (nothing was mutated under
    /// it but staging, which is idempotent), so another controller need not wait out its lease.
    async fn refuse_holding(
        &self,
        request: &RolloutRequest,
        fence: u64,
        held: &BTreeMap<String, Vec<String>>,
        reason: String,
    ) -> RolloutOutcome {
        let _ = self.hub_retrying(request, || self.hub.release_lock(fence)).await;
        self.refuse(request, held, reason).await
    }

    /// [`Self::refuse`], with the refusal's typed cause when it has one. A refusal is terminal: it is journaled (but
    /// for a journal that cannot be used), so a controller that restarts does not run the refused request again.
    async fn refuse_with(
        &self,
        request: &RolloutRequest,
        held: &BTreeMap<String, Vec<String>>,
        reason: String,
        cause: Option<RefusalCause>,
    ) -> RolloutOutcome {
        let id = request.rollout.as_str();
        let selected: Vec<String> = request.nodes.iter().map(|endpoint| endpoint.node.clone()).collect();
        let nodes = account::refused(&selected, held, &reason);
        let journal_usable =
            !matches!(cause, Some(RefusalCause::JournalFailed | RefusalCause::JournalQuarantined { .. }));
        self.emit(id, RolloutEvent::PlanRefused { reason, cause });
        let nodes = self.accounted(id, nodes);
        if journal_usable {
            self.record(Record::Terminal { rollout: id.to_owned(), outcome: RolloutEnd::Refused }).await;
        }
        RolloutOutcome { lanes: Vec::new(), nodes, outcome: RolloutEnd::Refused }
    }

    async fn record(&self, record: Record) {
        if let Err(error) = self.journal.append(&record.encode()).await {
            // A journal that cannot be written is a broken invariant of the controller host, not a retryable fault.
            panic!("rollout journal write failed: {error}");
        }
    }

    async fn observe(&self, endpoint: &Endpoint) -> Result<NodeReport, SshError> {
        match self.ssh.run(endpoint, SshRequest::Observe).await? {
            SshResponse::Observed(report) => Ok(*report),
            SshResponse::Done | SshResponse::StorageProbed(_) => {
                Err(SshError::Refused("observe answered without an observation".into()))
            }
        }
    }

    /// After failed attempt `attempt` of `step` on `node`: when the backoff allows another, reports the retry, waits,
    /// counts the attempt and returns true; returns false when the failure ends the step (exhausted, identity
    /// changed, permanent refusal).
    async fn wait_to_retry(
        &self,
        request: &RolloutRequest,
        node: &str,
        step: RolloutStep,
        attempt: &mut u32,
        failure: AttemptFailure,
        error: &str,
    ) -> bool {
        let RetryDecision::RetryAfter { delay_ms } =
            self.rules.after_failure(&request.backoff, *attempt, failure, self.jitter.draw())
        else {
            return false;
        };
        self.emit_retry(request, node, step, *attempt, delay_ms, &error);
        self.clock.sleep_ms(delay_ms).await;
        *attempt += 1;
        true
    }

    /// Observes with bounded retry (read-only, always safe to repeat); every retry is reported.
    async fn observe_retrying(&self, request: &RolloutRequest, endpoint: &Endpoint) -> Result<NodeReport, SshError> {
        let mut attempt = 1;
        loop {
            match self.observe(endpoint).await {
                Ok(report) => return Ok(report),
                Err(error) => {
                    match self.rules.after_failure(&request.backoff, attempt, failure_class(&error), self.jitter.draw())
                    {
                        RetryDecision::RetryAfter { delay_ms } if request.policy == RolloutPolicy::Lanes => {
                            self.emit_retry(request, &endpoint.node, RolloutStep::Preflight, attempt, delay_ms, &error);
                            self.clock.sleep_ms(delay_ms).await;
                            attempt += 1;
                        }
                        _ => return Err(error),
                    }
                }
            }
        }
    }

    /// Reports that attempt `attempt` of `step` on `node` failed with `error` and is tried again in `delay_ms`.
    fn emit_retry(
        &self,
        request: &RolloutRequest,
        node: &str,
        step: RolloutStep,
        attempt: u32,
        delay_ms: u64,
        error: &impl ToString,
    ) {
        let event = RolloutEvent::Retrying {
            node: node.to_owned(),
            step,
            attempt: u64::from(attempt),
            delay_ms,
            error: error.to_string(),
        };
        self.emit(&request.rollout, event);
    }

    async fn run_lanes(&self, request: &RolloutRequest) -> RolloutOutcome {
        let id = request.rollout.as_str();
        // 1. Read-only preflight of every selected node, before the epoch opens or anything stops.
        let reports = join_all(request.nodes.iter().map(|endpoint| self.observe_retrying(request, endpoint))).await;
        // What each node runs now: the prior generation a rollback of its lane restores.
        let prior: BTreeMap<String, (String, u64)> = reports
            .iter()
            .filter_map(|report| report.as_ref().ok())
            .filter_map(|report| Some((report.identity.node.clone(), report.identity.installed.clone()?)))
            .collect();
        // What the decoder made of each observed node's historical forms, for the report before its verdict.
        let decoded: BTreeMap<String, decode::DecodedIdentity> = reports
            .iter()
            .filter_map(|report| report.as_ref().ok())
            .filter_map(|report| {
                let identity = decode::decode(&report.identity, &Expectation::default(), self.verifier).ok()?;
                let historical = !identity.forms.is_empty() || !identity.defects.is_empty();
                historical.then(|| (report.identity.node.clone(), identity))
            })
            .collect();
        // A node someone else holds (an operator, another rollout) is not this rollout's to take down or release.
        let holds = match self.hub_retrying(request, || self.hub.read_holds()).await {
            Ok(holds) => holds,
            Err(error) => return self.refuse(request, &BTreeMap::new(), format!("holds unreadable: {error}")).await,
        };
        let mut selection = Selection::of(id, &request.nodes, reports, &holds, &|observation| {
            self.rules.classify(observation, self.verifier)
        });
        let mut excluded = Exclusions::default();
        for (node, verdict) in &selection.preflight {
            let node = node.clone();
            if let Some(identity) = decoded.get(&node).filter(|_| !matches!(verdict, NodeSelection::SkippedHeld { .. }))
            {
                let (forms, defects) = (identity.forms.clone(), identity.defects.clone());
                self.emit(id, RolloutEvent::IdentityDecoded { node: node.clone(), forms, defects });
            }
            match verdict {
                NodeSelection::SkippedHeld { owners } => {
                    excluded.held.insert(node.clone(), owners.clone());
                    self.emit(id, RolloutEvent::SkippedHeld { node, owners: owners.clone() });
                }
                NodeSelection::Quarantined { surfaces, cause } => {
                    excluded.quarantined.insert(node.clone(), surfaces.clone());
                    self.emit(id, RolloutEvent::Quarantined { node, surfaces: surfaces.clone(), cause: *cause });
                }
                NodeSelection::Eligible { .. } => {}
            }
        }

        // 2. Every capsule must exist before anything is planned: a missing artifact refuses the whole rollout.
        for digest in &request.capsules {
            let reason = match self.artifacts.available(digest).await {
                Ok(true) => continue,
                Ok(false) => format!("capsule {digest} is missing from the artifact store"),
                Err(error) => format!("artifact store unreachable: {error}"),
            };
            return self.refuse(request, &excluded.held, reason).await;
        }

        // The first mutation (staging) happens under the deployment lock.
        let fence = match self.take_lock(request, None).await {
            Ok(fence) => fence,
            Err(reason) => return self.refuse(request, &excluded.held, reason).await,
        };

        // 3. Every capsule on every eligible node, with bounded fan-out, before anything is planned or stopped: after
        // the barrier a fetch is a protocol violation, and a node that cannot be staged is quarantined now.
        if self.rules.staging() == Staging::BeforeQuiescence {
            let mut staged = Vec::with_capacity(selection.eligible.len());
            for batch in selection.eligible.chunks(request.fan_out.max(1)) {
                staged.extend(join_all(batch.iter().map(|endpoint| self.stage_node(request, endpoint))).await);
            }
            for (node, surfaces, cause) in selection.handle_staged(staged) {
                excluded.quarantined.insert(node.clone(), surfaces.clone());
                self.emit(id, RolloutEvent::Quarantined { node, surfaces, cause });
            }
        }

        // 4. Authenticated repairs, one node at a time under a deployment dispatch hold (the fence), before the plan: a
        // node whose repair fails is quarantined now, so the plan's lane size accounts for it. A repair takes one node
        // out of service briefly, so none is attempted when that would break the floor.
        let repair_owner = HoldOwner::Deployment { rollout: id.to_owned() }.to_string();
        let room = selection.room_for_repairs(request.availability_floor);
        for (endpoint, repair) in selection.repairs.clone() {
            let node = endpoint.node.as_str();
            let outcome = if !room {
                Err("no room under the availability floor to take the node out for its repair".to_owned())
            } else if let Err(error) = self.hub_retrying(request, || self.hub.place_hold(node, &repair_owner)).await {
                Err(format!("could not fence the repair: {error}"))
            } else {
                let repaired = self.apply_repair(request, &endpoint, &repair).await;
                match self.hub_retrying(request, || self.hub.release_hold(node, &repair_owner)).await {
                    Ok(_) => repaired,
                    // The fence stays: the node is held either way, and a quarantine accounts for it.
                    Err(error) => repaired.and(Err(format!("repair fence not released: {error}"))),
                }
            };
            if let Err(reason) = outcome {
                excluded.quarantined.insert(node.to_owned(), vec![reason.clone()]);
                let cause = QuarantineCause::Repair;
                self.emit(id, RolloutEvent::Quarantined { node: node.to_owned(), surfaces: vec![reason], cause });
                selection.handle_repair_failed(node);
            }
        }
        let healthy = selection.healthy();
        let Selection { eligible, quarantined, attestation_keys, .. } = selection;

        // 5. The route bundle the operator approved must be the one the hub publishes: it is frozen into the plan and
        // re-checked before every lane.
        match self.hub_retrying(request, || self.hub.route_bundle()).await {
            Ok(published) if published == request.route_digest => {}
            Ok(published) => {
                let reason =
                    format!("route bundle {published} is published, not the approved {}", request.route_digest);
                return self.refuse_holding(request, fence, &excluded.held, reason).await;
            }
            Err(error) => {
                let reason = format!("route bundle unreadable: {error}");
                return self.refuse_holding(request, fence, &excluded.held, reason).await;
            }
        }

        // 6. Plan against the floor and the duration budget; refuse before any mutation when it does not fit.
        let input = PlanInput {
            nodes: eligible.iter().map(|endpoint| endpoint.node.clone()).collect(),
            healthy,
            availability_floor: request.availability_floor,
            lane_size_max: request.lane_size_max,
            fan_out: request.fan_out,
            phases: request.phases,
            retry_budget_ms: request.backoff.worst_case_wait_ms() * 2,
            agent_ttl_ms: request.agent_ttl_ms,
            credential_remaining_ms: request.credential_remaining_ms,
            hold_lease_ms: request.hold_lease_ms.min(request.lock_lease_ms),
        };
        let plan = match self.rules.plan(&input) {
            Ok(plan) => plan,
            Err(error) => return self.refuse_holding(request, fence, &excluded.held, error.to_string()).await,
        };
        let lane_prior: BTreeMap<String, (String, u64)> =
            plan.lanes.iter().flatten().filter_map(|node| Some((node.clone(), prior.get(node)?.clone()))).collect();
        self.record(Record::PlanFrozen {
            rollout: id.to_owned(),
            revision: request.revision.clone(),
            generation: request.generation,
            route_digest: request.route_digest.clone(),
            lanes: plan.lanes.clone(),
            quarantined: quarantined.clone(),
            excluded: excluded.clone(),
            prior: lane_prior.clone(),
        })
        .await;
        self.record(Record::LockTaken { rollout: id.to_owned(), fence }).await;
        self.emit(
            id,
            RolloutEvent::PlanFrozen {
                revision: request.revision.clone(),
                lanes: plan.lanes.len() as u64,
                lane_size: plan.lane_size as u64,
                rollout_bound_ms: plan.rollout_bound_ms,
            },
        );

        // 7. Quarantined nodes are dispatch-held before anything else changes.
        let quarantine_owner = HoldOwner::Quarantine { rollout: id.to_owned() }.to_string();
        for node in &quarantined {
            let _ = self.hub_retrying(request, || self.hub.place_hold(node, &quarantine_owner)).await;
        }

        let mut adopted = Adopted {
            rollout: id.to_owned(),
            revision: request.revision.clone(),
            generation: request.generation,
            route_digest: request.route_digest.clone(),
            lanes: plan.lanes.clone(),
            epoch: None,
            fence: Some(fence),
            nodes: plan
                .lanes
                .iter()
                .flatten()
                .map(|node| (node.clone(), NodeMachine::new(node.clone())))
                .chain(quarantined.iter().map(|node| (node.clone(), NodeMachine::quarantined(node.clone()))))
                .collect(),
            in_doubt: Vec::new(),
            committed_lanes: BTreeMap::new(),
            excluded,
            staged: true,
            prior: lane_prior,
            reverting: BTreeMap::new(),
        };

        // 8. The epoch pins every member against expiry before the first stop.
        let members = self.rules.epoch_members(&plan.lanes);
        let Ok(epoch) = self.hub_retrying(request, || self.hub.open_epoch(&members)).await else {
            return self.stop_failed(
                &adopted,
                Vec::new(),
                RolloutFailure::EpochNotOpened,
                "the hub did not open the epoch",
            );
        };
        self.record(Record::EpochOpened { rollout: id.to_owned(), epoch }).await;
        adopted.epoch = Some(epoch);
        self.drive_lanes(request, adopted, attestation_keys, fence).await
    }

    /// Applies one typed repair; `Err` names why it could not be applied.
    async fn apply_repair(&self, request: &RolloutRequest, endpoint: &Endpoint, repair: &Repair) -> Result<(), String> {
        let id = &request.rollout;
        let writes: Vec<(String, String)> = match repair {
            Repair::Canonicalize(planned) => return self.canonicalize(request, endpoint, planned).await,
            Repair::WriteMarker { revision, .. } => vec![(MARKER.to_owned(), format!("{revision}\n"))],
            Repair::RecreateRecoveryEnvHoldFirst => {
                // The hold is durable before the identity: first the hold alone, then the key beside it. The key comes
                // from the secrets store, never from the file being repaired.
                let key = self
                    .secrets
                    .attestation_key(&endpoint.node)
                    .await
                    .map_err(|error| format!("repair impossible: {error}"))?;
                let writes = self.rules.recovery_env_writes(key.expose());
                writes.into_iter().map(|content| (MAC_ENV.to_owned(), content)).collect()
            }
            Repair::OperatorInspect { .. } => return Err("only an operator can repair this node".into()),
        };
        for (index, (path, content)) in writes.into_iter().enumerate() {
            let request_op = SshRequest::WriteFileAtomic {
                operation_id: format!("{id}/{}/repair-{index}", endpoint.node),
                path,
                content: Secret::new(content),
                mode: 0o600,
            };
            self.ssh.run(endpoint, request_op).await.map_err(|error| format!("repair failed: {error}"))?;
        }
        self.emit(id, RolloutEvent::Repaired { node: endpoint.node.clone(), repair: format!("{repair:?}") });
        Ok(())
    }

    /// Canonicalizes a node's historical forms under the fence: looks at the node again (the files must still decode
    /// to the planned identity), checks the attestation key its environment carries is the secrets store's (a
    /// canonicalization never changes an identity value), then writes each canonical file atomically, owner-only, and
    /// removes the historical receipt last. Each operation id names the file, so a replay after a controller death
    /// runs only what is still due.
    async fn canonicalize(
        &self,
        request: &RolloutRequest,
        endpoint: &Endpoint,
        planned: &Canonicalization,
    ) -> Result<(), String> {
        let (id, node) = (&request.rollout, &endpoint.node);
        let report = self.observe(endpoint).await.map_err(|error| format!("repair failed: {error}"))?;
        let verdict = self.rules.classify(&report.identity, self.verifier);
        let forms = decode::canonical_forms(&report.identity, &verdict, planned, self.verifier)?;
        if let Some(key) = &forms.attestation_key {
            let stored =
                self.secrets.attestation_key(node).await.map_err(|error| format!("repair impossible: {error}"))?;
            if stored != *key {
                return Err("repair refused: mac.env's attestation key is not the secrets store's".into());
            }
        }
        let mut wrote = Vec::with_capacity(forms.writes.len());
        for write in forms.writes {
            let file = write.file();
            let operation_id = format!("{id}/{node}/canonicalize/{}", file.as_str());
            let op = match write {
                CanonicalWrite::Write { file, content } => {
                    SshRequest::WriteFileAtomic { operation_id, path: file.path().to_owned(), content, mode: 0o600 }
                }
                CanonicalWrite::Remove { file } => {
                    SshRequest::RemoveFile { operation_id, path: file.path().to_owned() }
                }
            };
            self.ssh.run(endpoint, op).await.map_err(|error| format!("repair failed: {error}"))?;
            wrote.push(file);
        }
        let forms = planned.forms.clone();
        self.emit(id, RolloutEvent::Canonicalized { node: node.clone(), forms, wrote });
        Ok(())
    }

    /// Reads the controller's current hub credential from the secrets store and presents it to the hub.
    async fn authenticate(&self, rollout: &str, announce: bool) -> Result<(), String> {
        let credential = self.secrets.hub_credential().await.map_err(|error| error.to_string())?;
        let expires_at_ms = self.hub.authenticate(&credential).await.map_err(|error| error.to_string())?;
        if announce {
            self.emit(rollout, RolloutEvent::Reauthenticated { expires_at_ms });
        }
        Ok(())
    }

    /// After the hub refused the credential: reads the current one and authenticates, polling the secrets store until
    /// the rotation state machine has renewed it, for at most `credential_wait_ms`.
    async fn reauthenticate(&self, request: &RolloutRequest) -> Result<(), String> {
        let deadline_ms = self.clock.monotonic_ms() + request.credential_wait_ms;
        let mut delay_ms = request.backoff.base_ms.max(1);
        loop {
            match self.authenticate(&request.rollout, true).await {
                Ok(()) => return Ok(()),
                Err(error) if self.clock.monotonic_ms() + delay_ms > deadline_ms => {
                    return Err(format!("no valid hub credential within {} ms: {error}", request.credential_wait_ms));
                }
                Err(_) => {
                    self.clock.sleep_ms(delay_ms).await;
                    delay_ms = (delay_ms * 2).min(request.backoff.cap_ms.max(1));
                }
            }
        }
    }

    /// Takes the deployment lock: supersedes the journal's fence when adopting a dead controller's rollout,
    /// otherwise acquires it, waiting out another holder's lease for at most one lease (a live holder renews it,
    /// a dead one's runs out). `Err` names who holds it.
    async fn take_lock(&self, request: &RolloutRequest, journal_fence: Option<u64>) -> Result<u64, String> {
        let id = request.rollout.as_str();
        let (holder, lease_ms) = (request.controller.as_str(), request.lock_lease_ms);
        if let Some(fence) = journal_fence {
            match self.hub_retrying(request, || self.hub.supersede_lock(holder, fence, lease_ms)).await {
                Ok(fence) => {
                    self.emit(id, RolloutEvent::LockTaken { fence, superseded: true });
                    return Ok(fence);
                }
                // Another controller took the lock after the journal's died: wait it out like any other holder.
                Err(HubError::Fenced(_) | HubError::Rejected(_)) => {}
                Err(error) => return Err(format!("deployment lock unreachable: {error}")),
            }
        }
        let deadline_ms = self.clock.monotonic_ms() + lease_ms;
        loop {
            match self.hub_retrying(request, || self.hub.acquire_lock(holder, lease_ms)).await {
                Ok(LockGrant::Granted { fence }) => {
                    self.emit(id, RolloutEvent::LockTaken { fence, superseded: false });
                    return Ok(fence);
                }
                Ok(LockGrant::Held { holder, remaining_ms, .. }) => {
                    if self.clock.monotonic_ms() + remaining_ms > deadline_ms {
                        return Err(format!("the deployment lock is held by {holder} for {remaining_ms} ms more"));
                    }
                    self.emit(id, RolloutEvent::LockWaiting { holder, remaining_ms });
                    // A second past the lease, so that a skewed clock does not ask a moment too early.
                    self.clock.sleep_ms(remaining_ms + 1_000).await;
                }
                Err(error) => return Err(format!("deployment lock unreachable: {error}")),
            }
        }
    }

    /// A hub call with bounded retry.
    async fn hub_retrying<T, F>(&self, request: &RolloutRequest, mut call: impl FnMut() -> F) -> Result<T, HubError>
    where
        F: std::future::Future<Output = Result<T, HubError>>,
    {
        let mut attempt = 1;
        let mut reauthentications = 0;
        loop {
            match call().await {
                Ok(value) => return Ok(value),
                Err(error) => {
                    let failure = match &error {
                        HubError::Transport(_) => AttemptFailure::Transient,
                        HubError::Unauthorized(_) if reauthentications < REAUTHENTICATIONS_MAX => {
                            // The credential expired or was rotated: wait for the current one, then try again.
                            reauthentications += 1;
                            if self.reauthenticate(request).await.is_ok() {
                                continue;
                            }
                            return Err(error);
                        }
                        HubError::Unauthorized(_) | HubError::Rejected(_) | HubError::Fenced(_) => {
                            AttemptFailure::Permanent
                        }
                    };
                    match self.rules.after_failure(&request.backoff, attempt, failure, self.jitter.draw()) {
                        RetryDecision::RetryAfter { delay_ms } => {
                            let event = RolloutEvent::HubRetrying {
                                attempt: u64::from(attempt),
                                delay_ms,
                                error: error.to_string(),
                            };
                            self.emit(&request.rollout, event);
                            self.clock.sleep_ms(delay_ms).await;
                            attempt += 1;
                        }
                        RetryDecision::Exhausted | RetryDecision::Stop => return Err(error),
                    }
                }
            }
        }
    }

    async fn resume_lanes(&self, request: &RolloutRequest, adopted: Adopted) -> RolloutOutcome {
        self.emit(
            &adopted.rollout,
            RolloutEvent::Adopted { revision: adopted.revision.clone(), in_doubt: adopted.in_doubt.len() as u64 },
        );
        // Adopt the journal's exact revision, not the request's.
        let request = RolloutRequest {
            rollout: adopted.rollout.clone(),
            revision: adopted.revision.clone(),
            generation: adopted.generation,
            route_digest: adopted.route_digest.clone(),
            ..request.clone()
        };
        let mut adopted = adopted;
        let fence = match self.take_lock(&request, adopted.fence).await {
            Ok(fence) => fence,
            Err(reason) => {
                // Journal and holds stay as they are: the next controller (or this one, later) adopts them.
                let unrun = "another controller holds the deployment lock";
                return self.stop_failed(&adopted, Vec::new(), RolloutFailure::LockUnavailable { reason }, unrun);
            }
        };
        if adopted.fence != Some(fence) {
            self.record(Record::LockTaken { rollout: adopted.rollout.clone(), fence }).await;
            adopted.fence = Some(fence);
        }
        if let Some(epoch) = adopted.epoch {
            self.resurrect_pinned(&request, &adopted, epoch).await;
        }
        if !adopted.staged {
            self.stage_adopted(&request, &mut adopted).await;
        }
        if adopted.epoch.is_none() {
            let members = self.rules.epoch_members(&adopted.lanes);
            if let Ok(epoch) = self.hub_retrying(&request, || self.hub.open_epoch(&members)).await {
                self.record(Record::EpochOpened { rollout: adopted.rollout.clone(), epoch }).await;
                adopted.epoch = Some(epoch);
            }
        }
        self.drive_lanes(&request, adopted, BTreeMap::new(), fence).await
    }

    /// The journal-bound resurrection path (RCCA exit criteria: "Every journal-pinned agent identity is present or is
    /// restored through an explicit journal-bound resurrection path; no required row remains tombstoned"). The
    /// journal's open epoch pins every node of its plan; one the hub tombstoned while no controller ran (a hub whose
    /// sweeper does not honour epochs) is restored under that epoch, fenced, before any lane goes on. A node the hub
    /// will not restore stays tombstoned: it cannot prove a successor, so its lane is rolled back or stays held, never
    /// released unproved. An unreadable heartbeat table restores nothing (the proofs then decide the same way).
    async fn resurrect_pinned(&self, request: &RolloutRequest, adopted: &Adopted, epoch: u64) {
        let Ok(snapshot) = self.hub_retrying(request, || self.hub.read_heartbeats()).await else { return };
        let pinned: BTreeSet<String> = self.rules.epoch_members(&adopted.lanes).into_iter().collect();
        let tombstoned = snapshot.instances.into_iter().filter(|row| !row.registered && pinned.contains(&row.instance));
        for row in tombstoned {
            // A node the hub will not restore cannot prove: its proof says so.
            let _ = self.resurrect(request, &row.instance, epoch).await;
        }
    }

    /// Asks the hub to restore `node`'s tombstoned row under the journal's open `epoch`, fenced, and says what came
    /// of it; a refusal is returned as its text.
    async fn resurrect(&self, request: &RolloutRequest, node: &str, epoch: u64) -> Result<(), String> {
        let node = node.to_owned();
        let (event, refused) = match self.hub_retrying(request, || self.hub.resurrect_agent(&node, epoch)).await {
            Ok(true) => (RolloutEvent::Resurrected { node, epoch }, None),
            // Restored between the read and the call (another path, a replay): nothing to say.
            Ok(false) => return Ok(()),
            Err(error) => {
                let error = error.to_string();
                (RolloutEvent::ResurrectionRefused { node, epoch, error: error.clone() }, Some(error))
            }
        };
        self.emit(&request.rollout, event);
        refused.map_or(Ok(()), Err)
    }

    /// Stages every capsule on every node of an adopted plan that is surely not stopped yet, before any lane goes
    /// down: a plan migrated from an old journal was frozen by a controller that fetched after its stops (the
    /// incident's order), and after the barrier a fetch is a protocol violation. A node whose stop is in doubt is not
    /// staged (it may be stopped: its install then fails and its lane stays held for a person, never fetched onto).
    /// A node that cannot be staged fails where it stands (never held: it keeps its prior generation; held: its lane
    /// is stuck, the hold kept). Staging is idempotent by digest, so a controller that adopts the same plan again
    /// stages only what is missing.
    async fn stage_adopted(&self, request: &RolloutRequest, adopted: &mut Adopted) {
        let endpoints: BTreeMap<&str, &Endpoint> = request.nodes.iter().map(|e| (e.node.as_str(), e)).collect();
        let stop_in_doubt =
            |node: &str| adopted.in_doubt.iter().any(|(doubtful, step)| doubtful == node && *step == NodeStep::Quiesce);
        let unstopped: Vec<(&Endpoint, NodeStep)> = adopted
            .nodes
            .values()
            .filter(|machine| !stop_in_doubt(&machine.node))
            .filter_map(|machine| match machine.state {
                NodeState::Pending(step @ (NodeStep::Hold | NodeStep::Quiesce)) => {
                    Some((*endpoints.get(machine.node.as_str())?, step))
                }
                _ => None,
            })
            .collect();
        let mut staged = Vec::with_capacity(unstopped.len());
        for batch in unstopped.chunks(request.fan_out.max(1)) {
            staged.extend(join_all(batch.iter().map(|(endpoint, _)| self.stage_node(request, endpoint))).await);
        }
        for ((endpoint, step), result) in unstopped.into_iter().zip(staged) {
            let Err(error) = result else { continue };
            let (node, reason) = (endpoint.node.clone(), error.to_string());
            let rollout = adopted.rollout.clone();
            let failed =
                Record::NodeFailed { rollout, node: node.clone(), step, reason: reason.clone(), revert: false };
            self.record(failed).await;
            adopted.in_doubt.retain(|(doubtful, _)| *doubtful != node);
            if let Some(machine) = adopted.nodes.get_mut(&node) {
                machine.handle_failed(step, reason);
            }
        }
        adopted.staged = true;
    }

    /// Runs the lanes one at a time, nodes of a lane concurrently (RCCA replacement plan: "A failed lane stays held;
    /// successful lanes commit independently. One slow node may block only its lane."). A lane that cannot reach its
    /// successor is rolled back to its prior generation at once (reverse recovery, journaled like the forward steps);
    /// one whose rollback fails too stays held, and the later lanes go on in what room it leaves: never more nodes
    /// down at once than the plan's lane size, which the floor sized. Stuck lanes get further rollback passes, each
    /// after a backoff, before the rollout stops with its journal and holds as they are.
    async fn drive_lanes(
        &self,
        request: &RolloutRequest,
        mut adopted: Adopted,
        attestation_keys: BTreeMap<String, Secret>,
        fence: u64,
    ) -> RolloutOutcome {
        let id = adopted.rollout.clone();
        let endpoints: BTreeMap<String, Endpoint> = request.nodes.iter().map(|e| (e.node.clone(), e.clone())).collect();
        let room_max = gate::lane_room(&adopted);
        let mut verdicts: BTreeMap<usize, LaneVerdict> = BTreeMap::new();
        let mut route_changed = false;
        let mut held_back = false;
        let canary = gate::canary(&adopted);
        let mut canary_failed = false;
        for (index, lane) in adopted.lanes.clone().into_iter().enumerate() {
            if adopted.reverting.contains_key(&index) {
                // A rollback a dead controller journaled and did not commit: this controller finishes it.
                let verdict = self.revert_lane(request, &endpoints, &mut adopted, index, &attestation_keys).await;
                verdicts.insert(index, verdict);
                continue;
            }
            match adopted.committed_lanes.get(&index) {
                Some(LaneVerdict::Stuck) => {
                    // A lane a dead controller left stuck: its rollback is this controller's to try again.
                    let verdict = self.revert_lane(request, &endpoints, &mut adopted, index, &attestation_keys).await;
                    verdicts.insert(index, verdict);
                    continue;
                }
                Some(verdict) => {
                    verdicts.insert(index, *verdict);
                    continue;
                }
                None => {}
            }
            // Only a lane not yet begun is gated on the route bundle and on the room stuck lanes leave.
            let begun = gate::lane_begun(&adopted, &lane);
            if !route_changed && !begun {
                // Fail closed: a lane goes down only under the route bundle the plan froze.
                let published = self.hub_retrying(request, || self.hub.route_bundle()).await;
                let published = published.unwrap_or_else(|error| format!("unreadable ({error})"));
                if published != adopted.route_digest {
                    self.emit(&id, RolloutEvent::RouteChanged { frozen: adopted.route_digest.clone(), published });
                    route_changed = true;
                }
            }
            let room = room_max.saturating_sub(gate::nodes_down(&adopted));
            if let LaneGate::Prior { held_back: for_room } = gate::lane_gate(begun, route_changed, room, canary_failed)
            {
                held_back |= for_room;
                verdicts.insert(index, LaneVerdict::Prior);
                continue;
            }
            // The lock is renewed before each lane, so a lane (which the plan fits in one lease) never outlives it.
            if let Err(error) = self.hub_retrying(request, || self.hub.renew_lock(fence, request.lock_lease_ms)).await {
                let failure = RolloutFailure::LockLost { error: error.to_string() };
                let unrun = "the controller lost the deployment lock before its lane";
                return self.stop_failed(&adopted, lanes_of(&adopted, &verdicts), failure, unrun);
            }
            // Past a stuck lane, the lane goes down in batches of the room it leaves, counted again before each
            // batch (a node the last batch left stuck keeps its room). A node no batch found room for keeps its prior
            // generation, untouched.
            let mut pending: Vec<String> = lane.clone();
            let mut batch = 0;
            if let Some(canary) = canary.as_ref().filter(|canary| lane.contains(canary)) {
                pending.retain(|node| node != canary);
                if adopted.nodes[canary].state != NodeState::Succeeded {
                    let nodes = vec![canary.clone()];
                    self.run_batch(
                        request,
                        &endpoints,
                        &mut adopted,
                        (index, &mut batch),
                        nodes,
                        &attestation_keys,
                        false,
                    )
                    .await;
                }
                if adopted.nodes[canary].state == NodeState::Succeeded {
                    let untouched = pending.iter().any(|node| !adopted.nodes[node].touched());
                    if untouched {
                        self.emit(&id, RolloutEvent::CanaryProved { node: canary.clone() });
                    }
                } else {
                    // No wider release: the rest of the canary's lane and every later lane keep their prior generation.
                    canary_failed = true;
                    for node in pending.drain(..) {
                        if let Some(machine) = adopted.nodes.get_mut(&node) {
                            machine.handle_failed(NodeStep::Hold, "the canary did not prove the successor");
                        }
                    }
                }
            }
            while !pending.is_empty() {
                let room = gate::batch_room(begun, room_max, gate::nodes_down(&adopted), pending.len());
                if room == 0 {
                    for node in pending.drain(..) {
                        if let Some(machine) = adopted.nodes.get_mut(&node) {
                            machine.handle_failed(NodeStep::Hold, "a stuck lane keeps the room the floor leaves");
                        }
                    }
                    break;
                }
                let nodes: Vec<String> = pending.drain(..room).collect();
                self.run_batch(request, &endpoints, &mut adopted, (index, &mut batch), nodes, &attestation_keys, false)
                    .await;
            }
            let machines: Vec<NodeMachine> = lane.iter().map(|node| adopted.nodes[node].clone()).collect();
            let mut verdict = lane_verdict(&machines);
            if verdict == LaneVerdict::Stuck {
                verdict = self.revert_lane(request, &endpoints, &mut adopted, index, &attestation_keys).await;
            } else {
                self.commit_lane(request, &id, index, verdict, &lane).await;
            }
            verdicts.insert(index, verdict);
        }
        // Stuck lanes get more rollback passes, each after the backoff's worst wait, while the lock holds.
        for _ in 1..REVERT_PASSES {
            let stuck = gate::stuck_lanes(&verdicts);
            if stuck.is_empty() {
                break;
            }
            self.clock.sleep_ms(request.backoff.worst_case_wait_ms().max(request.backoff.cap_ms)).await;
            if self.hub_retrying(request, || self.hub.renew_lock(fence, request.lock_lease_ms)).await.is_err() {
                break;
            }
            for index in stuck {
                let verdict = self.revert_lane(request, &endpoints, &mut adopted, index, &attestation_keys).await;
                verdicts.insert(index, verdict);
            }
        }
        let stuck = verdicts.values().any(|verdict| *verdict == LaneVerdict::Stuck);
        let unrun = gate::unrun_reason(route_changed, canary_failed, held_back);
        let nodes = account::account(&id, &adopted.nodes, &adopted.excluded, unrun);
        let outcome = self.rules.rollout_end(&nodes);
        let terminal = match outcome {
            RolloutEnd::Successor => TerminalOutcome::Successor,
            _ => TerminalOutcome::Partial,
        };
        let nodes = self.accounted(&id, nodes);
        if !stuck {
            if let Some(epoch) = adopted.epoch {
                self.close_epoch(request, &adopted, epoch).await;
            }
            self.record(Record::Terminal { rollout: id.clone(), outcome }).await;
            let _ = self.hub_retrying(request, || self.hub.release_lock(fence)).await;
        }
        self.emit(&id, RolloutEvent::Terminal { outcome: terminal });
        RolloutOutcome { lanes: lanes_of(&adopted, &verdicts), nodes, outcome }
    }

    /// One batch of a lane through its steps — forward, or back to each node's prior generation when `revert` — its
    /// nodes' machines kept in `adopted`, then the batch reported (`batch_done`, the per-batch telemetry's boundary)
    /// and counted. `lane` is the lane's index and its batch counter.
    #[expect(clippy::too_many_arguments, reason = "one batch, forward and back, as run_step")]
    async fn run_batch(
        &self,
        request: &RolloutRequest,
        endpoints: &BTreeMap<String, Endpoint>,
        adopted: &mut Adopted,
        (lane, batch): (usize, &mut u64),
        nodes: Vec<String>,
        attestation_keys: &BTreeMap<String, Secret>,
        revert: bool,
    ) {
        let machines: Vec<NodeMachine> = nodes.iter().map(|node| adopted.nodes[node].clone()).collect();
        // A rollback settles the lane's doubts by looking at each node first; forward, the adopted doubts stand.
        let (in_doubt, back) = if revert { (&[][..], Some(&adopted.prior)) } else { (&adopted.in_doubt[..], None) };
        let machines =
            self.run_lane(request, endpoints, lane, machines, attestation_keys, in_doubt, back, adopted.epoch).await;
        for machine in machines {
            adopted.nodes.insert(machine.node.clone(), machine);
        }
        let event = RolloutEvent::BatchDone { lane: lane as u64, batch: *batch, nodes, revert };
        self.emit(&adopted.rollout, event);
        *batch += 1;
    }

    /// Journals and reports a lane's verdict.
    async fn commit_lane(
        &self,
        request: &RolloutRequest,
        id: &str,
        lane: usize,
        verdict: LaneVerdict,
        nodes: &[String],
    ) {
        let route_digest = request.route_digest.clone();
        self.record(Record::LaneCommitted { rollout: id.to_owned(), route_digest, lane, verdict }).await;
        self.emit(id, RolloutEvent::LaneCommitted { lane: lane as u64, verdict, nodes: nodes.to_vec() });
    }

    /// The reverse recovery of lane `index` (RCCA: "Apply the same design to reverse recovery"): journaled before it
    /// begins, every node the lane took down walks back to the prior generation the plan recorded for it — hold,
    /// stop, restore the prior install the node kept, write the prior identity, start, prove a heartbeat of the prior
    /// revision, release — each step armed in a batch of intents, looking at the node first (so a replay after a
    /// controller death does nothing twice), with bounded retry. The lane is `Prior` when every node got back, and
    /// stays `Stuck` (held) otherwise. A lane whose plan recorded no prior generation (a journal written before
    /// reverse recovery) cannot be rolled back: it stays stuck.
    async fn revert_lane(
        &self,
        request: &RolloutRequest,
        endpoints: &BTreeMap<String, Endpoint>,
        adopted: &mut Adopted,
        index: usize,
        attestation_keys: &BTreeMap<String, Secret>,
    ) -> LaneVerdict {
        let id = adopted.rollout.clone();
        let lane = adopted.lanes[index].clone();
        // A rollback resumed from the journal goes on under the record that began it.
        let resumed = adopted.reverting.get(&index).cloned();
        let failed: Vec<String> = lane
            .iter()
            .filter(|node| {
                let state = &adopted.nodes[*node].state;
                matches!(state, NodeState::Failed { .. } | NodeState::RevertFailed { .. } | NodeState::Pending(_))
                    && adopted.nodes[*node].held_down()
            })
            .cloned()
            .collect();
        let taken: Vec<String> = lane.iter().filter(|node| adopted.nodes[*node].touched()).cloned().collect();
        if taken.iter().any(|node| !adopted.prior.contains_key(node)) {
            self.commit_lane(request, &id, index, LaneVerdict::Stuck, &lane).await;
            return LaneVerdict::Stuck;
        }
        if resumed.is_none() {
            let reason = match failed.first().map(|node| &adopted.nodes[node].state) {
                Some(NodeState::Failed { step, reason } | NodeState::RevertFailed { step, reason }) => {
                    format!("{} failed at {}: {reason}", failed[0], step.as_str())
                }
                _ => "its lane could not reach the successor".to_owned(),
            };
            self.record(Record::LaneReverting {
                rollout: id.clone(),
                route_digest: request.route_digest.clone(),
                lane: index,
                reason: reason.clone(),
                failed: failed.clone(),
            })
            .await;
            self.emit(
                &id,
                RolloutEvent::LaneReverting { lane: index as u64, nodes: taken.clone(), failed: failed.clone() },
            );
            for node in &lane {
                if let Some(machine) = adopted.nodes.get_mut(node) {
                    machine.begin_revert(&reason);
                }
            }
            adopted.reverting.insert(index, failed.clone());
        }
        adopted.in_doubt.retain(|(node, _)| !lane.contains(node));
        // The rollback takes nodes down again (an upgraded node is held, stopped and restored), so it keeps the room
        // the plan's lane size and the floor leave: the nodes already down go first, with as many of the others as
        // the room allows, then the rest in batches as the room frees. A node the rollback had already taken (its
        // reverse path past the hold, or stopped on it) counts as down; so does one named failed when it began.
        let room_max = gate::lane_room(adopted);
        let failed = resumed.unwrap_or(failed);
        let is_down = |machine: &NodeMachine| {
            failed.contains(&machine.node)
                || matches!(machine.state, NodeState::Reverting { step, .. } if step > NodeStep::Hold)
                || matches!(machine.state, NodeState::RevertFailed { .. })
        };
        let (mut down_queue, mut up_queue): (Vec<String>, Vec<String>) =
            taken.iter().cloned().partition(|node| is_down(&adopted.nodes[node]));
        let elsewhere =
            adopted.nodes.iter().filter(|(node, machine)| !lane.contains(node) && machine.held_down()).count();
        let mut done: Vec<String> = Vec::new();
        let mut batches = 0;
        loop {
            let still_down = done.iter().filter(|node| adopted.nodes[*node].held_down()).count();
            let room = room_max.saturating_sub(elsewhere + still_down + down_queue.len());
            let mut batch: Vec<String> = std::mem::take(&mut down_queue);
            batch.extend(up_queue.drain(..room.min(up_queue.len())));
            if batch.is_empty() {
                // No room for the rest: they stay upgraded, the lane stuck, for the next pass.
                break;
            }
            done.extend(batch.iter().cloned());
            self.run_batch(request, endpoints, adopted, (index, &mut batches), batch, attestation_keys, true).await;
        }
        let machines: Vec<NodeMachine> = lane.iter().map(|node| adopted.nodes[node].clone()).collect();
        let verdict = lane_verdict(&machines);
        self.commit_lane(request, &id, index, verdict, &lane).await;
        adopted.reverting.remove(&index);
        verdict
    }

    /// The rollout stops failed with its journal and holds as they are (the next controller adopts them): the
    /// account of every node, then the terminal event.
    fn stop_failed(
        &self,
        adopted: &Adopted,
        lanes: Vec<(Vec<String>, LaneVerdict)>,
        failure: RolloutFailure,
        unrun: &str,
    ) -> RolloutOutcome {
        let id = adopted.rollout.as_str();
        let nodes = self.accounted(id, account::account(id, &adopted.nodes, &adopted.excluded, unrun));
        self.emit(id, RolloutEvent::Terminal { outcome: TerminalOutcome::Failed(failure) });
        RolloutOutcome { lanes, nodes, outcome: RolloutEnd::Failed }
    }

    /// Makes the epoch terminal. Members whose candidate identity was never written are named untouched; one whose
    /// principal is gone (registry cleanup) first gets a superseding hold, so the abort is monotonic for it (RCCA P0
    /// "Make abort monotonic for untouched participants") while installed members keep the exact continuity check.
    async fn close_epoch(&self, request: &RolloutRequest, adopted: &Adopted, epoch: u64) {
        let installed = |node: &str| {
            let machine = &adopted.nodes[node];
            let past_identity = match &machine.state {
                NodeState::Pending(step) => *step > NodeStep::WriteIdentity,
                NodeState::Failed { step, .. } => *step > NodeStep::WriteIdentity,
                NodeState::Succeeded => true,
                // A rollback wrote the prior identity back (or is writing it): its installed credential is the one
                // the node carried before the rollout, whose continuity the hub checks.
                NodeState::Reverting { .. } | NodeState::RevertFailed { .. } | NodeState::RolledBack { .. } => true,
                NodeState::RetainedPrior { .. } | NodeState::Quarantined => false,
            };
            past_identity || adopted.in_doubt.iter().any(|(n, step)| n == node && *step == NodeStep::WriteIdentity)
        };
        let untouched: Vec<String> = adopted.lanes.iter().flatten().filter(|node| !installed(node)).cloned().collect();
        if !untouched.is_empty() {
            let snapshot = self.hub_retrying(request, || self.hub.read_heartbeats()).await;
            let gone: Vec<&String> = match &snapshot {
                Ok(snapshot) => untouched
                    .iter()
                    .filter(|node| !snapshot.instances.iter().any(|row| &row.instance == *node && row.registered))
                    .collect(),
                Err(_) => untouched.iter().collect(),
            };
            let owner = HoldOwner::Successor { rollout: adopted.rollout.clone() }.to_string();
            for node in gone {
                let _ = self.hub_retrying(request, || self.hub.place_hold(node, &owner)).await;
            }
        }
        let _ = self.hub_retrying(request, || self.hub.close_epoch(epoch, &untouched)).await;
    }

    /// One lane, step by step (RCCA P1 "Durably arm a batch of per-node intents, perform fenced remote operations
    /// concurrently with bounded fan-out, then serialize ... completion records"): the intents of every node at a
    /// step are armed in one journal append, the operations run concurrently (at most `fan_out` at once), and the
    /// completions are recorded in lane order. A node that fails stops there; the others go on. With `back` (each
    /// node's prior generation) the lane walks its reverse path instead.
    #[expect(clippy::too_many_arguments, reason = "the lane's one loop, forward and back")]
    async fn run_lane(
        &self,
        request: &RolloutRequest,
        endpoints: &BTreeMap<String, Endpoint>,
        lane: usize,
        mut machines: Vec<NodeMachine>,
        attestation_keys: &BTreeMap<String, Secret>,
        in_doubt: &[(String, NodeStep)],
        back: Option<&BTreeMap<String, (String, u64)>>,
        epoch: Option<u64>,
    ) -> Vec<NodeMachine> {
        let id = request.rollout.as_str();
        let way = |node: &str| match back.and_then(|prior| prior.get(node)) {
            Some((revision, generation)) => Way::Back { revision: revision.clone(), generation: *generation, epoch },
            None => Way::Forward { epoch },
        };
        let poll = |machine: &NodeMachine| if back.is_some() { machine.poll_revert() } else { machine.poll_step() };
        let mut keys: Vec<Option<Secret>> = machines.iter().map(|m| attestation_keys.get(&m.node).cloned()).collect();
        for step in NodeStep::ALL {
            let at_step: Vec<usize> = (0..machines.len()).filter(|&i| poll(&machines[i]) == Some(step)).collect();
            if at_step.is_empty() {
                continue;
            }
            let doubtful = |i: usize| in_doubt.iter().any(|(node, s)| *node == machines[i].node && *s == step);
            let operations: Vec<(String, String)> = at_step
                .iter()
                .filter(|&&i| !doubtful(i))
                .map(|&i| (machines[i].node.clone(), way(&machines[i].node).operation_id(id, &machines[i].node, step)))
                .collect();
            if !operations.is_empty() {
                let route_digest = request.route_digest.clone();
                let revert = back.is_some();
                self.record(Record::Intents { rollout: id.to_owned(), route_digest, lane, step, operations, revert })
                    .await;
            }
            let mut results = Vec::with_capacity(at_step.len());
            for batch in at_step.chunks(request.fan_out.max(1)) {
                results.extend(
                    join_all(batch.iter().map(|&i| {
                        let endpoint = &endpoints[&machines[i].node];
                        let (way, key, doubtful) = (way(&machines[i].node), keys[i].clone(), doubtful(i));
                        async move { self.attempt_step(request, endpoint, step, lane, key, doubtful, &way).await }
                    }))
                    .await,
                );
            }
            for (&i, (result, key)) in at_step.iter().zip(results) {
                keys[i] = key;
                let (endpoint, way) = (&endpoints[&machines[i].node], way(&machines[i].node));
                self.finish_step(request, endpoint, &mut machines[i], step, lane, result, &way).await;
            }
        }
        machines
    }

    /// Records how one step of one node ended (completion or failure, with the replay command and endpoint) and
    /// advances its machine.
    #[expect(clippy::too_many_arguments, reason = "one step's end, forward and back")]
    async fn finish_step(
        &self,
        request: &RolloutRequest,
        endpoint: &Endpoint,
        machine: &mut NodeMachine,
        step: NodeStep,
        lane: usize,
        result: Result<(), String>,
        way: &Way,
    ) {
        let id = request.rollout.as_str();
        let node = endpoint.node.as_str();
        let revert = way.is_back();
        match result {
            Ok(()) => {
                self.record(Record::Completed {
                    rollout: id.to_owned(),
                    route_digest: request.route_digest.clone(),
                    node: node.to_owned(),
                    step,
                    operation_id: way.operation_id(id, node, step),
                    revert,
                })
                .await;
                let event_step = way.event_step(step);
                self.emit(id, RolloutEvent::StepDone { node: node.to_owned(), step: event_step, lane: lane as u64 });
                if revert { machine.handle_revert_done(step) } else { machine.handle_done(step) }
            }
            Err(reason) => {
                self.record(Record::NodeFailed {
                    rollout: id.to_owned(),
                    node: node.to_owned(),
                    step,
                    reason: reason.clone(),
                    revert,
                })
                .await;
                self.emit(
                    id,
                    RolloutEvent::NodeFailed {
                        node: node.to_owned(),
                        step: way.event_step(step),
                        error: reason.clone(),
                        endpoint: format!("{}@{}", endpoint.node, endpoint.host_key),
                        replay: request.resume_command.clone(),
                    },
                );
                if revert { machine.handle_revert_failed(step, reason) } else { machine.handle_failed(step, reason) }
            }
        }
    }

    /// One step of one node with bounded retry: on a failure the node is re-observed (identity re-checked) before
    /// any re-attempt, and a step whose effect is already visible is done. `doubtful` (an intent without a
    /// completion in an adopted journal) looks before the first attempt too. Returns the attestation key as known
    /// after the step (an observation may have found it).
    #[expect(clippy::too_many_arguments, reason = "one step, forward and back")]
    async fn attempt_step(
        &self,
        request: &RolloutRequest,
        endpoint: &Endpoint,
        step: NodeStep,
        lane: usize,
        mut attestation_key: Option<Secret>,
        doubtful: bool,
        way: &Way,
    ) -> (Result<(), String>, Option<Secret>) {
        let id = request.rollout.as_str();
        let node = endpoint.node.as_str();
        let op_id = way.operation_id(id, node, step);
        let owner = HoldOwner::Deployment { rollout: id.to_owned() }.to_string();
        let event_step = way.event_step(step);
        self.emit(id, RolloutEvent::StepStarted { node: node.to_owned(), step: event_step, lane: lane as u64 });
        let mut attempt = 1;
        let mut reauthentications = 0;
        // A step back on the node always looks first: the rollback must find where the node is, whoever left it
        // there. (Its hub steps — hold, prove, release — are idempotent at the hub.)
        let on_node = matches!(step, NodeStep::Quiesce | NodeStep::Install | NodeStep::WriteIdentity | NodeStep::Start);
        let mut look_first = doubtful || (way.is_back() && on_node);
        let result = loop {
            if look_first {
                match self.observe(endpoint).await {
                    Ok(report) => {
                        if attestation_key.is_none() {
                            attestation_key = report.identity.env_value("MAC_ATTESTATION_KEY").map(Secret::new);
                        }
                        if already_done(step, way.target(request), way.is_back(), &report) {
                            break Ok(());
                        }
                    }
                    Err(error) => {
                        let failure = failure_class(&error);
                        let error = error.to_string();
                        if self.wait_to_retry(request, node, event_step, &mut attempt, failure, &error).await {
                            continue;
                        }
                        break Err(error);
                    }
                }
            }
            match self.run_step(request, endpoint, step, &op_id, &owner, attestation_key.as_ref(), way).await {
                Ok(()) => break Ok(()),
                Err(StepError::Ssh(error)) => {
                    let failure = failure_class(&error);
                    let text = error.to_string();
                    if !self.wait_to_retry(request, node, event_step, &mut attempt, failure, &text).await {
                        break Err(error.to_string());
                    }
                    // Before the replay: re-observe (identity re-checked), and skip it if the effect is there.
                    look_first = true;
                }
                Err(StepError::Unauthorized(reason)) => {
                    // Hold and release go to the hub: wait for a valid credential and try again (the hub's hold
                    // operations are idempotent by owner, so a replay is safe). A credential outage spends no retry.
                    reauthentications += 1;
                    if reauthentications > REAUTHENTICATIONS_MAX {
                        break Err(reason);
                    }
                    if let Err(reason) = self.reauthenticate(request).await {
                        break Err(reason);
                    }
                }
                Err(StepError::Other(reason)) => break Err(reason),
            }
        };
        (result, attestation_key)
    }

    async fn stage_node(&self, request: &RolloutRequest, endpoint: &Endpoint) -> Result<(), StageFailure> {
        self.admit_storage(request, endpoint).await?;
        for digest in &request.capsules {
            let operation_id = format!("{}/{}/stage/{digest}", request.rollout, endpoint.node);
            let mut attempt = 1;
            loop {
                let op = SshRequest::StageArtifact { operation_id: operation_id.clone(), digest: digest.clone() };
                let error = match self.ssh.run(endpoint, op).await {
                    Ok(_) => break,
                    Err(error) => error,
                };
                let (step, failure) = (RolloutStep::Stage, failure_class(&error));
                if !self.wait_to_retry(request, &endpoint.node, step, &mut attempt, failure, &error.to_string()).await {
                    return Err(StageFailure::Staging(error));
                }
                // Staging is idempotent by digest: look before fetching again.
                if self.observe(endpoint).await.is_ok_and(|report| report.staged.contains(digest)) {
                    break;
                }
            }
        }
        Ok(())
    }

    /// The storage admission gate before a node is staged (`rollout::storage`): the probe, retried as a staging call
    /// is when it fails in transit (a probe that never answers times out), judged by [`storage::admit`]. A node not
    /// admitted is refused with the checks that failed.
    async fn admit_storage(&self, request: &RolloutRequest, endpoint: &Endpoint) -> Result<(), StageFailure> {
        let operation_id = format!("{}/{}/probe_storage", request.rollout, endpoint.node);
        let mut attempt = 1;
        let probe = loop {
            let error =
                match self.ssh.run(endpoint, SshRequest::ProbeStorage { operation_id: operation_id.clone() }).await {
                    Ok(SshResponse::StorageProbed(probe)) => break probe,
                    Ok(_) => SshError::Refused("the storage probe answered without a probe".into()),
                    Err(error) => error,
                };
            let (step, failure) = (RolloutStep::Stage, failure_class(&error));
            if !self.wait_to_retry(request, &endpoint.node, step, &mut attempt, failure, &error.to_string()).await {
                return Err(StageFailure::StorageNotAdmitted(vec![format!("the probe failed: {error}")]));
            }
        };
        storage::admit(&probe).map_err(StageFailure::StorageNotAdmitted)
    }

    /// One node through its remaining steps, one step at a time, each intent journaled alone before it runs (the
    /// legacy controller's coupling of journal order to remote serialization).
    async fn run_node(
        &self,
        request: &RolloutRequest,
        endpoint: &Endpoint,
        mut machine: NodeMachine,
        attestation_key: Option<Secret>,
    ) -> NodeMachine {
        let id = request.rollout.as_str();
        let node = endpoint.node.as_str();
        let mut attestation_key = attestation_key;
        while let Some(step) = machine.poll_step() {
            self.record(Record::Intent {
                rollout: id.to_owned(),
                route_digest: request.route_digest.clone(),
                node: node.to_owned(),
                step,
                operation_id: operation_id(id, node, step),
            })
            .await;
            let (result, key) = self.attempt_step(request, endpoint, step, 0, attestation_key, false, &LEGACY).await;
            attestation_key = key;
            self.finish_step(request, endpoint, &mut machine, step, 0, result, &LEGACY).await;
        }
        machine
    }

    #[expect(clippy::too_many_arguments, reason = "one step, forward and back")]
    async fn run_step(
        &self,
        request: &RolloutRequest,
        endpoint: &Endpoint,
        step: NodeStep,
        op_id: &str,
        owner: &str,
        attestation_key: Option<&Secret>,
        way: &Way,
    ) -> Result<(), StepError> {
        let node = endpoint.node.as_str();
        let (revision, generation) = way.target(request);
        match step {
            NodeStep::Hold => self.hub.place_hold(node, owner).await.map_err(hub_error),
            NodeStep::Release => self.hub.release_hold(node, owner).await.map(|_| ()).map_err(hub_error),
            NodeStep::Quiesce => self
                .ssh
                .run(endpoint, SshRequest::StopService { operation_id: op_id.to_owned() })
                .await
                .map(|_| ())
                .map_err(Into::into),
            NodeStep::Install if way.is_back() => {
                // The prior install the node kept beside the successor: nothing is fetched (after the barrier a fetch
                // is a protocol violation, and the recovery material is the node's own).
                let op = SshRequest::RestorePrevious {
                    operation_id: op_id.to_owned(),
                    revision: revision.to_owned(),
                    generation,
                };
                self.ssh.run(endpoint, op).await.map(|_| ()).map_err(Into::into)
            }
            NodeStep::Install => {
                if self.rules.staging() == Staging::AtInstall {
                    self.stage_node(request, endpoint).await.map_err(SshError::from)?;
                }
                let op = SshRequest::RunInstaller {
                    operation_id: op_id.to_owned(),
                    revision: request.revision.clone(),
                    generation: request.generation,
                    required_digests: request.capsules.clone(),
                    route_digest: request.route_digest.clone(),
                };
                self.ssh.run(endpoint, op).await.map(|_| ()).map_err(Into::into)
            }
            NodeStep::WriteIdentity => {
                // The current key, as observed on the node or, when the node shows none (after a repair, or in a new
                // controller that adopted the journal), from the secrets store. Deployment never mints a new one.
                let fetched;
                let key = match attestation_key {
                    Some(key) => key,
                    None => {
                        fetched = self
                            .secrets
                            .attestation_key(node)
                            .await
                            .map_err(|error| StepError::Other(error.to_string()))?;
                        &fetched
                    }
                };
                let env = self.rules.installed_env(&InstalledIdentity {
                    node,
                    hub_url: &request.hub_url,
                    revision,
                    generation,
                    attestation_key: key.expose(),
                });
                let writes = [
                    (format!("{op_id}/env"), MAC_ENV, env),
                    (format!("{op_id}/marker"), MARKER, format!("{revision}\n")),
                ];
                for (operation_id, path, content) in writes {
                    let op = SshRequest::WriteFileAtomic {
                        operation_id,
                        path: path.to_owned(),
                        content: Secret::new(content),
                        mode: 0o600,
                    };
                    self.ssh.run(endpoint, op).await?;
                }
                Ok(())
            }
            NodeStep::Start => self
                .ssh
                .run(endpoint, SshRequest::StartService { operation_id: op_id.to_owned() })
                .await
                .map(|_| ())
                .map_err(Into::into),
            NodeStep::Prove => {
                let deadline = self.clock.monotonic_ms() + request.phases.prove_ms;
                let mut resurrection_tried = false;
                loop {
                    if let Ok(snapshot) = self.hub.read_heartbeats().await {
                        let row = snapshot.instances.iter().find(|row| row.instance == node);
                        if row.is_some_and(|row| row.registered && row.revision.as_deref() == Some(revision)) {
                            return self.prove_on_the_node(endpoint, revision, generation, attestation_key).await;
                        }
                        // Tombstoned (a hub whose sweeper does not honour epochs, the node silent past the TTL while
                        // its lane ran): the journal's epoch pins it, so it is restored under that epoch, once per
                        // proof, and the proof goes on waiting for its heartbeat. A row the hub will not restore can
                        // never heartbeat: the proof fails now, naming the refusal.
                        if let (Some(row), Some(epoch)) = (row, way.epoch()) {
                            if !row.registered && !resurrection_tried {
                                resurrection_tried = true;
                                if let Err(refusal) = self.resurrect(request, node, epoch).await {
                                    return Err(StepError::Other(format!(
                                        "{node} is tombstoned and the hub refused to restore it under epoch {epoch}: \
                                         {refusal}"
                                    )));
                                }
                            }
                        }
                    }
                    if self.clock.monotonic_ms() >= deadline {
                        return Err(StepError::Other(format!(
                            "no heartbeat with revision {revision} within {} ms",
                            request.phases.prove_ms
                        )));
                    }
                    self.clock.sleep_ms(request.prove_poll_ms).await;
                }
            }
        }
    }

    /// The rest of a target's proof, after a heartbeat named its revision (RCCA exit criteria: "every target proves
    /// source revision, deployment generation, service health, and attestation identity", not a heartbeat alone): the
    /// node itself shows the installed source at `revision` and `generation`, its service running, and the
    /// attestation key its environment carries is the secrets store's. A transport failure is the step's to retry;
    /// a contradiction fails the step (the lane is then rolled back). The error names which proof failed and never
    /// a key.
    async fn prove_on_the_node(
        &self,
        endpoint: &Endpoint,
        revision: &str,
        generation: u64,
        attestation_key: Option<&Secret>,
    ) -> Result<(), StepError> {
        let report = self.observe(endpoint).await?;
        let unproved = proof::gaps(&report, revision, generation, attestation_key.map(Secret::expose));
        if unproved.is_empty() { Ok(()) } else { Err(StepError::Other(format!("unproved: {}", unproved.join("; ")))) }
    }

    /// The legacy controller of the incident: serial, all-fleet, no preflight, no epoch, no retry.
    async fn run_legacy(&self, request: &RolloutRequest) -> RolloutOutcome {
        let id = request.rollout.as_str();
        let owner = HoldOwner::Deployment { rollout: id.to_owned() }.to_string();
        let all: Vec<String> = request.nodes.iter().map(|e| e.node.clone()).collect();
        self.record(Record::PlanFrozen {
            rollout: id.to_owned(),
            revision: request.revision.clone(),
            generation: request.generation,
            route_digest: request.route_digest.clone(),
            lanes: vec![all.clone()],
            quarantined: Vec::new(),
            excluded: Exclusions::default(),
            // The incident's controller has no reverse recovery.
            prior: BTreeMap::new(),
        })
        .await;
        let mut quiesced: Vec<&Endpoint> = Vec::new();
        let mut failure = None;
        // Phase 1: serial quiescence of the whole selection; identity is checked only here.
        for endpoint in &request.nodes {
            let node = endpoint.node.as_str();
            let result: Result<(), String> = async {
                self.hub.place_hold(node, &owner).await.map_err(|e| e.to_string())?;
                let report = self.observe(endpoint).await.map_err(|e| e.to_string())?;
                if let Verdict::Quarantined { .. } =
                    preflight::classify(&report.identity, &Expectation::default(), self.verifier)
                {
                    return Err("retained successor has an installed identity".into());
                }
                self.record(Record::Intent {
                    rollout: id.into(),
                    route_digest: request.route_digest.clone(),
                    node: node.into(),
                    step: NodeStep::Quiesce,
                    operation_id: operation_id(id, node, NodeStep::Quiesce),
                })
                .await;
                self.ssh
                    .run(endpoint, SshRequest::StopService { operation_id: operation_id(id, node, NodeStep::Quiesce) })
                    .await
                    .map_err(|e| e.to_string())?;
                self.record(Record::Completed {
                    rollout: id.into(),
                    route_digest: request.route_digest.clone(),
                    node: node.into(),
                    step: NodeStep::Quiesce,
                    operation_id: operation_id(id, node, NodeStep::Quiesce),
                    revert: false,
                })
                .await;
                Ok(())
            }
            .await;
            match result {
                Ok(()) => quiesced.push(endpoint),
                Err(reason) => {
                    self.legacy_node_failed(id, endpoint, NodeStep::Quiesce.into(), reason.clone());
                    failure = Some(reason);
                    break;
                }
            }
        }
        if failure.is_some() {
            // Retain-forward recovery: serially, reconcile each stopped node's attestation through the hub host, then
            // restart it. Direct SSH, 10 s connect timeout, no retry: the first error stops the pass.
            for endpoint in &quiesced {
                let node = endpoint.node.as_str();
                let step: Result<(), SshError> = async {
                    self.observe(&request.hub_endpoint).await?;
                    self.ssh
                        .run(endpoint, SshRequest::StartService { operation_id: format!("{id}/{node}/recover") })
                        .await?;
                    Ok(())
                }
                .await;
                if let Err(error) = step {
                    self.legacy_node_failed(id, &request.hub_endpoint, RolloutStep::LegacyRecover, error.to_string());
                    break;
                }
            }
            return self.legacy_failed(id, all);
        }
        // Phase 2: install, identity, start, prove, release — serially, stopping on the first error.
        for endpoint in &request.nodes {
            let mut machine = NodeMachine::new(endpoint.node.clone());
            machine.handle_done(NodeStep::Hold);
            machine.handle_done(NodeStep::Quiesce);
            let no_retry =
                RolloutRequest { backoff: Backoff { attempts_max: 1, ..request.backoff }, ..request.clone() };
            // The incident's defect, kept: capsules are fetched after the node was quiesced (RCCA: "Artifact fetches ...
            // still occur after service quiescence").
            if let Err(error) = self.stage_node(&no_retry, endpoint).await {
                self.legacy_node_failed(id, endpoint, NodeStep::Install.into(), SshError::from(error).to_string());
                return self.legacy_failed(id, all);
            }
            let report = self.observe(endpoint).await.ok();
            let key = report.as_ref().and_then(|r| r.identity.env_value("MAC_ATTESTATION_KEY")).map(Secret::new);
            let machine = self.run_node(&no_retry, endpoint, machine, key).await;
            if machine.state != NodeState::Succeeded {
                return self.legacy_failed(id, all);
            }
        }
        self.record(Record::Terminal { rollout: id.to_owned(), outcome: RolloutEnd::Successor }).await;
        // Every node proved the successor: the legacy controller's one account (it stops on any failure).
        let mut upgraded: Vec<NodeAccount> =
            all.iter().map(|node| NodeAccount { node: node.clone(), outcome: NodeOutcome::Upgraded }).collect();
        upgraded.sort_by(|a, b| a.node.cmp(&b.node));
        let nodes = self.accounted(id, upgraded);
        self.emit(id, RolloutEvent::Terminal { outcome: TerminalOutcome::Successor });
        RolloutOutcome { lanes: vec![(all, LaneVerdict::Successor)], nodes, outcome: RolloutEnd::Successor }
    }
}

enum StepError {
    Ssh(SshError),
    Unauthorized(String),
    Other(String),
}

impl From<SshError> for StepError {
    fn from(error: SshError) -> Self {
        StepError::Ssh(error)
    }
}

fn hub_error(error: HubError) -> StepError {
    match error {
        HubError::Transport(transport) => StepError::Ssh(SshError::Transport(transport)),
        HubError::Unauthorized(reason) => StepError::Unauthorized(reason),
        HubError::Rejected(reason) | HubError::Fenced(reason) => StepError::Other(reason),
    }
}
