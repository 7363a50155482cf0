//! The collectors: the per-run series the report's plots and tables draw (`reports::RunRecord`'s `availability`,
//! `lanes`, `workflows`, `fault_phases`, `fault_log` and `matrix_pairs`), gathered from the trace's events as a
//! [`Sink`].

use std::collections::{BTreeMap, BTreeSet};

use crate::observe::trace::{Body, Event, OnboardingBody, RolloutBody, Sink};

/// The per-run series the report's plots draw (`reports::RunRecord`'s `availability`, `lanes`, `workflows` and
/// `fault_phases`), gathered from the events as they are recorded. Collectors only read events: they add none, so
/// the trace and its digest are the same with them as without.
#[derive(Debug, Default)]
pub struct Collectors {
    /// Recovery-matrix pairs the workflows hit: `stage/failure_class` (decommission pairs prefixed) → stage failures
    /// classified so.
    pub matrix_pairs: BTreeMap<String, u64>,
    /// The recovery work the workflows did: `stage/work/outcome` (decommission ones prefixed) → how often.
    pub recovery_work: BTreeMap<String, u64>,
    /// The section 6 timeouts that ended an attempt: kind → how often.
    pub timeouts: BTreeMap<String, u64>,
    /// The highest attempt any workflow stage started.
    pub attempt_max: u64,
    /// Each workflow's last end (`(workflow state, node state)`), keyed by the workflow (a decommission's prefixed
    /// as its pairs are).
    pub ends: BTreeMap<String, (String, String)>,
    /// The operator actions an audit record was written for (`resume`, `adopt_observed_state`, ...).
    pub audits: BTreeSet<String>,
    /// Stage attempts that adopted an observed state (late success, an out-of-band change).
    pub adopted: u64,
    /// What `availability_floor` counts (set up at `run.start`).
    counted: crate::observe::oracles::rollout::Availability,
    pub availability: Vec<reports::AvailabilityPoint>,
    pub availability_cut_ms: Option<u64>,
    pub lanes: Vec<reports::LaneSpan>,
    /// `(rollout, lane)` → its index in `lanes`, and the nodes seen starting steps in it.
    lane_index: BTreeMap<(String, u64), (usize, BTreeSet<String>)>,
    /// Each rollout's last account, in the order the rollouts were first accounted (at most `reports::SPANS_MAX`).
    pub rollouts: Vec<reports::RolloutAccount>,
    /// Rollouts refused, whose account follows the refusal.
    refused: BTreeSet<String>,
    /// The rollouts' per-batch telemetry.
    pub telemetry: Telemetry,
    /// `(rollout, node)` → the replay command and endpoint of the node's last `node_failed`.
    failed: BTreeMap<(String, String), (String, String)>,
    pub workflows: Vec<reports::WorkflowSpan>,
    workflow_index: BTreeMap<String, usize>,
    /// Rollouts started and not yet terminal (or refused).
    rollouts_active: u64,
    /// Onboarding workflows started and not yet completed or stopped.
    workflows_in_flight: BTreeSet<String>,
    /// Every fault injected, by kind, with the lifecycle phase it was injected in (one of `reports::PHASES`).
    pub fault_phases: BTreeMap<String, u64>,
    /// Where each fault landed and what it did.
    pub landings: crate::observe::landing::FaultBook,
}

impl Sink for Collectors {
    fn on_event(&mut self, event: &Event, _line: &str) {
        match &event.body {
            Body::Onboarding { event: OnboardingBody::StageFailed { stage, class, .. }, .. } => {
                *self.matrix_pairs.entry(format!("{stage}/{class}")).or_default() += 1;
            }
            Body::Decommission { event: OnboardingBody::StageFailed { stage, class, .. }, .. } => {
                let prefix = crate::model::pairs::DECOMMISSION_PAIR_PREFIX;
                *self.matrix_pairs.entry(format!("{prefix}{stage}/{class}")).or_default() += 1;
            }
            _ => {}
        }
        self.on_workflow_event(event);
        self.on_series_event(event);
        self.landings.on_event(event);
    }
}

impl Collectors {
    /// What conformance asks of a workflow's run: its recovery work, timeouts, attempts, end and audit records.
    fn on_workflow_event(&mut self, event: &Event) {
        let (workflow, body, prefix) = match &event.body {
            Body::Onboarding { workflow, event } => (workflow, event, ""),
            Body::Decommission { workflow, event } => (workflow, event, crate::model::pairs::DECOMMISSION_PAIR_PREFIX),
            Body::Audit { record } => {
                self.audits.insert(record.requested_action.as_str().to_owned());
                return;
            }
            _ => return,
        };
        match body {
            OnboardingBody::RecoveryWork { stage, work, outcome, .. } => {
                *self.recovery_work.entry(format!("{prefix}{stage}/{work}/{outcome}")).or_default() += 1;
            }
            OnboardingBody::TimedOut { timeout, .. } => *self.timeouts.entry(timeout.clone()).or_default() += 1,
            OnboardingBody::StageStarted { attempt, .. } => self.attempt_max = self.attempt_max.max(*attempt),
            OnboardingBody::StageDone { adopted: true, .. } => self.adopted += 1,
            OnboardingBody::Stopped { workflow_state, node_state, .. }
            | OnboardingBody::Refused { workflow_state, node_state, .. } => {
                self.ends.insert(format!("{prefix}{workflow}"), (workflow_state.clone(), node_state.clone()));
            }
            OnboardingBody::Completed { .. } => {
                let node_state = if prefix.is_empty() { "active" } else { "" };
                self.ends.insert(format!("{prefix}{workflow}"), ("completed".to_owned(), node_state.to_owned()));
            }
            _ => {}
        }
    }

    fn on_series_event(&mut self, event: &Event) {
        let t_ms = event.t_ms;
        let counted = &self.counted;
        self.telemetry.on_event(event, || counted.healthy() as u64);
        match &event.body {
            Body::RunStart { nodes, .. } => {
                self.counted = crate::observe::oracles::rollout::Availability::new(*nodes as usize);
                self.availability.clear();
                self.availability.push(reports::AvailabilityPoint { t_ms, available: *nodes });
                return;
            }
            Body::Step { step, fault } => {
                let phase = match (self.rollouts_active > 0, !self.workflows_in_flight.is_empty()) {
                    (true, false) => reports::PHASES[0],
                    (false, true) => reports::PHASES[1],
                    (true, true) => reports::PHASES[2],
                    (false, false) => reports::PHASES[3],
                };
                if fault.is_some() {
                    *self.fault_phases.entry(format!("{}/{phase}", step.kind())).or_insert(0) += 1;
                }
                if matches!(step, crate::model::faults::Step::StartRollout { .. }) {
                    self.rollouts_active += 1;
                }
                return;
            }
            Body::Rollout { rollout, event } => {
                self.on_rollout(t_ms, rollout, event);
                return;
            }
            Body::Onboarding { workflow, event } => {
                self.on_onboarding(t_ms, workflow, event);
                return;
            }
            _ if self.counted.observe(event) => {}
            _ => return,
        }
        let available = self.counted.healthy() as u64;
        if self.availability.last().is_some_and(|point| point.available == available)
            || self.availability_cut_ms.is_some()
        {
            return;
        }
        if self.availability.len() >= reports::AVAILABILITY_POINTS_MAX {
            self.availability_cut_ms = Some(t_ms);
        } else {
            self.availability.push(reports::AvailabilityPoint { t_ms, available });
        }
    }

    fn on_rollout(&mut self, t_ms: u64, rollout: &str, event: &RolloutBody) {
        match event {
            RolloutBody::StepStarted { node, lane, .. } | RolloutBody::StepDone { node, lane, .. } => {
                let started = matches!(event, RolloutBody::StepStarted { .. });
                if let Some((index, nodes)) = self.lane(t_ms, rollout, *lane) {
                    if started {
                        nodes.insert(node.clone());
                    }
                    let count = nodes.len() as u64;
                    let span = &mut self.lanes[index];
                    span.end_ms = t_ms;
                    if span.verdict.is_none() {
                        span.nodes = count;
                    }
                }
            }
            RolloutBody::LaneCommitted { lane, verdict, nodes } => {
                if let Some((index, _)) = self.lane(t_ms, rollout, *lane) {
                    let span = &mut self.lanes[index];
                    span.end_ms = t_ms;
                    span.verdict = Some(verdict.as_str().to_owned());
                    span.nodes = nodes.len() as u64;
                }
            }
            RolloutBody::Terminal { outcome } => {
                self.rollouts_active = self.rollouts_active.saturating_sub(1);
                if let Some(account) = self.rollouts.iter_mut().find(|account| account.rollout == rollout) {
                    account.outcome = outcome.to_string();
                }
            }
            RolloutBody::PlanRefused { .. } => {
                self.rollouts_active = self.rollouts_active.saturating_sub(1);
                self.refused.insert(rollout.to_owned());
            }
            RolloutBody::Accounted { nodes } => self.on_account(rollout, nodes),
            RolloutBody::NodeFailed { node, endpoint, replay, .. } => {
                self.failed.insert((rollout.to_owned(), node.clone()), (replay.clone(), endpoint.clone()));
            }
            RolloutBody::PlanFrozen { .. }
            | RolloutBody::Quarantined { .. }
            | RolloutBody::Repaired { .. }
            | RolloutBody::IdentityDecoded { .. }
            | RolloutBody::JournalMigrated { .. }
            | RolloutBody::JournalQuarantined { .. }
            | RolloutBody::Canonicalized { .. }
            | RolloutBody::Adopted { .. }
            | RolloutBody::Retrying { .. }
            | RolloutBody::HubRetrying { .. }
            | RolloutBody::LaneReverting { .. }
            | RolloutBody::CanaryProved { .. }
            | RolloutBody::Resurrected { .. }
            | RolloutBody::ResurrectionRefused { .. }
            | RolloutBody::BatchDone { .. }
            | RolloutBody::RouteChanged { .. }
            | RolloutBody::LockWaiting { .. }
            | RolloutBody::LockTaken { .. }
            | RolloutBody::Reauthenticated { .. }
            | RolloutBody::SkippedHeld { .. } => {}
        }
    }

    /// A rollout's account of every selected node: it replaces the rollout's earlier one (an adopting controller
    /// accounts again), in flight until its terminal event (or refused, when a refusal came just before it).
    fn on_account(&mut self, rollout: &str, nodes: &[engine::ports::events::NodeAccount]) {
        use engine::ports::events::NodeOutcome;
        let mut counts: BTreeMap<String, u64> = BTreeMap::new();
        let mut records = Vec::new();
        for entry in nodes {
            *counts.entry(entry.outcome.as_str().to_owned()).or_default() += 1;
            if records.len() >= reports::ACCOUNT_NODES_MAX {
                continue;
            }
            let (detail, repair) = match &entry.outcome {
                NodeOutcome::Upgraded => (String::new(), String::new()),
                NodeOutcome::Prior { reason } => (reason.clone(), String::new()),
                NodeOutcome::Quarantined { repair } => (repair.surfaces.join("; "), repair.command.clone()),
                NodeOutcome::Held { owners } => (format!("held by {}", owners.join(", ")), String::new()),
                NodeOutcome::Stuck { step, reason } => (format!("at {}: {reason}", step.as_str()), String::new()),
            };
            let (replay, failed_endpoint) = match &entry.outcome {
                NodeOutcome::Upgraded | NodeOutcome::Quarantined { .. } | NodeOutcome::Held { .. } => {
                    Default::default()
                }
                NodeOutcome::Prior { .. } | NodeOutcome::Stuck { .. } => {
                    self.failed.get(&(rollout.to_owned(), entry.node.clone())).cloned().unwrap_or_default()
                }
            };
            records.push(reports::NodeRecord {
                node: entry.node.clone(),
                outcome: entry.outcome.as_str().to_owned(),
                detail,
                repair,
                replay,
                failed_endpoint,
            });
        }
        let outcome = if self.refused.remove(rollout) { "refused" } else { "in flight" };
        let account = reports::RolloutAccount {
            rollout: rollout.to_owned(),
            outcome: outcome.to_owned(),
            counts,
            nodes: records,
        };
        match self.rollouts.iter().position(|kept| kept.rollout == rollout) {
            Some(index) => self.rollouts[index] = account,
            None if self.rollouts.len() < reports::SPANS_MAX => self.rollouts.push(account),
            None => {}
        }
    }

    /// The lane's index in `lanes` and its nodes, created at `t_ms` when new; `None` once [`reports::SPANS_MAX`]
    /// lanes are kept.
    fn lane(&mut self, t_ms: u64, rollout: &str, lane: u64) -> Option<(usize, &mut BTreeSet<String>)> {
        let key = (rollout.to_owned(), lane);
        if !self.lane_index.contains_key(&key) {
            if self.lanes.len() >= reports::SPANS_MAX {
                return None;
            }
            self.lanes.push(reports::LaneSpan {
                rollout: rollout.to_owned(),
                lane,
                nodes: 0,
                start_ms: t_ms,
                end_ms: t_ms,
                verdict: None,
            });
            self.lane_index.insert(key.clone(), (self.lanes.len() - 1, BTreeSet::new()));
        }
        self.lane_index.get_mut(&key).map(|(index, nodes)| (*index, nodes))
    }

    fn on_onboarding(&mut self, t_ms: u64, workflow: &str, event: &OnboardingBody) {
        let ended = match event {
            OnboardingBody::StageStarted { .. } => {
                self.workflows_in_flight.insert(workflow.to_owned());
                match self.workflow_index.get(workflow) {
                    Some(index) => {
                        let span = &mut self.workflows[*index];
                        if span.end_ms.is_some() {
                            span.end_ms = None;
                            span.outcome = "in flight".to_owned();
                        }
                    }
                    None if self.workflows.len() < reports::SPANS_MAX => {
                        self.workflow_index.insert(workflow.to_owned(), self.workflows.len());
                        self.workflows.push(reports::WorkflowSpan {
                            workflow: workflow.to_owned(),
                            start_ms: t_ms,
                            end_ms: None,
                            outcome: "in flight".to_owned(),
                        });
                    }
                    None => {}
                }
                return;
            }
            OnboardingBody::Completed { .. } => "completed".to_owned(),
            OnboardingBody::Stopped { class, .. } => format!("stopped: {class}"),
            OnboardingBody::Refused { .. } => "refused".to_owned(),
            OnboardingBody::StageDone { .. }
            | OnboardingBody::Observed { .. }
            | OnboardingBody::Stalled { .. }
            | OnboardingBody::StageFailed { .. }
            | OnboardingBody::Retrying { .. }
            | OnboardingBody::TimedOut { .. }
            | OnboardingBody::RecoveryWork { .. } => return,
        };
        self.workflows_in_flight.remove(workflow);
        if let Some(index) = self.workflow_index.get(workflow) {
            let span = &mut self.workflows[*index];
            span.end_ms = Some(t_ms);
            span.outcome = ended;
        }
    }
}

/// The rollouts' per-batch telemetry (`reports::BatchPoint`), observed from the trace: at each `batch_done` of a
/// rollout, the world's availability, the stalest selected agent at the hub, the open epoch's pin age, the nodes
/// upgraded, rolled back and quarantined, the retries, and an estimate of the time left.
#[derive(Debug, Default)]
pub struct Telemetry {
    pub points: Vec<reports::BatchPoint>,
    /// Per rollout: its selected nodes and when it was selected.
    selected: BTreeMap<String, (BTreeSet<String>, u64)>,
    /// Each agent's last heartbeat the hub accepted.
    heard: BTreeMap<String, u64>,
    /// Open epochs: when each opened.
    epochs: BTreeMap<u64, u64>,
    /// Per rollout: nodes upgraded, rolled back and quarantined, and its retries.
    upgraded: BTreeMap<String, BTreeSet<String>>,
    rolled_back: BTreeMap<String, BTreeSet<String>>,
    quarantined: BTreeMap<String, BTreeSet<String>>,
    retries: BTreeMap<String, u64>,
}

impl Telemetry {
    /// `available` counts the healthy, eligible workers now; it is asked only at a batch's end.
    fn on_event(&mut self, event: &Event, available: impl FnOnce() -> u64) {
        use engine::ports::events::{NodeStep, RolloutStep};
        let t_ms = event.t_ms;
        match &event.body {
            Body::RolloutSelected { rollout, nodes } => {
                self.selected.insert(rollout.clone(), (nodes.iter().cloned().collect(), t_ms));
            }
            // Only a selected node's silence is reported: heartbeats matter once a rollout has selected (before, the
            // rollout's start stands in for them). Updated in place: no allocation per heartbeat.
            Body::HubHeartbeat { agent, .. } if !self.selected.is_empty() => match self.heard.get_mut(agent) {
                Some(heard) => *heard = t_ms,
                None => {
                    self.heard.insert(agent.clone(), t_ms);
                }
            },
            Body::HubEpochOpened { epoch, .. } => {
                self.epochs.insert(*epoch, t_ms);
            }
            Body::HubEpochClosed { epoch } => {
                self.epochs.remove(epoch);
            }
            Body::Rollout { rollout, event } => match event {
                RolloutBody::StepDone { node, step: RolloutStep::Node(NodeStep::Release), .. } => {
                    self.upgraded.entry(rollout.clone()).or_default().insert(node.clone());
                }
                RolloutBody::StepDone { node, step: RolloutStep::Revert(NodeStep::Release), .. } => {
                    self.upgraded.entry(rollout.clone()).or_default().remove(node);
                    self.rolled_back.entry(rollout.clone()).or_default().insert(node.clone());
                }
                RolloutBody::Quarantined { node, .. } => {
                    self.quarantined.entry(rollout.clone()).or_default().insert(node.clone());
                }
                RolloutBody::Retrying { .. } => *self.retries.entry(rollout.clone()).or_default() += 1,
                RolloutBody::BatchDone { lane, batch, nodes, revert } if self.points.len() < reports::BATCHES_MAX => {
                    let point = self.point(t_ms, rollout, (*lane, *batch, nodes.len() as u64, *revert), available());
                    self.points.push(point);
                }
                _ => {}
            },
            _ => {}
        }
    }

    fn point(&self, t_ms: u64, rollout: &str, batch: (u64, u64, u64, bool), available: u64) -> reports::BatchPoint {
        let (lane, batch, nodes, revert) = batch;
        let count = |sets: &BTreeMap<String, BTreeSet<String>>| sets.get(rollout).map_or(0, BTreeSet::len) as u64;
        let (selected, since_ms) =
            self.selected.get(rollout).map_or((0, t_ms), |(nodes, at)| (nodes.len() as u64, *at));
        let oldest_heartbeat_ms = self.selected.get(rollout).map_or(0, |(nodes, _)| {
            nodes
                .iter()
                .map(|node| t_ms - self.heard.get(node).copied().unwrap_or(since_ms).min(t_ms))
                .max()
                .unwrap_or(0)
        });
        let (upgraded, rolled_back, quarantined) =
            (count(&self.upgraded), count(&self.rolled_back), count(&self.quarantined));
        let settled = upgraded + rolled_back;
        let remaining = selected.saturating_sub(settled + quarantined);
        let eta_ms = (settled > 0).then(|| (t_ms - since_ms.min(t_ms)) / settled * remaining);
        reports::BatchPoint {
            t_ms,
            rollout: rollout.to_owned(),
            lane,
            batch,
            nodes,
            revert,
            available,
            oldest_heartbeat_ms,
            epoch_pin_age_ms: self.epochs.values().min().map(|opened| t_ms - (*opened).min(t_ms)),
            upgraded,
            rolled_back,
            remaining,
            retries: self.retries.get(rollout).copied().unwrap_or(0),
            quarantined,
            eta_ms,
        }
    }
}
