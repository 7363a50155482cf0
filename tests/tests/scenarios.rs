//! One test per scenario file: each runs, passes, and shows the behaviour its comment promises.

use std::path::Path;

use reports::RunRecord;
use sim::runner::{RunIdentity, run};
use sim::spec::load_scenario;

const SCENARIOS: &[&str] = &[
    "agent-partitioned-from-hub-is-reported-silent-and-recovers.toml",
    "controller-death-resumes-the-sensor-from-its-journal.toml",
    "epoch-aware-expiry-keeps-members-and-expires-strays.toml",
    "fifty-agents-heartbeat-for-two-hours-through-faults.toml",
    "hub-crashes-and-restarts-mid-run.toml",
    "legacy-expiry-tombstones-a-stopped-epoch-member.toml",
];

fn run_file(name: &str) -> (RunRecord, Vec<String>) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().join("scenarios").join(name);
    let scenario = load_scenario(&path).unwrap();
    let identity = RunIdentity { source: name.into(), run_index: None, repro: String::new() };
    let output = run(&scenario.run, scenario.seed, &identity, true);
    assert!(output.record.verdict.passed(), "{name}: {:#?}", output.record);
    (output.record, output.trace)
}

fn events<'a>(trace: &'a [String], kind: &str) -> Vec<&'a String> {
    let needle = format!("\"kind\":\"{kind}\"");
    trace.iter().filter(|line| line.contains(&needle)).collect()
}

#[test]
fn every_scenario_file_has_a_test_here() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().join("scenarios");
    let mut files: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    files.sort();
    assert_eq!(files, SCENARIOS, "add a test for each new scenario file");
}

#[test]
fn agent_partitioned_from_hub_is_reported_silent_and_recovers() {
    let (record, trace) = run_file(SCENARIOS[0]);
    let silent = events(&trace, "engine.instance_silent");
    assert_eq!(silent.len(), 1, "{silent:?}");
    assert!(silent[0].contains("node-03"));
    let t_silent: u64 = record.reached.iter().find(|r| r.oracle == "instance_silent_raised").unwrap().t_ms;
    assert!((780_000..=840_100).contains(&t_silent), "silence reported 3-4 min after the cut, at {t_silent}");
    assert_eq!(events(&trace, "engine.instance_recovered").len(), 1);
    assert_eq!(record.faults["partition"], 1);
}

#[test]
fn controller_death_resumes_the_sensor_from_its_journal() {
    let (_, trace) = run_file(SCENARIOS[1]);
    let recovered = events(&trace, "engine.instance_recovered");
    assert_eq!(recovered.len(), 1, "the restarted controller reports node-02's recovery once");
    assert!(recovered[0].contains("\"t_ms\":12000"), "reported right after the restart at 1_200_000: {recovered:?}");
    assert_eq!(events(&trace, "engine.instance_silent").len(), 1, "and does not raise the silence again");
}

#[test]
fn epoch_aware_expiry_keeps_members_and_expires_strays() {
    let (record, trace) = run_file(SCENARIOS[2]);
    let tombstoned = events(&trace, "hub.tombstoned");
    assert_eq!(tombstoned.len(), 1, "{tombstoned:?}");
    assert!(tombstoned[0].contains("node-05"), "only the unrelated fungible agent expires");
    let offline = events(&trace, "hub.offline");
    assert_eq!(offline.len(), 1);
    assert!(offline[0].contains("node-07"), "the durable worker goes offline, never deleted");
    assert!(record.violations.is_empty());
    assert!(trace.iter().any(|l| l.contains("hub.back_online") && l.contains("node-07")));
}

#[test]
fn hub_crashes_and_restarts_mid_run() {
    let (_, trace) = run_file(SCENARIOS[4]);
    assert_eq!(events(&trace, "host.crash").len(), 1);
    let refused = trace.iter().filter(|l| l.contains("connection refused")).count();
    assert!(refused >= 10, "every agent's heartbeats are refused while the hub is down ({refused})");
    // Every agent was silent for five minutes: each is reported silent and recovered exactly once.
    assert_eq!(events(&trace, "engine.instance_silent").len(), 10);
    assert_eq!(events(&trace, "engine.instance_recovered").len(), 10);
}

#[test]
fn legacy_expiry_tombstones_a_stopped_epoch_member() {
    let (record, trace) = run_file(SCENARIOS[5]);
    let violated: Vec<&str> = record.violations.iter().map(|v| v.oracle.as_str()).collect();
    assert_eq!(violated, ["epoch_member_never_tombstoned", "epoch_member_never_tombstoned"]);
    assert!(record.violations.iter().all(|v| v.expected));
    assert!(events(&trace, "hub.heartbeat_refused").len() >= 2, "the restarted members are rejected as unknown");
}

#[test]
fn fifty_agents_heartbeat_for_two_hours_through_faults() {
    let (record, trace) = run_file(SCENARIOS[3]);
    let heartbeats = events(&trace, "hub.heartbeat").len();
    assert!((11_000..12_100).contains(&heartbeats), "about 50 agents x 240 heartbeats, minus outages: {heartbeats}");
    assert_eq!(record.virtual_duration_ms, 7_200_000);
    assert_eq!(record.faults["crash"], 2);
}
