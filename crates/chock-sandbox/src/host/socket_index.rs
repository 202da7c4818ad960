//! The session-long index of host unix sockets under declared `[sandbox]` write paths.
//!
//! Every call masks the host sockets under its declared write paths and read files
//! (`socket_mask.rs`; read directories are overlays and need no mask, `read_overlay.rs`).
//! Walking a tree for them costs about 1 µs per entry, ~100 ms per call for a 120,000-entry
//! cache: ten times the rest of the sandbox. A session's declared paths do not change, so
//! the session keeps one [`SocketIndex`]: each declared directory is walked once, at the first
//! call that declares it, with an inotify watch on every directory in it, and each later call
//! only reads the events that arrived since (one `read` when nothing changed), lists again the
//! directories they name, and hands the current sockets to the mount builder.
//!
//! A socket a host process binds after the index was read is therefore masked from the next call
//! on, in a directory made later too (its creation is an event in its parent; it is watched, then
//! listed). Nothing here can mask a socket inside a call whose tree is already built: that window
//! (from a call's setup to its `connect`) is the one the per-call walk had, and docs/sandbox.md
//! says what stands there.
//!
//! When the index cannot be kept (no inotify instance, a watch that cannot be added: the user's
//! `fs.inotify.max_user_watches`), it says so ([`SocketIndex::watching`]) and walks every declared
//! path on every call, as a call without a session does: slower, never partial (rule 1). A queue
//! overflow (events lost) throws the index away and walks again.

use std::mem::MaybeUninit;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rustix::fs::inotify::{ReadFlags, Reader};
use rustix::io::Errno;

use std::os::unix::ffi::OsStrExt;

use crate::host::mounts::builder::Builder;
use crate::host::socket_mask::{MASK_SOURCE, WALK_LIMIT, sockets_under, walk};
use crate::host::socket_tree::{Failure, Tree, Watcher};
use crate::wire::error::Layer;
use crate::wire::error::SandboxError;
use crate::wire::mount_ops::{Op, cstr};

/// The host sockets under a session's declared paths, kept current between calls. Make one per
/// session and pass it to every call ([`crate::spawn_in_session`]); it is shared by calls that
/// run at the same time.
pub struct SocketIndex {
    inner: Mutex<Inner>,
    /// The session's sandbox, built at its second call (`session_sandbox.rs`): kept here because
    /// this is the one object a session hands every call.
    sandbox: crate::host::session_init::Slot,
}

struct Inner {
    /// `None`: the index could not be kept; every call walks.
    watcher: Option<Watcher>,
    /// Why it could not, when it could not.
    degraded: Option<String>,
    trees: Vec<Tree>,
    limit: usize,
}

impl std::fmt::Debug for SocketIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never waits: a call may be reading the index on this thread's behalf.
        let Ok(inner) = self.inner.try_lock() else {
            return f.write_str("SocketIndex { .. }");
        };
        f.debug_struct("SocketIndex")
            .field(
                "roots",
                &inner.trees.iter().map(|t| &t.root).collect::<Vec<_>>(),
            )
            .field("degraded", &inner.degraded)
            .finish()
    }
}

impl Default for SocketIndex {
    fn default() -> Self {
        Self::new()
    }
}

impl SocketIndex {
    /// An empty index: nothing is walked until a call names its declared paths.
    pub fn new() -> SocketIndex {
        Self::with_limit(WALK_LIMIT)
    }

    pub(crate) fn with_limit(limit: usize) -> SocketIndex {
        let (watcher, degraded) = match Watcher::new() {
            Ok(w) => (Some(w), None),
            Err(e) => (None, Some(format!("no inotify instance: {e}"))),
        };
        SocketIndex {
            inner: Mutex::new(Inner {
                watcher,
                degraded,
                trees: Vec::new(),
                limit,
            }),
            sandbox: crate::host::session_init::Slot::default(),
        }
    }

    /// Whether the index is kept current by inotify. `false`: every call walks its declared
    /// paths ([`SocketIndex::degraded`] says why).
    pub fn watching(&self) -> bool {
        self.lock().watcher.is_some()
    }

    /// Why the index is not kept current by inotify, when it is not.
    pub fn degraded(&self) -> Option<String> {
        self.lock().degraded.clone()
    }

    pub(crate) fn session_slot(&self) -> &crate::host::session_init::Slot {
        &self.sandbox
    }

    /// The host pid of the session's sandbox init (pid 1 of the namespaces its calls are forked
    /// in), when one runs. For tests and diagnostics: killing it kills every running call of the
    /// session, and the next call builds a new one.
    #[doc(hidden)]
    pub fn session_init_pid(&self) -> Option<u32> {
        self.sandbox.init_pid()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while the index was changed may have left it half-updated: start it again.
        self.inner.lock().unwrap_or_else(|poisoned| {
            let mut inner = poisoned.into_inner();
            inner.reset();
            self.inner.clear_poison();
            inner
        })
    }

    /// The sockets under each of `roots` (host paths, symlinks resolved), as they are now: the
    /// events since the last call are read first.
    pub(crate) fn sockets(&self, roots: &[PathBuf]) -> Result<Vec<Vec<PathBuf>>, SandboxError> {
        let mut inner = self.lock();
        inner.refresh();
        roots.iter().map(|r| inner.sockets_of(r)).collect()
    }
}

impl Inner {
    /// Throws every tree away (a fresh inotify instance drops every watch with the old one).
    fn reset(&mut self) {
        self.trees.clear();
        if self.watcher.is_some() {
            match Watcher::new() {
                Ok(w) => self.watcher = Some(w),
                Err(e) => self.degrade(format!("no inotify instance: {e}")),
            }
        }
    }

    fn degrade(&mut self, why: String) {
        self.watcher = None;
        self.trees.clear();
        self.degraded = Some(why);
    }

    /// Reads the pending events and brings every tree up to date. A tree that cannot be is
    /// dropped: the next call that names its root walks it again (and fails, if it still cannot
    /// be checked).
    fn refresh(&mut self) {
        let Some(w) = self.watcher.as_mut() else {
            return;
        };
        let events = match read_events(w) {
            Ok(events) => events,
            Err(overflow) => {
                if overflow {
                    self.reset();
                } else {
                    self.degrade("the inotify instance cannot be read".into());
                }
                return;
            }
        };
        for (wd, flags) in events {
            if flags.contains(ReadFlags::IGNORED) {
                for (root, dir) in w.wds.remove(&wd).unwrap_or_default() {
                    if let Some(t) = self.trees.iter_mut().find(|t| t.root == root) {
                        t.lost(w, &dir);
                    }
                }
                continue;
            }
            let changed = flags.intersects(
                ReadFlags::CREATE | ReadFlags::DELETE | ReadFlags::MOVED_FROM | ReadFlags::MOVED_TO,
            ) || flags.contains(ReadFlags::ATTRIB | ReadFlags::ISDIR);
            let moved_self = flags.intersects(ReadFlags::DELETE_SELF | ReadFlags::MOVE_SELF);
            for (root, dir) in w.wds.get(&wd).into_iter().flatten() {
                let Some(t) = self.trees.iter_mut().find(|t| t.root == *root) else {
                    continue;
                };
                if changed {
                    t.dirty.insert(dir.clone());
                }
                if moved_self {
                    match dir.parent() {
                        Some(parent) if dir != root => {
                            t.dirty.insert(parent.to_path_buf());
                        }
                        _ => t.stale = true,
                    }
                }
            }
        }
        let mut keep = Vec::with_capacity(self.trees.len());
        for mut t in std::mem::take(&mut self.trees) {
            match t.refresh(w) {
                Ok(()) => keep.push(t),
                Err(Failure::Watch(why)) => {
                    self.degrade(why);
                    return;
                }
                Err(Failure::Stale | Failure::Check(_)) => t.clear(w),
            }
        }
        self.trees = keep;
    }

    /// The sockets under `root` (or `root` itself), from its tree; walked (and watched) first
    /// when it has none.
    fn sockets_of(&mut self, root: &Path) -> Result<Vec<PathBuf>, SandboxError> {
        use std::os::unix::fs::FileTypeExt;
        let kind = std::fs::symlink_metadata(root).map(|m| m.file_type());
        if !kind.as_ref().is_ok_and(std::fs::FileType::is_dir) {
            // Not a directory (a socket, a file, nothing): one `lstat` is the whole walk.
            if let Some(i) = self.trees.iter().position(|t| t.root == root) {
                let mut gone = self.trees.swap_remove(i);
                if let Some(w) = self.watcher.as_mut() {
                    gone.clear(w);
                }
            }
            return Ok(match kind {
                Ok(k) if k.is_socket() => vec![root.to_path_buf()],
                _ => Vec::new(),
            });
        }
        if let Some(t) = self.trees.iter_mut().find(|t| t.root == root) {
            return Ok(t.sockets());
        }
        let Some(w) = self.watcher.as_mut() else {
            return walk(root, self.limit);
        };
        match Tree::walk(w, root, self.limit) {
            Ok(Some(mut t)) => {
                let found = t.sockets();
                self.trees.push(t);
                Ok(found)
            }
            Ok(None) => Ok(Vec::new()),
            Err(Failure::Check(e)) => Err(e),
            Err(Failure::Stale) => walk(root, self.limit),
            Err(Failure::Watch(why)) => {
                self.degrade(why);
                walk(root, self.limit)
            }
        }
    }
}

/// Every pending event as (watch, what happened), until the queue is empty. `Err(true)`: the
/// queue overflowed and events were lost; `Err(false)`: the instance cannot be read.
fn read_events(w: &Watcher) -> Result<Vec<(i32, ReadFlags)>, bool> {
    let mut buf = vec![MaybeUninit::<u8>::uninit(); 64 * 1024];
    let mut reader = Reader::new(&w.fd, &mut buf);
    let mut out = Vec::new();
    loop {
        match reader.next() {
            Ok(ev) => {
                if ev.events().contains(ReadFlags::QUEUE_OVERFLOW) {
                    return Err(true);
                }
                out.push((ev.wd(), ev.events()));
            }
            Err(Errno::AGAIN) => return Ok(out),
            Err(Errno::INTR) => {}
            Err(_) => return Err(false),
        }
    }
}

/// Mask steps for the sockets under each declared path in `declared` (host paths, which are also
/// their targets), from the session's `index` when there is one, else walked now. A socket that
/// lies under another, deeper mount target is skipped: that mount hides it (and is walked itself
/// when it is a declared path). Returns how many were masked.
pub(crate) fn push_masks(
    b: &mut Builder,
    declared: &[PathBuf],
    targets: &[PathBuf],
    index: Option<&SocketIndex>,
) -> Result<usize, SandboxError> {
    let found = match index {
        Some(index) => index.sockets(declared)?,
        None => declared
            .iter()
            .map(|root| sockets_under(root))
            .collect::<Result<Vec<_>, _>>()?,
    };
    let mut sockets = Vec::new();
    for (root, under) in declared.iter().zip(found) {
        for s in under {
            let hidden = targets
                .iter()
                .any(|t| t != root && t.starts_with(root) && s.starts_with(t));
            if !hidden && !sockets.contains(&s) {
                sockets.push(s);
            }
        }
    }
    if sockets.is_empty() {
        return Ok(0);
    }
    let fs = Layer::Filesystem;
    let source = cstr(MASK_SOURCE)?;
    b.push(
        Op::Touch {
            path: source.clone(),
        },
        fs,
        format!("create {MASK_SOURCE}"),
    );
    for s in &sockets {
        let op = Op::Bind {
            source: source.clone(),
            target: cstr(s.as_os_str().as_bytes())?,
            readonly: true,
            devices: false,
        };
        b.push(op, fs, format!("mask host socket {}", s.display()));
    }
    b.push(
        Op::Unlink { path: source },
        fs,
        format!("remove {MASK_SOURCE}"),
    );
    Ok(sockets.len())
}

#[cfg(test)]
mod tests;
