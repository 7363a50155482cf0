//! Campaigns: randomized runs of one fleet under a mix of faults. Run `i`'s seed is derived from the campaign seed and
//! `i` alone; its fault plan is materialised from that seed's fault-plan stream; so any run can be replayed alone,
//! on any machine, in any order, with any number of threads.

use std::collections::BTreeSet;
use std::path::Path;

use rand::Rng;
use rand::seq::IndexedRandom;
use rand_chacha::ChaCha8Rng;
use reports::PropertyKind;
use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::model::faults::{
    BmcFaultKind, DeathPoint, DeathSubsystem, HardwarePart, InstanceOp, Phase, PhaseStep, RolloutPoint,
    RolloutStepTrigger, StageStep, Step, TimedStep,
};
use crate::model::seed::{Consumer, SeedTree};
use crate::model::spec::{
    self, CONTROLLER, EngineFile, Expectations, FleetFile, HUB, HubFile, NetworkFile, RangeMs, RunSpec, Source,
    SpecError,
};
use fakes::ssh::Storage;

mod instances;
/// A resolved campaign file.
#[derive(Debug, Clone, Serialize)]
pub struct Campaign {
    #[serde(skip)]
    pub source: String,
    #[serde(skip)]
    pub description: String,
    pub seed: u64,
    pub runs: u64,
    /// Every run's configuration before its fault plan is drawn (no steps, no expectations).
    pub base: RunSpec,
    pub window_start_ms: u64,
    pub faults: FaultMix,
    pub oracles: CampaignOracles,
    /// When set, every run starts this rollout at this time.
    pub rollout: Option<RolloutStart>,
    /// When set, each run decommissions a random subset of the site's machines (absent from the hash when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decommission: Option<DecommissionPlan>,
}

/// `[decommission]`: each machine of the site is decommissioned with probability `per_mille`, at a time drawn from
/// `at_ms` (an operator's request, once its onboarding had time to finish).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecommissionPlan {
    pub per_mille: u32,
    /// When the requests come: in virtual ms of the run, or with `after`, after the end of that phase.
    pub at_ms: RangeMs,
    /// `after = "rollout"`: the requests come `at_ms` after the rollout ended (absent from the hash when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<Phase>,
}

/// A rollout every run of the campaign starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RolloutStart {
    /// When the operator asks for it: in virtual ms of the run, or with `after`, after the end of that phase.
    pub at_ms: u64,
    pub revision: String,
    /// `after = "onboarding"`: the request comes `at_ms` after every onboarding rests, and the rollout's faults are
    /// aimed at the rollout from there, each as in a campaign whose rollout starts at `at_ms` (absent from the hash
    /// when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<Phase>,
    /// With `after`: how long after the request the rollout's faults may land (SSH timeouts within its first third),
    /// in ms (default 90 min).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_ms: Option<u64>,
}

/// The default of `rollout.window_ms`.
pub const ROLLOUT_WINDOW_MS_DEFAULT: u64 = 5_400_000;

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SshLossRate {
    pub per_mille: u32,
    #[serde(default = "one")]
    pub count_max: u32,
    /// The most consecutive connection timeouts one burst causes.
    pub timeouts_max: u32,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct CampaignOracles {
    pub always: Vec<String>,
    pub eventually: Vec<String>,
    pub sometimes: Vec<String>,
}

/// How often a fault kind bites a run, how many times, and for how long.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rate {
    pub per_mille: u32,
    #[serde(default = "one")]
    pub count_max: u32,
    pub duration_ms: Option<RangeMs>,
}

fn one() -> u32 {
    1
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LossRate {
    pub per_mille: u32,
    #[serde(default = "one")]
    pub count_max: u32,
    pub duration_ms: Option<RangeMs>,
    /// The largest request and response loss drawn, per mille.
    pub loss_per_mille_max: u32,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LatencyRate {
    pub per_mille: u32,
    #[serde(default = "one")]
    pub count_max: u32,
    pub duration_ms: Option<RangeMs>,
    /// The largest one-way latency drawn, in ms.
    pub latency_ms_max: u64,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkewRate {
    pub per_mille: u32,
    #[serde(default = "one")]
    pub count_max: u32,
    pub duration_ms: Option<RangeMs>,
    /// Skews are drawn from `-skew_ms_max..=skew_ms_max`.
    pub skew_ms_max: u64,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TtlRate {
    pub per_mille: u32,
    /// The most epoch members stopped past the TTL.
    #[serde(default = "one")]
    pub members_max: u32,
}

/// The campaign fault mix: a closed set of kinds, each optional. Targets are drawn from the fleet.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultMix {
    /// A node's link to the hub partitioned both ways, then repaired.
    pub partition: Option<Rate>,
    /// A node's link to the hub partitioned one way (node → hub, or hub → node), then repaired.
    pub partition_oneway: Option<Rate>,
    /// Messages between a node and the hub held, then released.
    pub hold: Option<Rate>,
    /// Loss on a node's link to the hub, then healed.
    pub link_loss: Option<LossRate>,
    /// Latency on a node's link to the hub, then back to the default.
    pub latency: Option<LatencyRate>,
    /// A node crashes and restarts.
    pub node_crash: Option<Rate>,
    /// The hub crashes and restarts.
    pub hub_crash: Option<Rate>,
    /// The controller dies and restarts (it resumes from its journal).
    pub controller_crash: Option<Rate>,
    /// The controller–hub link is partitioned, then repaired.
    pub observer_partition: Option<Rate>,
    /// A node's agent service is stopped, then started.
    pub agent_stop: Option<Rate>,
    /// The RCCA's TTL case: a deployment epoch opens, its members and one unrelated fungible agent stop for longer
    /// than the agent TTL, then start again and the epoch closes.
    pub ttl_expiry: Option<TtlRate>,
    /// A node's or the controller's clock is stepped, then set right.
    pub clock_skew: Option<SkewRate>,
    /// Before the run, a worker's identity takes one of the RCCA's drift shapes (drawn from all of them).
    pub marker_drift: Option<Rate>,
    /// A burst of SSH connection timeouts to one worker (transient SSH loss).
    pub ssh_timeout: Option<SshLossRate>,
    /// The controller dies at a named point of the rollout protocol (drawn), and restarts `duration_ms` later.
    pub controller_death: Option<Rate>,
    /// Before the run, a worker's storage stops returning writes (or is full, drawn); healed at the window's end.
    pub storage_fault: Option<Rate>,
    /// Before the run, one capsule of the rollout's revision is missing from the artifact store; restored later.
    pub artifact_missing: Option<Rate>,
    /// While the rollout runs (within 5 minutes of its start), the hub starts publishing another route bundle.
    pub route_swap: Option<Rate>,
    /// While the rollout runs (within 10 minutes of its start), the controller's hub credential expires; the
    /// rotation state machine renews it `duration_ms` later (default 5 to 60 s).
    pub credential_expiry: Option<Rate>,
    /// A controller that has since died holds the deployment lock for `duration_ms` (default 1 to 10 min), taken
    /// between one minute before the rollout and 30 minutes into it (stale authority).
    pub stale_lock: Option<Rate>,
    /// Before the run, an operator holds `1..=count_max` workers for maintenance; no rollout may release them.
    pub operator_hold: Option<Rate>,
    /// Inside the window, an operator asks for `1..=count_max` agent-credential rotations, each of a node drawn
    /// uniformly (a driver action, not a fault). Drawn after every other kind, so it changes no older plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential_rotation: Option<Rate>,
    // The MAAS site's faults (campaigns with `[onboarding]`). Each bites `1..=count_max` machines drawn from the
    // site; those set before the machines boot are applied at 0, the others inside the fault window.
    /// Before the run, a machine's MACs are set to drift at its next power-on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac_drift: Option<Rate>,
    /// The rack resolver SERVFAILs every query for `duration_ms` (default 1 to 10 min) inside the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolver_servfail: Option<Rate>,
    /// Before the run, a commissioning script of a machine is set to hang.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script_hang: Option<Rate>,
    /// Before the run, a machine's cloud-init is set to fail at its datasource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datasource_failure: Option<Rate>,
    /// Before the run, a machine loses its BOSS disk or a RoCE NIC (drawn).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hardware_missing: Option<Rate>,
    /// Before the run, a machine's agent is set to enrol late, by `duration_ms` (default 1 to 20 min).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_enrol_delay: Option<Rate>,
    /// Before the run, a machine's hardware-sync service is set never to report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hw_sync_failure: Option<Rate>,
    /// Inside the window, the region answers its next 1 to 5 requests 503 with `Retry-After` 1 to 30 s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maas_unavailable: Option<Rate>,
    /// Inside the window, a machine's BMC becomes unreachable, ignores commands or changes its password (drawn),
    /// and heals `duration_ms` later (default 30 s to 10 min).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bmc_fault: Option<Rate>,
    /// Inside the window, an operator deletes a machine's MAAS record out of band.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_deleted: Option<Rate>,
    /// Before the run, a machine's hardware-sync service is set to report 0 to 2 times after its seed, then stop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hw_sync_stops: Option<Rate>,
    /// Before the run, a machine's sshd is set to leave its next 1 to 3 connections unanswered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh_unreachable: Option<Rate>,
    /// Inside the window, the region's next 1 or 2 deploys fail to render their preseed (400).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preseed_failure: Option<Rate>,
    /// Inside the window, an operator disconnects a machine's PXE interface in MAAS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface_disconnected: Option<Rate>,
    // Decommission's faults (campaigns with `[decommission]`), aimed at machines drawn among those decommissioned.
    /// Before the run, a machine's allocations are set to survive its next 1 to 3 forced releases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocation_stuck: Option<Rate>,
    /// Before the run, a machine's next 1 or 2 storage cleanups are set to leave residue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleanup_residue: Option<Rate>,
    /// Before the run, the next 1 or 2 uninstalls of a machine's agent are set to fail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uninstall_failure: Option<Rate>,
    /// A machine's agent takes no task from its decommission request on, for `duration_ms` (default 1 to 20 min).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_unreachable: Option<Rate>,
    /// Among the decommission requests, the inventory answers its next 1 to 5 requests 503.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inventory_unavailable: Option<Rate>,
    /// Before the run, the region's next 1 or 2 disk wipes are set to fail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub erase_failure: Option<Rate>,
    /// The controller dies at a named point of a decommission (drawn), armed at a decommission request, and boots
    /// again `duration_ms` after it died (default 10 to 20 min).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decommission_controller_death: Option<Rate>,
    /// An on-call operator tries a recovery action (resume, retry_stage, rerun or adopt_observed_state, drawn) on a
    /// machine's onboarding (inside the window) or decommission (30 to 90 min after its request); the engine
    /// authorizes or refuses it, and audits it either way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator_action: Option<Rate>,
    /// The controller dies at a named point of the onboarding workflow (drawn), armed within 5 minutes of the
    /// onboarding's start, and restarts `duration_ms` after it was armed (default 30 to 45 min).
    /// Off unless configured, so that older onboarding campaigns draw the plans they drew before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub onboarding_controller_death: Option<Rate>,
    /// Before the run, a machine's commissioning is set to be slow but progressing: one script result every
    /// `duration_ms` (drawn; default 1 to 3 min, inside the engine's five-minute stall window). Drawn after every
    /// other site kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commissioning_slow: Option<Rate>,
    // The instance lifecycle's faults (campaigns with `[instances]`), drawn inside the window.
    /// The provider's next creates, boots or destroys fail (quota refusal, hung create, boot failure, module pull
    /// failure or stuck teardown, drawn).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_fault: Option<Rate>,
    /// The provider's next 1 or 2 create answers are lost on the way back (the VMs were created).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_answer_lost: Option<Rate>,
    /// The region's listing stops answering for `duration_ms` (default 1 to 4 hours): the cloud sync fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_sync_stops: Option<Rate>,
    /// The controller dies at a named point of the instance controller (drawn) and boots again `duration_ms` after
    /// it died (default 1 to 15 min).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_controller_death: Option<Rate>,
    /// An operator's or a consumer's request to the instance controller (cordon, uncordon, drain, terminate, hold,
    /// lift, stop, start, reboot, acquire, release, approve or deny, drawn) on a plain node or a pool member.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_operations: Option<Rate>,
}

impl FaultMix {
    /// Decommission's kinds, with whether each is configured.
    fn decommission_kinds(&self) -> [(DecommissionKnob, Option<Rate>); 8] {
        [
            (DecommissionKnob::AllocationStuck, self.allocation_stuck),
            (DecommissionKnob::CleanupResidue, self.cleanup_residue),
            (DecommissionKnob::UninstallFailure, self.uninstall_failure),
            (DecommissionKnob::AgentUnreachable, self.agent_unreachable),
            (DecommissionKnob::InventoryUnavailable, self.inventory_unavailable),
            (DecommissionKnob::EraseFailure, self.erase_failure),
            (DecommissionKnob::DecommissionControllerDeath, self.decommission_controller_death),
            (DecommissionKnob::OperatorAction, self.operator_action),
        ]
    }

    /// The site's kinds, with whether each is configured.
    fn site_kinds(&self) -> [(SiteKnob, Option<Rate>); 16] {
        [
            (SiteKnob::MacDrift, self.mac_drift),
            (SiteKnob::ResolverServfail, self.resolver_servfail),
            (SiteKnob::ScriptHang, self.script_hang),
            (SiteKnob::DatasourceFailure, self.datasource_failure),
            (SiteKnob::HardwareMissing, self.hardware_missing),
            (SiteKnob::AgentEnrolDelay, self.agent_enrol_delay),
            (SiteKnob::HwSyncFailure, self.hw_sync_failure),
            (SiteKnob::MaasUnavailable, self.maas_unavailable),
            (SiteKnob::BmcFault, self.bmc_fault),
            (SiteKnob::MachineDeleted, self.machine_deleted),
            (SiteKnob::HwSyncStops, self.hw_sync_stops),
            (SiteKnob::SshUnreachable, self.ssh_unreachable),
            (SiteKnob::PreseedFailure, self.preseed_failure),
            (SiteKnob::InterfaceDisconnected, self.interface_disconnected),
            // Last: drawn after every older kind, so adding it changed no older plan.
            (SiteKnob::OnboardingControllerDeath, self.onboarding_controller_death),
            // After it, for the same reason.
            (SiteKnob::CommissioningSlow, self.commissioning_slow),
        ]
    }
}

/// The MAAS site's knobs of the fault mix (campaigns with `[onboarding]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SiteKnob {
    MacDrift,
    ResolverServfail,
    ScriptHang,
    DatasourceFailure,
    HardwareMissing,
    AgentEnrolDelay,
    HwSyncFailure,
    MaasUnavailable,
    BmcFault,
    MachineDeleted,
    HwSyncStops,
    SshUnreachable,
    PreseedFailure,
    InterfaceDisconnected,
    OnboardingControllerDeath,
    CommissioningSlow,
}

impl SiteKnob {
    /// The knob's `[faults]` key (a field of [`FaultMix`]).
    fn name(self) -> &'static str {
        match self {
            SiteKnob::MacDrift => "mac_drift",
            SiteKnob::ResolverServfail => "resolver_servfail",
            SiteKnob::ScriptHang => "script_hang",
            SiteKnob::DatasourceFailure => "datasource_failure",
            SiteKnob::HardwareMissing => "hardware_missing",
            SiteKnob::AgentEnrolDelay => "agent_enrol_delay",
            SiteKnob::HwSyncFailure => "hw_sync_failure",
            SiteKnob::MaasUnavailable => "maas_unavailable",
            SiteKnob::BmcFault => "bmc_fault",
            SiteKnob::MachineDeleted => "machine_deleted",
            SiteKnob::HwSyncStops => "hw_sync_stops",
            SiteKnob::SshUnreachable => "ssh_unreachable",
            SiteKnob::PreseedFailure => "preseed_failure",
            SiteKnob::InterfaceDisconnected => "interface_disconnected",
            SiteKnob::OnboardingControllerDeath => "onboarding_controller_death",
            SiteKnob::CommissioningSlow => "commissioning_slow",
        }
    }
}

/// Decommission's knobs of the fault mix (campaigns with `[decommission]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DecommissionKnob {
    AllocationStuck,
    CleanupResidue,
    UninstallFailure,
    AgentUnreachable,
    InventoryUnavailable,
    EraseFailure,
    DecommissionControllerDeath,
    OperatorAction,
}

impl DecommissionKnob {
    /// The knob's `[faults]` key (a field of [`FaultMix`]).
    fn name(self) -> &'static str {
        match self {
            DecommissionKnob::AllocationStuck => "allocation_stuck",
            DecommissionKnob::CleanupResidue => "cleanup_residue",
            DecommissionKnob::UninstallFailure => "uninstall_failure",
            DecommissionKnob::AgentUnreachable => "agent_unreachable",
            DecommissionKnob::InventoryUnavailable => "inventory_unavailable",
            DecommissionKnob::EraseFailure => "erase_failure",
            DecommissionKnob::DecommissionControllerDeath => "decommission_controller_death",
            DecommissionKnob::OperatorAction => "operator_action",
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CampaignFile {
    schema_version: Spanned<u32>,
    description: String,
    seed: u64,
    runs: Spanned<u64>,
    duration_ms: Spanned<u64>,
    liveness_budget_ms: Option<u64>,
    #[serde(default)]
    run_to_duration: bool,
    window_start_ms: Option<u64>,
    fleet: FleetFile,
    #[serde(default)]
    engine: EngineFile,
    #[serde(default)]
    hub: HubFile,
    #[serde(default)]
    network: NetworkFile,
    faults: Option<Spanned<FaultMix>>,
    #[serde(default)]
    oracles: OraclesFile,
    rollout: Option<Spanned<RolloutStart>>,
    onboarding: Option<Spanned<spec::OnboardingFile>>,
    decommission: Option<Spanned<DecommissionPlan>>,
    instances: Option<Spanned<spec::instances::InstancesFile>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct OraclesFile {
    #[serde(default)]
    always: Vec<Spanned<String>>,
    #[serde(default)]
    eventually: Vec<Spanned<String>>,
    #[serde(default)]
    sometimes: Vec<Spanned<String>>,
}

pub fn load_campaign(path: &Path) -> Result<Campaign, SpecError> {
    let text = spec::read(path)?;
    parse_campaign(&path.display().to_string(), &text)
}

pub fn parse_campaign(path: &str, text: &str) -> Result<Campaign, SpecError> {
    let source = Source { path, text };
    let file: CampaignFile = source.parse()?;
    spec::check_schema_version(&source, &file.schema_version)?;
    let runs = *file.runs.get_ref();
    if runs == 0 {
        return Err(source.error_at(Some(file.runs.span()), "runs: must be at least 1"));
    }
    let duration_ms = *file.duration_ms.get_ref();
    let liveness_budget_ms = file.liveness_budget_ms.unwrap_or(spec::DEFAULT_LIVENESS_BUDGET_MS);
    let window_start_ms = file.window_start_ms.unwrap_or(60_000);
    if window_start_ms + liveness_budget_ms >= duration_ms {
        return Err(source.error_at(
            Some(file.duration_ms.span()),
            format!(
                "duration_ms: faults are drawn between window_start_ms ({window_start_ms}) and duration_ms minus liveness_budget_ms ({liveness_budget_ms}); that window is empty"
            ),
        ));
    }
    let fleet = spec::resolve_fleet(&source, &file.fleet)?;
    let onboarding = spec::resolve_onboarding(&source, file.onboarding.as_ref(), &fleet, duration_ms)?;
    let base = RunSpec {
        source: path.to_owned(),
        description: file.description.clone(),
        duration_ms,
        liveness_budget_ms,
        run_to_duration: file.run_to_duration,
        fleet,
        engine: spec::resolve_engine(&source, &file.engine)?,
        hub: spec::resolve_hub(&source, &file.hub)?,
        network: spec::resolve_network(&source, &file.network)?,
        steps: Vec::new(),
        stage_steps: Vec::new(),
        phase_steps: Vec::new(),
        rollout_steps: Vec::new(),
        expect: Expectations::default(),
        onboarding,
        instances: spec::instances::resolve_instances(&source, file.instances.as_ref(), file.onboarding.is_some())?,
    };
    let (faults, faults_span) = match &file.faults {
        Some(faults) => (faults.get_ref().clone(), faults.span()),
        None => (FaultMix::default(), 0..0),
    };
    validate_mix(&source, faults_span.clone(), &faults, &base, window_start_ms)?;
    let mut oracles = CampaignOracles::default();
    for (key, names, property, out) in [
        ("oracles.always", &file.oracles.always, PropertyKind::Always, &mut oracles.always),
        ("oracles.eventually", &file.oracles.eventually, PropertyKind::Eventually, &mut oracles.eventually),
        ("oracles.sometimes", &file.oracles.sometimes, PropertyKind::Sometimes, &mut oracles.sometimes),
    ] {
        for name in names {
            let info = spec::known_oracle(&source, key, name)?;
            if info.property != property {
                return Err(source.error_at(
                    Some(name.span()),
                    format!("{key}: \"{}\" is {}-property", info.name, article(info.property)),
                ));
            }
            out.push(info.name.to_owned());
        }
    }
    let rollout = match &file.rollout {
        None => None,
        Some(rollout) => {
            let start = rollout.get_ref();
            match start.after {
                None if start.at_ms < window_start_ms || start.at_ms >= duration_ms - liveness_budget_ms => {
                    return Err(
                        source.error_at(Some(rollout.span()), "rollout.at_ms: must fall inside the fault window")
                    );
                }
                None if start.window_ms.is_some() => {
                    return Err(source.error_at(Some(rollout.span()), "rollout.window_ms: goes with after"));
                }
                None => {}
                Some(Phase::Onboarding) => {
                    if base.onboarding.is_none() {
                        return Err(source.error_at(
                            Some(rollout.span()),
                            "rollout.after: \"onboarding\" needs an [onboarding] table",
                        ));
                    }
                    let window_ms = start.window_ms.unwrap_or(ROLLOUT_WINDOW_MS_DEFAULT);
                    if window_ms == 0 || start.at_ms.saturating_add(window_ms) >= duration_ms {
                        return Err(source.error_at(
                            Some(rollout.span()),
                            format!(
                                "rollout: at_ms plus window_ms ({} ms) must be more than 0 and shorter than the run \
                                 ({duration_ms} ms)",
                                start.at_ms.saturating_add(window_ms)
                            ),
                        ));
                    }
                }
                Some(other) => {
                    return Err(source.error_at(
                        Some(rollout.span()),
                        format!("rollout.after: a rollout can wait for \"onboarding\", not \"{}\"", other.as_str()),
                    ));
                }
            }
            if start.revision.is_empty() || start.revision == spec::PRIOR_REVISION {
                return Err(source.error_at(
                    Some(rollout.span()),
                    format!("rollout.revision: must name a new revision (the fleet runs {})", spec::PRIOR_REVISION),
                ));
            }
            Some(start.clone())
        }
    };
    let needs_rollout = [
        ("controller_death", faults.controller_death.is_some()),
        ("artifact_missing", faults.artifact_missing.is_some()),
        ("credential_expiry", faults.credential_expiry.is_some()),
        ("stale_lock", faults.stale_lock.is_some()),
    ];
    for (kind, present) in needs_rollout {
        if present && rollout.is_none() {
            return Err(
                source.error_at(Some(faults_span.clone()), format!("faults.{kind}: needs a `rollout` for the runs"))
            );
        }
    }
    let decommission = match &file.decommission {
        None => None,
        Some(plan) => {
            let value = *plan.get_ref();
            if base.onboarding.is_none() {
                return Err(source.error_at(Some(plan.span()), "decommission: needs an [onboarding] table"));
            }
            if value.per_mille > 1000 {
                return Err(source.error_at(
                    Some(plan.span()),
                    format!("decommission.per_mille: a per-mille rate is 0 to 1000, not {}", value.per_mille),
                ));
            }
            if value.at_ms.min > value.at_ms.max || value.at_ms.max >= duration_ms - liveness_budget_ms {
                return Err(source.error_at(
                    Some(plan.span()),
                    "decommission.at_ms: needs min <= max, before the liveness budget starts",
                ));
            }
            match value.after {
                None => {}
                Some(Phase::Rollout) if rollout.is_some() => {}
                Some(Phase::Rollout) => {
                    return Err(source.error_at(Some(plan.span()), "decommission.after: \"rollout\" needs a `rollout`"));
                }
                Some(other) => {
                    return Err(source.error_at(
                        Some(plan.span()),
                        format!(
                            "decommission.after: decommissions can wait for \"rollout\", not \"{}\"",
                            other.as_str()
                        ),
                    ));
                }
            }
            Some(value)
        }
    };
    for (knob, rate) in faults.decommission_kinds() {
        let kind = knob.name();
        if rate.is_some() && decommission.is_none() {
            return Err(source.error_at(
                Some(faults_span.clone()),
                format!("faults.{kind}: acts on decommissions, which need a [decommission] table"),
            ));
        }
        if let Some(rate) = rate
            && (rate.per_mille > 1000 || rate.count_max == 0)
        {
            return Err(source.error_at(
                Some(faults_span.clone()),
                format!("faults.{kind}: per_mille is 0 to 1000 and count_max at least 1"),
            ));
        }
    }
    let campaign = Campaign {
        source: path.to_owned(),
        description: file.description,
        seed: file.seed,
        runs,
        base,
        window_start_ms,
        faults,
        oracles,
        rollout,
        decommission,
    };
    // Each run's work as a whole (crate::model::work): its entity-hours, and the most faults its mix can draw.
    crate::model::work::check_entity_hours(&campaign.base)
        .map_err(|reason| source.error_at(Some(file.duration_ms.span()), format!("duration_ms: {reason}")))?;
    crate::model::work::check_faults(campaign.faults_max()).map_err(|reason| {
        let reason = reason.replace("the steps add up to", "the fault mix can draw up to");
        source.error_at(Some(faults_span.clone()), format!("faults: {reason}"))
    })?;
    Ok(campaign)
}

fn article(property: PropertyKind) -> &'static str {
    match property {
        PropertyKind::Always => "an always",
        PropertyKind::Eventually => "an eventually",
        PropertyKind::Sometimes => "a sometimes",
    }
}

fn validate_mix(
    source: &Source,
    span: std::ops::Range<usize>,
    mix: &FaultMix,
    base: &RunSpec,
    window_start_ms: u64,
) -> Result<(), SpecError> {
    let error = |message: String| Err(source.error_at(Some(span.clone()), message));
    type Knobs = (u32, u32, Option<RangeMs>);
    let rates: [(&str, Option<Knobs>); 10] = [
        ("partition", mix.partition.map(|r| (r.per_mille, r.count_max, r.duration_ms))),
        ("partition_oneway", mix.partition_oneway.map(|r| (r.per_mille, r.count_max, r.duration_ms))),
        ("hold", mix.hold.map(|r| (r.per_mille, r.count_max, r.duration_ms))),
        ("link_loss", mix.link_loss.map(|r| (r.per_mille, r.count_max, r.duration_ms))),
        ("latency", mix.latency.map(|r| (r.per_mille, r.count_max, r.duration_ms))),
        ("node_crash", mix.node_crash.map(|r| (r.per_mille, r.count_max, r.duration_ms))),
        ("hub_crash", mix.hub_crash.map(|r| (r.per_mille, r.count_max, r.duration_ms))),
        ("controller_crash", mix.controller_crash.map(|r| (r.per_mille, r.count_max, r.duration_ms))),
        ("observer_partition", mix.observer_partition.map(|r| (r.per_mille, r.count_max, r.duration_ms))),
        ("agent_stop", mix.agent_stop.map(|r| (r.per_mille, r.count_max, r.duration_ms))),
    ];
    let window_end_ms = base.duration_ms - base.liveness_budget_ms;
    for (kind, rate) in
        rates.into_iter().chain([("clock_skew", mix.clock_skew.map(|r| (r.per_mille, r.count_max, r.duration_ms)))])
    {
        let Some((per_mille, count_max, duration)) = rate else { continue };
        if per_mille > 1000 {
            return error(format!("faults.{kind}.per_mille: a per-mille rate is 0 to 1000, not {per_mille}"));
        }
        if count_max == 0 {
            return error(format!("faults.{kind}.count_max: must be at least 1"));
        }
        if let Some(range) = duration {
            if range.min > range.max || range.min == 0 {
                return error(format!("faults.{kind}.duration_ms: needs 0 < min <= max"));
            }
            if range.max >= window_end_ms - window_start_ms {
                return error(format!("faults.{kind}.duration_ms: max {} does not fit the fault window", range.max));
            }
        }
    }
    for (kind, rate) in [
        ("marker_drift", mix.marker_drift),
        ("controller_death", mix.controller_death),
        ("storage_fault", mix.storage_fault),
        ("artifact_missing", mix.artifact_missing),
        ("route_swap", mix.route_swap),
        ("credential_expiry", mix.credential_expiry),
        ("stale_lock", mix.stale_lock),
        ("operator_hold", mix.operator_hold),
        ("credential_rotation", mix.credential_rotation),
    ] {
        let Some(rate) = rate else { continue };
        if rate.per_mille > 1000 || rate.count_max == 0 {
            return error(format!("faults.{kind}: per_mille is 0 to 1000 and count_max at least 1"));
        }
        if let Some(range) = rate.duration_ms {
            if range.min > range.max || range.max >= window_end_ms - window_start_ms {
                return error(format!("faults.{kind}.duration_ms: needs min <= max inside the fault window"));
            }
        }
    }
    for (knob, rate) in mix.instance_kinds() {
        let kind = knob.name();
        let Some(rate) = rate else { continue };
        if base.instances.is_none() {
            return error(format!("faults.{kind}: acts on the instance lifecycle, which needs an [instances] table"));
        }
        if rate.per_mille > 1000 || rate.count_max == 0 {
            return error(format!("faults.{kind}: per_mille is 0 to 1000 and count_max at least 1"));
        }
        if let Some(range) = rate.duration_ms {
            if range.min > range.max || range.min == 0 || range.max >= window_end_ms - window_start_ms {
                return error(format!("faults.{kind}.duration_ms: needs 0 < min <= max inside the fault window"));
            }
        }
    }
    for (knob, rate) in mix.site_kinds() {
        let kind = knob.name();
        let Some(rate) = rate else { continue };
        if base.onboarding.is_none() {
            return error(format!("faults.{kind}: acts on the MAAS site, which needs an [onboarding] table"));
        }
        if rate.per_mille > 1000 || rate.count_max == 0 {
            return error(format!("faults.{kind}: per_mille is 0 to 1000 and count_max at least 1"));
        }
        if let Some(range) = rate.duration_ms {
            if range.min > range.max || range.max >= window_end_ms - window_start_ms {
                return error(format!("faults.{kind}.duration_ms: needs min <= max inside the fault window"));
            }
            let interval_max = spec::COMMISSIONING_SLOW_INTERVAL_MAX_MS;
            if knob == SiteKnob::CommissioningSlow && (range.min == 0 || range.max >= interval_max) {
                return error(format!(
                    "faults.{kind}.duration_ms: the interval between script results needs 0 < min and max < {interval_max} (MAAS's 30-minute node_timeout)"
                ));
            }
        }
    }
    if let Some(loss) = mix.ssh_timeout {
        if loss.per_mille > 1000 || loss.count_max == 0 || loss.timeouts_max == 0 {
            return error("faults.ssh_timeout: per_mille is 0 to 1000, count_max and timeouts_max at least 1".into());
        }
    }
    if let Some(skew) = mix.clock_skew {
        if skew.skew_ms_max > 7 * 24 * 3_600_000 {
            return error(format!(
                "faults.clock_skew.skew_ms_max: at most one week (604800000 ms), not {}",
                skew.skew_ms_max
            ));
        }
    }
    if let Some(latency) = mix.latency {
        if latency.latency_ms_max > 3_600_000 {
            return error(format!(
                "faults.latency.latency_ms_max: at most one hour (3600000 ms), not {}",
                latency.latency_ms_max
            ));
        }
    }
    if let Some(loss) = mix.link_loss {
        if loss.loss_per_mille_max > 1000 {
            return error("faults.link_loss.loss_per_mille_max: a per-mille rate is 0 to 1000".into());
        }
    }
    if let Some(ttl) = mix.ttl_expiry {
        if ttl.per_mille > 1000 || ttl.members_max == 0 || ttl.members_max >= base.fleet.nodes {
            return error(
                "faults.ttl_expiry: per_mille is 0 to 1000 and members_max 1 to one less than the fleet".into(),
            );
        }
        let needed = ttl_stop_ms_max(base) + 2 * engine::sensor::SENSOR_PERIOD_MS;
        if needed >= window_end_ms - window_start_ms {
            return error(format!(
                "faults.ttl_expiry: needs a fault window of at least {needed} ms (agent TTL + sweep + 15 min + two sensor periods), the campaign has {}",
                window_end_ms - window_start_ms
            ));
        }
    }
    Ok(())
}

fn ttl_stop_ms_max(base: &RunSpec) -> u64 {
    base.hub.agent_ttl_ms + base.hub.sweep_interval_ms + 15 * 60_000
}

impl Campaign {
    /// The most faults (`crate::model::work::faults`) a run's plan can hold: every kind drawn at its `count_max`,
    /// each draw counted as two steps (a fault and its repair) weighing one plus its largest count (`timeouts_max`,
    /// or the five the fixed-size kinds draw at most) and its members (`members_max`, and the epoch's own steps);
    /// and a decommission of every machine, and the rollout.
    pub fn faults_max(&self) -> u64 {
        fn walk(value: &serde_json::Value) -> u64 {
            match value {
                serde_json::Value::Object(object) => {
                    match object.get("count_max").and_then(serde_json::Value::as_u64) {
                        Some(count_max) => {
                            let counts = object.get("timeouts_max").and_then(serde_json::Value::as_u64).unwrap_or(5);
                            let members = object.get("members_max").and_then(serde_json::Value::as_u64).unwrap_or(0);
                            2u64.saturating_mul(count_max)
                                .saturating_mul(1u64.saturating_add(counts))
                                .saturating_mul(2u64.saturating_add(members))
                        }
                        None => object.values().map(walk).fold(0, u64::saturating_add),
                    }
                }
                _ => 0,
            }
        }
        let mix = walk(&serde_json::to_value(&self.faults).expect("fault mixes serialise"));
        let machines = self.base.onboarding.as_ref().map_or(0, |onboarding| onboarding.machines.len() as u64);
        let decommissions = if self.decommission.is_some() { machines } else { 0 };
        mix.saturating_add(decommissions).saturating_add(u64::from(self.rollout.is_some()))
    }

    pub fn run_seed(&self, index: u64) -> u64 {
        SeedTree::new(self.seed).campaign_run_seed(index)
    }

    /// SHA-256 of the resolved campaign (without its path and description, which change no behaviour).
    pub fn config_hash(&self) -> String {
        let mut value = serde_json::to_value(self).expect("campaigns serialise");
        if let Some(base) = value.get_mut("base").and_then(serde_json::Value::as_object_mut) {
            base.remove("source");
            base.remove("description");
        }
        crate::model::digest::sha256_hex(value.to_string().as_bytes())
    }

    /// The configuration of run `index`: the base with a fault plan drawn from the run seed's fault-plan stream.
    pub fn run_spec(&self, index: u64) -> RunSpec {
        let seed = self.run_seed(index);
        let mut rng = SeedTree::new(seed).rng(Consumer::FaultPlan);
        let mut steps = Vec::new();
        let planner = Planner { base: &self.base, window_start_ms: self.window_start_ms };
        let mix = &self.faults;
        let node_hub = |rng: &mut ChaCha8Rng| (planner.random_node(rng), HUB.to_owned());
        if let Some(rate) = mix.partition {
            planner.draw(&mut rng, rate.per_mille, rate.count_max, rate.duration_ms, &mut steps, |rng| {
                let (a, b) = node_hub(rng);
                (Step::Partition { a: a.clone(), b: b.clone() }, Step::Repair { a, b })
            });
        }
        if let Some(rate) = mix.partition_oneway {
            planner.draw(&mut rng, rate.per_mille, rate.count_max, rate.duration_ms, &mut steps, |rng| {
                let (node, hub) = node_hub(rng);
                let (from, to) = if rng.random_bool(0.5) { (node, hub) } else { (hub, node) };
                (Step::PartitionOneway { from: from.clone(), to: to.clone() }, Step::RepairOneway { from, to })
            });
        }
        if let Some(rate) = mix.hold {
            planner.draw(&mut rng, rate.per_mille, rate.count_max, rate.duration_ms, &mut steps, |rng| {
                let (a, b) = node_hub(rng);
                (Step::Hold { a: a.clone(), b: b.clone() }, Step::Release { a, b })
            });
        }
        if let Some(rate) = mix.link_loss {
            planner.draw(&mut rng, rate.per_mille, rate.count_max, rate.duration_ms, &mut steps, |rng| {
                let (a, b) = node_hub(rng);
                let request_per_mille = rng.random_range(0..=rate.loss_per_mille_max);
                let response_per_mille = rng.random_range(0..=rate.loss_per_mille_max);
                (
                    Step::LinkLoss { a: a.clone(), b: b.clone(), request_per_mille, response_per_mille },
                    Step::LinkLoss { a, b, request_per_mille: 0, response_per_mille: 0 },
                )
            });
        }
        if let Some(rate) = mix.latency {
            let default = self.base.network;
            planner.draw(&mut rng, rate.per_mille, rate.count_max, rate.duration_ms, &mut steps, |rng| {
                let (a, b) = node_hub(rng);
                let max_ms = rng.random_range(default.latency_max_ms..=rate.latency_ms_max.max(default.latency_max_ms));
                (
                    Step::LinkLatency { a: a.clone(), b: b.clone(), min_ms: default.latency_min_ms, max_ms },
                    Step::LinkLatency { a, b, min_ms: default.latency_min_ms, max_ms: default.latency_max_ms },
                )
            });
        }
        for (rate, target) in
            [(mix.node_crash, None), (mix.hub_crash, Some(HUB)), (mix.controller_crash, Some(CONTROLLER))]
        {
            let Some(rate) = rate else { continue };
            planner.draw(&mut rng, rate.per_mille, rate.count_max, rate.duration_ms, &mut steps, |rng| {
                let target = target.map_or_else(|| planner.random_node(rng), str::to_owned);
                (Step::Crash { target: target.clone() }, Step::Restart { target })
            });
        }
        if let Some(rate) = mix.observer_partition {
            planner.draw(&mut rng, rate.per_mille, rate.count_max, rate.duration_ms, &mut steps, |_| {
                let (a, b) = (CONTROLLER.to_owned(), HUB.to_owned());
                (Step::Partition { a: a.clone(), b: b.clone() }, Step::Repair { a, b })
            });
        }
        if let Some(rate) = mix.agent_stop {
            planner.draw(&mut rng, rate.per_mille, rate.count_max, rate.duration_ms, &mut steps, |rng| {
                let target = planner.random_node(rng);
                (Step::AgentStop { target: target.clone() }, Step::AgentStart { target })
            });
        }
        let mut phase_steps = Vec::new();
        if let Some(rate) = mix.ttl_expiry {
            if rng.random_range(0..1000) < rate.per_mille {
                // After the rollout, when it waits for onboarding: the agents whose TTL expires are enrolled then,
                // and no lane is under way (the availability floor counts every stopped worker, whatever stopped
                // it: an expiry inside a lane that left the fleet at its floor would be the fault's dip, not the
                // rollout's).
                match self.relative_rollout() {
                    None => {
                        planner.ttl_expiry(&mut rng, rate, (self.window_start_ms, planner.window_end_ms()), &mut steps)
                    }
                    Some((rollout, _)) => {
                        let mut drawn = Vec::new();
                        let window_ms = rollout.window_ms.unwrap_or(ROLLOUT_WINDOW_MS_DEFAULT);
                        planner.ttl_expiry(&mut rng, rate, (0, window_ms), &mut drawn);
                        phase_steps.extend(after(Phase::Rollout, drawn));
                    }
                }
            }
        }
        if let Some(rate) = mix.clock_skew {
            planner.draw(&mut rng, rate.per_mille, rate.count_max, rate.duration_ms, &mut steps, |rng| {
                // The hub's clock is left alone: the hub stamps heartbeats, and a stepped hub clock makes every agent
                // look silent at once (a real fault, kept for scenarios).
                let target = if rng.random_bool(0.2) { CONTROLLER.to_owned() } else { planner.random_node(rng) };
                let max = rate.skew_ms_max as i64;
                let skew_ms = rng.random_range(-max..=max);
                (Step::ClockSkew { target: target.clone(), skew_ms }, Step::ClockSkew { target, skew_ms: 0 })
            });
        }
        let mut rollout_steps = Vec::new();
        match self.relative_rollout() {
            None => self.draw_rollout_faults(
                &planner,
                &mut rng,
                (self.window_start_ms, planner.window_end_ms()),
                &mut steps,
                &mut rollout_steps,
            ),
            Some((_, window_end)) => {
                let mut drawn = Vec::new();
                self.draw_rollout_faults(&planner, &mut rng, (0, window_end), &mut drawn, &mut rollout_steps);
                phase_steps.extend(after(Phase::Onboarding, drawn));
            }
        }
        let mut stage_steps = Vec::new();
        self.draw_site_faults(&planner, &mut rng, &mut steps, &mut stage_steps);
        let mut decommissions = Vec::new();
        self.draw_decommissions(&mut rng, &mut decommissions);
        for (relative, timed) in decommissions {
            match self.decommission.and_then(|plan| plan.after).filter(|_| relative) {
                Some(phase) => phase_steps.extend(after(phase, vec![timed])),
                None => steps.push(timed),
            }
        }
        if let Some(instances) = &self.base.instances {
            let window = (self.window_start_ms, planner.window_end_ms());
            instances::draw(instances, &self.faults, window, &mut rng, &mut steps);
        }
        // Agent-credential rotations: drawn after every other kind, and only when configured, so older plans stay.
        if let Some(rate) = mix.credential_rotation {
            if rng.random_range(0..1000) < rate.per_mille {
                for _ in 0..rng.random_range(1..=rate.count_max) {
                    let at_ms = rng.random_range(self.window_start_ms..planner.window_end_ms());
                    let target = planner.random_node(&mut rng);
                    steps.push(TimedStep { at_ms, step: Step::RotateCredential { target } });
                }
            }
        }
        if let Some(rollout) = &self.rollout {
            let step = Step::StartRollout { revision: rollout.revision.clone() };
            match rollout.after {
                None => steps.push(TimedStep { at_ms: rollout.at_ms, step }),
                Some(phase) => phase_steps.push(PhaseStep { after: phase, wait_ms: rollout.at_ms, step }),
            }
        }
        steps.sort_by_key(|timed| timed.at_ms);
        RunSpec { steps, stage_steps, phase_steps, rollout_steps, ..self.base.clone() }
    }

    /// The rollout, when it waits for a phase, and the end of its fault window in ms after that phase.
    fn relative_rollout(&self) -> Option<(&RolloutStart, u64)> {
        let rollout = self.rollout.as_ref().filter(|rollout| rollout.after.is_some())?;
        Some((rollout, rollout.at_ms + rollout.window_ms.unwrap_or(ROLLOUT_WINDOW_MS_DEFAULT)))
    }

    /// The RCCA gate's faults, drawn after the others so adding them changed no older plan. With a rollout, the
    /// faults whose target is only active while it runs — SSH timeouts, controller deaths, stale locks, expiring
    /// credentials, route swaps — wait for a point of it (`on_rollout`: a node's step start, or the controller's
    /// begin), so each lands on an active rollout step instead of wherever the clock put it.
    fn draw_rollout_faults(
        &self,
        planner: &Planner,
        rng: &mut ChaCha8Rng,
        (window_start_ms, window_end): (u64, u64),
        steps: &mut Vec<TimedStep>,
        triggered: &mut Vec<RolloutStepTrigger>,
    ) {
        use engine::ports::events::NodeStep;
        let mix = &self.faults;
        let on = |point: RolloutPoint, node: Option<String>, step: Step| RolloutStepTrigger {
            point,
            node,
            occurrence: 1,
            step,
        };
        if let Some(rate) = mix.marker_drift {
            if rng.random_range(0..1000) < rate.per_mille {
                for _ in 0..rng.random_range(1..=rate.count_max) {
                    let target = planner.random_node(rng);
                    // The incident's shapes: the historical identity forms are the scenarios' (drawing them here
                    // would change every campaign's plans).
                    let shape = *fakes::worker::Drift::INCIDENT.choose(rng).expect("drift shapes exist");
                    steps.push(TimedStep { at_ms: 0, step: Step::MarkerDrift { target, shape } });
                }
            }
        }
        if let Some(loss) = mix.ssh_timeout {
            if rng.random_range(0..1000) < loss.per_mille {
                for _ in 0..rng.random_range(1..=loss.count_max) {
                    let target = planner.random_node(rng);
                    let count = rng.random_range(1..=loss.timeouts_max);
                    let step = Step::SshTimeout { target: target.clone(), count };
                    match &self.rollout {
                        // The calls that reach a worker over SSH: the preflight's observation (armed as the
                        // controller begins), then the lane's stop, install, identity write and start.
                        Some(_) => {
                            let point = *[
                                RolloutPoint::Begin,
                                RolloutPoint::Step(NodeStep::Quiesce),
                                RolloutPoint::Step(NodeStep::Install),
                                RolloutPoint::Step(NodeStep::WriteIdentity),
                                RolloutPoint::Step(NodeStep::Start),
                            ]
                            .choose(rng)
                            .expect("points exist");
                            let node = (point != RolloutPoint::Begin).then_some(target);
                            triggered.push(on(point, node, step));
                        }
                        None => {
                            let at_ms = rng.random_range(window_start_ms..window_end);
                            steps.push(TimedStep { at_ms, step });
                        }
                    }
                }
            }
        }
        if let (Some(rate), Some(_)) = (mix.controller_death, &self.rollout) {
            if rng.random_range(0..1000) < rate.per_mille {
                let point = *[DeathPoint::AfterIntent, DeathPoint::AfterRemoteMutation, DeathPoint::BeforeCompletion]
                    .choose(rng)
                    .expect("points exist");
                let duration = rate.duration_ms.unwrap_or(RangeMs { min: 30_000, max: 600_000 });
                // Armed as a node starts one of a lane's first steps; it fires at the protocol's next such point
                // (intents, mutations and completions still follow in that lane), and the controller boots again
                // after the drawn time.
                let steps = [NodeStep::Hold, NodeStep::Quiesce, NodeStep::Install, NodeStep::WriteIdentity];
                let armed_at = RolloutPoint::Step(*steps.choose(rng).expect("steps exist"));
                let node = planner.random_node(rng);
                let restart_after_ms = rng.random_range(duration.min..=duration.max);
                let step = Step::ControllerDeath {
                    point,
                    subsystem: DeathSubsystem::Rollout,
                    restart_after_ms: Some(restart_after_ms),
                };
                triggered.push(on(armed_at, Some(node), step));
            }
        }
        if let Some(rate) = mix.storage_fault {
            if rng.random_range(0..1000) < rate.per_mille {
                for _ in 0..rng.random_range(1..=rate.count_max) {
                    let target = planner.random_node(rng);
                    let storage = if rng.random_bool(0.5) { Storage::NonReturning } else { Storage::Full };
                    steps.push(TimedStep { at_ms: 0, step: Step::StorageFault { target: target.clone(), storage } });
                    steps.push(TimedStep {
                        at_ms: window_end,
                        step: Step::StorageFault { target, storage: Storage::Healthy },
                    });
                }
            }
        }
        if let (Some(rate), Some(_)) = (mix.route_swap, &self.rollout) {
            if rng.random_range(0..1000) < rate.per_mille {
                // Published as a node of some lane is held: the next lane boundary reads it.
                let node = planner.random_node(rng);
                triggered.push(on(RolloutPoint::Step(NodeStep::Hold), Some(node), Step::RouteSwap));
            }
        }
        if let (Some(rate), Some(_)) = (mix.credential_expiry, &self.rollout) {
            if rng.random_range(0..1000) < rate.per_mille {
                let renew = rate.duration_ms.unwrap_or(RangeMs { min: 5_000, max: 60_000 });
                let renew_after_ms = rng.random_range(renew.min..=renew.max);
                // Expired as a node is held or released: its next hub mutation meets it.
                let point = *[RolloutPoint::Step(NodeStep::Hold), RolloutPoint::Step(NodeStep::Release)]
                    .choose(rng)
                    .expect("points exist");
                let node = planner.random_node(rng);
                triggered.push(on(point, Some(node), Step::CredentialExpiry { renew_after_ms }));
            }
        }
        if let (Some(rate), Some(_)) = (mix.stale_lock, &self.rollout) {
            if rng.random_range(0..1000) < rate.per_mille {
                let lease = rate.duration_ms.unwrap_or(RangeMs { min: 60_000, max: 600_000 });
                let lease_ms = rng.random_range(lease.min..=lease.max);
                // Left as the controller begins: it meets it when it takes the lock after its preflight.
                triggered.push(on(RolloutPoint::Begin, None, Step::StaleLock { lease_ms }));
            }
        }
        if let Some(rate) = mix.operator_hold {
            if rng.random_range(0..1000) < rate.per_mille {
                for _ in 0..rng.random_range(1..=rate.count_max) {
                    let target = planner.random_node(rng);
                    steps.push(TimedStep { at_ms: 0, step: Step::OperatorHold { target } });
                }
            }
        }
        if let (Some(rate), Some(_)) = (mix.artifact_missing, &self.rollout) {
            if rng.random_range(0..1000) < rate.per_mille {
                let artifact = *fakes::artifacts::ArtifactKind::ALL.choose(rng).expect("kinds exist");
                let restored_at = rng.random_range(window_start_ms..window_end);
                steps.push(TimedStep { at_ms: 0, step: Step::ArtifactMissing { artifact, restored: false } });
                steps.push(TimedStep { at_ms: restored_at, step: Step::ArtifactMissing { artifact, restored: true } });
            }
        }
    }

    /// The MAAS site's faults, drawn after every other kind (and only for the kinds configured), so they change no
    /// older campaign's plans.
    fn draw_site_faults(
        &self,
        planner: &Planner,
        rng: &mut ChaCha8Rng,
        steps: &mut Vec<TimedStep>,
        staged: &mut Vec<StageStep>,
    ) {
        use engine::matrix::{OnboardingStage as S, Stage};
        let Some(onboarding) = &self.base.onboarding else { return };
        let window_end = planner.window_end_ms();
        let machine = |rng: &mut ChaCha8Rng| onboarding.machines.choose(rng).expect("onboarding has machines").clone();
        // The site's faults that act on the region, the resolver or a BMC while a workflow needs it are aimed at a
        // stage of a drawn machine's onboarding (`on_stage`, its first start), healed `wait_ms` after it when they
        // heal: a fault that waited for the clock mostly came when no workflow was there to meet it.
        let mut at_stage = |workflow: &str, stages: &[S], rng: &mut ChaCha8Rng, steps: Vec<(u64, Step)>| {
            let stage = Stage::Onboarding(*stages.choose(rng).expect("stages given"));
            for (wait_ms, step) in steps {
                staged.push(StageStep { workflow: workflow.to_owned(), stage, occurrence: 1, wait_ms, step });
            }
        };
        for (knob, rate) in self.faults.site_kinds() {
            let Some(rate) = rate else { continue };
            if rng.random_range(0..1000) >= rate.per_mille {
                continue;
            }
            for _ in 0..rng.random_range(1..=rate.count_max) {
                let target = machine(rng);
                match knob {
                    SiteKnob::MacDrift => steps.push(TimedStep { at_ms: 0, step: Step::MacDrift { target } }),
                    SiteKnob::ScriptHang => steps.push(TimedStep { at_ms: 0, step: Step::ScriptHang { target } }),
                    SiteKnob::DatasourceFailure => {
                        steps.push(TimedStep { at_ms: 0, step: Step::DatasourceFailure { target } })
                    }
                    SiteKnob::HwSyncFailure => steps.push(TimedStep { at_ms: 0, step: Step::HwSyncFailure { target } }),
                    SiteKnob::HardwareMissing => {
                        let part = if rng.random_bool(0.5) { HardwarePart::Boss } else { HardwarePart::Roce };
                        steps.push(TimedStep { at_ms: 0, step: Step::HardwareMissing { target, part } });
                    }
                    SiteKnob::AgentEnrolDelay => {
                        let delay = rate.duration_ms.unwrap_or(RangeMs { min: 60_000, max: 1_200_000 });
                        let delay_ms = rng.random_range(delay.min..=delay.max);
                        steps.push(TimedStep { at_ms: 0, step: Step::AgentEnrolDelay { target, delay_ms } });
                    }
                    SiteKnob::ResolverServfail => {
                        // While the machine boots and its cloud-init asks the resolver.
                        let duration = rate.duration_ms.unwrap_or(RangeMs { min: 60_000, max: 600_000 });
                        let heal_ms = rng.random_range(duration.min..=duration.max);
                        let faults = vec![(0, Step::ResolverServfail { zones: None }), (heal_ms, Step::ResolverRepair)];
                        at_stage(&target, &[S::CommissionNode, S::DeployViaMaas], rng, faults);
                    }
                    SiteKnob::MaasUnavailable => {
                        let count = rng.random_range(1..=5);
                        let retry_after_s = rng.random_range(1..=30);
                        let stages = [
                            S::CreateOrFindInMaas,
                            S::CommissionNode,
                            S::WaitForReady,
                            S::ConfigureStorage,
                            S::EnsurePxeInterfaceAuto,
                            S::DeployViaMaas,
                            S::WaitForDeployed,
                        ];
                        at_stage(&target, &stages, rng, vec![(0, Step::MaasUnavailable { count, retry_after_s })]);
                    }
                    SiteKnob::BmcFault => {
                        // As MAAS powers the machine for its commissioning or its deploy.
                        let duration = rate.duration_ms.unwrap_or(RangeMs { min: 30_000, max: 600_000 });
                        let fault =
                            *[BmcFaultKind::Unreachable, BmcFaultKind::IgnoreCommands, BmcFaultKind::WrongCredentials]
                                .choose(rng)
                                .expect("faults exist");
                        let heal_ms = rng.random_range(duration.min..=duration.max);
                        let faults = vec![
                            (0, Step::BmcFault { target: target.clone(), fault }),
                            (heal_ms, Step::BmcFault { target: target.clone(), fault: BmcFaultKind::Healthy }),
                        ];
                        at_stage(&target, &[S::CommissionNode, S::DeployViaMaas], rng, faults);
                    }
                    SiteKnob::MachineDeleted => {
                        let stages = [S::WaitForReady, S::ConfigureStorage, S::DeployViaMaas, S::WaitForDeployed];
                        at_stage(&target, &stages, rng, vec![(0, Step::MachineDeleted { target: target.clone() })]);
                    }
                    SiteKnob::HwSyncStops => {
                        let after_syncs = rng.random_range(0..=2);
                        steps.push(TimedStep { at_ms: 0, step: Step::HwSyncStops { target, after_syncs } });
                    }
                    SiteKnob::SshUnreachable => {
                        let count = rng.random_range(1..=3);
                        steps.push(TimedStep { at_ms: 0, step: Step::SshUnreachable { target, count } });
                    }
                    SiteKnob::PreseedFailure => {
                        let count = rng.random_range(1..=2);
                        at_stage(&target, &[S::DeployViaMaas], rng, vec![(0, Step::PreseedFailure { count })]);
                    }
                    SiteKnob::InterfaceDisconnected => {
                        let step = Step::InterfaceDisconnected { target: target.clone() };
                        at_stage(&target, &[S::ConfigureStorage, S::EnsurePxeInterfaceAuto], rng, vec![(0, step)]);
                    }
                    SiteKnob::CommissioningSlow => {
                        let interval = rate.duration_ms.unwrap_or(RangeMs { min: 60_000, max: 180_000 });
                        let event_interval_ms = rng.random_range(interval.min..=interval.max);
                        steps.push(TimedStep { at_ms: 0, step: Step::CommissioningSlow { target, event_interval_ms } });
                    }
                    SiteKnob::OnboardingControllerDeath => {
                        let point =
                            *[DeathPoint::AfterIntent, DeathPoint::AfterRemoteMutation, DeathPoint::BeforeCompletion]
                                .choose(rng)
                                .expect("points exist");
                        let earliest = onboarding.start_at_ms.max(self.window_start_ms);
                        let armed = (earliest + rng.random_range(0..=300_000)).min(window_end - 1);
                        // The death comes when a workflow reaches the point, some time after the trap is armed (the
                        // first completion, for `before_completion`, takes a quarter of an hour): by default the
                        // restart comes 30 to 45 minutes after the arming.
                        let duration = rate.duration_ms.unwrap_or(RangeMs { min: 1_800_000, max: 2_700_000 });
                        let restart =
                            (armed + rng.random_range(duration.min..=duration.max)).min(window_end).max(armed + 1);
                        let subsystem = DeathSubsystem::Onboarding;
                        let step = Step::ControllerDeath { point, subsystem, restart_after_ms: None };
                        steps.push(TimedStep { at_ms: armed, step });
                        steps.push(TimedStep { at_ms: restart, step: Step::Restart { target: CONTROLLER.to_owned() } });
                    }
                }
            }
        }
    }

    /// The decommission requests and decommission's faults, drawn after every other kind and only with a
    /// `[decommission]` table, so they change no older campaign's plans.
    /// Each step comes tagged: whether it is timed from the decommission request (and so waits for the phase the
    /// requests wait for, with `after`), or from the start of the run.
    fn draw_decommissions(&self, rng: &mut ChaCha8Rng, tagged: &mut Vec<(bool, TimedStep)>) {
        let mut steps = Tagged { relative: true, steps: tagged };
        let (Some(plan), Some(onboarding)) = (&self.decommission, &self.base.onboarding) else { return };
        // In a bare-metal run a machine is its NodeInstance's backing: it is decommissioned by terminating the
        // instance, whose destroy asks for the machine's decommission workflow (`docs/instances.md`).
        let bare_metal = self.base.instances.as_ref().is_some_and(|instances| instances.bare_metal);
        let mut requested: Vec<(String, u64)> = Vec::new();
        for machine in &onboarding.machines {
            if rng.random_range(0..1000) < plan.per_mille {
                let at_ms = rng.random_range(plan.at_ms.min..=plan.at_ms.max);
                let step = if bare_metal {
                    Step::InstanceOperator {
                        target: machine.clone(),
                        op: InstanceOp::Terminate,
                        reason: "decommission".to_owned(),
                        actor: crate::model::faults::DEFAULT_OPERATOR_ACTOR.to_owned(),
                        force: false,
                        operation_id: None,
                    }
                } else {
                    Step::Decommission { target: machine.clone() }
                };
                steps.push(TimedStep { at_ms, step });
                requested.push((machine.clone(), at_ms));
            }
        }
        if requested.is_empty() {
            return;
        }
        for (knob, rate) in self.faults.decommission_kinds() {
            let Some(rate) = rate else { continue };
            if rng.random_range(0..1000) >= rate.per_mille {
                continue;
            }
            for _ in 0..rng.random_range(1..=rate.count_max) {
                let (target, requested_at) = requested.choose(rng).expect("some machine is decommissioned").clone();
                match knob {
                    DecommissionKnob::AllocationStuck => {
                        let count = rng.random_range(1..=3);
                        steps.push(TimedStep { at_ms: 0, step: Step::AllocationStuck { target, count } });
                    }
                    DecommissionKnob::CleanupResidue => {
                        let count = rng.random_range(1..=2);
                        steps.push(TimedStep { at_ms: 0, step: Step::CleanupResidue { target, count } });
                    }
                    DecommissionKnob::UninstallFailure => {
                        let count = rng.random_range(1..=2);
                        steps.push(TimedStep { at_ms: 0, step: Step::UninstallFailure { target, count } });
                    }
                    DecommissionKnob::AgentUnreachable => {
                        let duration = rate.duration_ms.unwrap_or(RangeMs { min: 60_000, max: 1_200_000 });
                        let heal_ms =
                            (requested_at + rng.random_range(duration.min..=duration.max)).min(self.base.duration_ms);
                        steps.push(TimedStep {
                            at_ms: requested_at,
                            step: Step::AgentUnreachable { target: target.clone(), down: true },
                        });
                        steps.push(TimedStep { at_ms: heal_ms, step: Step::AgentUnreachable { target, down: false } });
                    }
                    DecommissionKnob::InventoryUnavailable => {
                        let count = rng.random_range(1..=5);
                        steps.push(TimedStep { at_ms: requested_at, step: Step::InventoryUnavailable { count } });
                    }
                    DecommissionKnob::EraseFailure => {
                        let count = rng.random_range(1..=2);
                        steps.push(TimedStep { at_ms: 0, step: Step::EraseFailure { count } });
                    }
                    DecommissionKnob::DecommissionControllerDeath => {
                        let point =
                            *[DeathPoint::AfterIntent, DeathPoint::AfterRemoteMutation, DeathPoint::BeforeCompletion]
                                .choose(rng)
                                .expect("points exist");
                        let duration = rate.duration_ms.unwrap_or(RangeMs { min: 600_000, max: 1_200_000 });
                        let restart_after_ms = Some(rng.random_range(duration.min..=duration.max));
                        let subsystem = DeathSubsystem::Decommission;
                        let step = Step::ControllerDeath { point, subsystem, restart_after_ms };
                        steps.push(TimedStep { at_ms: requested_at, step });
                    }
                    DecommissionKnob::OperatorAction => {
                        use engine::matrix::{RecoveryAction, Workflow};
                        let action = *[
                            RecoveryAction::Resume,
                            RecoveryAction::RetryStage,
                            RecoveryAction::Rerun,
                            RecoveryAction::AdoptObservedState,
                        ]
                        .choose(rng)
                        .expect("actions exist");
                        let (workflow, at_ms) = if rng.random_bool(0.5) {
                            let window_end = self.base.duration_ms - self.base.liveness_budget_ms;
                            steps.relative = false;
                            (Workflow::Onboarding, rng.random_range(self.window_start_ms..window_end))
                        } else {
                            let at_ms =
                                (requested_at + rng.random_range(1_800_000..=5_400_000)).min(self.base.duration_ms - 1);
                            (Workflow::Decommission, at_ms)
                        };
                        steps.push(TimedStep {
                            at_ms,
                            step: Step::Operator {
                                target,
                                workflow,
                                action,
                                actor: "oncall".to_owned(),
                                role: engine::recovery::ActorRole::Operator,
                                reason: format!("campaign: on-call tries {}", action.as_str()),
                                resolves_freeze: false,
                            },
                        });
                        steps.relative = true;
                    }
                }
            }
        }
    }
}

/// Steps as they are drawn, each tagged with [`Tagged::relative`] at the time.
struct Tagged<'a> {
    relative: bool,
    steps: &'a mut Vec<(bool, TimedStep)>,
}

impl Tagged<'_> {
    fn push(&mut self, timed: TimedStep) {
        self.steps.push((self.relative, timed));
    }
}

/// Steps timed from the end of `phase` instead of from the start of the run, in the order drawn.
fn after(phase: Phase, drawn: Vec<TimedStep>) -> impl Iterator<Item = PhaseStep> {
    drawn.into_iter().map(move |timed| PhaseStep { after: phase, wait_ms: timed.at_ms, step: timed.step })
}

struct Planner<'a> {
    base: &'a RunSpec,
    window_start_ms: u64,
}

impl Planner<'_> {
    fn window_end_ms(&self) -> u64 {
        self.base.duration_ms - self.base.liveness_budget_ms
    }

    fn random_node(&self, rng: &mut ChaCha8Rng) -> String {
        self.base.fleet.node_name(rng.random_range(1..=self.base.fleet.nodes))
    }

    /// With probability `per_mille`, draws 1..=count_max faults; each starts at a random time of the window and
    /// heals after a random duration, never later than the window's end.
    fn draw(
        &self,
        rng: &mut ChaCha8Rng,
        per_mille: u32,
        count_max: u32,
        duration: Option<RangeMs>,
        steps: &mut Vec<TimedStep>,
        mut make: impl FnMut(&mut ChaCha8Rng) -> (Step, Step),
    ) {
        if rng.random_range(0..1000) >= per_mille {
            return;
        }
        let duration = duration.unwrap_or(RangeMs { min: 30_000, max: 600_000 });
        for _ in 0..rng.random_range(1..=count_max) {
            let start = rng.random_range(self.window_start_ms..self.window_end_ms());
            let length = rng.random_range(duration.min..=duration.max);
            let heal = (start + length).min(self.window_end_ms());
            let (inject, recover) = make(rng);
            steps.push(TimedStep { at_ms: start, step: inject });
            steps.push(TimedStep { at_ms: heal, step: recover });
        }
    }

    fn ttl_expiry(
        &self,
        rng: &mut ChaCha8Rng,
        rate: TtlRate,
        (from_ms, to_ms): (u64, u64),
        steps: &mut Vec<TimedStep>,
    ) {
        let nodes = self.base.fleet.node_names();
        let count = rng.random_range(1..=rate.members_max) as usize;
        let members: BTreeSet<String> = nodes.choose_multiple(rng, count).cloned().collect();
        let strays: Vec<&String> =
            nodes.iter().filter(|n| !members.contains(*n) && !self.base.fleet.durable.contains(*n)).collect();
        let stray = strays.choose(rng).map(|s| (*s).clone());
        let stop_ms = rng.random_range(ttl_stop_ms_max(self.base) - 10 * 60_000..=ttl_stop_ms_max(self.base));
        let latest_start = to_ms.saturating_sub(stop_ms + 2 * engine::sensor::SENSOR_PERIOD_MS).max(from_ms);
        let start = rng.random_range(from_ms..=latest_start);
        steps.push(TimedStep { at_ms: start, step: Step::OpenEpoch { members: members.iter().cloned().collect() } });
        for node in members.iter().chain(stray.as_ref()) {
            let silent_ms = stop_ms - 1;
            steps.push(TimedStep { at_ms: start + 1, step: Step::TtlExpiry { target: node.clone(), silent_ms } });
        }
        steps.push(TimedStep {
            at_ms: start + stop_ms + 2 * engine::sensor::SENSOR_PERIOD_MS,
            step: Step::CloseEpoch { epoch: 1 },
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::faults::{Counted, StepKind};

    const CAMPAIGN: &str = r#"
schema_version = 1
description = "test"
seed = 9
runs = 4
duration_ms = 7_200_000

[fleet]
nodes = 10

[faults]
partition = { per_mille = 1000, count_max = 3 }
hub_crash = { per_mille = 500, duration_ms = { min = 60_000, max = 300_000 } }
ttl_expiry = { per_mille = 1000, members_max = 3 }

[oracles]
always = ["epoch_member_never_tombstoned"]
sometimes = ["instance_silent_raised"]
"#;

    #[test]
    fn run_plans_are_a_function_of_the_run_seed_and_stay_in_the_window() {
        let campaign = parse_campaign("c.toml", CAMPAIGN).unwrap();
        assert_eq!(campaign.run_spec(2), campaign.run_spec(2));
        assert_ne!(campaign.run_spec(1).steps, campaign.run_spec(2).steps);
        for index in 0..20 {
            let spec = campaign.run_spec(index);
            assert!(spec.steps.windows(2).all(|w| w[0].at_ms <= w[1].at_ms), "ordered");
            assert!(spec.steps.iter().any(|t| matches!(t.step, Step::Partition { .. })), "per_mille 1000 always bites");
            let last = spec.steps.iter().map(|t| t.at_ms).max().unwrap();
            assert!(
                last <= spec.duration_ms - spec.liveness_budget_ms,
                "run {index}: a step at {last} is past the window"
            );
            assert!(spec.steps.iter().any(|t| matches!(t.step, Step::OpenEpoch { .. })));
        }
    }

    #[test]
    fn the_config_hash_ignores_path_and_description_but_not_behaviour() {
        let campaign = parse_campaign("c.toml", CAMPAIGN).unwrap();
        let moved =
            parse_campaign("elsewhere/c.toml", &CAMPAIGN.replace("description = \"test\"", "description = \"x\""))
                .unwrap();
        assert_eq!(campaign.config_hash(), moved.config_hash());
        let changed = parse_campaign("c.toml", &CAMPAIGN.replace("nodes = 10", "nodes = 11")).unwrap();
        assert_ne!(campaign.config_hash(), changed.config_hash());
    }

    #[test]
    fn an_absurd_skew_is_bad_input_not_a_panic() {
        let text = CAMPAIGN
            .replace("[oracles]", "clock_skew = { per_mille = 1000, skew_ms_max = 18446744073709551615 }\n\n[oracles]");
        let error = parse_campaign("c.toml", &text).unwrap_err().to_string();
        assert!(
            error.contains("skew_ms_max: 18446744073709551615 is more than 604800000, the most a time in ms"),
            "{error}"
        );
    }

    #[test]
    fn oracle_lists_must_match_the_property_type() {
        let text =
            CAMPAIGN.replace("always = [\"epoch_member_never_tombstoned\"]", "always = [\"silence_detected_in_time\"]");
        let error = parse_campaign("c.toml", &text).unwrap_err().to_string();
        assert!(error.contains("oracles.always: \"silence_detected_in_time\" is an eventually-property"), "{error}");
    }

    #[test]
    fn site_faults_need_onboarding_and_target_the_sites_machines() {
        let site = "mac_drift = { per_mille = 1000 }\nbmc_fault = { per_mille = 1000, count_max = 2 }\nmaas_unavailable = { per_mille = 1000 }\n";
        let without = CAMPAIGN.replace("[oracles]", &format!("{site}\n[oracles]"));
        let error = parse_campaign("c.toml", &without).unwrap_err().to_string();
        assert!(
            error.contains("faults.mac_drift: acts on the MAAS site, which needs an [onboarding] table"),
            "{error}"
        );
        let with = format!("{without}\n[onboarding]\nnodes = 3\n");
        let campaign = parse_campaign("c.toml", &with).unwrap();
        let plain = parse_campaign("c.toml", CAMPAIGN).unwrap();
        for index in 0..10 {
            let spec = campaign.run_spec(index);
            let machines = &spec.onboarding.as_ref().unwrap().machines;
            assert_eq!(machines, &["node-11", "node-12", "node-13"]);
            let staged = spec.stage_steps.iter().map(|staged| &staged.step);
            let site_steps: Vec<&Step> =
                spec.steps.iter().map(|t| &t.step).chain(staged).filter(|s| s.is_site_step()).collect();
            assert!(site_steps.iter().any(|s| matches!(s, Step::MacDrift { .. })));
            // The region's 503s wait for a drawn machine's stage, not for the clock.
            assert!(spec.stage_steps.iter().any(
                |staged| matches!(staged.step, Step::MaasUnavailable { .. }) && machines.contains(&staged.workflow)
            ));
            assert!(!spec.steps.iter().any(|timed| matches!(timed.step, Step::MaasUnavailable { .. })));
            assert!(site_steps.iter().flat_map(|s| s.names()).all(|(_, m)| machines.iter().any(|n| n == m)));
            let others: Vec<&TimedStep> = spec.steps.iter().filter(|t| !t.step.is_site_step()).collect();
            let plain_spec = plain.run_spec(index);
            let before: Vec<&TimedStep> = plain_spec.steps.iter().collect();
            assert_eq!(others, before, "the site's draws come after the others");
        }
    }

    #[test]
    fn commissioning_slow_draws_an_interval_inside_the_stall_window_after_every_older_kind() {
        let site = "mac_drift = { per_mille = 1000 }\n";
        let base =
            format!("{}\n[onboarding]\nnodes = 2\n", CAMPAIGN.replace("[oracles]", &format!("{site}\n[oracles]")));
        let with = base.replace("mac_drift = ", "commissioning_slow = { per_mille = 1000 }\nmac_drift = ");
        let (without, with) = (parse_campaign("c.toml", &base).unwrap(), parse_campaign("c.toml", &with).unwrap());
        for index in 0..10 {
            let (plain, spec) = (without.run_spec(index), with.run_spec(index));
            let slow: Vec<&TimedStep> =
                spec.steps.iter().filter(|t| matches!(t.step, Step::CommissioningSlow { .. })).collect();
            assert_eq!(slow.len(), 1, "per_mille 1000 always bites, once with count_max 1");
            let Step::CommissioningSlow { event_interval_ms, .. } = slow[0].step else { unreachable!() };
            assert_eq!(slow[0].at_ms, 0);
            assert!((60_000..=180_000).contains(&event_interval_ms), "{event_interval_ms}");
            let others: Vec<&TimedStep> =
                spec.steps.iter().filter(|t| !matches!(t.step, Step::CommissioningSlow { .. })).collect();
            assert_eq!(others, plain.steps.iter().collect::<Vec<_>>(), "drawn after every older kind");
        }
        for range in ["{ min = 0, max = 60_000 }", "{ min = 60_000, max = 1_800_000 }"] {
            let text = base.replace(
                "mac_drift = ",
                &format!("commissioning_slow = {{ per_mille = 1, duration_ms = {range} }}\nmac_drift = "),
            );
            let error = parse_campaign("c.toml", &text).unwrap_err().to_string();
            assert!(error.contains("faults.commissioning_slow.duration_ms: the interval between script results needs 0 < min and max < 1800000"), "{error}");
        }
    }

    #[test]
    fn onboarding_controller_death_is_off_by_default_and_drawn_last_when_configured() {
        let site = "mac_drift = { per_mille = 1000 }\n";
        let base =
            format!("{}\n[onboarding]\nnodes = 2\n", CAMPAIGN.replace("[oracles]", &format!("{site}\n[oracles]")));
        let with = base.replace("mac_drift = ", "onboarding_controller_death = { per_mille = 1000 }\nmac_drift = ");
        let (without, with) = (parse_campaign("c.toml", &base).unwrap(), parse_campaign("c.toml", &with).unwrap());
        for index in 0..10 {
            let (plain, spec) = (without.run_spec(index), with.run_spec(index));
            let deaths: Vec<&TimedStep> =
                spec.steps.iter().filter(|t| matches!(t.step, Step::ControllerDeath { .. })).collect();
            assert_eq!(deaths.len(), 1, "per_mille 1000 always bites");
            let Step::ControllerDeath { subsystem, .. } = deaths[0].step else { unreachable!() };
            assert_eq!(subsystem, DeathSubsystem::Onboarding);
            let restarts: Vec<u64> = spec
                .steps
                .iter()
                .filter(|t| matches!(&t.step, Step::Restart { target } if target == CONTROLLER))
                .map(|t| t.at_ms)
                .collect();
            assert_eq!(restarts.len(), 1);
            let armed = deaths[0].at_ms;
            assert!((armed + 1_800_000..=armed + 2_700_000).contains(&restarts[0]), "restarted 30 to 45 min after");
            assert!(plain.steps.iter().all(|t| !matches!(t.step, Step::ControllerDeath { .. })), "off by default");
            let others: Vec<&TimedStep> = spec
                .steps
                .iter()
                .filter(|t| !matches!(&t.step, Step::ControllerDeath { .. }))
                .filter(|t| !matches!(&t.step, Step::Restart { target } if target == CONTROLLER))
                .collect();
            assert_eq!(others, plain.steps.iter().collect::<Vec<_>>(), "drawn after every other kind");
        }
    }

    #[test]
    fn an_unknown_fault_kind_names_its_line() {
        let text = CAMPAIGN.replace("partition = {", "meteor_strike = {");
        let error = parse_campaign("c.toml", &text).unwrap_err().to_string();
        assert!(error.starts_with("c.toml:12:1: faults.meteor_strike: unknown field `meteor_strike`"), "{error}");
    }

    /// The `[faults]` keys serde knows: the fields of `FaultMix`, read from the error for an unknown one.
    fn fault_mix_fields() -> BTreeSet<String> {
        let error = toml::from_str::<FaultMix>("not_a_knob = 1").unwrap_err().to_string();
        let expected = error.split("expected one of").nth(1).expect("serde lists the fields");
        expected.split(',').map(|field| field.trim().trim_matches('`').to_owned()).collect()
    }

    #[test]
    fn the_fault_mix_has_the_catalogues_knobs_and_no_other() {
        let catalogue: BTreeSet<String> =
            StepKind::ALL.iter().flat_map(|kind| kind.knobs()).map(|knob| (*knob).to_owned()).collect();
        let fields = fault_mix_fields();
        let (unlisted, unknown): (Vec<_>, Vec<_>) =
            (fields.difference(&catalogue).collect(), catalogue.difference(&fields).collect());
        assert!(unlisted.is_empty() && unknown.is_empty(), "no row lists knobs {unlisted:?}; no field is {unknown:?}");
        let site = FaultMix::default().site_kinds().map(|(knob, _)| knob.name().to_owned());
        let decommission = FaultMix::default().decommission_kinds().map(|(knob, _)| knob.name().to_owned());
        let instance = FaultMix::default().instance_kinds().map(|(knob, _)| knob.name().to_owned());
        for name in site.iter().chain(&decommission).chain(&instance) {
            assert!(catalogue.contains(name), "{name} is no knob of the catalogue");
        }
    }

    /// A rollout that waits for onboarding takes its faults with it: they are timed from the end of onboarding, the
    /// TTL expiry and the decommissions from the end of the rollout, and none is timed from the start of the run.
    #[test]
    fn a_rollout_after_onboarding_aims_its_faults_at_it() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../campaigns/fleet-50.toml");
        let campaign = load_campaign(Path::new(path)).unwrap();
        let rollout_kinds = ["start_rollout", "ssh_timeout", "marker_drift", "stale_lock"];
        let mut seen = BTreeSet::new();
        for index in 0..20 {
            let spec = campaign.run_spec(index);
            for timed in &spec.steps {
                assert!(
                    !rollout_kinds.contains(&timed.step.kind()),
                    "run {index}: {:?} is timed from the start",
                    timed.step
                );
                let relative = matches!(
                    timed.step,
                    Step::Decommission { .. }
                        | Step::InstanceOperator { op: InstanceOp::Terminate, .. }
                        | Step::OpenEpoch { .. }
                        | Step::ControllerDeath { subsystem: DeathSubsystem::Rollout, .. }
                );
                assert!(!relative, "run {index}: {:?} is timed from the start", timed.step);
            }
            for phased in &spec.phase_steps {
                let kind = phased.step.kind();
                seen.insert((phased.after, kind));
                match kind {
                    "start_rollout" => assert_eq!((phased.after, phased.wait_ms), (Phase::Onboarding, 120_000)),
                    // fleet-50's machines are bare-metal instances: a decommission is the terminate of one.
                    "instance_operator" => {
                        assert_eq!(phased.after, Phase::Rollout);
                        assert!((600_000..=1_800_000).contains(&phased.wait_ms), "{phased:?}");
                    }
                    "open_epoch" => assert_eq!(phased.after, Phase::Rollout),
                    _ => {}
                }
            }
        }
        for wanted in [
            (Phase::Onboarding, "start_rollout"),
            (Phase::Rollout, "instance_operator"),
            (Phase::Rollout, "open_epoch"),
        ] {
            assert!(seen.contains(&wanted), "{wanted:?} never drawn in 20 runs");
        }
        // What only an active rollout can meet waits for a point of it, never for the clock.
        let mut aimed = BTreeSet::new();
        for index in 0..20 {
            let spec = campaign.run_spec(index);
            for phased in &spec.phase_steps {
                let rollouts = matches!(
                    phased.step,
                    Step::SshTimeout { .. }
                        | Step::StaleLock { .. }
                        | Step::CredentialExpiry { .. }
                        | Step::RouteSwap
                        | Step::ControllerDeath { subsystem: DeathSubsystem::Rollout, .. }
                );
                assert!(!rollouts, "run {index}: {:?} timed from a phase's end", phased.step);
            }
            aimed.extend(spec.rollout_steps.iter().map(|triggered| triggered.step.kind()));
        }
        for kind in ["ssh_timeout", "controller_death", "stale_lock", "credential_expiry", "route_swap"] {
            assert!(aimed.contains(kind), "{kind} never aimed at the rollout in 20 runs: {aimed:?}");
        }
    }

    /// Each knob of the catalogue, alone in a campaign at `per_mille = 1000`, draws steps of its kind, and every fault
    /// step it draws is of a kind that lists it.
    #[test]
    fn each_knob_draws_the_kind_the_catalogue_names() {
        for &kind in StepKind::ALL {
            for knob in kind.knobs() {
                let extra = match *knob {
                    "link_loss" => ", loss_per_mille_max = 500",
                    "latency" => ", latency_ms_max = 1_000",
                    "clock_skew" => ", skew_ms_max = 60_000",
                    "ttl_expiry" => ", members_max = 1",
                    "ssh_timeout" => ", timeouts_max = 2",
                    _ => "",
                };
                let text = format!(
                    r#"
schema_version = 1
description = "one knob"
seed = 5
runs = 3
duration_ms = 21_600_000
rollout = {{ at_ms = 3_600_000, revision = "c0ffee1" }}

[fleet]
nodes = 4

[onboarding]
nodes = 2

[decommission]
per_mille = 1000
at_ms = {{ min = 9_000_000, max = 10_000_000 }}

[instances]
plain = 2

[[instances.pool]]
name = "edge"
class = "spot"
target = 2

[faults]
{knob} = {{ per_mille = 1000{extra} }}

[oracles]
"#
                );
                let campaign = parse_campaign("c.toml", &text).unwrap_or_else(|error| panic!("{knob}: {error}"));
                for index in 0..campaign.runs {
                    let spec = campaign.run_spec(index);
                    let timed = spec.steps.iter().map(|timed| &timed.step);
                    let aimed = spec.rollout_steps.iter().map(|triggered| &triggered.step);
                    let staged = spec.stage_steps.iter().map(|staged| &staged.step);
                    let kinds: Vec<StepKind> = timed.chain(aimed).chain(staged).map(Step::step_kind).collect();
                    assert!(kinds.contains(&kind), "{knob} drew no {} in run {index}: {kinds:?}", kind.name());
                    for drawn in kinds {
                        if matches!(drawn.counted(), Counted::Always | Counted::When) {
                            assert!(
                                drawn.knobs().contains(knob),
                                "{knob} drew {}, which does not list it",
                                drawn.name()
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_bare_metal_campaign_decommissions_a_machine_by_terminating_its_instance() {
        let text = |bare_metal: bool| {
            let instances = if bare_metal {
                "[instances]\nbare_metal = true\ngovernance = { terminate = \"allow\" }\n"
            } else {
                ""
            };
            format!(
                r#"
schema_version = 1
description = "decommissions"
seed = 5
runs = 2
duration_ms = 21_600_000

[fleet]
nodes = 3

[onboarding]
nodes = 3

[decommission]
per_mille = 1000
at_ms = {{ min = 9_000_000, max = 10_000_000 }}

{instances}
[oracles]
"#
            )
        };
        for bare_metal in [false, true] {
            let campaign = parse_campaign("c.toml", &text(bare_metal)).unwrap_or_else(|error| panic!("{error}"));
            let spec = campaign.run_spec(0);
            let terminates: Vec<&str> = spec
                .all_steps()
                .filter_map(|step| match step {
                    Step::InstanceOperator { op: InstanceOp::Terminate, target, .. } => Some(target.as_str()),
                    _ => None,
                })
                .collect();
            let decommissions = spec.all_steps().filter(|step| matches!(step, Step::Decommission { .. })).count();
            let machines: Vec<&str> = spec.onboarding.as_ref().unwrap().machines.iter().map(String::as_str).collect();
            assert_eq!(machines.len(), 3);
            let expected: &[&str] = if bare_metal { &machines } else { &[] };
            assert_eq!(terminates, expected, "bare metal: {bare_metal}");
            assert_eq!(decommissions, if bare_metal { 0 } else { 3 }, "bare metal: {bare_metal}");
        }
    }
}
