//! One frame of the channel: a 4-byte big-endian length and that many bytes of JSON, sent as one
//! datagram with the descriptors it carries; and the two socket calls that move it.

use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// The largest frame, length included: a git invocation's argv and environment fit many times
/// over; anything larger is refused, not cut.
pub const MAX_FRAME: usize = 128 * 1024;

/// At most this many descriptors ride on one frame.
const MAX_FDS: usize = 4;

/// What can go wrong on the channel.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    /// The socket failed.
    #[error("host channel: {0}")]
    Io(#[from] std::io::Error),
    /// A frame was malformed, too large, or did not parse.
    #[error("host channel: {0}")]
    Frame(String),
    /// The other end closed before it answered.
    #[error("host channel: closed before an answer came")]
    Closed,
}

/// The frame of `msg`.
pub fn encode<T: Serialize>(msg: &T) -> Result<Vec<u8>, ChannelError> {
    let body = serde_json::to_vec(msg).map_err(|e| ChannelError::Frame(e.to_string()))?;
    if body.len() + 4 > MAX_FRAME {
        return Err(ChannelError::Frame(format!(
            "a frame of {} bytes is larger than {MAX_FRAME}",
            body.len() + 4
        )));
    }
    let len = u32::try_from(body.len()).map_err(|_| ChannelError::Frame("too large".into()))?;
    let mut out = Vec::with_capacity(body.len() + 4);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&body);
    Ok(out)
}

/// The message in `frame`; its length must be the frame's own.
pub fn decode<T: DeserializeOwned>(frame: &[u8]) -> Result<T, ChannelError> {
    let (head, body) = frame
        .split_first_chunk::<4>()
        .ok_or_else(|| ChannelError::Frame("a frame shorter than its length".into()))?;
    let len = usize::try_from(u32::from_be_bytes(*head)).unwrap_or(usize::MAX);
    if len != body.len() {
        return Err(ChannelError::Frame(format!(
            "a frame says {len} bytes and holds {}",
            body.len()
        )));
    }
    serde_json::from_slice(body).map_err(|e| ChannelError::Frame(e.to_string()))
}

/// Sends one frame with `fds` attached, without waiting (`dontwait`) or as the socket blocks.
pub(crate) fn send(
    sock: BorrowedFd<'_>,
    frame: &[u8],
    fds: &[BorrowedFd<'_>],
    dontwait: bool,
) -> std::io::Result<()> {
    let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut anc = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() && !anc.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(std::io::Error::other("too many descriptors for one frame"));
    }
    let mut flags = SendFlags::NOSIGNAL;
    if dontwait {
        flags |= SendFlags::DONTWAIT;
    }
    loop {
        match rustix::net::sendmsg(sock, &[IoSlice::new(frame)], &mut anc, flags) {
            Ok(n) if n == frame.len() => return Ok(()),
            Ok(_) => return Err(std::io::Error::other("a frame was sent in part")),
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

/// Receives one frame and the descriptors on it (close-on-exec); `None` at end of file. A
/// datagram cut short (larger than [`MAX_FRAME`]) is an error.
pub(crate) fn recv(
    sock: BorrowedFd<'_>,
    dontwait: bool,
) -> std::io::Result<Option<(Vec<u8>, Vec<OwnedFd>)>> {
    let mut buf = vec![0u8; MAX_FRAME];
    let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut flags = RecvFlags::CMSG_CLOEXEC;
    if dontwait {
        flags |= RecvFlags::DONTWAIT;
    }
    loop {
        let mut anc = RecvAncillaryBuffer::new(&mut space);
        let mut iov = [IoSliceMut::new(&mut buf)];
        match rustix::net::recvmsg(sock, &mut iov, &mut anc, flags) {
            Ok(msg) => {
                let mut fds = Vec::new();
                for m in anc.drain() {
                    if let RecvAncillaryMessage::ScmRights(rights) = m {
                        fds.extend(rights);
                    }
                }
                if msg.flags.contains(rustix::net::ReturnFlags::TRUNC)
                    || msg.flags.contains(rustix::net::ReturnFlags::CTRUNC)
                {
                    // Its descriptors are dropped (closed): the asker reads a refusal.
                    return Err(std::io::Error::from_raw_os_error(
                        rustix::io::Errno::MSGSIZE.raw_os_error(),
                    ));
                }
                if msg.bytes == 0 && fds.is_empty() {
                    return Ok(None);
                }
                buf.truncate(msg.bytes);
                return Ok(Some((buf, fds)));
            }
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

/// A `SOCK_SEQPACKET` pair, close-on-exec: a request's own answer socket.
pub(crate) fn pair() -> std::io::Result<(OwnedFd, OwnedFd)> {
    Ok(rustix::net::socketpair(
        rustix::net::AddressFamily::UNIX,
        rustix::net::SocketType::SEQPACKET,
        rustix::net::SocketFlags::CLOEXEC,
        None,
    )?)
}

/// Borrows each of `fds`.
pub(crate) fn borrow_all(fds: &[OwnedFd]) -> Vec<BorrowedFd<'_>> {
    fds.iter().map(AsFd::as_fd).collect()
}
