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
    let mut serial_quiescence_seen = false;
    for output in outputs {
        let violated: Vec<&str> = output.record.violations.iter().map(|v| v.oracle.as_str()).collect();
        // Every run fails; one whose first transient SSH loss stopped the controller before it had quiesced much
        // fails on its stuck lane alone, the others on the serial quiescence of the whole fleet.
        assert!(!output.record.verdict.passed(), "{violated:?}");
        serial_quiescence_seen |= violated.contains(&"availability_floor") || violated.contains(&"lane_bound");
    }
    assert!(serial_quiescence_seen, "no legacy run broke the floor or the lane bound");
}

#[test]
fn credential_rotations_under_the_rollout_gate_s_faults_keep_every_property() {
    // The release gate's runs (rollout, controller deaths and crashes, SSH loss, drift, storage, TTL expiry …) with an
    // operator asking for one to three credential rotations of random nodes inside the fault window.
    let mut gate = campaign("ci-50.toml");
    let rate = sim::model::campaign::Rate { per_mille: 1000, count_max: 3, duration_ms: None };
    gate.faults.credential_rotation = Some(rate);
    let runs: Vec<u64> = (0..6).collect();
    let mut rotated = 0;
    for output in sim::run::campaign::execute(&gate, &runs, 2, false, true, &|_| {}) {
        let record = &output.record;
        assert!(record.verdict.passed(), "run {:?} failed: {:#?}", record.run_index, record.violations);
        let requested = gate
            .run_spec(record.run_index.unwrap())
            .steps
            .iter()
            .filter(|timed| timed.step.kind() == "rotate_credential")
            .count();
        assert!((1..=3).contains(&requested), "the knob drew {requested} rotations");
        let ended = output
            .trace
            .iter()
            .filter(|line| line.contains("\"kind\":\"engine.rotation\"") && line.contains("\"event\":\"ended\""))
            .count();
        assert_eq!(ended, requested, "every requested rotation ended (rotated, stopped or aborted)");
        rotated += usize::from(record.reached.iter().any(|firing| firing.oracle == "credential_rotated"));
    }
    assert!(rotated > 0, "no run rotated a credential");
}

#[test]
fn the_onboarding_campaign_passes_its_first_runs() {
    first_runs_pass(&campaign("onboarding-50.toml"), 4);
}

#[test]
fn the_instances_campaign_passes_its_first_runs_and_draws_the_lifecycles_faults_and_requests() {
    let instances = campaign("instances-50.toml");
    first_runs_pass(&instances, 4);
    let spec = instances.run_spec(0);
    let kinds: std::collections::BTreeSet<&str> = spec.steps.iter().map(|timed| timed.step.kind()).collect();
    assert!(kinds.contains("instance_operator") && kinds.contains("provider_fault"), "{kinds:?}");
}

#[test]
fn under_gated_cordons_the_instances_campaign_never_drains_an_uncordoned_instance() {
    // A drain cordons: under a gated cordon policy it must wait for an approved cordon, so every drain the mix draws
    // is refused (its audit record only) or finds the cordon already in place (it writes no `cordoned`).
    let mut gated = campaign("instances-50.toml");
    let instances = gated.base.instances.as_mut().expect("the campaign has [instances]");
    instances.governance.instance_cordon = engine::instance::approval::Policy::RequireApproval;
    let outputs = sim::run::campaign::execute(&gated, &[0, 1, 2, 3, 4, 5], 2, false, true, &|_| {});
    let mut drains = 0;
    for output in outputs {
        assert!(output.record.verdict.passed(), "{:#?}", output.record.violations);
        let drained = output
            .trace
            .iter()
            .filter(|line| line.contains("\"kind\":\"instance.operated\"") && line.contains("\"op\":\"drain\""));
        for drain in drained {
            drains += 1;
            assert!(drain.contains("\"outcome\":\"refused\"") || !drain.contains("\"cordoned\""), "{drain}");
        }
    }
    assert!(drains > 0, "the mix drew no drain");
}
