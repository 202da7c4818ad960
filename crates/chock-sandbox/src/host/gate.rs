//! The gate a call built ahead of its decision waits at (`ready.rs`): a pipe whose read end the
//! call's init reads before it starts the command, and whose write end is opened once the
//! decision is durable (rule 3). A leaf of the host side, so the execution seam (`confine.rs`)
//! names it without depending on how a call is started.

use std::os::fd::{AsRawFd, OwnedFd};

use crate::wire::error::SandboxError;

/// The gate a built call's init waits at before it starts the command ([`crate::ReadyCall::build`]):
/// the read end of a pipe whose write end is the [`GateKey`].
#[derive(Debug)]
pub struct Gate(pub(crate) OwnedFd);

/// What lets a built call's command start: opened once the call's decision is durable (rule 3),
/// dropped unopened when it was refused (the init then ends without starting anything).
#[derive(Debug)]
pub struct GateKey(OwnedFd);

/// A new gate and its key.
pub fn gate() -> Result<(Gate, GateKey), SandboxError> {
    let (r, w) = crate::host::plumbing::pipe()?;
    Ok((Gate(r), GateKey(w)))
}

impl GateKey {
    /// Lets the command start: one byte through the gate. A write that fails means the init is
    /// gone already (a layer failed, or the call was dropped): the start's report says why.
    pub fn open(self) {
        let _ = crate::child::sys::write_all(self.0.as_raw_fd(), b"g");
    }
}

impl Gate {
    /// Waits until the key is opened (true) or dropped unopened (false), on this thread: for a
    /// confiner that builds its call elsewhere (a microVM guest, which is sent the call only once
    /// its decision is durable) rather than handing the gate to a local init.
    pub fn wait_opened(self) -> bool {
        use std::io::Read;
        let mut byte = [0u8; 1];
        let mut read = std::fs::File::from(self.0);
        loop {
            match read.read(&mut byte) {
                Ok(n) => return n == 1,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return false,
            }
        }
    }
}
