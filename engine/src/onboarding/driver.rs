//! The onboarding workflow's driver: the 16 stages of the recovery matrix run against the `MaasApi`, `Resolver`,
//! `SiteSecrets`, `Hub`, `Ssh`, `Clock`, `Journal` and `Signals` ports. The driver only awaits the ports and applies
//! what the pure code says: [`crate::onboarding::stages`] walks the stages, [`crate::onboarding::judge`] judges each
//! answer (done, adopted, or failed with which class and evidence), and [`crate::workflow::decide`] decides after a
//! failure.
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

use serde::{Deserialize, Serialize};

use crate::matrix::{Compensation, FailureClass, NodeState, OnboardingStage, Stage, WorkflowState};
use crate::onboarding::judge::{self, MachineWait, ToReady};
use crate::onboarding::legacy::LegacyConfig;
use crate::onboarding::record::{OnboardHistory, OnboardRecord};
pub use crate::onboarding::rules::Matrix;
use crate::onboarding::rules::Rules;
use crate::onboarding::stages::StageCursor;
use crate::onboarding::stall::UnknownMachine;
use crate::ports::events::{Evidence, RecoveryWork, WorkOutcome, WorkflowEvent};
use crate::ports::site::{
    MaasApi, MaasError, Machine, MachineStatus, NewMachine, Resolver, SiteSecrets, StageTimeouts,
};
use crate::ports::{Clock, Endpoint, Hub, Journal, SecretsError, Signal, Signals, Ssh, SshRequest};
use crate::secret::Secret;
use crate::workflow::after_failure::AfterFailure;
use crate::workflow::failure::{ReadFailures, StageFailure, known_machine, site_enabled};
use crate::workflow::{ContinueReason, DecideContext, Decision, Observed, RetryPolicy, SitePolicy, decide};

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
    /// The decisions; production passes [`Matrix`].
    pub rules: &'a dyn Rules,
}

/// What a run has learnt so far.
#[derive(Default)]
struct RunState {
    system_id: Option<String>,
    metadata_host: Option<String>,
    pxe_vlan_vid: u16,
    roce_vlan_vid: u16,
    /// Section 6's timeouts as `load_site_config` read them (the matrix's defaults until it has).
    timeouts: StageTimeouts,
    /// `apply_roce_phase2`'s policy as the site sets it.
    roce_mandatory: bool,
    power: Option<crate::ports::site::PowerCredential>,
    user_data: Option<Secret>,
    /// A bootstrap token was asked for and no answer came: the store may hold one nobody will redeem (the matrix's
    /// "partial node row"), until `delete_partial_node_row` revokes it.
    partial_node_row: bool,
    /// A deploy was sent (whatever came back): MAAS may have allocated or begun deploying the machine.
    deploy_started: bool,
    /// An earlier run of this workflow deployed (or began to): the safe full rerun releases a machine it left in a
    /// deploy state before commissioning it again.
    earlier_run_deployed: bool,
    /// The last run died after it reached the deploy (see `OnboardHistory::interrupted_after`); cleared once
    /// `commission_node` has looked.
    interrupted_after_deploy: bool,
    /// This run adopted the deploy a dead controller sent: the commissioning wait is already behind the machine.
    deploy_adopted: bool,
    /// A failure of this run named an unhealthy region workflow service: a commissioning MAAS accepted meanwhile may
    /// never have started.
    region_workflow_unhealthy: bool,
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

    fn system_id(&self) -> Result<String, StageFailure> {
        known_machine(self.system_id.as_deref()).map(str::to_owned)
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
        let lines = self
            .journal
            .replay_subject(workflow)
            .await
            .unwrap_or_else(|error| panic!("onboarding journal unreadable: {error}"));
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
        let mut cursor = StageCursor::default();
        while let Some(stage) = cursor.poll_stage() {
            // A freeze set while the run is under way stops it before its next stage starts.
            if let Some(why) = self.halted_now(workflow).await {
                return halted_outcome(why, Some(stage), state.system_id);
            }
            let attempt = state.next_attempt(stage);
            let system_id = state.system_id.clone();
            self.record(OnboardRecord::Checkpoint { workflow: workflow.to_owned(), run, stage, attempt, system_id })
                .await;
            self.emit(
                workflow,
                WorkflowEvent::StageStarted { stage: Stage::Onboarding(stage), attempt: attempt.into() },
            );
            let failure = match self.run_stage(request, stage, &mut state).await {
                Ok(()) => {
                    let adopted = std::mem::take(&mut state.adopted);
                    self.emit(workflow, WorkflowEvent::StageDone { stage: Stage::Onboarding(stage), adopted });
                    cursor.handle_done(stage);
                    continue;
                }
                Err(failure) => failure,
            };
            state.region_workflow_unhealthy |=
                failure.evidence.iter().any(|evidence| matches!(evidence, Evidence::RegionService { .. }));
            // A failed deploy is classified from MAAS's events first (best effort); a datasource failure gets its own
            // bounded recovery (back to a clean deployable state, then deploy again), whose next attempt the detour
            // starts if the matrix retries.
            let (stage, failure, attempt) = if judge::classifies_deploy_failure(stage, failure.class) {
                let failure = self.classify_deploy_failure(request, &state, failure).await;
                if judge::is_datasource_failure(&failure) {
                    let stage = OnboardingStage::RecoverForDatasourceRetry;
                    (stage, failure, state.attempts.get(&stage).copied().unwrap_or(0) + 1)
                } else {
                    (stage, failure, attempt)
                }
            } else {
                (stage, failure, attempt)
            };
            if let Some(timeout) = failure.timeout {
                let bound_ms = state.timeouts.of(timeout);
                self.emit(workflow, WorkflowEvent::TimedOut { stage: Stage::Onboarding(stage), timeout, bound_ms });
            }
            self.emit(
                workflow,
                WorkflowEvent::StageFailed {
                    stage: Stage::Onboarding(stage),
                    class: failure.class,
                    error: failure.error.clone(),
                },
            );
            match self.decide_after(request, &history, &state, stage, &failure, attempt).await {
                Decision::Retry { attempt_next, delay_ms, compensation, .. } => {
                    if let Some(compensation) = compensation {
                        self.compensate(request, run, &mut state, stage, compensation).await;
                    }
                    if judge::reseeds_before_retry(stage, failure.class) {
                        self.reseed(request, run, &state, stage).await;
                    }
                    let event = WorkflowEvent::Retrying {
                        stage: Stage::Onboarding(stage),
                        attempt: attempt_next.into(),
                        delay_ms,
                    };
                    self.emit(workflow, event);
                    self.clock.sleep_ms(delay_ms).await;
                    cursor.handle_retry(stage);
                }
                Decision::Continue { reason } => {
                    let adopted = reason == ContinueReason::AdoptObservedState;
                    self.emit(workflow, WorkflowEvent::StageDone { stage: Stage::Onboarding(stage), adopted });
                    cursor.handle_done(stage);
                }
                Decision::Stop(stop) => {
                    if let Some(compensation) = stop.compensation {
                        self.compensate(request, run, &mut state, stage, compensation).await;
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
                            stage: Stage::Onboarding(stage),
                            class: failure.class,
                            workflow_state: stop.workflow_state,
                            node_state: stop.node_state,
                            evidence: failure.evidence.clone(),
                        },
                    );
                    return OnboardOutcome {
                        workflow_state: stop.workflow_state,
                        node_state: stop.node_state,
                        stage: Some(stage),
                        class: Some(failure.class),
                        evidence: failure.evidence.iter().map(ToString::to_string).collect(),
                        system_id: state.system_id,
                    };
                }
                Decision::RefreshObservedState => unreachable!("decide_after makes the observations"),
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

    /// `cancel`'s "compensate where possible" for a workflow resting at `stage`: the row's compensation, performed
    /// as a retry or stop would perform it, from what the journal says the last run reached (its machine, whether it
    /// asked MAAS to deploy) and the site configuration read now (the PXE VLAN a relink needs). What it did, or why it
    /// could not, is journaled and reported like any recovery work.
    pub async fn compensate_cancelled(
        &self,
        request: &OnboardRequest,
        stage: OnboardingStage,
        compensation: Compensation,
    ) -> WorkOutcome {
        let lines = self
            .journal
            .replay_subject(&request.workflow)
            .await
            .unwrap_or_else(|error| panic!("onboarding journal unreadable: {error}"));
        let history = OnboardHistory::of(&request.workflow, lines.iter().map(String::as_str))
            .unwrap_or_else(|error| panic!("{error}"));
        let mut state = RunState {
            system_id: crate::onboarding::record::last_system_id(&request.workflow, &lines),
            deploy_started: history.reached.contains(&OnboardingStage::DeployViaMaas),
            // A run resting at render_cloud_init never handed MAAS user data: any token it may have minted is
            // unredeemable, and revoking the node's unredeemed tokens is safe (idempotent: 0 is `not_due`).
            partial_node_row: stage == OnboardingStage::RenderCloudInit,
            ..RunState::default()
        };
        if let Ok(site) = self.secrets.site_config().await {
            state.pxe_vlan_vid = site.pxe_vlan_vid;
        }
        self.compensate(request, history.runs.max(1), &mut state, stage, compensation).await
    }

    /// Whether the journal now says the workflow is frozen or cancelled.
    async fn halted_now(&self, workflow: &str) -> Option<String> {
        let lines = self
            .journal
            .replay_subject(workflow)
            .await
            .unwrap_or_else(|error| panic!("onboarding journal unreadable: {error}"));
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
    ) -> Decision {
        let mut ctx = DecideContext::new(NodeState::Enrolling);
        ctx.retry = request.retry;
        ctx.policy = request.site_policy;
        // The site's own setting, as `load_site_config` read it, decides `apply_roce_phase2`'s branch.
        ctx.policy.roce_mandatory |= state.roce_mandatory;
        ctx.failed_runs = history.failed_retryable_runs;
        ctx.deploy_attempt_started = state.deploy_started;
        ctx.partial_node_row_exists = state.partial_node_row;
        ctx.timed_out = failure.timeout;
        let stage_of = Stage::Onboarding(stage);
        let after = AfterFailure::new(ctx, |ctx: &DecideContext| match request.policy {
            OnboardingPolicy::Current => decide(stage_of, failure.class, attempt, ctx),
            OnboardingPolicy::Legacy => LegacyConfig::default().decide(stage_of, failure.class, attempt, ctx),
        });
        after.decide(async || self.observe(request, state, stage).await).await
    }

    /// A fresh read of the node's machine, judged against what `stage` expects.
    async fn observe(&self, request: &OnboardRequest, state: &RunState, stage: OnboardingStage) -> Observed {
        let Some(system_id) = &state.system_id else {
            return judge::observed_before_create(stage, self.find_own_machine(request).await);
        };
        // One read of the machine list shows both this node's record and any stranger on its BMC.
        let Ok(machines) = self.maas.machines().await else { return Observed::Stale };
        judge::observed_machines(stage, &request.node.bmc_address, system_id, &machines, state.deploy_started)
    }

    /// Runs the compensation a decision calls for, idempotently and after a fresh read (section 7: refresh before
    /// destructive steps), then journals and reports what came of it.
    async fn compensate(
        &self,
        request: &OnboardRequest,
        run: u32,
        state: &mut RunState,
        stage: OnboardingStage,
        compensation: Compensation,
    ) -> WorkOutcome {
        let (outcome, detail) = match compensation {
            Compensation::UnlinkRelinkInterface => self.relink_pxe_interface(request, state).await,
            Compensation::ReleaseToReadyIfDeployStarted
            | Compensation::ReleaseToReady
            | Compensation::AbortReleaseToCleanDeployableState => self.release_to_ready(state, compensation).await,
            Compensation::DeletePartialNodeRow => self.delete_partial_node_row(request, state).await,
            // The decommission's compensations.
            Compensation::QuarantineOnFailedValidation
            | Compensation::AbortMarkFixedNoEraseRelease
            | Compensation::RevertToRetiredOnUninstallFailure => {
                (WorkOutcome::NotDue, format!("{} is not an onboarding compensation", compensation.as_str()))
            }
        };
        self.record_work(request, run, stage, RecoveryWork::Compensation(compensation), outcome, detail).await;
        outcome
    }

    async fn record_work(
        &self,
        request: &OnboardRequest,
        run: u32,
        stage: OnboardingStage,
        work: RecoveryWork,
        outcome: WorkOutcome,
        detail: String,
    ) {
        let workflow = request.workflow.as_str();
        self.record(OnboardRecord::Work { workflow: workflow.to_owned(), run, stage, work, outcome }).await;
        self.emit(workflow, WorkflowEvent::RecoveryWork { stage: Stage::Onboarding(stage), work, outcome, detail });
    }

    /// `render_cloud_init`'s "delete partial node row": a token request that got no answer may have minted a token
    /// the controller never saw, valid until its TTL for whoever reads it; the node's unredeemed tokens are revoked
    /// before another is minted (none of them is in user data MAAS holds: the render had not finished).
    async fn delete_partial_node_row(&self, request: &OnboardRequest, state: &mut RunState) -> (WorkOutcome, String) {
        let node = request.node.name.as_str();
        if !state.partial_node_row {
            return (WorkOutcome::NotDue, format!("every bootstrap token asked for {node} was answered"));
        }
        match self.secrets.revoke_bootstrap_tokens(node).await {
            Ok(0) => {
                state.partial_node_row = false;
                (WorkOutcome::NotDue, format!("the unanswered token request minted no token for {node}"))
            }
            Ok(count) => {
                state.partial_node_row = false;
                (WorkOutcome::Performed, format!("{count} unredeemed bootstrap token(s) of {node} revoked"))
            }
            Err(error) => {
                (WorkOutcome::Failed, format!("the bootstrap tokens of {node} could not be revoked: {error}"))
            }
        }
    }

    /// "Release back to Ready" (and "abort/release to a clean deployable state"): abort what is in flight, release
    /// what is deployed, leave a machine already Ready or on its way there.
    async fn release_to_ready(&self, state: &mut RunState, compensation: Compensation) -> (WorkOutcome, String) {
        let Some(system_id) = state.system_id.clone() else {
            return (WorkOutcome::NotDue, "no machine in MAAS yet".to_owned());
        };
        if !judge::compensates(compensation, state.deploy_started) {
            return (WorkOutcome::NotDue, format!("no deploy attempt of {system_id} started"));
        }
        state.deploy_started = false;
        let machine = match self.maas.machine(&system_id).await {
            Ok(machine) => machine,
            Err(error) => return (WorkOutcome::Failed, format!("{system_id} cannot be read: {error}")),
        };
        let status = machine.status.name().to_owned();
        let (called, answer) = match judge::to_ready(&machine.status) {
            ToReady::Abort => ("aborted", self.maas.abort(&system_id).await.map(drop)),
            ToReady::Release => ("released without erase", self.maas.release(&system_id, false).await.map(drop)),
            ToReady::Ready => return (WorkOutcome::NotDue, format!("{system_id} is already Ready")),
            ToReady::Wait => return (WorkOutcome::NotDue, format!("{system_id} is {status}: MAAS is moving it")),
        };
        match answer {
            Ok(()) => (WorkOutcome::Performed, format!("{system_id} {called} from {status}")),
            Err(error) => (WorkOutcome::Failed, format!("{system_id} could not be {called} from {status}: {error}")),
        }
    }

    /// `ensure_pxe_interface_auto`'s "unlink/relink": the node's PXE interface disconnected (its links deleted, off
    /// its VLAN) and linked AUTO again to the PXE VLAN's subnet, so the retry finds it as the stage leaves it. An
    /// interface already linked AUTO on the PXE VLAN is left alone.
    async fn relink_pxe_interface(&self, request: &OnboardRequest, state: &RunState) -> (WorkOutcome, String) {
        let Some(system_id) = state.system_id.clone() else {
            return (WorkOutcome::NotDue, "no machine in MAAS yet".to_owned());
        };
        let failed = |what: &str, error: MaasError| (WorkOutcome::Failed, format!("{what} of {system_id}: {error}"));
        let interfaces = match self.maas.interfaces(&system_id).await {
            Ok(interfaces) => interfaces,
            Err(error) => return failed("cannot read the interfaces", error),
        };
        let pxe_mac = request.node.pxe_mac.to_lowercase();
        let Some(interface) = interfaces.iter().find(|interface| interface.mac.to_lowercase() == pxe_mac) else {
            return (WorkOutcome::NotDue, format!("{system_id} has no interface with the PXE MAC {pxe_mac}"));
        };
        if interface.auto_linked && interface.vlan_vid == Some(state.pxe_vlan_vid) {
            return (
                WorkOutcome::NotDue,
                format!("{} is already linked AUTO on vlan {}", interface.name, state.pxe_vlan_vid),
            );
        }
        let subnets = match self.maas.subnets().await {
            Ok(subnets) => subnets,
            Err(error) => return failed("cannot read the subnets", error),
        };
        let Some(subnet) = subnets.iter().find(|subnet| subnet.vlan_vid == state.pxe_vlan_vid) else {
            return (WorkOutcome::Failed, format!("no subnet on the PXE vlan {}", state.pxe_vlan_vid));
        };
        if let Err(error) = self.maas.disconnect_interface(&system_id, interface.id).await {
            return failed(&format!("cannot unlink {}", interface.name), error);
        }
        if let Err(error) = self.maas.link_subnet_auto(&system_id, interface.id, subnet.id).await {
            return failed(&format!("cannot relink {}", interface.name), error);
        }
        (WorkOutcome::Performed, format!("{} unlinked and relinked AUTO to {}", interface.name, subnet.cidr))
    }

    /// `wait_for_hardware_sync_healthy`'s "resume with reseed": the hardware-sync seed run again (a new operation)
    /// before the next wait, so that a sync that stopped reporting is restarted rather than waited on again.
    async fn reseed(&self, request: &OnboardRequest, run: u32, state: &RunState, stage: OnboardingStage) {
        let attempt = state.attempts.get(&stage).copied().unwrap_or(1);
        let system_id = state.system_id.clone().unwrap_or_default();
        let operation_id = format!("{}/hw-sync-reseed/{system_id}/{attempt}", request.workflow);
        let endpoint = Endpoint { node: request.node.name.clone(), host_key: String::new() };
        let (outcome, detail) = match self.ssh.run(&endpoint, SshRequest::SeedHardwareSync { operation_id }).await {
            Ok(_) => (WorkOutcome::Performed, format!("hardware sync of {system_id} reseeded")),
            Err(error) => (WorkOutcome::Failed, format!("the reseed of {system_id} failed: {error}")),
        };
        self.record_work(request, run, stage, RecoveryWork::Reseed, outcome, detail).await;
    }

    /// `classify_deploy_failure` (best effort): MAAS's recent events for the machine name the failure.
    async fn classify_deploy_failure(
        &self,
        request: &OnboardRequest,
        state: &RunState,
        mut failure: StageFailure,
    ) -> StageFailure {
        let workflow = request.workflow.as_str();
        let stage = Stage::Onboarding(OnboardingStage::ClassifyDeployFailure);
        self.emit(workflow, WorkflowEvent::StageStarted { stage, attempt: 1 });
        let events = match &state.system_id {
            Some(system_id) => self.maas.events(system_id, None).await,
            None => Ok(Vec::new()),
        };
        match events {
            Ok(events) => {
                failure.evidence.extend(judge::deploy_failure_evidence(&events));
                self.emit(workflow, WorkflowEvent::StageDone { stage, adopted: false });
            }
            // Best effort (the matrix): the events cannot be read, so the failure stays the generic deploy failure.
            Err(error) => {
                let class = judge::maas(&error).class;
                let error = format!("{error}; falling back to the generic deploy failure");
                self.emit(workflow, WorkflowEvent::StageFailed { stage, class, error });
            }
        }
        failure
    }

    /// The safe full rerun (section 7): a machine an earlier run of this workflow left in a deploy state (it stopped
    /// mid-deploy) is brought back to Ready before it is commissioned again, after a fresh read; one in any other
    /// state is left to the refresh before the commission.
    async fn release_earlier_deploy(&self, request: &OnboardRequest, state: &mut RunState) -> Result<(), StageFailure> {
        let system_id = state.system_id()?;
        let machine = self.maas.machine(&system_id).await.map_err(|error| judge::maas(&error))?;
        if !judge::left_in_deploy(&machine.status) {
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
        let system_id = state.system_id()?;
        let machine = self.maas.machine(&system_id).await.map_err(|error| judge::maas(&error))?;
        if !judge::interrupted_deploy(&machine.status) {
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
    /// again, and of a rerun's release of its earlier deploy. Each destructive call follows the read it acts on; a
    /// machine gone from MAAS is an ambiguity (whose is it now?), a region that stops answering is transient, and a
    /// machine that will not come back to Ready within the deploy bound is the deploy failure it started from.
    async fn back_to_ready(&self, request: &OnboardRequest, state: &mut RunState) -> Result<(), StageFailure> {
        let system_id = state.system_id()?;
        state.deploy_started = false;
        let bound_ms = state.timeouts.deploy_ms;
        let deadline_ms = self.clock.monotonic_ms() + bound_ms;
        let mut read_failures = ReadFailures::default();
        while self.clock.monotonic_ms() < deadline_ms {
            let acted = match self.maas.machine(&system_id).await {
                Ok(machine) => match judge::to_ready(&machine.status) {
                    ToReady::Ready => return Ok(()),
                    ToReady::Release => self.maas.release(&system_id, false).await.map(|_| ()),
                    ToReady::Abort => self.maas.abort(&system_id).await.map(|_| ()),
                    ToReady::Wait => Ok(()),
                },
                Err(error) => Err(error),
            };
            match acted {
                Ok(()) => read_failures.handle_read(),
                Err(error @ MaasError::Http { status: 404, .. }) => return Err(judge::maas(&error)),
                Err(error) => {
                    if read_failures.handle_failure() {
                        return Err(judge::maas(&error));
                    }
                }
            }
            self.clock.sleep_ms(request.poll_ms).await;
        }
        Err(judge::not_back_to_ready(&system_id, bound_ms))
    }

    /// The read before an irreversible call (commission, deploy): `false` when the machine's observed state already
    /// satisfies `stage` (adopt it), `true` when the workflow is to act.
    async fn refreshed_needs_action(&self, stage: OnboardingStage, state: &mut RunState) -> Result<bool, StageFailure> {
        let system_id = state.system_id()?;
        if !self.rules.reads_before(stage, state.attempts.get(&stage).copied().unwrap_or(1)) {
            return Ok(true);
        }
        let machine = self.maas.machine(&system_id).await.map_err(|error| judge::maas(&error))?;
        let needs_action = judge::needs_action(stage, &system_id, &machine, state.deploy_started)?;
        state.adopted |= !needs_action;
        Ok(needs_action)
    }

    /// Before a commissioning is adopted again after its wait failed: one that MAAS accepted and never started (no PXE
    /// boot since its "Commissioning" event: a region whose workflow engine was wedged never dispatched its power
    /// action) is aborted, once the region's workflow service is healthy again, so that `commission_node` commissions
    /// afresh instead of waiting on it until MAAS's own timeout. While the region is still unhealthy the commissioning
    /// is left as it is (a new one would not start either); a failed read leaves it too.
    async fn restart_undispatched_commissioning(&self, workflow: &str, system_id: &str) -> Result<(), StageFailure> {
        let Ok(machine) = self.maas.machine(system_id).await else { return Ok(()) };
        if machine.status != MachineStatus::Commissioning {
            return Ok(());
        }
        let Ok(events) = self.maas.events(system_id, None).await else { return Ok(()) };
        if !judge::commissioning_never_dispatched(&events) {
            return Ok(());
        }
        match self.maas.region_services().await {
            Ok(services) if judge::unhealthy_workflow_service(&services).is_none() => {}
            _ => return Ok(()),
        }
        self.maas.abort(system_id).await.map_err(|error| judge::maas(&error))?;
        let value = format!("{system_id}'s commissioning never started (no PXE boot since it was accepted): aborted");
        self.emit(workflow, WorkflowEvent::Observed { what: "commissioning".to_owned(), value });
        Ok(())
    }

    /// The discovery poll after a create: within the stall window the machine's events show either MAAS's power
    /// action failing or the machine's PXE boot; a stranger MAAS enlisted on this node's BMC means the node booted
    /// with MACs MAAS does not know; silence is a discovery failure.
    async fn confirm_discovery(
        &self,
        request: &OnboardRequest,
        system_id: &str,
        discovery_timeout_ms: u64,
    ) -> Result<(), StageFailure> {
        let started_ms = self.clock.monotonic_ms();
        loop {
            if let Ok(events) = self.maas.events(system_id, None).await
                && let Some(discovered) = judge::discovery(&events)
            {
                return discovered;
            }
            if let Some(stranger) = self.find_unknown_machine(request, system_id).await {
                return Err(judge::discovery_stranger(system_id, stranger));
            }
            let waited_ms = self.clock.monotonic_ms().saturating_sub(started_ms);
            if let Some(failure) = judge::discovery_silent(system_id, waited_ms, discovery_timeout_ms) {
                // A machine MAAS never powered on may be the region's doing: a wedged workflow engine accepts the
                // create and never dispatches its power action.
                let region_workflow = match self.maas.region_services().await {
                    Ok(services) => judge::unhealthy_workflow_service(&services),
                    Err(_) => None,
                };
                let failure = judge::discovery_failure(failure, region_workflow);
                if failure.class == FailureClass::UpstreamTransient {
                    let stage = Stage::Onboarding(OnboardingStage::CreateOrFindInMaas);
                    let (class, evidence) = (failure.class, failure.evidence.clone());
                    self.emit(&request.workflow, WorkflowEvent::Stalled { stage, class, evidence });
                }
                return Err(failure);
            }
            self.clock.sleep_ms(request.poll_ms).await;
        }
    }

    /// The node's own machine in MAAS: the one that carries its registered PXE MAC.
    async fn find_own_machine(&self, request: &OnboardRequest) -> Result<Option<Machine>, MaasError> {
        Ok(judge::own_machine(self.maas.machines_with_mac(&request.node.pxe_mac).await?, &request.node.pxe_mac))
    }

    /// A machine MAAS enlisted (NEW) on this node's BMC that is not the node's own record.
    async fn find_unknown_machine(&self, request: &OnboardRequest, own: &str) -> Option<UnknownMachine> {
        // A stranger is NEW by definition: MAAS's status filter keeps the answer to the machines just enlisted.
        let machines = self.maas.new_machines().await.ok()?;
        judge::unknown_machine(&request.node.bmc_address, own, &machines)
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
                site_enabled(site.enabled)?;
                let subnets = self.maas.subnets().await.map_err(|error| judge::maas(&error))?;
                for subnet in &subnets {
                    let value = format!("{} mtu {}", subnet.cidr, subnet.mtu);
                    self.emit(workflow, WorkflowEvent::Observed { what: format!("vlan {}", subnet.vlan_vid), value });
                }
                judge::site_vlans(&site, &subnets)?;
                let services = self.maas.region_services().await.map_err(|error| judge::maas(&error))?;
                for service in services
                    .iter()
                    .filter(|service| crate::ports::site::WORKFLOW_SERVICES.contains(&service.name.as_str()))
                {
                    let what = format!("region service {}", service.name);
                    self.emit(workflow, WorkflowEvent::Observed { what, value: service.status.clone() });
                }
                judge::region_workflow(&services)?;
                let answer = self.resolver.resolve(&site.metadata_host).await;
                let value = judge::resolver_answer(&answer);
                self.emit(
                    workflow,
                    WorkflowEvent::Observed { what: format!("resolver {}", site.metadata_host), value },
                );
                let observe_first = request.policy == OnboardingPolicy::Current;
                judge::metadata_resolver(&site.metadata_host, &answer, observe_first)?;
                state.metadata_host = Some(site.metadata_host);
                state.pxe_vlan_vid = site.pxe_vlan_vid;
                state.roce_vlan_vid = site.roce_vlan_vid;
                state.timeouts = site.timeouts;
                state.roce_mandatory = site.roce_mandatory;
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
                if let Some(machine) = self.find_own_machine(request).await.map_err(|error| judge::maas(&error))? {
                    state.system_id = Some(machine.system_id);
                    return Ok(());
                }
                let power = judge::produced(state.power.as_ref(), "power credential resolved")?;
                let new = NewMachine {
                    hostname: request.node.hostname.clone(),
                    pxe_mac: request.node.pxe_mac.to_lowercase(),
                    power_address: request.node.bmc_address.clone(),
                    power_user: power.user.clone(),
                    power_password: power.password.clone(),
                };
                let machine = self.maas.create_machine(&new).await.map_err(|error| judge::maas(&error))?;
                state.system_id = Some(machine.system_id.clone());
                // MAAS commissions a machine an admin creates, at once: the discovery poll sees it power on and
                // PXE-boot (the shell of `legacy` did not look).
                if request.policy == OnboardingPolicy::Current {
                    self.confirm_discovery(request, &machine.system_id, state.timeouts.discovery_ms).await?;
                }
                Ok(())
            }
            S::CommissionNode => {
                // A machine already commissioning (MAAS commissions a machine it just created) or past it is
                // adopted, not commissioned again.
                let system_id = state.system_id()?;
                if state.earlier_run_deployed && !state.deploy_started {
                    if std::mem::take(&mut state.interrupted_after_deploy)
                        && self.adopt_interrupted_deploy(request, state).await?
                    {
                        return Ok(());
                    }
                    self.release_earlier_deploy(request, state).await?;
                }
                if state.region_workflow_unhealthy {
                    self.restart_undispatched_commissioning(workflow, &system_id).await?;
                }
                if !self.refreshed_needs_action(stage, state).await? {
                    return Ok(());
                }
                self.maas.commission(&system_id).await.map_err(|error| judge::maas(&error))?;
                // MAAS answers before its power action ends; a failed one is an ERROR event of its own.
                match self.maas.events(&system_id, None).await {
                    Ok(events) => judge::power_failure(&events).map_or(Ok(()), Err),
                    Err(_) => Ok(()),
                }
            }
            S::WaitForReady => {
                if state.deploy_adopted && state.deploy_started {
                    // Commissioning ended before the dead controller's deploy: the machine is past Ready.
                    state.adopted = true;
                    return Ok(());
                }
                let system_id = state.system_id()?;
                let bound_ms = state.timeouts.commission_ms;
                self.wait_for(request, state, &system_id, stage, MachineStatus::Ready, bound_ms).await?;
                Ok(())
            }
            S::ConfigureStorage => {
                let system_id = state.system_id()?;
                let disks = self.maas.disks(&system_id).await.map_err(|error| judge::maas(&error))?;
                if let Some(disk) = judge::boot_disk(&disks, &request.node.boot_disk_model)? {
                    self.maas.set_boot_disk(&system_id, disk).await.map_err(|error| judge::maas(&error))?;
                }
                Ok(())
            }
            S::ApplyRocePhase2 | S::EnsurePxeInterfaceAuto => {
                let system_id = state.system_id()?;
                let interfaces = self.maas.interfaces(&system_id).await.map_err(|error| judge::maas(&error))?;
                let subnets = self.maas.subnets().await.map_err(|error| judge::maas(&error))?;
                let links = judge::links(
                    stage,
                    &interfaces,
                    &subnets,
                    &request.node.pxe_mac,
                    request.node.roce_nics,
                    state.pxe_vlan_vid,
                    state.roce_vlan_vid,
                )?;
                for interface in links.interfaces {
                    self.maas
                        .link_subnet_auto(&system_id, interface, links.subnet)
                        .await
                        .map_err(|error| judge::maas(&error))?;
                }
                Ok(())
            }
            S::RenderCloudInit => {
                let token = match self.secrets.bootstrap_token(&request.node.name, request.bootstrap_token_ttl_ms).await
                {
                    Ok(token) => token,
                    Err(error) => {
                        // No answer is not "no token": the store may have minted one.
                        state.partial_node_row |= matches!(error, SecretsError::Transport(_));
                        return Err(StageFailure::secrets(&error));
                    }
                };
                let metadata_host = state.metadata_host.clone().unwrap_or_default();
                state.user_data = Some(judge::user_data(&request.node.name, &metadata_host, &token));
                Ok(())
            }
            S::DeployViaMaas => {
                let system_id = state.system_id()?;
                if !self.refreshed_needs_action(stage, state).await? {
                    return Ok(());
                }
                let user_data = judge::produced(state.user_data.as_ref(), "cloud-init rendered")?;
                // Started once sent: a refused deploy may still have allocated the machine (MAAS allocates a Ready
                // machine before it renders the preseed), and a lost answer may hide a deploy under way. The
                // compensation's fresh read tells which ("release back to Ready if deploy attempt started").
                state.deploy_started = true;
                self.maas.deploy(&system_id, user_data, true).await.map_err(|error| judge::deploy_refused(&error))?;
                Ok(())
            }
            S::WaitForDeployed => {
                let system_id = state.system_id()?;
                let bound_ms = state.timeouts.deploy_ms;
                self.wait_for(request, state, &system_id, stage, MachineStatus::Deployed, bound_ms).await?;
                Ok(())
            }
            S::EnsureHardwareSyncConfigured => {
                let system_id = state.system_id()?;
                let machine = self.maas.machine(&system_id).await.map_err(|error| judge::maas(&error))?;
                judge::hardware_sync_enabled(&machine)?;
                // The seed over SSH. A freshly deployed machine's host key was made at its first boot: it is learnt
                // here (trust on first use), not checked against an inventory.
                let endpoint = Endpoint { node: request.node.name.clone(), host_key: String::new() };
                let attempt = state.attempts.get(&stage).copied().unwrap_or(1);
                let operation_id = format!("{workflow}/hw-sync-seed/{system_id}/{attempt}");
                // Section 6's hardware sync seed timeout bounds the seed however long the SSH transport would wait.
                let bound_ms = state.timeouts.hardware_sync_seed_ms;
                let seed = std::pin::pin!(self.ssh.run(&endpoint, SshRequest::SeedHardwareSync { operation_id }));
                let timeout = std::pin::pin!(self.clock.sleep_ms(bound_ms));
                match futures_util::future::select(seed, timeout).await {
                    futures_util::future::Either::Left((Ok(_), _)) => Ok(()),
                    futures_util::future::Either::Left((Err(error), _)) => {
                        Err(judge::seed_failed(&request.node.name, &error))
                    }
                    futures_util::future::Either::Right(((), _)) => {
                        Err(judge::seed_timed_out(&request.node.name, bound_ms))
                    }
                }
            }
            S::WaitForHardwareSyncHealthy => {
                let system_id = state.system_id()?;
                let bound_ms = state.timeouts.hardware_sync_health_ms;
                let deadline_ms = self.clock.monotonic_ms() + bound_ms;
                let mut read_failures = ReadFailures::default();
                loop {
                    match self.maas.machine(&system_id).await {
                        Ok(machine) if machine.hw_sync_healthy => return Ok(()),
                        Ok(_) => read_failures.handle_read(),
                        // The sync fields cannot be read: that is MAAS's trouble, not the sync's.
                        Err(error) => {
                            if read_failures.handle_failure() || self.clock.monotonic_ms() >= deadline_ms {
                                return Err(judge::maas(&error));
                            }
                        }
                    }
                    if self.clock.monotonic_ms() >= deadline_ms {
                        return Err(judge::hardware_sync_unhealthy(bound_ms));
                    }
                    self.clock.sleep_ms(request.poll_ms).await;
                }
            }
            S::WaitForAgentEnrollment => {
                let system_id = state.system_id()?;
                let bound_ms = state.timeouts.agent_enrollment_ms;
                let deadline_ms = self.clock.monotonic_ms() + bound_ms;
                let mut read_failures = ReadFailures::default();
                loop {
                    match self.hub.read_heartbeats().await {
                        Ok(snapshot) => {
                            read_failures.handle_read();
                            if judge::enrolled(&snapshot, &request.node.name) {
                                return Ok(());
                            }
                        }
                        Err(error) => {
                            if read_failures.handle_failure() {
                                return Err(judge::hub_unreadable(&error));
                            }
                        }
                    }
                    // The machine the agent will speak for must still be this workflow's deployed machine.
                    let machine = self.maas.machine(&system_id).await;
                    if let Some(failure) = judge::awaited_agent_machine(&system_id, &machine) {
                        return Err(failure);
                    }
                    if self.clock.monotonic_ms() >= deadline_ms {
                        return Err(judge::agent_not_enrolled(&request.node.name, bound_ms));
                    }
                    self.clock.sleep_ms(request.poll_ms).await;
                }
            }
            S::RecoverForDatasourceRetry => self.back_to_ready(request, state).await,
            // Run inside the handling of a failed deploy, never as a stage of its own.
            S::ClassifyDeployFailure => Ok(()),
        }
    }

    /// Waits for `want`, reading the machine and its events every `poll_ms`; [`MachineWait`] judges each poll.
    async fn wait_for(
        &self,
        request: &OnboardRequest,
        state: &RunState,
        system_id: &str,
        stage: OnboardingStage,
        want: MachineStatus,
        bound_ms: u64,
    ) -> Result<Machine, StageFailure> {
        let workflow = request.workflow.as_str();
        let stall_detection = self.rules.stall_detection(request.policy);
        let started_ms = self.clock.monotonic_ms();
        let mut wait = MachineWait::new(stage, want, bound_ms, stall_detection, request.stall_window_ms, started_ms);
        loop {
            let now_ms = self.clock.monotonic_ms();
            match self.maas.machine(system_id).await {
                Ok(machine) => {
                    wait.handle_machine(now_ms, &machine);
                    if let Ok(events) = self.maas.events(system_id, wait.events_after()).await {
                        wait.handle_events(now_ms, &events);
                    }
                    if let Some(end) = wait.verdict(system_id, machine) {
                        return end;
                    }
                }
                Err(error) => {
                    if let Some(failure) = wait.handle_read_error(system_id, &error) {
                        return Err(failure);
                    }
                }
            }
            if wait.is_silent(now_ms) {
                // Silent past the window: gather the evidence, then classify (slow is not silent).
                let unknown_machine = self.find_unknown_machine(request, system_id).await;
                let metadata_resolver = match &state.metadata_host {
                    Some(host) => Some(judge::resolver_probe(host, &self.resolver.resolve(host).await)),
                    None => None,
                };
                let region_workflow = match self.maas.region_services().await {
                    Ok(services) => judge::unhealthy_workflow_service(&services),
                    Err(_) => None,
                };
                if let Some(failure) = wait.handle_evidence(unknown_machine, metadata_resolver, region_workflow) {
                    self.emit(
                        workflow,
                        WorkflowEvent::Stalled {
                            stage: Stage::Onboarding(stage),
                            class: failure.class,
                            evidence: failure.evidence.clone(),
                        },
                    );
                    return Err(failure);
                }
            }
            if let Some(failure) = wait.timed_out(now_ms) {
                return Err(failure);
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
