//! Apply records: `<session>/applies/<apply-id>.json` plus the bytes of every entry it replaced or
//! wrote in `<session>/applies/blobs/<sha256>`, so an undo can put back exactly what was there.

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::entry::{Entry, sha256_hex};
use crate::error::{Result, WorkspaceError};
use crate::late_sync::LateSync;
use crate::meta::write_atomic;

/// Format of an apply record.
pub const RECORD_FORMAT: u32 = 1;

/// An entry as stored in a record (file bytes live in the blob store).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StoredEntry {
    File { exec: bool, blob: String },
    Symlink { blob: String },
    Dir,
}

/// One path an apply wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileRecord {
    pub path: String,
    pub before: Option<StoredEntry>,
    pub after: Option<StoredEntry>,
}

/// What one apply (or undo) did, with the hashes the log event carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApplyRecord {
    /// The record's format; one this version does not read is refused.
    pub format: u32,
    /// The apply's id (`<session>.<n>`), as `chock apply` prints it and `chock undo` takes it.
    pub apply_id: String,
    /// `apply` or `undo`.
    pub kind: String,
    /// For an undo: the apply it reverted.
    pub undo_of: Option<String>,
    /// The session the changes came from.
    pub session: String,
    /// The project written to.
    pub project: PathBuf,
    /// RFC 3339 time it was written.
    pub created: String,
    /// Git backing: the base commit, and the checkpoint the applied changes came from.
    pub base_commit: Option<String>,
    /// Git backing: the checkpoint commit the applied changes came from.
    pub checkpoint: Option<String>,
    /// SHA-256 over the touched paths as they were before, and as they are after.
    pub base_hash: String,
    /// SHA-256 over the touched paths as they are after.
    pub result_hash: String,
    /// Selected hunk ids (empty when whole files were chosen).
    pub hunks: Vec<String>,
    /// Every path written, with what it held before and after.
    pub files: Vec<FileRecord>,
    /// Paths whose project file had set-uid/set-gid bits that the write dropped (an apply never
    /// writes set-id bits into the project).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub setid_stripped: Vec<String>,
    /// Set when an undo reverted this apply.
    pub undone_by: Option<String>,
}

/// The record store of one session.
#[derive(Debug, Clone)]
pub struct Records {
    dir: PathBuf,
}

impl Records {
    pub fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    fn blobs(&self) -> PathBuf {
        self.dir.join("blobs")
    }

    pub fn path(&self, apply_id: &str) -> PathBuf {
        self.dir.join(format!("{apply_id}.json"))
    }

    /// The next apply id: `<session>.<n>`, n counting from 1.
    pub fn next_id(&self, session: &str) -> Result<String> {
        let mut n = 1;
        while self.path(&format!("{session}.{n}")).exists() {
            n += 1;
        }
        Ok(format!("{session}.{n}"))
    }

    /// Stores `entry`'s bytes, durable when this returns, and returns how the record names it.
    pub fn store(&self, entry: &Entry) -> Result<StoredEntry> {
        self.store_by(entry, &write_atomic)
    }

    /// Stores `entry`'s bytes through `late` (in place at once, durable soon after: a turn
    /// record's blobs) and returns how the record names it.
    pub(crate) fn store_late(&self, entry: &Entry, late: &LateSync) -> Result<StoredEntry> {
        self.store_by(entry, &|path, bytes| late.write(path, bytes))
    }

    fn store_by(
        &self,
        entry: &Entry,
        write: &dyn Fn(&Path, &[u8]) -> Result<()>,
    ) -> Result<StoredEntry> {
        let put = |bytes: &[u8]| -> Result<String> {
            let sha = sha256_hex(bytes);
            let dir = self.blobs();
            fs::create_dir_all(&dir).map_err(|e| WorkspaceError::io("create", &dir, e))?;
            let path = dir.join(&sha);
            if !path.exists() {
                write(&path, bytes)?;
            }
            Ok(sha)
        };
        Ok(match entry {
            Entry::File { exec, data } => StoredEntry::File {
                exec: *exec,
                blob: put(data)?,
            },
            Entry::Symlink { target } => StoredEntry::Symlink { blob: put(target)? },
            Entry::Dir => StoredEntry::Dir,
        })
    }

    /// Loads a stored entry's bytes back.
    pub fn load(&self, stored: &StoredEntry) -> Result<Entry> {
        let get = |sha: &str| {
            // A record names its blobs by SHA-256; anything else is not a name below `blobs/`.
            if sha.len() != 64 || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(WorkspaceError::record(
                    self.blobs(),
                    format!("`{}` is not a blob name", chock_protocol::text::line(sha)),
                ));
            }
            let path = self.blobs().join(sha);
            fs::read(&path).map_err(|e| WorkspaceError::io("read apply blob", &path, e))
        };
        Ok(match stored {
            StoredEntry::File { exec, blob } => Entry::File {
                exec: *exec,
                data: get(blob)?,
            },
            StoredEntry::Symlink { blob } => Entry::Symlink { target: get(blob)? },
            StoredEntry::Dir => Entry::Dir,
        })
    }

    pub fn save(&self, record: &ApplyRecord) -> Result<()> {
        fs::create_dir_all(&self.dir).map_err(|e| WorkspaceError::io("create", &self.dir, e))?;
        let path = self.path(&record.apply_id);
        let bytes =
            serde_json::to_vec_pretty(record).map_err(|e| WorkspaceError::record(&path, e))?;
        write_atomic(&path, &bytes)
    }

    pub fn read(&self, apply_id: &str) -> Result<ApplyRecord> {
        let path = self.path(apply_id);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(WorkspaceError::UnknownApply(apply_id.to_string()));
            }
            Err(e) => return Err(WorkspaceError::io("read", &path, e)),
        };
        let record: ApplyRecord =
            serde_json::from_slice(&bytes).map_err(|e| WorkspaceError::record(&path, e))?;
        if record.format != RECORD_FORMAT {
            return Err(WorkspaceError::record(
                &path,
                format!("format {} is not {RECORD_FORMAT}", record.format),
            ));
        }
        Ok(record)
    }
}

/// The session directory an apply id belongs to (`<session>.<n>` under `sessions_root`).
pub fn session_of(sessions_root: &Path, apply_id: &str) -> Result<PathBuf> {
    let Some((session, n)) = apply_id.rsplit_once('.') else {
        return Err(WorkspaceError::UnknownApply(apply_id.to_string()));
    };
    if n.is_empty()
        || !n.bytes().all(|b| b.is_ascii_digit())
        || session.contains('/')
        || session.starts_with('.')
    {
        return Err(WorkspaceError::UnknownApply(apply_id.to_string()));
    }
    Ok(sessions_root.join(session))
}
