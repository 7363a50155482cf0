//! The onboarding workflow's decisions behind one seam: whether a wait detects a stall, and whether an irreversible
//! call (commission, deploy) is preceded by a fresh read. The production rules are [`Matrix`], whose methods
//! are the trait's defaults (the recovery matrix); a test may run the real driver with one decision replaced by a
//! historical defect, to measure whether the harness catches it (`docs/testing.md`, "Named historical bugs").

use crate::matrix::OnboardingStage;
use crate::onboarding::driver::OnboardingPolicy;

/// The onboarding driver's decisions; every default is the production rule.
pub trait Rules {
    /// Whether a wait under `policy` ends early on a stall ("slow is not silent"); `legacy` waits out MAAS's timeout.
    fn stall_detection(&self, policy: OnboardingPolicy) -> bool {
        policy == OnboardingPolicy::Current
    }

    /// Whether attempt `attempt` of `stage` reads the machine afresh before its irreversible call (commission,
    /// deploy); the matrix always does ("do not blindly retry; refresh state first").
    fn reads_before(&self, _stage: OnboardingStage, _attempt: u32) -> bool {
        true
    }
}

/// The production rules: the recovery matrix's.
#[derive(Debug, Clone, Copy, Default)]
pub struct Matrix;

impl Rules for Matrix {}
