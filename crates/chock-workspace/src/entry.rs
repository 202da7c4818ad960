//! One path's state: a file (bytes and the executable bit), a symlink, or an empty directory.
//! Diff, apply, undo and adopt all speak in entries, so binary files, symlinks, modes and empty
//! directories travel the same road as text.

use std::ffi::OsStr;
use std::path::Path;

use chock_beneath::{Dir, FileType};

use sha2::{Digest, Sha256};

use crate::error::{Result, WorkspaceError};

/// The largest file chock reads whole (1 GiB). A file is held in memory to be diffed, hashed and
/// applied; a sparse file costs the agent nothing to make at any size, and without a bound one
/// would exhaust the memory of whoever reviews the session.
pub const MAX_FILE_BYTES: u64 = 1 << 30;

fn too_big(shown: &Path, size: u64) -> WorkspaceError {
    WorkspaceError::io(
        "read",
        shown,
        std::io::Error::other(format!(
            "{size} bytes, more than chock carries ({MAX_FILE_BYTES}); remove it in the session"
        )),
    )
}

/// What is at one path. Directories appear only when they matter on their own (an empty directory
/// that was added, or one that was removed); a directory's files are entries of their own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// A regular file.
    File {
        /// Whether any execute bit is set (the one mode bit carried).
        exec: bool,
        /// The file's bytes.
        data: Vec<u8>,
    },
    /// A symbolic link and its target, as bytes.
    Symlink {
        /// The link's target, as bytes (never followed).
        target: Vec<u8>,
    },
    /// A directory.
    Dir,
}

impl Entry {
    /// Reads `name` in directory `dir` without following it (`shown` names it in errors); `None`
    /// when nothing is there.
    ///
    /// The kind is taken with `lstat`, and a regular file is then opened `O_NOFOLLOW | O_NONBLOCK`
    /// and checked again on the open descriptor: whoever writes the directory (the agent, for the
    /// upper layer) cannot swap in a symlink to a host file, nor a fifo that would hang the read,
    /// between the look and the read. Devices are never opened. `dir` itself was reached by
    /// descriptor ([`chock_beneath`]), so no component above `name` is followed either.
    pub fn read_at(dir: &Dir, name: impl AsRef<OsStr>, shown: &Path) -> Result<Option<Entry>> {
        let name = name.as_ref();
        let Some(meta) = dir
            .meta(name)
            .map_err(|e| WorkspaceError::io("inspect", shown, e))?
        else {
            return Ok(None);
        };
        match meta.kind {
            FileType::Symlink => Ok(Some(Entry::Symlink {
                target: dir
                    .read_link(name)
                    .map_err(|e| WorkspaceError::io("read link", shown, e))?,
            })),
            FileType::Directory => Ok(Some(Entry::Dir)),
            FileType::RegularFile => {
                let (data, now) = dir.read_file(name, MAX_FILE_BYTES).map_err(|e| {
                    if e.kind() == std::io::ErrorKind::FileTooLarge {
                        too_big(shown, meta.size.max(MAX_FILE_BYTES + 1))
                    } else {
                        WorkspaceError::io("read", shown, e)
                    }
                })?;
                if now.ino != meta.ino || now.dev != meta.dev {
                    return Err(WorkspaceError::io(
                        "read",
                        shown,
                        std::io::Error::other("replaced while it was being read"),
                    ));
                }
                Ok(Some(Entry::File {
                    exec: now.mode & 0o111 != 0,
                    data,
                }))
            }
            _ => Err(WorkspaceError::io(
                "handle",
                shown,
                std::io::Error::other(
                    "not a file, symlink or directory (sockets, fifos and devices are not carried)",
                ),
            )),
        }
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
