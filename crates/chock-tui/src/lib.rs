//! Bare `chock` at a terminal: a ratatui interface over the session runtime.
//!
//! It is one more client of the runtime, like the daemon's browser UI: it submits tasks and
//! follow-ups, interrupts, answers questions by id through an attached `Client`,
//! and reviews, applies and undoes through the same functions the daemon uses
//! ([`chock_runtime::review`]), so an apply here is decided and logged exactly as anywhere else.
//! A session the daemon runs is driven through its client instead ([`driver::daemon`]).
//!
//! What it draws:
//!
//! - an inline viewport at the bottom of the terminal (the live text, a running command's output,
//!   the question, the status line and the input), with every finished transcript line inserted
//!   above it into the terminal's own scrollback, so the conversation stays readable after it
//!   exits and inside tmux;
//! - the diff and the sessions list on the alternate screen while they are open.
//!
//! Everything the agent, a command or the model wrote is escaped by the one escaper
//! ([`chock_protocol::text`]) before it is drawn, and the question is drawn in an
//! area of the viewport the transcript never draws into, in a frame and colours no escaped text
//! can produce.
#![forbid(unsafe_code)]
// No library makes an async runtime or blocks on one (the workspace's clippy.toml).
#![cfg_attr(not(test), deny(clippy::disallowed_methods))]

mod backend;
pub mod driver;
mod error;
pub mod feed;
pub mod keys;
pub mod state;
pub mod term;
pub mod view;

pub use error::TuiError;
pub use term::{Options, Start, run};
