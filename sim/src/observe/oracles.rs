//! Oracles: properties checked from trace events only, separate from the engine and the fakes they judge.
//!
//! Typed as in stateright: an **always** property is a safety invariant (any counterexample fails the run), an
//! **eventually** property is a liveness deadline measured from when the faults that could excuse it healed, and a
//! **sometimes** property records that the run reached an interesting state (so a run, or a campaign, that never got
//! there cannot pass vacuously). `docs/oracles.md` documents each one.

use engine::instance::stuck::Stuck;
use engine::ports::events::{Evidence, TerminalOutcome};
use engine::secret::SECRET_MARKER;
use reports::PropertyKind;

use crate::model::oracles::{CATALOG, OracleId, OracleInfo};
use crate::observe::trace::{Body, Event, OnboardingBody, RolloutBody};

pub mod heartbeat;
mod instance;
mod operator;
pub(crate) mod rollout;
mod rotation;
mod site;
#[cfg(test)]
mod tests;

/// The most violations kept per oracle and run (the count is not capped, the evidence is).
const EVIDENCE_KEPT_PER_ORACLE: usize = 10;

/// What the oracles need to know about the run's configuration.
#[derive(Debug, Clone)]
pub struct OracleContext {
    pub controller: String,
    pub hub: String,
    pub agent_ttl_ms: u64,
    pub sweep_interval_ms: u64,
    /// The engine's call timeout: an answer older than this is never acted on.
    pub call_timeout_ms: u64,
    /// The largest one-way link latency the run can have.
    pub latency_max_ms: u64,
    /// Worker nodes in the fleet.
    pub nodes: u32,
    /// The most nodes a rollout may hold at once.
    pub lane_size: u32,
    /// Healthy, eligible nodes a rollout must keep (0: no floor).
    pub availability_floor: u32,
    /// The onboarding workflows the run starts (empty without `[onboarding]`).
    pub workflows: Vec<String>,
    /// The decommission workflows the run's `decommission` steps ask for.
    pub decommissions: Vec<String>,
    /// The site's policies the matrix's words defer to.
    pub site_policy: engine::workflow::SitePolicy,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub t_ms: u64,
    pub evidence: String,
}

pub trait Oracle {
    fn on_event(&mut self, event: &Event, line: &str, out: &mut Vec<Finding>);
    /// Whether a `hub.heartbeat` can change what the oracle finds: the steady event, most of a run's trace. An
    /// oracle that says no is not called for heartbeats. Only oracles that react to one kind of event other than a
    /// heartbeat, and neither judge deadlines nor read the event's time otherwise, say no.
    fn reads_heartbeats(&self) -> bool {
        true
    }
    /// Called once when the run ends at `end_ms`: eventually-properties judge what is due by then.
    fn on_finish(&mut self, _end_ms: u64, _out: &mut Vec<Finding>) {}
}

/// The oracle of `id`, for this run's configuration. Exhaustive: an oracle added to the catalogue
/// ([`crate::model::oracles`]) does not compile until it is built here.
fn build(id: OracleId, ctx: &OracleContext) -> Box<dyn Oracle> {
    match id {
        OracleId::SilenceSignalIsJustified => Box::new(heartbeat::SilenceJustified::new(ctx)),
        OracleId::EpochMemberNeverTombstoned => Box::new(heartbeat::EpochMemberNeverTombstoned::default()),
        OracleId::SecretsNeverInTrace => Box::new(SecretsNeverInTrace),
        OracleId::SilenceDetectedInTime => Box::new(heartbeat::SilenceDetectedInTime::new(ctx)),
        OracleId::AvailabilityFloor => Box::new(rollout::AvailabilityFloor::new(ctx)),
        OracleId::LaneBound => Box::new(rollout::LaneBound::new(ctx.lane_size as usize)),
        OracleId::NoDuplicateMutation => Box::new(rollout::NoDuplicateMutation::default()),
        OracleId::NoFetchAfterQuiescence => Box::new(rollout::NoFetchAfterQuiescence::default()),
        OracleId::RecoveryHoldPrecedesIdentity => Box::new(rollout::RecoveryHoldPrecedesIdentity),
        OracleId::NoIncoherentNodeMutated => Box::new(rollout::NoIncoherentNodeMutated::default()),
        OracleId::NoDispatchToHeldWorker => Box::new(rollout::NoDispatchToHeld::default()),
        OracleId::EveryLaneConverged => Box::new(rollout::EveryLaneConverged::default()),
        OracleId::EverySelectedNodeAccounted => Box::new(rollout::EverySelectedNodeAccounted::new(ctx)),
        OracleId::HoldsAccounted => Box::new(rollout::HoldsAccounted::default()),
        OracleId::InstanceSilentRaised => Box::new(Reached(|body| matches!(body, Body::InstanceSilent { .. }))),
        OracleId::InstanceRecoveredRaised => Box::new(Reached(|body| matches!(body, Body::InstanceRecovered { .. }))),
        OracleId::AgentTombstoned => Box::new(Reached(|body| matches!(body, Body::HubTombstoned { .. }))),
        OracleId::AgentOfflined => Box::new(Reached(|body| matches!(body, Body::HubOffline { .. }))),
        OracleId::HostRestarted => Box::new(Reached(|body| matches!(body, Body::HostBoot { boot } if *boot > 1))),
        OracleId::DispatchRefusedByHold => Box::new(Reached(|body| matches!(body, Body::HubDispatchRefused { .. }))),
        OracleId::NodeQuarantined => {
            Box::new(Reached(|body| matches!(body, Body::Rollout { event: RolloutBody::Quarantined { .. }, .. })))
        }
        OracleId::ControllerAdoptedJournal => {
            Box::new(Reached(|body| matches!(body, Body::Rollout { event: RolloutBody::Adopted { .. }, .. })))
        }
        OracleId::RolloutReachedSuccessor => Box::new(Reached(|body| {
            matches!(body, Body::Rollout { event: RolloutBody::Terminal { outcome: TerminalOutcome::Successor }, .. })
        })),
        OracleId::RolloutStoppedOnRouteChange => {
            Box::new(Reached(|body| matches!(body, Body::Rollout { event: RolloutBody::RouteChanged { .. }, .. })))
        }
        OracleId::RetryRecovered => Box::new(rollout::RetryRecovered::default()),
        OracleId::LaneRolledBack => Box::new(rollout::LaneRolledBack::default()),
        OracleId::NoEgressAfterQuiescence => Box::new(rollout::NoEgressAfterQuiescence::default()),
        OracleId::CanaryBeforeWiderRelease => Box::new(rollout::CanaryBeforeWiderRelease::default()),
        OracleId::NoRollbackWithoutAFault => Box::new(rollout::NoRollbackWithoutAFault::default()),
        OracleId::OnlyIntendedHoldsReleased => Box::new(rollout::OnlyIntendedHoldsReleased),
        OracleId::ReceiptsNameFrozenRoute => Box::new(rollout::ReceiptsNameFrozenRoute::default()),
        OracleId::RolloutTimeBounded => Box::new(rollout::RolloutTimeBounded::default()),
        OracleId::CredentialRenewedMidRollout => {
            Box::new(Reached(|body| matches!(body, Body::Rollout { event: RolloutBody::Reauthenticated { .. }, .. })))
        }
        OracleId::StaleLockWaitedOut => {
            Box::new(Reached(|body| matches!(body, Body::Rollout { event: RolloutBody::LockWaiting { .. }, .. })))
        }
        OracleId::LockSupersededOnAdoption => Box::new(Reached(|body| {
            matches!(body, Body::Rollout { event: RolloutBody::LockTaken { superseded: true, .. }, .. })
        })),
        OracleId::OperatorHoldRespected => {
            Box::new(Reached(|body| matches!(body, Body::Rollout { event: RolloutBody::SkippedHeld { .. }, .. })))
        }
        OracleId::OldJournalSettledOnce => Box::new(rollout::OldJournalSettledOnce::default()),
        OracleId::HistoricalIdentityCanonicalizedFirst => {
            Box::new(rollout::HistoricalIdentityCanonicalizedFirst::default())
        }
        OracleId::JournalMigrated => {
            Box::new(Reached(|body| matches!(body, Body::Rollout { event: RolloutBody::JournalMigrated { .. }, .. })))
        }
        OracleId::IdentityCanonicalized => {
            Box::new(Reached(|body| matches!(body, Body::Rollout { event: RolloutBody::Canonicalized { .. }, .. })))
        }
        OracleId::MaasTransitionsLegal => Box::new(site::MaasTransitionsLegal),
        OracleId::NoDestructiveCallWithoutFreshRead => Box::new(site::NoDestructiveCallWithoutFreshRead::default()),
        OracleId::NoDoubleCommissionOrDeploy => Box::new(site::NoDoubleCommissionOrDeploy::default()),
        OracleId::OnboardingFollowsTheMatrix => {
            Box::new(site::FollowsTheMatrix::new(engine::matrix::Workflow::Onboarding, ctx))
        }
        OracleId::DecommissionFollowsTheMatrix => {
            Box::new(site::FollowsTheMatrix::new(engine::matrix::Workflow::Decommission, ctx))
        }
        OracleId::DecommissionCompleted => {
            Box::new(Reached(|body| matches!(body, Body::Decommission { event: OnboardingBody::Completed { .. }, .. })))
        }
        OracleId::EveryDecommissionRests => Box::new(site::EveryDecommissionRests::new(ctx)),
        OracleId::NoDecommissionOfAReferencedWorker => Box::new(site::NoDecommissionOfAReferencedWorker::default()),
        OracleId::DecommissionRefused => {
            Box::new(Reached(|body| matches!(body, Body::Decommission { event: OnboardingBody::Refused { .. }, .. })))
        }
        OracleId::EveryNodeOnboardedOrDiagnosed => Box::new(site::EveryNodeOnboardedOrDiagnosed::new(ctx)),
        OracleId::StallDetected => {
            Box::new(Reached(|body| matches!(body, Body::Onboarding { event: OnboardingBody::Stalled { .. }, .. })))
        }
        OracleId::OnboardingCompleted => {
            Box::new(Reached(|body| matches!(body, Body::Onboarding { event: OnboardingBody::Completed { .. }, .. })))
        }
        OracleId::MacDriftClassified => Box::new(Reached(|body| {
            matches!(body, Body::Onboarding { event: OnboardingBody::Stopped { class, evidence, .. }, .. }
                    if class == "state_ambiguity" && evidence.iter().any(|e| matches!(e, Evidence::UnknownMachine { .. })))
        })),
        OracleId::EpochMemberSurvivedTtl => Box::new(heartbeat::EpochMemberSurvivedTtl::new(ctx)),
        OracleId::PinnedIdentityPresent => Box::new(heartbeat::PinnedIdentityPresent::default()),
        OracleId::ResurrectionJournalBound => Box::new(heartbeat::ResurrectionJournalBound::default()),
        OracleId::TombstoneResurrected => Box::new(Reached(|body| matches!(body, Body::HubResurrected { .. }))),
        OracleId::AuditRecordsComplete => Box::new(operator::AuditRecordsComplete::default()),
        OracleId::NoAutomationOnFrozenWorkflow => Box::new(operator::NoAutomationOnFrozenWorkflow::default()),
        OracleId::ActionReachesExpectedState => Box::new(operator::ActionReachesExpectedState::default()),
        OracleId::InstanceTransitionsLegal => Box::new(instance::TransitionsLegal::default()),
        OracleId::OneVmPerOperationId => Box::new(instance::OneVmPerOperation::default()),
        OracleId::OpsHoldNeverBypassed => Box::new(instance::HoldNeverBypassed::default()),
        OracleId::AllocatorHandsOutOnlyReady => Box::new(instance::AllocatorOnlyReady::default()),
        OracleId::NothingWrittenBeforeApproval => Box::new(instance::NothingBeforeApproval::default()),
        OracleId::RefusedWritesNothing => Box::new(instance::RefusedWritesNothing),
        OracleId::EveryInstanceSettles => Box::new(instance::EveryInstanceSettles::default()),
        OracleId::BareMetalFollowsItsWorkflows => Box::new(instance::BareMetalFollowsItsWorkflows::default()),
        OracleId::TerminatedGuestSignalled => Box::new(instance::TerminatedGuestSignalled::default()),
        OracleId::CordonFenced => Box::new(instance::CordonReached(instance::CordonOutcome::Fenced)),
        OracleId::CordonClaimed => Box::new(instance::CordonReached(instance::CordonOutcome::Claimed)),
        OracleId::CordonAlreadyFenced => Box::new(instance::CordonReached(instance::CordonOutcome::AlreadyFenced)),
        OracleId::CordonNotPooled => Box::new(instance::CordonReached(instance::CordonOutcome::NotPooled)),
        OracleId::StuckPending => Box::new(instance::StuckReached(Stuck::Pending)),
        OracleId::StuckProvisioning => Box::new(instance::StuckReached(Stuck::Provisioning)),
        OracleId::StuckNeverReady => Box::new(instance::StuckReached(Stuck::NeverReady)),
        OracleId::StuckSilent => Box::new(instance::StuckReached(Stuck::Silent)),
        OracleId::StuckDrainStalled => Box::new(instance::StuckReached(Stuck::DrainStalled)),
        OracleId::StuckTerminateStalled => Box::new(instance::StuckReached(Stuck::TerminateStalled)),
        OracleId::ApprovalPending => Box::new(Reached(|body| {
            matches!(
                body,
                Body::InstanceRecord { record: engine::instance::inventory::InstanceRecord::Deferred { .. } }
            )
        })),
        OracleId::PredecessorRevokedAfterSuccessorProved => Box::new(rotation::PredecessorRevokedAfterProof::default()),
        OracleId::RotationOverlapHolds => Box::new(rotation::RotationOverlapHolds::default()),
        OracleId::OneSuccessorPerRotation => Box::new(rotation::OneSuccessorPerRotation::default()),
        OracleId::CredentialRotated => Box::new(Reached(|body| {
            matches!(
                body,
                Body::Rotation {
                    event: crate::observe::trace::RotationBody::Ended {
                        end: engine::ports::events::RotationEnd::Rotated { .. }
                    },
                    ..
                }
            )
        })),
        OracleId::TerminatedGuestPresent => Box::new(Reached(|body| {
            matches!(body, Body::InstanceSync { signals, .. } if signals.iter().any(|signal| matches!(
                signal,
                engine::instance::sync::SyncSignal::CloudSyncTerminatedGuestPresent { .. }
            )))
        })),
    }
}

/// The oracles of one run and what they found.
pub struct OracleSet {
    oracles: Vec<(&'static OracleInfo, Box<dyn Oracle>)>,
    /// The indices of the oracles a `hub.heartbeat` is given to ([`Oracle::reads_heartbeats`]).
    heartbeat_readers: Vec<usize>,
    /// Per oracle: findings kept (violations capped, sometimes-properties only the first) and the total count.
    findings: Vec<(Vec<Finding>, u64)>,
    scratch: Vec<Finding>,
}

impl OracleSet {
    /// Every oracle of the catalogue: all safety and liveness properties are checked in every run.
    pub fn all(ctx: &OracleContext) -> OracleSet {
        let oracles: Vec<_> = CATALOG.iter().map(|info| (info, build(info.id, ctx))).collect();
        let findings = oracles.iter().map(|_| (Vec::new(), 0)).collect();
        let heartbeat_readers =
            oracles.iter().enumerate().filter(|(_, (_, oracle))| oracle.reads_heartbeats()).map(|(i, _)| i).collect();
        OracleSet { oracles, heartbeat_readers, findings, scratch: Vec::new() }
    }

    pub fn on_event(&mut self, event: &Event, line: &str) {
        if matches!(event.body, Body::HubHeartbeat { .. }) {
            for position in 0..self.heartbeat_readers.len() {
                self.feed(self.heartbeat_readers[position], event, line);
            }
        } else {
            for index in 0..self.oracles.len() {
                self.feed(index, event, line);
            }
        }
    }

    /// One oracle's turn at one event.
    fn feed(&mut self, index: usize, event: &Event, line: &str) {
        self.oracles[index].1.on_event(event, line, &mut self.scratch);
        self.take_scratch(index);
    }

    pub fn finish(&mut self, end_ms: u64) {
        for index in 0..self.oracles.len() {
            self.oracles[index].1.on_finish(end_ms, &mut self.scratch);
            self.take_scratch(index);
        }
    }

    /// Most events make no finding: inlined, that case costs a length check.
    #[inline]
    fn take_scratch(&mut self, index: usize) {
        if self.scratch.is_empty() {
            return;
        }
        let property = self.oracles[index].0.property;
        let (kept, count) = &mut self.findings[index];
        for finding in self.scratch.drain(..) {
            *count += 1;
            let cap = if property == PropertyKind::Sometimes { 1 } else { EVIDENCE_KEPT_PER_ORACLE };
            if kept.len() < cap {
                kept.push(finding);
            }
        }
    }

    /// `(oracle, findings kept, total count)` for every oracle that fired, in catalogue order.
    pub fn fired(&self) -> impl Iterator<Item = (&'static OracleInfo, &[Finding], u64)> {
        self.oracles
            .iter()
            .zip(&self.findings)
            .filter(|(_, (_, count))| *count > 0)
            .map(|((info, _), (kept, count))| (*info, kept.as_slice(), *count))
    }
}

/// A sometimes-property reached by one kind of event.
struct Reached(fn(&Body) -> bool);

impl Oracle for Reached {
    fn on_event(&mut self, event: &Event, _line: &str, out: &mut Vec<Finding>) {
        if (self.0)(&event.body) {
            out.push(Finding { t_ms: event.t_ms, evidence: format!("{} on {}", kind_of(&event.body), event.host) });
        }
    }

    /// A reachability property matches its event kinds; none matches a heartbeat
    /// (`heartbeats_reach_nothing_in_the_oracles_that_skip_them`).
    fn reads_heartbeats(&self) -> bool {
        false
    }
}

fn kind_of(body: &Body) -> String {
    serde_json::to_value(body)
        .ok()
        .and_then(|value| value.get("kind").and_then(|kind| kind.as_str().map(str::to_owned)))
        .unwrap_or_default()
}

struct SecretsNeverInTrace;

impl Oracle for SecretsNeverInTrace {
    fn on_event(&mut self, event: &Event, line: &str, out: &mut Vec<Finding>) {
        if line.contains(SECRET_MARKER) {
            out.push(Finding {
                t_ms: event.t_ms,
                evidence: format!("a {} event on {} carries a credential", kind_of(&event.body), event.host),
            });
        }
    }
}
