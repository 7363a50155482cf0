//! Where each fault landed and what it did (`reports::RunRecord::fault_log`), from the trace's typed events: the
//! `step` events number the injected faults, the world's `fault.landed` events say when and on what work each
//! landed, and the run's activity at that moment gives the phase (which workflow — rollout, onboarding,
//! decommission, a credential rotation, the instance lifecycle — which stage or step, or idle). A landed fault's effect is the first reaction of its subject after it — a retry, a wait, a stop, a
//! quarantine, a repair, a signal — unless the landing carried its effect itself (a controller death, the hub's
//! expiry); progress of the subject's work first (its step or stage done), or nothing within
//! [`REACTION_HORIZON_MS`], means it had none (`docs/faults.md`, "Where a fault lands and what it does").

use std::collections::{BTreeMap, BTreeSet};

use engine::ports::events::{RolloutStep, TerminalOutcome};

use crate::model::faults::{Effect, Subject};
use crate::observe::trace::{Body, Event, OnboardingBody, RolloutBody};

/// How long after its landing a fault's subject may react for the reaction to count as the fault's effect. Longer
/// than anything the engine waits before it says what it does about a failure (an SSH call's timeout and backoff,
/// the silence sensor's three minutes and its period, a commissioning's stall detection), shorter than the time
/// between two unrelated faults of a subject in the shipped campaigns.
pub const REACTION_HORIZON_MS: u64 = 30 * 60_000;

/// What an event is to the subjects it concerns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reaction {
    /// The subject did something because of what it met.
    Effect(Effect),
    /// The subject's work went on: what landed before changed nothing.
    Progress,
}

/// One injected fault as the book keeps it.
#[derive(Debug, Clone)]
struct Entry {
    record: reports::FaultEntry,
    /// The subject key whose reaction is awaited, while it is.
    awaiting: Option<String>,
    /// The workflow the fault can only land in, when its step names one: a controller death's subsystem (its trap
    /// fires at that workflow's records and calls only, possibly before the workflow's first stage is traced).
    workflow: Option<&'static str>,
}

/// The fault log of one run, and what it needs to know of the run's activity.
#[derive(Debug, Default)]
pub struct FaultBook {
    entries: Vec<Entry>,
    /// `fault` number → index in `entries`.
    index: BTreeMap<u64, usize>,
    /// Faults awaiting a reaction, by subject key: (fault, landed at).
    awaiting: BTreeMap<String, Vec<(u64, u64)>>,
    /// Faults the log had no room for.
    dropped: u64,
    /// A rollout is in progress (requested and not yet terminal or refused), and its plan is frozen.
    rollout_active: bool,
    rollout_planned: bool,
    /// Nodes the rollout selected.
    selected: BTreeSet<String>,
    /// Each node in a lane that has not committed: its lane and the last step it started (a reverse step as
    /// `revert:<step>`).
    in_lane: BTreeMap<String, (u64, &'static str)>,
    /// Each machine with a workflow in flight: `onboarding` or `decommission`, and its stage.
    workflows: BTreeMap<String, (&'static str, String)>,
    /// Each node whose agent credential is being rotated, and the rotation's step.
    rotations: BTreeMap<String, &'static str>,
    /// The run has instances.
    instances: bool,
}

impl FaultBook {
    /// Takes one event of the trace.
    pub fn on_event(&mut self, event: &Event) {
        match &event.body {
            Body::Step { step, fault: Some(number) } => self.injected(event.t_ms, step, *number),
            Body::FaultLanded { fault, on, effect, .. } => self.landed(event.t_ms, *fault, on, *effect),
            _ => {}
        }
        self.react(event);
        self.track(&event.body);
    }

    /// The log, in injection order; faults still awaiting a reaction had none.
    pub fn finish(self) -> Vec<reports::FaultEntry> {
        self.entries.into_iter().map(|entry| entry.record).collect()
    }

    fn injected(&mut self, t_ms: u64, step: &crate::model::faults::Step, number: u64) {
        if self.entries.len() >= reports::FAULT_LOG_MAX {
            self.dropped += 1;
            return;
        }
        let target = step.target_key();
        self.index.insert(number, self.entries.len());
        self.entries.push(Entry {
            record: reports::FaultEntry {
                fault: number,
                kind: step.kind().to_owned(),
                target,
                injected_ms: t_ms,
                landed_ms: None,
                phase: "idle".to_owned(),
                effect: Effect::None.as_str().to_owned(),
            },
            awaiting: None,
            workflow: match step {
                crate::model::faults::Step::ControllerDeath { subsystem, .. } => Some(subsystem.as_str()),
                _ => None,
            },
        });
    }

    fn landed(&mut self, t_ms: u64, fault: u64, on: &Subject, effect: Option<Effect>) {
        let phase = self.phase_of(on);
        let Some(&index) = self.index.get(&fault) else { return };
        let entry = &mut self.entries[index];
        let phase = match entry.workflow {
            Some(workflow) if !phase.starts_with(workflow) => workflow.to_owned(),
            _ => phase,
        };
        entry.record.landed_ms = Some(t_ms);
        entry.record.phase = phase;
        match effect {
            Some(effect) => entry.record.effect = effect.as_str().to_owned(),
            None => {
                let key = on.key().to_owned();
                entry.awaiting = Some(key.clone());
                self.awaiting.entry(key).or_default().push((fault, t_ms));
            }
        }
    }

    /// Settles the faults awaiting a reaction of the subjects `event` concerns.
    fn react(&mut self, event: &Event) {
        if self.awaiting.is_empty() {
            return;
        }
        for (key, reaction) in reactions(&event.body) {
            let Some(waiting) = self.awaiting.remove(key.as_str()) else { continue };
            for (fault, landed_ms) in waiting {
                let effect = match reaction {
                    // Too late to be this fault's doing: it had none.
                    _ if event.t_ms > landed_ms + REACTION_HORIZON_MS => None,
                    Reaction::Effect(effect) => Some(effect),
                    Reaction::Progress => None,
                };
                self.settle(fault, effect);
            }
        }
    }

    fn settle(&mut self, fault: u64, effect: Option<Effect>) {
        let Some(&index) = self.index.get(&fault) else { return };
        let entry = &mut self.entries[index];
        entry.awaiting = None;
        entry.record.effect = effect.unwrap_or(Effect::None).as_str().to_owned();
    }

    /// Keeps what the phase of a landing is read from.
    fn track(&mut self, body: &Body) {
        match body {
            Body::RolloutSelected { nodes, .. } => {
                self.rollout_active = true;
                self.rollout_planned = false;
                self.selected = nodes.iter().cloned().collect();
            }
            Body::Rollout { event, .. } => match event {
                RolloutBody::PlanFrozen { .. } => self.rollout_planned = true,
                RolloutBody::Adopted { .. } => {
                    self.rollout_active = true;
                    self.rollout_planned = true;
                }
                RolloutBody::StepStarted {
                    node,
                    step: step @ (RolloutStep::Node(_) | RolloutStep::Revert(_)),
                    lane,
                } => {
                    self.in_lane.insert(node.clone(), (*lane, step.as_str()));
                }
                RolloutBody::LaneCommitted { lane, nodes, .. } => {
                    for node in nodes {
                        if self.in_lane.get(node).is_some_and(|(in_lane, _)| in_lane == lane) {
                            self.in_lane.remove(node);
                        }
                    }
                }
                RolloutBody::Terminal { .. } | RolloutBody::PlanRefused { .. } => {
                    self.rollout_active = false;
                    self.in_lane.clear();
                }
                _ => {}
            },
            Body::Onboarding { workflow, event } | Body::Decommission { workflow, event } => {
                let kind = if matches!(body, Body::Onboarding { .. }) { "onboarding" } else { "decommission" };
                let machine = crate::model::ids::machine_of_workflow(workflow).to_owned();
                match event {
                    OnboardingBody::StageStarted { stage, .. } => {
                        self.workflows.insert(machine, (kind, stage.clone()));
                    }
                    OnboardingBody::Completed { .. } | OnboardingBody::Stopped { .. } => {
                        self.workflows.remove(&machine);
                    }
                    _ => {}
                }
            }
            Body::Rotation { node, event, .. } => match event {
                crate::observe::trace::RotationBody::StepStarted { step } => {
                    self.rotations.insert(node.clone(), step.as_str());
                }
                crate::observe::trace::RotationBody::Ended { .. } => {
                    self.rotations.remove(node);
                }
                _ => {}
            },
            Body::InstanceRecord { .. } | Body::InstanceOperated { .. } => self.instances = true,
            _ => {}
        }
    }

    /// What `on` was doing now: `rollout:<step>` for a node in an uncommitted lane, `<workflow>:<stage>` for a
    /// machine with a workflow in flight, `rollout:preflight` for a selected node before the plan is frozen, the
    /// rollout's or a workflow's phase for the controller, the hub and the rollout itself, `instances`, or `idle`.
    fn phase_of(&self, on: &Subject) -> String {
        let rollout = || {
            let stage = if self.rollout_planned { "lanes" } else { "preflight" };
            self.rollout_active.then(|| format!("rollout:{stage}"))
        };
        let workflows = || {
            let kinds: BTreeSet<&str> = self.workflows.values().map(|(kind, _)| *kind).collect();
            kinds.into_iter().next().map(str::to_owned)
        };
        let phase = match on {
            Subject::Instances => Some("instances".to_owned()),
            Subject::Rollout => rollout(),
            Subject::Controller => rollout().or_else(workflows),
            Subject::Node(name) | Subject::Machine(name) | Subject::Host(name) => {
                if let Some((_, step)) = self.in_lane.get(name) {
                    Some(format!("rollout:{step}"))
                } else if let Some((kind, stage)) = self.workflows.get(name) {
                    Some(format!("{kind}:{stage}"))
                } else if let Some(step) = self.rotations.get(name) {
                    Some(format!("rotation:{step}"))
                } else if self.rollout_active && !self.rollout_planned && self.selected.contains(name) {
                    Some("rollout:preflight".to_owned())
                } else if name == crate::model::spec::CONTROLLER || name == crate::model::spec::HUB {
                    rollout().or_else(workflows)
                } else {
                    None
                }
            }
        };
        phase.or_else(|| self.instances.then(|| "instances".to_owned())).unwrap_or_else(|| "idle".to_owned())
    }
}

/// The subjects an event is a reaction of (by key), and what it is to each.
fn reactions(body: &Body) -> Vec<(String, Reaction)> {
    use Reaction::{Effect as Did, Progress};
    let controller = |reaction: Reaction| (crate::model::spec::CONTROLLER.to_owned(), reaction);
    let hub = |reaction: Reaction| (crate::model::spec::HUB.to_owned(), reaction);
    let rollout = |reaction: Reaction| ("rollout".to_owned(), reaction);
    match body {
        Body::Rollout { event, .. } => match event {
            RolloutBody::Retrying { node, .. } => {
                vec![(node.clone(), Did(Effect::Retried)), controller(Did(Effect::Retried))]
            }
            RolloutBody::HubRetrying { .. } => {
                vec![rollout(Did(Effect::Retried)), controller(Did(Effect::Retried)), hub(Did(Effect::Retried))]
            }
            RolloutBody::NodeFailed { node, .. } => {
                vec![(node.clone(), Did(Effect::Stopped)), controller(Did(Effect::Stopped))]
            }
            RolloutBody::Quarantined { node, .. } => vec![(node.clone(), Did(Effect::Quarantined))],
            RolloutBody::Repaired { node, .. } | RolloutBody::Canonicalized { node, .. } => {
                vec![(node.clone(), Did(Effect::Repaired))]
            }
            RolloutBody::SkippedHeld { node, .. } => vec![(node.clone(), Did(Effect::Stopped))],
            RolloutBody::StepDone { node, .. } => vec![(node.clone(), Progress)],
            RolloutBody::LockWaiting { .. } => vec![rollout(Did(Effect::Stalled)), controller(Did(Effect::Stalled))],
            RolloutBody::Reauthenticated { .. } => vec![rollout(Did(Effect::Retried))],
            RolloutBody::RouteChanged { .. } | RolloutBody::PlanRefused { .. } => {
                vec![rollout(Did(Effect::Stopped)), controller(Did(Effect::Stopped))]
            }
            RolloutBody::Terminal { outcome: TerminalOutcome::Failed(_) } => {
                vec![rollout(Did(Effect::Stopped)), controller(Did(Effect::Stopped))]
            }
            RolloutBody::Terminal { .. } | RolloutBody::LaneCommitted { .. } => vec![rollout(Progress)],
            _ => Vec::new(),
        },
        Body::Onboarding { workflow, event } | Body::Decommission { workflow, event } => {
            let machine = crate::model::ids::machine_of_workflow(workflow).to_owned();
            let reaction = match event {
                OnboardingBody::Retrying { .. } => Did(Effect::Retried),
                OnboardingBody::Stalled { .. } => Did(Effect::Stalled),
                OnboardingBody::Stopped { .. } => Did(Effect::Stopped),
                OnboardingBody::RecoveryWork { outcome, .. } if outcome == "performed" => Did(Effect::Repaired),
                // A machine fault bites at the stage that needs what it changed, often stages after the one it
                // landed in: only the workflow's completion says it changed nothing.
                OnboardingBody::Completed { .. } => Progress,
                _ => return Vec::new(),
            };
            match reaction {
                Progress => vec![(machine, Progress)],
                effect => vec![(machine, effect), controller(effect)],
            }
        }
        Body::Rotation { node, event, .. } => {
            use crate::observe::trace::RotationBody;
            match event {
                RotationBody::Retrying { .. } => {
                    vec![(node.clone(), Did(Effect::Retried)), controller(Did(Effect::Retried))]
                }
                RotationBody::Reauthenticated { .. } => vec![controller(Did(Effect::Retried))],
                RotationBody::Ended { end } if !matches!(end, engine::ports::events::RotationEnd::Rotated { .. }) => {
                    vec![(node.clone(), Did(Effect::Stopped)), controller(Did(Effect::Stopped))]
                }
                RotationBody::StepDone { .. } => vec![(node.clone(), Progress)],
                _ => Vec::new(),
            }
        }
        Body::InstanceSilent { instance, .. } => vec![(instance.clone(), Did(Effect::Signalled))],
        Body::HubReadFailed { .. } => vec![controller(Did(Effect::Signalled)), hub(Did(Effect::Signalled))],
        Body::HubTombstoned { agent, .. } => vec![(agent.clone(), Did(Effect::Stopped))],
        Body::HubOffline { agent, .. } => vec![(agent.clone(), Did(Effect::Signalled))],
        Body::InstanceStuck { .. } | Body::InstanceSyncSignal { .. } => {
            vec![("instances".to_owned(), Did(Effect::Signalled))]
        }
        Body::InstancePassFailed { .. } => vec![("instances".to_owned(), Did(Effect::Retried))],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use engine::ports::events::{LaneVerdict, NodeStep};

    use super::*;
    use crate::model::faults::{Step, StepKind};

    fn ev(t_ms: u64, body: Body) -> Event {
        Event { t_ms, host: Rc::from("sim"), body }
    }

    fn rollout(t_ms: u64, event: RolloutBody) -> Event {
        ev(t_ms, Body::Rollout { rollout: "r".into(), event })
    }

    fn inject(t_ms: u64, number: u64, target: &str) -> Event {
        ev(t_ms, Body::Step { step: Step::SshTimeout { target: target.into(), count: 1 }, fault: Some(number) })
    }

    fn landed(t_ms: u64, number: u64, node: &str) -> Event {
        ev(
            t_ms,
            Body::FaultLanded {
                fault: number,
                fault_kind: StepKind::SshTimeout,
                on: Subject::Node(node.into()),
                effect: None,
            },
        )
    }

    fn book(events: &[Event]) -> Vec<reports::FaultEntry> {
        let mut book = FaultBook::default();
        for event in events {
            book.on_event(event);
        }
        book.finish()
    }

    #[test]
    fn a_fault_lands_in_its_nodes_step_and_takes_its_first_reaction_as_its_effect() {
        let selected = ev(0, Body::RolloutSelected { rollout: "r".into(), nodes: vec!["n1".into(), "n2".into()] });
        let started = |t, node: &str| {
            rollout(
                t,
                RolloutBody::StepStarted { node: node.into(), step: RolloutStep::Node(NodeStep::Install), lane: 0 },
            )
        };
        let retry = |t, node: &str| {
            let step = RolloutStep::Node(NodeStep::Install);
            rollout(t, RolloutBody::Retrying { node: node.into(), step, attempt: 1, delay_ms: 5, error: "t".into() })
        };
        let done = |t, node: &str| {
            rollout(t, RolloutBody::StepDone { node: node.into(), step: RolloutStep::Node(NodeStep::Install), lane: 0 })
        };
        let log = book(&[
            selected,
            inject(1, 1, "n1"),
            inject(1, 2, "n2"),
            inject(1, 3, "n3"),
            rollout(2, RolloutBody::PlanFrozen { revision: "x".into(), lanes: 1, lane_size: 2, rollout_bound_ms: 9 }),
            started(3, "n1"),
            started(3, "n2"),
            landed(4, 1, "n1"),
            landed(4, 2, "n2"),
            // Another node's retry is not n2's reaction; n2's work goes on first: no effect.
            retry(5, "n1"),
            done(6, "n2"),
            rollout(
                7,
                RolloutBody::LaneCommitted {
                    lane: 0,
                    verdict: LaneVerdict::Successor,
                    nodes: vec!["n1".into(), "n2".into()],
                },
            ),
        ]);
        let summary: Vec<(&str, Option<u64>, &str)> =
            log.iter().map(|entry| (entry.phase.as_str(), entry.landed_ms, entry.effect.as_str())).collect();
        assert_eq!(
            summary,
            [("rollout:install", Some(4), "retried"), ("rollout:install", Some(4), "none"), ("idle", None, "none")]
        );
    }

    #[test]
    fn a_reaction_past_the_horizon_is_not_the_faults_and_a_carried_effect_stands() {
        let late = REACTION_HORIZON_MS + 10;
        let retry = rollout(
            late,
            RolloutBody::Retrying {
                node: "n1".into(),
                step: RolloutStep::Preflight,
                attempt: 1,
                delay_ms: 5,
                error: "t".into(),
            },
        );
        let log = book(&[inject(0, 1, "n1"), landed(1, 1, "n1"), retry]);
        assert_eq!((log[0].phase.as_str(), log[0].effect.as_str()), ("idle", "none"));
        let death = ev(
            2,
            Body::FaultLanded {
                fault: 1,
                fault_kind: StepKind::ControllerDeath,
                on: Subject::Rollout,
                effect: Some(Effect::Stopped),
            },
        );
        let step = Step::ControllerDeath {
            point: crate::model::faults::DeathPoint::AfterIntent,
            subsystem: crate::model::faults::DeathSubsystem::Rollout,
            restart_after_ms: None,
        };
        let selected = ev(0, Body::RolloutSelected { rollout: "r".into(), nodes: vec!["n1".into()] });
        let log = book(&[selected, ev(1, Body::Step { step, fault: Some(1) }), death]);
        assert_eq!((log[0].phase.as_str(), log[0].effect.as_str()), ("rollout:preflight", "stopped"));
    }

    #[test]
    fn a_death_at_a_workflows_first_record_lands_in_that_workflow() {
        use crate::model::faults::{DeathPoint, DeathSubsystem};
        // A decommission's first checkpoint is durable and the controller dies before the stage is traced: the
        // machine has no workflow in flight yet, but the trap fired at that workflow's record.
        let step = Step::ControllerDeath {
            point: DeathPoint::AfterIntent,
            subsystem: DeathSubsystem::Decommission,
            restart_after_ms: None,
        };
        let death = ev(
            2,
            Body::FaultLanded {
                fault: 1,
                fault_kind: StepKind::ControllerDeath,
                on: Subject::Machine("m1".into()),
                effect: Some(Effect::Stopped),
            },
        );
        let instances = ev(
            1,
            Body::InstanceOperated {
                actor: "oncall".into(),
                op: "terminate".into(),
                target: "m1".into(),
                outcome: "performed".into(),
                wrote: Vec::new(),
            },
        );
        let log = book(&[ev(0, Body::Step { step, fault: Some(1) }), instances, death]);
        assert_eq!((log[0].phase.as_str(), log[0].effect.as_str()), ("decommission", "stopped"));
    }

    #[test]
    fn a_machine_fault_waits_past_the_stages_it_did_not_touch() {
        let on = |t, event| ev(t, Body::Onboarding { workflow: "onboard-m1".into(), event });
        let step = Step::HardwareMissing { target: "m1".into(), part: crate::model::faults::HardwarePart::Boss };
        let land = ev(
            2,
            Body::FaultLanded {
                fault: 1,
                fault_kind: StepKind::HardwareMissing,
                on: Subject::Machine("m1".into()),
                effect: None,
            },
        );
        let log = book(&[
            ev(0, Body::Step { step, fault: Some(1) }),
            on(1, OnboardingBody::StageStarted { stage: "create_or_find_in_maas".into(), attempt: 1 }),
            land,
            on(3, OnboardingBody::StageDone { stage: "create_or_find_in_maas".into(), adopted: false }),
            on(4, OnboardingBody::StageStarted { stage: "configure_storage".into(), attempt: 1 }),
            on(
                5,
                OnboardingBody::Stopped {
                    stage: "configure_storage".into(),
                    class: "hardware_mismatch".into(),
                    workflow_state: "failed".into(),
                    node_state: "quarantined".into(),
                    evidence: Vec::new(),
                },
            ),
        ]);
        assert_eq!((log[0].phase.as_str(), log[0].effect.as_str()), ("onboarding:create_or_find_in_maas", "stopped"));
    }
}
