//! Every shipped campaign parses, and a slice of its runs passes; the rollout gate fails under the legacy controller.
//! (The full 100-run campaigns run in `.ci/run` in release mode, twice, for the determinism check.)

use sim::model::campaign::Campaign;

#[path = "support/shipped.rs"]
mod shipped;
use shipped::campaign;

fn first_runs_pass(campaign: &Campaign, runs: u64) {
    let indices: Vec<u64> = (0..runs).collect();
    for output in sim::run::campaign::execute(campaign, &indices, 2, false, false, &|_| {}) {
        let record = output.record;
        assert!(
            record.verdict.passed(),
            "{}: run {:?} failed: {:#?}",
            campaign.source,
            record.run_index,
            record.violations
        );
    }
}

#[test]
fn the_heartbeat_campaign_passes_its_first_runs() {
    first_runs_pass(&campaign("heartbeats-50.toml"), 6);
}

#[test]
fn the_rollout_gate_passes_its_first_runs_under_lanes() {
    first_runs_pass(&campaign("ci-50.toml"), 6);
}

#[test]
fn the_rollout_gate_fails_under_the_legacy_controller() {
    let mut gate = campaign("ci-50.toml");
    gate.base.engine.rollout_policy = engine::rollout::driver::RolloutPolicy::Legacy;
    let outputs = sim::run::campaign::execute(&gate, &[0, 1, 2], 2, false, false, &|_| {});
    for output in outputs {
        let violated: Vec<&str> = output.record.violations.iter().map(|v| v.oracle.as_str()).collect();
        assert!(violated.contains(&"availability_floor") || violated.contains(&"lane_bound"), "{violated:?}");
        assert!(!output.record.verdict.passed());
    }
}

#[test]
fn the_onboarding_campaign_passes_its_first_runs() {
    first_runs_pass(&campaign("onboarding-50.toml"), 4);
}
