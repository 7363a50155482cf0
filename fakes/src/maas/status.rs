//! Machine statuses of real MAAS: numeric codes, `status_name` labels, the `NODE_TRANSITIONS` table, the failure map
//! and the timed statuses — the oracle every other part of the fake MAAS is checked against.
//!
//! Sources (`/work/shared/reference/maas-api-notes.md` §1): `src/maascommon/enums/node.py` (codes),
//! `src/maascommon/node.py` (labels, `NODE_FAILURE_STATUS_TRANSITION_MAP`), `src/maasserver/node_status.py`
//! (`NODE_TRANSITIONS`, `NODE_FAILURE_MONITORED_STATUS_TRANSITIONS`).

use serde::{Deserialize, Serialize};

/// A machine's status. The discriminant is the numeric `status` of the REST API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeStatus {
    New = 0,
    Commissioning = 1,
    FailedCommissioning = 2,
    Missing = 3,
    Ready = 4,
    Reserved = 5,
    Deployed = 6,
    Retired = 7,
    Broken = 8,
    Deploying = 9,
    Allocated = 10,
    FailedDeployment = 11,
    Releasing = 12,
    FailedReleasing = 13,
    DiskErasing = 14,
    FailedDiskErasing = 15,
    RescueMode = 16,
    EnteringRescueMode = 17,
    FailedEnteringRescueMode = 18,
    ExitingRescueMode = 19,
    FailedExitingRescueMode = 20,
    Testing = 21,
    FailedTesting = 22,
}

use NodeStatus::*;

/// Statuses `release` accepts (`RELEASABLE_STATUSES`, `src/maasserver/models/node.py`).
pub const RELEASABLE: [NodeStatus; 8] =
    [Allocated, Reserved, Broken, Deploying, Deployed, FailedDeployment, FailedDiskErasing, FailedReleasing];

/// The statuses a new row may start in (`NODE_TRANSITIONS[None]`).
pub const INITIAL: [NodeStatus; 3] = [New, Missing, Retired];

/// Where a TESTING run may reset a machine to (`NODE_TESTING_RESET_READY_TRANSITIONS`). Read at an older commit of
/// `src/maasserver/node_status.py` than the rest of the table: HEAD may have grown the set.
const TESTING_RESET: [NodeStatus; 10] = [
    Commissioning,
    FailedDeployment,
    Missing,
    Retired,
    Broken,
    FailedReleasing,
    FailedDiskErasing,
    FailedEnteringRescueMode,
    FailedExitingRescueMode,
    FailedTesting,
];

impl NodeStatus {
    pub const ALL: [NodeStatus; 23] = [
        New,
        Commissioning,
        FailedCommissioning,
        Missing,
        Ready,
        Reserved,
        Deployed,
        Retired,
        Broken,
        Deploying,
        Allocated,
        FailedDeployment,
        Releasing,
        FailedReleasing,
        DiskErasing,
        FailedDiskErasing,
        RescueMode,
        EnteringRescueMode,
        FailedEnteringRescueMode,
        ExitingRescueMode,
        FailedExitingRescueMode,
        Testing,
        FailedTesting,
    ];

    /// The numeric `status` field.
    pub fn code(self) -> u8 {
        self as u8
    }

    pub fn from_code(code: u8) -> Option<NodeStatus> {
        NodeStatus::ALL.get(usize::from(code)).copied()
    }

    /// The `status_name` of the REST API (`NODE_STATUS_LABELS`). Note "Releasing failed", not "Failed releasing".
    pub fn label(self) -> &'static str {
        match self {
            New => "New",
            Commissioning => "Commissioning",
            FailedCommissioning => "Failed commissioning",
            Missing => "Missing",
            Ready => "Ready",
            Reserved => "Reserved",
            Deployed => "Deployed",
            Retired => "Retired",
            Broken => "Broken",
            Deploying => "Deploying",
            Allocated => "Allocated",
            FailedDeployment => "Failed deployment",
            Releasing => "Releasing",
            FailedReleasing => "Releasing failed",
            DiskErasing => "Disk erasing",
            FailedDiskErasing => "Failed disk erasing",
            RescueMode => "Rescue mode",
            EnteringRescueMode => "Entering rescue mode",
            FailedEnteringRescueMode => "Failed to enter rescue mode",
            ExitingRescueMode => "Exiting rescue mode",
            FailedExitingRescueMode => "Failed to exit rescue mode",
            Testing => "Testing",
            FailedTesting => "Failed testing",
        }
    }

    /// The `?status=` filter label: the lower-cased attribute name.
    pub fn short_label(self) -> &'static str {
        match self {
            New => "new",
            Commissioning => "commissioning",
            FailedCommissioning => "failed_commissioning",
            Missing => "missing",
            Ready => "ready",
            Reserved => "reserved",
            Deployed => "deployed",
            Retired => "retired",
            Broken => "broken",
            Deploying => "deploying",
            Allocated => "allocated",
            FailedDeployment => "failed_deployment",
            Releasing => "releasing",
            FailedReleasing => "failed_releasing",
            DiskErasing => "disk_erasing",
            FailedDiskErasing => "failed_disk_erasing",
            RescueMode => "rescue_mode",
            EnteringRescueMode => "entering_rescue_mode",
            FailedEnteringRescueMode => "failed_entering_rescue_mode",
            ExitingRescueMode => "exiting_rescue_mode",
            FailedExitingRescueMode => "failed_exiting_rescue_mode",
            Testing => "testing",
            FailedTesting => "failed_testing",
        }
    }

    /// `NODE_TRANSITIONS[self]`: every status this one may move to.
    pub fn allowed_next(self) -> Vec<NodeStatus> {
        let base: &[NodeStatus] = match self {
            New => &[Commissioning, Testing, Missing, Ready, Retired, Broken, EnteringRescueMode],
            Commissioning => &[FailedCommissioning, Ready, Retired, Missing, New, Broken, Testing],
            FailedCommissioning => &[Commissioning, Missing, Retired, Broken, EnteringRescueMode, Testing],
            Ready => &[EnteringRescueMode, Commissioning, Allocated, Reserved, Retired, Missing, Broken, Testing],
            Reserved => {
                &[Ready, Allocated, Retired, Missing, Broken, DiskErasing, Releasing, EnteringRescueMode, Testing]
            }
            Allocated => {
                &[Ready, Retired, Missing, Broken, Deploying, DiskErasing, Releasing, EnteringRescueMode, Testing]
            }
            Releasing => &[
                New,
                Allocated,
                Reserved,
                Deployed,
                Ready,
                Broken,
                Missing,
                FailedDeployment,
                FailedDiskErasing,
                FailedReleasing,
            ],
            Deploying => &[Allocated, Missing, Broken, FailedDeployment, Deployed, Ready, DiskErasing, Releasing],
            FailedDeployment => {
                &[Allocated, Missing, Broken, Ready, DiskErasing, Releasing, EnteringRescueMode, Testing]
            }
            Deployed => &[Allocated, Missing, Broken, Ready, DiskErasing, Releasing, EnteringRescueMode, Testing],
            Missing => &[New, Ready, Allocated, Commissioning, Broken, EnteringRescueMode, Testing],
            Retired => &[New, Ready, Missing, Broken, EnteringRescueMode, Testing],
            Broken => &[Commissioning, Ready, DiskErasing, Releasing, EnteringRescueMode, Testing, Deployed],
            FailedReleasing => &[Releasing, DiskErasing, Ready, Broken, Testing],
            DiskErasing => &[Broken, DiskErasing, FailedDiskErasing, Ready, Releasing],
            FailedDiskErasing => &[DiskErasing, Releasing, Broken, Allocated, Ready, EnteringRescueMode, Testing],
            EnteringRescueMode => &[Ready, Broken, Deployed, RescueMode, FailedEnteringRescueMode, ExitingRescueMode],
            FailedEnteringRescueMode => &[Broken, EnteringRescueMode, ExitingRescueMode, Testing],
            RescueMode => &[Broken, ExitingRescueMode, Testing],
            ExitingRescueMode => &[
                New,
                Broken,
                FailedCommissioning,
                Ready,
                Reserved,
                Allocated,
                FailedDeployment,
                Deployed,
                Missing,
                Retired,
                FailedReleasing,
                FailedDiskErasing,
                RescueMode,
                FailedEnteringRescueMode,
                FailedExitingRescueMode,
                FailedTesting,
            ],
            FailedExitingRescueMode => &[Broken, ExitingRescueMode, Testing],
            Testing => &[Broken, New, Ready, Reserved, Allocated, Deployed],
            FailedTesting => &[Commissioning, Broken, Missing, EnteringRescueMode, Testing, Ready, Deployed],
        };
        let mut next = base.to_vec();
        if self == Testing {
            next.extend(TESTING_RESET);
        }
        next
    }

    /// Whether `NODE_TRANSITIONS` allows `self -> next`. Staying in the same status is not a transition and is always
    /// allowed (`Node.update_status` only validates a change).
    pub fn can_transition_to(self, next: NodeStatus) -> bool {
        self == next || self.allowed_next().contains(&next)
    }

    /// `NODE_FAILURE_STATUS_TRANSITION_MAP`: what a failure turns an in-progress status into.
    pub fn failure_status(self) -> Option<NodeStatus> {
        match self {
            Commissioning => Some(FailedCommissioning),
            Deploying => Some(FailedDeployment),
            Releasing => Some(FailedReleasing),
            DiskErasing => Some(FailedDiskErasing),
            EnteringRescueMode => Some(FailedEnteringRescueMode),
            ExitingRescueMode => Some(FailedExitingRescueMode),
            Testing => Some(FailedTesting),
            _ => None,
        }
    }

    /// Minutes before the status monitor fails a machine in this status, or `None` when the status is not timed
    /// (`NODE_FAILURE_MONITORED_STATUS_TRANSITIONS`): RELEASING and EXITING_RESCUE_MODE are hard-coded to 5 minutes,
    /// the rest use `node_timeout`.
    pub fn timeout_minutes(self, node_timeout_min: u64) -> Option<u64> {
        match self {
            Releasing | ExitingRescueMode => Some(5),
            Commissioning | Deploying | EnteringRescueMode | Testing => Some(node_timeout_min),
            _ => None,
        }
    }

    /// A `FAILED_*` status.
    pub fn is_failed(self) -> bool {
        NodeStatus::ALL.iter().any(|status| status.failure_status() == Some(self))
    }
}

/// The text of `NodeStateViolation` for an illegal transition (`Node.update_status`), answered as 409.
pub fn invalid_transition_message(from: NodeStatus, to: NodeStatus) -> String {
    format!("Invalid transition: {} -> {}.", from.label(), to.label())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_labels_match_the_rest_api() {
        let expected: [(u8, &str); 23] = [
            (0, "New"),
            (1, "Commissioning"),
            (2, "Failed commissioning"),
            (3, "Missing"),
            (4, "Ready"),
            (5, "Reserved"),
            (6, "Deployed"),
            (7, "Retired"),
            (8, "Broken"),
            (9, "Deploying"),
            (10, "Allocated"),
            (11, "Failed deployment"),
            (12, "Releasing"),
            (13, "Releasing failed"),
            (14, "Disk erasing"),
            (15, "Failed disk erasing"),
            (16, "Rescue mode"),
            (17, "Entering rescue mode"),
            (18, "Failed to enter rescue mode"),
            (19, "Exiting rescue mode"),
            (20, "Failed to exit rescue mode"),
            (21, "Testing"),
            (22, "Failed testing"),
        ];
        for (status, (code, label)) in NodeStatus::ALL.into_iter().zip(expected) {
            assert_eq!((status.code(), status.label()), (code, label));
            assert_eq!(NodeStatus::from_code(code), Some(status));
        }
        assert_eq!(NodeStatus::from_code(23), None);
        assert_eq!(FailedReleasing.short_label(), "failed_releasing");
    }

    #[test]
    fn the_table_allows_the_lifecycle_and_refuses_shortcuts() {
        for (from, to) in [
            (New, Commissioning),
            (Commissioning, Ready),
            (Ready, Allocated),
            (Allocated, Deploying),
            (Deploying, Deployed),
            (Deployed, Releasing),
            (Releasing, Ready),
            (Broken, Deployed),
            (Testing, FailedTesting),
        ] {
            assert!(from.can_transition_to(to), "{from:?} -> {to:?}");
        }
        for (from, to) in [(New, Deployed), (Ready, Deployed), (Commissioning, Deploying), (Deployed, New)] {
            assert!(!from.can_transition_to(to), "{from:?} -> {to:?}");
        }
        assert_eq!(invalid_transition_message(Ready, Deployed), "Invalid transition: Ready -> Deployed.");
    }

    #[test]
    fn every_failure_status_is_reachable_from_its_in_progress_status() {
        for status in NodeStatus::ALL {
            if let Some(failed) = status.failure_status() {
                assert!(status.can_transition_to(failed), "{status:?}");
                assert!(failed.is_failed());
            }
        }
        assert_eq!(Commissioning.timeout_minutes(30), Some(30));
        assert_eq!(Releasing.timeout_minutes(30), Some(5));
        assert_eq!(Ready.timeout_minutes(30), None);
    }
}
