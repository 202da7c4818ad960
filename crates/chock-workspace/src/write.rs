//! Writing into the real project without half-writing it: every new file or symlink is first
//! staged as a hidden sibling of its destination (parents created as needed), and only when all of
//! them are staged are they renamed into place. A failure while staging removes what was staged.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::entry::Entry;
use crate::error::{Result, WorkspaceError};

/// One path's planned change in the project: it holds `before` now and will hold `after`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Op {
    pub path: String,
    pub before: Option<Entry>,
    pub after: Option<Entry>,
}

struct Staged {
    tmp: PathBuf,
    dest: PathBuf,
}

/// Stages and then performs `ops` under `root`. Returns the directories it could not remove
/// because something else (not part of the change) is still in them.
///
/// Staged copies go to `<root>/.chock-stage-<tag>/` (same filesystem, so the final step is a
/// rename); it is removed at the end, and on any failure before the first change to the project.
///
/// `staged_hook` runs once everything is staged and before the first change to the project (the
/// caller saves its record there); if it fails, the stage is removed and nothing was written.
pub fn perform(
    root: &Path,
    ops: &[Op],
    tag: &str,
    staged_hook: impl FnOnce() -> Result<()>,
) -> Result<Vec<String>> {
    let stage_dir = root.join(format!(".chock-stage-{tag}"));
    let mut staged: Vec<Staged> = Vec::new();
    if let Err(e) = check_parents(root, ops)
        .and_then(|()| stage_all(root, &stage_dir, ops, &mut staged))
        .and_then(|()| staged_hook())
    {
        let _ = fs::remove_dir_all(&stage_dir);
        return Err(e);
    }
    let mut kept = Vec::new();
    // 1. Files and symlinks that go away or give way to a directory.
    let mut removals: Vec<&Op> = ops
        .iter()
        .filter(|op| matches!(op.before, Some(Entry::File { .. } | Entry::Symlink { .. })))
        .filter(|op| matches!(op.after, None | Some(Entry::Dir)))
        .collect();
    removals.sort_by(|a, b| b.path.cmp(&a.path));
    for op in removals {
        let path = root.join(&op.path);
        fs::remove_file(&path).map_err(|e| WorkspaceError::io("remove", &path, e))?;
    }
    // 2. Directories that go away, deepest first.
    let mut rmdirs: Vec<&Op> = ops
        .iter()
        .filter(|op| op.before == Some(Entry::Dir) && op.after != Some(Entry::Dir))
        .collect();
    rmdirs.sort_by(|a, b| b.path.cmp(&a.path));
    for op in rmdirs {
        let path = root.join(&op.path);
        match fs::remove_dir(&path) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(39) => kept.push(op.path.clone()), // ENOTEMPTY
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(WorkspaceError::io("remove directory", &path, e)),
        }
    }
    // 3. New directories, shallowest first.
    let mut mkdirs: Vec<&Op> = ops
        .iter()
        .filter(|op| op.after == Some(Entry::Dir) && op.before != Some(Entry::Dir))
        .collect();
    mkdirs.sort_by(|a, b| a.path.cmp(&b.path));
    for op in mkdirs {
        let path = root.join(&op.path);
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(&path)
            .map_err(|e| WorkspaceError::io("create directory", &path, e))?;
    }
    // 4. Everything staged, into place.
    for s in &staged {
        if let Some(parent) = s.dest.parent() {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(parent)
                .map_err(|e| WorkspaceError::io("create directory", parent, e))?;
        }
        fs::rename(&s.tmp, &s.dest)
            .map_err(|e| WorkspaceError::io("rename into place", &s.dest, e))?;
    }
    if !staged.is_empty() {
        fs::remove_dir(&stage_dir).map_err(|e| WorkspaceError::io("remove", &stage_dir, e))?;
    }
    Ok(kept)
}

/// Refuses, before anything is staged, a destination whose parent is a file or symlink that the
/// change does not itself remove.
fn check_parents(root: &Path, ops: &[Op]) -> Result<()> {
    let removed = |p: &str| {
        ops.iter()
            .any(|op| op.path == p && matches!(op.after, None | Some(Entry::Dir)))
    };
    for op in ops.iter().filter(|op| op.after.is_some()) {
        let mut at = op.path.as_str();
        while let Some((parent, _)) = at.rsplit_once('/') {
            let path = root.join(parent);
            if let Ok(meta) = fs::symlink_metadata(&path)
                && !meta.is_dir()
                && !removed(parent)
            {
                return Err(WorkspaceError::Conflict {
                    conflicts: vec![format!(
                        "{}: {parent} is not a directory in the project",
                        op.path
                    )],
                });
            }
            at = parent;
        }
    }
    Ok(())
}

/// The set-uid and set-gid bits (sys/stat.h S_ISUID | S_ISGID).
const SET_ID: u32 = 0o6000;

/// The paths of `ops` whose file in the project has set-id bits that writing it will drop (an
/// apply or undo writes regular files without them).
pub(crate) fn setid_stripped(root: &Path, ops: &[Op]) -> Vec<String> {
    ops.iter()
        .filter(|op| matches!(op.after, Some(Entry::File { .. })))
        .filter(|op| {
            fs::symlink_metadata(root.join(&op.path))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & SET_ID != 0)
        })
        .map(|op| op.path.clone())
        .collect()
}

fn stage_all(root: &Path, stage_dir: &Path, ops: &[Op], staged: &mut Vec<Staged>) -> Result<()> {
    for (n, op) in ops.iter().enumerate() {
        let Some(after) = &op.after else { continue };
        if matches!(after, Entry::Dir) {
            continue;
        }
        if staged.is_empty() {
            fs::DirBuilder::new()
                .mode(0o700)
                .create(stage_dir)
                .map_err(|e| WorkspaceError::io("create", stage_dir, e))?;
        }
        let dest = root.join(&op.path);
        let tmp = stage_dir.join(n.to_string());
        staged.push(Staged {
            tmp: tmp.clone(),
            dest: dest.clone(),
        });
        match after {
            Entry::File { exec, data } => {
                let mut file =
                    fs::File::create(&tmp).map_err(|e| WorkspaceError::io("stage", &tmp, e))?;
                file.write_all(data)
                    .map_err(|e| WorkspaceError::io("stage", &tmp, e))?;
                // The project's own mode, without set-uid/set-gid: content from a workspace must
                // never become a set-id program (as root, a set-uid-root one) in the real project.
                // [`setid_stripped`] lists where this drops a bit, for the record and the event.
                let base = match fs::symlink_metadata(&dest) {
                    Ok(meta) if meta.is_file() => meta.permissions().mode() & 0o7777 & !SET_ID,
                    _ => 0o644,
                };
                let mode = if *exec {
                    base | ((base & 0o444) >> 2) | 0o100
                } else {
                    base & !0o111
                };
                fs::set_permissions(&tmp, fs::Permissions::from_mode(mode))
                    .map_err(|e| WorkspaceError::io("set mode of", &tmp, e))?;
                file.sync_all()
                    .map_err(|e| WorkspaceError::io("fsync", &tmp, e))?;
            }
            Entry::Symlink { target } => {
                use std::os::unix::ffi::OsStrExt;
                std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(target), &tmp)
                    .map_err(|e| WorkspaceError::io("stage symlink", &tmp, e))?;
            }
            Entry::Dir => {}
        }
    }
    Ok(())
}
