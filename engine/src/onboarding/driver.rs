//! The onboarding workflow's driver: the 16 stages of the recovery matrix run against the `MaasApi`, `Resolver`,
//! `SiteSecrets`, `Hub`, `Clock`, `Journal` and `Signals` ports. Every failure is classified into one of the
//! matrix's classes and handed to [`crate::workflow::decide`]; the driver only performs what the decision says.
//!
//! - **Observe first**: `load_site_config` reads the site configuration, the region (subnets and VLAN MTUs) and the
//!   resolver's answer for the metadata host before anything changes, and records them.
//! - **Slow is not silent** (policy `current`): a wait with neither an event nor a status change for the stall window
//!   is classified at once from evidence (an unknown machine MAAS enlisted on this node's BMC, the resolver's SERVFAIL,
//!   the last event) instead of burning MAAS's 30-minute timeout.
//! - **Refresh before destructive steps**: commission, deploy, release and abort are preceded by a fresh read, and an
//!   observed state that already satisfies the stage is adopted (late success, an operator's change).
//! - **Journal**: a checkpoint per stage (workflow id, run id, stage, attempt); a restarted controller reruns from the
//!   top with status-aware adoption, which for a fresh node is safer than replaying shell-era steps.
//! - Policy `legacy` (the 2026-07-20 controller, kept to replay it): no stall detection, MAAS's fixed timeout, blind
//!   retry of commissioning.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::matrix::{FailureClass, NodeState, OnboardingStage, Stage, WorkflowState};
use crate::onboarding::legacy::LegacyConfig;
use crate::onboarding::record::{OnboardHistory, OnboardRecord};
use crate::onboarding::stall::{
    Evidence, ProgressEvidence, ResolverProbe, StallClassifier, StallVerdict, UnknownMachine,
};
use crate::ports::site::{DnsAnswer, MaasApi, MaasError, Machine, MachineStatus, NewMachine, Resolver, SiteSecrets};
use crate::ports::{Clock, Endpoint, Hub, Journal, Signal, Signals, Ssh, SshError, SshRequest, WorkflowEvent};
use crate::secret::Secret;
use crate::workflow::after_failure::{AfterFailure, Next};
use crate::workflow::failure::{BmcAnswer, StageFailure};
use crate::workflow::{ContinueReason, DecideContext, Observed, RetryPolicy, SitePolicy, decide};

/// Which controller runs the workflow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnboardingPolicy {
    /// The recovery matrix with stall detection, observe-first and refresh-before-destroy.
    Current,
    /// The 2026-07-20 controller: MAAS's fixed timeout, blind commissioning retry.
    Legacy,
}

/// What the operator's inventory says about a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSpec {
    /// The node's name in the fleet (and its agent's name at the hub).
    pub name: String,
    pub hostname: String,
    /// The MAC the node PXE-boots from, as registered.
    pub pxe_mac: String,
    /// The node's BMC, as MAAS's power parameters name it.
    pub bmc_address: String,
    /// The model name of the disk the node must boot from (the BOSS device).
    pub boot_disk_model: String,
    /// How many RoCE NICs the node's inventory lists: fewer in MAAS is a hardware mismatch.
    pub roce_nics: u32,
}

/// One onboarding workflow to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OnboardRequest {
    /// The workflow id (stable across controller restarts and resumes).
    pub workflow: String,
    pub node: NodeSpec,
    pub policy: OnboardingPolicy,
    /// Neither an event nor a status change for this long is a stall (policy `current`).
    pub stall_window_ms: u64,
    /// How often a waiting stage reads MAAS.
    pub poll_ms: u64,
    pub retry: RetryPolicy,
    pub site_policy: SitePolicy,
    /// How long the agent's bootstrap token is valid.
    pub bootstrap_token_ttl_ms: u64,
}

/// How a workflow run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OnboardOutcome {
    pub workflow_state: WorkflowState,
    pub node_state: NodeState,
    /// The stage it stopped at (none when it completed).
    pub stage: Option<OnboardingStage>,
    pub class: Option<FailureClass>,
    /// What a person needs to act: the evidence the classification rests on.
    pub evidence: Vec<String>,
    pub system_id: Option<String>,
}

/// The ports the driver needs.
pub struct OnboardPorts<'a, C, M, R, K, H, S, J, G> {
    pub clock: &'a C,
    pub maas: &'a M,
    pub resolver: &'a R,
    pub secrets: &'a K,
    pub hub: &'a H,
    /// SSH to the deployed machine, for the hardware-sync seed.
    pub ssh: &'a S,
    pub journal: &'a J,
    pub signals: &'a G,
}

/// The stages a run walks, in order. `classify_deploy_failure` and `recover_for_datasource_retry` run only when a
/// deploy fails (they are that failure's handling, not steps of a healthy run).
const MAIN_STAGES: [OnboardingStage; 14] = [
    OnboardingStage::LoadSiteConfig,
    OnboardingStage::ResolvePowerCredentials,
    OnboardingStage::CreateOrFindInMaas,
    OnboardingStage::CommissionNode,
    OnboardingStage::WaitForReady,
    OnboardingStage::ConfigureStorage,
    OnboardingStage::ApplyRocePhase2,
    OnboardingStage::EnsurePxeInterfaceAuto,
    OnboardingStage::RenderCloudInit,
    OnboardingStage::DeployViaMaas,
    OnboardingStage::WaitForDeployed,
    OnboardingStage::EnsureHardwareSyncConfigured,
    OnboardingStage::WaitForHardwareSyncHealthy,
    OnboardingStage::WaitForAgentEnrollment,
];

/// Waits bounded by the timeouts of section 6 (our defaults where the seed gives none, as in [`crate::matrix`]),
/// plus a margin past MAAS's own 30-minute `node_timeout` so that MAAS's verdict arrives first.
const COMMISSION_WAIT_MS: u64 = 35 * 60_000;
const DEPLOY_WAIT_MS: u64 = 35 * 60_000;
const HW_SYNC_HEALTH_WAIT_MS: u64 = 20 * 60_000;
const AGENT_ENROLLMENT_WAIT_MS: u64 = 15 * 60_000;
/// Consecutive failed reads of MAAS a waiting stage tolerates before it calls the region unreachable.
const READ_FAILURES_MAX: u32 = 4;

/// How onboarding reads a MAAS 503 that names the BMC: as MAAS's "try again" (its power actions show their failures
/// as events, read by [`power_failure`]).
const BMC: BmcAnswer = BmcAnswer::Transient;

/// What a run has learnt so far.
#[derive(Default)]
struct RunState {
    system_id: Option<String>,
    metadata_host: Option<String>,
    pxe_vlan_vid: u16,
    roce_vlan_vid: u16,
    power: Option<crate::ports::site::PowerCredential>,
    user_data: Option<Secret>,
    deploy_started: bool,
    /// An earlier run of this workflow deployed (or began to): the safe full rerun releases a machine it left in a
    /// deploy state before commissioning it again.
    earlier_run_deployed: bool,
    /// The last run died after it reached the deploy (see `OnboardHistory::interrupted_after`); cleared once
    /// `commission_node` has looked.
    interrupted_after_deploy: bool,
    /// This run adopted the deploy a dead controller sent: the commissioning wait is already behind the machine.
    deploy_adopted: bool,
    /// The stage attempt under way found its checkpoint already satisfied and adopted it (reported with its
    /// `stage_done`).
    adopted: bool,
    /// Attempts of each stage in this run (a retried wait re-enters the stage that started what it waits for).
    attempts: std::collections::BTreeMap<OnboardingStage, u32>,
}

impl RunState {
    fn next_attempt(&mut self, stage: OnboardingStage) -> u32 {
        let attempts = self.attempts.entry(stage).or_insert(0);
        *attempts += 1;
        *attempts
    }

    fn system_id(&self) -> Result<&str, StageFailure> {
        self.system_id
            .as_deref()
            .ok_or_else(|| StageFailure::new(FailureClass::StateAmbiguity, "no MAAS machine is known for the node"))
    }
}

fn display_evidence(evidence: &Evidence) -> String {
    match evidence {
        Evidence::Silent { quiet_for_ms, stall_window_ms } => {
            format!("no event and no status change for {quiet_for_ms} ms (stall window {stall_window_ms} ms)")
        }
        Evidence::LastEvent { text } => format!("last event: {text}"),
        Evidence::MacDrift(machine) => format!(
            "unknown machine {} enlisted with MAC {} on this node's BMC {}",
            machine.system_id, machine.mac, machine.bmc_address
        ),
        Evidence::ResolverServFail { host } => format!("the rack resolver answers SERVFAIL for {host}"),
    }
}

impl<C, M, R, K, H, S, J, G> OnboardPorts<'_, C, M, R, K, H, S, J, G>
where
    C: Clock,
    M: MaasApi,
    R: Resolver,
    K: SiteSecrets,
    H: Hub,
    S: Ssh,
    J: Journal,
    G: Signals,
{
    /// Runs the workflow (the next run of it, when the journal shows earlier ones) to completion or to a stop.
    pub async fn run_onboarding(&self, request: &OnboardRequest) -> OnboardOutcome {
        let workflow = request.workflow.as_str();
        let lines =
            self.journal.replay().await.unwrap_or_else(|error| panic!("onboarding journal unreadable: {error}"));
        let history =
            OnboardHistory::of(workflow, lines.iter().map(String::as_str)).unwrap_or_else(|error| panic!("{error}"));
        if let Some(system_id) = history.completed {
            return OnboardOutcome {
                workflow_state: WorkflowState::Completed,
                node_state: NodeState::Active,
                stage: None,
                class: None,
                evidence: Vec::new(),
                system_id: Some(system_id),
            };
        }
        // A workflow frozen for manual intervention, or cancelled, is not acted on (seed 000, section 2: "freeze
        // automation until operator resolves issue"): no run starts, nothing is written or called.
        if let Some(why) = halted(workflow, &lines) {
            return halted_outcome(why, history.last_stage, None);
        }
        let run = history.runs + 1;
        self.record(OnboardRecord::RunStarted { workflow: workflow.to_owned(), run }).await;
        let mut state = RunState {
            earlier_run_deployed: history.reached.contains(&OnboardingStage::DeployViaMaas),
            interrupted_after_deploy: history.interrupted_after(OnboardingStage::DeployViaMaas),
            ..RunState::default()
        };
        let mut index = 0;
        // A stage run off the main path before it resumes (the datasource recovery, before the deploy again).
        let mut detour: Option<OnboardingStage> = None;
        while let Some(stage) = detour.take().or_else(|| MAIN_STAGES.get(index).copied()) {
            // A freeze set while the run is under way stops it before its next stage starts.
            if let Some(why) = self.halted_now(workflow).await {
                return halted_outcome(why, Some(stage), state.system_id);
            }
            let attempt = state.next_attempt(stage);
            let system_id = state.system_id.clone();
            self.record(OnboardRecord::Checkpoint { workflow: workflow.to_owned(), run, stage, attempt, system_id })
                .await;
            self.emit(workflow, WorkflowEvent::StageStarted { stage: stage.as_str().into(), attempt: attempt.into() });
            let failure = match self.run_stage(request, stage, &mut state).await {
                Ok(()) => {
                    let adopted = std::mem::take(&mut state.adopted);
                    self.emit(workflow, WorkflowEvent::StageDone { stage: stage.as_str().into(), adopted });
                    if MAIN_STAGES.get(index) == Some(&stage) {
                        index += 1;
                    }
                    continue;
                }
                Err(failure) => failure,
            };
            let (stage, failure, attempt) = match (stage, failure.class) {
                // A failed deploy is classified from MAAS's events first (best effort); a datasource failure gets
                // its own bounded recovery (back to a clean deployable state, then deploy again).
                (OnboardingStage::WaitForDeployed, FailureClass::DeployCloudInitFailure) => {
                    let failure = self.classify_deploy_failure(request, &state, failure).await;
                    if failure.evidence.iter().any(|line| line.contains("datasource")) {
                        // The recovery's next attempt, which the detour will start if the matrix retries.
                        let stage = OnboardingStage::RecoverForDatasourceRetry;
                        (stage, failure, state.attempts.get(&stage).copied().unwrap_or(0) + 1)
                    } else {
                        (stage, failure, attempt)
                    }
                }
                _ => (stage, failure, attempt),
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
                        self.compensate(&mut state, compensation).await;
                    }
                    if stage == OnboardingStage::RecoverForDatasourceRetry {
                        detour = Some(stage);
                    }
                    let event = WorkflowEvent::Retrying {
                        stage: stage.as_str().into(),
                        attempt: attempt_next.into(),
                        delay_ms,
                    };
                    self.emit(workflow, event);
                    self.clock.sleep_ms(delay_ms).await;
                    index = MAIN_STAGES.iter().position(|s| *s == retry_from(stage)).unwrap_or(index);
                }
                Next::Continue { reason } => {
                    let adopted = reason == ContinueReason::AdoptObservedState;
                    self.emit(workflow, WorkflowEvent::StageDone { stage: stage.as_str().into(), adopted });
                    if MAIN_STAGES.get(index) == Some(&stage) {
                        index += 1;
                    }
                }
                Next::Stop(stop) => {
                    if let Some(compensation) = stop.compensation {
                        self.compensate(&mut state, compensation).await;
                    }
                    let record = OnboardRecord::Stopped {
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
                            evidence: failure.evidence.clone(),
                        },
                    );
                    return OnboardOutcome {
                        workflow_state: stop.workflow_state,
                        node_state: stop.node_state,
                        stage: Some(stage),
                        class: Some(failure.class),
                        evidence: failure.evidence,
                        system_id: state.system_id,
                    };
                }
                Next::Observe => unreachable!("decide_after makes the observations"),
            }
        }
        let system_id = state.system_id.clone().unwrap_or_default();
        self.record(OnboardRecord::Completed { workflow: workflow.to_owned(), run, system_id: system_id.clone() })
            .await;
        self.emit(workflow, WorkflowEvent::Completed { system_id: system_id.clone() });
        OnboardOutcome {
            workflow_state: WorkflowState::Completed,
            node_state: NodeState::Active,
            stage: None,
            class: None,
            evidence: Vec::new(),
            system_id: Some(system_id),
        }
    }

    /// Whether the journal now says the workflow is frozen or cancelled.
    async fn halted_now(&self, workflow: &str) -> Option<String> {
        let lines =
            self.journal.replay().await.unwrap_or_else(|error| panic!("onboarding journal unreadable: {error}"));
        halted(workflow, &lines)
    }

    fn emit(&self, workflow: &str, event: WorkflowEvent) {
        self.signals.emit(Signal::Onboarding { workflow: workflow.to_owned(), event });
    }

    async fn record(&self, record: OnboardRecord) {
        if let Err(error) = self.journal.append(&record.encode()).await {
            panic!("onboarding journal write failed: {error}");
        }
    }

    /// The decision after a failed attempt: the matrix's (or, under `legacy`, the shell's), with as many fresh
    /// observations as it asks for.
    async fn decide_after(
        &self,
        request: &OnboardRequest,
        history: &OnboardHistory,
        state: &RunState,
        stage: OnboardingStage,
        failure: &StageFailure,
        attempt: u32,
    ) -> Next {
        let mut ctx = DecideContext::new(NodeState::Enrolling);
        ctx.retry = request.retry;
        ctx.policy = request.site_policy;
        ctx.failed_runs = history.failed_retryable_runs;
        ctx.deploy_attempt_started = state.deploy_started;
        let stage_of = Stage::Onboarding(stage);
        let mut after = AfterFailure::new(ctx, |ctx: &DecideContext| match request.policy {
            OnboardingPolicy::Current => decide(stage_of, failure.class, attempt, ctx),
            OnboardingPolicy::Legacy => LegacyConfig::default().decide(stage_of, failure.class, attempt, ctx),
        });
        loop {
            match after.poll() {
                Next::Observe => after.handle_observed(self.observe(request, state, stage).await),
                next => return next,
            }
        }
    }

    /// A fresh read of the node's machine, judged against what `stage` expects.
    async fn observe(&self, request: &OnboardRequest, state: &RunState, stage: OnboardingStage) -> Observed {
        let Some(system_id) = &state.system_id else {
            return match self.find_own_machine(request).await {
                Ok(Some(_)) if stage == OnboardingStage::CreateOrFindInMaas => Observed::SatisfiesCheckpoint,
                Ok(_) => Observed::AsExpected,
                Err(_) => Observed::Stale,
            };
        };
        // One read of the machine list shows both this node's record and any stranger on its BMC.
        let Ok(machines) = self.maas.machines().await else { return Observed::Stale };
        // A second machine MAAS enlisted on this node's BMC means two records claim one node: ownership is unclear
        // whatever this record's status says (seed 000 section 7).
        if unknown_machine(request, system_id, &machines).is_some() {
            return Observed::Conflicting;
        }
        match machines.iter().find(|machine| machine.system_id == *system_id) {
            Some(machine) => judge(stage, &machine.status, state.deploy_started),
            // Deleted under the workflow: ownership is unclear.
            None => Observed::Conflicting,
        }
    }

    /// Runs a compensation, after a fresh read (section 7: refresh before destructive steps).
    async fn compensate(&self, state: &mut RunState, compensation: crate::matrix::Compensation) {
        use crate::matrix::Compensation as K;
        let Some(system_id) = state.system_id.clone() else { return };
        match compensation {
            K::ReleaseToReadyIfDeployStarted if !state.deploy_started => {}
            K::ReleaseToReadyIfDeployStarted | K::ReleaseToReady | K::AbortReleaseToCleanDeployableState => {
                // Refresh before the destructive call: abort what is in flight, release what is deployed.
                if let Ok(machine) = self.maas.machine(&system_id).await {
                    let _ = match machine.status {
                        MachineStatus::Deploying => self.maas.abort(&system_id).await.map(|_| ()),
                        MachineStatus::Deployed | MachineStatus::FailedDeployment | MachineStatus::Allocated => {
                            self.maas.release(&system_id, false).await.map(|_| ())
                        }
                        _ => Ok(()),
                    };
                }
                state.deploy_started = false;
            }
            // Interface links are re-made by the stage itself; the partial node row is the controller's own record
            // (this simulator keeps none); the decommission compensations do not apply to onboarding.
            K::UnlinkRelinkInterface
            | K::DeletePartialNodeRow
            | K::QuarantineOnFailedValidation
            | K::AbortMarkFixedNoEraseRelease
            | K::RevertToRetiredOnUninstallFailure => {}
        }
    }

    /// `classify_deploy_failure` (best effort): MAAS's recent events for the machine name the failure.
    async fn classify_deploy_failure(
        &self,
        request: &OnboardRequest,
        state: &RunState,
        mut failure: StageFailure,
    ) -> StageFailure {
        let workflow = request.workflow.as_str();
        self.emit(workflow, WorkflowEvent::StageStarted { stage: "classify_deploy_failure".into(), attempt: 1 });
        let stage = OnboardingStage::ClassifyDeployFailure.as_str();
        let events = match &state.system_id {
            Some(system_id) => self.maas.events(system_id, None).await,
            None => Ok(Vec::new()),
        };
        match events {
            Ok(events) => {
                for event in events.iter().take(5) {
                    let line = format!("{}: {} {}", event.level, event.text, event.description).to_lowercase();
                    failure.evidence.push(line);
                }
                self.emit(workflow, WorkflowEvent::StageDone { stage: stage.into(), adopted: false });
            }
            // Best effort (the matrix): the events cannot be read, so the failure stays the generic deploy failure.
            Err(error) => {
                let class = StageFailure::maas(&error, BMC).class;
                let error = format!("{error}; falling back to the generic deploy failure");
                self.emit(
                    workflow,
                    WorkflowEvent::StageFailed { stage: stage.into(), class: class.as_str().into(), error },
                );
            }
        }
        failure
    }

    /// The safe full rerun (section 7): a machine an earlier run of this workflow left in a deploy state (it stopped
    /// mid-deploy) is brought back to Ready before it is commissioned again, after a fresh read; one in any other
    /// state is left to `judge`.
    async fn release_earlier_deploy(&self, request: &OnboardRequest, state: &mut RunState) -> Result<(), StageFailure> {
        let system_id = state.system_id()?.to_owned();
        let machine = self.maas.machine(&system_id).await.map_err(|error| StageFailure::maas(&error, BMC))?;
        use MachineStatus as M;
        if !matches!(machine.status, M::Allocated | M::Deploying | M::Deployed | M::FailedDeployment) {
            return Ok(());
        }
        let value =
            format!("{} from an earlier run's deploy: back to Ready before commissioning", machine.status.name());
        self.emit(&request.workflow, WorkflowEvent::Observed { what: format!("machine {system_id}"), value });
        self.back_to_ready(request, state).await
    }

    /// A restarted controller's run after one that died past its deploy request: a machine Deploying or Deployed is
    /// that deploy, accepted by MAAS, and is adopted (`true`) rather than aborted or released and deployed again.
    /// Any other state is left to the safe full rerun (`false`).
    async fn adopt_interrupted_deploy(
        &self,
        request: &OnboardRequest,
        state: &mut RunState,
    ) -> Result<bool, StageFailure> {
        let system_id = state.system_id()?.to_owned();
        let machine = self.maas.machine(&system_id).await.map_err(|error| StageFailure::maas(&error, BMC))?;
        if !matches!(machine.status, MachineStatus::Deploying | MachineStatus::Deployed) {
            return Ok(false);
        }
        let value = format!("{} from the deploy of a run whose controller died: adopted", machine.status.name());
        self.emit(&request.workflow, WorkflowEvent::Observed { what: format!("machine {system_id}"), value });
        state.deploy_started = true;
        state.deploy_adopted = true;
        state.adopted = true;
        Ok(true)
    }

    /// Back to a clean deployable state (Ready): the work of `recover_for_datasource_retry` before the deploy is tried
    /// again, and of a rerun's release of its earlier deploy.
    /// Each destructive call follows the read it acts on; a machine gone from MAAS is an ambiguity (whose is it
    /// now?), a region that stops answering is transient, and a machine that will not come back to Ready within the
    /// deploy bound is the deploy failure it started from.
    async fn back_to_ready(&self, request: &OnboardRequest, state: &mut RunState) -> Result<(), StageFailure> {
        let system_id = state.system_id()?.to_owned();
        state.deploy_started = false;
        let deadline_ms = self.clock.monotonic_ms() + DEPLOY_WAIT_MS;
        let mut read_failures = 0;
        while self.clock.monotonic_ms() < deadline_ms {
            let acted = match self.maas.machine(&system_id).await {
                Ok(machine) if machine.status == MachineStatus::Ready => return Ok(()),
                Ok(machine)
                    if matches!(
                        machine.status,
                        MachineStatus::Deployed | MachineStatus::FailedDeployment | MachineStatus::Allocated
                    ) =>
                {
                    self.maas.release(&system_id, false).await.map(|_| ())
                }
                Ok(machine) if machine.status == MachineStatus::Deploying => {
                    self.maas.abort(&system_id).await.map(|_| ())
                }
                Ok(_) => Ok(()),
                Err(error) => Err(error),
            };
            match acted {
                Ok(()) => read_failures = 0,
                Err(error @ MaasError::Http { status: 404, .. }) => return Err(StageFailure::maas(&error, BMC)),
                Err(error) => {
                    read_failures += 1;
                    if read_failures >= READ_FAILURES_MAX {
                        return Err(StageFailure::maas(&error, BMC));
                    }
                }
            }
            self.clock.sleep_ms(request.poll_ms).await;
        }
        Err(StageFailure::new(
            FailureClass::DeployCloudInitFailure,
            format!("machine {system_id} not back to Ready within {DEPLOY_WAIT_MS} ms"),
        ))
    }

    /// The read before an irreversible call (commission, deploy): `false` when the machine's observed state already
    /// satisfies `stage` (adopt it), `true` when the workflow is to act, `state_ambiguity` when the machine is
    /// somewhere this workflow did not put it.
    async fn refreshed_needs_action(&self, stage: OnboardingStage, state: &mut RunState) -> Result<bool, StageFailure> {
        let system_id = state.system_id()?;
        let machine = self.maas.machine(system_id).await.map_err(|error| StageFailure::maas(&error, BMC))?;
        match judge(stage, &machine.status, state.deploy_started) {
            Observed::SatisfiesCheckpoint => {
                state.adopted = true;
                Ok(false)
            }
            Observed::AsExpected | Observed::Stale => Ok(true),
            Observed::Conflicting => Err(StageFailure::new(
                FailureClass::StateAmbiguity,
                format!(
                    "machine {system_id} is {} in MAAS, which {} did not expect",
                    machine.status.name(),
                    stage.as_str()
                ),
            )),
        }
    }

    /// The discovery poll after a create: within the stall window the machine's events show either MAAS's power
    /// action failing (`bmc_power_failure`) or the machine's PXE boot; a stranger MAAS enlisted on this node's BMC
    /// means the node booted with MACs MAAS does not know (`state_ambiguity`); silence is `pxe_discovery_failure`.
    async fn confirm_discovery(&self, request: &OnboardRequest, system_id: &str) -> Result<(), StageFailure> {
        let started_ms = self.clock.monotonic_ms();
        loop {
            if let Ok(events) = self.maas.events(system_id, None).await {
                if let Some(failure) = power_failure(&events) {
                    return Err(failure);
                }
                if events.iter().any(|event| event.text == "Performing PXE boot") {
                    return Ok(());
                }
            }
            if let Some(stranger) = self.find_unknown_machine(request, system_id).await {
                let evidence = display_evidence(&Evidence::MacDrift(stranger));
                let mut failure = StageFailure::new(
                    FailureClass::StateAmbiguity,
                    format!("machine {system_id} never PXE-booted; another record claims its BMC"),
                );
                failure.evidence.push(evidence);
                return Err(failure);
            }
            let waited_ms = self.clock.monotonic_ms().saturating_sub(started_ms);
            if waited_ms >= request.stall_window_ms {
                let mut failure = StageFailure::new(
                    FailureClass::PxeDiscoveryFailure,
                    format!("machine {system_id} powered on but made no PXE request within {waited_ms} ms"),
                );
                failure.evidence.push(format!("no \"Performing PXE boot\" event for {system_id} in {waited_ms} ms"));
                return Err(failure);
            }
            self.clock.sleep_ms(request.poll_ms).await;
        }
    }

    /// The node's own machine in MAAS: the one that carries its registered PXE MAC.
    async fn find_own_machine(&self, request: &OnboardRequest) -> Result<Option<Machine>, MaasError> {
        let mac = request.node.pxe_mac.to_lowercase();
        Ok(self.maas.machines().await?.into_iter().find(|machine| machine.macs.contains(&mac)))
    }

    /// A machine MAAS enlisted (NEW) on this node's BMC that is not the node's own record: the node booted with
    /// MACs MAAS does not know (seed 001's MAC drift).
    async fn find_unknown_machine(&self, request: &OnboardRequest, own: &str) -> Option<UnknownMachine> {
        let machines = self.maas.machines().await.ok()?;
        unknown_machine(request, own, &machines)
    }

    /// One attempt of one stage.
    async fn run_stage(
        &self,
        request: &OnboardRequest,
        stage: OnboardingStage,
        state: &mut RunState,
    ) -> Result<(), StageFailure> {
        use OnboardingStage as S;
        let workflow = request.workflow.as_str();
        match stage {
            S::LoadSiteConfig => {
                // Zero-cost reads first, before any mutation: the site's configuration, the region (its subnets and
                // VLAN MTUs), and whether the nodes' resolver answers for the metadata host.
                let site = self.secrets.site_config().await.map_err(|error| StageFailure::secrets(&error))?;
                if !site.enabled {
                    return Err(StageFailure::new(FailureClass::InputConfigError, "the site is disabled"));
                }
                let subnets = self.maas.subnets().await.map_err(|error| StageFailure::maas(&error, BMC))?;
                for subnet in &subnets {
                    let value = format!("{} mtu {}", subnet.cidr, subnet.mtu);
                    self.emit(workflow, WorkflowEvent::Observed { what: format!("vlan {}", subnet.vlan_vid), value });
                }
                for vid in [site.pxe_vlan_vid, site.roce_vlan_vid] {
                    if !subnets.iter().any(|subnet| subnet.vlan_vid == vid) {
                        let error = format!("no subnet on vlan {vid}, which the site configuration names");
                        return Err(StageFailure::new(FailureClass::SiteCapabilityMissing, error));
                    }
                }
                let answer = self.resolver.resolve(&site.metadata_host).await;
                let value = match &answer {
                    Ok(DnsAnswer::Address(address)) => address.clone(),
                    Ok(DnsAnswer::NxDomain) => "NXDOMAIN".to_owned(),
                    Ok(DnsAnswer::ServFail) => "SERVFAIL".to_owned(),
                    Err(error) => format!("no answer ({error})"),
                };
                self.emit(
                    workflow,
                    WorkflowEvent::Observed { what: format!("resolver {}", site.metadata_host), value: value.clone() },
                );
                match answer {
                    Ok(DnsAnswer::Address(_)) => {}
                    Ok(_) if request.policy == OnboardingPolicy::Current => {
                        // A node that cannot resolve the metadata host boots to a login prompt and never reports:
                        // commissioning cannot succeed, so nothing is started.
                        let mut failure = StageFailure::new(
                            FailureClass::SiteCapabilityMissing,
                            format!("the rack resolver answers {value} for the metadata host {}", site.metadata_host),
                        );
                        failure.evidence.push(format!("the rack resolver answers {value} for {}", site.metadata_host));
                        return Err(failure);
                    }
                    Ok(_) => {}
                    Err(error) => return Err(StageFailure::new(FailureClass::UpstreamTransient, error.to_string())),
                }
                state.metadata_host = Some(site.metadata_host);
                state.pxe_vlan_vid = site.pxe_vlan_vid;
                state.roce_vlan_vid = site.roce_vlan_vid;
                Ok(())
            }
            S::ResolvePowerCredentials => {
                let credential = self
                    .secrets
                    .power_credential(&request.node.name)
                    .await
                    .map_err(|error| StageFailure::secrets(&error))?;
                state.power = Some(credential);
                Ok(())
            }
            S::CreateOrFindInMaas => {
                if let Some(machine) =
                    self.find_own_machine(request).await.map_err(|error| StageFailure::maas(&error, BMC))?
                {
                    state.system_id = Some(machine.system_id);
                    return Ok(());
                }
                let Some(power) = &state.power else {
                    return Err(StageFailure::new(FailureClass::InputConfigError, "no power credential resolved"));
                };
                let new = NewMachine {
                    hostname: request.node.hostname.clone(),
                    pxe_mac: request.node.pxe_mac.to_lowercase(),
                    power_address: request.node.bmc_address.clone(),
                    power_user: power.user.clone(),
                    power_password: power.password.clone(),
                };
                let machine = self.maas.create_machine(&new).await.map_err(|error| StageFailure::maas(&error, BMC))?;
                state.system_id = Some(machine.system_id.clone());
                // MAAS commissions a machine an admin creates, at once: the discovery poll sees it power on and
                // PXE-boot (the shell of `legacy` did not look).
                if request.policy == OnboardingPolicy::Current {
                    self.confirm_discovery(request, &machine.system_id).await?;
                }
                Ok(())
            }
            S::CommissionNode => {
                // A machine already commissioning (MAAS commissions a machine it just created) or past it is
                // adopted, not commissioned again.
                let system_id = state.system_id()?.to_owned();
                if state.earlier_run_deployed && !state.deploy_started {
                    if std::mem::take(&mut state.interrupted_after_deploy)
                        && self.adopt_interrupted_deploy(request, state).await?
                    {
                        return Ok(());
                    }
                    self.release_earlier_deploy(request, state).await?;
                }
                if !self.refreshed_needs_action(stage, state).await? {
                    return Ok(());
                }
                self.maas.commission(&system_id).await.map_err(|error| StageFailure::maas(&error, BMC))?;
                // MAAS answers before its power action ends; a failed one is an ERROR event of its own.
                match self.maas.events(&system_id, None).await {
                    Ok(events) => power_failure(&events).map_or(Ok(()), Err),
                    Err(_) => Ok(()),
                }
            }
            S::WaitForReady => {
                if state.deploy_adopted && state.deploy_started {
                    // Commissioning ended before the dead controller's deploy: the machine is past Ready.
                    state.adopted = true;
                    return Ok(());
                }
                let system_id = state.system_id()?.to_owned();
                self.wait_for(request, state, &system_id, stage, &[MachineStatus::Ready], COMMISSION_WAIT_MS).await?;
                Ok(())
            }
            S::ConfigureStorage => {
                let system_id = state.system_id()?.to_owned();
                let disks = self.maas.disks(&system_id).await.map_err(|error| StageFailure::maas(&error, BMC))?;
                let Some(disk) = disks.iter().find(|disk| disk.model.contains(&request.node.boot_disk_model)) else {
                    let found: Vec<&str> = disks.iter().map(|disk| disk.model.as_str()).collect();
                    return Err(StageFailure::new(
                        FailureClass::HardwareMismatch,
                        format!("no {} boot disk among {}", request.node.boot_disk_model, found.join(", ")),
                    ));
                };
                if !disk.boot {
                    self.maas
                        .set_boot_disk(&system_id, disk.id)
                        .await
                        .map_err(|error| StageFailure::maas(&error, BMC))?;
                }
                Ok(())
            }
            S::ApplyRocePhase2 | S::EnsurePxeInterfaceAuto => {
                let system_id = state.system_id()?.to_owned();
                let interfaces =
                    self.maas.interfaces(&system_id).await.map_err(|error| StageFailure::maas(&error, BMC))?;
                let subnets = self.maas.subnets().await.map_err(|error| StageFailure::maas(&error, BMC))?;
                let (wanted, vid): (Vec<_>, u16) = if stage == S::ApplyRocePhase2 {
                    (interfaces.iter().filter(|i| i.roce).collect(), state.roce_vlan_vid)
                } else {
                    // The boot interface is the one with the node's PXE MAC, and it must be on the PXE VLAN.
                    let pxe_mac = request.node.pxe_mac.to_lowercase();
                    let boot: Vec<_> = interfaces.iter().filter(|i| i.mac.to_lowercase() == pxe_mac).collect();
                    if let Some(interface) = boot.first().filter(|i| i.vlan_vid != Some(state.pxe_vlan_vid)) {
                        let on = interface.vlan_vid.map_or("no VLAN".to_owned(), |vid| format!("vlan {vid}"));
                        let error = format!(
                            "the PXE interface {} ({pxe_mac}) is on {on}, not the PXE vlan {}",
                            interface.name, state.pxe_vlan_vid
                        );
                        return Err(StageFailure::new(FailureClass::HardwareMismatch, error));
                    }
                    (boot, state.pxe_vlan_vid)
                };
                if wanted.is_empty() {
                    let what = if stage == S::ApplyRocePhase2 { "RoCE interface" } else { "PXE interface" };
                    return Err(StageFailure::new(FailureClass::HardwareMismatch, format!("no {what} found")));
                }
                if stage == S::ApplyRocePhase2 && wanted.len() < request.node.roce_nics as usize {
                    let error = format!(
                        "MAAS found {} RoCE interfaces; the node's inventory lists {}",
                        wanted.len(),
                        request.node.roce_nics
                    );
                    return Err(StageFailure::new(FailureClass::HardwareMismatch, error));
                }
                let Some(subnet) = subnets.iter().find(|subnet| subnet.vlan_vid == vid) else {
                    return Err(StageFailure::new(FailureClass::HardwareMismatch, format!("no subnet on vlan {vid}")));
                };
                for interface in wanted.into_iter().filter(|interface| !interface.auto_linked) {
                    self.maas
                        .link_subnet_auto(&system_id, interface.id, subnet.id)
                        .await
                        .map_err(|error| StageFailure::maas(&error, BMC))?;
                }
                Ok(())
            }
            S::RenderCloudInit => {
                let token = self
                    .secrets
                    .bootstrap_token(&request.node.name, request.bootstrap_token_ttl_ms)
                    .await
                    .map_err(|error| StageFailure::secrets(&error))?;
                let metadata_host = state.metadata_host.clone().unwrap_or_default();
                state.user_data = Some(Secret::new(format!(
                    "#cloud-config\nfleetsim_node: {}\nfleetsim_metadata_host: {metadata_host}\nfleetsim_bootstrap_token: {}\n",
                    request.node.name,
                    token.expose()
                )));
                Ok(())
            }
            S::DeployViaMaas => {
                let system_id = state.system_id()?.to_owned();
                if !self.refreshed_needs_action(stage, state).await? {
                    return Ok(());
                }
                let Some(user_data) = &state.user_data else {
                    return Err(StageFailure::new(FailureClass::InputConfigError, "no cloud-init rendered"));
                };
                self.maas.deploy(&system_id, user_data, true).await.map_err(|error| match error {
                    // "Failed to render preseed: …": what MAAS would install from cannot be built.
                    MaasError::Http { status: 400, .. } => {
                        StageFailure::new(FailureClass::DeployCloudInitFailure, error.to_string())
                    }
                    error => StageFailure::maas(&error, BMC),
                })?;
                state.deploy_started = true;
                Ok(())
            }
            S::WaitForDeployed => {
                let system_id = state.system_id()?.to_owned();
                self.wait_for(request, state, &system_id, stage, &[MachineStatus::Deployed], DEPLOY_WAIT_MS).await?;
                Ok(())
            }
            S::EnsureHardwareSyncConfigured => {
                let system_id = state.system_id()?.to_owned();
                let machine = self.maas.machine(&system_id).await.map_err(|error| StageFailure::maas(&error, BMC))?;
                if !machine.enable_hw_sync {
                    return Err(StageFailure::new(
                        FailureClass::HardwareSyncFailure,
                        "hardware sync is not enabled on the machine",
                    ));
                }
                // The seed over SSH. A freshly deployed machine's host key was made at its first boot: it is learnt
                // here (trust on first use), not checked against an inventory.
                let endpoint = Endpoint { node: request.node.name.clone(), host_key: String::new() };
                let attempt = state.attempts.get(&stage).copied().unwrap_or(1);
                let operation_id = format!("{workflow}/hw-sync-seed/{system_id}/{attempt}");
                match self.ssh.run(&endpoint, SshRequest::SeedHardwareSync { operation_id }).await {
                    Ok(_) => Ok(()),
                    Err(SshError::Refused(error)) => Err(StageFailure::new(
                        FailureClass::HardwareSyncFailure,
                        format!("the hardware-sync seed failed on {}: {error}", request.node.name),
                    )),
                    Err(error @ (SshError::Transport(_) | SshError::HostKeyMismatch { .. })) => Err(StageFailure::new(
                        FailureClass::PostDeployConnectivityFailure,
                        format!("no SSH to the deployed machine {}: {error}", request.node.name),
                    )),
                }
            }
            S::WaitForHardwareSyncHealthy => {
                let system_id = state.system_id()?.to_owned();
                let deadline_ms = self.clock.monotonic_ms() + HW_SYNC_HEALTH_WAIT_MS;
                let mut read_failures = 0;
                loop {
                    match self.maas.machine(&system_id).await {
                        Ok(machine) if machine.hw_sync_healthy => return Ok(()),
                        Ok(_) => read_failures = 0,
                        // The sync fields cannot be read: that is MAAS's trouble, not the sync's.
                        Err(error) => {
                            read_failures += 1;
                            if read_failures >= READ_FAILURES_MAX || self.clock.monotonic_ms() >= deadline_ms {
                                return Err(StageFailure::maas(&error, BMC));
                            }
                        }
                    }
                    if self.clock.monotonic_ms() >= deadline_ms {
                        return Err(StageFailure::new(
                            FailureClass::HardwareSyncFailure,
                            format!("hardware sync not healthy within {HW_SYNC_HEALTH_WAIT_MS} ms"),
                        ));
                    }
                    self.clock.sleep_ms(request.poll_ms).await;
                }
            }
            S::WaitForAgentEnrollment => {
                let system_id = state.system_id()?.to_owned();
                let deadline_ms = self.clock.monotonic_ms() + AGENT_ENROLLMENT_WAIT_MS;
                let mut read_failures = 0;
                loop {
                    match self.hub.read_heartbeats().await {
                        Ok(snapshot) => {
                            read_failures = 0;
                            if snapshot.instances.iter().any(|row| row.instance == request.node.name && row.registered)
                            {
                                return Ok(());
                            }
                        }
                        Err(error) => {
                            read_failures += 1;
                            if read_failures >= READ_FAILURES_MAX {
                                let error = format!("the hub cannot be read: {error}");
                                return Err(StageFailure::new(FailureClass::UpstreamTransient, error));
                            }
                        }
                    }
                    // The machine the agent will speak for must still be this workflow's deployed machine.
                    match self.maas.machine(&system_id).await {
                        Ok(machine) if machine.status != MachineStatus::Deployed => {
                            let error = format!(
                                "machine {system_id} is {} in MAAS while its agent is awaited",
                                machine.status.name()
                            );
                            return Err(StageFailure::new(FailureClass::StateAmbiguity, error));
                        }
                        Err(error @ MaasError::Http { status: 404, .. }) => {
                            return Err(StageFailure::maas(&error, BMC));
                        }
                        Ok(_) | Err(_) => {}
                    }
                    if self.clock.monotonic_ms() >= deadline_ms {
                        return Err(StageFailure::new(
                            FailureClass::AgentEnrollmentFailure,
                            format!("no agent {} enrolled within {AGENT_ENROLLMENT_WAIT_MS} ms", request.node.name),
                        ));
                    }
                    self.clock.sleep_ms(request.poll_ms).await;
                }
            }
            S::RecoverForDatasourceRetry => self.back_to_ready(request, state).await,
            // Run inside the handling of a failed deploy, never as a stage of its own.
            S::ClassifyDeployFailure => Ok(()),
        }
    }

    /// Waits for `want`, reading the machine and its events every `poll_ms`. Under `current`, a silence longer
    /// than the stall window is classified at once from evidence; under `legacy`, only MAAS's verdict (or the
    /// stage's bound) ends the wait.
    async fn wait_for(
        &self,
        request: &OnboardRequest,
        state: &RunState,
        system_id: &str,
        stage: OnboardingStage,
        want: &[MachineStatus],
        bound_ms: u64,
    ) -> Result<Machine, StageFailure> {
        let workflow = request.workflow.as_str();
        let started_ms = self.clock.monotonic_ms();
        let mut progress = ProgressEvidence::started_at(started_ms);
        let classifier = StallClassifier::new(request.stall_window_ms);
        let mut last_status: Option<MachineStatus> = None;
        let mut after: Option<u64> = None;
        let mut read_failures = 0;
        let mut seen: BTreeSet<u64> = BTreeSet::new();
        loop {
            let now_ms = self.clock.monotonic_ms();
            match self.maas.machine(system_id).await {
                Ok(machine) => {
                    read_failures = 0;
                    if last_status.as_ref() != Some(&machine.status) {
                        if last_status.is_some() {
                            progress.last_status_change_ms = Some(now_ms);
                        }
                        last_status = Some(machine.status.clone());
                    }
                    if let Ok(events) = self.maas.events(system_id, after).await {
                        let fresh: Vec<_> = events.iter().filter(|event| seen.insert(event.id)).collect();
                        if let Some(newest) = fresh.first() {
                            progress.last_event_ms = Some(now_ms);
                            progress.last_event = Some(newest.text.clone());
                        }
                        after = events.iter().map(|event| event.id).max().or(after);
                    }
                    if want.contains(&machine.status) {
                        return Ok(machine);
                    }
                    match machine.status {
                        MachineStatus::FailedCommissioning => {
                            // Section 6: "upstream_transient or hardware_mismatch depending on MAAS status": a
                            // failed script is the hardware's; a timeout is MAAS giving up on a silent node.
                            let class = if machine.status_message.to_lowercase().contains("timed out") {
                                FailureClass::UpstreamTransient
                            } else {
                                FailureClass::HardwareMismatch
                            };
                            let mut failure =
                                StageFailure::new(class, format!("commissioning failed: {}", machine.status_message));
                            failure
                                .evidence
                                .extend(progress.last_event.iter().map(|text| format!("last event: {text}")));
                            return Err(failure);
                        }
                        MachineStatus::FailedDeployment => {
                            let error = format!("deployment failed: {}", machine.status_message);
                            return Err(StageFailure::new(FailureClass::DeployCloudInitFailure, error));
                        }
                        MachineStatus::Broken | MachineStatus::New => {
                            let error = format!(
                                "machine {system_id} became {} while the workflow waited",
                                machine.status.name()
                            );
                            return Err(StageFailure::new(FailureClass::StateAmbiguity, error));
                        }
                        _ => {}
                    }
                }
                Err(MaasError::Http { status: 404, message, .. }) => {
                    let error =
                        format!("machine {system_id} was deleted from MAAS while the workflow waited: {message}");
                    return Err(StageFailure::new(FailureClass::StateAmbiguity, error));
                }
                Err(error) => {
                    read_failures += 1;
                    if read_failures >= READ_FAILURES_MAX {
                        return Err(StageFailure::maas(&error, BMC));
                    }
                }
            }
            progress.now_ms = now_ms;
            if request.policy == OnboardingPolicy::Current && progress.quiet_for_ms() > request.stall_window_ms {
                // Silent past the window: gather the evidence, then classify (slow is not silent).
                progress.unknown_machine = self.find_unknown_machine(request, system_id).await;
                if let Some(host) = &state.metadata_host {
                    progress.metadata_resolver = match self.resolver.resolve(host).await {
                        Ok(DnsAnswer::Address(_)) => ResolverProbe::Answered,
                        Ok(_) | Err(_) => ResolverProbe::ServFail { host: host.clone() },
                    };
                }
                if let StallVerdict::Stalled { class, evidence } = classifier.classify(&progress) {
                    let evidence: Vec<String> = evidence.iter().map(display_evidence).collect();
                    self.emit(
                        workflow,
                        WorkflowEvent::Stalled {
                            stage: stage.as_str().into(),
                            class: class.as_str().into(),
                            evidence: evidence.clone(),
                        },
                    );
                    return Err(StageFailure { class, error: format!("{} stalled", stage.as_str()), evidence });
                }
            }
            if now_ms.saturating_sub(started_ms) >= bound_ms {
                let class = match stage {
                    OnboardingStage::WaitForDeployed => FailureClass::DeployCloudInitFailure,
                    _ => FailureClass::UpstreamTransient,
                };
                return Err(StageFailure::new(class, format!("{} not reached within {bound_ms} ms", want[0].name())));
            }
            self.clock.sleep_ms(request.poll_ms).await;
        }
    }
}

/// Why the journal forbids acting on `workflow` (frozen or cancelled), if it does.
fn halted(workflow: &str, lines: &[String]) -> Option<String> {
    crate::recovery::halted(workflow, lines.iter().map(String::as_str)).unwrap_or_else(|error| panic!("{error}"))
}

/// The outcome of a run that did not act: the workflow rests for a person.
fn halted_outcome(why: String, stage: Option<OnboardingStage>, system_id: Option<String>) -> OnboardOutcome {
    OnboardOutcome {
        workflow_state: WorkflowState::FailedManualIntervention,
        node_state: NodeState::Enrolling,
        stage,
        class: None,
        evidence: vec![why],
        system_id,
    }
}

/// A NEW machine in `machines` that claims the node's BMC and is not its own record `own`.
fn unknown_machine(request: &OnboardRequest, own: &str, machines: &[Machine]) -> Option<UnknownMachine> {
    machines.iter().find_map(|machine| {
        let ours = machine.power_address.as_deref() == Some(request.node.bmc_address.as_str());
        (ours && machine.system_id != own && machine.status == MachineStatus::New).then(|| UnknownMachine {
            mac: machine.macs.first().cloned().unwrap_or_default(),
            system_id: machine.system_id.clone(),
            bmc_address: request.node.bmc_address.clone(),
        })
    })
}

/// A failed power action among the newest events, up to the action that started it ("Commissioning", "Deploying").
fn power_failure(events: &[crate::ports::site::MaasEvent]) -> Option<StageFailure> {
    events
        .iter()
        .take_while(|event| event.text != "Commissioning" && event.text != "Deploying")
        .find(|event| event.level == "ERROR" && event.text.starts_with("Failed to power"))
        .map(|event| {
            let mut failure = StageFailure::new(
                FailureClass::BmcPowerFailure,
                format!("MAAS could not power the machine: {} {}", event.text, event.description),
            );
            failure.evidence.push(format!("{}: {} {}", event.level, event.text, event.description));
            failure
        })
}

/// Where a retry of `stage` re-enters the run: a wait is retried by redoing what it waits for.
fn retry_from(stage: OnboardingStage) -> OnboardingStage {
    match stage {
        OnboardingStage::WaitForReady => OnboardingStage::CommissionNode,
        OnboardingStage::WaitForDeployed | OnboardingStage::RecoverForDatasourceRetry => OnboardingStage::DeployViaMaas,
        other => other,
    }
}

/// How a machine's status compares with what `stage` expects.
fn judge(stage: OnboardingStage, status: &MachineStatus, deploy_started: bool) -> Observed {
    use MachineStatus as M;
    use OnboardingStage as S;
    match stage {
        S::CommissionNode | S::WaitForReady => match status {
            M::Commissioning if stage == S::CommissionNode => Observed::SatisfiesCheckpoint,
            M::Ready => Observed::SatisfiesCheckpoint,
            M::New | M::FailedCommissioning | M::Commissioning => Observed::AsExpected,
            // Allocated, deployed or broken before this workflow deployed it: someone else advanced it.
            _ => Observed::Conflicting,
        },
        S::DeployViaMaas | S::WaitForDeployed => match status {
            M::Deployed => Observed::SatisfiesCheckpoint,
            M::Deploying if stage == S::DeployViaMaas && deploy_started => Observed::SatisfiesCheckpoint,
            M::Ready | M::Allocated | M::Deploying | M::FailedDeployment => Observed::AsExpected,
            _ => Observed::Conflicting,
        },
        _ => match status {
            M::Broken => Observed::Conflicting,
            _ => Observed::AsExpected,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retried_wait_redoes_what_it_waits_for() {
        assert_eq!(retry_from(OnboardingStage::WaitForReady), OnboardingStage::CommissionNode);
        assert_eq!(retry_from(OnboardingStage::WaitForDeployed), OnboardingStage::DeployViaMaas);
        assert_eq!(retry_from(OnboardingStage::RecoverForDatasourceRetry), OnboardingStage::DeployViaMaas);
        assert_eq!(retry_from(OnboardingStage::ConfigureStorage), OnboardingStage::ConfigureStorage);
    }

    #[test]
    fn observed_state_is_adopted_when_it_satisfies_the_stage_and_conflicts_when_advanced_elsewhere() {
        use MachineStatus as M;
        assert_eq!(judge(OnboardingStage::CommissionNode, &M::Commissioning, false), Observed::SatisfiesCheckpoint);
        assert_eq!(judge(OnboardingStage::WaitForReady, &M::Ready, false), Observed::SatisfiesCheckpoint);
        assert_eq!(judge(OnboardingStage::CommissionNode, &M::Deployed, false), Observed::Conflicting);
        assert_eq!(judge(OnboardingStage::CommissionNode, &M::FailedCommissioning, false), Observed::AsExpected);
        assert_eq!(judge(OnboardingStage::DeployViaMaas, &M::Deploying, true), Observed::SatisfiesCheckpoint);
        assert_eq!(judge(OnboardingStage::DeployViaMaas, &M::Deploying, false), Observed::AsExpected);
        assert_eq!(judge(OnboardingStage::WaitForDeployed, &M::New, true), Observed::Conflicting);
    }
}
