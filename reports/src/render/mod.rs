//! Renderers of a [`CampaignReport`]: a terminal summary ([`text`]), Markdown for a CI job summary or a pull-request
//! comment ([`markdown`]), JUnit XML ([`junit`]) and one self-contained HTML page with inline SVG plots ([`html`]).
//!
//! API Boundary: every renderer is a pure function of the report (no I/O, no clock), so its output is a snapshot.
//! Each one matches the record enums ([`Outcome`], [`FailureKind`], [`PropertyKind`]) exhaustively: a new variant
//! does not compile until every renderer says how to show it. What the report does not hold (per-lane verdicts,
//! availability series or matrix coverage in records written before they were kept) is said to be missing, never
//! made up.

mod html;
mod junit;
mod markdown;
mod text;

use std::collections::BTreeMap;

pub use html::html;
pub use junit::junit;
pub use markdown::markdown;
pub use text::text;

use crate::{CampaignReport, FailureKind, Firing, Outcome, PropertyKind, RunRecord, Verdict};

/// How many seeds a violation group names before `and N more`.
pub const FIRST_SEEDS: usize = 3;
/// How many failing runs a summary lists with their reproduce command before pointing at the report.
pub const FAILURES_LISTED: usize = 10;
/// The eventually-property that judges every rollout lane (see `docs/oracles.md`).
pub const LANE_ORACLE: &str = "every_lane_converged";

/// `7_200_000` → `2h 00m 00s`.
pub fn human_ms(ms: u64) -> String {
    let seconds = ms / 1000;
    format!("{}h {:02}m {:02}s", seconds / 3600, seconds / 60 % 60, seconds % 60)
}

/// A verdict as the renderers show it. A `fail` without a kind is not something fleetsim writes, but the JSON
/// allows it, so it is shown rather than guessed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Status {
    Pass,
    Fail(FailureKind),
    FailUnclassified,
}

impl Status {
    pub(crate) fn of(verdict: &Verdict) -> Status {
        match (verdict.outcome, verdict.kind) {
            (Outcome::Pass, _) => Status::Pass,
            (Outcome::Fail, Some(kind)) => Status::Fail(kind),
            (Outcome::Fail, None) => Status::FailUnclassified,
        }
    }

    /// `pass`, `safety_violation`, …, `fail`: a column or CSS class name.
    pub(crate) fn key(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail(kind) => kind.as_str(),
            Status::FailUnclassified => "fail",
        }
    }

    /// Every status, in column order: the heatmap always shows the four failure kinds, even at zero.
    pub(crate) const COLUMNS: [Status; 5] = [
        Status::Pass,
        Status::Fail(FailureKind::SafetyViolation),
        Status::Fail(FailureKind::LivenessFailure),
        Status::Fail(FailureKind::ExpectationUnmet),
        Status::Fail(FailureKind::Panic),
    ];
}

pub(crate) fn property_name(property: PropertyKind) -> &'static str {
    match property {
        PropertyKind::Always => "always",
        PropertyKind::Eventually => "eventually",
        PropertyKind::Sometimes => "sometimes",
    }
}

/// `run 3 seed 77`, or `seed 77` for a record outside a campaign.
pub(crate) fn run_name(run: &RunRecord) -> String {
    match run.run_index {
        Some(index) => format!("run {index} seed {}", run.seed),
        None => format!("seed {}", run.seed),
    }
}

/// `1 run`, `3 runs`.
pub(crate) fn count_of(count: u64, noun: &str) -> String {
    match (count, noun.strip_suffix('y')) {
        (1, _) => format!("1 {noun}"),
        (_, Some(stem)) => format!("{count} {stem}ies"),
        (_, None) => format!("{count} {noun}s"),
    }
}

/// Newlines folded to spaces, so a multi-line panic message stays on its line.
pub(crate) fn one_line(text: &str) -> String {
    text.split(['\r', '\n']).filter(|part| !part.is_empty()).collect::<Vec<_>>().join(" ")
}

fn describe(firing: &Firing) -> String {
    format!("{} at t={} ms: {}", firing.oracle, firing.t_ms, firing.evidence)
}

fn first_unexpected(run: &RunRecord, property: Option<PropertyKind>) -> Option<&Firing> {
    run.violations.iter().find(|firing| !firing.expected && property.is_none_or(|p| firing.property == p))
}

/// The one line that says why a run failed, from the evidence its verdict kind points at; `None` for a pass.
pub(crate) fn headline(run: &RunRecord) -> Option<String> {
    let violation = |property| first_unexpected(run, Some(property)).or_else(|| first_unexpected(run, None));
    match Status::of(&run.verdict) {
        Status::Pass => None,
        Status::Fail(FailureKind::SafetyViolation) => Some(
            violation(PropertyKind::Always)
                .map_or_else(|| "no unexpected violation kept in the record".to_owned(), describe),
        ),
        Status::Fail(FailureKind::LivenessFailure) => Some(
            violation(PropertyKind::Eventually)
                .map_or_else(|| "no unexpected violation kept in the record".to_owned(), describe),
        ),
        Status::Fail(FailureKind::ExpectationUnmet) => Some(if run.unmet.is_empty() {
            "no unmet expectation kept in the record".to_owned()
        } else {
            run.unmet.iter().map(|entry| crate::unmet_sentence(entry)).collect::<Vec<_>>().join("; ")
        }),
        Status::Fail(FailureKind::Panic) => {
            Some(format!("panic: {}", run.panic.as_deref().unwrap_or("no message kept in the record")))
        }
        Status::FailUnclassified => Some(
            first_unexpected(run, None)
                .map_or_else(|| "the record names no failure kind and no evidence".to_owned(), describe),
        ),
    }
}

/// The violations of one oracle over a campaign.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OracleGroup {
    /// From the kept firings; `None` if the records kept none (the counts alone).
    pub property: Option<PropertyKind>,
    /// Violations over all runs, uncapped.
    pub violations: u64,
    /// The runs it fired in, in run order, with whether every kept firing there was expected.
    pub runs: Vec<(String, bool)>,
}

impl OracleGroup {
    /// Whether every run it fired in expected it (an incident replay): not a failure.
    pub(crate) fn all_expected(&self) -> bool {
        self.runs.iter().all(|(_, expected)| *expected)
    }

    /// `run 2 seed 77, run 5 seed 12, run 9 seed 3 and 4 more`.
    pub(crate) fn first_seeds(&self) -> String {
        let names: Vec<String> = self
            .runs
            .iter()
            .take(FIRST_SEEDS)
            .map(|(name, expected)| if *expected { format!("{name} (expected)") } else { name.clone() })
            .collect();
        let mut text = names.join(", ");
        if self.runs.len() > FIRST_SEEDS {
            text.push_str(&format!(" and {} more", self.runs.len() - FIRST_SEEDS));
        }
        text
    }
}

/// What the report says about rollouts: which runs started a rollout (their configuration's `start_rollout`
/// steps), which violated [`LANE_ORACLE`], and the lanes the records kept (`lanes`, absent from older records), by
/// verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rollouts {
    pub runs_with_rollout: u64,
    pub runs_lanes_not_converged: u64,
    /// Lanes kept in the records by verdict (`uncommitted` for a lane without one).
    pub lanes: BTreeMap<String, u64>,
}

impl Rollouts {
    pub fn of(report: &CampaignReport) -> Rollouts {
        let mut rollouts = Rollouts { runs_with_rollout: 0, runs_lanes_not_converged: 0, lanes: BTreeMap::new() };
        for run in &report.runs {
            for lane in &run.lanes {
                *rollouts.lanes.entry(lane.verdict.clone().unwrap_or_else(|| "uncommitted".to_owned())).or_insert(0) +=
                    1;
            }
            // Timed steps, or steps waiting for a phase (`phase_steps`, absent when there are none).
            let started = ["steps", "phase_steps"].iter().any(|key| {
                run.config[key]
                    .as_array()
                    .is_some_and(|steps| steps.iter().any(|step| step["step"]["kind"] == "start_rollout"))
            });
            if started {
                rollouts.runs_with_rollout += 1;
            }
            if run.violation_counts.get(LANE_ORACLE).is_some_and(|count| *count > 0) {
                rollouts.runs_lanes_not_converged += 1;
            }
        }
        rollouts
    }

    /// One sentence for the summaries. It does not claim convergence: a run without a [`LANE_ORACLE`] violation
    /// may not have had the oracle armed.
    pub(crate) fn sentence(&self, runs: u64) -> String {
        if self.runs_with_rollout == 0 {
            return format!("no run started a rollout ({runs} runs), so there are no lanes to converge");
        }
        let lanes = if self.lanes.is_empty() {
            "per-lane verdicts are not in report.json".to_owned()
        } else {
            let total: u64 = self.lanes.values().sum();
            let verdicts: Vec<String> =
                self.lanes.iter().map(|(verdict, count)| format!("{count} {verdict}")).collect();
            format!("{} recorded: {}", count_of(total, "lane"), verdicts.join(", "))
        };
        format!(
            "{} of {runs} runs started a rollout; {LANE_ORACLE} was violated in {}; {lanes}",
            self.runs_with_rollout,
            count_of(self.runs_lanes_not_converged, "run")
        )
    }
}

/// The all-selected account in one sentence: every selected node of every rollout by outcome, and the rollouts by
/// how they ended. `None` when no record holds an account.
pub(crate) fn nodes_sentence(report: &CampaignReport) -> Option<String> {
    let nodes = &report.summary.rollout_nodes;
    if nodes.is_empty() {
        return None;
    }
    let selected = nodes.values().fold(0u64, |sum, count| sum.saturating_add(*count));
    let by_outcome: Vec<String> = crate::NODE_OUTCOMES
        .iter()
        .filter_map(|outcome| nodes.get(*outcome).filter(|count| **count > 0).map(|count| format!("{count} {outcome}")))
        .collect();
    let mut ends: BTreeMap<String, u64> = BTreeMap::new();
    for account in report.runs.iter().flat_map(|run| &run.rollouts) {
        *ends.entry(account.outcome.split(':').next().unwrap_or_default().to_owned()).or_insert(0) += 1;
    }
    let rollouts: u64 = ends.values().sum();
    let ends: Vec<String> = ends.iter().map(|(end, count)| format!("{count} {end}")).collect();
    Some(format!(
        "{selected} selected nodes over {}: {} ({} per mille upgraded); the rollouts ended {}",
        count_of(rollouts, "rollout"),
        by_outcome.join(", "),
        nodes.get("upgraded").copied().unwrap_or(0) * 1000 / selected.max(1),
        ends.join(", ")
    ))
}

/// Violations by oracle, in oracle order.
pub(crate) fn oracle_groups(report: &CampaignReport) -> BTreeMap<String, OracleGroup> {
    let mut groups: BTreeMap<String, OracleGroup> = BTreeMap::new();
    for run in &report.runs {
        for (oracle, count) in &run.violation_counts {
            let kept: Vec<&Firing> = run.violations.iter().filter(|firing| &firing.oracle == oracle).collect();
            let group =
                groups.entry(oracle.clone()).or_insert(OracleGroup { property: None, violations: 0, runs: Vec::new() });
            group.violations += count;
            group.property = group.property.or(kept.first().map(|firing| firing.property));
            group.runs.push((run_name(run), !kept.is_empty() && kept.iter().all(|firing| firing.expected)));
        }
    }
    groups
}

/// Fault kind × verdict: in how many runs each fault kind fired, by the run's verdict. Runs without any fault are
/// counted in the row `(no fault)`, which comes last.
pub(crate) fn fault_outcomes(report: &CampaignReport) -> Vec<(String, BTreeMap<Status, u64>)> {
    let mut rows: BTreeMap<String, BTreeMap<Status, u64>> = BTreeMap::new();
    let mut none: BTreeMap<Status, u64> = BTreeMap::new();
    for run in &report.runs {
        let status = Status::of(&run.verdict);
        let fired: Vec<&String> = run.faults.iter().filter(|(_, count)| **count > 0).map(|(kind, _)| kind).collect();
        if fired.is_empty() {
            *none.entry(status).or_insert(0) += 1;
        }
        for kind in fired {
            *rows.entry(kind.clone()).or_default().entry(status).or_insert(0) += 1;
        }
    }
    let mut rows: Vec<(String, BTreeMap<Status, u64>)> = rows.into_iter().collect();
    if !none.is_empty() {
        rows.push(("(no fault)".to_owned(), none));
    }
    rows
}

/// The status columns a heatmap shows: the fixed ones, plus `fail` only when a record has a fail without a kind.
pub(crate) fn status_columns(report: &CampaignReport) -> Vec<Status> {
    let mut columns = Status::COLUMNS.to_vec();
    if report.runs.iter().any(|run| Status::of(&run.verdict) == Status::FailUnclassified) {
        columns.push(Status::FailUnclassified);
    }
    columns
}

/// How many runs a per-run plot draws.
pub const RUNS_PLOTTED: usize = 4;

/// The runs a per-run plot draws: those `has` data for, the failing ones first, then the others, each in run order,
/// at most [`RUNS_PLOTTED`].
pub(crate) fn plotted_runs(report: &CampaignReport, has: impl Fn(&RunRecord) -> bool) -> Vec<&RunRecord> {
    let with_data = || report.runs.iter().filter(|run| has(run));
    with_data()
        .filter(|run| !run.verdict.passed())
        .chain(with_data().filter(|run| run.verdict.passed()))
        .take(RUNS_PLOTTED)
        .collect()
}

pub(crate) fn failing_runs(report: &CampaignReport) -> Vec<&RunRecord> {
    report.runs.iter().filter(|run| !run.verdict.passed()).collect()
}

/// `PASS`, or `FAIL` with why: failed runs, sometimes-properties never reached, or both.
pub(crate) fn verdict_line(report: &CampaignReport) -> String {
    let summary = &report.summary;
    let mut reasons = Vec::new();
    if summary.failed > 0 {
        reasons.push(format!("{} failed", count_of(summary.failed, "run")));
    }
    if !summary.sometimes_never_reached.is_empty() {
        reasons.push(format!(
            "{} never reached",
            count_of(summary.sometimes_never_reached.len() as u64, "sometimes-property")
        ));
    }
    if reasons.is_empty() { "PASS".to_owned() } else { format!("FAIL ({})", reasons.join(", ")) }
}

/// `safety_violation 2, panic 1`, or `none`.
pub(crate) fn failure_counts(report: &CampaignReport) -> String {
    let counts: Vec<String> = report.summary.failures.iter().map(|(kind, count)| format!("{kind} {count}")).collect();
    if counts.is_empty() { "none".to_owned() } else { counts.join(", ") }
}

/// The summary's faults in one line: each kind injected, and how many of those were effective
/// (`ssh_timeout 12 (9 effective)`), or `none`.
pub fn faults_sentence(summary: &crate::Summary) -> String {
    if summary.faults.is_empty() {
        return "none".to_owned();
    }
    let kinds: Vec<String> = summary
        .faults
        .iter()
        .map(|(kind, count)| {
            let effective = summary.faults_effective.get(kind).copied().unwrap_or(0);
            format!("{kind} {count} ({effective} effective)")
        })
        .collect();
    kinds.join(", ")
}

/// How many logged faults of `kind` landed in coarse `phase`, whatever their effect.
pub fn landed_in(summary: &crate::Summary, kind: &str, phase: &str) -> u64 {
    summary
        .fault_landings
        .iter()
        .filter(|(key, _)| {
            let mut parts = key.split('/');
            parts.next() == Some(kind) && parts.next() == Some(phase)
        })
        .map(|(_, count)| *count)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_time_has_hours_minutes_and_seconds() {
        assert_eq!(human_ms(7_200_000), "2h 00m 00s");
        assert_eq!(human_ms(3_661_999), "1h 01m 01s");
        assert_eq!(human_ms(0), "0h 00m 00s");
    }

    #[test]
    fn a_fail_without_a_kind_is_its_own_status() {
        let verdict = Verdict { outcome: Outcome::Fail, kind: None };
        assert_eq!(Status::of(&verdict), Status::FailUnclassified);
        assert_eq!(Status::of(&Verdict::PASS), Status::Pass);
        assert_eq!(Status::of(&Verdict::fail(FailureKind::Panic)).key(), "panic");
    }
}
