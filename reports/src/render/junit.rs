//! JUnit XML for CI test views: one test suite per campaign with one test case per run and one per (run, oracle)
//! that fired, and a `coverage` suite with one test case per named sometimes-property. A failing run's case carries
//! its evidence and its reproduce command; a panic is an `<error>`, every other failure a `<failure>`.
//!
//! JUnit's `time` is wall seconds, which a report does not record; cases carry no `time`, and the virtual duration
//! is in each case's output instead.

use crate::{CampaignReport, FailureKind, RunRecord};

use super::{Status, count_of, headline, human_ms, one_line, property_name, run_name};

/// Escapes text for XML 1.0 content and attribute values. Characters XML 1.0 cannot hold at all (most C0 controls)
/// are written as `\u{..}` so nothing is lost silently.
pub(crate) fn xml_escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&apos;"),
            '\t' | '\n' | '\r' => escaped.push(c),
            c if (c as u32) < 0x20 || c == '\u{fffe}' || c == '\u{ffff}' => {
                escaped.push_str(&format!("\\u{{{:x}}}", c as u32));
            }
            c => escaped.push(c),
        }
    }
    escaped
}

/// The evidence of one run, one fact a line: what a CI view shows when the case is opened.
fn run_body(run: &RunRecord) -> String {
    let mut body = String::new();
    for firing in &run.violations {
        let expected = if firing.expected { " (expected)" } else { "" };
        body.push_str(&format!(
            "{} ({}) at t={} ms{expected}: {}\n",
            firing.oracle,
            property_name(firing.property),
            firing.t_ms,
            firing.evidence
        ));
    }
    for name in &run.unmet {
        body.push_str(&format!("{}\n", crate::unmet_sentence(name)));
    }
    if let Some(panic) = &run.panic {
        body.push_str(&format!("panic: {panic}\n"));
    }
    body.push_str(&format!("reproduce: {}\n", run.repro));
    body
}

fn run_case(xml: &mut String, class: &str, run: &RunRecord) {
    let name = xml_escape(&run_name(run));
    xml.push_str(&format!("    <testcase classname=\"{class}\" name=\"{name}\">\n"));
    let element = match Status::of(&run.verdict) {
        Status::Pass => None,
        Status::Fail(FailureKind::Panic) => Some(("error", "panic")),
        Status::Fail(
            kind @ (FailureKind::SafetyViolation | FailureKind::LivenessFailure | FailureKind::ExpectationUnmet),
        ) => Some(("failure", kind.as_str())),
        Status::FailUnclassified => Some(("failure", "fail")),
    };
    if let Some((element, kind)) = element {
        let message = xml_escape(&one_line(&headline(run).unwrap_or_default()));
        xml.push_str(&format!(
            "      <{element} type=\"{kind}\" message=\"{message}\">{}</{element}>\n",
            xml_escape(&run_body(run))
        ));
    }
    xml.push_str(&format!(
        "      <system-out>{}</system-out>\n",
        xml_escape(&format!(
            "verdict: {}\nvirtual time: {} ({} ms)\ntrace digest: {} ({} events)\nconfig hash: {}\nreproduce: {}\n",
            run.verdict.label(),
            human_ms(run.virtual_duration_ms),
            run.virtual_duration_ms,
            run.trace_digest,
            run.trace_events,
            run.config_hash,
            run.repro
        ))
    ));
    xml.push_str("    </testcase>\n");
}

/// One case per oracle that fired in `run`: a failure unless every kept firing was expected.
fn oracle_cases(xml: &mut String, class: &str, run: &RunRecord) -> (u64, u64) {
    let (mut cases, mut failures) = (0, 0);
    for (oracle, count) in &run.violation_counts {
        let kept: Vec<_> = run.violations.iter().filter(|firing| &firing.oracle == oracle).collect();
        let expected = !kept.is_empty() && kept.iter().all(|firing| firing.expected);
        let property = kept.first().map(|firing| firing.property);
        let name = xml_escape(&format!("{}: {oracle}", run_name(run)));
        cases += 1;
        xml.push_str(&format!("    <testcase classname=\"{class}.oracles\" name=\"{name}\">\n"));
        let mut body = String::new();
        for firing in &kept {
            body.push_str(&format!("t={} ms: {}\n", firing.t_ms, firing.evidence));
        }
        if (kept.len() as u64) < *count {
            body.push_str(&format!("… {} violations in all; the record keeps the first {}\n", count, kept.len()));
        }
        body.push_str(&format!("reproduce: {}\n", run.repro));
        if expected {
            xml.push_str(&format!(
                "      <system-out>{}</system-out>\n",
                xml_escape(&format!("expected by the scenario ({})\n{body}", count_of(*count, "violation")))
            ));
        } else {
            failures += 1;
            let kind = property.map_or("violation", property_name);
            let message = xml_escape(&format!("{oracle} violated {}", count_of(*count, "time")));
            xml.push_str(&format!(
                "      <failure type=\"{kind}\" message=\"{message}\">{}</failure>\n",
                xml_escape(&body)
            ));
        }
        xml.push_str("    </testcase>\n");
    }
    (cases, failures)
}

/// Renders `report` as JUnit XML.
pub fn junit(report: &CampaignReport) -> String {
    let summary = &report.summary;
    let class = xml_escape(&report.campaign);
    let mut cases = String::new();
    let (mut tests, mut failures, mut errors) = (0u64, 0u64, 0u64);
    for run in &report.runs {
        run_case(&mut cases, &class, run);
        tests += 1;
        match Status::of(&run.verdict) {
            Status::Pass => {}
            Status::Fail(FailureKind::Panic) => errors += 1,
            Status::Fail(
                FailureKind::SafetyViolation | FailureKind::LivenessFailure | FailureKind::ExpectationUnmet,
            )
            | Status::FailUnclassified => failures += 1,
        }
        let (oracle_tests, oracle_failures) = oracle_cases(&mut cases, &class, run);
        tests += oracle_tests;
        failures += oracle_failures;
    }

    let mut coverage = String::new();
    for (name, runs) in &summary.sometimes_reached {
        let escaped = xml_escape(name);
        coverage.push_str(&format!("    <testcase classname=\"{class}.sometimes\" name=\"{escaped}\">\n"));
        if *runs == 0 {
            coverage.push_str(&format!(
                "      <failure type=\"never_reached\" message=\"{escaped} was reached in no run of {}\">{}</failure>\n",
                summary.runs,
                xml_escape("a sometimes-property no run reached fails the campaign: it proves nothing about a state \
                            it never visited\n")
            ));
        } else {
            coverage.push_str(&format!("      <system-out>reached in {runs} of {} runs</system-out>\n", summary.runs));
        }
        coverage.push_str("    </testcase>\n");
    }
    let coverage_tests = summary.sometimes_reached.len() as u64;
    let coverage_failures = summary.sometimes_never_reached.len() as u64;

    let mut xml = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    xml.push_str(&format!(
        "<testsuites name=\"fleetsim\" tests=\"{}\" failures=\"{}\" errors=\"{errors}\">\n",
        tests + coverage_tests,
        failures + coverage_failures
    ));
    xml.push_str(&format!(
        "  <testsuite name=\"{class}\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"0\">\n"
    ));
    xml.push_str("    <properties>\n");
    let properties = [
        ("description", report.description.clone()),
        ("seed", report.seed.to_string()),
        ("config_hash", report.config_hash.clone()),
        ("campaign_digest", summary.campaign_digest.clone()),
        ("commit", report.commit.clone()),
        ("tool_version", report.tool_version.clone()),
        ("virtual_duration_ms_total", summary.virtual_duration_ms_total.to_string()),
    ];
    for (name, value) in properties {
        xml.push_str(&format!("      <property name=\"{name}\" value=\"{}\"/>\n", xml_escape(&value)));
    }
    xml.push_str("    </properties>\n");
    xml.push_str(&cases);
    xml.push_str("  </testsuite>\n");
    xml.push_str(&format!(
        "  <testsuite name=\"{class}.sometimes\" tests=\"{coverage_tests}\" failures=\"{coverage_failures}\" \
         errors=\"0\" skipped=\"0\">\n"
    ));
    xml.push_str(&coverage);
    xml.push_str("  </testsuite>\n</testsuites>\n");
    xml
}

#[cfg(test)]
mod tests {
    use super::xml_escape;

    #[test]
    fn markup_quotes_and_control_characters_are_escaped() {
        assert_eq!(xml_escape(r#"<a href="x">&'</a>"#), "&lt;a href=&quot;x&quot;&gt;&amp;&apos;&lt;/a&gt;");
        assert_eq!(xml_escape("tab\tline\nnul\u{0}bell\u{7}"), "tab\tline\nnul\\u{0}bell\\u{7}");
        assert_eq!(xml_escape("ünïcode ✓"), "ünïcode ✓");
    }
}
