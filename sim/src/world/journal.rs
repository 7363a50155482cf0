//! The simulated journal's storage: records as lines of one file on a [`SimDisk`], each append written and synced,
//! and read whole or by subject.
//!
//! [`JournalFile`] is the format and the durability step, over a disk it is handed: the world's `SimJournal` uses it
//! on the controller's disk (and adds the death points and trace events around it). [`DiskJournal`] is the same file
//! on a disk of its own, implementing [`Journal`], so the journal conformance suite runs against it without a world.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::ops::Range;
use std::rc::Rc;

use engine::ports::{Journal, JournalError, check_record, record_subject};

use crate::world::disk::SimDisk;

/// One journal file on a disk: one record a line, appended in place and synced. The file's bytes are the journal;
/// the handle also keeps an index of its lines by [`record_subject`], built from those bytes as they grow, so that a
/// workflow's records are read without splitting the whole file ([`JournalFile::replay_subject`]).
#[derive(Debug, Clone)]
pub struct JournalFile {
    key: String,
    index: RefCell<SubjectIndex>,
}

/// Where each subject's lines are in the file, for the bytes indexed so far.
#[derive(Debug, Clone, Default)]
struct SubjectIndex {
    /// The disk's [`SimDisk::rewrites`] when the index was begun: any other count means bytes may have changed
    /// under it, and it is built again.
    rewrites: u64,
    /// Bytes of the file indexed: whole lines only.
    indexed: usize,
    /// Byte ranges of each subject's lines (without their newline), in file order.
    by_subject: BTreeMap<String, Vec<Range<usize>>>,
    /// Lines whose subject cannot be read: part of every subject's replay.
    unreadable: Vec<Range<usize>>,
}

impl JournalFile {
    pub fn new(key: &str) -> Self {
        JournalFile { key: key.to_owned(), index: RefCell::new(SubjectIndex::default()) }
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
            return Err(no_newline(&self.key));
        };
        // Split on '\n' only: `str::lines` would also eat a record's own trailing '\r'.
        Ok(body.split('\n').map(str::to_owned).collect())
    }

    /// The records of `subject` and those whose subject cannot be read, in append order: what
    /// [`Journal::replay_subject`] answers. Reads only the lines appended since the last call and the subject's own;
    /// the same file in [`JournalFile::replay`] is `Corrupt` exactly when this is.
    pub fn replay_subject(&self, disk: &SimDisk, subject: &str) -> Result<Vec<String>, JournalError> {
        let Some(bytes) = disk.read(&self.key) else {
            *self.index.borrow_mut() = SubjectIndex { rewrites: disk.rewrites(), ..SubjectIndex::default() };
            return Ok(Vec::new());
        };
        let mut index = self.index.borrow_mut();
        if index.rewrites != disk.rewrites() || index.indexed > bytes.len() {
            *index = SubjectIndex { rewrites: disk.rewrites(), ..SubjectIndex::default() };
        }
        while index.indexed < bytes.len() {
            let start = index.indexed;
            let Some(length) = bytes[start..].iter().position(|byte| *byte == b'\n') else {
                return Err(no_newline(&self.key));
            };
            let line = std::str::from_utf8(&bytes[start..start + length])
                .map_err(|error| JournalError::Corrupt(format!("{} is not UTF-8: {error}", self.key)))?;
            let range = start..start + length;
            match record_subject(line) {
                Some(of) => index.by_subject.entry(of).or_default().push(range),
                None => index.unreadable.push(range),
            }
            index.indexed = start + length + 1;
        }
        let own = index.by_subject.get(subject).map(Vec::as_slice).unwrap_or_default();
        let mut ranges: Vec<&Range<usize>> = own.iter().chain(&index.unreadable).collect();
        if !index.unreadable.is_empty() {
            ranges.sort_by_key(|range| range.start);
        }
        // Every indexed line was checked as UTF-8 when it was indexed, and the bytes have not changed since.
        Ok(ranges.into_iter().map(|range| String::from_utf8_lossy(&bytes[range.clone()]).into_owned()).collect())
    }
}

fn no_newline(key: &str) -> JournalError {
    JournalError::Corrupt(format!("{key}: the last record has no newline"))
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

    async fn replay_subject(&self, subject: &str) -> Result<Vec<String>, JournalError> {
        self.file.replay_subject(&self.disk.borrow(), subject)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "controller.journal";

    fn record(workflow: &str, n: u32) -> String {
        format!("onboard {{\"workflow\":\"{workflow}\",\"n\":{n}}}")
    }

    #[test]
    fn the_index_follows_a_file_rewritten_under_it() {
        let (file, mut disk) = (JournalFile::new(KEY), SimDisk::default());
        file.append(&mut disk, &record("a", 1)).unwrap();
        file.append(&mut disk, &record("b", 1)).unwrap();
        assert_eq!(file.replay_subject(&disk, "a").unwrap(), [record("a", 1)]);
        // The same length, other bytes: only the disk's rewrite count can tell.
        disk.write(KEY, format!("{}\n{}\n", record("b", 1), record("a", 2)).as_bytes());
        disk.sync();
        assert_eq!(file.replay_subject(&disk, "a").unwrap(), [record("a", 2)]);
        disk.remove(KEY);
        assert_eq!(file.replay_subject(&disk, "a").unwrap(), Vec::<String>::new());
        file.append(&mut disk, &record("a", 3)).unwrap();
        assert_eq!(file.replay_subject(&disk, "a").unwrap(), [record("a", 3)]);
    }

    #[test]
    fn a_torn_or_foreign_line_is_corrupt_by_subject_as_in_a_whole_replay() {
        for bytes in [&b"onboard {\"workflow\":\"a\"}\nno newline"[..], b"\xff\xfe\n"] {
            let (file, mut disk) = (JournalFile::new(KEY), SimDisk::default());
            disk.write(KEY, bytes);
            disk.sync();
            let whole = file.replay(&disk).expect_err("whole replay");
            let by_subject = file.replay_subject(&disk, "a").expect_err("by subject");
            assert!(matches!((&whole, &by_subject), (JournalError::Corrupt(_), JournalError::Corrupt(_))));
            assert!(by_subject.to_string().contains(KEY), "{by_subject}");
        }
    }
}
