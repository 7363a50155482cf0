//! The rollout's decisions behind one seam: the driver asks [`Rules`] to classify a node, plan the lanes, judge a
//! failed attempt, name the epoch's members, spell the recovery and installed environments, say when capsules are
//! fetched and judge the rollout's end from its account. The production rules are [`Rcca`], whose methods are the
//! trait's defaults (the RCCA's replacement plan); a test may run the real driver with one decision replaced by a
//! historical defect, to measure whether the harness catches it (`docs/testing.md`, "Named historical bugs"). Nothing in production selects anything but [`Rcca`].

use crate::ports::NodeObservation;
use crate::ports::events::RolloutEnd;
use crate::rollout::account::{self, NodeAccount};
pub use crate::rollout::identity::InstalledIdentity;
use crate::rollout::plan::{self, Plan, PlanError, PlanInput};
use crate::rollout::preflight::{self, Expectation, SignatureVerifier, Verdict};
use crate::rollout::retry::{AttemptFailure, Backoff, RetryDecision};

/// When the capsules reach the nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Staging {
    /// Every capsule on every eligible node before the plan and before any stop (the RCCA's barrier).
    BeforeQuiescence,
    /// Each node fetches its capsules as it installs, after its stop (the incident's order).
    AtInstall,
}

/// The rollout driver's decisions; every default is the production rule.
pub trait Rules {
    /// The preflight's verdict on one node's read-only observation.
    fn classify(&self, observation: &NodeObservation, verifier: &dyn SignatureVerifier) -> Verdict {
        preflight::classify(observation, &Expectation::default(), verifier)
    }

    /// The lanes, against the floor and the duration budget.
    fn plan(&self, input: &PlanInput) -> Result<Plan, PlanError> {
        plan::plan(input)
    }

    /// Whether attempt `attempt` of an operation that failed with `failure` is retried, and after how long.
    fn after_failure(&self, backoff: &Backoff, attempt: u32, failure: AttemptFailure, jitter: u64) -> RetryDecision {
        backoff.after_failure(attempt, failure, jitter)
    }

    /// The workers the epoch pins against TTL expiry: every node in every lane.
    fn epoch_members(&self, lanes: &[Vec<String>]) -> Vec<String> {
        lanes.iter().flatten().cloned().collect()
    }

    /// The recovery-only environment's writes, in order: the hold alone first, then the key beside it.
    fn recovery_env_writes(&self, attestation_key: &str) -> Vec<String> {
        preflight::recovery_env_writes(attestation_key)
    }

    /// The one canonical installed environment.
    fn installed_env(&self, identity: &InstalledIdentity<'_>) -> String {
        preflight::render_env(identity)
    }

    /// When the capsules are fetched.
    fn staging(&self) -> Staging {
        Staging::BeforeQuiescence
    }

    /// How the rollout ended, from its account of every selected node: `successor` only when every one upgraded.
    fn rollout_end(&self, account: &[NodeAccount]) -> RolloutEnd {
        account::rollout_end(account)
    }
}

/// The production rules: the RCCA's replacement plan.
#[derive(Debug, Clone, Copy, Default)]
pub struct Rcca;

impl Rules for Rcca {}
