//! Bounded retry of journal-idempotent operations (RCCA P0 "Retry idempotent recovery transport"): exponential
//! backoff with seeded jitter, a hard attempt limit, and a classification of which failures may be retried at all.
//! Endpoint identity is re-checked before every attempt by the caller; an identity change is never retried.

/// Why one attempt of a remote operation failed, as far as retry is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptFailure {
    /// Timeout, refused connection, reset: the operation may or may not have run; its operation id makes a replay safe.
    Transient,
    /// The endpoint presented another host key: not the node we hold authority for. A hard stop.
    IdentityChanged,
    /// The far end refused the operation for a reason a retry cannot fix (disk full, unsafe path, not staged).
    Permanent,
}

/// Exponential backoff: attempt `n` (1-based) waits `base × factor^(n-1)`, capped, plus jitter of up to half of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Backoff {
    pub base_ms: u64,
    pub factor: u64,
    pub cap_ms: u64,
    /// Attempts in total, the first one included.
    pub attempts_max: u32,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff { base_ms: 1_000, factor: 2, cap_ms: 30_000, attempts_max: 5 }
    }
}

/// What to do after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryDecision {
    RetryAfter {
        delay_ms: u64,
    },
    /// Give up: journal and holds stay as they are, and the caller reports the replay command and endpoint.
    Exhausted,
    /// Never retried (identity change, permanent refusal).
    Stop,
}

impl Backoff {
    /// The decision after attempt `attempt` (1-based) failed with `failure`. `jitter` is a draw from the engine's
    /// seeded jitter stream; the same draws give the same delays.
    pub fn after_failure(&self, attempt: u32, failure: AttemptFailure, jitter: u64) -> RetryDecision {
        match failure {
            AttemptFailure::IdentityChanged | AttemptFailure::Permanent => RetryDecision::Stop,
            AttemptFailure::Transient if attempt >= self.attempts_max => RetryDecision::Exhausted,
            AttemptFailure::Transient => {
                let exponent = attempt.saturating_sub(1).min(32);
                let delay = self.base_ms.saturating_mul(self.factor.saturating_pow(exponent)).min(self.cap_ms);
                // Up to half the step; a step too short to halve gets none.
                let jitter_ms = jitter.checked_rem(delay / 2).unwrap_or(0);
                RetryDecision::RetryAfter { delay_ms: delay + jitter_ms }
            }
        }
    }

    /// The longest total wait all retries of one operation can add: what the plan's duration budget reserves.
    pub fn worst_case_wait_ms(&self) -> u64 {
        (1..self.attempts_max)
            .map(|attempt| {
                let delay = self.base_ms.saturating_mul(self.factor.saturating_pow(attempt - 1)).min(self.cap_ms);
                delay + delay / 2
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transient_failures_back_off_exponentially_then_exhaust() {
        let backoff = Backoff::default();
        let delays: Vec<RetryDecision> =
            (1..=5).map(|a| backoff.after_failure(a, AttemptFailure::Transient, 0)).collect();
        assert_eq!(
            delays,
            [
                RetryDecision::RetryAfter { delay_ms: 1_000 },
                RetryDecision::RetryAfter { delay_ms: 2_000 },
                RetryDecision::RetryAfter { delay_ms: 4_000 },
                RetryDecision::RetryAfter { delay_ms: 8_000 },
                RetryDecision::Exhausted,
            ]
        );
    }

    /// Found by cargo-mutants (`docs/testing.md`): the jitter is added, a delay too short to halve gets none (and
    /// never a division by zero), and the budget is exactly each retry's step and a half.
    #[test]
    fn jitter_is_added_below_half_the_step_and_the_budget_is_exact() {
        let backoff = Backoff::default();
        assert_eq!(
            backoff.after_failure(1, AttemptFailure::Transient, 7),
            RetryDecision::RetryAfter { delay_ms: 1_007 }
        );
        assert_eq!(
            backoff.after_failure(2, AttemptFailure::Transient, 1_003),
            RetryDecision::RetryAfter { delay_ms: 2_003 }
        );
        let tiny = Backoff { base_ms: 1, factor: 1, ..backoff };
        assert_eq!(tiny.after_failure(1, AttemptFailure::Transient, 5), RetryDecision::RetryAfter { delay_ms: 1 });
        assert_eq!(backoff.worst_case_wait_ms(), 1_500 + 3_000 + 6_000 + 12_000);
    }

    #[test]
    fn an_identity_change_or_a_permanent_refusal_is_never_retried() {
        let backoff = Backoff::default();
        assert_eq!(backoff.after_failure(1, AttemptFailure::IdentityChanged, 7), RetryDecision::Stop);
        assert_eq!(backoff.after_failure(1, AttemptFailure::Permanent, 7), RetryDecision::Stop);
    }

    proptest::proptest! {
        /// Jitter never takes a delay past one and a half times its step, and the budget covers every schedule.
        #[test]
        fn jittered_delays_stay_inside_the_budget(jitters in proptest::collection::vec(proptest::prelude::any::<u64>(), 4)) {
            let backoff = Backoff::default();
            let mut total = 0;
            for (attempt, jitter) in (1..).zip(jitters) {
                if let RetryDecision::RetryAfter { delay_ms } = backoff.after_failure(attempt, AttemptFailure::Transient, jitter) {
                    total += delay_ms;
                }
            }
            proptest::prop_assert!(total <= backoff.worst_case_wait_ms());
        }
    }
}
