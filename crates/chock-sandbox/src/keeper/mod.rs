//! A session's keeper (docs/handover.md, "Background commands move"): a small process of Chock's
//! own that keeps a session's background calls running whoever owns the session.
//!
//! The owner starts a background call as any other, then hands the keeper the descriptors that
//! keep it ([`crate::KeptCall`]) over a unix socket (`SCM_RIGHTS`). From then on the keeper is the
//! only reader of the command's output: it numbers every byte of each stream from 0 and sends it
//! to the one follower of the call (the owner) as `out` frames that carry their offset; it keeps
//! each byte until the follower acknowledges it recorded it, and reads no more of a stream while
//! [`HOLD`] bytes of it wait for acknowledgement (the command then waits on a full pipe, and
//! nothing is lost). A new owner follows the call from the offsets it has recorded (the lengths of
//! its output files), receives a copy of the call's init pidfd (`SCM_RIGHTS`), and gets every
//! byte from there, once. The end (`end`: the wait status, read by the keeper) is sent after the
//! last byte, and the call is forgotten only once the follower says it recorded the end.
//!
//! The keeper holds no policy: it is given descriptors, handles and a timeout, never a rule, and
//! decides nothing. It is confined ([`confine_self`]): no new privileges, Landlock with no
//! filesystem access at all, and a seccomp allow-list of the few system calls it makes (no
//! `socket`, `connect`, `open`, `execve` or `kill`). It ends, killing what it keeps, when its
//! owner says the session ends (`finish`), or when no owner has held a connection to it for
//! [`ALONE`] (the owner died, or let go and nobody took the session up).
//!
//! Wire: `SOCK_SEQPACKET`, one message a packet: a 4-byte length (little endian), a JSON header
//! ([`Msg`]), then the payload (output bytes), with descriptors attached to the packet.

mod client;
mod confine;
mod serve;

use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Duration;

use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};
use serde::{Deserialize, Serialize};

pub use client::{
    Follow, Followed, Frame, KeeperLink, bind, connect, follow, inherited_listener, keep, start,
};
pub use confine::confine_self;
pub use serve::{serve, serve_alone};

/// The keeper's socket, in the session's directory.
pub const SOCKET: &str = "keeper.sock";
/// The keeper program's file name, installed beside `chock`.
pub const BINARY: &str = "chock-keeper";
/// How long a keeper with no owner connected waits for one before it ends what it keeps.
pub const ALONE: Duration = Duration::from_secs(30);
/// Bytes of one stream the keeper holds unacknowledged before it stops reading it.
pub const HOLD: usize = 4 << 20;
/// The most descriptors one packet carries: a kept call's five and its three doors.
pub(crate) const MAX_FDS: usize = 8;
/// The largest payload of one `out` frame.
pub(crate) const CHUNK: usize = 32 * 1024;

/// One message between an owner and the keeper (see the module).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "m", rename_all = "snake_case")]
pub enum Msg {
    /// Owner: keep this call (descriptors: lifeline, pidfd, status, stdout, stderr, then the
    /// doors `doors` says are there); this connection follows it from offset 0.
    Keep {
        /// The call's background handle (`bg-<call>`).
        handle: String,
        /// Milliseconds left of the call's wall-clock limit.
        timeout_ms: Option<u64>,
        /// Which of the call's doors follow the five (egress, channel, seccomp:
        /// [`crate::CallDoors::present`]).
        #[serde(default)]
        doors: [bool; 3],
    },
    /// Owner: which calls are kept? Answered with `jobs`.
    List,
    /// Keeper: the calls it keeps.
    Jobs {
        /// Their handles.
        handles: Vec<String>,
    },
    /// Owner: follow `handle` from these offsets of stdout and stderr (what it has recorded).
    Follow {
        /// The call's handle.
        handle: String,
        /// Offsets of stdout and stderr.
        from: [u64; 2],
    },
    /// Keeper: you follow `handle` (descriptors: a copy of its init's pidfd, then copies of
    /// the doors `doors` says are there, for the new owner to serve).
    Job {
        /// The call's handle.
        handle: String,
        /// Which doors follow the pidfd ([`crate::CallDoors::present`]).
        #[serde(default)]
        doors: [bool; 3],
    },
    /// Keeper: bytes of `stream` (0 stdout, 1 stderr) starting at `offset` (the payload).
    Out {
        /// Which stream.
        stream: u8,
        /// The offset of the payload's first byte.
        offset: u64,
    },
    /// Keeper: the call ended, after the last byte of each stream.
    End {
        /// The command's wait status; `None` when its init was killed before it wrote one.
        status: Option<i32>,
        /// Killed at its wall-clock limit.
        timed_out: bool,
    },
    /// Owner: recorded `stream` up to `upto`.
    Ack {
        /// Which stream.
        stream: u8,
        /// The offset after the last byte recorded.
        upto: u64,
    },
    /// Owner: recorded the end; the keeper forgets the call.
    Recorded,
    /// Owner: the session ends; kill what is kept and exit.
    Finish,
    /// Keeper: what was asked cannot be done.
    Refused {
        /// Why, in words.
        reason: String,
    },
}

/// Sends `msg` with `payload` and `fds` as one packet.
pub(crate) fn send(
    sock: BorrowedFd<'_>,
    msg: &Msg,
    payload: &[u8],
    fds: &[BorrowedFd<'_>],
) -> std::io::Result<()> {
    let header = serde_json::to_vec(msg).map_err(std::io::Error::other)?;
    let len = u32::try_from(header.len())
        .map_err(|_| std::io::Error::other("keeper header too long"))?
        .to_le_bytes();
    let iov = [
        IoSlice::new(&len),
        IoSlice::new(&header),
        IoSlice::new(payload),
    ];
    let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut anc = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() && !anc.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(std::io::Error::other("too many descriptors"));
    }
    loop {
        match rustix::net::sendmsg(sock, &iov, &mut anc, SendFlags::NOSIGNAL) {
            Ok(_) => return Ok(()),
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

/// One packet received: its message, payload and descriptors; `None` at end of file.
pub(crate) type Packet = (Msg, Vec<u8>, Vec<OwnedFd>);

/// Receives one packet (blocking unless the socket is not).
pub(crate) fn recv(sock: BorrowedFd<'_>) -> std::io::Result<Option<Packet>> {
    let mut buf = vec![0u8; CHUNK + 4096];
    let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let (n, fds) = loop {
        let mut anc = RecvAncillaryBuffer::new(&mut space);
        let mut iov = [IoSliceMut::new(&mut buf)];
        match rustix::net::recvmsg(sock, &mut iov, &mut anc, RecvFlags::CMSG_CLOEXEC) {
            Ok(msg) => {
                let mut fds = Vec::new();
                for m in anc.drain() {
                    if let RecvAncillaryMessage::ScmRights(rights) = m {
                        fds.extend(rights);
                    }
                }
                break (msg.bytes, fds);
            }
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    };
    if n == 0 {
        return Ok(None);
    }
    let bad = || std::io::Error::other("a malformed keeper message");
    let len = usize::try_from(u32::from_le_bytes(
        buf.get(..4)
            .ok_or_else(bad)?
            .try_into()
            .map_err(|_| bad())?,
    ))
    .map_err(|_| bad())?;
    let header = buf.get(4..4 + len).ok_or_else(bad)?;
    let msg: Msg = serde_json::from_slice(header).map_err(|_| bad())?;
    let payload = buf[4 + len..n].to_vec();
    Ok(Some((msg, payload, fds)))
}

/// The path a unix socket in `dir` is reached by, through a descriptor of `dir` (a socket path
/// is limited to 108 bytes; a session's directory may be longer): keep the descriptor open while
/// the path is used.
pub(crate) fn socket_path(dir: &std::path::Path) -> std::io::Result<(OwnedFd, String)> {
    let fd = rustix::fs::open(
        dir,
        rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?;
    let path = format!(
        "/proc/self/fd/{}/{SOCKET}",
        std::os::fd::AsRawFd::as_raw_fd(&fd.as_fd())
    );
    Ok((fd, path))
}
