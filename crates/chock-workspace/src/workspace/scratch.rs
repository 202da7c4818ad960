//! A scratch workspace: the overlay and nothing else, for a session whose work is thrown away
//! when it closes (`chock exec` without `--keep`).
//!
//! What a git workspace adds to the overlay — the base commit (`git add -A` over the project), a
//! checkpoint commit after every call, the session ref — exists so the work can be reviewed and
//! applied later. A session that removes its workspace at close never reviews or applies it, and
//! the ref its checkpoints hang from is deleted at that close, so all of that would be written
//! only to be dropped a moment later. The confined call is the same either way: the sandbox gets
//! the same overlay (the project as the read-only lower layer, the upper and work directories in
//! the session), and a crash that leaves the workspace behind leaves one that `chock diff`
//! (against the live project) and `chock workspace rm` still handle, as for a project without git.

use std::fs;
use std::path::Path;
use std::sync::Mutex;

use chock_log::clock::now_rfc3339;

use super::{Workspace, make_dirs};
use crate::error::{Result, WorkspaceError};
use crate::late_sync::LateSync;
use crate::meta::{Backing, Layout, META_FORMAT, Meta, tmp_sibling};

impl Workspace {
    /// Creates a workspace that will be removed without review: the overlay backing whatever the
    /// project is (no git process, no base commit, no checkpoints: [`Workspace::checkpoint`] returns
    /// `None`), and `meta.json` written without an fsync (see below).
    ///
    /// `meta.json` is what `chock workspace list` shows and [`Workspace::open`] reads; for a
    /// workspace nobody reopens, losing it in a power cut costs a listing line ("missing"), and
    /// `chock workspace rm` removes the directory without it. It is still renamed into place, so a
    /// reader never sees half of it.
    pub fn create_scratch(
        project: &Path,
        session_dir: &Path,
        session_id: &str,
    ) -> Result<Workspace> {
        let (project, layout) = make_dirs(project, session_dir)?;
        let workspace = Self::scratch(project, layout, session_id);
        let path = workspace.layout.meta();
        let bytes = serde_json::to_vec_pretty(&workspace.meta)
            .map_err(|e| WorkspaceError::record(&path, e))?;
        let tmp = tmp_sibling(&path, "tmp");
        fs::write(&tmp, bytes).map_err(|e| WorkspaceError::io("write", &tmp, e))?;
        fs::rename(&tmp, &path).map_err(|e| WorkspaceError::io("rename into place", &path, e))?;
        Ok(workspace)
    }

    /// A scratch workspace of which nothing is made on disk: its one call keeps the upper layer in
    /// a tmpfs of its own (chock-sandbox's `OwnOverlay::InMemory`), so there is no upper or work
    /// directory, no `meta.json`, nothing for `chock workspace list` to show or `chock diff` to
    /// read, and nothing to remove ([`crate::remove`] is not called for it). Its
    /// [`Workspace::mount`] still names the overlay's lower layer, the project; the upper and work
    /// paths it names are never made.
    pub fn in_memory(project: &Path, session_dir: &Path, session_id: &str) -> Result<Workspace> {
        let project =
            fs::canonicalize(project).map_err(|e| WorkspaceError::io("resolve", project, e))?;
        Ok(Self::scratch(project, Layout::new(session_dir), session_id))
    }

    fn scratch(project: std::path::PathBuf, layout: Layout, session_id: &str) -> Workspace {
        Workspace {
            layout,
            meta: Meta {
                format: META_FORMAT,
                session: session_id.to_string(),
                project,
                backing: Backing::Overlay,
                created: now_rfc3339(),
            },
            base_job: Mutex::new(None),
            side: Mutex::new(None),
            last: Mutex::new(None),
            late: LateSync::default(),
        }
    }
}
