//! When a run has settled: nothing left in it can change a verdict, so it may end before its `duration_ms`.
//!
//! [`Settle`] follows the trace as the world records it: which workflows, rollouts and (in a bare-metal-only run)
//! instance rows are not yet at rest, and when the last event that is not the world's steady beat happened
//! (heartbeats, their refusals and failures, canary dispatches and their refusals, the site's periodic hardware
//! sync). [`crate::world::World::settled`] adds what only the world knows — the fault plan done, no restart timer
//! pending, the hub's, the site's and the network's own clocks at rest, no credential renewal due — and the quiet
//! time every oracle's deadline needs.
//! `docs/oracles.md` ("When a run ends early") says, oracle by oracle, why no verdict can change after that point.

use std::collections::BTreeSet;

use crate::model::faults::Step;
use crate::model::spec::RunSpec;
use crate::observe::trace::{Body, OnboardingBody, RolloutBody, RotationBody};

/// What the trace says about rest, so far.
#[derive(Debug, Clone, Default)]
pub(crate) struct Settle {
    /// Workflows, rollouts and credential rotations the run starts or asks for that are not at rest: an onboarding
    /// completed or resting in `failed_manual_intervention`, a decommission completed, stopped or refused, a rollout
    /// terminal or refused, a rotation ended (rotated, stopped or aborted).
    open: BTreeSet<String>,
    /// When the last event that is not a steady beat was recorded.
    last_change_ms: u64,
    /// Dispatch holds at the hub, `(agent, owner)`, and workers whose service a `stop_service` stopped (whoever sent
    /// it) and no `start_service` has started since.
    held: BTreeSet<(String, String)>,
    stopped: BTreeSet<String>,
    /// Agents the canary dispatcher tried since the last change. It draws a worker at random every 20 s, so a held or
    /// stopped worker's first attempt (refused, or landing where it must not) can come long after the last change;
    /// a run is not quiet until each of them has had one.
    sampled: BTreeSet<String>,
}

impl Settle {
    /// Every onboarding workflow of the spec, every decommission its steps ask for and every rollout its
    /// `start_rollout` steps request starts open.
    pub(crate) fn for_spec(spec: &RunSpec) -> Settle {
        let mut open: BTreeSet<String> = spec
            .onboarding
            .iter()
            .flat_map(|onboarding| onboarding.machines.iter().map(|m| crate::model::ids::onboarding_workflow_id(m)))
            .collect();
        for step in spec.all_steps() {
            match step {
                Step::Decommission { target } => {
                    open.insert(crate::model::ids::decommission_workflow_id(target));
                }
                Step::StartRollout { revision } => {
                    open.insert(format!("rollout-{revision}"));
                }
                _ => {}
            }
        }
        // Each `rotate_credential` step asks for the next rotation of its node.
        let mut rotations: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
        for step in spec.all_steps() {
            if let Step::RotateCredential { target } = step {
                let count = rotations.entry(target.as_str()).or_default();
                *count += 1;
                open.insert(engine::controller::machine::rotation_id(target, *count));
            }
        }
        // The instance lifecycle keeps its own clocks (the replenisher, the ready TTL, the hourly sync, the stuck
        // rows' bounds): a run with cloud rows or pools runs its whole duration. A bare-metal-only one (every row
        // backed by a machine of the site, no pool) has none that can change a verdict once every row rests: its
        // rows are followed one by one ([`instance_rests`]).
        if spec.instances.as_ref().is_some_and(|instances| !bare_metal_only(instances)) {
            open.insert("instances".to_owned());
        }
        Settle { open, ..Settle::default() }
    }

    pub(crate) fn observe(&mut self, t_ms: u64, host: &str, body: &Body) {
        if is_steady(body) {
            if let Body::HubDispatched { agent, .. } | Body::HubDispatchRefused { agent, .. } = body {
                self.sampled.insert(agent.clone());
            }
            return;
        }
        self.last_change_ms = t_ms;
        self.sampled.clear();
        let (id, at_rest) = match body {
            Body::HubHoldPlaced { agent, owner } => {
                self.held.insert((agent.clone(), owner.clone()));
                return;
            }
            Body::HubHoldReleased { agent, owner } => {
                self.held.remove(&(agent.clone(), owner.clone()));
                return;
            }
            Body::WorkerMutated { op, .. } if op == "stop_service" => {
                self.stopped.insert(host.to_owned());
                return;
            }
            Body::WorkerMutated { op, .. } if op == "start_service" => {
                self.stopped.remove(host);
                return;
            }
            Body::Onboarding { workflow, event } => match event {
                OnboardingBody::RecoveryWork { .. } => return,
                OnboardingBody::Completed { .. } => (workflow, true),
                OnboardingBody::Stopped { workflow_state, .. } => {
                    (workflow, workflow_state == "failed_manual_intervention")
                }
                _ => (workflow, false),
            },
            Body::Decommission { workflow, event } => match event {
                OnboardingBody::RecoveryWork { .. } => return,
                // A refusal rests until someone asks again (a `decommission` step, which starts a stage).
                OnboardingBody::Completed { .. } | OnboardingBody::Stopped { .. } | OnboardingBody::Refused { .. } => {
                    (workflow, true)
                }
                _ => (workflow, false),
            },
            Body::Rollout { rollout, event } => match event {
                RolloutBody::Terminal { .. } => (rollout, true),
                RolloutBody::PlanRefused { .. } => (rollout, true),
                _ => (rollout, false),
            },
            Body::Rotation { rotation, event, .. } => (rotation, matches!(event, RotationBody::Ended { .. })),
            Body::InstanceRecord { record } => {
                let Some((id, at_rest)) = instance_rests(record) else { return };
                if at_rest {
                    self.open.remove(&id);
                } else {
                    self.open.insert(id);
                }
                return;
            }
            _ => return,
        };
        if at_rest {
            self.open.remove(id);
        } else {
            self.open.insert(id.clone());
        }
    }

    /// When the run went quiet, if every workflow and rollout is at rest and every held or stopped worker has had
    /// a canary dispatch since the last change.
    pub(crate) fn quiet_since(&self) -> Option<u64> {
        let unsampled = |agent: &String| !self.sampled.contains(agent);
        let waiting = self.held.iter().map(|(agent, _)| agent).chain(&self.stopped).any(unsampled);
        (self.open.is_empty() && !waiting).then_some(self.last_change_ms)
    }
}

/// Whether an `[instances]` table has bare-metal rows only: no plain cloud node, no pool.
fn bare_metal_only(instances: &crate::model::spec::instances::InstancesSpec) -> bool {
    instances.bare_metal && instances.plain == 0 && instances.pools.is_empty()
}

/// What an instance record says about rest (bare-metal-only runs; with cloud rows or pools `instances` stays open):
/// a row is open from its creation while it is pending, provisioning, starting, stopping or rebooting, or draining,
/// and rests in running, stopped, error or terminated; a deferred operation is open from its parking to its decision.
/// A destroy owed is not followed here: the row's next pass (every 30 s, well inside the quiet time) asks for its
/// machine's decommission, which `open` follows as it runs, and confirms the destroy once it completed; one refused or
/// stopped for good rests for a person. `None` for a record that says nothing about rest.
fn instance_rests(record: &engine::instance::inventory::InstanceRecord) -> Option<(String, bool)> {
    use engine::instance::inventory::InstanceRecord as R;
    use engine::instance::state::InstanceState as S;
    Some(match record {
        R::InstanceCreated { instance } => (format!("instance:{}", instance.id), false),
        R::Transition { instance, to, .. } => {
            let rests = matches!(to, S::Running | S::Stopped | S::Error | S::Terminated);
            (format!("instance:{instance}"), rests)
        }
        R::DrainStarted { instance, .. } => (format!("instance:{instance}"), false),
        R::Deferred { deferred } => (format!("deferred:{}", deferred.id), false),
        R::Decided { deferred, .. } => (format!("deferred:{deferred}"), true),
        _ => return None,
    })
}

/// The world's steady beat: events a world at rest keeps producing, each the same judgement every time it recurs.
fn is_steady(body: &Body) -> bool {
    matches!(
        body,
        Body::HubHeartbeat { .. }
            | Body::HubHeartbeatRefused { .. }
            | Body::AgentHeartbeatFailed { .. }
            | Body::HubDispatched { .. }
            | Body::HubDispatchRefused { .. }
            | Body::SiteHardwareSync { .. }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn onboarding(workflow: &str, event: OnboardingBody) -> Body {
        Body::Onboarding { workflow: workflow.to_owned(), event }
    }

    impl Settle {
        fn observe_at(&mut self, t_ms: u64, body: &Body) {
            self.observe(t_ms, "node-01", body);
        }
    }

    fn settle(open: &[&str]) -> Settle {
        Settle { open: open.iter().map(|id| (*id).to_owned()).collect(), ..Settle::default() }
    }

    #[test]
    fn a_run_is_quiet_only_once_every_workflow_rests_and_since_its_last_change() {
        let mut settle = settle(&["onboard-a", "rollout-r2"]);
        assert_eq!(settle.quiet_since(), None);
        settle.observe_at(10, &onboarding("onboard-a", OnboardingBody::Completed { system_id: "x".into() }));
        assert_eq!(settle.quiet_since(), None, "the rollout is still open");
        settle.observe_at(
            20,
            &Body::Rollout {
                rollout: "rollout-r2".into(),
                event: RolloutBody::PlanRefused { reason: "r".into(), cause: None },
            },
        );
        assert_eq!(settle.quiet_since(), Some(20));
        settle.observe_at(90, &Body::HubHeartbeat { agent: "node-01".into(), generation: 1 });
        assert_eq!(settle.quiet_since(), Some(20), "a heartbeat is the steady beat, not a change");
        settle.observe_at(95, &Body::HostBoot { boot: 2 });
        assert_eq!(settle.quiet_since(), Some(95), "any other event is a change");
    }

    #[test]
    fn a_retryable_stop_or_a_new_run_reopens_a_workflow() {
        let mut settle = settle(&[]);
        let stopped = |state: &str| OnboardingBody::Stopped {
            stage: "commission".into(),
            class: "transient".into(),
            workflow_state: state.into(),
            node_state: "enrolling".into(),
            evidence: Vec::new(),
        };
        settle.observe_at(5, &onboarding("onboard-a", stopped("failed_retryable")));
        assert_eq!(settle.quiet_since(), None, "failed_retryable runs again");
        settle.observe_at(6, &onboarding("onboard-a", stopped("failed_manual_intervention")));
        assert_eq!(settle.quiet_since(), Some(6));
        settle.observe_at(
            7,
            &onboarding("onboard-a", OnboardingBody::StageStarted { stage: "commission".into(), attempt: 1 }),
        );
        assert_eq!(settle.quiet_since(), None, "an operator's resume starts it again");
    }

    #[test]
    fn a_bare_metal_row_rests_in_running_stopped_error_or_terminated_and_a_parked_operation_until_decided() {
        use engine::instance::inventory::{Deferred, DeferredOperation, DeferredStatus, InstanceRecord};
        use engine::instance::state::InstanceEvent;
        use engine::instance::state::InstanceState as S;
        let moved = |event, from, to| Body::InstanceRecord {
            record: InstanceRecord::Transition { instance: "i-1".into(), event, from, to, at_ms: 0 },
        };
        let mut settle = settle(&[]);
        settle.observe_at(1, &moved(InstanceEvent::MarkProvisioning, S::Pending, S::Provisioning));
        assert_eq!(settle.quiet_since(), None, "provisioning: its onboarding is asked for");
        settle.observe_at(2, &moved(InstanceEvent::MarkRunning, S::Provisioning, S::Running));
        assert_eq!(settle.quiet_since(), Some(2));
        settle.observe_at(3, &moved(InstanceEvent::Stop, S::Running, S::Stopping));
        assert_eq!(settle.quiet_since(), None, "a stop waits for MAAS to read the power off");
        settle.observe_at(4, &moved(InstanceEvent::MarkStopped, S::Stopping, S::Stopped));
        assert_eq!(settle.quiet_since(), Some(4));
        let drain = InstanceRecord::DrainStarted { instance: "i-1".into(), at_ms: 5 };
        settle.observe_at(5, &Body::InstanceRecord { record: drain });
        assert_eq!(settle.quiet_since(), None, "a drain in flight");
        settle.observe_at(6, &moved(InstanceEvent::Terminate, S::Stopped, S::Terminated));
        assert_eq!(settle.quiet_since(), Some(6), "terminated: the destroy follows its decommission, followed as such");
        let operation = DeferredOperation::Terminate { instance: "i-1".into(), by: "oncall".into() };
        let deferred = Deferred { id: "d-1".into(), operation, status: DeferredStatus::Pending, requested_at_ms: 7 };
        settle.observe_at(7, &Body::InstanceRecord { record: InstanceRecord::Deferred { deferred } });
        assert_eq!(settle.quiet_since(), None, "an approval pending");
        let decided =
            InstanceRecord::Decided { deferred: "d-1".into(), status: DeferredStatus::Denied, by: "x".into() };
        settle.observe_at(8, &Body::InstanceRecord { record: decided });
        assert_eq!(settle.quiet_since(), Some(8));
    }
}

#[cfg(test)]
mod refusal_tests {
    use super::*;

    #[test]
    fn a_refused_decommission_rests_until_it_is_asked_for_again() {
        let mut settle = Settle { open: ["decommission-node-02".to_owned()].into(), ..Settle::default() };
        let decommission = |event| Body::Decommission { workflow: "decommission-node-02".into(), event };
        let refused = OnboardingBody::Refused {
            stage: "disable_node".into(),
            class: "state_ambiguity".into(),
            workflow_state: "failed_retryable".into(),
            node_state: "active".into(),
            references: vec![engine::ports::events::WorkerReference::Epoch { epoch: 1 }],
        };
        settle.observe(3, "controller", &decommission(refused));
        assert_eq!(settle.quiet_since(), Some(3));
        let started = OnboardingBody::StageStarted { stage: "disable_node".into(), attempt: 1 };
        settle.observe(9, "controller", &decommission(started));
        assert_eq!(settle.quiet_since(), None, "the next request runs");
    }
}

#[cfg(test)]
mod dispatch_tests {
    use super::*;

    #[test]
    fn a_held_or_stopped_worker_keeps_the_run_open_until_the_dispatcher_has_tried_it() {
        let mut settle = Settle::default();
        settle.observe(1, "hub", &Body::HubHoldPlaced { agent: "node-07".into(), owner: "operator".into() });
        assert_eq!(settle.quiet_since(), None, "node-07 is held and not yet tried");
        settle.observe(2, "hub", &Body::HubDispatched { agent: "node-01".into(), task: "canary-1".into() });
        assert_eq!(settle.quiet_since(), None, "another worker's dispatch says nothing of node-07");
        settle.observe(3, "hub", &Body::HubDispatchRefused { agent: "node-07".into(), task: "canary-2".into() });
        assert_eq!(settle.quiet_since(), Some(1));
        let stop = Body::WorkerMutated { op: "stop_service".into(), operation_id: "r/1".into(), target: "svc".into() };
        settle.observe(4, "node-03", &stop);
        assert_eq!(settle.quiet_since(), None, "a change forgets what was tried; node-03 is stopped");
        settle.observe(5, "hub", &Body::HubDispatchRefused { agent: "node-07".into(), task: "canary-3".into() });
        settle.observe(6, "hub", &Body::HubDispatched { agent: "node-03".into(), task: "canary-4".into() });
        assert_eq!(settle.quiet_since(), Some(4));
    }
}
