//! The channel from the sandbox's setup processes to the host: fixed-size records on a
//! SOCK_SEQPACKET socket, some carrying a descriptor (SCM_RIGHTS).
//!
//! The child side is async-signal-safe (stack buffers only). The host reads until end of file,
//! which happens once every child copy of the socket is closed: the setup process and the init
//! close theirs explicitly, the command's copy is close-on-exec, so end of file means "the command
//! is executing" unless a failure record came first.

use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// A record's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum Kind {
    /// A layer failed: `layer`, `step`, `errno`.
    LayerFailed = 1,
    /// Every layer was on but execve failed: `errno`.
    ExecFailed = 2,
    /// The init's pidfd (attached) and host pid (`value`).
    InitPid = 3,
    /// The proxy listener (attached).
    ProxyListener = 4,
    /// The setup process could not join the call's cgroup (`errno`): its limits are off.
    CgroupNotJoined = 5,
    /// The session's overlay, made by its helper process (the detached mount, attached).
    SharedOverlay = 6,
    /// A session call's setup process, from the session init that forked it (its pidfd attached).
    SetupPid = 7,
    /// The session init built the session's tree and waits for calls.
    SessionReady = 8,
    /// The listener of the call's seccomp filter (attached), from the call's init.
    SeccompListener = 9,
}

/// One message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub(crate) struct Record {
    pub kind: u32,
    pub layer: u32,
    pub step: u32,
    pub errno: i32,
    pub value: i64,
}

const RECORD_LEN: usize = std::mem::size_of::<Record>();
/// Size of one descriptor in a control message.
const FD_LEN: u32 = 4;

impl Record {
    pub(crate) fn new(kind: Kind, layer: u32, step: u32, errno: i32, value: i64) -> Self {
        Record {
            kind: kind as u32,
            layer,
            step,
            errno,
            value,
        }
    }

    fn to_bytes(self) -> [u8; RECORD_LEN] {
        let mut out = [0u8; RECORD_LEN];
        out[0..4].copy_from_slice(&self.kind.to_ne_bytes());
        out[4..8].copy_from_slice(&self.layer.to_ne_bytes());
        out[8..12].copy_from_slice(&self.step.to_ne_bytes());
        out[12..16].copy_from_slice(&self.errno.to_ne_bytes());
        out[16..24].copy_from_slice(&self.value.to_ne_bytes());
        out
    }

    fn from_bytes(b: &[u8; RECORD_LEN]) -> Self {
        let u32_at = |i: usize| u32::from_ne_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let mut v = [0u8; 8];
        v.copy_from_slice(&b[16..24]);
        Record {
            kind: u32_at(0),
            layer: u32_at(4),
            step: u32_at(8),
            errno: i32::from_ne_bytes(u32_at(12).to_ne_bytes()),
            value: i64::from_ne_bytes(v),
        }
    }
}

/// Room for one descriptor's control message, aligned for `cmsghdr`.
#[repr(C, align(8))]
struct CmsgBuf([u8; 64]);

/// `len` as this target's `msghdr.msg_controllen` takes it (`size_t` with glibc, `socklen_t` with
/// musl, the guest's init's): `EINVAL` should it not fit, never a cut length.
fn control_len<T: TryFrom<usize>>(len: usize) -> Result<T, i32> {
    T::try_from(len).map_err(|_| libc::EINVAL)
}

/// Sends one record (and optionally a descriptor). Async-signal-safe.
pub(crate) fn send(sock: RawFd, record: Record, fd: Option<RawFd>) -> Result<(), i32> {
    let bytes = record.to_bytes();
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr().cast_mut().cast(),
        iov_len: bytes.len(),
    };
    let mut cmsg = CmsgBuf([0; 64]);
    // SAFETY: msghdr is plain data; zero is a valid initial value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &raw mut iov;
    msg.msg_iovlen = 1;
    if let Some(fd) = fd {
        // SAFETY: CMSG_SPACE only computes a size.
        let space = unsafe { libc::CMSG_SPACE(FD_LEN) } as usize;
        msg.msg_control = cmsg.0.as_mut_ptr().cast();
        msg.msg_controllen = control_len(space)?;
        // SAFETY: msg_control points at a buffer of `space` bytes (<= 64), so the first header fits.
        unsafe {
            let hdr = libc::CMSG_FIRSTHDR(&raw const msg);
            (*hdr).cmsg_level = libc::SOL_SOCKET;
            (*hdr).cmsg_type = libc::SCM_RIGHTS;
            (*hdr).cmsg_len = libc::CMSG_LEN(FD_LEN) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(hdr).cast::<RawFd>(), fd);
        }
    }
    loop {
        // SAFETY: `msg` points at live buffers for the duration of the call.
        let n = unsafe { libc::sendmsg(sock, &raw const msg, libc::MSG_NOSIGNAL) };
        if n >= 0 {
            return Ok(());
        }
        // No allocation: an OS error is stored inline.
        let e = std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO);
        if e != libc::EINTR {
            return Err(e);
        }
    }
}

/// Receives one record and its descriptor, or `None` at end of file.
pub(crate) fn recv(sock: RawFd) -> std::io::Result<Option<(Record, Option<OwnedFd>)>> {
    let mut bytes = [0u8; RECORD_LEN];
    let mut iov = libc::iovec {
        iov_base: bytes.as_mut_ptr().cast(),
        iov_len: bytes.len(),
    };
    let mut cmsg = CmsgBuf([0; 64]);
    // SAFETY: msghdr is plain data; zero is a valid initial value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &raw mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cmsg.0.as_mut_ptr().cast();
    msg.msg_controllen = control_len(cmsg.0.len()).map_err(std::io::Error::from_raw_os_error)?;
    let n = loop {
        // SAFETY: `msg` points at live buffers for the duration of the call.
        let n = unsafe { libc::recvmsg(sock, &raw mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n >= 0 {
            break n;
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(err);
        }
    };
    if n == 0 {
        return Ok(None);
    }
    let mut fd = None;
    // SAFETY: the kernel filled msg_control/msg_controllen; CMSG_* walk within it.
    unsafe {
        let mut hdr = libc::CMSG_FIRSTHDR(&raw const msg);
        while !hdr.is_null() {
            if (*hdr).cmsg_level == libc::SOL_SOCKET && (*hdr).cmsg_type == libc::SCM_RIGHTS {
                let raw = std::ptr::read_unaligned(libc::CMSG_DATA(hdr).cast::<RawFd>());
                fd = Some(OwnedFd::from_raw_fd(raw));
            }
            hdr = libc::CMSG_NXTHDR(&raw const msg, hdr);
        }
    }
    if usize::try_from(n).ok() != Some(RECORD_LEN) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "short record from the sandbox",
        ));
    }
    Ok(Some((Record::from_bytes(&bytes), fd)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn records_and_descriptors_cross_a_socketpair() {
        let (a, b) = std::os::unix::net::UnixDatagram::pair().unwrap();
        let file = std::fs::File::open("/dev/null").unwrap();
        let rec = Record::new(Kind::InitPid, 3, 7, -2, 1234);
        send(a.as_raw_fd(), rec, Some(file.as_raw_fd())).unwrap();
        let (got, fd) = recv(b.as_raw_fd()).unwrap().unwrap();
        assert_eq!(got, rec);
        assert!(fd.is_some());
    }
}
