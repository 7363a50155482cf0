//! The recovery-matrix conformance suite: a directory of scripted scenarios (or of one subdirectory per workflow,
//! `conformance/onboarding/` and `conformance/decommission/`), each naming the (stage, failure class) pairs it drives
//! (`[expect] matrix_pairs`), run one after another and judged with every oracle. A listed pair of a workflow the
//! cases address is covered when a passing case declares it — a declared pair the run did not exercise makes the
//! case fail (`expectation_unmet`) — and the suite passes when every case passes and every listed pair is covered.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use reports::RunRecord;
use serde::{Deserialize, Serialize};

use crate::model::spec::{self, Scenario};
use crate::run::runner::{self, RunIdentity};

/// The suite's shipped cases, relative to the repository root.
pub const DEFAULT_DIR: &str = "conformance";
/// Version of `conformance.json`.
pub const SCHEMA_VERSION: u32 = 1;

/// One case: its file and what its run showed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaseOutcome {
    pub file: String,
    /// The pairs the case declares (`[expect] matrix_pairs`).
    pub declared: Vec<String>,
    /// Every `stage/failure_class` pair the run exercised, with its count (declared or not).
    pub exercised: BTreeMap<String, u64>,
    /// The recovery work (`stage/work/outcome`) the case asserts, the section 6 timeouts and section 7 conditions
    /// it declares.
    #[serde(default)]
    pub recovery_work: Vec<String>,
    #[serde(default)]
    pub timeouts: Vec<String>,
    #[serde(default)]
    pub conditions: Vec<String>,
    pub passed: bool,
    /// The verdict's label (`pass`, `fail (expectation_unmet)`, ...).
    pub verdict: String,
    pub unmet: Vec<String>,
    pub trace_digest: String,
    pub repro: String,
}

/// `conformance.json`: the suite's verdict and its coverage of the listed pairs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConformanceReport {
    pub schema_version: u32,
    pub tool_version: String,
    pub commit: String,
    pub directory: String,
    /// The listed pairs of every workflow a case declares a pair of, in table order (onboarding first).
    pub listed: Vec<String>,
    /// Listed pairs a passing case declares.
    pub covered: Vec<String>,
    /// Listed pairs no passing case declares.
    pub uncovered: Vec<String>,
    /// Coverage of the matrix's other three kinds, each `kind → (listed, uncovered)`: `timeouts` (section 6),
    /// `conditions` (section 7) and `compensations` (the Compensation column, covered by a passing case that asserts
    /// it performed).
    #[serde(default)]
    pub kinds: BTreeMap<String, KindCoverage>,
    pub cases: Vec<CaseOutcome>,
    pub passed: bool,
}

/// One kind's coverage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KindCoverage {
    pub listed: Vec<String>,
    pub uncovered: Vec<String>,
}

impl KindCoverage {
    fn of(listed: Vec<String>, covered: impl Fn(&str) -> bool) -> KindCoverage {
        let uncovered = listed.iter().filter(|item| !covered(item)).cloned().collect();
        KindCoverage { listed, uncovered }
    }

    pub fn figure(&self) -> String {
        format!("{}/{}", self.listed.len() - self.uncovered.len(), self.listed.len())
    }
}

impl ConformanceReport {
    /// `covered/listed`, the figure a person quotes.
    pub fn coverage(&self) -> String {
        format!("{}/{}", self.covered.len(), self.listed.len())
    }
}

/// Why the suite could not run.
#[derive(Debug)]
pub enum SuiteError {
    /// The directory cannot be read.
    Directory { dir: PathBuf, error: std::io::Error },
    /// A case file is malformed (the message names file, line and field).
    Case(spec::SpecError),
    /// A file in the directory is not a conformance case: it declares no pair.
    NoPairs { file: PathBuf },
    /// The directory holds no case.
    Empty { dir: PathBuf },
    /// A case asserts no recovery work (`recovery_work = []` when none is due) or no resulting workflow state.
    NoWork { file: PathBuf },
}

impl std::fmt::Display for SuiteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SuiteError::Directory { dir, error } => write!(f, "{}: {error}", dir.display()),
            SuiteError::Case(error) => write!(f, "{error}"),
            SuiteError::NoPairs { file } => write!(
                f,
                "{}: not a conformance case: [expect] matrix_pairs names no stage/failure_class pair",
                file.display()
            ),
            SuiteError::Empty { dir } => write!(f, "{}: no *.toml case in the directory", dir.display()),
            SuiteError::NoWork { file } => write!(
                f,
                "{}: a conformance case asserts its work: [expect] needs recovery_work (`[]` when none is due) and workflow_state",
                file.display()
            ),
        }
    }
}

impl std::error::Error for SuiteError {}

/// Every `*.toml` case of `dir` and of its subdirectories (one level), parsed, in path order. Nothing runs unless
/// every case parses.
pub fn load_cases(dir: &Path) -> Result<Vec<(PathBuf, Scenario)>, SuiteError> {
    let mut files = Vec::new();
    for path in read_dir_sorted(dir)? {
        if path.is_dir() {
            files.extend(read_dir_sorted(&path)?.into_iter().filter(|path| is_toml(path)));
        } else if is_toml(&path) {
            files.push(path);
        }
    }
    files.sort();
    if files.is_empty() {
        return Err(SuiteError::Empty { dir: dir.to_owned() });
    }
    let mut cases = Vec::with_capacity(files.len());
    for file in files {
        let scenario = spec::load_scenario(&file).map_err(SuiteError::Case)?;
        if scenario.run.expect.matrix_pairs.is_empty() {
            return Err(SuiteError::NoPairs { file });
        }
        if scenario.run.expect.recovery_work.is_none() || scenario.run.expect.workflow_state.is_none() {
            return Err(SuiteError::NoWork { file });
        }
        cases.push((file, scenario));
    }
    Ok(cases)
}

fn is_toml(path: &Path) -> bool {
    path.is_file() && path.extension().is_some_and(|ext| ext == "toml")
}

fn read_dir_sorted(dir: &Path) -> Result<Vec<PathBuf>, SuiteError> {
    let entries = std::fs::read_dir(dir).map_err(|error| SuiteError::Directory { dir: dir.to_owned(), error })?;
    let mut paths = Vec::new();
    for entry in entries {
        paths.push(entry.map_err(|error| SuiteError::Directory { dir: dir.to_owned(), error })?.path());
    }
    paths.sort();
    Ok(paths)
}

/// Runs every case of `dir` and judges coverage; `on_case` sees each outcome as it finishes (for progress).
pub fn run_suite(dir: &Path, on_case: &mut dyn FnMut(&CaseOutcome)) -> Result<ConformanceReport, SuiteError> {
    let cases = load_cases(dir)?;
    let mut outcomes = Vec::with_capacity(cases.len());
    for (file, scenario) in &cases {
        let source = file.display().to_string();
        let identity = RunIdentity {
            source: source.clone(),
            run_index: None,
            repro: format!("fleetsim run {source} --seed {}", scenario.seed),
        };
        let output = runner::run(&scenario.run, scenario.seed, &identity, false);
        let mut outcome = case_outcome(source, &scenario.run.expect.matrix_pairs, &output.record);
        outcome.recovery_work = scenario.run.expect.recovery_work.clone().unwrap_or_default();
        outcome.timeouts = scenario.run.expect.timeouts.clone();
        outcome.conditions = scenario.run.expect.conditions.clone();
        on_case(&outcome);
        outcomes.push(outcome);
    }
    Ok(judge(dir, outcomes))
}

fn case_outcome(file: String, declared: &[String], record: &RunRecord) -> CaseOutcome {
    CaseOutcome {
        file,
        declared: declared.to_vec(),
        exercised: record.matrix_pairs.clone(),
        recovery_work: Vec::new(),
        timeouts: Vec::new(),
        conditions: Vec::new(),
        passed: record.verdict.passed(),
        verdict: record.verdict.label(),
        unmet: record.unmet.clone(),
        trace_digest: record.trace_digest.clone(),
        repro: record.repro.clone(),
    }
}

/// The workflow a section 7 condition is proved in: an agent enrolling late and an operator moving the machine in
/// MAAS are onboarding's cases, a machine that reappears with another state is a decommission's.
fn condition_workflow(condition: engine::matrix::OutOfBandCondition) -> engine::matrix::Workflow {
    use engine::matrix::{OutOfBandCondition as C, Workflow};
    match condition {
        C::LateAgentEnrollment | C::OperatorChangedMaasState => Workflow::Onboarding,
        C::MachineReappearedWithDifferentState => Workflow::Decommission,
    }
}

/// The workflow whose row names a compensation.
fn compensation_workflow(compensation: engine::matrix::Compensation) -> Option<engine::matrix::Workflow> {
    engine::matrix::Stage::all()
        .find(|stage| stage.row().compensation == Some(compensation))
        .map(|stage| stage.workflow())
}

/// Coverage of the listed pairs by the passing cases' declarations, and of the other three kinds (section 6's
/// timeouts, section 7's conditions, the Compensation column) by what the passing cases assert, each for the
/// workflows the cases address. The suite passes when every case passes and all four kinds are covered in full.
pub fn judge(dir: &Path, cases: Vec<CaseOutcome>) -> ConformanceReport {
    use crate::model::pairs::{implied_transient_pair_workflow, listed_pair_workflow};
    let workflows: std::collections::BTreeSet<engine::matrix::Workflow> = cases
        .iter()
        .flat_map(|case| {
            case.declared.iter().filter_map(|pair| listed_pair_workflow(pair).or(implied_transient_pair_workflow(pair)))
        })
        .collect();
    let listed: Vec<String> = workflows.iter().copied().flat_map(crate::model::pairs::workflow_listed_pairs).collect();
    let (covered, uncovered): (Vec<String>, Vec<String>) =
        listed.iter().cloned().partition(|pair| cases.iter().any(|case| case.passed && case.declared.contains(pair)));
    let passing: Vec<&CaseOutcome> = cases.iter().filter(|case| case.passed).collect();
    let addressed = |workflow: Option<engine::matrix::Workflow>| workflow.is_some_and(|w| workflows.contains(&w));
    let mut kinds = BTreeMap::new();
    let timeouts = engine::matrix::TimeoutKind::ALL
        .iter()
        .filter(|kind| {
            addressed(Some(engine::matrix::Stage::Onboarding(engine::matrix::timeout(**kind).stage).workflow()))
        })
        .map(|kind| kind.as_str().to_owned())
        .collect();
    kinds.insert(
        "timeouts".to_owned(),
        KindCoverage::of(timeouts, |kind| passing.iter().any(|case| case.timeouts.iter().any(|t| t == kind))),
    );
    let conditions = engine::matrix::OutOfBandCondition::ALL
        .iter()
        .filter(|condition| addressed(Some(condition_workflow(**condition))))
        .map(|c| c.as_str().to_owned())
        .collect();
    kinds.insert(
        "conditions".to_owned(),
        KindCoverage::of(conditions, |condition| {
            passing.iter().any(|case| case.conditions.iter().any(|c| c == condition))
        }),
    );
    let compensations = engine::matrix::Compensation::ALL
        .iter()
        .filter(|compensation| addressed(compensation_workflow(**compensation)))
        .map(|c| c.as_str().to_owned())
        .collect();
    kinds.insert(
        "compensations".to_owned(),
        KindCoverage::of(compensations, |compensation| {
            passing.iter().any(|case| {
                case.recovery_work
                    .iter()
                    .any(|work| crate::model::pairs::performed_compensation(work) == Some(compensation))
            })
        }),
    );
    let kinds_full = kinds.values().all(|coverage| coverage.uncovered.is_empty());
    let passed = uncovered.is_empty() && kinds_full && cases.iter().all(|case| case.passed);
    ConformanceReport {
        schema_version: SCHEMA_VERSION,
        tool_version: runner::TOOL_VERSION.to_owned(),
        commit: runner::commit().to_owned(),
        directory: dir.display().to_string(),
        listed,
        covered,
        uncovered,
        kinds,
        cases,
        passed,
    }
}

/// The terminal summary: coverage first, then every failing case with its reproduce command, then what is uncovered.
pub fn render_text(report: &ConformanceReport) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let verdict = if report.passed { "PASS" } else { "FAIL" };
    let passing = report.cases.iter().filter(|case| case.passed).count();
    let _ = writeln!(out, "conformance {}: {verdict}", report.directory);
    let _ = writeln!(out, "  coverage      {} listed pairs covered by a passing case", report.coverage());
    for (kind, coverage) in &report.kinds {
        let _ = writeln!(out, "  {kind:<13} {} covered", coverage.figure());
    }
    let _ = writeln!(out, "  cases         {passing}/{} passed", report.cases.len());
    for case in report.cases.iter().filter(|case| !case.passed) {
        let _ = writeln!(out, "  failed        {}  {}", case.file, case.verdict);
        for unmet in &case.unmet {
            let _ = writeln!(out, "                  unmet: {unmet}");
        }
        let _ = writeln!(out, "                  reproduce: {}", case.repro);
    }
    for pair in &report.uncovered {
        let _ = writeln!(out, "  uncovered     {pair}");
    }
    for (kind, coverage) in &report.kinds {
        for item in &coverage.uncovered {
            let _ = writeln!(out, "  uncovered     {kind}: {item}");
        }
    }
    out
}

/// Where `fleetsim conformance` writes `conformance.json` unless told.
pub const DEFAULT_OUT: &str = "target/fleetsim/conformance";

/// Why `fleetsim conformance` could not finish.
#[derive(Debug)]
pub enum CommandError {
    /// The cases could not be loaded (a clear reason naming the file).
    BadInput(SuiteError),
    /// `conformance.json` or the console could not be written.
    Output { path: PathBuf, error: std::io::Error },
}

/// `fleetsim conformance`: runs the suite with a line per case as it finishes, prints the summary, writes
/// `OUT/conformance.json` atomically. Exit 0 when the suite passes, 1 when it does not.
pub fn command(dir: &Path, out_dir: Option<&Path>, out: &mut dyn std::io::Write) -> Result<i32, CommandError> {
    let console = |error| CommandError::Output { path: PathBuf::from("<stdout>"), error };
    let total = load_cases(dir).map_err(CommandError::BadInput)?.len();
    let mut done = 0;
    let mut failed_write = None;
    let report = run_suite(dir, &mut |case| {
        done += 1;
        let mark = if case.passed { "ok  " } else { "FAIL" };
        let line = format!("[{done:>3}/{total}] {mark} {}  {}\n", case.file, case.declared.join(", "));
        if let Err(error) = out.write_all(line.as_bytes()) {
            failed_write.get_or_insert(error);
        }
    })
    .map_err(CommandError::BadInput)?;
    if let Some(error) = failed_write {
        return Err(console(error));
    }
    let out_dir = out_dir.map_or_else(|| PathBuf::from(DEFAULT_OUT), Path::to_path_buf);
    let path = out_dir.join("conformance.json");
    std::fs::create_dir_all(&out_dir)
        .and_then(|()| reports::write_json_atomic(&path, &report))
        .map_err(|error| CommandError::Output { path: path.clone(), error })?;
    let text = format!("{}  report        {}\n", render_text(&report), path.display());
    out.write_all(text.as_bytes()).map_err(console)?;
    Ok(if report.passed { 0 } else { 1 })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(file: &str, declared: &[&str], passed: bool) -> CaseOutcome {
        CaseOutcome {
            file: file.to_owned(),
            declared: declared.iter().map(|pair| (*pair).to_owned()).collect(),
            exercised: BTreeMap::new(),
            recovery_work: Vec::new(),
            timeouts: Vec::new(),
            conditions: Vec::new(),
            passed,
            verdict: if passed { "pass".into() } else { "fail (expectation_unmet)".into() },
            unmet: if passed { vec![] } else { vec!["matrix pair wait_for_ready/hardware_mismatch".into()] },
            trace_digest: "d".into(),
            repro: format!("fleetsim run {file} --seed 1"),
        }
    }

    #[test]
    fn a_pair_is_covered_only_by_a_passing_case_that_declares_it() {
        let report = judge(
            Path::new("cases"),
            vec![
                case("a.toml", &["load_site_config/input_config_error"], true),
                case("b.toml", &["wait_for_ready/hardware_mismatch"], false),
            ],
        );
        assert_eq!(report.covered, vec!["load_site_config/input_config_error".to_owned()]);
        assert_eq!(report.listed.len(), 39);
        assert_eq!(report.uncovered.len(), 38);
        assert!(report.uncovered.contains(&"wait_for_ready/hardware_mismatch".to_owned()));
        assert!(!report.passed);
        assert_eq!(report.coverage(), "1/39");
        let text = render_text(&report);
        assert!(text.contains("coverage      1/39"), "{text}");
        assert!(text.contains("reproduce: fleetsim run b.toml --seed 1"), "{text}");
        assert!(text.contains("uncovered     wait_for_ready/hardware_mismatch"), "{text}");
    }

    /// Every onboarding pair covered by passing cases, and still a FAIL while one compensation, one timeout or one
    /// condition is asserted by no passing case; full only when all four kinds are.
    #[test]
    fn the_suite_fails_while_any_kind_is_not_full() {
        let onboarding = crate::model::pairs::workflow_listed_pairs(engine::matrix::Workflow::Onboarding);
        let full = || {
            let mut all = case("all.toml", &onboarding.iter().map(String::as_str).collect::<Vec<_>>(), true);
            all.timeouts = engine::matrix::TimeoutKind::ALL.iter().map(|k| k.as_str().to_owned()).collect();
            all.conditions = vec!["late_agent_enrollment".into(), "operator_changed_maas_state".into()];
            all.recovery_work = [
                "ensure_pxe_interface_auto/unlink_relink_interface/performed",
                "render_cloud_init/delete_partial_node_row/performed",
                "deploy_via_maas/release_to_ready_if_deploy_started/performed",
                "wait_for_deployed/release_to_ready/performed",
                "recover_for_datasource_retry/abort_release_to_clean_deployable_state/performed",
            ]
            .map(str::to_owned)
            .to_vec();
            all
        };
        let report = judge(Path::new("cases"), vec![full()]);
        assert!(report.passed, "{}", render_text(&report));
        assert_eq!(report.kinds["compensations"].figure(), "5/5", "onboarding's compensations only");
        assert_eq!(report.kinds["conditions"].figure(), "2/2");

        let mut one_not_due = full();
        one_not_due.recovery_work[1] = "render_cloud_init/delete_partial_node_row/not_due".into();
        let report = judge(Path::new("cases"), vec![one_not_due]);
        assert!(!report.passed && report.uncovered.is_empty());
        assert!(render_text(&report).contains("uncovered     compensations: delete_partial_node_row"));

        let mut no_timeout = full();
        no_timeout.timeouts.pop();
        assert!(!judge(Path::new("cases"), vec![no_timeout]).passed);
        let mut no_condition = full();
        no_condition.conditions.clear();
        assert!(!judge(Path::new("cases"), vec![no_condition]).passed);
    }

    #[test]
    fn a_file_that_declares_no_pair_or_does_not_parse_stops_the_suite_before_anything_runs() {
        let dir = tempfile::tempdir().unwrap();
        let plain = "schema_version = 1\ndescription = \"d\"\nseed = 1\nduration_ms_max = 60_000\n[fleet]\nnodes = 1\n";
        std::fs::write(dir.path().join("a.toml"), plain).unwrap();
        let error = load_cases(dir.path()).unwrap_err();
        assert!(error.to_string().contains("a.toml: not a conformance case"), "{error}");
        std::fs::write(dir.path().join("a.toml"), "schema_version = 1\nseed = \"x\"\n").unwrap();
        assert!(matches!(load_cases(dir.path()), Err(SuiteError::Case(_))));
        let empty = tempfile::tempdir().unwrap();
        assert!(matches!(load_cases(empty.path()), Err(SuiteError::Empty { .. })));
    }

    #[test]
    fn the_command_reports_progress_writes_conformance_json_and_exits_by_the_verdict() {
        let cases = tempfile::tempdir().unwrap();
        let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().join(DEFAULT_DIR).join("onboarding");
        let name = "load-site-config--input-config-error.toml";
        std::fs::copy(shipped.join(name), cases.path().join(name)).unwrap();
        let out_dir = tempfile::tempdir().unwrap();
        let mut out = Vec::new();
        let code = command(cases.path(), Some(out_dir.path()), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(code, 1, "one case covers 1 of 39 pairs: {text}");
        assert!(text.contains("[  1/1] ok   "), "{text}");
        assert!(text.contains("coverage      1/39"), "{text}");
        let written: ConformanceReport =
            serde_json::from_slice(&std::fs::read(out_dir.path().join("conformance.json")).unwrap()).unwrap();
        assert_eq!(written.covered, vec!["load_site_config/input_config_error".to_owned()]);
        assert_eq!(written.cases.len(), 1);
    }
}
