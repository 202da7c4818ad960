//! One declared directory of a [`crate::SocketIndex`]: every directory under it with its inotify
//! watch, its inode, how many entries it holds and which of them are unix sockets.
//!
//! Why it re-lists a changed directory rather than applying events one by one: a directory's
//! listing, taken after its watch exists, is the truth at that moment whatever order events
//! arrived in (a name made and removed, a rename pair split across two reads, a directory swapped
//! for another under the same name). An event only says *which* directory to look at again, so a
//! lost or misread event can make the index stale for one call at most, never for good.
//!
//! The walk keeps the per-call walk's rules (`socket_mask.rs`): no symlink followed (every open
//! is `O_NOFOLLOW`, relative to the parent's descriptor while walking), no other filesystem
//! entered, at most [`crate::host::socket_mask::WALK_LIMIT`] entries, and a directory that cannot be
//! listed but could be passed through fails the call naming it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::{CStr, OsStr, OsString};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::inotify::{self, WatchFlags};
use rustix::fs::{AtFlags, Dir as DirStream, FileType, Mode, OFlags};
use rustix::io::Errno;

use crate::host::socket_mask::{too_large, unreadable};
use crate::wire::error::SandboxError;

/// Why a tree could not be kept.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The declared path cannot be checked (too large, a directory that cannot be listed): the
    /// call fails with this error.
    Check(SandboxError),
    /// A watch could not be added (`max_user_watches`, memory, no `/proc`): the index cannot be
    /// kept current and the caller walks every call instead.
    Watch(String),
    /// The declared directory itself is gone or was replaced: walk it again.
    Stale,
}

/// What every directory is watched for: any change of its entries (a socket bound, a directory
/// made, renamed or removed), a subdirectory's permissions (it may have become listable), and the
/// directory itself going away. `ONLYDIR`: the descriptor named must still be a directory.
fn watch_mask() -> WatchFlags {
    WatchFlags::CREATE
        | WatchFlags::DELETE
        | WatchFlags::MOVED_FROM
        | WatchFlags::MOVED_TO
        | WatchFlags::ATTRIB
        | WatchFlags::DELETE_SELF
        | WatchFlags::MOVE_SELF
        | WatchFlags::ONLYDIR
}

/// The session's inotify instance and which directories of which trees each watch stands for
/// (one inode can be reached from two declared paths, and one watch descriptor then serves both).
#[derive(Debug)]
pub(crate) struct Watcher {
    pub(crate) fd: OwnedFd,
    pub(crate) wds: HashMap<i32, Vec<(PathBuf, PathBuf)>>,
}

impl Watcher {
    pub(crate) fn new() -> Result<Watcher, Errno> {
        let fd = inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK)?;
        Ok(Watcher {
            fd,
            wds: HashMap::new(),
        })
    }

    /// Watches the directory open at `fd` (named through `/proc/self/fd`, so the watch is on
    /// exactly the inode that is listed, whatever the path names by now).
    fn watch(&mut self, root: &Path, dir: &Path, fd: BorrowedFd<'_>) -> Result<i32, Failure> {
        let by_fd = format!("/proc/self/fd/{}", fd.as_raw_fd());
        let wd = inotify::add_watch(&self.fd, by_fd.as_str(), watch_mask()).map_err(|e| {
            Failure::Watch(format!(
                "{} cannot be watched for new sockets: {e}",
                dir.display()
            ))
        })?;
        self.wds
            .entry(wd)
            .or_default()
            .push((root.to_path_buf(), dir.to_path_buf()));
        Ok(wd)
    }

    /// `dir` of `root` no longer needs `wd`; the watch goes when nothing else uses it.
    fn release(&mut self, root: &Path, dir: &Path, wd: i32) {
        let Some(users) = self.wds.get_mut(&wd) else {
            return;
        };
        users.retain(|(r, d)| !(r == root && d == dir));
        if users.is_empty() {
            self.wds.remove(&wd);
            // The kernel may have dropped it already (the directory was removed): EINVAL then.
            let _ = inotify::remove_watch(&self.fd, wd);
        }
    }
}

/// One watched directory.
#[derive(Debug)]
struct Dir {
    wd: i32,
    ino: u64,
    /// Its entries (what counts against the walk limit).
    entries: usize,
    /// The names of the unix sockets in it.
    sockets: Vec<OsString>,
}

/// A directory being listed during a walk.
struct Frame {
    path: PathBuf,
    stream: DirStream,
    entries: usize,
    sockets: Vec<OsString>,
}

/// One declared directory and everything under it on its filesystem.
#[derive(Debug)]
pub(crate) struct Tree {
    pub(crate) root: PathBuf,
    dev: u64,
    ino: u64,
    limit: usize,
    dirs: BTreeMap<PathBuf, Dir>,
    entries: usize,
    /// Directories to list again at the next refresh (an event named them).
    pub(crate) dirty: BTreeSet<PathBuf>,
    /// The root itself was moved or removed: check it at the next refresh.
    pub(crate) stale: bool,
    cached: Option<Vec<PathBuf>>,
}

const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

fn io(e: Errno) -> std::io::Error {
    std::io::Error::from_raw_os_error(e.raw_os_error())
}

fn os(name: &CStr) -> &OsStr {
    OsStr::from_bytes(name.to_bytes())
}

/// Whether a directory that cannot be listed can still be passed through (a socket in it would
/// be reachable by name).
fn searchable<P: rustix::path::Arg>(dirfd: BorrowedFd<'_>, name: P) -> bool {
    rustix::fs::accessat(dirfd, name, rustix::fs::Access::EXEC_OK, AtFlags::empty()).is_ok()
}

impl Tree {
    /// Walks `root` (a directory, by the caller's `lstat`) and watches every directory in it.
    /// `None`: there is nothing to index (it vanished, or can be neither listed nor passed).
    pub(crate) fn walk(
        w: &mut Watcher,
        root: &Path,
        limit: usize,
    ) -> Result<Option<Tree>, Failure> {
        let fd = match rustix::fs::open(root, DIR_FLAGS, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NOENT | Errno::NOTDIR | Errno::LOOP) => return Ok(None),
            Err(e) => {
                if searchable(rustix::fs::CWD, root) {
                    return Err(Failure::Check(unreadable(root, &io(e))));
                }
                return Ok(None);
            }
        };
        let st = rustix::fs::fstat(&fd).map_err(|e| Failure::Check(unreadable(root, &io(e))))?;
        let mut tree = Tree {
            root: root.to_path_buf(),
            dev: st.st_dev,
            ino: st.st_ino,
            limit,
            dirs: BTreeMap::new(),
            entries: 0,
            dirty: BTreeSet::new(),
            stale: false,
            cached: None,
        };
        if let Err(e) = tree.descend(w, root.to_path_buf(), fd, st.st_ino) {
            tree.clear(w);
            return Err(e);
        }
        Ok(Some(tree))
    }

    /// Every socket under the root, as host paths.
    pub(crate) fn sockets(&mut self) -> Vec<PathBuf> {
        self.cached
            .get_or_insert_with(|| {
                self.dirs
                    .iter()
                    .flat_map(|(dir, d)| d.sockets.iter().map(|s| dir.join(s)))
                    .collect()
            })
            .clone()
    }

    /// Removes every watch of the tree.
    pub(crate) fn clear(&mut self, w: &mut Watcher) {
        for (path, d) in std::mem::take(&mut self.dirs) {
            w.release(&self.root, &path, d.wd);
        }
        self.entries = 0;
        self.cached = None;
    }

    /// The kernel dropped the watch of `dir` (it was removed, or its filesystem unmounted): forget
    /// it and what is under it, and look at its parent again.
    pub(crate) fn lost(&mut self, w: &mut Watcher, dir: &Path) {
        self.drop_subtree(w, dir);
        match dir.parent() {
            Some(parent) if dir != self.root => {
                self.dirty.insert(parent.to_path_buf());
            }
            _ => self.stale = true,
        }
    }

    /// Brings the tree up to date: the root must still be the directory that was walked, and
    /// every directory an event named is listed again.
    pub(crate) fn refresh(&mut self, w: &mut Watcher) -> Result<(), Failure> {
        use std::os::unix::fs::MetadataExt;
        let same_root = std::fs::symlink_metadata(&self.root)
            .is_ok_and(|m| m.is_dir() && m.dev() == self.dev && m.ino() == self.ino);
        if self.stale || !same_root || !self.dirs.contains_key(&self.root) {
            return Err(Failure::Stale);
        }
        while let Some(dir) = self.dirty.pop_first() {
            self.relist(w, dir)?;
        }
        if self.dirs.contains_key(&self.root) {
            Ok(())
        } else {
            Err(Failure::Stale)
        }
    }

    /// Starts watching and listing the directory open at `fd`.
    fn enter(
        &mut self,
        w: &mut Watcher,
        path: PathBuf,
        fd: OwnedFd,
        ino: u64,
    ) -> Result<Frame, Failure> {
        // The watch comes first: a name made after it is in the listing or in an event.
        let wd = w.watch(&self.root, &path, fd.as_fd())?;
        if let Some(old) = self.dirs.insert(
            path.clone(),
            Dir {
                wd,
                ino,
                entries: 0,
                sockets: Vec::new(),
            },
        ) {
            self.entries -= old.entries;
            if old.wd != wd {
                w.release(&self.root, &path, old.wd);
            }
        }
        self.cached = None;
        let stream = DirStream::new(fd).map_err(|e| Failure::Check(unreadable(&path, &io(e))))?;
        Ok(Frame {
            path,
            stream,
            entries: 0,
            sockets: Vec::new(),
        })
    }

    /// The directory `name` in the directory open at `parent`, opened without following a
    /// symlink or triggering an automount, when it is on the tree's filesystem. A directory that
    /// cannot be listed but can be passed through is an error; one that can be neither is skipped
    /// (its parent's watch reports a change of its permissions).
    fn open_child(
        &self,
        parent: BorrowedFd<'_>,
        parent_path: &Path,
        name: &CStr,
    ) -> Result<Option<(OwnedFd, u64)>, Failure> {
        let flags = AtFlags::SYMLINK_NOFOLLOW | AtFlags::NO_AUTOMOUNT;
        let Ok(st) = rustix::fs::statat(parent, name, flags) else {
            return Ok(None);
        };
        if FileType::from_raw_mode(st.st_mode) != FileType::Directory || st.st_dev != self.dev {
            return Ok(None);
        }
        let fd = match rustix::fs::openat(parent, name, DIR_FLAGS, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NOENT | Errno::NOTDIR | Errno::LOOP) => return Ok(None),
            Err(e) if searchable(parent, name) => {
                return Err(Failure::Check(unreadable(
                    &parent_path.join(os(name)),
                    &io(e),
                )));
            }
            Err(_) => return Ok(None),
        };
        match rustix::fs::fstat(&fd) {
            // Replaced between the two looks: the parent's watch has the change.
            Ok(now) if now.st_dev == self.dev && now.st_ino == st.st_ino => {
                Ok(Some((fd, st.st_ino)))
            }
            _ => Ok(None),
        }
    }

    /// Walks the directory open at `fd` and everything under it, depth first (one descriptor per
    /// level), watching each directory before it is listed.
    fn descend(
        &mut self,
        w: &mut Watcher,
        path: PathBuf,
        fd: OwnedFd,
        ino: u64,
    ) -> Result<(), Failure> {
        let mut stack = vec![self.enter(w, path, fd, ino)?];
        while let Some(top) = stack.last_mut() {
            let entry = match top.stream.read() {
                None => {
                    let done = stack.pop().expect("the frame just read");
                    if let Some(d) = self.dirs.get_mut(&done.path) {
                        d.entries = done.entries;
                        d.sockets = done.sockets;
                    }
                    continue;
                }
                Some(Err(e)) => return Err(Failure::Check(unreadable(&top.path, &io(e)))),
                Some(Ok(entry)) => entry,
            };
            let name = entry.file_name();
            if name == c"." || name == c".." {
                continue;
            }
            top.entries += 1;
            self.entries += 1;
            if self.entries > self.limit {
                return Err(Failure::Check(too_large(&self.root, self.limit)));
            }
            let parent = top
                .stream
                .fd()
                .map_err(|e| Failure::Check(unreadable(&top.path, &io(e))))?;
            match kind(parent, name, entry.file_type()) {
                FileType::Socket => top.sockets.push(os(name).to_owned()),
                FileType::Directory => {
                    if let Some((fd, ino)) = self.open_child(parent, &top.path, name)? {
                        let child = top.path.join(os(name));
                        let frame = self.enter(w, child, fd, ino)?;
                        stack.push(frame);
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Lists `path` again: its sockets and entry count are replaced, a new (or replaced)
    /// subdirectory is walked, a subdirectory no longer there is forgotten with its tree.
    fn relist(&mut self, w: &mut Watcher, path: PathBuf) -> Result<(), Failure> {
        let Some(known_ino) = self.dirs.get(&path).map(|d| d.ino) else {
            return Ok(()); // forgotten since the event
        };
        let fd = match rustix::fs::open(&path, DIR_FLAGS, Mode::empty()) {
            Ok(fd) => fd,
            Err(e) => {
                if !matches!(e, Errno::NOENT | Errno::NOTDIR | Errno::LOOP)
                    && searchable(rustix::fs::CWD, path.as_path())
                {
                    return Err(Failure::Check(unreadable(&path, &io(e))));
                }
                // Gone, or no longer reachable: its parent's event says what is there now.
                self.drop_subtree(w, &path);
                return Ok(());
            }
        };
        let st = rustix::fs::fstat(&fd).map_err(|e| Failure::Check(unreadable(&path, &io(e))))?;
        if st.st_dev != self.dev || st.st_ino != known_ino {
            // Another directory under the same name: forget the old one, walk this one.
            self.drop_subtree(w, &path);
            if st.st_dev == self.dev {
                self.descend(w, path, fd, st.st_ino)?;
            }
            return Ok(());
        }
        let mut stream =
            DirStream::new(fd).map_err(|e| Failure::Check(unreadable(&path, &io(e))))?;
        let (mut entries, mut sockets, mut seen) = (0usize, Vec::new(), BTreeSet::new());
        let old_entries = self.dirs.get(&path).map_or(0, |d| d.entries);
        while let Some(entry) = stream.read() {
            let entry = entry.map_err(|e| Failure::Check(unreadable(&path, &io(e))))?;
            let name = entry.file_name();
            if name == c"." || name == c".." {
                continue;
            }
            entries += 1;
            if self.entries - old_entries + entries > self.limit {
                return Err(Failure::Check(too_large(&self.root, self.limit)));
            }
            let parent = stream
                .fd()
                .map_err(|e| Failure::Check(unreadable(&path, &io(e))))?;
            match kind(parent, name, entry.file_type()) {
                FileType::Socket => sockets.push(os(name).to_owned()),
                FileType::Directory => {
                    let child = path.join(os(name));
                    let flags = AtFlags::SYMLINK_NOFOLLOW | AtFlags::NO_AUTOMOUNT;
                    let same = rustix::fs::statat(parent, name, flags).is_ok_and(|s| {
                        self.dirs.get(&child).is_some_and(|d| d.ino == s.st_ino)
                            && s.st_dev == self.dev
                    });
                    if same {
                        seen.insert(child);
                        continue;
                    }
                    self.drop_subtree(w, &child);
                    if let Some((fd, ino)) = self.open_child(parent, &path, name)? {
                        self.descend(w, child.clone(), fd, ino)?;
                        seen.insert(child);
                    }
                }
                _ => {}
            }
        }
        let gone: Vec<PathBuf> = self
            .dirs
            .range(path.clone()..)
            .skip(1)
            .take_while(|(k, _)| k.starts_with(&path))
            .filter(|(k, _)| k.parent() == Some(path.as_path()) && !seen.contains(*k))
            .map(|(k, _)| k.clone())
            .collect();
        for child in gone {
            self.drop_subtree(w, &child);
        }
        if let Some(d) = self.dirs.get_mut(&path) {
            self.entries = self.entries - d.entries + entries;
            d.entries = entries;
            d.sockets = sockets;
        }
        self.cached = None;
        if self.entries > self.limit {
            return Err(Failure::Check(too_large(&self.root, self.limit)));
        }
        Ok(())
    }

    /// Forgets `path` and every directory under it, with their watches.
    fn drop_subtree(&mut self, w: &mut Watcher, path: &Path) {
        let under: Vec<PathBuf> = self
            .dirs
            .range(path.to_path_buf()..)
            .take_while(|(k, _)| k.starts_with(path))
            .map(|(k, _)| k.clone())
            .collect();
        for k in under {
            if let Some(d) = self.dirs.remove(&k) {
                self.entries -= d.entries;
                w.release(&self.root, &k, d.wd);
            }
            self.dirty.remove(&k);
        }
        self.cached = None;
    }
}

/// An entry's type: the directory entry's, or `lstat`'s where the filesystem does not say.
fn kind(parent: BorrowedFd<'_>, name: &CStr, listed: FileType) -> FileType {
    if listed != FileType::Unknown {
        return listed;
    }
    rustix::fs::statat(parent, name, AtFlags::SYMLINK_NOFOLLOW)
        .map_or(FileType::Unknown, |st| FileType::from_raw_mode(st.st_mode))
}
