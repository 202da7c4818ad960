//! The host's end of a guest call's host channel (docs/microvm.md, "The host channel"): the
//! guest's init relays each request a process of the call sends on its descriptor 3 as a
//! `CHANNEL_ASK` frame, and each is sent here, as the datagram it was, on a socket pair whose
//! other end the session serves with the same handler as a local call's
//! ([`chock_sandbox::CallHandle::take_host_channel`]). The answer goes back as a
//! `CHANNEL_ANSWER` frame. Descriptors do not cross the port: the session's handler knows the
//! call is a guest's and puts none on its answers.

use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use chock_guest::{net_frame, tag};
use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvFlags, SendAncillaryBuffer, SendAncillaryMessage,
    SendFlags, SocketFlags, SocketType,
};

use crate::machine::send;

/// The largest request or answer (the session's channel frame limit).
const MAX_DATAGRAM: usize = 128 * 1024;

/// At most this many requests of one call wait for an answer at once; another is answered
/// empty (a refusal) at once, so a guest cannot make the host hold a thread per request.
const MAX_WAITING: usize = 64;

/// The relay's side of one guest call's channel.
#[derive(Debug)]
pub(crate) struct HostChannel {
    ours: Arc<OwnedFd>,
    writer: Arc<Mutex<UnixStream>>,
    waiting: Arc<AtomicUsize>,
}

fn seqpacket_pair() -> std::io::Result<(OwnedFd, OwnedFd)> {
    Ok(rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )?)
}

impl HostChannel {
    /// The relay, answering on `writer`, and the session's end of the channel.
    pub(crate) fn pair(writer: Arc<Mutex<UnixStream>>) -> std::io::Result<(HostChannel, OwnedFd)> {
        let (ours, session) = seqpacket_pair()?;
        let relay = HostChannel {
            ours: Arc::new(ours),
            writer,
            waiting: Arc::new(AtomicUsize::new(0)),
        };
        Ok((relay, session))
    }

    /// Handles one `CHANNEL_ASK` frame: the request is sent to the session's handler with a
    /// socket of its own for the answer, which is read on a thread and sent back to the guest.
    pub(crate) fn ask(&self, body: &[u8]) {
        let Some((id, request)) = chock_guest::net_parts(body) else {
            return;
        };
        let unanswered = |writer: &Mutex<UnixStream>| {
            let _ = send(writer, &net_frame(tag::CHANNEL_ANSWER, id, &[]));
        };
        if request.len() > MAX_DATAGRAM
            || self.waiting.fetch_add(1, Ordering::SeqCst) >= MAX_WAITING
        {
            self.waiting.fetch_sub(1, Ordering::SeqCst);
            return unanswered(&self.writer);
        }
        let (ours, writer, waiting) =
            (self.ours.clone(), self.writer.clone(), self.waiting.clone());
        let request = request.to_vec();
        std::thread::spawn(move || {
            let answer = ask_once(&ours, &request).unwrap_or_default();
            let _ = send(&writer, &net_frame(tag::CHANNEL_ANSWER, id, &answer));
            waiting.fetch_sub(1, Ordering::SeqCst);
        });
    }
}

/// Sends `request` on `chan` with a new answer socket and waits for its one answer (empty when
/// the handler closed it without one). Descriptors on the answer are dropped.
fn ask_once(chan: &OwnedFd, request: &[u8]) -> std::io::Result<Vec<u8>> {
    let (mine, theirs) = seqpacket_pair()?;
    let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut anc = SendAncillaryBuffer::new(&mut space);
    let fds = [theirs.as_fd()];
    anc.push(SendAncillaryMessage::ScmRights(&fds));
    rustix::net::sendmsg(
        chan,
        &[IoSlice::new(request)],
        &mut anc,
        SendFlags::NOSIGNAL,
    )?;
    drop(theirs);
    let mut buf = vec![0u8; MAX_DATAGRAM];
    let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(4))];
    loop {
        let mut anc = RecvAncillaryBuffer::new(&mut space);
        let mut iov = [IoSliceMut::new(&mut buf)];
        match rustix::net::recvmsg(&mine, &mut iov, &mut anc, RecvFlags::CMSG_CLOEXEC) {
            Ok(msg) => {
                // Closed with the ancillary buffer as it goes.
                anc.drain().for_each(drop);
                if msg.flags.contains(rustix::net::ReturnFlags::TRUNC) {
                    return Ok(Vec::new());
                }
                return Ok(buf[..msg.bytes].to_vec());
            }
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}
