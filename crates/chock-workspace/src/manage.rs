//! Listing and removing session workspaces. Nothing is removed unless asked: a session that ended
//! abnormally keeps its workspace until `chock workspace rm`.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::error::{Result, WorkspaceError};
use crate::git::Git;
use crate::meta::{Backing, Layout, Meta, WORKSPACE_DIR};

/// One workspace found under the sessions root.
#[derive(Debug, Clone)]
pub struct Listed {
    /// The session's directory.
    pub session_dir: PathBuf,
    /// `None` when `meta.json` could not be read (the reason is in `problem`).
    pub meta: Option<Meta>,
    /// Why `meta.json` could not be read, when it could not.
    pub problem: Option<String>,
}

/// Every session under `sessions_root` that has a workspace, sorted by session id (= by time).
pub fn list(sessions_root: &Path) -> Result<Vec<Listed>> {
    let mut out = Vec::new();
    let items = match fs::read_dir(sessions_root) {
        Ok(items) => items,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(WorkspaceError::io("list", sessions_root, e)),
    };
    for item in items {
        let item = item.map_err(|e| WorkspaceError::io("list", sessions_root, e))?;
        let session_dir = item.path();
        let layout = Layout::new(&session_dir);
        if !layout.dir.is_dir() {
            continue;
        }
        match Meta::load(&layout.meta()) {
            Ok(meta) => out.push(Listed {
                session_dir,
                meta: Some(meta),
                problem: None,
            }),
            Err(e) => out.push(Listed {
                session_dir,
                meta: None,
                problem: Some(e.to_string()),
            }),
        }
    }
    out.sort_by(|a, b| a.session_dir.cmp(&b.session_dir));
    Ok(out)
}

/// Removes a session's workspace: `<session>/workspace/` and, for the git backing, the ref
/// `refs/chock/<session>` (its commits stay in the object store until git collects them). Apply
/// records stay, so `chock undo` still works.
pub fn remove(session_dir: &Path) -> Result<()> {
    let layout = Layout::new(session_dir);
    if !layout.dir.is_dir() {
        return Err(WorkspaceError::Missing(layout.dir));
    }
    if let Ok(Meta {
        backing: Backing::Git { top, ref_name, .. },
        ..
    }) = Meta::load(&layout.meta())
    {
        let git = Git::new(&top);
        if git
            .text(&["rev-parse", "--verify", "--quiet", &ref_name])
            .is_ok()
        {
            git.run(&["update-ref", "-d", &ref_name])?;
        }
    }
    remove_tree(&session_dir.join(WORKSPACE_DIR))
}

/// `rm -rf` that also handles the overlay's work directory, which the kernel leaves mode 000.
fn remove_tree(path: &Path) -> Result<()> {
    if fs::remove_dir_all(path).is_ok() {
        return Ok(());
    }
    open_up(path);
    fs::remove_dir_all(path).map_err(|e| WorkspaceError::io("remove", path, e))
}

fn open_up(path: &Path) {
    let Ok(meta) = fs::symlink_metadata(path) else {
        return;
    };
    if !meta.is_dir() {
        return;
    }
    let _ = fs::set_permissions(path, fs::Permissions::from_mode(0o700));
    if let Ok(items) = fs::read_dir(path) {
        for item in items.flatten() {
            open_up(&item.path());
        }
    }
}
