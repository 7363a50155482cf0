//! The oracle catalogue: every oracle's name (what scenario, campaign and gate files use), its property type (always,
//! eventually, sometimes) and its one-line summary, defined once. `crate::observe::oracles` builds each one by its
//! [`OracleId`], exhaustively; `docs/oracles.md` documents each one.

use reports::PropertyKind;

/// One entry of the oracle catalogue.
#[derive(Debug)]
pub struct OracleInfo {
    pub id: OracleId,
    pub name: &'static str,
    pub property: PropertyKind,
    pub summary: &'static str,
}

macro_rules! catalogue {
    ($($id:ident: $name:literal, $property:ident, $summary:literal;)*) => {
        /// Every oracle, typed.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
        pub enum OracleId {
            $($id,)*
        }

        /// Every oracle, in catalogue order (the order the runner feeds them and reports list them).
        pub const CATALOG: &[OracleInfo] = &[
            $(OracleInfo { id: OracleId::$id, name: $name, property: PropertyKind::$property, summary: $summary },)*
        ];
    };
}

catalogue! {
    SilenceSignalIsJustified: "silence_signal_is_justified", Always,
        "instance_silent is never raised while the hub is receiving the instance's heartbeats";
    EpochMemberNeverTombstoned: "epoch_member_never_tombstoned", Always,
        "no member of an open deployment epoch, and no worker a running rollout stopped and has not restarted, is tombstoned by the hub's TTL sweeper";
    SecretsNeverInTrace: "secrets_never_in_trace", Always,
        "no trace line holds a credential";
    SilenceDetectedInTime: "silence_detected_in_time", Eventually,
        "a silent instance is reported within 4 minutes of its last heartbeat, and its recovery within one sensor period of the first heartbeat back, counted from when the controller, the hub and their link were last healthy";
    AvailabilityFloor: "availability_floor", Always,
        "healthy, eligible workers (agent service running, no dispatch hold, not tombstoned) never fall below the fleet's availability floor";
    LaneBound: "lane_bound", Always,
        "never more workers under a deployment hold at once than the lane size";
    NoDuplicateMutation: "no_duplicate_mutation", Always,
        "no worker operation takes effect twice, no hold is released twice, no journal transition is recorded twice, and no machine is commissioned, deployed or released twice (accepted by MAAS) in one stage attempt of a MAAS workflow, counting the attempt a dead controller was in and its restarted controller's rerun of that stage as one";
    NoFetchAfterQuiescence: "no_fetch_after_quiescence", Always,
        "no capsule is fetched onto a worker between its quiescence and its restart";
    RecoveryHoldPrecedesIdentity: "recovery_hold_precedes_identity", Always,
        "no write leaves a worker's environment with its attestation key and no MAC_STARTUP_CLEAR_HOLD beside it";
    NoIncoherentNodeMutated: "no_incoherent_node_mutated", Always,
        "a node the preflight quarantined for its identity, or given before the first rollout a lone drift no repair may cover, never sees a rollout mutation, before or after its quarantine";
    NoDispatchToHeldWorker: "no_dispatch_to_held_worker", Always,
        "no task is dispatched to a worker under a dispatch hold, nor to one a rollout quiesced";
    EveryLaneConverged: "every_lane_converged", Eventually,
        "a started rollout reaches a terminal state with every lane successor or prior";
    EverySelectedNodeAccounted: "every_selected_node_accounted", Always,
        "a rollout's account names every selected node once, each as the trace shows it (upgraded only after its release step, stuck only without one, quarantined only after its quarantine, held only when skipped for another's hold, prior only when never quiesced or released again by its lane's rollback), and a rollout ends successor only when its account has every selected node upgraded";
    HoldsAccounted: "holds_accounted", Eventually,
        "when the run ends, every deployment hold still placed is on a node of a lane whose latest verdict the journal committed as stuck";
    InstanceSilentRaised: "instance_silent_raised", Sometimes,
        "the engine raised instance_silent";
    InstanceRecoveredRaised: "instance_recovered_raised", Sometimes,
        "the engine raised instance_recovered";
    AgentTombstoned: "agent_tombstoned", Sometimes,
        "the hub's TTL sweeper tombstoned an agent";
    AgentOfflined: "agent_offlined", Sometimes,
        "the hub's TTL sweeper marked a durable agent offline";
    HostRestarted: "host_restarted", Sometimes,
        "a host crashed and booted again";
    DispatchRefusedByHold: "dispatch_refused_by_hold", Sometimes,
        "the hub refused to dispatch a task to a held worker";
    NodeQuarantined: "node_quarantined", Sometimes,
        "the rollout preflight quarantined a node";
    ControllerAdoptedJournal: "controller_adopted_journal", Sometimes,
        "a restarted controller adopted a dead controller's rollout journal";
    RolloutReachedSuccessor: "rollout_reached_successor", Sometimes,
        "a rollout finished with every selected node on the successor revision";
    RolloutStoppedOnRouteChange: "rollout_stopped_on_route_change", Sometimes,
        "a rollout saw the hub publish another route bundle and took no further lane down";
    RetryRecovered: "retry_recovered", Sometimes,
        "a rollout step failed transiently, was retried, and completed";
    LaneRolledBack: "lane_rolled_back", Sometimes,
        "a lane that could not reach its successor was rolled back: every node it took down is back on its prior generation and the lane committed prior";
    NoEgressAfterQuiescence: "no_egress_after_quiescence", Always,
        "a worker past its quiescence barrier (its service stopped by an SSH stop, not started again) opens no connection, downloads nothing and resolves no name";
    CanaryBeforeWiderRelease: "canary_before_wider_release", Always,
        "a rollout's first deployment hold (its canary) is released, the canary proved, before the hub sees a deployment hold of that rollout on any other worker";
    NoRollbackWithoutAFault: "no_rollback_without_a_fault", Always,
        "a lane is rolled back only for nodes a fault landed on (the node, its host, the hub's or controller's host, the rollout or the controller): in the simulator nothing else stops a step, so a rollback no fault explains is the engine breaking its own nodes";
    OnlyIntendedHoldsReleased: "only_intended_holds_released", Always,
        "no hold is released but a rollout's own deployment hold: quarantine, successor and operator holds stay";
    ReceiptsNameFrozenRoute: "receipts_name_frozen_route", Always,
        "every journal receipt of a rollout and every installer run names the route digest its plan froze";
    RolloutTimeBounded: "rollout_time_bounded", Eventually,
        "a rollout's active time (controller downtime, lock and credential waits excluded) stays within its plan's lanes x lane bound, plus one lane bound per extra batch of a lane split past a stuck lane and per rollback pass";
    CredentialRenewedMidRollout: "credential_renewed_mid_rollout", Sometimes,
        "the hub refused the controller's credential and the controller went on with the renewed one";
    StaleLockWaitedOut: "stale_lock_waited_out", Sometimes,
        "a controller found the deployment lock held by another and waited for its lease to end";
    LockSupersededOnAdoption: "lock_superseded_on_adoption", Sometimes,
        "a controller adopting a journal took over the dead controller's lock fence";
    OperatorHoldRespected: "operator_hold_respected", Sometimes,
        "a rollout left a node alone because someone else held it";
    OldJournalSettledOnce: "old_journal_settled_once", Always,
        "every old (pre-typed) line of the controller's journal is migrated into typed records or quarantined at most once over the run, across controller deaths, never both";
    HistoricalIdentityCanonicalizedFirst: "historical_identity_canonicalized_first", Always,
        "a node given a recognized historical identity form before the first rollout sees no rollout mutation of its files or service but its canonicalization's writes before it is canonicalized";
    JournalMigrated: "journal_migrated", Sometimes,
        "a controller migrated old journal lines into typed records";
    IdentityCanonicalized: "identity_canonicalized", Sometimes,
        "a node in a historical identity form was canonicalized under the deployment fence";
    MaasTransitionsLegal: "maas_transitions_legal", Always,
        "every status write of a MAAS machine is a transition real MAAS allows (NODE_TRANSITIONS), and a created row starts in an initial status";
    NoDestructiveCallWithoutFreshRead: "no_destructive_call_without_fresh_read", Always,
        "every commission, deploy, release, abort, mark_fixed, power_off or delete an onboarding or decommission workflow sends is preceded, in the same stage attempt, by an answered read of that machine (or of the machine list, or, for a power-off, of its power)";
    NoDoubleCommissionOrDeploy: "no_double_commission_or_deploy", Always,
        "no machine is commissioned, nor deployed, twice (accepted by MAAS) within one attempt of one stage of a workflow";
    OnboardingFollowsTheMatrix: "onboarding_follows_the_matrix", Always,
        "after every classified stage failure the workflow does what the stage's matrix row allows: retries only a class the row retries, adopts an observed state, or stops in a workflow and node state the row lists; an unreadable classify_deploy_failure falls back to the generic deploy failure";
    DecommissionFollowsTheMatrix: "decommission_follows_the_matrix", Always,
        "after every classified stage failure of a decommission the workflow does what the stage's matrix row allows (section 5): retries only a class the row retries under the site's policy, adopts an observed state, completes with a follow-up record where the row retains the MAAS record, or stops in a workflow and node state the row lists";
    DecommissionCompleted: "decommission_completed", Sometimes,
        "a decommission workflow completed: the node is deleted from the inventory, its MAAS machine released (and deleted, or retained with a follow-up)";
    EveryDecommissionRests: "every_decommission_rests", Eventually,
        "when the run ends, every decommission a step asked for ended completed (with or without a follow-up record), stopped with a failure class in a state its row lists, or refused before its first mutation; none is still running";
    NoDecommissionOfAReferencedWorker: "no_decommission_of_a_referenced_worker", Always,
        "a decommission's first mutation of a node (a mutating inventory request, a node task or a destructive MAAS call) never comes while the node is a member of an open epoch, under a hold placed and not released, under a running task lease, or named by a rollout whose journal has no terminal record";
    DecommissionRefused: "decommission_refused", Sometimes,
        "a decommission was refused before its first mutation because something referenced its worker";
    EveryNodeOnboardedOrDiagnosed: "every_node_onboarded_or_diagnosed", Eventually,
        "when the run ends, every onboarding workflow ended completed, or failed_manual_intervention with a failure class; none is still running or failed_retryable";
    StallDetected: "stall_detected", Sometimes,
        "an onboarding workflow classified a silent wait as a stall";
    OnboardingCompleted: "onboarding_completed", Sometimes,
        "an onboarding workflow completed";
    MacDriftClassified: "mac_drift_classified", Sometimes,
        "an onboarding workflow stopped with state_ambiguity on the evidence of an unknown machine enlisted on its node's BMC";
    EpochMemberSurvivedTtl: "epoch_member_survived_ttl", Sometimes,
        "a member of an open epoch stayed silent past the agent TTL and a sweep, and was not tombstoned";
    PinnedIdentityPresent: "pinned_identity_present", Always,
        "when a rollout ends successor or partial, no member of a deployment epoch opened for it is still tombstoned: every journal-pinned identity is present or was restored through the journal-bound resurrection path";
    ResurrectionJournalBound: "resurrection_journal_bound", Always,
        "the hub restores a tombstoned row only for an identity the open epoch the resurrection names lists as a member";
    TombstoneResurrected: "tombstone_resurrected", Sometimes,
        "a controller restored a tombstoned identity its journal pins through the journal-bound resurrection path";
    AuditRecordsComplete: "audit_records_complete", Always,
        "every operator recovery action has an audit record with every field of seed 000 section 8 (actor id and role, workflow and run id, prior state and stage, action, reason, expected next state, correlation id), and none carries a credential";
    NoAutomationOnFrozenWorkflow: "no_automation_on_frozen_workflow", Always,
        "after an accepted mark_manual_intervention_required and until an accepted action lifts the freeze, the workflow sends no MAAS mutation and starts no stage";
    ActionReachesExpectedState: "action_reaches_expected_state", Eventually,
        "every accepted operator action is settled, by the end of the run, in the state its audit record expected";
    InstanceTransitionsLegal: "instance_transitions_legal", Always,
        "every NodeInstance row is created pending and every transition the instance controller journals starts where the row is and is an edge of the runbook's lifecycle table";
    OneVmPerOperationId: "one_vm_per_operation_id", Always,
        "the provider never has two live VMs for one provisioning operation id (or, without one, for one instance) while the row that owns them is not terminated";
    OpsHoldNeverBypassed: "ops_hold_never_bypassed", Always,
        "no row under an operator's ops hold is started, rebooted or terminated";
    AllocatorHandsOutOnlyReady: "allocator_hands_out_only_ready", Always,
        "a pool's allocator claims only a ready, running, uncordoned member: never a warming, draining or claimed one";
    NothingWrittenBeforeApproval: "nothing_written_before_approval", Always,
        "a cordon, uncordon or terminate parked behind an approval writes its audit record and the deferred operation only, a denial its audit record and the decision only, and nothing does what a pending deferred operation parked outside its approval";
    RefusedWritesNothing: "refused_writes_nothing", Always,
        "a request the instance controller refuses (a cordon, a drain, a hold, a control verb ...) writes its audit record and nothing else";
    EveryInstanceSettles: "every_instance_settles", Eventually,
        "every instance settles in running, stopped, terminated or error within its state's bound (no orphaned pending or provisioning row), and every terminate's destroy is confirmed, counted from the last fault or controller boot";
    BareMetalFollowsItsWorkflows: "bare_metal_follows_its_workflows", Always,
        "a bare-metal instance runs only once its machine's agent enrolled, its machine's decommission begins only after the instance was terminated, and its destroy is confirmed only once that decommission completed (or when the machine was never onboarded)";
    TerminatedGuestSignalled: "terminated_guest_signalled", Eventually,
        "a guest the provider still runs after its row was terminated is gone, or signalled cloud_sync_terminated_guest_present, within the hourly sync's period and a pass";
    CordonFenced: "cordon_fenced", Sometimes,
        "a cordon fenced a ready pool member (cordon_state fenced)";
    CordonClaimed: "cordon_claimed", Sometimes,
        "a cordon marked a claimed pool member (cordon_state claimed)";
    CordonAlreadyFenced: "cordon_already_fenced", Sometimes,
        "a cordon marked a member already draining (cordon_state already_fenced)";
    CordonNotPooled: "cordon_not_pooled", Sometimes,
        "a cordon marked an instance of no pool (cordon_state not_pooled)";
    StuckPending: "stuck_pending", Sometimes,
        "an instance was stuck pending for more than 5 minutes";
    StuckProvisioning: "stuck_provisioning", Sometimes,
        "an instance was stuck provisioning for more than 10 minutes without its agent";
    StuckNeverReady: "stuck_never_ready", Sometimes,
        "an instance's agent was up but never ready for more than 5 minutes";
    StuckSilent: "stuck_silent", Sometimes,
        "a running instance was silent for more than 3 minutes";
    StuckDrainStalled: "stuck_drain_stalled", Sometimes,
        "a drain's stop had not completed in 30 minutes";
    StuckTerminateStalled: "stuck_terminate_stalled", Sometimes,
        "a terminate's destroy had not been confirmed in 5 minutes";
    ApprovalPending: "approval_pending", Sometimes,
        "a cordon, uncordon or terminate was parked behind an approval";
    TerminatedGuestPresent: "terminated_guest_present", Sometimes,
        "a cloud sync signalled cloud_sync_terminated_guest_present";
    PredecessorRevokedAfterSuccessorProved: "predecessor_revoked_after_successor_proved", Always,
        "a rotation revokes an agent's predecessor credential only after the hub accepted a heartbeat authenticated by its successor, and an abort revokes only its own successor";
    RotationOverlapHolds: "rotation_overlap_holds", Always,
        "while a rotation of an agent's credential is open (issued, not committed or aborted), no heartbeat of that agent is refused for its credential";
    OneSuccessorPerRotation: "one_successor_per_rotation", Always,
        "no rotation's successor credential is minted twice, and no second successor is minted for a node while its rotation is in flight";
    CredentialRotated: "credential_rotated", Sometimes,
        "an agent-credential rotation proved its successor by an accepted heartbeat and revoked the predecessor";
}

/// The oracle named `name`, if there is one.
pub fn info(name: &str) -> Option<&'static OracleInfo> {
    CATALOG.iter().find(|info| info.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_snake_case_and_every_id_is_in_the_catalogue_once() {
        let mut names: Vec<&str> = CATALOG.iter().map(|info| info.name).collect();
        assert!(
            names.iter().all(|name| name.chars().all(|c| c.is_ascii_lowercase() || c == '_' || c.is_ascii_digit()))
        );
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), CATALOG.len(), "oracle names are unique");
        let mut ids: Vec<OracleId> = CATALOG.iter().map(|info| info.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), CATALOG.len());
        assert_eq!(info("availability_floor").map(|info| info.property), Some(PropertyKind::Always));
        assert!(info("no_such_oracle").is_none());
    }
}
