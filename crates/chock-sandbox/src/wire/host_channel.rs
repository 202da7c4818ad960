//! Where a call's host channel is ([`crate::Plan::host_channel`]), for the program inside the call
//! that speaks on it (the git shim, `chock askpass`). What is said on it is the session's
//! (`chock_session::channel`); the sandbox only makes the socket pair and puts the call's end here.

use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// The variable naming the descriptor, set in the command's environment by the sandbox.
pub const HOST_CHANNEL_ENV: &str = "CHOCK_CHANNEL_FD";

/// The descriptor number the command finds the channel at: the first after the standard streams,
/// as inherited sockets usually are.
pub const HOST_CHANNEL_FD: RawFd = 3;

/// The call's end of its host channel, taken from the descriptor [`HOST_CHANNEL_ENV`] names, in a
/// program inside a call. Checked to be a `SOCK_SEQPACKET` unix socket first, so a stale number
/// (a program started outside a call, a variable the agent set) is an error rather than some
/// other file written to. Marked close-on-exec: the program decides what it passes on.
///
/// Call it once: the descriptor is owned by the result.
pub fn inherited_host_channel() -> std::io::Result<OwnedFd> {
    let text = std::env::var(HOST_CHANNEL_ENV).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("{HOST_CHANNEL_ENV} is not set: not inside a Chock call with a host channel"),
        )
    })?;
    let fd: RawFd = text.trim().parse().map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{HOST_CHANNEL_ENV}={text} is not a descriptor number"),
        )
    })?;
    if fd < 0 {
        return Err(std::io::Error::from_raw_os_error(libc::EBADF));
    }
    let mut kind: libc::c_int = 0;
    let mut len = libc::socklen_t::try_from(std::mem::size_of::<libc::c_int>()).unwrap_or(4);
    // SAFETY: reads an int option into `kind`, sized by `len`; a descriptor that is not open or
    // not a socket is answered with an error and nothing is written.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TYPE,
            (&raw mut kind).cast(),
            &raw mut len,
        )
    };
    if rc == -1 {
        return Err(std::io::Error::last_os_error());
    }
    if kind != libc::SOCK_SEQPACKET {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("descriptor {fd} ({HOST_CHANNEL_ENV}) is not the host channel"),
        ));
    }
    // SAFETY: the descriptor is open (the option was read) and this process was handed it to own;
    // the caller takes it once.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: sets close-on-exec on the descriptor owned above.
    unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    Ok(owned)
}
