//! `chock`: the command line. A thin edge: every command parses its arguments, calls a library crate,
//! and turns the outcome into output and an exit status (see `exit.rs` and docs/cli.md).
//!
//! It is built as two binaries from this one library (docs/cli.md, "Two binaries"):
//! - `chock-full` holds every command (`cli.rs`);
//! - `chock`, the one people and scripts run, runs `chock exec` itself and hands every other
//!   command to `chock-full` beside it (`front.rs`).
//!
//! Why: the dynamic loader relocates and copies every page of pointers a binary holds before
//! `main` runs. The whole tree (the daemon and its browser UI, the terminal interface, MCP, the
//! WebAssembly runtime) is about 47 MB and costs `chock exec` about 1.8 ms of its start on this
//! machine, a third of a whole bubblewrap call (docs/sandbox.md, "The fourth pass"). The commands
//! that are not `exec` run for seconds to hours and pay one more `execve` instead.

// No library makes an async runtime or blocks on one (the workspace's clippy.toml).
#![cfg_attr(not(test), deny(clippy::disallowed_methods))]

pub mod build_id;
mod cli;
mod commands;
mod exit;
mod front;
mod say;

/// `chock-full`: every command, in this process.
pub use cli::main as full_main;
/// `chock`: `exec` in this process, every other command handed to `chock-full`.
pub use front::main as front_main;
