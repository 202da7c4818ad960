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
use std::io::ErrorKind;
use std::path::Path;

use chock_beneath::{Dir, WalkError};

/// The largest file the host reads for a file tool.
pub const MAX_READ: u64 = 32 * 1024 * 1024;

/// A walk error as the file tools report it.
fn walk_error(err: WalkError) -> std::io::Error {
    match err {
        WalkError::NotADirectory { .. } => std::io::Error::new(
            ErrorKind::NotADirectory,
            "a symlink or a non-directory in the path (the file tools never follow one)",
        ),
        WalkError::NotPlain { .. } => std::io::Error::new(
            ErrorKind::InvalidInput,
            "not a plain path below the workspace",
        ),
        other => other.into(),
    }
}

/// Opens the directory `rel` below `root` (the root itself is chock's own and may be followed).
/// With `create`, missing directories are made (mode 0755).
pub fn open_dir(root: &Path, rel: &Path, create: bool) -> std::io::Result<Dir> {
    Dir::open_root(root)?
        .open_dir(rel, create)
        .map_err(walk_error)
}

/// The parent directory of `rel` (opened as [`open_dir`] does) and the last name.
fn parent(root: &Path, rel: &Path, create: bool) -> std::io::Result<(Dir, OsString)> {
    let root = Dir::open_root(root)?;
    let (dir, name) = root.parent(rel, create).map_err(walk_error)?;
    Ok((dir, name.to_os_string()))
}

/// Reads the regular file `rel` below `root`. A fifo or device is refused without blocking on it.
pub fn read(root: &Path, rel: &Path) -> std::io::Result<Vec<u8>> {
    let (dir, name) = parent(root, rel, false)?;
    match dir.read_file(&name, MAX_READ) {
        Ok((bytes, _)) => Ok(bytes),
        Err(e) if e.kind() == ErrorKind::FileTooLarge => Err(std::io::Error::new(
            ErrorKind::FileTooLarge,
            format!(
                "more than the file tools read ({MAX_READ} bytes); use run_command (head, sed -n)"
            ),
        )),
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
            Err(walk_error(WalkError::NotADirectory { at: rel.into() }))
        }
        Err(e) => Err(e),
    }
}

/// Writes `rel` below `root` whole ([`Dir::write_replace`]: a temporary beside it, then a rename
/// that replaces a symlink rather than following it). The old file's mode is kept.
pub fn write(root: &Path, rel: &Path, bytes: &[u8], create_parents: bool) -> std::io::Result<()> {
    let (dir, name) = parent(root, rel, create_parents)?;
    dir.write_replace(&name, bytes)
}

/// Removes the entry `rel` below `root` (not following it): used to clear a whiteout.
pub fn remove(root: &Path, rel: &Path) -> std::io::Result<()> {
    let (dir, name) = parent(root, rel, false)?;
    dir.remove(&name)
}

/// Makes an overlay whiteout at `rel` below the upper layer `root` (its parents made as needed):
/// the lower layer's entry there is hidden from the merged view.
pub fn whiteout(root: &Path, rel: &Path) -> std::io::Result<()> {
    let (dir, name) = parent(root, rel, true)?;
    dir.make_whiteout(&name)
}

/// The names in directory `rel` below `root` (without `.` and `..`).
pub fn list(root: &Path, rel: &Path) -> std::io::Result<Vec<OsString>> {
    open_dir(root, rel, false)?.names()
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
        assert!(read(layer.path(), Path::new("../x")).is_err());
    }

    #[test]
    fn a_huge_sparse_file_is_refused_without_reading_it() {
        let layer = tempfile::tempdir().unwrap();
        let file = std::fs::File::create(layer.path().join("big")).unwrap();
        file.set_len(MAX_READ * 64).unwrap();
        let err = read(layer.path(), Path::new("big")).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::FileTooLarge, "{err}");
    }
}
