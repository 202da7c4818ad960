//! The entry points of a call: each makes the call ready (`ready.rs`), then starts it; the started
//! call is a [`SandboxChild`] (`running.rs`).

pub use crate::host::call_io::StdioMode;
use crate::host::ready::ReadyCall;
pub use crate::host::running::SandboxChild;
use crate::host::shared_overlay::SharedOverlay;
use crate::host::socket_index::SocketIndex;
use crate::wire::error::SandboxError;
use crate::wire::plan::Plan;

/// Forks, builds every layer in the child and executes the plan's command. Returns once the command
/// is executing (every layer on), or with the error of the first layer that could not be applied.
/// A plan whose workspace is a session's shared overlay is spawned with [`spawn_shared`].
pub fn spawn(plan: &Plan, stdio: StdioMode) -> Result<SandboxChild, SandboxError> {
    spawn_inner(plan, stdio, None, None)
}

/// As [`spawn`], for a plan whose workspace is `overlay`, the session's one overlay instance
/// ([`Plan::shared_overlay`]): the call attaches a clone of it instead of mounting an overlay of its
/// own, and holds it until the call is reaped. Fails the call (layer `workspace`) when the instance
/// cannot be made or attached.
pub fn spawn_shared(
    plan: &Plan,
    stdio: StdioMode,
    overlay: &SharedOverlay,
) -> Result<SandboxChild, SandboxError> {
    spawn_inner(plan, stdio, Some(overlay), None)
}

/// As [`spawn`] (or [`spawn_shared`] with `overlay`), for one call of a session that keeps
/// `sockets`: the host sockets to mask under the plan's declared paths come from that index, kept
/// current between calls, instead of a walk of every declared path per call.
pub fn spawn_in_session(
    plan: &Plan,
    stdio: StdioMode,
    overlay: Option<&SharedOverlay>,
    sockets: &SocketIndex,
) -> Result<SandboxChild, SandboxError> {
    spawn_inner(plan, stdio, overlay, Some(sockets))
}

/// As [`spawn_in_session`], split in two: everything the host works out first, here, and the
/// start itself ([`ReadyCall::start`]) — so a session can make the call ready while its decision
/// is synced (ready.rs).
pub fn ready_in_session<'a>(
    plan: &'a Plan,
    overlay: Option<&SharedOverlay>,
    sockets: &'a SocketIndex,
) -> Result<ReadyCall<'a>, SandboxError> {
    crate::host::ready::ready(plan, overlay, Some(sockets))
}

fn spawn_inner(
    plan: &Plan,
    stdio: StdioMode,
    overlay: Option<&SharedOverlay>,
    sockets: Option<&SocketIndex>,
) -> Result<SandboxChild, SandboxError> {
    crate::host::ready::ready(plan, overlay, sockets)?.start(stdio)
}
