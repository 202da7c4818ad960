//! The asking end, for a program inside a call (the git shim, `chock askpass`): synchronous, one
//! question at a time per [`Client::ask`], safe to use from several processes at once.

use std::os::fd::{AsFd, OwnedFd};

use super::frame::{self, ChannelError};
use super::{Answer, Request};

/// The call's end of its host channel.
#[derive(Debug)]
pub struct Client {
    chan: OwnedFd,
}

impl Client {
    /// A client on `chan`, the call's end of the channel.
    pub fn new(chan: OwnedFd) -> Client {
        Client { chan }
    }

    /// The client of the call this process runs in: the descriptor the sandbox named in
    /// `CHOCK_CHANNEL_FD` ([`chock_sandbox::inherited_host_channel`]). Once per process.
    pub fn from_call() -> Result<Client, ChannelError> {
        Ok(Client::new(chock_sandbox::inherited_host_channel()?))
    }

    /// The channel's descriptor (a program that executes another and wants it to inherit the
    /// channel clears its close-on-exec flag).
    pub fn channel(&self) -> &OwnedFd {
        &self.chan
    }

    /// Asks `request` and waits for its answer, and the descriptors the answer carries. The answer
    /// comes on a socket made for this request alone (see the module of the channel), so other
    /// processes asking at the same time get their own answers. The host gone, or closing without
    /// an answer, is [`ChannelError::Closed`]: the caller must take that as a refusal.
    pub fn ask(&self, request: &Request) -> Result<(Answer, Vec<OwnedFd>), ChannelError> {
        let bytes = frame::encode(request)?;
        let (mine, theirs) = frame::pair()?;
        frame::send(self.chan.as_fd(), &bytes, &[theirs.as_fd()], false)?;
        drop(theirs);
        match frame::recv(mine.as_fd(), false)? {
            Some((bytes, fds)) => Ok((frame::decode(&bytes)?, fds)),
            None => Err(ChannelError::Closed),
        }
    }
}
