//! Storage health as an admission gate (RCCA replacement plan: "make storage health an admission gate"): before a
//! node is staged, its staging area is probed — a probe file written, fsynced, renamed into place, its directory
//! fsynced — and its free space read. [`admit`] judges the probe; a node it does not admit is never staged and never
//! taken down: it is quarantined with the checks that failed, before the plan.

use crate::ports::events::QuarantineCause;
use crate::ports::{ProbeCheck, SshError, StorageProbe};

/// The least free space a staging area must have to be admitted: the release's capsules (source, wheels, runtime
/// image, helpers, service definitions, recovery material) and the kept prior install, with room to spare.
pub const STAGING_BYTES_MIN: u64 = 8 << 30;

/// Why a node could not be staged: its storage was not admitted (the checks that failed, or why the probe could not be
/// run), or a staging call failed. Each quarantines the node with a cause of its own.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StageFailure {
    #[error("storage not admitted: {}", .0.join("; "))]
    StorageNotAdmitted(Vec<String>),
    #[error("staging failed: {0}")]
    Staging(#[from] SshError),
}

impl StageFailure {
    /// The quarantine cause the failure gives its node.
    pub fn cause(&self) -> QuarantineCause {
        match self {
            StageFailure::StorageNotAdmitted(_) => QuarantineCause::Storage,
            StageFailure::Staging(_) => QuarantineCause::Staging,
        }
    }
}

impl From<StageFailure> for SshError {
    /// Where a step must fail with an SSH error (staging at install, the legacy controller's order): a storage refusal
    /// is the node refusing, in its own words.
    fn from(failure: StageFailure) -> SshError {
        match failure {
            StageFailure::Staging(error) => error,
            refused @ StageFailure::StorageNotAdmitted(_) => SshError::Refused(refused.to_string()),
        }
    }
}

/// Whether `probe` admits the node: every check passed and at least [`STAGING_BYTES_MIN`] free. `Err` names every
/// check that failed (a check not run after a failed one is not named again) and a shortfall of space.
pub fn admit(probe: &StorageProbe) -> Result<(), Vec<String>> {
    let mut refused = Vec::new();
    for (name, check) in [
        ("write", &probe.write),
        ("file fsync", &probe.file_fsync),
        ("rename", &probe.rename),
        ("directory fsync", &probe.dir_fsync),
    ] {
        match check {
            ProbeCheck::Passed => {}
            ProbeCheck::Failed(error) => refused.push(format!("{name} failed: {error}")),
            ProbeCheck::NotRun if refused.is_empty() => refused.push(format!("{name} not run")),
            ProbeCheck::NotRun => {}
        }
    }
    if probe.free_bytes < STAGING_BYTES_MIN {
        refused.push(format!("{} bytes free, {STAGING_BYTES_MIN} needed", probe.free_bytes));
    }
    if refused.is_empty() { Ok(()) } else { Err(refused) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn healthy() -> StorageProbe {
        StorageProbe {
            write: ProbeCheck::Passed,
            file_fsync: ProbeCheck::Passed,
            rename: ProbeCheck::Passed,
            dir_fsync: ProbeCheck::Passed,
            free_bytes: 64 << 30,
        }
    }

    #[test]
    fn a_probe_is_admitted_only_when_every_check_passed_with_room_to_stage() {
        assert_eq!(admit(&healthy()), Ok(()));
        assert_eq!(admit(&StorageProbe { free_bytes: STAGING_BYTES_MIN, ..healthy() }), Ok(()));
        let low = StorageProbe { free_bytes: STAGING_BYTES_MIN - 1, ..healthy() };
        assert_eq!(admit(&low), Err(vec![format!("{} bytes free, {STAGING_BYTES_MIN} needed", STAGING_BYTES_MIN - 1)]));
        let full = StorageProbe {
            write: ProbeCheck::Failed("no space left on device".into()),
            file_fsync: ProbeCheck::NotRun,
            rename: ProbeCheck::NotRun,
            dir_fsync: ProbeCheck::NotRun,
            free_bytes: 0,
        };
        assert_eq!(
            admit(&full),
            Err(vec![
                "write failed: no space left on device".into(),
                format!("0 bytes free, {STAGING_BYTES_MIN} needed")
            ])
        );
        for (index, name) in ["write", "file fsync", "rename", "directory fsync"].into_iter().enumerate() {
            let mut probe = healthy();
            let check = [&mut probe.write, &mut probe.file_fsync, &mut probe.rename, &mut probe.dir_fsync];
            *check.into_iter().nth(index).unwrap() = ProbeCheck::Failed("EIO".into());
            assert_eq!(admit(&probe), Err(vec![format!("{name} failed: EIO")]), "{name}");
        }
        // A probe that stopped before a check without naming why is not admitted either.
        let silent = StorageProbe { rename: ProbeCheck::NotRun, ..healthy() };
        assert_eq!(admit(&silent), Err(vec!["rename not run".into()]));
    }
}
