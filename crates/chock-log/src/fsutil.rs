//! Small file helpers that create private files and directories and make them durable.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

use crate::LogError;

/// `mkdir -p` with mode 0700 for every directory it creates: logs and keys are private.
pub fn create_private_dir_all(path: &Path) -> Result<(), LogError> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .map_err(|e| LogError::io("create directory", path, e))
}

/// Opens (creating with mode 0600 if absent) a file for reading and writing.
pub fn open_private_rw(path: &Path) -> Result<File, LogError> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
        .map_err(|e| LogError::io("open", path, e))
}

/// Makes a directory's entries durable (a new file's name survives a crash).
pub fn sync_dir(path: &Path) -> Result<(), LogError> {
    File::open(path)
        .and_then(|d| d.sync_all())
        .map_err(|e| LogError::io("fsync directory", path, e))
}

/// Writes `bytes` to `path` atomically and durably: a temporary file beside it, fsync,
/// rename, fsync of the directory. Readers see the old file or the new one, never half.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> Result<(), LogError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(&tmp)
            .map_err(|e| LogError::io("create", &tmp, e))?;
        f.write_all(bytes)
            .map_err(|e| LogError::io("write", &tmp, e))?;
        f.sync_all().map_err(|e| LogError::io("fsync", &tmp, e))?;
        std::fs::rename(&tmp, path).map_err(|e| LogError::io("rename into place", path, e))?;
        sync_dir(dir)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
