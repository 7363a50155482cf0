//! The recovery-matrix conformance suite as shipped: every listed (stage, failure class) pair of both workflows has
//! a scripted case named after it (`conformance/onboarding/`, `conformance/decommission/`), every case passes, and
//! coverage is complete.

use std::path::Path;

use sim::run::conformance::{self, CaseOutcome};

#[path = "support/golden.rs"]
mod golden;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

#[test]
fn every_listed_pair_of_both_workflows_is_covered_by_a_passing_case_named_after_it() {
    let dir = root().join(conformance::DEFAULT_DIR);
    let mut seen: Vec<String> = Vec::new();
    let report = conformance::run_suite(&dir, &mut |case: &CaseOutcome| seen.push(case.file.clone())).unwrap();
    let failing: Vec<_> = report.cases.iter().filter(|case| !case.passed).collect();
    assert!(failing.is_empty(), "failing cases: {failing:#?}");
    assert_eq!(report.uncovered, Vec::<String>::new());
    assert_eq!(report.covered, report.listed, "covered in table order");
    assert_eq!(report.coverage(), "60/60", "39 onboarding and 21 decommission pairs");
    assert!(report.passed);
    assert_eq!(seen.len(), report.cases.len(), "progress saw every case");
    // The matrix's other kinds, part of the verdict: every timeout of section 6 and condition of section 7 met by a
    // passing case, and every compensation of the Compensation column performed by one.
    let figure = |kind: &str| report.kinds[kind].figure();
    assert_eq!(
        (figure("timeouts"), figure("conditions"), figure("compensations")),
        ("6/6".to_owned(), "3/3".to_owned(), "8/8".to_owned())
    );

    for case in &report.cases {
        let file = Path::new(&case.file).strip_prefix(root()).unwrap_or(Path::new(&case.file));
        golden::assert_golden(&file.to_string_lossy(), None, &case.trace_digest);
    }
    for case in &report.cases {
        assert_eq!(case.declared.len(), 1, "{}: one pair per case", case.file);
        let pair = &case.declared[0];
        assert!(case.exercised.contains_key(pair), "{}: {pair} not exercised: {:?}", case.file, case.exercised);
        let path = Path::new(&case.file);
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        let (workflow, stage_class) = match pair.strip_prefix("decommission:") {
            Some(rest) => ("decommission", rest),
            None => ("onboarding", pair.as_str()),
        };
        // Named after its pair, and a variant of a pair (another timeout, condition or policy) after a second `--`.
        let named = stage_class.replace('/', "--").replace('_', "-");
        let variant = stem.strip_prefix(&named).filter(|rest| rest.is_empty() || rest.starts_with("--"));
        assert!(variant.is_some(), "{}: named after its pair {named}", case.file);
        let parent = path.parent().unwrap().file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(parent, workflow, "{}: in its workflow's directory", case.file);
    }
}

#[test]
fn a_suite_missing_cases_names_the_uncovered_pairs_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    let cases = root().join(conformance::DEFAULT_DIR).join("onboarding");
    for name in ["load-site-config--input-config-error.toml", "wait-for-ready--hardware-mismatch.toml"] {
        std::fs::copy(cases.join(name), dir.path().join(name)).unwrap();
    }
    let report = conformance::run_suite(dir.path(), &mut |_| {}).unwrap();
    assert!(report.cases.iter().all(|case| case.passed));
    assert_eq!(report.coverage(), "2/39", "only the onboarding workflow is addressed");
    assert!(!report.passed);
    assert!(report.uncovered.contains(&"commission_node/bmc_power_failure".to_owned()));
    // One decommission case in a subdirectory brings decommission's 21 listed pairs into the suite.
    let sub = dir.path().join("decommission");
    std::fs::create_dir(&sub).unwrap();
    let name = "drain-node--agent-enrollment-failure.toml";
    std::fs::copy(root().join(conformance::DEFAULT_DIR).join("decommission").join(name), sub.join(name)).unwrap();
    let report = conformance::run_suite(dir.path(), &mut |_| {}).unwrap();
    assert!(report.cases.iter().all(|case| case.passed), "{:#?}", report.cases);
    assert_eq!(report.coverage(), "3/60");
    assert!(report.uncovered.contains(&"decommission:release_maas_node/state_ambiguity".to_owned()));
}

#[test]
fn the_cases_of_the_commissioning_rows_fail_the_2026_07_20_controller() {
    // Conformance can fail: the same cases, run by the shell-era controller the incident had (policy `legacy`, kept
    // only to replay it: MAAS's fixed timeout, no stall detection, a blind retry of commissioning whatever the
    // failure), fail. The cases of the other rows are decided by the matrix under both policies, so only these six
    // can tell the two apart; `commission_node/upstream_transient` (a 503, retried the same way by both) cannot.
    let dir = tempfile::tempdir().unwrap();
    let cases = root().join(conformance::DEFAULT_DIR).join("onboarding");
    let rows = [
        "commission-node--bmc-power-failure.toml",
        "commission-node--state-ambiguity.toml",
        "wait-for-ready--hardware-mismatch.toml",
        "wait-for-ready--state-ambiguity.toml",
        "wait-for-ready--upstream-transient.toml",
        "wait-for-ready--upstream-transient--commission-timeout.toml",
    ];
    for name in rows {
        let text = std::fs::read_to_string(cases.join(name)).unwrap();
        assert!(text.contains("\n[onboarding]\nnodes = 1\n"), "{name}");
        let legacy = text.replace("\n[onboarding]\nnodes = 1\n", "\n[onboarding]\nnodes = 1\npolicy = \"legacy\"\n");
        std::fs::write(dir.path().join(name), legacy).unwrap();
    }
    let report = conformance::run_suite(dir.path(), &mut |_| {}).unwrap();
    assert_eq!(report.cases.len(), rows.len());
    for case in &report.cases {
        assert!(!case.passed, "{} passes under the legacy controller: {}", case.file, case.verdict);
    }
    assert!(!report.passed);
}

#[test]
fn stage_triggered_cases_are_deterministic() {
    use sim::run::runner::{RunIdentity, run};
    // Two stage-triggered steps (the datasource failure at the deploy, the 503s at the classification) on one seed.
    let path = root()
        .join(conformance::DEFAULT_DIR)
        .join("onboarding")
        .join("classify-deploy-failure--upstream-transient.toml");
    let scenario = sim::model::spec::load_scenario(&path).unwrap();
    let identity = RunIdentity { source: "case".into(), run_index: None, repro: String::new() };
    let first = run(&scenario.run, scenario.seed, &identity, false).record;
    let second = run(&scenario.run, scenario.seed, &identity, false).record;
    assert_eq!(first.trace_digest, second.trace_digest);
    assert_eq!(first.matrix_pairs, second.matrix_pairs);
    let other = run(&scenario.run, scenario.seed + 1, &identity, false).record;
    assert_ne!(first.trace_digest, other.trace_digest, "the seed reaches the run");
}
