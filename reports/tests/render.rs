//! Snapshots of every renderer over fixed reports that hold every record variant (each verdict kind, a fail without a
//! kind, expected and unexpected violations, runs with and without a rollout), plus structural checks of the HTML
//! and JUnit output and, when a Chromium is on PATH, a real headless load of the HTML page.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use reports::render;
use reports::{
    AvailabilityPoint, CampaignReport, FailureKind, Firing, LaneSpan, NodeRecord, Outcome, PropertyKind,
    RolloutAccount, RunRecord, SCHEMA_VERSION, Verdict, WorkflowSpan, summarize,
};

const CAMPAIGN: &str = "campaigns/fixture.toml";

fn firing(oracle: &str, property: PropertyKind, t_ms: u64, evidence: &str, expected: bool) -> Firing {
    Firing { oracle: oracle.to_owned(), property, t_ms, evidence: evidence.to_owned(), expected }
}

fn run(index: u64, verdict: Verdict, rollout: bool) -> RunRecord {
    let steps = if rollout {
        serde_json::json!([{"at_ms": 120000, "step": {"kind": "start_rollout", "revision": "2944aebb"}}])
    } else {
        serde_json::json!([])
    };
    RunRecord {
        schema_version: SCHEMA_VERSION,
        tool_version: "0.1.0".to_owned(),
        commit: "8ab8d93b".to_owned(),
        config_hash: format!("config-{index}"),
        config: serde_json::json!({"fleet": {"nodes": 50}, "steps": steps}),
        source: CAMPAIGN.to_owned(),
        run_index: Some(index),
        seed: 1000 + index * 7919,
        verdict,
        trace_digest: format!("digest-{index}"),
        trace_events: 2000 + index,
        virtual_duration_ms: 10_800_000,
        faults: BTreeMap::new(),
        matrix_pairs: BTreeMap::new(),
        fault_phases: BTreeMap::new(),
        fault_log: Vec::new(),
        availability: Vec::new(),
        availability_cut_ms: None,
        batches: Vec::new(),
        lanes: Vec::new(),
        rollouts: Vec::new(),
        workflows: Vec::new(),
        violations: Vec::new(),
        violation_counts: BTreeMap::new(),
        reached: Vec::new(),
        unmet: Vec::new(),
        panic: None,
        repro: format!("fleetsim campaign {CAMPAIGN} --run {index}"),
    }
}

fn points(points: &[(u64, u64)]) -> Vec<AvailabilityPoint> {
    points.iter().map(|&(t_ms, available)| AvailabilityPoint { t_ms, available }).collect()
}

fn account(outcome: &str, nodes: &[(&str, &str, &str, &str)]) -> RolloutAccount {
    let mut counts = BTreeMap::new();
    for (_, node_outcome, _, _) in nodes {
        *counts.entry((*node_outcome).to_owned()).or_insert(0) += 1;
    }
    RolloutAccount {
        rollout: "rollout-2944aebb".to_owned(),
        outcome: outcome.to_owned(),
        counts,
        nodes: nodes
            .iter()
            .map(|(node, outcome, detail, repair)| NodeRecord {
                node: (*node).to_owned(),
                outcome: (*outcome).to_owned(),
                detail: (*detail).to_owned(),
                repair: (*repair).to_owned(),
                replay: String::new(),
                failed_endpoint: String::new(),
            })
            .collect(),
    }
}

fn lane(lane: u64, nodes: u64, start_ms: u64, end_ms: u64, verdict: Option<&str>) -> LaneSpan {
    LaneSpan {
        rollout: "rollout-2944aebb".to_owned(),
        lane,
        nodes,
        start_ms,
        end_ms,
        verdict: verdict.map(str::to_owned),
    }
}

/// The series of a rollout run of a 50-node fleet with a floor of 42: seven lanes of at most 8, the last stuck when
/// `stuck`, and availability dipping to the floor in each lane (below it when `breach`).
fn with_rollout_series(mut record: RunRecord, stuck: bool, breach: bool) -> RunRecord {
    record.config["fleet"] = serde_json::json!({"nodes": 50, "availability_floor": 42, "lane_size": 8});
    let mut availability = vec![(0, 50)];
    for index in 0..7u64 {
        let start = 121_000 + index * 30_000;
        availability.push((start, if breach && index == 1 { 40 } else { 42 }));
        availability.push((start + 25_000, 50));
        let verdict = if stuck && index == 6 { Some("stuck") } else { Some("successor") };
        record.lanes.push(lane(index, if index == 6 { 2 } else { 8 }, start, start + 25_000 + index * 500, verdict));
        let nodes = if index == 6 { 2 } else { 8 };
        let upgraded = (index * 8).min(50);
        record.batches.push(reports::BatchPoint {
            t_ms: start + 25_000,
            rollout: "rollout-2944aebb".into(),
            lane: index,
            batch: 0,
            nodes,
            revert: stuck && index == 6,
            available: 50,
            oldest_heartbeat_ms: 28_000,
            epoch_pin_age_ms: Some(start + 25_000 - 120_000),
            upgraded,
            rolled_back: 0,
            remaining: 50 - upgraded - nodes,
            retries: index,
            quarantined: 0,
            eta_ms: (upgraded > 0).then_some((50 - upgraded - nodes) * 3_000),
        });
    }
    record.availability = points(&availability);
    record.fault_phases = record.faults.iter().map(|(kind, count)| (format!("{kind}/rollout"), *count)).collect();
    record
}

/// Gives a record with faults and no log one entry per injected fault, landing in a few phases with a few effects (a
/// fault that never landed among them), as a run's collector would write it.
fn with_fault_log(mut record: RunRecord) -> RunRecord {
    if !record.fault_log.is_empty() {
        return record;
    }
    let landings = [
        (Some("rollout:quiesce"), "retried"),
        (Some("onboarding:commission_node"), "stalled"),
        (Some("rollout:preflight"), "quarantined"),
        (None, "none"),
        (Some("decommission:drain_node"), "stopped"),
        (Some("rollout:install"), "none"),
    ];
    let mut number = 0u64;
    for (kind, count) in &record.faults {
        for _ in 0..*count {
            number += 1;
            let (phase, effect) = landings[(number as usize + kind.len()) % landings.len()];
            record.fault_log.push(reports::FaultEntry {
                fault: number,
                kind: kind.clone(),
                target: if kind == "ssh_timeout" { "node-07".to_owned() } else { String::new() },
                injected_ms: 60_000 * number,
                landed_ms: phase.map(|_| 60_000 * number + 1_500),
                phase: phase.unwrap_or("idle").to_owned(),
                effect: effect.to_owned(),
            });
        }
    }
    record
}

fn report(runs: Vec<RunRecord>, sometimes: &[&str]) -> CampaignReport {
    let runs: Vec<RunRecord> = runs.into_iter().map(with_fault_log).collect();
    let named: Vec<String> = sometimes.iter().map(|name| (*name).to_owned()).collect();
    let summary = summarize(&runs, &named, |bytes| format!("campaign-digest-over-{}-bytes", bytes.len()));
    CampaignReport {
        schema_version: SCHEMA_VERSION,
        tool_version: "0.1.0".to_owned(),
        commit: "8ab8d93b".to_owned(),
        config_hash: "campaign-config".to_owned(),
        campaign: CAMPAIGN.to_owned(),
        description: "Fixture: one run of every verdict, with <markup> & \"quotes\" to escape".to_owned(),
        seed: 1,
        shard: None,
        summary,
        runs,
    }
}

/// One run of every verdict variant, and an incident replay whose violations were expected.
fn mixed() -> CampaignReport {
    let successor = firing("rollout_reached_successor", PropertyKind::Sometimes, 323_128, "engine.rollout", false);

    let mut pass = run(0, Verdict::PASS, true);
    pass.faults = BTreeMap::from([("ssh_timeout".to_owned(), 2)]);
    pass.reached = vec![successor.clone()];

    let mut safety = run(1, Verdict::fail(FailureKind::SafetyViolation), true);
    safety.faults = BTreeMap::from([("controller_death".to_owned(), 1), ("marker_drift".to_owned(), 1)]);
    safety.violations = vec![
        firing(
            "availability_floor",
            PropertyKind::Always,
            61_319,
            "41 < 42 healthy | node-07 & node-08 \"down\"",
            false,
        ),
        firing("availability_floor", PropertyKind::Always, 61_400, "40 < 42 healthy", false),
    ];
    safety.violation_counts = BTreeMap::from([("availability_floor".to_owned(), 3)]);
    safety.reached = vec![successor.clone()];

    let mut liveness = run(2, Verdict::fail(FailureKind::LivenessFailure), true);
    liveness.faults = BTreeMap::from([("storage_fault".to_owned(), 1)]);
    liveness.violations = vec![firing(
        "every_lane_converged",
        PropertyKind::Eventually,
        10_200_000,
        "lane 2 is stuck: neither successor nor prior",
        false,
    )];
    liveness.violation_counts = BTreeMap::from([("every_lane_converged".to_owned(), 1)]);

    let mut unmet = run(3, Verdict::fail(FailureKind::ExpectationUnmet), true);
    unmet.unmet = vec!["controller_adopted_journal".to_owned()];

    let mut panic = run(4, Verdict::fail(FailureKind::Panic), false);
    panic.faults = BTreeMap::from([("partition".to_owned(), 1)]);
    panic.panic = Some("index out of bounds: the len is 3 but the index is 7\nat sim/src/world.rs:12:5".to_owned());
    panic.virtual_duration_ms = 654_321;

    let mut replay = run(5, Verdict::PASS, false);
    replay.faults = BTreeMap::from([("agent_stop".to_owned(), 2)]);
    replay.violations = vec![firing(
        "epoch_member_never_tombstoned",
        PropertyKind::Always,
        3_720_000,
        "node-01, a member of open epoch 1, was tombstoned after 3603674 ms of silence",
        true,
    )];
    replay.violation_counts = BTreeMap::from([("epoch_member_never_tombstoned".to_owned(), 1)]);

    let mut unclassified = run(6, Verdict { outcome: Outcome::Fail, kind: None }, true);
    unclassified.faults = BTreeMap::from([("ssh_timeout".to_owned(), 1)]);
    unclassified.violations =
        vec![firing("no_duplicate_mutation", PropertyKind::Always, 70_000, "install ran twice on node-03", false)];
    unclassified.violation_counts = BTreeMap::from([("no_duplicate_mutation".to_owned(), 1)]);
    unclassified.run_index = None;

    let mut pass = with_rollout_series(pass, false, false);
    let unmet = with_rollout_series(unmet, false, false);
    let unclassified = with_rollout_series(unclassified, false, false);
    let safety = with_rollout_series(safety, false, true);
    let mut liveness = with_rollout_series(liveness, true, false);
    // A lane that never committed (the controller lost it), and a series cut at its cap.
    liveness.lanes.push(lane(7, 3, 400_000, 460_000, None));
    // Accounts: a successor of every node, and a partial with a quarantine (its repair plan), a held node and a stuck
    // one, so the page lists them.
    pass.rollouts = vec![account("successor", &[("node-01", "upgraded", "", ""), ("node-02", "upgraded", "", "")])];
    liveness.rollouts = vec![account(
        "partial",
        &[
            ("node-01", "upgraded", "", ""),
            ("node-03", "held", "held by operator:alice", ""),
            ("node-07", "stuck", "at prove: no heartbeat with revision 2944aebb within 60000 ms", ""),
            (
                "node-50",
                "quarantined",
                "~/.mac/deployed-source-revision is absent",
                "mend the surfaces on node-50, release the hold quarantine:rollout-2944aebb <at> the hub",
            ),
        ],
    )];
    liveness.availability_cut_ms = Some(9_000_000);
    panic.fault_phases = BTreeMap::from([("partition/steady".to_owned(), 1)]);

    // An onboarding run: two workflows, one stopped on a listed pair, one unlisted pair hit, one still in flight.
    let mut onboarding = run(7, Verdict::PASS, false);
    onboarding.config["onboarding"] = serde_json::json!({"machines": ["node-51", "node-52", "node-53"]});
    onboarding.faults = BTreeMap::from([("mac_drift".to_owned(), 1), ("bmc_fault".to_owned(), 1)]);
    onboarding.fault_phases =
        BTreeMap::from([("mac_drift/steady".to_owned(), 1), ("bmc_fault/onboarding".to_owned(), 1)]);
    onboarding.matrix_pairs = BTreeMap::from([
        ("create_or_find_in_maas/state_ambiguity".to_owned(), 2),
        ("commission_node/bmc_power_failure".to_owned(), 1),
        ("configure_storage/state_ambiguity".to_owned(), 1),
    ]);
    onboarding.workflows = vec![
        WorkflowSpan {
            workflow: "onboard-node-51".to_owned(),
            start_ms: 0,
            end_ms: Some(1_450_000),
            outcome: "completed".to_owned(),
        },
        WorkflowSpan {
            workflow: "onboard-node-52".to_owned(),
            start_ms: 0,
            end_ms: Some(610_000),
            outcome: "stopped: state_ambiguity".to_owned(),
        },
        WorkflowSpan {
            workflow: "onboard-node-53".to_owned(),
            start_ms: 15_000,
            end_ms: None,
            outcome: "in flight".to_owned(),
        },
    ];

    let mut report = report(
        vec![pass, safety, liveness, unmet, panic, replay, unclassified, onboarding],
        &["controller_adopted_journal", "rollout_reached_successor"],
    );
    report.summary.matrix_listed = [
        "create_or_find_in_maas/upstream_transient",
        "create_or_find_in_maas/bmc_power_failure",
        "create_or_find_in_maas/state_ambiguity",
        "commission_node/upstream_transient",
        "commission_node/bmc_power_failure",
        "configure_storage/hardware_mismatch",
    ]
    .map(str::to_owned)
    .to_vec();
    report
}

/// Everything passed, no rollout, no fault, no sometimes-property: every "none" branch.
fn quiet() -> CampaignReport {
    let mut report = report(vec![run(0, Verdict::PASS, false), run(1, Verdict::PASS, false)], &[]);
    report.description = String::new();
    report
}

/// More failing runs than a summary lists, all of one oracle.
fn many_failures() -> CampaignReport {
    let runs = (0..13)
        .map(|index| {
            let mut record = run(index, Verdict::fail(FailureKind::SafetyViolation), true);
            record.faults = BTreeMap::from([("ssh_timeout".to_owned(), index % 3)]);
            record.violations =
                vec![firing("lane_bound", PropertyKind::Always, 100 + index, "lane of 9 > lane_size 8", false)];
            record.violation_counts =
                BTreeMap::from([("lane_bound".to_owned(), 1), (render::LANE_ORACLE.to_owned(), 1)]);
            record
        })
        .collect();
    report(runs, &["rollout_reached_successor"])
}

#[test]
fn text_snapshots() {
    insta::assert_snapshot!("text_mixed", render::text(&mixed()));
    insta::assert_snapshot!("text_quiet", render::text(&quiet()));
    insta::assert_snapshot!("text_many_failures", render::text(&many_failures()));
}

#[test]
fn markdown_snapshots() {
    insta::assert_snapshot!("markdown_mixed", render::markdown(&mixed()));
    insta::assert_snapshot!("markdown_quiet", render::markdown(&quiet()));
    insta::assert_snapshot!("markdown_many_failures", render::markdown(&many_failures()));
}

#[test]
fn junit_snapshots() {
    insta::assert_snapshot!("junit_mixed", render::junit(&mixed()));
    insta::assert_snapshot!("junit_quiet", render::junit(&quiet()));
}

#[test]
fn html_snapshots() {
    insta::assert_snapshot!("html_mixed", render::html(&mixed()));
    insta::assert_snapshot!("html_quiet", render::html(&quiet()));
}

/// Elements HTML writes without a closing tag.
const VOID: [&str; 4] = ["meta", "br", "hr", "img"];

/// Checks that every tag is closed in order; returns the element names seen. Renderers escape every `<` in text, so
/// each `<` opens a tag.
fn balanced_tags(document: &str, void: &[&str]) -> Vec<String> {
    let mut stack: Vec<String> = Vec::new();
    let mut seen = Vec::new();
    let mut rest = document;
    while let Some(start) = rest.find('<') {
        let end = rest[start..].find('>').unwrap_or_else(|| panic!("unclosed `<` at {:?}", &rest[start..])) + start;
        let tag = &rest[start + 1..end];
        rest = &rest[end + 1..];
        if tag.starts_with('!') || tag.starts_with('?') {
            continue;
        }
        let name: String =
            tag.trim_start_matches('/').chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
        assert!(!name.is_empty(), "empty tag <{tag}>");
        if let Some(closing) = tag.strip_prefix('/') {
            let open = stack.pop().unwrap_or_else(|| panic!("</{closing}> closes nothing"));
            assert_eq!(open, name, "<{open}> closed by </{name}>");
        } else if !tag.ends_with('/') && !void.contains(&name.as_str()) {
            stack.push(name.clone());
        }
        seen.push(name);
    }
    assert!(stack.is_empty(), "left open: {stack:?}");
    seen
}

fn assert_self_contained(html: &str) {
    for reference in
        ["http://", "https://", "<script", "<link", "<iframe", "<img", " src=", " href=", "url(", "@import"]
    {
        assert!(!html.contains(reference), "the page references something outside itself: {reference}");
    }
}

#[test]
fn the_html_page_is_well_formed_and_self_contained() {
    for report in [mixed(), quiet(), many_failures()] {
        let html = render::html(&report);
        assert!(html.starts_with("<!DOCTYPE html>\n<html lang=\"en\">"));
        let tags = balanced_tags(&html, &VOID);
        for element in ["html", "head", "body", "svg", "style", "title"] {
            assert!(tags.iter().any(|tag| tag == element), "no <{element}>");
        }
        assert_self_contained(&html);
    }
    let html = render::html(&mixed());
    for section in ["availability", "lanes", "converge", "phases", "matrix"] {
        assert!(html.contains(&format!("<section id=\"{section}\">")), "no {section} section");
    }
    assert!(html.contains("class=\"floor\""), "the availability plot draws the floor");
    assert!(html.contains("4 of the 5 runs with an availability series: the failing ones first"), "says what it drew");
    assert!(html.contains("<h3>run 1 seed 8919 — fail (safety_violation) (lowest 40 of 50, floor 42)</h3>"));
    assert!(html.contains("class=\"cut\""), "a series cut at its cap is shaded");
    assert!(html.contains("class=\"v-stuck\"") && html.contains("class=\"v-uncommitted\""), "lane verdicts");
    assert!(html.contains("Not counted: 1 lane that never committed."));
    assert!(html.contains("Not counted: 1 workflow still in flight when its run ended."));
    assert!(html.contains("2 of the 6 listed (stage, typical failure class) pairs of the onboarding workflow were hit; 1 pair outside the list"));
    assert!(html.contains("class=\"m-unlisted\"") && html.contains("class=\"m-listed\""));
    assert!(!html.contains("needs traces"), "nothing is said to be missing when it is there");
    assert!(html.contains("&lt;markup&gt; &amp; &quot;quotes&quot;"), "text is escaped");

    let quiet = render::html(&quiet());
    assert!(quiet.contains("no run record holds an availability series"), "the missing plots say why");
    assert!(quiet.contains("no run record holds lanes"));
    assert!(quiet.contains("no committed lane in any run record"));
    assert!(quiet.contains("no run record holds fault phases"));
    assert!(quiet.contains("no onboarding stage failed in any run"));
    assert!(!quiet.contains("<section id=\"lanes\">\n<h2>Lane timeline of each rollout</h2>\n<svg"));
}

#[test]
fn the_junit_xml_is_well_formed_and_counts_its_cases() {
    let xml = render::junit(&mixed());
    balanced_tags(&xml, &[]);
    // 8 runs (4 failures, 1 panic error), 4 oracle cases (3 failures; one expected, so passing), 2 sometimes-properties
    // (one never reached, a failure).
    assert!(xml.contains("<testsuites name=\"fleetsim\" tests=\"14\" failures=\"8\" errors=\"1\">"), "{xml}");
    assert!(xml.contains("<error type=\"panic\" message=\"panic: index out of bounds"), "{xml}");
    assert!(xml.contains("reproduce: fleetsim campaign campaigns/fixture.toml --run 1"));
    assert!(!xml.contains("<markup>"), "text is escaped");
}

/// A Chromium-family browser on PATH, if any. CI installs none: this test then checks only the structure above.
fn browser() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    for name in ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome"] {
        for dir in std::env::split_paths(&path) {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return Some(candidate);
            }
        }
    }
    None
}

#[test]
fn a_headless_browser_loads_the_page_and_takes_a_screenshot() {
    let html = render::html(&mixed());
    balanced_tags(&html, &VOID);
    assert_self_contained(&html);
    let Some(browser) = browser() else {
        eprintln!(
            "note: no chromium, chromium-browser or google-chrome on PATH; checked the page's structure only \
             (scripts/check-html.sh runs the browser check where one is installed)"
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("report.html");
    std::fs::write(&page, &html).unwrap();
    let screenshot = dir.path().join("report.png");
    let status = std::process::Command::new(&browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1280,2400"])
        .arg(format!("--user-data-dir={}", dir.path().join("profile").display()))
        .arg(format!("--screenshot={}", screenshot.display()))
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap_or_else(|error| panic!("cannot start {}: {error}", browser.display()));
    assert!(status.status.success(), "{}: {}", browser.display(), String::from_utf8_lossy(&status.stderr));
    let png = std::fs::read(Path::new(&screenshot)).expect("the browser wrote no screenshot");
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 1000, "not a screenshot: {} bytes", png.len());
}
