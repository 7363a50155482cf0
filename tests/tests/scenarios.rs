//! One test per scenario file: each runs, passes, and shows the behaviour its comment promises.

use std::path::Path;

use reports::RunRecord;
use sim::model::spec::load_scenario;
use sim::run::runner::{RunIdentity, run};

#[path = "support/golden.rs"]
mod golden;

const SCENARIOS: &[&str] = &[
    "agent-partitioned-from-hub-is-reported-silent-and-recovers.toml",
    "controller-death-resumes-the-sensor-from-its-journal.toml",
    "decommission-asked-while-its-onboarding-runs-survives-a-controller-death.toml",
    "decommission-controller-killed-after-the-release-call-waits-out-the-erase.toml",
    "decommission-falls-back-to-a-no-erase-release-when-wipes-keep-failing.toml",
    "decommission-machine-disappears-mid-release-and-reappears-ready.toml",
    "decommission-release-that-never-powers-off-stops-for-a-person.toml",
    "decommission-releases-with-erase-and-deletes-the-node-everywhere.toml",
    "decommission-retains-the-maas-record-by-policy-with-a-follow-up.toml",
    "epoch-aware-expiry-keeps-members-and-expires-strays.toml",
    "fifty-agents-heartbeat-for-two-hours-through-faults.toml",
    "fleet-one-life-bare-metal-instances-are-onboarded-rolled-out-and-terminated.toml",
    "fleet-one-life-decommission-mid-rollout-is-refused-naming-its-epoch-and-hold-then-completes.toml",
    "fleet-one-life-decommission-of-a-node-under-an-operator-hold-is-refused.toml",
    "fleet-one-life-decommission-of-a-node-with-an-active-task-lease-is-refused.toml",
    "fleet-one-life-onboarded-machines-are-rolled-out-to-then-decommissioned.toml",
    "hub-crashes-and-restarts-mid-run.toml",
    "instances-agent-up-but-never-ready-is-terminated-and-provisioned-afresh.toml",
    "instances-approval-parks-cordon-and-terminate-until-approved-or-denied.toml",
    "instances-bare-metal-controller-killed-after-the-deploy-call-runs-one-deploy.toml",
    "instances-bare-metal-machines-are-onboarded-powered-and-decommissioned.toml",
    "instances-bare-metal-onboarding-stopped-for-a-person-errors-the-row-and-its-terminate-asks-once.toml",
    "instances-controller-killed-after-the-create-adopts-the-vm-by-its-tag.toml",
    "instances-controller-killed-between-terminate-commit-and-destroy-finishes-it-once.toml",
    "instances-cordon-outcomes-and-refusals-of-pool-members.toml",
    "instances-drain-of-a-pool-member-and-of-a-plain-instance-cordons-then-stops.toml",
    "instances-ops-hold-refuses-terminate-and-reboot-but-allows-stop.toml",
    "instances-plain-and-pooled-instances-provision-run-and-recycle.toml",
    "instances-pool-replenishes-and-recycles-ready-members-past-their-ttl.toml",
    "instances-provision-retried-under-a-lost-answer-reuses-its-row-and-creates-one-vm.toml",
    "instances-stuck-pending-under-a-quota-refusal-is-signalled-and-retried.toml",
    "instances-stuck-provisioning-on-a-hung-create-is-cleared-and-provisioned-again.toml",
    "instances-stuck-teardown-is-signalled-and-reaped-at-the-provider.toml",
    "instances-terminated-guest-still-present-is-signalled-at-the-next-sync.toml",
    "legacy-expiry-tombstones-a-stopped-epoch-member.toml",
    "legacy-rollout-without-faults-breaks-the-rcca-invariants.toml",
    "maas-commissioning-2026-07-20-under-the-matrix.toml",
    "maas-commissioning-2026-07-20.toml",
    "onboarding-commissioning-a-wedged-region-never-started-is-commissioned-afresh.toml",
    "onboarding-controller-killed-after-a-checkpoint-reruns-and-completes.toml",
    "onboarding-controller-killed-after-the-deploy-call-adopts-the-deploy.toml",
    "onboarding-controller-killed-before-completion-adopts-the-deployed-machine.toml",
    "onboarding-region-workflow-wedged-is-diagnosed-from-the-region.toml",
    "onboarding-resumed-after-a-stop-mid-deploy-releases-then-reruns.toml",
    "onboarding-slow-commissioning-is-not-silent.toml",
    "onboarding-two-machines-deploy-and-enrol-their-agents.toml",
    "operator-actions-refused-while-running-and-without-an-observation.toml",
    "operator-adopts-a-decommission-whose-release-finished-out-of-sight.toml",
    "operator-adopts-a-late-agent-enrolment-without-redoing-the-deploy.toml",
    "operator-cancel-compensates-the-resting-stage-and-records-it.toml",
    "operator-cancel-of-a-decommission-records-what-it-did-not-compensate.toml",
    "operator-freeze-refuses-automation-until-a-person-resolves-it.toml",
    "operator-restart-clean-compensates-then-reruns.toml",
    "operator-resumes-a-decommission-stopped-past-the-manual-boundary.toml",
    "operator-resumes-a-workflow-stopped-for-manual-intervention.toml",
    "ovswarm-2026-09-21-under-lanes.toml",
    "ovswarm-2026-09-21.toml",
    "rollout-a-failed-canary-holds-back-the-wider-release.toml",
    "rollout-a-member-tombstoned-mid-lane-under-legacy-expiry-is-resurrected-by-the-live-controller.toml",
    "rollout-a-revoked-pinned-canary-is-not-resurrected-and-the-verdict-says-so.toml",
    "rollout-abort-is-monotonic-for-an-untouched-participant.toml",
    "rollout-ambiguous-historical-forms-are-quarantined-never-canonicalized.toml",
    "rollout-controller-dead-past-the-agent-ttl-with-a-lane-stopped-keeps-its-members.toml",
    "rollout-controller-dead-past-the-ttl-under-legacy-expiry-resurrects-the-pinned-canary.toml",
    "rollout-controller-killed-after-intent-adopts-the-journal.toml",
    "rollout-controller-killed-after-remote-mutation-adopts-the-journal.toml",
    "rollout-controller-killed-before-completion-adopts-the-journal.toml",
    "rollout-early-cohort-absent-env-is-recreated-hold-first.toml",
    "rollout-endpoint-identity-change-during-retry-fails-closed.toml",
    "rollout-exhausted-retries-leave-the-lane-held.toml",
    "rollout-expired-credential-is-renewed-without-double-effects.toml",
    "rollout-first-hub-timeout-then-success-without-double-effects.toml",
    "rollout-first-ssh-timeout-then-success-without-double-effects.toml",
    "rollout-historical-identity-forms-are-canonicalized-then-upgraded.toml",
    "rollout-negative-repairs-quarantine-every-unsafe-shape.toml",
    "rollout-old-journal-is-migrated-once-and-adopted-after-controller-death.toml",
    "rollout-operator-hold-is-kept-and-its-node-left-alone.toml",
    "rollout-positive-marker-repair-with-agreeing-evidence.toml",
    "rollout-rollback-controller-killed-after-intent-resumes-the-rollback.toml",
    "rollout-rollback-controller-killed-after-remote-mutation-restores-once.toml",
    "rollout-rollback-controller-killed-before-completion-finishes-the-rollback.toml",
    "rollout-route-swap-stops-at-the-next-lane-boundary.toml",
    "rollout-route-swap-while-the-controller-is-dead-finishes-the-begun-lane.toml",
    "rollout-stale-lock-of-a-dead-controller-is-waited-out.toml",
    "rollout-storage-admission-quarantines-unhealthy-disks-before-staging.toml",
    "rollout-stuck-lane-is-rolled-back-to-the-prior-generation.toml",
    "rollout-twice-in-a-row-each-converges.toml",
    "rollout-undecodable-old-journal-is-quarantined-and-every-rollout-refused.toml",
    "rotation-clean-overlap-proves-the-successor-before-revoking-the-predecessor.toml",
    "rotation-controller-killed-after-the-install-finds-it-on-the-node.toml",
    "rotation-controller-killed-after-the-issue-adopts-it-without-a-second-successor.toml",
    "rotation-controller-killed-before-the-revoke-revokes-once-after-the-proof.toml",
    "rotation-of-a-stopped-agent-stops-unproved-with-nothing-revoked.toml",
    "rotation-then-rollout-deploys-under-the-rotated-credential-without-touching-it.toml",
    "rotation-transient-ssh-timeout-at-install-is-retried-while-the-overlap-holds.toml",
];

fn run_file(name: &str) -> (RunRecord, Vec<String>) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().join("scenarios").join(name);
    let scenario = load_scenario(&path).unwrap();
    let identity = RunIdentity { source: name.into(), run_index: None, repro: String::new() };
    let output = run(&scenario.run, scenario.seed, &identity, true);
    assert!(output.record.verdict.passed(), "{name}: {:#?}", output.record);
    golden::assert_golden(&format!("scenarios/{name}"), Some(scenario.seed), &output.record.trace_digest);
    (output.record, output.trace)
}

/// The virtual time of a trace line.
fn t_ms(line: &str) -> Option<u64> {
    line.split("\"t_ms\":").nth(1).and_then(|t| t.split(',').next()?.parse::<u64>().ok())
}

fn events<'a>(trace: &'a [String], kind: &str) -> Vec<&'a String> {
    let needle = format!("\"kind\":\"{kind}\"");
    trace.iter().filter(|line| line.contains(&needle)).collect()
}

#[test]
fn the_golden_digests_list_every_scenario_and_conformance_case_and_nothing_else() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut files: Vec<String> = SCENARIOS.iter().map(|name| format!("scenarios/{name}")).collect();
    for workflow in ["onboarding", "decommission"] {
        for entry in std::fs::read_dir(root.join("conformance").join(workflow)).unwrap() {
            files.push(format!("conformance/{workflow}/{}", entry.unwrap().file_name().to_string_lossy()));
        }
    }
    files.sort();
    let listed: Vec<String> = golden::digests().into_keys().collect();
    assert_eq!(listed, files, "tests/golden/digests.tsv: rerun scripts/golden-digests.sh");
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
    assert_eq!(violated_in_order(&record), ["epoch_member_never_tombstoned", "epoch_member_never_tombstoned"]);
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

/// The oracles a run violated, each once.
fn violated(record: &RunRecord) -> std::collections::BTreeSet<&str> {
    violated_in_order(record).into_iter().collect()
}

/// Every violation's oracle, in the order the run reported them (a repeat counts again).
fn violated_in_order(record: &RunRecord) -> Vec<&str> {
    record.violations.iter().map(|v| v.oracle.as_str()).collect()
}

#[test]
fn ovswarm_2026_09_21_replays_the_incident_under_legacy() {
    let (record, trace) = run_file("ovswarm-2026-09-21.toml");
    assert_eq!(
        violated(&record),
        ["availability_floor", "canary_before_wider_release", "every_lane_converged", "holds_accounted", "lane_bound"]
            .into()
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
fn rollout_controller_dead_past_the_agent_ttl_with_a_lane_stopped_keeps_its_members() {
    let name = "rollout-controller-dead-past-the-agent-ttl-with-a-lane-stopped-keeps-its-members.toml";
    let trace = adopted_and_converged(name);
    // The death lands with the canary stopped (the first lane's other workers wait for its proof): one stop before
    // the crash, not started until the restart.
    let crash_ms = 60_595;
    assert!(on(&trace, "controller", "host.crash", &[])[0].contains(&format!("\"t_ms\":{crash_ms},")));
    let mutated = events(&trace, "worker.mutated");
    let stops_before = mutated.iter().filter(|l| l.contains("stop_service") && t_ms(l) < Some(crash_ms)).count();
    assert_eq!(stops_before, 1);
    let first_start = mutated.iter().find(|l| l.contains("start_service")).and_then(|l| t_ms(l)).unwrap();
    assert!(first_start > 4_260_540, "the stopped lane waited for the restarted controller: {first_start}");
    // Silent past the TTL, and the hub's sweeper passed over every one of them.
    assert!(events(&trace, "hub.tombstoned").is_empty());
}

#[test]
fn rollout_controller_dead_past_the_ttl_under_legacy_expiry_resurrects_the_pinned_canary() {
    let name = "rollout-controller-dead-past-the-ttl-under-legacy-expiry-resurrects-the-pinned-canary.toml";
    let (record, trace) = run_file(name);
    // The incident's hub tombstoned the stopped canary while the controller was dead; that (expected) violation is
    // the only one.
    assert_eq!(violated_in_order(&record), ["epoch_member_never_tombstoned"], "{:?}", record.violations);
    let tombstoned = events(&trace, "hub.tombstoned");
    assert_eq!(tombstoned.len(), 1, "{tombstoned:?}");
    assert!(tombstoned[0].contains("\"agent\":\"node-01\""));
    // Restored under the journal's epoch, after the adopter took over the lock and before any worker was started.
    let resurrected = events(&trace, "hub.resurrected");
    assert_eq!(resurrected.len(), 1, "{resurrected:?}");
    assert!(resurrected[0].contains("\"agent\":\"node-01\",\"epoch\":1"), "{resurrected:?}");
    let restored_at = t_ms(resurrected[0]);
    let superseded = rollout(&trace, "lock_taken");
    assert!(superseded.iter().any(|l| l.contains("\"superseded\":true") && t_ms(l) < restored_at));
    let first_start = events(&trace, "worker.mutated").into_iter().find(|l| l.contains("start_service"));
    assert!(restored_at < first_start.and_then(|line| t_ms(line)), "{first_start:?}");
    assert_eq!(rollout(&trace, "resurrected").len(), 1);
    // The canary proved with the credential it always had: its heartbeats are accepted again.
    let refused_after = events(&trace, "hub.heartbeat_refused").into_iter().filter(|l| t_ms(l) > restored_at);
    assert_eq!(refused_after.count(), 0);
    assert!(rollout(&trace, "terminal").last().unwrap().contains("successor"));
}

#[test]
fn rollout_a_member_tombstoned_mid_lane_under_legacy_expiry_is_resurrected_by_the_live_controller() {
    let name = "rollout-a-member-tombstoned-mid-lane-under-legacy-expiry-is-resurrected-by-the-live-controller.toml";
    let (record, trace) = run_file(name);
    assert_eq!(violated_in_order(&record), ["epoch_member_never_tombstoned"], "{:?}", record.violations);
    // The controller never died: the resurrection is the live proof step's, not an adopter's.
    assert!(events(&trace, "host.crash").is_empty());
    assert!(rollout(&trace, "adopted").is_empty());
    // node-16 was in its proof when the sweeper tombstoned it, and was restored under the journal's epoch after that,
    // once.
    let at = |line: Option<&&String>| line.and_then(|line| t_ms(line)).expect("an event with a time");
    let node_16 = "\"node\":\"node-16\",\"step\":\"prove\"";
    let proving = at(rollout(&trace, "step_started").iter().find(|l| l.contains(node_16)));
    let tombstoned = events(&trace, "hub.tombstoned");
    assert_eq!(tombstoned.len(), 1, "{tombstoned:?}");
    assert!(tombstoned[0].contains("\"agent\":\"node-16\""));
    assert!(proving < at(tombstoned.first()), "the tombstone came while the proof waited");
    let resurrected = events(&trace, "hub.resurrected");
    assert_eq!(resurrected.len(), 1, "{resurrected:?}");
    assert!(resurrected[0].contains("\"agent\":\"node-16\",\"epoch\":1"), "{resurrected:?}");
    assert!(at(tombstoned.first()) < at(resurrected.first()));
    assert_eq!(rollout(&trace, "resurrected").len(), 1);
    // Its proof then completed, and every node was upgraded.
    let proved = at(rollout(&trace, "step_done").iter().find(|l| l.contains(node_16)));
    assert!(at(resurrected.first()) < proved);
    assert!(rollout(&trace, "terminal").last().unwrap().contains("successor"));
}

#[test]
fn rollout_a_revoked_pinned_canary_is_not_resurrected_and_the_verdict_says_so() {
    let name = "rollout-a-revoked-pinned-canary-is-not-resurrected-and-the-verdict-says-so.toml";
    let (record, trace) = run_file(name);
    // The adopter asks once before any lane goes on, and each proof of the canary once more; every answer is the
    // same refusal, and each proof fails at it, naming it.
    let refused = rollout(&trace, "resurrection_refused");
    let proofs = rollout(&trace, "step_started").into_iter().filter(|l| l.contains("prove\"")).count();
    assert!(proofs >= 1);
    assert_eq!(refused.len(), proofs + 1, "{refused:?}");
    assert!(refused.iter().all(|l| l.contains("\"node\":\"node-01\"") && l.contains("revoked")), "{refused:?}");
    let failed_proofs = rollout(&trace, "node_failed").into_iter().filter(|l| l.contains("prove\"")).count();
    let at_the_refusal = rollout(&trace, "node_failed")
        .into_iter()
        .filter(|l| l.contains("prove\"") && l.contains("refused to restore it under epoch 1"))
        .count();
    assert_eq!((failed_proofs, at_the_refusal), (proofs, proofs));
    assert!(events(&trace, "hub.resurrected").is_empty(), "a revoked principal is never restored");
    let pinned = record.violations.iter().find(|v| v.oracle == "pinned_identity_present");
    assert!(pinned.is_some_and(|v| v.evidence.contains("node-01")), "{:?}", record.violations);
    // Only the canary was touched: no other worker was held.
    let holds = events(&trace, "hub.hold_placed");
    assert!(holds.iter().all(|l| l.contains("\"agent\":\"node-01\"")), "{holds:?}");
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
    assert!(failed.iter().all(|line| line.contains("node-07")), "{failed:?}");
    assert!(failed[0].contains("host key mismatch"), "{failed:?}");
    // Staging ran under the enrolled identity, before the endpoint changed; nothing after it ran under the new one.
    let mutated = on(&trace, "node-07", "worker.mutated", &[]);
    assert!(mutated.iter().all(|line| line.contains("\"op\":\"stage_artifact\"")), "{mutated:?}");
    // Lane 1 is rolled back: its other nodes return to the prior generation; node-07 stays held.
    let reverting = rollout(&trace, "lane_reverting");
    assert!(reverting[0].contains("\"lane\":1") && reverting[0].contains("\"failed\":[\"node-07\"]"), "{reverting:?}");
    for node in ["node-05", "node-06", "node-08"] {
        assert_eq!(on(&trace, node, "worker.mutated", &["restore_previous"]).len(), 1, "{node} restored once");
    }
    assert!(on(&trace, "hub", "hub.hold_released", &["node-07"]).is_empty(), "node-07's hold stays");
    // The later lanes go on, in the room the stuck node leaves.
    for node in 9..=16 {
        let name = format!("node-{node:02}");
        assert_eq!(on(&trace, &name, "worker.mutated", &["run_installer"]).len(), 1, "{name} upgraded");
    }
}

#[test]
fn rollout_exhausted_retries_leave_the_lane_held() {
    let (record, trace) = run_file("rollout-exhausted-retries-leave-the-lane-held.toml");
    assert!(record.violations.iter().all(|v| v.oracle == "every_lane_converged" && v.expected), "{record:?}");
    let failed = rollout(&trace, "node_failed");
    assert!(failed.iter().all(|line| line.contains("\"node\":\"node-06\"")), "{failed:?}");
    assert!(failed[0].contains("\"endpoint\":\"node-06@hostkey-node-06-1\""), "the failed endpoint is named");
    let replay = "\"replay\":\"deploy-mac-fleet.sh resume --rollout rollout-2944aebb --journal controller.journal\"";
    assert!(failed.iter().all(|line| line.contains(replay)), "the exact replay command: {failed:?}");
    let retries = rollout(&trace, "retrying").iter().filter(|l| l.contains("\"node\":\"node-06\"")).count();
    assert!(retries >= 4, "five attempts at the forward step at least, then the rollback's: {retries}");
    assert!(on(&trace, "hub", "hub.hold_released", &["node-06"]).is_empty(), "the hold stays");
    assert!(
        events(&trace, "controller.journal").iter().all(|l| !l.contains("\"record\":\"terminal\"")),
        "journal non-terminal"
    );
    // The run record carries the exact replay command and the failed endpoint beside the stuck node.
    let node_06 = record.rollouts[0].nodes.iter().find(|node| node.node == "node-06").unwrap();
    assert_eq!(node_06.replay, "deploy-mac-fleet.sh resume --rollout rollout-2944aebb --journal controller.journal");
    assert_eq!(node_06.failed_endpoint, "node-06@hostkey-node-06-1");
    // The lane's rollback took its other three nodes back, and a replay of it ran nothing twice.
    for node in ["node-05", "node-07", "node-08"] {
        assert_eq!(on(&trace, node, "worker.mutated", &["restore_previous"]).len(), 1, "{node} restored once");
    }
    // Later lanes went down three at a time: never more than the lane size held at once.
    assert_eq!(rollout(&trace, "lane_committed").iter().filter(|l| l.contains("successor")).count(), 3);
}

/// A rollback of lane 1 (node-05..node-08) after node-06's install timed out on every attempt: the lane's nodes are
/// back on the prior generation, each reverse step ran at most once, and the later lanes went on.
fn rolled_back(name: &str) -> (RunRecord, Vec<String>) {
    let (record, trace) = run_file(name);
    assert!(record.violations.is_empty(), "{name}: {:?}", record.violations);
    let reverting = rollout(&trace, "lane_reverting");
    assert_eq!(reverting.len(), 1, "{name}: begun once, resumed (not begun again) by an adopter: {reverting:?}");
    assert!(reverting[0].contains("\"lane\":1") && reverting[0].contains("\"failed\":[\"node-06\"]"), "{reverting:?}");
    let journaled = events(&trace, "controller.journal");
    let begun = journaled.iter().position(|l| l.contains("\"record\":\"lane_reverting\"")).expect("journaled");
    let first_restore = journaled.iter().position(|l| l.contains("/revert/")).expect("reverse steps journaled");
    assert!(begun < first_restore, "{name}: the rollback is journaled before its first reverse step");
    // The three nodes that upgraded get their kept prior install back, once; node-06 never installed, so nothing is
    // restored on it, but it is started again.
    for node in ["node-05", "node-07", "node-08"] {
        let restored = on(&trace, node, "worker.mutated", &["restore_previous", "7f3bbd12@4"]);
        assert_eq!(restored.len(), 1, "{name}: {node} restored once");
    }
    assert!(on(&trace, "node-06", "worker.mutated", &["restore_previous"]).is_empty(), "{name}");
    assert_eq!(on(&trace, "node-06", "worker.mutated", &["start_service", "/revert/start"]).len(), 1, "{name}");
    for node in 5..=8 {
        let node = format!("node-{node:02}");
        let released = on(&trace, "hub", "hub.hold_released", &[&format!("\"agent\":\"{node}\"")]);
        assert!(!released.is_empty(), "{name}: {node} back in service, its hold released");
    }
    let mut ids: Vec<&str> =
        events(&trace, "worker.mutated").iter().filter_map(|l| l.split("\"operation_id\":\"").nth(1)).collect();
    let total = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), total, "{name}: no operation ran twice");
    let committed = rollout(&trace, "lane_committed");
    let verdicts: Vec<&str> =
        committed.iter().filter_map(|l| l.split("\"verdict\":\"").nth(1)?.split('"').next()).collect();
    assert_eq!(verdicts, ["successor", "prior", "successor", "successor"], "{name}");
    (record, trace)
}

#[test]
fn rollout_stuck_lane_is_rolled_back_to_the_prior_generation() {
    let (record, trace) = rolled_back("rollout-stuck-lane-is-rolled-back-to-the-prior-generation.toml");
    assert!(events(&trace, "host.crash").is_empty());
    // Per-batch telemetry: the canary alone, the rest of lane 0, lane 1 forward then its rollback, lanes 2 and 3.
    let batches: Vec<(u64, u64, u64, bool)> =
        record.batches.iter().map(|point| (point.lane, point.batch, point.nodes, point.revert)).collect();
    assert_eq!(
        batches,
        [(0, 0, 1, false), (0, 1, 3, false), (1, 0, 4, false), (1, 0, 4, true), (2, 0, 4, false), (3, 0, 4, false)]
    );
    let rollback = &record.batches[3];
    assert_eq!((rollback.upgraded, rollback.rolled_back, rollback.remaining), (4, 4, 8));
    assert!(rollback.retries >= 4 && rollback.epoch_pin_age_ms.is_some(), "{rollback:?}");
    let last = record.batches.last().unwrap();
    assert_eq!((last.upgraded, last.remaining, last.eta_ms), (12, 0, Some(0)));
    let account = &record.rollouts[0];
    let node = |name: &str| account.nodes.iter().find(|n| n.node == name).unwrap().clone();
    assert_eq!((node("node-05").outcome.as_str(), node("node-06").outcome.as_str()), ("prior", "prior"));
    assert!(node("node-05").detail.contains("rolled back with its lane"), "{:?}", node("node-05"));
    assert!(node("node-06").detail.contains("node-06 failed at install"), "{:?}", node("node-06"));
}

fn rollback_adopted(name: &str) -> Vec<String> {
    let (_, trace) = rolled_back(name);
    let crash = on(&trace, "controller", "host.crash", &[]);
    assert_eq!(crash.len(), 1, "{name}");
    let adopted = rollout(&trace, "adopted");
    assert_eq!(adopted.len(), 1, "{name}");
    let position = |line: &String| trace.iter().position(|l| l == line).unwrap();
    let reverting = position(rollout(&trace, "lane_reverting")[0]);
    assert!(reverting < position(crash[0]) && position(crash[0]) < position(adopted[0]), "{name}: died mid-rollback");
    let lane_one = position(rollout(&trace, "lane_committed")[1]);
    assert!(position(adopted[0]) < lane_one, "{name}: the adopter committed the rolled-back lane");
    trace
}

#[test]
fn rollout_rollback_controller_killed_after_intent_resumes_the_rollback() {
    let trace = rollback_adopted("rollout-rollback-controller-killed-after-intent-resumes-the-rollback.toml");
    // The death came after the reverse stops' intents: the adopter looked at each node and stopped it once.
    for node in ["node-05", "node-07", "node-08"] {
        assert_eq!(on(&trace, node, "worker.mutated", &["stop_service", "/revert/quiesce"]).len(), 1, "{node}");
    }
}

#[test]
fn rollout_rollback_controller_killed_after_remote_mutation_restores_once() {
    let trace = rollback_adopted("rollout-rollback-controller-killed-after-remote-mutation-restores-once.toml");
    // Every restore was sent before the death (one still in flight lands just after it); the adopter, booted later,
    // found each done and ran none again: one restore per node.
    let boot =
        trace.iter().position(|l| l.contains("\"host\":\"controller\",\"kind\":\"host.boot\",\"boot\":2")).unwrap();
    let restores: Vec<(usize, &String)> = trace
        .iter()
        .enumerate()
        .filter(|(_, l)| l.contains("\"kind\":\"worker.mutated\"") && l.contains("restore_previous"))
        .collect();
    assert!(restores.len() >= 2, "{restores:?}");
    assert!(restores.iter().all(|(i, _)| *i < boot), "restores before the adopter only: {restores:?} vs {boot}");
    for node in ["node-05", "node-07", "node-08"] {
        assert_eq!(on(&trace, node, "worker.mutated", &["restore_previous"]).len(), 1, "{node} restored once");
    }
}

#[test]
fn rollout_rollback_controller_killed_before_completion_finishes_the_rollback() {
    let trace = rollback_adopted("rollout-rollback-controller-killed-before-completion-finishes-the-rollback.toml");
    let crash = trace.iter().position(|l| l.contains("\"kind\":\"host.crash\"")).unwrap();
    let started_after = trace[crash..]
        .iter()
        .filter(|l| l.contains("\"kind\":\"worker.mutated\"") && l.contains("/revert/start"))
        .count();
    assert_eq!(started_after, 0, "every start ran before the death, and none again");
}

#[test]
fn rollout_first_ssh_timeout_then_success_without_double_effects() {
    let (record, trace) = run_file("rollout-first-ssh-timeout-then-success-without-double-effects.toml");
    assert!(record.violations.is_empty());
    // The canary, node-01, proved the successor before the hub saw any other node held for the rollout.
    let proved = trace.iter().position(|l| l.contains("\"event\":\"canary_proved\",\"node\":\"node-01\"")).unwrap();
    let wider = trace
        .iter()
        .position(|l| l.contains("\"kind\":\"hub.hold_placed\"") && l.contains("deploy:") && !l.contains("node-01"))
        .unwrap();
    assert!(proved < wider, "canary proved at line {proved}, wider release at {wider}");
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

/// The trace as typed events: each line's time, host, kind and (for `engine.rollout`) its event object.
struct Typed {
    t_ms: u64,
    host: String,
    kind: String,
    line: serde_json::Value,
}

fn typed(trace: &[String]) -> Vec<Typed> {
    trace
        .iter()
        .map(|line| {
            let line: serde_json::Value = serde_json::from_str(line).expect("trace lines are JSON");
            Typed {
                t_ms: line["t_ms"].as_u64().expect("every event has a time"),
                host: line["host"].as_str().expect("every event has a host").to_owned(),
                kind: line["kind"].as_str().expect("every event has a kind").to_owned(),
                line,
            }
        })
        .collect()
}

/// The `engine.rollout` events named `event`, typed.
fn rollout_typed<'a>(trace: &'a [Typed], event: &str) -> Vec<&'a Typed> {
    trace.iter().filter(|e| e.kind == "engine.rollout" && e.line["event"]["event"] == event).collect()
}

fn strings(value: &serde_json::Value) -> Vec<&str> {
    value.as_array().expect("an array").iter().map(|v| v.as_str().expect("a string")).collect()
}

#[test]
fn rollout_historical_identity_forms_are_canonicalized_then_upgraded() {
    let (record, trace) = run_file("rollout-historical-identity-forms-are-canonicalized-then-upgraded.toml");
    assert!(record.violations.is_empty());
    let trace = typed(&trace);
    assert!(rollout_typed(&trace, "quarantined").is_empty(), "a recognized historical form is never quarantined");
    let expected = [
        ("node-03", vec!["export_prefixed_env"], vec!["env"]),
        ("node-06", vec!["ovswarm_names_env"], vec!["env"]),
        ("node-09", vec!["receipt_v1"], vec!["manifest", "receipt"]),
        ("node-12", vec!["receipt_v2"], vec!["receipt"]),
        ("node-14", vec!["receipt_v1"], vec!["manifest", "marker", "receipt"]),
    ];
    let decoded = rollout_typed(&trace, "identity_decoded");
    let canonicalized = rollout_typed(&trace, "canonicalized");
    assert_eq!(decoded.len(), expected.len());
    assert_eq!(canonicalized.len(), expected.len());
    for ((node, forms, wrote), (decoded, canonicalized)) in expected.iter().zip(decoded.iter().zip(&canonicalized)) {
        let (found, done) = (&decoded.line["event"], &canonicalized.line["event"]);
        assert_eq!((found["node"].as_str(), strings(&found["forms"])), (Some(*node), forms.clone()));
        assert!(strings(&found["defects"]).is_empty());
        assert_eq!((done["node"].as_str(), strings(&done["wrote"])), (Some(*node), wrote.clone()), "{node}");
        // The canonicalization is the node's first identity or service mutation (only staging, which touches
        // neither, may come before it), and each canonical file is written atomically, owner-only, once.
        let mutations: Vec<&Typed> = trace
            .iter()
            .filter(|e| e.host == *node && e.kind == "worker.mutated" && e.line["op"] != "stage_artifact")
            .collect();
        let canonical: Vec<&str> = mutations
            .iter()
            .map(|e| e.line["operation_id"].as_str().unwrap())
            .take_while(|id| id.contains("/canonicalize/"))
            .collect();
        let files: Vec<&str> = canonical.iter().map(|id| id.rsplit('/').next().unwrap()).collect();
        assert_eq!(&files, wrote, "{node}: {canonical:?}");
        assert!(mutations[..canonical.len()].iter().all(|e| e.t_ms < canonicalized.t_ms), "{node}");
        let removals: Vec<&&Typed> = mutations.iter().filter(|e| e.line["op"] == "remove").collect();
        assert_eq!(removals.len(), usize::from(wrote.contains(&"receipt")), "{node}: only the receipt is removed");
    }
    // Every canonicalization happens before the plan is frozen, and every node upgrades after it.
    let frozen = rollout_typed(&trace, "plan_frozen")[0].t_ms;
    assert!(canonicalized.iter().all(|e| e.t_ms < frozen));
    assert_eq!(record.rollouts[0].outcome, "successor");
}

#[test]
fn rollout_ambiguous_historical_forms_are_quarantined_never_canonicalized() {
    let (record, trace) = run_file("rollout-ambiguous-historical-forms-are-quarantined-never-canonicalized.toml");
    assert!(record.violations.is_empty());
    let trace = typed(&trace);
    assert!(rollout_typed(&trace, "canonicalized").is_empty());
    let expected =
        [("node-04", "mixed_env_layout"), ("node-08", "unknown_receipt_version"), ("node-11", "receipt_disagrees")];
    let decoded = rollout_typed(&trace, "identity_decoded");
    let quarantined = rollout_typed(&trace, "quarantined");
    assert_eq!((decoded.len(), quarantined.len()), (3, 3));
    for ((node, defect), (decoded, quarantined)) in expected.iter().zip(decoded.iter().zip(&quarantined)) {
        let found = &decoded.line["event"];
        assert_eq!(found["node"].as_str(), Some(*node));
        assert_eq!(strings(&found["defects"]), [*defect], "{node}");
        assert!(strings(&found["forms"]).is_empty(), "{node}: nothing recognized");
        assert_eq!(quarantined.line["event"]["node"].as_str(), Some(*node), "quarantined right after it was decoded");
        assert!(decoded.t_ms <= quarantined.t_ms);
        let touched = trace.iter().any(|e| e.host == *node && e.kind == "worker.mutated");
        assert!(!touched, "{node} is never mutated, not even staged");
    }
}

#[test]
fn rollout_old_journal_is_migrated_once_and_adopted_after_controller_death() {
    let (record, trace) = run_file("rollout-old-journal-is-migrated-once-and-adopted-after-controller-death.toml");
    assert!(record.violations.is_empty());
    let trace = typed(&trace);
    // Migrated once, by the first controller, before anything else it did; the old lines are the journal's first five.
    let migrated = rollout_typed(&trace, "journal_migrated");
    assert_eq!(migrated.len(), 1, "the restarted controller migrates nothing again");
    let event = &migrated[0].line["event"];
    assert_eq!(event["format"], "mac_cohort_v1");
    assert_eq!(event["lines"], serde_json::json!([1, 2, 3, 4, 5]), "the plan and the first cohort's four holds");
    assert_eq!(event["records"], 5);
    let journal: Vec<&Typed> = trace.iter().filter(|e| e.kind == "controller.journal").collect();
    assert_eq!(journal[0].line["record"], "migrated", "the migration is the controller's first journal record");
    assert_eq!(journal.iter().filter(|e| e.line["record"] == "migrated").count(), 1);
    // Adopted twice: at once by the controller that migrated, then by the restarted one after the death; each time at
    // the old journal's revision.
    let adopted = rollout_typed(&trace, "adopted");
    assert_eq!(adopted.len(), 2);
    assert!(adopted.iter().all(|e| e.line["event"]["revision"] == "2944aebb"));
    assert_eq!(adopted[0].line["event"]["in_doubt"], 4, "the four holds the old controller armed");
    let crash = trace.iter().find(|e| e.kind == "host.crash" && e.host == "controller").expect("the death");
    assert!(migrated[0].t_ms < crash.t_ms && crash.t_ms < adopted[1].t_ms);
    // The old controller fetched after its stops; the adopter staged every node before the first stop.
    let first_stop = trace.iter().find(|e| e.kind == "worker.mutated" && e.line["op"] == "stop_service").unwrap();
    let staged: Vec<&Typed> =
        trace.iter().filter(|e| e.kind == "worker.mutated" && e.line["op"] == "stage_artifact").collect();
    assert_eq!(staged.len(), 16 * 6, "every capsule on every node, once");
    assert!(staged.iter().all(|e| e.t_ms < first_stop.t_ms));
    assert_eq!(record.rollouts[0].outcome, "successor");
}

#[test]
fn rollout_undecodable_old_journal_is_quarantined_and_every_rollout_refused() {
    let (record, trace) = run_file("rollout-undecodable-old-journal-is-quarantined-and-every-rollout-refused.toml");
    assert!(record.violations.is_empty());
    let trace = typed(&trace);
    let quarantined = rollout_typed(&trace, "journal_quarantined");
    assert_eq!(quarantined.len(), 1, "set aside once");
    let event = &quarantined[0].line["event"];
    assert_eq!((event["line"].as_u64(), event["defect"].as_str()), (Some(6), Some("unknown_phase")));
    assert_eq!(event["lines"], serde_json::json!([1, 2, 3, 4, 5, 6]));
    // Both requests refused with the typed cause naming the line, before anything else happened.
    let refused = rollout_typed(&trace, "plan_refused");
    let rollouts: Vec<&str> = refused.iter().map(|e| e.line["rollout"].as_str().unwrap()).collect();
    assert_eq!(rollouts, ["rollout-2944aebb", "rollout-3a1b2c3d"]);
    for refusal in &refused {
        let cause = &refusal.line["event"]["cause"];
        assert_eq!(cause, &serde_json::json!({"cause": "journal_quarantined", "line": 6, "defect": "unknown_phase"}));
    }
    assert!(rollout_typed(&trace, "journal_migrated").is_empty() && rollout_typed(&trace, "adopted").is_empty());
    let touched = ["worker.mutated", "hub.hold_placed", "hub.lock_acquired", "hub.epoch_opened"];
    assert!(trace.iter().all(|e| !touched.contains(&e.kind.as_str())), "no mutation of any kind");
    let journal: Vec<&str> =
        trace.iter().filter(|e| e.kind == "controller.journal").map(|e| e.line["record"].as_str().unwrap()).collect();
    assert_eq!(journal, ["journal_quarantined"], "the quarantine is the one record either request wrote");
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
fn fleet_one_life_onboarded_machines_are_rolled_out_to_then_decommissioned() {
    let (record, trace) = run_file("fleet-one-life-onboarded-machines-are-rolled-out-to-then-decommissioned.toml");
    let at = |line: &String| -> u64 {
        let value: serde_json::Value = serde_json::from_str(line).expect("trace lines are JSON");
        value["t_ms"].as_u64().expect("every event has a time")
    };
    let on = |host: &str, kind: &str| -> Vec<&String> {
        events(&trace, kind).into_iter().filter(|l| l.contains(&format!("\"host\":\"{host}\""))).collect()
    };
    // A node's host runs only once its machine's agent enrolled through the site, and node-06 (no boot disk) never.
    for node in ["node-01", "node-02", "node-03", "node-04", "node-05"] {
        let enrolled: Vec<&String> = events(&trace, "site.agent_enrol")
            .into_iter()
            .filter(|l| l.contains(&format!("\"machine\":\"{node}\"")))
            .collect();
        let boots = on(node, "host.boot");
        assert_eq!((enrolled.len(), boots.len()), (1, 1), "{node}: one enrolment, one boot");
        assert!(at(boots[0]) >= at(enrolled[0]), "{node} booted before its agent enrolled");
    }
    assert!(on("node-06", "host.boot").is_empty(), "node-06 never onboarded, so it never runs");
    // The rollout selects the enrolled nodes only, and upgrades them.
    let selected = events(&trace, "rollout.selected");
    assert_eq!(selected.len(), 1);
    assert!(selected[0].contains("\"node-05\"") && !selected[0].contains("node-06"), "{}", selected[0]);
    let account = &record.rollouts[0];
    assert_eq!((account.outcome.as_str(), account.nodes.len()), ("successor", 5));
    // The decommission comes after the rollout ended, and its release powers node-02 off: its host goes down.
    let terminal = at(rollout(&trace, "terminal")[0]);
    let requested = at(events(&trace, "step").into_iter().find(|l| l.contains("\"decommission\"")).expect("requested"));
    assert_eq!(requested, terminal + 600_000, "wait_ms after the rollout's end");
    let crashes = on("node-02", "host.crash");
    assert_eq!(crashes.len(), 1, "released, so powered off");
    assert!(at(crashes[0]) > requested);
    assert!(["node-01", "node-03"].iter().all(|node| on(node, "host.crash").is_empty()));
}

#[test]
fn fleet_one_life_bare_metal_instances_are_onboarded_rolled_out_and_terminated() {
    let (record, trace) = run_file("fleet-one-life-bare-metal-instances-are-onboarded-rolled-out-and-terminated.toml");
    assert!(record.violations.is_empty(), "{:?}", record.violations);
    let records = parsed(&trace, "instance.record");
    let record_of = |kind: &str, instance: &str| -> Vec<&serde_json::Value> {
        records.iter().filter(|r| r["record"]["record"] == kind && r["record"]["instance"] == instance).collect()
    };
    let transition = |instance: &str, event: &str| -> Option<u64> {
        record_of("transition", instance)
            .into_iter()
            .find(|r| r["record"]["event"] == event)
            .map(|r| r["t_ms"].as_u64().unwrap())
    };
    // One identity: each machine's Node is named as the machine and its worker is the machine.
    let nodes: Vec<(String, String)> = records
        .iter()
        .filter(|r| r["record"]["record"] == "node_created")
        .map(|r| (r["record"]["node"]["name"].to_string(), r["record"]["node"]["worker_id"].to_string()))
        .collect();
    assert_eq!(nodes.len(), 6);
    assert!(nodes.iter().all(|(name, worker)| name == worker), "{nodes:?}");
    // Five rows run once their machine's agent enrolled; node-06's onboarding stopped for a person and its row errored.
    let enrolled = parsed(&trace, "site.agent_enrol");
    for (index, machine) in ["node-01", "node-02", "node-03", "node-04", "node-05"].iter().enumerate() {
        let instance = format!("i-0000{}", index + 1);
        let running = transition(&instance, "mark_running").unwrap_or_else(|| panic!("{instance} never ran"));
        let enrol = enrolled.iter().find(|e| e["machine"] == *machine).and_then(|e| e["t_ms"].as_u64()).unwrap();
        assert!(enrol <= running, "{instance} ran before {machine} enrolled");
    }
    assert!(transition("i-00006", "mark_errored").is_some() && transition("i-00006", "mark_running").is_none());
    // The rollout deploys to the same identities: the five running ones, after every one of them ran.
    let selected = parsed(&trace, "rollout.selected");
    let names: Vec<&str> = selected[0]["nodes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
    assert_eq!(names, ["node-01", "node-02", "node-03", "node-04", "node-05"]);
    let last_running = (1..=5).filter_map(|i| transition(&format!("i-0000{i}"), "mark_running")).max().unwrap();
    assert!(last_running < selected[0]["t_ms"].as_u64().unwrap());
    assert_eq!(record.rollouts[0].nodes.len(), 5);
    // The terminate of node-02's instance is its machine's decommission; the destroy is confirmed after it completed.
    let terminated = transition("i-00002", "terminate").expect("terminated");
    let decommission = parsed(&trace, "engine.decommission");
    let of_node_02 = |event: &str| -> Vec<u64> {
        decommission
            .iter()
            .filter(|e| e["workflow"] == "decommission-node-02" && e["event"]["event"] == event)
            .map(|e| e["t_ms"].as_u64().unwrap())
            .collect()
    };
    let (first_stage, completed) = (of_node_02("stage_started"), of_node_02("completed"));
    assert!(first_stage.first().is_some_and(|t| *t > terminated), "{first_stage:?}");
    assert_eq!(completed.len(), 1);
    let confirmed = record_of("destroy_confirmed", "i-00002");
    assert_eq!(confirmed.len(), 1);
    assert!(confirmed[0]["t_ms"].as_u64().unwrap() >= completed[0]);
    assert!(decommission.iter().all(|e| e["workflow"] == "decommission-node-02"), "no other machine is retired");
}

/// The trace's events of `kind`, parsed.
fn parsed(trace: &[String], kind: &str) -> Vec<serde_json::Value> {
    events(trace, kind).into_iter().map(|line| serde_json::from_str(line).expect("trace lines are JSON")).collect()
}

/// A decommission workflow's events, in order: each one's `event` object with its time.
fn decommission_events(trace: &[String], workflow: &str) -> Vec<serde_json::Value> {
    parsed(trace, "engine.decommission")
        .into_iter()
        .filter(|event| event["workflow"] == workflow)
        .map(|event| {
            let mut body = event["event"].clone();
            body["t_ms"] = event["t_ms"].clone();
            body
        })
        .collect()
}

/// The one refusal of `workflow`: rests failed_retryable at disable_node for state_ambiguity with the node active,
/// naming exactly `references`; nothing of the node is mutated before the workflow next starts a stage.
fn refused_once(trace: &[String], workflow: &str, references: serde_json::Value) -> u64 {
    let node = workflow.strip_prefix("decommission-").expect("a decommission");
    let events = decommission_events(trace, workflow);
    let refusals: Vec<&serde_json::Value> = events.iter().filter(|event| event["event"] == "refused").collect();
    assert_eq!(refusals.len(), 1, "{events:#?}");
    let refusal = refusals[0];
    assert_eq!(
        (&refusal["stage"], &refusal["class"], &refusal["workflow_state"], &refusal["node_state"]),
        (&"disable_node".into(), &"state_ambiguity".into(), &"failed_retryable".into(), &"active".into())
    );
    assert_eq!(refusal["references"], references);
    let refused_ms = refusal["t_ms"].as_u64().unwrap();
    // Nothing before the refusal: no stage of the workflow began.
    assert!(
        events.iter().take_while(|event| event["event"] != "refused").all(|event| event["event"] != "stage_started")
    );
    // Until the next request runs, nothing of the node is changed: no mutating inventory request, no task, no MAAS
    // call of the workflow.
    let next_ms = events
        .iter()
        .find(|event| event["event"] == "stage_started" && event["t_ms"].as_u64() > Some(refused_ms))
        .map_or(u64::MAX, |event| event["t_ms"].as_u64().unwrap());
    let within = |event: &serde_json::Value| (refused_ms..next_ms).contains(&event["t_ms"].as_u64().unwrap());
    let mutated = parsed(trace, "inventory.request")
        .into_iter()
        .filter(|event| event["node"] == node && event["op"] != "read")
        .chain(parsed(trace, "inventory.task").into_iter().filter(|event| event["node"] == node))
        .chain(parsed(trace, "site.request").into_iter().filter(|event| event["workflow"] == workflow))
        .filter(within)
        .count();
    assert_eq!(mutated, 0, "{workflow}: the refusal changed nothing");
    refused_ms
}

#[test]
fn fleet_one_life_decommission_mid_rollout_is_refused_naming_its_epoch_and_hold_then_completes() {
    let name = "fleet-one-life-decommission-mid-rollout-is-refused-naming-its-epoch-and-hold-then-completes.toml";
    let (record, trace) = run_file(name);
    let workflow = "decommission-node-01";
    let references = serde_json::json!([
        {"kind": "epoch", "epoch": 1},
        {"kind": "hold", "owner": "deploy:rollout-2944aebb"},
        {"kind": "rollout", "rollout": "rollout-2944aebb"},
    ]);
    let refused_ms = refused_once(&trace, workflow, references);
    // The refusal came while node-01's lane was down, and the rollout went on to upgrade every node, node-01 too.
    let at = |event: &serde_json::Value| event["t_ms"].as_u64().unwrap();
    let held = parsed(&trace, "hub.hold_placed").into_iter().find(|e| e["agent"] == "node-01").expect("node-01 held");
    let released =
        parsed(&trace, "hub.hold_released").into_iter().find(|e| e["agent"] == "node-01").expect("its hold released");
    assert!(at(&held) < refused_ms && refused_ms < at(&released), "mid-lane");
    let account = &record.rollouts[0];
    assert_eq!((account.outcome.as_str(), account.nodes.len()), ("successor", 5));
    // The second request, ten minutes after the rollout's end, runs every stage and completes.
    let terminal = at(&serde_json::from_str(rollout(&trace, "terminal")[0]).unwrap());
    let events = decommission_events(&trace, workflow);
    let first_stage = events.iter().find(|event| event["event"] == "stage_started").expect("a stage");
    assert_eq!(first_stage["stage"], "disable_node");
    assert!(at(first_stage) >= terminal + 600_000);
    assert_eq!(events.last().expect("events")["event"], "completed");
    assert!(record.reached.iter().any(|reached| reached.oracle == "decommission_refused"));
}

#[test]
fn fleet_one_life_decommission_of_a_node_under_an_operator_hold_is_refused() {
    let (record, trace) = run_file("fleet-one-life-decommission-of-a-node-under-an-operator-hold-is-refused.toml");
    let references = serde_json::json!([{"kind": "hold", "owner": "operator:maintenance"}]);
    let refused_ms = refused_once(&trace, "decommission-node-02", references);
    // The workflow never ran: the refusal is all of it, and it rests.
    let events = decommission_events(&trace, "decommission-node-02");
    assert_eq!(events.len(), 1, "{events:#?}");
    assert!(record.violations.is_empty());
    // The machine stays deployed, and node-02's agent keeps heartbeating after the refusal.
    let heartbeats = parsed(&trace, "hub.heartbeat");
    assert!(heartbeats.iter().any(|event| event["agent"] == "node-02" && event["t_ms"].as_u64() > Some(refused_ms)));
    assert!(!events_on(&trace, "node-02", "host.crash"), "its host never went down");
}

#[test]
fn fleet_one_life_decommission_of_a_node_with_an_active_task_lease_is_refused() {
    let (_, trace) = run_file("fleet-one-life-decommission-of-a-node-with-an-active-task-lease-is-refused.toml");
    let lease = parsed(&trace, "hub.lease_granted");
    assert_eq!(lease.len(), 1);
    assert_eq!((&lease[0]["agent"], &lease[0]["lease_ms"]), (&"node-03".into(), &3_600_000.into()));
    let events = decommission_events(&trace, "decommission-node-03");
    let refusal = events.iter().find(|event| event["event"] == "refused").expect("refused");
    let until_ms = refusal["references"][0]["until_ms"].as_u64().expect("a lease names its end");
    let references = serde_json::json!([{"kind": "lease", "until_ms": until_ms}]);
    refused_once(&trace, "decommission-node-03", references);
    // The second request, once the lease ran out, runs and completes.
    let started = events.iter().find(|event| event["event"] == "stage_started").expect("a second request ran");
    assert!(started["t_ms"].as_u64() > Some(lease[0]["t_ms"].as_u64().unwrap() + 3_600_000), "after the lease");
    assert_eq!(events.last().expect("events")["event"], "completed");
}

/// Whether `host` recorded an event of `kind`.
fn events_on(trace: &[String], host: &str, kind: &str) -> bool {
    events(trace, kind).iter().any(|line| line.contains(&format!("\"host\":\"{host}\"")))
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
    assert_eq!(
        violated(&record),
        [
            "availability_floor",
            "canary_before_wider_release",
            "lane_bound",
            "no_egress_after_quiescence",
            "no_fetch_after_quiescence"
        ]
        .into()
    );
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
    // Lanes 2 and 3 held back: their nodes still serve the prior generation, so the rollout is partial, not a
    // successor (all-selected acceptance), and its account says why each was left alone.
    assert!(rollout(&trace, "terminal")[0].contains("\"outcome\":\"partial\""));
    let account = &record.rollouts[0];
    assert_eq!((account.count("upgraded"), account.count("prior")), (8, 8), "{account:?}");
    let node_09 = account.nodes.iter().find(|node| node.node == "node-09").unwrap();
    assert_eq!(node_09.detail, "the route bundle changed before its lane went down");
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
fn rollout_a_failed_canary_holds_back_the_wider_release() {
    let (record, trace) = run_file("rollout-a-failed-canary-holds-back-the-wider-release.toml");
    assert!(record.violations.is_empty(), "{:?}", record.violations);
    // node-01 is the canary: the only node the rollout ever held, stopped or installed on.
    let held: Vec<&String> = events(&trace, "hub.hold_placed").into_iter().filter(|l| l.contains("deploy:")).collect();
    assert!(!held.is_empty() && held.iter().all(|l| l.contains("\"agent\":\"node-01\"")), "{held:?}");
    for node in 2..=16 {
        let name = format!("node-{node:02}");
        assert!(on(&trace, &name, "worker.mutated", &["stop_service"]).is_empty(), "{name} never stopped");
    }
    assert!(rollout(&trace, "canary_proved").is_empty(), "the canary never proved");
    // Its install never ran, so nothing was restored; it was started and proved on its prior generation again.
    let back = rollout(&trace, "step_done");
    assert!(back.iter().any(|l| l.contains("node-01") && l.contains("revert:prove")), "the canary rolled back");
    let account = &record.rollouts[0].nodes;
    assert!(account.iter().all(|node| node.outcome == "prior"), "{account:?}");
    let node_02 = account.iter().find(|node| node.node == "node-02").unwrap();
    assert_eq!(node_02.detail, "the canary did not prove the successor");
}

#[test]
fn rollout_storage_admission_quarantines_unhealthy_disks_before_staging() {
    let (record, trace) = run_file("rollout-storage-admission-quarantines-unhealthy-disks-before-staging.toml");
    assert!(record.violations.is_empty(), "{:?}", record.violations);
    let quarantined = rollout(&trace, "quarantined");
    assert_eq!(quarantined.len(), 2, "{quarantined:?}");
    assert!(quarantined[0].contains("node-05") && quarantined[0].contains("write failed: no space left on device"));
    assert!(quarantined[0].contains("0 bytes free"), "{}", quarantined[0]);
    assert!(quarantined[1].contains("node-11") && quarantined[1].contains("the probe failed: ssh: timed out"));
    assert!(quarantined.iter().all(|l| l.contains("\"cause\":\"storage\"")), "a cause of its own: {quarantined:?}");
    // Five probes of node-11, each hung until the call timed out: the backoff's attempts, then no admission.
    assert_eq!(on(&trace, "node-11", "worker.hung", &["probe_storage"]).len(), 5);
    for node in ["node-05", "node-11"] {
        assert!(on(&trace, node, "worker.mutated", &[]).is_empty(), "{node}: never staged, held or stopped");
        assert!(on(&trace, "hub", "hub.hold_placed", &[&format!("\"agent\":\"{node}\""), "deploy:"]).is_empty());
    }
    assert_eq!(on(&trace, "node-06", "worker.mutated", &["run_installer"]).len(), 1, "the admitted nodes upgrade");
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
    assert!(rollout(&trace, "terminal")[0].contains("\"outcome\":\"partial\""));
    assert!(record.rollouts[0].nodes.iter().any(|node| node.node == "node-16" && node.outcome == "prior"));
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

/// A commissioning the wedged region accepted and never started is aborted, after fresh reads of the machine, its
/// events and the region's services, once the region is healthy, and commissioned afresh: New → Commissioning →
/// New → Commissioning → Ready, never Failed commissioning, and the onboarding completes.
#[test]
fn onboarding_commissioning_a_wedged_region_never_started_is_commissioned_afresh() {
    let (record, trace) =
        run_file("onboarding-commissioning-a-wedged-region-never-started-is-commissioned-afresh.toml");
    assert!(record.violations.is_empty(), "{:#?}", record.violations);
    let requests = events(&trace, "site.request");
    let at = |op: &str| requests.iter().position(|l| l.contains(&format!("\"op\":\"{op}\"")) && t_of(l) > 1_210_000);
    let abort = at("abort").expect("the never-started commissioning is aborted");
    assert_eq!(requests.iter().filter(|l| l.contains("\"op\":\"abort\"")).count(), 1);
    let commission = at("commission").expect("and commissioned afresh");
    assert!(abort < commission, "aborted, then commissioned");
    let before = &requests[..abort];
    for op in ["\"op\":\"read\"", "\"op\":\"events\"", "\"op\":\"regioncontrollers\""] {
        assert!(before.iter().any(|l| t_of(l) > 1_210_000 && l.contains(op)), "{op} before the abort");
    }
    let observed = onboarding(&trace, "observed");
    assert!(observed.iter().any(|l| l.contains("commissioning never started")), "{observed:?}");
    let statuses: Vec<String> = events(&trace, "site.status")
        .iter()
        .map(|l| l.split("\"to\":\"").nth(1).unwrap().split('"').next().unwrap().to_owned())
        .take(5)
        .collect();
    assert_eq!(statuses, ["new", "commissioning", "new", "commissioning", "ready"]);
    assert_eq!(onboarding(&trace, "completed").len(), 1);
}

#[test]
fn onboarding_region_workflow_wedged_is_diagnosed_from_the_region() {
    let (record, trace) = run_file("onboarding-region-workflow-wedged-is-diagnosed-from-the-region.toml");
    assert!(record.violations.is_empty(), "{:#?}", record.violations);
    let dead = "the region's temporal-worker service is dead: Not enough hosts to serve the request";
    // Every stall of both workflows, the discovery's and the commissioning waits', names the region's dead worker
    // and is classed MAAS's transient.
    let stalls = onboarding(&trace, "stalled");
    assert!(stalls.len() >= 4, "{stalls:?}");
    for stall in &stalls {
        assert!(stall.contains(dead) && stall.contains("\"class\":\"upstream_transient\""), "{stall}");
    }
    assert!(stalls.iter().any(|line| line.contains("\"stage\":\"create_or_find_in_maas\"")));
    assert!(stalls.iter().any(|line| line.contains("\"stage\":\"wait_for_ready\"")));
    // The reruns read the region first and create nothing; both workflows rest for a person with the evidence.
    let creates = events(&trace, "site.request").into_iter().filter(|line| line.contains("\"op\":\"create\"")).count();
    assert_eq!(creates, 2, "one create per machine, none by the reruns");
    let stops = onboarding(&trace, "stopped");
    let last: Vec<&&String> = stops.iter().filter(|line| line.contains("failed_manual_intervention")).collect();
    assert_eq!(last.len(), 2, "{stops:?}");
    assert!(last.iter().all(|line| line.contains(dead) && line.contains("\"stage\":\"load_site_config\"")));
    assert!(onboarding(&trace, "completed").is_empty());
}

#[test]
fn onboarding_slow_commissioning_is_waited_out_without_a_stall() {
    // tests/tests/slow_commissioning.rs checks the trickle and the contrast with a silent, hung commissioning.
    let (record, trace) = run_file("onboarding-slow-commissioning-is-not-silent.toml");
    assert!(record.violations.is_empty(), "{:#?}", record.violations);
    assert!(onboarding(&trace, "stalled").is_empty(), "slow is not silent");
    assert!(onboarding(&trace, "stage_failed").is_empty());
    assert_eq!(onboarding(&trace, "completed").len(), 2);
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
    // Zero script events once the apply has landed (the first three finished their last scripts at 183 s).
    let scripts_after_apply = events(&trace, "site.maas_event")
        .into_iter()
        .filter(|l| t_of(l) > 190_000 && l.contains("\"event_type\":\"Script result\""))
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
        // The deploy started at about 196 s: the stall window is five minutes, not MAAS's thirty.
        assert!(t_of(line) < 196_000 + 5 * 60_000 + 60_000, "{line}");
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
    assert!(ready_after_ms < 4 * 60_000, "canary Ready {ready_after_ms} ms after the resume");
    // MAAS has it Ready about three minutes after the resume, seed 001's "canary Ready in ~3 min".
    let maas_ready = events(&trace, "site.status")
        .into_iter()
        .find(|l| t_of(l) > resumed_ms && l.contains("\"to\":\"ready\""))
        .unwrap_or_else(|| panic!("MAAS never had the canary Ready"));
    let maas_ready_after_ms = t_of(maas_ready) - resumed_ms;
    assert!((170_000..200_000).contains(&maas_ready_after_ms), "MAAS Ready {maas_ready_after_ms} ms after the resume");
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

fn decommission<'a>(trace: &'a [String], event: &str) -> Vec<&'a String> {
    let needle = format!("\"event\":\"{event}\"");
    events(trace, "engine.decommission").into_iter().filter(|l| l.contains(&needle)).collect()
}

#[test]
fn decommission_releases_with_erase_and_deletes_the_node_everywhere() {
    let (record, trace) = run_file("decommission-releases-with-erase-and-deletes-the-node-everywhere.toml");
    assert!(record.violations.is_empty(), "{:?}", record.violations);
    // Every stage of section 5, in order, each done once and none adopted but the power-off (MAAS's release
    // already powered the machine off).
    let done: Vec<String> = decommission(&trace, "stage_done")
        .into_iter()
        .map(|l| l.split("\"stage\":\"").nth(1).unwrap().split('"').next().unwrap().to_owned())
        .collect();
    let expected: Vec<String> =
        engine::matrix::DecommissionStage::ALL.iter().map(|stage| stage.as_str().to_owned()).collect();
    assert_eq!(done, expected);
    let adopted: Vec<&String> =
        decommission(&trace, "stage_done").into_iter().filter(|l| l.contains("\"adopted\":true")).collect();
    assert_eq!(adopted.len(), 1, "{adopted:?}");
    assert!(adopted[0].contains("power_off_maas_node"));
    // MAAS wiped the disks before the release, and the record was deleted (204).
    let maas_events = events(&trace, "site.maas_event");
    let position =
        |needle: &str| maas_events.iter().position(|l| l.contains(needle)).unwrap_or_else(|| panic!("{needle}"));
    assert!(position("\"event_type\":\"User erasing disk\"") < position("\"event_type\":\"Disks erased\""));
    assert!(position("\"event_type\":\"Disks erased\"") < position("\"event_type\":\"Released\""));
    let deleted = events(&trace, "site.request")
        .into_iter()
        .filter(|l| l.contains("decommission-node-02") && l.contains("\"op\":\"delete\"") && l.contains("204"))
        .count();
    assert_eq!(deleted, 1);
    // The agent was uninstalled (its principal revoked) and the inventory record removed; node-03 was not touched.
    assert!(events(&trace, "hub.principal_revoked").iter().any(|l| l.contains("\"agent\":\"node-02\"")));
    let removed = events(&trace, "inventory.request")
        .into_iter()
        .filter(|l| l.contains("\"op\":\"remove\"") && l.contains("\"error\":null"))
        .count();
    assert_eq!(removed, 1);
    assert!(trace.iter().filter(|l| l.contains("inventory.")).all(|l| !l.contains("node-03")));
    assert_eq!(decommission(&trace, "completed").len(), 1);
    assert!(decommission(&trace, "observed").is_empty(), "no follow-up: the record was deleted");
}

#[test]
fn decommission_falls_back_to_a_no_erase_release_when_wipes_keep_failing() {
    let (record, trace) = run_file("decommission-falls-back-to-a-no-erase-release-when-wipes-keep-failing.toml");
    assert!(record.violations.is_empty(), "{:?}", record.violations);
    let maas_events = events(&trace, "site.maas_event");
    let count = |needle: &str| maas_events.iter().filter(|l| l.contains(needle)).count();
    assert_eq!(count("\"description\":\"Failed to erase disks.\""), 3, "the bounded attempts, each with erase");
    assert_eq!(count("\"event_type\":\"User erasing disk\""), 3);
    assert_eq!(count("\"event_type\":\"User releasing node\""), 1, "then one release without erase");
    let retries = decommission(&trace, "retrying");
    assert_eq!(retries.len(), 3, "two retries within the bound and the one fallback: {retries:?}");
    assert!(retries[2].contains("\"attempt\":4"));
    assert_eq!(decommission(&trace, "completed").len(), 1);
    assert!(decommission(&trace, "stopped").is_empty());
}

#[test]
fn decommission_retains_the_maas_record_by_policy_with_a_follow_up() {
    let (record, trace) = run_file("decommission-retains-the-maas-record-by-policy-with-a-follow-up.toml");
    assert!(record.violations.is_empty(), "{:?}", record.violations);
    let follow_ups = decommission(&trace, "observed");
    assert_eq!(follow_ups.len(), 1, "{follow_ups:?}");
    assert!(follow_ups[0].contains("retained by policy"), "{}", follow_ups[0]);
    assert!(events(&trace, "site.request").iter().all(|l| !l.contains("\"op\":\"delete\"")), "nothing deleted");
    let last_status = events(&trace, "site.status").into_iter().next_back().unwrap();
    assert!(last_status.contains("\"to\":\"ready\""), "the machine is left Ready: {last_status}");
    assert_eq!(decommission(&trace, "completed").len(), 1);
}

/// The `engine.audit` records of a trace, decoded: (t_ms, record).
fn audits(trace: &[String]) -> Vec<(u64, engine::recovery::AuditRecord)> {
    events(trace, "engine.audit")
        .into_iter()
        .map(|line| {
            let value: serde_json::Value = serde_json::from_str(line).unwrap();
            (t_of(line), serde_json::from_value(value["record"].clone()).unwrap())
        })
        .collect()
}

fn outcome_word(record: &engine::recovery::AuditRecord) -> String {
    match &record.outcome {
        engine::recovery::AuditOutcome::Accepted { .. } => "accepted".into(),
        engine::recovery::AuditOutcome::Refused { refusal, .. } => {
            serde_json::to_value(refusal).unwrap()["refusal"].as_str().unwrap().to_owned()
        }
    }
}

#[test]
fn operator_resumes_a_workflow_stopped_for_manual_intervention() {
    let (record, trace) = run_file("operator-resumes-a-workflow-stopped-for-manual-intervention.toml");
    assert!(record.violations.is_empty(), "{:?}", record.violations);
    let audits = audits(&trace);
    assert_eq!(audits.len(), 2, "requested, then settled: {audits:?}");
    let (t_requested, requested) = &audits[0];
    assert_eq!(*t_requested, 1_260_000);
    assert!(requested.missing_fields().is_empty());
    assert_eq!((requested.actor_id.as_str(), requested.prior_state.as_str()), ("alice", "failed_manual_intervention"));
    assert_eq!((requested.expected_next_state.as_str(), outcome_word(requested).as_str()), ("running", "accepted"));
    assert_eq!(requested.actual_next_state, None, "audited before acting");
    // Nothing of the workflow happens between its stop and the audit record.
    let first_after = trace.iter().position(|l| t_of(l) >= 1_260_000 && l.contains("engine.onboarding")).unwrap();
    let audit_at = trace.iter().position(|l| l.contains("engine.audit")).unwrap();
    assert!(audit_at < first_after, "the record precedes the run it authorizes");
    let (t_settled, settled) = &audits[1];
    assert_eq!(settled.actual_next_state.map(|s| s.as_str()), Some("running"));
    let completed = onboarding(&trace, "completed");
    assert_eq!(completed.len(), 1);
    assert!(t_of(completed[0]) <= *t_settled);
}

/// A decommission's cancel compensates nothing (its row's compensation follows the stage's own failure) and says so:
/// one `recovery_work` `not_due` after the cancel's audit (its `work` journal record is the driver's unit test's), and
/// no MAAS call after the cancel.
#[test]
fn operator_cancel_of_a_decommission_records_what_it_did_not_compensate() {
    let (record, trace) = run_file("operator-cancel-of-a-decommission-records-what-it-did-not-compensate.toml");
    assert!(record.violations.is_empty(), "{:?}", record.violations);
    let audits = audits(&trace);
    assert_eq!(audits.last().and_then(|(_, r)| r.actual_next_state).map(|s| s.as_str()), Some("cancelled"));
    let work: Vec<&String> = events(&trace, "engine.decommission")
        .into_iter()
        .filter(|line| line.contains("\"event\":\"recovery_work\"") && t_of(line) >= 2_000_000)
        .collect();
    assert_eq!(work.len(), 1, "{work:?}");
    assert!(work[0].contains("\"outcome\":\"not_due\"") && work[0].contains("revert_to_retired_on_uninstall_failure"));
    assert!(work[0].contains("nothing was done"), "{}", work[0]);
    let calls = events(&trace, "site.request").into_iter().filter(|line| t_of(line) >= 2_000_000).count();
    assert_eq!(calls, 0, "a cancel that compensates nothing calls nothing");
}

#[test]
fn operator_cancel_compensates_the_resting_stage_and_records_it() {
    let (record, trace) = run_file("operator-cancel-compensates-the-resting-stage-and-records-it.toml");
    assert!(record.violations.is_empty(), "{:?}", record.violations);
    let audits = audits(&trace);
    assert_eq!(audits.len(), 2, "requested, then settled: {audits:?}");
    assert_eq!(audits[1].1.actual_next_state.map(|s| s.as_str()), Some("cancelled"));
    // The cancel's compensation: after the audit, once, at the resting stage, performed (the machine released from
    // Failed deployment), and the workflow runs nothing else.
    let work: Vec<&String> =
        onboarding(&trace, "recovery_work").into_iter().filter(|line| t_of(line) >= 3_600_000).collect();
    assert_eq!(work.len(), 1, "{work:?}");
    assert!(
        work[0].contains("\"stage\":\"recover_for_datasource_retry\"") && work[0].contains("\"outcome\":\"performed\""),
        "{}",
        work[0]
    );
    assert!(t_of(work[0]) >= audits[1].0, "compensated after the cancel was recorded");
    let started_after = onboarding(&trace, "stage_started").into_iter().filter(|line| t_of(line) >= 3_600_000).count();
    assert_eq!(started_after, 0, "a cancelled workflow runs no stage");
    let releases = events(&trace, "site.request")
        .into_iter()
        .filter(|line| t_of(line) >= 3_600_000 && line.contains("\"op\":\"release\""))
        .count();
    assert_eq!(releases, 1, "one release, after a fresh read");
    let reads = events(&trace, "site.request")
        .into_iter()
        .filter(|line| t_of(line) >= 3_600_000 && t_of(line) <= t_of(work[0]) && line.contains("\"op\":\"read\""))
        .count();
    assert!(reads >= 1, "the compensation reads the machine before it releases it");
}

#[test]
fn operator_restart_clean_compensates_then_reruns() {
    let (record, trace) = run_file("operator-restart-clean-compensates-then-reruns.toml");
    assert!(record.violations.is_empty(), "{:?}", record.violations);
    let restart_ms = 900_000;
    // The workflow rests for a person at deploy_via_maas; each refused deploy's allocation was released (before each
    // retry and as it stopped), so the machine rests Ready.
    let stopped = onboarding(&trace, "stopped");
    assert_eq!(stopped.len(), 1, "{stopped:?}");
    assert!(stopped[0].contains("\"stage\":\"deploy_via_maas\"") && stopped[0].contains("failed_manual_intervention"));
    assert!(t_of(stopped[0]) < restart_ms);
    // Audited before anything is done, accepted, and settled `running` once the rerun returned.
    let audits = audits(&trace);
    assert_eq!(audits.len(), 2, "requested, then settled: {audits:?}");
    let (t_requested, requested) = &audits[0];
    assert_eq!(*t_requested, restart_ms);
    assert_eq!(requested.requested_action.as_str(), "restart_clean");
    assert!(requested.missing_fields().is_empty());
    assert_eq!(
        (requested.prior_state.as_str(), requested.prior_stage.as_str()),
        ("failed_manual_intervention", "deploy_via_maas")
    );
    assert_eq!((requested.expected_next_state.as_str(), outcome_word(requested).as_str()), ("running", "accepted"));
    assert_eq!(requested.actual_next_state, None, "audited before acting");
    let (t_settled, settled) = &audits[1];
    assert_eq!(settled.actual_next_state.map(|s| s.as_str()), Some("running"));
    let released_before: Vec<&String> = onboarding(&trace, "recovery_work")
        .into_iter()
        .filter(|l| t_of(l) < restart_ms && l.contains("\"outcome\":\"performed\"") && l.contains("from Allocated"))
        .collect();
    assert_eq!(released_before.len(), 3, "two retries and the stop: {released_before:?}");
    // The compensation: the resting stage's row's, once, after the audit record and before the rerun's first stage;
    // not due (idempotent): the machine is already Ready.
    let position = |needle: &dyn Fn(&String) -> bool| trace.iter().position(|l| t_of(l) >= restart_ms && needle(l));
    let audit_at = position(&|l| l.contains("engine.audit")).unwrap();
    let work: Vec<&String> =
        onboarding(&trace, "recovery_work").into_iter().filter(|l| t_of(l) >= restart_ms).collect();
    assert_eq!(work.len(), 1, "{work:?}");
    for needle in [
        "\"stage\":\"deploy_via_maas\"",
        "release_to_ready_if_deploy_started",
        "\"outcome\":\"not_due\"",
        "already Ready",
    ] {
        assert!(work[0].contains(needle), "{needle}: {}", work[0]);
    }
    let work_at = position(&|l| l.contains("\"event\":\"recovery_work\"")).unwrap();
    let rerun_at = position(&|l| l.contains("\"event\":\"stage_started\"")).unwrap();
    assert!(audit_at < work_at && work_at < rerun_at, "audit {audit_at}, compensation {work_at}, rerun {rerun_at}");
    // It read the machine, and released nothing.
    let site = |op: &str| -> Vec<usize> {
        let needle = format!("\"op\":\"{op}\"");
        (audit_at..rerun_at).filter(|i| trace[*i].contains("site.request") && trace[*i].contains(&needle)).collect()
    };
    let (reads, releases) = (site("read"), site("release"));
    assert_eq!(releases.len(), 0, "{releases:?}");
    assert!(!reads.is_empty(), "a fresh read: {reads:?}");
    // The rerun: from the top, the Ready machine's commissioning adopted, one deploy, no failure, completed.
    let rerun: Vec<&String> = trace[rerun_at..].iter().filter(|l| l.contains("engine.onboarding")).collect();
    assert!(rerun[0].contains("\"stage\":\"load_site_config\""), "{}", rerun[0]);
    assert!(rerun.iter().any(|l| l.contains("\"stage\":\"commission_node\",\"adopted\":true")));
    assert!(rerun.iter().all(|l| !l.contains("stage_failed") && !l.contains("recovery_work")), "{rerun:?}");
    let deploys = trace[rerun_at..]
        .iter()
        .filter(|l| l.contains("site.request") && l.contains("\"op\":\"deploy\"") && l.contains("\"status\":200"))
        .count();
    assert_eq!(deploys, 1);
    let completed = onboarding(&trace, "completed");
    assert_eq!(completed.len(), 1);
    assert!(t_of(completed[0]) > restart_ms && t_of(completed[0]) <= *t_settled);
}

#[test]
fn operator_adopts_a_decommission_whose_release_finished_out_of_sight() {
    let (record, trace) = run_file("operator-adopts-a-decommission-whose-release-finished-out-of-sight.toml");
    assert!(record.violations.is_empty(), "{:?}", record.violations);
    let (hidden_ms, refused_ms, adopted_ms) = (2_200_000, 2_600_000, 2_760_000);
    let stopped = decommission(&trace, "stopped");
    assert_eq!(stopped.len(), 1, "{stopped:?}");
    assert!(stopped[0].contains("release_maas_node") && stopped[0].contains("failed_manual_intervention"));
    assert!((hidden_ms..refused_ms).contains(&t_of(stopped[0])));
    // Two requests, each audited before acting and settled: refused while the machine is hidden (the fresh read finds
    // none), accepted once it is back Ready.
    let audits = audits(&trace);
    // (Each record follows the request's fresh read, a few ms after the step.)
    let summary: Vec<(u64, &str, String, Option<&str>)> = audits
        .iter()
        .map(|(t, r)| {
            (*t / 1_000 * 1_000, r.requested_action.as_str(), outcome_word(r), r.actual_next_state.map(|s| s.as_str()))
        })
        .collect();
    assert_eq!(summary.len(), 4, "{summary:?}");
    assert_eq!(
        summary[0],
        (refused_ms, "adopt_observed_state", "observation_does_not_satisfy_checkpoint".into(), None)
    );
    assert_eq!(summary[1].3, Some("failed_manual_intervention"), "a refusal changes nothing");
    assert_eq!(summary[2], (adopted_ms, "adopt_observed_state", "accepted".into(), None));
    assert_eq!(summary[3].3, Some("running"));
    for (_, requested) in &audits {
        assert!(requested.missing_fields().is_empty());
        assert_eq!(requested.prior_stage.as_str(), "release_maas_node");
    }
    // Each request read MAAS afresh (the machine list) before its audit record.
    for at in [refused_ms, adopted_ms] {
        let read = events(&trace, "site.request").into_iter().any(|l| {
            t_of(l) >= at && t_of(l) < at + 1_000 && l.contains("decommission-node-02") && l.contains("\"op\":\"list\"")
        });
        assert!(read, "a fresh read at {at}");
    }
    // The refusal ran nothing; the adoption entered the run at the stage after the release (after the site read):
    // release_maas_node and the node tasks before it are not run again.
    let started: Vec<&String> =
        decommission(&trace, "stage_started").into_iter().filter(|l| t_of(l) >= refused_ms).collect();
    assert!(started.iter().all(|l| t_of(l) >= adopted_ms), "{started:?}");
    assert!(
        started[0].contains("\"load_site_config\"") && started[1].contains("\"power_off_maas_node\""),
        "{started:?}"
    );
    for stage in ["disable_node", "force_release_allocations", "drain_node", "cleanup_storage", "release_maas_node"] {
        assert!(started.iter().all(|l| !l.contains(stage)), "{stage}: {started:?}");
    }
    // The power-off found the power off: adopted too.
    assert!(
        decommission(&trace, "stage_done")
            .iter()
            .any(|l| t_of(l) >= adopted_ms && l.contains("\"stage\":\"power_off_maas_node\",\"adopted\":true"))
    );
    // No destructive MAAS call repeated: one release in the whole run, and none after the stop.
    let mutations: Vec<&String> = events(&trace, "site.request")
        .into_iter()
        .filter(|l| l.contains("decommission-node-02"))
        .filter(|l| {
            ["release", "abort", "mark_fixed", "power_off", "delete"]
                .iter()
                .any(|op| l.contains(&format!("\"op\":\"{op}\"")))
        })
        .collect();
    assert_eq!(mutations.len(), 1, "{mutations:?}");
    assert!(mutations[0].contains("\"op\":\"release\"") && t_of(mutations[0]) < hidden_ms);
    assert_eq!(events(&trace, "inventory.task").iter().filter(|l| l.contains("\"task\":\"drain\"")).count(), 1);
    let completed = decommission(&trace, "completed");
    assert_eq!(completed.len(), 1);
    assert!(t_of(completed[0]) > adopted_ms);
}

#[test]
fn operator_freeze_refuses_automation_until_a_person_resolves_it() {
    let (record, trace) = run_file("operator-freeze-refuses-automation-until-a-person-resolves-it.toml");
    assert!(record.violations.is_empty(), "{:?}", record.violations);
    let requested: Vec<_> = audits(&trace).into_iter().filter(|(_, r)| r.actual_next_state.is_none()).collect();
    let summary: Vec<(u64, &str, String)> =
        requested.iter().map(|(t, r)| (*t, r.requested_action.as_str(), outcome_word(r))).collect();
    assert_eq!(
        summary,
        [
            (1_100_000, "mark_manual_intervention_required", "accepted".to_owned()),
            (1_150_000, "resume", "frozen_against_automation".to_owned()),
            (1_260_000, "resume", "accepted".to_owned()),
        ]
    );
    let refused = &requested[1].1;
    assert_eq!(refused.actor_role.as_str(), "automation");
    match &refused.outcome {
        engine::recovery::AuditOutcome::Refused { text, .. } => assert!(text.contains("frozen"), "{text}"),
        other => panic!("{other:?}"),
    }
    // Frozen from 1_100_000 to 1_260_000: the workflow neither starts a stage nor calls MAAS.
    let frozen: Vec<&String> = trace
        .iter()
        .filter(|l| (1_100_000..1_260_000).contains(&t_of(l)))
        .filter(|l| l.contains("engine.onboarding") || l.contains("site.request"))
        .collect();
    assert!(frozen.is_empty(), "{frozen:?}");
    assert_eq!(onboarding(&trace, "completed").len(), 1);
}

#[test]
fn operator_actions_refused_while_running_and_without_an_observation() {
    let (record, trace) = run_file("operator-actions-refused-while-running-and-without-an-observation.toml");
    assert!(record.violations.is_empty(), "{:?}", record.violations);
    let requested: Vec<_> = audits(&trace).into_iter().filter(|(_, r)| r.actual_next_state.is_none()).collect();
    let summary: Vec<(&str, &str, String)> =
        requested.iter().map(|(_, r)| (r.requested_action.as_str(), r.prior_state.as_str(), outcome_word(r))).collect();
    assert_eq!(
        summary,
        [
            ("rerun", "running", "workflow_running".to_owned()),
            (
                "adopt_observed_state",
                "failed_manual_intervention",
                "observation_does_not_satisfy_checkpoint".to_owned()
            ),
            ("rerun", "failed_manual_intervention", "accepted".to_owned()),
        ]
    );
    for (_, refused) in &requested[..2] {
        assert_eq!(refused.expected_next_state, refused.prior_state, "a refusal changes nothing");
        assert!(refused.missing_fields().is_empty() && refused.actor_id == "oncall");
    }
    // The run the refused rerun found in progress went on alone: one run before the operator's rerun.
    let runs_before: Vec<&String> = onboarding(&trace, "stage_started")
        .into_iter()
        .filter(|l| l.contains("\"load_site_config\"") && t_of(l) < 1_260_000)
        .collect();
    assert_eq!(runs_before.len(), 1, "{runs_before:?}");
    assert_eq!(onboarding(&trace, "completed").len(), 1);
}

#[test]
fn operator_adopts_a_late_agent_enrolment_without_redoing_the_deploy() {
    let (record, trace) = run_file("operator-adopts-a-late-agent-enrolment-without-redoing-the-deploy.toml");
    assert!(record.violations.is_empty(), "{:?}", record.violations);
    let stopped = onboarding(&trace, "stopped");
    assert_eq!(stopped.len(), 1, "{stopped:?}");
    assert!(stopped[0].contains("agent_enrollment_failure") && stopped[0].contains("failed_retryable"));
    let enrolled = events(&trace, "site.agent_enrol");
    assert_eq!(enrolled.len(), 1);
    assert!(t_of(enrolled[0]) > t_of(stopped[0]), "the agent enrols after the workflow stopped");
    // After the stop: no stage starts and no MAAS mutation (the freeze kept the controller's own rerun off).
    let after: Vec<&String> = trace
        .iter()
        .filter(|l| t_of(l) > t_of(stopped[0]))
        .filter(|l| {
            l.contains("stage_started")
                || (l.contains("site.request") && !l.contains("\"op\":\"read\"") && !l.contains("\"op\":\"list\""))
        })
        .collect();
    assert!(after.is_empty(), "{after:?}");
    let adopted: Vec<_> =
        audits(&trace).into_iter().filter(|(_, r)| r.requested_action.as_str() == "adopt_observed_state").collect();
    assert_eq!(adopted.len(), 2);
    assert_eq!(outcome_word(&adopted[0].1), "accepted");
    assert_eq!(adopted[1].1.actual_next_state.map(|s| s.as_str()), Some("completed"));
    assert_eq!(onboarding(&trace, "completed").len(), 1);
}

#[test]
fn operator_resumes_a_decommission_stopped_past_the_manual_boundary() {
    let (record, trace) = run_file("operator-resumes-a-decommission-stopped-past-the-manual-boundary.toml");
    assert!(record.violations.is_empty(), "{:?}", record.violations);
    let decommission = |event: &str| -> Vec<&String> {
        let needle = format!("\"event\":\"{event}\"");
        events(&trace, "engine.decommission").into_iter().filter(|l| l.contains(&needle)).collect()
    };
    let stopped = decommission("stopped");
    assert_eq!(stopped.len(), 1, "{stopped:?}");
    assert!(stopped[0].contains("remove_gpuaas_node_record") && stopped[0].contains("failed_manual_intervention"));
    let requested: Vec<_> = audits(&trace).into_iter().filter(|(_, r)| r.actual_next_state.is_none()).collect();
    let summary: Vec<(&str, String)> =
        requested.iter().map(|(_, r)| (r.actor_role.as_str(), outcome_word(r))).collect();
    assert_eq!(summary, [("automation", "needs_a_person".to_owned()), ("operator", "accepted".to_owned())]);
    // The resume enters the run at the stage it stopped at: after load_site_config's read, no earlier stage runs.
    let resumed: Vec<&String> = decommission("stage_started").into_iter().filter(|l| t_of(l) >= 2_100_000).collect();
    assert!(resumed[0].contains("\"load_site_config\"") && resumed[1].contains("\"remove_gpuaas_node_record\""));
    assert!(resumed.iter().all(|l| !l.contains("drain_node") && !l.contains("release_maas_node")), "{resumed:?}");
    assert_eq!(decommission("completed").len(), 1);
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
fn decommission_asked_while_its_onboarding_runs_survives_a_controller_death() {
    let (record, trace) = run_file("decommission-asked-while-its-onboarding-runs-survives-a-controller-death.toml");
    assert!(record.violations.is_empty(), "{:?}", record.violations);
    // The request was taken before the death (the controller journaled it) and waited for the onboarding; the
    // restarted controller took it up again: it started once the resumed onboarding completed, and completed.
    let onboarded = record.reached.iter().find(|r| r.oracle == "onboarding_completed").unwrap().t_ms;
    let first_stage = *decommission(&trace, "stage_started").first().expect("the decommission ran");
    assert!(t_of(first_stage) > onboarded.max(300_000), "after the restart and the onboarding: {first_stage}");
    assert_eq!(decommission(&trace, "completed").len(), 1);
    assert!(reached(&record, "decommission_completed"));
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

#[test]
fn decommission_machine_disappears_mid_release_and_reappears_ready() {
    let (record, trace) = run_file("decommission-machine-disappears-mid-release-and-reappears-ready.toml");
    assert!(record.violations.is_empty(), "{:?}", record.violations);
    let (hidden_ms, resumed_ms) = (2_200_000, 2_760_000);
    // The vanished machine stops the workflow for a person, with the evidence, while it is hidden.
    let stopped = decommission(&trace, "stopped");
    assert_eq!(stopped.len(), 1, "{stopped:?}");
    assert!(stopped[0].contains("release_maas_node") && stopped[0].contains("failed_manual_intervention"));
    assert!(stopped[0].contains("disappeared while releasing"), "{}", stopped[0]);
    assert!((hidden_ms..resumed_ms).contains(&t_of(stopped[0])));
    // One release in the whole run: the resume adopts the Ready machine instead of releasing it again.
    let releases = events(&trace, "site.request").into_iter().filter(|l| l.contains("\"op\":\"release\"")).count();
    assert_eq!(releases, 1);
    let adopted = decommission(&trace, "stage_done")
        .into_iter()
        .any(|l| t_of(l) >= resumed_ms && l.contains("\"stage\":\"release_maas_node\",\"adopted\":true"));
    assert!(adopted, "the reappeared Ready machine is adopted");
    let completed = decommission(&trace, "completed");
    assert_eq!(completed.len(), 1);
    assert!(t_of(completed[0]) > resumed_ms);
    assert_eq!(events(&trace, "engine.audit").len(), 2, "the operator's resume, requested then settled");
}

#[test]
fn decommission_release_that_never_powers_off_stops_for_a_person() {
    let (record, trace) = run_file("decommission-release-that-never-powers-off-stops-for-a-person.toml");
    assert!(record.violations.is_empty(), "{:?}", record.violations);
    // MAAS's own verdict, once per bounded attempt: RELEASING timed out because the power never read off.
    let failed_releases = events(&trace, "site.status")
        .into_iter()
        .filter(|l| l.contains("\"from\":\"releasing\",\"to\":\"failed_releasing\""))
        .count();
    assert_eq!(failed_releases, 3);
    let stopped = decommission(&trace, "stopped");
    assert_eq!(stopped.len(), 1, "{stopped:?}");
    for needle in ["release_maas_node", "failed_manual_intervention", "\"node_state\":\"quarantined\"", "Releasing"] {
        assert!(stopped[0].contains(needle), "{needle}: {}", stopped[0]);
    }
    // Nothing past the stop: the node's record, agent and secrets are kept for the person who fixes the BMC.
    assert!(events(&trace, "inventory.request").iter().all(|l| !l.contains("\"op\":\"remove\"")));
    assert!(events(&trace, "hub.principal_revoked").is_empty());
    assert!(decommission(&trace, "completed").is_empty());
}

// --- the instance lifecycle (seed 004) ---------------------------------------------------------------------------

/// The trace's events as JSON values.
fn json(trace: &[String]) -> Vec<serde_json::Value> {
    trace.iter().map(|line| serde_json::from_str(line).expect("trace lines are JSON")).collect()
}

/// Every `instance.operated`: (op, target, outcome, the kinds of the records it wrote).
fn operated(trace: &[String]) -> Vec<(String, String, String, Vec<String>)> {
    json(trace)
        .into_iter()
        .filter(|event| event["kind"] == "instance.operated")
        .map(|event| {
            let text = |key: &str| event[key].as_str().unwrap_or_default().to_owned();
            let wrote = event["wrote"].as_array().unwrap().iter().map(|k| k.as_str().unwrap().to_owned()).collect();
            (text("op"), text("target"), text("outcome"), wrote)
        })
        .collect()
}

/// Every journaled instance record of `kind` (`transition`, `cordoned` …), as JSON.
fn records(trace: &[String], kind: &str) -> Vec<serde_json::Value> {
    json(trace)
        .into_iter()
        .filter(|event| event["kind"] == "instance.record" && event["record"]["record"] == kind)
        .map(|event| event["record"].clone())
        .collect()
}

/// Each instance's last state, as its transitions say.
fn final_states(trace: &[String]) -> std::collections::BTreeMap<String, String> {
    let mut states = std::collections::BTreeMap::new();
    for record in records(trace, "instance_created") {
        states.insert(record["instance"]["id"].as_str().unwrap().to_owned(), "pending".to_owned());
    }
    for record in records(trace, "transition") {
        states.insert(record["instance"].as_str().unwrap().to_owned(), record["to"].as_str().unwrap().to_owned());
    }
    states
}

/// The VMs the provider created, per tag.
fn vms_created(trace: &[String]) -> std::collections::BTreeMap<String, u32> {
    let mut vms = std::collections::BTreeMap::new();
    for event in json(trace).into_iter().filter(|event| event["kind"] == "cloud.vm_created") {
        *vms.entry(event["tag"].as_str().unwrap().to_owned()).or_insert(0) += 1;
    }
    vms
}

fn reached(record: &RunRecord, oracle: &str) -> bool {
    record.reached.iter().any(|reached| reached.oracle == oracle)
}

#[test]
fn instances_plain_and_pooled_instances_provision_run_and_recycle() {
    let (_, trace) = run_file("instances-plain-and-pooled-instances-provision-run-and-recycle.toml");
    let ops = operated(&trace);
    assert_eq!(ops[0].0, "acquire");
    assert_eq!(ops[0].3, ["pool_state_changed"], "a conditional claim: {ops:?}");
    assert_eq!(ops[1].0, "release");
    assert!(ops[1].3.contains(&"destroy_requested".to_owned()) && ops[1].3.contains(&"cascaded".to_owned()), "{ops:?}");
    let states = final_states(&trace);
    assert_eq!(states.values().filter(|s| *s == "running").count(), 4, "2 plain + 2 pool members: {states:?}");
    assert_eq!(states.values().filter(|s| *s == "terminated").count(), 1, "the recycled member: {states:?}");
    assert!(records(&trace, "cascaded").iter().all(|r| r["certificates_revoked"] == 1 && r["peers_removed"] == 2));
    assert!(vms_created(&trace).values().all(|n| *n == 1));
}

#[test]
fn instances_provision_retried_under_a_lost_answer_reuses_its_row_and_creates_one_vm() {
    let (_, trace) = run_file("instances-provision-retried-under-a-lost-answer-reuses-its-row-and-creates-one-vm.toml");
    let ops = operated(&trace);
    assert_eq!(ops.len(), 3, "{ops:?}");
    assert_eq!(ops[0].3, ["instance_created"], "the answer was lost: the row waits for the next pass");
    assert!(ops[1].3.is_empty(), "the retry with the same operation id reuses the row: {ops:?}");
    assert_eq!(ops[2].3[0], "instance_created", "no operation id: a distinct instance");
    let adopted: Vec<_> =
        records(&trace, "provider_created").into_iter().filter(|r| r["instance"] == "i-00002").collect();
    assert_eq!(adopted.len(), 1, "adopted by its tag once");
    assert_eq!(
        vms_created(&trace),
        [("i-00001", 1), ("i-00002", 1), ("i-00003", 1)].map(|(t, n)| (t.to_owned(), n)).into()
    );
    assert!(final_states(&trace).values().all(|s| s == "running"));
}

#[test]
fn instances_stuck_pending_under_a_quota_refusal_is_signalled_and_retried() {
    let (record, trace) = run_file("instances-stuck-pending-under-a-quota-refusal-is-signalled-and-retried.toml");
    assert!(reached(&record, "stuck_pending"));
    let begun = records(&trace, "transition");
    assert_eq!(begun[0]["event"], "mark_provisioning");
    assert!(begun[0]["at_ms"].as_u64().unwrap() > 300_000, "pending until the quota freed up: {:?}", begun[0]);
    assert_eq!(final_states(&trace)["i-00001"], "running");
    assert_eq!(vms_created(&trace)["i-00001"], 1);
}

#[test]
fn instances_stuck_provisioning_on_a_hung_create_is_cleared_and_provisioned_again() {
    let (record, trace) =
        run_file("instances-stuck-provisioning-on-a-hung-create-is-cleared-and-provisioned-again.toml");
    assert!(reached(&record, "stuck_provisioning"));
    let ops = operated(&trace);
    assert_eq!(ops[0].0, "clear_stuck");
    assert_eq!(ops[0].2, "performed");
    let states = final_states(&trace);
    assert_eq!(states["i-00001"], "terminated", "errored, then terminated: {states:?}");
    assert_eq!(states["i-00002"], "running", "the fresh row under the same operation id: {states:?}");
    let created = records(&trace, "instance_created");
    assert_eq!(created[1]["instance"]["operation_id"], "op-vm-01");
    let events: Vec<String> = records(&trace, "transition")
        .iter()
        .filter(|r| r["instance"] == "i-00001")
        .map(|r| r["event"].to_string())
        .collect();
    assert_eq!(events, ["\"mark_provisioning\"", "\"mark_errored\"", "\"terminate\""]);
}

#[test]
fn instances_agent_up_but_never_ready_is_terminated_and_provisioned_afresh() {
    let (record, trace) = run_file("instances-agent-up-but-never-ready-is-terminated-and-provisioned-afresh.toml");
    assert!(reached(&record, "stuck_never_ready"));
    let states = final_states(&trace);
    assert_eq!(states["i-00001"], "terminated");
    assert_eq!(states["i-00002"], "running");
    let created = records(&trace, "instance_created");
    assert_eq!(created[1]["instance"]["operation_id"], "op-vm-01/after-i-00001", "a fresh operation id");
}

#[test]
fn instances_stuck_teardown_is_signalled_and_reaped_at_the_provider() {
    let (record, trace) = run_file("instances-stuck-teardown-is-signalled-and-reaped-at-the-provider.toml");
    assert!(reached(&record, "stuck_terminate_stalled"));
    assert_eq!(events(&trace, "cloud.reaped").len(), 1);
    let requested = records(&trace, "destroy_requested");
    let confirmed = records(&trace, "destroy_confirmed");
    assert_eq!((requested.len(), confirmed.len()), (1, 1));
}

#[test]
fn instances_terminated_guest_still_present_is_signalled_at_the_next_sync() {
    let (record, trace) = run_file("instances-terminated-guest-still-present-is-signalled-at-the-next-sync.toml");
    assert!(reached(&record, "terminated_guest_present"));
    let syncs: Vec<_> = json(&trace).into_iter().filter(|e| e["kind"] == "instance.sync").collect();
    let signalled = syncs.iter().find(|e| !e["signals"].as_array().unwrap().is_empty()).expect("a sync signalled");
    assert_eq!(signalled["signals"][0]["signal"], "cloud_sync_terminated_guest_present");
    assert_eq!(signalled["signals"][0]["instance"], "i-00002");
    assert!(events(&trace, "cloud.reaped").is_empty(), "no on-call reaped it");
    assert!(violated(&record).contains("every_instance_settles"), "its destroy is never confirmed, as expected");
}

#[test]
fn instances_ops_hold_refuses_terminate_and_reboot_but_allows_stop() {
    let (_, trace) = run_file("instances-ops-hold-refuses-terminate-and-reboot-but-allows-stop.toml");
    let outcomes: Vec<(String, String)> =
        operated(&trace).into_iter().map(|(op, _, outcome, _)| (op, outcome)).collect();
    let expected = [
        ("place_hold", "performed"),
        ("terminate", "refused"),
        ("reboot", "refused"),
        ("stop", "performed"),
        ("lift_hold", "performed"),
        ("terminate", "performed"),
    ];
    assert_eq!(outcomes, expected.map(|(op, outcome)| (op.to_owned(), outcome.to_owned())));
    assert_eq!(final_states(&trace)["i-00001"], "terminated");
}

#[test]
fn instances_approval_parks_cordon_and_terminate_until_approved_or_denied() {
    let (record, trace) = run_file("instances-approval-parks-cordon-and-terminate-until-approved-or-denied.toml");
    assert!(reached(&record, "approval_pending") && reached(&record, "cordon_not_pooled"));
    let ops = operated(&trace);
    let summary: Vec<(&str, &str)> = ops.iter().map(|(op, _, outcome, _)| (op.as_str(), outcome.as_str())).collect();
    assert_eq!(
        summary,
        [
            ("cordon", "pending"),
            ("terminate", "pending"),
            ("drain", "refused"),
            ("approve", "performed"),
            ("deny", "performed"),
            ("approve", "refused"),
            ("drain", "performed"),
        ]
    );
    assert_eq!(ops[0].3, ["audited", "deferred"]);
    assert_eq!(ops[3].3, ["audited", "decided", "cordoned"]);
    let states = final_states(&trace);
    assert_eq!((states["i-00001"].as_str(), states["i-00002"].as_str()), ("stopped", "running"));
}

#[test]
fn instances_cordon_outcomes_and_refusals_of_pool_members() {
    let (record, trace) = run_file("instances-cordon-outcomes-and-refusals-of-pool-members.toml");
    for oracle in ["cordon_fenced", "cordon_claimed", "cordon_already_fenced"] {
        assert!(reached(&record, oracle), "{oracle}");
    }
    let cordons: Vec<(String, String, Vec<String>)> =
        operated(&trace).into_iter().filter(|(op, ..)| op == "cordon").map(|(_, t, o, w)| (t, o, w)).collect();
    let outcomes: Vec<&str> = cordons.iter().map(|(_, outcome, _)| outcome.as_str()).collect();
    assert_eq!(outcomes, ["performed", "performed", "refused", "refused", "refused", "performed"], "{cordons:?}");
    assert!(cordons.iter().filter(|(_, outcome, _)| outcome == "refused").all(|(_, _, wrote)| wrote == &["audited"]));
    let uncordon = operated(&trace).into_iter().find(|(op, ..)| op == "uncordon").unwrap();
    assert_eq!(uncordon.3, ["audited", "uncordoned", "pool_state_changed"], "restored to ready");
}

#[test]
fn instances_drain_of_a_pool_member_and_of_a_plain_instance_cordons_then_stops() {
    let (_, trace) = run_file("instances-drain-of-a-pool-member-and-of-a-plain-instance-cordons-then-stops.toml");
    let drains: Vec<_> = operated(&trace).into_iter().filter(|(op, ..)| op == "drain").collect();
    assert_eq!(drains[0].3, ["audited", "cordoned", "transition", "drain_started"], "plain: no pool state");
    assert_eq!(drains[1].3, ["audited", "cordoned", "pool_state_changed", "transition", "drain_started"]);
    let states = final_states(&trace);
    assert_eq!(states["i-00001"], "stopped");
    assert_eq!(states["i-00002"], "stopped");
    assert_eq!(states["i-00003"], "running", "the replenisher's replacement");
}

#[test]
fn instances_pool_replenishes_and_recycles_ready_members_past_their_ttl() {
    let (_, trace) = run_file("instances-pool-replenishes-and-recycles-ready-members-past-their-ttl.toml");
    let states = final_states(&trace);
    let terminated = states.values().filter(|s| *s == "terminated").count();
    assert!(terminated >= 6, "ready members past their 10-minute TTL recycled, hour after hour: {states:?}");
    let live = states.values().filter(|s| *s != "terminated").count();
    assert!((3..=4).contains(&live), "the target kept, never above max: {states:?}");
    let claimed = records(&trace, "pool_state_changed").into_iter().filter(|r| r["to"] == "claimed").count();
    assert_eq!(claimed, 1);
}

#[test]
fn instances_controller_killed_between_terminate_commit_and_destroy_finishes_it_once() {
    let (_, trace) = run_file("instances-controller-killed-between-terminate-commit-and-destroy-finishes-it-once.toml");
    assert_eq!(events(&trace, "host.crash").len(), 1);
    assert_eq!(records(&trace, "destroy_requested").len(), 1, "one terminate");
    assert_eq!(records(&trace, "cascaded").len(), 1, "one cascade");
    assert_eq!(records(&trace, "destroy_confirmed").len(), 1);
    let destroyed =
        json(&trace).into_iter().filter(|e| e["kind"] == "cloud.guest" && e["event"]["event"] == "destroyed").count();
    assert_eq!(destroyed, 1);
}

#[test]
fn instances_controller_killed_after_the_create_adopts_the_vm_by_its_tag() {
    let (_, trace) = run_file("instances-controller-killed-after-the-create-adopts-the-vm-by-its-tag.toml");
    assert_eq!(events(&trace, "host.crash").len(), 1);
    assert_eq!(vms_created(&trace)["i-00001"], 1, "one VM");
    assert_eq!(records(&trace, "provider_created").len(), 1, "adopted once the controller was back");
    assert_eq!(final_states(&trace)["i-00001"], "running");
}

/// The region calls of `workflow` as (op, system id, status), in order.
fn site_requests(trace: &[String], workflow: &str) -> Vec<(String, String, u64)> {
    json(trace)
        .into_iter()
        .filter(|event| event["kind"] == "site.request" && event["workflow"] == workflow)
        .map(|event| {
            let text = |key: &str| event[key].as_str().unwrap_or_default().to_owned();
            (text("op"), text("system_id"), event["status"].as_u64().unwrap_or_default())
        })
        .collect()
}

/// The first time an event of `kind` for `workflow` carries `event.event == name`.
fn workflow_event_ms(trace: &[String], kind: &str, workflow: &str, name: &str) -> Option<u64> {
    json(trace)
        .into_iter()
        .find(|event| event["kind"] == kind && event["workflow"] == workflow && event["event"]["event"] == name)
        .map(|event| event["t_ms"].as_u64().unwrap())
}

fn record_ms(trace: &[String], kind: &str, instance: &str) -> Option<u64> {
    json(trace)
        .into_iter()
        .find(|event| {
            event["kind"] == "instance.record"
                && event["record"]["record"] == kind
                && event["record"]["instance"] == instance
        })
        .map(|event| event["t_ms"].as_u64().unwrap())
}

#[test]
fn instances_bare_metal_machines_are_onboarded_powered_and_decommissioned() {
    let (record, trace) = run_file("instances-bare-metal-machines-are-onboarded-powered-and-decommissioned.toml");
    assert!(reached(&record, "onboarding_completed") && reached(&record, "decommission_completed"));
    let states = final_states(&trace);
    let expected = [("i-00001", "terminated"), ("i-00002", "running"), ("i-00003", "running")];
    assert_eq!(states, expected.iter().map(|(id, state)| (id.to_string(), state.to_string())).collect());
    for created in records(&trace, "instance_created") {
        assert_eq!(created["instance"]["backing"]["provider"], "bare_metal", "{created}");
    }
    let events: Vec<String> = records(&trace, "transition")
        .iter()
        .filter(|transition| transition["instance"] == "i-00002")
        .map(|transition| transition["event"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(events, ["mark_provisioning", "mark_running", "stop", "mark_stopped", "start", "mark_running"]);
    // Power goes to MAAS, each call after a read of the machine; the system id is the one the onboarding named.
    let system_id = records(&trace, "provider_created")
        .into_iter()
        .find(|created| created["instance"] == "i-00002")
        .map(|created| created["cloud_instance_id"].as_str().unwrap().to_owned())
        .unwrap();
    let powered: Vec<(String, String, u64)> = site_requests(&trace, "instances")
        .into_iter()
        .filter(|(op, _, _)| op == "power_off" || op == "power_on")
        .collect();
    assert_eq!(powered, [("power_off".into(), system_id.clone(), 200), ("power_on".into(), system_id, 200)]);
    // The terminate is the decommission, and the destroy is confirmed only once it completed.
    let terminated = record_ms(&trace, "destroy_requested", "i-00001").unwrap();
    let begun = workflow_event_ms(&trace, "engine.decommission", "decommission-node-02", "stage_started").unwrap();
    let completed = workflow_event_ms(&trace, "engine.decommission", "decommission-node-02", "completed").unwrap();
    let confirmed = record_ms(&trace, "destroy_confirmed", "i-00001").unwrap();
    assert!(
        terminated <= begun && begun < completed && completed <= confirmed,
        "{terminated} {begun} {completed} {confirmed}"
    );
    assert!(workflow_event_ms(&trace, "engine.decommission", "decommission-node-03", "stage_started").is_none());
}

#[test]
fn instances_bare_metal_onboarding_stopped_for_a_person_errors_the_row_and_its_terminate_asks_once() {
    let (record, trace) = run_file(
        "instances-bare-metal-onboarding-stopped-for-a-person-errors-the-row-and-its-terminate-asks-once.toml",
    );
    assert!(reached(&record, "mac_drift_classified"));
    let events: Vec<String> = records(&trace, "transition")
        .iter()
        .filter(|transition| transition["instance"] == "i-00001")
        .map(|transition| transition["event"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(events, ["mark_provisioning", "mark_errored", "terminate"]);
    assert_eq!(final_states(&trace)["i-00002"], "running");
    let runs = json(&trace)
        .into_iter()
        .filter(|event| {
            event["kind"] == "engine.decommission"
                && event["workflow"] == "decommission-node-02"
                && event["event"]["event"] == "stage_started"
        })
        .count();
    assert_eq!(runs, 1, "a retryable stop is not asked for again on every pass");
    assert!(record_ms(&trace, "destroy_requested", "i-00001").is_some());
    assert!(record_ms(&trace, "destroy_confirmed", "i-00001").is_none(), "the machine was never released");
}

#[test]
fn instances_bare_metal_controller_killed_after_the_deploy_call_runs_one_deploy() {
    let (record, trace) = run_file("instances-bare-metal-controller-killed-after-the-deploy-call-runs-one-deploy.toml");
    assert!(reached(&record, "host_restarted") && reached(&record, "onboarding_completed"));
    assert_eq!(records(&trace, "instance_created").len(), 1, "one row across the restart");
    assert_eq!(final_states(&trace)["i-00001"], "running");
    let deploys =
        site_requests(&trace, "onboard-node-02").into_iter().filter(|(op, _, status)| op == "deploy" && *status == 200);
    assert_eq!(deploys.count(), 1, "the rerun adopts the deploy in flight");
}

// --- agent-credential rotation (seed 003's replacement plan) -----------------------------------------------------------

/// The trace's events of `kind`, as JSON values.
fn of_kind(trace: &[String], kind: &str) -> Vec<serde_json::Value> {
    json(trace).into_iter().filter(|event| event["kind"] == kind).collect()
}

fn t_of_value(event: &serde_json::Value) -> u64 {
    event["t_ms"].as_u64().expect("every event has its time")
}

/// node-03's rotation signals of `event` (`planned`, `adopted`, `step_done`, `retrying`, `ended` …).
fn rotation_signals(trace: &[String], event: &str) -> Vec<serde_json::Value> {
    of_kind(trace, "engine.rotation")
        .into_iter()
        .filter(|signal| signal["node"] == "node-03" && signal["event"]["event"] == event)
        .collect()
}

/// The time of node-03's first accepted heartbeat authenticated by credential `generation` after `after_ms`.
fn heard_at(trace: &[String], generation: u64, after_ms: u64) -> Option<u64> {
    of_kind(trace, "hub.heartbeat")
        .iter()
        .filter(|beat| beat["agent"] == "node-03" && beat["generation"].as_u64().unwrap_or(1) == generation)
        .map(t_of_value)
        .find(|t_ms| *t_ms > after_ms)
}

/// What every rotation of node-03 that converged shows: one successor minted (generation 2), one commit revoking
/// generation 1 after the hub accepted a heartbeat of generation 2, no abort, no heartbeat refused, the install written
/// once into the credential file with mode 0600, and the rotation ended `rotated`. Answers (issue, commit) times.
fn rotated_once(trace: &[String]) -> (u64, u64) {
    let issued = of_kind(trace, "hub.credential_issued");
    assert_eq!(issued.len(), 1, "one successor minted: {issued:?}");
    assert_eq!((issued[0]["agent"].as_str(), issued[0]["generation"].as_u64()), (Some("node-03"), Some(2)));
    let committed = of_kind(trace, "hub.rotation_committed");
    assert_eq!(committed.len(), 1, "the predecessor revoked once: {committed:?}");
    assert_eq!(committed[0]["revoked_generation"], 1);
    let (issue_ms, commit_ms) = (t_of_value(&issued[0]), t_of_value(&committed[0]));
    let proved_ms = heard_at(trace, 2, issue_ms).expect("a heartbeat authenticated by the successor");
    assert!(proved_ms < commit_ms, "revoked at {commit_ms} before the successor was heard at {proved_ms}");
    assert!(of_kind(trace, "hub.rotation_aborted").is_empty());
    assert!(of_kind(trace, "hub.heartbeat_refused").is_empty(), "the overlap held");
    let installs: Vec<serde_json::Value> = of_kind(trace, "worker.mutated")
        .into_iter()
        .filter(|write| write["target"] == "~/.mac/agent-credential")
        .collect();
    assert_eq!(installs.len(), 1, "installed once: {installs:?}");
    assert_eq!(
        (installs[0]["host"].as_str(), installs[0]["operation_id"].as_str()),
        (Some("node-03"), Some("rotation-node-03-1/install"))
    );
    let ended = rotation_signals(trace, "ended");
    assert_eq!(ended.len(), 1);
    assert_eq!(ended[0]["event"]["end"], serde_json::json!({"end": "rotated", "generation": 2}));
    // After the commit the agent heartbeats only with its successor.
    assert!(heard_at(trace, 1, commit_ms).is_none(), "no heartbeat of the predecessor after its revocation");
    (issue_ms, commit_ms)
}

/// Every step of the rotation journaled as an intent and a completion, each once, in order.
fn journaled_in_order(trace: &[String]) {
    let records: Vec<(String, Option<String>)> = of_kind(trace, "controller.rotation_journal")
        .iter()
        .map(|record| {
            (record["record"].as_str().unwrap().to_owned(), record["operation_id"].as_str().map(str::to_owned))
        })
        .collect();
    let mut expected = vec![("planned".to_owned(), None)];
    for step in ["issue", "install", "prove", "revoke"] {
        let id = Some(format!("rotation-node-03-1/{step}"));
        expected.push(("intent".to_owned(), id.clone()));
        expected.push(("completed".to_owned(), id));
    }
    expected.push(("rotated".to_owned(), None));
    assert_eq!(records, expected);
}

#[test]
fn rotation_clean_overlap_proves_the_successor_before_revoking_the_predecessor() {
    let (record, trace) = run_file("rotation-clean-overlap-proves-the-successor-before-revoking-the-predecessor.toml");
    assert!(record.violations.is_empty(), "{:?}", record.violations);
    let (issue_ms, _) = rotated_once(&trace);
    journaled_in_order(&trace);
    assert_eq!(issue_ms, 60_020, "issued when the operator asked, at 60 s");
    let done: Vec<serde_json::Value> = rotation_signals(&trace, "step_done");
    let steps: Vec<&str> = done.iter().map(|signal| signal["event"]["step"].as_str().unwrap()).collect();
    assert_eq!(steps, ["issue", "install", "prove", "revoke"]);
    assert_eq!(done[0]["event"]["generation"], 2);
}

#[test]
fn rotation_transient_ssh_timeout_at_install_is_retried_while_the_overlap_holds() {
    let (record, trace) = run_file("rotation-transient-ssh-timeout-at-install-is-retried-while-the-overlap-holds.toml");
    assert_eq!(record.faults["ssh_timeout"], 1);
    let (issue_ms, _) = rotated_once(&trace);
    journaled_in_order(&trace);
    let retrying = rotation_signals(&trace, "retrying");
    assert_eq!(retrying.len(), 1, "{retrying:?}");
    assert_eq!(
        (retrying[0]["event"]["step"].as_str(), retrying[0]["event"]["attempt"].as_u64()),
        (Some("install"), Some(1))
    );
    let install_ms = of_kind(&trace, "worker.mutated")
        .iter()
        .find(|write| write["target"] == "~/.mac/agent-credential")
        .map(t_of_value)
        .unwrap();
    assert!(install_ms > t_of_value(&retrying[0]), "written after the backoff");
    // The overlap: the enrolment credential authenticated a heartbeat after the successor was issued, before it was
    // installed, and the hub accepted it.
    let overlap_ms = heard_at(&trace, 1, issue_ms).expect("a heartbeat of the predecessor after the issue");
    assert!(overlap_ms < install_ms, "heard at {overlap_ms}, installed at {install_ms}");
}

/// A rotation a controller death interrupted: the controller died once and came back, and the restarted controller
/// adopted the rotation with `in_doubt` as the step in doubt, then converged as a clean rotation does.
fn rotation_adopted_and_rotated(name: &str, in_doubt: &str) -> Vec<String> {
    let (record, trace) = run_file(name);
    assert!(record.violations.is_empty(), "{name}: {:?}", record.violations);
    assert_eq!(record.faults["controller_death"], 1);
    assert_eq!(on(&trace, "controller", "host.crash", &[]).len(), 1, "{name}");
    let adopted = rotation_signals(&trace, "adopted");
    assert_eq!(adopted.len(), 1, "{name}: {adopted:?}");
    assert_eq!(adopted[0]["event"]["in_doubt"], in_doubt, "{name}");
    let crash_ms = t_of_value(&of_kind(&trace, "host.crash")[0]);
    assert!(t_of_value(&adopted[0]) > crash_ms);
    rotated_once(&trace);
    trace
}

#[test]
fn rotation_controller_killed_after_the_issue_adopts_it_without_a_second_successor() {
    let name = "rotation-controller-killed-after-the-issue-adopts-it-without-a-second-successor.toml";
    let trace = rotation_adopted_and_rotated(name, "issue");
    // The controller died after the hub minted the successor and before the issue's completion was journaled.
    let crash_ms = t_of_value(&of_kind(&trace, "host.crash")[0]);
    assert!(t_of_value(&of_kind(&trace, "hub.credential_issued")[0]) <= crash_ms);
    let completions_before: Vec<serde_json::Value> = of_kind(&trace, "controller.rotation_journal")
        .into_iter()
        .filter(|record| record["record"] == "completed" && t_of_value(record) <= crash_ms)
        .collect();
    assert!(completions_before.is_empty(), "{completions_before:?}");
    journaled_in_order(&trace);
}

#[test]
fn rotation_controller_killed_after_the_install_finds_it_on_the_node() {
    let name = "rotation-controller-killed-after-the-install-finds-it-on-the-node.toml";
    let trace = rotation_adopted_and_rotated(name, "install");
    // The write took effect before the death and was not made again (`rotated_once` counts one).
    let crash_ms = t_of_value(&of_kind(&trace, "host.crash")[0]);
    let install_ms = of_kind(&trace, "worker.mutated")
        .iter()
        .find(|write| write["target"] == "~/.mac/agent-credential")
        .map(t_of_value)
        .unwrap();
    assert!(install_ms <= crash_ms);
    journaled_in_order(&trace);
}

#[test]
fn rotation_controller_killed_before_the_revoke_revokes_once_after_the_proof() {
    let name = "rotation-controller-killed-before-the-revoke-revokes-once-after-the-proof.toml";
    let trace = rotation_adopted_and_rotated(name, "revoke");
    let crash_ms = t_of_value(&of_kind(&trace, "host.crash")[0]);
    assert!(
        t_of_value(&of_kind(&trace, "hub.rotation_committed")[0]) > crash_ms,
        "revoked by the restarted controller"
    );
    let intents: Vec<serde_json::Value> = of_kind(&trace, "controller.rotation_journal")
        .into_iter()
        .filter(|record| record["operation_id"] == "rotation-node-03-1/revoke" && record["record"] == "intent")
        .collect();
    assert_eq!(intents.len(), 1, "the revoke's intent was journaled before the death and not armed again");
    assert!(t_of_value(&intents[0]) <= crash_ms);
}

#[test]
fn rotation_of_a_stopped_agent_stops_unproved_with_nothing_revoked() {
    let (record, trace) = run_file("rotation-of-a-stopped-agent-stops-unproved-with-nothing-revoked.toml");
    assert!(record.violations.is_empty(), "{:?}", record.violations);
    assert!(record.reached.iter().all(|firing| firing.oracle != "credential_rotated"));
    assert_eq!(of_kind(&trace, "hub.credential_issued").len(), 1);
    let ended = rotation_signals(&trace, "ended");
    assert_eq!(ended.len(), 1);
    assert_eq!(
        ended[0]["event"]["end"],
        serde_json::json!({"end": "stopped", "step": "prove", "failure": {"failure": "successor_not_proved", "waited_ms": 120_000}})
    );
    assert!(of_kind(&trace, "hub.rotation_committed").is_empty(), "the predecessor was never revoked unproved");
    assert!(of_kind(&trace, "hub.rotation_aborted").is_empty(), "nor the installed successor");
    let install_ms = of_kind(&trace, "worker.mutated")
        .iter()
        .find(|write| write["target"] == "~/.mac/agent-credential")
        .map(t_of_value)
        .expect("the successor was installed");
    let stopped_ms = t_of_value(&ended[0]);
    assert!(
        (install_ms + 120_000..install_ms + 131_000).contains(&stopped_ms),
        "the proof waited its bound: {stopped_ms}"
    );
    // Started again, the agent presents the successor from its file and is heard: both credentials were left valid.
    let back_ms = heard_at(&trace, 2, 420_000).expect("the successor heard after the agent started");
    assert!(back_ms < 420_000 + 31_000);
    assert!(of_kind(&trace, "hub.heartbeat_refused").is_empty());
}

#[test]
fn rotation_then_rollout_deploys_under_the_rotated_credential_without_touching_it() {
    let (record, trace) =
        run_file("rotation-then-rollout-deploys-under-the-rotated-credential-without-touching-it.toml");
    assert!(record.violations.is_empty(), "{:?}", record.violations);
    rotated_once(&trace);
    // The rollout writes the identity files, never the credential file, and rotates nothing.
    let rollout_writes: Vec<serde_json::Value> = of_kind(&trace, "worker.mutated")
        .into_iter()
        .filter(|write| write["operation_id"].as_str().is_some_and(|id| id.starts_with("rollout-")))
        .collect();
    assert!(rollout_writes.iter().any(|write| write["target"] == "~/.mac/mac.env"));
    assert!(rollout_writes.iter().all(|write| write["target"] != "~/.mac/agent-credential"), "{rollout_writes:?}");
    // node-03 proved the new revision with the rotated credential: every heartbeat after its start is generation 2.
    let start_ms = of_kind(&trace, "worker.mutated")
        .iter()
        .find(|write| write["host"] == "node-03" && write["op"] == "start_service")
        .map(t_of_value)
        .unwrap();
    assert!(heard_at(&trace, 2, start_ms).is_some());
    assert!(heard_at(&trace, 1, start_ms).is_none());
    let terminal = rollout(&trace, "terminal");
    assert!(terminal.last().unwrap().contains("successor"), "{terminal:?}");
}
