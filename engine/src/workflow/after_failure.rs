//! The judgement after a failed stage attempt, for both workflows, as a state machine (sans-I/O): the workflow's
//! rule ([`crate::workflow::decide`], or the legacy replay's) decides on what is known; when it asks for a fresh
//! observation, [`AfterFailure::poll`] says [`Decision::RefreshObservedState`], the driver reads MAAS and the node and hands the
//! reading back judged against the stage ([`AfterFailure::handle_observed`]). After [`REFRESHES_MAX`] observations
//! the rule decides on what the failure itself says.

use super::{DecideContext, Decision, Observed};

/// Fresh observations one failure may ask for before the decision is taken on what is known.
pub const REFRESHES_MAX: u32 = 2;

/// The decision after one failed attempt, with as many fresh observations as the rule asks for.
pub struct AfterFailure<F> {
    rule: F,
    ctx: DecideContext,
    refreshes: u32,
}

impl<F: Fn(&DecideContext) -> Decision> AfterFailure<F> {
    /// `rule` is the workflow's decision for the failed stage, class and attempt, given the context; `ctx` starts
    /// with nothing observed.
    pub fn new(ctx: DecideContext, rule: F) -> AfterFailure<F> {
        AfterFailure { rule, ctx, refreshes: 0 }
    }

    /// What the driver does next: a [`Decision::RefreshObservedState`] asks it to read MAAS and the node, judge what
    /// they show against the stage and hand it to [`AfterFailure::handle_observed`]; any other decision is final.
    pub fn poll(&mut self) -> Decision {
        loop {
            match (self.rule)(&self.ctx) {
                Decision::RefreshObservedState if self.refreshes < REFRESHES_MAX => {
                    self.refreshes += 1;
                    return Decision::RefreshObservedState;
                }
                // Nothing fresher could be read: decide on what the failure itself says.
                Decision::RefreshObservedState => self.ctx.observed = Observed::AsExpected,
                decision @ (Decision::Retry { .. } | Decision::Continue { .. } | Decision::Stop(_)) => return decision,
            }
        }
    }

    /// The fresh observation [`Decision::RefreshObservedState`] asked for.
    pub fn handle_observed(&mut self, observed: Observed) {
        self.ctx.observed = observed;
    }

    /// The final decision, with `observe` (the driver's fresh read, judged against the stage) awaited each time the
    /// rule asks for one: the drivers' one loop over [`AfterFailure::poll`]. It does no I/O of its own.
    pub async fn decide(mut self, mut observe: impl AsyncFnMut() -> Observed) -> Decision {
        loop {
            match self.poll() {
                Decision::RefreshObservedState => {
                    let observed = observe().await;
                    self.handle_observed(observed);
                }
                decision => return decision,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;
    use crate::matrix::{NodeState, RecoveryAction, WorkflowState};
    use crate::workflow::StopReason;
    use crate::workflow::{ContinueReason, Stop};

    fn stop() -> Stop {
        Stop {
            workflow_state: WorkflowState::FailedManualIntervention,
            node_state: NodeState::Enrolling,
            reason: StopReason::OwnershipUnclear,
            next_action: None,
            compensation: None,
            qualifier: None,
        }
    }

    /// A rule that refreshes while the observation is stale, stops on a conflict and retries otherwise, recording
    /// the observations it was asked to decide on.
    fn run(readings: &[Observed]) -> (Vec<Decision>, Vec<Observed>) {
        let seen = RefCell::new(Vec::new());
        let rule = |ctx: &DecideContext| {
            seen.borrow_mut().push(ctx.observed);
            match ctx.observed {
                Observed::Stale => Decision::RefreshObservedState,
                Observed::Conflicting => Decision::Stop(stop()),
                Observed::AsExpected | Observed::SatisfiesCheckpoint => Decision::Retry {
                    action: RecoveryAction::RetryStage,
                    attempt_next: 2,
                    attempts_max: 3,
                    delay_ms: 15_000,
                    compensation: None,
                },
            }
        };
        let mut after = AfterFailure::new(DecideContext::new(NodeState::Enrolling), rule);
        let mut readings = readings.iter();
        let mut nexts = Vec::new();
        loop {
            let next = after.poll();
            nexts.push(next);
            match next {
                Decision::RefreshObservedState => {
                    after.handle_observed(*readings.next().expect("a reading for every observe"))
                }
                _ => break,
            }
        }
        (nexts, seen.into_inner())
    }

    #[test]
    fn an_observation_is_asked_for_as_the_rule_says_and_decided_on() {
        let (nexts, seen) = run(&[Observed::Conflicting]);
        assert_eq!(nexts, [Decision::RefreshObservedState, Decision::Stop(stop())]);
        assert_eq!(seen, [Observed::Stale, Observed::Conflicting]);
    }

    #[test]
    fn after_two_stale_readings_the_rule_decides_on_what_the_failure_says() {
        let (nexts, seen) = run(&[Observed::Stale, Observed::Stale]);
        assert_eq!(
            nexts.iter().filter(|next| **next == Decision::RefreshObservedState).count(),
            REFRESHES_MAX as usize
        );
        assert!(matches!(nexts.last(), Some(Decision::Retry { attempt_next: 2, delay_ms: 15_000, .. })), "{nexts:?}");
        assert_eq!(seen, [Observed::Stale, Observed::Stale, Observed::Stale, Observed::AsExpected]);
    }

    #[test]
    fn decide_awaits_one_observation_per_request_and_returns_the_final_decision() {
        let rule = |ctx: &DecideContext| match ctx.observed {
            Observed::Stale => Decision::RefreshObservedState,
            _ => Decision::Stop(stop()),
        };
        let after = AfterFailure::new(DecideContext::new(NodeState::Enrolling), rule);
        let mut readings = vec![Observed::Conflicting, Observed::Stale];
        let mut observed = 0;
        let decision = futures_util::FutureExt::now_or_never(after.decide(async || {
            observed += 1;
            readings.pop().expect("a reading for every observe")
        }))
        .expect("no real await");
        assert_eq!(decision, Decision::Stop(stop()));
        assert_eq!(observed, 2, "a stale reading is read again, the conflicting one decides");
    }

    #[test]
    fn a_rule_that_needs_no_observation_decides_at_once() {
        let mut after = AfterFailure::new(DecideContext::new(NodeState::Active), |_: &DecideContext| {
            Decision::Continue { reason: ContinueReason::SkipNonFatalStage }
        });
        assert_eq!(after.poll(), Decision::Continue { reason: ContinueReason::SkipNonFatalStage });
    }
}
