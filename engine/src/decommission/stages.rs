//! The decommission workflow's stage table: its stages run strictly in the matrix's order
//! ([`DecommissionStage::ALL`]), the bounds of its waits, and [`StageWalk`], the walk as a state machine, which
//! passes the stages a run must not redo.

use crate::matrix::DecommissionStage;

/// Bounds of the waits (our figures; section 6 gives none for decommission): a release with erase takes the wipe
/// plus the release, and MAAS's own 5-minute RELEASING timeout comes first.
pub const RELEASE_WAIT_MS: u64 = 40 * 60_000;
/// Reads of the power state after a power-off before it counts as never converging.
pub const POWER_OFF_CHECKS: u32 = 6;

/// A run's walk through the stages.
///
/// After a controller death the run resumes at the stage the dead one had reached: the stages before it are done,
/// and the node tasks among them cannot run again once the machine is released (its agent is gone). An operator's
/// `resume`, `retry_stage` or `adopt_observed_state` enters the run at its authorized stage. `load_site_config` only
/// reads, and the later stages need the machine it finds, so it always runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StageWalk {
    index: usize,
    /// The index of the stage a dead controller had reached (0 when none).
    resume_at: usize,
    start_at: Option<DecommissionStage>,
}

impl StageWalk {
    /// `interrupted_at`: where the journal says the last run's controller died; `start_at`: an operator's entry stage.
    pub fn new(interrupted_at: Option<DecommissionStage>, start_at: Option<DecommissionStage>) -> StageWalk {
        let resume_at =
            interrupted_at.and_then(|stage| DecommissionStage::ALL.iter().position(|s| *s == stage)).unwrap_or(0);
        StageWalk { index: 0, resume_at, start_at }
    }

    /// The stage a run resumes at after its controller died, when it does not start at the top.
    pub fn resumed_at(&self) -> Option<DecommissionStage> {
        (self.resume_at > 0).then(|| DecommissionStage::ALL[self.resume_at])
    }

    /// Whether the run walks from the workflow's first stage, `disable_node`, its first mutation: a fresh run, a
    /// rerun from the top, a run whose dead controller had not got past it, or an operator's entry there. Only such a
    /// run checks what references the worker first: any other has mutated the node in an earlier run.
    pub fn begins_at_first_stage(&self) -> bool {
        self.resume_at == 0 && self.start_at.is_none_or(|from| from == DecommissionStage::ALL[0])
    }

    /// The stage at hand; `None` once the run is through its stages.
    pub fn poll_stage(&self) -> Option<DecommissionStage> {
        DecommissionStage::ALL.get(self.index).copied()
    }

    /// Whether the stage at hand is passed without a checkpoint or a run.
    pub fn passes(&self) -> bool {
        let Some(stage) = self.poll_stage() else { return false };
        let before_start = self.start_at.is_some_and(|from| (stage as usize) < (from as usize));
        (before_start || self.index < self.resume_at) && stage != DecommissionStage::LoadSiteConfig
    }

    /// The stage at hand is behind the run (done, adopted, passed): the walk moves on. A retried stage stays.
    pub fn handle_done(&mut self) {
        self.index += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use DecommissionStage as D;

    /// The stages a walk runs, every stage done at once.
    fn run(mut walk: StageWalk) -> Vec<DecommissionStage> {
        let mut ran = Vec::new();
        while let Some(stage) = walk.poll_stage() {
            if !walk.passes() {
                ran.push(stage);
            }
            walk.handle_done();
        }
        ran
    }

    #[test]
    fn a_fresh_run_walks_every_stage_in_the_matrix_s_order() {
        let walk = StageWalk::new(None, None);
        assert_eq!(walk.resumed_at(), None);
        assert!(walk.begins_at_first_stage());
        assert_eq!(run(walk), D::ALL);
    }

    #[test]
    fn a_run_after_a_controller_death_resumes_where_it_died_after_reading_the_site() {
        let walk = StageWalk::new(Some(D::ReleaseMaasNode), None);
        assert_eq!(walk.resumed_at(), Some(D::ReleaseMaasNode));
        assert!(!walk.begins_at_first_stage(), "the dead run mutated the node already");
        assert!(StageWalk::new(Some(D::DisableNode), None).begins_at_first_stage(), "died before its first mutation");
        let at = D::ALL.iter().position(|stage| *stage == D::ReleaseMaasNode).unwrap();
        let expected: Vec<D> = [D::LoadSiteConfig].into_iter().chain(D::ALL[at..].iter().copied()).collect();
        assert_eq!(run(walk), expected);
        // A controller that died at the first stage resumes at the top.
        assert_eq!(StageWalk::new(Some(D::ALL[0]), None).resumed_at(), None);
    }

    #[test]
    fn an_operator_s_entry_stage_passes_the_stages_before_it_but_the_site_read() {
        assert!(!StageWalk::new(None, Some(D::PowerOffMaasNode)).begins_at_first_stage());
        assert!(StageWalk::new(None, Some(D::DisableNode)).begins_at_first_stage());
        let ran = run(StageWalk::new(None, Some(D::PowerOffMaasNode)));
        assert_eq!(ran[0], D::LoadSiteConfig);
        assert_eq!(ran[1], D::PowerOffMaasNode);
        assert!(!ran.contains(&D::DrainNode));
        assert_eq!(run(StageWalk::new(None, Some(D::ALL[0]))), D::ALL);
    }
}
