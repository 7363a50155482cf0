//! The fault plan: the scenario's timed steps at their times, the stage-triggered steps at the stage starts they
//! wait for, the rollout-triggered steps at the rollout points they wait for, the phase-triggered steps after the
//! phases they wait for, and [`World::apply`], which traces a step,
//! counts and numbers it when it injects a fault (the ledger, `ledger.rs`) and hands it to the part of the world that
//! owns what it changes (the network, a host, the nodes, the hub, the controller, the MAAS site). The match names every kind, grouped by the part that
//! owns it, with no catch-all: a new kind does not compile until it has an owner.

use std::rc::Rc;

use crate::model::faults::{
    Phase, PhaseStep, RolloutPoint, Step, Subject, decommission_step, instance_step, site_step,
};
use crate::observe::trace::Body;
use crate::world::World;

impl World {
    /// Runs the plan's steps at their times. Not a host task: crashes do not stop it.
    pub async fn run_fault_plan(self: Rc<Self>) {
        let steps = self.spec.steps.clone();
        for timed in steps {
            self.sleep_until_ms(timed.at_ms).await;
            self.apply(&timed.step);
        }
        self.set_plan_done();
    }

    /// The run reached the end of `phase`: the first time, the steps waiting for it are applied, each its delay later
    /// (in file order among equal delays). Not a host task: crashes do not stop it.
    pub(crate) fn phase_reached(self: &Rc<Self>, phase: Phase) {
        if !self.phases_reached.borrow_mut().insert(phase) {
            return;
        }
        let mut due: Vec<PhaseStep> =
            self.spec.phase_steps.iter().filter(|phased| phased.after == phase).cloned().collect();
        if due.is_empty() {
            return;
        }
        due.sort_by_key(|phased| phased.wait_ms);
        self.record_sim(Body::PhaseReached { phase });
        let (world, from_ms) = (self.clone(), self.now_ms());
        self.spawn_timer(async move {
            for phased in due {
                world.sleep_until_ms(from_ms + phased.wait_ms).await;
                world.apply(&phased.step);
                world.phase_steps_pending.set(world.phase_steps_pending.get() - 1);
            }
        });
    }

    /// Runs a timer of the world itself (not a host's task: no crash stops it); the run's end aborts it.
    pub(crate) fn spawn_timer(&self, timer: impl std::future::Future<Output = ()> + 'static) {
        self.timers.borrow_mut().push(tokio::task::spawn_local(timer));
    }

    /// Fires the stage-triggered steps waiting for this start of this stage of `workflow`, in file order.
    pub(crate) fn on_stage_started(self: &Rc<Self>, workflow: &str, stage: &str) {
        let occurrence = {
            let mut starts = self.stage_starts.borrow_mut();
            let count = starts.entry((workflow.to_owned(), stage.to_owned())).or_insert(0);
            *count += 1;
            *count
        };
        let due: Vec<(u64, Step)> = {
            let mut fired = self.stage_steps_fired.borrow_mut();
            self.spec
                .stage_steps
                .iter()
                .zip(fired.iter_mut())
                .filter(|(staged, fired)| {
                    let workflow_id = match staged.stage {
                        engine::matrix::Stage::Onboarding(_) => {
                            crate::model::ids::onboarding_workflow_id(&staged.workflow)
                        }
                        engine::matrix::Stage::Decommission(_) => {
                            crate::model::ids::decommission_workflow_id(&staged.workflow)
                        }
                    };
                    !**fired
                        && staged.stage.as_str() == stage
                        && staged.occurrence == occurrence
                        && workflow_id == workflow
                })
                .map(|(staged, fired)| {
                    *fired = true;
                    (staged.wait_ms, staged.step.clone())
                })
                .collect()
        };
        for (wait_ms, step) in due {
            if wait_ms == 0 {
                self.apply(&step);
                continue;
            }
            // A delayed step is still to come: the run does not settle before it.
            self.phase_steps_pending.set(self.phase_steps_pending.get() + 1);
            let world = self.clone();
            self.spawn_timer(async move {
                tokio::time::sleep(std::time::Duration::from_millis(wait_ms)).await;
                world.apply(&step);
                world.phase_steps_pending.set(world.phase_steps_pending.get() - 1);
            });
        }
    }

    /// The rollout reached `point` (a node's step start, `node` naming it; or the controller's begin of a rollout):
    /// fires the rollout-triggered steps waiting for this occurrence of it, in file order.
    pub(crate) fn on_rollout_point(self: &Rc<Self>, point: RolloutPoint, node: Option<&str>) {
        let (any, own) = {
            let mut reached = self.rollout_points.borrow_mut();
            let mut count = |node: Option<String>| {
                let count = reached.entry((point, node)).or_insert(0);
                *count += 1;
                *count
            };
            (count(None), node.map(|node| count(Some(node.to_owned()))))
        };
        let due: Vec<Step> = {
            let mut fired = self.rollout_steps_fired.borrow_mut();
            self.spec
                .rollout_steps
                .iter()
                .zip(fired.iter_mut())
                .filter(|(triggered, fired)| {
                    let occurrence = match &triggered.node {
                        None => Some(any),
                        Some(wanted) if Some(wanted.as_str()) == node => own,
                        Some(_) => None,
                    };
                    !**fired && triggered.point == point && occurrence == Some(triggered.occurrence)
                })
                .map(|(triggered, fired)| {
                    *fired = true;
                    triggered.step.clone()
                })
                .collect()
        };
        for step in &due {
            self.apply(step);
        }
    }

    pub(crate) fn apply(self: &Rc<Self>, step: &Step) {
        let fault = step.is_fault(&self.spec.network, |host| self.is_up(self.host_id(host)));
        let number = self.ledger_inject(step, fault);
        self.record_sim(Body::Step { step: step.clone(), fault: number });
        if let Some(plug) = self.site.as_ref().and_then(|site| site.plug()) {
            plug.mirror_step(step);
        }
        if fault {
            *self.faults.borrow_mut().entry(step.kind().to_owned()).or_insert(0) += 1;
            self.lands_on_injection(step);
        }
        let id = |name: &str| self.host_id(name);
        match step {
            // the network's
            Step::Partition { a, b } => self.net.borrow_mut().partition(id(a), id(b)),
            Step::PartitionOneway { from, to } => self.net.borrow_mut().partition_oneway(id(from), id(to)),
            Step::Repair { a, b } => self.net.borrow_mut().repair(id(a), id(b)),
            Step::RepairOneway { from, to } => self.net.borrow_mut().repair_oneway(id(from), id(to)),
            Step::Hold { a, b } => self.net.borrow_mut().hold_both(id(a), id(b)),
            Step::Release { a, b } => self.net.borrow_mut().release_both(id(a), id(b)),
            Step::LinkLoss { a, b, request_per_mille, response_per_mille } => {
                self.net.borrow_mut().set_loss(id(a), id(b), *request_per_mille, *response_per_mille)
            }
            Step::LinkLatency { a, b, min_ms, max_ms } => {
                self.net.borrow_mut().set_latency(id(a), id(b), *min_ms, *max_ms)
            }
            // the hosts'
            Step::Crash { target } => self.crash(id(target)),
            Step::Restart { target } => self.restart(id(target)),
            Step::ClockSkew { target, skew_ms } => self.set_skew(id(target), *skew_ms),
            // the nodes'
            Step::AgentStop { target } => self.set_agent_service(id(target), false),
            Step::AgentStart { target } => self.set_agent_service(id(target), true),
            Step::TtlExpiry { target, silent_ms } => self.silence_agent(id(target), *silent_ms),
            Step::MarkerDrift { target, shape } => self.drift_marker(id(target), *shape),
            Step::SshTimeout { target, count } => self.time_out_ssh(id(target), *count),
            Step::EndpointIdentityChange { target } => self.change_endpoint_identity(id(target)),
            Step::StorageFault { target, storage } => self.set_worker_storage(id(target), *storage),
            // the hub's
            Step::OpenEpoch { members } => self.open_epoch(members),
            Step::CloseEpoch { epoch } => self.close_epoch(*epoch),
            Step::TaskLease { target, duration_ms } => self.grant_task_lease(target, *duration_ms),
            // the controller's (the rotation runs as the controller's task)
            Step::RotateCredential { .. } => self.ask_controller(step),
            Step::RouteSwap => self.hub.swap_route_bundle(),
            Step::HubTimeout { count } => self.hub.lose_answers(*count),
            Step::StaleLock { lease_ms } => self.leave_stale_lock(*lease_ms),
            Step::OperatorHold { target } => self.place_operator_hold(target),
            Step::PrincipalRevoked { target } => self.revoke_principal(target),
            // the controller's
            Step::StartRollout { .. } => self.ask_controller(step),
            Step::ArtifactMissing { artifact, restored } => self.set_artifact_missing(*artifact, *restored),
            Step::ControllerDeath { point, subsystem, restart_after_ms } => {
                self.controller.arm_death(*subsystem, *point, *restart_after_ms)
            }
            Step::CredentialExpiry { renew_after_ms } => self.expire_credential(*renew_after_ms),
            Step::OldJournal { shape, revision } => self.write_old_journal(*shape, revision),
            // the MAAS site's, and the decommission workflow's
            site_step!() | decommission_step!() => self.apply_site_step(step),
            // the instance lifecycle's
            instance_step!() => self.apply_instance_step(step),
        }
    }

    /// The faults that land as they are injected: a crash kills what ran on its host, a skew moves its clock, a
    /// stopped agent misses its next heartbeat (when it was sending any).
    fn lands_on_injection(&self, step: &Step) {
        match step {
            Step::Crash { target } | Step::ClockSkew { target, .. } => {
                self.fault_met(step.step_kind(), target, Subject::Host(target.clone()), None)
            }
            Step::AgentStop { target } if self.is_up(self.host_id(target)) => {
                self.fault_met(step.step_kind(), target, Subject::Node(target.clone()), None)
            }
            _ => {}
        }
    }
}
