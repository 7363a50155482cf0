//! The production [`Journal`]: an embedded SQLite database, the default a controller gets with no set-up.
//!
//! The schema, the durability guarantee and what a copy of the journal must include are in `docs/journal.md`.
//!
//! The engine has no runtime and the [`Journal`] futures are not `Send`, so each `async fn` here does its SQLite call
//! inline, blocking the calling thread until the record is on stable storage (one `fsync` of the write-ahead log per
//! append). That is the contract the port states (`append` returns only once the record is durable) and it keeps the
//! engine free of a thread pool; a driver that cannot afford the blocking runs the engine on a thread of its own.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OpenFlags};

use crate::ports::{Journal, JournalError, check_record};

/// The `PRAGMA user_version` of a journal this code writes; a database that carries another one is not ours.
pub const SCHEMA_VERSION: i64 = 1;

/// How long a statement waits for a lock another connection holds (a reader copying the journal) before it fails.
const BUSY_TIMEOUT_MS: u64 = 5_000;

const CREATE_TABLE: &str = "CREATE TABLE IF NOT EXISTS journal (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    record TEXT NOT NULL
)";

/// The controller's journal in a SQLite database file: one row per record, in append order.
#[derive(Debug)]
pub struct SqliteJournal {
    connection: Connection,
    path: PathBuf,
    /// What every record is rewritten by before it is stored ([`SqliteJournal::rewriting`]); `None`: stored as given.
    rewrite: Option<fn(&str) -> String>,
}

impl SqliteJournal {
    /// Opens the journal at `path`, creating the file and its schema when absent.
    ///
    /// A file that is not a SQLite database, or a database of another schema version, is `Corrupt`; a file that
    /// cannot be opened or written (a missing directory, no permission) is `WriteFailed`. Both name the path.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, JournalError> {
        let path = path.as_ref().to_owned();
        // No SQLITE_OPEN_URI: the argument is a file path, never a `file:` URI with options of its own.
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let connection =
            Connection::open_with_flags(&path, flags).map_err(|error| map_error(&path, "cannot open", &error))?;
        let journal = SqliteJournal { connection, path, rewrite: None };
        journal.configure()?;
        Ok(journal)
    }

    /// The journal with every record passed through `rewrite` before it is stored: a live driver redacts the
    /// credentials it knows from every row (`fleetsim drive`), whichever workflow or action appends it. `rewrite` must
    /// keep a record what it is (a record that decoded still decodes), and be idempotent.
    pub fn rewriting(mut self, rewrite: fn(&str) -> String) -> Self {
        self.rewrite = Some(rewrite);
        self
    }

    /// The file this journal lives in (SQLite keeps `<path>-wal` and `<path>-shm` beside it while open).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Closes the connection, checkpointing the write-ahead log into the database file. Dropping the journal does
    /// the same but cannot report a failure; either way every acknowledged append is already durable.
    pub fn close(self) -> Result<(), JournalError> {
        let path = self.path;
        self.connection.close().map_err(|(_, error)| map_error(&path, "cannot close", &error))
    }

    fn configure(&self) -> Result<(), JournalError> {
        let connection = &self.connection;
        let fail = |what: &str, error: rusqlite::Error| map_error(&self.path, what, &error);
        connection.busy_timeout(Duration::from_millis(BUSY_TIMEOUT_MS)).map_err(|e| fail("cannot configure", e))?;
        // The first statement reads the file header: a file that is not a database fails here, as `Corrupt`.
        let mode: String = connection
            .query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
            .map_err(|e| fail("cannot switch to write-ahead logging", e))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(JournalError::WriteFailed(format!(
                "{}: cannot switch to write-ahead logging (the journal mode stays {mode})",
                self.path.display()
            )));
        }
        // FULL, not NORMAL: in WAL mode NORMAL syncs only at checkpoints, so a power loss could drop the last appends
        // after `append` returned. The port promises that an acknowledged record is on stable storage, so every
        // commit fsyncs the log. This setting is per connection, hence set at every open.
        connection.pragma_update(None, "synchronous", "FULL").map_err(|e| fail("cannot set synchronous=FULL", e))?;
        let version: i64 = connection
            .query_row("PRAGMA user_version", [], |row| row.get(0))
            .map_err(|e| fail("cannot read the schema version", e))?;
        match version {
            0 => {
                // A new file (or an empty database): create the schema and stamp it, in one transaction.
                connection
                    .execute_batch(&format!("BEGIN; {CREATE_TABLE}; PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;"))
                    .map_err(|e| fail("cannot create the journal schema", e))?;
            }
            SCHEMA_VERSION => {}
            other => {
                return Err(JournalError::Corrupt(format!(
                    "{}: journal schema version {other}, expected {SCHEMA_VERSION}",
                    self.path.display()
                )));
            }
        }
        Ok(())
    }

    fn append_blocking(&self, record: &str) -> Result<(), JournalError> {
        let rewritten = self.rewrite.map(|rewrite| rewrite(record));
        let record = rewritten.as_deref().unwrap_or(record);
        check_record(record)?;
        // One statement in autocommit mode is one transaction: durable (WAL fsynced) when `execute` returns.
        self.connection
            .execute("INSERT INTO journal (record) VALUES (?1)", [record])
            .map_err(|error| map_error(&self.path, "cannot append", &error))?;
        Ok(())
    }

    fn replay_blocking(&self) -> Result<Vec<String>, JournalError> {
        let fail = |error: rusqlite::Error| map_error(&self.path, "cannot replay", &error);
        let mut statement = self.connection.prepare("SELECT seq, record FROM journal ORDER BY seq").map_err(fail)?;
        let mut rows = statement.query([]).map_err(fail)?;
        let mut records = Vec::new();
        while let Some(row) = rows.next().map_err(fail)? {
            let seq: i64 = row.get(0).map_err(fail)?;
            // A record that is not text (a blob, invalid UTF-8, a NULL) was not written by this code.
            let record: String = row.get(1).map_err(|error| {
                JournalError::Corrupt(format!("{}: record {seq} is not text: {error}", self.path.display()))
            })?;
            records.push(record);
        }
        Ok(records)
    }
}

impl Journal for SqliteJournal {
    /// Blocks the calling thread until the record is committed and the log fsynced (see the module doc).
    async fn append(&self, record: &str) -> Result<(), JournalError> {
        self.append_blocking(record)
    }

    /// Blocks the calling thread while it reads every record, in append order.
    async fn replay(&self) -> Result<Vec<String>, JournalError> {
        self.replay_blocking()
    }
}

/// A SQLite error as the port's error: damage to the file is `Corrupt`, anything else (I/O, a full disk, no
/// permission, a lock held too long) is `WriteFailed`. The text names the path and what was being done.
fn map_error(path: &Path, doing: &str, error: &rusqlite::Error) -> JournalError {
    let text = format!("{}: {doing}: {error}", path.display());
    match error.sqlite_error_code() {
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => JournalError::Corrupt(text),
        _ => JournalError::WriteFailed(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    /// Runs a journal future to completion: SQLite calls are inline, so it is ready at its first poll.
    fn now<T>(future: impl Future<Output = T>) -> T {
        match pin!(future).poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(value) => value,
            Poll::Pending => panic!("a SqliteJournal future waited"),
        }
    }

    #[test]
    fn a_missing_directory_is_a_write_failure_naming_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("absent").join("journal.db");
        let error = SqliteJournal::open(&path).unwrap_err();
        let JournalError::WriteFailed(text) = error else { panic!("expected WriteFailed, got {error:?}") };
        assert!(text.contains(&path.display().to_string()), "{text}");
    }

    #[test]
    fn a_database_of_another_schema_version_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.db");
        {
            let connection = Connection::open(&path).unwrap();
            connection.pragma_update(None, "user_version", 7).unwrap();
        }
        let error = SqliteJournal::open(&path).unwrap_err();
        assert_eq!(error, JournalError::Corrupt(format!("{}: journal schema version 7, expected 1", path.display())));
    }

    #[test]
    fn a_record_that_is_not_text_is_corrupt_naming_its_sequence_number() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.db");
        let journal = SqliteJournal::open(&path).unwrap();
        now(journal.append("first")).unwrap();
        journal.connection.execute("INSERT INTO journal (record) VALUES (x'ff00')", []).unwrap();
        let error = now(journal.replay()).unwrap_err();
        let JournalError::Corrupt(text) = error else { panic!("expected Corrupt, got {error:?}") };
        assert!(text.starts_with(&format!("{}: record 2 is not text", path.display())), "{text}");
    }

    #[test]
    fn the_schema_is_one_table_with_an_autoincrement_sequence_in_wal_mode() {
        let dir = tempfile::tempdir().unwrap();
        let journal = SqliteJournal::open(dir.path().join("journal.db")).unwrap();
        now(journal.append("a")).unwrap();
        now(journal.append("b")).unwrap();
        let rows: Vec<(i64, String)> = journal
            .connection
            .prepare("SELECT seq, record FROM journal ORDER BY seq")
            .unwrap()
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(rows, [(1, "a".to_owned()), (2, "b".to_owned())]);
        let mode: String = journal.connection.query_row("PRAGMA journal_mode", [], |row| row.get(0)).unwrap();
        assert_eq!(mode, "wal");
        // synchronous: 2 is FULL
        let synchronous: i64 = journal.connection.query_row("PRAGMA synchronous", [], |row| row.get(0)).unwrap();
        assert_eq!(synchronous, 2);
        let version: i64 = journal.connection.query_row("PRAGMA user_version", [], |row| row.get(0)).unwrap();
        assert_eq!(version, SCHEMA_VERSION);
    }
}
