//! What a subscriber of a session receives, in order: the log's lines, the live items between
//! them, and the session's state as it changes. The types are the protocol's
//! ([`chock_protocol::handle`]), so the daemon's client gives the same ones.

pub use chock_protocol::handle::{Item, Logged, TaskOutcome};
