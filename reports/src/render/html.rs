//! One self-contained HTML page of a campaign: inline CSS and inline SVG only, no script, no font, no link, no
//! reference to anything outside the file, so it opens the same from a CI artifact store as from a laptop offline.
//!
//! Every plot is derived from what `report.json` holds: pass/fail per run, violations by oracle, the fault kind ×
//! verdict heatmap and the sometimes-properties reached. Plots that need data the report does not carry
//! (availability over virtual time, lane timelines, time to converge, the recovery-matrix coverage) have a section
//! that says so and where the data lives, and no drawing: nothing here is invented.

use crate::{CampaignReport, FailureKind};

use super::junit::xml_escape as esc;
use super::{
    FAILURES_LISTED, Rollouts, Status, count_of, failing_runs, failure_counts, fault_outcomes, headline, human_ms,
    one_line, oracle_groups, property_name, run_name, status_columns, verdict_line,
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

/// The plots the issue asks for that this report cannot feed, each with where its data lives.
fn missing_section(report: &CampaignReport) -> String {
    let example = report
        .runs
        .first()
        .map(|run| format!(" (for example <code>{} --out DIR</code>)", esc(&run.repro)))
        .unwrap_or_default();
    let needs_traces = format!(
        "needs traces: report.json holds one record per run, not its events; replay a run with <code>--out DIR</code>\
         {example} and read <code>DIR/trace.jsonl</code>"
    );
    let missing = [
        ("Availability over virtual time, per run, with the floor", needs_traces.clone()),
        ("Lane timeline (Gantt) of each rollout", needs_traces.clone()),
        ("Time to converge, per phase", needs_traces),
        (
            "Stage × failure class against the recovery matrix",
            "no data: the run records carry no recovery-matrix coverage yet, so this section is a placeholder"
                .to_owned(),
        ),
    ];
    let mut html = String::from("<section id=\"not-in-report\">\n<h2>Not in report.json</h2>\n");
    for (title, why) in &missing {
        html.push_str(&format!("<h3>{}</h3>\n<p class=\"missing\">{why}</p>\n", esc(title)));
    }
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
    for (key, value) in numbers {
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
    html.push_str(&missing_section(report));

    html.push_str("<section id=\"faults\">\n<h2>Faults injected</h2>\n");
    if summary.faults.is_empty() {
        html.push_str("<p>None.</p>\n");
    } else {
        html.push_str("<table>\n<tr><th>fault</th><th>count</th></tr>\n");
        for (kind, count) in &summary.faults {
            html.push_str(&format!("<tr><td><code>{}</code></td><td class=\"n\">{count}</td></tr>\n", esc(kind)));
        }
        html.push_str("</table>\n");
    }
    html.push_str("</section>\n</body>\n</html>\n");
    html
}
