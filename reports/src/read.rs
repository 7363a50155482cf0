//! Reading `report.json` back, failing closed: a missing, empty, truncated, corrupt, schema-incompatible or
//! self-inconsistent file is an error with one clear reason, never a report rendered from half the data.

use std::fmt;
use std::path::Path;

use crate::{CampaignReport, SCHEMA_VERSION};

/// Why a report could not be read. Displays as `<path>: <reason>`, one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadError {
    pub path: String,
    pub reason: String,
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.reason)
    }
}

impl std::error::Error for ReadError {}

/// Reads and checks a campaign report file.
pub fn read_report(path: &Path) -> Result<CampaignReport, ReadError> {
    let name = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|error| ReadError {
        path: name.clone(),
        reason: match error.kind() {
            std::io::ErrorKind::NotFound => "no such file".to_owned(),
            std::io::ErrorKind::IsADirectory => "is a directory, not a report.json".to_owned(),
            _ => format!("cannot read: {error}"),
        },
    })?;
    parse_report(&name, &bytes)
}

/// Parses and checks the bytes of a campaign report; `name` is used in errors.
pub fn parse_report(name: &str, bytes: &[u8]) -> Result<CampaignReport, ReadError> {
    let fail = |reason: String| ReadError { path: name.to_owned(), reason };
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(fail("empty file: fleetsim writes a report whole, so this one was not written by it".to_owned()));
    }
    let value: serde_json::Value = serde_json::from_slice(bytes).map_err(|error| {
        fail(match error.classify() {
            serde_json::error::Category::Eof => {
                format!("truncated: the JSON ends early (line {}, column {})", error.line(), error.column())
            }
            serde_json::error::Category::Io
            | serde_json::error::Category::Syntax
            | serde_json::error::Category::Data => format!("corrupt: not JSON ({error})"),
        })
    })?;
    let Some(object) = value.as_object() else {
        return Err(fail("not a campaign report: the JSON is not an object".to_owned()));
    };
    check_version(object.get("schema_version"), "schema_version").map_err(fail)?;
    if !object.contains_key("runs") || !object.contains_key("summary") {
        let reason = if object.contains_key("trace_digest") {
            "a run record (run.json), not a campaign report (report.json)"
        } else {
            "not a campaign report: no `summary` and `runs`"
        };
        return Err(fail(reason.to_owned()));
    }
    if let Some(runs) = object.get("runs").and_then(serde_json::Value::as_array) {
        for (index, run) in runs.iter().enumerate() {
            check_version(run.get("schema_version"), &format!("runs[{index}].schema_version")).map_err(fail)?;
        }
    }
    let report: CampaignReport =
        serde_json::from_value(value).map_err(|error| fail(format!("not a campaign report: {error}")))?;
    let held = report.runs.len() as u64;
    if report.summary.runs != held {
        return Err(fail(format!(
            "inconsistent: the summary counts {} runs but the file holds {held}",
            report.summary.runs
        )));
    }
    let passed = report.runs.iter().filter(|run| run.verdict.passed()).count() as u64;
    if report.summary.passed != passed || report.summary.failed != held - passed {
        return Err(fail(format!(
            "inconsistent: the summary says {} passed and {} failed but the runs say {passed} and {}",
            report.summary.passed,
            report.summary.failed,
            held - passed
        )));
    }
    if let Some(shard) = report.shard {
        if shard.count == 0 || shard.index == 0 || shard.index > shard.count {
            return Err(fail(format!("inconsistent: shard {shard} is not K/N with 1 <= K <= N")));
        }
        if let Some(run) = report.runs.iter().find(|run| !run.run_index.is_some_and(|index| shard.holds(index))) {
            return Err(fail(format!(
                "inconsistent: run {} is not one of shard {shard}'s",
                run.run_index.map_or_else(|| "without run_index".to_owned(), |index| index.to_string())
            )));
        }
    }
    Ok(report)
}

fn check_version(value: Option<&serde_json::Value>, key: &str) -> Result<(), String> {
    match value {
        None => Err(format!("{key}: missing, so this is not a report fleetsim wrote")),
        Some(value) => match value.as_u64() {
            Some(version) if version == u64::from(SCHEMA_VERSION) => Ok(()),
            Some(version) => {
                Err(format!("{key}: this fleetsim reads version {SCHEMA_VERSION}, the file has {version}"))
            }
            None => Err(format!("{key}: expected an integer, found {value}")),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report_json() -> serde_json::Value {
        serde_json::json!({
            "schema_version": 1,
            "tool_version": "0.1.0",
            "commit": "abc",
            "config_hash": "h",
            "campaign": "campaigns/x.toml",
            "description": "d",
            "seed": 1,
            "summary": {
                "runs": 1, "passed": 1, "failed": 0, "failures": {}, "violations_by_oracle": {}, "faults": {},
                "sometimes_reached": {}, "sometimes_never_reached": [], "campaign_digest": "c",
                "virtual_duration_ms_total": 10
            },
            "runs": [{
                "schema_version": 1, "tool_version": "0.1.0", "commit": "abc", "config_hash": "r", "config": {},
                "source": "campaigns/x.toml", "run_index": 0, "seed": 9, "verdict": {"outcome": "pass"},
                "trace_digest": "t", "trace_events": 1, "virtual_duration_ms": 10, "faults": {}, "violations": [],
                "violation_counts": {}, "reached": [], "unmet": [], "repro": "fleetsim campaign campaigns/x.toml --run 0"
            }]
        })
    }

    fn reason(value: &serde_json::Value) -> String {
        parse_report("r.json", value.to_string().as_bytes()).unwrap_err().reason
    }

    #[test]
    fn a_well_formed_report_is_read() {
        let report = parse_report("r.json", report_json().to_string().as_bytes()).unwrap();
        assert_eq!(report.runs.len(), 1);
    }

    #[test]
    fn empty_truncated_and_corrupt_files_are_refused_with_their_reason() {
        let text = report_json().to_string();
        let error = parse_report("r.json", b"  \n").unwrap_err();
        assert!(error.reason.starts_with("empty file"), "{error}");
        let error = parse_report("r.json", &text.as_bytes()[..text.len() / 2]).unwrap_err();
        assert!(error.to_string().starts_with("r.json: truncated: the JSON ends early"), "{error}");
        let error = parse_report("r.json", b"{\"schema_version\": 1,,}").unwrap_err();
        assert!(error.reason.starts_with("corrupt: not JSON"), "{error}");
        assert_eq!(reason(&serde_json::json!([1])), "not a campaign report: the JSON is not an object");
    }

    #[test]
    fn a_wrong_or_missing_schema_version_is_refused() {
        let mut value = report_json();
        value["schema_version"] = 2.into();
        assert_eq!(reason(&value), "schema_version: this fleetsim reads version 1, the file has 2");
        value["schema_version"] = 1.into();
        value["runs"][0]["schema_version"] = 7.into();
        assert_eq!(reason(&value), "runs[0].schema_version: this fleetsim reads version 1, the file has 7");
        value.as_object_mut().unwrap().remove("schema_version");
        assert_eq!(reason(&value), "schema_version: missing, so this is not a report fleetsim wrote");
    }

    #[test]
    fn a_run_record_or_a_report_missing_fields_is_not_a_report() {
        let run = report_json()["runs"][0].clone();
        assert_eq!(reason(&run), "a run record (run.json), not a campaign report (report.json)");
        let mut value = report_json();
        value["summary"].as_object_mut().unwrap().remove("passed");
        assert!(reason(&value).starts_with("not a campaign report: missing field `passed`"), "{}", reason(&value));
    }

    #[test]
    fn a_summary_that_disagrees_with_its_runs_is_refused() {
        let mut value = report_json();
        value["summary"]["runs"] = 2.into();
        assert_eq!(reason(&value), "inconsistent: the summary counts 2 runs but the file holds 1");
        let mut value = report_json();
        value["runs"][0]["verdict"] = serde_json::json!({"outcome": "fail", "kind": "panic"});
        assert_eq!(reason(&value), "inconsistent: the summary says 1 passed and 0 failed but the runs say 0 and 1");
    }

    #[test]
    fn a_shard_that_holds_runs_of_another_shard_is_refused() {
        let mut value = report_json();
        value["shard"] = serde_json::json!({"index": 1, "count": 2, "runs_total": 4});
        parse_report("r.json", value.to_string().as_bytes()).unwrap();
        value["runs"][0]["run_index"] = 1.into();
        assert_eq!(reason(&value), "inconsistent: run 1 is not one of shard 1/2's");
        value["shard"]["index"] = 3.into();
        assert_eq!(reason(&value), "inconsistent: shard 3/2 is not K/N with 1 <= K <= N");
    }

    #[test]
    fn a_missing_file_is_named() {
        let error = read_report(Path::new("no/such/report.json")).unwrap_err();
        assert_eq!(error.to_string(), "no/such/report.json: no such file");
    }
}
