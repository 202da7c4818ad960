//! Reaching a path inside the real project without ever leaving it.
//!
//! The paths an apply or undo writes come from the agent's workspace (names it chose) and from
//! apply records; the directories they pass through belong to the user and may be symlinks to
//! anywhere. So every write is done relative to a directory descriptor reached one component at a
//! time with `O_NOFOLLOW | O_DIRECTORY`: a parent that is (or has just become) a symlink stops the
//! walk instead of being followed, and there is no window between a check and the write in which a
//! swapped component could redirect it. Paths are also checked for what must never be written: the
//! user's `.git` (a hook or a `core.fsmonitor` runs code), chock's own staging and adopt folders,
//! and names a diff cannot show faithfully.

use std::path::Path;

use chock_beneath::{Dir, WalkError};
use rustix::fs::{AtFlags, FileType};

use crate::error::{Result, WorkspaceError};

/// Why `rel` may not be written into a project, or `None` when it may.
///
/// Refused: absolute paths, empty, `.` and `..` components (a path must name a place below the
/// project), any `.git` component at any depth (the user's repository, or a nested one whose
/// `config` or hooks a shell prompt's `git status` would run), chock's own `.chock-stage-*` and
/// `.chock-adopted` at the top, and control characters (a newline in a name forges lines of the
/// diff the user reviewed).
pub fn refusal(rel: &str) -> Option<String> {
    if rel.is_empty() || rel.starts_with('/') {
        return Some(format!(
            "`{}`: not a path below the project",
            chock_protocol::text::line(rel)
        ));
    }
    if rel.chars().any(char::is_control) {
        return Some(format!(
            "`{}`: a control character in a path (it cannot be shown faithfully in the diff)",
            chock_protocol::text::line(rel)
        ));
    }
    for (n, part) in rel.split('/').enumerate() {
        if part.is_empty() || part == "." || part == ".." {
            return Some(format!("{rel}: not a path below the project"));
        }
        if part.eq_ignore_ascii_case(".git") {
            return Some(format!(
                "{rel}: chock never writes into a .git directory (hooks and config run code)"
            ));
        }
        if n == 0 && (part.starts_with(".chock-stage-") || part == crate::adopt::ADOPTED_DIR) {
            return Some(format!("{rel}: reserved for chock itself"));
        }
    }
    None
}

/// Opens the project directory itself (following it if it is a symlink: the user named it).
pub fn open_root(root: &Path) -> Result<Dir> {
    Dir::open_root(root).map_err(|e| WorkspaceError::io("open", root, e))
}

/// Where the walk to a parent directory stopped.
pub enum Parent {
    /// The parent directory of the last component, and that component's name.
    Found(Dir, String),
    /// A parent does not exist (only when not creating).
    Missing,
}

/// Walks to the directory holding the last component of `rel`, below `root`, never following a
/// symlink. With `create`, missing directories are made (mode 0755). A component that is a
/// symlink or not a directory is an error naming it: the caller was about to write through it.
pub fn parent(root: &Dir, root_path: &Path, rel: &str, create: bool) -> Result<Parent> {
    if let Some(why) = refusal(rel) {
        return Err(WorkspaceError::Conflict {
            conflicts: vec![why],
        });
    }
    walk_to_parent(root, root_path, rel, create)
}

/// [`parent`] without the check of the path's names, for paths chock composes itself (adopt's
/// `.chock-adopted/<session>/files/<path>`, whose `<path>` was checked on its own). `rel` must
/// still be relative with no empty, `.` or `..` component. The walk is [`chock_beneath`]'s.
pub fn walk_to_parent(root: &Dir, root_path: &Path, rel: &str, create: bool) -> Result<Parent> {
    if rel.starts_with('/')
        || rel
            .split('/')
            .any(|p| p.is_empty() || p == "." || p == "..")
    {
        return Err(WorkspaceError::Conflict {
            conflicts: vec![format!("{rel}: not a path below the project")],
        });
    }
    match root.parent(Path::new(rel), create) {
        Ok((dir, name)) => Ok(Parent::Found(dir, name.to_string_lossy().into_owned())),
        Err(WalkError::Missing { .. }) => Ok(Parent::Missing),
        Err(WalkError::NotADirectory { at }) => Err(WorkspaceError::Conflict {
            conflicts: vec![format!(
                "{}: a symlink or not a directory in the project; chock does not write through it",
                at.display()
            )],
        }),
        Err(WalkError::NotPlain { .. }) => Err(WorkspaceError::Conflict {
            conflicts: vec![format!("{rel}: not a path below the project")],
        }),
        Err(WalkError::Io { op, at, source }) => {
            Err(WorkspaceError::io(op, root_path.join(at), source))
        }
    }
}

/// The type and permission bits of `name` in `dir`, without following it; `None` if absent.
pub fn lstat_at(dir: &Dir, name: &str) -> Option<(FileType, u32)> {
    rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
        .ok()
        .map(|st| (FileType::from_raw_mode(st.st_mode), st.st_mode & 0o7777))
}
