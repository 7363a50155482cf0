//! The onboarding stages' judgements, sans-I/O: given what the ports answered, whether the stage is done, what the
//! driver does next, or which failure class it failed with and on what evidence. The driver reads the ports, hands
//! the answers here and applies the verdict; every failure class the workflow reports is chosen in this file (or in
//! the core's classifier, [`crate::workflow::failure`]).

use std::collections::BTreeSet;

use crate::matrix::{Compensation, FailureClass, OnboardingStage, TimeoutKind};
use crate::onboarding::stall::{self, ProgressEvidence, ResolverProbe, StallClassifier, StallVerdict, UnknownMachine};
use crate::ports::events::Evidence;
use crate::ports::site::{
    Disk, DnsAnswer, Interface, MaasError, MaasEvent, Machine, MachineStatus, RegionService, SiteConfig, Subnet,
};
use crate::ports::{HeartbeatSnapshot, SshError, TransportError};
use crate::secret::Secret;
use crate::workflow::Observed;
use crate::workflow::failure::{BmcAnswer, ReadFailures, StageFailure};

/// How onboarding reads a MAAS 503 that names the BMC: as MAAS's "try again" (its power actions show their failures
/// as events, read by [`power_failure`]).
pub const BMC: BmcAnswer = BmcAnswer::Transient;

/// A failed MAAS call of an onboarding stage.
pub fn maas(error: &MaasError) -> StageFailure {
    StageFailure::maas(error, BMC)
}

/// A value an earlier stage of the run should have produced (`what` says which).
pub fn produced<'a, T>(value: Option<&'a T>, what: &str) -> Result<&'a T, StageFailure> {
    value.ok_or_else(|| StageFailure::new(FailureClass::InputConfigError, format!("no {what}")))
}

// load_site_config

/// Every VLAN the site configuration names has a subnet in the region.
pub fn site_vlans(site: &SiteConfig, subnets: &[Subnet]) -> Result<(), StageFailure> {
    for vid in [site.pxe_vlan_vid, site.roce_vlan_vid] {
        if !subnets.iter().any(|subnet| subnet.vlan_vid == vid) {
            let error = format!("no subnet on vlan {vid}, which the site configuration names");
            return Err(StageFailure::new(FailureClass::SiteCapabilityMissing, error));
        }
    }
    Ok(())
}

/// The resolver's answer as the run records it.
pub fn resolver_answer(answer: &Result<DnsAnswer, TransportError>) -> String {
    match answer {
        Ok(DnsAnswer::Address(address)) => address.clone(),
        Ok(DnsAnswer::NxDomain) => "NXDOMAIN".to_owned(),
        Ok(DnsAnswer::ServFail) => "SERVFAIL".to_owned(),
        Err(error) => format!("no answer ({error})"),
    }
}

/// The verdict on the nodes' resolver's answer for the metadata host. A node that cannot resolve it boots to a login
/// prompt and never reports: commissioning cannot succeed, so under `observe_first` (policy `current`) nothing is
/// started; the legacy controller did not look. No answer at all is transient.
pub fn metadata_resolver(
    host: &str,
    answer: &Result<DnsAnswer, TransportError>,
    observe_first: bool,
) -> Result<(), StageFailure> {
    match answer {
        Ok(DnsAnswer::Address(_)) => Ok(()),
        Ok(_) if observe_first => {
            let value = resolver_answer(answer);
            let mut failure = StageFailure::new(
                FailureClass::SiteCapabilityMissing,
                format!("the rack resolver answers {value} for the metadata host {host}"),
            );
            failure.evidence.push(Evidence::ResolverAnswer { host: host.to_owned(), answer: value });
            Err(failure)
        }
        Ok(_) => Ok(()),
        Err(error) => Err(StageFailure::new(FailureClass::UpstreamTransient, error.to_string())),
    }
}

/// What a waiting stage's probe of the metadata host finds: an address, or a resolver that cannot give one.
pub fn resolver_probe(host: &str, answer: &Result<DnsAnswer, TransportError>) -> ResolverProbe {
    match answer {
        Ok(DnsAnswer::Address(_)) => ResolverProbe::Answered,
        Ok(_) | Err(_) => ResolverProbe::ServFail { host: host.to_owned() },
    }
}

// create_or_find_in_maas

/// The node's own machine among MAAS's: the one that carries its registered PXE MAC.
pub fn own_machine(machines: Vec<Machine>, pxe_mac: &str) -> Option<Machine> {
    let mac = pxe_mac.to_lowercase();
    machines.into_iter().find(|machine| machine.macs.contains(&mac))
}

/// A NEW machine in `machines` that claims the node's BMC and is not its own record `own`: the node booted with MACs
/// MAAS does not know (seed 001's MAC drift).
pub fn unknown_machine(bmc_address: &str, own: &str, machines: &[Machine]) -> Option<UnknownMachine> {
    machines.iter().find_map(|machine| {
        let ours = machine.power_address.as_deref() == Some(bmc_address);
        (ours && machine.system_id != own && machine.status == MachineStatus::New).then(|| UnknownMachine {
            mac: machine.macs.first().cloned().unwrap_or_default(),
            system_id: machine.system_id.clone(),
            bmc_address: bmc_address.to_owned(),
        })
    })
}

/// A failed power action among the newest events, up to the action that started it ("Commissioning", "Deploying").
pub fn power_failure(events: &[MaasEvent]) -> Option<StageFailure> {
    events
        .iter()
        .take_while(|event| event.text != "Commissioning" && event.text != "Deploying")
        .find(|event| event.level == "ERROR" && event.text.starts_with("Failed to power"))
        .map(|event| {
            let mut failure = StageFailure::new(
                FailureClass::BmcPowerFailure,
                format!("MAAS could not power the machine: {} {}", event.text, event.description),
            );
            failure.evidence.push(Evidence::MaasEvent {
                level: event.level.clone(),
                text: event.text.clone(),
                description: event.description.clone(),
            });
            failure
        })
}

/// The discovery poll after a create, on one read of the machine's events: MAAS's power action failed
/// (`bmc_power_failure`), the machine PXE-booted (`Ok`), or neither yet (`None`).
pub fn discovery(events: &[MaasEvent]) -> Option<Result<(), StageFailure>> {
    if let Some(failure) = power_failure(events) {
        return Some(Err(failure));
    }
    events.iter().any(|event| event.text == "Performing PXE boot").then_some(Ok(()))
}

/// Whether the newest commissioning in MAAS's events (newest first) never started: no PXE boot and no power failure
/// since its "Commissioning" event. Unknown (no such event) is not "never".
pub fn commissioning_never_dispatched(events: &[MaasEvent]) -> bool {
    for event in events {
        match event.text.as_str() {
            "Commissioning" => return true,
            "Performing PXE boot" => return false,
            _ if power_failure(std::slice::from_ref(event)).is_some() => return false,
            _ => {}
        }
    }
    false
}

/// A stranger MAAS enlisted on the node's BMC during discovery: the node booted with MACs MAAS does not know.
pub fn discovery_stranger(system_id: &str, stranger: UnknownMachine) -> StageFailure {
    let mut failure = StageFailure::new(
        FailureClass::StateAmbiguity,
        format!("machine {system_id} never PXE-booted; another record claims its BMC"),
    );
    failure.evidence.push(unknown_machine_evidence(stranger));
    failure
}

/// Silence past section 6's discovery timeout after the power-on: the machine made no PXE request.
pub fn discovery_silent(system_id: &str, waited_ms: u64, discovery_timeout_ms: u64) -> Option<StageFailure> {
    if waited_ms < discovery_timeout_ms {
        return None;
    }
    let mut failure = StageFailure::new(
        FailureClass::PxeDiscoveryFailure,
        format!("machine {system_id} powered on but made no PXE request within {waited_ms} ms"),
    );
    failure.evidence.push(Evidence::NoPxeBoot { system_id: system_id.to_owned(), waited_ms });
    Some(failure.timed_out(TimeoutKind::Discovery))
}

// Refresh before destructive steps (commission, deploy) and the safe full rerun

/// How a machine's status compares with what `stage` expects.
pub fn observed(stage: OnboardingStage, status: &MachineStatus, deploy_started: bool) -> Observed {
    use MachineStatus as M;
    use OnboardingStage as S;
    match stage {
        S::CommissionNode | S::WaitForReady => match status {
            M::Commissioning if stage == S::CommissionNode => Observed::SatisfiesCheckpoint,
            M::Ready => Observed::SatisfiesCheckpoint,
            M::New | M::FailedCommissioning | M::Commissioning => Observed::AsExpected,
            // Allocated, deployed or broken before this workflow deployed it: someone else advanced it.
            _ => Observed::Conflicting,
        },
        S::DeployViaMaas | S::WaitForDeployed => match status {
            M::Deployed => Observed::SatisfiesCheckpoint,
            M::Deploying if stage == S::DeployViaMaas && deploy_started => Observed::SatisfiesCheckpoint,
            M::Ready | M::Allocated | M::Deploying | M::FailedDeployment => Observed::AsExpected,
            _ => Observed::Conflicting,
        },
        _ => match status {
            M::Broken => Observed::Conflicting,
            _ => Observed::AsExpected,
        },
    }
}

/// The fresh read before an irreversible call (commission, deploy): `Ok(false)` when the machine already satisfies
/// `stage` (the stage adopts it), `Ok(true)` when the workflow is to act, `state_ambiguity` when the machine is
/// somewhere this workflow did not put it.
pub fn needs_action(
    stage: OnboardingStage,
    system_id: &str,
    machine: &Machine,
    deploy_started: bool,
) -> Result<bool, StageFailure> {
    match observed(stage, &machine.status, deploy_started) {
        Observed::SatisfiesCheckpoint => Ok(false),
        Observed::AsExpected | Observed::Stale => Ok(true),
        Observed::Conflicting => Err(StageFailure::new(
            FailureClass::StateAmbiguity,
            format!(
                "machine {system_id} is {} in MAAS, which {} did not expect",
                machine.status.name(),
                stage.as_str()
            ),
        )),
    }
}

/// The fresh observation a decision asks for, from one read of MAAS's machines: a second machine MAAS enlisted on
/// the node's BMC means two records claim one node, so ownership is unclear whatever this record's status says
/// (seed 000 section 7); a record deleted under the workflow is unclear ownership too.
pub fn observed_machines(
    stage: OnboardingStage,
    bmc_address: &str,
    system_id: &str,
    machines: &[Machine],
    deploy_started: bool,
) -> Observed {
    if unknown_machine(bmc_address, system_id, machines).is_some() {
        return Observed::Conflicting;
    }
    match machines.iter().find(|machine| machine.system_id == system_id) {
        Some(machine) => observed(stage, &machine.status, deploy_started),
        None => Observed::Conflicting,
    }
}

/// The fresh observation before the run knows its machine: found by its PXE MAC (which satisfies
/// `create_or_find_in_maas`), not found, or not read.
pub fn observed_before_create(stage: OnboardingStage, own: Result<Option<Machine>, MaasError>) -> Observed {
    match own {
        Ok(Some(_)) if stage == OnboardingStage::CreateOrFindInMaas => Observed::SatisfiesCheckpoint,
        Ok(_) => Observed::AsExpected,
        Err(_) => Observed::Stale,
    }
}

/// An earlier run of this workflow left the machine in a deploy state (it stopped mid-deploy): the safe full rerun
/// brings it back to Ready before it is commissioned again.
pub fn left_in_deploy(status: &MachineStatus) -> bool {
    use MachineStatus as M;
    matches!(status, M::Allocated | M::Deploying | M::Deployed | M::FailedDeployment)
}

/// After a run that died past its deploy request: a machine Deploying or Deployed is that deploy, accepted by MAAS,
/// and is adopted rather than aborted or released and deployed again.
pub fn interrupted_deploy(status: &MachineStatus) -> bool {
    matches!(status, MachineStatus::Deploying | MachineStatus::Deployed)
}

/// The call that brings a machine back towards Ready, after a fresh read of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToReady {
    /// Ready already.
    Ready,
    Release,
    /// An in-flight deploy is aborted.
    Abort,
    /// Nothing to call (MAAS is on its way, or the machine is not in a deploy state).
    Wait,
}

pub fn to_ready(status: &MachineStatus) -> ToReady {
    use MachineStatus as M;
    match status {
        M::Ready => ToReady::Ready,
        M::Deployed | M::FailedDeployment | M::Allocated => ToReady::Release,
        M::Deploying => ToReady::Abort,
        _ => ToReady::Wait,
    }
}

/// A machine that did not come back to Ready within the deploy bound: the deploy failure it started from.
pub fn not_back_to_ready(system_id: &str, bound_ms: u64) -> StageFailure {
    StageFailure::new(
        FailureClass::DeployCloudInitFailure,
        format!("machine {system_id} not back to Ready within {bound_ms} ms"),
    )
    .timed_out(TimeoutKind::Deploy)
}

/// Whether a compensation of the matrix is onboarding's to run: the releases and aborts back to a deployable state
/// (the one "if deploy started" only then). Interface links are re-made by the stage itself; the partial node row is
/// the controller's own record (this engine keeps none); the decommission compensations do not apply.
pub fn compensates(compensation: Compensation, deploy_started: bool) -> bool {
    use Compensation as K;
    match compensation {
        K::ReleaseToReadyIfDeployStarted => deploy_started,
        K::ReleaseToReady | K::AbortReleaseToCleanDeployableState => true,
        K::UnlinkRelinkInterface
        | K::DeletePartialNodeRow
        | K::QuarantineOnFailedValidation
        | K::AbortMarkFixedNoEraseRelease
        | K::RevertToRetiredOnUninstallFailure => false,
    }
}

// configure_storage, apply_roce_phase2, ensure_pxe_interface_auto

/// The boot disk the inventory names among the machine's disks: `Some(id)` when MAAS must be told to boot from it,
/// `None` when it already does; no such disk is a hardware mismatch.
pub fn boot_disk(disks: &[Disk], model: &str) -> Result<Option<u64>, StageFailure> {
    let Some(disk) = disks.iter().find(|disk| disk.model.contains(model)) else {
        let found: Vec<&str> = disks.iter().map(|disk| disk.model.as_str()).collect();
        return Err(StageFailure::new(
            FailureClass::HardwareMismatch,
            format!("no {model} boot disk among {}", found.join(", ")),
        ));
    };
    Ok((!disk.boot).then_some(disk.id))
}

/// The links a network stage makes: the interfaces to link in mode AUTO, and the subnet they go on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Links {
    pub interfaces: Vec<u64>,
    pub subnet: u64,
}

/// What `apply_roce_phase2` (every RoCE interface, as many as the inventory lists, on the RoCE VLAN) or
/// `ensure_pxe_interface_auto` (the interface with the node's PXE MAC, on the PXE VLAN) must link; a missing
/// interface, one on another VLAN or a VLAN without a subnet is a hardware mismatch.
pub fn links(
    stage: OnboardingStage,
    interfaces: &[Interface],
    subnets: &[Subnet],
    pxe_mac: &str,
    roce_nics: u32,
    pxe_vlan_vid: u16,
    roce_vlan_vid: u16,
) -> Result<Links, StageFailure> {
    let roce = stage == OnboardingStage::ApplyRocePhase2;
    let (wanted, vid): (Vec<&Interface>, u16) = if roce {
        (interfaces.iter().filter(|i| i.roce).collect(), roce_vlan_vid)
    } else {
        // The boot interface is the one with the node's PXE MAC, and it must be on the PXE VLAN.
        let pxe_mac = pxe_mac.to_lowercase();
        let boot: Vec<&Interface> = interfaces.iter().filter(|i| i.mac.to_lowercase() == pxe_mac).collect();
        if let Some(interface) = boot.first().filter(|i| i.vlan_vid != Some(pxe_vlan_vid)) {
            let on = interface.vlan_vid.map_or("no VLAN".to_owned(), |vid| format!("vlan {vid}"));
            let error =
                format!("the PXE interface {} ({pxe_mac}) is on {on}, not the PXE vlan {pxe_vlan_vid}", interface.name);
            return Err(StageFailure::new(FailureClass::HardwareMismatch, error));
        }
        (boot, pxe_vlan_vid)
    };
    if wanted.is_empty() {
        let what = if roce { "RoCE interface" } else { "PXE interface" };
        return Err(StageFailure::new(FailureClass::HardwareMismatch, format!("no {what} found")));
    }
    if roce && wanted.len() < roce_nics as usize {
        let error = format!("MAAS found {} RoCE interfaces; the node's inventory lists {roce_nics}", wanted.len());
        return Err(StageFailure::new(FailureClass::HardwareMismatch, error));
    }
    let Some(subnet) = subnets.iter().find(|subnet| subnet.vlan_vid == vid) else {
        return Err(StageFailure::new(FailureClass::HardwareMismatch, format!("no subnet on vlan {vid}")));
    };
    let interfaces = wanted.into_iter().filter(|interface| !interface.auto_linked).map(|i| i.id).collect();
    Ok(Links { interfaces, subnet: subnet.id })
}

// render_cloud_init, deploy_via_maas

/// The cloud-init user data the deploy hands MAAS: the node's name, the metadata host and its bootstrap token.
pub fn user_data(node: &str, metadata_host: &str, token: &Secret) -> Secret {
    Secret::new(format!(
        "#cloud-config\nfleetsim_node: {node}\nfleetsim_metadata_host: {metadata_host}\nfleetsim_bootstrap_token: {}\n",
        token.expose()
    ))
}

/// A refused deploy: "Failed to render preseed: …" (400) means what MAAS would install from cannot be built.
pub fn deploy_refused(error: &MaasError) -> StageFailure {
    match error {
        MaasError::Http { status: 400, .. } => {
            StageFailure::new(FailureClass::DeployCloudInitFailure, error.to_string())
        }
        error => maas(error),
    }
}

/// Whether a failed stage is a failed deploy that `classify_deploy_failure` reads MAAS's events for.
pub fn classifies_deploy_failure(stage: OnboardingStage, class: FailureClass) -> bool {
    stage == OnboardingStage::WaitForDeployed && class == FailureClass::DeployCloudInitFailure
}

/// `classify_deploy_failure`: the newest of MAAS's events for the machine, as evidence (lowercase).
pub fn deploy_failure_evidence(events: &[MaasEvent]) -> Vec<Evidence> {
    events
        .iter()
        .take(5)
        .map(|event| Evidence::DeployEvent {
            level: event.level.clone(),
            text: event.text.clone(),
            description: event.description.clone(),
        })
        .collect()
}

/// A deploy failure whose evidence names the datasource gets its own bounded recovery
/// (`recover_for_datasource_retry`: back to a clean deployable state, then deploy again). MAAS says so only in its
/// events' words ("DataSource not found"), so those are read, as the evidence shows them.
pub fn is_datasource_failure(failure: &StageFailure) -> bool {
    failure.evidence.iter().any(|evidence| evidence.to_string().contains("datasource"))
}

// ensure_hardware_sync_configured, wait_for_hardware_sync_healthy, wait_for_agent_enrollment

/// Hardware sync must be enabled on the deployed machine before its seed is registered.
pub fn hardware_sync_enabled(machine: &Machine) -> Result<(), StageFailure> {
    if machine.enable_hw_sync {
        return Ok(());
    }
    Err(StageFailure::new(FailureClass::HardwareSyncFailure, "hardware sync is not enabled on the machine"))
}

/// The hardware-sync seed over SSH failed: refused by the node is the sync's failure; no SSH at all (or another
/// host key) is the deployed machine's connectivity.
pub fn seed_failed(node: &str, error: &SshError) -> StageFailure {
    match error {
        SshError::Refused(error) => StageFailure::new(
            FailureClass::HardwareSyncFailure,
            format!("the hardware-sync seed failed on {node}: {error}"),
        ),
        error @ (SshError::Transport(_) | SshError::HostKeyMismatch { .. }) => StageFailure::new(
            FailureClass::PostDeployConnectivityFailure,
            format!("no SSH to the deployed machine {node}: {error}"),
        ),
    }
}

/// Section 6's hardware sync seed timeout: the seed did not answer within it (the row: `hardware_sync_failure`,
/// `failed_manual_intervention`, "operator fix then resume").
pub fn seed_timed_out(node: &str, bound_ms: u64) -> StageFailure {
    StageFailure::new(
        FailureClass::HardwareSyncFailure,
        format!("the hardware-sync seed on {node} did not complete within the seed timeout of {bound_ms} ms"),
    )
    .timed_out(TimeoutKind::HardwareSyncSeed)
}

/// Whether a retry of `stage` after a failure of `class` is preceded by a reseed: the hardware-sync health wait's
/// safe default ("resume with reseed") for a sync that did not become healthy.
pub fn reseeds_before_retry(stage: OnboardingStage, class: FailureClass) -> bool {
    stage == OnboardingStage::WaitForHardwareSyncHealthy && class == FailureClass::HardwareSyncFailure
}

pub fn hardware_sync_unhealthy(bound_ms: u64) -> StageFailure {
    StageFailure::new(FailureClass::HardwareSyncFailure, format!("hardware sync not healthy within {bound_ms} ms"))
        .timed_out(TimeoutKind::HardwareSyncHealth)
}

/// The node's agent is registered at the hub.
pub fn enrolled(snapshot: &HeartbeatSnapshot, node: &str) -> bool {
    snapshot.instances.iter().any(|row| row.instance == node && row.registered)
}

/// The hub could not be read, too many times in a row, while the agent was awaited.
pub fn hub_unreadable(error: &impl std::fmt::Display) -> StageFailure {
    StageFailure::new(FailureClass::UpstreamTransient, format!("the hub cannot be read: {error}"))
}

/// The machine the awaited agent will speak for must still be this workflow's deployed machine: another status is
/// an ambiguity, a machine gone from MAAS too; a read that fails says nothing.
pub fn awaited_agent_machine(system_id: &str, read: &Result<Machine, MaasError>) -> Option<StageFailure> {
    match read {
        Ok(machine) if machine.status != MachineStatus::Deployed => Some(StageFailure::new(
            FailureClass::StateAmbiguity,
            format!("machine {system_id} is {} in MAAS while its agent is awaited", machine.status.name()),
        )),
        Err(error @ MaasError::Http { status: 404, .. }) => Some(maas(error)),
        Ok(_) | Err(_) => None,
    }
}

pub fn agent_not_enrolled(node: &str, bound_ms: u64) -> StageFailure {
    StageFailure::new(FailureClass::AgentEnrollmentFailure, format!("no agent {node} enrolled within {bound_ms} ms"))
        .timed_out(TimeoutKind::AgentEnrollment)
}

/// The stall classifier's evidence, as the workflow reports it.
pub fn reported_evidence(evidence: &stall::Evidence) -> Evidence {
    match evidence {
        stall::Evidence::Silent { quiet_for_ms, stall_window_ms } => {
            Evidence::Silent { quiet_for_ms: *quiet_for_ms, stall_window_ms: *stall_window_ms }
        }
        stall::Evidence::LastEvent { text } => Evidence::LastEvent { text: text.clone() },
        stall::Evidence::MacDrift(machine) => unknown_machine_evidence(machine.clone()),
        stall::Evidence::ResolverServFail { host } => {
            Evidence::ResolverAnswer { host: host.clone(), answer: "SERVFAIL".to_owned() }
        }
        stall::Evidence::RegionWorkflow(service) => region_service_evidence(service),
    }
}

fn region_service_evidence(service: &RegionService) -> Evidence {
    Evidence::RegionService {
        service: service.name.clone(),
        status: service.status.clone(),
        info: service.status_info.clone(),
    }
}

/// The region's workflow services, read before any mutation (seed 001's first zero-cost read: "region Temporal worker
/// health"): one that does not run is MAAS's trouble (`upstream_transient`: resume once it is back), and the
/// workflow creates nothing a wedged region would accept and never carry out.
pub fn region_workflow(services: &[RegionService]) -> Result<(), StageFailure> {
    let Some(service) = services.iter().find(|service| service.is_unhealthy_workflow_service()) else { return Ok(()) };
    let mut failure = StageFailure::new(
        FailureClass::UpstreamTransient,
        format!(
            "the region's workflow service {} is {}: MAAS would accept commands and not run them",
            service.name, service.status
        ),
    );
    failure.evidence.push(region_service_evidence(service));
    Err(failure)
}

/// A discovery that timed out, with the region's workflow service when it does not run: then the machine was never
/// powered on by MAAS, and the class is MAAS's transient (`create_or_find_in_maas` lists it), not the PXE path's.
pub fn discovery_failure(mut failure: StageFailure, region_workflow: Option<RegionService>) -> StageFailure {
    if let Some(service) = region_workflow {
        failure.class = FailureClass::UpstreamTransient;
        failure.evidence.push(region_service_evidence(&service));
    }
    failure
}

/// The first region workflow service that is not running, for a silent wait's evidence.
pub fn unhealthy_workflow_service(services: &[RegionService]) -> Option<RegionService> {
    services.iter().find(|service| service.is_unhealthy_workflow_service()).cloned()
}

fn unknown_machine_evidence(machine: UnknownMachine) -> Evidence {
    Evidence::UnknownMachine { system_id: machine.system_id, mac: machine.mac, bmc_address: machine.bmc_address }
}

/// A wait for a machine status (`wait_for_ready`, `wait_for_deployed`) as a state machine: each poll the driver hands
/// it the machine it read and the events since the last poll, and asks for the verdict; under stall detection
/// (policy `current`) a silence longer than the stall window asks the driver for evidence (a stranger on the node's
/// BMC, the resolver's answer) and is classified at once from it; otherwise only MAAS's verdict or the stage's bound
/// ends the wait.
#[derive(Debug, Clone)]
pub struct MachineWait {
    stage: OnboardingStage,
    want: MachineStatus,
    bound_ms: u64,
    stall_detection: bool,
    classifier: StallClassifier,
    started_ms: u64,
    progress: ProgressEvidence,
    last_status: Option<MachineStatus>,
    /// The newest event id read: the next read asks for events after it.
    after: Option<u64>,
    seen: BTreeSet<u64>,
    read_failures: ReadFailures,
}

impl MachineWait {
    pub fn new(
        stage: OnboardingStage,
        want: MachineStatus,
        bound_ms: u64,
        stall_detection: bool,
        stall_window_ms: u64,
        started_ms: u64,
    ) -> MachineWait {
        MachineWait {
            stage,
            want,
            bound_ms,
            stall_detection,
            classifier: StallClassifier::new(stall_window_ms),
            started_ms,
            progress: ProgressEvidence::started_at(started_ms),
            last_status: None,
            after: None,
            seen: BTreeSet::new(),
            read_failures: ReadFailures::default(),
        }
    }

    /// The cursor of the next read of the machine's events.
    pub fn events_after(&self) -> Option<u64> {
        self.after
    }

    /// The machine as read at `now_ms`: a status change is progress.
    pub fn handle_machine(&mut self, now_ms: u64, machine: &Machine) {
        self.read_failures.handle_read();
        if self.last_status.as_ref() != Some(&machine.status) {
            if self.last_status.is_some() {
                self.progress.last_status_change_ms = Some(now_ms);
            }
            self.last_status = Some(machine.status.clone());
        }
    }

    /// The machine's events after [`Self::events_after`], newest first, as read at `now_ms`: a new one is progress.
    pub fn handle_events(&mut self, now_ms: u64, events: &[MaasEvent]) {
        let fresh: Vec<&MaasEvent> = events.iter().filter(|event| self.seen.insert(event.id)).collect();
        if let Some(newest) = fresh.first() {
            self.progress.last_event_ms = Some(now_ms);
            self.progress.last_event = Some(newest.text.clone());
        }
        self.after = events.iter().map(|event| event.id).max().or(self.after);
    }

    /// MAAS's verdict on the machine read this poll: the status waited for (`Ok`), a failure status (`Err`), or
    /// `None`: keep waiting.
    pub fn verdict(&self, system_id: &str, machine: Machine) -> Option<Result<Machine, StageFailure>> {
        if machine.status == self.want {
            return Some(Ok(machine));
        }
        let failure = match machine.status {
            MachineStatus::FailedCommissioning => {
                // Section 6: "upstream_transient or hardware_mismatch depending on MAAS status": a failed script is
                // the hardware's; a timeout is MAAS giving up on a silent node.
                let class = if machine.status_message.to_lowercase().contains("timed out") {
                    FailureClass::UpstreamTransient
                } else {
                    FailureClass::HardwareMismatch
                };
                let mut failure = StageFailure::new(class, format!("commissioning failed: {}", machine.status_message));
                failure
                    .evidence
                    .extend(self.progress.last_event.iter().map(|text| Evidence::LastEvent { text: text.clone() }));
                failure
            }
            MachineStatus::FailedDeployment => {
                let error = format!("deployment failed: {}", machine.status_message);
                StageFailure::new(FailureClass::DeployCloudInitFailure, error)
            }
            MachineStatus::Broken | MachineStatus::New => {
                let error = format!("machine {system_id} became {} while the workflow waited", machine.status.name());
                StageFailure::new(FailureClass::StateAmbiguity, error)
            }
            _ => return None,
        };
        Some(Err(failure))
    }

    /// A read of the machine that failed: a machine deleted from MAAS is an ambiguity at once; other failures end
    /// the wait once they are too many in a row.
    pub fn handle_read_error(&mut self, system_id: &str, error: &MaasError) -> Option<StageFailure> {
        if let MaasError::Http { status: 404, message, .. } = error {
            let error = format!("machine {system_id} was deleted from MAAS while the workflow waited: {message}");
            return Some(StageFailure::new(FailureClass::StateAmbiguity, error));
        }
        self.read_failures.handle_failure().then(|| maas(error))
    }

    /// After a poll's reads, at `now_ms`: whether the wait has been silent past the stall window (under stall
    /// detection only), so that the driver gathers evidence for [`Self::handle_evidence`].
    pub fn is_silent(&mut self, now_ms: u64) -> bool {
        self.progress.now_ms = now_ms;
        self.stall_detection && self.progress.quiet_for_ms() > self.classifier.stall_window_ms
    }

    /// The evidence gathered for a silence: a stranger on the node's BMC, and the resolver's answer for the metadata
    /// host (`None` when the run knows no metadata host). A stall classified from it ends the wait.
    pub fn handle_evidence(
        &mut self,
        unknown_machine: Option<UnknownMachine>,
        metadata_resolver: Option<ResolverProbe>,
        region_workflow: Option<RegionService>,
    ) -> Option<StageFailure> {
        self.progress.unknown_machine = unknown_machine;
        self.progress.region_workflow = region_workflow;
        if let Some(probe) = metadata_resolver {
            self.progress.metadata_resolver = probe;
        }
        match self.classifier.classify(&self.progress) {
            StallVerdict::Stalled { class, evidence } => Some(StageFailure {
                class,
                error: format!("{} stalled", self.stage.as_str()),
                evidence: evidence.iter().map(reported_evidence).collect(),
                timeout: None,
            }),
            StallVerdict::Slow { .. } => None,
        }
    }

    /// The stage's own bound, at `now_ms`: a deploy that never came is the deploy's failure, anything else transient.
    pub fn timed_out(&self, now_ms: u64) -> Option<StageFailure> {
        if now_ms.saturating_sub(self.started_ms) < self.bound_ms {
            return None;
        }
        // Section 6: the deploy timeout is `deploy_cloud_init_failure`; the commission timeout is
        // "upstream_transient or hardware_mismatch depending on MAAS status": a machine MAAS has failed or broken is
        // the hardware's (a manual fix), one still commissioning or silent is MAAS's (resume).
        let class = match (self.stage, &self.last_status) {
            (OnboardingStage::WaitForDeployed, _) => FailureClass::DeployCloudInitFailure,
            (OnboardingStage::WaitForReady, Some(MachineStatus::FailedCommissioning | MachineStatus::Broken)) => {
                FailureClass::HardwareMismatch
            }
            _ => FailureClass::UpstreamTransient,
        };
        let timeout =
            if self.stage == OnboardingStage::WaitForDeployed { TimeoutKind::Deploy } else { TimeoutKind::Commission };
        let error = format!("{} not reached within {} ms", self.want.name(), self.bound_ms);
        Some(StageFailure::new(class, error).timed_out(timeout))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ports::InstanceHeartbeat;
    use crate::workflow::failure::READ_FAILURES_MAX;
    use FailureClass as F;
    use MachineStatus as M;
    use OnboardingStage as S;

    /// Evidence as a person reads it (and the trace records it).
    fn sentences(evidence: &[Evidence]) -> Vec<String> {
        evidence.iter().map(ToString::to_string).collect()
    }

    fn machine(system_id: &str, status: MachineStatus) -> Machine {
        Machine {
            system_id: system_id.into(),
            hostname: "node-01".into(),
            status,
            status_message: String::new(),
            power_address: Some("10.10.1.1".into()),
            macs: vec!["52:54:00:00:00:01".into()],
            enable_hw_sync: true,
            hw_sync_healthy: false,
        }
    }

    fn event(id: u64, level: &str, text: &str) -> MaasEvent {
        MaasEvent { id, level: level.into(), text: text.into(), description: "detail".into() }
    }

    fn site() -> SiteConfig {
        SiteConfig {
            enabled: true,
            metadata_host: "maas-internal".into(),
            pxe_vlan_vid: 10,
            roce_vlan_vid: 20,
            roce_mandatory: false,
            timeouts: Default::default(),
        }
    }

    fn subnet(id: u64, vlan_vid: u16) -> Subnet {
        Subnet { id, cidr: format!("10.{vlan_vid}.0.0/24"), vlan_vid, mtu: 1500 }
    }

    fn class(result: Result<impl std::fmt::Debug, StageFailure>) -> Option<FailureClass> {
        result.err().map(|failure| failure.class)
    }

    #[test]
    fn observed_state_is_adopted_when_it_satisfies_the_stage_and_conflicts_when_advanced_elsewhere() {
        use Observed::{AsExpected, Conflicting, SatisfiesCheckpoint};
        let cases = [
            (S::CommissionNode, M::Commissioning, false, SatisfiesCheckpoint),
            (S::CommissionNode, M::Ready, false, SatisfiesCheckpoint),
            (S::CommissionNode, M::New, false, AsExpected),
            (S::CommissionNode, M::FailedCommissioning, false, AsExpected),
            (S::CommissionNode, M::Deployed, false, Conflicting),
            (S::WaitForReady, M::Ready, false, SatisfiesCheckpoint),
            (S::WaitForReady, M::Commissioning, false, AsExpected),
            (S::WaitForReady, M::Allocated, false, Conflicting),
            (S::DeployViaMaas, M::Deploying, true, SatisfiesCheckpoint),
            (S::DeployViaMaas, M::Deploying, false, AsExpected),
            (S::DeployViaMaas, M::Ready, false, AsExpected),
            (S::DeployViaMaas, M::Deployed, false, SatisfiesCheckpoint),
            (S::WaitForDeployed, M::Deploying, true, AsExpected),
            (S::WaitForDeployed, M::New, true, Conflicting),
            (S::ConfigureStorage, M::Broken, false, Conflicting),
            (S::ConfigureStorage, M::Ready, false, AsExpected),
        ];
        for (stage, status, deploy_started, expected) in cases {
            assert_eq!(observed(stage, &status, deploy_started), expected, "{} {status:?}", stage.as_str());
        }
    }

    #[test]
    fn the_read_before_a_commission_or_deploy_adopts_acts_or_calls_it_ambiguous() {
        let ready = machine("abc", M::Ready);
        assert_eq!(needs_action(S::CommissionNode, "abc", &ready, false), Ok(false), "adopted");
        assert_eq!(needs_action(S::DeployViaMaas, "abc", &ready, false), Ok(true), "deploy it");
        let failure = needs_action(S::CommissionNode, "abc", &machine("abc", M::Deployed), false).unwrap_err();
        assert_eq!(failure.class, F::StateAmbiguity);
        assert_eq!(failure.error, "machine abc is Deployed in MAAS, which commission_node did not expect");
    }

    #[test]
    fn a_fresh_observation_sees_strangers_and_deletions_as_conflicts() {
        let own = machine("abc", M::Ready);
        let mut stranger = machine("new", M::New);
        stranger.macs = vec!["52:54:00:00:00:99".into()];
        let bmc = "10.10.1.1";
        assert_eq!(
            observed_machines(S::WaitForReady, bmc, "abc", std::slice::from_ref(&own), false),
            Observed::SatisfiesCheckpoint
        );
        assert_eq!(
            observed_machines(S::WaitForReady, bmc, "abc", &[own.clone(), stranger], false),
            Observed::Conflicting
        );
        assert_eq!(observed_machines(S::WaitForReady, bmc, "abc", &[], false), Observed::Conflicting, "deleted");
        assert_eq!(observed_before_create(S::CreateOrFindInMaas, Ok(Some(own.clone()))), Observed::SatisfiesCheckpoint);
        assert_eq!(observed_before_create(S::LoadSiteConfig, Ok(Some(own))), Observed::AsExpected);
        let unreachable = MaasError::Transport(TransportError::Timeout);
        assert_eq!(observed_before_create(S::CreateOrFindInMaas, Err(unreachable)), Observed::Stale);
    }

    #[test]
    fn only_a_new_machine_of_another_id_on_the_node_s_bmc_is_an_unknown_machine() {
        let mut stranger = machine("new", M::New);
        stranger.macs = vec!["52:54:00:00:00:99".into()];
        let found = unknown_machine("10.10.1.1", "abc", std::slice::from_ref(&stranger)).expect("a stranger");
        assert_eq!((found.system_id.as_str(), found.mac.as_str()), ("new", "52:54:00:00:00:99"));
        assert_eq!(unknown_machine("10.10.1.1", "new", std::slice::from_ref(&stranger)), None, "its own record");
        assert_eq!(unknown_machine("10.10.1.2", "abc", std::slice::from_ref(&stranger)), None, "another BMC");
        let commissioning = machine("new", M::Commissioning);
        assert_eq!(unknown_machine("10.10.1.1", "abc", &[commissioning]), None, "not newly enlisted");
        let own = machine("abc", M::Ready);
        assert_eq!(own_machine(vec![own.clone()], "52:54:00:00:00:01").map(|m| m.system_id), Some("abc".into()));
        assert_eq!(own_machine(vec![own], "52:54:00:00:00:02"), None);
    }

    #[test]
    fn the_site_configuration_and_the_resolver_are_judged_before_anything_changes() {
        assert_eq!(site_vlans(&site(), &[subnet(1, 10), subnet(2, 20)]), Ok(()));
        let failure = site_vlans(&site(), &[subnet(1, 10)]).unwrap_err();
        assert_eq!(
            (failure.class, failure.error.as_str()),
            (F::SiteCapabilityMissing, "no subnet on vlan 20, which the site configuration names")
        );
        let address = Ok(DnsAnswer::Address("10.0.0.5".into()));
        let servfail = Ok(DnsAnswer::ServFail);
        let nxdomain = Ok(DnsAnswer::NxDomain);
        let silence = Err(TransportError::Timeout);
        let cases = [
            (&address, true, None),
            (&address, false, None),
            (&servfail, true, Some(F::SiteCapabilityMissing)),
            (&nxdomain, true, Some(F::SiteCapabilityMissing)),
            (&servfail, false, None),
            (&silence, true, Some(F::UpstreamTransient)),
            (&silence, false, Some(F::UpstreamTransient)),
        ];
        for (answer, observe_first, expected) in cases {
            assert_eq!(class(metadata_resolver("maas-internal", answer, observe_first)), expected, "{answer:?}");
        }
        let failure = metadata_resolver("maas-internal", &servfail, true).unwrap_err();
        assert_eq!(sentences(&failure.evidence), ["the rack resolver answers SERVFAIL for maas-internal"]);
        assert_eq!(resolver_answer(&address), "10.0.0.5");
        assert_eq!(resolver_answer(&silence), "no answer (timed out)");
        assert_eq!(resolver_probe("maas-internal", &address), ResolverProbe::Answered);
        assert_eq!(resolver_probe("maas-internal", &silence), ResolverProbe::ServFail { host: "maas-internal".into() });
    }

    #[test]
    fn discovery_ends_on_a_power_failure_a_pxe_boot_a_stranger_or_the_stall_window() {
        let pxe = [event(3, "INFO", "Performing PXE boot"), event(2, "INFO", "Powering on")];
        assert_eq!(discovery(&pxe), Some(Ok(())));
        let power = [event(3, "ERROR", "Failed to power on node"), event(2, "INFO", "Commissioning")];
        assert_eq!(discovery(&power).map(class), Some(Some(F::BmcPowerFailure)));
        // A power failure before the action that started this one is not this action's.
        let older = [event(3, "INFO", "Commissioning"), event(2, "ERROR", "Failed to power on node")];
        assert_eq!(power_failure(&older), None);
        assert_eq!(discovery(&older), None);
        let stranger = UnknownMachine { system_id: "new".into(), mac: "m".into(), bmc_address: "b".into() };
        let failure = discovery_stranger("abc", stranger);
        assert_eq!(failure.class, F::StateAmbiguity);
        assert!(matches!(&failure.evidence[..], [Evidence::UnknownMachine { system_id, .. }] if system_id == "new"));
        assert_eq!(sentences(&failure.evidence), ["unknown machine new enlisted with MAC m on this node's BMC b"]);
        assert_eq!(discovery_silent("abc", 299_999, 300_000), None);
        assert_eq!(discovery_silent("abc", 300_000, 300_000).map(|f| f.class), Some(F::PxeDiscoveryFailure));
    }

    #[test]
    fn a_machine_comes_back_to_ready_by_abort_or_release_after_a_fresh_read() {
        let cases = [
            (M::Ready, ToReady::Ready),
            (M::Deployed, ToReady::Release),
            (M::FailedDeployment, ToReady::Release),
            (M::Allocated, ToReady::Release),
            (M::Deploying, ToReady::Abort),
            (M::Releasing, ToReady::Wait),
            (M::New, ToReady::Wait),
        ];
        for (status, call) in cases {
            assert_eq!(to_ready(&status), call, "{status:?}");
        }
        for status in [M::Allocated, M::Deploying, M::Deployed, M::FailedDeployment] {
            assert!(left_in_deploy(&status), "{status:?}");
        }
        assert!(!left_in_deploy(&M::Ready));
        assert!(interrupted_deploy(&M::Deploying) && interrupted_deploy(&M::Deployed));
        assert!(!interrupted_deploy(&M::FailedDeployment));
        assert!(compensates(Compensation::ReleaseToReadyIfDeployStarted, true));
        assert!(!compensates(Compensation::ReleaseToReadyIfDeployStarted, false));
        assert!(compensates(Compensation::AbortReleaseToCleanDeployableState, false));
        assert!(!compensates(Compensation::UnlinkRelinkInterface, true), "the stage relinks by itself");
        assert!(!compensates(Compensation::AbortMarkFixedNoEraseRelease, true), "decommission's");
    }

    #[test]
    fn storage_and_networks_are_hardware_mismatches_when_the_machine_lacks_them() {
        let disk =
            |id, model: &str, boot| Disk { id, name: format!("sd{id}"), model: model.into(), serial: "s".into(), boot };
        assert_eq!(boot_disk(&[disk(1, "PERC", true), disk(2, "Dell BOSS-N1", false)], "BOSS"), Ok(Some(2)));
        assert_eq!(boot_disk(&[disk(2, "Dell BOSS-N1", true)], "BOSS"), Ok(None), "already the boot disk");
        let failure = boot_disk(&[disk(1, "PERC", true)], "BOSS").unwrap_err();
        assert_eq!((failure.class, failure.error.as_str()), (F::HardwareMismatch, "no BOSS boot disk among PERC"));
        let interface = |id, mac: &str, vlan_vid, auto_linked, roce| Interface {
            id,
            name: format!("eth{id}"),
            mac: mac.into(),
            vlan_vid,
            auto_linked,
            roce,
        };
        let pxe = interface(1, "52:54:00:00:00:01", Some(10), false, false);
        let roce = [interface(2, "r2", Some(20), false, true), interface(3, "r3", Some(20), true, true)];
        let subnets = [subnet(7, 10), subnet(8, 20)];
        let all: Vec<Interface> = [pxe.clone()].into_iter().chain(roce.clone()).collect();
        let pxe_links = links(S::EnsurePxeInterfaceAuto, &all, &subnets, "52:54:00:00:00:01", 2, 10, 20);
        assert_eq!(pxe_links, Ok(Links { interfaces: vec![1], subnet: 7 }));
        let roce_links = links(S::ApplyRocePhase2, &all, &subnets, "52:54:00:00:00:01", 2, 10, 20);
        assert_eq!(roce_links, Ok(Links { interfaces: vec![2], subnet: 8 }), "the linked one is left alone");
        let too_few = links(S::ApplyRocePhase2, &all, &subnets, "52:54:00:00:00:01", 3, 10, 20).unwrap_err();
        assert_eq!(too_few.error, "MAAS found 2 RoCE interfaces; the node's inventory lists 3");
        let wrong_vlan = interface(1, "52:54:00:00:00:01", Some(30), false, false);
        let failure = links(S::EnsurePxeInterfaceAuto, &[wrong_vlan], &subnets, "52:54:00:00:00:01", 0, 10, 20);
        assert_eq!(
            failure.unwrap_err().error,
            "the PXE interface eth1 (52:54:00:00:00:01) is on vlan 30, not the PXE vlan 10"
        );
        let cases = [
            (
                links(S::ApplyRocePhase2, std::slice::from_ref(&pxe), &subnets, "x", 0, 10, 20),
                "no RoCE interface found",
            ),
            (
                links(S::EnsurePxeInterfaceAuto, &roce, &subnets, "52:54:00:00:00:01", 0, 10, 20),
                "no PXE interface found",
            ),
            (
                links(S::EnsurePxeInterfaceAuto, &all, &[subnet(8, 20)], "52:54:00:00:00:01", 0, 10, 20),
                "no subnet on vlan 10",
            ),
        ];
        for (result, error) in cases {
            let failure = result.unwrap_err();
            assert_eq!((failure.class, failure.error.as_str()), (F::HardwareMismatch, error));
        }
    }

    #[test]
    fn deploy_hardware_sync_and_enrolment_failures_carry_their_classes() {
        let preseed = MaasError::Http { status: 400, message: "Failed to render preseed".into(), retry_after_s: None };
        assert_eq!(deploy_refused(&preseed).class, F::DeployCloudInitFailure);
        let conflict = MaasError::Http { status: 409, message: "not ready".into(), retry_after_s: None };
        assert_eq!(deploy_refused(&conflict).class, F::StateAmbiguity);
        assert!(classifies_deploy_failure(S::WaitForDeployed, F::DeployCloudInitFailure));
        assert!(!classifies_deploy_failure(S::DeployViaMaas, F::DeployCloudInitFailure));
        assert!(!classifies_deploy_failure(S::WaitForDeployed, F::UpstreamTransient));
        let events =
            [event(9, "ERROR", "Node installation failure"), event(8, "INFO", "cloud-init: DataSource not found")];
        let evidence = deploy_failure_evidence(&events);
        assert_eq!(
            sentences(&evidence),
            ["error: node installation failure detail", "info: cloud-init: datasource not found detail"]
        );
        let mut failure = StageFailure::new(F::DeployCloudInitFailure, "deployment failed");
        assert!(!is_datasource_failure(&failure));
        failure.evidence = evidence;
        assert!(is_datasource_failure(&failure));
        let mut no_sync = machine("abc", M::Deployed);
        no_sync.enable_hw_sync = false;
        assert_eq!(class(hardware_sync_enabled(&no_sync)), Some(F::HardwareSyncFailure));
        assert_eq!(hardware_sync_enabled(&machine("abc", M::Deployed)), Ok(()));
        assert_eq!(seed_failed("n", &SshError::Refused("exit 1".into())).class, F::HardwareSyncFailure);
        assert_eq!(
            seed_failed("n", &SshError::Transport(TransportError::Timeout)).class,
            F::PostDeployConnectivityFailure
        );
        let other_key = SshError::HostKeyMismatch { presented: "k".into() };
        assert_eq!(seed_failed("n", &other_key).class, F::PostDeployConnectivityFailure);
        let row = |instance: &str, registered| InstanceHeartbeat {
            instance: instance.into(),
            last_heartbeat_ms: 0,
            registered,
            revision: None,
        };
        let snapshot = HeartbeatSnapshot { hub_now_ms: 0, instances: vec![row("n", false), row("m", true)] };
        assert!(!enrolled(&snapshot, "n"), "a tombstoned row is not an enrolment");
        assert!(enrolled(&snapshot, "m"));
        assert_eq!(awaited_agent_machine("abc", &Ok(machine("abc", M::Deployed))), None);
        assert_eq!(
            awaited_agent_machine("abc", &Ok(machine("abc", M::Ready))).map(|f| f.class),
            Some(F::StateAmbiguity)
        );
        let gone = MaasError::Http { status: 404, message: "gone".into(), retry_after_s: None };
        assert_eq!(awaited_agent_machine("abc", &Err(gone)).map(|f| f.class), Some(F::StateAmbiguity));
        assert_eq!(awaited_agent_machine("abc", &Err(MaasError::Transport(TransportError::Timeout))), None);
        assert_eq!(agent_not_enrolled("n", 900_000).class, F::AgentEnrollmentFailure);
        assert_eq!(hub_unreadable(&"timed out").class, F::UpstreamTransient);
    }

    #[test]
    fn a_gap_in_what_the_run_learnt_is_a_failure_of_its_own() {
        let failure = produced::<Secret>(None, "cloud-init rendered").unwrap_err();
        assert_eq!((failure.class, failure.error.as_str()), (F::InputConfigError, "no cloud-init rendered"));
    }

    fn wait(stall_detection: bool) -> MachineWait {
        MachineWait::new(S::WaitForReady, M::Ready, 35 * 60_000, stall_detection, 300_000, 0)
    }

    #[test]
    fn a_wait_ends_on_the_status_it_waits_for_or_on_maas_s_failure_status() {
        let wait = wait(true);
        assert!(matches!(wait.verdict("abc", machine("abc", M::Ready)), Some(Ok(_))));
        assert!(wait.verdict("abc", machine("abc", M::Commissioning)).is_none());
        let mut timed_out = machine("abc", M::FailedCommissioning);
        timed_out.status_message = "Commissioning Timed Out".into();
        let mut script = machine("abc", M::FailedCommissioning);
        script.status_message = "smartctl failed".into();
        let cases = [
            (timed_out, F::UpstreamTransient),
            (script, F::HardwareMismatch),
            (machine("abc", M::FailedDeployment), F::DeployCloudInitFailure),
            (machine("abc", M::Broken), F::StateAmbiguity),
            (machine("abc", M::New), F::StateAmbiguity),
        ];
        for (machine, expected) in cases {
            let status = machine.status.clone();
            assert_eq!(wait.verdict("abc", machine).map(class), Some(Some(expected)), "{status:?}");
        }
    }

    #[test]
    fn a_region_whose_workflow_worker_is_dead_is_maas_trouble_named_with_its_service() {
        let service = |name: &str, status: &str| RegionService {
            name: name.into(),
            status: status.into(),
            status_info: if status == "dead" { "Not enough hosts to serve the request".into() } else { String::new() },
        };
        let healthy =
            [service("regiond", "running"), service("temporal", "running"), service("temporal-worker", "running")];
        assert_eq!(region_workflow(&healthy), Ok(()));
        // A region service that is not a workflow service does not stop the workflow.
        assert_eq!(region_workflow(&[service("bind9", "dead"), service("temporal-worker", "running")]), Ok(()));
        let wedged = [service("temporal", "running"), service("temporal-worker", "dead")];
        let failure = region_workflow(&wedged).unwrap_err();
        assert_eq!(failure.class, F::UpstreamTransient);
        assert_eq!(
            sentences(&failure.evidence),
            ["the region's temporal-worker service is dead: Not enough hosts to serve the request"]
        );
        // A discovery that timed out while the region was wedged is MAAS's transient with the service as evidence;
        // without a dead service it stays the PXE path's failure.
        let silent = discovery_silent("abc", 1_200_000, 1_200_000).unwrap();
        assert_eq!(discovery_failure(silent.clone(), None).class, F::PxeDiscoveryFailure);
        let wedged_discovery = discovery_failure(silent, unhealthy_workflow_service(&wedged));
        assert_eq!(wedged_discovery.class, F::UpstreamTransient);
        assert_eq!(wedged_discovery.evidence.len(), 2, "no PXE boot, and the dead worker");
        assert_eq!(wedged_discovery.timeout, Some(TimeoutKind::Discovery));
        // A silent wait's stall names the dead worker too.
        let mut wait = MachineWait::new(S::WaitForReady, M::Ready, 35 * 60_000, true, 300_000, 0);
        wait.handle_machine(0, &machine("abc", M::Commissioning));
        assert!(wait.is_silent(300_001));
        let stall = wait.handle_evidence(None, None, unhealthy_workflow_service(&wedged)).expect("a stall");
        assert_eq!(stall.class, F::UpstreamTransient);
        assert!(sentences(&stall.evidence).iter().any(|s| s.contains("temporal-worker service is dead")), "{stall:?}");
    }

    #[test]
    fn timeouts_are_typed_and_the_commission_timeout_is_classed_by_the_machines_status() {
        assert_eq!(seed_timed_out("node-01", 600_000).timeout, Some(TimeoutKind::HardwareSyncSeed));
        assert_eq!(seed_timed_out("node-01", 600_000).class, F::HardwareSyncFailure);
        assert_eq!(hardware_sync_unhealthy(1).timeout, Some(TimeoutKind::HardwareSyncHealth));
        assert_eq!(agent_not_enrolled("node-01", 1).timeout, Some(TimeoutKind::AgentEnrollment));
        assert_eq!(not_back_to_ready("abc", 1).timeout, Some(TimeoutKind::Deploy));
        let mut still_commissioning = MachineWait::new(S::WaitForReady, M::Ready, 1_000, true, 300_000, 0);
        still_commissioning.handle_machine(0, &machine("abc", M::Commissioning));
        let timed_out = still_commissioning.timed_out(1_000).unwrap();
        assert_eq!((timed_out.class, timed_out.timeout), (F::UpstreamTransient, Some(TimeoutKind::Commission)));
        let mut broken = MachineWait::new(S::WaitForReady, M::Ready, 1_000, true, 300_000, 0);
        broken.handle_machine(0, &machine("abc", M::Broken));
        assert_eq!(broken.timed_out(1_000).unwrap().class, F::HardwareMismatch);
        let mut deploying = MachineWait::new(S::WaitForDeployed, M::Deployed, 1_000, true, 300_000, 0);
        deploying.handle_machine(0, &machine("abc", M::Deploying));
        let deploy = deploying.timed_out(1_000).unwrap();
        assert_eq!((deploy.class, deploy.timeout), (F::DeployCloudInitFailure, Some(TimeoutKind::Deploy)));
        assert!(reseeds_before_retry(S::WaitForHardwareSyncHealthy, F::HardwareSyncFailure));
        assert!(!reseeds_before_retry(S::WaitForHardwareSyncHealthy, F::UpstreamTransient));
        assert!(!reseeds_before_retry(S::EnsureHardwareSyncConfigured, F::HardwareSyncFailure));
    }

    #[test]
    fn a_failed_commissioning_carries_the_last_event_as_evidence() {
        let mut wait = wait(true);
        wait.handle_machine(0, &machine("abc", M::Commissioning));
        wait.handle_events(0, &[event(4, "INFO", "Loading ephemeral"), event(3, "INFO", "Commissioning")]);
        assert_eq!(wait.events_after(), Some(4));
        let failure = wait.verdict("abc", machine("abc", M::FailedCommissioning)).unwrap().unwrap_err();
        assert_eq!(sentences(&failure.evidence), ["last event: Loading ephemeral"]);
    }

    #[test]
    fn a_silent_wait_asks_for_evidence_and_is_classified_from_it() {
        let mut wait = wait(true);
        wait.handle_machine(0, &machine("abc", M::Commissioning));
        assert!(!wait.is_silent(300_000), "at the window, not past it");
        // An event is progress: the silence starts again.
        wait.handle_events(200_000, &[event(1, "INFO", "Loading ephemeral")]);
        assert!(!wait.is_silent(500_000));
        assert!(wait.is_silent(500_001));
        let servfail = ResolverProbe::ServFail { host: "maas-internal".into() };
        let failure = wait.handle_evidence(None, Some(servfail), None).expect("a stall");
        assert_eq!((failure.class, failure.error.as_str()), (F::SiteCapabilityMissing, "wait_for_ready stalled"));
        assert_eq!(
            sentences(&failure.evidence),
            [
                "the rack resolver answers SERVFAIL for maas-internal",
                "no event and no status change for 300001 ms (stall window 300000 ms)",
                "last event: Loading ephemeral",
            ]
        );
        // An event already seen is not progress again.
        wait.handle_events(600_000, &[event(1, "INFO", "Loading ephemeral")]);
        assert!(wait.is_silent(600_000));
    }

    #[test]
    fn a_legacy_wait_is_never_silent_and_every_wait_has_a_bound() {
        let mut legacy = wait(false);
        assert!(!legacy.is_silent(30 * 60_000));
        assert_eq!(legacy.timed_out(35 * 60_000 - 1), None);
        assert_eq!(legacy.timed_out(35 * 60_000).map(|f| f.class), Some(F::UpstreamTransient));
        let deployed = MachineWait::new(S::WaitForDeployed, M::Deployed, 1_000, true, 300_000, 0);
        let failure = deployed.timed_out(1_000).unwrap();
        assert_eq!(
            (failure.class, failure.error.as_str()),
            (F::DeployCloudInitFailure, "Deployed not reached within 1000 ms")
        );
    }

    #[test]
    fn a_commissioning_never_dispatched_has_no_pxe_boot_and_no_power_failure_since_it_was_accepted() {
        let event = |text: &str, level: &str| event(0, level, text);
        let accepted = [
            event("Node changed status", "DEBUG"),
            event("Commissioning", "INFO"),
            event("User starting node commissioning", "DEBUG"),
        ];
        assert!(commissioning_never_dispatched(&accepted), "other events since it was accepted do not start it");
        let booted = [event("Performing PXE boot", "INFO"), event("Commissioning", "INFO")];
        assert!(!commissioning_never_dispatched(&booted));
        let power = [event("Failed to power cycle node", "ERROR"), event("Commissioning", "INFO")];
        assert!(!commissioning_never_dispatched(&power), "a power failure is its own diagnosis");
        // The newest commissioning counts: an older one that booted says nothing of it.
        let again =
            [event("Commissioning", "INFO"), event("Performing PXE boot", "INFO"), event("Commissioning", "INFO")];
        assert!(commissioning_never_dispatched(&again));
        assert!(!commissioning_never_dispatched(&[]), "no event: unknown, not never");
    }

    /// Found by cargo-mutants (`docs/testing.md`): MAAS's power failure counts only since the newest commissioning or
    /// deploy began, not from an earlier attempt.
    #[test]
    fn a_power_failure_of_an_earlier_attempt_is_not_this_one_s() {
        let event = |text: &str, level: &str| event(0, level, text);
        let earlier = [
            event("Performing PXE boot", "INFO"),
            event("Commissioning", "INFO"),
            event("Failed to power cycle node", "ERROR"),
        ];
        assert!(power_failure(&earlier).is_none());
        let now = [event("Failed to power cycle node", "ERROR"), event("Deploying", "INFO")];
        assert_eq!(power_failure(&now).map(|failure| failure.class), Some(FailureClass::BmcPowerFailure));
        // Only MAAS's power failure, at its ERROR level: another error, or the same words logged lower, is not one.
        let other_error = [event("Script result failed", "ERROR"), event("Commissioning", "INFO")];
        assert!(power_failure(&other_error).is_none());
        let not_an_error = [event("Failed to power cycle node", "INFO"), event("Commissioning", "INFO")];
        assert!(power_failure(&not_an_error).is_none());
    }

    #[test]
    fn a_wait_gives_up_on_a_deleted_machine_at_once_and_on_an_unreachable_region_after_its_reads() {
        let mut wait = wait(true);
        let gone = MaasError::Http { status: 404, message: "No Machine matches".into(), retry_after_s: None };
        let failure = wait.handle_read_error("abc", &gone).unwrap();
        assert_eq!(failure.error, "machine abc was deleted from MAAS while the workflow waited: No Machine matches");
        let busy = MaasError::Http { status: 503, message: "busy".into(), retry_after_s: Some(5) };
        let verdicts: Vec<bool> =
            (0..READ_FAILURES_MAX).map(|_| wait.handle_read_error("abc", &busy).is_some()).collect();
        assert_eq!(verdicts, [false, false, false, true]);
        // A good read in between starts the count again.
        wait.handle_machine(0, &machine("abc", M::Commissioning));
        assert!(wait.handle_read_error("abc", &busy).is_none());
    }
}
