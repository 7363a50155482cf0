//! The oracles of the MAAS site and its workflows (seed 000's recovery matrix): legal MAAS transitions, no
//! destructive call without a fresh read, no double commission or deploy, every decision one the matrix allows,
//! every workflow at rest or diagnosed.

use std::collections::{BTreeMap, BTreeSet};

use crate::observe::oracles::{Finding, Oracle, OracleContext};
use crate::observe::trace::{Body, Event, OnboardingBody, RolloutBody};

/// Every `site.status` write is allowed by `fakes::maas::status`'s transition table.
pub(super) struct MaasTransitionsLegal;

impl Oracle for MaasTransitionsLegal {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        let Body::SiteStatus { system_id, from, to } = &event.body else { return };
        let legal = match from {
            None => fakes::maas::status::INITIAL.contains(to),
            Some(from) => from.can_transition_to(*to),
        };
        if !legal {
            let from = from.map_or_else(|| "(created)".to_owned(), |from| from.label().to_owned());
            out.push(Finding {
                t_ms: event.t_ms,
                evidence: format!("machine {system_id}: {from} -> {} is not a MAAS transition", to.label()),
            });
        }
    }
}

/// A workflow's current stage attempt, from its `StageStarted` events.
#[derive(Debug, Default)]
pub(super) struct StageBook {
    /// workflow → (stage, attempt)
    current: BTreeMap<String, (String, u64)>,
}

impl StageBook {
    /// True when the event started a new stage attempt of a workflow.
    pub(super) fn observe(&mut self, body: &Body) -> bool {
        match body {
            Body::Onboarding { workflow, event: OnboardingBody::StageStarted { stage, attempt } }
            | Body::Decommission { workflow, event: OnboardingBody::StageStarted { stage, attempt } } => {
                self.current.insert(workflow.clone(), (stage.clone(), *attempt));
                true
            }
            _ => false,
        }
    }
}

/// The calls that change a machine irreversibly or take it from under a workload (section 7: "refresh observed MAAS
/// state before destructive or irreversible steps").
pub(super) const DESTRUCTIVE_OPS: [&str; 7] =
    ["commission", "deploy", "release", "abort", "mark_fixed", "power_off", "delete"];

/// Destructive MAAS calls follow an answered read of the machine within the same stage attempt.
#[derive(Default)]
pub(super) struct NoDestructiveCallWithoutFreshRead {
    stages: StageBook,
    /// workflow → machines read (`None`: the whole list) since its current stage attempt began.
    read: BTreeMap<String, BTreeSet<Option<String>>>,
}

impl Oracle for NoDestructiveCallWithoutFreshRead {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        if self.stages.observe(&event.body) {
            if let Body::Onboarding { workflow, .. } | Body::Decommission { workflow, .. } = &event.body {
                self.read.remove(workflow);
            }
            return;
        }
        let Body::SiteRequest { workflow, op, system_id, status } = &event.body else { return };
        let answered = status.is_some_and(|status| (200..300).contains(&status));
        match op.as_str() {
            // A power query reads the machine's power, which is what a power-off must not act on blind. A filtered
            // list (`list_by_mac`, `list_new`) reads only the machines it matched, which its event does not name: it
            // counts as a read of none.
            "read" | "list" | "query_power_state" if answered => {
                let key = if op == "list" { None } else { system_id.clone() };
                self.read.entry(workflow.clone()).or_default().insert(key);
            }
            op if DESTRUCTIVE_OPS.contains(&op) => {
                let reads = self.read.get(workflow);
                let fresh = reads.is_some_and(|reads| reads.contains(&None) || reads.contains(system_id));
                if !fresh {
                    let (stage, attempt) = self.stages.current.get(workflow).cloned().unwrap_or_default();
                    out.push(Finding {
                        t_ms: event.t_ms,
                        evidence: format!(
                            "{workflow}: {op} of {} in stage {stage} attempt {attempt} without a read of it first",
                            system_id.as_deref().unwrap_or("?")
                        ),
                    });
                }
            }
            _ => {}
        }
    }
}

/// No machine is commissioned or deployed twice within one stage attempt.
#[derive(Default)]
pub(super) struct NoDoubleCommissionOrDeploy {
    stages: StageBook,
    /// (workflow, op, machine) accepted in the workflow's current stage attempt.
    accepted: BTreeSet<(String, String, String)>,
}

impl Oracle for NoDoubleCommissionOrDeploy {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        if self.stages.observe(&event.body) {
            if let Body::Onboarding { workflow, .. } = &event.body {
                self.accepted.retain(|(w, _, _)| w != workflow);
            }
            return;
        }
        let Body::SiteRequest { workflow, op, system_id: Some(system_id), status: Some(status) } = &event.body else {
            return;
        };
        if (op == "commission" || op == "deploy") && (200..300).contains(status) {
            let key = (workflow.clone(), op.clone(), system_id.clone());
            if !self.accepted.insert(key) {
                let (stage, attempt) = self.stages.current.get(workflow).cloned().unwrap_or_default();
                out.push(Finding {
                    t_ms: event.t_ms,
                    evidence: format!(
                        "{workflow}: {system_id} accepted a second {op} in stage {stage} attempt {attempt}"
                    ),
                });
            }
        }
    }
}

/// At the end of the run every onboarding workflow rests: completed, or diagnosed for a person.
/// Judges the decision that follows each `stage_failed` of a workflow against the stage's matrix row, from the
/// workflow's next event. The row's own words are the reference (`engine::workflow::retries`, the resulting states),
/// so a driver that ignored a decision — retried a stop, stopped somewhere the row does not list — is caught.
pub(super) struct FollowsTheMatrix {
    workflow: engine::matrix::Workflow,
    policy: engine::workflow::SitePolicy,
    /// workflow → the failure awaiting its decision: `(stage, class)`.
    pending: BTreeMap<String, (String, String)>,
    /// workflow → the node's state as its completed stages left it (decommission: active, then quarantined, ...).
    node_state: BTreeMap<String, engine::matrix::NodeState>,
    /// workflow → the stage an accepted `cancel` or `restart_clean` found it resting at: its row's compensation is
    /// the action's, until the workflow starts a stage again (a restart_clean's rerun).
    compensating_at: BTreeMap<String, engine::matrix::Stage>,
}

impl FollowsTheMatrix {
    pub(super) fn new(workflow: engine::matrix::Workflow, ctx: &OracleContext) -> FollowsTheMatrix {
        FollowsTheMatrix {
            workflow,
            policy: ctx.site_policy,
            pending: BTreeMap::new(),
            node_state: BTreeMap::new(),
            compensating_at: BTreeMap::new(),
        }
    }

    /// The node state a decommission's completed stage leaves behind.
    pub(super) fn after_stage(stage: &str) -> Option<engine::matrix::NodeState> {
        use engine::matrix::NodeState;
        match stage {
            "disable_node" => Some(NodeState::Quarantined),
            "retire_gpuaas_node" => Some(NodeState::Retired),
            "remove_gpuaas_node_record" => Some(NodeState::Deleted),
            _ => None,
        }
    }

    /// A refusal: a known stage and class, and a workflow and node state the stage's row lists, the node state the
    /// one the refused request found (nothing was changed).
    fn judge_refusal(
        workflow: engine::matrix::Workflow,
        stage: &str,
        class: &str,
        workflow_state: &str,
        node_state: &str,
        prior: engine::matrix::NodeState,
    ) -> Result<(), String> {
        use engine::matrix::{FailureClass, NodeState, Stage, WorkflowState};
        let row = Stage::all()
            .find(|s| s.workflow() == workflow && s.as_str() == stage)
            .map(Stage::row)
            .ok_or_else(|| format!("refused before {stage}, not a stage of the {workflow:?} workflow"))?;
        if !FailureClass::ALL.into_iter().any(|c| c.as_str() == class) {
            return Err(format!("refused for {class}, not a failure class"));
        }
        let w = WorkflowState::ALL.into_iter().find(|w| w.as_str() == workflow_state);
        let n = NodeState::ALL.into_iter().find(|n| n.as_str() == node_state);
        match (w, n) {
            (Some(w), Some(n)) if row.admits_workflow_state(w) && row.node_states.admits(prior, n) => Ok(()),
            (w, n) => Err(format!(
                "refused before {stage} as {w:?} / {n:?}; its row lists {} and {}",
                row.workflow_states_text(),
                row.node_states.table_text()
            )),
        }
    }

    pub(super) fn judge(
        &self,
        stage: &str,
        class: &str,
        prior: engine::matrix::NodeState,
        next: &OnboardingBody,
    ) -> Result<(), String> {
        use engine::matrix::{FailureClass, NodeState, OnboardingStage, Stage, WorkflowState};
        let Some(row_stage) = Stage::all().find(|s| s.workflow() == self.workflow && s.as_str() == stage) else {
            return Err(format!("stage {stage} is not a stage of the {:?} workflow", self.workflow));
        };
        let Some(failure) = FailureClass::ALL.into_iter().find(|c| c.as_str() == class) else {
            return Err(format!("{class} is not a failure class"));
        };
        let row = row_stage.row();
        if row_stage == Stage::Onboarding(OnboardingStage::ClassifyDeployFailure) {
            // Best effort: the deploy failure it was classifying goes on, unclassified.
            return match next {
                OnboardingBody::StageFailed { stage, class, .. }
                    if stage == "wait_for_deployed" && class == "deploy_cloud_init_failure" =>
                {
                    Ok(())
                }
                other => {
                    Err(format!("classify_deploy_failure failed, then {other:?} instead of the generic deploy failure"))
                }
            };
        }
        match next {
            OnboardingBody::Retrying { stage: retried, .. } => {
                let policy = self.policy;
                // An ambiguity a fresh read resolved is retried as the transient it turned out to be.
                let retried_class = match failure {
                    FailureClass::StateAmbiguity => FailureClass::UpstreamTransient,
                    other => other,
                };
                if retried != stage {
                    Err(format!("{stage} failed ({class}) but {retried} was retried"))
                } else if !engine::workflow::retries(row, retried_class, &policy) {
                    Err(format!("{stage} retried {class}, which its row ({}) does not retry", row.retryability_text))
                } else {
                    Ok(())
                }
            }
            OnboardingBody::StageDone { adopted: true, .. } => Ok(()),
            // "Resume or skip if policy allows": only a non-fatal stage may be skipped.
            OnboardingBody::StageDone { adopted: false, .. } => {
                if row.retryability == engine::matrix::Retryability::NonFatal {
                    Ok(())
                } else {
                    Err(format!(
                        "{stage} failed ({class}) and was skipped; its row ({}) is not non-fatal",
                        row.retryability_text
                    ))
                }
            }
            OnboardingBody::Stopped { stage: stopped, workflow_state, node_state, .. } => {
                let workflow_state = WorkflowState::ALL.into_iter().find(|w| w.as_str() == workflow_state);
                let node_state = NodeState::ALL.into_iter().find(|n| n.as_str() == node_state);
                match (workflow_state, node_state) {
                    _ if stopped != stage => {
                        Err(format!("{stage} failed ({class}) but the workflow stopped at {stopped}"))
                    }
                    (Some(w), Some(n)) if row.admits_workflow_state(w) && row.node_states.admits(prior, n) => Ok(()),
                    (w, n) => Err(format!(
                        "{stage} stopped on {class} as {w:?} / {n:?}; its row lists {} and {}",
                        row.workflow_states_text(),
                        row.node_states.table_text()
                    )),
                }
            }
            // `remove_maas_record`: "retain MAAS record by policy or if delete unsafe" completes the workflow with a
            // follow-up record.
            OnboardingBody::Completed { .. }
                if row.admits_workflow_state(WorkflowState::CompletedWithFollowUpRecord) =>
            {
                Ok(())
            }
            OnboardingBody::Observed { what, .. }
                if what == "follow_up" && row.admits_workflow_state(WorkflowState::CompletedWithFollowUpRecord) =>
            {
                Ok(())
            }
            other => Err(format!("{stage} failed ({class}), then {other:?}: no decision of the matrix")),
        }
    }
}

impl Oracle for FollowsTheMatrix {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        if let Body::Audit { record } = &event.body {
            let compensates = matches!(
                record.requested_action,
                engine::matrix::RecoveryAction::Cancel | engine::matrix::RecoveryAction::RestartClean
            );
            if compensates
                && record.is_accepted()
                && record.actual_next_state.is_none()
                && record.prior_stage.workflow() == self.workflow
            {
                self.compensating_at.insert(record.workflow_id.clone(), record.prior_stage);
            }
            return;
        }
        let (workflow, body) = match (&event.body, self.workflow) {
            (Body::Onboarding { workflow, event }, engine::matrix::Workflow::Onboarding)
            | (Body::Decommission { workflow, event }, engine::matrix::Workflow::Decommission) => (workflow, event),
            _ => return,
        };
        let initial = match self.workflow {
            engine::matrix::Workflow::Onboarding => engine::matrix::NodeState::Enrolling,
            engine::matrix::Workflow::Decommission => engine::matrix::NodeState::Active,
        };
        let prior = self.node_state.get(workflow).copied().unwrap_or(initial);
        // Recovery work comes between a failure and its decision: it is the failed stage's row's compensation, or
        // the hardware-sync wait's reseed, and the decision it precedes is judged when it comes.
        if let OnboardingBody::RecoveryWork { stage: worked, work, .. } = body {
            let Some((stage, _)) = self.pending.get(workflow) else {
                // `cancel`'s "compensate where possible" and `restart_clean`'s "explicitly compensate/reset progress,
                // then start again": the resting stage's row's compensation, at that stage, before any stage runs.
                let operator = self
                    .compensating_at
                    .get(workflow)
                    .filter(|at| at.as_str() == worked && at.row().compensation.is_some_and(|c| c.as_str() == work));
                if operator.is_none() {
                    let evidence = format!(
                        "{workflow}: {work} with no failure to recover and no cancel or restart_clean to compensate"
                    );
                    out.push(Finding { t_ms: event.t_ms, evidence });
                }
                return;
            };
            let row_compensation = engine::matrix::Stage::all()
                .find(|s| s.workflow() == self.workflow && s.as_str() == stage)
                .and_then(|s| s.row().compensation);
            let allowed = worked == stage
                && (row_compensation.is_some_and(|c| c.as_str() == work)
                    || (work == "reseed" && stage == "wait_for_hardware_sync_healthy"));
            if !allowed {
                out.push(Finding {
                    t_ms: event.t_ms,
                    evidence: format!(
                        "{workflow}: {stage} failed, then {work} at {worked}: not its row's recovery work"
                    ),
                });
            }
            return;
        }
        if matches!(body, OnboardingBody::StageStarted { .. }) {
            // A restart_clean's rerun has begun: its compensation is behind it.
            self.compensating_at.remove(workflow);
        }
        if let Some((stage, class)) = self.pending.remove(workflow) {
            if let Err(evidence) = self.judge(&stage, &class, prior, body) {
                out.push(Finding { t_ms: event.t_ms, evidence: format!("{workflow}: {evidence}") });
            }
        }
        match body {
            OnboardingBody::StageFailed { stage, class, .. } => {
                self.pending.insert(workflow.clone(), (stage.clone(), class.clone()));
            }
            // A refusal before the first mutation rests where its stage's row puts a stop that changed nothing.
            OnboardingBody::Refused { stage, class, workflow_state, node_state, .. } => {
                if let Err(evidence) =
                    Self::judge_refusal(self.workflow, stage, class, workflow_state, node_state, prior)
                {
                    out.push(Finding { t_ms: event.t_ms, evidence: format!("{workflow}: {evidence}") });
                }
            }
            OnboardingBody::StageDone { stage, .. } if self.workflow == engine::matrix::Workflow::Decommission => {
                if let Some(state) = Self::after_stage(stage) {
                    self.node_state.insert(workflow.clone(), state);
                }
            }
            _ => {}
        }
    }

    fn on_finish(&mut self, end_ms: u64, out: &mut Vec<Finding>) {
        for (workflow, (stage, class)) in std::mem::take(&mut self.pending) {
            out.push(Finding {
                t_ms: end_ms,
                evidence: format!("{workflow}: {stage} failed ({class}) and no decision followed before the run ended"),
            });
        }
    }
}

/// At the end of the run every requested decommission rests: completed, stopped with a class, or refused before its
/// first mutation because something referenced its worker (a refusal rests until the next request).
pub(super) struct EveryDecommissionRests {
    /// workflow → its last resting state (`None`: not resting — never started, or running).
    last: BTreeMap<String, Option<String>>,
}

impl EveryDecommissionRests {
    pub(super) fn new(ctx: &OracleContext) -> EveryDecommissionRests {
        EveryDecommissionRests { last: ctx.decommissions.iter().map(|w| (w.clone(), None)).collect() }
    }
}

impl Oracle for EveryDecommissionRests {
    fn on_event(&mut self, event: &Event, _line: &str, _out: &mut Vec<Finding>) {
        let Body::Decommission { workflow, event } = &event.body else { return };
        let state = match event {
            OnboardingBody::Completed { .. } => Some("completed".to_owned()),
            OnboardingBody::Stopped { class, workflow_state, .. } if !class.is_empty() => Some(workflow_state.clone()),
            OnboardingBody::Stopped { .. } => Some("stopped without a class".to_owned()),
            OnboardingBody::Refused { workflow_state, .. } => Some(workflow_state.clone()),
            OnboardingBody::StageStarted { .. } => None,
            _ => return,
        };
        self.last.insert(workflow.clone(), state);
    }

    fn on_finish(&mut self, end_ms: u64, out: &mut Vec<Finding>) {
        for (workflow, state) in &self.last {
            match state.as_deref() {
                Some("stopped without a class") => {
                    out.push(Finding { t_ms: end_ms, evidence: format!("{workflow} stopped without a failure class") })
                }
                Some(_) => {}
                None => out.push(Finding {
                    t_ms: end_ms,
                    evidence: format!("{workflow} is still running (or never started) when the run ends"),
                }),
            }
        }
    }
}

pub(super) struct EveryNodeOnboardedOrDiagnosed {
    /// workflow → its last state (`None`: never started).
    last: BTreeMap<String, Option<String>>,
}

impl EveryNodeOnboardedOrDiagnosed {
    pub(super) fn new(ctx: &OracleContext) -> EveryNodeOnboardedOrDiagnosed {
        EveryNodeOnboardedOrDiagnosed { last: ctx.workflows.iter().map(|w| (w.clone(), None)).collect() }
    }
}

impl Oracle for EveryNodeOnboardedOrDiagnosed {
    fn on_event(&mut self, event: &Event, _line: &str, _out: &mut Vec<Finding>) {
        let Body::Onboarding { workflow, event } = &event.body else { return };
        let state = match event {
            OnboardingBody::Completed { .. } => "completed".to_owned(),
            OnboardingBody::Stopped { class, workflow_state, .. } => {
                if workflow_state == "failed_manual_intervention" && class.is_empty() {
                    "failed_manual_intervention without a class".to_owned()
                } else {
                    workflow_state.clone()
                }
            }
            // Recovery work changes no workflow state (a cancel's compensation follows the stop it rests in).
            OnboardingBody::RecoveryWork { .. } => return,
            _ => "running".to_owned(),
        };
        self.last.insert(workflow.clone(), Some(state));
    }

    fn on_finish(&mut self, end_ms: u64, out: &mut Vec<Finding>) {
        for (workflow, state) in &self.last {
            let resting = matches!(
                state.as_deref(),
                Some("completed" | "completed_with_follow_up_record" | "failed_manual_intervention")
            );
            if !resting {
                out.push(Finding {
                    t_ms: end_ms,
                    evidence: format!(
                        "{workflow} is {} at the end of the run",
                        state.as_deref().unwrap_or("not started")
                    ),
                });
            }
        }
    }
}

/// What references each worker, as the trace shows it: open epochs and their members, holds placed and not released,
/// task leases (until when, on the run's clock), and the controller's rollout journal (the latest rollout whose plan
/// was journaled, until its terminal record, naming the nodes it selected less those it skipped as someone else's).
#[derive(Default)]
struct ReferenceBook {
    epochs: BTreeMap<u64, BTreeSet<String>>,
    holds: BTreeSet<(String, String)>,
    /// Agent → when its lease ends (virtual ms).
    leases: BTreeMap<String, u64>,
    /// The last rollout requested: its id and the nodes it selected.
    selected: Option<(String, BTreeSet<String>)>,
    /// Rollout → the nodes it skipped as held by someone else (its plan does not name them).
    skipped: BTreeMap<String, BTreeSet<String>>,
    /// The journal's non-terminal rollout: its id and the nodes its plan names.
    journal: Option<(String, BTreeSet<String>)>,
}

impl ReferenceBook {
    fn observe(&mut self, event: &Event) {
        match &event.body {
            Body::HubEpochOpened { epoch, members } => {
                self.epochs.insert(*epoch, members.iter().cloned().collect());
            }
            Body::HubEpochClosed { epoch } => {
                self.epochs.remove(epoch);
            }
            Body::HubHoldPlaced { agent, owner } => {
                self.holds.insert((agent.clone(), owner.clone()));
            }
            Body::HubHoldReleased { agent, owner } => {
                self.holds.remove(&(agent.clone(), owner.clone()));
            }
            Body::HubLeaseGranted { agent, lease_ms } => {
                self.leases.insert(agent.clone(), event.t_ms + lease_ms);
            }
            Body::RolloutSelected { rollout, nodes } => {
                self.selected = Some((rollout.clone(), nodes.iter().cloned().collect()));
            }
            Body::Rollout { rollout, event: RolloutBody::SkippedHeld { node, .. } } => {
                self.skipped.entry(rollout.clone()).or_default().insert(node.clone());
            }
            Body::JournalAppended { record, .. } if record == "plan_frozen" => {
                self.journal = self.selected.as_ref().map(|(rollout, nodes)| {
                    let skipped = self.skipped.get(rollout);
                    let named = nodes.iter().filter(|node| skipped.is_none_or(|s| !s.contains(*node))).cloned();
                    (rollout.clone(), named.collect())
                });
            }
            Body::JournalAppended { record, .. } if record == "terminal" => self.journal = None,
            _ => {}
        }
    }

    /// What references `node` at `t_ms`, as words for the evidence.
    fn of(&self, node: &str, t_ms: u64) -> Vec<String> {
        let epochs = self.epochs.iter().filter(|(_, members)| members.contains(node));
        let holds = self.holds.iter().filter(|(agent, _)| agent == node);
        let lease = self.leases.get(node).filter(|until_ms| **until_ms > t_ms);
        let rollout = self.journal.as_ref().filter(|(_, named)| named.contains(node));
        epochs
            .map(|(epoch, _)| format!("open epoch {epoch}"))
            .chain(holds.map(|(_, owner)| format!("hold {owner}")))
            .chain(lease.map(|until_ms| format!("task lease until {until_ms} ms")))
            .chain(rollout.map(|(rollout, _)| format!("rollout {rollout}'s journal, not terminal")))
            .collect()
    }
}

/// The node a decommission's event mutates (or tries to), if it is one: a mutating inventory request, a node task,
/// or a destructive MAAS call of a decommission workflow.
fn decommission_mutation(body: &Body) -> Option<(&str, &str)> {
    match body {
        Body::InventoryRequest { node, op, .. }
            if matches!(op.as_str(), "transition" | "release_allocations" | "remove") =>
        {
            Some((node, op))
        }
        Body::NodeTask { node, task, .. } => Some((node, task)),
        Body::SiteRequest { workflow, op, .. } if DESTRUCTIVE_OPS.contains(&op.as_str()) => {
            Some((workflow.strip_prefix("decommission-")?, op))
        }
        _ => None,
    }
}

/// `no_decommission_of_a_referenced_worker`: a decommission's first mutation of a node (its first mutating inventory
/// request, node task or destructive MAAS call, answered or not) never comes while the trace shows the node
/// referenced: a member of an open epoch, under a hold placed and not released, with a task lease running, or named
/// by the plan of a rollout whose journal has no terminal record.
#[derive(Default)]
pub(super) struct NoDecommissionOfAReferencedWorker {
    book: ReferenceBook,
    /// Nodes a decommission has mutated already.
    mutated: BTreeSet<String>,
}

impl Oracle for NoDecommissionOfAReferencedWorker {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        self.book.observe(event);
        let Some((node, op)) = decommission_mutation(&event.body) else { return };
        if !self.mutated.insert(node.to_owned()) {
            return;
        }
        let references = self.book.of(node, event.t_ms);
        if !references.is_empty() {
            out.push(Finding {
                t_ms: event.t_ms,
                evidence: format!(
                    "a decommission's first mutation of {node} ({op}) while {} referenced it",
                    references.join(", ")
                ),
            });
        }
    }
}
