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

use std::collections::BTreeMap;

use futures_util::future::join_all;

use crate::ports::{
    Artifacts, Clock, Endpoint, Hub, Jitter, Journal, NodeReport, RolloutEvent, Secrets, Signal, Signals, Ssh,
    SshError, SshRequest, SshResponse,
};
use crate::rollout::journal::{self, Adopted, Record};
use crate::rollout::lane::{LaneVerdict, NodeMachine, NodeState, NodeStep, lane_verdict, operation_id};
use crate::rollout::plan::{PhaseBounds, PlanInput, plan};
use crate::rollout::preflight::{self, Expectation, MAC_ENV, MARKER, Repair, SignatureVerifier, Verdict};
use crate::rollout::retry::{AttemptFailure, Backoff, RetryDecision};
use crate::secret::Secret;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RolloutPolicy {
    Lanes,
    Legacy,
}

/// What to deploy, where, and under which limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RolloutRequest {
    pub rollout: String,
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
    /// How often the prove step reads the hub while it waits for the new revision's heartbeat.
    pub prove_poll_ms: u64,
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
}

/// How a rollout ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RolloutOutcome {
    pub lanes: Vec<(Vec<String>, LaneVerdict)>,
    pub quarantined: Vec<String>,
    /// `successor` (every lane successor), `converged` (every lane successor or prior), `partial` (a lane stuck:
    /// later lanes not run), `refused` (no plan), or `failed` (legacy stopped, or the epoch could not open).
    pub outcome: String,
}

const DEPLOY_HOLD_PREFIX: &str = "deploy:";
const QUARANTINE_HOLD_PREFIX: &str = "quarantine:";

fn failure_class(error: &SshError) -> AttemptFailure {
    match error {
        SshError::Transport(_) => AttemptFailure::Transient,
        SshError::HostKeyMismatch { .. } => AttemptFailure::IdentityChanged,
        SshError::Refused(_) => AttemptFailure::Permanent,
    }
}

fn env_value<'a>(report: &'a NodeReport, key: &str) -> Option<&'a str> {
    let content = &report.identity.env.as_ref()?.content;
    content.lines().find_map(|line| line.strip_prefix(key)?.strip_prefix('='))
}

/// The one canonical installed environment the controller emits.
fn render_env(node: &str, hub_url: &str, revision: &str, generation: u64, attestation_key: &str) -> String {
    format!(
        "MAC_ATTESTATION_KEY={attestation_key}\nMAC_STARTUP_CLEAR_HOLD=1\nMAC_WORKER_ID={node}\nMAC_HUB_URL={hub_url}\nMAC_DEPLOYED_REVISION={revision}\nMAC_GENERATION={generation}\n"
    )
}

/// Whether a step's effect is already visible on the node (so a replay must not run it again).
fn already_done(step: NodeStep, request: &RolloutRequest, report: &NodeReport) -> bool {
    let target = (request.revision.as_str(), request.generation);
    match step {
        NodeStep::Quiesce => !report.service_running,
        NodeStep::Install => report
            .identity
            .installed
            .as_ref()
            .is_some_and(|(revision, generation)| (revision.as_str(), *generation) == target),
        NodeStep::WriteIdentity => {
            report.identity.marker.as_ref().is_some_and(|marker| marker.content.trim() == request.revision)
                && env_value(report, "MAC_DEPLOYED_REVISION") == Some(request.revision.as_str())
        }
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
        let lines = self.journal.replay().await.unwrap_or_else(|error| panic!("rollout journal unreadable: {error}"));
        let adopted = journal::replay(lines.iter().map(String::as_str)).unwrap_or_else(|error| panic!("{error}"));
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
                RolloutOutcome { lanes: Vec::new(), quarantined: Vec::new(), outcome: "failed".into() }
            }
            (None, RolloutPolicy::Lanes) => self.run_lanes(request).await,
            (None, RolloutPolicy::Legacy) => self.run_legacy(request).await,
        }
    }

    /// The legacy controller's report of a failed node: it names the endpoint, and has no recovery-only mode to offer.
    fn legacy_node_failed(&self, id: &str, endpoint: &Endpoint, step: &str, error: impl ToString) {
        let event = RolloutEvent::NodeFailed {
            node: endpoint.node.clone(),
            step: step.into(),
            error: error.to_string(),
            endpoint: format!("{}@{}", endpoint.node, endpoint.host_key),
            replay: "no supported recovery-only mode: a later typed deployment resumes the journal".into(),
        };
        self.emit(id, event);
    }

    /// How the legacy controller stops: journal non-terminal, holds retained, the whole selection one stuck lane.
    fn legacy_failed(&self, id: &str, all: Vec<String>) -> RolloutOutcome {
        self.emit(id, RolloutEvent::Terminal { outcome: "failed: journal non-terminal, holds retained".into() });
        RolloutOutcome { lanes: vec![(all, LaneVerdict::Stuck)], quarantined: Vec::new(), outcome: "failed".into() }
    }

    fn emit(&self, rollout: &str, event: RolloutEvent) {
        self.signals.emit(Signal::Rollout { rollout: rollout.to_owned(), event });
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
            SshResponse::Done => Err(SshError::Refused("observe answered without an observation".into())),
        }
    }

    /// After failed attempt `attempt` of `step` on `node`: when the backoff allows another, reports the retry, waits,
    /// counts the attempt and returns true; returns false when the failure ends the step (exhausted, identity
    /// changed, permanent refusal).
    async fn wait_to_retry(
        &self,
        request: &RolloutRequest,
        node: &str,
        step: NodeStep,
        attempt: &mut u32,
        error: &SshError,
    ) -> bool {
        let RetryDecision::RetryAfter { delay_ms } =
            request.backoff.after_failure(*attempt, failure_class(error), self.jitter.draw())
        else {
            return false;
        };
        let event = RolloutEvent::Retrying {
            node: node.to_owned(),
            step: step.as_str().into(),
            attempt: u64::from(*attempt),
            delay_ms,
            error: error.to_string(),
        };
        self.emit(&request.rollout, event);
        self.clock.sleep_ms(delay_ms).await;
        *attempt += 1;
        true
    }

    /// Observes with bounded retry (read-only, always safe to repeat).
    async fn observe_retrying(&self, request: &RolloutRequest, endpoint: &Endpoint) -> Result<NodeReport, SshError> {
        let mut attempt = 1;
        loop {
            match self.observe(endpoint).await {
                Ok(report) => return Ok(report),
                Err(error) => match request.backoff.after_failure(attempt, failure_class(&error), self.jitter.draw()) {
                    RetryDecision::RetryAfter { delay_ms } if request.policy == RolloutPolicy::Lanes => {
                        self.clock.sleep_ms(delay_ms).await;
                        attempt += 1;
                    }
                    _ => return Err(error),
                },
            }
        }
    }

    async fn run_lanes(&self, request: &RolloutRequest) -> RolloutOutcome {
        let id = request.rollout.as_str();
        // 1. Read-only preflight of every selected node, before the epoch opens or anything stops.
        let reports = join_all(request.nodes.iter().map(|endpoint| self.observe_retrying(request, endpoint))).await;
        let mut quarantined = Vec::new();
        let mut repairs: Vec<(Endpoint, Repair)> = Vec::new();
        let mut eligible = Vec::new();
        let mut attestation_keys = BTreeMap::new();
        for (endpoint, report) in request.nodes.iter().zip(reports) {
            let verdict = match &report {
                Ok(report) => preflight::classify(&report.identity, &Expectation::default(), self.verifier),
                Err(error) => {
                    let surfaces = vec![preflight::Contradiction::Unreachable { error: error.to_string() }];
                    Verdict::Quarantined { repair: Repair::OperatorInspect { surfaces: surfaces.clone() }, surfaces }
                }
            };
            if let Ok(report) = &report {
                if let Some(key) = env_value(report, "MAC_ATTESTATION_KEY") {
                    attestation_keys.insert(endpoint.node.clone(), Secret::new(key));
                }
            }
            match verdict {
                Verdict::Coherent { .. } => eligible.push(endpoint.clone()),
                Verdict::Repairable { repair, .. } => {
                    repairs.push((endpoint.clone(), repair));
                    eligible.push(endpoint.clone());
                }
                Verdict::Quarantined { surfaces, .. } => {
                    let surfaces: Vec<String> = surfaces.iter().map(ToString::to_string).collect();
                    self.emit(id, RolloutEvent::Quarantined { node: endpoint.node.clone(), surfaces });
                    quarantined.push(endpoint.node.clone());
                }
            }
        }

        // 2. Every capsule must exist before anything is planned: a missing artifact refuses the whole rollout.
        for digest in &request.capsules {
            match self.artifacts.available(digest).await {
                Ok(true) => {}
                Ok(false) => {
                    self.emit(
                        id,
                        RolloutEvent::PlanRefused {
                            reason: format!("capsule {digest} is missing from the artifact store"),
                        },
                    );
                    return RolloutOutcome { lanes: Vec::new(), quarantined, outcome: "refused".into() };
                }
                Err(error) => {
                    self.emit(id, RolloutEvent::PlanRefused { reason: format!("artifact store unreachable: {error}") });
                    return RolloutOutcome { lanes: Vec::new(), quarantined, outcome: "refused".into() };
                }
            }
        }

        // 3. Every capsule on every eligible node, with bounded fan-out, before anything is planned or stopped: after
        // the barrier a fetch is a protocol violation, and a node that cannot be staged (bad storage, identity changed)
        // is quarantined now, so the plan's lane size already accounts for it.
        let mut staged = Vec::with_capacity(eligible.len());
        for batch in eligible.chunks(request.fan_out.max(1)) {
            staged.extend(join_all(batch.iter().map(|endpoint| self.stage_node(request, endpoint))).await);
        }
        let mut still_eligible = Vec::new();
        for (endpoint, result) in eligible.into_iter().zip(staged) {
            match result {
                Ok(()) => still_eligible.push(endpoint),
                Err(error) => {
                    let surfaces = vec![format!("staging failed: {error}")];
                    self.emit(id, RolloutEvent::Quarantined { node: endpoint.node.clone(), surfaces });
                    repairs.retain(|(repaired, _)| repaired.node != endpoint.node);
                    quarantined.push(endpoint.node.clone());
                }
            }
        }
        let mut eligible = still_eligible;

        // 4. Authenticated repairs, one node at a time under a deployment dispatch hold (the fence), before the plan: a
        // node whose repair fails is quarantined now, so the plan's lane size accounts for it. A repair takes one node
        // out of service briefly, so none is attempted when that would break the floor.
        let repair_owner = format!("{DEPLOY_HOLD_PREFIX}{id}");
        let room = request.nodes.len().saturating_sub(quarantined.len()) > request.availability_floor;
        for (endpoint, repair) in &repairs {
            let node = endpoint.node.as_str();
            let outcome = if !room {
                Err("no room under the availability floor to take the node out for its repair".to_owned())
            } else if let Err(error) = self.hub_retrying(request, || self.hub.place_hold(node, &repair_owner)).await {
                Err(format!("could not fence the repair: {error}"))
            } else {
                let repaired = self.apply_repair(request, endpoint, repair).await;
                match self.hub_retrying(request, || self.hub.release_hold(node, &repair_owner)).await {
                    Ok(_) => repaired,
                    // The fence stays: the node is held either way, and a quarantine accounts for it.
                    Err(error) => repaired.and(Err(format!("repair fence not released: {error}"))),
                }
            };
            if let Err(reason) = outcome {
                self.emit(id, RolloutEvent::Quarantined { node: node.to_owned(), surfaces: vec![reason] });
                eligible.retain(|eligible| eligible.node != node);
                quarantined.push(node.to_owned());
            }
        }

        // 5. The route bundle the operator approved must be the one the hub publishes: it is frozen into the plan and
        // re-checked before every lane.
        match self.hub_retrying(request, || self.hub.route_bundle()).await {
            Ok(published) if published == request.route_digest => {}
            Ok(published) => {
                let reason =
                    format!("route bundle {published} is published, not the approved {}", request.route_digest);
                self.emit(id, RolloutEvent::PlanRefused { reason });
                return RolloutOutcome { lanes: Vec::new(), quarantined, outcome: "refused".into() };
            }
            Err(error) => {
                self.emit(id, RolloutEvent::PlanRefused { reason: format!("route bundle unreadable: {error}") });
                return RolloutOutcome { lanes: Vec::new(), quarantined, outcome: "refused".into() };
            }
        }

        // 6. Plan against the floor and the duration budget; refuse before any mutation when it does not fit.
        let input = PlanInput {
            nodes: eligible.iter().map(|endpoint| endpoint.node.clone()).collect(),
            healthy: request.nodes.len() - quarantined.len(),
            availability_floor: request.availability_floor,
            lane_size_max: request.lane_size_max,
            fan_out: request.fan_out,
            phases: request.phases,
            retry_budget_ms: request.backoff.worst_case_wait_ms() * 2,
            agent_ttl_ms: request.agent_ttl_ms,
            credential_remaining_ms: request.credential_remaining_ms,
            hold_lease_ms: request.hold_lease_ms,
        };
        let plan = match plan(&input) {
            Ok(plan) => plan,
            Err(error) => {
                self.emit(id, RolloutEvent::PlanRefused { reason: error.to_string() });
                return RolloutOutcome { lanes: Vec::new(), quarantined, outcome: "refused".into() };
            }
        };
        self.record(Record::PlanFrozen {
            rollout: id.to_owned(),
            revision: request.revision.clone(),
            generation: request.generation,
            route_digest: request.route_digest.clone(),
            lanes: plan.lanes.clone(),
            quarantined: quarantined.clone(),
        })
        .await;
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
        let quarantine_owner = format!("{QUARANTINE_HOLD_PREFIX}{id}");
        for node in &quarantined {
            let _ = self.hub_retrying(request, || self.hub.place_hold(node, &quarantine_owner)).await;
        }

        // 8. The epoch pins every member against expiry before the first stop.
        let members: Vec<String> = plan.lanes.iter().flatten().cloned().collect();
        let Ok(epoch) = self.hub_retrying(request, || self.hub.open_epoch(&members)).await else {
            self.emit(id, RolloutEvent::Terminal { outcome: "failed: the hub did not open the epoch".into() });
            return RolloutOutcome { lanes: Vec::new(), quarantined, outcome: "failed".into() };
        };
        self.record(Record::EpochOpened { rollout: id.to_owned(), epoch }).await;

        let adopted = Adopted {
            rollout: id.to_owned(),
            revision: request.revision.clone(),
            generation: request.generation,
            route_digest: request.route_digest.clone(),
            lanes: plan.lanes.clone(),
            epoch: Some(epoch),
            nodes: plan
                .lanes
                .iter()
                .flatten()
                .map(|node| (node.clone(), NodeMachine::new(node.clone())))
                .chain(quarantined.iter().map(|node| (node.clone(), NodeMachine::quarantined(node.clone()))))
                .collect(),
            in_doubt: Vec::new(),
            committed_lanes: BTreeMap::new(),
        };
        self.drive_lanes(request, adopted, attestation_keys).await
    }

    /// Applies one typed repair; `Err` names why it could not be applied.
    async fn apply_repair(&self, request: &RolloutRequest, endpoint: &Endpoint, repair: &Repair) -> Result<(), String> {
        let id = &request.rollout;
        let writes: Vec<(String, String)> = match repair {
            Repair::WriteMarker { revision, .. } => vec![(MARKER.to_owned(), format!("{revision}\n"))],
            Repair::RecreateRecoveryEnvHoldFirst => {
                // The hold is durable before the identity: first the hold alone, then the key beside it. The key comes
                // from the secrets store, never from the file being repaired.
                let key = self
                    .secrets
                    .attestation_key(&endpoint.node)
                    .await
                    .map_err(|error| format!("repair impossible: {error}"))?;
                vec![
                    (MAC_ENV.to_owned(), "MAC_STARTUP_CLEAR_HOLD=0\n".to_owned()),
                    (MAC_ENV.to_owned(), format!("MAC_ATTESTATION_KEY={}\nMAC_STARTUP_CLEAR_HOLD=0\n", key.expose())),
                ]
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

    /// A hub call with bounded retry.
    async fn hub_retrying<T, F>(
        &self,
        request: &RolloutRequest,
        mut call: impl FnMut() -> F,
    ) -> Result<T, crate::ports::HubError>
    where
        F: std::future::Future<Output = Result<T, crate::ports::HubError>>,
    {
        let mut attempt = 1;
        loop {
            match call().await {
                Ok(value) => return Ok(value),
                Err(error) => {
                    let failure = match error {
                        crate::ports::HubError::Transport(_) => AttemptFailure::Transient,
                        crate::ports::HubError::Rejected(_) => AttemptFailure::Permanent,
                    };
                    match request.backoff.after_failure(attempt, failure, self.jitter.draw()) {
                        RetryDecision::RetryAfter { delay_ms } => {
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
        if adopted.epoch.is_none() {
            let members: Vec<String> = adopted.lanes.iter().flatten().cloned().collect();
            if let Ok(epoch) = self.hub_retrying(&request, || self.hub.open_epoch(&members)).await {
                self.record(Record::EpochOpened { rollout: adopted.rollout.clone(), epoch }).await;
                adopted.epoch = Some(epoch);
            }
        }
        self.drive_lanes(&request, adopted, BTreeMap::new()).await
    }

    /// Runs the lanes one at a time, nodes of a lane concurrently.
    async fn drive_lanes(
        &self,
        request: &RolloutRequest,
        mut adopted: Adopted,
        attestation_keys: BTreeMap<String, Secret>,
    ) -> RolloutOutcome {
        let id = adopted.rollout.clone();
        let endpoints: BTreeMap<String, Endpoint> = request.nodes.iter().map(|e| (e.node.clone(), e.clone())).collect();
        let mut outcome_lanes = Vec::new();
        let mut stopped = false;
        let mut route_changed = false;
        for (index, lane) in adopted.lanes.clone().into_iter().enumerate() {
            if let Some(verdict) = adopted.committed_lanes.get(&index) {
                outcome_lanes.push((lane.clone(), verdict.clone()));
                continue;
            }
            // A lane a dead controller had begun (a step done or in doubt) is finished under the frozen bundle: leaving
            // it would strand held, stopped workers. Only a lane not yet begun is gated on the route bundle.
            let begun = lane.iter().any(|node| {
                let untouched =
                    matches!(adopted.nodes[node].state, NodeState::Pending(NodeStep::Hold) | NodeState::Quarantined);
                !untouched || adopted.in_doubt.iter().any(|(doubtful, _)| doubtful == node)
            });
            if !stopped && !route_changed && !begun {
                // Fail closed: a lane goes down only under the route bundle the plan froze.
                let published = self.hub_retrying(request, || self.hub.route_bundle()).await;
                let published = published.unwrap_or_else(|error| format!("unreadable ({error})"));
                if published != adopted.route_digest {
                    self.emit(&id, RolloutEvent::RouteChanged { frozen: adopted.route_digest.clone(), published });
                    route_changed = true;
                }
            }
            if stopped || (route_changed && !begun) {
                outcome_lanes.push((lane.clone(), LaneVerdict::Prior));
                continue;
            }
            let keys = &attestation_keys;
            let in_doubt = adopted.in_doubt.clone();
            let machines = join_all(lane.iter().map(|node| {
                let machine = adopted.nodes[node].clone();
                let doubt: Vec<NodeStep> = in_doubt.iter().filter(|(n, _)| n == node).map(|(_, step)| *step).collect();
                self.run_node(request, &endpoints[node], machine, index, keys.get(node).cloned(), doubt)
            }))
            .await;
            for machine in &machines {
                adopted.nodes.insert(machine.node.clone(), machine.clone());
            }
            let verdict = lane_verdict(&machines);
            self.record(Record::LaneCommitted { rollout: id.clone(), lane: index, verdict: verdict.clone() }).await;
            self.emit(
                &id,
                RolloutEvent::LaneCommitted {
                    lane: index as u64,
                    verdict: verdict_name(&verdict).into(),
                    nodes: lane.clone(),
                },
            );
            if verdict == LaneVerdict::Stuck {
                // A failed lane stays held; no further lane goes down while it is.
                stopped = true;
            }
            outcome_lanes.push((lane, verdict));
        }
        let all_successor = outcome_lanes.iter().all(|(_, verdict)| *verdict == LaneVerdict::Successor);
        let outcome = if all_successor {
            "successor"
        } else if stopped {
            "partial"
        } else {
            "converged"
        };
        if !stopped {
            if let Some(epoch) = adopted.epoch {
                let _ = self.hub_retrying(request, || self.hub.close_epoch(epoch)).await;
            }
            self.record(Record::Terminal { rollout: id.clone(), outcome: outcome.into() }).await;
        }
        self.emit(&id, RolloutEvent::Terminal { outcome: outcome.into() });
        let quarantined =
            adopted.nodes.values().filter(|m| m.state == NodeState::Quarantined).map(|m| m.node.clone()).collect();
        RolloutOutcome { lanes: outcome_lanes, quarantined, outcome: outcome.into() }
    }

    async fn stage_node(&self, request: &RolloutRequest, endpoint: &Endpoint) -> Result<(), SshError> {
        for digest in &request.capsules {
            let operation_id = format!("{}/{}/stage/{digest}", request.rollout, endpoint.node);
            let mut attempt = 1;
            loop {
                let op = SshRequest::StageArtifact { operation_id: operation_id.clone(), digest: digest.clone() };
                match self.ssh.run(endpoint, op).await {
                    Ok(_) => break,
                    Err(error) => {
                        match request.backoff.after_failure(attempt, failure_class(&error), self.jitter.draw()) {
                            RetryDecision::RetryAfter { delay_ms } => {
                                self.clock.sleep_ms(delay_ms).await;
                                attempt += 1;
                                // Staging is idempotent by digest: look before fetching again.
                                if self.observe(endpoint).await.is_ok_and(|report| report.staged.contains(digest)) {
                                    break;
                                }
                            }
                            RetryDecision::Exhausted | RetryDecision::Stop => return Err(error),
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// One node through its remaining steps. Every mutating step: journal the intent, run it, and on a failure
    /// re-observe the node (identity re-checked) before any re-attempt; a step whose effect is visible is done.
    async fn run_node(
        &self,
        request: &RolloutRequest,
        endpoint: &Endpoint,
        mut machine: NodeMachine,
        lane: usize,
        attestation_key: Option<Secret>,
        in_doubt: Vec<NodeStep>,
    ) -> NodeMachine {
        let id = request.rollout.as_str();
        let node = endpoint.node.as_str();
        let owner = format!("{DEPLOY_HOLD_PREFIX}{id}");
        let mut attestation_key = attestation_key;
        while let Some(step) = machine.poll_step() {
            let op_id = operation_id(id, node, step);
            let doubtful = in_doubt.contains(&step);
            if !doubtful {
                self.record(Record::Intent {
                    rollout: id.to_owned(),
                    node: node.to_owned(),
                    step,
                    operation_id: op_id.clone(),
                })
                .await;
            }
            self.emit(
                id,
                RolloutEvent::StepStarted { node: node.to_owned(), step: step.as_str().into(), lane: lane as u64 },
            );
            let mut attempt = 1;
            let mut look_first = doubtful;
            let result: Result<(), String> = loop {
                if look_first {
                    match self.observe(endpoint).await {
                        Ok(report) => {
                            if attestation_key.is_none() {
                                attestation_key = env_value(&report, "MAC_ATTESTATION_KEY").map(Secret::new);
                            }
                            if already_done(step, request, &report) {
                                break Ok(());
                            }
                        }
                        Err(error) => {
                            if self.wait_to_retry(request, node, step, &mut attempt, &error).await {
                                continue;
                            }
                            break Err(error.to_string());
                        }
                    }
                }
                let attempt_result =
                    self.run_step(request, endpoint, step, &op_id, &owner, attestation_key.as_ref()).await;
                match attempt_result {
                    Ok(()) => break Ok(()),
                    Err(StepError::Ssh(error)) => {
                        if !self.wait_to_retry(request, node, step, &mut attempt, &error).await {
                            break Err(error.to_string());
                        }
                        // Before the replay: re-observe (identity re-checked), and skip it if the effect is there.
                        look_first = true;
                    }
                    Err(StepError::Other(reason)) => break Err(reason),
                }
            };
            match result {
                Ok(()) => {
                    self.record(Record::Completed {
                        rollout: id.to_owned(),
                        node: node.to_owned(),
                        step,
                        operation_id: op_id,
                    })
                    .await;
                    self.emit(
                        id,
                        RolloutEvent::StepDone { node: node.to_owned(), step: step.as_str().into(), lane: lane as u64 },
                    );
                    machine.handle_done(step);
                }
                Err(reason) => {
                    self.record(Record::NodeFailed {
                        rollout: id.to_owned(),
                        node: node.to_owned(),
                        step,
                        reason: reason.clone(),
                    })
                    .await;
                    self.emit(
                        id,
                        RolloutEvent::NodeFailed {
                            node: node.to_owned(),
                            step: step.as_str().into(),
                            error: reason.clone(),
                            endpoint: format!("{}@{}", endpoint.node, endpoint.host_key),
                            replay: format!(
                                "re-run the rollout: the controller adopts journal {id} at step {}",
                                step.as_str()
                            ),
                        },
                    );
                    machine.handle_failed(step, reason);
                }
            }
        }
        machine
    }

    async fn run_step(
        &self,
        request: &RolloutRequest,
        endpoint: &Endpoint,
        step: NodeStep,
        op_id: &str,
        owner: &str,
        attestation_key: Option<&Secret>,
    ) -> Result<(), StepError> {
        let node = endpoint.node.as_str();
        match step {
            NodeStep::Hold => self.hub.place_hold(node, owner).await.map_err(hub_error),
            NodeStep::Release => self.hub.release_hold(node, owner).await.map(|_| ()).map_err(hub_error),
            NodeStep::Quiesce => self
                .ssh
                .run(endpoint, SshRequest::StopService { operation_id: op_id.to_owned() })
                .await
                .map(|_| ())
                .map_err(Into::into),
            NodeStep::Install => {
                let op = SshRequest::RunInstaller {
                    operation_id: op_id.to_owned(),
                    revision: request.revision.clone(),
                    generation: request.generation,
                    required_digests: request.capsules.clone(),
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
                let env = render_env(node, &request.hub_url, &request.revision, request.generation, key.expose());
                let writes = [
                    (format!("{op_id}/env"), MAC_ENV, env),
                    (format!("{op_id}/marker"), MARKER, format!("{}\n", request.revision)),
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
                loop {
                    if let Ok(snapshot) = self.hub.read_heartbeats().await {
                        let proved = snapshot.instances.iter().any(|row| {
                            row.instance == node
                                && row.registered
                                && row.revision.as_deref() == Some(request.revision.as_str())
                        });
                        if proved {
                            return Ok(());
                        }
                    }
                    if self.clock.monotonic_ms() >= deadline {
                        return Err(StepError::Other(format!(
                            "no heartbeat with revision {} within {} ms",
                            request.revision, request.phases.prove_ms
                        )));
                    }
                    self.clock.sleep_ms(request.prove_poll_ms).await;
                }
            }
        }
    }

    /// The legacy controller of the incident: serial, all-fleet, no preflight, no epoch, no retry.
    async fn run_legacy(&self, request: &RolloutRequest) -> RolloutOutcome {
        let id = request.rollout.as_str();
        let owner = format!("{DEPLOY_HOLD_PREFIX}{id}");
        let all: Vec<String> = request.nodes.iter().map(|e| e.node.clone()).collect();
        self.record(Record::PlanFrozen {
            rollout: id.to_owned(),
            revision: request.revision.clone(),
            generation: request.generation,
            route_digest: request.route_digest.clone(),
            lanes: vec![all.clone()],
            quarantined: Vec::new(),
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
                    node: node.into(),
                    step: NodeStep::Quiesce,
                    operation_id: operation_id(id, node, NodeStep::Quiesce),
                })
                .await;
                Ok(())
            }
            .await;
            match result {
                Ok(()) => quiesced.push(endpoint),
                Err(reason) => {
                    self.legacy_node_failed(id, endpoint, "quiesce", reason.clone());
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
                    self.legacy_node_failed(id, &request.hub_endpoint, "recover", error.to_string());
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
                self.legacy_node_failed(id, endpoint, "install", error.to_string());
                return self.legacy_failed(id, all);
            }
            let report = self.observe(endpoint).await.ok();
            let key = report.as_ref().and_then(|r| env_value(r, "MAC_ATTESTATION_KEY")).map(Secret::new);
            let machine = self.run_node(&no_retry, endpoint, machine, 0, key, Vec::new()).await;
            if machine.state != NodeState::Succeeded {
                return self.legacy_failed(id, all);
            }
        }
        self.record(Record::Terminal { rollout: id.to_owned(), outcome: "successor".into() }).await;
        self.emit(id, RolloutEvent::Terminal { outcome: "successor".into() });
        RolloutOutcome {
            lanes: vec![(all, LaneVerdict::Successor)],
            quarantined: Vec::new(),
            outcome: "successor".into(),
        }
    }
}

fn verdict_name(verdict: &LaneVerdict) -> &'static str {
    match verdict {
        LaneVerdict::Successor => "successor",
        LaneVerdict::Prior => "prior",
        LaneVerdict::Stuck => "stuck",
    }
}

enum StepError {
    Ssh(SshError),
    Other(String),
}

impl From<SshError> for StepError {
    fn from(error: SshError) -> Self {
        StepError::Ssh(error)
    }
}

fn hub_error(error: crate::ports::HubError) -> StepError {
    match error {
        crate::ports::HubError::Transport(transport) => StepError::Ssh(SshError::Transport(transport)),
        crate::ports::HubError::Rejected(reason) => StepError::Other(reason),
    }
}
