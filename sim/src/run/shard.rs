//! Splitting a campaign over machines and surviving interruption. `--shard K/N` picks the runs `i` with
//! `i % N == K - 1`; every finished run is written to `DIR/runs/NNNN.json` (atomically: a temporary file, fsynced,
//! renamed) with the digest of its record, and `--resume` reads those records back instead of running them again,
//! refusing one whose digest, identity or verdict does not check.
//!
//! Why one file per run and not an append-only `runs.jsonl`: a rename is all-or-nothing, so a kill at any instant
//! leaves each record whole or absent, with no torn last line to detect and cut off; the worker threads write
//! without sharing a file handle or ordering their appends; and resuming is a lookup by name. The cost is one small
//! file per run (1,000 for a 1,000-run campaign).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use reports::{RunRecord, Shard};

use crate::model::campaign::Campaign;
use crate::model::spec::SpecError;
use crate::run::runner;

/// The subdirectory of a campaign's output directory that holds the per-run records.
pub const RUNS_DIR: &str = "runs";

/// Parses `K/N` for a campaign of `runs_total` runs: `1 ≤ K ≤ N`.
pub fn parse_shard(text: &str, runs_total: u64) -> Result<Shard, SpecError> {
    let error = |message: String| SpecError { path: format!("--shard {text}"), position: None, message };
    let Some((k, n)) = text.split_once('/') else {
        return Err(error("expected K/N, e.g. 2/4: the runs i with i % N == K - 1".to_owned()));
    };
    let (Ok(index), Ok(count)) = (k.trim().parse::<u64>(), n.trim().parse::<u64>()) else {
        return Err(error("K and N must be whole numbers, e.g. 2/4".to_owned()));
    };
    if count == 0 {
        return Err(error("N must be at least 1".to_owned()));
    }
    if index == 0 || index > count {
        return Err(error(format!("K must be 1 to N ({count}); shards are numbered from 1")));
    }
    Ok(Shard { index, count, runs_total })
}

/// Where run `index`'s record is kept: `DIR/runs/0007.json`.
pub fn run_file(dir: &Path, index: u64) -> PathBuf {
    dir.join(RUNS_DIR).join(format!("{index:04}.json"))
}

/// How many of the runs `--resume` reads back (and `report merge` merges) are replayed to check them, drawn at the
/// time from the operating system's random source: a record is re-derived, not trusted (its seed and configuration
/// from the campaign, a sample of whole records from replays). The gate replays every run of the final report.
pub const VERIFY_SAMPLE: u64 = 5;

/// The key of a run file that holds the SHA-256 of its record's canonical bytes, so `--resume` refuses a record
/// edited carelessly after it was written (a careful edit recomputes it: the replayed sample is what finds that).
pub const RECORD_DIGEST_KEY: &str = "record_digest";

/// The digest a run file carries: SHA-256 over the record's canonical JSON (every field, as `serde_json` writes it).
pub fn record_digest(record: &RunRecord) -> String {
    crate::model::digest::sha256_hex(&serde_json::to_vec(record).expect("run records serialise"))
}

/// Writes a finished run's record to its file, atomically: the record's JSON with its [`RECORD_DIGEST_KEY`] added.
pub fn write_run_file(dir: &Path, record: &RunRecord) -> Result<(), (PathBuf, std::io::Error)> {
    let index = record.run_index.unwrap_or(0);
    let path = run_file(dir, index);
    let mut value = serde_json::to_value(record).expect("run records serialise");
    if let serde_json::Value::Object(object) = &mut value {
        object.insert(RECORD_DIGEST_KEY.to_owned(), record_digest(record).into());
    }
    reports::write_json_atomic(&path, &value).map_err(|error| (path, error))
}

/// Reads back the records of the runs among `indices` that a previous execution finished. A missing file is a run
/// still to do. A file that is not a record of exactly this run — another campaign, seed, configuration, build or
/// reproduce line — is refused with its path, so a resumed report never mixes two executions.
pub fn load_finished(
    dir: &Path,
    campaign: &Campaign,
    indices: &[u64],
    seed_overridden: bool,
) -> Result<BTreeMap<u64, RunRecord>, SpecError> {
    let mut finished = BTreeMap::new();
    for &index in indices {
        let path = run_file(dir, index);
        let name = path.display().to_string();
        let fail = |message: String| SpecError { path: name.clone(), position: None, message };
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => continue,
            Err(error) => return Err(fail(format!("cannot read: {error}"))),
        };
        let again = "delete it and resume to run this run again";
        let mut value: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|error| fail(format!("not a run record ({error}); {again}")))?;
        let written_digest = value.as_object_mut().and_then(|object| object.remove(RECORD_DIGEST_KEY));
        let record: RunRecord =
            serde_json::from_value(value).map_err(|error| fail(format!("not a run record ({error}); {again}")))?;
        let identity = crate::run::campaign::identity(campaign, index, seed_overridden);
        let expected: [(&str, String, String); 8] = [
            ("schema_version", reports::SCHEMA_VERSION.to_string(), record.schema_version.to_string()),
            ("run_index", index.to_string(), record.run_index.map_or_else(|| "absent".to_owned(), |i| i.to_string())),
            ("seed", campaign.run_seed(index).to_string(), record.seed.to_string()),
            ("config_hash", campaign.run_spec(index).config_hash(), record.config_hash.clone()),
            ("commit", runner::commit().to_owned(), record.commit.clone()),
            ("tool_version", runner::TOOL_VERSION.to_owned(), record.tool_version.clone()),
            ("source", identity.source, record.source.clone()),
            ("repro", identity.repro, record.repro.clone()),
        ];
        for (key, want, found) in expected {
            if want != found {
                return Err(fail(format!(
                    "written by another execution: its {key} is {found}, this run's is {want}; run without --resume to start over"
                )));
            }
        }
        let digest = record_digest(&record);
        match written_digest.as_ref().and_then(serde_json::Value::as_str) {
            Some(written) if written == digest => {}
            // Named, not printed: the digest the record gives is what an editor would paste.
            Some(_) => {
                return Err(fail(format!(
                    "{RECORD_DIGEST_KEY}: not the digest of its record: the record was edited after it was written; {again}"
                )));
            }
            None => {
                return Err(fail(format!(
                    "{RECORD_DIGEST_KEY}: missing, so fleetsim did not write this record; {again}"
                )));
            }
        }
        if let Err((key, reason)) = reports::read::check_run(&record) {
            return Err(fail(format!("{key}: {reason}; {again}")));
        }
        finished.insert(index, record);
    }
    Ok(finished)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shard_is_k_of_n_from_1_and_its_runs_are_every_nth() {
        let shard = parse_shard("2/3", 8).unwrap();
        assert_eq!(shard, Shard { index: 2, count: 3, runs_total: 8 });
        assert_eq!(shard.indices(), vec![1, 4, 7]);
        let all: Vec<u64> = (1..=3).flat_map(|k| parse_shard(&format!("{k}/3"), 8).unwrap().indices()).collect();
        let mut sorted = all.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..8).collect::<Vec<_>>(), "the shards partition the runs");
        assert_eq!(parse_shard("1/1", 5).unwrap().indices(), vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn a_bad_shard_is_refused_with_what_to_write() {
        let message = |text: &str| parse_shard(text, 8).unwrap_err().to_string();
        assert_eq!(message("0/3"), "--shard 0/3: K must be 1 to N (3); shards are numbered from 1");
        assert_eq!(message("4/3"), "--shard 4/3: K must be 1 to N (3); shards are numbered from 1");
        assert_eq!(message("1/0"), "--shard 1/0: N must be at least 1");
        assert_eq!(message("2"), "--shard 2: expected K/N, e.g. 2/4: the runs i with i % N == K - 1");
        assert_eq!(message("a/b"), "--shard a/b: K and N must be whole numbers, e.g. 2/4");
    }

    #[test]
    fn run_files_are_named_by_zero_padded_index() {
        assert_eq!(run_file(Path::new("d"), 7), Path::new("d/runs/0007.json"));
        assert_eq!(run_file(Path::new("d"), 12345), Path::new("d/runs/12345.json"));
    }
}
