//! Scaling out and surviving: `--shard K/N` reports merged with `fleetsim report merge` equal the unsharded report
//! for N = 1, 2, 3; merging refuses foreign, overlapping and incomplete shards by name; a campaign whose per-run
//! files were lost (as a kill loses the runs in flight) is finished by `--resume` into the same report.json.

#[path = "support/small_campaign.rs"]
mod small_campaign;
use small_campaign::{SSH_TIMEOUTS, small_campaign};

use std::path::{Path, PathBuf};

use sim::model::exit::{EXIT_BAD_INPUT, EXIT_PASS};

#[path = "support/in_process.rs"]
mod in_process;
use in_process::fleetsim;

fn campaign_text() -> String {
    small_campaign(
        "shard test: a small rollout campaign",
        11,
        7,
        &[SSH_TIMEOUTS, "controller_death = { per_mille = 300, duration_ms = { min = 30_000, max = 600_000 } }"],
        &["rollout_reached_successor", "controller_adopted_journal"],
    )
}

fn setup() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let campaign = dir.path().join("small.toml");
    std::fs::write(&campaign, campaign_text()).unwrap();
    let campaign = campaign.display().to_string();
    (dir, campaign)
}

/// Runs the campaign with `extra` arguments into `dir/name` and returns the report's path.
fn campaign(dir: &Path, campaign: &str, name: &str, extra: &[&str]) -> PathBuf {
    let out = dir.join(name);
    let mut args = vec!["campaign", campaign, "--jobs", "2", "--out", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    let (code, stdout, err) = fleetsim(&args);
    assert!(code == EXIT_PASS || code == sim::model::exit::EXIT_FAIL, "{stdout}{err}");
    out.join("report.json")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

#[test]
fn merged_shards_equal_the_unsharded_report_for_one_two_and_three_shards() {
    let (dir, file) = setup();
    let whole = campaign(dir.path(), &file, "whole", &[]);
    let whole_report: reports::CampaignReport = serde_json::from_str(&read(&whole)).unwrap();
    assert_eq!(whole_report.runs.len(), 7);
    for count in 1..=3 {
        let mut paths = Vec::new();
        for index in (1..=count).rev() {
            let report =
                campaign(dir.path(), &file, &format!("s{index}of{count}"), &["--shard", &format!("{index}/{count}")]);
            let shard: reports::CampaignReport = serde_json::from_str(&read(&report)).unwrap();
            assert_eq!(shard.shard, Some(reports::Shard { index, count, runs_total: 7 }));
            assert!(shard.runs.iter().all(|run| run.run_index.unwrap() % count == index - 1));
            paths.push(report.display().to_string());
        }
        let merged = dir.path().join(format!("merged{count}/report.json"));
        let mut args = vec!["report", "merge"];
        args.extend(paths.iter().map(String::as_str));
        args.extend(["-o", merged.to_str().unwrap()]);
        let (code, out, err) = fleetsim(&args);
        assert_eq!(code, EXIT_PASS, "{err}");
        assert!(out.starts_with(&format!("merged {count} shard reports of {file} (7 runs, ")), "{out}");
        let merged_report: reports::CampaignReport = serde_json::from_str(&read(&merged)).unwrap();
        assert_eq!(merged_report.summary.campaign_digest, whole_report.summary.campaign_digest, "N = {count}");
        assert_eq!(merged_report, whole_report, "N = {count}");
        assert_eq!(read(&merged), read(&whole), "N = {count}: byte for byte");
    }
    // `fleetsim report <file>` still renders.
    let (code, text, _) = fleetsim(&["report", whole.to_str().unwrap()]);
    assert_eq!(code, EXIT_PASS);
    assert!(text.contains("passed        "), "{text}");
}

#[test]
fn foreign_overlapping_and_missing_shards_are_refused_by_name() {
    let (dir, file) = setup();
    let s1 = campaign(dir.path(), &file, "s1", &["--shard", "1/2"]).display().to_string();
    let s2 = campaign(dir.path(), &file, "s2", &["--shard", "2/2"]).display().to_string();
    let other_seed = campaign(dir.path(), &file, "seed", &["--shard", "2/2", "--seed", "12"]).display().to_string();
    let out = dir.path().join("m.json");
    let out = out.to_str().unwrap();
    let merge = |inputs: &[&str]| {
        let mut args = vec!["report", "merge"];
        args.extend_from_slice(inputs);
        args.extend(["-o", out]);
        fleetsim(&args)
    };
    let (code, _, err) = merge(&[&s1, &other_seed]);
    assert_eq!(code, EXIT_BAD_INPUT);
    assert!(err.starts_with(&format!("error: report merge: {other_seed}: config_hash is ")), "{err}");
    let (code, _, err) = merge(&[&s1, &s2, &s1]);
    assert_eq!(code, EXIT_BAD_INPUT);
    assert_eq!(err, format!("error: report merge: run 0 is in both {s1} and {s1}: the shards overlap\n"));
    let (code, _, err) = merge(&[&s2]);
    assert_eq!(code, EXIT_BAD_INPUT);
    assert_eq!(err, "error: report merge: runs missing from every input: 0, 2, 4, 6 (4 of 7); give every shard\n");
    assert!(!Path::new(out).exists(), "nothing written on a refusal");
    let (code, _, err) = fleetsim(&["campaign", &file, "--shard", "3/2"]);
    assert_eq!(code, EXIT_BAD_INPUT);
    assert_eq!(err, "error: --shard 3/2: K must be 1 to N (2); shards are numbered from 1\n");
}

#[test]
fn resume_runs_only_the_missing_runs_and_writes_the_uninterrupted_report() {
    let (dir, file) = setup();
    let uninterrupted = campaign(dir.path(), &file, "a", &[]);
    let interrupted = campaign(dir.path(), &file, "b", &[]);
    let runs = dir.path().join("b/runs");
    let mut names: Vec<String> = std::fs::read_dir(&runs)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["0000.json", "0001.json", "0002.json", "0003.json", "0004.json", "0005.json", "0006.json"]);
    // What a kill leaves: some runs finished, the others and the report not written.
    for name in ["0001.json", "0004.json", "0005.json"] {
        std::fs::remove_file(runs.join(name)).unwrap();
    }
    std::fs::remove_file(&interrupted).unwrap();
    let kept = read(&runs.join("0002.json"));
    let out_dir = dir.path().join("b");
    let (code, out, err) =
        fleetsim(&["campaign", &file, "--jobs", "2", "--out", out_dir.to_str().unwrap(), "--resume"]);
    assert!(code == EXIT_PASS || code == sim::model::exit::EXIT_FAIL, "{err}");
    assert!(
        out.contains(&format!(
            "  resumed       4 runs read from {} (4 of them replayed to check, drawn at random), 3 run now\n",
            runs.display()
        )),
        "{out}"
    );
    assert_eq!(read(&interrupted), read(&uninterrupted), "the resumed report is the uninterrupted one");
    assert_eq!(read(&runs.join("0002.json")), kept, "a finished run is read, not run again");

    // A per-run file of another execution (here: another campaign seed) is refused, not mixed in.
    let (code, _, err) = fleetsim(&["campaign", &file, "--seed", "99", "--out", out_dir.to_str().unwrap(), "--resume"]);
    assert_eq!(code, EXIT_BAD_INPUT);
    assert!(
        err.starts_with(&format!(
            "error: {}: written by another execution: its seed is ",
            runs.join("0000.json").display()
        )),
        "{err}"
    );
    // A corrupt one is named too.
    std::fs::write(runs.join("0003.json"), "{\"schema_version\": 1,").unwrap();
    let (code, _, err) = fleetsim(&["campaign", &file, "--out", out_dir.to_str().unwrap(), "--resume"]);
    assert_eq!(code, EXIT_BAD_INPUT);
    assert!(err.starts_with(&format!("error: {}: not a run record (", runs.join("0003.json").display())), "{err}");
}

/// Edits the JSON file at `path` in place.
fn edit(path: &Path, change: impl FnOnce(&mut serde_json::Value)) {
    let mut value: serde_json::Value = serde_json::from_str(&read(path)).unwrap();
    change(&mut value);
    std::fs::write(path, serde_json::to_string_pretty(&value).unwrap()).unwrap();
}

/// The summary a forger who knows the format recomputes for an edited report.
fn resummarize(path: &Path) {
    edit(path, |value| {
        let report: reports::CampaignReport = serde_json::from_value(value.clone()).unwrap();
        let sometimes: Vec<String> = report.summary.sometimes_reached.keys().cloned().collect();
        let summary = reports::Summary {
            matrix_listed: report.summary.matrix_listed.clone(),
            ..reports::summarize(&report.runs, &sometimes, reports::read::sha256_hex)
        };
        value["summary"] = serde_json::to_value(summary).unwrap();
    });
}

#[test]
fn merge_refuses_a_shard_whose_run_was_edited_by_name() {
    let (dir, file) = setup();
    let s1 = campaign(dir.path(), &file, "s1", &["--shard", "1/2"]);
    let s2 = campaign(dir.path(), &file, "s2", &["--shard", "2/2"]);
    let out = dir.path().join("m.json");
    let merge = |inputs: &[&Path]| {
        let mut args = vec!["report".to_owned(), "merge".to_owned()];
        args.extend(inputs.iter().map(|path| path.display().to_string()));
        args.extend(["-o".to_owned(), out.display().to_string()]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        fleetsim(&args)
    };
    let pristine = read(&s2);
    // An edited seed: the campaign digest no longer covers the runs.
    edit(&s2, |value| value["runs"][1]["seed"] = 7.into());
    let (code, _, err) = merge(&[&s1, &s2]);
    assert_eq!(code, EXIT_BAD_INPUT, "{err}");
    assert!(
        err.starts_with(&format!(
            "error: {}: inconsistent: summary.campaign_digest: not the digest of the file's runs",
            s2.display()
        )),
        "{err}"
    );
    let edited: reports::CampaignReport = serde_json::from_str(&read(&s2)).unwrap();
    let sometimes: Vec<String> = edited.summary.sometimes_reached.keys().cloned().collect();
    let expected = reports::summarize(&edited.runs, &sometimes, reports::read::sha256_hex).campaign_digest;
    assert!(!err.contains(&expected), "the refusal printed the digest to paste: {err}");
    // A record edited to disagree with itself, the summary recomputed: the run's own fields give it away.
    std::fs::write(&s2, &pristine).unwrap();
    edit(&s2, |value| value["runs"][0]["panic"] = "forged".into());
    resummarize(&s2);
    let (code, _, err) = merge(&[&s1, &s2]);
    assert_eq!(code, EXIT_BAD_INPUT, "{err}");
    assert!(
        err.starts_with(&format!("error: {}: inconsistent: runs[0].panic: a message with the verdict ", s2.display())),
        "{err}"
    );
    assert!(!out.exists(), "nothing written on a refusal");
}

#[test]
fn resume_refuses_a_run_file_edited_after_it_was_written() {
    let (dir, file) = setup();
    let report = campaign(dir.path(), &file, "a", &[]);
    std::fs::remove_file(&report).unwrap();
    let runs = dir.path().join("a/runs");
    let resume = || fleetsim(&["campaign", &file, "--out", dir.path().join("a").to_str().unwrap(), "--resume"]);
    let run = runs.join("0003.json");
    let pristine = read(&run);
    let text: serde_json::Value = serde_json::from_str(&pristine).unwrap();
    assert!(text["record_digest"].as_str().is_some_and(|digest| digest.len() == 64), "{pristine}");
    for (key, change) in [
        ("trace_digest", serde_json::Value::from("0".repeat(64))),
        ("verdict", serde_json::json!({"outcome": "fail", "kind": "liveness_failure"})),
    ] {
        std::fs::write(&run, &pristine).unwrap();
        edit(&run, |value| value[key] = change);
        let (code, _, err) = resume();
        assert_eq!(code, EXIT_BAD_INPUT, "{key}: {err}");
        assert!(
            err.starts_with(&format!("error: {}: record_digest: not the digest of its record", run.display()))
                && err.contains("the record was edited after it was written"),
            "{key}: {err}"
        );
        let edited: reports::RunRecord = {
            let mut value: serde_json::Value = serde_json::from_str(&read(&run)).unwrap();
            value.as_object_mut().unwrap().remove("record_digest");
            serde_json::from_value(value).unwrap()
        };
        let expected = sim::run::shard::record_digest(&edited);
        assert!(!err.contains(&expected), "the refusal printed the digest to paste: {err}");
    }
    // An edit that recomputes the record's digest still has to agree with itself.
    std::fs::write(&run, &pristine).unwrap();
    edit(&run, |value| {
        value["verdict"] = serde_json::json!({"outcome": "fail", "kind": "liveness_failure"});
        value.as_object_mut().unwrap().remove("record_digest");
        let record: reports::RunRecord = serde_json::from_value(value.clone()).unwrap();
        value["record_digest"] = sim::run::shard::record_digest(&record).into();
    });
    let (code, _, err) = resume();
    assert_eq!(code, EXIT_BAD_INPUT, "{err}");
    assert!(
        err.starts_with(&format!(
            "error: {}: verdict: fail (liveness_failure), but its panic, violations and unmet expectations give",
            run.display()
        )),
        "{err}"
    );
    std::fs::write(&run, &pristine).unwrap();
    let (code, _, err) = resume();
    assert!(code == EXIT_PASS || code == sim::model::exit::EXIT_FAIL, "the unedited file resumes: {err}");
}

/// Forges a run record the way the forger did: its faults deleted (the summary's totals follow), everything
/// else kept, so the record agrees with itself.
fn forge_faults(value: &mut serde_json::Value) {
    value["faults"] = serde_json::json!({});
    value["fault_log"] = serde_json::json!([]);
}

#[test]
fn resume_refuses_a_forged_run_file_whose_digest_was_recomputed() {
    let (dir, file) = setup();
    let report = campaign(dir.path(), &file, "a", &[]);
    std::fs::remove_file(&report).unwrap();
    let runs = dir.path().join("a/runs");
    // Five runs finished (at most VERIFY_SAMPLE, so every one is replayed and the test cannot miss).
    for name in ["0005.json", "0006.json"] {
        std::fs::remove_file(runs.join(name)).unwrap();
    }
    let forged = (0..5)
        .map(|index| runs.join(format!("{index:04}.json")))
        .find(|path| {
            let value: serde_json::Value = serde_json::from_str(&read(path)).unwrap();
            value["faults"].as_object().is_some_and(|faults| !faults.is_empty())
        })
        .expect("a finished run injected faults");
    edit(&forged, |value| {
        forge_faults(value);
        // The digest recomputed, as a refusal that printed it would have handed it over.
        value.as_object_mut().unwrap().remove("record_digest");
        let record: reports::RunRecord = serde_json::from_value(value.clone()).unwrap();
        value["record_digest"] = sim::run::shard::record_digest(&record).into();
    });
    let (code, _, err) = fleetsim(&["campaign", &file, "--out", dir.path().join("a").to_str().unwrap(), "--resume"]);
    assert_eq!(code, EXIT_BAD_INPUT, "a forged record was resumed: {err}");
    assert!(
        err.starts_with(&format!("error: {}: its record of run ", forged.display()))
            && err.contains("is not what the run gives (its replay differs in fault_log, faults)"),
        "{err}"
    );
}

#[test]
fn merge_refuses_a_forged_shard_that_agrees_with_itself() {
    let (dir, file) = setup();
    let s1 = campaign(dir.path(), &file, "s1", &["--shard", "1/2"]);
    let s2 = campaign(dir.path(), &file, "s2", &["--shard", "2/2"]);
    let out = dir.path().join("m.json");
    let merge =
        || fleetsim(&["report", "merge", s1.to_str().unwrap(), s2.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    let (code, stdout, err) = merge();
    assert_eq!(code, EXIT_PASS, "{err}");
    assert!(stdout.contains("; 5 runs replayed to check the shards, drawn at random"), "{stdout}");
    std::fs::remove_file(&out).unwrap();
    // Shard 2/2 holds three of the seven runs, each forged (its event count), the shard resummarized: a sample of
    // five of the seven cannot miss all three, so the test cannot pass by luck.
    edit(&s2, |value| {
        for run in value["runs"].as_array_mut().unwrap() {
            run["trace_events"] = (run["trace_events"].as_u64().unwrap() + 1).into();
        }
    });
    resummarize(&s2);
    let (code, _, err) = merge();
    assert_eq!(code, EXIT_BAD_INPUT, "a forged shard was merged: {err}");
    assert!(
        err.starts_with(&format!("error: report merge: {}: its record of run ", s2.display()))
            && err.contains("is not what the run gives"),
        "{err}"
    );
    assert!(!out.exists(), "nothing written on a refusal");
    // And a merge away from the campaign file cannot re-derive anything: refused, not trusted.
    std::fs::remove_file(&file).unwrap();
    let (code, _, err) = merge();
    assert_eq!(code, EXIT_BAD_INPUT, "{err}");
    assert!(err.contains("cannot load the campaign it names"), "{err}");
}
