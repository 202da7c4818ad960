//! The session protocol, as types.
//!
//! Three parts, one crate, so that a writer, a reader and a client cannot disagree about a shape:
//!
//! - [`log`]: one payload type per [`EventKind`] of the session log. The log writer appends these
//!   and every reader (`chock sessions show`, verify, replay, resume, the daemon) parses them back;
//!   docs/log.md's event reference is generated from them ([`doc::log_reference`]) and a test fails
//!   when the page drifts.
//! - [`live`]: what a client sees while a session runs (the CLI's `--json` lines, later the
//!   daemon's notifications): a turn and each item in it.
//! - [`ops`]: what a client sends to a running session (input, interrupt, an answer to a
//!   question, a narrowing, end).
//! - [`handle`]: what a session's handle gives (its items, an operation's reply, a snapshot),
//!   in-process or over the daemon alike.
//! - [`view`]: the one fold of a session's log events into what every front end shows of it.
//! - [`rpc`]: the daemon's wire protocol (`chock serve`): JSON-RPC frames, its methods and
//!   notifications; docs/daemon.md's method reference is generated from them.
//!
//! [`PROTOCOL_VERSION`] names the client-facing shape; [`schema::client_schema`] exports it as JSON
//! Schema.
#![forbid(unsafe_code)]
// No library makes an async runtime or blocks on one (the workspace's clippy.toml).
#![cfg_attr(not(test), deny(clippy::disallowed_methods))]

pub mod doc;
pub mod handle;
mod kind;
pub mod live;
pub mod log;
pub mod ops;
pub mod rpc;
pub mod schema;
pub mod text;
pub mod view;

pub use kind::{Durability, EventKind, UnknownKind};
pub use log::{EventData, Payload, PayloadError};

/// The tool the model names its session with: the session's title is its last call's `title`
/// ([`view::SessionView::title`]). The agent's tool registers under this name.
pub const TITLE_TOOL: &str = "set_title";

/// The version of the client-facing protocol ([`live`] and [`ops`]). A change that removes or
/// renames a field, or changes its meaning, bumps it; adding an optional field does not.
pub const PROTOCOL_VERSION: u32 = 1;
