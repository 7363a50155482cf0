//! Reading `report.json` back, failing closed: a missing, empty, truncated, corrupt, schema-incompatible or
//! self-inconsistent file is an error with one clear reason, never a report rendered from half the data.
//!
//! A report is checked against itself before anything reads it ([`check_report`]): every run record agrees with
//! itself ([`check_run`]: its verdict is the one its panic, violations and unmet expectations give), the runs are the
//! campaign's indices in order, and the summary is the one recomputed from the runs, campaign digest included (it
//! covers every record's bytes, so an edited run no longer matches it). What the report cannot say about itself (the
//! seeds the campaign derives, its sometimes-properties) the gate and `repro` check against the campaign file.

use std::fmt;
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::{CampaignReport, FailureKind, Outcome, PropertyKind, RUNS_MAX, RunRecord, SCHEMA_VERSION};

/// The largest report file read back (bytes): far above any report of [`RUNS_MAX`] runs fleetsim writes.
pub const REPORT_BYTES_MAX: u64 = 4 << 30;

/// SHA-256 of `bytes` as lowercase hex: the campaign digest's function.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|byte| format!("{byte:02x}")).collect()
}

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
    let io_error = |error: std::io::Error| ReadError {
        path: name.clone(),
        reason: match error.kind() {
            std::io::ErrorKind::NotFound => "no such file".to_owned(),
            std::io::ErrorKind::IsADirectory => "is a directory, not a report.json".to_owned(),
            _ => format!("cannot read: {error}"),
        },
    };
    // A FIFO, a device (`/dev/zero`) or a socket is refused before it is opened (a FIFO's open would block), and the
    // read stops past the cap whatever the file's size claimed.
    let metadata = std::fs::metadata(path).map_err(io_error)?;
    if !metadata.is_file() && !metadata.is_dir() {
        return Err(ReadError { path: name, reason: "not a regular file: a report is read from a file".to_owned() });
    }
    let file = std::fs::File::open(path).map_err(io_error)?;
    if !file.metadata().map_err(io_error)?.is_file() {
        return Err(io_error(std::io::Error::from(std::io::ErrorKind::IsADirectory)));
    }
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut std::io::Read::take(file, REPORT_BYTES_MAX + 1), &mut bytes).map_err(io_error)?;
    if bytes.len() as u64 > REPORT_BYTES_MAX {
        return Err(ReadError {
            path: name,
            reason: format!("more than the {REPORT_BYTES_MAX} bytes a report may have"),
        });
    }
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
    check_report(&report).map_err(|reason| fail(format!("inconsistent: {reason}")))?;
    Ok(report)
}

/// Checks a report against itself; the error names the first field that disagrees (`runs[3].verdict`,
/// `summary.campaign_digest`) and what it should be.
pub fn check_report(report: &CampaignReport) -> Result<(), String> {
    let held = report.runs.len() as u64;
    if let Some(shard) = report.shard {
        if shard.count == 0 || shard.index == 0 || shard.index > shard.count {
            return Err(format!("shard: {shard} is not K/N with 1 <= K <= N"));
        }
        if shard.runs_total > RUNS_MAX {
            return Err(format!(
                "shard.runs_total: {} is more than the {RUNS_MAX} runs a campaign may have",
                shard.runs_total
            ));
        }
    }
    if held > RUNS_MAX {
        return Err(format!("runs: {held} records, more than the {RUNS_MAX} runs a campaign may have"));
    }
    if report.summary.runs != held {
        return Err(format!("summary.runs: the summary counts {} runs but the file holds {held}", report.summary.runs));
    }
    // The runs a whole report holds are 0..N; a shard's are its indices, in order.
    let expected: Vec<u64> = match report.shard {
        Some(shard) => shard.indices(),
        None => (0..held).collect(),
    };
    for (position, run) in report.runs.iter().enumerate() {
        let field = |key: &str| format!("runs[{position}].{key}");
        match (run.run_index, expected.get(position)) {
            (Some(index), Some(want)) if index == *want => {}
            (found, want) => {
                let found = found.map_or_else(|| "absent".to_owned(), |index| index.to_string());
                let want = want.map_or_else(|| "no run here".to_owned(), ToString::to_string);
                let whose =
                    report.shard.map_or_else(|| "the runs 0..N".to_owned(), |shard| format!("shard {shard}'s runs"));
                return Err(format!("{}: {found}, but {whose} in order put {want} here", field("run_index")));
            }
        }
        for (key, found, want) in [
            ("commit", &run.commit, &report.commit),
            ("tool_version", &run.tool_version, &report.tool_version),
            ("source", &run.source, &report.campaign),
        ] {
            if found != want {
                return Err(format!("{}: {found}, but the report's is {want}", field(key)));
            }
        }
        check_run(run).map_err(|(key, reason)| format!("{}: {reason}", field(&key)))?;
    }
    if let Some(shard) = report.shard {
        if held != expected.len() as u64 {
            return Err(format!("runs: shard {shard} has {} runs, the file holds {held}", expected.len()));
        }
    }
    let sometimes: Vec<String> = report.summary.sometimes_reached.keys().cloned().collect();
    let recomputed = crate::Summary {
        matrix_listed: report.summary.matrix_listed.clone(),
        ..crate::summarize(&report.runs, &sometimes, sha256_hex)
    };
    let (file, runs) = (&report.summary, &recomputed);
    let disagree = |key: &str, file: String, runs: String| {
        Err(format!("summary.{key}: the file has {file}, its runs give {runs}"))
    };
    macro_rules! compare {
        ($($key:ident),*) => {$(
            if file.$key != runs.$key {
                return disagree(stringify!($key), format!("{:?}", file.$key), format!("{:?}", runs.$key));
            }
        )*};
    }
    compare!(
        passed,
        failed,
        failures,
        violations_by_oracle,
        faults,
        faults_effective,
        fault_landings,
        matrix_pairs,
        rollout_nodes,
        sometimes_reached,
        sometimes_never_reached,
        virtual_duration_ms_total
    );
    // The digest is named, not printed: a refusal that printed the digest the runs give would hand an editor the
    // value to paste (it is plain SHA-256, so it proves only that the file agrees with itself; the gate replays).
    if file.campaign_digest != runs.campaign_digest {
        return Err("summary.campaign_digest: not the digest of the file's runs: a run or the digest was edited after the report was written".to_owned());
    }
    Ok(())
}

/// Checks one run record against itself: its verdict is the one [`crate::judge`] gives its panic, violations and
/// unmet expectations, its violations are always/eventually properties counted in `violation_counts`, what it reached
/// are sometimes-properties. The error is the first key that disagrees and why.
pub fn check_run(run: &RunRecord) -> Result<(), (String, String)> {
    let fail = |key: &str, reason: String| Err((key.to_owned(), reason));
    match (run.verdict.outcome, run.verdict.kind) {
        (Outcome::Pass, Some(kind)) => return fail("verdict.kind", format!("{} on a pass", kind.as_str())),
        (Outcome::Fail, None) => return fail("verdict.kind", "absent on a failure".to_owned()),
        _ => {}
    }
    if run.panic.is_some() != (run.verdict.kind == Some(FailureKind::Panic)) {
        return fail(
            "panic",
            format!(
                "{} with the verdict {}",
                if run.panic.is_some() { "a message" } else { "absent" },
                run.verdict.label()
            ),
        );
    }
    for (position, violation) in run.violations.iter().enumerate() {
        if violation.property == PropertyKind::Sometimes {
            return fail(
                &format!("violations[{position}].property"),
                "a sometimes-property is reached, not violated".to_owned(),
            );
        }
        let kept = run.violations.iter().filter(|other| other.oracle == violation.oracle).count() as u64;
        let counted = run.violation_counts.get(&violation.oracle).copied().unwrap_or(0);
        if counted < kept {
            return fail(
                &format!("violation_counts.{}", violation.oracle),
                format!("{counted}, but the record keeps {kept} violations of it"),
            );
        }
    }
    if let Some(position) = run.reached.iter().position(|firing| firing.property != PropertyKind::Sometimes) {
        return fail(&format!("reached[{position}].property"), "only a sometimes-property is reached".to_owned());
    }
    for (position, account) in run.rollouts.iter().enumerate() {
        check_account(account).map_err(|(key, reason)| (format!("rollouts[{position}].{key}"), reason))?;
    }
    check_fault_log(run)?;
    let judged = crate::judge(run.panic.is_some(), &run.violations, &run.unmet);
    if judged != run.verdict {
        return fail(
            "verdict",
            format!(
                "{}, but its panic, violations and unmet expectations give {}",
                run.verdict.label(),
                judged.label()
            ),
        );
    }
    Ok(())
}

/// Checks a run's fault log against itself and the run's `faults`: its faults are numbered 1, 2, … in order; each
/// names a known phase and effect, lands no earlier than it was injected and, when it never landed, is idle with no
/// effect; and a log with room for every fault counts exactly the injections `faults` counts.
fn check_fault_log(run: &RunRecord) -> Result<(), (String, String)> {
    let fail = |key: String, reason: String| Err((key, reason));
    for (position, entry) in run.fault_log.iter().enumerate() {
        let key = |field: &str| format!("fault_log[{position}].{field}");
        if entry.fault != position as u64 + 1 {
            return fail(key("fault"), format!("{}, but the log in order puts {} here", entry.fault, position + 1));
        }
        if !crate::FAULT_EFFECTS.contains(&entry.effect.as_str()) {
            return fail(
                key("effect"),
                format!("{} is not an effect (one of {:?})", entry.effect, crate::FAULT_EFFECTS),
            );
        }
        if !crate::FAULT_PHASES.contains(&entry.coarse_phase()) {
            return fail(key("phase"), format!("{} is not in a phase (one of {:?})", entry.phase, crate::FAULT_PHASES));
        }
        match entry.landed_ms {
            Some(landed_ms) if landed_ms < entry.injected_ms => {
                return fail(key("landed_ms"), format!("{landed_ms}, before it was injected at {}", entry.injected_ms));
            }
            None if entry.effective() || entry.phase != "idle" => {
                return fail(key("effect"), format!("{} in {}, but it never landed", entry.effect, entry.phase));
            }
            _ => {}
        }
    }
    let injected: u64 = run.faults.values().fold(0, |total, count| total.saturating_add(*count));
    if injected <= crate::FAULT_LOG_MAX as u64 {
        let mut logged: std::collections::BTreeMap<String, u64> = std::collections::BTreeMap::new();
        for entry in &run.fault_log {
            *logged.entry(entry.kind.clone()).or_default() += 1;
        }
        if logged != run.faults {
            return fail("fault_log".to_owned(), format!("logs {logged:?}, but the run's faults are {:?}", run.faults));
        }
    }
    Ok(())
}

/// Checks one rollout's account against itself: its counts name known outcomes, its node list is every counted node
/// (up to the cap) in name order with the counted outcomes, and a `successor` counts only upgraded nodes.
fn check_account(account: &crate::RolloutAccount) -> Result<(), (String, String)> {
    let fail = |key: &str, reason: String| Err((key.to_owned(), reason));
    if let Some(outcome) = account.counts.keys().find(|outcome| !crate::NODE_OUTCOMES.contains(&outcome.as_str())) {
        return fail(&format!("counts.{outcome}"), format!("not an outcome (one of {:?})", crate::NODE_OUTCOMES));
    }
    let selected = account.selected();
    let listed = selected.min(crate::ACCOUNT_NODES_MAX as u64);
    if account.nodes.len() as u64 != listed {
        return fail("nodes", format!("{} listed, but the counts give {selected} selected nodes", account.nodes.len()));
    }
    if let Some(position) = account.nodes.windows(2).position(|pair| pair[0].node >= pair[1].node) {
        return fail(&format!("nodes[{}].node", position + 1), "not in name order, or listed twice".to_owned());
    }
    for outcome in crate::NODE_OUTCOMES {
        let tally = account.nodes.iter().filter(|node| node.outcome == outcome).count() as u64;
        let counted = account.count(outcome);
        if tally > counted || (listed == selected && tally != counted) {
            return fail(&format!("counts.{outcome}"), format!("{counted}, but the node list has {tally}"));
        }
    }
    if let Some(node) = account.nodes.iter().find(|node| !crate::NODE_OUTCOMES.contains(&node.outcome.as_str())) {
        return fail("nodes", format!("{}: {} is not an outcome", node.node, node.outcome));
    }
    if account.outcome == "successor" && account.count("upgraded") != selected {
        return fail(
            "outcome",
            format!(
                "successor, but {} of the {selected} selected nodes are not upgraded",
                selected - account.count("upgraded")
            ),
        );
    }
    Ok(())
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

    /// A consistent one-run report (its summary, campaign digest included, recomputed from its runs).
    fn report_json() -> serde_json::Value {
        let mut value = serde_json::json!({
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
        });
        resummarize(&mut value);
        value
    }

    /// Recomputes the summary of `value` from its runs, as a forger who knows the format would.
    fn resummarize(value: &mut serde_json::Value) {
        let report: CampaignReport = serde_json::from_value(value.clone()).unwrap();
        let sometimes: Vec<String> = report.summary.sometimes_reached.keys().cloned().collect();
        let summary = crate::summarize(&report.runs, &sometimes, sha256_hex);
        value["summary"] = serde_json::to_value(summary).unwrap();
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
        assert_eq!(reason(&value), "inconsistent: summary.runs: the summary counts 2 runs but the file holds 1");
        let mut value = report_json();
        value["runs"][0]["verdict"] = serde_json::json!({"outcome": "fail", "kind": "panic"});
        value["runs"][0]["panic"] = "boom".into();
        assert_eq!(reason(&value), "inconsistent: summary.passed: the file has 1, its runs give 0");
        let mut value = report_json();
        value["summary"]["faults"] = serde_json::json!({"partition": 999});
        assert_eq!(reason(&value), "inconsistent: summary.faults: the file has {\"partition\": 999}, its runs give {}");
    }

    #[test]
    fn an_emptied_never_reached_list_is_refused() {
        let mut value = report_json();
        value["summary"]["sometimes_reached"] = serde_json::json!({"node_quarantined": 0});
        value["summary"]["sometimes_never_reached"] = serde_json::json!(["node_quarantined"]);
        value["summary"]["campaign_digest"] = report_json()["summary"]["campaign_digest"].clone();
        parse_report("r.json", value.to_string().as_bytes()).unwrap();
        value["summary"]["sometimes_never_reached"] = serde_json::json!([]);
        assert_eq!(
            reason(&value),
            "inconsistent: summary.sometimes_never_reached: the file has [], its runs give [\"node_quarantined\"]"
        );
    }

    #[test]
    fn an_edit_of_any_run_field_moves_the_campaign_digest() {
        let edits: [(&str, serde_json::Value); 6] = [
            ("trace_digest", "0".repeat(64).into()),
            ("seed", 10.into()),
            ("config_hash", "other".into()),
            ("trace_events", 2.into()),
            ("repro", "fleetsim campaign campaigns/y.toml --run 0".into()),
            ("lanes", serde_json::json!([{"rollout": "r", "lane": 0, "nodes": 1, "start_ms": 0, "end_ms": 1}])),
        ];
        for (key, edit) in edits {
            let mut value = report_json();
            value["runs"][0][key] = edit;
            assert!(reason(&value).starts_with("inconsistent: summary.campaign_digest: not the digest of"), "{key}");
        }
        let mut value = report_json();
        value["summary"]["campaign_digest"] = "0".repeat(64).into();
        let refused = reason(&value);
        assert_eq!(
            refused,
            "inconsistent: summary.campaign_digest: not the digest of the file's runs: a run or the digest was edited after the report was written"
        );
        let expected = report_json()["summary"]["campaign_digest"].as_str().unwrap().to_owned();
        assert!(!refused.contains(&expected), "the refusal printed the digest to paste");
    }

    #[test]
    fn a_forged_pass_is_refused_even_with_a_recomputed_summary() {
        let mut value = report_json();
        value["runs"][0]["verdict"] = serde_json::json!({"outcome": "pass", "kind": "panic"});
        resummarize(&mut value);
        assert_eq!(reason(&value), "inconsistent: runs[0].verdict.kind: panic on a pass");
        let mut value = report_json();
        value["runs"][0]["violations"] = serde_json::json!([{
            "oracle": "lane_bound", "property": "always", "t_ms": 5, "evidence": "e", "expected": false
        }]);
        value["runs"][0]["violation_counts"] = serde_json::json!({"lane_bound": 1});
        resummarize(&mut value);
        assert_eq!(
            reason(&value),
            "inconsistent: runs[0].verdict: pass, but its panic, violations and unmet expectations give fail (safety_violation)"
        );
        value["runs"][0]["violation_counts"] = serde_json::json!({});
        resummarize(&mut value);
        assert_eq!(
            reason(&value),
            "inconsistent: runs[0].violation_counts.lane_bound: 0, but the record keeps 1 violations of it"
        );
        let mut value = report_json();
        value["runs"][0]["verdict"] = serde_json::json!({"outcome": "fail", "kind": "panic"});
        resummarize(&mut value);
        assert_eq!(reason(&value), "inconsistent: runs[0].panic: absent with the verdict fail (panic)");
    }

    #[test]
    fn a_fault_log_that_disagrees_with_itself_or_the_faults_is_refused() {
        let entry = |fault: u64, effect: &str, phase: &str, landed: Option<u64>| {
            let mut entry = serde_json::json!({
                "fault": fault, "kind": "ssh_timeout", "injected_ms": 10, "phase": phase, "effect": effect
            });
            if let Some(landed) = landed {
                entry["landed_ms"] = landed.into();
            }
            entry
        };
        let with_log = |log: serde_json::Value, faults: serde_json::Value| {
            let mut value = report_json();
            value["runs"][0]["fault_log"] = log;
            value["runs"][0]["faults"] = faults;
            resummarize(&mut value);
            value
        };
        let two = serde_json::json!({"ssh_timeout": 2});
        let good =
            serde_json::json!([entry(1, "retried", "rollout:quiesce", Some(12)), entry(2, "none", "idle", None)]);
        let value = with_log(good, two.clone());
        assert!(parse_report("r.json", value.to_string().as_bytes()).is_ok(), "{}", reason(&value));
        assert_eq!(
            value["summary"]["faults_effective"],
            serde_json::json!({"ssh_timeout": 1}),
            "one of the two was effective"
        );
        let cases = [
            (serde_json::json!([entry(2, "retried", "rollout:quiesce", Some(12))]), "runs[0].fault_log[0].fault: 2"),
            (serde_json::json!([entry(1, "vanished", "idle", None)]), "runs[0].fault_log[0].effect: vanished"),
            (serde_json::json!([entry(1, "none", "nowhere", Some(12))]), "runs[0].fault_log[0].phase: nowhere"),
            (serde_json::json!([entry(1, "none", "idle", Some(3))]), "runs[0].fault_log[0].landed_ms: 3, before"),
            (serde_json::json!([entry(1, "retried", "idle", None)]), "runs[0].fault_log[0].effect: retried in idle"),
            (serde_json::json!([entry(1, "retried", "rollout:quiesce", Some(12))]), "runs[0].fault_log: logs"),
        ];
        for (log, expected) in cases {
            let value = with_log(log, two.clone());
            assert!(reason(&value).starts_with(&format!("inconsistent: {expected}")), "{}", reason(&value));
        }
    }

    #[test]
    fn a_rollout_account_that_disagrees_with_itself_is_refused() {
        let mut value = report_json();
        value["runs"][0]["rollouts"] = serde_json::json!([{
            "rollout": "rollout-b", "outcome": "partial", "counts": {"upgraded": 1, "quarantined": 1},
            "nodes": [
                {"node": "w1", "outcome": "upgraded"},
                {"node": "w2", "outcome": "quarantined", "detail": "marker absent", "repair": "mend it"}
            ]
        }]);
        resummarize(&mut value);
        let report = parse_report("r.json", value.to_string().as_bytes()).unwrap();
        assert_eq!(
            report.summary.rollout_nodes,
            std::collections::BTreeMap::from([("quarantined".into(), 1), ("upgraded".into(), 1)])
        );
        // A quarantine may not be called a successor, however the summary is recomputed; nor may the counts and the
        // node list disagree.
        let forged = |pointer: &str, edit: serde_json::Value| {
            let mut forged = value.clone();
            *forged.pointer_mut(&format!("/runs/0/rollouts/0/{pointer}")).unwrap() = edit;
            resummarize(&mut forged);
            reason(&forged)
        };
        let cases = [
            ("outcome", "successor".into(), "outcome: successor, but 1 of the 2 selected nodes are not upgraded"),
            ("counts", serde_json::json!({"upgraded": 1}), "nodes: 2 listed, but the counts give 1 selected nodes"),
            ("nodes/1/outcome", "upgraded".into(), "counts.upgraded: 1, but the node list has 2"),
            ("nodes/1/node", "w1".into(), "nodes[1].node: not in name order, or listed twice"),
            ("counts", serde_json::json!({"upgraded": 1, "gone": 1}), "counts.gone: not an outcome"),
        ];
        for (pointer, edit, expected) in cases {
            let found = forged(pointer, edit);
            assert!(found.starts_with(&format!("inconsistent: runs[0].rollouts[0].{expected}")), "{pointer}: {found}");
        }
        // The summary's totals are checked against the runs too.
        let mut total = value;
        total["summary"]["rollout_nodes"] = serde_json::json!({"upgraded": 2});
        assert!(reason(&total).starts_with("inconsistent: summary.rollout_nodes: the file has"), "{}", reason(&total));
    }

    #[test]
    fn runs_out_of_order_or_of_another_build_are_refused() {
        let mut value = report_json();
        value["runs"][0]["run_index"] = 99.into();
        resummarize(&mut value);
        assert_eq!(reason(&value), "inconsistent: runs[0].run_index: 99, but the runs 0..N in order put 0 here");
        let mut value = report_json();
        let second = value["runs"][0].clone();
        value["runs"].as_array_mut().unwrap().insert(0, second);
        value["runs"][0]["run_index"] = 1.into();
        resummarize(&mut value);
        assert_eq!(reason(&value), "inconsistent: runs[0].run_index: 1, but the runs 0..N in order put 0 here");
        let mut value = report_json();
        value["runs"][0]["commit"] = "beef".into();
        resummarize(&mut value);
        assert_eq!(reason(&value), "inconsistent: runs[0].commit: beef, but the report's is abc");
    }

    #[test]
    fn a_shard_that_holds_runs_of_another_shard_is_refused() {
        let mut value = report_json();
        value["shard"] = serde_json::json!({"index": 1, "count": 4, "runs_total": 4});
        parse_report("r.json", value.to_string().as_bytes()).unwrap();
        value["runs"][0]["run_index"] = 1.into();
        resummarize(&mut value);
        assert_eq!(reason(&value), "inconsistent: runs[0].run_index: 1, but shard 1/4's runs in order put 0 here");
        value["shard"]["index"] = 5.into();
        assert_eq!(reason(&value), "inconsistent: shard: 5/4 is not K/N with 1 <= K <= N");
        value["shard"] = serde_json::json!({"index": 1, "count": 1, "runs_total": u64::MAX});
        assert!(reason(&value).starts_with("inconsistent: shard.runs_total: 18446744073709551615 is more than"));
    }

    #[test]
    fn a_missing_file_is_named() {
        let error = read_report(Path::new("no/such/report.json")).unwrap_err();
        assert_eq!(error.to_string(), "no/such/report.json: no such file");
    }
}
