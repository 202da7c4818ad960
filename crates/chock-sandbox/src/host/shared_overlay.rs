//! One overlay instance for the calls of a session that run at the same time.
//!
//! Two overlay mounts on one upper and work directory are undefined behaviour (the kernel warns
//! "upperdir is in-use"): each instance caches its own view, so a write made through one is not
//! reliably seen through the other, and two mounts made at once race on `work/work` (one of them
//! fails with ENOENT). So a session's calls do not mount overlays of their own. The host keeps the
//! session's overlay as a detached mount (a descriptor from `fsmount`), made by a helper process in
//! a user and mount namespace of its own (the same id map as a call's), which stays while the
//! overlay does and makes each instance on request (`child/overlay_helper.rs`); each call's init
//! attaches a clone of it at the project path (`open_tree(OPEN_TREE_CLONE)` + `move_mount`), so every
//! call that runs while it exists sees one filesystem.
//!
//! The instance lives while some call uses it: [`SharedOverlay::lease`] makes one when none exists
//! and every call holds its lease until its setup process is reaped (its mount namespace, and with
//! it the clone, is gone then). When the last lease ends the instance is unmounted (on a thread of
//! its own: the unmount's sync is nothing the call waits for; the next lease and the overlay's drop
//! wait for it), so the next call
//! gets a fresh one and sees the project as it is then: an overlay caches the lower layer's entries,
//! and a project file the user replaced (an editor's rename-over) would otherwise keep showing its old
//! content for as long as the instance lives.
//!
//! The helper names the layers to the kernel as `/proc/self/fd/N` (directories the host opened), so
//! the overlay's options, which every call can read in `/proc/self/mountinfo`, name no host path.
//!
//! A workspace that is thrown away when its session ends ([`SharedOverlay::new_volatile`]) is
//! mounted `volatile`: the overlay then never syncs its upper filesystem, and unmounting an
//! ordinary instance does (`sync_filesystem` of the whole filesystem the session directory is on,
//! every other process's dirty data included), which is the largest cost of a short call's end on
//! a busy machine.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::wire::error::{Layer, SandboxError};
use crate::wire::plan::WorkspaceMount;
use crate::wire::report::{self, Kind};

use crate::child::overlay_helper::{self as helper, CLEAR_MARK, Helper, step, step_words};

/// The session's overlay: the layers it is made of, and the instance while calls use it.
/// Cloning it shares the same instance.
#[derive(Debug, Clone)]
pub struct SharedOverlay {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    lower: PathBuf,
    upper: PathBuf,
    work: PathBuf,
    /// Mounted with `volatile` (see [`SharedOverlay::new_volatile`]).
    volatile: bool,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// The detached overlay mount, while some lease holds it.
    mount: Option<OwnedFd>,
    leases: usize,
    /// How many instances were made.
    made: u64,
    /// The thread unmounting the last instance (closing its last host descriptor), while it may
    /// still run: the next instance is made only once it has finished.
    retiring: Option<std::thread::JoinHandle<()>>,
    /// The helper that makes the instances (helper.rs), once the first was made.
    helper: Option<Resident>,
}

/// A running overlay helper: its pid and the host's end of its socket.
#[derive(Debug)]
struct Resident {
    pid: libc::pid_t,
    chan: OwnedFd,
}

impl Resident {
    /// Closes the helper's socket (it exits at the end of file) and reaps it, on a thread of its
    /// own when one can be had: nothing waits on a helper's exit.
    fn dismiss(self) {
        let Resident { pid, chan } = self;
        drop(chan);
        let reaping = std::thread::Builder::new()
            .name("chock-overlay-reap".into())
            .spawn(move || crate::host::plumbing::reap(pid));
        if reaping.is_err() {
            crate::host::plumbing::reap(pid);
        }
    }
}

impl State {
    /// Waits until the instance last unmounted is gone.
    fn retired(&mut self) {
        if let Some(thread) = self.retiring.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Inner {
    /// The session's overlay is gone only when its last instance is: whoever drops it (the
    /// session's end) may read or remove the upper directory next.
    fn drop(&mut self) {
        let mut state = lock(&self.state);
        state.retired();
        if let Some(helper) = state.helper.take() {
            helper.dismiss();
        }
    }
}

/// One call's hold on the session's overlay instance. The instance is unmounted when the last
/// lease ends.
#[derive(Debug)]
pub struct OverlayLease {
    inner: Arc<Inner>,
    fd: RawFd,
}

impl OverlayLease {
    /// The host descriptor of the detached overlay mount (valid while the lease lives).
    pub(crate) fn fd(&self) -> RawFd {
        self.fd
    }
}

impl Drop for OverlayLease {
    fn drop(&mut self) {
        let mut state = lock(&self.inner.state);
        state.leases = state.leases.saturating_sub(1);
        if state.leases == 0
            && let Some(mount) = state.mount.take()
        {
            // Closing the last host copy unmounts the instance, and an ordinary (not volatile)
            // instance's unmount syncs the whole filesystem under the upper directory: about a
            // millisecond on this disk, more when anything else there is dirty. Nothing of the
            // call waits on that sync (the host reads the upper directory itself, through the
            // page cache), so it is done on a thread of its own; the next `lease` waits for it,
            // so a new instance is never made while the old one exists.
            state.retired();
            let retire = std::thread::Builder::new()
                .name("chock-overlay-unmount".into())
                .spawn(move || drop(mount));
            // No thread: the closure was dropped, and with it the mount, here, as before.
            state.retiring = retire.ok();
        }
    }
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn canonical(what: &str, p: &Path) -> Result<PathBuf, SandboxError> {
    p.canonicalize()
        .map_err(|e| SandboxError::Plan(format!("{what} {}: {e}", p.display())))
}

impl SharedOverlay {
    /// The shared overlay of `workspace` (which must be [`WorkspaceMount::Overlay`]). Makes no mount:
    /// the first [`SharedOverlay::lease`] does.
    pub fn new(workspace: &WorkspaceMount) -> Result<SharedOverlay, SandboxError> {
        Self::with(workspace, false)
    }

    /// As [`SharedOverlay::new`], for a workspace whose upper directory is thrown away when the
    /// session ends (never reviewed, never applied): its instances are mounted `volatile`, so
    /// neither a command's `fsync` nor the instance's unmount syncs the upper filesystem. What
    /// that gives up is only the upper directory's state after a machine crash (the kernel then
    /// refuses to mount it again: its `work/incompat/volatile` mark stays). A later instance of
    /// the same `SharedOverlay` removes the mark its predecessor left, which is sound because
    /// this process unmounted that one itself (no crash between); a mark found before the first
    /// instance is left, and the call fails in the `workspace` layer.
    pub fn new_volatile(workspace: &WorkspaceMount) -> Result<SharedOverlay, SandboxError> {
        Self::with(workspace, true)
    }

    fn with(workspace: &WorkspaceMount, volatile: bool) -> Result<SharedOverlay, SandboxError> {
        let WorkspaceMount::Overlay { lower, upper, work } = workspace else {
            return Err(SandboxError::Plan(
                "a shared overlay needs an overlay workspace, not a bind".into(),
            ));
        };
        Ok(SharedOverlay {
            inner: Arc::new(Inner {
                lower: canonical("overlay lower", lower)?,
                upper: canonical("overlay upper", upper)?,
                work: canonical("overlay work", work)?,
                volatile,
                state: Mutex::new(State::default()),
            }),
        })
    }

    /// Whether `workspace` names this overlay's layers.
    pub(crate) fn is_for(&self, workspace: &WorkspaceMount) -> bool {
        let WorkspaceMount::Overlay { lower, upper, work } = workspace else {
            return false;
        };
        let same = |a: &Path, b: &Path| a.canonicalize().is_ok_and(|a| a == b);
        same(lower, &self.inner.lower)
            && same(upper, &self.inner.upper)
            && same(work, &self.inner.work)
    }

    /// How many calls hold the instance now (started and not yet reaped).
    pub fn leases(&self) -> usize {
        lock(&self.inner.state).leases
    }

    /// The process id of the helper that makes the instances, while there is one (for tests).
    #[doc(hidden)]
    pub fn helper_pid(&self) -> Option<u32> {
        let state = lock(&self.inner.state);
        state
            .helper
            .as_ref()
            .and_then(|h| u32::try_from(h.pid).ok())
    }

    /// How many overlay instances this session has made so far.
    pub fn instances_made(&self) -> u64 {
        lock(&self.inner.state).made
    }

    /// A hold on the instance, making it first when no call holds one. Fails the call (layer
    /// `workspace`) when the overlay cannot be made: there is no per-call fallback.
    pub fn lease(&self) -> Result<OverlayLease, SandboxError> {
        let mut state = lock(&self.inner.state);
        let fd = match &state.mount {
            Some(fd) => fd.as_raw_fd(),
            None => {
                state.retired();
                let again = state.made > 0;
                let fd = self.make(&mut state.helper, again)?;
                let raw = fd.as_raw_fd();
                state.mount = Some(fd);
                state.made += 1;
                raw
            }
        };
        state.leases += 1;
        Ok(OverlayLease {
            inner: Arc::clone(&self.inner),
            fd,
        })
    }

    /// Makes an instance through the helper (started first when there is none, or again when
    /// the one there has gone) and returns its detached mount; `again`: this overlay made (and
    /// unmounted) one before.
    fn make(&self, resident: &mut Option<Resident>, again: bool) -> Result<OwnedFd, SandboxError> {
        let request = [if self.inner.volatile && again {
            CLEAR_MARK
        } else {
            0
        }];
        // A helper that was there may have gone since (killed from outside): one more try, with a
        // new one. A helper that reports a failed step has exited: it is not tried again.
        for _ in 0..2 {
            let started_now = resident.is_none();
            // A helper started now makes its first instance unasked (helper.rs); one that was
            // there is asked for the next.
            let (helper, got) = match resident.take() {
                Some(h) => {
                    let got =
                        ask(&h.chan, &request).and_then(|()| report::recv(h.chan.as_raw_fd()));
                    (h, got)
                }
                None => {
                    let h = self.start_helper(request[0] & CLEAR_MARK != 0)?;
                    let got = report::recv(h.chan.as_raw_fd());
                    (h, got)
                }
            };
            match got {
                Ok(Some((rec, Some(fd)))) if rec.kind == Kind::SharedOverlay as u32 => {
                    *resident = Some(helper);
                    return Ok(fd);
                }
                Ok(Some((rec, _))) => {
                    helper.dismiss();
                    return Err(refused(&rec));
                }
                // Gone without a word: a helper just started tells why it could not (the end of
                // the socket before any record is its failure); an older one is replaced once.
                Ok(None) | Err(_) if !started_now => helper.dismiss(),
                Ok(None) => {
                    helper.dismiss();
                    return Err(refuse("the helper process ended without a mount"));
                }
                Err(e) => {
                    helper.dismiss();
                    return Err(refuse(&format!("reading the helper's report: {e}")));
                }
            }
        }
        Err(refuse("the helper process ended twice without a mount"))
    }

    /// Forks the helper (helper.rs) into its namespaces; it makes its first instance (first
    /// removing a volatile predecessor's mark when `clear_mark`) and then waits for requests.
    fn start_helper(&self, clear_mark: bool) -> Result<Resident, SandboxError> {
        let path = |p: &Path| {
            CString::new(p.as_os_str().as_bytes())
                .map_err(|_| SandboxError::Plan("an overlay path contains a NUL byte".into()))
        };
        // SAFETY: geteuid/getegid never fail.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        let prepared = Helper {
            uid_map: format!("{uid} {uid} 1\n").into_bytes(),
            gid_map: format!("{gid} {gid} 1\n").into_bytes(),
            layers: [
                path(&self.inner.lower)?,
                path(&self.inner.upper)?,
                path(&self.inner.work)?,
            ],
            volatile: self.inner.volatile,
            first_clear_mark: clear_mark,
        };
        let (chan, chan_child) = crate::host::plumbing::seqpacket_pair()?;
        // SAFETY: the child runs only `helper::main`, which walks data prepared above with raw
        // system calls (no allocation, no lock), and never returns.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(SandboxError::host(
                "fork (the shared overlay's helper)",
                std::io::Error::last_os_error(),
            ));
        }
        if pid == 0 {
            helper::main(&prepared, chan_child.as_raw_fd());
        }
        drop(chan_child);
        Ok(Resident { pid, chan })
    }
}

/// Sends the helper a request (no SIGPIPE when it has gone: an error instead).
fn ask(chan: &OwnedFd, request: &[u8]) -> std::io::Result<()> {
    // SAFETY: sends bytes from a live buffer on our own socket.
    let n = unsafe {
        libc::send(
            chan.as_raw_fd(),
            request.as_ptr().cast(),
            request.len(),
            libc::MSG_NOSIGNAL,
        )
    };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn refuse(reason: &str) -> SandboxError {
    SandboxError::Layer {
        layer: Layer::Workspace,
        reason: format!("the session's shared overlay could not be made: {reason}"),
        hint: "overlayfs in a user namespace needs Linux 5.11 or later (with `userxattr`), and \
               the upper and work directories on one filesystem that keeps user.* xattrs"
            .into(),
    }
}

/// The error for the helper's report of a failed step.
fn refused(rec: &report::Record) -> SandboxError {
    // The helper's first step is the user namespace every call also needs: when the kernel
    // refuses it, that is the layer missing, whatever the helper was making it for.
    if rec.kind == Kind::LayerFailed as u32
        && matches!(rec.step, step::USER_NAMESPACE | step::ID_MAPS)
    {
        return SandboxError::Layer {
            layer: Layer::UserNamespace,
            reason: format!(
                "{} (making the session's shared overlay): {}",
                step_words(rec.step),
                std::io::Error::from_raw_os_error(rec.errno)
            ),
            hint: crate::host::hints::user_namespace(),
        };
    }
    if rec.kind == Kind::LayerFailed as u32 {
        return refuse(&format!(
            "{}: {}",
            step_words(rec.step),
            std::io::Error::from_raw_os_error(rec.errno)
        ));
    }
    refuse("the helper process answered without a mount")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bind_workspace_has_no_shared_overlay() {
        let err = SharedOverlay::new(&WorkspaceMount::Bind {
            source: "/tmp".into(),
        })
        .unwrap_err();
        assert!(err.to_string().contains("overlay workspace"), "{err}");
    }

    #[test]
    fn every_helper_step_has_words() {
        for s in 1..=18 {
            assert_ne!(step_words(s), "an unknown step");
        }
    }
}
