//! One path's state: a file (bytes and the executable bit), a symlink, or an empty directory.
//! Diff, apply, undo and adopt all speak in entries, so binary files, symlinks, modes and empty
//! directories travel the same road as text.

use std::fs;
use std::io::Read;
use std::os::fd::AsFd;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

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
    File { exec: bool, data: Vec<u8> },
    /// A symbolic link and its target, as bytes.
    Symlink { target: Vec<u8> },
    /// A directory.
    Dir,
}

impl Entry {
    /// Reads what is at `path` without following a final symlink; `None` when nothing is there.
    pub fn read(path: &Path) -> Result<Option<Entry>> {
        Self::read_at(rustix::fs::CWD, path, path)
    }

    /// Reads `name` in directory `dir` without following it (`shown` names it in errors).
    ///
    /// The kind is taken with `lstat`, and a regular file is then opened `O_NOFOLLOW | O_NONBLOCK`
    /// and checked again on the open descriptor: whoever writes the directory (the agent, for the
    /// upper layer) cannot swap in a symlink to a host file, nor a fifo that would hang the read,
    /// between the look and the read. Devices are never opened.
    pub fn read_at(dir: impl AsFd, name: &Path, shown: &Path) -> Result<Option<Entry>> {
        let dir = dir.as_fd();
        let st = match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            Err(Errno::NOENT | Errno::NOTDIR) => return Ok(None), // ENOTDIR: a parent is a file
            Err(e) => return Err(WorkspaceError::io("inspect", shown, e.into())),
        };
        match FileType::from_raw_mode(st.st_mode) {
            FileType::Symlink => {
                let target = rustix::fs::readlinkat(dir, name, Vec::new())
                    .map_err(|e| WorkspaceError::io("read link", shown, e.into()))?;
                Ok(Some(Entry::Symlink {
                    target: target.into_bytes(),
                }))
            }
            FileType::Directory => Ok(Some(Entry::Dir)),
            FileType::RegularFile => {
                let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
                let fd = rustix::fs::openat(dir, name, flags, Mode::empty())
                    .map_err(|e| WorkspaceError::io("open", shown, e.into()))?;
                let now = rustix::fs::fstat(&fd)
                    .map_err(|e| WorkspaceError::io("inspect", shown, e.into()))?;
                if FileType::from_raw_mode(now.st_mode) != FileType::RegularFile
                    || now.st_ino != st.st_ino
                {
                    return Err(WorkspaceError::io(
                        "read",
                        shown,
                        std::io::Error::other("replaced while it was being read"),
                    ));
                }
                let size = u64::try_from(now.st_size).unwrap_or(0);
                if size > MAX_FILE_BYTES {
                    return Err(too_big(shown, size));
                }
                let mut data = Vec::new();
                fs::File::from(fd)
                    .take(MAX_FILE_BYTES + 1)
                    .read_to_end(&mut data)
                    .map_err(|e| WorkspaceError::io("read", shown, e))?;
                if data.len() as u64 > MAX_FILE_BYTES {
                    return Err(too_big(shown, data.len() as u64));
                }
                Ok(Some(Entry::File {
                    exec: now.st_mode & 0o111 != 0,
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
