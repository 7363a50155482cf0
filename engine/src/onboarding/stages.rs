//! The onboarding workflow's stage table: the order a run walks the matrix's stages, where a retry re-enters it,
//! and the bounds of its waits. [`StageCursor`] is the walk as a state machine (the driver asks it for the next
//! stage and tells it what became of the last one).

use crate::matrix::OnboardingStage;

/// The stages a run walks, in order: the matrix's stages ([`OnboardingStage::ALL`], in its order) but
/// `classify_deploy_failure` and `recover_for_datasource_retry`, which run only when a deploy fails (they are that
/// failure's handling, not steps of a healthy run).
pub const MAIN_STAGES: [OnboardingStage; 14] = main_stages();

const fn main_stages() -> [OnboardingStage; 14] {
    let mut main = [OnboardingStage::LoadSiteConfig; 14];
    let (mut from, mut to) = (0, 0);
    while from < OnboardingStage::ALL.len() {
        let stage = OnboardingStage::ALL[from];
        if !matches!(stage, OnboardingStage::ClassifyDeployFailure | OnboardingStage::RecoverForDatasourceRetry) {
            main[to] = stage;
            to += 1;
        }
        from += 1;
    }
    assert!(to == main.len(), "every stage of the matrix but the deploy failure's two is a main stage");
    main
}

/// Where a retry of `stage` re-enters the run: a wait is retried by redoing what it waits for.
pub fn retry_from(stage: OnboardingStage) -> OnboardingStage {
    match stage {
        OnboardingStage::WaitForReady => OnboardingStage::CommissionNode,
        OnboardingStage::WaitForDeployed | OnboardingStage::RecoverForDatasourceRetry => OnboardingStage::DeployViaMaas,
        other => other,
    }
}

/// A run's walk through [`MAIN_STAGES`], with the one detour off it (the datasource recovery, run before the deploy
/// is tried again).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StageCursor {
    index: usize,
    detour: Option<OnboardingStage>,
}

impl StageCursor {
    /// The stage to run next (a pending detour first); `None` once the run is through its stages.
    pub fn poll_stage(&mut self) -> Option<OnboardingStage> {
        self.detour.take().or_else(|| MAIN_STAGES.get(self.index).copied())
    }

    /// `stage` is behind the run (done, adopted or skipped): the walk moves past it when it is the main stage at hand.
    pub fn handle_done(&mut self, stage: OnboardingStage) {
        if MAIN_STAGES.get(self.index) == Some(&stage) {
            self.index += 1;
        }
    }

    /// `stage` is to be retried: the walk re-enters where [`retry_from`] says, through the datasource recovery when
    /// that is what is retried.
    pub fn handle_retry(&mut self, stage: OnboardingStage) {
        if stage == OnboardingStage::RecoverForDatasourceRetry {
            self.detour = Some(stage);
        }
        self.index = MAIN_STAGES.iter().position(|main| *main == retry_from(stage)).unwrap_or(self.index);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use OnboardingStage as S;

    #[test]
    fn a_retried_wait_redoes_what_it_waits_for() {
        let cases = [
            (S::WaitForReady, S::CommissionNode),
            (S::WaitForDeployed, S::DeployViaMaas),
            (S::RecoverForDatasourceRetry, S::DeployViaMaas),
            (S::ConfigureStorage, S::ConfigureStorage),
            (S::CommissionNode, S::CommissionNode),
        ];
        for (stage, from) in cases {
            assert_eq!(retry_from(stage), from, "{}", stage.as_str());
        }
    }

    /// Walks the cursor, answering each stage with `answer` (done unless it says retry), for at most `steps`.
    fn walk(steps: usize, answer: impl Fn(usize, OnboardingStage) -> bool) -> Vec<OnboardingStage> {
        let mut cursor = StageCursor::default();
        let mut walked = Vec::new();
        while let Some(stage) = cursor.poll_stage() {
            if walked.len() == steps {
                break;
            }
            let retry = answer(walked.len(), stage);
            walked.push(stage);
            if retry { cursor.handle_retry(stage) } else { cursor.handle_done(stage) }
        }
        walked
    }

    #[test]
    fn a_healthy_run_walks_the_main_stages_in_order() {
        assert_eq!(walk(32, |_, _| false), MAIN_STAGES);
    }

    #[test]
    fn a_retried_wait_for_ready_recommissions_and_goes_on() {
        let walked = walk(32, |step, stage| step == 4 && stage == S::WaitForReady);
        assert_eq!(walked[3..7], [S::CommissionNode, S::WaitForReady, S::CommissionNode, S::WaitForReady]);
        assert_eq!(walked.len(), MAIN_STAGES.len() + 2);
    }

    #[test]
    fn a_datasource_retry_detours_through_the_recovery_before_the_deploy() {
        let mut cursor = StageCursor::default();
        loop {
            let stage = cursor.poll_stage().expect("the deploy's wait is a main stage");
            if stage == S::WaitForDeployed {
                break;
            }
            cursor.handle_done(stage);
        }
        // The deploy failure was classified a datasource failure: the recovery is what is retried.
        cursor.handle_retry(S::RecoverForDatasourceRetry);
        assert_eq!(cursor.poll_stage(), Some(S::RecoverForDatasourceRetry));
        // The recovery is off the main path: done, the walk stays at the deploy it re-enters.
        cursor.handle_done(S::RecoverForDatasourceRetry);
        assert_eq!(cursor.poll_stage(), Some(S::DeployViaMaas));
        cursor.handle_done(S::DeployViaMaas);
        assert_eq!(cursor.poll_stage(), Some(S::WaitForDeployed));
    }

    #[test]
    fn a_stage_off_the_main_path_that_goes_on_does_not_move_the_walk() {
        let mut cursor = StageCursor::default();
        assert_eq!(cursor.poll_stage(), Some(S::LoadSiteConfig));
        cursor.handle_done(S::RecoverForDatasourceRetry);
        assert_eq!(cursor.poll_stage(), Some(S::LoadSiteConfig));
    }
}
