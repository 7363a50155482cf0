//! The terminal summary of a campaign: what `fleetsim campaign` prints at its end and `fleetsim report` prints by
//! default. Aligned `key  value` lines, the failing runs last, each with the command that replays it alone.

use crate::CampaignReport;

use super::{
    FAILURES_LISTED, Rollouts, Status, count_of, failing_runs, failure_counts, headline, human_ms, one_line,
    oracle_groups, verdict_line,
};

/// Renders the terminal summary of `report`.
pub fn text(report: &CampaignReport) -> String {
    let summary = &report.summary;
    let mut text = String::new();
    text.push_str(&format!(
        "campaign {}: {}, {} runs, seed {}, {} virtual\n",
        report.campaign,
        verdict_line(report),
        summary.runs,
        report.seed,
        human_ms(summary.virtual_duration_ms_total)
    ));
    text.push_str(&format!("  passed        {}/{}\n", summary.passed, summary.runs));
    if summary.failed > 0 {
        text.push_str(&format!("  failed        {} ({})\n", summary.failed, failure_counts(report)));
    }
    text.push_str(&format!("  lanes         {}\n", Rollouts::of(report).sentence(summary.runs)));
    if let Some(nodes) = super::nodes_sentence(report) {
        text.push_str(&format!("  nodes         {nodes}\n"));
    }
    text.push_str(&format!("  faults        {}\n", super::faults_sentence(summary)));
    let sometimes: Vec<String> =
        summary.sometimes_reached.iter().map(|(name, runs)| format!("{name} {runs}/{}", summary.runs)).collect();
    if !sometimes.is_empty() {
        text.push_str(&format!("  reached       {}\n", sometimes.join(", ")));
    }
    for name in &summary.sometimes_never_reached {
        text.push_str(&format!("  never reached {name}: no run got there, so the campaign proves nothing about it\n"));
    }
    let groups = oracle_groups(report);
    if groups.is_empty() {
        text.push_str("  violations    none\n");
    } else {
        text.push_str("  violations\n");
        for (oracle, group) in &groups {
            let property = group.property.map(|p| format!(" ({})", super::property_name(p))).unwrap_or_default();
            text.push_str(&format!(
                "    {oracle}{property}: {} in {}: {}\n",
                group.violations,
                count_of(group.runs.len() as u64, "run"),
                group.first_seeds()
            ));
        }
    }
    let failures = failing_runs(report);
    for run in failures.iter().take(FAILURES_LISTED) {
        let index = run.run_index.map(|i| format!("run {i} ")).unwrap_or_default();
        let label = match Status::of(&run.verdict) {
            Status::Pass => "pass".to_owned(),
            Status::Fail(kind) => format!("fail ({})", kind.as_str()),
            Status::FailUnclassified => "fail (no kind recorded)".to_owned(),
        };
        text.push_str(&format!(
            "  FAIL {index}seed {}: {label} {}\n",
            run.seed,
            one_line(&headline(run).unwrap_or_default())
        ));
        text.push_str(&format!("       reproduce: {}\n", run.repro));
    }
    if failures.len() > FAILURES_LISTED {
        text.push_str(&format!("  … and {} more failing runs in the report\n", failures.len() - FAILURES_LISTED));
    }
    text.push_str(&format!("  digest        {}\n", summary.campaign_digest));
    text.push_str(&format!("  config        {} ({})\n", report.campaign, report.config_hash));
    text.push_str(&format!("  built from    fleetsim {} at commit {}\n", report.tool_version, report.commit));
    text
}
