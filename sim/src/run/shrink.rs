//! `fleetsim shrink`: turns a failing run's materialised fault plan into a minimal scenario file that still fails the
//! same way, by delta debugging (ddmin) over its steps, then halving its numeric knobs.
//!
//! [`shrink`] is a pure function of the spec, the seed, the target and the budget: a run is deterministic given its
//! spec and seed, candidates are tried in a fixed order and results are cached by configuration hash, so the same
//! input shrinks to the same file. [`shrink_command`] is the I/O at the edge: it reads the report fail-closed, checks
//! the run, shrinks it and writes the scenario.
//!
//! What "the same way" means ([`Target`]): the same verdict kind and the same first violated oracle (the first
//! unexpected violation of the verdict's property type, as the renderers' headline names it), or the first unmet
//! expectation for `expectation_unmet`, or the kind alone for a panic. Every candidate is also a scenario the parser
//! accepts ([`crate::model::spec::write::scenario_toml`]), so every step of the way can be written.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use reports::{FailureKind, Outcome, PropertyKind, RunRecord};

use crate::model::faults::{Step, TimedStep};
use crate::model::spec::write::{scenario_toml, spec_from_config};
use crate::model::spec::{RunSpec, SpecError};
use crate::run::runner::{self, RunIdentity};

/// The default cap on candidate runs of `fleetsim shrink` (`--max-runs`).
pub const DEFAULT_MAX_RUNS: u64 = 200;

/// Knobs that name something rather than measure it: halving them would change what the step refers to.
const NAMING_KNOBS: &[&str] = &["epoch"];
/// Knobs below which a step does nothing at all; halving stops there.
const COUNT_KNOBS: &[&str] = &["count"];

/// How a failing run failed, as the shrinker must keep it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub kind: FailureKind,
    /// The first unexpected violation of the kind's property type (safety: always, liveness: eventually), or the
    /// first unmet expectation; `None` for a panic.
    pub oracle: Option<String>,
}

impl Target {
    /// The target of a failing record; an error for a pass or a failure without a kind.
    pub fn of(record: &RunRecord) -> Result<Target, String> {
        match (record.verdict.outcome, record.verdict.kind) {
            (Outcome::Pass, _) => Err("the run passed: nothing to shrink".to_owned()),
            (Outcome::Fail, None) => Err("the run failed without a failure kind: there is no way to tell a candidate \
                                          fails the same way"
                .to_owned()),
            (Outcome::Fail, Some(kind)) => Ok(Target { kind, oracle: first_oracle(record, kind) }),
        }
    }

    /// Whether `record` fails the same way.
    pub fn matches(&self, record: &RunRecord) -> bool {
        record.verdict.outcome == Outcome::Fail
            && record.verdict.kind == Some(self.kind)
            && first_oracle(record, self.kind) == self.oracle
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.oracle, self.kind) {
            (Some(oracle), FailureKind::ExpectationUnmet) => write!(f, "expectation_unmet ({oracle} never fired)"),
            (Some(oracle), kind) => write!(f, "{} (first violated oracle {oracle})", kind.as_str()),
            (None, kind) => f.write_str(kind.as_str()),
        }
    }
}

fn first_oracle(record: &RunRecord, kind: FailureKind) -> Option<String> {
    let violated = |property: PropertyKind| {
        record
            .violations
            .iter()
            .find(|firing| !firing.expected && firing.property == property)
            .map(|f| f.oracle.clone())
    };
    match kind {
        FailureKind::SafetyViolation => violated(PropertyKind::Always),
        FailureKind::LivenessFailure => violated(PropertyKind::Eventually),
        FailureKind::ExpectationUnmet => record.unmet.first().cloned(),
        FailureKind::Panic => None,
    }
}

/// The result of a shrink.
#[derive(Debug, Clone)]
pub struct Shrunk {
    /// The smallest spec found that still fails like the target.
    pub spec: RunSpec,
    /// Its run's record.
    pub record: RunRecord,
    pub steps_before: usize,
    pub steps_after: usize,
    pub faults_before: usize,
    pub faults_after: usize,
    /// Knob reductions kept (a halved number, a dropped optional field, a halved run duration).
    pub knobs_reduced: u64,
    /// Candidate runs executed, the first (the reproduction of the original) included.
    pub runs: u64,
    /// Whether the run cap stopped the shrink before it was done: the result may shrink further.
    pub cap_reached: bool,
}

/// Why nothing was shrunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShrinkError {
    /// The original spec, run with the seed, does not fail like the target (another fleetsim wrote the record?).
    DoesNotReproduce { got: String },
    /// The original spec cannot be written as a scenario file.
    NotWritable(String),
    /// A cap of zero runs leaves no room even to reproduce the failure.
    NoBudget,
}

impl fmt::Display for ShrinkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShrinkError::DoesNotReproduce { got } => write!(f, "the run does not fail the same way here: it {got}"),
            ShrinkError::NotWritable(why) => {
                write!(f, "the run's configuration cannot be written as a scenario: {why}")
            }
            ShrinkError::NoBudget => f.write_str("--max-runs must be at least 1"),
        }
    }
}

/// Runs candidates, each at most once, within the cap.
struct Tester<'a> {
    seed: u64,
    target: &'a Target,
    max_runs: u64,
    runs: u64,
    cap_reached: bool,
    /// Configuration hash → whether the candidate failed like the target, and its record; `None` when it could not
    /// be written as a scenario (and so was not run).
    seen: BTreeMap<String, Option<(bool, RunRecord)>>,
}

impl Tester<'_> {
    /// Whether `spec` fails like the target. A spec the scenario format cannot say counts as not failing.
    fn fails(&mut self, spec: &RunSpec) -> bool {
        let hash = spec.config_hash();
        if let Some(result) = self.seen.get(&hash) {
            return result.as_ref().is_some_and(|(fails, _)| *fails);
        }
        if scenario_toml(spec, self.seed, &[]).is_err() {
            self.seen.insert(hash, None);
            return false;
        }
        if self.runs >= self.max_runs {
            self.cap_reached = true;
            return false;
        }
        self.runs += 1;
        let identity = RunIdentity { source: "shrink".to_owned(), run_index: None, repro: String::new() };
        let record = runner::run(spec, self.seed, &identity, false).record;
        let fails = self.target.matches(&record);
        self.seen.insert(hash, Some((fails, record)));
        fails
    }

    /// The record of a spec that was run.
    fn record_of(&self, spec: &RunSpec) -> Option<&RunRecord> {
        self.seen.get(&spec.config_hash()).and_then(Option::as_ref).map(|(_, record)| record)
    }
}

fn with_steps(spec: &RunSpec, steps: &[TimedStep]) -> RunSpec {
    RunSpec { steps: steps.to_vec(), ..spec.clone() }
}

/// Splits `items` into `parts` contiguous chunks of near-equal length (the first ones one longer).
fn chunks<T: Clone>(items: &[T], parts: usize) -> Vec<Vec<T>> {
    let parts = parts.clamp(1, items.len().max(1));
    let (size, extra) = (items.len() / parts, items.len() % parts);
    let mut out = Vec::with_capacity(parts);
    let mut start = 0;
    for index in 0..parts {
        let end = start + size + usize::from(index < extra);
        out.push(items[start..end].to_vec());
        start = end;
    }
    out
}

/// Zeller's ddmin over the steps: the result fails like the target and removing any one of its steps would make it
/// pass (1-minimal), unless the cap stopped it first.
fn ddmin(tester: &mut Tester, spec: &RunSpec) -> Vec<TimedStep> {
    let mut current = spec.steps.clone();
    if current.is_empty() {
        return current;
    }
    if tester.fails(&with_steps(spec, &[])) {
        return Vec::new();
    }
    let mut parts = 2;
    while current.len() >= 2 && !tester.cap_reached {
        let pieces = chunks(&current, parts);
        let mut reduced = false;
        for piece in &pieces {
            if tester.fails(&with_steps(spec, piece)) {
                current = piece.clone();
                parts = 2;
                reduced = true;
                break;
            }
        }
        if !reduced && pieces.len() > 2 {
            for skip in 0..pieces.len() {
                let complement: Vec<TimedStep> = pieces
                    .iter()
                    .enumerate()
                    .filter(|(index, _)| *index != skip)
                    .flat_map(|(_, piece)| piece.iter().cloned())
                    .collect();
                if tester.fails(&with_steps(spec, &complement)) {
                    current = complement;
                    parts = (parts - 1).max(2);
                    reduced = true;
                    break;
                }
            }
        }
        if !reduced {
            if parts >= current.len() {
                break;
            }
            parts = (parts * 2).min(current.len());
        }
    }
    current
}

/// The knobs of a step, in name order: numeric fields that measure something, and fields that may be left out.
pub fn knobs(step: &Step) -> Vec<String> {
    let Ok(serde_json::Value::Object(fields)) = serde_json::to_value(step) else { return Vec::new() };
    let mut names: Vec<String> = fields
        .iter()
        .filter(|(name, value)| {
            name.as_str() != "kind"
                && !NAMING_KNOBS.contains(&name.as_str())
                && (value.is_number() || reduce(step, name).is_some())
        })
        .map(|(name, _)| name.clone())
        .collect();
    names.sort();
    names
}

/// One reduction of knob `name`: a number halved toward 0 (toward 1 for a count), or an optional field left out.
/// `None` when the knob is at its smallest, or is not a knob.
pub fn reduce(step: &Step, name: &str) -> Option<Step> {
    let serde_json::Value::Object(mut fields) = serde_json::to_value(step).ok()? else { return None };
    let value = fields.get(name)?.clone();
    let floor = if COUNT_KNOBS.contains(&name) { 1 } else { 0 };
    let reduced = match &value {
        serde_json::Value::Number(number) => {
            if let Some(unsigned) = number.as_u64() {
                let half = (unsigned / 2).max(floor);
                if half >= unsigned {
                    return None;
                }
                serde_json::Value::from(half)
            } else {
                let signed = number.as_i64()?;
                let half = signed / 2;
                if half == signed {
                    return None;
                }
                serde_json::Value::from(half)
            }
        }
        _ => {
            fields.remove(name);
            let dropped: Step = serde_json::from_value(serde_json::Value::Object(fields)).ok()?;
            return (dropped != *step).then_some(dropped);
        }
    };
    fields.insert(name.to_owned(), reduced);
    serde_json::from_value(serde_json::Value::Object(fields)).ok()
}

/// Halves the run's duration, then each knob of each step, for as long as the run still fails like the target.
fn shrink_knobs(tester: &mut Tester, mut spec: RunSpec) -> (RunSpec, u64) {
    let mut reduced = 0;
    loop {
        let candidate = RunSpec { duration_ms: spec.duration_ms / 2, ..spec.clone() };
        if candidate.duration_ms == 0 || !tester.fails(&candidate) {
            break;
        }
        spec = candidate;
        reduced += 1;
    }
    for index in 0..spec.steps.len() {
        for name in knobs(&spec.steps[index].step) {
            while let Some(step) = reduce(&spec.steps[index].step, &name) {
                let mut candidate = spec.clone();
                candidate.steps[index].step = step;
                if !tester.fails(&candidate) {
                    break;
                }
                spec = candidate;
                reduced += 1;
            }
        }
    }
    (spec, reduced)
}

fn fault_count(spec: &RunSpec) -> usize {
    spec.steps.iter().filter(|timed| timed.step.is_fault(&spec.network, |_| true)).count()
}

/// Shrinks `spec` run with `seed` to a smaller spec that still fails like `target`, in at most `max_runs` runs.
pub fn shrink(spec: &RunSpec, seed: u64, target: &Target, max_runs: u64) -> Result<Shrunk, ShrinkError> {
    if max_runs == 0 {
        return Err(ShrinkError::NoBudget);
    }
    scenario_toml(spec, seed, &[]).map_err(|error| ShrinkError::NotWritable(error.0))?;
    let mut tester = Tester { seed, target, max_runs, runs: 0, cap_reached: false, seen: BTreeMap::new() };
    if !tester.fails(spec) {
        let record = tester.record_of(spec).expect("the original was run");
        let got = match Target::of(record) {
            Ok(other) => format!("fails with {other}, not {target}"),
            Err(_) => format!("passes, where the record says {target}"),
        };
        return Err(ShrinkError::DoesNotReproduce { got });
    }
    let steps = ddmin(&mut tester, spec);
    let (shrunk, knobs_reduced) = shrink_knobs(&mut tester, with_steps(spec, &steps));
    let record = tester.record_of(&shrunk).cloned().expect("every accepted candidate failed and was recorded");
    Ok(Shrunk {
        steps_before: spec.steps.len(),
        steps_after: shrunk.steps.len(),
        faults_before: fault_count(spec),
        faults_after: fault_count(&shrunk),
        knobs_reduced,
        runs: tester.runs,
        cap_reached: tester.cap_reached,
        spec: shrunk,
        record,
    })
}

/// Why `fleetsim shrink` stopped: bad input (exit 2) or an output it could not write (exit 3).
#[derive(Debug)]
pub enum CommandError {
    BadInput(SpecError),
    Output { path: PathBuf, error: std::io::Error },
}

impl From<reports::read::ReadError> for CommandError {
    fn from(error: reports::read::ReadError) -> Self {
        CommandError::BadInput(SpecError { path: error.path, position: None, message: error.reason })
    }
}

/// `fleetsim shrink <report.json> --run K [-o FILE] [--max-runs N]`: shrinks run `run` of the report and writes the
/// scenario to `output`, or to `out` when there is none. Returns the exit code: 0 when a scenario was written.
pub fn shrink_command(
    report: &Path,
    run: u64,
    output: Option<&Path>,
    max_runs: u64,
    out: &mut dyn std::io::Write,
) -> Result<i32, CommandError> {
    let name = report.display().to_string();
    let bad = |message: String| CommandError::BadInput(SpecError { path: name.clone(), position: None, message });
    let campaign = reports::read::read_report(report)?;
    let Some(record) = campaign.runs.iter().find(|record| record.run_index == Some(run)) else {
        let held = match campaign.runs.len() {
            0 => "no runs".to_owned(),
            count => format!("runs 0 to {}", count - 1),
        };
        return Err(bad(format!("--run {run}: the report holds {held} (of {})", campaign.campaign)));
    };
    let target = Target::of(record).map_err(|why| bad(format!("run {run}: {why}")))?;
    let spec = spec_from_config(&record.config).map_err(|error| bad(format!("run {run}: {error}")))?;
    if spec.config_hash() != record.config_hash {
        return Err(bad(format!(
            "run {run}: its config does not resolve to its config_hash; the report was written by fleetsim {} at \
             commit {}, this is {} at commit {}",
            record.tool_version,
            record.commit,
            runner::TOOL_VERSION,
            runner::commit()
        )));
    }
    let spec = RunSpec {
        source: campaign.campaign.clone(),
        description: format!("shrunk from run {run} of {}: still fails {target}", campaign.campaign),
        ..spec
    };
    let shrunk = shrink(&spec, record.seed, &target, max_runs).map_err(|error| {
        let mut message = format!("run {run}: {error}");
        if matches!(error, ShrinkError::DoesNotReproduce { .. }) && record.commit != runner::commit() {
            message.push_str(&format!(
                " (the report was written at commit {}, this fleetsim is at commit {})",
                record.commit,
                runner::commit()
            ));
        }
        bad(message)
    })?;

    let summary = summary_lines(&shrunk, max_runs);
    let mut comment = vec![format!(
        "Shrunk by `fleetsim shrink {name} --run {run}` from run {run} of {} (seed {}): it still fails {target}.",
        campaign.campaign, record.seed
    )];
    comment.extend(summary.iter().cloned());
    comment.push("Replay it with `fleetsim run <this file>`; it is an ordinary scenario file.".to_owned());
    let text = scenario_toml(&shrunk.spec, record.seed, &comment)
        .map_err(|error| bad(format!("run {run}: the shrunk scenario cannot be written: {error}")))?;
    let write_out = |text: &str, out: &mut dyn std::io::Write| {
        out.write_all(text.as_bytes()).map_err(|error| CommandError::Output { path: PathBuf::from("<stdout>"), error })
    };
    match output {
        Some(file) => {
            reports::write_atomic(file, text.as_bytes())
                .map_err(|error| CommandError::Output { path: file.to_owned(), error })?;
            let mut lines = format!("run {run} of {} (seed {}) fails {target}\n", campaign.campaign, record.seed);
            for line in &summary {
                lines.push_str(&format!("  {line}\n"));
            }
            lines.push_str(&format!("  wrote {}\n  reproduce: fleetsim run {}\n", file.display(), file.display()));
            write_out(&lines, out)?;
        }
        None => write_out(&text, out)?,
    }
    Ok(crate::model::exit::EXIT_PASS)
}

/// `removed 7 of 9 steps (5 of 6 faults), reduced 3 knobs, in 41 runs`, and a line when the cap was reached.
fn summary_lines(shrunk: &Shrunk, max_runs: u64) -> Vec<String> {
    let mut lines = vec![format!(
        "removed {} of {} steps ({} of {} faults), reduced {} knobs, in {} runs",
        shrunk.steps_before - shrunk.steps_after,
        shrunk.steps_before,
        shrunk.faults_before - shrunk.faults_after,
        shrunk.faults_before,
        shrunk.knobs_reduced,
        shrunk.runs
    )];
    if shrunk.cap_reached {
        lines.push(format!(
            "the cap of {max_runs} runs was reached before the shrink was done: it may shrink further with a larger \
             --max-runs"
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::spec::parse_scenario;

    /// The legacy controller breaks the availability floor on a healthy fleet (see
    /// `scenarios/legacy-rollout-without-faults-breaks-the-rcca-invariants.toml`): the failure needs the
    /// `start_rollout` step and none of the harmless steps around it.
    const FAILING: &str = r#"
schema_version = 1
description = "legacy rollout among harmless steps"
seed = 111
duration_ms_max = 1_200_000

[fleet]
nodes = 4
lane_size = 2
availability_floor = 2

[engine]
rollout_policy = "legacy"

[[step]]
at_ms = 10_000
kind = "link_latency"
a = "node-03"
b = "hub"
min_ms = 2
max_ms = 30

[[step]]
at_ms = 20_000
kind = "ssh_timeout"
target = "node-04"
count = 1

[[step]]
at_ms = 30_000
kind = "clock_skew"
target = "node-02"
skew_ms = 40

[[step]]
at_ms = 60_000
kind = "start_rollout"
revision = "2944aebb"

[[step]]
at_ms = 400_000
kind = "link_latency"
a = "node-03"
b = "hub"
min_ms = 1
max_ms = 20

[[step]]
at_ms = 500_000
kind = "clock_skew"
target = "node-02"
skew_ms = 0
"#;

    fn failing() -> (RunSpec, u64, RunRecord) {
        let scenario = parse_scenario("failing.toml", FAILING).unwrap();
        let identity = RunIdentity { source: "failing.toml".into(), run_index: None, repro: String::new() };
        let record = runner::run(&scenario.run, scenario.seed, &identity, false).record;
        (scenario.run, scenario.seed, record)
    }

    #[test]
    fn a_failing_run_shrinks_to_fewer_steps_that_fail_the_same_oracle_and_the_file_parses() {
        let (spec, seed, record) = failing();
        let target = Target::of(&record).unwrap();
        assert_eq!(target.kind, FailureKind::SafetyViolation, "{record:#?}");
        let shrunk = shrink(&spec, seed, &target, DEFAULT_MAX_RUNS).unwrap();
        assert!(!shrunk.cap_reached);
        assert!(shrunk.steps_after < shrunk.steps_before, "{:?}", shrunk.spec.steps);
        assert!(
            matches!(shrunk.spec.steps.as_slice(), [TimedStep { at_ms: 60_000, step: Step::StartRollout { .. } }]),
            "the rollout alone is what fails: {:?}",
            shrunk.spec.steps
        );
        assert_eq!(
            (shrunk.faults_before, shrunk.faults_after),
            (3, 0),
            "latency, timeout, skew; their heals are not faults"
        );
        assert!(shrunk.spec.duration_ms < spec.duration_ms, "the run's duration is a knob too");
        assert!(target.matches(&shrunk.record));
        assert!(shrunk.runs <= DEFAULT_MAX_RUNS && shrunk.runs > 1);

        let text = scenario_toml(&shrunk.spec, seed, &["shrunk".to_owned()]).unwrap();
        let again = parse_scenario("shrunk.toml", &text).unwrap();
        let identity = RunIdentity { source: "shrunk.toml".into(), run_index: None, repro: String::new() };
        let replay = runner::run(&again.run, again.seed, &identity, false).record;
        assert!(target.matches(&replay), "the written file fails the same way: {replay:#?}");
    }

    #[test]
    fn shrinking_is_deterministic_and_honours_the_cap() {
        let (spec, seed, record) = failing();
        let target = Target::of(&record).unwrap();
        let a = shrink(&spec, seed, &target, 4).unwrap();
        let b = shrink(&spec, seed, &target, 4).unwrap();
        assert_eq!(scenario_toml(&a.spec, seed, &[]).unwrap(), scenario_toml(&b.spec, seed, &[]).unwrap());
        assert_eq!(a.runs, b.runs);
        assert_eq!(a.runs, 4, "the cap counts every candidate run");
        assert!(a.cap_reached);
        assert!(target.matches(&a.record), "what is kept at the cap still fails");
        assert_eq!(shrink(&spec, seed, &target, 0).unwrap_err(), ShrinkError::NoBudget);
    }

    #[test]
    fn a_run_that_does_not_fail_like_the_target_is_refused() {
        let (spec, seed, record) = failing();
        let mut target = Target::of(&record).unwrap();
        target.oracle = Some("no_such_oracle".to_owned());
        let error = shrink(&spec, seed, &target, 5).unwrap_err();
        assert!(
            matches!(&error, ShrinkError::DoesNotReproduce { got } if got.starts_with("fails with safety_violation")),
            "{error}"
        );
        let passing = RunSpec { steps: Vec::new(), ..spec };
        let error = shrink(&passing, seed, &Target::of(&record).unwrap(), 5).unwrap_err();
        assert!(matches!(&error, ShrinkError::DoesNotReproduce { got } if got.starts_with("passes")), "{error}");
    }

    #[test]
    fn targets_name_the_first_unexpected_violation_of_the_verdict_property() {
        let (_, _, mut record) = failing();
        let first = record.violations.iter().find(|f| !f.expected && f.property == PropertyKind::Always).unwrap();
        let target = Target::of(&record).unwrap();
        assert_eq!(target.oracle.as_deref(), Some(first.oracle.as_str()));
        assert!(target.to_string().starts_with("safety_violation (first violated oracle "), "{target}");
        record.verdict = reports::Verdict::PASS;
        assert_eq!(Target::of(&record).unwrap_err(), "the run passed: nothing to shrink");
        assert!(!target.matches(&record));
    }

    #[test]
    fn knobs_halve_toward_zero_counts_toward_one_and_optional_fields_drop() {
        let timeout = Step::SshTimeout { target: "node-01".into(), count: 3 };
        assert_eq!(knobs(&timeout), ["count"]);
        assert_eq!(reduce(&timeout, "count"), Some(Step::SshTimeout { target: "node-01".into(), count: 1 }));
        assert_eq!(reduce(&Step::SshTimeout { target: "node-01".into(), count: 1 }, "count"), None);
        let skew = Step::ClockSkew { target: "hub".into(), skew_ms: -9 };
        assert_eq!(reduce(&skew, "skew_ms"), Some(Step::ClockSkew { target: "hub".into(), skew_ms: -4 }));
        let servfail = Step::ResolverServfail { zones: Some(vec!["maas".into()]) };
        assert_eq!(knobs(&servfail), ["zones"]);
        assert_eq!(reduce(&servfail, "zones"), Some(Step::ResolverServfail { zones: None }));
        assert_eq!(reduce(&Step::ResolverServfail { zones: None }, "zones"), None);
        assert!(knobs(&Step::CloseEpoch { epoch: 2 }).is_empty(), "an epoch number names an epoch");
        assert!(knobs(&Step::Partition { a: "hub".into(), b: "node-01".into() }).is_empty());
        assert!(knobs(&Step::RouteSwap).is_empty());
    }

    /// A one-run campaign report holding `record` as run 0.
    fn report_with(record: RunRecord) -> reports::CampaignReport {
        let record = RunRecord { run_index: Some(0), source: "campaigns/t.toml".into(), ..record };
        let runs = vec![record];
        reports::CampaignReport {
            schema_version: reports::SCHEMA_VERSION,
            tool_version: runner::TOOL_VERSION.to_owned(),
            commit: runner::commit().to_owned(),
            config_hash: "c".repeat(64),
            campaign: "campaigns/t.toml".into(),
            description: "t".into(),
            seed: 1,
            shard: None,
            summary: reports::summarize(&runs, &[], crate::model::digest::sha256_hex),
            runs,
        }
    }

    #[test]
    fn the_command_writes_a_scenario_that_parses_and_refuses_what_it_cannot_shrink() {
        let dir = tempfile::tempdir().unwrap();
        let (_, _, record) = failing();
        let report = dir.path().join("report.json");
        reports::write_json_atomic(&report, &report_with(record.clone())).unwrap();
        let output = dir.path().join("min.toml");
        let mut out = Vec::new();
        let code = shrink_command(&report, 0, Some(&output), DEFAULT_MAX_RUNS, &mut out).unwrap();
        assert_eq!(code, crate::model::exit::EXIT_PASS);
        let printed = String::from_utf8(out).unwrap();
        assert!(printed.contains("removed 5 of 6 steps (3 of 3 faults)"), "{printed}");
        assert!(printed.contains(&format!("reproduce: fleetsim run {}", output.display())), "{printed}");
        let scenario = crate::model::spec::load_scenario(&output).unwrap();
        assert_eq!(scenario.seed, record.seed);
        assert!(
            scenario.run.description.starts_with("shrunk from run 0 of campaigns/t.toml: still fails safety_violation")
        );
        let text = std::fs::read_to_string(&output).unwrap();
        assert!(text.starts_with("# Shrunk by `fleetsim shrink "), "{text}");

        // Without -o the scenario goes to the output stream, the same file.
        let mut out = Vec::new();
        shrink_command(&report, 0, None, DEFAULT_MAX_RUNS, &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), text, "shrinking twice writes the same file");

        let message = |result: Result<i32, CommandError>| match result {
            Err(CommandError::BadInput(error)) => error.to_string(),
            other => panic!("expected bad input, got {other:?}"),
        };
        let out_of_range = message(shrink_command(&report, 3, None, 10, &mut Vec::new()));
        assert!(
            out_of_range.ends_with("--run 3: the report holds runs 0 to 0 (of campaigns/t.toml)"),
            "{out_of_range}"
        );
        let missing = message(shrink_command(&dir.path().join("none.json"), 0, None, 10, &mut Vec::new()));
        assert!(missing.ends_with("none.json: no such file"), "{missing}");
        let passing = RunRecord {
            verdict: reports::Verdict::PASS,
            violations: vec![],
            violation_counts: BTreeMap::new(),
            ..record
        };
        let summary = report_with(passing);
        reports::write_json_atomic(&report, &summary).unwrap();
        let passed = message(shrink_command(&report, 0, None, 10, &mut Vec::new()));
        assert!(passed.ends_with("run 0: the run passed: nothing to shrink"), "{passed}");
    }

    #[test]
    fn ddmin_chunks_cover_every_item_once() {
        let items: Vec<u32> = (0..7).collect();
        for parts in 1..=9 {
            let pieces = chunks(&items, parts);
            assert_eq!(pieces.concat(), items);
            assert_eq!(pieces.len(), parts.min(7));
            assert!(pieces.iter().all(|piece| !piece.is_empty()));
        }
    }
}
