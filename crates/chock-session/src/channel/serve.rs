//! The host's end: each request read from the call's channel is answered by a [`Handler`] on the
//! caller's runtime, many at once, each answer written on the socket that came with its request.

use std::os::fd::{AsFd, OwnedFd};

use chock_sandbox::BoxFuture;
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;

use super::frame::{self, ChannelError};
use super::{Answer, Request};

/// One answer and the descriptors it carries.
#[derive(Debug)]
pub struct Reply {
    /// What is answered.
    pub answer: Answer,
    /// Descriptors sent with it (the real git of an allowed [`Request::Git`]).
    pub fds: Vec<OwnedFd>,
}

impl Reply {
    /// An answer without descriptors.
    pub fn plain(answer: Answer) -> Reply {
        Reply {
            answer,
            fds: Vec::new(),
        }
    }

    fn refused(reason: impl Into<String>) -> Reply {
        Reply::plain(Answer::Refused {
            reason: reason.into(),
        })
    }
}

/// Who answers a call's requests (the session's, `handler.rs`).
pub trait Handler: Sync {
    /// The answer to `request` from the process `peer` (its host pid, from the credentials of
    /// the socket it sent for the answer; `None` when the kernel gave none). Must not fail: a
    /// request that cannot be served is answered [`Answer::Refused`] or refused as an act.
    fn answer(&self, request: Request, peer: Option<u32>) -> BoxFuture<'_, Reply>;
}

/// Serves `channel`, the host's end of a call's channel, until every process of the call has
/// closed its end (end of file) or the returned future is dropped (the call ended: the session
/// drops it, and with it the socket). Requests are answered concurrently. A request that does not
/// parse, comes without exactly one answer socket, or is too large is answered `Refused` (when
/// it has a socket to answer on) and the channel goes on; only an error of the channel itself
/// ends it.
pub async fn serve(channel: OwnedFd, handler: &dyn Handler) -> Result<(), ChannelError> {
    let channel = chock_sandbox::watch_host_channel(channel)?;
    let mut answering = FuturesUnordered::new();
    loop {
        tokio::select! {
            ready = channel.readable() => {
                let mut guard = ready?;
                match guard.try_io(|fd| frame::recv(fd.get_ref().as_fd(), true)) {
                    Err(_would_block) => {}
                    Ok(Ok(None)) => return Ok(()),
                    Ok(Ok(Some((bytes, fds)))) => answering.push(answer_one(handler, bytes, fds)),
                    Ok(Err(e)) if e.raw_os_error() == Some(libc_emsgsize()) => {}
                    Ok(Err(e)) => return Err(e.into()),
                }
            }
            Some(()) = answering.next(), if !answering.is_empty() => {}
        }
    }
}

/// A datagram cut short is reported as an error of that frame only.
fn libc_emsgsize() -> i32 {
    rustix::io::Errno::MSGSIZE.raw_os_error()
}

/// Answers one request on the socket that came with it.
async fn answer_one(handler: &dyn Handler, bytes: Vec<u8>, mut fds: Vec<OwnedFd>) {
    if fds.len() != 1 {
        // No socket to answer on (or several): nothing can be said back; dropping them closes
        // them, which the asker reads as a refusal.
        return;
    }
    let Some(reply_to) = fds.pop() else { return };
    let peer = rustix::net::sockopt::socket_peercred(&reply_to)
        .ok()
        .and_then(|cred| u32::try_from(cred.pid.as_raw_nonzero().get()).ok());
    let reply = match frame::decode::<Request>(&bytes) {
        Ok(request) => handler.answer(request, peer).await,
        Err(e) => Reply::refused(format!("the request was not understood: {e}")),
    };
    let encoded = frame::encode(&reply.answer).or_else(|e| {
        frame::encode(&Answer::Refused {
            reason: e.to_string(),
        })
    });
    if let Ok(bytes) = encoded {
        // The asker's socket is its own and empty: one datagram never waits. An asker gone
        // meanwhile is nobody to tell.
        let _ = frame::send(
            reply_to.as_fd(),
            &bytes,
            &frame::borrow_all(&reply.fds),
            true,
        );
    }
}
