//! The seeds' own defects as engine mutants (issue 20, "named historical bugs"): each test runs the real engine with
//! one decision replaced by a test-only double of the historical defect (through the engine's `Rules` seams, never a
//! flag on a production path), walks a shipped campaign's runs in order, and asserts which run catches it first and
//! which oracle says so — and that production's engine passes that same run. `docs/testing.md` tabulates the result.

use std::collections::BTreeSet;
use std::path::Path;
use std::rc::Rc;

use engine::matrix::OnboardingStage;
use engine::onboarding::driver::OnboardingPolicy;
use engine::ports::NodeObservation;
use engine::ports::events::RolloutEnd;
use engine::rollout::account::{NodeAccount, NodeOutcome};
use engine::rollout::plan::{Plan, PlanError, PlanInput};
use engine::rollout::preflight::{EnvClass, SignatureVerifier, Verdict, classify_env};
use engine::rollout::retry::{AttemptFailure, Backoff, RetryDecision};
use engine::rollout::rules::{InstalledIdentity, Rules as RolloutRules, Staging};
use sim::model::spec::load_scenario;
use sim::run::campaign::identity;
use sim::run::runner::{RunIdentity, run, run_with_rules};
use sim::world::EngineRules;

#[path = "support/shipped.rs"]
mod shipped;
use shipped::campaign;

/// The first of `campaign`'s first `runs_max` runs in which the engine with `rules` violates a property the run did
/// not expect to fire, and the oracles that say so. Panics when none does, or when production's engine fails that
/// run too (the catch would then say nothing about the defect).
fn first_caught(campaign_file: &str, rules: EngineRules, runs_max: u64) -> (u64, BTreeSet<String>) {
    let campaign = campaign(campaign_file);
    for index in 0..runs_max {
        let spec = campaign.run_spec(index);
        let seed = campaign.run_seed(index);
        let who = identity(&campaign, index, false);
        let record = run_with_rules(&spec, seed, &who, false, rules.clone()).record;
        let oracles: BTreeSet<String> =
            record.violations.iter().filter(|firing| !firing.expected).map(|firing| firing.oracle.clone()).collect();
        if oracles.is_empty() {
            continue;
        }
        if std::env::var_os("FLEETSIM_SHOW_CATCH").is_some() {
            for firing in record.violations.iter().filter(|firing| !firing.expected) {
                eprintln!("{campaign_file} run {index}: {firing:?}");
            }
        }
        let production = run(&spec, seed, &who, false).record;
        assert!(production.verdict.passed(), "{campaign_file} run {index} fails under production's engine too");
        return (index, oracles);
    }
    panic!("{campaign_file}: none of the first {runs_max} runs catches the defect")
}

fn rollout(rules: impl RolloutRules + 'static) -> EngineRules {
    EngineRules { rollout: Rc::new(rules), ..EngineRules::default() }
}

fn onboarding(rules: impl engine::onboarding::rules::Rules + 'static) -> EngineRules {
    EngineRules { onboarding: Rc::new(rules), ..EngineRules::default() }
}

fn assert_caught(campaign_file: &str, rules: EngineRules, runs_max: u64, run: u64, oracle: &str) {
    let (index, oracles) = first_caught(campaign_file, rules, runs_max);
    assert_eq!(index, run, "{campaign_file}: first caught in run {index} by {oracles:?}");
    assert!(oracles.contains(oracle), "{campaign_file} run {index}: caught by {oracles:?}, not {oracle}");
}

/// The startup-hold writer that silently does nothing when the file is absent: the recovery environment gets its
/// attestation key with no `MAC_STARTUP_CLEAR_HOLD=0` beside it.
struct HoldWriterNoopOnAbsentFile;

impl RolloutRules for HoldWriterNoopOnAbsentFile {
    fn recovery_env_writes(&self, attestation_key: &str) -> Vec<String> {
        vec![format!("MAC_ATTESTATION_KEY={attestation_key}\n")]
    }
}

#[test]
fn the_startup_hold_writer_that_does_nothing_on_an_absent_file_is_caught() {
    assert_caught("ci-50.toml", rollout(HoldWriterNoopOnAbsentFile), 20, 10, "recovery_hold_precedes_identity");
}

/// Heartbeat TTL expiry that ignores epoch membership: the epoch pins nobody.
struct EpochPinsNobody;

impl RolloutRules for EpochPinsNobody {
    fn epoch_members(&self, _lanes: &[Vec<String>]) -> Vec<String> {
        Vec::new()
    }
}

/// No campaign run reaches this defect: a lane's workers are stopped for well under a second of virtual time, and
/// none of the first 100 runs of `ci-50` has its controller die in that window and stay dead past the agent TTL.
/// The scenario aims the death at it.
#[test]
fn ttl_expiry_that_ignores_epoch_membership_is_caught() {
    let file = "rollout-controller-dead-past-the-agent-ttl-with-a-lane-stopped-keeps-its-members.toml";
    let scenario =
        load_scenario(&Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().join("scenarios").join(file)).unwrap();
    let who = RunIdentity { source: format!("scenarios/{file}"), run_index: None, repro: String::new() };
    assert!(run(&scenario.run, scenario.seed, &who, false).record.verdict.passed(), "production fails {file}");
    let record = run_with_rules(&scenario.run, scenario.seed, &who, false, rollout(EpochPinsNobody)).record;
    let oracles: BTreeSet<&str> = record.violations.iter().map(|firing| firing.oracle.as_str()).collect();
    assert!(oracles.contains("epoch_member_never_tombstoned"), "{file}: {oracles:?}");
}

/// Serial quiescence of the whole fleet: one lane of every eligible node.
struct SerialQuiescence;

impl RolloutRules for SerialQuiescence {
    fn plan(&self, input: &PlanInput) -> Result<Plan, PlanError> {
        let mut plan = engine::rollout::plan::plan(input)?;
        plan.lanes = vec![plan.lanes.concat()];
        plan.lane_size = input.nodes.len();
        Ok(plan)
    }
}

#[test]
fn serial_quiescence_of_the_whole_fleet_is_caught() {
    assert_caught("ci-50.toml", rollout(SerialQuiescence), 5, 0, "availability_floor");
}

/// One transient SSH failure ends recovery: nothing is retried.
struct OneTransientEndsRecovery;

impl RolloutRules for OneTransientEndsRecovery {
    fn after_failure(&self, backoff: &Backoff, attempt: u32, failure: AttemptFailure, jitter: u64) -> RetryDecision {
        match failure {
            AttemptFailure::Transient => RetryDecision::Exhausted,
            _ => backoff.after_failure(attempt, failure, jitter),
        }
    }
}

/// The first of `runs_max` runs of `campaign_file` in which production's engine reaches the sometimes-property
/// `oracle`, and whether the engine under `rules` reached it in any of them: a property the campaign requires
/// reached (its gate's `sometimes_all_reached`) and the defect never reaches is the campaign's catch.
fn sometimes_reached(campaign_file: &str, rules: EngineRules, runs_max: u64, oracle: &str) -> (Option<u64>, bool) {
    let campaign = campaign(campaign_file);
    let reached = |record: &reports::RunRecord| record.reached.iter().any(|firing| firing.oracle == oracle);
    let mut production_first = None;
    let mut defect_reached = false;
    for index in 0..runs_max {
        let spec = campaign.run_spec(index);
        let seed = campaign.run_seed(index);
        let who = identity(&campaign, index, false);
        defect_reached |= reached(&run_with_rules(&spec, seed, &who, false, rules.clone()).record);
        if production_first.is_none() && reached(&run(&spec, seed, &who, false).record) {
            production_first = Some(index);
        }
    }
    (production_first, defect_reached)
}

/// With lanes rolled back, a node that stops at its first transient failure leaves every lane converged (prior):
/// what catches the defect is the campaign's `retry_recovered`, which production reaches and the defect never does.
#[test]
fn one_transient_ssh_failure_ending_recovery_is_caught() {
    let (production, defect) = sometimes_reached("ci-50.toml", rollout(OneTransientEndsRecovery), 5, "retry_recovered");
    assert_eq!(production, Some(2), "production's engine recovers a transient failure by retrying");
    assert!(!defect, "an engine that never retries never recovers by a retry");
}

/// Classifier relaxation: a full installed environment with no marker is taken as coherent on the environment's
/// word, whatever the installed tree, manifest and barrier say.
struct MarkerAbsentFullEnvAccepted;

impl RolloutRules for MarkerAbsentFullEnvAccepted {
    fn classify(&self, observation: &NodeObservation, verifier: &dyn SignatureVerifier) -> Verdict {
        let env = observation.env.as_ref().map(|facts| classify_env(&facts.content));
        match env {
            Some(EnvClass::FullInstalled { revision, generation }) if observation.marker.is_none() => {
                Verdict::Coherent { revision, generation }
            }
            _ => engine::rollout::preflight::classify(observation, &Default::default(), verifier),
        }
    }
}

#[test]
fn classifier_relaxation_accepting_marker_absent_full_env_is_caught() {
    assert_caught("ci-50.toml", rollout(MarkerAbsentFullEnvAccepted), 20, 3, "no_incoherent_node_mutated");
}

/// A fetch after quiescence: each node fetches its capsules as it installs, after its stop.
struct FetchAfterQuiescence;

impl RolloutRules for FetchAfterQuiescence {
    fn staging(&self) -> Staging {
        Staging::AtInstall
    }
}

#[test]
fn a_fetch_after_quiescence_is_caught() {
    assert_caught("ci-50.toml", rollout(FetchAfterQuiescence), 5, 0, "no_fetch_after_quiescence");
}

/// A localhost route rewrite: the installed environment sends the agent to the loopback address.
struct LocalhostRoute;

impl RolloutRules for LocalhostRoute {
    fn installed_env(&self, identity: &InstalledIdentity<'_>) -> String {
        engine::rollout::preflight::render_env(&InstalledIdentity { hub_url: "http://127.0.0.1:8080", ..*identity })
    }
}

#[test]
fn a_localhost_route_rewrite_is_caught() {
    assert_caught("ci-50.toml", rollout(LocalhostRoute), 5, 0, "no_rollback_without_a_fault");
}

/// A quarantine that silently shrinks the all-selected denominator: the rollout is called a successor when every
/// node it did not quarantine, and no one else held, upgraded (RCCA P1 "Make quarantine explicit").
struct QuarantineShrinksTheDenominator;

impl RolloutRules for QuarantineShrinksTheDenominator {
    fn rollout_end(&self, account: &[NodeAccount]) -> RolloutEnd {
        let counted =
            |entry: &&NodeAccount| !matches!(entry.outcome, NodeOutcome::Quarantined { .. } | NodeOutcome::Held { .. });
        if account.iter().filter(counted).all(|entry| entry.outcome == NodeOutcome::Upgraded) {
            RolloutEnd::Successor
        } else {
            RolloutEnd::Partial
        }
    }
}

#[test]
fn a_quarantine_that_shrinks_the_all_selected_denominator_is_caught() {
    assert_caught("ci-50.toml", rollout(QuarantineShrinksTheDenominator), 20, 8, "every_selected_node_accounted");
}

/// The fixed 30-minute timeout with no stall detection: every wait runs to MAAS's own timeout.
struct NoStallDetection;

impl engine::onboarding::rules::Rules for NoStallDetection {
    fn stall_detection(&self, _policy: OnboardingPolicy) -> bool {
        false
    }
}

#[test]
fn the_fixed_timeout_without_stall_detection_is_caught() {
    assert_caught("onboarding-50.toml", onboarding(NoStallDetection), 5, 0, "every_node_onboarded_or_diagnosed");
}

/// A deploy retried without a fresh read: every attempt after the first sends its deploy blind.
struct DeployRetriedWithoutFreshRead;

impl engine::onboarding::rules::Rules for DeployRetriedWithoutFreshRead {
    fn reads_before(&self, stage: OnboardingStage, attempt: u32) -> bool {
        stage != OnboardingStage::DeployViaMaas || attempt == 1
    }
}

#[test]
fn a_deploy_retried_without_a_fresh_read_is_caught() {
    let rules = onboarding(DeployRetriedWithoutFreshRead);
    assert_caught("onboarding-50.toml", rules, 5, 0, "no_destructive_call_without_fresh_read");
}
