//! Writing into the real project without half-writing it: every new file or symlink is first
//! staged as a hidden sibling of its destination (parents created as needed), and only when all of
//! them are staged are they renamed into place. A failure while staging removes what was staged.

use std::fs;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::Path;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use chock_beneath::Dir;

use crate::beneath::{Parent, lstat_at, open_root, parent, refusal};
use crate::entry::Entry;
use crate::error::{Result, WorkspaceError};

/// One path's planned change in the project: it holds `before` now and will hold `after`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Op {
    /// The path, relative to the project.
    pub path: String,
    /// What it holds now (`None`: nothing).
    pub before: Option<Entry>,
    /// What it will hold (`None`: removed).
    pub after: Option<Entry>,
}

/// One staged entry: its name in the stage directory and its destination below the project.
struct Staged {
    tmp: String,
    dest: String,
}

/// Stages and then performs `ops` under `root`. Returns the directories it could not remove
/// because something else (not part of the change) is still in them.
///
/// Staged copies go to `<root>/.chock-stage-<tag>/` (same filesystem, so the final step is a
/// rename); it is removed at the end, and on any failure (before the first change to the project
/// nothing is left written; after it, what was not yet renamed into place is removed too, and the
/// record saved by `staged_hook` lets `chock undo` revert what was).
///
/// Every path is reached through [`crate::beneath::parent`]: nothing is written, removed or made
/// through a symlink in the project, even one that appears while the apply runs.
///
/// `staged_hook` runs once everything is staged and before the first change to the project (the
/// caller saves its record there); if it fails, the stage is removed and nothing was written.
pub fn perform(
    root: &Path,
    ops: &[Op],
    tag: &str,
    staged_hook: impl FnOnce() -> Result<()>,
) -> Result<Vec<String>> {
    let refused: Vec<String> = ops.iter().filter_map(|op| refusal(&op.path)).collect();
    if !refused.is_empty() {
        return Err(WorkspaceError::Conflict { conflicts: refused });
    }
    let root_fd = open_root(root)?;
    let stage = Stage {
        name: format!(".chock-stage-{tag}"),
        fd: None,
    };
    let mut stage = stage;
    let mut staged: Vec<Staged> = Vec::new();
    let result = check_parents(root, ops)
        .and_then(|()| stage_all(&root_fd, root, &mut stage, ops, &mut staged))
        .and_then(|()| staged_hook())
        .and_then(|()| write_all(&root_fd, root, &stage, ops, &staged));
    // Whatever was not renamed into place (all of it, on a failure before the first write).
    stage.remove(&root_fd, &staged);
    result
}

/// The stage directory, once made.
struct Stage {
    name: String,
    fd: Option<OwnedFd>,
}

impl Stage {
    /// Removes what is left in the stage and the stage itself; best effort (it only ever holds
    /// chock's own copies, named by number).
    fn remove(&self, root: &Dir, staged: &[Staged]) {
        let Some(fd) = &self.fd else { return };
        for s in staged {
            let _ = rustix::fs::unlinkat(fd, s.tmp.as_str(), AtFlags::empty());
        }
        let _ = rustix::fs::unlinkat(root, self.name.as_str(), AtFlags::REMOVEDIR);
    }
}

/// The writes themselves, in an order that never needs a path twice: files and symlinks that go
/// away, directories that go away (deepest first), new directories (shallowest first), and every
/// staged entry renamed into place.
fn write_all(
    root_fd: &Dir,
    root: &Path,
    stage: &Stage,
    ops: &[Op],
    staged: &[Staged],
) -> Result<Vec<String>> {
    let mut kept = Vec::new();
    // 1. Files and symlinks that go away or give way to a directory.
    let mut removals: Vec<&Op> = ops
        .iter()
        .filter(|op| matches!(op.before, Some(Entry::File { .. } | Entry::Symlink { .. })))
        .filter(|op| matches!(op.after, None | Some(Entry::Dir)))
        .collect();
    removals.sort_by(|a, b| b.path.cmp(&a.path));
    for op in removals {
        if let Parent::Found(dir, name) = parent(root_fd, root, &op.path, false)? {
            rustix::fs::unlinkat(&dir, name.as_str(), AtFlags::empty())
                .map_err(|e| WorkspaceError::io("remove", root.join(&op.path), e.into()))?;
        }
    }
    // 2. Directories that go away, deepest first.
    let mut rmdirs: Vec<&Op> = ops
        .iter()
        .filter(|op| op.before == Some(Entry::Dir) && op.after != Some(Entry::Dir))
        .collect();
    rmdirs.sort_by(|a, b| b.path.cmp(&a.path));
    for op in rmdirs {
        let Parent::Found(dir, name) = parent(root_fd, root, &op.path, false)? else {
            continue;
        };
        match rustix::fs::unlinkat(&dir, name.as_str(), AtFlags::REMOVEDIR) {
            Ok(()) | Err(Errno::NOENT) => {}
            Err(Errno::NOTEMPTY) => kept.push(op.path.clone()),
            Err(e) => {
                return Err(WorkspaceError::io(
                    "remove directory",
                    root.join(&op.path),
                    e.into(),
                ));
            }
        }
    }
    // 3. New directories, shallowest first.
    let mut mkdirs: Vec<&Op> = ops
        .iter()
        .filter(|op| op.after == Some(Entry::Dir) && op.before != Some(Entry::Dir))
        .collect();
    mkdirs.sort_by(|a, b| a.path.cmp(&b.path));
    for op in mkdirs {
        if let Parent::Found(dir, name) = parent(root_fd, root, &op.path, true)? {
            match rustix::fs::mkdirat(&dir, name.as_str(), Mode::from_raw_mode(0o755)) {
                Ok(()) => {}
                Err(Errno::EXIST) if lstat_at(&dir, &name).is_some_and(|(t, _)| t.is_dir()) => {}
                Err(e) => {
                    return Err(WorkspaceError::io(
                        "create directory",
                        root.join(&op.path),
                        e.into(),
                    ));
                }
            }
        }
    }
    // 4. Everything staged, into place.
    if let Some(stage_fd) = &stage.fd {
        for s in staged {
            if let Parent::Found(dir, name) = parent(root_fd, root, &s.dest, true)? {
                rustix::fs::renameat(stage_fd, s.tmp.as_str(), &dir, name.as_str()).map_err(
                    |e| WorkspaceError::io("rename into place", root.join(&s.dest), e.into()),
                )?;
            }
        }
    }
    Ok(kept)
}

/// Refuses, before anything is staged, a destination whose parent is a file or symlink that the
/// change does not itself remove.
pub(crate) fn check_parents(root: &Path, ops: &[Op]) -> Result<()> {
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
    let Ok(root_fd) = open_root(root) else {
        return Vec::new();
    };
    ops.iter()
        .filter(|op| matches!(op.after, Some(Entry::File { .. })))
        .filter(|op| project_mode(&root_fd, root, &op.path).is_some_and(|m| m & SET_ID != 0))
        .map(|op| op.path.clone())
        .collect()
}

fn stage_all(
    root_fd: &Dir,
    root: &Path,
    stage: &mut Stage,
    ops: &[Op],
    staged: &mut Vec<Staged>,
) -> Result<()> {
    for (n, op) in ops.iter().enumerate() {
        let Some(after) = &op.after else { continue };
        if matches!(after, Entry::Dir) {
            continue;
        }
        if stage.fd.is_none() {
            let at = root.join(&stage.name);
            rustix::fs::mkdirat(root_fd, stage.name.as_str(), Mode::from_raw_mode(0o700))
                .map_err(|e| WorkspaceError::io("create", &at, e.into()))?;
            let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let fd = rustix::fs::openat(root_fd, stage.name.as_str(), flags, Mode::empty());
            // Kept even on failure below, so `Stage::remove` takes the directory away.
            stage.fd = Some(fd.map_err(|e| WorkspaceError::io("open", &at, e.into()))?);
        }
        let Some(stage_fd) = &stage.fd else {
            continue;
        };
        let tmp = n.to_string();
        let shown = root.join(&stage.name).join(&tmp);
        staged.push(Staged {
            tmp: tmp.clone(),
            dest: op.path.clone(),
        });
        match after {
            Entry::File { exec, data } => {
                let flags = OFlags::WRONLY
                    | OFlags::CREATE
                    | OFlags::EXCL
                    | OFlags::NOFOLLOW
                    | OFlags::CLOEXEC;
                let fd =
                    rustix::fs::openat(stage_fd, tmp.as_str(), flags, Mode::from_raw_mode(0o600))
                        .map_err(|e| WorkspaceError::io("stage", &shown, e.into()))?;
                // The project's own mode, without set-uid/set-gid: content from a workspace must
                // never become a set-id program (as root, a set-uid-root one) in the real project.
                // [`setid_stripped`] lists where this drops a bit, for the record and the event.
                let base = project_mode(root_fd, root, &op.path).map_or(0o644, |m| m & !SET_ID);
                let mode = if *exec {
                    base | ((base & 0o444) >> 2) | 0o100
                } else {
                    base & !0o111
                };
                rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode))
                    .map_err(|e| WorkspaceError::io("set mode of", &shown, e.into()))?;
                let mut file = fs::File::from(fd);
                file.write_all(data)
                    .map_err(|e| WorkspaceError::io("stage", &shown, e))?;
                file.sync_all()
                    .map_err(|e| WorkspaceError::io("fsync", &shown, e))?;
            }
            Entry::Symlink { target } => {
                rustix::fs::symlinkat(target.as_slice(), stage_fd, tmp.as_str())
                    .map_err(|e| WorkspaceError::io("stage symlink", &shown, e.into()))?;
            }
            Entry::Dir => {}
        }
    }
    Ok(())
}

/// The permission bits of the regular file the project holds at `rel`, reached without following
/// a symlink; `None` when there is none.
fn project_mode(root_fd: &Dir, root: &Path, rel: &str) -> Option<u32> {
    match parent(root_fd, root, rel, false) {
        Ok(Parent::Found(dir, name)) => lstat_at(&dir, &name)
            .filter(|(t, _)| *t == FileType::RegularFile)
            .map(|(_, mode)| mode),
        _ => None,
    }
}
