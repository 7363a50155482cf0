//! The wire transport against the fast one: every scripted scenario runs on both and must end the same way — the
//! same per-node workflow outcomes, the same rollout lanes, the same oracle verdicts — and the wire transport is
//! deterministic like the fast one (the same seed twice gives the same digest, another seed another).
//!
//! Every scenario in `scenarios/` fits: the ones with an `[onboarding]` site put the site's services on the `maas`
//! turmoil host behind their HTTP and DNS front ends and drive them with the engine's real clients; the others have
//! nothing that crosses a turmoil host, so their trace must even be the fast transport's, digest for digest.

use std::path::{Path, PathBuf};

use reports::RunRecord;
use sim::model::spec::load_scenario;
use sim::run::runner::{RunIdentity, Transport, run_on};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

fn identity(path: &Path) -> RunIdentity {
    RunIdentity { source: path.display().to_string(), run_index: None, repro: String::new() }
}

/// The scenarios, those with a MAAS site or those without.
fn scenarios(with_site: bool) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(root().join("scenarios"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| load_scenario(path).unwrap().run.onboarding.is_some() == with_site)
        .collect();
    paths.sort();
    paths
}

/// What must not depend on the transport: the verdict, each workflow's outcome, each lane's, which oracles found
/// violations and how many, which `sometimes` properties were reached, and what was expected but not seen.
fn outcome(record: &RunRecord) -> String {
    let workflows: Vec<String> = record.workflows.iter().map(|w| format!("{} {}", w.workflow, w.outcome)).collect();
    let lanes: Vec<String> = record
        .lanes
        .iter()
        .map(|lane| {
            format!("{}/{} nodes {} {}", lane.rollout, lane.lane, lane.nodes, lane.verdict.as_deref().unwrap_or("-"))
        })
        .collect();
    let reached: std::collections::BTreeSet<&str> =
        record.reached.iter().map(|firing| firing.oracle.as_str()).collect();
    format!(
        "verdict {:?}\nworkflows {workflows:?}\nlanes {lanes:?}\nviolations {:?}\nreached {reached:?}\nunmet {:?}",
        record.verdict, record.violation_counts, record.unmet
    )
}

/// Runs each scenario on both transports and lists every one whose outcome differs.
fn differences(paths: &[PathBuf], same_digest: bool) -> Vec<String> {
    let mut differences = Vec::new();
    for path in paths {
        let scenario = load_scenario(path).unwrap();
        let fast = run_on(&scenario.run, scenario.seed, &identity(path), false, Transport::Fast).record;
        let wire = run_on(&scenario.run, scenario.seed, &identity(path), false, Transport::Wire).record;
        assert!(wire.panic.is_none(), "{}: the wire run panicked: {:?}", path.display(), wire.panic);
        let (fast_outcome, wire_outcome) = (outcome(&fast), outcome(&wire));
        if fast_outcome != wire_outcome {
            differences.push(format!("{}\n-- fast\n{fast_outcome}\n-- wire\n{wire_outcome}", path.display()));
        } else if same_digest && fast.trace_digest != wire.trace_digest {
            differences.push(format!("{}: the traces differ", path.display()));
        }
    }
    differences
}

#[test]
fn every_site_scenario_ends_the_same_on_the_wire_as_on_the_fast_transport() {
    let paths = scenarios(true);
    assert!(paths.len() >= 18, "the onboarding, decommission and operator scenarios: {paths:?}");
    let differences = differences(&paths, false);
    assert!(differences.is_empty(), "{}", differences.join("\n\n"));
}

/// The conformance cases whose faults live in the secrets store's and the region's front ends (a token answer lost:
/// the store's HTTP front end answers nothing; the revoke over `POST /v1/auth/bootstrap/revoke`; a wipe that outlasts
/// the release waits) end the same, and pass, on the wire.
#[test]
fn the_compensation_cases_end_the_same_on_the_wire() {
    let paths: Vec<PathBuf> = [
        "conformance/onboarding/render-cloud-init--upstream-transient--token-answer-lost.toml",
        "conformance/onboarding/deploy-via-maas--deploy-cloud-init-failure.toml",
        "conformance/decommission/release-maas-node--upstream-transient--erase-slow.toml",
    ]
    .into_iter()
    .map(|case| root().join(case))
    .collect();
    let differences = differences(&paths, false);
    assert!(differences.is_empty(), "{}", differences.join("\n\n"));
    for path in &paths {
        let scenario = load_scenario(path).unwrap();
        let wire = run_on(&scenario.run, scenario.seed, &identity(path), false, Transport::Wire).record;
        assert!(wire.verdict.passed(), "{}: {:?} {:?}", path.display(), wire.verdict, wire.unmet);
    }
}

#[test]
fn every_scenario_without_a_site_gives_the_fast_transports_trace_on_the_wire() {
    let paths = scenarios(false);
    assert!(paths.len() >= 20, "{paths:?}");
    let differences = differences(&paths, true);
    assert!(differences.is_empty(), "{}", differences.join("\n\n"));
}

#[test]
fn the_wire_transport_gives_the_same_digest_for_the_same_seed_and_another_for_another() {
    let path = root().join("scenarios/onboarding-controller-killed-after-the-deploy-call-adopts-the-deploy.toml");
    let scenario = load_scenario(&path).unwrap();
    let run = |seed| run_on(&scenario.run, seed, &identity(&path), true, Transport::Wire);
    let first = run(scenario.seed);
    let second = run(scenario.seed);
    assert!(first.record.verdict.passed(), "{:#?}", first.record);
    assert_eq!(first.record.trace_digest, second.record.trace_digest);
    assert_eq!(first.trace, second.trace);
    // On another thread too (each run builds its own turmoil simulation).
    let (spec, seed, at) = (scenario.run.clone(), scenario.seed, path.clone());
    let threaded =
        std::thread::spawn(move || run_on(&spec, seed, &identity(&at), false, Transport::Wire)).join().unwrap();
    assert_eq!(first.record.trace_digest, threaded.record.trace_digest);
    // The calls crossed the simulated network: the region's answers reached the controller as HTTP statuses.
    assert!(
        first.trace.iter().any(|line| line.contains("\"kind\":\"site.request\"") && line.contains("\"status\":200"))
    );
    let other = run(scenario.seed + 1);
    assert_ne!(first.record.trace_digest, other.record.trace_digest);
    // And the wire run is not the fast run: the real adapters' round trips take the turmoil tick.
    let fast = run_on(&scenario.run, scenario.seed, &identity(&path), false, Transport::Fast);
    assert_ne!(first.record.trace_digest, fast.record.trace_digest);
}

#[test]
fn a_partition_a_maas_crash_and_a_hold_between_controller_and_maas_reach_the_real_clients() {
    let text = r#"
schema_version = 1
description = "two machines onboard through a controller-maas partition, a maas crash and a hold"
seed = 7
duration_ms_max = 3_600_000
[fleet]
nodes = 1
[onboarding]
nodes = 2
[[step]]
at_ms = 60_000
kind = "partition"
a = "controller"
b = "maas"
[[step]]
at_ms = 120_000
kind = "repair"
a = "controller"
b = "maas"
[[step]]
at_ms = 300_000
kind = "crash"
target = "maas"
[[step]]
at_ms = 360_000
kind = "restart"
target = "maas"
[[step]]
at_ms = 500_000
kind = "hold"
a = "controller"
b = "maas"
[[step]]
at_ms = 530_000
kind = "release"
a = "controller"
b = "maas"
[expect]
must_fire = ["onboarding_completed"]
"#;
    let scenario = sim::model::spec::parse_scenario("faults.toml", text).unwrap();
    let path = Path::new("faults.toml");
    let wire = run_on(&scenario.run, scenario.seed, &identity(path), true, Transport::Wire);
    let fast = run_on(&scenario.run, scenario.seed, &identity(path), false, Transport::Fast);
    assert!(wire.record.verdict.passed(), "{:#?}", wire.record);
    assert_eq!(outcome(&wire.record), outcome(&fast.record));
    // The real clients saw the faults: calls without an answer during the partition and while the host was down,
    // none while the link was whole before the first fault.
    let unanswered: Vec<u64> = wire
        .trace
        .iter()
        .filter(|line| line.contains("\"kind\":\"site.request\"") && line.contains("\"status\":null"))
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap()["t_ms"].as_u64().unwrap())
        .collect();
    let within = |from: u64, to: u64| unanswered.iter().any(|t| (from..=to).contains(t));
    assert!(within(60_000, 130_000), "the partition: {unanswered:?}");
    assert!(within(300_000, 370_000), "the crash: {unanswered:?}");
    assert!(!within(0, 60_000), "{unanswered:?}");
}

#[test]
fn fleetsim_run_takes_the_transport_and_its_reproduce_line_names_it() {
    let scenario = root().join("scenarios/onboarding-two-machines-deploy-and-enrol-their-agents.toml");
    let scenario = scenario.to_str().unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec!["fleetsim", "run", scenario];
        args.extend_from_slice(extra);
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = sim::cli::main_with(args.into_iter().map(std::ffi::OsString::from), &mut out, &mut err);
        (code, String::from_utf8(out).unwrap(), String::from_utf8(err).unwrap())
    };
    let (code, out, err) = run(&["--transport", "wire"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(&format!("reproduce     fleetsim run {scenario} --seed 7 --transport wire")), "{out}");
    let (code, out, _) = run(&[]);
    assert_eq!(code, 0);
    assert!(out.contains(&format!("reproduce     fleetsim run {scenario} --seed 7\n")), "{out}");
    let (code, _, err) = run(&["--transport", "carrier-pigeon"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("fast") && err.contains("wire"), "the error lists the transports: {err}");
}
