//! Files that hold or may hold a secret — the credential files `serve --write-site` writes, the journal and the audit
//! log `drive` appends to, a report-signing key — are mode 0600, whoever made them. Created here, a file is 0600 from
//! its first byte; found already there with a wider mode (a 0644 left by an editor, a copy, another tool), it is
//! tightened to 0600 through the open descriptor before anything is written to it, or refused with an error that
//! names the path and the `chmod 600` that fixes it. A path that is not a regular file (a directory, a FIFO, a
//! device) is refused.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// The mode of every secret-bearing file.
pub const PRIVATE_MODE: u32 = 0o600;

fn refused(path: &Path, message: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::PermissionDenied, format!("{}: {message}", path.display()))
}

/// Holds the open `file` (at `path`) to [`PRIVATE_MODE`]: a regular file, its mode tightened if it is wider.
fn hold_private(path: &Path, file: &File) -> std::io::Result<()> {
    let metadata = file.metadata()?;
    if !metadata.is_file() {
        return Err(refused(path, "not a regular file, so it cannot hold a secret".to_owned()));
    }
    let mode = metadata.permissions().mode() & 0o777;
    if mode & !PRIVATE_MODE != 0 {
        file.set_permissions(std::fs::Permissions::from_mode(PRIVATE_MODE)).map_err(|error| {
            refused(
                path,
                format!(
                    "mode {mode:04o} lets others read what it holds, and it could not be tightened ({error}); run `chmod 600 {}`",
                    path.display()
                ),
            )
        })?;
    }
    Ok(())
}

/// Opens `path` for appending, creating it 0600, or tightening an existing wider one to 0600 (see the module docs).
pub fn open_private_append(path: &Path) -> std::io::Result<File> {
    let file = std::fs::OpenOptions::new().create(true).append(true).mode(PRIVATE_MODE).open(path)?;
    hold_private(path, &file)?;
    Ok(file)
}

/// Tightens `path` to 0600 if it exists (a database's `-wal` and `-shm` files beside it); absent is fine.
pub fn tighten_if_present(path: &Path) -> std::io::Result<()> {
    match std::fs::OpenOptions::new().read(true).open(path) {
        Ok(file) => hold_private(path, &file),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(error),
    }
}

/// Writes `bytes` to `path` whole and 0600: a temporary file beside it, created 0600, fsynced, then renamed over it,
/// so an existing file of any mode is replaced by a private one and a kill leaves the old file or the new.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Ok(metadata) = std::fs::symlink_metadata(path) {
        if !metadata.is_file() {
            return Err(refused(path, "not a regular file, so it is not replaced by a secret".to_owned()));
        }
    }
    let dir = path.parent().filter(|dir| !dir.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().map_or_else(|| "private".into(), |name| name.to_string_lossy().into_owned());
    let temporary = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let written = (|| {
        let mut file =
            std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(PRIVATE_MODE).open(&temporary)?;
        hold_private(&temporary, &file)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temporary, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written
}

/// Reads a private file (a signing key): refused unless it is a regular file only its owner may read, and read with
/// the input files' size cap.
pub fn read_private(path: &Path) -> std::io::Result<Vec<u8>> {
    let metadata = std::fs::metadata(path)?;
    if !metadata.is_file() {
        return Err(refused(path, "not a regular file".to_owned()));
    }
    let mode = metadata.permissions().mode() & 0o777;
    if mode & !PRIVATE_MODE != 0 {
        return Err(refused(
            path,
            format!("mode {mode:04o} lets others read the key; run `chmod 600 {}`", path.display()),
        ));
    }
    crate::model::spec::read_capped(path, crate::model::spec::SPEC_BYTES_MAX).map_err(|error| match error {
        crate::model::spec::Capped::Io(error) => error,
        crate::model::spec::Capped::NotAFile(what) => refused(path, format!("{what}, not a regular file")),
        crate::model::spec::Capped::TooLarge => refused(path, "too large to be a key".to_owned()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn an_existing_wide_file_is_tightened_and_a_new_one_is_created_private() {
        let dir = tempfile::tempdir().unwrap();
        let (appended, written) = (dir.path().join("audit.jsonl"), dir.path().join("hub-credential"));
        for path in [&appended, &written] {
            std::fs::write(path, "old\n").unwrap();
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        writeln!(open_private_append(&appended).unwrap(), "new").unwrap();
        assert_eq!((mode(&appended), std::fs::read_to_string(&appended).unwrap().as_str()), (0o600, "old\nnew\n"));
        write_private(&written, b"fleetsim-secret-x").unwrap();
        assert_eq!((mode(&written), std::fs::read(&written).unwrap()), (0o600, b"fleetsim-secret-x".to_vec()));
        let fresh = dir.path().join("fresh");
        write_private(&fresh, b"x").unwrap();
        open_private_append(&dir.path().join("fresh.log")).unwrap();
        assert_eq!((mode(&fresh), mode(&dir.path().join("fresh.log"))), (0o600, 0o600));
        let absent = dir.path().join("absent-wal");
        tighten_if_present(&absent).unwrap();
        assert!(!absent.exists());
        let wal = dir.path().join("journal-wal");
        std::fs::write(&wal, "").unwrap();
        std::fs::set_permissions(&wal, std::fs::Permissions::from_mode(0o664)).unwrap();
        tighten_if_present(&wal).unwrap();
        assert_eq!(mode(&wal), 0o600);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 5, "no temporary file left behind");
    }

    #[test]
    fn a_key_others_can_read_or_a_path_that_is_no_file_is_refused_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("ci.key");
        std::fs::write(&key, "k").unwrap();
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o640)).unwrap();
        let error = read_private(&key).unwrap_err().to_string();
        assert_eq!(error, format!("{0}: mode 0640 lets others read the key; run `chmod 600 {0}`", key.display()));
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(read_private(&key).unwrap(), b"k");
        let error = open_private_append(dir.path()).unwrap_err();
        assert!(error.to_string().contains("Is a directory") || error.to_string().contains("not a regular file"));
        let error = write_private(dir.path(), b"x").unwrap_err().to_string();
        assert!(error.ends_with("not a regular file, so it is not replaced by a secret"), "{error}");
    }
}
