//! [`Dir`]: a directory descriptor, and every operation relative to it.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, CWD, FileType, Mode, OFlags};
use rustix::io::Errno;

/// Flags for one step of a walk: a directory, never a symlink. `O_PATH` so a directory the user
/// can pass through but not list (mode 0711) can still be walked.
fn step_flags() -> OFlags {
    OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

/// Why a walk below a directory stopped. `at` is the path walked so far, relative to where the
/// walk started, ending in the component that stopped it.
#[derive(Debug)]
pub enum WalkError {
    /// A component does not exist.
    Missing {
        /// The path walked, up to the missing component.
        at: PathBuf,
    },
    /// A component is a symlink or not a directory: the walk never goes through one.
    NotADirectory {
        /// The path walked, up to that component.
        at: PathBuf,
    },
    /// The path is not plain names below the start (`..`, `.`, an absolute path, or empty).
    NotPlain {
        /// The path as given.
        path: PathBuf,
    },
    /// The kernel refused a step for another reason.
    Io {
        /// The step that failed ("open", "create directory").
        op: &'static str,
        /// The path walked, up to the component the step was on (empty for the start itself).
        at: PathBuf,
        /// What the kernel said.
        source: std::io::Error,
    },
}

impl fmt::Display for WalkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WalkError::Missing { at } => write!(f, "{}: no such directory", at.display()),
            WalkError::NotADirectory { at } => write!(
                f,
                "{}: a symlink or not a directory (never followed from the host)",
                at.display()
            ),
            WalkError::NotPlain { path } => {
                write!(
                    f,
                    "{}: not a plain path below the directory",
                    path.display()
                )
            }
            WalkError::Io { op, at, source } => write!(f, "{op} {}: {source}", at.display()),
        }
    }
}

impl std::error::Error for WalkError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            WalkError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<WalkError> for std::io::Error {
    fn from(err: WalkError) -> Self {
        let kind = match &err {
            WalkError::Missing { .. } => ErrorKind::NotFound,
            WalkError::NotADirectory { .. } => ErrorKind::NotADirectory,
            WalkError::NotPlain { .. } => ErrorKind::InvalidInput,
            WalkError::Io { source, .. } => source.kind(),
        };
        std::io::Error::new(kind, err)
    }
}

/// The plain names of `rel`, or [`WalkError::NotPlain`] for anything else (`..`, `/`, `.`).
pub fn plain_names(rel: &Path) -> Result<Vec<&OsStr>, WalkError> {
    rel.components()
        .map(|c| match c {
            Component::Normal(name) => Ok(name),
            _ => Err(WalkError::NotPlain {
                path: rel.to_path_buf(),
            }),
        })
        .collect()
}

/// What `lstat` says of one entry, without following it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    /// The entry's type (a symlink is reported as one, not followed).
    pub kind: FileType,
    /// Permission bits, set-id and sticky bits included (`st_mode & 0o7777`).
    pub mode: u32,
    /// The size in bytes (`st_size`).
    pub size: u64,
    /// The device the entry is on (`st_dev`).
    pub dev: u64,
    /// The inode number (`st_ino`); with `dev`, names the file.
    pub ino: u64,
    /// The device number, for device files (a whiteout is a character device 0/0).
    pub rdev: u64,
}

impl Meta {
    fn of(st: &rustix::fs::Stat) -> Meta {
        Meta {
            kind: FileType::from_raw_mode(st.st_mode),
            mode: st.st_mode & 0o7777,
            size: u64::try_from(st.st_size).unwrap_or(0),
            dev: st.st_dev,
            ino: st.st_ino,
            rdev: st.st_rdev,
        }
    }
}

/// A directory reached without following a symlink below the point its walk started. Every
/// operation on it is relative to its descriptor.
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
}

impl AsFd for Dir {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl Dir {
    /// Opens the directory a walk starts from, following it if it is a symlink: the start is named
    /// by chock (a session's upper directory) or by the user (their project), never by the agent.
    pub fn open_root(path: &Path) -> std::io::Result<Dir> {
        let fd = rustix::fs::openat(CWD, path, step_flags() & !OFlags::NOFOLLOW, Mode::empty())?;
        Ok(Dir { fd })
    }

    /// A second descriptor for the same directory.
    pub fn try_clone(&self) -> std::io::Result<Dir> {
        Ok(Dir {
            fd: rustix::io::fcntl_dupfd_cloexec(&self.fd, 0)?,
        })
    }

    /// The descriptor itself (an `O_PATH` directory descriptor).
    pub fn into_fd(self) -> OwnedFd {
        self.fd
    }

    /// The directory `name` in this one, not following it: `Err(ELOOP | ENOTDIR)` for a symlink
    /// or a non-directory, `Err(ENOENT)` when absent.
    pub fn child(&self, name: &OsStr) -> Result<Dir, Errno> {
        rustix::fs::openat(&self.fd, name, step_flags(), Mode::empty()).map(|fd| Dir { fd })
    }

    /// Walks to the directory `rel` below this one, one plain name at a time, never following a
    /// symlink. With `create`, missing directories are made (mode 0755).
    pub fn open_dir(&self, rel: &Path, create: bool) -> Result<Dir, WalkError> {
        let mut dir = self.try_clone().map_err(|source| WalkError::Io {
            op: "open",
            at: PathBuf::new(),
            source,
        })?;
        let mut at = PathBuf::new();
        for name in plain_names(rel)? {
            at.push(name);
            dir = match dir.child(name) {
                Ok(next) => next,
                Err(Errno::NOENT) if create => {
                    match rustix::fs::mkdirat(&dir.fd, name, Mode::from_raw_mode(0o755)) {
                        Ok(()) | Err(Errno::EXIST) => {}
                        Err(e) => {
                            return Err(WalkError::Io {
                                op: "create directory",
                                at,
                                source: e.into(),
                            });
                        }
                    }
                    dir.child(name).map_err(|e| step_error(at.clone(), e))?
                }
                Err(e) => return Err(step_error(at, e)),
            };
        }
        Ok(dir)
    }

    /// The directory holding the last component of `rel` (walked as [`Dir::open_dir`] does) and
    /// that last name.
    pub fn parent<'r>(&self, rel: &'r Path, create: bool) -> Result<(Dir, &'r OsStr), WalkError> {
        let names = plain_names(rel)?;
        let Some((last, _)) = names.split_last() else {
            return Err(WalkError::NotPlain {
                path: rel.to_path_buf(),
            });
        };
        let dir = self.open_dir(rel.parent().unwrap_or(Path::new("")), create)?;
        Ok((dir, last))
    }

    /// What `name` is, without following it; `None` when it is absent.
    pub fn meta(&self, name: &OsStr) -> std::io::Result<Option<Meta>> {
        match rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(Meta::of(&st))),
            Err(Errno::NOENT | Errno::NOTDIR) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// What this directory itself is.
    pub fn own_meta(&self) -> std::io::Result<Meta> {
        Ok(Meta::of(&rustix::fs::fstat(&self.fd)?))
    }

    /// A readable descriptor for this directory (an `O_PATH` one cannot be listed or asked for
    /// xattrs).
    fn readable(&self) -> std::io::Result<OwnedFd> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        Ok(rustix::fs::openat(&self.fd, ".", flags, Mode::empty())?)
    }

    /// The names in this directory (without `.` and `..`), sorted bytewise.
    pub fn names(&self) -> std::io::Result<Vec<OsString>> {
        let mut out = Vec::new();
        for entry in rustix::fs::Dir::read_from(self.readable()?)? {
            let name = entry?.file_name().to_bytes().to_vec();
            if name != b"." && name != b".." {
                out.push(OsString::from_vec(name));
            }
        }
        out.sort();
        Ok(out)
    }

    /// Whether this directory has no entries.
    pub fn is_empty(&self) -> std::io::Result<bool> {
        for entry in rustix::fs::Dir::read_from(self.readable()?)? {
            let name = entry?.file_name().to_bytes().to_vec();
            if name != b"." && name != b".." {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The target of the symlink `name`.
    pub fn read_link(&self, name: &OsStr) -> std::io::Result<Vec<u8>> {
        Ok(rustix::fs::readlinkat(&self.fd, name, Vec::new())?.into_bytes())
    }

    /// Reads the regular file `name` whole, with what `fstat` said of it on the open descriptor.
    /// It is opened `O_NOFOLLOW | O_NONBLOCK` (a symlink is refused, a fifo does not hang the
    /// host) and must be a regular file (`InvalidInput` otherwise). More than `max` bytes, by its
    /// size or while reading (it may grow), is `FileTooLarge`: a sparse file costs the agent
    /// nothing to make at any size.
    pub fn read_file(&self, name: &OsStr, max: u64) -> std::io::Result<(Vec<u8>, Meta)> {
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&self.fd, name, flags, Mode::empty())?;
        let meta = Meta::of(&rustix::fs::fstat(&fd)?);
        if meta.kind != FileType::RegularFile {
            return Err(std::io::Error::new(
                ErrorKind::InvalidInput,
                "not a regular file",
            ));
        }
        if meta.size > max {
            return Err(too_large(meta.size, max));
        }
        let mut bytes = Vec::new();
        std::fs::File::from(fd)
            .take(max + 1)
            .read_to_end(&mut bytes)?;
        if bytes.len() as u64 > max {
            return Err(too_large(bytes.len() as u64, max));
        }
        Ok((bytes, meta))
    }

    /// Writes the file `name` whole: a new temporary file made `O_EXCL | O_NOFOLLOW` beside it (a
    /// symlink planted at the temporary name is never written through), then renamed over the
    /// old entry (a rename replaces a symlink, it does not follow it). An old regular file's mode
    /// is kept.
    pub fn write_replace(&self, name: &OsStr, bytes: &[u8]) -> std::io::Result<()> {
        let mode = self
            .meta(name)?
            .filter(|m| m.kind == FileType::RegularFile)
            .map(|m| m.mode);
        let mut tmp = OsString::from(".");
        tmp.push(name);
        tmp.push(format!(".chock-tmp{}", std::process::id()));
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&self.fd, &tmp, flags, Mode::from_raw_mode(0o644))?;
        let written = (|| {
            if let Some(mode) = mode {
                rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode))?;
            }
            let mut file = std::fs::File::from(fd);
            file.write_all(bytes)?;
            drop(file);
            rustix::fs::renameat(&self.fd, &tmp, &self.fd, name)?;
            Ok::<(), std::io::Error>(())
        })();
        if written.is_err() {
            let _ = rustix::fs::unlinkat(&self.fd, &tmp, AtFlags::empty());
        }
        written
    }

    /// Removes the non-directory entry `name` (not following it).
    pub fn remove(&self, name: &OsStr) -> std::io::Result<()> {
        Ok(rustix::fs::unlinkat(&self.fd, name, AtFlags::empty())?)
    }

    /// Whether the extended attribute `attr` of this directory (`name: None`) or of the regular
    /// file `name` in it is set, and (with `value`) equal to `value`. Symlinks and devices have no
    /// attribute here: they are never opened.
    pub fn xattr_is(&self, name: Option<&OsStr>, attr: &str, value: Option<&[u8]>) -> bool {
        let fd = match name {
            None => self.readable(),
            Some(name) => {
                let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
                rustix::fs::openat(&self.fd, name, flags, Mode::empty())
                    .map_err(Into::into)
                    .and_then(|fd| match rustix::fs::fstat(&fd) {
                        Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::RegularFile => {
                            Ok(fd)
                        }
                        Ok(_) => Err(std::io::Error::from(ErrorKind::InvalidInput)),
                        Err(e) => Err(e.into()),
                    })
            }
        };
        let Ok(fd) = fd else {
            return false;
        };
        let mut buf = [0u8; 16];
        match rustix::fs::fgetxattr(&fd, attr, &mut buf[..]) {
            Ok(len) => value.is_none_or(|v| buf.get(..len) == Some(v)),
            Err(_) => false,
        }
    }
}

fn too_large(size: u64, max: u64) -> std::io::Error {
    std::io::Error::new(
        ErrorKind::FileTooLarge,
        format!("{size} bytes, more than the host reads ({max})"),
    )
}

fn step_error(at: PathBuf, e: Errno) -> WalkError {
    match e {
        Errno::NOENT => WalkError::Missing { at },
        Errno::LOOP | Errno::NOTDIR => WalkError::NotADirectory { at },
        e => WalkError::Io {
            op: "open",
            at,
            source: e.into(),
        },
    }
}

#[cfg(test)]
mod tests;
