//! Errors of a session.

use std::path::PathBuf;

/// What went wrong opening a session or running a call.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The project directory cannot be used (it does not resolve, or is not a directory).
    #[error("project {path}: {source}")]
    Project {
        /// The project directory.
        path: PathBuf,
        /// What the filesystem said.
        source: std::io::Error,
    },
    /// The policy (chock.toml, the org bundle) cannot be loaded.
    #[error(transparent)]
    Policy(#[from] chock_policy::PolicyError),
    /// The session's log failed.
    #[error(transparent)]
    Log(#[from] chock_log::LogError),
    /// The session's workspace failed.
    #[error(transparent)]
    Workspace(#[from] chock_workspace::WorkspaceError),
    /// The sandbox could not run the call (a layer, the plan, the host side).
    #[error(transparent)]
    Sandbox(#[from] chock_sandbox::SandboxError),
    /// The call's egress proxy could not be served.
    #[error(transparent)]
    Broker(#[from] chock_broker::BrokerError),
    /// The decision pipeline could not settle the call's act (it did not run).
    #[error(transparent)]
    Decide(#[from] chock_decide::DecideError),
    /// The call's output could not be read, or the task waiting on the call stopped.
    #[error("reading the call's output: {0}")]
    Output(std::io::Error),
    /// A fork was asked of a turn that cannot be forked (bad input).
    #[error(transparent)]
    Fork(#[from] crate::fork::ForkRefusal),
    /// A session opened for one call (`Calls::One`, `chock exec`) was asked for a second one.
    #[error("this session was opened for one call and has made it")]
    OneCallMade,
    /// A service (an MCP server) would see a place the agent's commands write: what it runs could
    /// be the agent's.
    #[error(
        "{seen} holds or lies inside `[sandbox] write` path {}, which the agent's commands write: a server must not see it (what it runs could be the agent's); keep the server's read and cache paths apart from the agent's write paths",
        write.display()
    )]
    ServiceSeesAgentWrites {
        /// The place the service would see, in words.
        seen: String,
        /// The agent's write path.
        write: PathBuf,
    },
    /// Nix on the host, for the dev shell the call needs first: only an interrupt of that call
    /// ends the call this way (other failures are logged and the session goes on without one).
    #[error(transparent)]
    Nix(#[from] crate::nix::NixError),
    /// A session's log cannot be taken up again (resume).
    #[error("the session cannot be resumed: {0}")]
    Resume(String),
    /// The microVM guest's snapshot could not be taken, kept or linked into a fork.
    #[error("the microVM guest's snapshot: {0}")]
    GuestSnapshot(String),
}
