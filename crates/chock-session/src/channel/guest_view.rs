//! The files a git request reads, as the host reaches them: through the asking process's root
//! for a local call, or, for a call in a microVM guest, through the host's own view of the shared
//! workspace.
//!
//! A guest call has no host pid: its requests come through the guest's init, which the host
//! does not trust (getting out of the inner sandbox leaves a process in the guest). So the host
//! reads nothing a guest names but the workspace, walked from the host's side one plain name at
//! a time without following a symbolic link (`chock_beneath`), with an overlay workspace's upper
//! layer over its lower one as the guest's overlay shows them (a whiteout hides, an opaque
//! directory hides what lies below it); and the system's `/usr`, which the guest sees read-only
//! from the host. Anything else (the call's home, its `/tmp`) reads as absent: a configuration
//! the host cannot read makes an alias unknown, so its invocation is `git.unknown`, never a
//! milder act.

use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

use chock_beneath::{Dir, FileType};
use chock_sandbox::WorkspaceMount;

/// The largest file read for a request (a repository's configuration, its `HEAD`).
const MAX_READ: u64 = 1 << 20;

/// Where a request's files are read from.
#[derive(Debug, Clone)]
pub(crate) enum CallFiles {
    /// A local call: through `/proc/<pid>/root` of the asking process.
    Root(PathBuf),
    /// A call in a microVM guest: the host's view of its workspace.
    Guest(GuestView),
}

/// The host's view of a guest call's workspace: the project's path in the call and the host
/// directories that show it, the top layer first.
#[derive(Debug, Clone)]
pub(crate) struct GuestView {
    project: PathBuf,
    layers: Vec<PathBuf>,
}

impl GuestView {
    /// The view of `mount` shown at `project` in the call.
    pub(crate) fn new(project: &Path, mount: &WorkspaceMount) -> GuestView {
        let layers = match mount {
            WorkspaceMount::Bind { source } | WorkspaceMount::ReadOnly { source } => {
                vec![source.clone()]
            }
            WorkspaceMount::Overlay { lower, upper, .. } => vec![upper.clone(), lower.clone()],
        };
        GuestView {
            project: project.to_path_buf(),
            layers,
        }
    }

    /// Whether `path` (absolute in the call, `.` and `..` taken lexically) lies in the
    /// workspace: a request about anything else is refused.
    pub(crate) fn holds(&self, path: &str) -> bool {
        self.relative(path).is_some()
    }

    /// `path` relative to the project, or `None` outside it.
    fn relative(&self, path: &str) -> Option<PathBuf> {
        let normal = normalize(path)?;
        normal
            .strip_prefix(&self.project)
            .ok()
            .map(Path::to_path_buf)
    }

    /// The entry at `rel` in the merged view: the directory holding it in the layer that shows
    /// it, its name, and its kind; `None` when it is absent, hidden, or reached through a
    /// symbolic link.
    fn find(&self, rel: &Path) -> Option<(Dir, OsString, FileType)> {
        let names = chock_beneath::plain_names(rel).ok()?;
        let Some((last, parents)) = names.split_last() else {
            // The workspace's root itself.
            let dir = Dir::open_root(self.layers.first()?).ok()?;
            return Some((dir, OsString::from("."), FileType::Directory));
        };
        'layers: for layer in &self.layers {
            let mut dir = Dir::open_root(layer).ok()?;
            let mut opaque = false;
            for name in parents {
                let meta = match dir.meta(name).ok()? {
                    None if opaque => return None,
                    None => continue 'layers,
                    Some(m) => m,
                };
                if chock_beneath::is_whiteout(&dir, name, &meta) || meta.kind != FileType::Directory
                {
                    return None;
                }
                dir = dir.child(name).ok()?;
                opaque |= chock_beneath::is_opaque(&dir);
            }
            match dir.meta(last).ok()? {
                None if opaque => return None,
                None => continue 'layers,
                Some(meta) if chock_beneath::is_whiteout(&dir, last, &meta) => return None,
                Some(meta) if meta.kind == FileType::Symlink => return None,
                Some(meta) => return Some((dir, last.to_os_string(), meta.kind)),
            }
        }
        None
    }

    fn read(&self, path: &str) -> Option<Vec<u8>> {
        let (dir, name, kind) = self.find(&self.relative(path)?)?;
        if kind != FileType::RegularFile {
            return None;
        }
        dir.read_file(&name, MAX_READ).ok().map(|(bytes, _)| bytes)
    }

    fn is_dir(&self, path: &str) -> bool {
        self.relative(path)
            .and_then(|rel| self.find(&rel))
            .is_some_and(|(_, _, kind)| kind == FileType::Directory)
    }

    /// The names in the directory at `path`, every layer's, less the upper's whiteouts.
    fn names(&self, path: &str) -> Vec<String> {
        let Some(rel) = self.relative(path) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for layer in &self.layers {
            let Ok(root) = Dir::open_root(layer) else {
                continue;
            };
            let Ok(dir) = root.open_dir(&rel, false) else {
                continue;
            };
            for name in dir.names().unwrap_or_default() {
                let shown = dir
                    .meta(&name)
                    .ok()
                    .flatten()
                    .is_some_and(|m| !chock_beneath::is_whiteout(&dir, &name, &m));
                if let (true, Some(n)) = (shown, name.to_str()) {
                    out.push(n.to_string());
                }
            }
            if chock_beneath::is_opaque(&dir) {
                break;
            }
        }
        out
    }
}

/// `path` with `.` and `..` taken lexically; `None` unless absolute.
fn normalize(path: &str) -> Option<PathBuf> {
    let mut out = PathBuf::from("/");
    for c in Path::new(path).components() {
        match c {
            Component::RootDir => {}
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
            Component::Prefix(_) => return None,
        }
    }
    path.starts_with('/').then_some(out)
}

/// A path of the system's `/usr`, which a guest sees read-only from the host, read on the host.
fn system(path: &str) -> Option<PathBuf> {
    let normal = normalize(path)?;
    normal.starts_with("/usr").then_some(normal)
}

impl CallFiles {
    /// The bytes of the file at `path` (absolute in the call), if the host can read it.
    pub(crate) fn read(&self, path: &str) -> Option<Vec<u8>> {
        match self {
            CallFiles::Root(root) => std::fs::read(super::handler::inside(root, path)).ok(),
            CallFiles::Guest(view) if view.holds(path) => view.read(path),
            CallFiles::Guest(_) => std::fs::read(system(path)?).ok(),
        }
    }

    /// The file at `path` as text.
    pub(crate) fn read_string(&self, path: &str) -> Option<String> {
        String::from_utf8(self.read(path)?).ok()
    }

    /// Whether `path` is a directory.
    pub(crate) fn is_dir(&self, path: &str) -> bool {
        match self {
            CallFiles::Root(root) => super::handler::inside(root, path).is_dir(),
            CallFiles::Guest(view) if view.holds(path) => view.is_dir(path),
            CallFiles::Guest(_) => system(path).is_some_and(|p| p.is_dir()),
        }
    }

    /// The names in the directory at `path`.
    pub(crate) fn names(&self, path: &str) -> Vec<String> {
        let list = |dir: PathBuf| -> Vec<String> {
            std::fs::read_dir(dir)
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|e| e.file_name().to_str().map(str::to_string))
                .collect()
        };
        match self {
            CallFiles::Root(root) => list(super::handler::inside(root, path)),
            CallFiles::Guest(view) if view.holds(path) => view.names(path),
            CallFiles::Guest(_) => system(path).map(list).unwrap_or_default(),
        }
    }
}
