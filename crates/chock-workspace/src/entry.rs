//! One path's state: a file (bytes and the executable bit), a symlink, or an empty directory.
//! Diff, apply, undo and adopt all speak in entries, so binary files, symlinks, modes and empty
//! directories travel the same road as text.

use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::error::{Result, WorkspaceError};

/// What is at one path. Directories appear only when they matter on their own (an empty directory
/// that was added, or one that was removed); a directory's files are entries of their own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// A regular file.
    File { exec: bool, data: Vec<u8> },
    /// A symbolic link and its target, as bytes.
    Symlink { target: Vec<u8> },
    /// A directory.
    Dir,
}

impl Entry {
    /// Reads what is at `path` without following a final symlink; `None` when nothing is there.
    pub fn read(path: &Path) -> Result<Option<Entry>> {
        let meta = match fs::symlink_metadata(path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) if e.raw_os_error() == Some(20) => return Ok(None), // ENOTDIR: a parent is a file
            Err(e) => return Err(WorkspaceError::io("inspect", path, e)),
        };
        let kind = meta.file_type();
        if kind.is_symlink() {
            let target =
                fs::read_link(path).map_err(|e| WorkspaceError::io("read link", path, e))?;
            return Ok(Some(Entry::Symlink {
                target: target.as_os_str().as_bytes().to_vec(),
            }));
        }
        if kind.is_dir() {
            return Ok(Some(Entry::Dir));
        }
        if kind.is_file() {
            let data = fs::read(path).map_err(|e| WorkspaceError::io("read", path, e))?;
            return Ok(Some(Entry::File {
                exec: meta.permissions().mode() & 0o111 != 0,
                data,
            }));
        }
        Err(WorkspaceError::io(
            "handle",
            path,
            std::io::Error::other(
                "not a file, symlink or directory (sockets, fifos and devices are not carried)",
            ),
        ))
    }

    /// A short word for messages and the diff header.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Entry::File { .. } => "file",
            Entry::Symlink { .. } => "symlink",
            Entry::Dir => "directory",
        }
    }

    /// Whether this is a text file: a file with no NUL byte in its first 8000 bytes (git's rule).
    pub fn is_text(&self) -> bool {
        match self {
            Entry::File { data, .. } => !data[..data.len().min(8000)].contains(&0),
            _ => false,
        }
    }

    /// The file's bytes, if it is a file.
    pub fn data(&self) -> Option<&[u8]> {
        match self {
            Entry::File { data, .. } => Some(data),
            _ => None,
        }
    }

    /// The git-style mode of this entry.
    pub fn git_mode(&self) -> &'static str {
        match self {
            Entry::File { exec: true, .. } => "100755",
            Entry::File { exec: false, .. } => "100644",
            Entry::Symlink { .. } => "120000",
            Entry::Dir => "040000",
        }
    }

    /// SHA-256 over the kind, mode and content: equal hashes mean equal entries.
    pub fn hash(&self) -> String {
        let mut h = Sha256::new();
        match self {
            Entry::File { exec, data } => {
                h.update(if *exec {
                    b"file+x\0" as &[u8]
                } else {
                    b"file\0"
                });
                h.update(data);
            }
            Entry::Symlink { target } => {
                h.update(b"symlink\0");
                h.update(target);
            }
            Entry::Dir => h.update(b"dir\0"),
        }
        hex::encode(h.finalize())
    }
}

/// SHA-256 of `bytes`, hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The first `n` hex digits of SHA-256 of `bytes`: the short ids of files and hunks.
pub fn short_hash(bytes: &[u8], n: usize) -> String {
    let mut s = sha256_hex(bytes);
    s.truncate(n);
    s
}

/// Hash of an optional entry, `"-"` for absence, for records and events.
pub fn entry_hash(entry: Option<&Entry>) -> String {
    entry.map_or_else(|| "-".to_string(), Entry::hash)
}

impl Entry {
    /// Like [`Entry::read`] but without reading a file's bytes (they come back empty): for deciding
    /// what kind of thing is at a path.
    pub fn read_shallow(path: &Path) -> Result<Option<Entry>> {
        match fs::symlink_metadata(path) {
            Ok(meta) if meta.is_dir() => Ok(Some(Entry::Dir)),
            Ok(meta) if meta.file_type().is_symlink() => {
                Ok(Some(Entry::Symlink { target: Vec::new() }))
            }
            Ok(meta) => Ok(Some(Entry::File {
                exec: meta.permissions().mode() & 0o111 != 0,
                data: Vec::new(),
            })),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound || e.raw_os_error() == Some(20) => {
                Ok(None)
            }
            Err(e) => Err(WorkspaceError::io("inspect", path, e)),
        }
    }
}
