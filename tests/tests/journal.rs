//! The journal conformance suite run against both `Journal` backends (`sim::world::journal::DiskJournal` on a
//! simulated disk, `engine::adapters::sqlite::SqliteJournal` on a real file), and a kill test of the SQLite journal
//! in a child process.

#[macro_use]
#[path = "support/journal_suite.rs"]
mod journal_suite;

use std::cell::RefCell;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::rc::Rc;

use engine::adapters::sqlite::SqliteJournal;
use engine::ports::JournalError;
use journal_suite::{JournalStore, now};
use sim::world::disk::SimDisk;
use sim::world::journal::DiskJournal;

const SIM_KEY: &str = "controller.journal";

/// The simulated journal on a disk of its own; a crash is the disk's power loss (every unsynced write is gone).
struct SimStore {
    disk: Rc<RefCell<SimDisk>>,
}

impl JournalStore for SimStore {
    type Journal = DiskJournal;

    fn open(&mut self) -> Result<DiskJournal, JournalError> {
        Ok(DiskJournal::new(self.disk.clone(), SIM_KEY))
    }

    fn close(&mut self, journal: DiskJournal) {
        drop(journal);
    }

    fn crash(&mut self, journal: DiskJournal) {
        drop(journal);
        self.disk.borrow_mut().crash();
    }

    fn corrupt(&mut self) -> String {
        let mut disk = self.disk.borrow_mut();
        disk.write(SIM_KEY, b"a good record\n\xff\xfe not utf-8\n");
        disk.sync();
        SIM_KEY.to_owned()
    }
}

fn sim_store() -> SimStore {
    SimStore { disk: Rc::new(RefCell::new(SimDisk::default())) }
}

/// The SQLite journal in a fresh temporary directory.
struct SqliteStore {
    dir: tempfile::TempDir,
}

impl SqliteStore {
    fn path(&self) -> PathBuf {
        self.dir.path().join("controller-journal.db")
    }
}

impl JournalStore for SqliteStore {
    type Journal = SqliteJournal;

    fn open(&mut self) -> Result<SqliteJournal, JournalError> {
        SqliteJournal::open(self.path())
    }

    fn close(&mut self, journal: SqliteJournal) {
        journal.close().unwrap();
    }

    /// The connection is leaked, never closed: no checkpoint, the write-ahead log left as a dead process leaves it.
    /// (A real kill is `an_acknowledged_sqlite_append_survives_sigkill`.)
    fn crash(&mut self, journal: SqliteJournal) {
        std::mem::forget(journal);
    }

    fn corrupt(&mut self) -> String {
        let text = "this is a text file, not a SQLite database\n".repeat(100);
        std::fs::write(self.path(), text).unwrap();
        self.path().display().to_string()
    }
}

fn sqlite_store() -> SqliteStore {
    SqliteStore { dir: tempfile::tempdir().unwrap() }
}

mod sim_disk {
    journal_conformance!(super::sim_store());
}

mod sqlite {
    journal_conformance!(super::sqlite_store());
}

/// In a child process started by the kill test, the SQLite journal to append to.
const CHILD_JOURNAL_ENV: &str = "FLEETSIM_JOURNAL_KILL_CHILD";
/// What the child prints before the number of each acknowledged record.
const ACK_MARKER: &str = "journal-ack ";
/// Acknowledged appends the parent reads before it kills the child.
const ACKS_BEFORE_KILL: u64 = 40;
/// The child's bound: it is killed long before, but nothing runs without a limit.
const CHILD_APPENDS_MAX: u64 = 100_000;

fn kill_child_record(index: u64) -> String {
    format!("record {index:06}")
}

/// Runs in the child process: appends numbered records and prints `journal-ack N` once `append` of record N returned.
fn append_until_killed(path: &str) {
    let journal = SqliteJournal::open(path).unwrap();
    let mut stdout = std::io::stdout().lock();
    for index in 0..CHILD_APPENDS_MAX {
        now(engine::ports::Journal::append(&journal, &kill_child_record(index))).unwrap();
        writeln!(stdout, "{ACK_MARKER}{index}").unwrap();
        stdout.flush().unwrap();
    }
}

/// The test binary re-runs itself as the child (this test, with the environment variable set), reads acknowledged
/// record numbers from its stdout, kills it with SIGKILL mid-append and reopens the journal: every acknowledged record
/// is there, in order, with no gap; a record being appended at the kill may or may not be.
#[test]
fn an_acknowledged_sqlite_append_survives_sigkill() {
    if let Ok(path) = std::env::var(CHILD_JOURNAL_ENV) {
        append_until_killed(&path);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("killed-journal.db");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["an_acknowledged_sqlite_append_survives_sigkill", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_JOURNAL_ENV, &path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut last_ack = None;
    while last_ack.is_none_or(|ack| ack + 1 < ACKS_BEFORE_KILL) {
        let Some(line) = lines.next() else {
            let status = child.wait().unwrap();
            panic!("the child stopped after acknowledging {last_ack:?} ({status})");
        };
        // The test harness prints its own text around the child's ("test an_acknowledged_… … " before the first).
        let line = line.unwrap();
        if let Some((_, number)) = line.split_once(ACK_MARKER) {
            let number: u64 = number.parse().unwrap();
            assert_eq!(number, last_ack.map_or(0, |ack| ack + 1), "the child acknowledges in order");
            last_ack = Some(number);
        }
    }
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert!(!status.success(), "the child was killed, not finished: {status}");
    let last_ack = last_ack.unwrap();

    let journal = SqliteJournal::open(&path).unwrap();
    let records = now(engine::ports::Journal::replay(&journal)).unwrap();
    assert!(
        records.len() as u64 > last_ack,
        "acknowledged up to {last_ack}, but only {} records survived",
        records.len()
    );
    for (index, record) in records.iter().enumerate() {
        assert_eq!(record, &kill_child_record(index as u64), "record {index} of {}", records.len());
    }
}
