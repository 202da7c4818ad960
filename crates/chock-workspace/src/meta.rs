//! `<session>/workspace/meta.json`: which backing, which project, and (git) the base commit.

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Result, WorkspaceError};

/// Format of `meta.json`; bumped on an incompatible change.
pub const META_FORMAT: u32 = 1;

/// The directory names inside a session directory.
pub const WORKSPACE_DIR: &str = "workspace";
/// Per-apply records (kept outside `workspace/` so `chock workspace rm` keeps undo possible).
pub const APPLIES_DIR: &str = "applies";

/// How the session's work is kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Backing {
    /// The project is in a git repository: the user's state at the start is the base commit, and
    /// checkpoints are commits on `ref_name` in the user's repository.
    Git {
        /// The repository's top-level directory.
        top: PathBuf,
        /// The project's path inside the repository (`""` or `sub/dir/`).
        prefix: String,
        /// `refs/chock/<session>`.
        ref_name: String,
        /// The commit recording the user's state (HEAD plus uncommitted and untracked, not ignored)
        /// when the session started; `None` while it is still being written.
        base: Option<String>,
    },
    /// No git: the upper directory of the overlay is the only record of the session's work.
    Overlay,
}

/// The contents of `meta.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meta {
    /// The file's format; one this version does not read is refused.
    pub format: u32,
    /// The session's id.
    pub session: String,
    /// The real project (the overlay's lower layer).
    pub project: PathBuf,
    /// How the session's work is kept.
    pub backing: Backing,
    /// RFC 3339 creation time.
    pub created: String,
}

/// The paths of one session's workspace.
#[derive(Debug, Clone)]
pub struct Layout {
    pub session_dir: PathBuf,
    pub dir: PathBuf,
}

impl Layout {
    pub fn new(session_dir: &Path) -> Self {
        Self {
            session_dir: session_dir.to_path_buf(),
            dir: session_dir.join(WORKSPACE_DIR),
        }
    }
    pub fn meta(&self) -> PathBuf {
        self.dir.join("meta.json")
    }
    pub fn upper(&self) -> PathBuf {
        self.dir.join("upper")
    }
    pub fn work(&self) -> PathBuf {
        self.dir.join("work")
    }
    pub fn base_index(&self) -> PathBuf {
        self.dir.join("base.index")
    }
    pub fn applies(&self) -> PathBuf {
        self.session_dir.join(APPLIES_DIR)
    }

    /// Makes a new workspace's directories for `project` in `session_dir` (work 0700, the upper
    /// root with the project root's mode, both in a 0700 directory) and returns the resolved
    /// project with them, refusing a session directory that already has a workspace.
    pub fn create(project: &Path, session_dir: &Path) -> Result<(PathBuf, Layout)> {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        let project =
            fs::canonicalize(project).map_err(|e| WorkspaceError::io("resolve", project, e))?;
        let layout = Layout::new(session_dir);
        if layout.dir.exists() {
            return Err(WorkspaceError::Exists(layout.dir.clone()));
        }
        let mut builder = fs::DirBuilder::new();
        builder.recursive(true).mode(0o700);
        for dir in [layout.dir.clone(), layout.upper(), layout.work()] {
            builder
                .create(&dir)
                .map_err(|e| WorkspaceError::io("create", &dir, e))?;
        }
        // The overlay's root shows its upper root's mode: the project root's, not 0700, inside the
        // sandbox. The workspace directory above it stays 0700 on the host.
        let mode = fs::metadata(&project)
            .map_err(|e| WorkspaceError::io("stat", &project, e))?
            .permissions()
            .mode()
            & 0o7777;
        fs::set_permissions(layout.upper(), fs::Permissions::from_mode(mode))
            .map_err(|e| WorkspaceError::io("chmod", layout.upper(), e))?;
        Ok((project, layout))
    }
}

impl Meta {
    /// Reads `meta.json` at `path`: [`WorkspaceError::Missing`] when it is not there, a record
    /// error when it does not parse or is of another format.
    pub fn load(path: &Path) -> Result<Meta> {
        let bytes = match fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(WorkspaceError::Missing(
                    path.parent().unwrap_or(path).to_path_buf(),
                ));
            }
            Err(e) => return Err(WorkspaceError::io("read", path, e)),
        };
        let meta: Meta =
            serde_json::from_slice(&bytes).map_err(|e| WorkspaceError::record(path, e))?;
        if meta.format != META_FORMAT {
            return Err(WorkspaceError::record(
                path,
                format!("format {} is not {META_FORMAT}", meta.format),
            ));
        }
        Ok(meta)
    }

    /// Writes `meta.json` to `path`, whole (a temporary file renamed over it).
    pub fn store(&self, path: &Path) -> Result<()> {
        let bytes = serde_json::to_vec_pretty(self).map_err(|e| WorkspaceError::record(path, e))?;
        write_atomic(path, &bytes)
    }

    /// Writes `meta.json` to `path` whole (renamed into place, so a reader never sees half of
    /// it) but without an fsync: for a scratch workspace nobody reopens, see
    /// `Workspace::create_scratch`.
    pub fn store_unsynced(&self, path: &Path) -> Result<()> {
        let bytes = serde_json::to_vec_pretty(self).map_err(|e| WorkspaceError::record(path, e))?;
        let tmp = tmp_sibling(path, "tmp");
        fs::write(&tmp, bytes).map_err(|e| WorkspaceError::io("write", &tmp, e))?;
        fs::rename(&tmp, path).map_err(|e| WorkspaceError::io("rename into place", path, e))
    }
}

/// Writes `bytes` to a temporary file beside `path`, fsyncs it and renames it over `path`.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let tmp = tmp_sibling(path, "tmp");
    let mut file = fs::File::create(&tmp).map_err(|e| WorkspaceError::io("create", &tmp, e))?;
    file.write_all(bytes)
        .map_err(|e| WorkspaceError::io("write", &tmp, e))?;
    file.sync_all()
        .map_err(|e| WorkspaceError::io("fsync", &tmp, e))?;
    fs::rename(&tmp, path).map_err(|e| WorkspaceError::io("rename into place", path, e))
}

/// `<dir>/.<name>.<pid>.<tag>`: a sibling name for staging.
pub fn tmp_sibling(path: &Path, tag: &str) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.{}.{tag}", std::process::id()))
}
