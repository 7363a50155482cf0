//! The command line, in process: bad input gets one clear line naming file, line, column and key, with exit code 2;
//! a failing run exits 1; outputs are written where asked.

use std::path::{Path, PathBuf};

use sim::model::exit::{EXIT_BAD_INPUT, EXIT_FAIL, EXIT_PASS};

#[path = "support/in_process.rs"]
mod in_process;
use in_process::fleetsim;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_owned()
}

fn scenario(name: &str) -> String {
    root().join("scenarios").join(name).display().to_string()
}

const GOOD: &str = r#"schema_version = 1
description = "cli test"
seed = 5
duration_ms_max = 1_200_000

[fleet]
nodes = 3

[[step]]
at_ms = 60_000
kind = "partition"
a = "node-01"
b = "hub"
"#;

/// Writes `text` to a temporary scenario file and runs `fleetsim <command> <file>`.
fn with_file(command: &str, text: &str) -> (i32, String, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, text).unwrap();
    let path = path.display().to_string();
    let (code, out, err) = fleetsim(&[command, &path]);
    (code, out, err, path)
}

fn assert_bad_input(text: &str, expected: &str) {
    for command in ["run", "check"] {
        let (code, _, err, path) = with_file(command, text);
        assert_eq!(code, EXIT_BAD_INPUT, "{command}: {err}");
        assert!(err.starts_with(&format!("error: {path}:")), "{command}: {err}");
        assert!(err.contains(expected), "{command}: expected {expected:?} in {err}");
        assert_eq!(err.lines().count(), 1, "one line, no stack trace: {err}");
        assert!(!err.contains("panicked"));
    }
}

#[test]
fn a_missing_file_is_bad_input() {
    let (code, _, err) = fleetsim(&["run", "no/such/scenario.toml"]);
    assert_eq!(code, EXIT_BAD_INPUT);
    assert_eq!(err, "error: no/such/scenario.toml: no such file\n");
}

#[test]
fn a_toml_syntax_error_names_line_and_column() {
    assert_bad_input(&GOOD.replace("nodes = 3", "nodes = = 3"), ":7:9: ");
}

#[test]
fn an_unknown_key_is_named() {
    assert_bad_input(
        &GOOD.replace("nodes = 3", "nodes = 3\nlane_sise = 8"),
        ":8:1: fleet.lane_sise: unknown field `lane_sise`",
    );
}

#[test]
fn an_unknown_fault_is_named_with_the_known_ones() {
    assert_bad_input(
        &GOOD.replace("\"partition\"", "\"meteor\""),
        "step[0]: unknown variant `meteor`, expected one of `partition`",
    );
}

#[test]
fn an_unknown_oracle_is_named() {
    let text = format!("{GOOD}\n[expect]\nmust_hold = [\"no_bad_things\"]\n");
    assert_bad_input(&text, ":16:14: expect.must_hold: unknown oracle \"no_bad_things\"");
}

#[test]
fn a_host_that_does_not_exist_is_named_with_the_fleet() {
    assert_bad_input(
        &GOOD.replace("\"node-01\"", "\"node-04\""),
        ":9:1: step[0].a: unknown host \"node-04\" (this fleet has controller, hub, node-01..node-03)",
    );
}

#[test]
fn a_wrong_schema_version_is_refused() {
    assert_bad_input(
        &GOOD.replace("schema_version = 1", "schema_version = 9"),
        ":1:18: schema_version: this fleetsim reads version 1, the file has 9",
    );
}

#[test]
fn usage_errors_exit_2_and_help_teaches() {
    let (code, _, err) = fleetsim(&["run"]);
    assert_eq!(code, EXIT_BAD_INPUT);
    assert!(err.contains("Usage"), "{err}");
    let (code, out, _) = fleetsim(&["--help"]);
    assert_eq!(code, EXIT_PASS);
    assert!(out.contains("Exit codes: 0 pass, 1 a run or campaign failed, 2 bad input"), "{out}");
    assert!(out.contains("fleetsim campaign campaigns/ci-50.toml"), "{out}");
}

#[test]
fn a_passing_run_prints_its_summary_and_writes_its_record_and_trace() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("run");
    let file = scenario("hub-crashes-and-restarts-mid-run.toml");
    let (code, out, err) = fleetsim(&["run", &file, "--out", out_dir.to_str().unwrap()]);
    assert_eq!(code, EXIT_PASS, "{err}");
    assert!(out.contains("verdict       pass"), "{out}");
    assert!(out.contains(&format!("reproduce     fleetsim run {file} --seed 7")), "{out}");
    let record: reports::RunRecord =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("run.json")).unwrap()).unwrap();
    let trace = std::fs::read_to_string(out_dir.join("trace.jsonl")).unwrap();
    assert_eq!(trace.lines().count() as u64, record.trace_events);
    assert_eq!(
        sim::model::digest::sha256_hex(trace.as_bytes()),
        record.trace_digest,
        "the trace file is the digested trace"
    );
    assert!(out.contains(&record.trace_digest));
    // The record carries the resolved configuration it hashes.
    assert_eq!(record.config["fleet"]["nodes"], 10);
    assert_eq!(record.config["steps"].as_array().unwrap().len(), 2);
    assert_eq!(sim::model::digest::sha256_hex(record.config.to_string().as_bytes()), record.config_hash);
}

#[test]
fn json_format_prints_the_record_and_seed_overrides_the_file() {
    let file = scenario("hub-crashes-and-restarts-mid-run.toml");
    let (code, out, _) = fleetsim(&["run", &file, "--seed", "99", "--format", "json"]);
    assert_eq!(code, EXIT_PASS);
    let record: reports::RunRecord = serde_json::from_str(&out).unwrap();
    assert_eq!(record.seed, 99);
    assert_eq!(record.repro, format!("fleetsim run {file} --seed 99"));
}

#[test]
fn a_failing_run_exits_1_with_the_violation_and_its_reproduce_command() {
    // The legacy incident replay without its expectation: the tombstoned member is now an unexpected violation.
    let text = std::fs::read_to_string(scenario("legacy-expiry-tombstones-a-stopped-epoch-member.toml")).unwrap();
    let text = text.replace("must_fire = [\"epoch_member_never_tombstoned\", ", "must_fire = [");
    let (code, out, _, path) = with_file("run", &text);
    assert_eq!(code, EXIT_FAIL, "{out}");
    assert!(out.contains("verdict       fail (safety_violation)"), "{out}");
    assert!(out.contains("epoch_member_never_tombstoned at t=3720000 ms: node-01, a member of open epoch 1"), "{out}");
    assert!(out.contains(&format!("fleetsim run {path} --seed 20260921")));
}

#[test]
fn check_validates_every_shipped_file() {
    let mut files: Vec<String> = Vec::new();
    for dir in ["scenarios", "campaigns"] {
        for entry in std::fs::read_dir(root().join(dir)).unwrap() {
            files.push(entry.unwrap().path().display().to_string());
        }
    }
    let args: Vec<&str> = std::iter::once("check").chain(files.iter().map(String::as_str)).collect();
    let (code, out, err) = fleetsim(&args);
    assert_eq!(code, EXIT_PASS, "{err}");
    assert_eq!(out.lines().filter(|l| l.starts_with("ok  ")).count(), files.len(), "{out}");
}

#[test]
fn a_campaign_writes_its_report_and_replays_one_run_alone() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("c");
    let campaign = root().join("campaigns/heartbeats-50.toml").display().to_string();
    let (code, out, err) =
        fleetsim(&["campaign", &campaign, "--runs", "4", "--jobs", "2", "--out", out_dir.to_str().unwrap()]);
    assert!(code == EXIT_PASS || code == EXIT_FAIL, "{err}");
    assert!(out.contains("passed        4/4"), "{out}");
    let report: reports::CampaignReport =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("report.json")).unwrap()).unwrap();
    assert_eq!(report.runs.len(), 4);
    assert_eq!(report.summary.runs, 4);
    let run2 = &report.runs[2];
    assert_eq!(run2.repro, format!("fleetsim campaign {campaign} --run 2"));
    let (code, out, _) = fleetsim(&["campaign", &campaign, "--run", "2", "--format", "json"]);
    assert_eq!(code, EXIT_PASS);
    let alone: reports::RunRecord = serde_json::from_str(&out).unwrap();
    assert_eq!(alone.trace_digest, run2.trace_digest);
    assert_eq!(alone.seed, run2.seed);
}

#[test]
fn an_unwritable_output_exits_3() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("file");
    std::fs::write(&blocker, "not a directory").unwrap();
    let file = scenario("hub-crashes-and-restarts-mid-run.toml");
    let (code, _, err) = fleetsim(&["run", &file, "--out", blocker.join("sub").to_str().unwrap()]);
    assert_eq!(code, sim::model::exit::EXIT_OUTPUT_ERROR, "{err}");
    assert!(err.starts_with("error: cannot write"), "{err}");
}

#[test]
fn report_renders_a_campaign_report_as_the_campaign_printed_it_and_as_markdown() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("c");
    let campaign = root().join("campaigns/heartbeats-50.toml").display().to_string();
    let (code, printed, err) = fleetsim(&["campaign", &campaign, "--runs", "2", "--out", out_dir.to_str().unwrap()]);
    assert!(code == EXIT_PASS || code == EXIT_FAIL, "{err}");
    let report = out_dir.join("report.json").display().to_string();

    let (code, text, err) = fleetsim(&["report", &report]);
    assert_eq!(code, EXIT_PASS, "{err}");
    assert!(printed.starts_with(&text), "one renderer for both:\n{printed}\nvs\n{text}");
    assert!(text.contains("passed        2/2"), "{text}");

    let (code, md, err) = fleetsim(&["report", &report, "--format", "md"]);
    assert_eq!(code, EXIT_PASS, "{err}");
    assert!(md.starts_with(&format!("## fleetsim campaign `{campaign}`: ")), "{md}");
    assert!(md.contains("**2/2 runs passed**"), "{md}");
    assert!(md.contains("### Violations by oracle"), "{md}");

    let html = dir.path().join("report.html");
    let (code, out, err) = fleetsim(&["report", &report, "--format", "html", "-o", html.to_str().unwrap()]);
    assert_eq!((code, out.as_str()), (EXIT_PASS, ""), "{err}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>") && page.ends_with("</html>\n"));
    let (code, xml, _) = fleetsim(&["report", &report, "--format", "junit"]);
    assert_eq!(code, EXIT_PASS);
    assert!(xml.matches("<testcase classname=").count() >= 2, "{xml}");
}

#[test]
fn a_missing_truncated_corrupt_or_incompatible_report_is_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = scenario("hub-crashes-and-restarts-mid-run.toml");
    let run_dir = dir.path().join("run");
    let (code, _, _) = fleetsim(&["run", &file, "--out", run_dir.to_str().unwrap()]);
    assert_eq!(code, EXIT_PASS);
    let run_json = run_dir.join("run.json").display().to_string();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let truncated = write("truncated.json", "{\n  \"schema_version\": 1,\n  \"runs\": [\n");
    let corrupt = write("corrupt.json", "schema_version = 1\n");
    let newer = write("newer.json", "{\"schema_version\": 2, \"runs\": [], \"summary\": {}}");
    let cases = [
        ("no/such/report.json".to_owned(), "no such file"),
        (truncated, "truncated: the JSON ends early"),
        (corrupt, "corrupt: not JSON"),
        (newer, "schema_version: this fleetsim reads version 1, the file has 2"),
        (run_json, "a run record (run.json), not a campaign report (report.json)"),
    ];
    for (path, reason) in cases {
        for format in ["text", "md", "junit", "html"] {
            let (code, out, err) = fleetsim(&["report", &path, "--format", format]);
            assert_eq!(code, EXIT_BAD_INPUT, "{path}: {err}");
            assert_eq!(out, "", "nothing rendered from a bad report");
            assert!(err.starts_with(&format!("error: {path}: {reason}")), "{err}");
            assert_eq!(err.lines().count(), 1, "one line: {err}");
        }
    }
}

#[test]
fn diff_says_identical_for_one_seed_run_twice_and_shows_where_two_traces_diverge() {
    let dir = tempfile::tempdir().unwrap();
    let file = scenario("hub-crashes-and-restarts-mid-run.toml");
    let trace = |name: &str, seed: &str| {
        let out_dir = dir.path().join(name);
        let (code, _, err) = fleetsim(&["run", &file, "--seed", seed, "--out", out_dir.to_str().unwrap()]);
        assert_eq!(code, EXIT_PASS, "{err}");
        out_dir.join("trace.jsonl")
    };
    let (a, b, other_seed) = (trace("a", "7"), trace("b", "7"), trace("c", "8"));
    let (a, b, other_seed) = (a.display().to_string(), b.display().to_string(), other_seed.display().to_string());
    let events = std::fs::read_to_string(&a).unwrap().lines().count();

    let (code, out, err) = fleetsim(&["diff", &a, &b]);
    assert_eq!(code, EXIT_PASS, "{err}");
    assert_eq!(out, format!("identical ({events} events)\n"));

    let (code, out, _) = fleetsim(&["diff", &a, &other_seed]);
    assert_eq!(code, EXIT_FAIL, "{out}");
    assert!(out.starts_with("traces differ: first divergence at line 1\n"), "{out}");
    assert!(out.contains("differs in: seed (7 vs 8)"), "{out}");

    // The same trace with one event changed in the middle: the shared lines before it are shown once.
    let text = std::fs::read_to_string(&a).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    lines[99] = lines[99].replacen("\"t_ms\":", "\"t_ms\":1", 1);
    let edited = dir.path().join("edited.jsonl");
    std::fs::write(&edited, lines.join("\n") + "\n").unwrap();
    let (code, out, _) = fleetsim(&["diff", &a, edited.to_str().unwrap()]);
    assert_eq!(code, EXIT_FAIL, "{out}");
    assert!(out.starts_with("traces differ: first divergence at line 100\n"), "{out}");
    assert!(out.contains(&format!("      99  {}", &lines[98][..40])), "context before the divergence: {out}");
    assert!(out.contains(&format!("  a  100  {}", text.lines().nth(99).unwrap())), "{out}");
    assert!(out.contains(&format!("  b  100  {}", lines[99])), "{out}");
    assert!(out.contains("differs in: t_ms ("), "{out}");
}

#[test]
fn diff_of_a_missing_file_or_a_file_that_is_not_a_trace_is_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let not_a_trace = dir.path().join("notes.txt");
    std::fs::write(&not_a_trace, "hello\n").unwrap();
    let not_a_trace = not_a_trace.display().to_string();
    let (code, _, err) = fleetsim(&["diff", "no/such/a.jsonl", &not_a_trace]);
    assert_eq!(code, EXIT_BAD_INPUT);
    assert_eq!(err, "error: no/such/a.jsonl: no such file\n");
    let (code, _, err) = fleetsim(&["diff", &not_a_trace, &not_a_trace]);
    assert_eq!(code, EXIT_BAD_INPUT);
    assert!(err.starts_with(&format!("error: {not_a_trace}: line 1 is not a trace event (")), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn report_and_diff_help_teach_with_examples() {
    let (code, out, _) = fleetsim(&["report", "--help"]);
    assert_eq!(code, EXIT_PASS);
    assert!(out.contains("fleetsim report target/fleetsim/ci-50/report.json --format md"), "{out}");
    assert!(out.contains("fail-closed"), "{out}");
    let (code, out, _) = fleetsim(&["diff", "--help"]);
    assert_eq!(code, EXIT_PASS);
    assert!(out.contains("Exit codes: 0 identical, 1 the traces differ, 2 bad input"), "{out}");
    assert!(out.contains("fleetsim diff /tmp/a/trace.jsonl /tmp/b/trace.jsonl"), "{out}");
}

#[test]
fn runs_past_the_bound_are_refused_before_anything_is_allocated() {
    let dir = tempfile::tempdir().unwrap();
    let campaign = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().join("campaigns/ci-50.toml");
    let campaign = campaign.to_str().unwrap();
    let out = dir.path().join("out");
    for runs in ["100000000000", "100001", "0"] {
        let (code, _, err) = fleetsim(&["campaign", campaign, "--runs", runs, "--out", out.to_str().unwrap()]);
        assert_eq!(code, EXIT_BAD_INPUT, "{err}");
        assert_eq!(
            err,
            format!("error: --runs: must be 1 to 100000 (the most runs a campaign may have), not {runs}\n")
        );
    }
    let text = std::fs::read_to_string(campaign).unwrap();
    let huge = dir.path().join("huge.toml");
    for (from, to, expected) in [
        (
            "runs = 100",
            "runs = 9223372036854775807",
            "runs: 9223372036854775807 is more than 100000, the most runs a campaign may have",
        ),
        ("runs = 100", "runs = 1_000_000_000_000_000", "runs: 1000000000000000 is more than 100000"),
    ] {
        assert!(text.contains(from), "{from}");
        std::fs::write(&huge, text.replacen(from, to, 1)).unwrap();
        let (code, _, err) = fleetsim(&["check", huge.to_str().unwrap()]);
        assert_eq!(code, EXIT_BAD_INPUT, "{err}");
        assert!(err.contains(expected), "{err}");
    }
}

#[test]
fn a_run_that_settled_says_so_and_run_to_duration_runs_it_all() {
    // GOOD never settles: node-01 stays cut off and the hub's TTL has yet to tombstone it. Healed, the run settles.
    let (code, out, _, _) = with_file("run", GOOD);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("virtual time  0h 20m 00s (1200000 ms)\n"), "{out}");
    let healed = format!("{GOOD}\n[[step]]\nat_ms = 120_000\nkind = \"repair\"\na = \"node-01\"\nb = \"hub\"\n");
    let (code, out, _, _) = with_file("run", &healed);
    assert_eq!(code, 0, "{out}");
    let line = out.lines().find(|line| line.contains("virtual time")).expect("a virtual time line");
    assert!(line.ends_with("of 0h 20m 00s: settled, nothing left could change a verdict"), "{line}");
    let whole = healed.replace("duration_ms_max = 1_200_000", "duration_ms_max = 1_200_000\nrun_to_duration = true");
    let (code, out, _, _) = with_file("run", &whole);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("virtual time  0h 20m 00s (1200000 ms)\n"), "{out}");
}

#[test]
fn an_input_that_is_not_a_regular_file_is_refused_without_reading_it() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("campaign.toml");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let fifo = fifo.display().to_string();
    // A FIFO's open would block until a writer came; /dev/zero would be read until memory ran out.
    for (args, reason) in [
        (vec!["check", "/dev/zero"], "/dev/zero: a device, not a regular file"),
        (vec!["check", fifo.as_str()], "a FIFO, not a regular file"),
        (vec!["run", fifo.as_str()], "a FIFO, not a regular file"),
        (vec!["report", "/dev/zero"], "/dev/zero: not a regular file"),
    ] {
        let (code, _, err) = fleetsim(&args);
        assert_eq!(code, EXIT_BAD_INPUT, "{args:?}: {err}");
        assert!(err.contains(reason), "{args:?}: {err}");
    }
    // A file larger than the cap is refused however its size reads.
    let big = dir.path().join("big.toml");
    std::fs::write(&big, vec![b'#'; (sim::model::spec::SPEC_BYTES_MAX + 1) as usize]).unwrap();
    let (code, _, err) = fleetsim(&["check", big.to_str().unwrap()]);
    assert_eq!(code, EXIT_BAD_INPUT, "{err}");
    assert!(err.contains("more than the 1048576 bytes an input file may have"), "{err}");
}
