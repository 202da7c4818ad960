//! A client of the Chock daemon (`chock serve`), and all a new front end needs to drive a session
//! in it.
//!
//! Two levels:
//!
//! - [`DaemonClient`]: one connection, over the daemon's unix socket or its loopback HTTP port,
//!   speaking the protocol's JSON-RPC frames ([`chock_protocol::rpc`]) on a WebSocket.
//! - [`RemoteSession`]: one session in the daemon behind the same three calls as the session
//!   runtime's in-process handle — [`RemoteSession::send`] an [`Op`],
//!   [`RemoteSession::subscribe`] from a seq, [`RemoteSession::snapshot`] — giving the same types
//!   ([`chock_protocol::handle`]: [`Item`], [`Reply`], [`Snapshot`]), so a front end reads a
//!   session the same way in-process and over the socket.
//!
//! The crate depends on the protocol and on where the socket is ([`chock_dirs`]), not on anything
//! that runs a session; a test over `cargo metadata` keeps it so. `examples/watch.rs` is a whole
//! client.
#![forbid(unsafe_code)]
// No library makes an async runtime or blocks on one (the workspace's clippy.toml).
#![cfg_attr(not(test), deny(clippy::disallowed_methods))]

mod connection;
pub mod handover;
mod remote;

pub use chock_protocol::handle::{Item, Logged, Reply, Snapshot, TaskOutcome};
pub use chock_protocol::ops::Op;
pub use connection::{ClientError, DaemonClient, Stream};
pub use remote::{RemoteSession, RemoteSubscription, Target};
