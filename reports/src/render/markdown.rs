//! Markdown for a CI job summary (`$GITHUB_STEP_SUMMARY`) or a pull-request comment: the verdict first, then the
//! numbers, the violations by oracle, the failing runs with their reproduce commands, and the faults folded away.

use crate::{CampaignReport, FailureKind};

use super::{
    FAILURES_LISTED, Rollouts, Status, failing_runs, failure_counts, headline, human_ms, one_line, oracle_groups,
    property_name, run_name, verdict_line,
};

/// Escapes text for a table cell: pipes, backslashes, Markdown emphasis and HTML, newlines folded.
fn cell(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in one_line(text).chars() {
        match c {
            '|' | '\\' | '*' | '_' | '`' | '[' | ']' | '#' | '~' => {
                escaped.push('\\');
                escaped.push(c);
            }
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '&' => escaped.push_str("&amp;"),
            c => escaped.push(c),
        }
    }
    escaped
}

/// An inline code span that survives backticks in its content.
fn code(text: &str) -> String {
    let text = one_line(text);
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest + 1);
    let pad = if text.starts_with('`') || text.ends_with('`') { " " } else { "" };
    format!("{fence}{pad}{text}{pad}{fence}").replace('|', "\\|")
}

/// Renders `report` as Markdown.
pub fn markdown(report: &CampaignReport) -> String {
    let summary = &report.summary;
    let mut md = String::new();
    md.push_str(&format!("## fleetsim campaign {}: {}\n\n", code(&report.campaign), verdict_line(report)));
    if !report.description.is_empty() {
        md.push_str(&format!("> {}\n\n", cell(&report.description)));
    }
    md.push_str(&format!(
        "**{}/{} runs passed**, seed {}, {} virtual. {}.\n\n",
        summary.passed,
        summary.runs,
        report.seed,
        human_ms(summary.virtual_duration_ms_total),
        cell(&capitalised(&Rollouts::of(report).sentence(summary.runs)))
    ));
    md.push_str("| | |\n|---|---|\n");
    md.push_str(&format!("| runs | {} |\n", summary.runs));
    md.push_str(&format!("| passed | {} |\n", summary.passed));
    md.push_str(&format!("| failed | {} ({}) |\n", summary.failed, cell(&failure_counts(report))));
    if let Some(nodes) = super::nodes_sentence(report) {
        md.push_str(&format!("| nodes | {} |\n", cell(&nodes)));
    }
    md.push_str(&format!("| campaign digest | {} |\n", code(&summary.campaign_digest)));
    md.push_str(&format!("| config hash | {} |\n", code(&report.config_hash)));
    md.push_str(&format!("| built from | fleetsim {} at {} |\n\n", cell(&report.tool_version), code(&report.commit)));

    md.push_str("### Violations by oracle\n\n");
    let groups = oracle_groups(report);
    if groups.is_empty() {
        md.push_str("None.\n\n");
    } else {
        md.push_str("| oracle | type | violations | runs | first seeds |\n|---|---|---:|---:|---|\n");
        for (oracle, group) in &groups {
            let property = group.property.map_or("?", property_name);
            let expected = if group.all_expected() { " (expected)" } else { "" };
            md.push_str(&format!(
                "| {}{expected} | {property} | {} | {} | {} |\n",
                code(oracle),
                group.violations,
                group.runs.len(),
                cell(&group.first_seeds())
            ));
        }
        md.push('\n');
    }

    if !summary.sometimes_reached.is_empty() {
        md.push_str("### Sometimes-properties\n\n| property | runs that reached it |\n|---|---:|\n");
        for (name, runs) in &summary.sometimes_reached {
            let never = if *runs == 0 { " **never reached**" } else { "" };
            md.push_str(&format!("| {}{never} | {runs}/{} |\n", code(name), summary.runs));
        }
        md.push('\n');
        if !summary.sometimes_never_reached.is_empty() {
            md.push_str(
                "A property no run reached fails the campaign: it proves nothing about a state it never visited.\n\n",
            );
        }
    }

    let failures = failing_runs(report);
    md.push_str("### Failing runs\n\n");
    if failures.is_empty() {
        md.push_str("None.\n\n");
    } else {
        md.push_str("| run | verdict | why |\n|---|---|---|\n");
        for run in failures.iter().take(FAILURES_LISTED) {
            let verdict = match Status::of(&run.verdict) {
                Status::Pass => "pass",
                Status::Fail(FailureKind::SafetyViolation) => "**safety violation**",
                Status::Fail(FailureKind::LivenessFailure) => "**liveness failure**",
                Status::Fail(FailureKind::ExpectationUnmet) => "**expectation unmet**",
                Status::Fail(FailureKind::Panic) => "**panic**",
                Status::FailUnclassified => "**fail** (no kind recorded)",
            };
            md.push_str(&format!(
                "| {} | {verdict} | {} |\n",
                cell(&run_name(run)),
                cell(&headline(run).unwrap_or_default())
            ));
        }
        if failures.len() > FAILURES_LISTED {
            md.push_str(&format!("\n… and {} more failing runs in the report.\n", failures.len() - FAILURES_LISTED));
        }
        md.push_str("\nReproduce:\n\n```sh\n");
        for run in failures.iter().take(FAILURES_LISTED) {
            md.push_str(&format!("{}\n", one_line(&run.repro)));
        }
        md.push_str("```\n\n");
    }

    md.push_str("<details><summary>Faults injected and effective</summary>\n\n");
    if summary.faults.is_empty() {
        md.push_str("None.\n\n");
    } else {
        md.push_str("| fault | injected | effective | landed in a rollout step |\n|---|---:|---:|---:|\n");
        for (kind, count) in &summary.faults {
            let effective = summary.faults_effective.get(kind).copied().unwrap_or(0);
            let in_rollout = super::landed_in(summary, kind, "rollout");
            md.push_str(&format!("| {} | {count} | {effective} | {in_rollout} |\n", code(kind)));
        }
        md.push('\n');
    }
    md.push_str("</details>\n");
    md
}

fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}
