//! Small, async-signal-safe wrappers over raw system calls used between fork and exec.
//!
//! Nothing here allocates: these run in children of a possibly multi-threaded parent.

use std::ffi::CStr;
use std::os::fd::RawFd;

/// The calling thread's errno.
pub(crate) fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// `request` as this target's `ioctl` takes it: `c_ulong` with glibc, `c_int` with musl (the
/// microVM guest's init is built for musl). A number that does not fit is refused with `ENOTTY`, as
/// the kernel refuses a request it does not know, and is never cut to another request.
pub(crate) fn ioctl_request<R: TryFrom<libc::c_ulong>>(request: libc::c_ulong) -> Result<R, i32> {
    R::try_from(request).map_err(|_| libc::ENOTTY)
}

/// `Ok(())` when a libc return code is not -1, else the errno.
pub(crate) fn check(rc: libc::c_int) -> Result<(), i32> {
    if rc == -1 { Err(errno()) } else { Ok(()) }
}

/// Writes all of `data` to `fd`, retrying on EINTR.
pub(crate) fn write_all(fd: RawFd, mut data: &[u8]) -> Result<(), i32> {
    while !data.is_empty() {
        // SAFETY: `data` is a valid slice for its length; `fd` is owned by the caller.
        let n = unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) };
        if n < 0 {
            let e = errno();
            if e == libc::EINTR {
                continue;
            }
            return Err(e);
        }
        let n = usize::try_from(n).unwrap_or(0);
        data = &data[n..];
    }
    Ok(())
}

/// A close-on-exec pipe: its read end, then its write end.
pub(crate) fn pipe() -> Result<[RawFd; 2], i32> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for two descriptors.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    Ok(fds)
}

/// A pidfd (close-on-exec) of the process `pid`.
pub(crate) fn pidfd_open(pid: libc::pid_t) -> Result<RawFd, i32> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    match RawFd::try_from(fd) {
        Ok(fd) if fd >= 0 => Ok(fd),
        _ => Err(errno()),
    }
}

/// Reads one byte from `fd`, retrying on EINTR: true when it came, false at end of file or on an
/// error (the writer is gone or never wrote). For one-shot signals between processes.
pub(crate) fn read_byte(fd: RawFd) -> bool {
    let mut byte = 0u8;
    loop {
        // SAFETY: reading one byte into a local from a descriptor the caller owns.
        let n = unsafe { libc::read(fd, (&raw mut byte).cast(), 1) };
        if n == 1 {
            return true;
        }
        if !(n < 0 && errno() == libc::EINTR) {
            return false;
        }
    }
}

/// Opens `path` write-only and writes `data` (for /proc and cgroup files).
pub(crate) fn write_file(path: &CStr, data: &[u8]) -> Result<(), i32> {
    // SAFETY: `path` is a valid NUL-terminated string.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(errno());
    }
    let result = write_all(fd, data);
    // SAFETY: `fd` was opened above and is closed once.
    unsafe { libc::close(fd) };
    result
}

/// Closes every descriptor except those in `keep` (which must be sorted ascending).
pub(crate) fn close_all_except(keep: &[RawFd]) -> Result<(), i32> {
    let mut next: u32 = 0;
    for &fd in keep {
        let Ok(fd) = u32::try_from(fd) else { continue };
        if fd > next {
            close_range(next, fd - 1, 0)?;
        }
        next = fd.saturating_add(1);
    }
    close_range(next, u32::MAX, 0)
}

/// close_range(2).
pub(crate) fn close_range(first: u32, last: u32, flags: libc::c_int) -> Result<(), i32> {
    // SAFETY: close_range only touches this process's descriptor table.
    let rc = unsafe { libc::syscall(libc::SYS_close_range, first, last, flags) };
    if rc == -1 { Err(errno()) } else { Ok(()) }
}

/// Leaves the process immediately, without running atexit handlers or flushing stdio buffers that
/// belong to the parent's copy of the process image.
pub(crate) fn exit_now(code: i32) -> ! {
    // SAFETY: _exit is always safe to call.
    unsafe { libc::_exit(code) }
}

/// `prefix` followed by the decimal `fd`, NUL-terminated, in `buf` (no allocation: used after
/// fork). `None` when `fd` is negative or `buf` is too small.
pub(crate) fn fd_path_in<'a>(prefix: &[u8], fd: RawFd, buf: &'a mut [u8]) -> Option<&'a CStr> {
    let mut n = u32::try_from(fd).ok()?;
    let mut digits = [0u8; 10];
    let mut len = 0;
    loop {
        digits[len] = b'0' + u8::try_from(n % 10).unwrap_or(0);
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let end = prefix.len() + len;
    if buf.len() <= end {
        return None;
    }
    buf[..prefix.len()].copy_from_slice(prefix);
    for i in 0..len {
        buf[prefix.len() + i] = digits[len - 1 - i];
    }
    buf[end] = 0;
    CStr::from_bytes_until_nul(&buf[..=end]).ok()
}

/// Polls `fd` for readability until `deadline`; true when readable.
pub(crate) fn poll_readable(fd: RawFd, deadline: Option<std::time::Instant>) -> bool {
    poll_any_readable([fd], deadline)
}

/// Polls `fds` until one is readable or `deadline` passes; true when one is.
pub(crate) fn poll_any_readable<const N: usize>(
    fds: [RawFd; N],
    deadline: Option<std::time::Instant>,
) -> bool {
    let mut pfds = fds.map(|fd| libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    });
    loop {
        let timeout_ms = match deadline {
            None => -1,
            Some(d) => {
                let left = d.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() {
                    0
                } else {
                    i32::try_from(left.as_millis().max(1)).unwrap_or(i32::MAX)
                }
            }
        };
        // SAFETY: `N` valid pollfd structs.
        let n = unsafe { libc::poll(pfds.as_mut_ptr(), N as libc::nfds_t, timeout_ms) };
        if n > 0 {
            return true;
        }
        if n == 0 {
            return false;
        }
        if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return true;
        }
    }
}

/// Reports `layer` failed at `step` with `errno` on the report channel `chan`, then exits 126:
/// how every process of a call ends when a layer cannot be applied (rule 1).
pub(crate) fn fail(chan: RawFd, layer: crate::wire::error::Layer, step: u32, errno: i32) -> ! {
    use crate::wire::report::{self, Kind, Record};
    let _ = report::send(
        chan,
        Record::new(Kind::LayerFailed, layer as u32, step, errno, 0),
        None,
    );
    exit_now(126)
}
