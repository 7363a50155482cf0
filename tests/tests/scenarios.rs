//! One test per scenario file: each runs, passes, and shows the behaviour its comment promises.

use std::path::Path;

use reports::RunRecord;
use sim::runner::{RunIdentity, run};
use sim::spec::load_scenario;

const SCENARIOS: &[&str] = &[
    "agent-partitioned-from-hub-is-reported-silent-and-recovers.toml",
    "controller-death-resumes-the-sensor-from-its-journal.toml",
    "decommission-controller-killed-after-the-release-call-waits-out-the-erase.toml",
    "epoch-aware-expiry-keeps-members-and-expires-strays.toml",
    "fifty-agents-heartbeat-for-two-hours-through-faults.toml",
    "hub-crashes-and-restarts-mid-run.toml",
    "legacy-expiry-tombstones-a-stopped-epoch-member.toml",
    "legacy-rollout-without-faults-breaks-the-rcca-invariants.toml",
    "maas-commissioning-2026-07-20-under-the-matrix.toml",
    "maas-commissioning-2026-07-20.toml",
    "onboarding-controller-killed-after-a-checkpoint-reruns-and-completes.toml",
    "onboarding-controller-killed-after-the-deploy-call-adopts-the-deploy.toml",
    "onboarding-controller-killed-before-completion-adopts-the-deployed-machine.toml",
    "onboarding-resumed-after-a-stop-mid-deploy-releases-then-reruns.toml",
    "onboarding-two-machines-deploy-and-enrol-their-agents.toml",
    "ovswarm-2026-09-21-under-lanes.toml",
    "ovswarm-2026-09-21.toml",
    "rollout-abort-is-monotonic-for-an-untouched-participant.toml",
    "rollout-controller-killed-after-intent-adopts-the-journal.toml",
    "rollout-controller-killed-after-remote-mutation-adopts-the-journal.toml",
    "rollout-controller-killed-before-completion-adopts-the-journal.toml",
    "rollout-early-cohort-absent-env-is-recreated-hold-first.toml",
    "rollout-endpoint-identity-change-during-retry-fails-closed.toml",
    "rollout-exhausted-retries-leave-the-lane-held.toml",
    "rollout-expired-credential-is-renewed-without-double-effects.toml",
    "rollout-first-hub-timeout-then-success-without-double-effects.toml",
    "rollout-first-ssh-timeout-then-success-without-double-effects.toml",
    "rollout-negative-repairs-quarantine-every-unsafe-shape.toml",
    "rollout-operator-hold-is-kept-and-its-node-left-alone.toml",
    "rollout-positive-marker-repair-with-agreeing-evidence.toml",
    "rollout-route-swap-stops-at-the-next-lane-boundary.toml",
    "rollout-route-swap-while-the-controller-is-dead-finishes-the-begun-lane.toml",
    "rollout-stale-lock-of-a-dead-controller-is-waited-out.toml",
    "rollout-twice-in-a-row-each-converges.toml",
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
    let (record, trace) = run_file("agent-partitioned-from-hub-is-reported-silent-and-recovers.toml");
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
    let (_, trace) = run_file("controller-death-resumes-the-sensor-from-its-journal.toml");
    let recovered = events(&trace, "engine.instance_recovered");
    assert_eq!(recovered.len(), 1, "the restarted controller reports node-02's recovery once");
    assert!(recovered[0].contains("\"t_ms\":12000"), "reported right after the restart at 1_200_000: {recovered:?}");
    assert_eq!(events(&trace, "engine.instance_silent").len(), 1, "and does not raise the silence again");
}

#[test]
fn epoch_aware_expiry_keeps_members_and_expires_strays() {
    let (record, trace) = run_file("epoch-aware-expiry-keeps-members-and-expires-strays.toml");
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
    let (_, trace) = run_file("hub-crashes-and-restarts-mid-run.toml");
    assert_eq!(events(&trace, "host.crash").len(), 1);
    let refused = trace.iter().filter(|l| l.contains("connection refused")).count();
    assert!(refused >= 10, "every agent's heartbeats are refused while the hub is down ({refused})");
    // Every agent was silent for five minutes: each is reported silent and recovered exactly once.
    assert_eq!(events(&trace, "engine.instance_silent").len(), 10);
    assert_eq!(events(&trace, "engine.instance_recovered").len(), 10);
}

#[test]
fn legacy_expiry_tombstones_a_stopped_epoch_member() {
    let (record, trace) = run_file("legacy-expiry-tombstones-a-stopped-epoch-member.toml");
    let violated: Vec<&str> = record.violations.iter().map(|v| v.oracle.as_str()).collect();
    assert_eq!(violated, ["epoch_member_never_tombstoned", "epoch_member_never_tombstoned"]);
    assert!(record.violations.iter().all(|v| v.expected));
    assert!(events(&trace, "hub.heartbeat_refused").len() >= 2, "the restarted members are rejected as unknown");
}

#[test]
fn fifty_agents_heartbeat_for_two_hours_through_faults() {
    let (record, trace) = run_file("fifty-agents-heartbeat-for-two-hours-through-faults.toml");
    let heartbeats = events(&trace, "hub.heartbeat").len();
    assert!((11_000..12_100).contains(&heartbeats), "about 50 agents x 240 heartbeats, minus outages: {heartbeats}");
    assert_eq!(record.virtual_duration_ms, 7_200_000);
    assert_eq!(record.faults["crash"], 2);
}

/// Lines of one host whose `kind` is `kind` and that contain every needle.
fn on<'a>(trace: &'a [String], host: &str, kind: &str, needles: &[&str]) -> Vec<&'a String> {
    let host = format!("\"host\":\"{host}\"");
    events(trace, kind).into_iter().filter(|l| l.contains(&host) && needles.iter().all(|n| l.contains(n))).collect()
}

fn rollout<'a>(trace: &'a [String], event: &str) -> Vec<&'a String> {
    let needle = format!("\"event\":\"{event}\"");
    events(trace, "engine.rollout").into_iter().filter(|l| l.contains(&needle)).collect()
}

fn violated(record: &RunRecord) -> std::collections::BTreeSet<&str> {
    record.violations.iter().map(|v| v.oracle.as_str()).collect()
}

#[test]
fn ovswarm_2026_09_21_replays_the_incident_under_legacy() {
    let (record, trace) = run_file("ovswarm-2026-09-21.toml");
    assert_eq!(
        violated(&record),
        ["availability_floor", "every_lane_converged", "holds_accounted", "lane_bound"].into()
    );
    assert!(record.violations.iter().all(|v| v.expected));
    let failed = rollout(&trace, "node_failed");
    assert_eq!(failed.len(), 2, "{failed:?}");
    assert!(failed[0].contains("node-50") && failed[0].contains("retained successor has an installed identity"));
    assert!(
        failed[1].contains("\"node\":\"hub\"") && failed[1].contains("timed out"),
        "recovery stopped by the hub ssh timeout"
    );
    let stopped = events(&trace, "worker.mutated").into_iter().filter(|l| l.contains("stop_service")).count();
    assert_eq!(stopped, 49, "workers 1-49 quiesced serially");
    assert_eq!(events(&trace, "hub.tombstoned").len(), 49, "every stopped worker tombstoned by the legacy TTL");
    assert!(events(&trace, "worker.mutated").iter().all(|l| !l.contains("start_service")), "the fleet stays down");
}

#[test]
fn ovswarm_2026_09_21_under_lanes_quarantines_worker_50_and_converges() {
    let (record, trace) = run_file("ovswarm-2026-09-21-under-lanes.toml");
    assert!(record.violations.is_empty());
    let quarantined = rollout(&trace, "quarantined");
    assert_eq!(quarantined.len(), 1);
    assert!(quarantined[0].contains("node-50") && quarantined[0].contains("signature does not verify"));
    assert!(quarantined[0].contains("is absent but ~/.mac/mac.env carries a full installed identity"));
    let plan = rollout(&trace, "plan_frozen");
    assert!(plan[0].contains("\"lanes\":7") && plan[0].contains("\"lane_size\":7"), "{plan:?}");
    let lanes = rollout(&trace, "lane_committed");
    assert_eq!(lanes.len(), 7);
    assert!(lanes.iter().all(|l| l.contains("\"verdict\":\"successor\"")));
    assert!(on(&trace, "node-50", "worker.mutated", &[]).is_empty(), "worker-50 is never mutated");
    assert_eq!(events(&trace, "worker.mutated").iter().filter(|l| l.contains("run_installer")).count(), 49);
}

fn adopted_and_converged(name: &str) -> Vec<String> {
    let (record, trace) = run_file(name);
    assert!(record.violations.is_empty(), "{name}: {:?}", record.violations);
    assert_eq!(on(&trace, "controller", "host.crash", &[]).len(), 1, "{name}");
    let adopted = rollout(&trace, "adopted");
    assert_eq!(adopted.len(), 1, "{name}");
    assert!(adopted[0].contains("\"revision\":\"2944aebb\""), "the journal's exact revision");
    let terminal = rollout(&trace, "terminal");
    assert!(terminal.last().unwrap().contains("successor"), "{name}: {terminal:?}");
    trace
}

#[test]
fn rollout_controller_killed_after_intent_adopts_the_journal() {
    let trace = adopted_and_converged("rollout-controller-killed-after-intent-adopts-the-journal.toml");
    assert!(rollout(&trace, "adopted")[0].contains("\"in_doubt\":"));
}

#[test]
fn rollout_controller_killed_after_remote_mutation_adopts_the_journal() {
    let trace = adopted_and_converged("rollout-controller-killed-after-remote-mutation-adopts-the-journal.toml");
    // The step that ran before the death is found done on the node: no worker ran any operation id twice.
    let mut ids: Vec<&str> =
        events(&trace, "worker.mutated").iter().filter_map(|l| l.split("\"operation_id\":\"").nth(1)).collect();
    let total = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), total);
}

#[test]
fn rollout_controller_killed_before_completion_adopts_the_journal() {
    let trace = adopted_and_converged("rollout-controller-killed-before-completion-adopts-the-journal.toml");
    let completed =
        events(&trace, "controller.journal").into_iter().filter(|l| l.contains("\"record\":\"completed\"")).count();
    assert_eq!(completed, 16 * 7, "every step of every node completed exactly once in the journal");
}

#[test]
fn rollout_early_cohort_absent_env_is_recreated_hold_first() {
    let (_, trace) = run_file("rollout-early-cohort-absent-env-is-recreated-hold-first.toml");
    let writes = on(&trace, "node-02", "worker.mutated", &["~/.mac/mac.env"]);
    assert!(writes.len() >= 3, "{writes:?}");
    assert!(
        writes[0].contains("repair-0") && writes[1].contains("repair-1"),
        "the hold-only env is written before the key"
    );
    assert!(rollout(&trace, "repaired")[0].contains("node-02"));
}

#[test]
fn rollout_endpoint_identity_change_during_retry_fails_closed() {
    let (record, trace) = run_file("rollout-endpoint-identity-change-during-retry-fails-closed.toml");
    assert!(record.violations.iter().all(|v| v.oracle == "every_lane_converged" && v.expected));
    let failed = rollout(&trace, "node_failed");
    assert_eq!(failed.len(), 1);
    assert!(failed[0].contains("node-07") && failed[0].contains("host key mismatch"), "{failed:?}");
    assert!(
        on(&trace, "node-07", "worker.mutated", &["stop_service"]).is_empty(),
        "nothing ran under the new identity"
    );
    let lanes = rollout(&trace, "lane_committed");
    assert_eq!(lanes.len(), 2, "lanes after a stuck one are not started, so not committed: {lanes:?}");
    assert!(lanes[0].contains("successor") && lanes[1].contains("stuck"), "{lanes:?}");
    for node in 9..=16 {
        let name = format!("node-{node:02}");
        assert!(
            on(&trace, &name, "worker.mutated", &["stop_service"]).is_empty(),
            "no lane goes down after a stuck one"
        );
    }
}

#[test]
fn rollout_exhausted_retries_leave_the_lane_held() {
    let (_, trace) = run_file("rollout-exhausted-retries-leave-the-lane-held.toml");
    let failed = rollout(&trace, "node_failed");
    assert_eq!(failed.len(), 1);
    assert!(failed[0].contains("\"endpoint\":\"node-06@hostkey-node-06-1\""), "the failed endpoint is named");
    assert!(failed[0].contains("\"replay\":\"re-run the rollout: the controller adopts journal rollout-2944aebb"));
    assert_eq!(rollout(&trace, "retrying").iter().filter(|l| l.contains("node-06")).count(), 4, "five attempts in all");
    assert!(on(&trace, "hub", "hub.hold_released", &["node-06"]).is_empty(), "the hold stays");
    assert!(
        events(&trace, "controller.journal").iter().all(|l| !l.contains("\"record\":\"terminal\"")),
        "journal non-terminal"
    );
}

#[test]
fn rollout_first_ssh_timeout_then_success_without_double_effects() {
    let (record, trace) = run_file("rollout-first-ssh-timeout-then-success-without-double-effects.toml");
    assert!(record.violations.is_empty());
    assert_eq!(rollout(&trace, "retrying").len(), 1);
    assert_eq!(on(&trace, "node-07", "worker.mutated", &["stop_service"]).len(), 1, "quiesced once");
}

#[test]
fn rollout_negative_repairs_quarantine_every_unsafe_shape() {
    let (record, trace) = run_file("rollout-negative-repairs-quarantine-every-unsafe-shape.toml");
    assert!(record.violations.is_empty());
    let quarantined = rollout(&trace, "quarantined");
    assert_eq!(quarantined.len(), 9);
    let concurrent = quarantined.iter().find(|l| l.contains("node-09")).unwrap();
    assert!(concurrent.contains("c0ffee0"), "the changed install is named as the contradiction: {concurrent}");
    for node in 1..=9 {
        let name = format!("node-{node:02}");
        assert!(quarantined.iter().any(|l| l.contains(&name)), "{name} quarantined");
        assert!(on(&trace, &name, "worker.mutated", &[]).is_empty(), "{name} never mutated");
    }
}

#[test]
fn rollout_positive_marker_repair_with_agreeing_evidence() {
    let (record, trace) = run_file("rollout-positive-marker-repair-with-agreeing-evidence.toml");
    assert!(record.violations.is_empty());
    assert!(rollout(&trace, "quarantined").is_empty());
    let repair = on(&trace, "node-05", "worker.mutated", &["repair-0"]);
    assert_eq!(repair.len(), 1);
    assert!(repair[0].contains("~/.mac/deployed-source-revision"), "the marker is written, nothing else is touched");
}

#[test]
fn rollout_twice_in_a_row_each_converges() {
    let (_, trace) = run_file("rollout-twice-in-a-row-each-converges.toml");
    let terminals = rollout(&trace, "terminal");
    assert_eq!(terminals.len(), 2);
    assert!(terminals.iter().all(|l| l.contains("successor")));
    assert!(terminals[1].contains("rollout-1154f2ad"));
    let installs: Vec<&String> =
        events(&trace, "worker.mutated").into_iter().filter(|l| l.contains("run_installer")).collect();
    assert_eq!(installs.iter().filter(|l| l.contains("2944aebb@5")).count(), 10);
    assert_eq!(installs.iter().filter(|l| l.contains("1154f2ad@6")).count(), 10, "the second release is generation 6");
}

#[test]
fn legacy_rollout_without_faults_breaks_the_rcca_invariants() {
    let (record, trace) = run_file("legacy-rollout-without-faults-breaks-the-rcca-invariants.toml");
    assert_eq!(violated(&record), ["availability_floor", "lane_bound", "no_fetch_after_quiescence"].into());
    assert!(record.violations.iter().all(|v| v.expected));
    assert_eq!(
        on(&trace, "node-01", "worker.mutated", &["stage_artifact"]).len(),
        6,
        "six capsules fetched after the stop"
    );
}

#[test]
fn rollout_route_swap_stops_at_the_next_lane_boundary() {
    let (record, trace) = run_file("rollout-route-swap-stops-at-the-next-lane-boundary.toml");
    assert!(record.violations.is_empty());
    let lanes = rollout(&trace, "lane_committed");
    assert_eq!(lanes.len(), 2, "lanes 0 and 1 ran; 2 and 3 were not taken down: {lanes:?}");
    assert!(lanes.iter().all(|l| l.contains("successor")));
    let changed = rollout(&trace, "route_changed");
    assert!(
        changed[0].contains("\"frozen\":\"sha256:routes-1\"")
            && changed[0].contains("\"published\":\"sha256:routes-2\"")
    );
    assert!(rollout(&trace, "terminal")[0].contains("converged"));
    assert!(on(&trace, "node-09", "worker.mutated", &["stop_service"]).is_empty());
}

#[test]
fn rollout_route_swap_while_the_controller_is_dead_finishes_the_begun_lane() {
    let (record, trace) = run_file("rollout-route-swap-while-the-controller-is-dead-finishes-the-begun-lane.toml");
    assert!(record.violations.is_empty(), "{:?}", record.violations);
    let lanes = rollout(&trace, "lane_committed");
    assert_eq!(lanes.len(), 1, "{lanes:?}");
    assert!(lanes[0].contains("\"lane\":0") && lanes[0].contains("successor"), "the begun lane is finished");
    assert!(rollout(&trace, "route_changed").len() == 1);
    for node in 1..=4 {
        let name = format!("node-{node:02}");
        assert_eq!(on(&trace, "hub", "hub.hold_released", &[&name, "deploy:"]).len(), 1, "{name}'s hold released");
    }
}

/// The virtual time of a trace line.
fn t_of(line: &str) -> u64 {
    let start = line.find("\"t_ms\":").unwrap() + 7;
    line[start..].split(',').next().unwrap().parse().unwrap()
}

#[test]
fn rollout_first_hub_timeout_then_success_without_double_effects() {
    let (record, trace) = run_file("rollout-first-hub-timeout-then-success-without-double-effects.toml");
    assert!(record.violations.is_empty(), "{:?}", record.violations);
    let retries = rollout(&trace, "retrying");
    assert_eq!(retries.len(), 1, "{retries:?}");
    assert!(retries[0].contains("\"step\":\"release\""), "the lost answer was a hold release");
    for node in 1..=16 {
        let name = format!("\"agent\":\"node-{node:02}\",\"owner\":\"deploy:");
        let released = events(&trace, "hub.hold_released").into_iter().filter(|l| l.contains(&name)).count();
        assert_eq!(released, 1, "node-{node:02}: one release per hold");
    }
    let completions: Vec<&String> =
        events(&trace, "controller.journal").into_iter().filter(|l| l.contains("\"record\":\"completed\"")).collect();
    let unique: std::collections::BTreeSet<&String> = completions.iter().copied().collect();
    assert_eq!(completions.len(), unique.len(), "no duplicate journal transition");
    let key_writes = events(&trace, "worker.mutated").into_iter().filter(|l| l.contains("write_identity/env")).count();
    assert_eq!(key_writes, 16, "each node's key written once");
}

#[test]
fn rollout_stale_lock_of_a_dead_controller_is_waited_out() {
    let (record, trace) = run_file("rollout-stale-lock-of-a-dead-controller-is-waited-out.toml");
    assert!(record.violations.is_empty(), "{:?}", record.violations);
    let waiting = rollout(&trace, "lock_waiting");
    assert_eq!(waiting.len(), 1);
    assert!(waiting[0].contains("controller@crashed-earlier"));
    let taken = events(&trace, "hub.lock_acquired");
    assert_eq!(taken.len(), 2, "the dead holder's, then ours: {taken:?}");
    let taken_at = t_of(taken[1]);
    assert!(taken_at >= 355_000, "taken only once the dead holder's lease ran out: {}", taken[1]);
    let first_mutation = events(&trace, "worker.mutated").first().map(|l| t_of(l)).unwrap();
    assert!(first_mutation > taken_at, "no mutation before the lock");
    assert!(rollout(&trace, "terminal")[0].contains("successor"));
}

#[test]
fn rollout_expired_credential_is_renewed_without_double_effects() {
    let (record, trace) = run_file("rollout-expired-credential-is-renewed-without-double-effects.toml");
    assert!(record.violations.is_empty(), "{:?}", record.violations);
    assert!(!events(&trace, "hub.credential_rejected").is_empty(), "the hub refused the expired credential");
    let renewed = rollout(&trace, "reauthenticated");
    assert!(!renewed.is_empty());
    assert!(t_of(renewed[0]) >= 120_000, "not before the rotation renewed it");
    assert!(rollout(&trace, "node_failed").is_empty(), "a credential outage fails no node");
    assert!(rollout(&trace, "terminal")[0].contains("successor"));
}

#[test]
fn rollout_operator_hold_is_kept_and_its_node_left_alone() {
    let (record, trace) = run_file("rollout-operator-hold-is-kept-and-its-node-left-alone.toml");
    assert!(record.violations.is_empty(), "{:?}", record.violations);
    assert_eq!(rollout(&trace, "skipped_held").len(), 1);
    assert!(on(&trace, "node-03", "worker.mutated", &[]).is_empty(), "node-03 left alone");
    assert!(events(&trace, "hub.hold_released").iter().all(|l| !l.contains("operator:")));
    let lanes = rollout(&trace, "lane_committed");
    assert_eq!(lanes.len(), 5, "15 nodes in lanes of 3: {lanes:?}");
    assert!(lanes.iter().all(|l| l.contains("successor") && !l.contains("node-03")));
}

#[test]
fn rollout_abort_is_monotonic_for_an_untouched_participant() {
    let (record, trace) = run_file("rollout-abort-is-monotonic-for-an-untouched-participant.toml");
    assert!(record.violations.is_empty(), "{:?}", record.violations);
    let superseding = on(&trace, "hub", "hub.hold_placed", &["node-16", "successor:"]);
    assert_eq!(superseding.len(), 1, "a superseding hold on the revoked, untouched participant");
    let closed = events(&trace, "hub.epoch_closed");
    assert_eq!(closed.len(), 1, "the epoch is terminal despite the missing principal");
    assert!(t_of(superseding[0]) < t_of(closed[0]));
    // Staged, never stopped, never given a candidate identity: untouched in the RCCA's sense.
    let node_16 = on(&trace, "node-16", "worker.mutated", &[]);
    assert!(node_16.iter().all(|l| l.contains("stage_artifact")), "{node_16:?}");
    assert!(rollout(&trace, "terminal")[0].contains("converged"));
}

#[test]
fn two_machines_deploy_through_maas_and_enrol_their_agents() {
    let (record, trace) = run_file("onboarding-two-machines-deploy-and-enrol-their-agents.toml");
    assert!(record.violations.is_empty(), "{:#?}", record.violations);
    let completed: Vec<&String> = events(&trace, "engine.onboarding")
        .into_iter()
        .filter(|line| line.contains("\"event\":\"completed\""))
        .collect();
    assert_eq!(completed.len(), 2);
    for node in ["node-02", "node-03"] {
        let enrolled = events(&trace, "site.agent_enrol")
            .into_iter()
            .any(|line| line.contains(&format!("\"machine\":\"{node}\"")));
        assert!(enrolled, "{node} enrolled its agent");
        let heartbeats = events(&trace, "hub.heartbeat")
            .into_iter()
            .filter(|line| line.contains(&format!("\"agent\":\"{node}\"")))
            .count();
        assert!(heartbeats > 0, "{node} heartbeats after enrolling");
    }
    assert!(!events(&trace, "site.status").is_empty());
}

fn onboarding<'a>(trace: &'a [String], event: &str) -> Vec<&'a String> {
    let needle = format!("\"event\":\"{event}\"");
    events(trace, "engine.onboarding").into_iter().filter(|l| l.contains(&needle)).collect()
}

#[test]
fn maas_commissioning_2026_07_20_replays_the_incident_under_legacy() {
    let (record, trace) = run_file("maas-commissioning-2026-07-20.toml");
    assert!(record.violations.iter().all(|v| v.expected && v.oracle == "every_node_onboarded_or_diagnosed"));
    // Consecutive 30-minute commissioning timeouts, each blindly retried.
    let timeouts: Vec<u64> = onboarding(&trace, "stage_failed")
        .into_iter()
        .filter(|l| l.contains("onboard-node-05") && l.contains("wait_for_ready") && l.contains("timed out"))
        .map(|l| t_of(l))
        .collect();
    assert!(timeouts.len() >= 2, "{timeouts:?}");
    assert!(timeouts.windows(2).all(|w| w[1] - w[0] >= 30 * 60_000), "each a full node_timeout: {timeouts:?}");
    // Zero script events once the apply has landed (the first three finished their last scripts at 345 s).
    let scripts_after_apply = events(&trace, "site.maas_event")
        .into_iter()
        .filter(|l| t_of(l) > 400_000 && l.contains("\"event_type\":\"Script result\""))
        .count();
    assert_eq!(scripts_after_apply, 0);
    // Every rebooted node enlisted as an unknown machine.
    let enlisted = events(&trace, "site.enlisted");
    assert!(enlisted.len() >= 6, "{}", enlisted.len());
    assert!(onboarding(&trace, "stalled").is_empty(), "the legacy controller has no stall detection");
}

#[test]
fn maas_commissioning_2026_07_20_under_the_matrix_is_diagnosed_within_the_stall_window() {
    let (record, trace) = run_file("maas-commissioning-2026-07-20-under-the-matrix.toml");
    assert!(record.violations.is_empty(), "{:?}", record.violations);
    let stopped: Vec<&String> =
        onboarding(&trace, "stopped").into_iter().filter(|line| t_of(line) < 1_800_000).collect();
    assert_eq!(stopped.len(), 9, "every workflow rests with a diagnosis before the repairs");
    assert!(stopped.iter().all(|l| l.contains("failed_manual_intervention")));
    let drifted: Vec<&&String> = stopped.iter().filter(|l| l.contains("state_ambiguity")).collect();
    assert_eq!(drifted.len(), 3, "the three deploying nodes");
    for line in &drifted {
        assert!(line.contains("unknown machine") && line.contains("SERVFAIL"), "both faults named: {line}");
        // The deploy started at about 346 s: the stall window is five minutes, not MAAS's thirty.
        assert!(t_of(line) < 346_000 + 5 * 60_000 + 60_000, "{line}");
    }
    let observed_first = stopped.iter().filter(|l| l.contains("load_site_config")).count();
    assert_eq!(observed_first, 6, "the later workflows read the resolver first and touch nothing");
    // After the repairs and the resume at 1,860 s, the canary commissions to Ready, then completes.
    let resumed_ms = 1_860_000;
    let canary_ready = trace
        .iter()
        .find(|l| {
            l.contains("\"workflow\":\"onboard-node-05\"")
                && l.contains("\"stage\":\"wait_for_ready\"")
                && l.contains("stage_done")
        })
        .unwrap_or_else(|| panic!("the canary never reached Ready"));
    let ready_after_ms = t_of(canary_ready) - resumed_ms;
    assert!(ready_after_ms < 7 * 60_000, "canary Ready {ready_after_ms} ms after the resume");
    let completed = onboarding(&trace, "completed");
    assert_eq!(completed.len(), 1, "{completed:?}");
    assert!(completed[0].contains("onboard-node-05"));
    assert!(
        trace
            .iter()
            .filter(|l| l.contains("onboard-node-05") && l.contains("stage_failed"))
            .all(|l| t_of(l) < resumed_ms),
        "the resumed run fails nowhere"
    );
}

#[test]
fn onboarding_resumed_after_a_stop_mid_deploy_releases_then_reruns() {
    let (record, trace) = run_file("onboarding-resumed-after-a-stop-mid-deploy-releases-then-reruns.toml");
    assert!(record.violations.is_empty(), "{:?}", record.violations);
    let resumed_ms = 1_260_000;
    let stopped = onboarding(&trace, "stopped");
    assert_eq!(stopped.len(), 1, "{stopped:?}");
    assert!(stopped[0].contains("state_ambiguity") && t_of(stopped[0]) < resumed_ms, "{}", stopped[0]);
    // The rerun: Deploying (its own earlier deploy) back to Ready first; Ready satisfies commissioning's checkpoint
    // and is adopted; then the machine is deployed again.
    let after: Vec<&String> = trace.iter().filter(|l| t_of(l) >= resumed_ms).collect();
    let position = |needle: &str| after.iter().position(|l| l.contains(needle));
    let aborted = position("\"from\":\"deploying\",\"to\":\"allocated\"").expect("aborted");
    let ready = position("\"from\":\"releasing\",\"to\":\"ready\"").expect("released to Ready");
    let adopted = position("\"stage\":\"commission_node\",\"adopted\":true").expect("Ready adopted");
    let redeployed = position("\"from\":\"ready\",\"to\":\"allocated\"").expect("deployed again");
    assert!(aborted < ready && ready < adopted && adopted < redeployed, "{aborted} {ready} {adopted} {redeployed}");
    assert!(after.iter().all(|l| !l.contains("stage_failed")), "the rerun fails nowhere");
    assert_eq!(onboarding(&trace, "completed").len(), 1);
}

/// A MAAS workflow's controller death: the run passes (so `no_duplicate_mutation` held), is deterministic (the same
/// digest twice), the controller died once and booted again, and `workflow` completed after the restart. Returns the
/// trace and the number of MAAS-accepted calls of each op of `workflow`.
fn killed_and_converged(name: &str, workflow: &str) -> (Vec<String>, std::collections::BTreeMap<String, usize>) {
    let (record, trace) = run_file(name);
    let (again, _) = run_file(name);
    assert_eq!(record.trace_digest, again.trace_digest, "{name}: not deterministic");
    assert_eq!(record.faults["controller_death"], 1);
    let crashes = events(&trace, "host.crash");
    assert_eq!(crashes.len(), 1, "{crashes:?}");
    assert!(crashes[0].contains("\"host\":\"controller\""));
    let boot = trace.iter().position(|l| l.contains("\"kind\":\"host.boot\",\"boot\":2")).expect("a restart");
    let completed = format!("\"workflow\":\"{workflow}\",\"event\":{{\"event\":\"completed\"");
    let done = trace.iter().position(|l| l.contains(&completed)).expect("the workflow completed");
    assert!(done > boot, "{workflow} completed before the restart");
    let mut accepted = std::collections::BTreeMap::new();
    for line in events(&trace, "site.request") {
        if line.contains(&format!("\"workflow\":\"{workflow}\"")) && line.contains("\"status\":200") {
            let op = line.split("\"op\":\"").nth(1).and_then(|rest| rest.split('"').next()).unwrap();
            *accepted.entry(op.to_owned()).or_insert(0) += 1;
        }
    }
    (trace, accepted)
}

#[test]
fn onboarding_controller_killed_after_a_checkpoint_reruns_and_completes() {
    let (trace, accepted) = killed_and_converged(
        "onboarding-controller-killed-after-a-checkpoint-reruns-and-completes.toml",
        "onboard-node-02",
    );
    // The death came before the deploy call: the rerun deploys, once, and has nothing to release.
    assert_eq!(accepted.get("deploy"), Some(&1), "{accepted:?}");
    assert_eq!(accepted.get("release"), None, "{accepted:?}");
    assert!(!trace.iter().any(|l| l.contains("a run whose controller died")), "a Ready machine is no deploy to adopt");
}

#[test]
fn onboarding_controller_killed_after_the_deploy_call_adopts_the_deploy() {
    let (trace, accepted) = killed_and_converged(
        "onboarding-controller-killed-after-the-deploy-call-adopts-the-deploy.toml",
        "onboard-node-02",
    );
    assert_eq!(accepted.get("deploy"), Some(&1), "{accepted:?}");
    assert_eq!((accepted.get("abort"), accepted.get("release"), accepted.get("commission")), (None, None, None));
    assert!(trace.iter().any(|l| l.contains("Deploying from the deploy of a run whose controller died: adopted")));
}

#[test]
fn onboarding_controller_killed_before_completion_adopts_the_deployed_machine() {
    let (trace, accepted) = killed_and_converged(
        "onboarding-controller-killed-before-completion-adopts-the-deployed-machine.toml",
        "onboard-node-02",
    );
    assert_eq!(accepted.get("deploy"), Some(&1), "{accepted:?}");
    assert_eq!(accepted.get("release"), None, "a deployed machine is not released by the rerun: {accepted:?}");
    assert!(trace.iter().any(|l| l.contains("Deployed from the deploy of a run whose controller died: adopted")));
    assert_eq!(events(&trace, "engine.onboarding").iter().filter(|l| l.contains("\"event\":\"completed\"")).count(), 1);
}

#[test]
fn decommission_controller_killed_after_the_release_call_waits_out_the_erase() {
    let (trace, accepted) = killed_and_converged(
        "decommission-controller-killed-after-the-release-call-waits-out-the-erase.toml",
        "decommission-node-02",
    );
    assert_eq!(accepted.get("release"), Some(&1), "{accepted:?}");
    assert!(trace.iter().any(|l| l.contains("resumed at release_maas_node after its controller died")));
    // The node tasks before the release ran once, before the death.
    assert_eq!(events(&trace, "inventory.task").iter().filter(|l| l.contains("\"task\":\"drain\"")).count(), 1);
}
