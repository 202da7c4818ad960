//! How a call's processes wait once they started their child: the setup process for its init
//! (killing it when the host goes away), and the init, pid 1, for its command (reaping orphans,
//! then ending the rest of its pid namespace before it reports the status). Allocation-free:
//! run after fork.

use std::os::fd::RawFd;

use crate::child::sys::{self, errno, exit_now};

/// Waits for the init; kills it if the host's end of the lifeline closes (the host died or
/// dropped the call).
pub(crate) fn supervise(init: libc::pid_t, pidfd: RawFd, lifeline: RawFd) -> ! {
    let mut watch_lifeline = true;
    loop {
        let mut fds = [
            libc::pollfd {
                fd: pidfd,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: if watch_lifeline { lifeline } else { -1 },
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: two valid pollfd structs.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if n < 0 {
            if errno() == libc::EINTR {
                continue;
            }
            break;
        }
        if fds[0].revents != 0 {
            break;
        }
        if fds[1].revents != 0 {
            // SAFETY: signal through a pidfd of our own child.
            unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    pidfd,
                    libc::SIGKILL,
                    std::ptr::null::<u8>(),
                    0,
                )
            };
            watch_lifeline = false;
        }
    }
    let mut status = 0;
    // SAFETY: reap our own child.
    unsafe { libc::waitpid(init, &raw mut status, 0) };
    exit_now(0)
}

/// Reaps every process of the namespace; when the command ends, kills and reaps whatever it left
/// (the whole namespace but pid 1), then reports the command's wait status and exits. The status
/// is written only once no other process of the call exists, so the host may take it as the call's
/// end without waiting for pid 1's own exit (a copy of the host's address space to tear down, about
/// a third of a millisecond).
pub(crate) fn reap(command: libc::pid_t, status_w: RawFd) -> ! {
    loop {
        let mut status = 0;
        // SAFETY: wait for any child of pid 1 (the command and orphans reparented to us).
        let pid = unsafe { libc::waitpid(-1, &raw mut status, 0) };
        if pid == command {
            end_the_rest();
            let _ = sys::write_all(status_w, &status.to_ne_bytes());
            exit_now(0);
        }
        if pid < 0 && errno() != libc::EINTR {
            exit_now(0);
        }
    }
}

/// Kills every other process of the call's pid namespace and reaps them all (pid 1 is their
/// reaper: each one killed comes back here as a child).
fn end_the_rest() {
    // SAFETY: from pid 1, kill(-1) reaches every process of its namespace (and of namespaces
    // below it) but itself.
    unsafe { libc::kill(-1, libc::SIGKILL) };
    loop {
        // SAFETY: reap any child; ECHILD ends the loop.
        let pid = unsafe { libc::waitpid(-1, std::ptr::null_mut(), 0) };
        if pid < 0 && errno() != libc::EINTR {
            return;
        }
    }
}
