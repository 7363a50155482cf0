//! The simulated journal's storage: records as lines of one file on a [`SimDisk`], each append written and synced.
//!
//! [`JournalFile`] is the format and the durability step, over a disk it is handed: the world's `SimJournal` uses it
//! on the controller's disk (and adds the death points and trace events around it). [`DiskJournal`] is the same file
//! on a disk of its own, implementing [`Journal`], so the journal conformance suite runs against it without a world.

use std::cell::RefCell;
use std::rc::Rc;

use engine::ports::check_record;
use engine::ports::{Journal, JournalError};

use crate::world::disk::SimDisk;

/// One journal file on a disk: one record a line, appended by rewriting the file and syncing it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalFile {
    key: String,
}

impl JournalFile {
    pub fn new(key: &str) -> Self {
        JournalFile { key: key.to_owned() }
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    /// Writes the record and syncs the disk: when this returns `Ok`, a crash of the disk keeps the record.
    pub fn append(&self, disk: &mut SimDisk, record: &str) -> Result<(), JournalError> {
        check_record(record)?;
        let mut line = Vec::with_capacity(record.len() + 1);
        line.extend_from_slice(record.as_bytes());
        line.push(b'\n');
        disk.append_synced(&self.key, &line);
        Ok(())
    }

    /// Every record, in append order. No file is an empty journal; bytes that are not UTF-8, or a last line without
    /// its newline (a disk write is atomic, so this code never leaves one), are `Corrupt`.
    pub fn replay(&self, disk: &SimDisk) -> Result<Vec<String>, JournalError> {
        let Some(bytes) = disk.read(&self.key) else { return Ok(Vec::new()) };
        let text = std::str::from_utf8(bytes)
            .map_err(|error| JournalError::Corrupt(format!("{} is not UTF-8: {error}", self.key)))?;
        if text.is_empty() {
            return Ok(Vec::new());
        }
        let Some(body) = text.strip_suffix('\n') else {
            return Err(JournalError::Corrupt(format!("{}: the last record has no newline", self.key)));
        };
        // Split on '\n' only: `str::lines` would also eat a record's own trailing '\r'.
        Ok(body.split('\n').map(str::to_owned).collect())
    }
}

/// A [`JournalFile`] on a disk shared with whoever holds the other handle (a test that crashes the disk).
#[derive(Debug, Clone)]
pub struct DiskJournal {
    file: JournalFile,
    disk: Rc<RefCell<SimDisk>>,
}

impl DiskJournal {
    pub fn new(disk: Rc<RefCell<SimDisk>>, key: &str) -> Self {
        DiskJournal { file: JournalFile::new(key), disk }
    }

    pub fn disk(&self) -> &Rc<RefCell<SimDisk>> {
        &self.disk
    }

    pub fn file(&self) -> &JournalFile {
        &self.file
    }
}

impl Journal for DiskJournal {
    async fn append(&self, record: &str) -> Result<(), JournalError> {
        self.file.append(&mut self.disk.borrow_mut(), record)
    }

    async fn replay(&self) -> Result<Vec<String>, JournalError> {
        self.file.replay(&self.disk.borrow())
    }
}
