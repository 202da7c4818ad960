//! The host's watch over a call's seccomp filter: the kill rows answer SECCOMP_RET_USER_NOTIF
//! (`seccomp_rules/program.rs`), so a process making such a call waits, the call never executed,
//! until this watcher reads the notification, records the call's name for the call's report, and
//! kills the process with SIGKILL. The report then says which call was forbidden instead of a bare
//! status.
//!
//! Why not the kernel's own kill (SECCOMP_RET_KILL_PROCESS): its SIGSYS carries the call's number
//! in a siginfo that only the dying process (or a tracer) sees; nothing reaches the parent but the
//! signal. Why not SECCOMP_RET_TRAP: a process that installs a SIGSYS handler survives it and
//! goes on, a kill turned into a refusal it may ignore. Here the process can do nothing while it
//! waits: a signal it handles only restarts the call, which waits again. SIGKILL cannot be handled.
//! If the watcher is gone (the host died; the listener closed), the kernel answers the call with
//! ENOSYS: the call's kernel code stays unreachable whatever happens to the watcher.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex};

use crate::child::seccomp_rules::{Arch, killed_call};

/// A running watch; the call's report reads [`SeccompWatch::killed`]. Public because the
/// watch moves with a kept call (docs/handover.md): a process that takes the call over is given
/// a copy of the filter's listener ([`crate::CallDoors::seccomp`]) and watches it itself.
#[derive(Debug)]
pub struct SeccompWatch {
    killed: Arc<Mutex<Option<String>>>,
    /// The watched listener, shared with the watching thread: copied for a process that takes
    /// the call over ([`SeccompWatch::listener_copy`]).
    listener: Arc<OwnedFd>,
}

impl SeccompWatch {
    /// Starts watching `listener` on a thread of its own until the call's init (`init_pidfd`, a
    /// copy is kept) is gone, which means every process of the call is. A thread that cannot be
    /// made fails the call (its kill rows would answer ENOSYS, not kill).
    pub fn start(listener: OwnedFd, init_pidfd: &OwnedFd) -> std::io::Result<SeccompWatch> {
        let init = init_pidfd.try_clone()?;
        let killed = Arc::new(Mutex::new(None));
        let listener = Arc::new(listener);
        let (theirs, watched) = (Arc::clone(&killed), Arc::clone(&listener));
        std::thread::Builder::new()
            .name("chock-seccomp".into())
            .spawn(move || watch(&watched, &init, &theirs))?;
        Ok(SeccompWatch { killed, listener })
    }

    /// The first call for which a process of this call was killed, by name.
    pub fn killed(&self) -> Option<String> {
        self.killed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// A copy of the filter's listener, for the process the call is handed to: while any copy
    /// is open a forbidden call waits for a watcher (killed when one reads it), rather than
    /// being answered `ENOSYS`.
    pub(crate) fn listener_copy(&self) -> std::io::Result<OwnedFd> {
        self.listener.try_clone()
    }
}

fn watch(listener: &OwnedFd, init: &OwnedFd, killed: &Mutex<Option<String>>) {
    loop {
        let mut fds = [
            libc::pollfd {
                fd: listener.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: init.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: two valid pollfd structs.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if n < 0 {
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return;
        }
        if fds[0].revents & libc::POLLIN != 0 {
            if let Some((id, pid, nr)) = receive(listener.as_raw_fd()) {
                let name = Arch::current()
                    .and_then(|a| killed_call(a, nr))
                    .map_or_else(|| format!("system call {nr}"), str::to_string);
                // Recorded before the kill: the call's end, which the kill brings, finds it.
                killed
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .get_or_insert(name);
                if !kill_waiting(listener.as_raw_fd(), id, pid) {
                    // The process could not be reached by pid: end the whole call instead.
                    signal(init.as_raw_fd());
                }
            }
            continue;
        }
        // The init ended (every process of the call is gone), or no process uses the filter.
        if fds[1].revents != 0 || fds[0].revents != 0 {
            return;
        }
    }
}

/// One notification: its id, the waiting thread's host id, the call's number.
fn receive(listener: RawFd) -> Option<(u64, u32, i64)> {
    // SAFETY: seccomp_notif is plain data; the kernel requires it zeroed.
    let mut notif: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    // SAFETY: `notif` is a valid out buffer of the size the ioctl number encodes.
    let rc = unsafe {
        libc::ioctl(
            listener,
            libc::SECCOMP_IOCTL_NOTIF_RECV as _,
            &raw mut notif,
        )
    };
    // ENOENT: the process went away between poll and receive.
    (rc == 0).then(|| (notif.id, notif.pid, i64::from(notif.data.nr)))
}

/// Kills the process whose thread `tid` waits on notification `id`: a pidfd for the thread (or,
/// before Linux 6.9, its thread group read from /proc), checked to still be the waiting one
/// (`SECCOMP_IOCTL_NOTIF_ID_VALID` after the pidfd is open, so a reused id cannot be hit), then
/// SIGKILL, which ends the whole process. False when it could not be done; true when the
/// notification is no longer valid (the process is gone already).
fn kill_waiting(listener: RawFd, id: u64, tid: u32) -> bool {
    const PIDFD_THREAD: libc::c_uint = libc::O_EXCL as libc::c_uint;
    let Ok(tid) = libc::pid_t::try_from(tid) else {
        return false;
    };
    let open = |pid: libc::pid_t, flags: libc::c_uint| {
        // SAFETY: pidfd_open returns a new descriptor or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, flags) };
        RawFd::try_from(fd).ok().filter(|fd| *fd >= 0)
    };
    let pidfd = open(tid, PIDFD_THREAD).or_else(|| thread_group(tid).and_then(|g| open(g, 0)));
    let Some(pidfd) = pidfd else {
        return false;
    };
    // SAFETY: `id` is a valid u64 the ioctl reads.
    let valid = unsafe {
        libc::ioctl(
            listener,
            libc::SECCOMP_IOCTL_NOTIF_ID_VALID as _,
            &raw const id,
        )
    };
    let done = valid != 0 || signal(pidfd);
    // SAFETY: `pidfd` was opened above and is closed once.
    unsafe { libc::close(pidfd) };
    done
}

/// SIGKILL through a pidfd.
fn signal(pidfd: RawFd) -> bool {
    // SAFETY: a signal through a pidfd we hold.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd,
            libc::SIGKILL,
            std::ptr::null::<u8>(),
            0,
        )
    };
    rc == 0
}

/// The thread group (process) of thread `tid`, from the host's /proc.
fn thread_group(tid: libc::pid_t) -> Option<libc::pid_t> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
}
