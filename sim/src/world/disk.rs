//! A host's simulated disk: writes land in a page cache and reach the platter only on `sync`; a crash loses every
//! unsynced write, a clean restart keeps them (as turmoil's `unstable-fs` does, `reference/turmoil-notes.md` §2).

use std::collections::BTreeMap;

#[derive(Debug, Clone, Default)]
pub struct SimDisk {
    durable: BTreeMap<String, Vec<u8>>,
    /// Unsynced writes: `None` is an unsynced removal.
    pending: BTreeMap<String, Option<Vec<u8>>>,
    /// Operations that can change bytes already there (a write, a removal, a crash); an append is not one.
    rewrites: u64,
}

impl SimDisk {
    pub fn write(&mut self, key: &str, value: &[u8]) {
        self.rewrites += 1;
        self.pending.insert(key.to_owned(), Some(value.to_vec()));
    }

    pub fn remove(&mut self, key: &str) {
        self.rewrites += 1;
        self.pending.insert(key.to_owned(), None);
    }

    /// What a reader on this host sees: its own unsynced writes first.
    pub fn read(&self, key: &str) -> Option<&[u8]> {
        match self.pending.get(key) {
            Some(pending) => pending.as_deref(),
            None => self.durable.get(key).map(Vec::as_slice),
        }
    }

    /// fsync of everything written so far.
    pub fn sync(&mut self) {
        for (key, value) in std::mem::take(&mut self.pending) {
            match value {
                Some(bytes) => self.durable.insert(key, bytes),
                None => self.durable.remove(&key),
            };
        }
    }

    /// Appends `bytes` to `key` and fsyncs everything written so far: what writing the grown file and `sync` would
    /// leave on the platter, without copying the file (a journal append).
    pub fn append_synced(&mut self, key: &str, bytes: &[u8]) {
        self.sync();
        self.durable.entry(key.to_owned()).or_default().extend_from_slice(bytes);
    }

    /// Power loss: unsynced writes are gone.
    pub fn crash(&mut self) {
        self.rewrites += 1;
        self.pending.clear();
    }

    /// How many writes, removals and crashes this disk has seen: while it is unchanged, every file's bytes are
    /// those read before with appends after them (what lets a reader index a file once and then only its tail).
    pub fn rewrites(&self) -> u64 {
        self.rewrites
    }

    pub fn unsynced_writes(&self) -> usize {
        self.pending.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crash_loses_unsynced_writes_and_keeps_synced_ones() {
        let mut disk = SimDisk::default();
        disk.write("a", b"1");
        disk.sync();
        disk.write("b", b"2");
        disk.remove("a");
        assert_eq!(disk.read("a"), None, "a reader sees its own unsynced removal");
        assert_eq!(disk.read("b"), Some(&b"2"[..]));
        disk.crash();
        assert_eq!(disk.read("a"), Some(&b"1"[..]));
        assert_eq!(disk.read("b"), None);
        disk.write("b", b"3");
        disk.sync();
        disk.crash();
        assert_eq!(disk.read("b"), Some(&b"3"[..]));
        assert_eq!(disk.unsynced_writes(), 0);
    }

    #[test]
    fn an_appended_sync_leaves_what_a_rewrite_and_a_sync_leave() {
        let mut appended = SimDisk::default();
        let mut rewritten = SimDisk::default();
        for disk in [&mut appended, &mut rewritten] {
            disk.write("j", b"one\n");
            disk.sync();
            disk.write("other", b"unsynced");
            disk.write("j", b"one\ntwo\n");
        }
        appended.append_synced("j", b"three\n");
        let grown = [rewritten.read("j").unwrap(), b"three\n"].concat();
        rewritten.write("j", &grown);
        rewritten.sync();
        for disk in [&mut appended, &mut rewritten] {
            disk.crash();
        }
        assert_eq!(appended.read("j"), rewritten.read("j"));
        assert_eq!(appended.read("j"), Some(&b"one\ntwo\nthree\n"[..]));
        assert_eq!(appended.read("other"), rewritten.read("other"));
        appended.append_synced("new", b"x\n");
        appended.crash();
        assert_eq!(appended.read("new"), Some(&b"x\n"[..]));
    }
}
