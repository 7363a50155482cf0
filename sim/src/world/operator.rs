//! Operator recovery actions in the simulated world: the controller takes an `operator` step (a person, or
//! automation, asking for one of seed 000's recovery actions), performs it through
//! [`engine::operator::apply_operator_action`] (authorized, audited in the journal before anything is done),
//! traces the audit record (`engine.audit`), runs the workflow again when the action says so, and traces the settled
//! record once the workflow's state after the action is known.
//!
//! Every restarting action on an onboarding workflow is a rerun from the top with status-aware adoption (see
//! `engine::operator`); `restart_clean` has the driver perform the resting stage's compensation first, as a `cancel`
//! does. A decommission's `resume`, `retry_stage` and `adopt_observed_state` enter the run at the authorized stage
//! (`run_decommission_from`), its `rerun` and `restart_clean` rerun from the top. A run waits for a run of the same
//! workflow already in flight on this controller to end first, as `resume_onboarding` does.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::rc::Rc;

use engine::matrix::{RecoveryAction, Workflow, WorkflowState};
use engine::operator::{
    Applied, NextStep, apply_operator_action, observe_decommission_checkpoint, observe_onboarding_checkpoint,
    settle_after_run, workflow_status,
};
use engine::ports::Journal;
use engine::recovery::{AuditRecord, Lifecycle, OperatorRequest};

use crate::observe::trace::Body;
use crate::world::controller::SimJournal;
use crate::world::decommission::SimFleet;
use crate::world::hub::SimHub;
use crate::world::site::OperatorOrder;
use crate::world::{CONTROLLER_ID, SimSignals, World};

/// How often a restarting action waits for a run of its workflow already in flight to end.
const IN_FLIGHT_POLL_MS: u64 = 30_000;

impl World {
    /// Performs an `operator` step on the controller (a task of its own, so a long run does not hold the others).
    pub(crate) fn start_operator_action(
        self: &Rc<Self>,
        order: OperatorOrder,
        permits: &Rc<tokio::sync::Semaphore>,
        onboarding_running: &Rc<RefCell<BTreeSet<String>>>,
        decommissions_running: &Rc<RefCell<BTreeSet<String>>>,
    ) {
        let OperatorOrder { target, workflow, action, actor, role, reason, resolves_freeze } = order;
        let (world, permits, onboarding_running, decommissions_running) =
            (self.clone(), permits.clone(), onboarding_running.clone(), decommissions_running.clone());
        self.spawn_on(CONTROLLER_ID, async move {
            let workflow_id = crate::model::ids::workflow_id(workflow, &target);
            let correlation_id = format!("{workflow_id}/{}/{}", action.as_str(), world.host_now_ms(CONTROLLER_ID));
            let request =
                OperatorRequest { actor_id: actor, actor_role: role, action, reason, correlation_id, resolves_freeze };
            let journal = SimJournal { world: world.clone(), host: CONTROLLER_ID };
            let signals = SimSignals { world: world.clone(), host: CONTROLLER_ID };
            let observed = world.observe_checkpoint(workflow, &workflow_id, &target, action).await;
            let applied =
                match apply_operator_action(&journal, &signals, workflow, &workflow_id, &request, observed).await {
                    Ok(applied) => applied,
                    Err(error) => {
                        tracing::warn!(%workflow_id, %error, "operator action not performed");
                        return;
                    }
                };
            world.record(CONTROLLER_ID, Body::Audit { record: applied.record.clone() });
            let Applied { record, settled, next, authorized } = applied;
            if let Some(settled) = settled {
                world.record(CONTROLLER_ID, Body::Audit { record: settled });
            }
            match next {
                NextStep::Nothing => return,
                NextStep::Compensate { stage, compensation } => {
                    world.compensate_resting(&target, stage, compensation, &onboarding_running).await;
                    return;
                }
                // `restart_clean`: "explicitly compensate/reset progress, then start again".
                NextStep::CompensateThenRun { stage, compensation } => {
                    world.compensate_resting(&target, stage, compensation, &onboarding_running).await;
                }
                NextStep::Run => {}
            }
            match workflow {
                Workflow::Onboarding => {
                    world.run_onboarding_for_operator(&target, &permits, &onboarding_running).await;
                }
                Workflow::Decommission => {
                    // A decommission is entered at the authorized stage for `resume`, `retry_stage` and
                    // `adopt_observed_state`: its rerun from the top redoes the node tasks, which a powered-off node
                    // cannot take.
                    let start_at = authorized
                        .filter(|authorized| {
                            matches!(
                                authorized.action,
                                RecoveryAction::Resume
                                    | RecoveryAction::RetryStage
                                    | RecoveryAction::AdoptObservedState
                            )
                        })
                        .and_then(|authorized| match authorized.restart_at {
                            Some(engine::matrix::Stage::Decommission(stage)) => Some(stage),
                            _ => None,
                        });
                    world
                        .run_decommission_for_operator(&target, start_at, &onboarding_running, &decommissions_running)
                        .await;
                }
            }
            world.settle(workflow, &record).await;
        });
    }

    /// The fresh observation `adopt_observed_state` needs (section 7); no other action reads it. An onboarding's
    /// checkpoint is read at the hub or in MAAS (`observe_onboarding_checkpoint`), a decommission's in MAAS or the
    /// inventory (`observe_decommission_checkpoint`, the machine and the node named as the site machine), and only
    /// while the decommission rests stopped: a running or ended one is refused whatever is observed.
    async fn observe_checkpoint(
        self: &Rc<Self>,
        workflow: Workflow,
        workflow_id: &str,
        machine: &str,
        action: RecoveryAction,
    ) -> bool {
        if action != RecoveryAction::AdoptObservedState {
            return false;
        }
        let lines = SimJournal { world: self.clone(), host: CONTROLLER_ID }.replay().await.unwrap_or_default();
        let Ok(status) = workflow_status(workflow, workflow_id, lines.iter().map(String::as_str), false) else {
            return false;
        };
        let maas = self.site_maas(CONTROLLER_ID, workflow_id);
        match workflow {
            Workflow::Onboarding => {
                let request = self.onboard_request(machine);
                let hub = SimHub::new(self.clone(), CONTROLLER_ID);
                observe_onboarding_checkpoint(&maas, &hub, machine, &request.node.pxe_mac, status.stage).await
            }
            Workflow::Decommission => {
                let stopped = matches!(
                    status.state,
                    Lifecycle::Workflow(WorkflowState::FailedRetryable | WorkflowState::FailedManualIntervention)
                );
                if !stopped {
                    return false;
                }
                let fleet = SimFleet { world: self.clone(), from: CONTROLLER_ID };
                observe_decommission_checkpoint(&maas, &fleet, machine, machine, status.stage).await
            }
        }
    }

    async fn settle(self: &Rc<Self>, workflow: Workflow, record: &AuditRecord) {
        let journal = SimJournal { world: self.clone(), host: CONTROLLER_ID };
        match settle_after_run(&journal, workflow, record).await {
            Ok(settled) => self.record(CONTROLLER_ID, Body::Audit { record: settled }),
            Err(error) => tracing::warn!(workflow = %record.workflow_id, %error, "operator action not settled"),
        }
    }

    /// The resting stage's compensation of a `cancel` or a `restart_clean`, by the workflow's driver
    /// (`compensate_cancelled`: after a fresh read, journaled and traced as `recovery_work`). A decommission's
    /// compensations are its failures' own (quarantine on a failed validation, revert to retired on a failed
    /// uninstall, the no-erase fallback): none is an operator action's to make; nothing is done, and the driver
    /// journals and traces that (`record_cancel_uncompensated`, recovery work `not_due`).
    async fn compensate_resting(
        self: &Rc<Self>,
        machine: &str,
        stage: engine::matrix::Stage,
        compensation: engine::matrix::Compensation,
        running: &Rc<RefCell<BTreeSet<String>>>,
    ) {
        let stage = match stage {
            engine::matrix::Stage::Onboarding(stage) => stage,
            engine::matrix::Stage::Decommission(stage) => {
                let request = self.decommission_request(machine);
                self.with_decommission_ports(&request, async |ports| {
                    ports.record_cancel_uncompensated(&request, stage, compensation).await
                })
                .await;
                return;
            }
        };
        while !running.borrow_mut().insert(machine.to_owned()) {
            tokio::time::sleep(std::time::Duration::from_millis(IN_FLIGHT_POLL_MS)).await;
        }
        let request = self.onboard_request(machine);
        let adapters = self.controller_onboard_adapters(&request.workflow);
        adapters.ports().compensate_cancelled(&request, stage, compensation).await;
        running.borrow_mut().remove(machine);
    }

    async fn run_onboarding_for_operator(
        self: &Rc<Self>,
        machine: &str,
        permits: &Rc<tokio::sync::Semaphore>,
        running: &Rc<RefCell<BTreeSet<String>>>,
    ) {
        while !running.borrow_mut().insert(machine.to_owned()) {
            tokio::time::sleep(std::time::Duration::from_millis(IN_FLIGHT_POLL_MS)).await;
        }
        {
            let _permit = permits.acquire().await.expect("the semaphore is never closed");
            let request = self.onboard_request(machine);
            self.controller_onboard_adapters(&request.workflow).ports().run_onboarding(&request).await;
        }
        running.borrow_mut().remove(machine);
    }

    async fn run_decommission_for_operator(
        self: &Rc<Self>,
        machine: &str,
        start_at: Option<engine::matrix::DecommissionStage>,
        onboarding_running: &Rc<RefCell<BTreeSet<String>>>,
        running: &Rc<RefCell<BTreeSet<String>>>,
    ) {
        while onboarding_running.borrow().contains(machine) || !running.borrow_mut().insert(machine.to_owned()) {
            tokio::time::sleep(std::time::Duration::from_millis(IN_FLIGHT_POLL_MS)).await;
        }
        self.run_decommission_workflow(machine, start_at).await;
        running.borrow_mut().remove(machine);
    }
}
