//! The host's view of a session's workspace, for the file tools.
//!
//! The file tools (read_file, write_file, edit_file, list, glob, grep) run on the host, not in the sandbox:
//! they are plain data operations on the workspace copy, decided as `fs.read` / `fs.write`. They must see
//! exactly what a command in the sandbox sees at the project's path, so this view knows both backings:
//!
//! - a directory the sandbox binds at the project path (`Direct`): the view is that directory;
//! - an overlay (`Overlay`): the merged view is computed the way overlayfs computes it — the upper layer
//!   first, a whiteout (a 0/0 character device) hides the lower entry, an opaque directory
//!   (`trusted.overlay.opaque` / `user.overlay.opaque` = `y`) hides the lower directory's contents — and
//!   writes go to the upper layer only, so the real project (the lower layer) is never written.
//!
//! Every path the model gives is mapped to a path relative to the workspace root. `..` that climbs out,
//! an absolute path outside the project path, and a symlink whose target leaves the workspace are refused
//! before anything is read. The view's own look at each path and the host's
//! acts (read, list, write) walk each layer by descriptor ([`chock_beneath`], through `beneath`),
//! never following a symlink: a component a background command swaps for a symlink after the check
//! stops the look or the act instead of redirecting it out of the layer.

use std::io::ErrorKind;
use std::os::unix::ffi::OsStringExt;
use std::path::{Component, Path, PathBuf};

use chock_beneath::{Dir, FileType, is_opaque, is_whiteout};

mod beneath;
mod error;

pub use error::ViewError;

/// How many symlinks one path may pass through before it is refused as a loop.
const MAX_LINKS: usize = 40;

/// The workspace as the host reads and writes it.
#[derive(Debug, Clone)]
pub struct WorkspaceView {
    /// The path the model and the sandbox see the project at.
    project_path: PathBuf,
    backing: Backing,
}

#[derive(Debug, Clone)]
enum Backing {
    Direct { root: PathBuf },
    Overlay { lower: PathBuf, upper: PathBuf },
}

/// What kind of entry a path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (reported, not followed, by `list`).
    Symlink,
    /// Anything else (fifo, socket, device).
    Other,
}

impl WorkspaceView {
    /// A view of a directory that the sandbox binds at `project_path`.
    pub fn direct(project_path: &Path, root: &Path) -> Self {
        Self {
            project_path: project_path.to_path_buf(),
            backing: Backing::Direct {
                root: root.to_path_buf(),
            },
        }
    }

    /// A view of an overlay whose lower layer is the project and whose upper layer holds the session's writes.
    pub fn overlay(project_path: &Path, lower: &Path, upper: &Path) -> Self {
        Self {
            project_path: project_path.to_path_buf(),
            backing: Backing::Overlay {
                lower: lower.to_path_buf(),
                upper: upper.to_path_buf(),
            },
        }
    }

    /// The view of what the sandbox mounts at `project_path`.
    pub fn from_mount(project_path: &Path, mount: &chock_sandbox::WorkspaceMount) -> Self {
        match mount {
            chock_sandbox::WorkspaceMount::Bind { source }
            | chock_sandbox::WorkspaceMount::ReadOnly { source } => {
                Self::direct(project_path, source)
            }
            chock_sandbox::WorkspaceMount::Overlay { lower, upper, .. } => {
                Self::overlay(project_path, lower, upper)
            }
        }
    }

    /// The path the model sees the project at.
    pub fn project_path(&self) -> &Path {
        &self.project_path
    }

    /// Maps a path the model gave to a normalised path relative to the root, lexically (no symlinks
    /// followed). The empty path is the root.
    pub fn relative(&self, given: &str) -> Result<PathBuf, ViewError> {
        let path = Path::new(given.trim());
        let rest = if path.is_absolute() {
            path.strip_prefix(&self.project_path)
                .map_err(|_| ViewError::Outside(given.to_string()))?
        } else {
            path
        };
        normalise(rest).ok_or_else(|| ViewError::Outside(given.to_string()))
    }

    /// Resolves every symlink along `rel` inside the view; refuses one that leaves the workspace.
    pub fn resolve(&self, given: &str, rel: &Path) -> Result<PathBuf, ViewError> {
        let mut todo: Vec<PathBuf> = rel
            .components()
            .rev()
            .map(|c| PathBuf::from(c.as_os_str()))
            .collect();
        let mut done = PathBuf::new();
        let mut links = 0;
        while let Some(part) = todo.pop() {
            let candidate = done.join(&part);
            match self.entry(&candidate) {
                Some((EntryKind::Symlink, layer)) => {
                    links += 1;
                    if links > MAX_LINKS {
                        return Err(ViewError::Loop(given.to_string()));
                    }
                    let target =
                        link_target(layer, &candidate).map_err(|source| ViewError::Io {
                            path: given.to_string(),
                            source,
                        })?;
                    let base = if target.is_absolute() {
                        target
                            .strip_prefix(&self.project_path)
                            .map_err(|_| ViewError::Outside(given.to_string()))?
                            .to_path_buf()
                    } else {
                        done.join(&target)
                    };
                    let base =
                        normalise(&base).ok_or_else(|| ViewError::Outside(given.to_string()))?;
                    for c in base.components().rev() {
                        todo.push(PathBuf::from(c.as_os_str()));
                    }
                    done = PathBuf::new();
                }
                _ => done = candidate,
            }
        }
        Ok(done)
    }

    /// Maps and resolves a model's path in one step.
    pub fn locate(&self, given: &str) -> Result<PathBuf, ViewError> {
        let rel = self.relative(given)?;
        self.resolve(given, &rel)
    }

    /// What is at `rel` (not following a final symlink), and the host path that holds it. The
    /// kind is looked up by descriptor in each layer (see `entry`), so a concurrent swap never
    /// makes it describe a host path outside the layer; the host path returned is for messages.
    pub fn lstat(&self, rel: &Path) -> Option<(EntryKind, PathBuf)> {
        self.entry(rel).map(|(kind, layer)| (kind, layer.join(rel)))
    }

    /// What is at `rel`, and the layer directory (below which it is `rel`) that holds it.
    ///
    /// Walked by descriptor in each layer ([`chock_beneath::Dir`]), the way overlayfs merges them:
    /// a component swapped for a symlink by a background command ends the walk (nothing there)
    /// rather than being followed out of the layer.
    fn entry(&self, rel: &Path) -> Option<(EntryKind, &Path)> {
        let names = chock_beneath::plain_names(rel).ok()?;
        match &self.backing {
            Backing::Direct { root } => {
                let Some((last, _)) = names.split_last() else {
                    return Some((EntryKind::Dir, root.as_path()));
                };
                let dir = Dir::open_root(root).ok()?.parent(rel, false).ok()?.0;
                let meta = dir.meta(last).ok().flatten()?;
                Some((kind_of(&meta), root.as_path()))
            }
            Backing::Overlay { lower, upper } => {
                // The directory reached so far in each layer: `None` once the layer has nothing
                // there (or, for the lower one, once an opaque upper directory hides it).
                let mut up = Some(Dir::open_root(upper).ok()?);
                let mut low = Dir::open_root(lower).ok();
                for (i, name) in names.iter().enumerate() {
                    let last = i + 1 == names.len();
                    let in_upper = up
                        .as_ref()
                        .and_then(|d| d.meta(name).ok().flatten().map(|m| (d, m)));
                    if let Some((dir, meta)) = in_upper {
                        if is_whiteout(dir, name, &meta) {
                            return None;
                        }
                        if last {
                            return Some((kind_of(&meta), upper.as_path()));
                        }
                        let sub = dir.child(name).ok()?;
                        low = if is_opaque(&sub) {
                            None
                        } else {
                            low.and_then(|d| d.child(name).ok())
                        };
                        up = Some(sub);
                    } else {
                        let dir = low.as_ref()?;
                        let meta = dir.meta(name).ok().flatten()?;
                        if last {
                            return Some((kind_of(&meta), lower.as_path()));
                        }
                        low = Some(dir.child(name).ok()?);
                        up = None;
                    }
                }
                // The root itself.
                Some((EntryKind::Dir, upper.as_path()))
            }
        }
    }

    /// Reads a whole file (after resolving symlinks).
    pub fn read(&self, given: &str, rel: &Path) -> Result<Vec<u8>, ViewError> {
        match self.entry(rel) {
            Some((EntryKind::File, layer)) => {
                beneath::read(layer, rel).map_err(|source| ViewError::Io {
                    path: given.to_string(),
                    source,
                })
            }
            Some((EntryKind::Dir, _)) => Err(ViewError::Io {
                path: given.to_string(),
                source: std::io::Error::new(ErrorKind::IsADirectory, "is a directory (use list)"),
            }),
            Some(_) => Err(ViewError::Io {
                path: given.to_string(),
                source: std::io::Error::new(ErrorKind::InvalidInput, "not a regular file"),
            }),
            None => Err(ViewError::NotFound(given.to_string())),
        }
    }

    /// Writes a whole file, creating missing parent directories. In an overlay, writes the upper layer.
    pub fn write(&self, given: &str, rel: &Path, bytes: &[u8]) -> Result<(), ViewError> {
        if rel.as_os_str().is_empty() {
            return Err(ViewError::Outside(given.to_string()));
        }
        // The sandbox binds the policy file read-only over the project; the host's file tools honour
        // the same rule (rule 2), or a write here would reach the reviewed apply as a policy change
        // the agent made for itself. `rel` is resolved, so a symlink to it is caught too.
        if rel == Path::new(chock_policy::PROJECT_FILE) {
            return Err(ViewError::Policy(given.to_string()));
        }
        let io = |source| ViewError::Io {
            path: given.to_string(),
            source,
        };
        match &self.backing {
            Backing::Direct { root } => beneath::write(root, rel, bytes, true).map_err(io),
            Backing::Overlay { upper, .. } => {
                let mut prefix = PathBuf::new();
                if let Some(parent) = rel.parent() {
                    for c in parent.components() {
                        prefix.push(c.as_os_str());
                        match self.lstat(&prefix) {
                            Some((EntryKind::Dir, _)) => {}
                            Some(_) => {
                                return Err(io(std::io::Error::new(
                                    ErrorKind::NotADirectory,
                                    format!("{} is not a directory", prefix.display()),
                                )));
                            }
                            None => {
                                if whiteout_in(upper, &prefix) {
                                    return Err(ViewError::Unsupported {
                                        path: given.to_string(),
                                        reason: format!(
                                            "{} was deleted in this session; recreate it with run_command (mkdir)",
                                            prefix.display()
                                        ),
                                    });
                                }
                            }
                        }
                        beneath::open_dir(upper, &prefix, true).map_err(io)?;
                    }
                }
                if whiteout_in(upper, rel) {
                    beneath::remove(upper, rel).map_err(io)?;
                }
                beneath::write(upper, rel, bytes, false).map_err(io)
            }
        }
    }

    /// Removes a file or symlink from the merged view: in an overlay, the upper layer's copy goes
    /// and a whiteout hides what the lower layer has there. Never the policy file, never a
    /// directory; a path with nothing there is already removed.
    pub fn remove(&self, given: &str, rel: &Path) -> Result<(), ViewError> {
        if rel.as_os_str().is_empty() {
            return Err(ViewError::Outside(given.to_string()));
        }
        if rel == Path::new(chock_policy::PROJECT_FILE) {
            return Err(ViewError::Policy(given.to_string()));
        }
        let io = |source| ViewError::Io {
            path: given.to_string(),
            source,
        };
        let Some((kind, layer)) = self.entry(rel) else {
            return Ok(());
        };
        if kind == EntryKind::Dir {
            return Err(io(std::io::Error::new(
                ErrorKind::IsADirectory,
                "is a directory",
            )));
        }
        match &self.backing {
            Backing::Direct { root } => beneath::remove(root, rel).map_err(io),
            Backing::Overlay { upper, .. } => {
                if layer == upper.as_path() {
                    beneath::remove(upper, rel).map_err(io)?;
                }
                if self.entry(rel).is_some() {
                    beneath::whiteout(upper, rel).map_err(io)?;
                }
                Ok(())
            }
        }
    }

    /// The entries of a directory in the merged view, sorted by name.
    pub fn list(&self, given: &str, rel: &Path) -> Result<Vec<(String, EntryKind)>, ViewError> {
        match self.lstat(rel) {
            Some((EntryKind::Dir, _)) => {}
            Some(_) => {
                return Err(ViewError::Io {
                    path: given.to_string(),
                    source: std::io::Error::new(ErrorKind::NotADirectory, "not a directory"),
                });
            }
            None => return Err(ViewError::NotFound(given.to_string())),
        }
        let io = |source| ViewError::Io {
            path: given.to_string(),
            source,
        };
        let mut dirs = Vec::new();
        match &self.backing {
            Backing::Direct { root } => dirs.push(root.as_path()),
            Backing::Overlay { lower, upper } => {
                dirs.push(upper.as_path());
                dirs.push(lower.as_path());
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        for layer in dirs {
            let entries = match beneath::list(layer, rel) {
                Ok(entries) => entries,
                Err(err)
                    if err.kind() == ErrorKind::NotFound
                        || err.kind() == ErrorKind::NotADirectory =>
                {
                    continue;
                }
                Err(err) => return Err(io(err)),
            };
            for name in entries {
                seen.insert(name.to_string_lossy().into_owned());
            }
        }
        // Ask the merged view about each name, so whiteouts and opaque directories are honoured.
        Ok(seen
            .into_iter()
            .filter_map(|name| self.lstat(&rel.join(&name)).map(|(kind, _)| (name, kind)))
            .collect())
    }

    /// Every file under `rel` (relative paths), depth first, sorted, skipping `.git`, symlinked
    /// directories and cache directories (those holding a `CACHEDIR.TAG`). Bounded by `limit` files and
    /// `limit` directories.
    pub fn walk(&self, given: &str, rel: &Path, limit: usize) -> Result<Vec<PathBuf>, ViewError> {
        let mut out = Vec::new();
        let mut stack = vec![rel.to_path_buf()];
        // Directories count against the bound too: a tree of empty directories (cheap for a command in
        // the sandbox to make) must not keep the host walking.
        let mut dirs_seen = 0;
        while let Some(dir) = stack.pop() {
            dirs_seen += 1;
            if dirs_seen > limit {
                return Ok(out);
            }
            let entries = self.list(given, &dir)?;
            // A cache directory (Cache Directory Tagging: cargo's target/, many build tools) is build
            // output, not the project: walking it would drown every search.
            if dir != rel
                && entries
                    .iter()
                    .any(|(name, kind)| name == "CACHEDIR.TAG" && *kind == EntryKind::File)
            {
                continue;
            }
            let mut subdirs = Vec::new();
            for (name, kind) in entries {
                if name == ".git" {
                    continue;
                }
                let path = dir.join(&name);
                match kind {
                    EntryKind::Dir => subdirs.push(path),
                    EntryKind::File => {
                        out.push(path);
                        if out.len() >= limit {
                            return Ok(out);
                        }
                    }
                    _ => {}
                }
            }
            stack.extend(subdirs.into_iter().rev());
        }
        Ok(out)
    }
}

fn kind_of(meta: &chock_beneath::Meta) -> EntryKind {
    match meta.kind {
        FileType::Symlink => EntryKind::Symlink,
        FileType::Directory => EntryKind::Dir,
        FileType::RegularFile => EntryKind::File,
        _ => EntryKind::Other,
    }
}

/// The target of the symlink `rel` below `layer` (read by descriptor).
fn link_target(layer: &Path, rel: &Path) -> std::io::Result<PathBuf> {
    let (dir, name) = Dir::open_root(layer)?.parent(rel, false)?;
    let bytes = dir.read_link(name)?;
    Ok(PathBuf::from(std::ffi::OsString::from_vec(bytes)))
}

/// Whether `rel` in the upper layer is a whiteout (looked at by descriptor).
fn whiteout_in(upper: &Path, rel: &Path) -> bool {
    let Ok(root) = Dir::open_root(upper) else {
        return false;
    };
    let Ok((dir, name)) = root.parent(rel, false) else {
        return false;
    };
    dir.meta(name)
        .ok()
        .flatten()
        .is_some_and(|meta| is_whiteout(&dir, name, &meta))
}

/// Lexical normalisation that refuses to climb above the start.
fn normalise(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::Normal(part) => out.push(part),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests;
