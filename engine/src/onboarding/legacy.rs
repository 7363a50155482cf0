//! The shell-era onboarding behaviour of the 2026-07-20 incident (`seeds/001_5e13b5e5e5d7ab8b.txt`), kept so the
//! simulator can replay it beside the matrix: no stall detection (a fixed 30-minute clock, MAAS `node_timeout`, is the
//! only verdict on a waiting commission), and a blind retry of commissioning whatever the failure. The incident's
//! record: "canary Ready in ~3 min after seven consecutive timeouts".
//!
//! Only commissioning differs: every other stage is decided by the matrix ([`crate::workflow::decide`]).

use crate::matrix::{FailureClass, OnboardingStage, RecoveryAction, Stage, WorkflowState};

use crate::onboarding::stall::ProgressEvidence;
use crate::workflow::{DecideContext, Decision, Stop, StopReason};

/// MAAS `node_timeout`: the "marginal 30-min timeout" of seed 001.
pub const LEGACY_COMMISSION_TIMEOUT_MS: u64 = 30 * 60_000;
/// Seed 001 records seven consecutive timeouts before a person stepped in; the shell loop had no bound of its own,
/// so the replay gives up after the seventh.
pub const LEGACY_COMMISSION_ATTEMPTS_MAX: u32 = 7;

/// What the legacy watcher makes of a waiting commission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LegacyVerdict {
    Waiting {
        elapsed_ms: u64,
    },
    /// Reported as `upstream_transient`, the only class the legacy flow knew for a timeout.
    TimedOut {
        elapsed_ms: u64,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LegacyConfig {
    pub commission_timeout_ms: u64,
    pub commission_attempts_max: u32,
}

impl Default for LegacyConfig {
    fn default() -> Self {
        LegacyConfig {
            commission_timeout_ms: LEGACY_COMMISSION_TIMEOUT_MS,
            commission_attempts_max: LEGACY_COMMISSION_ATTEMPTS_MAX,
        }
    }
}

impl LegacyConfig {
    /// The clock since the stage started, and nothing else: events, status changes, unknown machines and resolver
    /// answers are not looked at.
    pub fn watch(&self, progress: &ProgressEvidence) -> LegacyVerdict {
        let elapsed_ms = progress.now_ms.saturating_sub(progress.stage_started_ms);
        if elapsed_ms >= self.commission_timeout_ms {
            LegacyVerdict::TimedOut { elapsed_ms }
        } else {
            LegacyVerdict::Waiting { elapsed_ms }
        }
    }

    /// Commissioning (`commission_node` and the wait for Ready, one step in the shell) is retried at once, whatever
    /// the class, until the attempts run out; then the workflow is `failed_retryable` (the shell never froze
    /// automation). Other stages are the matrix's.
    pub fn decide(&self, stage: Stage, failure: FailureClass, attempt: u32, ctx: &DecideContext) -> Decision {
        match stage {
            Stage::Onboarding(OnboardingStage::CommissionNode | OnboardingStage::WaitForReady) => {
                if attempt < self.commission_attempts_max {
                    Decision::Retry {
                        action: RecoveryAction::RetryStage,
                        attempt_next: attempt + 1,
                        attempts_max: self.commission_attempts_max,
                        delay_ms: 0,
                        compensation: None,
                    }
                } else {
                    Decision::Stop(Stop {
                        workflow_state: WorkflowState::FailedRetryable,
                        node_state: ctx.node_state,
                        reason: StopReason::AttemptsExhausted,
                        next_action: Some(RecoveryAction::RetryStage),
                        compensation: None,
                        qualifier: None,
                    })
                }
            }
            _ => crate::workflow::decide(stage, failure, attempt, ctx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::NodeState;
    use crate::onboarding::stall::{ResolverProbe, StallClassifier, StallVerdict, UnknownMachine};
    use crate::workflow::Observed;

    fn incident(now_ms: u64) -> ProgressEvidence {
        ProgressEvidence {
            now_ms,
            unknown_machine: Some(UnknownMachine {
                system_id: "new-1".into(),
                mac: "52:54:00:00:00:01".into(),
                bmc_address: "10.10.1.17".into(),
            }),
            metadata_resolver: ResolverProbe::ServFail { host: "maas-internal".into() },
            ..ProgressEvidence::started_at(0)
        }
    }

    #[test]
    fn the_legacy_watcher_waits_the_full_thirty_minutes_whatever_the_evidence() {
        let legacy = LegacyConfig::default();
        assert_eq!(legacy.watch(&incident(29 * 60_000)), LegacyVerdict::Waiting { elapsed_ms: 29 * 60_000 });
        assert_eq!(legacy.watch(&incident(30 * 60_000)), LegacyVerdict::TimedOut { elapsed_ms: 30 * 60_000 });
        let classifier = StallClassifier::default();
        assert!(
            matches!(classifier.classify(&incident(60_000)), StallVerdict::Stalled { .. }),
            "the matrix flavour calls the same evidence a stall after one minute"
        );
    }

    #[test]
    fn legacy_commissioning_is_retried_blindly_then_fails_retryably() {
        let legacy = LegacyConfig::default();
        let ctx = DecideContext { observed: Observed::AsExpected, ..DecideContext::new(NodeState::Enrolling) };
        let stage = Stage::Onboarding(OnboardingStage::WaitForReady);
        for class in
            [FailureClass::StateAmbiguity, FailureClass::SiteCapabilityMissing, FailureClass::UpstreamTransient]
        {
            for attempt in 1..LEGACY_COMMISSION_ATTEMPTS_MAX {
                assert_eq!(
                    legacy.decide(stage, class, attempt, &ctx),
                    Decision::Retry {
                        action: RecoveryAction::RetryStage,
                        attempt_next: attempt + 1,
                        attempts_max: LEGACY_COMMISSION_ATTEMPTS_MAX,
                        delay_ms: 0,
                        compensation: None,
                    },
                    "{} attempt {attempt}",
                    class.as_str()
                );
            }
            let last = legacy.decide(stage, class, LEGACY_COMMISSION_ATTEMPTS_MAX, &ctx);
            assert_eq!(last.workflow_state(), WorkflowState::FailedRetryable, "never freezes automation");
        }
        assert!(
            !crate::workflow::decide(stage, FailureClass::SiteCapabilityMissing, 1, &ctx).is_retry(),
            "the matrix flavour does not retry what the legacy retries blindly"
        );
    }

    #[test]
    fn legacy_leaves_other_stages_to_the_matrix() {
        let legacy = LegacyConfig::default();
        let ctx = DecideContext { observed: Observed::AsExpected, ..DecideContext::new(NodeState::Enrolling) };
        for stage in Stage::all() {
            if matches!(stage, Stage::Onboarding(OnboardingStage::CommissionNode | OnboardingStage::WaitForReady)) {
                continue;
            }
            for class in FailureClass::ALL {
                assert_eq!(
                    legacy.decide(stage, class, 1, &ctx),
                    crate::workflow::decide(stage, class, 1, &ctx),
                    "{} {}",
                    stage.as_str(),
                    class.as_str()
                );
            }
        }
    }
}
