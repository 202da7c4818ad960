//! The overlay helper, as it runs (host side: `shared_overlay.rs`): a process forked from the host
//! into a user namespace of its own (the caller's own ids, as a call maps them) and a mount
//! namespace owned by it, where each overlay instance is made and mounted detached; the mount
//! goes to the host.
//!
//! It makes the first instance as soon as it starts, then stays for as long as its
//! [`crate::SharedOverlay`] does and makes one more per request:
//! a new process per instance cost a fork, two namespaces and an exit (about a millisecond on
//! this machine, on the path of every call that needs a new instance). It runs nothing but the
//! steps below, touches no host path but the overlay's three layers (opened again for every
//! instance, so a replaced project directory is seen as the new one), and ends when the host's end
//! of its socket closes — the host's exit included. On a step that fails it reports the step and
//! exits; the host's next request starts a new helper.

use std::ffi::{CStr, CString};
use std::os::fd::RawFd;

use crate::child::namespaces;
use crate::child::sys::{self, errno, exit_now};
use crate::wire::error::Layer;
use crate::wire::report::{self, Kind, Record};

// The new mount API (linux/mount.h); the numbers are the kernel's ABI.
const FSOPEN_CLOEXEC: libc::c_uint = 0x1;
const FSCONFIG_SET_FLAG: libc::c_uint = 0;
const FSCONFIG_SET_STRING: libc::c_uint = 1;
const FSCONFIG_CMD_CREATE: libc::c_uint = 6;
const FSMOUNT_CLOEXEC: libc::c_uint = 0x1;
const MOUNT_ATTR_NOSUID: libc::c_uint = 0x2;
const MOUNT_ATTR_NODEV: libc::c_uint = 0x4;

/// A request's flag: remove the mark the previous volatile instance left first.
pub(crate) const CLEAR_MARK: u8 = 1;

/// The helper's steps, as reported to the host.
pub(crate) mod step {
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
    pub const REQUEST: u32 = 18;
}

pub(crate) fn step_words(s: u32) -> &'static str {
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
        step::REQUEST => "reading the host's request",
        _ => "an unknown step",
    }
}

/// What the helper needs, built before fork.
pub(crate) struct Helper {
    pub(crate) uid_map: Vec<u8>,
    pub(crate) gid_map: Vec<u8>,
    /// lower, upper, work (host paths, resolved).
    pub(crate) layers: [CString; 3],
    /// Mount with `volatile`.
    pub(crate) volatile: bool,
    /// The first instance, made unasked as soon as the namespaces are: remove the mark a
    /// previous volatile instance of this overlay left first.
    pub(crate) first_clear_mark: bool,
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

/// The helper (see the module). Async-signal-safe: raw system calls on data prepared before
/// fork, no allocation, no lock. Never returns.
pub(crate) fn main(h: &Helper, chan: RawFd) -> ! {
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
    // The instance the helper was started for: the host writes nothing before it has an answer,
    // so a step that fails here is always heard (a request sent to a helper that already exited
    // could reset the socket and lose the report).
    make_one(h, chan, h.first_clear_mark);
    loop {
        let mut request = [0u8; 1];
        // SAFETY: reads one byte into a stack buffer.
        let n = unsafe { libc::read(chan, request.as_mut_ptr().cast(), 1) };
        match n {
            1 => make_one(h, chan, request[0] & CLEAR_MARK != 0),
            0 => exit_now(0),
            _ if errno() == libc::EINTR => {}
            _ => fail(chan, step::REQUEST, errno()),
        }
    }
}

/// One instance: the layers opened in this mount namespace (overlayfs takes private clones of
/// its layers' mounts, which must be this namespace's) and named to the kernel by descriptor, so
/// the mount options every call can read name no host path; the detached mount sent to the host.
fn make_one(h: &Helper, chan: RawFd, clear_mark: bool) {
    let mut layer_fds = [-1; 3];
    for (i, (fd, p)) in layer_fds.iter_mut().zip(&h.layers).enumerate() {
        // SAFETY: NUL-terminated path; the descriptor is closed below.
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
    if clear_mark {
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
    // SAFETY: this process's own descriptors: the host holds the mount now, and the layers and
    // the context are done with (the next instance opens its own).
    unsafe {
        libc::close(mnt);
        libc::close(fs);
        for fd in layer_fds {
            libc::close(fd);
        }
    }
}
