//! The journal conformance suite: one set of checks of the `engine::ports::Journal` contract, run against every
//! backend through a [`JournalStore`]: `#[macro_use] #[path = "support/journal_suite.rs"] mod journal_suite;` then
//! `journal_conformance!(make_store());` inside a module per backend.

use std::pin::pin;
use std::task::{Context, Poll, Waker};

use engine::ports::events::OldJournalDefect;
use engine::ports::{Journal, JournalError};
use engine::rollout::journal::{Record, settle_and_replay};
use engine::rollout::lane::NodeStep;
use fakes::cohort_journal::{CohortPlan, OldJournal};

/// Where a backend's journal lives, and the faults the suite needs from it.
pub trait JournalStore {
    type Journal: Journal;
    /// Opens the journal in this store, creating it when absent.
    fn open(&mut self) -> Result<Self::Journal, JournalError>;
    /// Closes the journal cleanly.
    fn close(&mut self, journal: Self::Journal);
    /// The journal's process or machine dies with it open: whatever was not acknowledged may be lost.
    fn crash(&mut self, journal: Self::Journal);
    /// Damages the stored journal (closed) so that it is no journal; answers the name a `Corrupt` error must contain.
    fn corrupt(&mut self) -> String;
}

/// Runs a journal future: both backends do their storage inline, so it is ready at its first poll.
pub fn now<T>(future: impl Future<Output = T>) -> T {
    match pin!(future).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(value) => value,
        Poll::Pending => panic!("a journal under test waited; the suite's backends complete at once"),
    }
}

fn append_all(journal: &impl Journal, records: &[String]) {
    for record in records {
        now(journal.append(record)).unwrap_or_else(|error| panic!("append {record:?}: {error}"));
    }
}

fn replay(journal: &impl Journal) -> Vec<String> {
    now(journal.replay()).unwrap_or_else(|error| panic!("replay: {error}"))
}

fn read(journal: &impl Journal, subject: &str) -> Vec<String> {
    now(journal.replay_subject(subject)).unwrap_or_else(|error| panic!("replay_subject({subject}): {error}"))
}

fn numbered(prefix: &str, count: usize) -> Vec<String> {
    (0..count).map(|index| format!("{prefix} {index}")).collect()
}

pub fn a_new_journal_replays_nothing(mut store: impl JournalStore) {
    let journal = store.open().unwrap();
    assert_eq!(replay(&journal), Vec::<String>::new());
}

pub fn replay_returns_the_records_in_append_order(mut store: impl JournalStore) {
    let journal = store.open().unwrap();
    let records: Vec<String> = ["c", "a", "b", "a", "rollout {\"record\":\"terminal\"}"].map(str::to_owned).into();
    append_all(&journal, &records);
    assert_eq!(replay(&journal), records);
}

pub fn unicode_long_and_edge_records_are_kept_intact(mut store: impl JournalStore) {
    let journal = store.open().unwrap();
    let long: String = "ωκεανός 🚀 λ\t".chars().cycle().take(200_000).collect();
    let records = vec![
        "ünïcödé — 日本語 — 🦀".to_owned(),
        long,
        String::new(),
        "  leading and trailing spaces  ".to_owned(),
        "a carriage return at the end\r".to_owned(),
        "\u{2028} a unicode line separator \u{0085}".to_owned(),
        "quotes ' \" and a NUL \u{0} inside".to_owned(),
    ];
    append_all(&journal, &records);
    assert_eq!(replay(&journal), records);
    store.close(journal);
    let journal = store.open().unwrap();
    assert_eq!(replay(&journal), records, "after reopening");
}

pub fn a_record_with_a_newline_is_refused_and_nothing_is_written(mut store: impl JournalStore) {
    let journal = store.open().unwrap();
    append_all(&journal, &["before".to_owned()]);
    for bad in ["two\nlines", "\n", "trailing newline\n"] {
        let error = now(journal.append(bad)).expect_err("a record with a newline must be refused");
        assert!(matches!(error, JournalError::WriteFailed(_)), "{bad:?}: {error:?}");
    }
    assert_eq!(replay(&journal), ["before"]);
    store.crash(journal);
    let journal = store.open().unwrap();
    assert_eq!(replay(&journal), ["before"], "nothing of a refused record reached storage");
    append_all(&journal, &["after".to_owned()]);
    assert_eq!(replay(&journal), ["before", "after"]);
}

pub fn reopening_after_close_keeps_every_record(mut store: impl JournalStore) {
    let first = numbered("first", 3);
    let journal = store.open().unwrap();
    append_all(&journal, &first);
    store.close(journal);
    let journal = store.open().unwrap();
    assert_eq!(replay(&journal), first);
    append_all(&journal, &["second".to_owned()]);
    store.close(journal);
    let journal = store.open().unwrap();
    let mut expected = first;
    expected.push("second".to_owned());
    assert_eq!(replay(&journal), expected);
}

pub fn every_acknowledged_append_survives_a_crash(mut store: impl JournalStore) {
    let mut expected = Vec::new();
    for round in 0..3 {
        let journal = store.open().unwrap();
        assert_eq!(replay(&journal), expected, "after crash {round}");
        let records = numbered(&format!("round {round}"), 5);
        append_all(&journal, &records);
        expected.extend(records);
        store.crash(journal);
    }
    let journal = store.open().unwrap();
    assert_eq!(replay(&journal), expected);
}

pub fn replay_is_idempotent(mut store: impl JournalStore) {
    let journal = store.open().unwrap();
    let records = numbered("record", 4);
    append_all(&journal, &records);
    let first = replay(&journal);
    assert_eq!(replay(&journal), first);
    assert_eq!(replay(&journal), records);
    append_all(&journal, &["last".to_owned()]);
    assert_eq!(replay(&journal).last().map(String::as_str), Some("last"), "a replay does not stop later appends");
    assert_eq!(replay(&journal).len(), 5);
}

/// `replay_subject` answers one workflow's records in append order, and those whose subject cannot be read; a crash
/// and a reopening change nothing of it, and appends after a read are seen by the next.
pub fn replay_subject_answers_one_workflows_records(mut store: impl JournalStore) {
    let of = |kind: &str, field: &str, subject: &str, n: u32| format!("{kind} {{\"{field}\":\"{subject}\",\"n\":{n}}}");
    let records = vec![
        of("onboard", "workflow", "onboard-a", 1),
        of("onboard", "workflow", "onboard-b", 1),
        of("audit", "workflow_id", "onboard-a", 2),
        "a line of no subject".to_owned(),
        of("rollout", "rollout", "rollout-r2", 1),
        of("onboard", "workflow", "onboard-ab", 1),
        of("onboard", "workflow", "onboard-a", 3),
    ];
    let journal = store.open().unwrap();
    append_all(&journal, &records[..4]);
    assert_eq!(read(&journal, "onboard-a"), [records[0].as_str(), &records[2], &records[3]]);
    append_all(&journal, &records[4..]);
    let of_a = [records[0].as_str(), &records[2], &records[3], &records[6]];
    assert_eq!(read(&journal, "onboard-a"), of_a, "appends after a read are read");
    assert_eq!(read(&journal, "rollout-r2"), [records[3].as_str(), &records[4]]);
    assert_eq!(read(&journal, "onboard-ab"), [records[3].as_str(), &records[5]], "a subject is matched whole");
    assert_eq!(read(&journal, "nobody"), [records[3].as_str()]);
    store.crash(journal);
    let journal = store.open().unwrap();
    assert_eq!(read(&journal, "onboard-a"), of_a, "after a crash");
    assert_eq!(replay(&journal), records, "the whole journal is unchanged");
}

pub fn a_corrupt_store_is_reported_naming_it(mut store: impl JournalStore) {
    let journal = store.open().unwrap();
    append_all(&journal, &["a good record".to_owned()]);
    store.close(journal);
    let name = store.corrupt();
    // A backend may notice at open (SQLite reads the file header) or at replay (a file of lines).
    let error = match store.open() {
        Err(error) => error,
        Ok(journal) => {
            let by_subject =
                now(journal.replay_subject("anyone")).expect_err("a corrupt journal has no subject's records");
            assert!(matches!(by_subject, JournalError::Corrupt(_)), "{by_subject:?}");
            now(journal.replay()).expect_err("replaying a corrupt journal must fail")
        }
    };
    let JournalError::Corrupt(text) = &error else { panic!("expected Corrupt, got {error:?}") };
    assert!(text.contains(&name), "the error {text:?} does not name {name:?}");
}

/// What the pre-typed controller left for a rollout of three nodes in two cohorts, as `shape` has it.
fn old_journal(shape: OldJournal) -> Vec<String> {
    let plan = CohortPlan {
        rollout: "rollout-2944aebb".into(),
        revision: "2944aebb".into(),
        generation: 2,
        routes: "sha256:routes-1".into(),
        cohorts: vec![vec!["node-01".into(), "node-02".into()], vec!["node-03".into()]],
    };
    shape.lines(&plan)
}

/// Old lines are settled once whatever the backend: their migration is one append, which a crash keeps, and a
/// replay after a crash or a reopening finds them settled and migrates nothing again.
pub fn old_lines_are_migrated_once_across_a_crash(mut store: impl JournalStore) {
    let mut lines = old_journal(OldJournal::Armed);
    lines.insert(1, "sensor.silent node-03".to_owned()); // another subsystem's record among them
    let journal = store.open().unwrap();
    append_all(&journal, &lines);
    let (replayed, settled) = now(settle_and_replay(&journal)).unwrap();
    let Some(Record::Migrated { lines: migrated, records, .. }) = settled else { panic!("{settled:?}") };
    assert_eq!(migrated.iter().map(|old| old.line).collect::<Vec<_>>(), [1, 3, 4]);
    assert_eq!(records.len(), 3, "the plan and two armed holds");
    let adopted = replayed.adopted.clone().expect("the migrated rollout is adopted");
    assert_eq!((adopted.rollout.as_str(), adopted.revision.as_str()), ("rollout-2944aebb", "2944aebb"));
    let hold = |node: &str| (node.to_owned(), NodeStep::Hold);
    assert_eq!(adopted.in_doubt, [hold("node-01"), hold("node-02")]);
    store.crash(journal);
    for round in ["after a crash", "after a reopening"] {
        let journal = store.open().unwrap();
        let (again, settled) = now(settle_and_replay(&journal)).unwrap();
        assert_eq!(settled, None, "{round}: migrated once");
        assert_eq!(again, replayed, "{round}");
        assert_eq!(replay(&journal).len(), lines.len() + 1, "{round}: the old lines and one migration");
        store.close(journal);
    }
}

/// Old lines that cannot be decoded unambiguously are set aside once, naming the line, whatever the backend, and the
/// quarantine stands after a crash: nothing is adopted while it does.
pub fn undecodable_old_lines_are_quarantined_once_and_the_quarantine_stands(mut store: impl JournalStore) {
    for (shape, line, defect) in [
        (OldJournal::UnknownPhase, 4, OldJournalDefect::UnknownPhase),
        (OldJournal::ConflictingPlans, 4, OldJournalDefect::ConflictingPlans),
    ] {
        let lines = old_journal(shape);
        let journal = store.open().unwrap();
        let before = replay(&journal).len();
        append_all(&journal, &lines);
        let (replayed, settled) = now(settle_and_replay(&journal)).unwrap();
        let Some(Record::JournalQuarantined { line: at, defect: why, lines: set_aside, .. }) = settled else {
            panic!("{shape:?}: {settled:?}")
        };
        assert_eq!((at, why, set_aside.len()), (before as u64 + line, defect, lines.len()), "{shape:?}");
        assert_eq!(replayed.adopted, None, "{shape:?}: nothing adopted");
        let standing = replayed.quarantine.clone().expect("the quarantine stands");
        store.crash(journal);
        let journal = store.open().unwrap();
        let (again, settled) = now(settle_and_replay(&journal)).unwrap();
        assert_eq!((settled, again.quarantine), (None, Some(standing)), "{shape:?}: quarantined once, still standing");
        store.close(journal);
    }
}

/// One `#[test]` per check, each on a fresh store from `$store`.
macro_rules! journal_conformance {
    ($store:expr) => {
        #[test]
        fn a_new_journal_replays_nothing() {
            crate::journal_suite::a_new_journal_replays_nothing($store);
        }
        #[test]
        fn replay_returns_the_records_in_append_order() {
            crate::journal_suite::replay_returns_the_records_in_append_order($store);
        }
        #[test]
        fn unicode_long_and_edge_records_are_kept_intact() {
            crate::journal_suite::unicode_long_and_edge_records_are_kept_intact($store);
        }
        #[test]
        fn a_record_with_a_newline_is_refused_and_nothing_is_written() {
            crate::journal_suite::a_record_with_a_newline_is_refused_and_nothing_is_written($store);
        }
        #[test]
        fn reopening_after_close_keeps_every_record() {
            crate::journal_suite::reopening_after_close_keeps_every_record($store);
        }
        #[test]
        fn every_acknowledged_append_survives_a_crash() {
            crate::journal_suite::every_acknowledged_append_survives_a_crash($store);
        }
        #[test]
        fn replay_is_idempotent() {
            crate::journal_suite::replay_is_idempotent($store);
        }
        #[test]
        fn replay_subject_answers_one_workflows_records() {
            crate::journal_suite::replay_subject_answers_one_workflows_records($store);
        }
        #[test]
        fn old_lines_are_migrated_once_across_a_crash() {
            crate::journal_suite::old_lines_are_migrated_once_across_a_crash($store);
        }
        #[test]
        fn undecodable_old_lines_are_quarantined_once_and_the_quarantine_stands() {
            crate::journal_suite::undecodable_old_lines_are_quarantined_once_and_the_quarantine_stands($store);
        }
        #[test]
        fn a_corrupt_store_is_reported_naming_it() {
            crate::journal_suite::a_corrupt_store_is_reported_naming_it($store);
        }
    };
}
