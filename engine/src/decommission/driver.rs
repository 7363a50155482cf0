//! The decommission workflow's driver: the 11 stages of section 5 run against the `Fleet` (inventory, allocations,
//! node tasks), `MaasApi`, `SiteSecrets`, `Hub`, `Clock`, `Journal` and `Signals` ports. The driver only awaits the
//! ports and applies what the pure code says: [`crate::decommission::stages`] walks the stages,
//! [`crate::decommission::references`] refuses a run before its first mutation while anything references the
//! worker, [`crate::decommission::judge`] judges each answer (done, adopted, or failed with which class), and
//! [`crate::workflow::decide`] decides after a failure.

use crate::decommission::judge::{self, FallbackCall, MaasRecord, ReleaseStart, Transition};
use crate::decommission::record::{DecommissionHistory, DecommissionRecord};
use crate::decommission::references::{self, REFUSAL_CLASS, REFUSED_BEFORE, Refusal};
use crate::decommission::stages::{POWER_OFF_CHECKS, RELEASE_WAIT_MS, StageWalk};
use crate::matrix::{Compensation, DecommissionStage, FailureClass, NodeState, Stage, WorkflowState};
use crate::ports::events::{Evidence, RecoveryWork, WorkOutcome, WorkerReference, WorkflowEvent};
use crate::ports::fleet::{Fleet, NodeTask};
use crate::ports::site::{MaasApi, MaasError, PowerState, SiteSecrets};
use crate::ports::{AgentReferences, Clock, Hub, HubError, Journal, Signal, Signals};
use crate::workflow::after_failure::AfterFailure;
use crate::workflow::failure::{ReadFailures, StageFailure, known_machine, site_enabled};
use crate::workflow::{ContinueReason, DecideContext, Decision, Observed, RetryPolicy, SitePolicy, decide};

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
    /// What references the worker, when the request was refused before its first mutation (empty otherwise).
    pub refused: Vec<WorkerReference>,
}

/// The ports the driver needs. `hub` is read only: what references the worker (reads are public at the hub).
pub struct DecommissionPorts<'a, C, M, K, F, H, J, G> {
    pub clock: &'a C,
    pub maas: &'a M,
    pub secrets: &'a K,
    pub fleet: &'a F,
    pub hub: &'a H,
    pub journal: &'a J,
    pub signals: &'a G,
}

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

impl<C, M, K, F, H, J, G> DecommissionPorts<'_, C, M, K, F, H, J, G>
where
    C: Clock,
    M: MaasApi,
    K: SiteSecrets,
    F: Fleet,
    H: Hub,
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
    ///
    /// A run that begins at `disable_node` (its first mutation) first reads what references the worker; when
    /// anything does, or that cannot be read, the request is refused: journaled and reported, no run, nothing
    /// changed ([`crate::decommission::references`]).
    pub async fn run_decommission_from(
        &self,
        request: &DecommissionRequest,
        start_at: Option<DecommissionStage>,
    ) -> DecommissionOutcome {
        let workflow = request.workflow.as_str();
        let lines = self
            .journal
            .replay_subject(workflow)
            .await
            .unwrap_or_else(|error| panic!("decommission journal unreadable: {error}"));
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
                refused: Vec::new(),
            };
        }
        // A workflow frozen for manual intervention, or cancelled, is not acted on (seed 000, section 2).
        if let Some(why) = halted(workflow, &lines) {
            return halted_outcome(why, history.last_stage);
        }
        let mut walk = StageWalk::new(history.interrupted_at, start_at);
        if walk.begins_at_first_stage() {
            if let Err(refusal) = self.check_references(request).await {
                return self.refuse(request, refusal).await;
            }
        }
        let run = history.runs + 1;
        self.record(DecommissionRecord::RunStarted { workflow: workflow.to_owned(), run }).await;
        let mut state = RunState::default();
        if let Some(stage) = walk.resumed_at() {
            let value = format!("resumed at {} after its controller died", stage.as_str());
            self.emit(workflow, WorkflowEvent::Observed { what: "journal".to_owned(), value });
        }
        while let Some(stage) = walk.poll_stage() {
            // A freeze set while the run is under way stops it before its next stage starts.
            let lines = self
                .journal
                .replay_subject(workflow)
                .await
                .unwrap_or_else(|error| panic!("decommission journal unreadable: {error}"));
            if let Some(why) = halted(workflow, &lines) {
                return halted_outcome(why, Some(stage));
            }
            if walk.passes() {
                walk.handle_done();
                continue;
            }
            let attempt = {
                let attempts = state.attempts.entry(stage).or_insert(0);
                *attempts += 1;
                *attempts
            };
            self.record(DecommissionRecord::Checkpoint { workflow: workflow.to_owned(), run, stage, attempt }).await;
            self.emit(
                workflow,
                WorkflowEvent::StageStarted { stage: Stage::Decommission(stage), attempt: attempt.into() },
            );
            let failure = match self.run_stage(request, stage, &mut state).await {
                Ok(()) => {
                    let adopted = std::mem::take(&mut state.adopted);
                    self.emit(workflow, WorkflowEvent::StageDone { stage: Stage::Decommission(stage), adopted });
                    walk.handle_done();
                    continue;
                }
                Err(failure) => failure,
            };
            self.emit(
                workflow,
                WorkflowEvent::StageFailed {
                    stage: Stage::Decommission(stage),
                    class: failure.class,
                    error: failure.error.clone(),
                },
            );
            match self.decide_after(request, &history, &state, stage, &failure, attempt).await {
                Decision::Retry { attempt_next, delay_ms, compensation, .. } => {
                    if let Some(compensation) = compensation {
                        self.compensate(request, run, &mut state, stage, compensation).await;
                    }
                    let event = WorkflowEvent::Retrying {
                        stage: Stage::Decommission(stage),
                        attempt: attempt_next.into(),
                        delay_ms,
                    };
                    self.emit(workflow, event);
                    self.clock.sleep_ms(delay_ms).await;
                }
                Decision::Continue { reason } => {
                    let adopted = reason == ContinueReason::AdoptObservedState;
                    self.emit(workflow, WorkflowEvent::StageDone { stage: Stage::Decommission(stage), adopted });
                    walk.handle_done();
                }
                Decision::Stop(stop) => {
                    if let Some(compensation) = stop.compensation {
                        self.compensate(request, run, &mut state, stage, compensation).await;
                    }
                    if stop.workflow_state == WorkflowState::CompletedWithFollowUpRecord {
                        // `remove_maas_record` "retain MAAS record ... if delete unsafe": done, with the record.
                        state.follow_ups.push(format!("{}: {}", stage.as_str(), failure.error));
                        return self.complete(request, run, &mut state).await;
                    }
                    // A decommission's evidence is its error: its stages gather none beyond it.
                    let evidence = vec![failure.error.clone()];
                    let error = Evidence::Error { error: failure.error.clone() };
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
                            stage: Stage::Decommission(stage),
                            class: failure.class,
                            workflow_state: stop.workflow_state,
                            node_state: stop.node_state,
                            evidence: vec![error],
                        },
                    );
                    return DecommissionOutcome {
                        workflow_state: stop.workflow_state,
                        node_state: stop.node_state,
                        stage: Some(stage),
                        class: Some(failure.class),
                        evidence,
                        follow_ups: state.follow_ups,
                        refused: Vec::new(),
                    };
                }
                Decision::RefreshObservedState => unreachable!("decide_after makes the observations"),
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
            refused: Vec::new(),
        }
    }

    /// Reads what references the worker and judges it: the hub's references of its agent (read again, within the
    /// request, as `disable_node`'s row retries a transient: bounded, with its backoff) and the controller's rollout
    /// journal.
    async fn check_references(&self, request: &DecommissionRequest) -> Result<(), Refusal> {
        let hub = self.read_references(request).await;
        let rollout = match self.journal.replay().await {
            // The rollout the journal would have adopted is what references a worker; old lines it settles or
            // quarantines belong to no running rollout.
            Ok(lines) => {
                crate::rollout::journal::replay(lines.iter().map(String::as_str)).map(|replayed| replayed.adopted)
            }
            Err(error) => Err(error),
        };
        references::check(&request.node, hub, rollout)
    }

    async fn read_references(&self, request: &DecommissionRequest) -> Result<AgentReferences, HubError> {
        let mut attempt = 1;
        loop {
            let error = match self.hub.agent_references(&request.node).await {
                Ok(references) => return Ok(references),
                Err(error) => error,
            };
            let mut ctx = DecideContext::new(NodeState::Active);
            ctx.retry = request.retry;
            ctx.observed = Observed::AsExpected;
            let decision = decide(Stage::Decommission(REFUSED_BEFORE), FailureClass::UpstreamTransient, attempt, &ctx);
            let Decision::Retry { attempt_next, delay_ms, .. } = decision else { return Err(error) };
            if !references::read_again(&error) {
                return Err(error);
            }
            let value = format!("unreadable: {error}; read again in {delay_ms} ms");
            self.emit(&request.workflow, WorkflowEvent::Observed { what: "references".to_owned(), value });
            self.clock.sleep_ms(delay_ms).await;
            attempt = attempt_next;
        }
    }

    /// Refuses the request: the node's state read for the report (nothing else is read or changed), the refusal
    /// journaled, then reported.
    async fn refuse(&self, request: &DecommissionRequest, refusal: Refusal) -> DecommissionOutcome {
        let workflow = request.workflow.as_str();
        let node_state = match self.fleet.record(&request.node).await {
            Ok(record) => judge::node_state_of(record.as_ref()),
            // As every stop before the first read of the inventory reports it.
            Err(_) => RunState::default().node_state(),
        };
        let stop = refusal.stop(node_state);
        let record = DecommissionRecord::Refused {
            workflow: workflow.to_owned(),
            stage: REFUSED_BEFORE,
            class: REFUSAL_CLASS,
            workflow_state: stop.workflow_state,
            references: refusal.references.clone(),
        };
        self.record(record).await;
        let evidence = refusal.references.iter().map(ToString::to_string).collect();
        self.emit(
            workflow,
            WorkflowEvent::Refused {
                stage: Stage::Decommission(REFUSED_BEFORE),
                class: REFUSAL_CLASS,
                workflow_state: stop.workflow_state,
                node_state: stop.node_state,
                references: refusal.references.clone(),
            },
        );
        DecommissionOutcome {
            workflow_state: stop.workflow_state,
            node_state: stop.node_state,
            stage: Some(REFUSED_BEFORE),
            class: Some(REFUSAL_CLASS),
            evidence,
            follow_ups: Vec::new(),
            refused: refusal.references,
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
    ) -> Decision {
        let mut ctx = DecideContext::new(state.node_state());
        ctx.retry = request.retry;
        ctx.policy = request.site_policy;
        ctx.failed_runs = history.failed_retryable_runs;
        ctx.fallback_taken = state.fallback_taken;
        let after = AfterFailure::new(ctx, |ctx: &DecideContext| {
            decide(Stage::Decommission(stage), failure.class, attempt, ctx)
        });
        after.decide(async || self.observe(request, state, stage).await).await
    }

    /// A fresh read of the node's inventory record or its machine, judged against what `stage` expects.
    async fn observe(&self, request: &DecommissionRequest, state: &RunState, stage: DecommissionStage) -> Observed {
        if judge::observes_inventory(stage) {
            let Ok(record) = self.fleet.record(&request.node).await else { return Observed::Stale };
            return judge::observed_record(stage, record.as_ref());
        }
        if judge::observes_machine(stage) {
            let Some(system_id) = &state.system_id else { return Observed::AsExpected };
            return judge::observed_machine(stage, &self.maas.machine(system_id).await);
        }
        Observed::AsExpected
    }

    /// A `cancel` ("stop workflow and compensate where possible") of a decommission resting at `stage`: its row's
    /// compensation is the stage's failure's own (quarantine on a failed validation, revert to retired on a failed
    /// uninstall, the no-erase fallback), none of which an operator's cancel may make, so nothing is done; that is
    /// journaled and reported as recovery work `not_due`, with why, so the cancel's record says what it did not do.
    pub async fn record_cancel_uncompensated(
        &self,
        request: &DecommissionRequest,
        stage: DecommissionStage,
        compensation: Compensation,
    ) {
        let workflow = request.workflow.as_str();
        let lines = self
            .journal
            .replay_subject(workflow)
            .await
            .unwrap_or_else(|error| panic!("decommission journal unreadable: {error}"));
        let history = DecommissionHistory::of(workflow, lines.iter().map(String::as_str))
            .unwrap_or_else(|error| panic!("{error}"));
        let run = history.runs.max(1);
        let work = RecoveryWork::Compensation(compensation);
        let outcome = WorkOutcome::NotDue;
        let detail = format!(
            "cancelled at {}: {} follows the stage's own failure, not an operator's cancel; nothing was done",
            stage.as_str(),
            compensation.as_str()
        );
        self.record(DecommissionRecord::Work { workflow: workflow.to_owned(), run, stage, work, outcome }).await;
        self.emit(workflow, WorkflowEvent::RecoveryWork { stage: Stage::Decommission(stage), work, outcome, detail });
    }

    /// Runs a compensation of section 5, idempotently, then journals and reports what came of it.
    async fn compensate(
        &self,
        request: &DecommissionRequest,
        run: u32,
        state: &mut RunState,
        stage: DecommissionStage,
        compensation: Compensation,
    ) {
        let (outcome, detail) = if let Some((from, to)) = judge::compensating_transition(compensation) {
            match self.fleet.transition(&request.node, from, to).await {
                Ok(()) => {
                    (WorkOutcome::Performed, format!("{} moved {} → {}", request.node, from.as_str(), to.as_str()))
                }
                Err(error) => (
                    WorkOutcome::Failed,
                    format!("{} not moved {} → {}: {error}", request.node, from.as_str(), to.as_str()),
                ),
            }
        } else if compensation == Compensation::AbortMarkFixedNoEraseRelease {
            // The release that follows is without erase (`fallback_taken`); here MAAS is unstuck for it.
            state.fallback_taken = true;
            self.unstick_for_no_erase_release(state).await
        } else {
            (WorkOutcome::NotDue, format!("{} is not a decommission compensation", compensation.as_str()))
        };
        let workflow = request.workflow.as_str();
        let work = RecoveryWork::Compensation(compensation);
        self.record(DecommissionRecord::Work { workflow: workflow.to_owned(), run, stage, work, outcome }).await;
        self.emit(workflow, WorkflowEvent::RecoveryWork { stage: Stage::Decommission(stage), work, outcome, detail });
    }

    /// "abort/mark-fixed": a machine stuck erasing is aborted, a broken one marked fixed, so that the no-erase
    /// release can take it; one in any other state needs neither.
    async fn unstick_for_no_erase_release(&self, state: &RunState) -> (WorkOutcome, String) {
        let Some(system_id) = state.system_id.clone() else {
            return (WorkOutcome::NotDue, "no MAAS machine known".to_owned());
        };
        let machine = match self.maas.machine(&system_id).await {
            Ok(machine) => machine,
            Err(error) => return (WorkOutcome::Failed, format!("{system_id} cannot be read: {error}")),
        };
        let status = machine.status.name().to_owned();
        let (called, answer) = match judge::fallback_call(&machine.status) {
            Some(FallbackCall::Abort) => ("aborted", self.maas.abort(&system_id).await.map(drop)),
            Some(FallbackCall::MarkFixed) => ("marked fixed", self.maas.mark_fixed(&system_id).await.map(drop)),
            None => {
                return (
                    WorkOutcome::NotDue,
                    format!("{system_id} is {status}: nothing to abort or mark fixed; the release goes without erase"),
                );
            }
        };
        match answer {
            Ok(()) => {
                (WorkOutcome::Performed, format!("{system_id} {called} from {status}; the release goes without erase"))
            }
            Err(error) => (WorkOutcome::Failed, format!("{system_id} could not be {called} from {status}: {error}")),
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
        let unreachable = judge::unreachable_agent(stage);
        match stage {
            D::DisableNode => {
                let record = self.fleet.record(node).await.map_err(|error| StageFailure::fleet(&error))?;
                let transition = judge::disable(node, record.as_ref())?;
                state.node_state = record.map(|record| record.state);
                match transition {
                    Transition::Adopt => state.adopted = true,
                    Transition::Move { from } => {
                        self.fleet
                            .transition(node, from, NodeState::Quarantined)
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
                judge::allocations_released(node, &remaining)
            }
            D::DrainNode => self.task(node, NodeTask::Drain, &operation_id, unreachable).await,
            D::CleanupStorageScrubGpuValidateCleanNode => {
                self.task(node, NodeTask::CleanupStorage, &operation_id, unreachable).await?;
                self.task(node, NodeTask::ScrubGpu, &operation_id, unreachable).await?;
                self.task(node, NodeTask::ValidateClean, &operation_id, unreachable).await
            }
            D::LoadSiteConfig => {
                // A run that resumes past the inventory stages (after a controller death, or at an operator's
                // stage) learns the node's state from the inventory, not from stages it did not run.
                if state.node_state.is_none() {
                    let record = self.fleet.record(node).await.map_err(|error| StageFailure::fleet(&error))?;
                    state.node_state = Some(judge::node_state_of(record.as_ref()));
                }
                let config = self.secrets.site_config().await.map_err(|error| StageFailure::secrets(&error))?;
                site_enabled(config.enabled)?;
                let capabilities =
                    self.secrets.node_secrets_capabilities().await.map_err(|error| StageFailure::secrets(&error))?;
                judge::secrets_deletable(&capabilities)?;
                let machines = self.maas.machines().await.map_err(|error| judge::maas(&error))?;
                match judge::machine_of(&machines, &request.hostname) {
                    Some(machine) => state.system_id = Some(machine.system_id.clone()),
                    None => state.maas_gone = true,
                }
                Ok(())
            }
            D::ReleaseMaasNode => self.release(request, state).await,
            D::PowerOffMaasNode => self.power_off(request, state).await,
            D::RetireGpuaasNode => {
                let record = self.fleet.record(node).await.map_err(|error| StageFailure::fleet(&error))?;
                match judge::retire(node, record.map(|record| record.state))? {
                    Transition::Adopt => state.adopted = true,
                    Transition::Move { from } => self
                        .fleet
                        .transition(node, from, NodeState::Retired)
                        .await
                        .map_err(|error| StageFailure::fleet(&error))?,
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
                    self.task(node, NodeTask::Uninstall, &operation_id, unreachable).await?;
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
                let delete_required = request.site_policy.maas_delete_required;
                match judge::maas_record(
                    state.system_id.as_deref(),
                    state.maas_gone,
                    delete_required,
                    &request.hostname,
                ) {
                    MaasRecord::Gone => {
                        state.adopted = true;
                        Ok(())
                    }
                    MaasRecord::Retain { follow_up } => {
                        state.follow_ups.push(follow_up);
                        Ok(())
                    }
                    MaasRecord::Delete { system_id } => {
                        // Refresh before the irreversible delete: only a machine this workflow released goes.
                        if !judge::deletable(&system_id, self.maas.machine(&system_id).await)? {
                            state.adopted = true;
                            return Ok(());
                        }
                        self.maas.delete_machine(&system_id).await.map_err(|error| judge::maas(&error))
                    }
                }
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
        judge::task_result(node, task, unreachable, self.fleet.run_task(node, task, &operation_id).await)
    }

    /// `release_maas_node`: a fresh read, a release (with erase unless the fallback was taken), and the wait for
    /// Ready.
    async fn release(&self, request: &DecommissionRequest, state: &mut RunState) -> Result<(), StageFailure> {
        if state.maas_gone {
            state.adopted = true;
            return Ok(());
        }
        let system_id = known_machine(state.system_id.as_deref())?.to_owned();
        let machine = self.maas.machine(&system_id).await.map_err(|error| judge::maas(&error))?;
        let first_attempt = state.attempts.get(&DecommissionStage::ReleaseMaasNode) == Some(&1);
        match judge::release_start(&system_id, &machine, first_attempt, state.fallback_taken)? {
            ReleaseStart::Adopt => {
                state.adopted = true;
                return Ok(());
            }
            ReleaseStart::Wait => {}
            ReleaseStart::Release { erase } => {
                self.maas.release(&system_id, erase).await.map_err(|error| judge::maas(&error))?;
            }
        }
        let started_ms = self.clock.monotonic_ms();
        let mut read_failures = ReadFailures::default();
        loop {
            self.clock.sleep_ms(request.poll_ms).await;
            match self.maas.machine(&system_id).await {
                Ok(machine) => {
                    read_failures.handle_read();
                    if let Some(end) = judge::release_progress(&system_id, &machine) {
                        return end;
                    }
                }
                Err(MaasError::Http { status: 404, .. }) => {
                    return Err(judge::disappeared_while_releasing(&system_id));
                }
                Err(error) => {
                    if read_failures.handle_failure() {
                        return Err(judge::maas(&error));
                    }
                }
            }
            if self.clock.monotonic_ms().saturating_sub(started_ms) >= RELEASE_WAIT_MS {
                return Err(judge::not_released(&system_id, RELEASE_WAIT_MS));
            }
        }
    }

    /// `power_off_maas_node`: a fresh read of the power, a power-off when on, and checks until it reads off.
    async fn power_off(&self, request: &DecommissionRequest, state: &mut RunState) -> Result<(), StageFailure> {
        let Some(system_id) = state.system_id.clone().filter(|_| !state.maas_gone) else {
            state.adopted = true;
            return Ok(());
        };
        if self.maas.power_state(&system_id).await.map_err(|error| judge::maas(&error))? == PowerState::Off {
            state.adopted = true;
            return Ok(());
        }
        self.maas.power_off(&system_id).await.map_err(|error| judge::maas(&error))?;
        let mut last = PowerState::Unknown;
        for _ in 0..POWER_OFF_CHECKS {
            self.clock.sleep_ms(request.poll_ms).await;
            match self.maas.power_state(&system_id).await {
                Ok(PowerState::Off) => return Ok(()),
                Ok(power) => last = power,
                Err(error) => return Err(judge::maas(&error)),
            }
        }
        Err(judge::power_never_off(&system_id, last, POWER_OFF_CHECKS))
    }
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
        refused: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    /// The driver against in-memory ports whose every call is answered at once, so a run completes in one poll.
    mod driver {
        use std::cell::{Cell, RefCell};

        use futures_util::FutureExt;

        use super::super::*;
        use crate::ports::fleet::{FleetError, FleetRecord, TaskOutcome};
        use crate::ports::site::{Machine, MachineStatus, SiteConfig};
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
                // Every wait and retry of a decommission is bounded: a run past a virtual week never ends (a retry
                // bound broken in `decide` would spin here for ever; cargo-mutants found that, docs/testing.md).
                assert!(self.0.get() < 7 * 24 * 3_600_000, "the run's virtual clock passed a week: an unbounded loop");
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
            async fn region_services(&self) -> Result<Vec<crate::ports::site::RegionService>, MaasError> {
                Ok(Vec::new())
            }
            async fn link_subnet_auto(&self, _: &str, _: u64, _: u64) -> Result<(), MaasError> {
                unreachable!()
            }
            async fn disconnect_interface(&self, _: &str, _: u64) -> Result<(), MaasError> {
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
            async fn power_on(&self, _: &str) -> Result<(), MaasError> {
                self.call("power_on");
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
                    timeouts: Default::default(),
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
            async fn revoke_bootstrap_tokens(&self, _: &str) -> Result<u32, SecretsError> {
                unreachable!("a decommission revokes through delete_node_secrets")
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

        /// The hub's answers to reads of what references the node, one per read (then nothing references it).
        #[derive(Default)]
        struct Hub(RefCell<std::collections::VecDeque<Result<AgentReferences, HubError>>>);

        impl Hub {
            fn answering(answers: Vec<Result<AgentReferences, HubError>>) -> Hub {
                Hub(RefCell::new(answers.into()))
            }
        }

        impl crate::ports::Hub for Hub {
            async fn authenticate(&self, _: &Secret) -> Result<u64, HubError> {
                unreachable!("a decommission only reads the hub")
            }
            async fn acquire_lock(&self, _: &str, _: u64) -> Result<crate::ports::LockGrant, HubError> {
                unreachable!("a decommission only reads the hub")
            }
            async fn supersede_lock(&self, _: &str, _: u64, _: u64) -> Result<u64, HubError> {
                unreachable!("a decommission only reads the hub")
            }
            async fn renew_lock(&self, _: u64, _: u64) -> Result<(), HubError> {
                unreachable!("a decommission only reads the hub")
            }
            async fn release_lock(&self, _: u64) -> Result<bool, HubError> {
                unreachable!("a decommission only reads the hub")
            }
            async fn read_holds(&self) -> Result<std::collections::BTreeMap<String, Vec<String>>, HubError> {
                unreachable!("a decommission reads one agent's references, not every hold")
            }
            async fn read_heartbeats(&self) -> Result<crate::ports::HeartbeatSnapshot, HubError> {
                unreachable!("a decommission reads no heartbeat")
            }
            async fn place_hold(&self, _: &str, _: &str) -> Result<(), HubError> {
                unreachable!("a decommission only reads the hub")
            }
            async fn release_hold(&self, _: &str, _: &str) -> Result<bool, HubError> {
                unreachable!("a decommission only reads the hub")
            }
            async fn open_epoch(&self, _: &[String]) -> Result<u64, HubError> {
                unreachable!("a decommission only reads the hub")
            }
            async fn close_epoch(&self, _: u64, _: &[String]) -> Result<bool, HubError> {
                unreachable!("a decommission only reads the hub")
            }
            async fn route_bundle(&self) -> Result<String, HubError> {
                unreachable!("a decommission reads no route bundle")
            }
            async fn begin_rotation(&self, _: &str, _: &str) -> Result<crate::ports::IssuedCredential, HubError> {
                unreachable!("a decommission rotates no credential")
            }
            async fn rotation_status(
                &self,
                _: &str,
                _: &str,
            ) -> Result<Option<crate::ports::RotationStatus>, HubError> {
                unreachable!("a decommission rotates no credential")
            }
            async fn commit_rotation(&self, _: &str, _: &str) -> Result<bool, HubError> {
                unreachable!("a decommission rotates no credential")
            }
            async fn abort_rotation(&self, _: &str, _: &str) -> Result<bool, HubError> {
                unreachable!("a decommission rotates no credential")
            }
            async fn agent_references(&self, agent: &str) -> Result<AgentReferences, HubError> {
                assert_eq!(agent, "node-02", "the node's own agent");
                self.0.borrow_mut().pop_front().unwrap_or(Ok(AgentReferences::default()))
            }
            async fn resurrect_agent(&self, _: &str, _: u64) -> Result<bool, HubError> {
                unreachable!("a decommission resurrects no identity")
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
            run_with_hub(maas, fleet, &Hub::default(), journal, signals, delete)
        }

        fn run_with_hub(
            maas: &Maas,
            fleet: &Inventory,
            hub: &Hub,
            journal: &Journal,
            signals: &Signals,
            delete: bool,
        ) -> DecommissionOutcome {
            let clock = Clock::default();
            let ports = DecommissionPorts { clock: &clock, maas, secrets: &Secrets, fleet, hub, journal, signals };
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
        fn a_cancel_compensates_nothing_and_journals_and_reports_that_it_did_not() {
            let (maas, fleet, journal, signals) =
                (deployed(PowerState::On), active(), Journal::default(), Signals::default());
            run(&maas, &fleet, &journal, &signals, true);
            let (calls_before, lines_before) = (maas.calls.borrow().len(), journal.0.borrow().len());
            let clock = Clock::default();
            let ports = DecommissionPorts {
                clock: &clock,
                maas: &maas,
                secrets: &Secrets,
                fleet: &fleet,
                hub: &Hub::default(),
                journal: &journal,
                signals: &signals,
            };
            let stage = DecommissionStage::RemoveGpuaasNodeRecord;
            let compensation = Compensation::RevertToRetiredOnUninstallFailure;
            ports.record_cancel_uncompensated(&request(true), stage, compensation).now_or_never().expect("no wait");
            assert_eq!(maas.calls.borrow().len(), calls_before, "nothing is called");
            let lines = journal.0.borrow();
            assert_eq!(lines.len(), lines_before + 1, "one work record");
            let work =
                DecommissionRecord::decode(&lines[lines_before]).expect("a record").expect("a decommission record");
            assert!(
                matches!(work, DecommissionRecord::Work { stage: s, outcome: WorkOutcome::NotDue, .. } if s == stage),
                "{work:?}"
            );
            let reported = signals.0.borrow().iter().any(|signal| {
                matches!(signal, Signal::Decommission {
                    event: WorkflowEvent::RecoveryWork { outcome: WorkOutcome::NotDue, work, detail, .. }, ..
                } if *work == RecoveryWork::Compensation(compensation) && detail.contains("nothing was done"))
            });
            assert!(reported, "the trace says what the cancel did not do");
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

        fn refusals(signals: &Signals) -> Vec<(WorkflowState, NodeState, Vec<WorkerReference>)> {
            signals
                .0
                .borrow()
                .iter()
                .filter_map(|signal| match signal {
                    Signal::Decommission {
                        event: WorkflowEvent::Refused { stage, class, workflow_state, node_state, references },
                        ..
                    } => {
                        assert_eq!(
                            (*stage, *class),
                            (Stage::Decommission(DecommissionStage::DisableNode), REFUSAL_CLASS)
                        );
                        Some((*workflow_state, *node_state, references.clone()))
                    }
                    _ => None,
                })
                .collect()
        }

        fn mid_rollout() -> AgentReferences {
            AgentReferences { epochs: vec![1], holds: vec!["deploy:rollout-r2".into()], lease_until_ms: None }
        }

        /// The rollout `rollout-r2`, not terminal, whose plan names node-02.
        fn rollout_journal() -> Journal {
            let plan = crate::rollout::journal::Record::PlanFrozen {
                rollout: "rollout-r2".into(),
                revision: "r2".into(),
                generation: 2,
                route_digest: "sha256:routes-1".into(),
                lanes: vec![vec!["node-02".into()]],
                quarantined: Vec::new(),
                excluded: Default::default(),
                prior: Default::default(),
            };
            Journal(RefCell::new(vec![plan.encode()]))
        }

        #[test]
        fn a_referenced_worker_is_refused_unchanged_and_a_later_request_proceeds() {
            let (maas, fleet, signals) = (deployed(PowerState::Off), active(), Signals::default());
            let journal = rollout_journal();
            let hub = Hub::answering(vec![Ok(mid_rollout())]);
            let outcome = run_with_hub(&maas, &fleet, &hub, &journal, &signals, true);
            assert_eq!(outcome.workflow_state, WorkflowState::FailedRetryable);
            assert_eq!((outcome.node_state, outcome.stage), (NodeState::Active, Some(DecommissionStage::DisableNode)));
            let references = vec![
                WorkerReference::Epoch { epoch: 1 },
                WorkerReference::Hold { owner: "deploy:rollout-r2".into() },
                WorkerReference::Rollout { rollout: "rollout-r2".into() },
            ];
            assert_eq!(refusals(&signals), [(WorkflowState::FailedRetryable, NodeState::Active, references.clone())]);
            assert_eq!(outcome.refused, references);
            assert_eq!(
                outcome.evidence,
                [
                    "open deployment epoch 1 lists it as a member",
                    "dispatch hold deploy:rollout-r2",
                    "rollout rollout-r2 is not terminal and its plan names it"
                ]
            );
            assert!(maas.calls.borrow().is_empty(), "MAAS is not even read");
            assert_eq!(fleet.0.borrow().as_ref().map(|record| record.state), Some(NodeState::Active), "unchanged");
            assert_eq!(fleet.0.borrow().as_ref().map(|record| record.allocations.len()), Some(1), "unchanged");
            let lines = journal.0.borrow().clone();
            assert_eq!(lines.len(), 2, "the plan, and the refusal: no run");
            let refused = DecommissionRecord::decode(&lines[1]).expect("ours").expect("decodes");
            assert!(matches!(refused, DecommissionRecord::Refused { references: ref r, .. } if *r == references));
            let history = DecommissionHistory::of("decommission-node-02", lines.iter().map(String::as_str)).unwrap();
            assert_eq!((history.runs, history.refusals, history.failed_retryable_runs), (0, 1, 0));
            assert!(
                !signals.0.borrow().iter().any(|signal| matches!(
                    signal,
                    Signal::Decommission { event: WorkflowEvent::StageStarted { .. }, .. }
                )),
                "no stage started"
            );

            // The rollout ends (its terminal record) and its epoch and hold are gone: the next request proceeds.
            let terminal = crate::rollout::journal::Record::Terminal {
                rollout: "rollout-r2".into(),
                outcome: crate::ports::events::RolloutEnd::Successor,
            };
            journal.0.borrow_mut().push(terminal.encode());
            let outcome = run_with_hub(&maas, &fleet, &hub, &journal, &signals, true);
            assert_eq!(outcome.workflow_state, WorkflowState::Completed);
            assert_eq!(*fleet.0.borrow(), None);
            assert_eq!(refusals(&signals).len(), 1, "no second refusal");
        }

        #[test]
        fn an_operator_hold_on_a_quarantined_node_leaves_it_quarantined() {
            let (maas, journal, signals) = (deployed(PowerState::Off), Journal::default(), Signals::default());
            let fleet = active();
            if let Some(record) = fleet.0.borrow_mut().as_mut() {
                record.state = NodeState::Quarantined;
            }
            let held = AgentReferences { holds: vec!["operator:maintenance".into()], ..AgentReferences::default() };
            let outcome = run_with_hub(&maas, &fleet, &Hub::answering(vec![Ok(held)]), &journal, &signals, true);
            let hold = vec![WorkerReference::Hold { owner: "operator:maintenance".into() }];
            assert_eq!(refusals(&signals), [(WorkflowState::FailedRetryable, NodeState::Quarantined, hold)]);
            assert_eq!(outcome.node_state, NodeState::Quarantined);
        }

        #[test]
        fn an_unanswered_read_is_read_again_by_the_row_and_then_refused_never_taken_as_no_references() {
            let timeout = || Err(HubError::Transport(crate::ports::TransportError::Timeout));
            // Two failed reads, then an answer: the request proceeds.
            let (maas, fleet, journal, signals) =
                (deployed(PowerState::Off), active(), Journal::default(), Signals::default());
            let hub = Hub::answering(vec![timeout(), timeout()]);
            assert_eq!(
                run_with_hub(&maas, &fleet, &hub, &journal, &signals, true).workflow_state,
                WorkflowState::Completed
            );
            let reread = signals
                .0
                .borrow()
                .iter()
                .filter(|signal| {
                    matches!(signal,
                    Signal::Decommission { event: WorkflowEvent::Observed { what, .. }, .. } if what == "references")
                })
                .count();
            assert_eq!(reread, 2, "each failed read is reported before it is read again");
            // The row's attempts run out: refused, naming why.
            let (maas, fleet, journal, signals) =
                (deployed(PowerState::Off), active(), Journal::default(), Signals::default());
            let attempts = RetryPolicy::default().attempts_max as usize;
            let hub = Hub::answering((0..attempts).map(|_| timeout()).collect());
            let outcome = run_with_hub(&maas, &fleet, &hub, &journal, &signals, true);
            assert_eq!(outcome.workflow_state, WorkflowState::FailedRetryable);
            let unreadable = WorkerReference::Unreadable {
                source: crate::ports::events::ReferenceSource::Hub,
                error: "hub unreachable: timed out".into(),
            };
            assert_eq!(refusals(&signals), [(WorkflowState::FailedRetryable, NodeState::Active, vec![unreadable])]);
            assert!(hub.0.borrow().is_empty(), "every attempt the row allows was made");
            assert_eq!(fleet.0.borrow().as_ref().map(|record| record.state), Some(NodeState::Active));
            // A refusal by the hub is final: no second read.
            let (maas, fleet, journal, signals) =
                (deployed(PowerState::Off), active(), Journal::default(), Signals::default());
            let hub = Hub::answering(vec![Err(HubError::Rejected("malformed".into())), Ok(AgentReferences::default())]);
            run_with_hub(&maas, &fleet, &hub, &journal, &signals, true);
            assert_eq!(refusals(&signals).len(), 1);
            assert_eq!(hub.0.borrow().len(), 1, "read once");
        }

        #[test]
        fn a_run_resumed_past_the_first_mutation_reads_no_references() {
            let (maas, fleet, signals) = (deployed(PowerState::Off), active(), Signals::default());
            // The dead run disabled the node, released its allocations and drained it before it died.
            if let Some(record) = fleet.0.borrow_mut().as_mut() {
                record.state = NodeState::Quarantined;
                record.allocations.clear();
            }
            let died = [
                DecommissionRecord::RunStarted { workflow: "decommission-node-02".into(), run: 1 }.encode(),
                DecommissionRecord::Checkpoint {
                    workflow: "decommission-node-02".into(),
                    run: 1,
                    stage: DecommissionStage::ReleaseMaasNode,
                    attempt: 1,
                }
                .encode(),
            ];
            let journal = Journal(RefCell::new(died.to_vec()));
            let hub = Hub::answering(vec![Ok(mid_rollout())]);
            let outcome = run_with_hub(&maas, &fleet, &hub, &journal, &signals, true);
            assert_eq!(outcome.workflow_state, WorkflowState::Completed, "{outcome:?}");
            assert_eq!(hub.0.borrow().len(), 1, "the hub was not read");
        }
    }
}
