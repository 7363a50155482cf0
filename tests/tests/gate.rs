//! `fleetsim gate` and `fleetsim repro` in process, on a small campaign written to a temporary directory: the gate
//! passes in one line or lists every unmet threshold, fails closed on a bad report, a bad policy, a shard or a
//! campaign file changed since the report; repro replays a run and checks its digest.

#[path = "support/small_campaign.rs"]
mod small_campaign;
use small_campaign::{SSH_TIMEOUTS, small_campaign};

use std::path::{Path, PathBuf};

use sim::model::exit::{EXIT_BAD_INPUT, EXIT_FAIL, EXIT_PASS};

#[path = "support/in_process.rs"]
mod in_process;
use in_process::fleetsim;

/// Six short runs of a six-node rollout in lanes of two: every run passes and reaches the successor.
fn campaign_text() -> String {
    small_campaign(
        "gate test: a small rollout campaign",
        3,
        6,
        &[SSH_TIMEOUTS, "marker_drift = { per_mille = 300 }"],
        &["rollout_reached_successor"],
    )
}

const POLICY: &str = r#"schema_version = 1
kind = "gate_policy"
description = "gate test policy"

[runs]
min = 6
pass_per_mille_min = 1000
sometimes_all_reached = true

[lanes]
converged_per_mille_min = 1000

[violations]
max = { every_lane_converged = 0 }
others_max = 0

[faults]
min = { ssh_timeout = 1 }
"#;

struct Fixture {
    dir: tempfile::TempDir,
    campaign: PathBuf,
    report: PathBuf,
}

impl Fixture {
    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    fn write(&self, name: &str, text: &str) -> String {
        std::fs::write(self.dir.path().join(name), text).unwrap();
        self.path(name)
    }

    fn report(&self) -> String {
        self.report.display().to_string()
    }
}

fn campaign_run() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let campaign = dir.path().join("small.toml");
    std::fs::write(&campaign, campaign_text()).unwrap();
    let out = dir.path().join("out");
    let (code, _, err) =
        fleetsim(&["campaign", campaign.to_str().unwrap(), "--jobs", "2", "--out", out.to_str().unwrap()]);
    assert_eq!(code, EXIT_PASS, "{err}");
    Fixture { campaign, report: out.join("report.json"), dir }
}

#[test]
fn a_report_that_meets_the_policy_passes_in_one_line() {
    let fixture = campaign_run();
    let policy = fixture.write("gate.toml", POLICY);
    let (code, out, err) = fleetsim(&["gate", &fixture.report(), "--policy", &policy, "--jobs", "2"]);
    assert_eq!(code, EXIT_PASS, "{out}{err}");
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(out.starts_with(&format!("gate PASS: {} meets {policy}: 6 runs, 6 passed, ", fixture.report())), "{out}");
    assert!(out.ends_with("6 runs re-checked\n"), "every run is replayed by default: {out}");
}

#[test]
fn every_unmet_threshold_is_listed_and_the_gate_exits_1() {
    let fixture = campaign_run();
    let strict = POLICY
        .replace("min = 6", "min = 100")
        .replace("min = { ssh_timeout = 1 }", "min = { ssh_timeout = 1, controller_death = 1 }")
        + "\n[matrix]\nrequired = [\"wait_for_ready/pxe_discovery_failure\"]\n";
    let policy = fixture.write("strict.toml", &strict);
    let (code, out, err) = fleetsim(&["gate", &fixture.report(), "--policy", &policy, "--jobs", "2"]);
    assert_eq!(code, EXIT_FAIL, "{out}{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with(&format!("gate FAIL: {} against {policy}: 3 of ", fixture.report())), "{out}");
    assert_eq!(
        &lines[1..],
        [
            "  runs.min: the report has 6 runs, the policy needs at least 100",
            "  faults.min.controller_death: effective 0 times over all runs (0 injected), the policy needs at least 1",
            "  matrix.required.wait_for_ready/pxe_discovery_failure: no run hit this pair",
        ]
    );
}

#[test]
fn a_missing_truncated_corrupt_or_incompatible_report_is_refused_in_one_line() {
    let fixture = campaign_run();
    let policy = fixture.write("gate.toml", POLICY);
    let text = std::fs::read_to_string(&fixture.report).unwrap();
    let truncated = fixture.write("truncated.json", &text[..text.len() / 2]);
    let corrupt = fixture.write("corrupt.json", &text.replacen('{', "<", 1));
    let newer = fixture.write("newer.json", &text.replacen("\"schema_version\": 1", "\"schema_version\": 2", 1));
    let missing = fixture.path("missing.json");
    for (path, reason) in [
        (missing, "no such file"),
        (truncated, "truncated: the JSON ends early"),
        (corrupt, "corrupt: not JSON"),
        (newer, "schema_version: this fleetsim reads version 1, the file has 2"),
    ] {
        let (code, out, err) = fleetsim(&["gate", &path, "--policy", &policy]);
        assert_eq!(code, EXIT_BAD_INPUT, "{path}: {out}{err}");
        assert_eq!(out, "", "no verdict from a bad report");
        assert!(err.starts_with(&format!("error: {path}: {reason}")), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
}

#[test]
fn a_campaign_file_changed_since_the_report_fails_the_gate_with_both_hashes() {
    let fixture = campaign_run();
    let policy = fixture.write("gate.toml", POLICY);
    std::fs::write(&fixture.campaign, campaign_text().replace("per_mille = 300", "per_mille = 301")).unwrap();
    let (code, out, _) = fleetsim(&["gate", &fixture.report(), "--policy", &policy]);
    assert_eq!(code, EXIT_FAIL, "{out}");
    let report: reports::CampaignReport =
        serde_json::from_str(&std::fs::read_to_string(&fixture.report).unwrap()).unwrap();
    assert!(
        out.contains(&format!(
            "  config_hash: the report's config hash {} is not that of {} with seed 3 and 6 runs (",
            report.config_hash,
            fixture.campaign.display()
        )),
        "{out}"
    );
    assert!(out.contains("  determinism.recheck: 6 runs not re-checked: the campaign file does not resolve"), "{out}");
    // A campaign file that is gone cannot be checked at all: bad input.
    std::fs::remove_file(&fixture.campaign).unwrap();
    let (code, _, err) = fleetsim(&["gate", &fixture.report(), "--policy", &policy]);
    assert_eq!(code, EXIT_BAD_INPUT, "{err}");
    assert!(err.starts_with(&format!("error: {}: cannot load the campaign it names (", fixture.report())), "{err}");
}

#[test]
fn an_edited_run_digest_fails_the_determinism_recheck_and_a_shard_is_not_gated() {
    let fixture = campaign_run();
    let policy = fixture.write("gate.toml", POLICY);
    let mut report: reports::CampaignReport =
        serde_json::from_str(&std::fs::read_to_string(&fixture.report).unwrap()).unwrap();
    let real = report.runs[4].trace_digest.clone();
    report.runs[4].trace_digest = "0".repeat(64);
    // The forger recomputes the summary, so the report agrees with itself and only a replay can tell.
    report.summary = resummarized(&report);
    let edited = fixture.path("edited.json");
    reports::write_json_atomic(Path::new(&edited), &report).unwrap();
    let (code, out, _) = fleetsim(&["gate", &edited, "--policy", &policy, "--jobs", "2"]);
    assert_eq!(code, EXIT_FAIL, "{out}");
    let seed = report.runs[4].seed;
    assert!(
        out.contains(&format!(
            "  determinism.run.4: run 4 (seed {seed}) replayed to trace digest {real}, the report has {}",
            "0".repeat(64)
        )),
        "{out}"
    );

    let shard_dir = fixture.dir.path().join("shard");
    let campaign = fixture.campaign.display().to_string();
    let (code, _, err) = fleetsim(&["campaign", &campaign, "--shard", "1/2", "--out", shard_dir.to_str().unwrap()]);
    assert_eq!(code, EXIT_PASS, "{err}");
    let shard_report = shard_dir.join("report.json").display().to_string();
    let (code, out, _) = fleetsim(&["gate", &shard_report, "--policy", &policy]);
    assert_eq!(code, EXIT_FAIL, "{out}");
    assert!(
        out.contains("  report: the report holds shard 1/2 of its campaign (3 of 6 runs); merge the shards"),
        "{out}"
    );
}

/// The summary recomputed from the report's runs, as a forger who knows the format would.
fn resummarized(report: &reports::CampaignReport) -> reports::Summary {
    let sometimes: Vec<String> = report.summary.sometimes_reached.keys().cloned().collect();
    reports::Summary {
        matrix_listed: report.summary.matrix_listed.clone(),
        ..reports::summarize(&report.runs, &sometimes, reports::read::sha256_hex)
    }
}

#[test]
fn a_report_edited_without_its_summary_is_refused_before_it_is_gated() {
    let fixture = campaign_run();
    let policy = fixture.write("gate.toml", POLICY);
    let mut report: reports::CampaignReport =
        serde_json::from_str(&std::fs::read_to_string(&fixture.report).unwrap()).unwrap();
    report.runs[2].faults.clear();
    let edited = fixture.path("edited.json");
    reports::write_json_atomic(Path::new(&edited), &report).unwrap();
    let (code, out, err) = fleetsim(&["gate", &edited, "--policy", &policy]);
    assert_eq!((code, out.as_str()), (EXIT_BAD_INPUT, ""), "{err}");
    // The run's own fault log still counts what it injected.
    assert!(err.starts_with(&format!("error: {edited}: inconsistent: runs[2].fault_log: logs ")), "{err}");
    report.runs[2].fault_log.clear();
    reports::write_json_atomic(Path::new(&edited), &report).unwrap();
    let (code, out, err) = fleetsim(&["gate", &edited, "--policy", &policy]);
    assert_eq!((code, out.as_str()), (EXIT_BAD_INPUT, ""), "{err}");
    assert!(err.starts_with(&format!("error: {edited}: inconsistent: summary.faults: the file has ")), "{err}");
    let recomputed = resummarized(&report);
    (report.summary.faults, report.summary.faults_effective, report.summary.fault_landings) =
        (recomputed.faults, recomputed.faults_effective, recomputed.fault_landings);
    reports::write_json_atomic(Path::new(&edited), &report).unwrap();
    let (code, _, err) = fleetsim(&["gate", &edited, "--policy", &policy]);
    assert_eq!(code, EXIT_BAD_INPUT, "{err}");
    assert!(err.starts_with(&format!("error: {edited}: inconsistent: summary.campaign_digest: ")), "{err}");
    let (code, _, err) = fleetsim(&["repro", &edited, "--run", "2", "--out", &fixture.path("repro")]);
    assert_eq!(code, EXIT_BAD_INPUT, "repro reads fail-closed too: {err}");
}

#[test]
fn a_forged_record_with_its_digest_intact_fails_the_whole_record_recheck() {
    let fixture = campaign_run();
    let policy = fixture.write("gate.toml", POLICY);
    let (code, out, err) = fleetsim(&["gate", &fixture.report(), "--policy", &policy, "--recheck", "all"]);
    assert_eq!(code, EXIT_PASS, "the real report passes every replay: {out}{err}");
    assert!(out.ends_with("6 runs re-checked\n"), "{out}");
    let mut report: reports::CampaignReport =
        serde_json::from_str(&std::fs::read_to_string(&fixture.report).unwrap()).unwrap();
    // The fault a run injected deleted from its record (and so from the summary's totals), its trace digest kept.
    let faults: Vec<String> = report.runs[3].faults.keys().cloned().collect();
    assert!(!faults.is_empty(), "run 3 injected faults");
    report.runs[3].faults.clear();
    report.runs[3].fault_log.clear();
    report.summary = resummarized(&report);
    let edited = fixture.path("edited.json");
    reports::write_json_atomic(Path::new(&edited), &report).unwrap();
    let (code, out, err) = fleetsim(&["gate", &edited, "--policy", &policy, "--recheck", "all"]);
    assert_eq!(code, EXIT_FAIL, "{out}{err}");
    let seed = report.runs[3].seed;
    assert!(
        out.contains(&format!(
            "  determinism.run.3: run 3 (seed {seed}) replayed to the report's trace digest but another record: it differs in fault_log, faults"
        )),
        "{out}"
    );
    // By default the gate replays every run, so it finds the one forged run whatever else the forger changes.
    let (code, out, _) = fleetsim(&["gate", &edited, "--policy", &policy]);
    assert_eq!(code, EXIT_FAIL, "{out}");
    assert!(out.contains("  determinism.run.3: "), "{out}");
    let (code, _, err) = fleetsim(&["gate", &edited, "--policy", &policy, "--recheck", "most"]);
    assert_eq!(code, EXIT_BAD_INPUT, "{err}");
    assert!(err.contains("`most` is neither `all` nor a number of runs"), "{err}");
    let (code, _, err) = fleetsim(&["gate", &edited, "--policy", &policy, "--recheck-seed", "7"]);
    assert_eq!(code, EXIT_BAD_INPUT, "a sample is never drawn from a seed the caller chose: {err}");
}

#[test]
fn a_malformed_policy_names_file_line_and_field() {
    let fixture = campaign_run();
    let policy = fixture.write("bad.toml", &POLICY.replace("pass_per_mille_min = 1000", "pass_per_mille_min = 1001"));
    let (code, out, err) = fleetsim(&["gate", &fixture.report(), "--policy", &policy]);
    assert_eq!((code, out.as_str()), (EXIT_BAD_INPUT, ""));
    assert_eq!(
        err,
        format!("error: {policy}:7:22: runs.pass_per_mille_min: a per-mille share is 0 to 1000, not 1001\n")
    );
    let policy = fixture.write("bad2.toml", &POLICY.replace("[lanes]", "[lane]"));
    let (code, _, err) = fleetsim(&["gate", &fixture.report(), "--policy", &policy]);
    assert_eq!(code, EXIT_BAD_INPUT);
    assert!(err.starts_with(&format!("error: {policy}:10:2: lane: unknown field `lane`")), "{err}");
}

#[test]
fn the_shipped_gate_policies_parse_and_none_samples() {
    let campaigns = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().join("campaigns");
    let mut policies = 0;
    for entry in std::fs::read_dir(&campaigns).unwrap() {
        let path = entry.unwrap().path();
        if path.to_string_lossy().ends_with("-gate.toml") {
            let policy = sim::run::gate::load_policy(&path).unwrap();
            assert_eq!(policy.recheck, sim::run::gate::Recheck::All, "{} samples its replays", path.display());
            policies += 1;
        }
    }
    assert_eq!(policies, 4);
    let path = campaigns.join("release-gate.toml");
    let policy = sim::run::gate::load_policy(&path).unwrap();
    assert_eq!(policy.runs_min, Some(100));
    assert_eq!(policy.pass_per_mille_min, Some(1000));
    assert!(policy.commit_matches_head);
    assert!(policy.faults_min.contains_key("controller_death"));
    let onboarding = path.with_file_name("onboarding-gate.toml");
    let policy = sim::run::gate::load_policy(&onboarding).unwrap();
    assert_eq!(policy.matrix_listed.len(), 39, "every listed onboarding pair");
    assert!(policy.matrix_required.contains(&"wait_for_ready/upstream_transient".to_owned()));
    assert!(policy.faults_min.contains_key("ssh_unreachable"));
}

#[test]
fn repro_replays_a_run_writes_its_evidence_and_checks_its_digest() {
    let fixture = campaign_run();
    let out_dir = fixture.dir.path().join("repro");
    let (code, out, err) = fleetsim(&["repro", &fixture.report(), "--run", "4", "--out", out_dir.to_str().unwrap()]);
    assert_eq!(code, EXIT_PASS, "{out}{err}");
    assert!(out.contains("  reproduced    the report's trace digest"), "{out}");
    let report: reports::CampaignReport =
        serde_json::from_str(&std::fs::read_to_string(&fixture.report).unwrap()).unwrap();
    let record: reports::RunRecord =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(record, report.runs[4], "the replay's record is the report's");
    let trace = std::fs::read_to_string(out_dir.join("trace.jsonl")).unwrap();
    assert_eq!(sim::model::digest::sha256_hex(trace.as_bytes()), report.runs[4].trace_digest);

    // A report whose digest for run 4 is not what the run gives: exit 1 with both digests.
    let mut edited = report.clone();
    edited.runs[4].trace_digest = "f".repeat(64);
    edited.summary = resummarized(&edited);
    let edited_path = fixture.path("edited.json");
    reports::write_json_atomic(Path::new(&edited_path), &edited).unwrap();
    let (code, out, _) = fleetsim(&["repro", &edited_path, "--run", "4", "--out", out_dir.to_str().unwrap()]);
    assert_eq!(code, EXIT_FAIL, "{out}");
    assert!(
        out.contains(&format!(
            "repro FAIL: run 4's trace digest differs: the report has {}, the replay {}",
            "f".repeat(64),
            report.runs[4].trace_digest
        )),
        "{out}"
    );

    let (code, _, err) = fleetsim(&["repro", &fixture.report(), "--run", "6"]);
    assert_eq!(code, EXIT_BAD_INPUT);
    assert_eq!(err, format!("error: {}: holds no run 6 (it holds runs 0, 1, 2, 3, 4, 5)\n", fixture.report()));
}

#[test]
fn gate_repro_and_experiment_help_teach_with_examples() {
    for (command, expected) in [
        ("gate", "fleetsim gate target/fleetsim/ci-50/report.json --policy campaigns/release-gate.toml"),
        ("repro", "fleetsim repro target/fleetsim/ci-50/report.json --run 17 --out /tmp/run17"),
        ("experiment", "--allow-multi"),
        ("campaign", "--resume"),
    ] {
        let (code, out, _) = fleetsim(&[command, "--help"]);
        assert_eq!(code, EXIT_PASS);
        assert!(out.contains(expected), "{command}: {out}");
    }
    let (code, out, _) = fleetsim(&["report", "merge", "--help"]);
    assert_eq!(code, EXIT_PASS);
    assert!(out.contains("fleetsim report merge s1/report.json s2/report.json s3/report.json"), "{out}");
}

/// A campaign whose runs fail: the small rollout under the legacy controller (its serial quiescence breaks the floor
/// and the lane bound), the report the issue's forger started from.
fn failing_campaign_run() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let campaign = dir.path().join("legacy.toml");
    // The legacy scenario's fleet: ten nodes, a floor of six, which the legacy controller's serial quiescence breaks.
    let text = small_campaign("gate test: the legacy controller", 3, 6, &[], &[]).replace(
        "nodes = 6\nlane_size = 2\navailability_floor = 4",
        "nodes = 10\nlane_size = 4\navailability_floor = 6",
    );
    assert!(text.contains("nodes = 10"), "{text}");
    std::fs::write(&campaign, text + "\n[engine]\nrollout_policy = \"legacy\"\n").unwrap();
    let out = dir.path().join("out");
    let (code, _, err) =
        fleetsim(&["campaign", campaign.to_str().unwrap(), "--jobs", "2", "--out", out.to_str().unwrap()]);
    assert_eq!(code, EXIT_FAIL, "{err}");
    Fixture { campaign, report: out.join("report.json"), dir }
}

/// `report` with its failing runs edited into passes and its summary recomputed, as the issue's forger did: a report
/// that agrees with itself in every field the reader checks. Returns the edited runs' indices.
fn forge_passes(report: &mut reports::CampaignReport) -> Vec<u64> {
    let mut forged = Vec::new();
    for run in report.runs.iter_mut().filter(|run| !run.verdict.passed()) {
        run.verdict = reports::Verdict::PASS;
        run.violations.clear();
        run.violation_counts.clear();
        run.unmet.clear();
        run.panic = None;
        forged.push(run.run_index.unwrap());
    }
    report.summary = resummarized(report);
    forged
}

/// What the forged report must meet: every run passing, no violation (the release gate's own thresholds).
const PASS_ALL: &str = r#"schema_version = 1
kind = "gate_policy"
description = "every run passes"

[runs]
min = 6
pass_per_mille_min = 1000

[violations]
others_max = 0
"#;

#[test]
fn a_failing_report_edited_into_a_pass_agrees_with_itself_and_the_default_gate_replays_it_to_a_fail() {
    let fixture = failing_campaign_run();
    let policy = fixture.write("gate.toml", PASS_ALL);
    let (code, out, _) = fleetsim(&["gate", &fixture.report(), "--policy", &policy]);
    assert_eq!(code, EXIT_FAIL, "the real report fails: {out}");
    let mut report: reports::CampaignReport =
        serde_json::from_str(&std::fs::read_to_string(&fixture.report).unwrap()).unwrap();
    let forged = forge_passes(&mut report);
    assert!(!forged.is_empty(), "the legacy controller failed no run");
    let edited = fixture.path("forged.json");
    reports::write_json_atomic(Path::new(&edited), &report).unwrap();
    // Nothing the report says about itself gives it away: it reads, renders and merges.
    let (code, out, err) = fleetsim(&["report", &edited]);
    assert_eq!(code, EXIT_PASS, "{out}{err}");
    assert!(out.contains(": PASS, 6 runs") && out.contains("passed        6/6"), "{out}");
    // The gate replays every run: each forged one is named with what its replay says instead.
    let (code, out, err) = fleetsim(&["gate", &edited, "--policy", &policy, "--jobs", "2"]);
    assert_eq!(code, EXIT_FAIL, "a forged pass passed the gate: {out}{err}");
    for index in &forged {
        assert!(out.contains(&format!("  determinism.run.{index}: ")), "run {index} not caught: {out}");
    }
    assert!(out.contains("differs in ") && out.contains("verdict"), "{out}");
    // A sample says what it cannot see: the chance that forged runs escape it.
    let (_, out, _) = fleetsim(&["gate", &edited, "--policy", &policy, "--recheck", "1"]);
    assert!(
        out.contains("  sample: 1 of 6 runs replayed, drawn at gate time from the operating system's random source; a report with k forged runs passes unseen with probability C(6-k, 1)/C(6, 1), for k = 1: 83.3 %, 2: 66.7 %, 5: 16.7 %;"),
        "{out}"
    );
}

#[test]
fn a_sampled_gate_draws_another_sample_each_time_from_the_same_bytes() {
    let fixture = campaign_run();
    let policy = fixture.write("gate.toml", POLICY);
    let mut report: reports::CampaignReport =
        serde_json::from_str(&std::fs::read_to_string(&fixture.report).unwrap()).unwrap();
    // One run forged (its fault log emptied, so its record is not the replay's), the report agreeing with itself.
    report.runs[3].faults.clear();
    report.runs[3].fault_log.clear();
    report.summary = resummarized(&report);
    let edited = fixture.path("edited.json");
    reports::write_json_atomic(Path::new(&edited), &report).unwrap();
    let bytes = std::fs::read(&edited).unwrap();
    // Two of six runs replayed miss run 3 two times in three. Drawn from the report's bytes, the same file always
    // drew the same runs (so a forger appended a space until they missed); drawn at gate time, the same file meets
    // both outcomes: after 40 gates, each is missing with odds below 1 in 10 million.
    let outcomes: std::collections::BTreeSet<i32> =
        (0..40).map(|_| fleetsim(&["gate", &edited, "--policy", &policy, "--recheck", "2", "--jobs", "1"]).0).collect();
    assert_eq!(std::fs::read(&edited).unwrap(), bytes);
    assert_eq!(outcomes, [EXIT_PASS, EXIT_FAIL].into_iter().collect(), "the sample did not vary");
}

#[test]
fn a_report_signed_by_a_trusted_key_is_gated_without_replays_and_an_edit_breaks_the_signature() {
    use std::os::unix::fs::PermissionsExt;
    let fixture = campaign_run();
    let policy = fixture.write("gate.toml", POLICY);
    let key = fixture.path("ci.key");
    let (code, out, err) = fleetsim(&["report", "keygen", "-o", &key]);
    assert_eq!(code, EXIT_PASS, "{out}{err}");
    let mode = std::fs::metadata(&key).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the signing key is private");
    assert!(std::fs::read_to_string(&key).unwrap().starts_with("fleetsim-secret-ed25519-"));
    let public = format!("{key}.pub");
    let (code, _, err) = fleetsim(&["report", "keygen", "-o", &key]);
    assert_eq!(code, EXIT_BAD_INPUT, "a key is never overwritten: {err}");
    let (code, out, err) = fleetsim(&["report", "sign", &fixture.report(), "--key", &key]);
    assert_eq!(code, EXIT_PASS, "{out}{err}");
    // Signed and trusted: the gate checks everything else and replays nothing.
    let (code, out, err) = fleetsim(&["gate", &fixture.report(), "--policy", &policy, "--trusted-key", &public]);
    assert_eq!(code, EXIT_PASS, "{out}{err}");
    assert!(out.contains(", 0 runs re-checked\n") && out.contains("  signature: signed by trusted key "), "{out}");
    // An edit that agrees with itself no longer matches the signature: the gate fails it.
    let mut report: reports::CampaignReport =
        serde_json::from_str(&std::fs::read_to_string(&fixture.report).unwrap()).unwrap();
    report.runs[3].faults.clear();
    report.runs[3].fault_log.clear();
    report.summary = resummarized(&report);
    reports::write_json_atomic(&fixture.report, &report).unwrap();
    let (code, out, _) = fleetsim(&["gate", &fixture.report(), "--policy", &policy, "--trusted-key", &public]);
    assert_eq!(code, EXIT_FAIL, "{out}");
    assert!(out.contains("  signature: the report's signature does not hold: the signature by key "), "{out}");
    assert!(out.contains("  determinism.run.3: "), "and without a signature to trust, every run is replayed: {out}");
    // Another key's public key is not the signer; a key file others can read is refused.
    let other = fixture.path("other.key");
    fleetsim(&["report", "keygen", "-o", &other]);
    let (code, out, _) =
        fleetsim(&["gate", &fixture.report(), "--policy", &policy, "--trusted-key", &format!("{other}.pub")]);
    assert_eq!(code, EXIT_FAIL, "{out}");
    assert!(out.contains("not by the trusted key"), "{out}");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (code, _, err) = fleetsim(&["report", "sign", &fixture.report(), "--key", &key]);
    assert_eq!(code, EXIT_BAD_INPUT, "{err}");
    assert!(err.contains("mode 0644 lets others read the key; run `chmod 600"), "{err}");
    assert!(!err.contains("fleetsim-secret-ed25519-"), "the key is never printed: {err}");
}
