//! The fault ledger: every fault the plan injected, numbered in injection order, open until it lands, and the
//! one place that says when a fault of each kind *lands* (`docs/faults.md`, "Where a fault lands and what it does").
//!
//! A fault lands the first time work of the run meets it: an SSH call times out on an armed `ssh_timeout`, a
//! read-only observation sees a drifted marker, a message is dropped by a partition, the hub's sweeper finds a
//! stopped agent past its TTL, a workflow stage fails on a machine a site fault changed. The world reports each
//! such meeting here, either directly where it happens ([`World::fault_met`], from the parts that see it) or from
//! the typed event that shows it ([`World::faults_see`], which the core calls for every recorded event), and the
//! ledger traces `fault.landed` once per fault. A fault with a count (`ssh_timeout`'s timeouts, `maas_unavailable`'s
//! answers) is used up one meeting at a time, oldest first; a state fault (a drift, a partition) lands on its first
//! meeting and is closed by the step that heals it. What a landed fault then did is not the world's to say: the
//! collector reads it from its subject's reactions (`observe::collect`).

use crate::model::faults::{Effect, Step, StepKind, Subject};
use crate::observe::trace::{Body, OnboardingBody, RolloutBody};
use crate::world::World;
use crate::world::net::HostId;

/// One injected fault the ledger still tracks.
#[derive(Debug)]
struct Open {
    id: u64,
    kind: StepKind,
    /// What the fault is on: a host or machine name, a link (`a|b` for both directions, `from>to` for one), or
    /// empty for a fault of the whole site, hub or controller.
    key: String,
    /// Meetings left for a fault with a count; `None` for a state fault (it lasts until healed).
    units: Option<u32>,
    landed: bool,
}

/// The ledger of one run.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    injected: u64,
    open: Vec<Open>,
}

use crate::model::faults::link_key;

/// What a network meeting was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LinkMeeting {
    /// The message was dropped because its direction is blocked.
    Blocked,
    /// The message was dropped by the link's loss.
    Lost,
    /// The message waited on a hold.
    Held,
    /// The message crossed a link whose latency a fault changed.
    Slowed,
}

impl Ledger {
    /// The key and count of a fault step: what it is on ([`Step::target_key`]) and how many meetings it takes.
    fn entry(step: &Step) -> (String, Option<u32>) {
        let units = match step {
            Step::SshTimeout { count, .. }
            | Step::SshUnreachable { count, .. }
            | Step::TokenAnswerLost { count, .. }
            | Step::AllocationStuck { count, .. }
            | Step::CleanupResidue { count, .. }
            | Step::UninstallFailure { count, .. }
            | Step::HubTimeout { count }
            | Step::MaasUnavailable { count, .. }
            | Step::PreseedFailure { count }
            | Step::VaultUnavailable { count }
            | Step::InventoryUnavailable { count }
            | Step::EraseFailure { count }
            | Step::ProviderFault { count, .. }
            | Step::ProviderAnswerLost { count } => Some(*count),
            _ => None,
        };
        (step.target_key(), units)
    }

    /// Numbers an injected fault and opens it.
    fn inject(&mut self, step: &Step) -> u64 {
        self.injected += 1;
        let (key, units) = Ledger::entry(step);
        self.open.push(Open { id: self.injected, kind: step.step_kind(), key, units, landed: false });
        self.injected
    }

    /// The step heals faults it names: they stop landing (a fault that never landed stays unlanded).
    fn heal(&mut self, step: &Step) {
        let healed: Option<(&[StepKind], String)> = match step {
            Step::Repair { a, b } => Some((&[StepKind::Partition], link_key(a, b))),
            Step::RepairOneway { from, to } => Some((&[StepKind::PartitionOneway], format!("{from}>{to}"))),
            Step::Release { a, b } => Some((&[StepKind::Hold], link_key(a, b))),
            Step::LinkLoss { a, b, request_per_mille: 0, response_per_mille: 0 } => {
                Some((&[StepKind::LinkLoss], link_key(a, b)))
            }
            Step::Restart { target } => Some((&[StepKind::Crash], target.clone())),
            Step::AgentStart { target } => Some((&[StepKind::AgentStop], target.clone())),
            Step::ClockSkew { target, skew_ms: 0 } => Some((&[StepKind::ClockSkew], target.clone())),
            Step::StorageFault { target, storage: fakes::ssh::Storage::Healthy } => {
                Some((&[StepKind::StorageFault], target.clone()))
            }
            Step::ArtifactMissing { restored: true, .. } => Some((&[StepKind::ArtifactMissing], String::new())),
            Step::ResolverRepair => Some((&[StepKind::ResolverServfail], String::new())),
            Step::DhcpRepair => Some((&[StepKind::DhcpLeaseLoss], String::new())),
            Step::MaasUnreachable { down: false } => Some((&[StepKind::MaasUnreachable], String::new())),
            Step::RegionWorkflowWedged { wedged: false } => Some((&[StepKind::RegionWorkflowWedged], String::new())),
            Step::MachineHidden { target, hidden: false } => Some((&[StepKind::MachineHidden], target.clone())),
            Step::AgentUnreachable { target, down: false } => Some((&[StepKind::AgentUnreachable], target.clone())),
            Step::ProviderSyncStops { stopped: false } => Some((&[StepKind::ProviderSyncStops], String::new())),
            Step::BmcFault { target, fault: crate::model::faults::BmcFaultKind::Healthy } => {
                Some((&[StepKind::BmcFault], target.clone()))
            }
            // There is one death trap: arming it replaces the armed one, which never fires, so it must never land.
            Step::ControllerDeath { .. } => Some((&[StepKind::ControllerDeath], String::new())),
            _ => None,
        };
        let Some((kinds, key)) = healed else { return };
        // A DHCP repair answers every machine again: it heals the lease losses of all of them.
        let any_key = step.step_kind() == StepKind::DhcpRepair;
        self.open.retain(|fault| !(kinds.contains(&fault.kind) && (any_key || fault.key == key)));
    }

    /// A meeting of work with faults of `kind` on `key`: the oldest fault with a count left gives one, or every
    /// state fault of the kind on the key lands. Returns the faults that landed now.
    fn meet(&mut self, kind: StepKind, key: &str) -> Vec<u64> {
        let open = &mut self.open;
        let mut landed = Vec::new();
        if let Some(index) = open.iter().position(|f| f.kind == kind && f.key == key && f.units.is_some()) {
            let fault = &mut open[index];
            if !fault.landed {
                fault.landed = true;
                landed.push(fault.id);
            }
            let units = fault.units.as_mut().expect("a counted fault");
            *units = units.saturating_sub(1);
            if *units == 0 {
                open.remove(index);
            }
            return landed;
        }
        for fault in open.iter_mut().filter(|f| f.kind == kind && f.key == key && !f.landed) {
            fault.landed = true;
            landed.push(fault.id);
        }
        landed
    }

    /// The kinds of the open faults on `key` that land as one of `landings` says, each once.
    fn open_on(&self, key: &str, landings: &[Landing]) -> Vec<StepKind> {
        let mut found: Vec<StepKind> = Vec::new();
        for fault in self.open.iter().filter(|f| f.key == key && landings.contains(&landing(f.kind))) {
            if !found.contains(&fault.kind) {
                found.push(fault.kind);
            }
        }
        found
    }
}

/// How a kind's faults land: the one exhaustive answer per step kind, so a new kind does not compile until it says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Landing {
    /// Not a fault (a driver action or a heal): nothing lands.
    NotAFault,
    /// Where the world meets it, which calls [`World::fault_met`] there (a network drop, an SSH timeout, a fired
    /// controller death, an observation of a drifted worker, …) or as it is injected.
    Met,
    /// From the typed event that shows the meeting (`World::faults_see`: a 503, a SERVFAIL, the hub's expiry, …).
    Seen,
    /// At the machine's next power-on, or else like [`Landing::OnItsMachine`].
    AtBoot,
    /// At the first stage failure, stall or timeout of its machine's workflows after it was injected: the site's
    /// models give it no symptom of its own.
    OnItsMachine,
    /// At the first stage failure, stall or timeout of any workflow after it was injected.
    OnAnyWorkflow,
}

/// How faults of `kind` land.
pub(crate) fn landing(kind: StepKind) -> Landing {
    use Landing::*;
    use StepKind as K;
    match kind {
        K::Repair
        | K::RepairOneway
        | K::Release
        | K::Restart
        | K::AgentStart
        | K::OpenEpoch
        | K::CloseEpoch
        | K::TaskLease
        | K::StartRollout
        | K::RotateCredential
        | K::ResolverRepair
        | K::DhcpRepair
        | K::RegisterMacs
        | K::ResumeOnboarding
        | K::Operator
        | K::Decommission
        | K::InstanceOperator => NotAFault,
        K::Partition
        | K::PartitionOneway
        | K::Hold
        | K::LinkLoss
        | K::LinkLatency
        | K::Crash
        | K::ClockSkew
        | K::AgentStop
        | K::MarkerDrift
        | K::SshTimeout
        | K::EndpointIdentityChange
        | K::StorageFault
        | K::ArtifactMissing
        | K::ControllerDeath
        | K::RouteSwap
        | K::HubTimeout => Met,
        K::TtlExpiry
        | K::CredentialExpiry
        | K::StaleLock
        | K::OperatorHold
        | K::PrincipalRevoked
        | K::OldJournal
        | K::MacDrift
        | K::ResolverServfail
        | K::ScriptHang
        | K::SshUnreachable
        | K::MaasUnavailable
        | K::MaasKeyRevoked
        | K::PreseedFailure
        | K::MaasUnreachable
        | K::InventoryUnavailable
        | K::ProviderFault
        | K::ProviderAnswerLost
        | K::ProviderSyncStops => Seen,
        K::ScriptFailure
        | K::CommissioningSlow
        | K::DatasourceFailure
        | K::HardwareMissing
        | K::AgentEnrolDelay
        | K::HwSyncFailure
        | K::HwSyncStops
        | K::DhcpLeaseLoss => AtBoot,
        K::TokenAnswerLost
        | K::PowerCredentialMissing
        | K::BmcFault
        | K::MachineDeleted
        | K::InterfaceDisconnected
        | K::MachineAdvanced
        | K::MachineHidden
        | K::AllocationStuck
        | K::CleanupResidue
        | K::UninstallFailure
        | K::AgentUnreachable
        | K::EraseSlow
        | K::NodeReactivated => OnItsMachine,
        K::TokenPolicyMissing
        | K::VaultUnavailable
        | K::SiteDisabled
        | K::RegionWorkflowWedged
        | K::EraseFailure
        | K::SecretsDeleteDenied => OnAnyWorkflow,
    }
}

impl World {
    /// Numbers a fault step the plan injects and opens it in the ledger; a step that heals closes what it heals.
    pub(crate) fn ledger_inject(&self, step: &Step, fault: bool) -> Option<u64> {
        let mut ledger = self.ledger.borrow_mut();
        ledger.heal(step);
        fault.then(|| ledger.inject(step))
    }

    /// Work of `on` met faults of `kind` on `key`: those that land now are traced, with `effect` when the landing is
    /// itself what the fault did.
    pub(crate) fn fault_met(&self, kind: StepKind, key: &str, on: Subject, effect: Option<Effect>) {
        for landing in self.landings(kind, key, on, effect) {
            self.record_sim(landing);
        }
    }

    /// The `fault.landed` events of the faults of `kind` on `key` that land now.
    fn landings(&self, kind: StepKind, key: &str, on: Subject, effect: Option<Effect>) -> Vec<Body> {
        let landed = self.ledger.borrow_mut().meet(kind, key);
        landed.into_iter().map(|fault| Body::FaultLanded { fault, fault_kind: kind, on: on.clone(), effect }).collect()
    }

    /// A message from `from` to `to` of a call `caller` made met the network's faults on that link.
    pub(crate) fn link_met(&self, caller: HostId, from: HostId, to: HostId, meeting: LinkMeeting) {
        if self.ledger.borrow().open.is_empty() {
            return;
        }
        let (a, b) = (self.names[from].to_string(), self.names[to].to_string());
        let on = Subject::Host(self.names[caller].to_string());
        match meeting {
            LinkMeeting::Blocked => {
                self.fault_met(StepKind::Partition, &link_key(&a, &b), on.clone(), None);
                self.fault_met(StepKind::PartitionOneway, &format!("{a}>{b}"), on, None);
            }
            LinkMeeting::Lost => self.fault_met(StepKind::LinkLoss, &link_key(&a, &b), on, None),
            LinkMeeting::Held => self.fault_met(StepKind::Hold, &link_key(&a, &b), on, None),
            LinkMeeting::Slowed => self.fault_met(StepKind::LinkLatency, &link_key(&a, &b), on, None),
        }
    }

    /// The faults that land on what a recorded event shows (the symptom rules). The core calls it for every event
    /// it records; the faults that land here are the ones whose meeting is itself a traced event.
    pub(crate) fn faults_see(&self, body: &Body) -> Vec<Body> {
        if self.ledger.borrow().open.is_empty() {
            return Vec::new();
        }
        let met = |kind: StepKind, key: &str, on: Subject, effect: Option<Effect>| self.landings(kind, key, on, effect);
        match body {
            Body::SiteMacsDrifted { machine, .. } => {
                met(StepKind::MacDrift, machine, Subject::Machine(machine.clone()), None)
            }
            Body::SitePower { machine, state: fakes::maas::PowerState::On, .. } => {
                let on_boot = self.ledger.borrow().open_on(machine, &[Landing::AtBoot]);
                let on = Subject::Machine(machine.clone());
                on_boot.into_iter().flat_map(|kind| met(kind, machine, on.clone(), None)).collect()
            }
            Body::SiteDnsQuery { client, answer: fakes::maas::DnsAnswer::ServFail, .. } => {
                met(StepKind::ResolverServfail, "", Subject::Machine(client.clone()), None)
            }
            Body::SiteStalled { machine, stall: fakes::maas::Stall::ScriptHung } => {
                met(StepKind::ScriptHang, machine, Subject::Machine(machine.clone()), None)
            }
            Body::SiteSsh { machine, error: Some(_), .. } => {
                met(StepKind::SshUnreachable, machine, Subject::Machine(machine.clone()), None)
            }
            Body::SiteRequest { workflow, op, status, .. } => {
                let on = Subject::Machine(crate::model::ids::machine_of_workflow(workflow).to_owned());
                match status {
                    Some(503) => met(StepKind::MaasUnavailable, "", on, None),
                    Some(401) => met(StepKind::MaasKeyRevoked, "", on, None),
                    Some(400) if op == "deploy" => met(StepKind::PreseedFailure, "", on, None),
                    None => met(StepKind::MaasUnreachable, "", on, None),
                    _ => Vec::new(),
                }
            }
            Body::InventoryRequest { node, error: Some(_), .. } => {
                met(StepKind::InventoryUnavailable, "", Subject::Machine(node.clone()), None)
            }
            Body::HubCredentialRejected { expired: true, .. } => {
                met(StepKind::CredentialExpiry, "", Subject::Rollout, None)
            }
            Body::HubHeartbeatRefused { agent, .. } => {
                met(StepKind::PrincipalRevoked, agent, Subject::Node(agent.clone()), None)
            }
            Body::HubDispatchRefused { agent, .. } => {
                met(StepKind::OperatorHold, agent, Subject::Node(agent.clone()), None)
            }
            Body::HubTombstoned { agent, .. } => {
                met(StepKind::TtlExpiry, agent, Subject::Node(agent.clone()), Some(Effect::Stopped))
            }
            Body::HubOffline { agent, .. } | Body::HubExpiryDeferred { agent, .. } => {
                met(StepKind::TtlExpiry, agent, Subject::Node(agent.clone()), Some(Effect::Signalled))
            }
            Body::Rollout { event, .. } => match event {
                RolloutBody::LockWaiting { holder, .. } if holder == crate::world::hub::STALE_LOCK_HOLDER => {
                    met(StepKind::StaleLock, "", Subject::Rollout, Some(Effect::Stalled))
                }
                RolloutBody::JournalMigrated { .. } => {
                    met(StepKind::OldJournal, "", Subject::Rollout, Some(Effect::Repaired))
                }
                RolloutBody::JournalQuarantined { .. } => {
                    met(StepKind::OldJournal, "", Subject::Rollout, Some(Effect::Stopped))
                }
                RolloutBody::SkippedHeld { node, owners }
                    if owners.iter().any(|owner| owner == crate::world::hub::OPERATOR_HOLD_OWNER) =>
                {
                    met(StepKind::OperatorHold, node, Subject::Node(node.clone()), Some(Effect::Stopped))
                }
                _ => Vec::new(),
            },
            Body::Onboarding { workflow, event } | Body::Decommission { workflow, event } => {
                let failed = matches!(
                    event,
                    OnboardingBody::StageFailed { .. }
                        | OnboardingBody::Stalled { .. }
                        | OnboardingBody::TimedOut { .. }
                );
                if !failed {
                    return Vec::new();
                }
                let machine = crate::model::ids::machine_of_workflow(workflow);
                let on = Subject::Machine(machine.to_owned());
                let stalled = matches!(event, OnboardingBody::Stalled { .. }).then_some(Effect::Stalled);
                let on_machine = self.ledger.borrow().open_on(machine, &[Landing::AtBoot, Landing::OnItsMachine]);
                let on_site = self.ledger.borrow().open_on("", &[Landing::OnAnyWorkflow]);
                let mut landed = Vec::new();
                for kind in on_machine {
                    landed.extend(met(kind, machine, on.clone(), stalled));
                }
                for kind in on_site {
                    landed.extend(met(kind, "", on.clone(), stalled));
                }
                landed
            }
            Body::InstancePassFailed { .. } => {
                let mut landed = met(StepKind::ProviderFault, "", Subject::Instances, None);
                landed.extend(met(StepKind::ProviderAnswerLost, "", Subject::Instances, None));
                landed
            }
            Body::InstanceStuck { .. } => met(StepKind::ProviderFault, "", Subject::Instances, None),
            Body::InstanceSyncSignal { .. } => met(StepKind::ProviderSyncStops, "", Subject::Instances, None),
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ssh(target: &str, count: u32) -> Step {
        Step::SshTimeout { target: target.into(), count }
    }

    #[test]
    fn a_counted_fault_is_used_up_oldest_first_and_lands_at_its_first_meeting() {
        let mut ledger = Ledger::default();
        let (first, second) = (ledger.inject(&ssh("node-01", 2)), ledger.inject(&ssh("node-01", 1)));
        assert_eq!(ledger.meet(StepKind::SshTimeout, "node-02"), Vec::<u64>::new(), "another node's call");
        assert_eq!(ledger.meet(StepKind::SshTimeout, "node-01"), [first]);
        assert_eq!(ledger.meet(StepKind::SshTimeout, "node-01"), Vec::<u64>::new(), "the first's second timeout");
        assert_eq!(ledger.meet(StepKind::SshTimeout, "node-01"), [second], "then the second's");
        assert_eq!(ledger.meet(StepKind::SshTimeout, "node-01"), Vec::<u64>::new(), "both used up");
        assert!(ledger.open.is_empty());
    }

    #[test]
    fn state_faults_land_together_once_and_a_heal_closes_an_unlanded_one() {
        let mut ledger = Ledger::default();
        let drift = |shape| Step::MarkerDrift { target: "node-03".into(), shape };
        let a = ledger.inject(&drift(fakes::worker::Drift::EnvAbsent));
        let b = ledger.inject(&drift(fakes::worker::Drift::StaleMarker));
        assert_eq!(ledger.meet(StepKind::MarkerDrift, "node-03"), [a, b]);
        assert_eq!(ledger.meet(StepKind::MarkerDrift, "node-03"), Vec::<u64>::new());
        let partition = ledger.inject(&Step::Partition { a: "node-01".into(), b: "hub".into() });
        ledger.heal(&Step::Repair { a: "hub".into(), b: "node-01".into() });
        assert_eq!(ledger.meet(StepKind::Partition, &link_key("node-01", "hub")), Vec::<u64>::new(), "healed first");
        assert!(!ledger.open.iter().any(|open| open.id == partition));
        // A one-way partition is its direction's only.
        let oneway = ledger.inject(&Step::PartitionOneway { from: "node-02".into(), to: "hub".into() });
        assert_eq!(ledger.meet(StepKind::PartitionOneway, "hub>node-02"), Vec::<u64>::new());
        assert_eq!(ledger.meet(StepKind::PartitionOneway, "node-02>hub"), [oneway]);
    }

    #[test]
    fn a_replaced_death_trap_never_lands_and_the_one_that_replaced_it_does() {
        use crate::model::faults::{DeathPoint, DeathSubsystem};
        let mut ledger = Ledger::default();
        let death = |subsystem, point| Step::ControllerDeath { point, subsystem, restart_after_ms: None };
        // As `World::ledger_inject` does: what a step heals is closed before the step opens its own fault.
        let mut arm = |step: Step| {
            ledger.heal(&step);
            ledger.inject(&step)
        };
        let _replaced = arm(death(DeathSubsystem::Onboarding, DeathPoint::BeforeCompletion));
        let armed = arm(death(DeathSubsystem::Decommission, DeathPoint::AfterIntent));
        assert_eq!(ledger.meet(StepKind::ControllerDeath, ""), [armed], "only the trap that fired lands");
    }
}

#[cfg(test)]
mod landing_tests {
    use super::*;
    use crate::model::faults::Counted;

    /// Every kind that counts as a fault has a way to land, and no driver action or heal has one.
    #[test]
    fn every_fault_kind_lands_somewhere_and_nothing_else_does() {
        for &kind in StepKind::ALL {
            let fault = matches!(kind.counted(), Counted::Always | Counted::When);
            assert_eq!(landing(kind) != Landing::NotAFault, fault, "{}", kind.name());
        }
    }
}
