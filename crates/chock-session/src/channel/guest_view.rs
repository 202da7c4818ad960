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
/// directories that show it, the top layer first; and the places the call can write that the
/// host does not see (its home, `/tmp`, `/dev`, `/proc`'s links into the call, the declared
/// write paths).
#[derive(Debug, Clone)]
pub(crate) struct GuestView {
    project: PathBuf,
    layers: Vec<PathBuf>,
    unseen: Vec<PathBuf>,
}

impl GuestView {
    /// The view of `plan`'s call.
    pub(crate) fn new(plan: &chock_sandbox::Plan) -> GuestView {
        let layers = match &plan.workspace {
            WorkspaceMount::Bind { source } | WorkspaceMount::ReadOnly { source } => {
                vec![source.clone()]
            }
            WorkspaceMount::Overlay { lower, upper, .. } => vec![upper.clone(), lower.clone()],
        };
        let mut unseen: Vec<PathBuf> = ["/tmp", "/dev", "/proc"].map(PathBuf::from).into();
        unseen.push(plan.home.clone());
        unseen.extend(plan.extra_write.iter().cloned());
        GuestView {
            project: plan.project_path.clone(),
            layers,
            unseen,
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

    /// The names in the directory at `path`, every layer's, less what a layer above hides with
    /// a whiteout; `None` when the walk meets a symbolic link (it may lead anywhere in the
    /// guest) or anything else it cannot read.
    fn names(&self, path: &str) -> Option<Vec<String>> {
        let rel = self.relative(path)?;
        let mut seen = std::collections::BTreeSet::new();
        let mut out = Vec::new();
        for layer in &self.layers {
            let root = Dir::open_root(layer).ok()?;
            let dir = match root.open_dir(&rel, false) {
                Ok(dir) => dir,
                Err(chock_beneath::WalkError::Missing { .. }) => continue,
                Err(_) => return None,
            };
            for name in dir.names().ok()? {
                let whiteout = dir
                    .meta(&name)
                    .ok()
                    .flatten()
                    .is_some_and(|m| chock_beneath::is_whiteout(&dir, &name, &m));
                if seen.insert(name.clone())
                    && !whiteout
                    && let Some(n) = name.to_str()
                {
                    out.push(n.to_string());
                }
            }
            if chock_beneath::is_opaque(&dir) {
                break;
            }
        }
        Some(out)
    }

    /// Whether `path` lies where the call can write and the host cannot see.
    fn unseen(&self, path: &str) -> bool {
        normalize(path).is_none_or(|p| self.unseen.iter().any(|u| p.starts_with(u)))
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

/// A path of the system's `/usr`, which a guest sees read-only from the host, read on the host;
/// `/bin`, `/sbin`, `/lib` and `/lib64` are the guest's merged-`/usr` links into it.
fn system(path: &str) -> Option<PathBuf> {
    let normal = normalize(path)?;
    if normal.starts_with("/usr") {
        return Some(normal);
    }
    ["bin", "sbin", "lib", "lib64"].into_iter().find_map(|top| {
        let rest = normal.strip_prefix(Path::new("/").join(top)).ok()?;
        Some(Path::new("/usr").join(top).join(rest))
    })
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

    /// The names in the directory at `path`; `None` when the host cannot see that directory (a
    /// guest's `/tmp` or home, or a symbolic link in its workspace). Elsewhere a guest's call
    /// sees only what the host shows it read-only (`/usr`, declared read paths) or nothing, so
    /// the host lists its own directory at that path: a name too many is only more caution.
    pub(crate) fn names(&self, path: &str) -> Option<Vec<String>> {
        let list = |dir: PathBuf| -> Vec<String> {
            std::fs::read_dir(dir)
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|e| e.file_name().to_str().map(str::to_string))
                .collect()
        };
        match self {
            CallFiles::Root(root) => Some(list(super::handler::inside(root, path))),
            CallFiles::Guest(view) if view.holds(path) => view.names(path),
            CallFiles::Guest(view) if view.unseen(path) => None,
            CallFiles::Guest(_) => Some(list(system(path).unwrap_or_else(|| PathBuf::from(path)))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A project at `/p` in the call, shown by an upper layer over a lower one.
    fn layered() -> (tempfile::TempDir, CallFiles) {
        let t = tempfile::tempdir().unwrap();
        let (upper, lower) = (t.path().join("upper"), t.path().join("lower"));
        for d in [&upper, &lower] {
            std::fs::create_dir_all(d.join(".git")).unwrap();
            std::fs::create_dir_all(d.join("bin")).unwrap();
        }
        std::fs::write(lower.join(".git/config"), "lower").unwrap();
        std::fs::write(upper.join(".git/config"), "upper").unwrap();
        std::fs::write(lower.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(lower.join(".git/commondir"), "..").unwrap();
        std::fs::write(lower.join("bin/git-kept"), "").unwrap();
        std::fs::write(lower.join("bin/git-gone"), "").unwrap();
        std::fs::write(upper.join("bin/git-new"), "").unwrap();
        let up = Dir::open_root(&upper).unwrap();
        let git = up.child(OsStr::new(".git")).unwrap();
        git.make_whiteout(OsStr::new("commondir")).unwrap();
        up.child(OsStr::new("bin"))
            .unwrap()
            .make_whiteout(OsStr::new("git-gone"))
            .unwrap();
        // A symbolic link out of the workspace, as a file and as a directory on the way.
        git.make_symlink(OsStr::new("HEAD"), OsStr::new("/etc/hostname"))
            .unwrap();
        up.make_symlink(OsStr::new("etc"), OsStr::new("/etc"))
            .unwrap();
        let plan = chock_sandbox::Plan::builder(
            vec!["true".into()],
            WorkspaceMount::Overlay {
                lower,
                upper,
                work: t.path().join("work"),
            },
            PathBuf::from("/p"),
        )
        .home(PathBuf::from("/home/call"))
        .build();
        let view = GuestView::new(&plan);
        (t, CallFiles::Guest(view))
    }

    use std::ffi::OsStr;

    #[test]
    fn the_upper_layer_wins_and_a_whiteout_hides() {
        let (_t, files) = layered();
        assert_eq!(
            files.read_string("/p/.git/config").as_deref(),
            Some("upper")
        );
        assert_eq!(
            files.read_string("/p/sub/../.git/config").as_deref(),
            Some("upper")
        );
        assert_eq!(files.read("/p/.git/commondir"), None);
        assert!(files.is_dir("/p/.git") && files.is_dir("/p"));
        let mut names = files.names("/p/bin").unwrap();
        names.sort();
        assert_eq!(names, ["git-kept", "git-new"]);
    }

    #[test]
    fn nothing_outside_the_workspace_is_read_but_the_system_usr() {
        let (_t, files) = layered();
        // A symbolic link is not followed, as the file or on the way to it.
        assert_eq!(files.read("/p/.git/HEAD"), None);
        assert_eq!(files.read("/p/etc/hostname"), None);
        assert!(!files.is_dir("/p/etc"));
        // A path outside the workspace, however it is spelt.
        assert_eq!(files.read("/etc/hostname"), None);
        assert_eq!(files.read("/p/../etc/hostname"), None);
        // Where the call writes and the host does not see, or through a link: nothing is known.
        for unseen in [
            "/tmp/bin",
            "/home/call/bin",
            "/proc/self/cwd",
            "/p/etc",
            "p/bin",
        ] {
            assert_eq!(files.names(unseen), None, "{unseen}");
        }
        // Elsewhere the call sees only what the host shows it: the host's own listing.
        assert!(files.names("/bin").is_some_and(|n| !n.is_empty()));
        assert_eq!(files.names("/nonexistent/bin"), Some(Vec::new()));
        assert_eq!(files.read("p/.git/config"), None);
        // The system's /usr, which the guest sees from the host, is read.
        assert!(files.is_dir("/usr/bin"));
        let CallFiles::Guest(view) = &files else {
            unreachable!()
        };
        assert!(view.holds("/p/sub") && !view.holds("/tmp") && !view.holds("/p/../tmp"));
    }
}
