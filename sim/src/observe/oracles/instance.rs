//! The instance lifecycle's oracles (seed 004, `docs/instances.md`): they read the instance controller's journal
//! records as the trace carries them (`instance.record`), the provider's own view (`cloud.vm_created`,
//! `cloud.guest`), and what each request to the controller wrote (`instance.operated`), and keep their own fold of
//! the rows — never the engine's.

use std::collections::{BTreeMap, BTreeSet};

use engine::instance::inventory::{DeferredOperation, InstanceRecord};
use engine::instance::operator::OperatorStep;
use engine::instance::pool::PoolState;
use engine::instance::state::{InstanceEvent, InstanceState};
use engine::instance::stuck::Stuck;
use engine::instance::sync::SyncSignal;
use fakes::cloud::GuestEvent;

use super::{Finding, Oracle};
use crate::model::faults::Counted;
use crate::observe::trace::{Body, Event, OnboardingBody};

/// The runbook's lifecycle table, written out again for the oracle: where `event` may take a row in `from`.
fn allowed(from: InstanceState, event: InstanceEvent) -> Option<InstanceState> {
    use InstanceEvent as E;
    use InstanceState as S;
    match (from, event) {
        (S::Terminated, _) => None,
        (_, E::Terminate) => Some(S::Terminated),
        (S::Pending, E::MarkProvisioning) => Some(S::Provisioning),
        (S::Provisioning | S::Starting | S::Rebooting, E::MarkRunning) => Some(S::Running),
        (S::Stopped | S::Error, E::MarkErrored) => None,
        (_, E::MarkErrored) => Some(S::Error),
        (S::Running | S::Starting | S::Rebooting, E::Stop) => Some(S::Stopping),
        (S::Stopping, E::MarkStopped) => Some(S::Stopped),
        (S::Stopped, E::Start) => Some(S::Starting),
        (S::Running, E::Reboot) => Some(S::Rebooting),
        _ => None,
    }
}

fn record_of(event: &Event) -> Option<&InstanceRecord> {
    match &event.body {
        Body::InstanceRecord { record } => Some(record),
        _ => None,
    }
}

/// `instance_transitions_legal`: every row is created pending, and every transition record starts where the row
/// is and is an edge of the table.
#[derive(Default)]
pub(crate) struct TransitionsLegal {
    states: BTreeMap<String, InstanceState>,
}

impl Oracle for TransitionsLegal {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        let finding = |evidence: String| Finding { t_ms: event.t_ms, evidence };
        match record_of(event) {
            Some(InstanceRecord::InstanceCreated { instance }) => {
                if instance.state != InstanceState::Pending {
                    out.push(finding(format!("{} was created {}, not pending", instance.id, instance.state)));
                }
                self.states.insert(instance.id.clone(), instance.state);
            }
            Some(InstanceRecord::Transition { instance, event: step, from, to, .. }) => {
                let Some(state) = self.states.get_mut(instance) else {
                    out.push(finding(format!("{instance} moved ({}) before it was created", step.as_str())));
                    return;
                };
                if *from != *state {
                    out.push(finding(format!(
                        "{instance}: {} recorded from {from}, but the row is {state}",
                        step.as_str()
                    )));
                }
                match allowed(*state, *step) {
                    Some(next) if next == *to => {}
                    _ => out.push(finding(format!(
                        "{instance}: {} from {state} to {to} is not in the table",
                        step.as_str()
                    ))),
                }
                *state = *to;
            }
            _ => {}
        }
    }
}

/// `one_vm_per_operation_id`: a create never leaves two VMs alive at the provider for one operation id (or, without
/// one, for one instance) while the row that owns them is not terminated.
#[derive(Default)]
pub(crate) struct OneVmPerOperation {
    /// The key of each instance: its operation id, else its own id.
    keys: BTreeMap<String, String>,
    terminated: BTreeSet<String>,
    /// Live VMs by tag.
    live: BTreeMap<String, BTreeSet<String>>,
}

impl Oracle for OneVmPerOperation {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        match &event.body {
            Body::InstanceRecord { record: InstanceRecord::InstanceCreated { instance } } => {
                let key = instance.operation_id.clone().unwrap_or_else(|| instance.id.clone());
                self.keys.insert(instance.id.clone(), key);
            }
            Body::InstanceRecord {
                record: InstanceRecord::Transition { instance, to: InstanceState::Terminated, .. },
            } => {
                self.terminated.insert(instance.clone());
            }
            Body::CloudGuest { event: GuestEvent::Destroyed { tag, vm } } => {
                if let Some(vms) = self.live.get_mut(tag) {
                    vms.remove(vm);
                }
            }
            Body::CloudVmCreated { vm, tag } => {
                self.live.entry(tag.clone()).or_default().insert(vm.clone());
                let key = self.keys.get(tag).cloned().unwrap_or_else(|| tag.clone());
                let owners: Vec<&String> = self
                    .keys
                    .iter()
                    .filter(|(instance, k)| **k == key && !self.terminated.contains(*instance))
                    .map(|(instance, _)| instance)
                    .collect();
                let vms: Vec<&String> = owners.iter().filter_map(|owner| self.live.get(*owner)).flatten().collect();
                if vms.len() > 1 {
                    out.push(Finding {
                        t_ms: event.t_ms,
                        evidence: format!("operation {key} has {} live VMs at the provider: {vms:?}", vms.len()),
                    });
                }
            }
            _ => {}
        }
    }
}

/// `ops_hold_never_bypassed`: no start, reboot or terminate of a row under an ops hold.
#[derive(Default)]
pub(crate) struct HoldNeverBypassed {
    held: BTreeSet<String>,
}

impl Oracle for HoldNeverBypassed {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        match record_of(event) {
            Some(InstanceRecord::HoldPlaced { instance, .. }) => {
                self.held.insert(instance.clone());
            }
            Some(InstanceRecord::HoldLifted { instance, .. }) => {
                self.held.remove(instance);
            }
            Some(InstanceRecord::Transition {
                instance,
                event: step @ (InstanceEvent::Start | InstanceEvent::Reboot | InstanceEvent::Terminate),
                ..
            }) if self.held.contains(instance) => out.push(Finding {
                t_ms: event.t_ms,
                evidence: format!("{instance} is under an ops hold and was sent {}", step.as_str()),
            }),
            _ => {}
        }
    }
}

/// `allocator_hands_out_only_ready`: a claim takes only a ready, running, uncordoned member.
#[derive(Default)]
pub(crate) struct AllocatorOnlyReady {
    pool_state: BTreeMap<String, PoolState>,
    state: BTreeMap<String, InstanceState>,
    cordoned: BTreeSet<String>,
}

impl Oracle for AllocatorOnlyReady {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        match record_of(event) {
            Some(InstanceRecord::InstanceCreated { instance }) => {
                self.state.insert(instance.id.clone(), instance.state);
                if let Some(membership) = &instance.pool {
                    self.pool_state.insert(instance.id.clone(), membership.state);
                }
            }
            Some(InstanceRecord::Transition { instance, to, .. }) => {
                self.state.insert(instance.clone(), *to);
            }
            Some(InstanceRecord::Cordoned { instance, .. }) => {
                self.cordoned.insert(instance.clone());
            }
            Some(InstanceRecord::Uncordoned { instance, .. }) => {
                self.cordoned.remove(instance);
            }
            Some(InstanceRecord::PoolStateChanged { instance, to, .. }) => {
                let before = self.pool_state.insert(instance.clone(), *to);
                if *to != PoolState::Claimed {
                    return;
                }
                let state = self.state.get(instance).copied();
                let cordoned = self.cordoned.contains(instance);
                if before != Some(PoolState::Ready) || state != Some(InstanceState::Running) || cordoned {
                    out.push(Finding {
                        t_ms: event.t_ms,
                        evidence: format!(
                            "{instance} was handed out while {} in its pool, {} and {}",
                            before.map_or("not pooled", PoolState::as_str),
                            state.map_or("unknown", InstanceState::as_str),
                            if cordoned { "cordoned" } else { "not cordoned" }
                        ),
                    });
                }
            }
            _ => {}
        }
    }
}

/// `nothing_written_before_approval`: a request parked behind an approval writes its audit record and the deferred
/// operation only; a denial its audit record and the decision only; and while a deferred operation is pending, no
/// operator's request but its approval does what it parked (cordon, uncordon or terminate of its row). The
/// controller's own terminates (a pool's TTL recycle, the on-call's recovery of a stuck row) are no operator's
/// request and are not gated.
#[derive(Default)]
pub(crate) struct NothingBeforeApproval {
    /// Pending deferred operations: (instance, what it parks).
    pending: BTreeMap<String, (String, &'static str)>,
    /// Inside an operator's audited request: the deferred operation it approves, if it is an approval.
    request: Option<Option<String>>,
    /// What the approval being run parked, once its decision is recorded.
    approved: Option<(String, &'static str)>,
}

fn parks(operation: &DeferredOperation) -> (String, &'static str) {
    match operation {
        DeferredOperation::Cordon { instance, .. } => (instance.clone(), "cordoned"),
        DeferredOperation::Uncordon { instance, .. } => (instance.clone(), "uncordoned"),
        DeferredOperation::Terminate { instance, .. } => (instance.clone(), "terminate"),
    }
}

impl Oracle for NothingBeforeApproval {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        let finding = |evidence: String| Finding { t_ms: event.t_ms, evidence };
        if let Body::InstanceOperated { op, target, outcome, wrote, .. } = &event.body {
            self.request = None;
            self.approved = None;
            let shape: &[&str] = match (op.as_str(), outcome.as_str()) {
                (_, "pending") => &["audited", "deferred"],
                ("deny", "performed") => &["audited", "decided"],
                _ => return,
            };
            if wrote.iter().map(String::as_str).ne(shape.iter().copied()) {
                out.push(finding(format!("{op} of {target} ({outcome}) wrote {wrote:?}, not {shape:?}")));
            }
            return;
        }
        let Some(record) = record_of(event) else { return };
        let done = match record {
            InstanceRecord::Deferred { deferred } => {
                self.pending.insert(deferred.id.clone(), parks(&deferred.operation));
                return;
            }
            InstanceRecord::Audited { audit } => {
                self.request = Some(match &audit.step {
                    OperatorStep::Approve { deferred } => Some(deferred.clone()),
                    _ => None,
                });
                return;
            }
            InstanceRecord::Decided { deferred, .. } => {
                let parked = self.pending.remove(deferred);
                if matches!(&self.request, Some(Some(approving)) if approving == deferred) {
                    self.approved = parked;
                }
                return;
            }
            InstanceRecord::Cordoned { instance, .. } => (instance, "cordoned"),
            InstanceRecord::Uncordoned { instance, .. } => (instance, "uncordoned"),
            InstanceRecord::Transition { instance, event: InstanceEvent::Terminate, .. } => (instance, "terminate"),
            _ => return,
        };
        if self.request.is_none() {
            return;
        }
        // The approval of one of them runs what it parked; another request parked alike may still wait.
        if self.approved.as_ref().is_some_and(|(instance, what)| instance == done.0 && *what == done.1) {
            return;
        }
        let parked = self.pending.iter().find(|(_, (instance, what))| instance == done.0 && *what == done.1);
        if let Some((id, _)) = parked {
            out.push(finding(format!("{} of {} was written while {id} waits for its approval", done.1, done.0)));
        }
    }
}

/// `refused_writes_nothing`: a refused request (a cordon, drain or any other step the controller refused) writes
/// its audit record and nothing else.
pub(crate) struct RefusedWritesNothing;

impl Oracle for RefusedWritesNothing {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        if let Body::InstanceOperated { op, target, outcome, wrote, .. } = &event.body
            && outcome == "refused"
            && wrote.iter().any(|kind| kind != "audited")
        {
            out.push(Finding { t_ms: event.t_ms, evidence: format!("a refused {op} of {target} wrote {wrote:?}") });
        }
    }
}

/// How long a row may stay in a state that is not settled, counted from when it entered it or from the last
/// disturbance (a fault step, a controller boot), whichever is later: the state's stuck bound and the on-call's
/// recovery of it, with a pass or two to spare.
fn unsettled_bound_ms(state: InstanceState) -> Option<u64> {
    match state {
        InstanceState::Pending => Some(20 * 60_000),
        InstanceState::Provisioning => Some(25 * 60_000),
        InstanceState::Starting | InstanceState::Rebooting => Some(20 * 60_000),
        InstanceState::Stopping => Some(45 * 60_000),
        InstanceState::Running | InstanceState::Stopped | InstanceState::Terminated | InstanceState::Error => None,
    }
}

/// The time a destroy may stay unconfirmed: the terminate-stalled bound, the reap, a teardown and a pass or two.
const DESTROY_CONFIRMED_MS: u64 = 20 * 60_000;

/// Where a machine's workflow got to, as the trace shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Workflow {
    /// A stage started; the workflow has not rested since.
    Running,
    /// Completed at this time.
    Completed(u64),
    /// Stopped for good (not `failed_retryable`) at this time.
    StoppedForGood(u64),
}

/// The bare-metal rows of a run and their machines' workflows, from the trace: which instance is backed by which
/// machine (its node's name), and where each machine's onboarding and decommission got to.
#[derive(Default)]
struct MetalBook {
    node_names: BTreeMap<String, String>,
    /// Bare-metal instance → machine.
    machines: BTreeMap<String, String>,
    onboarding: BTreeMap<String, Workflow>,
    decommission: BTreeMap<String, Workflow>,
}

impl MetalBook {
    fn observe(&mut self, event: &Event) {
        let (book, workflow, step) = match &event.body {
            Body::InstanceRecord { record: InstanceRecord::NodeCreated { node } } => {
                self.node_names.insert(node.id.clone(), node.name.clone());
                return;
            }
            Body::InstanceRecord { record: InstanceRecord::InstanceCreated { instance } } => {
                if matches!(instance.backing, engine::instance::inventory::Backing::BareMetal { .. })
                    && let Some(name) = self.node_names.get(&instance.node)
                {
                    self.machines.insert(instance.id.clone(), name.clone());
                }
                return;
            }
            Body::Onboarding { workflow, event } => (&mut self.onboarding, workflow.strip_prefix("onboard-"), event),
            Body::Decommission { workflow, event } => {
                (&mut self.decommission, workflow.strip_prefix("decommission-"), event)
            }
            _ => return,
        };
        let Some(machine) = workflow else { return };
        let state = match step {
            OnboardingBody::StageStarted { .. } => Workflow::Running,
            OnboardingBody::Completed { .. } => Workflow::Completed(event.t_ms),
            OnboardingBody::Stopped { workflow_state, .. } if workflow_state != "failed_retryable" => {
                Workflow::StoppedForGood(event.t_ms)
            }
            // A decommission refused before its run (something references the worker) rests for a person, who
            // clears the references and asks again.
            OnboardingBody::Refused { .. } => Workflow::StoppedForGood(event.t_ms),
            _ => return,
        };
        book.insert(machine.to_owned(), state);
    }

    fn machine(&self, instance: &str) -> Option<&String> {
        self.machines.get(instance)
    }

    /// When a bare-metal row's wait on its workflow ends: `Some(None)` when it never began (the row's own bound
    /// applies), `Some(Some(t))` when it rested at `t`, `None` while it runs (its workflow's oracle judges it) or
    /// stopped for good on a decommission (a person's follow-up).
    fn rested(&self, instance: &str, state: InstanceState) -> Option<Option<u64>> {
        let machine = self.machine(instance)?;
        let onboarding = self.onboarding.get(machine).copied();
        if state != InstanceState::Terminated {
            return match onboarding {
                None => Some(None),
                Some(Workflow::Running) => None,
                Some(Workflow::Completed(t) | Workflow::StoppedForGood(t)) => Some(Some(t)),
            };
        }
        match (onboarding, self.decommission.get(machine).copied()) {
            (Some(Workflow::Running), None) | (_, Some(Workflow::Running | Workflow::StoppedForGood(_))) => None,
            (Some(Workflow::Completed(t) | Workflow::StoppedForGood(t)), None) => Some(Some(t)),
            (None, None) => Some(None),
            (_, Some(Workflow::Completed(t))) => Some(Some(t)),
        }
    }
}

/// `every_instance_settles`: every row settles in running, stopped, terminated or error within its bound, and a
/// terminate's destroy is confirmed within its own. A row under an operator's ops hold is its owner's: the hold
/// refuses the terminate a stuck row's recovery needs, so it is judged from when the hold is lifted. A bare-metal
/// row's provisioning and destroy wait on its machine's onboarding and decommission: while one runs, the workflow's
/// own oracles judge it (`every_node_onboarded_or_diagnosed`, `every_decommission_rests`), a decommission stopped
/// for good is a person's follow-up, and the row's bound runs from when its workflow rested.
#[derive(Default)]
pub(crate) struct EveryInstanceSettles {
    /// Each row's state and when it entered it (or its hold was lifted, if later).
    rows: BTreeMap<String, (InstanceState, u64)>,
    held: BTreeSet<String>,
    /// Destroys owed, since when.
    destroys: BTreeMap<String, u64>,
    disturbed_ms: u64,
    metal: MetalBook,
}

impl EveryInstanceSettles {
    /// From when a row's bound runs: when it entered its state, the last disturbance, and (a bare-metal row waiting
    /// on its machine) when the workflow rested; `None` while the workflow runs.
    fn bound_start_ms(&self, instance: &str, state: InstanceState, since_ms: u64) -> Option<u64> {
        let start = since_ms.max(self.disturbed_ms);
        if self.metal.machine(instance).is_none() || matches!(state, InstanceState::Starting | InstanceState::Stopping)
        {
            return Some(start);
        }
        self.metal.rested(instance, state).map(|rested| rested.map_or(start, |t| t.max(start)))
    }

    fn judge(&self, now_ms: u64, out: &mut Vec<Finding>) {
        for (instance, (state, since_ms)) in &self.rows {
            if self.held.contains(instance) {
                continue;
            }
            if let (Some(bound), Some(from_ms)) =
                (unsettled_bound_ms(*state), self.bound_start_ms(instance, *state, *since_ms))
            {
                let deadline = from_ms + bound;
                if now_ms > deadline {
                    out.push(Finding { t_ms: deadline, evidence: format!("{instance} is still {state}") });
                }
            }
        }
        for (instance, since_ms) in &self.destroys {
            let Some(from_ms) = self.bound_start_ms(instance, InstanceState::Terminated, *since_ms) else { continue };
            let deadline = from_ms + DESTROY_CONFIRMED_MS;
            if now_ms > deadline {
                out.push(Finding { t_ms: deadline, evidence: format!("{instance}'s destroy is not confirmed") });
            }
        }
    }
}

impl Oracle for EveryInstanceSettles {
    fn on_event(&mut self, event: &Event, _line: &str, _out: &mut Vec<Finding>) {
        self.metal.observe(event);
        match &event.body {
            Body::Step { step, .. } if step.step_kind().counted() != Counted::DriverAction => {
                self.disturbed_ms = event.t_ms;
            }
            Body::HostBoot { .. } | Body::HostCrash { .. } => self.disturbed_ms = event.t_ms,
            Body::InstanceRecord { record } => match record {
                InstanceRecord::InstanceCreated { instance } => {
                    self.rows.insert(instance.id.clone(), (instance.state, event.t_ms));
                }
                InstanceRecord::Transition { instance, to, .. } => {
                    self.rows.insert(instance.clone(), (*to, event.t_ms));
                }
                InstanceRecord::DestroyRequested { instance, .. } => {
                    self.destroys.insert(instance.clone(), event.t_ms);
                }
                InstanceRecord::DestroyConfirmed { instance } => {
                    self.destroys.remove(instance);
                }
                InstanceRecord::HoldPlaced { instance, .. } => {
                    self.held.insert(instance.clone());
                }
                InstanceRecord::HoldLifted { instance, .. } => {
                    self.held.remove(instance);
                    if let Some((_, since_ms)) = self.rows.get_mut(instance) {
                        *since_ms = event.t_ms;
                    }
                }
                _ => {}
            },
            _ => {}
        }
    }

    fn on_finish(&mut self, end_ms: u64, out: &mut Vec<Finding>) {
        self.judge(end_ms, out);
    }
}

/// `bare_metal_follows_its_workflows`: a bare-metal instance runs only once its machine's agent enrolled at the hub,
/// its machine's decommission begins only after the instance was terminated, and its destroy is confirmed only
/// once that decommission completed (or when its machine's onboarding never began: nothing to release).
#[derive(Default)]
pub(crate) struct BareMetalFollowsItsWorkflows {
    metal: MetalBook,
    enrolled: BTreeSet<String>,
    terminated: BTreeSet<String>,
}

impl Oracle for BareMetalFollowsItsWorkflows {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        self.metal.observe(event);
        let finding = |evidence: String| Finding { t_ms: event.t_ms, evidence };
        match &event.body {
            Body::SiteAgentEnrol { machine, .. } => {
                self.enrolled.insert(machine.clone());
            }
            Body::InstanceRecord { record: InstanceRecord::Transition { instance, to, .. } } => {
                let Some(machine) = self.metal.machine(instance).cloned() else { return };
                if *to == InstanceState::Terminated {
                    self.terminated.insert(instance.clone());
                }
                if *to == InstanceState::Running && !self.enrolled.contains(&machine) {
                    out.push(finding(format!("{instance} is running but {machine}'s agent never enrolled")));
                }
            }
            Body::InstanceRecord { record: InstanceRecord::DestroyConfirmed { instance } } => {
                let Some(machine) = self.metal.machine(instance) else { return };
                let released = matches!(self.metal.decommission.get(machine), Some(Workflow::Completed(_)));
                let never_onboarded = !self.metal.onboarding.contains_key(machine);
                if !released && !never_onboarded {
                    out.push(finding(format!(
                        "{instance}'s destroy was confirmed before {machine}'s decommission completed"
                    )));
                }
            }
            Body::Decommission { workflow, event: OnboardingBody::StageStarted { .. } } => {
                let Some(machine) = workflow.strip_prefix("decommission-") else { return };
                let live: Vec<&String> = self
                    .metal
                    .machines
                    .iter()
                    .filter(|(instance, backing)| *backing == machine && !self.terminated.contains(*instance))
                    .map(|(instance, _)| instance)
                    .collect();
                if let Some(instance) = live.first() {
                    out.push(finding(format!("{machine}'s decommission began while its instance {instance} lives")));
                }
            }
            _ => {}
        }
    }
}

/// How long after its terminate a guest the provider still runs must be signalled: the hourly sync and a pass.
const GUEST_SIGNALLED_MS: u64 = 60 * 60_000 + 2 * 60_000;

/// `terminated_guest_signalled`: a guest still running at the provider after its row was terminated is signalled
/// `cloud_sync_terminated_guest_present` by the next sync, unless it is gone by then.
#[derive(Default)]
pub(crate) struct TerminatedGuestSignalled {
    /// Live VMs by tag.
    live: BTreeMap<String, BTreeSet<String>>,
    /// Terminated rows whose guest was still live at the terminate: since when.
    owed: BTreeMap<String, u64>,
    disturbed_ms: u64,
}

impl TerminatedGuestSignalled {
    fn judge(&mut self, now_ms: u64, out: &mut Vec<Finding>) {
        let disturbed_ms = self.disturbed_ms;
        self.owed.retain(|instance, since_ms| {
            let deadline = (*since_ms).max(disturbed_ms) + GUEST_SIGNALLED_MS;
            if now_ms > deadline {
                out.push(Finding {
                    t_ms: deadline,
                    evidence: format!("{instance} is terminated, its guest still runs, and no sync said so"),
                });
                return false;
            }
            true
        });
    }
}

impl Oracle for TerminatedGuestSignalled {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        self.judge(event.t_ms, out);
        match &event.body {
            Body::Step { step, .. } if step.step_kind().counted() != Counted::DriverAction => {
                self.disturbed_ms = event.t_ms;
            }
            Body::HostBoot { .. } | Body::HostCrash { .. } => self.disturbed_ms = event.t_ms,
            Body::CloudVmCreated { vm, tag } => {
                self.live.entry(tag.clone()).or_default().insert(vm.clone());
            }
            Body::CloudGuest { event: GuestEvent::Destroyed { tag, vm } } => {
                if let Some(vms) = self.live.get_mut(tag) {
                    vms.remove(vm);
                    if vms.is_empty() {
                        self.owed.remove(tag);
                    }
                }
            }
            Body::InstanceRecord {
                record: InstanceRecord::Transition { instance, to: InstanceState::Terminated, .. },
            } if self.live.get(instance).is_some_and(|vms| !vms.is_empty()) => {
                self.owed.insert(instance.clone(), event.t_ms);
            }
            Body::InstanceSync { signals, .. } => {
                for signal in signals {
                    if let SyncSignal::CloudSyncTerminatedGuestPresent { instance, .. } = signal {
                        self.owed.remove(instance);
                    }
                }
            }
            _ => {}
        }
    }

    fn on_finish(&mut self, end_ms: u64, out: &mut Vec<Finding>) {
        self.judge(end_ms, out);
    }
}

/// A `cordon_state` outcome, as the records show it: the cordon marker's pool state before, and whether the cordon
/// fenced the member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CordonOutcome {
    Fenced,
    Claimed,
    AlreadyFenced,
    NotPooled,
}

/// The sometimes-property of one cordon outcome.
pub(crate) struct CordonReached(pub CordonOutcome);

impl Oracle for CordonReached {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        let Some(InstanceRecord::Cordoned { instance, cordon }) = record_of(event) else { return };
        let outcome = match cordon.pool_state_before {
            None => CordonOutcome::NotPooled,
            Some(PoolState::Claimed) => CordonOutcome::Claimed,
            Some(PoolState::Draining) => CordonOutcome::AlreadyFenced,
            Some(_) => CordonOutcome::Fenced,
        };
        if outcome == self.0 {
            out.push(Finding { t_ms: event.t_ms, evidence: format!("{instance} cordoned ({outcome:?})") });
        }
    }

    fn reads_heartbeats(&self) -> bool {
        false
    }
}

/// The sometimes-property of one stuck row of the runbook's table.
pub(crate) struct StuckReached(pub Stuck);

impl Oracle for StuckReached {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        if let Body::InstanceStuck { instance, stuck, .. } = &event.body
            && *stuck == self.0
        {
            out.push(Finding { t_ms: event.t_ms, evidence: format!("{instance} stuck {}", stuck.as_str()) });
        }
    }

    fn reads_heartbeats(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    //! Each instance oracle fed a story, and what it finds: the safe story passes, the broken one is caught.

    use std::rc::Rc;

    use engine::instance::control::Control;
    use engine::instance::inventory::{Backing, Cordon, Deferred, DeferredStatus, Hold, Instance, Membership};
    use engine::instance::operator::{AuditOutcome, InstanceAudit};

    use super::*;

    fn ev(t_ms: u64, body: Body) -> Event {
        Event { t_ms, host: Rc::from("controller"), body }
    }

    fn rec(t_ms: u64, record: InstanceRecord) -> Event {
        ev(t_ms, Body::InstanceRecord { record })
    }

    fn created(id: &str, operation_id: Option<&str>, pool: Option<PoolState>) -> InstanceRecord {
        let backing = Backing::Cloud { region: "r".into(), instance_type: "t".into() };
        let membership =
            pool.map(|state| Membership { pool: "edge".into(), state, anchor_ms: 0, fenced_by_cordon: false });
        let instance = Instance::pending(
            id.into(),
            "n-1".into(),
            format!("{id}-0"),
            backing,
            operation_id.map(str::to_owned),
            membership,
            0,
        );
        InstanceRecord::InstanceCreated { instance: Box::new(instance) }
    }

    fn moved(id: &str, event: InstanceEvent, from: InstanceState, to: InstanceState) -> InstanceRecord {
        InstanceRecord::Transition { instance: id.into(), event, from, to, at_ms: 0 }
    }

    fn run(oracle: &mut dyn Oracle, events: &[Event], end_ms: u64) -> Vec<Finding> {
        let mut out = Vec::new();
        for event in events {
            oracle.on_event(event, "", &mut out);
        }
        oracle.on_finish(end_ms, &mut out);
        out
    }

    use InstanceEvent as E;
    use InstanceState as S;

    /// A bare-metal story's opening: node `node-02` and its instance `i-1` on the machine.
    fn metal_rows() -> [Event; 2] {
        let node = engine::instance::inventory::Node {
            id: "n-1".into(),
            account: "acme".into(),
            name: "node-02".into(),
            template_id: "t".into(),
            worker_id: Some("node-02".into()),
            enabled: true,
            config: Default::default(),
        };
        let backing = Backing::BareMetal { mac: "52:54:00:00:00:01".into() };
        let instance = Instance::pending("i-1".into(), "n-1".into(), "node-02-0".into(), backing, None, None, 0);
        [
            rec(0, InstanceRecord::NodeCreated { node }),
            rec(0, InstanceRecord::InstanceCreated { instance: Box::new(instance) }),
        ]
    }

    fn workflow(t_ms: u64, decommission: bool, event: OnboardingBody) -> Event {
        let body = if decommission {
            Body::Decommission { workflow: "decommission-node-02".into(), event }
        } else {
            Body::Onboarding { workflow: "onboard-node-02".into(), event }
        };
        ev(t_ms, body)
    }

    fn started(t_ms: u64, decommission: bool) -> Event {
        workflow(t_ms, decommission, OnboardingBody::StageStarted { stage: "s".into(), attempt: 1 })
    }

    fn completed(t_ms: u64, decommission: bool) -> Event {
        workflow(t_ms, decommission, OnboardingBody::Completed { system_id: "abc".into() })
    }

    fn stopped(t_ms: u64, decommission: bool, state: &str) -> Event {
        workflow(
            t_ms,
            decommission,
            OnboardingBody::Stopped {
                stage: "s".into(),
                class: "state_ambiguity".into(),
                workflow_state: state.into(),
                node_state: "active".into(),
                evidence: Vec::new(),
            },
        )
    }

    #[test]
    fn bare_metal_follows_its_workflows_catches_a_run_before_enrolment_and_a_release_before_the_decommission() {
        let enrol = ev(5, Body::SiteAgentEnrol { machine: "node-02".into(), system_id: "abc".into() });
        let running = rec(6, moved("i-1", E::MarkRunning, S::Provisioning, S::Running));
        let terminate = rec(10, moved("i-1", E::Terminate, S::Running, S::Terminated));
        let confirmed = rec(30, InstanceRecord::DestroyConfirmed { instance: "i-1".into() });
        let [node, instance] = metal_rows();
        let good = [
            node.clone(),
            instance.clone(),
            started(1, false),
            enrol.clone(),
            running.clone(),
            completed(7, false),
            terminate.clone(),
            started(11, true),
            completed(29, true),
            confirmed.clone(),
        ];
        assert!(run(&mut BareMetalFollowsItsWorkflows::default(), &good, 40).is_empty());
        let unenrolled = [node.clone(), instance.clone(), started(1, false), running.clone()];
        let found = run(&mut BareMetalFollowsItsWorkflows::default(), &unenrolled, 40);
        assert!(found.len() == 1 && found[0].evidence.contains("never enrolled"), "{found:?}");
        let early = [
            node.clone(),
            instance.clone(),
            started(1, false),
            enrol.clone(),
            running.clone(),
            terminate.clone(),
            started(11, true),
            confirmed.clone(),
        ];
        let found = run(&mut BareMetalFollowsItsWorkflows::default(), &early, 40);
        assert!(found.len() == 1 && found[0].evidence.contains("before node-02's decommission completed"), "{found:?}");
        let live = [node.clone(), instance.clone(), started(1, false), enrol, running, started(11, true)];
        let found = run(&mut BareMetalFollowsItsWorkflows::default(), &live, 40);
        assert!(found.len() == 1 && found[0].evidence.contains("while its instance i-1 lives"), "{found:?}");
        let never_onboarded =
            [node, instance, rec(1, moved("i-1", E::Terminate, S::Pending, S::Terminated)), confirmed];
        assert!(run(&mut BareMetalFollowsItsWorkflows::default(), &never_onboarded, 40).is_empty());
    }

    #[test]
    fn every_instance_settles_judges_a_bare_metal_row_from_when_its_workflow_rested() {
        let minute = 60_000;
        let [node, instance] = metal_rows();
        let provisioning = rec(0, moved("i-1", E::MarkProvisioning, S::Pending, S::Provisioning));
        let opening = [node.clone(), instance.clone(), provisioning.clone(), started(minute, false)];
        // While the onboarding runs, its own oracle judges it.
        assert!(run(&mut EveryInstanceSettles::default(), &opening, 600 * minute).is_empty());
        // Rested at 100 min: the row's bound runs from then.
        let mut rested = opening.to_vec();
        rested.push(stopped(100 * minute, false, "failed_manual_intervention"));
        assert!(run(&mut EveryInstanceSettles::default(), &rested, 120 * minute).is_empty());
        let found = run(&mut EveryInstanceSettles::default(), &rested, 200 * minute);
        assert!(found.len() == 1 && found[0].evidence.contains("still provisioning"), "{found:?}");
        // A retryable stop is no rest: the workflow's oracle judges it.
        let mut retrying = opening.to_vec();
        retrying.push(stopped(100 * minute, false, "failed_retryable"));
        assert!(run(&mut EveryInstanceSettles::default(), &retrying, 600 * minute).is_empty());
        // Never asked for: the row's own bound from its start.
        let found =
            run(&mut EveryInstanceSettles::default(), &[node.clone(), instance.clone(), provisioning], 60 * minute);
        assert_eq!(found.len(), 1, "{found:?}");
        // A destroy owed: judged from the decommission's completion; excused while a stopped one waits for a person.
        let mut owed = rested.clone();
        owed.push(rec(101 * minute, moved("i-1", E::Terminate, S::Error, S::Terminated)));
        owed.push(rec(101 * minute, InstanceRecord::DestroyRequested { instance: "i-1".into(), at_ms: 101 * minute }));
        let mut stuck = owed.clone();
        stuck.push(started(102 * minute, true));
        stuck.push(stopped(103 * minute, true, "failed_manual_intervention"));
        assert!(run(&mut EveryInstanceSettles::default(), &stuck, 600 * minute).is_empty());
        // Refused before a run began (something references the worker): it rests for a person too.
        let mut refused = owed.clone();
        let refusal = OnboardingBody::Refused {
            stage: "disable_node".into(),
            class: "state_ambiguity".into(),
            workflow_state: "failed_retryable".into(),
            node_state: "active".into(),
            references: Vec::new(),
        };
        refused.push(workflow(102 * minute, true, refusal));
        assert!(run(&mut EveryInstanceSettles::default(), &refused, 600 * minute).is_empty());
        let found = run(&mut EveryInstanceSettles::default(), &owed, 600 * minute);
        assert!(found.len() == 1 && found[0].evidence.contains("destroy is not confirmed"), "never asked: {found:?}");
        let mut released = owed.clone();
        released.push(started(102 * minute, true));
        released.push(completed(150 * minute, true));
        assert!(run(&mut EveryInstanceSettles::default(), &released, 160 * minute).is_empty());
        let found = run(&mut EveryInstanceSettles::default(), &released, 200 * minute);
        assert!(found.len() == 1 && found[0].evidence.contains("destroy is not confirmed"), "{found:?}");
    }

    #[test]
    fn transitions_legal_passes_the_table_and_catches_an_edge_off_it_or_a_wrong_from() {
        let good = [
            rec(0, created("i-1", None, None)),
            rec(1, moved("i-1", E::MarkProvisioning, S::Pending, S::Provisioning)),
            rec(2, moved("i-1", E::MarkRunning, S::Provisioning, S::Running)),
            rec(3, moved("i-1", E::Terminate, S::Running, S::Terminated)),
        ];
        assert!(run(&mut TransitionsLegal::default(), &good, 10).is_empty());
        let off_table = [rec(0, created("i-1", None, None)), rec(1, moved("i-1", E::Start, S::Pending, S::Starting))];
        assert_eq!(run(&mut TransitionsLegal::default(), &off_table, 10).len(), 1);
        let wrong_from = [rec(0, created("i-1", None, None)), rec(1, moved("i-1", E::Stop, S::Running, S::Stopping))];
        assert_eq!(run(&mut TransitionsLegal::default(), &wrong_from, 10).len(), 2, "a wrong from, off the table");
        let out_of_terminated = [
            rec(0, created("i-1", None, None)),
            rec(1, moved("i-1", E::Terminate, S::Pending, S::Terminated)),
            rec(2, moved("i-1", E::Terminate, S::Terminated, S::Terminated)),
        ];
        assert_eq!(run(&mut TransitionsLegal::default(), &out_of_terminated, 10).len(), 1);
    }

    #[test]
    fn one_vm_per_operation_catches_a_second_live_vm_and_allows_one_after_a_terminate() {
        let vm = |vm: &str, tag: &str| ev(5, Body::CloudVmCreated { vm: vm.into(), tag: tag.into() });
        let twice = [rec(0, created("i-1", Some("op"), None)), vm("vm-1", "i-1"), vm("vm-2", "i-1")];
        assert_eq!(run(&mut OneVmPerOperation::default(), &twice, 10).len(), 1);
        let across_rows = [
            rec(0, created("i-1", Some("op"), None)),
            rec(0, created("i-2", Some("op"), None)),
            vm("vm-1", "i-1"),
            vm("vm-2", "i-2"),
        ];
        assert_eq!(run(&mut OneVmPerOperation::default(), &across_rows, 10).len(), 1);
        let after_terminate = [
            rec(0, created("i-1", Some("op"), None)),
            vm("vm-1", "i-1"),
            rec(1, moved("i-1", E::Terminate, S::Provisioning, S::Terminated)),
            rec(2, created("i-2", Some("op"), None)),
            vm("vm-2", "i-2"),
        ];
        assert!(run(&mut OneVmPerOperation::default(), &after_terminate, 10).is_empty());
    }

    #[test]
    fn the_hold_oracle_catches_a_terminate_of_a_held_row_and_allows_a_stop() {
        let hold = InstanceRecord::HoldPlaced {
            instance: "i-1".into(),
            hold: Hold { by: "a".into(), reason: "r".into(), at_ms: 0 },
        };
        let stop = [rec(0, hold.clone()), rec(1, moved("i-1", E::Stop, S::Running, S::Stopping))];
        assert!(run(&mut HoldNeverBypassed::default(), &stop, 10).is_empty());
        let terminate = [rec(0, hold.clone()), rec(1, moved("i-1", E::Terminate, S::Running, S::Terminated))];
        assert_eq!(run(&mut HoldNeverBypassed::default(), &terminate, 10).len(), 1);
        let lifted = [
            rec(0, hold),
            rec(1, InstanceRecord::HoldLifted { instance: "i-1".into(), by: "a".into() }),
            rec(2, moved("i-1", E::Terminate, S::Running, S::Terminated)),
        ];
        assert!(run(&mut HoldNeverBypassed::default(), &lifted, 10).is_empty());
    }

    fn claim(from: PoolState) -> InstanceRecord {
        InstanceRecord::PoolStateChanged {
            instance: "i-1".into(),
            from,
            to: PoolState::Claimed,
            anchor_ms: None,
            by_cordon: false,
        }
    }

    #[test]
    fn the_allocator_oracle_catches_a_claim_of_a_warming_or_cordoned_member() {
        let ready = InstanceRecord::PoolStateChanged {
            instance: "i-1".into(),
            from: PoolState::Warming,
            to: PoolState::Ready,
            anchor_ms: Some(1),
            by_cordon: false,
        };
        let running = [
            rec(0, created("i-1", None, Some(PoolState::Warming))),
            rec(1, moved("i-1", E::MarkProvisioning, S::Pending, S::Provisioning)),
            rec(2, moved("i-1", E::MarkRunning, S::Provisioning, S::Running)),
        ];
        let mut good = running.to_vec();
        good.extend([rec(2, ready.clone()), rec(3, claim(PoolState::Ready))]);
        assert!(run(&mut AllocatorOnlyReady::default(), &good, 10).is_empty());
        let mut warming = running.to_vec();
        warming.push(rec(3, claim(PoolState::Warming)));
        assert_eq!(run(&mut AllocatorOnlyReady::default(), &warming, 10).len(), 1);
        let cordon = Cordon { by: "a".into(), reason: "r".into(), at_ms: 2, pool_state_before: Some(PoolState::Ready) };
        let mut cordoned = running.to_vec();
        cordoned.extend([
            rec(2, ready),
            rec(3, InstanceRecord::Cordoned { instance: "i-1".into(), cordon }),
            rec(4, claim(PoolState::Ready)),
        ]);
        assert_eq!(run(&mut AllocatorOnlyReady::default(), &cordoned, 10).len(), 1);
    }

    fn operated(op: &str, outcome: &str, wrote: &[&str]) -> Event {
        ev(
            9,
            Body::InstanceOperated {
                actor: "a".into(),
                op: op.into(),
                target: "vm-01".into(),
                outcome: outcome.into(),
                wrote: wrote.iter().map(|kind| (*kind).to_owned()).collect(),
            },
        )
    }

    fn audited(step: OperatorStep) -> InstanceRecord {
        let audit = InstanceAudit {
            actor: "a".into(),
            step,
            outcome: AuditOutcome::Performed,
            correlation_id: "c".into(),
            at_ms: 0,
        };
        InstanceRecord::Audited { audit }
    }

    #[test]
    fn nothing_before_approval_checks_what_a_park_wrote_and_what_runs_while_it_waits() {
        let parked_shape = [operated("terminate", "pending", &["audited", "deferred"])];
        assert!(run(&mut NothingBeforeApproval::default(), &parked_shape, 10).is_empty());
        let ran_anyway = [operated("terminate", "pending", &["audited", "deferred", "transition"])];
        assert_eq!(run(&mut NothingBeforeApproval::default(), &ran_anyway, 10).len(), 1);

        let terminate = DeferredOperation::Terminate { instance: "i-1".into(), by: "a".into() };
        let deferred = InstanceRecord::Deferred {
            deferred: Deferred {
                id: "d-1".into(),
                operation: terminate.clone(),
                status: DeferredStatus::Pending,
                requested_at_ms: 0,
            },
        };
        let kill = moved("i-1", E::Terminate, S::Running, S::Terminated);
        // An operator's request that terminates the parked row outside its approval is caught.
        let bypass = [
            rec(0, deferred.clone()),
            rec(1, audited(OperatorStep::Control { instance: "i-1".into(), action: Control::Terminate, force: true })),
            rec(1, kill.clone()),
        ];
        assert_eq!(run(&mut NothingBeforeApproval::default(), &bypass, 10).len(), 1);
        // Its approval runs it.
        let decided =
            InstanceRecord::Decided { deferred: "d-1".into(), status: DeferredStatus::Approved, by: "b".into() };
        let approval = [
            rec(0, deferred.clone()),
            rec(1, audited(OperatorStep::Approve { deferred: "d-1".into() })),
            rec(1, decided),
            rec(1, kill.clone()),
        ];
        assert!(run(&mut NothingBeforeApproval::default(), &approval, 10).is_empty());
        // The controller's own terminate (a TTL recycle) is no operator's request.
        let recycle = [rec(0, deferred), rec(1, kill)];
        assert!(run(&mut NothingBeforeApproval::default(), &recycle, 10).is_empty());
    }

    #[test]
    fn a_refused_request_may_write_its_audit_record_only() {
        assert!(run(&mut RefusedWritesNothing, &[operated("cordon", "refused", &["audited"])], 10).is_empty());
        assert!(run(&mut RefusedWritesNothing, &[operated("acquire", "refused", &[])], 10).is_empty());
        let wrote = [operated("drain", "refused", &["audited", "cordoned"])];
        assert_eq!(run(&mut RefusedWritesNothing, &wrote, 10).len(), 1);
    }

    #[test]
    fn every_instance_settles_judges_each_state_against_its_bound_and_excuses_a_held_row() {
        let stuck = [
            rec(0, created("i-1", None, None)),
            rec(1, moved("i-1", E::MarkProvisioning, S::Pending, S::Provisioning)),
        ];
        assert!(run(&mut EveryInstanceSettles::default(), &stuck, 25 * 60_000).is_empty(), "inside the bound");
        assert_eq!(run(&mut EveryInstanceSettles::default(), &stuck, 26 * 60_000).len(), 1);
        let mut held = stuck.to_vec();
        let hold = Hold { by: "a".into(), reason: "r".into(), at_ms: 2 };
        held.push(rec(2, InstanceRecord::HoldPlaced { instance: "i-1".into(), hold }));
        assert!(run(&mut EveryInstanceSettles::default(), &held, 60 * 60_000).is_empty());
        let owed = [rec(0, InstanceRecord::DestroyRequested { instance: "i-1".into(), at_ms: 0 })];
        assert_eq!(run(&mut EveryInstanceSettles::default(), &owed, 21 * 60_000).len(), 1);
        let mut confirmed = owed.to_vec();
        confirmed.push(rec(5, InstanceRecord::DestroyConfirmed { instance: "i-1".into() }));
        assert!(run(&mut EveryInstanceSettles::default(), &confirmed, 21 * 60_000).is_empty());
    }

    #[test]
    fn a_terminated_guest_still_running_must_be_gone_or_signalled_within_the_sync_period() {
        let story = [
            ev(0, Body::CloudVmCreated { vm: "vm-1".into(), tag: "i-1".into() }),
            rec(10, moved("i-1", E::Terminate, S::Running, S::Terminated)),
        ];
        assert_eq!(run(&mut TerminatedGuestSignalled::default(), &story, 10 + GUEST_SIGNALLED_MS + 1).len(), 1);
        let mut signalled = story.to_vec();
        let signal =
            SyncSignal::CloudSyncTerminatedGuestPresent { instance: "i-1".into(), cloud_instance_id: "vm-1".into() };
        signalled.push(ev(
            3_600_000,
            Body::InstanceSync { region: "r".into(), mapped_terminated: Vec::new(), signals: vec![signal] },
        ));
        assert!(run(&mut TerminatedGuestSignalled::default(), &signalled, 3 * 3_600_000).is_empty());
        let mut gone = story.to_vec();
        gone.push(ev(
            40_000,
            Body::CloudGuest { event: GuestEvent::Destroyed { tag: "i-1".into(), vm: "vm-1".into() } },
        ));
        assert!(run(&mut TerminatedGuestSignalled::default(), &gone, 3 * 3_600_000).is_empty());
    }

    #[test]
    fn each_cordon_outcome_is_told_from_the_pool_state_the_marker_kept() {
        let cordoned = |before| {
            rec(
                0,
                InstanceRecord::Cordoned {
                    instance: "i-1".into(),
                    cordon: Cordon { by: "a".into(), reason: "r".into(), at_ms: 0, pool_state_before: before },
                },
            )
        };
        for (before, outcome) in [
            (None, CordonOutcome::NotPooled),
            (Some(PoolState::Claimed), CordonOutcome::Claimed),
            (Some(PoolState::Draining), CordonOutcome::AlreadyFenced),
            (Some(PoolState::Ready), CordonOutcome::Fenced),
        ] {
            for other in
                [CordonOutcome::NotPooled, CordonOutcome::Claimed, CordonOutcome::AlreadyFenced, CordonOutcome::Fenced]
            {
                let found = run(&mut CordonReached(other), &[cordoned(before)], 10);
                assert_eq!(found.len(), usize::from(other == outcome), "{before:?} as {other:?}");
            }
        }
    }
}
