//! One self-contained HTML page of a campaign: inline CSS and inline SVG only, no script, no font, no link, no
//! reference to anything outside the file, so it opens the same from a CI artifact store as from a laptop offline.
//!
//! Every plot is derived from what `report.json` holds: pass/fail per run, violations by oracle, the fault kind ×
//! verdict heatmap, the sometimes-properties reached, and from the per-run series the records carry — availability
//! over virtual time with the floor (`availability`), the per-batch telemetry of each rollout (`batches`), the lane timeline of each rollout (`lanes`), the time to
//! converge of lanes and onboarding workflows (`lanes`, `workflows`), the effective faults by kind and the phase they
//! landed in (`summary.fault_landings`), fault kind × lifecycle phase (`fault_phases`) and stage × failure class against the recovery matrix (`matrix_pairs`, `summary.matrix_listed`). The per-run
//! plots draw at most [`super::RUNS_PLOTTED`] runs, the failing ones first, and say so. A plot whose data a report
//! does not hold (one written before the series were kept, or a campaign without rollouts or onboarding) says so
//! and draws nothing: nothing here is invented.

use std::collections::{BTreeMap, BTreeSet};

use crate::{CampaignReport, FAULT_EFFECTS, FAULT_PHASES, FailureKind, PHASES, RunRecord};

use super::junit::xml_escape as esc;
use super::{
    FAILURES_LISTED, Rollouts, Status, count_of, failing_runs, failure_counts, fault_outcomes, headline, human_ms,
    one_line, oracle_groups, plotted_runs, property_name, run_name, status_columns, verdict_line,
};

const STYLE: &str = "
body { font-family: system-ui, -apple-system, 'Segoe UI', sans-serif; margin: 2rem auto; max-width: 72rem;
  padding: 0 1rem; color: #1f2328; background: #fff; }
h1 { font-size: 1.5rem; margin-bottom: 0.25rem; }
h2 { font-size: 1.15rem; margin-top: 2rem; border-bottom: 1px solid #d0d7de; padding-bottom: 0.25rem; }
h3 { font-size: 1rem; margin-bottom: 0.25rem; }
table { border-collapse: collapse; margin: 0.5rem 0; }
th, td { border: 1px solid #d0d7de; padding: 0.25rem 0.5rem; text-align: left; vertical-align: top; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
code { font-family: ui-monospace, 'SFMono-Regular', Menlo, Consolas, monospace; font-size: 0.85em;
  overflow-wrap: anywhere; }
.verdict { display: inline-block; padding: 0.15rem 0.6rem; border-radius: 0.3rem; color: #fff; font-weight: 600; }
.verdict.pass { background: #1a7f37; } .verdict.fail { background: #cf222e; }
.missing { color: #57606a; border-left: 4px solid #d0d7de; padding: 0.25rem 0.75rem; margin: 0.5rem 0; }
.legend span { display: inline-block; margin-right: 1rem; }
.legend i { display: inline-block; width: 0.8rem; height: 0.8rem; margin-right: 0.3rem; vertical-align: -0.1rem; }
svg { display: block; margin: 0.5rem 0; max-width: 100%; height: auto; }
svg text { font-size: 12px; fill: #1f2328; font-family: system-ui, sans-serif; }
svg text.on-dark { fill: #fff; }
.s-pass { fill: #1a7f37; background: #1a7f37; }
.s-safety_violation { fill: #cf222e; background: #cf222e; }
.s-liveness_failure { fill: #bc4c00; background: #bc4c00; }
.s-expectation_unmet { fill: #8250df; background: #8250df; }
.s-panic { fill: #24292f; background: #24292f; }
.s-fail { fill: #6e7781; background: #6e7781; }
.s-expected { fill: #8c959f; background: #8c959f; }
.s-zero { fill: #f6f8fa; }
.v-successor { fill: #1a7f37; background: #1a7f37; } .v-prior { fill: #8c959f; background: #8c959f; }
.v-stuck { fill: #cf222e; background: #cf222e; } .v-uncommitted { fill: #bc4c00; background: #bc4c00; }
.m-listed { fill: #fff; stroke: #57606a; stroke-dasharray: 3 2; background: #fff; }
.m-unlisted { fill: #bc4c00; background: #bc4c00; }
.axis { stroke: #57606a; stroke-width: 1; } .grid { stroke: #d0d7de; stroke-width: 1; }
.series { fill: none; stroke: #0969da; stroke-width: 1.5; }
.floor { stroke: #cf222e; stroke-width: 1.5; stroke-dasharray: 6 3; }
.cut { fill: #d0d7de; fill-opacity: 0.5; }
.remaining { fill: none; stroke: #8250df; stroke-width: 1.5; stroke-dasharray: 2 2; }
.batch { fill: #0969da; } .batch-revert { fill: #cf222e; }
";

/// Per-mille as an SVG/CSS decimal: `1000` → `1`, `250` → `0.250`.
fn ratio(per_mille: u64) -> String {
    if per_mille >= 1000 { "1".to_owned() } else { format!("0.{per_mille:03}") }
}

/// A label cut to `max` characters, with an ellipsis.
fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_owned()
    } else {
        let mut clipped: String = text.chars().take(max.saturating_sub(1)).collect();
        clipped.push('…');
        clipped
    }
}

fn status_class(status: Status) -> String {
    format!("s-{}", status.key())
}

fn status_label(status: Status) -> &'static str {
    match status {
        Status::Pass => "pass",
        Status::Fail(FailureKind::SafetyViolation) => "safety violation",
        Status::Fail(FailureKind::LivenessFailure) => "liveness failure",
        Status::Fail(FailureKind::ExpectationUnmet) => "expectation unmet",
        Status::Fail(FailureKind::Panic) => "panic",
        Status::FailUnclassified => "fail (no kind)",
    }
}

fn legend(statuses: &[Status]) -> String {
    let mut html = String::from("<p class=\"legend\">");
    for status in statuses {
        html.push_str(&format!("<span><i class=\"{}\"></i>{}</span>", status_class(*status), status_label(*status)));
    }
    html.push_str("</p>\n");
    html
}

/// One square per run, in run order, coloured by verdict, 50 a row.
fn runs_strip(report: &CampaignReport) -> String {
    const CELL: u64 = 14;
    const STEP: u64 = 16;
    const PER_ROW: u64 = 50;
    let count = report.runs.len() as u64;
    if count == 0 {
        return "<p class=\"missing\">the report holds no runs</p>\n".to_owned();
    }
    let columns = count.min(PER_ROW);
    let rows = count.div_ceil(PER_ROW);
    let (width, height) = (columns * STEP, rows * STEP);
    let mut svg = format!(
        "<svg width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" role=\"img\" \
         aria-label=\"verdict of each of the {count} runs\">\n"
    );
    for (position, run) in (0u64..).zip(&report.runs) {
        let status = Status::of(&run.verdict);
        let (x, y) = (position % PER_ROW * STEP, position / PER_ROW * STEP);
        svg.push_str(&format!(
            "<rect x=\"{x}\" y=\"{y}\" width=\"{CELL}\" height=\"{CELL}\" rx=\"2\" class=\"{}\"><title>{}: {}</title></rect>\n",
            status_class(status),
            esc(&run_name(run)),
            esc(&run.verdict.label())
        ));
    }
    svg.push_str("</svg>\n");
    svg
}

/// Horizontal bars: `(label, value, class, tooltip)`, scaled to the largest value or to `scale_max`.
fn bars(rows: &[(String, u64, String, String)], scale_max: Option<u64>, aria: &str) -> String {
    const LABEL: u64 = 290;
    const BAR: u64 = 420;
    const ROW: u64 = 22;
    let max = scale_max.unwrap_or_else(|| rows.iter().map(|row| row.1).max().unwrap_or(0)).max(1);
    let width = LABEL + BAR + 80;
    let height = rows.len() as u64 * ROW;
    let mut svg = format!(
        "<svg width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" role=\"img\" aria-label=\"{}\">\n",
        esc(aria)
    );
    for (index, (label, value, class, tooltip)) in (0u64..).zip(rows) {
        let y = index * ROW;
        let length = if *value == 0 { 0 } else { (value * BAR / max).max(2) };
        svg.push_str(&format!(
            "<g><title>{}</title><text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\
             <rect x=\"{LABEL}\" y=\"{}\" width=\"{length}\" height=\"{}\" class=\"{class}\"></rect>\
             <text x=\"{}\" y=\"{}\">{value}</text></g>\n",
            esc(tooltip),
            LABEL - 8,
            y + 15,
            esc(&clip(label, 40)),
            y + 3,
            ROW - 6,
            LABEL + length + 6,
            y + 15
        ));
    }
    svg.push_str("</svg>\n");
    svg
}

fn violations_section(report: &CampaignReport) -> String {
    let groups = oracle_groups(report);
    let mut html = String::from("<section id=\"violations\">\n<h2>Violations by oracle</h2>\n");
    if groups.is_empty() {
        html.push_str(&format!("<p>No oracle was violated in {} runs.</p>\n", report.summary.runs));
    } else {
        let rows: Vec<(String, u64, String, String)> = groups
            .iter()
            .map(|(oracle, group)| {
                let property = group.property.map_or("?", property_name);
                let class = if group.all_expected() { "s-expected" } else { "s-safety_violation" };
                let tooltip = format!(
                    "{oracle} ({property}): {} in {}: {}",
                    count_of(group.violations, "violation"),
                    count_of(group.runs.len() as u64, "run"),
                    group.first_seeds()
                );
                (oracle.clone(), group.violations, class.to_owned(), tooltip)
            })
            .collect();
        html.push_str(&bars(&rows, None, "violations by oracle, uncapped counts over all runs"));
        html.push_str("<p class=\"legend\"><span><i class=\"s-safety_violation\"></i>unexpected</span>");
        html.push_str("<span><i class=\"s-expected\"></i>expected by the scenario in every run</span></p>\n");
        html.push_str(
            "<table>\n<tr><th>oracle</th><th>type</th><th>violations</th><th>runs</th><th>first seeds</th></tr>\n",
        );
        for (oracle, group) in &groups {
            html.push_str(&format!(
                "<tr><td><code>{}</code></td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td></tr>\n",
                esc(oracle),
                group.property.map_or("?", property_name),
                group.violations,
                group.runs.len(),
                esc(&group.first_seeds())
            ));
        }
        html.push_str("</table>\n");
    }
    html.push_str("</section>\n");
    html
}

fn heatmap_section(report: &CampaignReport) -> String {
    const LABEL: u64 = 200;
    const CELL_W: u64 = 112;
    const CELL_H: u64 = 26;
    const HEAD: u64 = 24;
    let rows = fault_outcomes(report);
    let columns = status_columns(report);
    let mut html = String::from("<section id=\"coverage\">\n<h2>Coverage: fault kind × verdict</h2>\n");
    html.push_str(
        "<p>Each cell counts the runs in which that fault kind fired at least once and that ended with that verdict. \
         A fault kind the campaign never fired has no row.</p>\n",
    );
    if rows.is_empty() {
        html.push_str("<p class=\"missing\">the report holds no runs</p>\n</section>\n");
        return html;
    }
    let max = rows.iter().flat_map(|(_, cells)| cells.values().copied()).max().unwrap_or(0).max(1);
    let width = LABEL + CELL_W * columns.len() as u64;
    let height = HEAD + CELL_H * rows.len() as u64;
    html.push_str(&format!(
        "<svg width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" role=\"img\" \
         aria-label=\"runs by fault kind and verdict\">\n"
    ));
    for (index, status) in (0u64..).zip(&columns) {
        html.push_str(&format!(
            "<text x=\"{}\" y=\"16\" text-anchor=\"middle\">{}</text>\n",
            LABEL + index * CELL_W + CELL_W / 2,
            status_label(*status)
        ));
    }
    for (row, (kind, cells)) in (0u64..).zip(&rows) {
        let y = HEAD + row * CELL_H;
        html.push_str(&format!(
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n",
            LABEL - 8,
            y + 17,
            esc(&clip(kind, 28))
        ));
        for (column, status) in (0u64..).zip(&columns) {
            let count = cells.get(status).copied().unwrap_or(0);
            let x = LABEL + column * CELL_W;
            let (class, opacity, text_class) = if count == 0 {
                ("s-zero".to_owned(), "1".to_owned(), "")
            } else {
                let per_mille = 250 + 750 * count / max;
                (status_class(*status), ratio(per_mille), if per_mille >= 600 { " class=\"on-dark\"" } else { "" })
            };
            html.push_str(&format!(
                "<g><title>{}, {}: {}</title><rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" \
                 class=\"{class}\" fill-opacity=\"{opacity}\" stroke=\"#d0d7de\"></rect>\
                 <text x=\"{}\" y=\"{}\" text-anchor=\"middle\"{text_class}>{count}</text></g>\n",
                esc(kind),
                status_label(*status),
                count_of(count, "run"),
                x + 1,
                y + 1,
                CELL_W - 2,
                CELL_H - 2,
                x + CELL_W / 2,
                y + 17
            ));
        }
    }
    html.push_str("</svg>\n</section>\n");
    html
}

fn sometimes_section(report: &CampaignReport) -> String {
    let summary = &report.summary;
    let mut html = String::from("<section id=\"sometimes\">\n<h2>Sometimes-properties reached</h2>\n");
    if summary.sometimes_reached.is_empty() {
        html.push_str("<p>The campaign names no sometimes-property.</p>\n</section>\n");
        return html;
    }
    let rows: Vec<(String, u64, String, String)> = summary
        .sometimes_reached
        .iter()
        .map(|(name, runs)| {
            let class = if *runs == 0 { "s-safety_violation" } else { "s-pass" };
            let tooltip = if *runs == 0 {
                format!("{name}: never reached, which fails the campaign")
            } else {
                format!("{name}: reached in {runs} of {} runs", summary.runs)
            };
            (name.clone(), *runs, class.to_owned(), tooltip)
        })
        .collect();
    html.push_str(&bars(&rows, Some(summary.runs), "runs that reached each sometimes-property, out of all runs"));
    if !summary.sometimes_never_reached.is_empty() {
        let names: Vec<String> =
            summary.sometimes_never_reached.iter().map(|name| format!("<code>{}</code>", esc(name))).collect();
        html.push_str(&format!(
            "<p>Never reached, so the campaign fails: {}. It proves nothing about a state it never visited.</p>\n",
            names.join(", ")
        ));
    }
    html.push_str("</section>\n");
    html
}

fn failures_section(report: &CampaignReport) -> String {
    let failures = failing_runs(report);
    let mut html = String::from("<section id=\"failures\">\n<h2>Failing runs</h2>\n");
    if failures.is_empty() {
        html.push_str("<p>None.</p>\n</section>\n");
        return html;
    }
    html.push_str("<table>\n<tr><th>run</th><th>verdict</th><th>why</th><th>reproduce</th></tr>\n");
    for run in failures.iter().take(FAILURES_LISTED) {
        let status = Status::of(&run.verdict);
        html.push_str(&format!(
            "<tr><td>{}</td><td><span class=\"legend\"><i class=\"{}\"></i></span>{}</td><td>{}</td>\
             <td><code>{}</code></td></tr>\n",
            esc(&run_name(run)),
            status_class(status),
            status_label(status),
            esc(&one_line(&headline(run).unwrap_or_default())),
            esc(&run.repro)
        ));
    }
    html.push_str("</table>\n");
    if failures.len() > FAILURES_LISTED {
        html.push_str(&format!("<p>… and {} more failing runs in the report.</p>\n", failures.len() - FAILURES_LISTED));
    }
    html.push_str("</section>\n");
    html
}

/// `(left, top, width, height)` of a plot's drawing area inside its SVG.
const PLOT: (u64, u64, u64, u64) = (56, 10, 640, 150);

/// A time axis from 0 to `end_ms` under a plot: ticks at five points, labelled in minutes.
fn time_axis(end_ms: u64) -> String {
    let (left, top, width, height) = PLOT;
    let bottom = top + height;
    let mut svg =
        format!("<line x1=\"{left}\" y1=\"{bottom}\" x2=\"{}\" y2=\"{bottom}\" class=\"axis\"></line>\n", left + width);
    for tick in 0..=4u64 {
        let x = left + width * tick / 4;
        let t_ms = end_ms * tick / 4;
        svg.push_str(&format!(
            "<line x1=\"{x}\" y1=\"{bottom}\" x2=\"{x}\" y2=\"{}\" class=\"axis\"></line>\
             <text x=\"{x}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
            bottom + 4,
            bottom + 17,
            minutes(t_ms)
        ));
    }
    svg
}

/// `90 s`, `12.5 min`, `3.2 h`: a duration short enough for an axis label.
fn minutes(ms: u64) -> String {
    if ms < 120_000 {
        format!("{} s", ms / 1000)
    } else if ms < 7_200_000 {
        format!("{}.{} min", ms / 60_000, ms % 60_000 / 6_000)
    } else {
        format!("{}.{} h", ms / 3_600_000, ms % 3_600_000 / 360_000)
    }
}

/// A per-run plot's opening: its `<svg>` (labelled `what`, the run's name) and the grid lines at 0 and at `max`, the
/// top of its value axis.
fn plot_frame(what: &str, run: &RunRecord, max: u64) -> String {
    let (left, top, width, height) = PLOT;
    let (svg_width, svg_height) = (left + width + 16, top + height + 24);
    let mut svg = format!(
        "<svg width=\"{svg_width}\" height=\"{svg_height}\" viewBox=\"0 0 {svg_width} {svg_height}\" role=\"img\" \
         aria-label=\"{what}, {}\">\n",
        esc(&run_name(run))
    );
    for value in [0, max] {
        let y = plot_y(value, max);
        svg.push_str(&format!(
            "<line x1=\"{left}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" class=\"grid\"></line>\
             <text x=\"{}\" y=\"{}\" text-anchor=\"end\">{value}</text>\n",
            left + width,
            left - 6,
            y + 4
        ));
    }
    svg
}

/// The height of `value` on a value axis from 0 to `max` (a value above `max` is drawn at the top).
fn plot_y(value: u64, max: u64) -> u64 {
    let (_, top, _, height) = PLOT;
    top + height - value.min(max) * height / max.max(1)
}

fn x_of(t_ms: u64, end_ms: u64) -> u64 {
    let (left, _, width, _) = PLOT;
    left + t_ms.min(end_ms) * width / end_ms.max(1)
}

fn config_u64(run: &RunRecord, table: &str, key: &str) -> Option<u64> {
    run.config.get(table).and_then(|table| table.get(key)).and_then(serde_json::Value::as_u64)
}

/// Which runs a per-run plot shows, in a sentence.
fn plotted_sentence(shown: usize, with_data: usize, what: &str) -> String {
    if shown == with_data {
        format!("<p>{} with {what}, failing runs first.</p>\n", count_of(shown as u64, "run"))
    } else {
        format!(
            "<p>{shown} of the {with_data} runs with {what}: the failing ones first, then the first in run order. \
             The others are in <code>report.json</code>.</p>\n"
        )
    }
}

/// Availability over virtual time, one step plot per run, with the floor dashed.
fn availability_section(report: &CampaignReport) -> String {
    let mut html = String::from("<section id=\"availability\">\n<h2>Availability over virtual time</h2>\n");
    let has = |run: &RunRecord| !run.availability.is_empty();
    let with_data = report.runs.iter().filter(|run| has(run)).count();
    if with_data == 0 {
        html.push_str(
            "<p class=\"missing\">no run record holds an availability series: the count of healthy, eligible \
             workers never changed in any run, or the report was written before records kept it</p>\n</section>\n",
        );
        return html;
    }
    html.push_str(&plotted_sentence(super::RUNS_PLOTTED.min(with_data), with_data, "an availability series"));
    html.push_str(
        "<p>Healthy, eligible workers (agent running, no dispatch hold, not tombstoned) as \
         <code>availability_floor</code> counts them; the dashed line is the floor.</p>\n",
    );
    let (left, top, width, height) = PLOT;
    for run in plotted_runs(report, has) {
        let end_ms = run.virtual_duration_ms.max(1);
        let floor = config_u64(run, "fleet", "availability_floor").unwrap_or(0);
        let peak = run.availability.iter().map(|point| point.available).max().unwrap_or(0);
        let nodes = config_u64(run, "fleet", "nodes").unwrap_or(peak).max(peak).max(floor).max(1);
        let y_of = |available: u64| plot_y(available, nodes);
        let lowest = run.availability.iter().map(|point| point.available).min().unwrap_or(0);
        html.push_str(&format!(
            "<h3>{} — {} (lowest {lowest} of {nodes}{})</h3>\n",
            esc(&run_name(run)),
            esc(&run.verdict.label()),
            if floor > 0 { format!(", floor {floor}") } else { ", no floor".to_owned() }
        ));
        html.push_str(&plot_frame("healthy eligible workers over virtual time", run, nodes));
        let mut path = String::new();
        for (index, point) in run.availability.iter().enumerate() {
            let (x, y) = (x_of(point.t_ms, end_ms), y_of(point.available));
            if index == 0 {
                path.push_str(&format!("M{x},{y}"));
            } else {
                path.push_str(&format!(" H{x} V{y}"));
            }
        }
        let series_end = run.availability_cut_ms.unwrap_or(end_ms);
        path.push_str(&format!(" H{}", x_of(series_end, end_ms)));
        html.push_str(&format!(
            "<path d=\"{path}\" class=\"series\"><title>{} change points</title></path>\n",
            run.availability.len()
        ));
        if floor > 0 {
            let y = y_of(floor);
            html.push_str(&format!(
                "<line x1=\"{left}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" class=\"floor\"><title>floor {floor}</title></line>\
                 <text x=\"{}\" y=\"{}\" text-anchor=\"end\">{floor}</text>\n",
                left + width,
                left - 6,
                y + 4
            ));
        }
        if let Some(cut_ms) = run.availability_cut_ms {
            let x = x_of(cut_ms, end_ms);
            html.push_str(&format!(
                "<rect x=\"{x}\" y=\"{top}\" width=\"{}\" height=\"{height}\" class=\"cut\"><title>not recorded after \
                 {cut_ms} ms: the series keeps its first {} change points</title></rect>\n",
                (left + width).saturating_sub(x),
                crate::AVAILABILITY_POINTS_MAX
            ));
        }
        html.push_str(&time_axis(end_ms));
        html.push_str("</svg>\n");
    }
    html.push_str("</section>\n");
    html
}

/// The rollouts' per-batch telemetry: per run, availability (solid) and the selected nodes remaining (dotted) at each
/// batch's end, a mark per batch (red for a rollback's) whose tooltip holds the whole point.
fn batches_section(report: &CampaignReport) -> String {
    let mut html = String::from("<section id=\"batches\">\n<h2>Per-batch telemetry</h2>\n");
    let has = |run: &RunRecord| !run.batches.is_empty();
    let with_data = report.runs.iter().filter(|run| has(run)).count();
    if with_data == 0 {
        html.push_str(
            "<p class=\"missing\">no run record holds per-batch telemetry: no rollout finished a batch, or the report \
             was written before records kept it</p>\n</section>\n",
        );
        return html;
    }
    html.push_str(&plotted_sentence(super::RUNS_PLOTTED.min(with_data), with_data, "per-batch telemetry"));
    html.push_str(
        "<p>At the end of each batch of each lane: healthy, eligible workers (solid) and the selected nodes not yet \
         upgraded, rolled back or quarantined (dotted); each mark is a batch (red: a rollback's), its tooltip the \
         oldest heartbeat, the epoch's pin age, the progress, retries, quarantines and the estimated time left.</p>\n",
    );
    for run in plotted_runs(report, has) {
        let end_ms = run.virtual_duration_ms.max(1);
        let peak = run.batches.iter().map(|point| point.available.max(point.remaining)).max().unwrap_or(0);
        let nodes = config_u64(run, "fleet", "nodes").unwrap_or(peak).max(peak).max(1);
        let y_of = |value: u64| plot_y(value, nodes);
        let last = run.batches.last();
        html.push_str(&format!(
            "<h3>{} — {} ({} batches; at the last: {} available, {} remaining, {} retries, {} quarantined)</h3>\n",
            esc(&run_name(run)),
            esc(&run.verdict.label()),
            run.batches.len(),
            last.map_or(0, |point| point.available),
            last.map_or(0, |point| point.remaining),
            last.map_or(0, |point| point.retries),
            last.map_or(0, |point| point.quarantined),
        ));
        html.push_str(&plot_frame("per-batch telemetry over virtual time", run, nodes));
        for (class, value) in [("series", 0), ("remaining", 1)] {
            let points: Vec<String> = run
                .batches
                .iter()
                .map(|point| {
                    let y = y_of(if value == 0 { point.available } else { point.remaining });
                    format!("{},{y}", x_of(point.t_ms, end_ms))
                })
                .collect();
            html.push_str(&format!("<polyline points=\"{}\" class=\"{class}\"></polyline>\n", points.join(" ")));
        }
        for point in &run.batches {
            let eta = point.eta_ms.map_or("unknown".to_owned(), |eta| format!("{eta} ms"));
            let pin = point.epoch_pin_age_ms.map_or("no epoch".to_owned(), |age| format!("{age} ms"));
            html.push_str(&format!(
                "<circle cx=\"{}\" cy=\"{}\" r=\"3\" class=\"{}\"><title>{} lane {} batch {}{} at {} ms: {} nodes; \
                 {} available; oldest heartbeat {} ms; epoch pin {pin}; {} upgraded, {} rolled back, {} remaining; \
                 {} retries, {} quarantined; ETA {eta}</title></circle>\n",
                x_of(point.t_ms, end_ms),
                y_of(point.available),
                if point.revert { "batch-revert" } else { "batch" },
                esc(&point.rollout),
                point.lane,
                point.batch,
                if point.revert { " (rollback)" } else { "" },
                point.t_ms,
                point.nodes,
                point.available,
                point.oldest_heartbeat_ms,
                point.upgraded,
                point.rolled_back,
                point.remaining,
                point.retries,
                point.quarantined,
            ));
        }
        html.push_str(&time_axis(end_ms));
        html.push_str("</svg>\n");
    }
    html.push_str("</section>\n");
    html
}

fn verdict_class(verdict: Option<&str>) -> &'static str {
    match verdict {
        Some("successor") => "v-successor",
        Some("prior") => "v-prior",
        Some("stuck") => "v-stuck",
        Some(_) | None => "v-uncommitted",
    }
}

/// The lane timeline (Gantt) of each plotted run's rollouts: one bar per lane, coloured by its verdict.
fn lanes_section(report: &CampaignReport) -> String {
    let mut html = String::from("<section id=\"lanes\">\n<h2>Lane timeline of each rollout</h2>\n");
    let has = |run: &RunRecord| !run.lanes.is_empty();
    let with_data = report.runs.iter().filter(|run| has(run)).count();
    if with_data == 0 {
        html.push_str(
            "<p class=\"missing\">no run record holds lanes: no rollout began a lane (the <code>legacy</code> \
             controller plans none), or the report was written before records kept them</p>\n</section>\n",
        );
        return html;
    }
    html.push_str(&plotted_sentence(super::RUNS_PLOTTED.min(with_data), with_data, "rollout lanes"));
    html.push_str(
        "<p class=\"legend\"><span><i class=\"v-successor\"></i>successor</span><span><i class=\"v-prior\"></i>prior\
         </span><span><i class=\"v-stuck\"></i>stuck</span><span><i class=\"v-uncommitted\"></i>never committed\
         </span></p>\n",
    );
    const ROW: u64 = 16;
    const LABEL: u64 = 150;
    const BAR: u64 = 560;
    for run in plotted_runs(report, has) {
        let start = run.lanes.iter().map(|lane| lane.start_ms).min().unwrap_or(0);
        let end = run.lanes.iter().map(|lane| lane.end_ms).max().unwrap_or(start).max(start + 1);
        let span = end - start;
        html.push_str(&format!(
            "<h3>{} — {} ({}, {} to {} ms)</h3>\n",
            esc(&run_name(run)),
            esc(&run.verdict.label()),
            count_of(run.lanes.len() as u64, "lane"),
            start,
            end
        ));
        let (width, height) = (LABEL + BAR + 90, ROW * run.lanes.len() as u64 + 22);
        html.push_str(&format!(
            "<svg width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" role=\"img\" \
             aria-label=\"lanes of {} over virtual time\">\n",
            esc(&run_name(run))
        ));
        for (row, lane) in (0u64..).zip(&run.lanes) {
            let y = row * ROW;
            let x = LABEL + (lane.start_ms - start) * BAR / span;
            let length = ((lane.end_ms - lane.start_ms) * BAR / span).max(2);
            let verdict = lane.verdict.as_deref().unwrap_or("never committed");
            html.push_str(&format!(
                "<g><title>{} lane {}: {} nodes, {} to {} ms ({} ms), {}</title>\
                 <text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\
                 <rect x=\"{x}\" y=\"{}\" width=\"{length}\" height=\"{}\" class=\"{}\"></rect></g>\n",
                esc(&lane.rollout),
                lane.lane,
                lane.nodes,
                lane.start_ms,
                lane.end_ms,
                lane.end_ms - lane.start_ms,
                esc(verdict),
                LABEL - 6,
                y + 12,
                esc(&clip(&format!("{} lane {}", lane.rollout.trim_start_matches("rollout-"), lane.lane), 22)),
                y + 2,
                ROW - 4,
                verdict_class(lane.verdict.as_deref())
            ));
        }
        let axis_y = ROW * run.lanes.len() as u64 + 14;
        html.push_str(&format!(
            "<text x=\"{LABEL}\" y=\"{axis_y}\">+0</text><text x=\"{}\" y=\"{axis_y}\" text-anchor=\"end\">+{}</text>\n",
            LABEL + BAR,
            minutes(span)
        ));
        html.push_str("</svg>\n");
    }
    html.push_str("</section>\n");
    html
}

/// `(min, p25, median, p75, p90, max)` of sorted values, by nearest rank.
fn quantiles(sorted: &[u64]) -> [u64; 6] {
    let at = |q: usize| sorted[(sorted.len() - 1) * q / 100];
    [at(0), at(25), at(50), at(75), at(90), at(100)]
}

/// A histogram of durations in ten equal bins from 0 to the largest, with its box summary in a table row.
fn histogram(title: &str, durations: &[u64], note: &str) -> String {
    const BINS: u64 = 10;
    const BAR_W: u64 = 48;
    const HEIGHT: u64 = 100;
    let mut html = format!("<h3>{}</h3>\n", esc(title));
    if durations.is_empty() {
        html.push_str(&format!("<p class=\"missing\">{note}</p>\n"));
        return html;
    }
    let mut sorted = durations.to_vec();
    sorted.sort_unstable();
    let [min, p25, median, p75, p90, max] = quantiles(&sorted);
    let bin_ms = max.div_ceil(BINS).max(1);
    let mut counts = [0u64; BINS as usize];
    for value in &sorted {
        counts[((value / bin_ms).min(BINS - 1)) as usize] += 1;
    }
    let peak = counts.iter().copied().max().unwrap_or(0).max(1);
    let (width, height) = (BAR_W * BINS + 20, HEIGHT + 40);
    html.push_str(&format!(
        "<svg width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" role=\"img\" aria-label=\"{}\">\n",
        esc(title)
    ));
    for (index, count) in (0u64..).zip(counts) {
        let bar = count * HEIGHT / peak;
        let x = 10 + index * BAR_W;
        html.push_str(&format!(
            "<g><title>{} to {} ms: {count}</title><rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{bar}\" \
             class=\"s-pass\"></rect><text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{count}</text></g>\n",
            index * bin_ms,
            (index + 1) * bin_ms,
            x + 1,
            10 + HEIGHT - bar,
            BAR_W - 2,
            x + BAR_W / 2,
            (10 + HEIGHT - bar).max(20) - 2
        ));
    }
    html.push_str(&format!(
        "<text x=\"10\" y=\"{}\">0</text><text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n</svg>\n",
        HEIGHT + 28,
        10 + BAR_W * BINS,
        HEIGHT + 28,
        minutes(bin_ms * BINS)
    ));
    html.push_str(&format!(
        "<table>\n<tr><th>n</th><th>min</th><th>p25</th><th>median</th><th>p75</th><th>p90</th><th>max</th></tr>\n\
         <tr><td class=\"n\">{}</td><td class=\"n\">{min} ms</td><td class=\"n\">{p25} ms</td><td class=\"n\">{median} ms\
         </td><td class=\"n\">{p75} ms</td><td class=\"n\">{p90} ms</td><td class=\"n\">{max} ms</td></tr>\n</table>\n",
        sorted.len()
    ));
    if !note.is_empty() {
        html.push_str(&format!("<p>{note}</p>\n"));
    }
    html
}

/// The most nodes not upgraded the page lists by name.
const NODES_LISTED_MAX: usize = 40;

/// Every selected node by outcome, over every run's rollouts, then the nodes not upgraded (first runs first): why,
/// and a quarantine's repair plan.
fn nodes_section(report: &CampaignReport) -> String {
    let mut html = String::from("<section id=\"nodes\">\n<h2>Selected nodes by outcome</h2>\n");
    let Some(sentence) = super::nodes_sentence(report) else {
        html.push_str("<p class=\"missing\">no run record holds a rollout's account of its nodes</p>\n</section>\n");
        return html;
    };
    html.push_str(&format!("<p>{}</p>\n", esc(&sentence)));
    let selected = report.summary.rollout_nodes.values().fold(0u64, |sum, count| sum.saturating_add(*count));
    let rows: Vec<(String, u64, String, String)> = crate::NODE_OUTCOMES
        .iter()
        .map(|outcome| {
            let count = report.summary.rollout_nodes.get(*outcome).copied().unwrap_or(0);
            let class = if *outcome == "upgraded" { "s-pass" } else { "s-fail" };
            ((*outcome).to_owned(), count, class.to_owned(), format!("{count} of {selected} selected nodes {outcome}"))
        })
        .collect();
    html.push_str(&bars(&rows, Some(selected), "selected nodes by outcome"));
    let others: Vec<(u64, &crate::RolloutAccount, &crate::NodeRecord)> = report
        .runs
        .iter()
        .flat_map(|run| {
            run.rollouts.iter().flat_map(move |account| {
                account
                    .nodes
                    .iter()
                    .filter(|node| node.outcome != "upgraded")
                    .map(move |node| (run.run_index.unwrap_or(0), account, node))
            })
        })
        .collect();
    if !others.is_empty() {
        html.push_str(&format!(
            "<p>{} not upgraded{}:</p>\n<table>\n<tr><th>run</th><th>rollout</th><th>node</th><th>outcome</th><th>why</th><th>repair</th></tr>\n",
            count_of(others.len() as u64, "node"),
            if others.len() > NODES_LISTED_MAX { format!(", the first {NODES_LISTED_MAX} listed") } else { String::new() }
        ));
        for (run, account, node) in others.iter().take(NODES_LISTED_MAX) {
            html.push_str(&format!(
                "<tr><td class=\"n\">{run}</td><td><code>{}</code></td><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                esc(&account.rollout),
                esc(&node.node),
                esc(&node.outcome),
                esc(&clip(&node.detail, 160)),
                esc(&clip(&node.repair, 200))
            ));
        }
        html.push_str("</table>\n");
    }
    html.push_str("</section>\n");
    html
}

/// Time to converge, per phase: the lanes of rollouts and the onboarding workflows, over every run.
fn converge_section(report: &CampaignReport) -> String {
    let mut html = String::from("<section id=\"converge\">\n<h2>Time to converge, per phase</h2>\n");
    let lanes: Vec<u64> = report
        .runs
        .iter()
        .flat_map(|run| &run.lanes)
        .filter(|lane| lane.verdict.is_some())
        .map(|lane| lane.end_ms - lane.start_ms)
        .collect();
    let uncommitted = report.runs.iter().flat_map(|run| &run.lanes).filter(|lane| lane.verdict.is_none()).count();
    let lane_note = if lanes.is_empty() {
        "no committed lane in any run record".to_owned()
    } else if uncommitted > 0 {
        format!("Not counted: {} that never committed.", count_of(uncommitted as u64, "lane"))
    } else {
        String::new()
    };
    html.push_str(&histogram("Rollout lanes: first step to verdict", &lanes, &lane_note));
    let workflows: Vec<u64> = report
        .runs
        .iter()
        .flat_map(|run| &run.workflows)
        .filter_map(|workflow| workflow.end_ms.map(|end| end - workflow.start_ms))
        .collect();
    let in_flight =
        report.runs.iter().flat_map(|run| &run.workflows).filter(|workflow| workflow.end_ms.is_none()).count();
    let workflow_note = if workflows.is_empty() {
        "no onboarding workflow completed or stopped in any run record".to_owned()
    } else if in_flight > 0 {
        format!("Not counted: {} still in flight when its run ended.", count_of(in_flight as u64, "workflow"))
    } else {
        String::new()
    };
    html.push_str(&histogram("Onboarding workflows: first stage to completion or stop", &workflows, &workflow_note));
    html.push_str("</section>\n");
    html
}

/// One cell of a [`grid`]: its count (shown), CSS class, opacity and tooltip.
struct Cell {
    text: String,
    class: String,
    opacity: String,
    title: String,
}

/// A heatmap: row labels, column labels, and a cell for each.
fn grid(rows: &[String], columns: &[String], cell: impl Fn(usize, usize) -> Cell, aria: &str) -> String {
    const LABEL: u64 = 250;
    const CELL_W: u64 = 96;
    const CELL_H: u64 = 24;
    const HEAD: u64 = 40;
    let width = LABEL + CELL_W * columns.len() as u64;
    let height = HEAD + CELL_H * rows.len() as u64;
    let mut svg = format!(
        "<svg width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" role=\"img\" aria-label=\"{}\">\n",
        esc(aria)
    );
    for (index, column) in (0u64..).zip(columns) {
        let x = LABEL + index * CELL_W + CELL_W / 2;
        let y = if index % 2 == 0 { 16 } else { 32 };
        svg.push_str(&format!(
            "<text x=\"{x}\" y=\"{y}\" text-anchor=\"middle\"><title>{}</title>{}</text>\n",
            esc(column),
            esc(&clip(column, 22))
        ));
    }
    for (row, label) in rows.iter().enumerate() {
        let y = HEAD + row as u64 * CELL_H;
        svg.push_str(&format!(
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n",
            LABEL - 8,
            y + 16,
            esc(&clip(label, 36))
        ));
        for column in 0..columns.len() {
            let Cell { text, class, opacity, title } = cell(row, column);
            let x = LABEL + column as u64 * CELL_W;
            svg.push_str(&format!(
                "<g><title>{}</title><rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" class=\"{class}\" \
                 fill-opacity=\"{opacity}\" stroke=\"#d0d7de\"></rect><text x=\"{}\" y=\"{}\" \
                 text-anchor=\"middle\">{}</text></g>\n",
                esc(&title),
                x + 1,
                y + 1,
                CELL_W - 2,
                CELL_H - 2,
                x + CELL_W / 2,
                y + 16,
                esc(&text)
            ));
        }
    }
    svg.push_str("</svg>\n");
    svg
}

/// A shade of `class` for `count` out of `max`: light for few, full for the most.
fn shade(count: u64, max: u64) -> String {
    ratio(250 + 750 * count / max.max(1))
}

/// Fault kind × phase of the effective faults: where the faults that changed something landed.
fn effective_section(report: &CampaignReport) -> String {
    let summary = &report.summary;
    let mut html =
        String::from("<section id=\"effective\">\n<h2>Coverage: effective faults, kind × phase they landed in</h2>\n");
    let mut cells: BTreeMap<(String, String), u64> = BTreeMap::new();
    for (key, count) in &summary.fault_landings {
        let mut parts = key.split('/');
        let (Some(kind), Some(phase), Some(effect)) = (parts.next(), parts.next(), parts.next()) else { continue };
        if effect != "none" {
            *cells.entry((kind.to_owned(), phase.to_owned())).or_insert(0) += count;
        }
    }
    if cells.is_empty() {
        html.push_str(
            "<p class=\"missing\">no fault had an effect in any run: none was injected, none landed on work that \
             reacted to it, or the report was written before records kept a fault log</p>\n</section>\n",
        );
        return html;
    }
    html.push_str(
        "<p>Each cell counts the faults of that kind that landed while that workflow's work met them (a rollout \
         step, an onboarding or decommission stage, the instance lifecycle) or while nothing it could touch ran \
         (<code>idle</code>), and changed something there: a retry, a wait, a stop, a quarantine, a repair or a \
         signal. The campaign's aim shows in the rows: a fault meant for the rollout that lands idle tested \
         nothing.</p>\n",
    );
    let phases: Vec<String> = FAULT_PHASES.iter().map(|phase| (*phase).to_owned()).collect();
    html.push_str(&count_grid(
        &cells,
        &phases,
        |kind, phase, count| format!("{kind} effective in {phase}: {}", count_of(count, "fault")),
        "effective faults by kind and the phase they landed in",
    ));
    html.push_str("</section>\n");
    html
}

/// A fault kind × phase grid of counts (a kind per row, `phases` as the columns), each cell shaded by its share of
/// the largest, zero cells plain; `title` words a cell's tooltip from its kind, phase and count.
fn count_grid(
    cells: &BTreeMap<(String, String), u64>,
    phases: &[String],
    title: impl Fn(&str, &str, u64) -> String,
    label: &str,
) -> String {
    let kinds: Vec<String> = cells.keys().map(|(kind, _)| kind.clone()).collect::<BTreeSet<_>>().into_iter().collect();
    let max = cells.values().copied().max().unwrap_or(0);
    grid(
        &kinds,
        phases,
        |row, column| {
            let count = cells.get(&(kinds[row].clone(), phases[column].clone())).copied().unwrap_or(0);
            Cell {
                text: count.to_string(),
                class: if count == 0 { "s-zero" } else { "s-pass" }.to_owned(),
                opacity: if count == 0 { "1".to_owned() } else { shade(count, max) },
                title: title(&kinds[row], &phases[column], count),
            }
        },
        label,
    )
}

/// Fault kind × lifecycle phase: the fault steps of every run by the phase they were injected in.
fn phases_section(report: &CampaignReport) -> String {
    let mut html = String::from("<section id=\"phases\">\n<h2>Coverage: fault kind × lifecycle phase</h2>\n");
    let mut cells: BTreeMap<(String, String), u64> = BTreeMap::new();
    for run in &report.runs {
        for (key, count) in &run.fault_phases {
            let (kind, phase) = key.split_once('/').unwrap_or((key.as_str(), "?"));
            *cells.entry((kind.to_owned(), phase.to_owned())).or_insert(0) += count;
        }
    }
    if cells.is_empty() {
        html.push_str(
            "<p class=\"missing\">no run record holds fault phases: no fault was injected, or the report was written \
             before records kept them</p>\n</section>\n",
        );
        return html;
    }
    html.push_str(
        "<p>Each cell counts the fault steps of that kind injected while a rollout was in progress, an onboarding \
         workflow was in flight, both, or neither (<code>steady</code>), over every run. An empty column is a phase \
         no fault of that kind reached.</p>\n",
    );
    let mut phases: Vec<String> = PHASES.iter().map(|phase| (*phase).to_owned()).collect();
    for (_, phase) in cells.keys() {
        if !phases.contains(phase) {
            phases.push(phase.clone());
        }
    }
    html.push_str(&count_grid(
        &cells,
        &phases,
        |kind, phase, count| format!("{kind} during {phase}: {}", count_of(count, "step")),
        "fault steps by kind and lifecycle phase",
    ));
    html.push_str("</section>\n");
    html
}

/// Stage × failure class against the recovery matrix: the listed pairs, those the runs hit, and unlisted hits.
fn matrix_section(report: &CampaignReport) -> String {
    let summary = &report.summary;
    let mut html =
        String::from("<section id=\"matrix\">\n<h2>Coverage: stage × failure class against the recovery matrix</h2>\n");
    let onboarded = report.runs.iter().any(|run| run.config.get("onboarding").is_some_and(|o| !o.is_null()));
    if summary.matrix_pairs.is_empty() && (summary.matrix_listed.is_empty() || !onboarded) {
        html.push_str(
            "<p class=\"missing\">no onboarding stage failed in any run, so no recovery-matrix pair was hit \
             (campaigns without <code>[onboarding]</code> run no workflow)</p>\n</section>\n",
        );
        return html;
    }
    let listed: BTreeSet<&str> = summary.matrix_listed.iter().map(String::as_str).collect();
    let mut stages: Vec<String> = Vec::new();
    let mut classes: Vec<String> = Vec::new();
    for pair in summary.matrix_listed.iter().chain(summary.matrix_pairs.keys()) {
        let (stage, class) = pair.split_once('/').unwrap_or((pair.as_str(), "?"));
        if !stages.iter().any(|known| known == stage) {
            stages.push(stage.to_owned());
        }
        if !classes.iter().any(|known| known == class) {
            classes.push(class.to_owned());
        }
    }
    let hit_listed = summary.matrix_pairs.keys().filter(|pair| listed.contains(pair.as_str())).count();
    let unlisted = summary.matrix_pairs.len() - hit_listed;
    if listed.is_empty() {
        html.push_str(
            "<p class=\"missing\">the report does not name the matrix's listed pairs (<code>summary.matrix_listed\
             </code>), so only the pairs the runs hit are drawn</p>\n",
        );
    } else {
        html.push_str(&format!(
            "<p>{hit_listed} of the {} listed (stage, typical failure class) pairs of the onboarding workflow were \
             hit; {} outside the list. Each cell counts the stage failures classified so over every run.</p>\n",
            listed.len(),
            count_of(unlisted as u64, "pair")
        ));
    }
    html.push_str(
        "<p class=\"legend\"><span><i class=\"s-pass\"></i>listed, hit</span><span><i class=\"m-listed\"></i>listed, \
         never hit</span><span><i class=\"m-unlisted\"></i>hit, not listed</span></p>\n",
    );
    let max = summary.matrix_pairs.values().copied().max().unwrap_or(0);
    html.push_str(&grid(
        &stages,
        &classes,
        |row, column| {
            let pair = format!("{}/{}", stages[row], classes[column]);
            let count = summary.matrix_pairs.get(&pair).copied().unwrap_or(0);
            let is_listed = listed.contains(pair.as_str());
            let (class, opacity, what) = match (is_listed, count) {
                (true, 0) => ("m-listed", "1".to_owned(), "listed, never hit"),
                (true, _) => ("s-pass", shade(count, max), "listed"),
                (false, 0) => ("s-zero", "1".to_owned(), "not listed"),
                (false, _) => ("m-unlisted", shade(count, max), "not listed"),
            };
            Cell {
                text: if count == 0 { String::new() } else { count.to_string() },
                class: class.to_owned(),
                opacity,
                title: format!("{pair}: {what}, {}", count_of(count, "stage failure")),
            }
        },
        "recovery-matrix pairs by stage and failure class",
    ));
    html.push_str("</section>\n");
    html
}

/// Renders `report` as one self-contained HTML page.
pub fn html(report: &CampaignReport) -> String {
    let summary = &report.summary;
    let verdict = esc(&verdict_line(report));
    let class = if summary.passed() { "pass" } else { "fail" };
    let campaign = esc(&report.campaign);
    let mut html = String::from("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    html.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    html.push_str(&format!("<title>fleetsim campaign {campaign}: {verdict}</title>\n"));
    html.push_str(&format!("<style>{STYLE}</style>\n</head>\n<body>\n"));
    html.push_str(&format!(
        "<header>\n<h1>fleetsim campaign <code>{campaign}</code></h1>\n<p><span class=\"verdict {class}\">{verdict}</span> \
         {} of {} runs passed</p>\n",
        summary.passed, summary.runs
    ));
    if !report.description.is_empty() {
        html.push_str(&format!("<p>{}</p>\n", esc(&report.description)));
    }
    html.push_str("</header>\n");

    html.push_str("<section id=\"numbers\">\n<h2>Numbers</h2>\n<table>\n");
    let numbers = [
        ("runs", summary.runs.to_string()),
        ("passed", summary.passed.to_string()),
        ("failed", format!("{} ({})", summary.failed, failure_counts(report))),
        ("lanes", Rollouts::of(report).sentence(summary.runs)),
        ("seed", report.seed.to_string()),
        (
            "virtual time",
            format!("{} ({} ms)", human_ms(summary.virtual_duration_ms_total), summary.virtual_duration_ms_total),
        ),
    ];
    let nodes = super::nodes_sentence(report).map(|nodes| ("nodes", nodes));
    for (key, value) in numbers.into_iter().chain(nodes) {
        html.push_str(&format!("<tr><th>{key}</th><td>{}</td></tr>\n", esc(&value)));
    }
    let codes = [
        ("campaign digest", &summary.campaign_digest),
        ("config hash", &report.config_hash),
        ("commit", &report.commit),
        ("tool version", &report.tool_version),
    ];
    for (key, value) in codes {
        html.push_str(&format!("<tr><th>{key}</th><td><code>{}</code></td></tr>\n", esc(value)));
    }
    html.push_str("</table>\n</section>\n");

    html.push_str("<section id=\"runs\">\n<h2>Pass/fail per run</h2>\n");
    html.push_str(&runs_strip(report));
    html.push_str(&legend(&status_columns(report)));
    html.push_str("</section>\n");
    html.push_str(&violations_section(report));
    html.push_str(&heatmap_section(report));
    html.push_str(&sometimes_section(report));
    html.push_str(&failures_section(report));
    html.push_str(&availability_section(report));
    html.push_str(&batches_section(report));
    html.push_str(&lanes_section(report));
    html.push_str(&nodes_section(report));
    html.push_str(&converge_section(report));
    html.push_str(&effective_section(report));
    html.push_str(&phases_section(report));
    html.push_str(&matrix_section(report));

    html.push_str("<section id=\"faults\">\n<h2>Faults injected, and what they did</h2>\n");
    if summary.faults.is_empty() {
        html.push_str("<p>None.</p>\n");
    } else {
        html.push_str(
            "<p>Each row counts the faults of one kind over every run: injected, effective (something changed course \
             because of it), and by effect. A fault that never landed counts under <code>none</code>.</p>\n",
        );
        html.push_str("<table>\n<tr><th>fault</th><th>injected</th><th>effective</th>");
        for effect in FAULT_EFFECTS {
            html.push_str(&format!("<th>{}</th>", esc(effect)));
        }
        html.push_str("</tr>\n");
        for (kind, count) in &summary.faults {
            let effective = summary.faults_effective.get(kind).copied().unwrap_or(0);
            html.push_str(&format!(
                "<tr><td><code>{}</code></td><td class=\"n\">{count}</td><td class=\"n\">{effective}</td>",
                esc(kind)
            ));
            for effect in FAULT_EFFECTS {
                let by_effect: u64 = summary
                    .fault_landings
                    .iter()
                    .filter(|(key, _)| key.split('/').next() == Some(kind) && key.rsplit('/').next() == Some(effect))
                    .map(|(_, count)| *count)
                    .sum();
                html.push_str(&format!("<td class=\"n\">{by_effect}</td>"));
            }
            html.push_str("</tr>\n");
        }
        html.push_str("</table>\n");
    }
    html.push_str("</section>\n</body>\n</html>\n");
    html
}
