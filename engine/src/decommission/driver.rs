//! The decommission workflow's driver: the 11 stages of section 5 run against the `Fleet` (inventory, allocations,
//! node tasks), `MaasApi`, `SiteSecrets`, `Clock`, `Journal` and `Signals` ports. Every failure is classified into one
//! of the matrix's classes and handed to [`crate::workflow::decide`]; the driver performs what it says.

use crate::decommission::record::{DecommissionHistory, DecommissionRecord};
use crate::matrix::{Compensation, DecommissionStage, FailureClass, NodeState, Stage, WorkflowState};
use crate::ports::fleet::{Fleet, FleetError, NodeTask, TaskOutcome};
use crate::ports::site::{MaasApi, MaasError, MachineStatus, PowerState, SiteSecrets};
use crate::ports::{Clock, Journal, Signal, Signals, WorkflowEvent};
use crate::workflow::after_failure::{AfterFailure, Next};
use crate::workflow::failure::{BmcAnswer, StageFailure};
use crate::workflow::{ContinueReason, DecideContext, Observed, RetryPolicy, SitePolicy, decide};

/// One decommission workflow to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecommissionRequest {
    /// The workflow id (stable across controller restarts and resumes).
    pub workflow: String,
    /// The node's name in the fleet (its inventory record and its agent).
    pub node: String,
    /// The machine's hostname in MAAS.
    pub hostname: String,
    /// How often a waiting stage reads MAAS.
    pub poll_ms: u64,
    pub retry: RetryPolicy,
    pub site_policy: SitePolicy,
}

/// How a workflow run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecommissionOutcome {
    pub workflow_state: WorkflowState,
    pub node_state: NodeState,
    /// The stage it stopped at (none when it completed).
    pub stage: Option<DecommissionStage>,
    pub class: Option<FailureClass>,
    pub evidence: Vec<String>,
    /// What a completed workflow left for a person (a retained MAAS record).
    pub follow_ups: Vec<String>,
}

/// The ports the driver needs.
pub struct DecommissionPorts<'a, C, M, K, F, J, G> {
    pub clock: &'a C,
    pub maas: &'a M,
    pub secrets: &'a K,
    pub fleet: &'a F,
    pub journal: &'a J,
    pub signals: &'a G,
}

/// Bounds of the waits (our figures; section 6 gives none for decommission): a release with erase takes the wipe
/// plus the release, and MAAS's own 5-minute RELEASING timeout comes first.
const RELEASE_WAIT_MS: u64 = 40 * 60_000;
/// Reads of the power state after a power-off before it counts as never converging.
const POWER_OFF_CHECKS: u32 = 6;
/// Consecutive failed reads of MAAS a waiting stage tolerates before it calls the region unreachable.
const READ_FAILURES_MAX: u32 = 4;

/// How decommission reads a MAAS 503 that names the BMC: as the BMC's failure (its power-off and power query ask
/// the BMC while the call is open).
const BMC: BmcAnswer = BmcAnswer::PowerFailure;

/// What a run has learnt so far.
#[derive(Default)]
struct RunState {
    node_state: Option<NodeState>,
    system_id: Option<String>,
    /// MAAS has no machine for the node (deleted earlier, by this workflow or a person).
    maas_gone: bool,
    /// The no-erase fallback of `release_maas_node` was taken.
    fallback_taken: bool,
    adopted: bool,
    follow_ups: Vec<String>,
    attempts: std::collections::BTreeMap<DecommissionStage, u32>,
}

impl RunState {
    fn node_state(&self) -> NodeState {
        self.node_state.unwrap_or(NodeState::Active)
    }
}

impl<C, M, K, F, J, G> DecommissionPorts<'_, C, M, K, F, J, G>
where
    C: Clock,
    M: MaasApi,
    K: SiteSecrets,
    F: Fleet,
    J: Journal,
    G: Signals,
{
    /// Runs the workflow (the next run of it, when the journal shows earlier ones) to completion or to a stop.
    pub async fn run_decommission(&self, request: &DecommissionRequest) -> DecommissionOutcome {
        self.run_decommission_from(request, None).await
    }

    /// Runs the workflow as [`Self::run_decommission`] does, entering the run at `start_at` (an operator's `resume`
    /// or `retry_stage`, `crate::recovery::Authorized::restart_at`): the stages before it are neither checkpointed
    /// nor run, except `load_site_config`, a read the later stages need (the machine's system id).
    pub async fn run_decommission_from(
        &self,
        request: &DecommissionRequest,
        start_at: Option<DecommissionStage>,
    ) -> DecommissionOutcome {
        let workflow = request.workflow.as_str();
        let lines =
            self.journal.replay().await.unwrap_or_else(|error| panic!("decommission journal unreadable: {error}"));
        let history = DecommissionHistory::of(workflow, lines.iter().map(String::as_str))
            .unwrap_or_else(|error| panic!("{error}"));
        if let Some(workflow_state) = history.completed {
            return DecommissionOutcome {
                workflow_state,
                node_state: NodeState::Deleted,
                stage: None,
                class: None,
                evidence: Vec::new(),
                follow_ups: Vec::new(),
            };
        }
        // A workflow frozen for manual intervention, or cancelled, is not acted on (seed 000, section 2).
        if let Some(why) = halted(workflow, &lines) {
            return halted_outcome(why, history.last_stage);
        }
        let run = history.runs + 1;
        self.record(DecommissionRecord::RunStarted { workflow: workflow.to_owned(), run }).await;
        let mut state = RunState::default();
        let mut index = 0;
        // After a controller death the run resumes at the stage the dead one had reached: the stages before it are
        // done, and the node tasks among them cannot run again once the machine is released (its agent is gone).
        // `load_site_config` only reads, and the later stages need the machine it finds, so it always runs.
        let resume_at = history
            .interrupted_at
            .and_then(|stage| DecommissionStage::ALL.iter().position(|s| *s == stage))
            .unwrap_or(0);
        if resume_at > 0 {
            let value = format!("resumed at {} after its controller died", DecommissionStage::ALL[resume_at].as_str());
            self.emit(workflow, WorkflowEvent::Observed { what: "journal".to_owned(), value });
        }
        while let Some(&stage) = DecommissionStage::ALL.get(index) {
            // A freeze set while the run is under way stops it before its next stage starts.
            let lines =
                self.journal.replay().await.unwrap_or_else(|error| panic!("decommission journal unreadable: {error}"));
            if let Some(why) = halted(workflow, &lines) {
                return halted_outcome(why, Some(stage));
            }
            let before_start = start_at.is_some_and(|from| (stage as usize) < (from as usize));
            if (before_start || index < resume_at) && stage != DecommissionStage::LoadSiteConfig {
                index += 1;
                continue;
            }
            let attempt = {
                let attempts = state.attempts.entry(stage).or_insert(0);
                *attempts += 1;
                *attempts
            };
            self.record(DecommissionRecord::Checkpoint { workflow: workflow.to_owned(), run, stage, attempt }).await;
            self.emit(workflow, WorkflowEvent::StageStarted { stage: stage.as_str().into(), attempt: attempt.into() });
            let failure = match self.run_stage(request, stage, &mut state).await {
                Ok(()) => {
                    let adopted = std::mem::take(&mut state.adopted);
                    self.emit(workflow, WorkflowEvent::StageDone { stage: stage.as_str().into(), adopted });
                    index += 1;
                    continue;
                }
                Err(failure) => failure,
            };
            self.emit(
                workflow,
                WorkflowEvent::StageFailed {
                    stage: stage.as_str().into(),
                    class: failure.class.as_str().into(),
                    error: failure.error.clone(),
                },
            );
            match self.decide_after(request, &history, &state, stage, &failure, attempt).await {
                Next::Retry { attempt_next, delay_ms, compensation, .. } => {
                    if let Some(compensation) = compensation {
                        self.compensate(request, &mut state, compensation).await;
                    }
                    let event = WorkflowEvent::Retrying {
                        stage: stage.as_str().into(),
                        attempt: attempt_next.into(),
                        delay_ms,
                    };
                    self.emit(workflow, event);
                    self.clock.sleep_ms(delay_ms).await;
                }
                Next::Continue { reason } => {
                    let adopted = reason == ContinueReason::AdoptObservedState;
                    self.emit(workflow, WorkflowEvent::StageDone { stage: stage.as_str().into(), adopted });
                    index += 1;
                }
                Next::Stop(stop) => {
                    if let Some(compensation) = stop.compensation {
                        self.compensate(request, &mut state, compensation).await;
                    }
                    if stop.workflow_state == WorkflowState::CompletedWithFollowUpRecord {
                        // `remove_maas_record` "retain MAAS record ... if delete unsafe": done, with the record.
                        state.follow_ups.push(format!("{}: {}", stage.as_str(), failure.error));
                        return self.complete(request, run, &mut state).await;
                    }
                    // A decommission's evidence is its error: its stages gather none beyond it.
                    let evidence = vec![failure.error.clone()];
                    let record = DecommissionRecord::Stopped {
                        workflow: workflow.to_owned(),
                        run,
                        stage,
                        class: failure.class,
                        workflow_state: stop.workflow_state,
                    };
                    self.record(record).await;
                    self.emit(
                        workflow,
                        WorkflowEvent::Stopped {
                            stage: stage.as_str().into(),
                            class: failure.class.as_str().into(),
                            workflow_state: stop.workflow_state.as_str().into(),
                            node_state: stop.node_state.as_str().into(),
                            evidence: evidence.clone(),
                        },
                    );
                    return DecommissionOutcome {
                        workflow_state: stop.workflow_state,
                        node_state: stop.node_state,
                        stage: Some(stage),
                        class: Some(failure.class),
                        evidence,
                        follow_ups: state.follow_ups,
                    };
                }
                Next::Observe => unreachable!("decide_after makes the observations"),
            }
        }
        self.complete(request, run, &mut state).await
    }

    async fn complete(&self, request: &DecommissionRequest, run: u32, state: &mut RunState) -> DecommissionOutcome {
        let workflow_state = if state.follow_ups.is_empty() {
            WorkflowState::Completed
        } else {
            WorkflowState::CompletedWithFollowUpRecord
        };
        let workflow = request.workflow.clone();
        self.record(DecommissionRecord::Completed { workflow: workflow.clone(), run, workflow_state }).await;
        for follow_up in &state.follow_ups {
            self.emit(&workflow, WorkflowEvent::Observed { what: "follow_up".into(), value: follow_up.clone() });
        }
        let system_id = state.system_id.clone().unwrap_or_default();
        self.emit(&workflow, WorkflowEvent::Completed { system_id });
        DecommissionOutcome {
            workflow_state,
            node_state: NodeState::Deleted,
            stage: None,
            class: None,
            evidence: Vec::new(),
            follow_ups: std::mem::take(&mut state.follow_ups),
        }
    }

    fn emit(&self, workflow: &str, event: WorkflowEvent) {
        self.signals.emit(Signal::Decommission { workflow: workflow.to_owned(), event });
    }

    async fn record(&self, record: DecommissionRecord) {
        if let Err(error) = self.journal.append(&record.encode()).await {
            panic!("decommission journal write failed: {error}");
        }
    }

    /// The decision after a failed attempt, with as many fresh observations as it asks for.
    async fn decide_after(
        &self,
        request: &DecommissionRequest,
        history: &DecommissionHistory,
        state: &RunState,
        stage: DecommissionStage,
        failure: &StageFailure,
        attempt: u32,
    ) -> Next {
        let mut ctx = DecideContext::new(state.node_state());
        ctx.retry = request.retry;
        ctx.policy = request.site_policy;
        ctx.failed_runs = history.failed_retryable_runs;
        ctx.fallback_taken = state.fallback_taken;
        let mut after = AfterFailure::new(ctx, |ctx: &DecideContext| {
            decide(Stage::Decommission(stage), failure.class, attempt, ctx)
        });
        loop {
            match after.poll() {
                Next::Observe => after.handle_observed(self.observe(request, state, stage).await),
                next => return next,
            }
        }
    }

    /// A fresh read of the node's inventory record or its machine, judged against what `stage` expects.
    async fn observe(&self, request: &DecommissionRequest, state: &RunState, stage: DecommissionStage) -> Observed {
        use DecommissionStage as D;
        match stage {
            D::DisableNode
            | D::ForceReleaseAllocations
            | D::DrainNode
            | D::CleanupStorageScrubGpuValidateCleanNode
            | D::RetireGpuaasNode
            | D::RemoveGpuaasNodeRecord => {
                let Ok(record) = self.fleet.record(&request.node).await else { return Observed::Stale };
                let Some(record) = record else {
                    return if stage == D::RemoveGpuaasNodeRecord {
                        Observed::SatisfiesCheckpoint
                    } else {
                        Observed::Conflicting
                    };
                };
                match (stage, record.state) {
                    // Someone put the node back in service under the workflow: ownership is unclear.
                    (_, NodeState::Active | NodeState::Enrolling) if stage != D::DisableNode => Observed::Conflicting,
                    (D::DisableNode, NodeState::Quarantined | NodeState::Retired) => Observed::SatisfiesCheckpoint,
                    (D::ForceReleaseAllocations, _) if record.allocations.is_empty() => Observed::SatisfiesCheckpoint,
                    (D::RetireGpuaasNode, NodeState::Retired) => Observed::SatisfiesCheckpoint,
                    // Retired by this workflow, then moved back by someone else.
                    (D::RemoveGpuaasNodeRecord, NodeState::Quarantined) => Observed::Conflicting,
                    _ => Observed::AsExpected,
                }
            }
            D::ReleaseMaasNode | D::PowerOffMaasNode | D::RemoveMaasRecord => {
                let Some(system_id) = &state.system_id else { return Observed::AsExpected };
                let machine = match self.maas.machine(system_id).await {
                    Ok(machine) => machine,
                    Err(MaasError::Http { status: 404, .. }) if stage == D::RemoveMaasRecord => {
                        return Observed::SatisfiesCheckpoint;
                    }
                    Err(MaasError::Http { status: 404, .. }) => return Observed::Conflicting,
                    Err(_) => return Observed::Stale,
                };
                match (stage, &machine.status) {
                    (D::ReleaseMaasNode, MachineStatus::Ready) => Observed::SatisfiesCheckpoint,
                    (_, status) if !releasable_or_released(status) => Observed::Conflicting,
                    (D::RemoveMaasRecord, status) if *status != MachineStatus::Ready => Observed::Conflicting,
                    _ => Observed::AsExpected,
                }
            }
            D::LoadSiteConfig | D::CleanupSecrets => Observed::AsExpected,
        }
    }

    /// Runs a compensation of section 5.
    async fn compensate(&self, request: &DecommissionRequest, state: &mut RunState, compensation: Compensation) {
        use crate::matrix::Compensation as K;
        match compensation {
            // The node must take no work: it is quarantined (the disable already did it; a retry is idempotent).
            K::QuarantineOnFailedValidation => {
                let _ = self.fleet.transition(&request.node, NodeState::Active, NodeState::Quarantined).await;
            }
            // Abort an erase in flight, mark a broken machine fixed; the next attempt releases without erase.
            K::AbortMarkFixedNoEraseRelease => {
                if let Some(system_id) = state.system_id.clone()
                    && let Ok(machine) = self.maas.machine(&system_id).await
                {
                    let _ = match machine.status {
                        MachineStatus::DiskErasing => self.maas.abort(&system_id).await.map(|_| ()),
                        MachineStatus::Broken => self.maas.mark_fixed(&system_id).await.map(|_| ()),
                        _ => Ok(()),
                    };
                }
                state.fallback_taken = true;
            }
            // An uninstall that failed leaves the record retired, never half-removed.
            K::RevertToRetiredOnUninstallFailure => {
                let _ = self.fleet.transition(&request.node, NodeState::Quarantined, NodeState::Retired).await;
            }
            K::UnlinkRelinkInterface
            | K::DeletePartialNodeRow
            | K::ReleaseToReadyIfDeployStarted
            | K::ReleaseToReady
            | K::AbortReleaseToCleanDeployableState => {}
        }
    }

    async fn run_stage(
        &self,
        request: &DecommissionRequest,
        stage: DecommissionStage,
        state: &mut RunState,
    ) -> Result<(), StageFailure> {
        use DecommissionStage as D;
        let node = request.node.as_str();
        let operation_id = format!("{}:{}:{}", request.workflow, stage.as_str(), state.attempts[&stage]);
        match stage {
            D::DisableNode => {
                let record = self.fleet.record(node).await.map_err(|error| StageFailure::fleet(&error))?;
                let Some(record) = record else {
                    return Err(StageFailure::new(
                        FailureClass::StateAmbiguity,
                        format!("no inventory record for {node}"),
                    ));
                };
                state.node_state = Some(record.state);
                match record.state {
                    NodeState::Quarantined | NodeState::Retired => state.adopted = true,
                    _ => {
                        self.fleet
                            .transition(node, record.state, NodeState::Quarantined)
                            .await
                            .map_err(|error| StageFailure::fleet(&error))?;
                        state.node_state = Some(NodeState::Quarantined);
                    }
                }
                Ok(())
            }
            D::ForceReleaseAllocations => {
                let remaining =
                    self.fleet.release_allocations(node, true).await.map_err(|error| StageFailure::fleet(&error))?;
                if remaining.is_empty() {
                    return Ok(());
                }
                Err(StageFailure::new(
                    FailureClass::UpstreamTransient,
                    format!("allocations remain attached to {node}: {}", remaining.join(", ")),
                ))
            }
            D::DrainNode => self.task(node, NodeTask::Drain, &operation_id, FailureClass::AgentEnrollmentFailure).await,
            D::CleanupStorageScrubGpuValidateCleanNode => {
                let unreachable = FailureClass::UpstreamTransient;
                self.task(node, NodeTask::CleanupStorage, &operation_id, unreachable).await?;
                self.task(node, NodeTask::ScrubGpu, &operation_id, unreachable).await?;
                self.task(node, NodeTask::ValidateClean, &operation_id, unreachable).await
            }
            D::LoadSiteConfig => {
                // A run that resumes past the inventory stages (after a controller death, or at an operator's
                // stage) learns the node's state from the inventory, not from stages it did not run.
                if state.node_state.is_none() {
                    let record = self.fleet.record(node).await.map_err(|error| StageFailure::fleet(&error))?;
                    state.node_state = Some(record.map_or(NodeState::Deleted, |record| record.state));
                }
                let config = self.secrets.site_config().await.map_err(|error| StageFailure::secrets(&error))?;
                if !config.enabled {
                    return Err(StageFailure::new(FailureClass::InputConfigError, "the site is disabled"));
                }
                let capabilities =
                    self.secrets.node_secrets_capabilities().await.map_err(|error| StageFailure::secrets(&error))?;
                if !capabilities.iter().any(|capability| capability == "delete") {
                    return Err(StageFailure::new(
                        FailureClass::SiteCapabilityMissing,
                        format!("the secrets policy grants {} on node secrets, not delete", capabilities.join(", ")),
                    ));
                }
                let machines = self.maas.machines().await.map_err(|error| StageFailure::maas(&error, BMC))?;
                match machines.iter().find(|machine| machine.hostname == request.hostname) {
                    Some(machine) => state.system_id = Some(machine.system_id.clone()),
                    None => state.maas_gone = true,
                }
                Ok(())
            }
            D::ReleaseMaasNode => self.release(request, state).await,
            D::PowerOffMaasNode => self.power_off(request, state).await,
            D::RetireGpuaasNode => {
                let record = self.fleet.record(node).await.map_err(|error| StageFailure::fleet(&error))?;
                match record.map(|record| record.state) {
                    Some(NodeState::Retired) => state.adopted = true,
                    Some(NodeState::Quarantined) => self
                        .fleet
                        .transition(node, NodeState::Quarantined, NodeState::Retired)
                        .await
                        .map_err(|error| StageFailure::fleet(&error))?,
                    Some(other) => {
                        return Err(StageFailure::new(
                            FailureClass::StateAmbiguity,
                            format!("{node} is {} in the inventory, not quarantined", other.as_str()),
                        ));
                    }
                    None => {
                        return Err(StageFailure::new(
                            FailureClass::StateAmbiguity,
                            format!("no inventory record for {node}"),
                        ));
                    }
                }
                state.node_state = Some(NodeState::Retired);
                Ok(())
            }
            D::RemoveGpuaasNodeRecord => {
                let record = self.fleet.record(node).await.map_err(|error| StageFailure::fleet(&error))?;
                let Some(record) = record else {
                    state.adopted = true;
                    state.node_state = Some(NodeState::Deleted);
                    return Ok(());
                };
                if record.agent_installed {
                    self.task(node, NodeTask::Uninstall, &operation_id, FailureClass::AgentEnrollmentFailure).await?;
                }
                self.fleet.remove_record(node).await.map_err(|error| StageFailure::fleet(&error))?;
                state.node_state = Some(NodeState::Deleted);
                Ok(())
            }
            D::CleanupSecrets => {
                self.secrets.delete_node_secrets(node).await.map_err(|error| StageFailure::secrets(&error))?;
                Ok(())
            }
            D::RemoveMaasRecord => {
                let Some(system_id) = state.system_id.clone().filter(|_| !state.maas_gone) else {
                    state.adopted = true;
                    return Ok(());
                };
                if !request.site_policy.maas_delete_required {
                    state
                        .follow_ups
                        .push(format!("MAAS record {system_id} of {} retained by policy", request.hostname));
                    return Ok(());
                }
                // Refresh before the irreversible delete: only a machine this workflow released goes.
                match self.maas.machine(&system_id).await {
                    Ok(machine) if machine.status == MachineStatus::Ready => {}
                    Ok(machine) => {
                        return Err(StageFailure::new(
                            FailureClass::StateAmbiguity,
                            format!("machine {system_id} is {}, not Ready: not deleting it", machine.status.name()),
                        ));
                    }
                    Err(MaasError::Http { status: 404, .. }) => {
                        state.adopted = true;
                        return Ok(());
                    }
                    Err(error) => return Err(StageFailure::maas(&error, BMC)),
                }
                self.maas.delete_machine(&system_id).await.map_err(|error| StageFailure::maas(&error, BMC))
            }
        }
    }

    /// Runs one node task; `unreachable` is the class an unreachable agent means at this stage.
    async fn task(
        &self,
        node: &str,
        task: NodeTask,
        operation_id: &str,
        unreachable: FailureClass,
    ) -> Result<(), StageFailure> {
        let operation_id = format!("{operation_id}:{}", task.as_str());
        match self.fleet.run_task(node, task, &operation_id).await {
            Ok(TaskOutcome::Done) => Ok(()),
            Ok(TaskOutcome::Residue(what)) => Err(StageFailure::new(
                FailureClass::HardwareMismatch,
                format!("{} found residue on {node}: {what}", task.as_str()),
            )),
            Ok(TaskOutcome::Failed(error)) => Err(StageFailure::new(
                if task == NodeTask::Uninstall { FailureClass::AgentEnrollmentFailure } else { unreachable },
                format!("{} failed on {node}: {error}", task.as_str()),
            )),
            Err(FleetError::AgentUnreachable(error)) => Err(StageFailure::new(
                unreachable,
                format!("{} on {node}: node agent unreachable: {error}", task.as_str()),
            )),
            Err(error) => Err(StageFailure::fleet(&error)),
        }
    }

    /// `release_maas_node`: a fresh read, a release (with erase unless the fallback was taken), and the wait for
    /// Ready.
    async fn release(&self, request: &DecommissionRequest, state: &mut RunState) -> Result<(), StageFailure> {
        if state.maas_gone {
            state.adopted = true;
            return Ok(());
        }
        let system_id = state
            .system_id
            .clone()
            .ok_or_else(|| StageFailure::new(FailureClass::StateAmbiguity, "no MAAS machine is known for the node"))?;
        let machine = self.maas.machine(&system_id).await.map_err(|error| StageFailure::maas(&error, BMC))?;
        match &machine.status {
            MachineStatus::Ready => {
                state.adopted = true;
                return Ok(());
            }
            // Already on its way (an earlier attempt's, or a dead controller's): wait for it.
            MachineStatus::DiskErasing | MachineStatus::Releasing => {}
            // The first attempt of this run finds an earlier run's release failed (a dead controller's, or one a
            // person resumed): that failure is this attempt's, and the matrix decides whether to release again.
            MachineStatus::FailedDiskErasing | MachineStatus::FailedReleasing | MachineStatus::Broken
                if state.attempts.get(&DecommissionStage::ReleaseMaasNode) == Some(&1) =>
            {
                let class = if machine.status == MachineStatus::FailedReleasing {
                    FailureClass::UpstreamTransient
                } else {
                    FailureClass::DeployCloudInitFailure
                };
                return Err(StageFailure::new(
                    class,
                    format!(
                        "an earlier release of {system_id} failed: {} ({})",
                        machine.status.name(),
                        machine.status_message
                    ),
                ));
            }
            status if releasable_or_released(status) => {
                let erase = !state.fallback_taken;
                self.maas.release(&system_id, erase).await.map_err(|error| StageFailure::maas(&error, BMC))?;
            }
            status => {
                return Err(StageFailure::new(
                    FailureClass::StateAmbiguity,
                    format!("machine {system_id} is {}: not this workflow's to release", status.name()),
                ));
            }
        }
        let started_ms = self.clock.monotonic_ms();
        let mut read_failures = 0;
        loop {
            self.clock.sleep_ms(request.poll_ms).await;
            match self.maas.machine(&system_id).await {
                Ok(machine) => {
                    read_failures = 0;
                    match machine.status {
                        MachineStatus::Ready => return Ok(()),
                        MachineStatus::FailedDiskErasing | MachineStatus::Broken => {
                            return Err(StageFailure::new(
                                FailureClass::DeployCloudInitFailure,
                                format!("machine {system_id} is {}: {}", machine.status.name(), machine.status_message),
                            ));
                        }
                        MachineStatus::DiskErasing | MachineStatus::Releasing => {}
                        // MAAS gave up on the release (the power never read off within its timeout): the bounded
                        // retries release again; past them the machine "cannot reach Ready" and a person decides.
                        MachineStatus::FailedReleasing => {
                            return Err(StageFailure::new(
                                FailureClass::UpstreamTransient,
                                format!("MAAS could not finish releasing {system_id}: {}", machine.status_message),
                            ));
                        }
                        status => {
                            return Err(StageFailure::new(
                                FailureClass::StateAmbiguity,
                                format!("machine {system_id} went {} while releasing", status.name()),
                            ));
                        }
                    }
                }
                Err(MaasError::Http { status: 404, .. }) => {
                    return Err(StageFailure::new(
                        FailureClass::StateAmbiguity,
                        format!("machine {system_id} disappeared while releasing"),
                    ));
                }
                Err(error) => {
                    read_failures += 1;
                    if read_failures >= READ_FAILURES_MAX {
                        return Err(StageFailure::maas(&error, BMC));
                    }
                }
            }
            if self.clock.monotonic_ms().saturating_sub(started_ms) >= RELEASE_WAIT_MS {
                return Err(StageFailure::new(
                    FailureClass::UpstreamTransient,
                    format!("machine {system_id} did not reach Ready within {} min", RELEASE_WAIT_MS / 60_000),
                ));
            }
        }
    }

    /// `power_off_maas_node`: a fresh read of the power, a power-off when on, and checks until it reads off.
    async fn power_off(&self, request: &DecommissionRequest, state: &mut RunState) -> Result<(), StageFailure> {
        let Some(system_id) = state.system_id.clone().filter(|_| !state.maas_gone) else {
            state.adopted = true;
            return Ok(());
        };
        if self.maas.power_state(&system_id).await.map_err(|error| StageFailure::maas(&error, BMC))? == PowerState::Off
        {
            state.adopted = true;
            return Ok(());
        }
        self.maas.power_off(&system_id).await.map_err(|error| StageFailure::maas(&error, BMC))?;
        let mut last = PowerState::Unknown;
        for _ in 0..POWER_OFF_CHECKS {
            self.clock.sleep_ms(request.poll_ms).await;
            match self.maas.power_state(&system_id).await {
                Ok(PowerState::Off) => return Ok(()),
                Ok(power) => last = power,
                Err(error) => return Err(StageFailure::maas(&error, BMC)),
            }
        }
        Err(StageFailure::new(
            FailureClass::BmcPowerFailure,
            format!("power-off of {system_id} never converged: power still {last:?} after {POWER_OFF_CHECKS} checks"),
        ))
    }
}

/// Statuses a decommission may release from, or has already released to.
fn releasable_or_released(status: &MachineStatus) -> bool {
    matches!(
        status,
        MachineStatus::Ready
            | MachineStatus::Allocated
            | MachineStatus::Deploying
            | MachineStatus::Deployed
            | MachineStatus::FailedDeployment
            | MachineStatus::Broken
            | MachineStatus::DiskErasing
            | MachineStatus::FailedDiskErasing
            | MachineStatus::FailedReleasing
            | MachineStatus::Releasing
    )
}

/// Why the journal forbids acting on `workflow` (frozen or cancelled), if it does.
fn halted(workflow: &str, lines: &[String]) -> Option<String> {
    crate::recovery::halted(workflow, lines.iter().map(String::as_str)).unwrap_or_else(|error| panic!("{error}"))
}

/// The outcome of a run that did not act: the workflow rests for a person.
fn halted_outcome(why: String, stage: Option<DecommissionStage>) -> DecommissionOutcome {
    DecommissionOutcome {
        workflow_state: WorkflowState::FailedManualIntervention,
        node_state: NodeState::Quarantined,
        stage,
        class: None,
        evidence: vec![why],
        follow_ups: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_machines_in_a_release_path_are_this_workflow_s_to_release() {
        assert!(releasable_or_released(&MachineStatus::Deployed));
        assert!(releasable_or_released(&MachineStatus::FailedDiskErasing));
        assert!(!releasable_or_released(&MachineStatus::New));
        assert!(!releasable_or_released(&MachineStatus::Commissioning));
    }

    /// The driver against in-memory ports whose every call is answered at once, so a run completes in one poll.
    mod driver {
        use std::cell::{Cell, RefCell};

        use futures_util::FutureExt;

        use super::super::*;
        use crate::ports::fleet::FleetRecord;
        use crate::ports::site::{Machine, SiteConfig};
        use crate::ports::{JournalError, SecretsError, Signal};
        use crate::secret::Secret;

        #[derive(Default)]
        struct Clock(Cell<u64>);

        impl crate::ports::Clock for Clock {
            fn now_ms(&self) -> u64 {
                self.0.get()
            }
            fn monotonic_ms(&self) -> u64 {
                self.0.get()
            }
            async fn sleep_ms(&self, duration_ms: u64) {
                self.0.set(self.0.get() + duration_ms);
            }
        }

        /// One deployed machine whose power reads `power` whatever is asked of it.
        struct Maas {
            status: RefCell<MachineStatus>,
            power: PowerState,
            calls: RefCell<Vec<&'static str>>,
        }

        impl Maas {
            fn machine_now(&self) -> Machine {
                Machine {
                    system_id: "abc123".into(),
                    hostname: "node-02".into(),
                    status: self.status.borrow().clone(),
                    status_message: String::new(),
                    power_address: Some("node-02".into()),
                    macs: Vec::new(),
                    enable_hw_sync: false,
                    hw_sync_healthy: false,
                }
            }
            fn call(&self, op: &'static str) {
                self.calls.borrow_mut().push(op);
            }
        }

        impl MaasApi for Maas {
            async fn machines(&self) -> Result<Vec<Machine>, MaasError> {
                self.call("machines");
                Ok(vec![self.machine_now()])
            }
            async fn machine(&self, _: &str) -> Result<Machine, MaasError> {
                self.call("machine");
                Ok(self.machine_now())
            }
            async fn create_machine(&self, _: &crate::ports::site::NewMachine) -> Result<Machine, MaasError> {
                unreachable!("a decommission creates nothing")
            }
            async fn commission(&self, _: &str) -> Result<Machine, MaasError> {
                unreachable!("a decommission commissions nothing")
            }
            async fn events(&self, _: &str, _: Option<u64>) -> Result<Vec<crate::ports::site::MaasEvent>, MaasError> {
                Ok(Vec::new())
            }
            async fn disks(&self, _: &str) -> Result<Vec<crate::ports::site::Disk>, MaasError> {
                Ok(Vec::new())
            }
            async fn set_boot_disk(&self, _: &str, _: u64) -> Result<(), MaasError> {
                unreachable!()
            }
            async fn interfaces(&self, _: &str) -> Result<Vec<crate::ports::site::Interface>, MaasError> {
                Ok(Vec::new())
            }
            async fn subnets(&self) -> Result<Vec<crate::ports::site::Subnet>, MaasError> {
                Ok(Vec::new())
            }
            async fn link_subnet_auto(&self, _: &str, _: u64, _: u64) -> Result<(), MaasError> {
                unreachable!()
            }
            async fn deploy(&self, _: &str, _: &Secret, _: bool) -> Result<Machine, MaasError> {
                unreachable!("a decommission deploys nothing")
            }
            async fn release(&self, _: &str, erase: bool) -> Result<Machine, MaasError> {
                self.call(if erase { "release_erase" } else { "release" });
                *self.status.borrow_mut() = MachineStatus::Ready;
                Ok(self.machine_now())
            }
            async fn abort(&self, _: &str) -> Result<Machine, MaasError> {
                self.call("abort");
                Ok(self.machine_now())
            }
            async fn mark_fixed(&self, _: &str) -> Result<Machine, MaasError> {
                self.call("mark_fixed");
                Ok(self.machine_now())
            }
            async fn power_off(&self, _: &str) -> Result<(), MaasError> {
                self.call("power_off");
                Ok(())
            }
            async fn power_state(&self, _: &str) -> Result<PowerState, MaasError> {
                Ok(self.power)
            }
            async fn delete_machine(&self, _: &str) -> Result<(), MaasError> {
                self.call("delete");
                Ok(())
            }
        }

        struct Secrets;

        impl SiteSecrets for Secrets {
            async fn site_config(&self) -> Result<SiteConfig, SecretsError> {
                Ok(SiteConfig {
                    enabled: true,
                    metadata_host: "maas-internal".into(),
                    pxe_vlan_vid: 1,
                    roce_vlan_vid: 2,
                    roce_mandatory: false,
                })
            }
            async fn power_credential(&self, _: &str) -> Result<crate::ports::site::PowerCredential, SecretsError> {
                unreachable!()
            }
            async fn bootstrap_token(&self, _: &str, _: u64) -> Result<Secret, SecretsError> {
                unreachable!()
            }
            async fn node_secrets_capabilities(&self) -> Result<Vec<String>, SecretsError> {
                Ok(vec!["delete".into(), "read".into()])
            }
            async fn delete_node_secrets(&self, _: &str) -> Result<u32, SecretsError> {
                Ok(1)
            }
        }

        struct Inventory(RefCell<Option<FleetRecord>>);

        impl Fleet for Inventory {
            async fn record(&self, _: &str) -> Result<Option<FleetRecord>, FleetError> {
                Ok(self.0.borrow().clone())
            }
            async fn transition(&self, _: &str, _: NodeState, to: NodeState) -> Result<(), FleetError> {
                if let Some(record) = self.0.borrow_mut().as_mut() {
                    record.state = to;
                }
                Ok(())
            }
            async fn release_allocations(&self, _: &str, _: bool) -> Result<Vec<String>, FleetError> {
                if let Some(record) = self.0.borrow_mut().as_mut() {
                    record.allocations.clear();
                }
                Ok(Vec::new())
            }
            async fn run_task(&self, _: &str, task: NodeTask, _: &str) -> Result<TaskOutcome, FleetError> {
                if task == NodeTask::Uninstall
                    && let Some(record) = self.0.borrow_mut().as_mut()
                {
                    record.agent_installed = false;
                }
                Ok(TaskOutcome::Done)
            }
            async fn remove_record(&self, _: &str) -> Result<(), FleetError> {
                *self.0.borrow_mut() = None;
                Ok(())
            }
        }

        #[derive(Default)]
        struct Journal(RefCell<Vec<String>>);

        impl crate::ports::Journal for Journal {
            async fn append(&self, record: &str) -> Result<(), JournalError> {
                self.0.borrow_mut().push(record.to_owned());
                Ok(())
            }
            async fn replay(&self) -> Result<Vec<String>, JournalError> {
                Ok(self.0.borrow().clone())
            }
        }

        #[derive(Default)]
        struct Signals(RefCell<Vec<Signal>>);

        impl crate::ports::Signals for Signals {
            fn emit(&self, signal: Signal) {
                self.0.borrow_mut().push(signal);
            }
        }

        fn request(maas_delete_required: bool) -> DecommissionRequest {
            DecommissionRequest {
                workflow: "decommission-node-02".into(),
                node: "node-02".into(),
                hostname: "node-02".into(),
                poll_ms: 10_000,
                retry: RetryPolicy::default(),
                site_policy: SitePolicy { maas_delete_required, ..SitePolicy::default() },
            }
        }

        fn active() -> Inventory {
            Inventory(RefCell::new(Some(FleetRecord {
                state: NodeState::Active,
                allocations: vec!["alloc-1".into()],
                agent_installed: true,
            })))
        }

        /// Runs one decommission to its end; every port answers at once, so one poll finishes it.
        fn run(
            maas: &Maas,
            fleet: &Inventory,
            journal: &Journal,
            signals: &Signals,
            delete: bool,
        ) -> DecommissionOutcome {
            let clock = Clock::default();
            let ports = DecommissionPorts { clock: &clock, maas, secrets: &Secrets, fleet, journal, signals };
            ports.run_decommission(&request(delete)).now_or_never().expect("in-memory ports never wait")
        }

        fn deployed(power: PowerState) -> Maas {
            Maas { status: RefCell::new(MachineStatus::Deployed), power, calls: RefCell::default() }
        }

        #[test]
        fn a_healthy_decommission_erases_retires_removes_and_deletes_in_order() {
            let (maas, fleet, journal, signals) =
                (deployed(PowerState::Off), active(), Journal::default(), Signals::default());
            let outcome = run(&maas, &fleet, &journal, &signals, true);
            assert_eq!(outcome.workflow_state, WorkflowState::Completed);
            assert_eq!(outcome.node_state, NodeState::Deleted);
            assert_eq!(*fleet.0.borrow(), None, "the inventory record is gone");
            let calls = maas.calls.borrow();
            let mutations: Vec<&&str> = calls.iter().filter(|op| !matches!(**op, "machine" | "machines")).collect();
            assert_eq!(mutations, [&"release_erase", &"delete"], "power already off: no power_off");
            let history =
                DecommissionHistory::of("decommission-node-02", journal.0.borrow().iter().map(String::as_str));
            assert_eq!(history.unwrap().completed, Some(WorkflowState::Completed));
        }

        #[test]
        fn a_power_off_that_never_converges_stops_for_a_person_with_the_node_retired() {
            let (maas, fleet, journal, signals) =
                (deployed(PowerState::On), active(), Journal::default(), Signals::default());
            let outcome = run(&maas, &fleet, &journal, &signals, true);
            assert_eq!(outcome.stage, Some(DecommissionStage::PowerOffMaasNode));
            assert_eq!(outcome.class, Some(FailureClass::BmcPowerFailure));
            assert_eq!(outcome.workflow_state, WorkflowState::FailedManualIntervention);
            assert_eq!(outcome.node_state, NodeState::Retired, "the row's resulting node state");
            assert!(outcome.evidence.iter().any(|line| line.contains("never converged")), "{:?}", outcome.evidence);
            let power_offs = maas.calls.borrow().iter().filter(|op| **op == "power_off").count();
            assert_eq!(power_offs, RetryPolicy::default().attempts_max as usize, "one power-off per bounded attempt");
            assert!(fleet.0.borrow().is_some(), "nothing past the stop ran: the record is kept");
        }

        #[test]
        fn a_completed_workflow_is_not_run_again() {
            let (maas, fleet, journal, signals) =
                (deployed(PowerState::Off), active(), Journal::default(), Signals::default());
            run(&maas, &fleet, &journal, &signals, false);
            let calls_before = maas.calls.borrow().len();
            let outcome = run(&maas, &fleet, &journal, &signals, false);
            assert_eq!(outcome.workflow_state, WorkflowState::CompletedWithFollowUpRecord, "the MAAS record was kept");
            assert_eq!(maas.calls.borrow().len(), calls_before, "no call at all on the second request");
        }
    }
}
