//! The decommission stages' judgements, sans-I/O: given what the inventory, MAAS and the secrets store answered,
//! whether the stage is done (or already was), what the driver does next, or which failure class it failed with.
//! The driver reads the ports, hands the answers here and applies the verdict; every failure class the workflow
//! reports is chosen in this file (or in the core's classifier, [`crate::workflow::failure`]).

use crate::matrix::{Compensation, DecommissionStage, FailureClass, NodeState};
use crate::ports::fleet::{FleetError, FleetRecord, NodeTask, TaskOutcome};
use crate::ports::site::{MaasError, Machine, MachineStatus, PowerState};
use crate::workflow::Observed;
use crate::workflow::failure::{BmcAnswer, StageFailure};

/// How decommission reads a MAAS 503 that names the BMC: as the BMC's failure (its power-off and power query ask
/// the BMC while the call is open).
pub const BMC: BmcAnswer = BmcAnswer::PowerFailure;

/// A failed MAAS call of a decommission stage.
pub fn maas(error: &MaasError) -> StageFailure {
    StageFailure::maas(error, BMC)
}

/// Statuses a decommission may release from, or has already released to.
pub fn releasable_or_released(status: &MachineStatus) -> bool {
    matches!(
        status,
        MachineStatus::Ready
            | MachineStatus::Allocated
            | MachineStatus::Deploying
            | MachineStatus::Deployed
            | MachineStatus::FailedDeployment
            | MachineStatus::Broken
            | MachineStatus::DiskErasing
            | MachineStatus::FailedDiskErasing
            | MachineStatus::FailedReleasing
            | MachineStatus::Releasing
    )
}

/// An inventory transition a stage makes, or the adoption of one already made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// The record is already where the stage puts it: adopted, nothing called.
    Adopt,
    /// Move the record from `from` to the stage's state.
    Move { from: NodeState },
}

fn no_record(node: &str) -> StageFailure {
    StageFailure::new(FailureClass::StateAmbiguity, format!("no inventory record for {node}"))
}

/// `disable_node`: a quarantined or retired node takes no work already; any other is quarantined; no record at all
/// is an ambiguity (whose node is this?).
pub fn disable(node: &str, record: Option<&FleetRecord>) -> Result<Transition, StageFailure> {
    let record = record.ok_or_else(|| no_record(node))?;
    Ok(match record.state {
        NodeState::Quarantined | NodeState::Retired => Transition::Adopt,
        from => Transition::Move { from },
    })
}

/// `force_release_allocations`: every allocation must be gone; one that stays is the inventory's trouble, retried.
pub fn allocations_released(node: &str, remaining: &[String]) -> Result<(), StageFailure> {
    if remaining.is_empty() {
        return Ok(());
    }
    Err(StageFailure::new(
        FailureClass::UpstreamTransient,
        format!("allocations remain attached to {node}: {}", remaining.join(", ")),
    ))
}

/// What an agent that does not answer a stage's node task means there: the drain and the uninstall need the agent
/// (`agent_enrollment_failure`); the cleanup's tasks are retried as transient.
pub fn unreachable_agent(stage: DecommissionStage) -> FailureClass {
    match stage {
        DecommissionStage::CleanupStorageScrubGpuValidateCleanNode => FailureClass::UpstreamTransient,
        _ => FailureClass::AgentEnrollmentFailure,
    }
}

/// The end of one node task: done; residue found (the node is not clean: a hardware mismatch); failed (the
/// uninstall's failure is the agent's, another task's as its agent being unreachable is); or not run.
pub fn task_result(
    node: &str,
    task: NodeTask,
    unreachable: FailureClass,
    result: Result<TaskOutcome, FleetError>,
) -> Result<(), StageFailure> {
    match result {
        Ok(TaskOutcome::Done) => Ok(()),
        Ok(TaskOutcome::Residue(what)) => Err(StageFailure::new(
            FailureClass::HardwareMismatch,
            format!("{} found residue on {node}: {what}", task.as_str()),
        )),
        Ok(TaskOutcome::Failed(error)) => Err(StageFailure::new(
            if task == NodeTask::Uninstall { FailureClass::AgentEnrollmentFailure } else { unreachable },
            format!("{} failed on {node}: {error}", task.as_str()),
        )),
        Err(FleetError::AgentUnreachable(error)) => {
            Err(StageFailure::new(unreachable, format!("{} on {node}: node agent unreachable: {error}", task.as_str())))
        }
        Err(error) => Err(StageFailure::fleet(&error)),
    }
}

/// `load_site_config` on a run that did not disable the node itself: the node's state as the inventory has it
/// (`deleted` when the record is gone).
pub fn node_state_of(record: Option<&FleetRecord>) -> NodeState {
    record.map_or(NodeState::Deleted, |record| record.state)
}

/// `load_site_config`: the secrets policy must let the controller delete node secrets before anything is changed
/// that `cleanup_secrets` would then leave half done.
pub fn secrets_deletable(capabilities: &[String]) -> Result<(), StageFailure> {
    if capabilities.iter().any(|capability| capability == "delete") {
        return Ok(());
    }
    Err(StageFailure::new(
        FailureClass::SiteCapabilityMissing,
        format!("the secrets policy grants {} on node secrets, not delete", capabilities.join(", ")),
    ))
}

/// The node's machine in MAAS, by hostname; `None` when MAAS has none (deleted earlier, by this workflow or a
/// person).
pub fn machine_of<'a>(machines: &'a [Machine], hostname: &str) -> Option<&'a Machine> {
    machines.iter().find(|machine| machine.hostname == hostname)
}

/// `retire_gpuaas_node`: a retired node is adopted, a quarantined one retired; any other state, or no record, is
/// an ambiguity (someone moved the node under the workflow).
pub fn retire(node: &str, state: Option<NodeState>) -> Result<Transition, StageFailure> {
    match state {
        Some(NodeState::Retired) => Ok(Transition::Adopt),
        Some(NodeState::Quarantined) => Ok(Transition::Move { from: NodeState::Quarantined }),
        Some(other) => Err(StageFailure::new(
            FailureClass::StateAmbiguity,
            format!("{node} is {} in the inventory, not quarantined", other.as_str()),
        )),
        None => Err(no_record(node)),
    }
}

/// What `remove_maas_record` does with the machine the run knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MaasRecord {
    /// Gone already (or never known): adopted.
    Gone,
    /// The site's policy keeps it: the workflow completes with this follow-up for a person.
    Retain { follow_up: String },
    /// Delete it, after a fresh read shows it Ready.
    Delete { system_id: String },
}

pub fn maas_record(system_id: Option<&str>, maas_gone: bool, delete_required: bool, hostname: &str) -> MaasRecord {
    match system_id.filter(|_| !maas_gone) {
        None => MaasRecord::Gone,
        Some(system_id) if !delete_required => {
            MaasRecord::Retain { follow_up: format!("MAAS record {system_id} of {hostname} retained by policy") }
        }
        Some(system_id) => MaasRecord::Delete { system_id: system_id.to_owned() },
    }
}

/// The fresh read before the irreversible delete: only a machine this workflow released (Ready) goes (`Ok(true)`);
/// one gone already is adopted (`Ok(false)`); one in another status is not this workflow's to delete.
pub fn deletable(system_id: &str, read: Result<Machine, MaasError>) -> Result<bool, StageFailure> {
    match read {
        Ok(machine) if machine.status == MachineStatus::Ready => Ok(true),
        Ok(machine) => Err(StageFailure::new(
            FailureClass::StateAmbiguity,
            format!("machine {system_id} is {}, not Ready: not deleting it", machine.status.name()),
        )),
        Err(MaasError::Http { status: 404, .. }) => Ok(false),
        Err(error) => Err(maas(&error)),
    }
}

/// How `release_maas_node` starts, after its fresh read of the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReleaseStart {
    /// Ready already: adopted.
    Adopt,
    /// Already on its way (an earlier attempt's, or a dead controller's): wait for it.
    Wait,
    /// Release it (with disk erase unless the no-erase fallback was taken), then wait.
    Release { erase: bool },
}

/// `first_attempt`: this is the run's first attempt of the stage, which finds an earlier run's failed release (a
/// dead controller's, or one a person resumed): that failure is this attempt's, and the matrix decides whether to
/// release again.
pub fn release_start(
    system_id: &str,
    machine: &Machine,
    first_attempt: bool,
    fallback_taken: bool,
) -> Result<ReleaseStart, StageFailure> {
    use MachineStatus as M;
    match &machine.status {
        M::Ready => Ok(ReleaseStart::Adopt),
        M::DiskErasing | M::Releasing => Ok(ReleaseStart::Wait),
        M::FailedDiskErasing | M::FailedReleasing | M::Broken if first_attempt => {
            let class = if machine.status == M::FailedReleasing {
                FailureClass::UpstreamTransient
            } else {
                FailureClass::DeployCloudInitFailure
            };
            Err(StageFailure::new(
                class,
                format!(
                    "an earlier release of {system_id} failed: {} ({})",
                    machine.status.name(),
                    machine.status_message
                ),
            ))
        }
        status if releasable_or_released(status) => Ok(ReleaseStart::Release { erase: !fallback_taken }),
        status => Err(StageFailure::new(
            FailureClass::StateAmbiguity,
            format!("machine {system_id} is {}: not this workflow's to release", status.name()),
        )),
    }
}

/// One read of a releasing machine: Ready (`Ok`), a failure (`Err`), or `None`: still on its way.
pub fn release_progress(system_id: &str, machine: &Machine) -> Option<Result<(), StageFailure>> {
    use MachineStatus as M;
    let failure = match &machine.status {
        M::Ready => return Some(Ok(())),
        M::FailedDiskErasing | M::Broken => StageFailure::new(
            FailureClass::DeployCloudInitFailure,
            format!("machine {system_id} is {}: {}", machine.status.name(), machine.status_message),
        ),
        M::DiskErasing | M::Releasing => return None,
        // MAAS gave up on the release (the power never read off within its timeout): the bounded retries release
        // again; past them the machine "cannot reach Ready" and a person decides.
        M::FailedReleasing => StageFailure::new(
            FailureClass::UpstreamTransient,
            format!("MAAS could not finish releasing {system_id}: {}", machine.status_message),
        ),
        status => StageFailure::new(
            FailureClass::StateAmbiguity,
            format!("machine {system_id} went {} while releasing", status.name()),
        ),
    };
    Some(Err(failure))
}

/// A releasing machine that MAAS no longer knows.
pub fn disappeared_while_releasing(system_id: &str) -> StageFailure {
    StageFailure::new(FailureClass::StateAmbiguity, format!("machine {system_id} disappeared while releasing"))
}

pub fn not_released(system_id: &str, bound_ms: u64) -> StageFailure {
    StageFailure::new(
        FailureClass::UpstreamTransient,
        format!("machine {system_id} did not reach Ready within {} min", bound_ms / 60_000),
    )
}

/// A power-off whose checks all read the power on (or unknown).
pub fn power_never_off(system_id: &str, last: PowerState, checks: u32) -> StageFailure {
    StageFailure::new(
        FailureClass::BmcPowerFailure,
        format!("power-off of {system_id} never converged: power still {last:?} after {checks} checks"),
    )
}

/// What `release_maas_node`'s no-erase fallback calls first, after a fresh read: an erase in flight is aborted, a
/// broken machine marked fixed; then the next attempt releases without erase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FallbackCall {
    Abort,
    MarkFixed,
}

pub fn fallback_call(status: &MachineStatus) -> Option<FallbackCall> {
    match status {
        MachineStatus::DiskErasing => Some(FallbackCall::Abort),
        MachineStatus::Broken => Some(FallbackCall::MarkFixed),
        _ => None,
    }
}

/// The inventory transition a compensation of section 5 makes (`from`, `to`), if it makes one: a node whose
/// validation failed must take no work (quarantined: the disable already did it, a retry is idempotent); an
/// uninstall that failed leaves the record retired, never half-removed.
pub fn compensating_transition(compensation: Compensation) -> Option<(NodeState, NodeState)> {
    match compensation {
        Compensation::QuarantineOnFailedValidation => Some((NodeState::Active, NodeState::Quarantined)),
        Compensation::RevertToRetiredOnUninstallFailure => Some((NodeState::Quarantined, NodeState::Retired)),
        Compensation::AbortMarkFixedNoEraseRelease
        | Compensation::UnlinkRelinkInterface
        | Compensation::DeletePartialNodeRow
        | Compensation::ReleaseToReadyIfDeployStarted
        | Compensation::ReleaseToReady
        | Compensation::AbortReleaseToCleanDeployableState => None,
    }
}

/// Whether `stage` is judged by a fresh read of the node's inventory record (the others by its machine, or not at
/// all).
pub fn observes_inventory(stage: DecommissionStage) -> bool {
    use DecommissionStage as D;
    matches!(
        stage,
        D::DisableNode
            | D::ForceReleaseAllocations
            | D::DrainNode
            | D::CleanupStorageScrubGpuValidateCleanNode
            | D::RetireGpuaasNode
            | D::RemoveGpuaasNodeRecord
    )
}

/// Whether `stage` is judged by a fresh read of the node's machine.
pub fn observes_machine(stage: DecommissionStage) -> bool {
    use DecommissionStage as D;
    matches!(stage, D::ReleaseMaasNode | D::PowerOffMaasNode | D::RemoveMaasRecord)
}

/// The fresh observation of an inventory stage: no record satisfies the record's removal and conflicts with every
/// other stage; a node put back in service under the workflow is unclear ownership.
pub fn observed_record(stage: DecommissionStage, record: Option<&FleetRecord>) -> Observed {
    use DecommissionStage as D;
    let Some(record) = record else {
        return if stage == D::RemoveGpuaasNodeRecord { Observed::SatisfiesCheckpoint } else { Observed::Conflicting };
    };
    match (stage, record.state) {
        // Someone put the node back in service under the workflow: ownership is unclear.
        (_, NodeState::Active | NodeState::Enrolling) if stage != D::DisableNode => Observed::Conflicting,
        (D::DisableNode, NodeState::Quarantined | NodeState::Retired) => Observed::SatisfiesCheckpoint,
        (D::ForceReleaseAllocations, _) if record.allocations.is_empty() => Observed::SatisfiesCheckpoint,
        (D::RetireGpuaasNode, NodeState::Retired) => Observed::SatisfiesCheckpoint,
        // Retired by this workflow, then moved back by someone else.
        (D::RemoveGpuaasNodeRecord, NodeState::Quarantined) => Observed::Conflicting,
        _ => Observed::AsExpected,
    }
}

/// The fresh observation of a machine stage: a machine gone satisfies the record's removal and conflicts with the
/// release and power-off; one outside a release path is not this workflow's.
pub fn observed_machine(stage: DecommissionStage, read: &Result<Machine, MaasError>) -> Observed {
    use DecommissionStage as D;
    let machine = match read {
        Ok(machine) => machine,
        Err(MaasError::Http { status: 404, .. }) if stage == D::RemoveMaasRecord => {
            return Observed::SatisfiesCheckpoint;
        }
        Err(MaasError::Http { status: 404, .. }) => return Observed::Conflicting,
        Err(_) => return Observed::Stale,
    };
    match (stage, &machine.status) {
        (D::ReleaseMaasNode, MachineStatus::Ready) => Observed::SatisfiesCheckpoint,
        (_, status) if !releasable_or_released(status) => Observed::Conflicting,
        (D::RemoveMaasRecord, status) if *status != MachineStatus::Ready => Observed::Conflicting,
        _ => Observed::AsExpected,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ports::TransportError;
    use DecommissionStage as D;
    use FailureClass as F;
    use MachineStatus as M;

    fn record(state: NodeState, allocations: &[&str]) -> FleetRecord {
        FleetRecord {
            state,
            allocations: allocations.iter().map(|id| (*id).to_owned()).collect(),
            agent_installed: true,
        }
    }

    fn machine(status: MachineStatus) -> Machine {
        Machine {
            system_id: "abc".into(),
            hostname: "node-02".into(),
            status,
            status_message: "the message".into(),
            power_address: None,
            macs: Vec::new(),
            enable_hw_sync: false,
            hw_sync_healthy: false,
        }
    }

    fn gone() -> MaasError {
        MaasError::Http { status: 404, message: "No Machine matches the given query.".into(), retry_after_s: None }
    }

    #[test]
    fn only_machines_in_a_release_path_are_this_workflow_s_to_release() {
        for status in [M::Ready, M::Deployed, M::FailedDiskErasing, M::Broken, M::Releasing, M::FailedReleasing] {
            assert!(releasable_or_released(&status), "{status:?}");
        }
        for status in [M::New, M::Commissioning, M::FailedCommissioning] {
            assert!(!releasable_or_released(&status), "{status:?}");
        }
    }

    #[test]
    fn the_inventory_stages_adopt_what_is_done_and_move_what_is_not() {
        assert_eq!(
            disable("n", Some(&record(NodeState::Active, &[]))),
            Ok(Transition::Move { from: NodeState::Active })
        );
        assert_eq!(disable("n", Some(&record(NodeState::Retired, &[]))), Ok(Transition::Adopt));
        assert_eq!(disable("n", None).unwrap_err().error, "no inventory record for n");
        assert_eq!(retire("n", Some(NodeState::Retired)), Ok(Transition::Adopt));
        assert_eq!(retire("n", Some(NodeState::Quarantined)), Ok(Transition::Move { from: NodeState::Quarantined }));
        let back = retire("n", Some(NodeState::Active)).unwrap_err();
        assert_eq!(
            (back.class, back.error.as_str()),
            (F::StateAmbiguity, "n is active in the inventory, not quarantined")
        );
        assert_eq!(retire("n", None).unwrap_err().class, F::StateAmbiguity);
        assert_eq!(allocations_released("n", &[]), Ok(()));
        let stuck = allocations_released("n", &["a1".into(), "a2".into()]).unwrap_err();
        assert_eq!(
            (stuck.class, stuck.error.as_str()),
            (F::UpstreamTransient, "allocations remain attached to n: a1, a2")
        );
        assert_eq!(node_state_of(None), NodeState::Deleted);
        assert_eq!(node_state_of(Some(&record(NodeState::Quarantined, &[]))), NodeState::Quarantined);
    }

    #[test]
    fn a_node_task_s_end_carries_the_class_its_stage_gives_it() {
        let unreachable = FleetError::AgentUnreachable("no answer".into());
        let cases = [
            (D::DrainNode, NodeTask::Drain, Ok(TaskOutcome::Done), None),
            (D::DrainNode, NodeTask::Drain, Err(unreachable.clone()), Some(F::AgentEnrollmentFailure)),
            (D::DrainNode, NodeTask::Drain, Ok(TaskOutcome::Failed("x".into())), Some(F::AgentEnrollmentFailure)),
            (
                D::CleanupStorageScrubGpuValidateCleanNode,
                NodeTask::ScrubGpu,
                Err(unreachable.clone()),
                Some(F::UpstreamTransient),
            ),
            (
                D::CleanupStorageScrubGpuValidateCleanNode,
                NodeTask::ValidateClean,
                Ok(TaskOutcome::Residue("a file".into())),
                Some(F::HardwareMismatch),
            ),
            (
                D::CleanupStorageScrubGpuValidateCleanNode,
                NodeTask::CleanupStorage,
                Ok(TaskOutcome::Failed("x".into())),
                Some(F::UpstreamTransient),
            ),
            (
                D::RemoveGpuaasNodeRecord,
                NodeTask::Uninstall,
                Ok(TaskOutcome::Failed("x".into())),
                Some(F::AgentEnrollmentFailure),
            ),
            (
                D::RemoveGpuaasNodeRecord,
                NodeTask::Uninstall,
                Err(FleetError::Conflict("x".into())),
                Some(F::StateAmbiguity),
            ),
        ];
        for (stage, task, result, expected) in cases {
            let class = task_result("n", task, unreachable_agent(stage), result).err().map(|failure| failure.class);
            assert_eq!(class, expected, "{} {}", stage.as_str(), task.as_str());
        }
        let residue =
            task_result("n", NodeTask::ValidateClean, F::UpstreamTransient, Ok(TaskOutcome::Residue("f".into())));
        assert_eq!(residue.unwrap_err().error, "validate_clean found residue on n: f");
    }

    #[test]
    fn the_site_must_let_the_controller_delete_node_secrets() {
        assert_eq!(secrets_deletable(&["delete".into(), "read".into()]), Ok(()));
        let failure = secrets_deletable(&["read".into(), "list".into()]).unwrap_err();
        assert_eq!(failure.class, F::SiteCapabilityMissing);
        assert_eq!(failure.error, "the secrets policy grants read, list on node secrets, not delete");
        let machines = [machine(M::Deployed)];
        assert_eq!(machine_of(&machines, "node-02").map(|m| m.system_id.as_str()), Some("abc"));
        assert_eq!(machine_of(&machines, "node-03"), None);
    }

    #[test]
    fn the_maas_record_is_deleted_only_when_policy_requires_it_and_the_machine_is_ready() {
        assert_eq!(maas_record(None, false, true, "node-02"), MaasRecord::Gone);
        assert_eq!(maas_record(Some("abc"), true, true, "node-02"), MaasRecord::Gone);
        assert_eq!(
            maas_record(Some("abc"), false, false, "node-02"),
            MaasRecord::Retain { follow_up: "MAAS record abc of node-02 retained by policy".into() }
        );
        assert_eq!(maas_record(Some("abc"), false, true, "node-02"), MaasRecord::Delete { system_id: "abc".into() });
        assert_eq!(deletable("abc", Ok(machine(M::Ready))), Ok(true));
        assert_eq!(deletable("abc", Err(gone())), Ok(false), "gone already: adopted");
        let deployed = deletable("abc", Ok(machine(M::Deployed))).unwrap_err();
        assert_eq!(
            (deployed.class, deployed.error.as_str()),
            (F::StateAmbiguity, "machine abc is Deployed, not Ready: not deleting it")
        );
        let bmc = MaasError::Http { status: 503, message: "Failed to query node's BMC: x".into(), retry_after_s: None };
        assert_eq!(
            deletable("abc", Err(bmc)).unwrap_err().class,
            F::BmcPowerFailure,
            "decommission reads the BMC's 503"
        );
    }

    #[test]
    fn a_release_starts_from_what_a_fresh_read_shows() {
        let cases = [
            (M::Ready, true, false, Ok(ReleaseStart::Adopt)),
            (M::DiskErasing, true, false, Ok(ReleaseStart::Wait)),
            (M::Releasing, false, false, Ok(ReleaseStart::Wait)),
            (M::Deployed, true, false, Ok(ReleaseStart::Release { erase: true })),
            (M::Deployed, true, true, Ok(ReleaseStart::Release { erase: false })),
            (M::FailedDiskErasing, true, false, Err(F::DeployCloudInitFailure)),
            (M::Broken, true, false, Err(F::DeployCloudInitFailure)),
            (M::FailedReleasing, true, false, Err(F::UpstreamTransient)),
            // A later attempt releases again what an earlier attempt left failed.
            (M::FailedDiskErasing, false, true, Ok(ReleaseStart::Release { erase: false })),
            (M::New, true, false, Err(F::StateAmbiguity)),
        ];
        for (status, first_attempt, fallback_taken, expected) in cases {
            let start = release_start("abc", &machine(status.clone()), first_attempt, fallback_taken);
            assert_eq!(start.map_err(|failure| failure.class), expected, "{status:?}");
        }
        let earlier = release_start("abc", &machine(M::Broken), true, false).unwrap_err();
        assert_eq!(earlier.error, "an earlier release of abc failed: Broken (the message)");
    }

    #[test]
    fn a_releasing_machine_is_waited_for_until_ready_or_a_failure() {
        let cases = [
            (M::Ready, Some(Ok(()))),
            (M::DiskErasing, None),
            (M::Releasing, None),
            (M::FailedDiskErasing, Some(Err(F::DeployCloudInitFailure))),
            (M::Broken, Some(Err(F::DeployCloudInitFailure))),
            (M::FailedReleasing, Some(Err(F::UpstreamTransient))),
            (M::Deployed, Some(Err(F::StateAmbiguity))),
        ];
        for (status, expected) in cases {
            let progress = release_progress("abc", &machine(status.clone()));
            assert_eq!(progress.map(|end| end.map_err(|failure| failure.class)), expected, "{status:?}");
        }
        assert_eq!(disappeared_while_releasing("abc").class, F::StateAmbiguity);
        assert_eq!(not_released("abc", 40 * 60_000).error, "machine abc did not reach Ready within 40 min");
        let never = power_never_off("abc", PowerState::On, 6);
        assert_eq!(
            (never.class, never.error.as_str()),
            (F::BmcPowerFailure, "power-off of abc never converged: power still On after 6 checks")
        );
    }

    #[test]
    fn compensations_move_the_inventory_or_unstick_the_machine() {
        assert_eq!(
            compensating_transition(Compensation::QuarantineOnFailedValidation),
            Some((NodeState::Active, NodeState::Quarantined))
        );
        assert_eq!(
            compensating_transition(Compensation::RevertToRetiredOnUninstallFailure),
            Some((NodeState::Quarantined, NodeState::Retired))
        );
        assert_eq!(compensating_transition(Compensation::AbortMarkFixedNoEraseRelease), None);
        assert_eq!(compensating_transition(Compensation::ReleaseToReady), None, "onboarding's");
        assert_eq!(fallback_call(&M::DiskErasing), Some(FallbackCall::Abort));
        assert_eq!(fallback_call(&M::Broken), Some(FallbackCall::MarkFixed));
        assert_eq!(fallback_call(&M::FailedDiskErasing), None);
    }

    #[test]
    fn a_fresh_observation_judges_the_record_or_the_machine_the_stage_acts_on() {
        use Observed::{AsExpected, Conflicting, SatisfiesCheckpoint};
        let cases = [
            (D::DisableNode, None, Conflicting),
            (D::RemoveGpuaasNodeRecord, None, SatisfiesCheckpoint),
            (D::DisableNode, Some(record(NodeState::Active, &["a"])), AsExpected),
            (D::DisableNode, Some(record(NodeState::Quarantined, &[])), SatisfiesCheckpoint),
            (D::DrainNode, Some(record(NodeState::Active, &[])), Conflicting),
            (D::ForceReleaseAllocations, Some(record(NodeState::Quarantined, &[])), SatisfiesCheckpoint),
            (D::ForceReleaseAllocations, Some(record(NodeState::Quarantined, &["a"])), AsExpected),
            (D::RetireGpuaasNode, Some(record(NodeState::Retired, &[])), SatisfiesCheckpoint),
            (D::RemoveGpuaasNodeRecord, Some(record(NodeState::Quarantined, &[])), Conflicting),
            (D::RemoveGpuaasNodeRecord, Some(record(NodeState::Retired, &[])), AsExpected),
        ];
        for (stage, record, expected) in cases {
            assert_eq!(observed_record(stage, record.as_ref()), expected, "{} {record:?}", stage.as_str());
        }
        let cases = [
            (D::ReleaseMaasNode, Ok(machine(M::Ready)), SatisfiesCheckpoint),
            (D::ReleaseMaasNode, Ok(machine(M::Deployed)), AsExpected),
            (D::ReleaseMaasNode, Ok(machine(M::New)), Conflicting),
            (D::ReleaseMaasNode, Err(gone()), Conflicting),
            (D::RemoveMaasRecord, Err(gone()), SatisfiesCheckpoint),
            (D::RemoveMaasRecord, Ok(machine(M::Releasing)), Conflicting),
            (D::RemoveMaasRecord, Ok(machine(M::Ready)), AsExpected),
            (D::PowerOffMaasNode, Err(MaasError::Transport(TransportError::Timeout)), Observed::Stale),
        ];
        for (stage, read, expected) in cases {
            assert_eq!(observed_machine(stage, &read), expected, "{} {read:?}", stage.as_str());
        }
        assert!(observes_inventory(D::DrainNode) && !observes_machine(D::DrainNode));
        assert!(observes_machine(D::PowerOffMaasNode) && !observes_inventory(D::PowerOffMaasNode));
        assert!(!observes_inventory(D::CleanupSecrets) && !observes_machine(D::CleanupSecrets));
    }
}
