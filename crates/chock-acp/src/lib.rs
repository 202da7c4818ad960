//! `chock acp`: Chock as an agent for editors, speaking the Agent Client Protocol (ACP: JSON-RPC
//! 2.0 over stdio, one frame a line — what Zed, JetBrains and Neovim plugins drive agents with).
//!
//! It is a client of the session's handle (`chock_runtime`), like the daemon and the terminal:
//! `session/new` and `session/load` start or resume a session; `session/prompt` sends the prompt
//! as an operation and streams the live items as `session/update`s ([`live`]); `session/cancel`
//! interrupts the turn; the decision pipeline's questions become `session/request_permission`
//! with yes once / yes for this session / no, and a question the editor does not answer is a
//! refusal (`permission`).
//!
//! The editor is never used to act. Chock advertises no use of the client's `fs/*` or
//! `terminal/*` methods and never calls them, whatever the client offers: commands run in
//! Chock's sandbox and files are written in the session's throwaway copy. At the end of a turn
//! that changed files the editor is shown the diff and asked whether to apply it; a yes is the
//! `workspace.apply` act, digest-pinned, decided and logged like any other (`apply`).
//!
//! The wire types are a small hand-written [`schema`] pinned to ACP protocol version 1; see
//! docs/editors.md for what maps to what.
#![forbid(unsafe_code)]
// No library makes an async runtime or blocks on one (the workspace's clippy.toml).
#![cfg_attr(not(test), deny(clippy::disallowed_methods))]

mod apply;
pub mod live;
mod permission;
mod replay;
pub mod rpc;
pub mod schema;
mod server;
mod session;

use std::path::PathBuf;
use std::time::Duration;

pub use server::serve;

/// How `chock acp` makes its sessions.
#[derive(Debug, Clone)]
pub struct Options {
    /// config.toml, as loaded.
    pub config: chock_runtime::Config,
    /// The provider (`--provider`; `session/new`'s `_meta.chock.provider` wins; default:
    /// config.toml's `default_provider`).
    pub provider: Option<String>,
    /// The model (`--model`; `_meta.chock.model` wins).
    pub model: Option<String>,
    /// Where session directories live (default: the user's state directory).
    pub sessions_root: Option<PathBuf>,
    /// At most this many turns per prompt.
    pub max_turns: u32,
    /// How long a question waits for the editor before it is refused (`None`: for ever).
    pub answer_timeout: Option<Duration>,
}

/// Why serving stopped.
#[derive(Debug, thiserror::Error)]
pub enum AcpError {
    /// Standard input could not be read.
    #[error("reading from the client: {0}")]
    Read(#[source] std::io::Error),
    /// Standard output could not be written.
    #[error("writing to the client: {0}")]
    Write(#[source] std::io::Error),
}
