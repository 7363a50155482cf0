//! The controller's decisions, with no I/O (quinn-proto's `Endpoint` shape): what to take up at boot from the
//! journal, which request starts which work and which joins work already in flight, admission under the concurrency
//! limit (first come, first admitted), when a stopped workflow runs again, when a decommission or a recovery action
//! may start beside the runs in flight, the periodic schedule of the instance lifecycle, which stuck rows are new,
//! and when the onboarding rests. The service ([`super::service`]) asks, awaits what it is told, and reports back.
//!
//! Architecture Invariant: nothing here awaits, reads a clock or touches a port; time comes in as `now_ms`, the
//! journal as its lines, and every answer is a value (work to start, a delay, a ticket to wake, an [`Event`]).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::controller::config::{ControllerConfig, RolloutSettings, RotationSettings, SiteSettings};
use crate::controller::request::{
    Event, InstanceOrder, InstanceVerb, RecoveryOrder, Request, RolloutOrder, RotationOrder,
};
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

/// What the controller took, as its journal keeps it: enough to take it up again after a death.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Taken {
    Onboard {
        machine: String,
        instance: Option<String>,
    },
    Decommission {
        machine: String,
    },
    /// A recovery action, with the correlation id its audit records carry (so a controller that boots again finds
    /// how far it got).
    Recovery {
        order: RecoveryOrder,
        correlation_id: String,
    },
    /// A rollout order, as the request the controller runs (its holder identity included: a restarted controller
    /// adopts the rollout under the request it took).
    Rollout {
        request: Box<RolloutRequest>,
    },
    Rotation {
        request: RotationRequest,
    },
    Instance {
        order: InstanceOrder,
    },
}

/// The controller's own journal records: each request it takes, numbered in the journal's order, and its answer
/// once its work is over. A controller that boots again takes up every request taken and not answered.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "record", rename_all = "snake_case")]
pub enum ControllerRecord {
    Taken { workflow: String, request: u64, taken: Taken },
    Answered { workflow: String, request: u64 },
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

/// The number of a request the controller took.
pub type RequestId = u64;

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
}

impl SiteJournal {
    /// Reads every workflow's history once (a line of a workflow kind that does not decode leaves that kind's
    /// histories unread: nothing of it is known to have begun or to be unfinished, and the completions are read as
    /// text).
    pub fn read<'a>(machines: impl IntoIterator<Item = &'a String>, lines: &[String]) -> SiteJournal {
        let onboarded = OnboardHistory::per_workflow(lines.iter().map(String::as_str));
        let retired = DecommissionHistory::per_workflow(lines.iter().map(String::as_str));
        let mut journal = SiteJournal::default();
        for machine in machines {
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

    /// Whether the journal shows a decommission of `machine` begun and ended (completed, or stopped for a person).
    pub fn decommission_ended(&self, machine: &str) -> bool {
        self.decommission_began.contains(machine) && !self.decommission_unfinished.contains(machine)
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
    /// The number the next request taken gets.
    next_request: RequestId,
    /// Requests taken and not answered yet, by number.
    pending: BTreeMap<RequestId, Taken>,
    /// Requests an earlier process took and did not answer, not taken up again yet, by number.
    adopted: BTreeMap<RequestId, Taken>,
    /// Records to journal, in order.
    records: VecDeque<String>,
    site: SiteDesk,
    /// The latest rollout taken.
    rollout: Option<(RequestId, RolloutRequest)>,
    /// Every rotation taken, in order; the rotation desk runs them one at a time.
    rotations: Vec<(RequestId, RotationRequest)>,
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
    /// The requests each machine's onboarding or decommission in flight answers when it ends.
    onboarding_answers: BTreeMap<String, Vec<RequestId>>,
    decommission_answers: BTreeMap<String, Vec<RequestId>>,
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

/// What the site desk does with a request it took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SiteWork {
    /// Start the machine's onboarding.
    Onboard(String),
    /// Start the machine's decommission.
    Decommission(String),
    /// Perform the recovery action (`resumed`: an earlier process took it; its audit trail says how far it got).
    Recovery { request: RequestId, order: RecoveryOrder, correlation_id: String, resumed: bool },
    /// The work is in flight already: this request is answered when it ends.
    Joined,
}

impl Controller {
    /// A controller process booting: what it took before is read from the journal — the latest rollout, every
    /// rotation, the machines whose onboarding was asked for, and every request not answered, to take up again.
    pub fn boot(config: ControllerConfig, process: String, lines: &[String]) -> Controller {
        let mut taken: BTreeMap<RequestId, Taken> = BTreeMap::new();
        let mut answered: BTreeSet<RequestId> = BTreeSet::new();
        for line in lines {
            match ControllerRecord::decode(line) {
                Some(Ok(ControllerRecord::Taken { request, taken: what, .. })) => {
                    taken.insert(request, what);
                }
                Some(Ok(ControllerRecord::Answered { request, .. })) => {
                    answered.insert(request);
                }
                Some(Err(error)) => tracing::error!(%error, "a controller record does not decode; it is skipped"),
                None => {}
            }
        }
        let next_request = taken.keys().next_back().map_or(1, |last| last + 1);
        let mut rollout = None;
        let mut rotations = Vec::new();
        let mut requested = BTreeSet::new();
        let mut adopted = BTreeMap::new();
        for (id, what) in &taken {
            match what {
                Taken::Rollout { request } => rollout = Some((*id, (**request).clone())),
                Taken::Rotation { request } => rotations.push((*id, request.clone())),
                Taken::Onboard { machine, .. } => {
                    requested.insert(machine.clone());
                }
                Taken::Decommission { .. } | Taken::Recovery { .. } | Taken::Instance { .. } => {}
            }
            if !answered.contains(id) {
                adopted.insert(*id, what.clone());
            }
        }
        let concurrency = config.site.as_ref().map_or(1, |site| site.concurrency as usize);
        Controller {
            site: SiteDesk { taken_up: requested, admission: Admission::new(concurrency), ..SiteDesk::default() },
            config,
            process,
            next_request,
            // The rollout and rotation desks answer theirs as they run them; the others are taken up by their desks.
            pending: adopted.clone(),
            adopted: adopted
                .into_iter()
                .filter(|(_, what)| !matches!(what, Taken::Rollout { .. } | Taken::Rotation { .. }))
                .collect(),
            records: VecDeque::new(),
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

    /// The next record to journal (before the work it announces starts).
    pub fn poll_record(&mut self) -> Option<String> {
        self.records.pop_front()
    }

    /// The requests taken and not answered yet, in the order they were taken.
    pub fn pending(&self) -> impl Iterator<Item = (RequestId, &Taken)> {
        self.pending.iter().map(|(id, what)| (*id, what))
    }

    /// Takes a request: numbers it and journals it.
    fn take(&mut self, what: Taken) -> RequestId {
        let request = self.next_request;
        self.next_request += 1;
        let record = ControllerRecord::Taken { workflow: RECORD_SUBJECT.to_owned(), request, taken: what.clone() };
        self.records.push_back(record.encode());
        self.pending.insert(request, what);
        request
    }

    /// Answers a request: its work is over.
    pub fn answer(&mut self, request: RequestId) {
        if self.pending.remove(&request).is_some() {
            let record = ControllerRecord::Answered { workflow: RECORD_SUBJECT.to_owned(), request };
            self.records.push_back(record.encode());
        }
    }

    fn site_settings(&self) -> &SiteSettings {
        self.config.site.as_ref().expect("the site desk runs only with a site")
    }

    /// What the journal `lines` say of the site's machines and of every machine an earlier process's request
    /// not answered names.
    pub fn site_journal(&self, lines: &[String]) -> SiteJournal {
        let mut machines: BTreeSet<&String> = self.site_settings().machines.iter().collect();
        for what in self.adopted.values() {
            if let Taken::Onboard { machine, .. } | Taken::Decommission { machine } = what {
                machines.insert(machine);
            }
        }
        SiteJournal::read(machines, lines)
    }

    /// The earlier process's requests of one kind, taken up now.
    fn adopt(&mut self, kind: impl Fn(&Taken) -> bool) -> Vec<(RequestId, Taken)> {
        let ids: Vec<RequestId> = self.adopted.iter().filter(|(_, what)| kind(what)).map(|(id, _)| *id).collect();
        ids.into_iter().filter_map(|id| self.adopted.remove(&id).map(|what| (id, what))).collect()
    }

    // --- the site ---------------------------------------------------------------------------------------------------

    /// The controller takes the site up (its start time reached): the machines whose onboarding the journal does
    /// not show completed and whose decommission has not begun, to run (in a bare-metal site only those whose
    /// onboarding began: the instance lifecycle asks for the others); the rest are taken up as they are. Then the
    /// onboardings an earlier process took and did not finish: each joins the run of its machine, starts one, or is
    /// answered at once when the journal shows it done.
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
        for (id, what) in self.adopt(|what| matches!(what, Taken::Onboard { .. })) {
            let Taken::Onboard { machine, .. } = what else { continue };
            if journal.completed.contains(&machine) || journal.decommission_began.contains(&machine) {
                self.site.taken_up.insert(machine);
                self.answer(id);
                continue;
            }
            if self.take_onboarding(&machine) {
                start.push(machine.clone());
            }
            self.site.onboarding_answers.entry(machine).or_default().push(id);
        }
        self.check_rested();
        start
    }

    /// The decommissions the journal shows started and not finished (a dead controller's), and those an earlier
    /// process took and did not finish: to run again (or answered at once when the journal shows them ended).
    pub fn site_decommissions(&mut self, journal: &SiteJournal) -> Vec<String> {
        let machines = self.site_settings().machines.clone();
        let mut start: Vec<String> = machines
            .into_iter()
            .filter(|machine| journal.decommission_unfinished.contains(machine))
            .filter(|machine| self.take_decommission(machine))
            .collect();
        for (id, what) in self.adopt(|what| matches!(what, Taken::Decommission { .. })) {
            let Taken::Decommission { machine } = what else { continue };
            if journal.decommission_ended(&machine) {
                self.answer(id);
                continue;
            }
            if self.take_decommission(&machine) {
                start.push(machine.clone());
            }
            self.site.decommission_answers.entry(machine).or_default().push(id);
        }
        start
    }

    /// The recovery actions an earlier process took and did not finish, to perform again from where their audit
    /// trail says they got.
    pub fn site_recoveries(&mut self) -> Vec<SiteWork> {
        self.adopt(|what| matches!(what, Taken::Recovery { .. }))
            .into_iter()
            .filter_map(|(request, what)| match what {
                Taken::Recovery { order, correlation_id } => {
                    Some(SiteWork::Recovery { request, order, correlation_id, resumed: true })
                }
                _ => None,
            })
            .collect()
    }

    /// The site desk takes `request` (journaled): the work it starts, or that it joins work in flight. A recovery
    /// action's correlation id is `correlation_id` (the workflow, the action and the controller's clock).
    pub fn take_site_request(&mut self, request: Request, correlation_id: String) -> SiteWork {
        match request {
            Request::Onboard { machine, instance } => {
                let id = self.take(Taken::Onboard { machine: machine.clone(), instance });
                self.site.onboarding_answers.entry(machine.clone()).or_default().push(id);
                if self.take_onboarding(&machine) { SiteWork::Onboard(machine) } else { SiteWork::Joined }
            }
            Request::Decommission { machine } => {
                let id = self.take(Taken::Decommission { machine: machine.clone() });
                self.site.decommission_answers.entry(machine.clone()).or_default().push(id);
                if self.take_decommission(&machine) { SiteWork::Decommission(machine) } else { SiteWork::Joined }
            }
            Request::Recovery(order) => {
                let request =
                    self.take(Taken::Recovery { order: order.clone(), correlation_id: correlation_id.clone() });
                SiteWork::Recovery { request, order, correlation_id, resumed: false }
            }
            Request::Rollout(_) | Request::Rotation(_) | Request::Instance(_) => {
                unreachable!("the site desk takes only the site's requests")
            }
        }
    }

    /// `machine`'s onboarding starts now, unless a run of it is in flight (that run is the answer).
    fn take_onboarding(&mut self, machine: &str) -> bool {
        if !self.site.running.insert(machine.to_owned()) {
            return false;
        }
        self.site.taken_up.insert(machine.to_owned());
        true
    }

    /// A requested onboarding asks to be admitted under the concurrency limit: its ticket, and whether it runs now
    /// (else the service waits until [`Controller::release`] names it).
    pub fn admit(&mut self) -> (Ticket, bool) {
        self.site.admission.ask()
    }

    /// An admitted run gives its place back: the ticket admitted next, to wake.
    pub fn release(&mut self) -> Option<Ticket> {
        self.site.admission.release()
    }

    /// `machine`'s onboarding is over (its runs done): it is no longer in flight, the requests it answers are
    /// answered, and the onboarding may rest now.
    pub fn onboarding_ended(&mut self, machine: &str) {
        self.site.running.remove(machine);
        for id in self.site.onboarding_answers.remove(machine).unwrap_or_default() {
            self.answer(id);
        }
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

    /// `machine`'s decommission starts now, unless one is in flight.
    fn take_decommission(&mut self, machine: &str) -> bool {
        self.site.decommissioning.insert(machine.to_owned())
    }

    /// Whether a decommission of `machine` must wait: its onboarding is in flight.
    pub fn decommission_waits(&self, machine: &str) -> bool {
        self.site.running.contains(machine)
    }

    /// `machine`'s decommission is over: the requests it answers are answered.
    pub fn decommission_ended(&mut self, machine: &str) {
        self.site.decommissioning.remove(machine);
        for id in self.site.decommission_answers.remove(machine).unwrap_or_default() {
            self.answer(id);
        }
    }

    /// A recovery action's run or compensation of `machine`'s onboarding asks to start: `true` when no run of it is
    /// in flight (it is now), else it waits and asks again.
    pub fn recovery_onboarding_may_start(&mut self, machine: &str) -> bool {
        self.site.running.insert(machine.to_owned())
    }

    /// A recovery action's onboarding run or compensation is over: the requests waiting on the machine's onboarding
    /// are answered by it too.
    pub fn recovery_onboarding_ended(&mut self, machine: &str) {
        self.site.running.remove(machine);
        for id in self.site.onboarding_answers.remove(machine).unwrap_or_default() {
            self.answer(id);
        }
    }

    /// A recovery action's decommission run asks to start: `true` when neither the machine's onboarding nor a
    /// decommission of it is in flight (it is now).
    pub fn recovery_decommission_may_start(&mut self, machine: &str) -> bool {
        !self.site.running.contains(machine) && self.site.decommissioning.insert(machine.to_owned())
    }

    // --- the rollout and the rotations ------------------------------------------------------------------------------

    /// A rollout order is taken (journaled): the request the controller runs (this process's identity as the lock's
    /// holder, the limits of its configuration), now the latest; the one it replaces is answered.
    pub fn take_rollout(&mut self, order: RolloutOrder) -> RolloutRequest {
        let request = rollout_request(&self.config.rollout, &self.process, order);
        let id = self.take(Taken::Rollout { request: Box::new(request.clone()) });
        if let Some((replaced, _)) = self.rollout.replace((id, request.clone())) {
            self.answer(replaced);
        }
        request
    }

    /// The latest rollout taken, if any.
    pub fn latest_rollout(&self) -> Option<&RolloutRequest> {
        self.rollout.as_ref().map(|(_, request)| request)
    }

    /// The latest rollout ran to its end (or the journal showed it had).
    pub fn rollout_ended(&mut self) {
        if let Some((id, _)) = self.rollout {
            self.answer(id);
        }
    }

    /// Whether the journal shows `rollout` terminal: it is not run again.
    pub fn rollout_finished(lines: &[String], rollout: &str) -> bool {
        let finished = format!("\"record\":\"terminal\",\"rollout\":\"{rollout}\"");
        lines.iter().any(|line| line.contains(&finished))
    }

    /// A rotation order is taken (journaled): its id counts the node's rotations (`rotation-<node>-<n>`, from 1).
    pub fn take_rotation(&mut self, order: RotationOrder) -> RotationRequest {
        let node = &order.endpoint.node;
        let earlier = self.rotations.iter().filter(|(_, request)| &request.endpoint.node == node).count();
        let request = rotation_request(&self.config.rotation, &rotation_id(node, earlier + 1), order);
        let id = self.take(Taken::Rotation { request: request.clone() });
        self.rotations.push((id, request.clone()));
        request
    }

    /// The `index`th rotation taken (each is run, or answered as its journal ended it, in order).
    pub fn rotation(&self, index: usize) -> Option<&RotationRequest> {
        self.rotations.get(index).map(|(_, request)| request)
    }

    /// The `index`th rotation ran to its end.
    pub fn rotation_ended(&mut self, index: usize) {
        if let Some((id, _)) = self.rotations.get(index) {
            let id = *id;
            self.answer(id);
        }
    }

    // --- the instance lifecycle -------------------------------------------------------------------------------------

    /// The instance lifecycle starts at `now_ms`: its first pass replenishes, its first cloud sync is one period on.
    pub fn instances_begin(&mut self, now_ms: u64) {
        let settings = self.config.instances.as_ref().expect("the instance desk runs only with instances");
        self.instances.next_replenish_ms = now_ms;
        self.instances.next_sync_ms = now_ms + settings.sync_ms;
    }

    /// The runbook verbs an earlier process took and did not answer, to perform again first (a page's answer is not:
    /// the next pass pages again). Each is performed again whole: the verbs are idempotent (a provision by its
    /// operation id) or refuse a repeat (a hold, an approval), and the journal's intents let the passes finish
    /// what one began.
    pub fn instances_adopted(&mut self) -> Vec<(RequestId, InstanceOrder)> {
        let mut again = Vec::new();
        for (id, what) in self.adopt(|what| matches!(what, Taken::Instance { .. })) {
            let Taken::Instance { order } = what else { continue };
            if matches!(order.verb, InstanceVerb::Recover(_)) {
                self.answer(id);
            } else {
                again.push((id, order));
            }
        }
        again
    }

    /// The instance desk takes a runbook verb (journaled).
    pub fn take_instance(&mut self, order: InstanceOrder) -> RequestId {
        self.take(Taken::Instance { order })
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

#[cfg(test)]
mod tests;
