//! Determinism: the same seed gives the same trace digest — twice in one process, on other threads, and whatever
//! a campaign's `--jobs` is — and different seeds give different digests.

use std::path::Path;

use sim::model::campaign::load_campaign;
use sim::model::spec::load_scenario;
use sim::run::runner::{RunIdentity, run};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

fn identity() -> RunIdentity {
    RunIdentity { source: "determinism".into(), run_index: None, repro: String::new() }
}

#[test]
fn every_scenario_gives_the_same_digest_twice_and_on_another_thread() {
    for entry in std::fs::read_dir(root().join("scenarios")).unwrap() {
        let path = entry.unwrap().path();
        let scenario = load_scenario(&path).unwrap();
        let first = run(&scenario.run, scenario.seed, &identity(), true);
        let second = run(&scenario.run, scenario.seed, &identity(), false);
        assert_eq!(first.record.trace_digest, second.record.trace_digest, "{}", path.display());
        let (spec, seed) = (scenario.run.clone(), scenario.seed);
        let threaded = std::thread::spawn(move || run(&spec, seed, &identity(), false)).join().unwrap();
        assert_eq!(first.record.trace_digest, threaded.record.trace_digest, "{} on another thread", path.display());
        // The digest is the trace's: recompute it from the kept lines.
        let mut text = first.trace.join("\n");
        text.push('\n');
        assert_eq!(sim::model::digest::sha256_hex(text.as_bytes()), first.record.trace_digest);
    }
}

#[test]
fn different_seeds_give_different_digests() {
    let scenario = load_scenario(&root().join("scenarios/hub-crashes-and-restarts-mid-run.toml")).unwrap();
    let digests: std::collections::BTreeSet<String> =
        (0..6).map(|seed| run(&scenario.run, seed, &identity(), false).record.trace_digest).collect();
    assert_eq!(digests.len(), 6);
}

#[test]
fn a_campaign_gives_identical_runs_with_one_job_and_with_two() {
    let mut campaign = load_campaign(&root().join("campaigns/heartbeats-50.toml")).unwrap();
    campaign.runs = 8;
    let indices: Vec<u64> = (0..8).collect();
    let one = sim::run::campaign::execute(&campaign, &indices, 1, false, false, &|_| {});
    let two = sim::run::campaign::execute(&campaign, &indices, 2, false, false, &|_| {});
    let digests = |outputs: &[sim::run::runner::RunOutput]| -> Vec<(u64, String)> {
        outputs.iter().map(|o| (o.record.seed, o.record.trace_digest.clone())).collect()
    };
    assert_eq!(digests(&one), digests(&two));
    let report_one = sim::run::campaign::report(&campaign, one.into_iter().map(|o| o.record).collect());
    let report_two = sim::run::campaign::report(&campaign, two.into_iter().map(|o| o.record).collect());
    assert_eq!(report_one.summary, report_two.summary);
    // A run replayed alone, as its reproduce command does, gives the same digest as inside the campaign.
    let alone = sim::run::campaign::execute(&campaign, &[5], 1, false, false, &|_| {});
    assert_eq!(alone[0].record.trace_digest, report_one.runs[5].trace_digest);
}
