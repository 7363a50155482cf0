//! The controller's decisions, with no I/O (quinn-proto's `Endpoint` shape): what to take up at boot from the
//! journal, which request starts which work and which joins work already in flight, admission under the concurrency
//! limit (first come, first admitted), when a stopped workflow runs again, when a decommission or a recovery action
//! may start beside the runs in flight, the periodic schedule of the instance lifecycle, which stuck rows are new,
//! and when the onboarding rests. The service ([`super::service`]) asks, awaits what it is told, and reports back.
//!
//! Architecture Invariant: nothing here awaits, reads a clock or touches a port; time comes in as `now_ms`, the
//! journal as its lines, and every answer is a value (work to start, a delay, a ticket to wake, an [`Event`]).

use std::collections::{BTreeSet, VecDeque};

use crate::controller::config::{ControllerConfig, RolloutSettings, RotationSettings, SiteSettings};
use crate::controller::request::{Event, RolloutOrder, RotationOrder};
use crate::decommission::record::DecommissionHistory;
use crate::instance::stuck::Stuck;
use crate::matrix::{DecommissionStage, RecoveryAction, Stage, WorkflowState};
use crate::onboarding::record::OnboardHistory;
use crate::recovery::Authorized;
use crate::rollout::driver::RolloutRequest;
use crate::rotation::driver::RotationRequest;
use crate::workflow::ids;

/// The prefix of the controller's own journal records.
pub const RECORD_PREFIX: &str = "controller ";
/// The subject the controller's own records are indexed under (`ports::record_subject`).
pub const RECORD_SUBJECT: &str = "controller";

/// The controller's own journal records: what it took, so a controller that boots again knows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "record", rename_all = "snake_case")]
pub enum ControllerRecord {
    /// A request for `machine`'s onboarding was taken.
    OnboardingTaken { workflow: String, machine: String },
    /// A rollout order was taken, as the request the controller runs (its holder identity included: a restarted
    /// controller adopts the rollout under the request it took).
    RolloutTaken { workflow: String, request: Box<RolloutRequest> },
    /// A rotation order was taken, as the request the controller runs.
    RotationTaken { workflow: String, request: RotationRequest },
}

impl ControllerRecord {
    pub fn encode(&self) -> String {
        format!("{RECORD_PREFIX}{}", serde_json::to_string(self).expect("controller records serialise"))
    }

    /// `None` for another subsystem's line; an error for a controller line that does not decode.
    pub fn decode(line: &str) -> Option<Result<ControllerRecord, String>> {
        let json = line.strip_prefix(RECORD_PREFIX)?;
        Some(serde_json::from_str(json).map_err(|error| format!("controller record: {error}")))
    }
}

/// A waiter for admission: the service wakes the task holding it when the machine admits it.
pub type Ticket = u64;

/// Admission under a concurrency limit, first come first admitted (a fair semaphore).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Admission {
    limit: usize,
    held: usize,
    waiting: VecDeque<Ticket>,
    next_ticket: Ticket,
}

impl Admission {
    fn new(limit: usize) -> Admission {
        Admission { limit, ..Admission::default() }
    }

    /// A new ticket, and whether it is admitted at once (else it waits its turn).
    fn ask(&mut self) -> (Ticket, bool) {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        if self.held < self.limit && self.waiting.is_empty() {
            self.held += 1;
            (ticket, true)
        } else {
            self.waiting.push_back(ticket);
            (ticket, false)
        }
    }

    /// A run admitted earlier ends: the oldest waiter is admitted in its place.
    fn release(&mut self) -> Option<Ticket> {
        match self.waiting.pop_front() {
            Some(next) => Some(next),
            None => {
                self.held = self.held.saturating_sub(1);
                None
            }
        }
    }
}

/// What the journal says of the site's machines at boot.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SiteJournal {
    /// Machines whose onboarding a run of began, completed, or a decommission began.
    began: BTreeSet<String>,
    completed: BTreeSet<String>,
    decommission_began: BTreeSet<String>,
    decommission_unfinished: BTreeSet<String>,
    /// Machines whose onboarding a request asked for before this boot.
    requested: BTreeSet<String>,
}

impl SiteJournal {
    /// Reads every workflow's history once (a line of a workflow kind that does not decode leaves that kind's
    /// histories unread: nothing of it is known to have begun or to be unfinished, and the completions are read as
    /// text).
    pub fn read(settings: &SiteSettings, lines: &[String]) -> SiteJournal {
        let onboarded = OnboardHistory::per_workflow(lines.iter().map(String::as_str));
        let retired = DecommissionHistory::per_workflow(lines.iter().map(String::as_str));
        let mut journal = SiteJournal::default();
        for machine in &settings.machines {
            let onboarding = ids::onboarding_workflow_id(machine);
            let decommission = ids::decommission_workflow_id(machine);
            if let Ok(histories) = &onboarded {
                if histories.get(&onboarding).is_some_and(|history| history.runs > 0) {
                    journal.began.insert(machine.clone());
                }
            }
            let completed = match &onboarded {
                Ok(histories) => histories.get(&onboarding).is_some_and(|history| history.completed.is_some()),
                Err(_) => workflow_completed(lines, &onboarding),
            };
            if completed {
                journal.completed.insert(machine.clone());
            }
            if let Ok(histories) = &retired {
                if let Some(history) = histories.get(&decommission) {
                    if history.runs > 0 {
                        journal.decommission_began.insert(machine.clone());
                    }
                    if history.unfinished {
                        journal.decommission_unfinished.insert(machine.clone());
                    }
                }
            }
        }
        for line in lines {
            if let Some(Ok(ControllerRecord::OnboardingTaken { machine, .. })) = ControllerRecord::decode(line) {
                journal.requested.insert(machine);
            }
        }
        journal
    }

    /// Whether the journal shows `machine`'s onboarding completed.
    pub fn completed(&self, machine: &str) -> bool {
        self.completed.contains(machine)
    }

    /// Whether the journal shows a decommission of `machine` begun.
    pub fn decommission_began(&self, machine: &str) -> bool {
        self.decommission_began.contains(machine)
    }
}

/// Whether the journal holds a `completed` record of the workflow (read as text, for a journal whose onboarding
/// lines do not decode).
pub fn workflow_completed(lines: &[String], workflow: &str) -> bool {
    let named = format!("\"workflow\":\"{workflow}\"");
    lines.iter().any(|line| {
        line.strip_prefix("onboard ")
            .is_some_and(|json| json.contains("\"record\":\"completed\"") && json.contains(&named))
    })
}

/// After run `run` (from 1) of a requested onboarding ended in `state`: the delay before the next run, or `None`
/// when the request is done (it did not stop `failed_retryable`, or it had its runs).
pub fn rerun_after(settings: &SiteSettings, run: u32, state: WorkflowState) -> Option<u64> {
    (state == WorkflowState::FailedRetryable && run < settings.runs_per_request_max).then_some(settings.rerun_delay_ms)
}

/// Where a recovery action enters a decommission: at the authorized stage for `resume`, `retry_stage` and
/// `adopt_observed_state` (its rerun from the top would redo node tasks a powered-off node cannot take); from the
/// top for the rest.
pub fn decommission_entry(authorized: Option<&Authorized>) -> Option<DecommissionStage> {
    let authorized = authorized?;
    if !matches!(
        authorized.action,
        RecoveryAction::Resume | RecoveryAction::RetryStage | RecoveryAction::AdoptObservedState
    ) {
        return None;
    }
    match authorized.restart_at {
        Some(Stage::Decommission(stage)) => Some(stage),
        _ => None,
    }
}

/// The controller's state: what is in flight, what waits, and what it has taken.
#[derive(Debug, Clone)]
pub struct Controller {
    config: ControllerConfig,
    /// This process's identity (the deployment lock's holder).
    process: String,
    site: SiteDesk,
    /// The latest rollout taken.
    rollout: Option<RolloutRequest>,
    /// Every rotation taken, in order; the rotation desk runs them one at a time.
    rotations: Vec<RotationRequest>,
    instances: InstanceDesk,
    events: VecDeque<Event>,
}

#[derive(Debug, Clone, Default)]
struct SiteDesk {
    /// Machines whose onboarding is in flight (a requested run, a recovery action's run or compensation).
    running: BTreeSet<String>,
    /// Machines whose decommission is in flight.
    decommissioning: BTreeSet<String>,
    /// Machines whose onboarding was taken up (or found finished), by this process or an earlier one.
    taken_up: BTreeSet<String>,
    admission: Admission,
    rested: bool,
}

#[derive(Debug, Clone, Default)]
struct InstanceDesk {
    next_replenish_ms: u64,
    next_sync_ms: u64,
    /// The stuck rows already raised: (instance, row, since when).
    raised: BTreeSet<(String, Stuck, u64)>,
}

impl Controller {
    /// A controller process booting: what it took before is read from the journal (the latest rollout, every
    /// rotation, the onboardings asked for); the site is taken up later, at [`Controller::site_begins`].
    pub fn boot(config: ControllerConfig, process: String, lines: &[String]) -> Controller {
        let mut rollout = None;
        let mut rotations = Vec::new();
        let mut requested = BTreeSet::new();
        for line in lines {
            match ControllerRecord::decode(line) {
                Some(Ok(ControllerRecord::RolloutTaken { request, .. })) => rollout = Some(*request),
                Some(Ok(ControllerRecord::RotationTaken { request, .. })) => rotations.push(request),
                Some(Ok(ControllerRecord::OnboardingTaken { machine, .. })) => {
                    requested.insert(machine);
                }
                Some(Err(error)) => tracing::error!(%error, "a controller record does not decode; it is skipped"),
                None => {}
            }
        }
        let concurrency = config.site.as_ref().map_or(1, |site| site.concurrency as usize);
        Controller {
            site: SiteDesk { taken_up: requested, admission: Admission::new(concurrency), ..SiteDesk::default() },
            config,
            process,
            rollout,
            rotations,
            instances: InstanceDesk::default(),
            events: VecDeque::new(),
        }
    }

    pub fn config(&self) -> &ControllerConfig {
        &self.config
    }

    /// The next event to report.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    fn site_settings(&self) -> &SiteSettings {
        self.config.site.as_ref().expect("the site desk runs only with a site")
    }

    // --- the site ---------------------------------------------------------------------------------------------------

    /// The controller takes the site up (its start time reached): the machines whose onboarding the journal does
    /// not show completed and whose decommission has not begun, to run (in a bare-metal site only those whose
    /// onboarding began: the instance lifecycle asks for the others). The rest are taken up as they are.
    pub fn site_begins(&mut self, journal: &SiteJournal) -> Vec<String> {
        let settings = self.site_settings().clone();
        let mut start = Vec::new();
        for machine in
            settings.machines.iter().filter(|machine| !settings.bare_metal || journal.began.contains(*machine))
        {
            if !journal.completed.contains(machine) && !journal.decommission_began.contains(machine) {
                if self.take_onboarding(machine) {
                    start.push(machine.clone());
                }
            } else {
                self.site.taken_up.insert(machine.clone());
            }
        }
        self.check_rested();
        start
    }

    /// The decommissions the journal shows started and not finished (a dead controller's): to run again.
    pub fn site_decommissions(&mut self, journal: &SiteJournal) -> Vec<String> {
        let machines = self.site_settings().machines.clone();
        machines
            .into_iter()
            .filter(|machine| journal.decommission_unfinished.contains(machine))
            .filter(|machine| self.take_decommission(machine))
            .collect()
    }

    /// An onboarding of `machine` is asked for: `true` when its run starts now, `false` when one is in flight (that
    /// run is the answer).
    pub fn take_onboarding(&mut self, machine: &str) -> bool {
        if !self.site.running.insert(machine.to_owned()) {
            return false;
        }
        self.site.taken_up.insert(machine.to_owned());
        true
    }

    /// A requested onboarding asks to be admitted under the concurrency limit: its ticket, and whether it runs now
    /// (else the service waits until [`Controller::onboarding_ended`] or [`Controller::release`] names it).
    pub fn admit(&mut self) -> (Ticket, bool) {
        self.site.admission.ask()
    }

    /// An admitted run gives its place back: the ticket admitted next, to wake.
    pub fn release(&mut self) -> Option<Ticket> {
        self.site.admission.release()
    }

    /// `machine`'s requested onboarding is over (its runs done): it is no longer in flight, and the onboarding may
    /// rest now.
    pub fn onboarding_ended(&mut self, machine: &str) {
        self.site.running.remove(machine);
        self.check_rested();
    }

    /// The onboarding rests when every machine was taken up and none is in flight: reported once.
    fn check_rested(&mut self) {
        let settings = self.site_settings();
        let all = settings.machines.iter().all(|machine| self.site.taken_up.contains(machine));
        if all && self.site.running.is_empty() && !self.site.rested {
            self.site.rested = true;
            self.events.push_back(Event::OnboardingRested);
        }
    }

    /// A decommission of `machine` is asked for: `true` when it starts now, `false` when one is in flight.
    pub fn take_decommission(&mut self, machine: &str) -> bool {
        self.site.decommissioning.insert(machine.to_owned())
    }

    /// Whether a decommission of `machine` must wait: its onboarding is in flight.
    pub fn decommission_waits(&self, machine: &str) -> bool {
        self.site.running.contains(machine)
    }

    pub fn decommission_ended(&mut self, machine: &str) {
        self.site.decommissioning.remove(machine);
    }

    /// A recovery action's run or compensation of `machine`'s onboarding asks to start: `true` when no run of it is
    /// in flight (it is now), else it waits and asks again.
    pub fn recovery_onboarding_may_start(&mut self, machine: &str) -> bool {
        self.site.running.insert(machine.to_owned())
    }

    /// A recovery action's onboarding run or compensation is over.
    pub fn recovery_onboarding_ended(&mut self, machine: &str) {
        self.site.running.remove(machine);
    }

    /// A recovery action's decommission run asks to start: `true` when neither the machine's onboarding nor a
    /// decommission of it is in flight (it is now).
    pub fn recovery_decommission_may_start(&mut self, machine: &str) -> bool {
        !self.site.running.contains(machine) && self.site.decommissioning.insert(machine.to_owned())
    }

    // --- the rollout and the rotations ------------------------------------------------------------------------------

    /// A rollout order is taken: the request the controller runs (this process's identity as the lock's holder,
    /// the limits of its configuration), now the latest. Journal its record before running it.
    pub fn take_rollout(&mut self, order: RolloutOrder) -> RolloutRequest {
        let request = rollout_request(&self.config.rollout, &self.process, order);
        self.rollout = Some(request.clone());
        request
    }

    /// The latest rollout taken, if any.
    pub fn latest_rollout(&self) -> Option<&RolloutRequest> {
        self.rollout.as_ref()
    }

    /// Whether the journal shows `rollout` terminal: it is not run again.
    pub fn rollout_finished(lines: &[String], rollout: &str) -> bool {
        let finished = format!("\"record\":\"terminal\",\"rollout\":\"{rollout}\"");
        lines.iter().any(|line| line.contains(&finished))
    }

    /// A rotation order is taken: its id counts the node's rotations (`rotation-<node>-<n>`, from 1). Journal its
    /// record before running it.
    pub fn take_rotation(&mut self, order: RotationOrder) -> RotationRequest {
        let node = &order.endpoint.node;
        let earlier = self.rotations.iter().filter(|request| &request.endpoint.node == node).count();
        let request = rotation_request(&self.config.rotation, &rotation_id(node, earlier + 1), order);
        self.rotations.push(request.clone());
        request
    }

    /// The `index`th rotation taken (each is run, or answered as its journal ended it, in order).
    pub fn rotation(&self, index: usize) -> Option<&RotationRequest> {
        self.rotations.get(index)
    }

    // --- the instance lifecycle -------------------------------------------------------------------------------------

    /// The instance lifecycle starts at `now_ms`: its first pass replenishes, its first cloud sync is one period on.
    pub fn instances_begin(&mut self, now_ms: u64) {
        let settings = self.config.instances.as_ref().expect("the instance desk runs only with instances");
        self.instances.next_replenish_ms = now_ms;
        self.instances.next_sync_ms = now_ms + settings.sync_ms;
    }

    /// Whether the pass at `now_ms` replenishes the pools (then the next is one period on).
    pub fn replenish_due(&mut self, now_ms: u64) -> bool {
        let period = self.config.instances.as_ref().map_or(0, |settings| settings.replenish_ms);
        let due = now_ms >= self.instances.next_replenish_ms;
        if due {
            self.instances.next_replenish_ms = now_ms + period;
        }
        due
    }

    /// Whether the pass at `now_ms` syncs with the provider (then the next is one period on).
    pub fn sync_due(&mut self, now_ms: u64) -> bool {
        let period = self.config.instances.as_ref().map_or(0, |settings| settings.sync_ms);
        let due = now_ms >= self.instances.next_sync_ms;
        if due {
            self.instances.next_sync_ms = now_ms + period;
        }
        due
    }

    /// When the pass that starts at `started_ms` is followed by the next (sooner if a request comes).
    pub fn next_pass_ms(&self, started_ms: u64) -> u64 {
        started_ms + self.config.instances.as_ref().map_or(0, |settings| settings.pass_ms)
    }

    /// A stuck row seen by a pass: `true` the first time this process sees it (raise it), `false` after.
    pub fn stuck_seen(&mut self, instance: &str, stuck: Stuck, since_ms: u64) -> bool {
        self.instances.raised.insert((instance.to_owned(), stuck, since_ms))
    }
}

/// The id of `node`'s `n`-th rotation (from 1): the journal's subject, the hub's idempotency key.
pub fn rotation_id(node: &str, n: usize) -> String {
    format!("rotation-{node}-{n}")
}

/// The request a rollout order runs as, under `settings`, held by `process`.
pub fn rollout_request(settings: &RolloutSettings, process: &str, order: RolloutOrder) -> RolloutRequest {
    let rollout = format!("rollout-{}", order.revision);
    RolloutRequest {
        controller: process.to_owned(),
        revision: order.revision,
        generation: order.generation,
        route_digest: order.route_digest,
        hub_url: settings.hub_url.clone(),
        nodes: order.nodes,
        hub_endpoint: order.hub_endpoint,
        capsules: order.capsules,
        policy: settings.policy,
        lane_size_max: settings.lane_size_max,
        availability_floor: settings.availability_floor,
        fan_out: settings.fan_out,
        phases: settings.phases,
        backoff: settings.backoff,
        agent_ttl_ms: settings.agent_ttl_ms,
        credential_remaining_ms: settings.credential_remaining_ms,
        hold_lease_ms: settings.hold_lease_ms,
        lock_lease_ms: settings.lock_lease_ms,
        credential_wait_ms: settings.credential_wait_ms,
        prove_poll_ms: settings.prove_poll_ms,
        // The deployment's own resume command (the RCCA's controller is `deploy/deploy-mac-fleet.sh`): it makes a
        // controller adopt this journal.
        resume_command: format!("deploy-mac-fleet.sh resume --rollout {rollout} --journal {}", settings.journal_name),
        rollout,
    }
}

/// The request a rotation order runs as, under `settings`.
pub fn rotation_request(settings: &RotationSettings, rotation: &str, order: RotationOrder) -> RotationRequest {
    RotationRequest {
        rotation: rotation.to_owned(),
        endpoint: order.endpoint,
        backoff: settings.backoff,
        prove_ms: settings.prove_ms,
        prove_poll_ms: settings.prove_poll_ms,
        credential_wait_ms: settings.credential_wait_ms,
    }
}
