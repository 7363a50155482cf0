//! What reaches the controller and what comes out of it: the [`Request`]s an operator, another system or the
//! controller's own instance lifecycle can make (every verb of the recovery matrix and of the provisioning runbook,
//! and the rollout and rotation orders), the desk that takes each, and the [`Event`]s the controller reports.

use crate::decommission::driver::DecommissionOutcome;
use crate::instance::stuck::Stuck;
use crate::instance::sync::SyncSignal;
use crate::matrix::{Compensation, RecoveryAction, Workflow};
use crate::onboarding::driver::OnboardOutcome;
use crate::ports::Endpoint;
use crate::ports::events::WorkOutcome;
use crate::recovery::{ActorRole, AuditRecord};

/// A request to the controller.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Request {
    /// Onboard a racked machine (or take up again the workflow of one whose onboarding stopped): a person's
    /// `resume_onboarding`, or the instance lifecycle provisioning a bare-metal instance on it (`instance` names the
    /// instance its agent enrols as).
    Onboard { machine: String, instance: Option<String> },
    /// Decommission a machine, after its onboarding if that is still in flight.
    Decommission { machine: String },
    /// One of the recovery matrix's seven actions on a machine's workflow.
    Recovery(RecoveryOrder),
    /// Roll a revision out.
    Rollout(RolloutOrder),
    /// Rotate a node's agent credential.
    Rotation(RotationOrder),
    /// One of the provisioning runbook's verbs on a node, an instance, a pool or a deferred operation.
    Instance(InstanceOrder),
}

/// Which of the controller's desks takes a request: each is one task of the service, and takes its requests in
/// the order they came.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Desk {
    /// The MAAS workflows: onboardings, decommissions and the recovery actions on them.
    Site,
    Rollout,
    Rotation,
    Instances,
}

impl Request {
    pub fn desk(&self) -> Desk {
        match self {
            Request::Onboard { .. } | Request::Decommission { .. } | Request::Recovery(_) => Desk::Site,
            Request::Rollout(_) => Desk::Rollout,
            Request::Rotation(_) => Desk::Rotation,
            Request::Instance(_) => Desk::Instances,
        }
    }
}

/// A recovery action asked of a machine's onboarding or decommission workflow (seed 000, section 8).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RecoveryOrder {
    pub machine: String,
    pub workflow: Workflow,
    pub action: RecoveryAction,
    pub actor: String,
    pub role: ActorRole,
    pub reason: String,
    /// The person says the issue behind a freeze is resolved.
    pub resolves_freeze: bool,
}

/// An operator's rollout order: what to deploy and where. The limits it runs under (lanes, floor, phase bounds,
/// leases, back-off) are the controller's configuration.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RolloutOrder {
    pub revision: String,
    /// The next barrier generation (after the newest any selected worker has passed).
    pub generation: u64,
    /// The route bundle the operator approved: the digest the hub published when the rollout was asked for.
    pub route_digest: String,
    /// The selection, in rollout order, each with the host key the controller holds authority for.
    pub nodes: Vec<Endpoint>,
    /// The hub host's SSH endpoint.
    pub hub_endpoint: Endpoint,
    /// The revision's capsules, by digest.
    pub capsules: Vec<String>,
}

/// An operator's order to rotate one node's agent credential.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RotationOrder {
    /// The node's SSH endpoint as it presents itself now.
    pub endpoint: Endpoint,
}

/// The provisioning runbook's verbs (seed 004).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InstanceVerb {
    /// Provision the target node again (with the order's `operation_id`, or a fresh one without).
    Provision,
    PlaceHold,
    LiftHold,
    Start,
    Stop,
    Reboot,
    /// Terminate through the approval gate.
    Terminate,
    /// Cordon through the approval gate.
    Cordon,
    /// Uncordon through the approval gate.
    Uncordon,
    Drain,
    /// Approve the target deferred operation.
    Approve,
    Deny,
    /// "Clearing a stuck provisioning instance": cancel, sync, error, terminate.
    ClearStuck,
    /// A consumer claims a ready member of the target pool.
    Acquire,
    /// A consumer returns the target claimed member.
    Release,
    /// The runbook's recovery of a stuck row, as the on-call performs it: a stuck provisioning cleared and
    /// provisioned again under its operation id, a never-ready instance terminated and provisioned under a fresh one,
    /// a stalled drain hard-terminated, a stalled teardown force-terminated at the provider.
    Recover(Stuck),
}

impl InstanceVerb {
    /// The verb as the audit trail names it (a recovery by the operation it performs).
    pub fn as_str(self) -> &'static str {
        match self {
            InstanceVerb::Provision => "provision",
            InstanceVerb::PlaceHold => "place_hold",
            InstanceVerb::LiftHold => "lift_hold",
            InstanceVerb::Start => "start",
            InstanceVerb::Stop => "stop",
            InstanceVerb::Reboot => "reboot",
            InstanceVerb::Terminate => "terminate",
            InstanceVerb::Cordon => "cordon",
            InstanceVerb::Uncordon => "uncordon",
            InstanceVerb::Drain => "drain",
            InstanceVerb::Approve => "approve",
            InstanceVerb::Deny => "deny",
            InstanceVerb::ClearStuck => "clear_stuck",
            InstanceVerb::Acquire => "acquire",
            InstanceVerb::Release => "release",
            InstanceVerb::Recover(Stuck::Provisioning) => "clear_stuck",
            InstanceVerb::Recover(Stuck::NeverReady | Stuck::DrainStalled) => "terminate",
            InstanceVerb::Recover(Stuck::TerminateStalled) => "reap",
            InstanceVerb::Recover(Stuck::Pending | Stuck::Silent) => "none",
        }
    }
}

/// One runbook verb with its target and the caller's words.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct InstanceOrder {
    /// An instance id (`i-00003`), a pool's k-th live member (`edge[2]`), a node's name, a pool (acquire) or a
    /// deferred operation (approve, deny).
    pub target: String,
    pub verb: InstanceVerb,
    pub reason: String,
    pub actor: String,
    pub force: bool,
    pub operation_id: Option<String>,
}

/// A page the controller sends a person: a stuck row (seed 004, "Stuck-state recovery"), sent at every pass while the
/// row stays stuck. `first` is the pass that raised it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    pub instance: String,
    pub stuck: Stuck,
    pub since_ms: u64,
    pub first: bool,
}

/// How the controller answered a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Taken: its work began, or joined the same work already in flight.
    Taken,
    /// Done; for a runbook verb, its audit outcome (`performed`, `pending`, `refused`, `failed`) and what a caller
    /// needs of it: the deferred operation's id of a pending one, the refusal's or the failure's text.
    Done { outcome: String, detail: Option<String> },
    /// Nothing to do (a recovery whose row is gone, a page that needs no action).
    Nothing,
}

/// What the controller reports as it works: audit records, the instance lifecycle's findings, and the points a
/// deployment's automation (or the simulator's fault plan) may wait for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A recovery action's audit record: as first appended, and again once settled.
    Audit(AuditRecord),
    /// A runbook verb performed, refused or failed, with the instance records it wrote (their `record` tags).
    InstanceOperated { actor: String, verb: String, target: String, outcome: String, wrote: Vec<String> },
    /// A stuck row, raised once per clock start.
    InstanceStuck { instance: String, stuck: Stuck, since_ms: u64 },
    /// The hourly cloud sync of `region`.
    InstanceSync { region: String, mapped_terminated: Vec<String>, signals: Vec<SyncSignal> },
    /// A sync signal about a region whose listing is stale.
    InstanceSyncSignal(SyncSignal),
    /// One step of an instance pass failed; the next pass tries again.
    InstancePassFailed { pass: String, error: String },
    /// Every machine's onboarding was taken up and none is in flight.
    OnboardingRested,
    /// A rollout is about to run (or to be adopted from the journal).
    RolloutBegins { rollout: String },
    /// The latest rollout ended (or the journal showed it had).
    RolloutRested { rollout: String },
    /// A request was answered.
    Answered { request: Request, answer: Answer },
    /// A machine's onboarding (requested, or taken up at boot) is over: the last run's outcome.
    OnboardingEnded { machine: String, outcome: OnboardOutcome },
    /// A machine's decommission is over: its outcome.
    DecommissionEnded { machine: String, outcome: DecommissionOutcome },
    /// A recovery action's compensation of the resting stage was done (or could not be), as the driver says.
    Compensated { machine: String, compensation: Compensation, outcome: WorkOutcome },
    /// A recovery action's work is over: its settled audit record reported, its run (if any) ended; or it could
    /// not be performed (`error`: the journal could not be read or written).
    RecoveryEnded { order: RecoveryOrder, error: Option<String> },
}

/// The audit outcome of a runbook verb as [`Event::InstanceOperated`] names it, and its detail for the caller (a
/// pending one's deferred operation, a refusal's text).
pub fn operated_outcome(audit: &crate::instance::operator::AuditOutcome) -> (&'static str, Option<String>) {
    match audit {
        crate::instance::operator::AuditOutcome::Performed => ("performed", None),
        crate::instance::operator::AuditOutcome::Pending { deferred } => ("pending", Some(deferred.clone())),
        crate::instance::operator::AuditOutcome::Refused { refusal } => ("refused", Some(refusal.clone())),
    }
}
