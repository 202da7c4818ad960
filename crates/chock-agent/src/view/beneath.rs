//! Host file operations that can never leave a layer directory.
//!
//! The file tools run on the host, as the user, over directories whose content the agent controls:
//! an overlay's upper layer (or a bound workspace) that a command in the sandbox — perhaps one still
//! running in the background — can change at any moment, swapping a directory for a symlink to
//! `/home/user/.ssh` between the view's check and the host's open. So nothing here opens a path
//! string below the layer: every operation walks from the layer's root one component at a time with
//! `O_NOFOLLOW | O_DIRECTORY`, and opens the last component `O_NOFOLLOW`. A component that is (or
//! has just become) a symlink stops the walk with an error instead of being followed; there is no
//! window between a check and the act in which a swapped component could redirect it.
//!
//! The callers pass paths already resolved inside the view (no `..`, no symlinks left); a symlink
//! met here is a race or an attack, never something to follow.

use std::ffi::OsString;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStringExt;
use std::path::{Component, Path};

use rustix::fs::{AtFlags, CWD, FileType, Mode, OFlags};
use rustix::io::Errno;

/// The largest file the host reads for a file tool.
pub const MAX_READ: u64 = 32 * 1024 * 1024;

/// Flags to step through a directory: never a symlink, never a non-directory.
fn dir_flags() -> OFlags {
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

/// The plain names of `rel`; anything else (`..`, `/`, `.`) is refused: the view resolved it already.
fn names(rel: &Path) -> std::io::Result<Vec<&std::ffi::OsStr>> {
    rel.components()
        .map(|c| match c {
            Component::Normal(name) => Ok(name),
            _ => Err(std::io::Error::new(
                ErrorKind::InvalidInput,
                "not a plain path below the workspace",
            )),
        })
        .collect()
}

fn refused(err: Errno) -> std::io::Error {
    if err == Errno::LOOP || err == Errno::NOTDIR {
        std::io::Error::new(
            ErrorKind::NotADirectory,
            "a symlink or a non-directory in the path (the file tools never follow one)",
        )
    } else {
        err.into()
    }
}

/// Opens the directory `rel` below `root` (the root itself is chock's own and may be followed).
/// With `create`, missing directories are made (mode 0755).
pub fn open_dir(root: &Path, rel: &Path, create: bool) -> std::io::Result<OwnedFd> {
    let mut dir = rustix::fs::openat(CWD, root, dir_flags() & !OFlags::NOFOLLOW, Mode::empty())?;
    for name in names(rel)? {
        dir = match rustix::fs::openat(&dir, name, dir_flags(), Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NOENT) if create => {
                match rustix::fs::mkdirat(&dir, name, Mode::from_raw_mode(0o755)) {
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(e) => return Err(e.into()),
                }
                rustix::fs::openat(&dir, name, dir_flags(), Mode::empty()).map_err(refused)?
            }
            Err(e) => return Err(refused(e)),
        };
    }
    Ok(dir)
}

/// The parent directory of `rel` (opened as [`open_dir`] does) and the last name.
fn parent(root: &Path, rel: &Path, create: bool) -> std::io::Result<(OwnedFd, OsString)> {
    let name = rel
        .file_name()
        .ok_or_else(|| std::io::Error::new(ErrorKind::InvalidInput, "no file name"))?;
    let dir = open_dir(root, rel.parent().unwrap_or(Path::new("")), create)?;
    Ok((dir, name.to_os_string()))
}

/// Reads the regular file `rel` below `root`. A fifo or device is refused without blocking on it.
pub fn read(root: &Path, rel: &Path) -> std::io::Result<Vec<u8>> {
    let (dir, name) = parent(root, rel, false)?;
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(&dir, &name, flags, Mode::empty()).map_err(refused)?;
    let st = rustix::fs::fstat(&fd)?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(std::io::Error::new(
            ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    // A sparse file costs the agent nothing to make and would cost the host its memory to read.
    if u64::try_from(st.st_size).unwrap_or(u64::MAX) > MAX_READ {
        return Err(std::io::Error::new(
            ErrorKind::FileTooLarge,
            format!(
                "{} bytes, more than the file tools read ({MAX_READ}); use run_command (head, sed -n)",
                st.st_size
            ),
        ));
    }
    let mut bytes = Vec::new();
    // Bounded again while reading: the file may grow after the fstat.
    std::fs::File::from(fd)
        .take(MAX_READ + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_READ {
        return Err(std::io::Error::new(
            ErrorKind::FileTooLarge,
            "the file grew past what the file tools read while it was read",
        ));
    }
    Ok(bytes)
}

/// Writes `rel` below `root` whole: a new temporary file made `O_EXCL | O_NOFOLLOW` next to it (so
/// a planted symlink at the temporary name is never written through), then renamed over the old
/// entry (a rename replaces a symlink, it does not follow it). The old file's mode is kept.
pub fn write(root: &Path, rel: &Path, bytes: &[u8], create_parents: bool) -> std::io::Result<()> {
    let (dir, name) = parent(root, rel, create_parents)?;
    let mode = rustix::fs::statat(&dir, &name, AtFlags::SYMLINK_NOFOLLOW)
        .ok()
        .filter(|st| FileType::from_raw_mode(st.st_mode) == FileType::RegularFile)
        .map(|st| st.st_mode & 0o7777);
    let mut tmp = OsString::from(".");
    tmp.push(&name);
    tmp.push(format!(".chock-tmp{}", std::process::id()));
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(&dir, &tmp, flags, Mode::from_raw_mode(0o644))?;
    let written = (|| {
        if let Some(mode) = mode {
            rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode))?;
        }
        let mut file = std::fs::File::from(fd);
        file.write_all(bytes)?;
        drop(file);
        rustix::fs::renameat(&dir, &tmp, &dir, &name)?;
        Ok::<(), std::io::Error>(())
    })();
    if written.is_err() {
        let _ = rustix::fs::unlinkat(&dir, &tmp, AtFlags::empty());
    }
    written
}

/// Removes the entry `rel` below `root` (not following it): used to clear a whiteout.
pub fn remove(root: &Path, rel: &Path) -> std::io::Result<()> {
    let (dir, name) = parent(root, rel, false)?;
    rustix::fs::unlinkat(&dir, &name, AtFlags::empty()).map_err(Into::into)
}

/// The names in directory `rel` below `root` (without `.` and `..`).
pub fn list(root: &Path, rel: &Path) -> std::io::Result<Vec<OsString>> {
    let dir = open_dir(root, rel, false)?;
    let mut out = Vec::new();
    for entry in rustix::fs::Dir::read_from(&dir)? {
        let name = entry?.file_name().to_bytes().to_vec();
        if name != b"." && name != b".." {
            out.push(OsString::from_vec(name));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory component swapped for a symlink (what a background command can do between the
    /// view's check and the host's act) stops every operation: nothing outside is read, listed or written.
    #[test]
    fn a_symlinked_component_is_never_followed() {
        let layer = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s3cret").unwrap();
        std::os::unix::fs::symlink(outside.path(), layer.path().join("d")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), layer.path().join("f")).unwrap();
        assert!(read(layer.path(), Path::new("d/secret")).is_err());
        assert!(read(layer.path(), Path::new("f")).is_err());
        assert!(list(layer.path(), Path::new("d")).is_err());
        assert!(write(layer.path(), Path::new("d/secret"), b"x", true).is_err());
        assert!(write(layer.path(), Path::new("d/new"), b"x", true).is_err());
        assert_eq!(
            std::fs::read(outside.path().join("secret")).unwrap(),
            b"s3cret"
        );
        assert!(!outside.path().join("new").exists());
        assert!(names(Path::new("../x")).is_err());
    }

    /// A symlink planted at the temporary name is not written through, and the final name, if a
    /// symlink, is replaced rather than followed.
    #[test]
    fn a_write_replaces_a_symlink_and_never_writes_through_a_planted_temporary() {
        let layer = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let tmp = format!(".a.chock-tmp{}", std::process::id());
        std::os::unix::fs::symlink(&victim, layer.path().join(&tmp)).unwrap();
        assert!(write(layer.path(), Path::new("a"), b"new", true).is_err());
        std::fs::remove_file(layer.path().join(&tmp)).unwrap();
        std::os::unix::fs::symlink(&victim, layer.path().join("a")).unwrap();
        write(layer.path(), Path::new("a"), b"new", true).unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        assert_eq!(std::fs::read(layer.path().join("a")).unwrap(), b"new");
        assert!(
            !std::fs::symlink_metadata(layer.path().join("a"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }

    #[test]
    fn a_huge_sparse_file_is_refused_without_reading_it() {
        let layer = tempfile::tempdir().unwrap();
        let file = std::fs::File::create(layer.path().join("big")).unwrap();
        file.set_len(MAX_READ * 64).unwrap();
        let err = read(layer.path(), Path::new("big")).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::FileTooLarge, "{err}");
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let layer = tempfile::tempdir().unwrap();
        rustix::fs::mknodat(
            CWD,
            layer.path().join("p"),
            FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        assert!(read(layer.path(), Path::new("p")).is_err());
    }
}
