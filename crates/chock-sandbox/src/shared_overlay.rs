//! One overlay instance for the calls of a session that run at the same time.
//!
//! Two overlay mounts on one upper and work directory are undefined behaviour (the kernel warns
//! "upperdir is in-use"): each instance caches its own view, so a write made through one is not
//! reliably seen through the other, and two mounts made at once race on `work/work` (one of them
//! fails with ENOENT). So a session's calls do not mount overlays of their own. The host keeps the
//! session's overlay as a detached mount (a descriptor from `fsmount`), made by a short-lived helper
//! process in a user and mount namespace of its own (the same id map as a call's); each call's init
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

use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::{Layer, SandboxError};
use crate::namespaces;
use crate::plan::WorkspaceMount;
use crate::report::{self, Kind, Record};
use crate::sys::{self, errno, exit_now};

// The new mount API (linux/mount.h); the numbers are the kernel's ABI.
const FSOPEN_CLOEXEC: libc::c_uint = 0x1;
const FSCONFIG_SET_FLAG: libc::c_uint = 0;
const FSCONFIG_SET_STRING: libc::c_uint = 1;
const FSCONFIG_CMD_CREATE: libc::c_uint = 6;
const FSMOUNT_CLOEXEC: libc::c_uint = 0x1;
const MOUNT_ATTR_NOSUID: libc::c_uint = 0x2;
const MOUNT_ATTR_NODEV: libc::c_uint = 0x4;

/// The helper's steps, as reported to the host.
mod step {
    pub const CLOSE: u32 = 1;
    pub const USER_NAMESPACE: u32 = 2;
    pub const ID_MAPS: u32 = 3;
    pub const MOUNT_NAMESPACE: u32 = 4;
    pub const FSOPEN: u32 = 5;
    pub const LOWERDIR: u32 = 6;
    pub const UPPERDIR: u32 = 7;
    pub const WORKDIR: u32 = 8;
    pub const USERXATTR: u32 = 9;
    pub const CREATE: u32 = 10;
    pub const FSMOUNT: u32 = 11;
    pub const SEND: u32 = 12;
    pub const OPEN_LOWER: u32 = 13;
    pub const OPEN_UPPER: u32 = 14;
    pub const OPEN_WORK: u32 = 15;
    pub const VOLATILE_MARK: u32 = 16;
    pub const VOLATILE: u32 = 17;
}

fn step_words(s: u32) -> &'static str {
    match s {
        step::CLOSE => "closing inherited descriptors",
        step::USER_NAMESPACE => "unshare(CLONE_NEWUSER)",
        step::ID_MAPS => "writing the id maps",
        step::MOUNT_NAMESPACE => "unshare(CLONE_NEWNS)",
        step::FSOPEN => "fsopen(\"overlay\")",
        step::LOWERDIR => "fsconfig lowerdir",
        step::UPPERDIR => "fsconfig upperdir",
        step::WORKDIR => "fsconfig workdir",
        step::USERXATTR => "fsconfig userxattr",
        step::CREATE => "fsconfig create",
        step::FSMOUNT => "fsmount",
        step::SEND => "handing the mount to the host",
        step::OPEN_LOWER => "opening the lower directory",
        step::OPEN_UPPER => "opening the upper directory",
        step::OPEN_WORK => "opening the work directory",
        step::VOLATILE_MARK => {
            "removing the last volatile instance's mark (work/incompat/volatile)"
        }
        step::VOLATILE => "fsconfig volatile",
        _ => "an unknown step",
    }
}

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
        lock(&self.state).retired();
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
                let fd = self.make(state.made > 0)?;
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

    /// Makes an instance through a helper process and returns its detached mount; `again`: this
    /// overlay made (and unmounted) one before.
    fn make(&self, again: bool) -> Result<OwnedFd, SandboxError> {
        let path = |p: &Path| {
            CString::new(p.as_os_str().as_bytes())
                .map_err(|_| SandboxError::Plan("an overlay path contains a NUL byte".into()))
        };
        // SAFETY: geteuid/getegid never fail.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        let helper = Helper {
            uid_map: format!("{uid} {uid} 1\n").into_bytes(),
            gid_map: format!("{gid} {gid} 1\n").into_bytes(),
            layers: [
                path(&self.inner.lower)?,
                path(&self.inner.upper)?,
                path(&self.inner.work)?,
            ],
            volatile: self.inner.volatile,
            clear_mark: self.inner.volatile && again,
        };
        let (chan, chan_child) = crate::call_io::seqpacket_pair()?;
        // SAFETY: the child runs only `helper_main`, which walks data prepared above with raw system
        // calls (no allocation, no lock), and never returns.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(SandboxError::host(
                "fork (the shared overlay's helper)",
                std::io::Error::last_os_error(),
            ));
        }
        if pid == 0 {
            helper_main(&helper, chan_child.as_raw_fd());
        }
        drop(chan_child);
        let got = report::recv(chan.as_raw_fd());
        crate::call_io::reap(pid);
        let refuse = |reason: String| SandboxError::Layer {
            layer: Layer::Workspace,
            reason: format!("the session's shared overlay could not be made: {reason}"),
            hint:
                "overlayfs in a user namespace needs Linux 5.11 or later (with `userxattr`), and \
                   the upper and work directories on one filesystem that keeps user.* xattrs"
                    .into(),
        };
        match got {
            Ok(Some((rec, Some(fd)))) if rec.kind == Kind::SharedOverlay as u32 => Ok(fd),
            // The helper's first step is the user namespace every call also needs: when the kernel
            // refuses it, that is the layer missing, whatever the helper was making it for.
            Ok(Some((rec, _)))
                if rec.kind == Kind::LayerFailed as u32
                    && matches!(rec.step, step::USER_NAMESPACE | step::ID_MAPS) =>
            {
                Err(SandboxError::Layer {
                    layer: Layer::UserNamespace,
                    reason: format!(
                        "{} (making the session's shared overlay): {}",
                        step_words(rec.step),
                        std::io::Error::from_raw_os_error(rec.errno)
                    ),
                    hint: crate::hints::user_namespace(),
                })
            }
            Ok(Some((rec, _))) if rec.kind == Kind::LayerFailed as u32 => Err(refuse(format!(
                "{}: {}",
                step_words(rec.step),
                std::io::Error::from_raw_os_error(rec.errno)
            ))),
            Ok(_) => Err(refuse("the helper process ended without a mount".into())),
            Err(e) => Err(refuse(format!("reading the helper's report: {e}"))),
        }
    }
}

/// What the helper needs, built before fork.
struct Helper {
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
    /// lower, upper, work (host paths, resolved).
    layers: [CString; 3],
    /// Mount with `volatile`.
    volatile: bool,
    /// Remove the mark a previous volatile instance of this overlay left in the work directory.
    clear_mark: bool,
}

/// `/proc/self/fd/<fd>` in a stack buffer (the helper does not allocate).
fn fd_path(fd: RawFd, buf: &mut [u8; 32]) -> Option<&CStr> {
    sys::fd_path_in(b"/proc/self/fd/", fd, buf)
}

fn fail(chan: RawFd, s: u32, e: i32) -> ! {
    let _ = report::send(
        chan,
        Record::new(Kind::LayerFailed, Layer::Workspace as u32, s, e, 0),
        None,
    );
    exit_now(1)
}

fn fsconfig(
    fs: RawFd,
    cmd: libc::c_uint,
    key: Option<&CStr>,
    value: Option<&CStr>,
) -> Result<(), i32> {
    let ptr = |c: Option<&CStr>| c.map_or(std::ptr::null(), CStr::as_ptr);
    // SAFETY: fsconfig reads NUL-terminated strings (or NULL) that outlive the call.
    let rc = unsafe { libc::syscall(libc::SYS_fsconfig, fs, cmd, ptr(key), ptr(value), 0) };
    if rc == -1 { Err(errno()) } else { Ok(()) }
}

/// The helper: a user namespace (the caller's own ids, as a call maps them) and a mount namespace
/// owned by it, where the overlay is made and mounted detached; the mount goes to the host and the
/// helper exits. Async-signal-safe. Never returns.
fn helper_main(h: &Helper, chan: RawFd) -> ! {
    if let Err(e) = sys::close_all_except(&[chan]) {
        fail(chan, step::CLOSE, e);
    }
    if let Err(e) = namespaces::unshare(libc::CLONE_NEWUSER) {
        fail(chan, step::USER_NAMESPACE, e);
    }
    if let Err((_, e)) = namespaces::write_id_maps(&h.uid_map, &h.gid_map) {
        fail(chan, step::ID_MAPS, e);
    }
    if let Err(e) = namespaces::unshare(libc::CLONE_NEWNS) {
        fail(chan, step::MOUNT_NAMESPACE, e);
    }
    // The layers are opened in this mount namespace (overlayfs takes private clones of its layers'
    // mounts, which must be this namespace's), and named to the kernel by descriptor, so the mount
    // options every call can read name no host path.
    let mut layer_fds = [-1; 3];
    for (i, (fd, p)) in layer_fds.iter_mut().zip(&h.layers).enumerate() {
        // SAFETY: NUL-terminated path; the descriptor lives until the helper exits.
        *fd = unsafe {
            libc::open(
                p.as_ptr(),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        if *fd < 0 {
            fail(
                chan,
                step::OPEN_LOWER + u32::try_from(i).unwrap_or(0),
                errno(),
            );
        }
    }
    if h.clear_mark {
        // The mark is `work/incompat/volatile/dirty` and its directory; the kernel refuses a
        // mount while `work/incompat` names a feature. Removed here, in the namespace that may
        // pass the work directory's mode 000.
        let mark = [
            (c"work/incompat/volatile/dirty", 0),
            (c"work/incompat/volatile", libc::AT_REMOVEDIR),
        ];
        for (path, flags) in mark {
            // SAFETY: a NUL-terminated path relative to the work directory's descriptor.
            let rc = unsafe { libc::unlinkat(layer_fds[2], path.as_ptr(), flags) };
            if rc != 0 && errno() != libc::ENOENT {
                fail(chan, step::VOLATILE_MARK, errno());
            }
        }
    }
    let mut bufs = [[0u8; 32]; 3];
    let [b0, b1, b2] = &mut bufs;
    let (Some(lower), Some(upper), Some(work)) = (
        fd_path(layer_fds[0], b0),
        fd_path(layer_fds[1], b1),
        fd_path(layer_fds[2], b2),
    ) else {
        fail(chan, step::OPEN_LOWER, libc::EBADF)
    };
    // SAFETY: fsopen takes a NUL-terminated file system name.
    let fs = unsafe { libc::syscall(libc::SYS_fsopen, c"overlay".as_ptr(), FSOPEN_CLOEXEC) };
    let Ok(fs) = RawFd::try_from(fs) else {
        fail(chan, step::FSOPEN, libc::EBADF)
    };
    if fs < 0 {
        fail(chan, step::FSOPEN, errno());
    }
    let options = [
        (step::LOWERDIR, c"lowerdir", lower),
        (step::UPPERDIR, c"upperdir", upper),
        (step::WORKDIR, c"workdir", work),
    ];
    for (s, key, value) in options {
        if let Err(e) = fsconfig(fs, FSCONFIG_SET_STRING, Some(key), Some(value)) {
            fail(chan, s, e);
        }
    }
    if let Err(e) = fsconfig(fs, FSCONFIG_SET_FLAG, Some(c"userxattr"), None) {
        fail(chan, step::USERXATTR, e);
    }
    if h.volatile
        && let Err(e) = fsconfig(fs, FSCONFIG_SET_FLAG, Some(c"volatile"), None)
    {
        fail(chan, step::VOLATILE, e);
    }
    if let Err(e) = fsconfig(fs, FSCONFIG_CMD_CREATE, None, None) {
        fail(chan, step::CREATE, e);
    }
    // SAFETY: fsmount of our own configured context; the result is a new descriptor.
    let mnt = unsafe {
        libc::syscall(
            libc::SYS_fsmount,
            fs,
            FSMOUNT_CLOEXEC,
            MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
        )
    };
    let Ok(mnt) = RawFd::try_from(mnt) else {
        fail(chan, step::FSMOUNT, libc::EBADF)
    };
    if mnt < 0 {
        fail(chan, step::FSMOUNT, errno());
    }
    if let Err(e) = report::send(
        chan,
        Record::new(Kind::SharedOverlay, 0, 0, 0, 0),
        Some(mnt),
    ) {
        fail(chan, step::SEND, e);
    }
    exit_now(0)
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
        for s in 1..=17 {
            assert_ne!(step_words(s), "an unknown step");
        }
    }
}
