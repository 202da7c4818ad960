//! The command process: how the init starts it and what it does before its `execve`.
//!
//! The init starts the command as `posix_spawn` does, with `clone(CLONE_VM | CLONE_VFORK)` on a
//! stack of its own, not with `fork`: no copy of the init's address space is made and none is torn
//! down at the `execve`. On this machine's paravirtualised page tables each of those costs about
//! 0.4 ms, and every tool call pays it once. The init is suspended until the command has executed
//! its program or exited, so the two never run at once in the one memory.
//!
//! What the child may do while it shares the init's memory is narrow, and this file is all of it:
//! system calls on its own descriptors and working directory, reads of the [`CommandSpec`] the init
//! keeps alive, one report record on the setup channel, and `_exit`. Signal dispositions are all
//! default here (`init::reset_signals` ran in the setup process), so no handler of the host's can
//! run on the shared memory; and the child's `errno` writes land in the init's thread-local
//! `errno`, which the init does not read after a successful clone.

use std::os::fd::RawFd;

use crate::child::prepared::CommandSpec;
use crate::child::sys::fail;
use crate::child::sys::{self, errno, exit_now};
use crate::wire::error::Layer;
use crate::wire::report::{self, Kind, Record};
use crate::wire::step;

/// The command's stack while it shares the init's memory: `command_main`, one failed `execve` per
/// PATH candidate and a report record need a few KiB; the rest is margin.
const STACK_BYTES: usize = 256 << 10;

/// What the child reads; the init keeps it on its own stack until `clone` returns.
struct Start<'a> {
    cmd: &'a CommandSpec,
    chan: RawFd,
    host_channel: Option<RawFd>,
}

/// Starts the command; its pid, or the errno of the step that failed (the stack's mapping or the
/// clone). The init resumes once the command has executed its program or exited.
pub(crate) fn spawn(
    cmd: &CommandSpec,
    chan: RawFd,
    host_channel: Option<RawFd>,
) -> Result<libc::pid_t, i32> {
    let stack = Stack::map()?;
    let start = Start {
        cmd,
        chan,
        host_channel,
    };
    // SAFETY: `entry` runs on `stack`, which stays mapped until after this call returns; with
    // CLONE_VFORK this call returns only once the child has executed its program or exited, so
    // `start` (borrowed by the child) outlives every use of it, and the child never returns into
    // this frame. SIGCHLD makes the child an ordinary one for the init's waitpid.
    let pid = unsafe {
        libc::clone(
            entry,
            stack.top(),
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            (&raw const start).cast_mut().cast(),
        )
    };
    if pid < 0 {
        return Err(errno());
    }
    Ok(pid)
}

/// The child's first frame on its own stack. Never returns.
extern "C" fn entry(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `Start` of `spawn`, alive while the init is suspended (CLONE_VFORK).
    let start = unsafe { &*arg.cast::<Start<'_>>() };
    command_main(start.cmd, start.chan, start.host_channel)
}

/// The command: every descriptor but 0, 1 and 2 (and the host channel, as
/// [`crate::HOST_CHANNEL_FD`]) closed at exec, its working directory, then its program under the
/// scrubbed environment, tried at each PATH candidate. Never returns.
fn command_main(p: &CommandSpec, mut chan: RawFd, host_channel: Option<RawFd>) -> ! {
    if let Err(e) = sys::close_range(3, u32::MAX, libc::CLOSE_RANGE_CLOEXEC as libc::c_int) {
        fail(chan, Layer::Descriptors, step::CLOSE, e);
    }
    if let Some(fd) = host_channel {
        chan = install_host_channel(fd, chan);
    }
    // SAFETY: NUL-terminated path.
    if unsafe { libc::chdir(p.cwd.as_ptr()) } == -1 {
        fail(chan, Layer::Workspace, step::CHDIR, errno());
    }
    let mut last = libc::ENOENT;
    for candidate in &p.candidates {
        // SAFETY: NUL-terminated path and NULL-terminated pointer arrays that outlive the call.
        unsafe {
            libc::execve(
                candidate.as_ptr(),
                p.argv_ptrs.as_ptr(),
                p.env_ptrs.as_ptr(),
            )
        };
        let e = errno();
        match e {
            libc::ENOENT | libc::ENOTDIR => {}
            libc::EACCES => last = e,
            _ => {
                last = e;
                break;
            }
        }
    }
    let _ = report::send(chan, Record::new(Kind::ExecFailed, 0, 0, last, 0), None);
    exit_now(127)
}

/// Puts the host channel at [`crate::HOST_CHANNEL_FD`], open across the exec; the report channel
/// is moved out of the way first if it sits there. Returns where the report channel now is.
fn install_host_channel(fd: RawFd, chan: RawFd) -> RawFd {
    let target = crate::HOST_CHANNEL_FD;
    let mut chan = chan;
    if chan == target && fd != target {
        // SAFETY: duplicates a descriptor this process holds, close-on-exec, above the target.
        let moved = unsafe { libc::fcntl(chan, libc::F_DUPFD_CLOEXEC, target + 1) };
        if moved == -1 {
            fail(chan, Layer::Descriptors, step::HOST_CHANNEL, errno());
        }
        chan = moved;
    }
    // SAFETY: dup2 onto the target (its result is not close-on-exec), or clearing close-on-exec
    // on the descriptor already there; both act on descriptors this process holds.
    let rc = unsafe {
        if fd == target {
            libc::fcntl(fd, libc::F_SETFD, 0)
        } else {
            libc::dup2(fd, target)
        }
    };
    if rc == -1 {
        fail(chan, Layer::Descriptors, step::HOST_CHANNEL, errno());
    }
    chan
}

/// An anonymous mapping for the child's stack, with a guard page below it so that an overflow
/// faults instead of writing into the init's memory. Unmapped at drop.
struct Stack {
    base: *mut libc::c_void,
    len: usize,
}

impl Stack {
    fn map() -> Result<Self, i32> {
        let guard = page_size();
        let len = STACK_BYTES + guard;
        // SAFETY: a fresh private anonymous mapping; nothing else refers to it.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(errno());
        }
        let stack = Self { base, len };
        // SAFETY: the lowest page of the mapping made above; the stack grows down towards it.
        if unsafe { libc::mprotect(base, guard, libc::PROT_NONE) } == -1 {
            return Err(errno());
        }
        Ok(stack)
    }

    /// The stack's highest address (x86-64 and aarch64 stacks grow down; the mapping is
    /// page-aligned, so 16-byte aligned as both ABIs want).
    fn top(&self) -> *mut libc::c_void {
        // SAFETY: one past the end of the mapping, which is where a downward stack starts.
        unsafe { self.base.cast::<u8>().add(self.len).cast() }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`; the child that ran on it has executed or exited.
        unsafe { libc::munmap(self.base, self.len) };
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size).unwrap_or(4096)
}
