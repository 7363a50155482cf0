//! The oracles of the rolling deployment (the 2026-09-21 RCCA): the availability floor, lane bounds, no duplicate
//! or incoherent mutation, no fetch after quiescence, every selected node accounted for, holds accounted for, lanes
//! converged, receipts and time bounds.

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use engine::ports::events::{
    LaneVerdict, NodeAccount, NodeOutcome, NodeStep, QuarantineCause, RolloutStep, TerminalOutcome,
};

use crate::model::faults::Step;
use crate::observe::oracles::{Finding, Oracle, OracleContext};
use crate::observe::trace::{Body, Egress, Event, OnboardingBody, RolloutBody};
use fakes::worker::Drift;

/// The owner prefix of the holds a rollout places on the nodes of its lanes.
pub(super) const DEPLOY_HOLD_PREFIX: &str = "deploy:";

/// The dispatch holds the hub placed, by agent and owner, as its events report them.
#[derive(Debug, Default)]
pub(super) struct HoldBook {
    holds: BTreeMap<String, BTreeSet<String>>,
}

impl HoldBook {
    /// Follows a hold event; returns false for any other event.
    pub(super) fn observe(&mut self, body: &Body) -> bool {
        match body {
            Body::HubHoldPlaced { agent, owner } => {
                self.holds.entry(agent.clone()).or_default().insert(owner.clone());
            }
            Body::HubHoldReleased { agent, owner } => {
                if let Some(owners) = self.holds.get_mut(agent) {
                    owners.remove(owner);
                    if owners.is_empty() {
                        self.holds.remove(agent);
                    }
                }
            }
            _ => return false,
        }
        true
    }

    pub(super) fn held(&self) -> impl Iterator<Item = &String> {
        self.holds.keys()
    }

    pub(super) fn owners(&self, agent: &str) -> Option<&BTreeSet<String>> {
        self.holds.get(agent)
    }
}

/// Healthy, eligible workers from the controller's point of view — agent service running, no dispatch hold of any
/// owner, not tombstoned — followed event by event. Crashes and partitions are not counted: the floor bounds what the
/// controller takes down, not what faults do. `availability_floor` judges it; the trace's collectors record it.
#[derive(Debug, Default)]
pub(crate) struct Availability {
    nodes: usize,
    /// The last rollout's selection (`rollout.selected`): only its nodes count, once the trace shows one.
    selected: Option<BTreeSet<String>>,
    stopped: BTreeSet<String>,
    holds: HoldBook,
    tombstoned: BTreeSet<String>,
}

impl Availability {
    pub(crate) fn new(nodes: usize) -> Availability {
        Availability { nodes, ..Availability::default() }
    }

    /// Follows one event; returns whether it can have changed the count.
    pub(crate) fn observe(&mut self, event: &Event) -> bool {
        match &event.body {
            body if self.holds.observe(body) => {}
            Body::WorkerService { running: false } => {
                self.stopped.insert(event.host.to_string());
            }
            Body::WorkerService { running: true } => {
                self.stopped.remove(&*event.host);
            }
            Body::HubTombstoned { agent, .. } => {
                self.tombstoned.insert(agent.clone());
            }
            Body::HubRegistered { agent, .. } | Body::HubResurrected { agent, .. } => {
                self.tombstoned.remove(agent);
            }
            Body::RolloutSelected { nodes, .. } => {
                self.selected = Some(nodes.iter().cloned().collect());
            }
            _ => return false,
        }
        true
    }

    pub(crate) fn healthy(&self) -> usize {
        let unhealthy: BTreeSet<&String> = self
            .stopped
            .iter()
            .chain(self.holds.held())
            .chain(self.tombstoned.iter())
            .filter(|node| self.selected.as_ref().is_none_or(|selected| selected.contains(*node)))
            .collect();
        let nodes = self.selected.as_ref().map_or(self.nodes, BTreeSet::len);
        nodes.saturating_sub(unhealthy.len())
    }
}

/// `availability_floor`: reports each dip of [`Availability`] below the floor.
pub(super) struct AvailabilityFloor {
    floor: usize,
    availability: Availability,
    below: bool,
    /// Rollouts that began (their first event) and have not ended or been refused: the floor is theirs to keep ("at
    /// every checkpoint of a rollout"), so a change of availability is judged only while one is in flight.
    in_flight: BTreeSet<String>,
    /// Rollouts that ended or were refused: what they report afterwards (the account after a refusal) does not make
    /// them in flight again; an adoption of their journal, or a new request, does.
    ended: BTreeSet<String>,
}

impl AvailabilityFloor {
    pub(super) fn new(ctx: &OracleContext) -> AvailabilityFloor {
        AvailabilityFloor {
            floor: ctx.availability_floor as usize,
            availability: Availability::new(ctx.nodes as usize),
            below: false,
            in_flight: BTreeSet::new(),
            ended: BTreeSet::new(),
        }
    }
}

impl Oracle for AvailabilityFloor {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        if self.floor == 0 {
            return;
        }
        let changed = match &event.body {
            Body::Rollout { rollout, event: RolloutBody::Terminal { .. } | RolloutBody::PlanRefused { .. } } => {
                self.in_flight.remove(rollout);
                self.ended.insert(rollout.clone());
                false
            }
            // A rollout is in flight from the operator's request (or, without one in the trace, its first event) on.
            // What it finds is not its doing: a selection already under the floor is judged at the next change.
            Body::RolloutSelected { rollout, .. } => {
                self.availability.observe(event);
                self.ended.remove(rollout);
                self.in_flight.insert(rollout.clone());
                false
            }
            Body::Rollout { rollout, event: RolloutBody::Adopted { .. } } => {
                self.ended.remove(rollout);
                self.in_flight.insert(rollout.clone());
                false
            }
            Body::Rollout { rollout, .. } => {
                if !self.ended.contains(rollout) {
                    self.in_flight.insert(rollout.clone());
                }
                false
            }
            _ => self.availability.observe(event),
        };
        if !changed || self.in_flight.is_empty() {
            return;
        }
        let healthy = self.availability.healthy();
        if healthy < self.floor && !self.below {
            self.below = true;
            out.push(Finding {
                t_ms: event.t_ms,
                evidence: format!("healthy eligible workers fell to {healthy}, below the floor of {}", self.floor),
            });
        } else if healthy >= self.floor {
            self.below = false;
        }
    }
}

/// `lane_bound`: at most `lane_size` workers under a deployment-owned hold at once.
pub(super) struct LaneBound {
    lane_size: usize,
    held: BTreeSet<String>,
    over: bool,
}

impl LaneBound {
    pub(super) fn new(lane_size: usize) -> LaneBound {
        LaneBound { lane_size, held: BTreeSet::new(), over: false }
    }
}

impl Oracle for LaneBound {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        match &event.body {
            Body::HubHoldPlaced { agent, owner } if owner.starts_with(DEPLOY_HOLD_PREFIX) => {
                self.held.insert(agent.clone());
            }
            Body::HubHoldReleased { agent, owner } if owner.starts_with(DEPLOY_HOLD_PREFIX) => {
                self.held.remove(agent);
            }
            _ => return,
        }
        if self.held.len() > self.lane_size && !self.over {
            self.over = true;
            out.push(Finding {
                t_ms: event.t_ms,
                evidence: format!(
                    "{} workers under deployment holds, more than the lane size of {}",
                    self.held.len(),
                    self.lane_size
                ),
            });
        } else if self.held.len() <= self.lane_size {
            self.over = false;
        }
    }
}

#[derive(Default)]
pub(super) struct NoDuplicateMutation {
    applied: BTreeSet<(String, String)>,
    completed: BTreeSet<String>,
    holds: BTreeSet<(String, String)>,
    site: SiteMutations,
}

/// The MAAS workflows' side of `no_duplicate_mutation`: the commissions, deploys and releases MAAS accepted in each
/// workflow's current stage attempt. When the controller dies, each workflow's attempt is carried over to the first
/// attempt of the same stage its restarted controller starts (the rerun of that stage is the same attempt, resumed).
#[derive(Default)]
pub(super) struct SiteMutations {
    /// workflow → (current stage, (op, machine) accepted in its current attempt)
    current: BTreeMap<String, (String, BTreeSet<(String, String)>)>,
    /// workflow → (stage, mutations) of the attempt a dead controller was in
    carried: BTreeMap<String, (String, BTreeSet<(String, String)>)>,
}

/// The MAAS calls `no_duplicate_mutation` counts.
pub(super) const COUNTED_SITE_MUTATIONS: [&str; 3] = ["commission", "deploy", "release"];

impl SiteMutations {
    pub(super) fn observe(&mut self, event: &Event) -> Option<String> {
        match &event.body {
            Body::Onboarding { workflow, event: OnboardingBody::StageStarted { stage, .. } }
            | Body::Decommission { workflow, event: OnboardingBody::StageStarted { stage, .. } } => {
                let accepted = match self.carried.remove(workflow) {
                    Some((carried_stage, accepted)) if carried_stage == *stage => accepted,
                    Some(other) => {
                        // Not yet the stage the dead controller was in: keep waiting for it.
                        self.carried.insert(workflow.clone(), other);
                        BTreeSet::new()
                    }
                    None => BTreeSet::new(),
                };
                self.current.insert(workflow.clone(), (stage.clone(), accepted));
                None
            }
            Body::Onboarding { workflow, event: OnboardingBody::Stopped { .. } | OnboardingBody::Completed { .. } }
            | Body::Decommission {
                workflow,
                event: OnboardingBody::Stopped { .. } | OnboardingBody::Completed { .. },
            } => {
                self.carried.remove(workflow);
                self.current.remove(workflow);
                None
            }
            Body::HostCrash { .. } if &*event.host == "controller" => {
                for (workflow, attempt) in std::mem::take(&mut self.current) {
                    if !attempt.1.is_empty() {
                        self.carried.insert(workflow, attempt);
                    }
                }
                None
            }
            Body::SiteRequest { workflow, op, system_id: Some(system_id), status: Some(status) }
                if COUNTED_SITE_MUTATIONS.contains(&op.as_str()) && (200..300).contains(status) =>
            {
                let (stage, accepted) = self.current.entry(workflow.clone()).or_default();
                (!accepted.insert((op.clone(), system_id.clone())))
                    .then(|| format!("{workflow}: {system_id} accepted a second {op} in one attempt of stage {stage}"))
            }
            _ => None,
        }
    }
}

impl Oracle for NoDuplicateMutation {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        if let Some(evidence) = self.site.observe(event) {
            out.push(Finding { t_ms: event.t_ms, evidence });
            return;
        }
        let duplicate = match &event.body {
            Body::WorkerMutated { op, operation_id, .. } => {
                (!self.applied.insert((event.host.to_string(), operation_id.clone())))
                    .then(|| format!("{} ran {op} {operation_id} a second time", event.host))
            }
            Body::JournalAppended { record, operation_id: Some(operation_id), .. } if record == "completed" => {
                (!self.completed.insert(operation_id.clone()))
                    .then(|| format!("the journal recorded {operation_id} completed twice"))
            }
            Body::HubHoldPlaced { agent, owner } => {
                self.holds.insert((agent.clone(), owner.clone()));
                None
            }
            Body::HubHoldReleased { agent, owner } => (!self.holds.remove(&(agent.clone(), owner.clone())))
                .then(|| format!("{owner}'s hold on {agent} was released twice")),
            _ => None,
        };
        if let Some(evidence) = duplicate {
            out.push(Finding { t_ms: event.t_ms, evidence });
        }
    }
}

/// `no_fetch_after_quiescence`: the RCCA's "after the barrier, outbound downloads are protocol violations".
#[derive(Default)]
pub(super) struct NoFetchAfterQuiescence {
    quiesced: BTreeSet<String>,
}

impl Oracle for NoFetchAfterQuiescence {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        match &event.body {
            Body::WorkerMutated { op, .. } if op == "stop_service" => {
                self.quiesced.insert(event.host.to_string());
            }
            Body::WorkerMutated { op, .. } if op == "start_service" => {
                self.quiesced.remove(&*event.host);
            }
            Body::WorkerMutated { op, target, .. }
                if op == "stage_artifact" && self.quiesced.contains(&*event.host) =>
            {
                out.push(Finding {
                    t_ms: event.t_ms,
                    evidence: format!("{} fetched {target} while quiesced", event.host),
                });
            }
            _ => {}
        }
    }
}

/// `recovery_hold_precedes_identity`: the RCCA's "recovery hold precedes recovery identity", from the worker's side: a
/// write that leaves the environment with the attestation key and no startup hold is a violation, whoever wrote it.
pub(super) struct RecoveryHoldPrecedesIdentity;

impl Oracle for RecoveryHoldPrecedesIdentity {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        if matches!(event.body, Body::WorkerIdentityUnheld) {
            out.push(Finding {
                t_ms: event.t_ms,
                evidence: format!("{}'s environment holds its attestation key with no startup hold", event.host),
            });
        }
    }
}

/// `no_incoherent_node_mutated`: the RCCA's "no incoherent node mutated before quarantine", judged over the whole run.
/// A node is incoherent when the preflight quarantined it for its identity (its typed `cause`; not one it could not
/// reach, nor a failed staging or repair, which come after the node was found coherent), or — the ground truth, not the engine's word — when the only drift it was
/// given before the first rollout began is one no repair may cover (every shape but worker-50's marker-absent full
/// environment, the early cohort's absent environment, the retained recovery-only environment and the four
/// historical forms a canonicalization rewrites); every rollout mutation on it, at any time, is a violation.
#[derive(Default)]
pub(super) struct NoIncoherentNodeMutated {
    mutations: BTreeMap<String, Vec<(u64, String)>>,
    incoherent: BTreeSet<String>,
    /// Each node's drifts before the first rollout began.
    drifts: BTreeMap<String, Vec<Drift>>,
    rollout_began: bool,
}

impl Oracle for NoIncoherentNodeMutated {
    fn on_event(&mut self, event: &Event, _line: &str, _out: &mut Vec<Finding>) {
        if !self.rollout_began {
            match &event.body {
                Body::Step { step: Step::MarkerDrift { target, shape }, .. } => {
                    self.drifts.entry(target.clone()).or_default().push(*shape);
                }
                Body::Rollout { .. } => {
                    self.rollout_began = true;
                    let unrepairable = |drifts: &Vec<Drift>| {
                        matches!(drifts.as_slice(), [shape] if !matches!(
                            shape,
                            Drift::MarkerAbsentFullEnv
                                | Drift::EnvAbsent
                                | Drift::RecoveryOnlyEnv
                                | Drift::ExportPrefixedEnv
                                | Drift::OvswarmNamesEnv
                                | Drift::ReceiptV1
                                | Drift::ReceiptV2
                        ))
                    };
                    let drifted = self.drifts.iter().filter(|(_, drifts)| unrepairable(drifts));
                    self.incoherent.extend(drifted.map(|(node, _)| node.clone()));
                }
                _ => {}
            }
        }
        match &event.body {
            Body::WorkerMutated { op, operation_id, .. } if operation_id.starts_with("rollout-") => {
                self.mutations
                    .entry(event.host.to_string())
                    .or_default()
                    .push((event.t_ms, format!("{op} {operation_id}")));
            }
            // Only the preflight's verdict on the identity makes a node incoherent: a node quarantined because it
            // could not be reached, staged or repaired was coherent as far as anyone knew.
            Body::Rollout {
                event: RolloutBody::Quarantined { node, cause: QuarantineCause::Identity, .. }, ..
            } => {
                self.incoherent.insert(node.clone());
            }
            _ => {}
        }
    }

    fn on_finish(&mut self, _end_ms: u64, out: &mut Vec<Finding>) {
        for node in &self.incoherent {
            for (t_ms, what) in self.mutations.get(node).into_iter().flatten() {
                out.push(Finding {
                    t_ms: *t_ms,
                    evidence: format!("{node}, quarantined as incoherent, was mutated: {what}"),
                });
            }
        }
    }
}

/// `no_dispatch_to_held_worker`: from the hub's dispatch events against the holds it placed and the services the
/// rollout stopped. The rollout must hold a worker before it quiesces it, so no task can land on a stopped worker.
#[derive(Default)]
pub(super) struct NoDispatchToHeld {
    holds: HoldBook,
    quiesced: BTreeSet<String>,
}

impl Oracle for NoDispatchToHeld {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        match &event.body {
            body if self.holds.observe(body) => {}
            Body::WorkerMutated { op, .. } if op == "stop_service" => {
                self.quiesced.insert(event.host.to_string());
            }
            Body::WorkerMutated { op, .. } if op == "start_service" => {
                self.quiesced.remove(&*event.host);
            }
            Body::HubDispatched { agent, task } => {
                if let Some(owners) = self.holds.owners(agent) {
                    let owners: Vec<&str> = owners.iter().map(String::as_str).collect();
                    out.push(Finding {
                        t_ms: event.t_ms,
                        evidence: format!("{task} dispatched to {agent}, held by {}", owners.join(", ")),
                    });
                } else if self.quiesced.contains(agent) {
                    out.push(Finding {
                        t_ms: event.t_ms,
                        evidence: format!("{task} dispatched to {agent}, whose service the rollout stopped"),
                    });
                }
            }
            _ => {}
        }
    }
}

#[derive(Default)]
pub(super) struct EveryLaneConverged {
    started_ms: Option<u64>,
    /// How the rollout ended: its terminal event's outcome, or `None` for a refusal (every lane prior).
    terminal: Option<Option<TerminalOutcome>>,
    /// Each lane's latest verdict, with when it was committed: a lane committed stuck and then rolled back to its
    /// prior generation converged.
    lanes: BTreeMap<(String, u64), (LaneVerdict, u64)>,
}

impl Oracle for EveryLaneConverged {
    fn on_event(&mut self, event: &Event, _line: &str, _out: &mut Vec<Finding>) {
        match &event.body {
            Body::Step { step: Step::StartRollout { .. }, .. } => self.started_ms = Some(event.t_ms),
            Body::Rollout { rollout, event: RolloutBody::LaneCommitted { lane, verdict, .. } } => {
                self.lanes.insert((rollout.clone(), *lane), (*verdict, event.t_ms));
            }
            Body::Rollout { event: RolloutBody::Terminal { outcome }, .. } => {
                self.terminal = Some(Some(outcome.clone()));
            }
            Body::Rollout { event: RolloutBody::PlanRefused { .. }, .. } => self.terminal = Some(None),
            _ => {}
        }
    }

    fn on_finish(&mut self, end_ms: u64, out: &mut Vec<Finding>) {
        let Some(started_ms) = self.started_ms else { return };
        for ((_, lane), (verdict, t_ms)) in &self.lanes {
            if *verdict == LaneVerdict::Stuck {
                let evidence = format!("lane {lane} is stuck: neither successor nor prior");
                out.push(Finding { t_ms: *t_ms, evidence });
            }
        }
        match &self.terminal {
            None => out.push(Finding {
                t_ms: end_ms,
                evidence: format!("the rollout started at t={started_ms} ms never reached a terminal state"),
            }),
            Some(Some(outcome @ TerminalOutcome::Failed(_))) => {
                out.push(Finding { t_ms: end_ms, evidence: format!("the rollout ended {outcome}") });
            }
            Some(_) => {}
        }
    }
}

/// Judges every rollout's account against the trace: the engine's word on a node is believed only where the
/// events the trace already holds show it.
pub(super) struct EverySelectedNodeAccounted {
    /// Nodes the fleet has: what a rollout whose selection the trace does not show selects.
    fleet: usize,
    /// Per rollout: the nodes its request selected (`rollout.selected`).
    selected: BTreeMap<String, BTreeSet<String>>,
    /// Per rollout: the nodes it released, began quiescing, quarantined and skipped for another's hold.
    seen: BTreeMap<String, RolloutSeen>,
    /// Per rollout: the nodes its last account did not call upgraded.
    not_upgraded: BTreeMap<String, Vec<String>>,
}

#[derive(Default)]
struct RolloutSeen {
    released: BTreeSet<String>,
    /// Nodes whose lane's rollback released them again on their prior generation.
    rolled_back: BTreeSet<String>,
    quiesced: BTreeSet<String>,
    quarantined: BTreeSet<String>,
    skipped: BTreeSet<String>,
}

impl EverySelectedNodeAccounted {
    pub(super) fn new(ctx: &OracleContext) -> Self {
        EverySelectedNodeAccounted {
            fleet: ctx.nodes as usize,
            selected: BTreeMap::new(),
            seen: BTreeMap::new(),
            not_upgraded: BTreeMap::new(),
        }
    }

    fn judge_account(&mut self, t_ms: u64, rollout: &str, nodes: &[NodeAccount], out: &mut Vec<Finding>) {
        let seen = self.seen.entry(rollout.to_owned()).or_default();
        let mut finding = |evidence: String| out.push(Finding { t_ms, evidence: format!("{rollout}: {evidence}") });
        let names: BTreeSet<&str> = nodes.iter().map(|entry| entry.node.as_str()).collect();
        let selected = self.selected.get(rollout);
        let count = selected.map_or(self.fleet, BTreeSet::len);
        if names.len() != nodes.len() || nodes.len() != count {
            finding(format!(
                "the account names {} distinct nodes in {} entries, but the rollout selected {count}",
                names.len(),
                nodes.len(),
            ));
        }
        if let Some(selected) = selected {
            let foreign: Vec<&str> = names.iter().copied().filter(|node| !selected.contains(*node)).collect();
            if !foreign.is_empty() {
                finding(format!("the account names nodes the rollout did not select: {}", foreign.join(", ")));
            }
        }
        for entry in nodes {
            let node = entry.node.as_str();
            let released = seen.released.contains(node);
            let contradiction = match &entry.outcome {
                NodeOutcome::Upgraded if !released => Some("upgraded, but it never completed its release step"),
                NodeOutcome::Upgraded => None,
                NodeOutcome::Prior { .. } if seen.rolled_back.contains(node) => None,
                _ if released => Some("not upgraded, but it completed its release step"),
                NodeOutcome::Prior { .. } if seen.quiesced.contains(node) => {
                    Some("prior, but the rollout began quiescing it")
                }
                NodeOutcome::Quarantined { .. } if !seen.quarantined.contains(node) => {
                    Some("quarantined, but the rollout never reported its quarantine")
                }
                NodeOutcome::Held { .. } if !seen.skipped.contains(node) => {
                    Some("held by someone else, but the rollout never skipped it for a hold")
                }
                NodeOutcome::Prior { .. }
                | NodeOutcome::Quarantined { .. }
                | NodeOutcome::Held { .. }
                | NodeOutcome::Stuck { .. } => None,
            };
            if let Some(contradiction) = contradiction {
                finding(format!("{node} is accounted {contradiction}"));
            }
        }
        let not_upgraded =
            nodes.iter().filter(|entry| entry.outcome != NodeOutcome::Upgraded).map(|entry| entry.node.clone());
        self.not_upgraded.insert(rollout.to_owned(), not_upgraded.collect());
    }
}

impl Oracle for EverySelectedNodeAccounted {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        if let Body::RolloutSelected { rollout, nodes } = &event.body {
            self.selected.insert(rollout.clone(), nodes.iter().cloned().collect());
            return;
        }
        let Body::Rollout { rollout, event: body } = &event.body else { return };
        let seen = self.seen.entry(rollout.clone()).or_default();
        match body {
            RolloutBody::StepDone { node, step: RolloutStep::Node(NodeStep::Release), .. } => {
                seen.released.insert(node.clone());
            }
            // A rollback's release puts the node back on its prior generation: released, but not upgraded.
            RolloutBody::StepDone { node, step: RolloutStep::Revert(NodeStep::Release), .. } => {
                seen.released.remove(node);
                seen.rolled_back.insert(node.clone());
            }
            RolloutBody::StepStarted { node, step: RolloutStep::Node(NodeStep::Quiesce), .. } => {
                seen.quiesced.insert(node.clone());
            }
            RolloutBody::Quarantined { node, .. } => {
                seen.quarantined.insert(node.clone());
            }
            RolloutBody::SkippedHeld { node, .. } => {
                seen.skipped.insert(node.clone());
            }
            RolloutBody::Accounted { nodes } => self.judge_account(event.t_ms, rollout, nodes, out),
            RolloutBody::Terminal { outcome: TerminalOutcome::Successor } => {
                let evidence = match self.not_upgraded.get(rollout) {
                    None => Some("ended successor without accounting for its nodes".to_owned()),
                    Some(missing) if !missing.is_empty() => Some(format!(
                        "ended successor with {} of {} selected nodes not upgraded ({})",
                        missing.len(),
                        self.selected.get(rollout).map_or(self.fleet, BTreeSet::len),
                        missing.iter().take(5).cloned().collect::<Vec<_>>().join(", ")
                    )),
                    Some(_) => None,
                };
                if let Some(evidence) = evidence {
                    out.push(Finding { t_ms: event.t_ms, evidence: format!("{rollout}: {evidence}") });
                }
            }
            _ => {}
        }
    }
}

#[derive(Default)]
pub(super) struct HoldsAccounted {
    holds: BTreeMap<String, String>,
    stuck_nodes: BTreeSet<String>,
}

impl Oracle for HoldsAccounted {
    fn on_event(&mut self, event: &Event, _line: &str, _out: &mut Vec<Finding>) {
        match &event.body {
            Body::HubHoldPlaced { agent, owner } if owner.starts_with(DEPLOY_HOLD_PREFIX) => {
                self.holds.insert(agent.clone(), owner.clone());
            }
            Body::HubHoldReleased { agent, owner } if owner.starts_with(DEPLOY_HOLD_PREFIX) => {
                self.holds.remove(agent);
            }
            Body::Rollout { event: RolloutBody::LaneCommitted { verdict, nodes, .. }, .. } => {
                // A lane's latest verdict counts: one rolled back after it was stuck holds nothing any more.
                if *verdict == LaneVerdict::Stuck {
                    self.stuck_nodes.extend(nodes.iter().cloned());
                } else {
                    for node in nodes {
                        self.stuck_nodes.remove(node);
                    }
                }
            }
            _ => {}
        }
    }

    fn on_finish(&mut self, end_ms: u64, out: &mut Vec<Finding>) {
        let leaked: Vec<&String> = self.holds.keys().filter(|node| !self.stuck_nodes.contains(*node)).collect();
        if !leaked.is_empty() {
            let names: Vec<&str> = leaked.iter().map(|n| n.as_str()).collect();
            out.push(Finding {
                t_ms: end_ms,
                evidence: format!(
                    "deployment holds still on {} with no stuck lane to account for them",
                    names.join(", ")
                ),
            });
        }
    }
}

/// `only_intended_holds_released`: a deployment releases only its own `deploy:` holds. Quarantine holds keep an
/// incoherent node out of dispatch, successor holds keep an untouched participant out after its principal went,
/// and an operator's hold is the operator's (RCCA: "Only the intended holds are released").
pub(super) struct OnlyIntendedHoldsReleased;

impl Oracle for OnlyIntendedHoldsReleased {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        if let Body::HubHoldReleased { agent, owner } = &event.body {
            if !owner.starts_with(DEPLOY_HOLD_PREFIX) {
                out.push(Finding { t_ms: event.t_ms, evidence: format!("hold {owner} on {agent} was released") });
            }
        }
    }
}

/// `receipts_name_frozen_route`: RCCA P1 "Freeze one signed, hashed route bundle ... and require every subprocess and
/// receipt in the epoch to name its digest". The digest a rollout's `plan_frozen` record names is the only one its
/// later journal receipts and the installer's generated runtime configuration may name.
#[derive(Default)]
pub(super) struct ReceiptsNameFrozenRoute {
    frozen: Option<String>,
}

impl Oracle for ReceiptsNameFrozenRoute {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        match &event.body {
            // A migration of an old journal freezes the route its last plan named, as a plan does.
            Body::JournalAppended { record, route_digest, .. } if record == "plan_frozen" || record == "migrated" => {
                self.frozen.clone_from(route_digest);
            }
            Body::JournalAppended { record, route_digest, operation_id }
                if ["intent", "intents", "completed", "lane_committed"].contains(&record.as_str())
                    && (route_digest.is_none() || *route_digest != self.frozen) =>
            {
                out.push(Finding {
                    t_ms: event.t_ms,
                    evidence: format!(
                        "{record} {} names route {route_digest:?}, the plan froze {:?}",
                        operation_id.as_deref().unwrap_or("-"),
                        self.frozen
                    ),
                });
            }
            Body::WorkerMutated { op, target, operation_id } if op == "run_installer" => {
                let named = target.split_once(" routes ").map(|(_, digest)| digest.to_owned());
                if self.frozen.is_some() && named != self.frozen {
                    out.push(Finding {
                        t_ms: event.t_ms,
                        evidence: format!(
                            "{} installer {operation_id} generated routes {named:?}, the plan froze {:?}",
                            event.host, self.frozen
                        ),
                    });
                }
            }
            _ => {}
        }
    }
}

/// `rollout_time_bounded`: RCCA "Quiescence and recovery wall time are bounded by batch phase limits rather than
/// worker_count x per-node timeout". From the plan's freeze to the rollout's terminal event, the time the controller
/// was up and not waiting on something outside its control (a held lock, a credential outage) must stay within the
/// plan's own bound, lanes x lane bound, plus one lane bound for each lane that went down in more than one batch (past
/// a stuck lane, the room its held-down nodes leave) and for each rollback pass. Judged at the terminal event; a
/// rollout still running at the end of the run is judged by `every_lane_converged` instead.
#[derive(Default)]
pub(super) struct RolloutTimeBounded {
    /// `(frozen at, bound)` of the rollout in progress.
    plan: Option<(u64, u64)>,
    /// Its plan's lanes, and its bound for one lane (the rollout's bound over its lanes).
    lanes: u64,
    lane_bound_ms: u64,
    /// The batches that went down: `(lane, t_ms)` of each batch of `hold` steps (a batch's steps start together).
    batches: BTreeSet<(u64, u64)>,
    /// Rollback passes begun.
    reverts: u64,
    excluded_ms: u64,
    controller_down_since: Option<u64>,
    credential_out_since: Option<u64>,
}

impl Oracle for RolloutTimeBounded {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        let Some((frozen_at_ms, bound_ms)) = self.plan else {
            if let Body::Rollout { event: RolloutBody::PlanFrozen { rollout_bound_ms, lanes, .. }, .. } = &event.body {
                self.plan = Some((event.t_ms, *rollout_bound_ms));
                self.lanes = *lanes;
                self.lane_bound_ms = rollout_bound_ms / (*lanes).max(1);
                self.batches.clear();
                self.reverts = 0;
                self.excluded_ms = 0;
            }
            return;
        };
        match &event.body {
            Body::HostCrash { .. } if &*event.host == "controller" => self.controller_down_since = Some(event.t_ms),
            Body::HostBoot { .. } if &*event.host == "controller" => {
                if let Some(since) = self.controller_down_since.take() {
                    self.excluded_ms += event.t_ms - since;
                }
            }
            Body::HubCredentialRejected { .. } if self.credential_out_since.is_none() => {
                self.credential_out_since = Some(event.t_ms);
            }
            Body::Rollout { event: RolloutBody::Reauthenticated { .. }, .. } => {
                if let Some(since) = self.credential_out_since.take() {
                    self.excluded_ms += event.t_ms - since;
                }
            }
            Body::Rollout { event: RolloutBody::LockWaiting { remaining_ms, .. }, .. } => {
                self.excluded_ms += remaining_ms + 1_000;
            }
            Body::Rollout {
                event: RolloutBody::StepStarted { step: RolloutStep::Node(NodeStep::Hold), lane, .. },
                ..
            } => {
                self.batches.insert((*lane, event.t_ms));
            }
            // A rollback walks its lane once more: one more lane's bound.
            Body::Rollout { event: RolloutBody::LaneReverting { .. }, .. } => self.reverts += 1,
            Body::Rollout { event: RolloutBody::Terminal { outcome }, .. } => {
                let extra = (self.batches.len() as u64).saturating_sub(self.lanes) + self.reverts;
                let bound_ms = bound_ms + extra * self.lane_bound_ms;
                let active_ms = (event.t_ms - frozen_at_ms).saturating_sub(self.excluded_ms);
                if active_ms > bound_ms {
                    out.push(Finding {
                        t_ms: event.t_ms,
                        evidence: format!(
                            "rollout ended {outcome} after {active_ms} ms of active time, over its plan's bound of \
                             {bound_ms} ms"
                        ),
                    });
                }
                self.plan = None;
            }
            _ => {}
        }
    }
}

#[derive(Default)]
pub(super) struct RetryRecovered {
    retried: BTreeSet<(String, RolloutStep)>,
    reached: bool,
}

impl Oracle for RetryRecovered {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        match &event.body {
            Body::Rollout { event: RolloutBody::Retrying { node, step, .. }, .. } => {
                self.retried.insert((node.clone(), *step));
            }
            Body::Rollout { event: RolloutBody::StepDone { node, step, .. }, .. }
                if !self.reached && self.retried.contains(&(node.clone(), *step)) =>
            {
                self.reached = true;
                out.push(Finding { t_ms: event.t_ms, evidence: format!("{node} {step} completed after a retry") });
            }
            _ => {}
        }
    }
}

/// `lane_rolled_back`: a lane's rollback (`lane_reverting`) ended with the lane committed `prior` — every node it had
/// taken down back on its prior generation (RCCA "Apply the same design to reverse recovery").
#[derive(Default)]
pub(super) struct LaneRolledBack {
    reverting: BTreeSet<(String, u64)>,
    reached: bool,
}

impl Oracle for LaneRolledBack {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        match &event.body {
            Body::Rollout { rollout, event: RolloutBody::LaneReverting { lane, .. } } => {
                self.reverting.insert((rollout.clone(), *lane));
            }
            Body::Rollout {
                rollout,
                event: RolloutBody::LaneCommitted { lane, verdict: LaneVerdict::Prior, nodes },
            } if !self.reached && self.reverting.contains(&(rollout.clone(), *lane)) => {
                self.reached = true;
                let evidence =
                    format!("{rollout} lane {lane} rolled back to its prior generation: {}", nodes.join(", "));
                out.push(Finding { t_ms: event.t_ms, evidence });
            }
            _ => {}
        }
    }
}

/// `no_egress_after_quiescence`: RCCA "after the quiescence barrier, any outbound DNS query, download, or connect
/// attempt is a protocol violation", judged over the fakes' traffic, not the engine's word. A worker's barrier opens
/// at its `worker.service` stop (an SSH `stop_service`, the quiesce step's or a rollback's) and closes at its next
/// start; the world traces every connection the node opens, every capsule downloaded onto it and every name it
/// resolves in that window as `node.egress`, and each is a violation. (No fetch at all — `no_fetch_after_quiescence`
/// — is the narrower property the incident broke first.)
#[derive(Default)]
pub(super) struct NoEgressAfterQuiescence {
    /// Nodes past their barrier.
    stopped: BTreeSet<Rc<str>>,
}

impl Oracle for NoEgressAfterQuiescence {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        match &event.body {
            Body::WorkerService { running: false } => {
                self.stopped.insert(event.host.clone());
            }
            Body::WorkerService { running: true } => {
                self.stopped.remove(&event.host);
            }
            Body::NodeEgress { egress, to, name } if self.stopped.contains(&event.host) => {
                let what = match egress {
                    Egress::Connect => format!("opened a connection to {to}"),
                    Egress::Download => format!("downloaded {} from {to}", name.as_deref().unwrap_or("?")),
                    Egress::Dns => format!("resolved {}", name.as_deref().unwrap_or("?")),
                };
                out.push(Finding {
                    t_ms: event.t_ms,
                    evidence: format!("{} {what} past its quiescence barrier", event.host),
                });
            }
            _ => {}
        }
    }
}

/// `canary_before_wider_release`: RCCA "one held canary completes before the wider release", judged at the hub. The
/// first worker a rollout's deployment hold (`deploy:<rollout>`) is placed on is its canary; until the hub releases
/// that hold (the driver releases it only after the canary proved the successor), a deployment hold of the same
/// rollout on any other worker is a wider release before the canary completed. Holds of other owners (quarantine,
/// successor, an operator's) are not a release.
#[derive(Default)]
pub(super) struct CanaryBeforeWiderRelease {
    /// Per deployment-hold owner: its canary, and whether the canary's hold was released.
    canaries: BTreeMap<String, (String, bool)>,
}

impl Oracle for CanaryBeforeWiderRelease {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        match &event.body {
            Body::HubHoldPlaced { agent, owner } if owner.starts_with("deploy:") => {
                let (canary, completed) = self.canaries.entry(owner.clone()).or_insert_with(|| (agent.clone(), false));
                if canary != agent && !*completed {
                    out.push(Finding {
                        t_ms: event.t_ms,
                        evidence: format!(
                            "{owner} placed on {agent} while its canary {canary} had not completed (its hold not released)"
                        ),
                    });
                }
            }
            Body::HubHoldReleased { agent, owner } => {
                if let Some((canary, completed)) = self.canaries.get_mut(owner)
                    && canary == agent
                {
                    *completed = true;
                }
            }
            _ => {}
        }
    }
}

/// `no_rollback_without_a_fault`: the simulated fleet fails a node's step only where a fault landed, so every node a
/// `lane_reverting` event names as its cause (`failed`) must have had one land before it — on the node, on its host,
/// on the hub's or the controller's host (a partition that starves the proof of a heartbeat), on the rollout (its
/// lock, credential, routes, artifacts) or on the controller. A rollback with a failed node no fault explains is the
/// engine breaking the nodes it deploys to (a wrong route, a bad environment) and recovering from its own defect by
/// rolling back, which would otherwise read as a converged (prior) lane.
#[derive(Default)]
pub(super) struct NoRollbackWithoutAFault {
    /// Keys of the subjects a fault has landed on so far (`Subject::key`).
    struck: BTreeSet<String>,
}

impl Oracle for NoRollbackWithoutAFault {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        match &event.body {
            Body::FaultLanded { on, .. } => {
                self.struck.insert(on.key().to_string());
            }
            Body::Rollout { rollout, event: RolloutBody::LaneReverting { lane, failed, .. } } => {
                let shared = ["rollout", "controller", "hub"].iter().any(|key| self.struck.contains(*key));
                let unexplained: Vec<&str> =
                    failed.iter().filter(|node| !shared && !self.struck.contains(*node)).map(String::as_str).collect();
                if !unexplained.is_empty() {
                    out.push(Finding {
                        t_ms: event.t_ms,
                        evidence: format!(
                            "{rollout} rolled lane {lane} back for {} although no fault landed on {}",
                            unexplained.join(", "),
                            if unexplained.len() == 1 { "it" } else { "any of them" }
                        ),
                    });
                }
            }
            _ => {}
        }
    }
}

/// `old_journal_settled_once`: the RCCA's "Old deployment journals ... should be migrated once into the new typed forms
/// or explicitly quarantined". Every line of the controller's journal that a `journal_migrated` or
/// `journal_quarantined` event names is settled at most once over the whole run (across controller deaths and
/// restarts), by a migration or by a quarantine, never both.
#[derive(Default)]
pub(super) struct OldJournalSettledOnce {
    /// Each settled line and how it was settled.
    settled: BTreeMap<u64, &'static str>,
}

impl Oracle for OldJournalSettledOnce {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        let (how, lines) = match &event.body {
            Body::Rollout { event: RolloutBody::JournalMigrated { lines, .. }, .. } => ("migrated", lines),
            Body::Rollout { event: RolloutBody::JournalQuarantined { lines, .. }, .. } => ("quarantined", lines),
            _ => return,
        };
        for line in lines {
            if let Some(before) = self.settled.insert(*line, how) {
                out.push(Finding {
                    t_ms: event.t_ms,
                    evidence: format!("journal line {line} was {before}, then {how} again"),
                });
            }
        }
    }
}

/// `historical_identity_canonicalized_first`: RCCA "canonicalization belongs behind an authenticated repair fence". A
/// node given a drift into a historical identity form the decoder recognizes (`export_prefixed_env`,
/// `ovswarm_names_env`, `receipt_v1`, `receipt_v2`) before the first rollout began — the ground truth, not the
/// engine's word — sees no rollout mutation of its files or its service before its `canonicalized` event but the
/// canonicalization's own writes (operation ids `<rollout>/<node>/canonicalize/<file>`). Staging a capsule touches
/// neither and is allowed, as it is before any repair.
#[derive(Default)]
pub(super) struct HistoricalIdentityCanonicalizedFirst {
    historical: BTreeSet<String>,
    canonicalized: BTreeSet<String>,
    rollout_began: bool,
}

impl Oracle for HistoricalIdentityCanonicalizedFirst {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        match &event.body {
            Body::Step { step: Step::MarkerDrift { target, shape }, .. } if !self.rollout_began => {
                let recognized = matches!(
                    shape,
                    Drift::ExportPrefixedEnv | Drift::OvswarmNamesEnv | Drift::ReceiptV1 | Drift::ReceiptV2
                );
                if recognized {
                    self.historical.insert(target.clone());
                }
            }
            Body::Rollout { event: RolloutBody::Canonicalized { node, .. }, .. } => {
                self.rollout_began = true;
                self.canonicalized.insert(node.clone());
            }
            Body::Rollout { .. } => self.rollout_began = true,
            Body::WorkerMutated { op, operation_id, target }
                if operation_id.starts_with("rollout-")
                    && op != "stage_artifact"
                    && !operation_id.contains("/canonicalize/")
                    && self.historical.contains(&*event.host)
                    && !self.canonicalized.contains(&*event.host) =>
            {
                out.push(Finding {
                    t_ms: event.t_ms,
                    evidence: format!(
                        "{}, in a historical identity form, saw {op} {operation_id} on {target} before its canonicalization",
                        event.host
                    ),
                });
            }
            _ => {}
        }
    }
}
