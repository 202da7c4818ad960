//! What Chock's tests share, so each suite does not grow its own copy:
//!
//! - [`requires`] and [`installed`]: a test that needs something the machine may lack (a program
//!   `.ci/run` installs, an IPv6 loopback) says so in one call. In CI (`CI=true`) a missing
//!   requirement fails the test, so nothing CI was meant to run is skipped in silence; outside CI
//!   the test is skipped, the skip is shown at once (past the test harness's output capture) and
//!   recorded, and `cargo run -q -p chock-test-support --bin skipped` — the second half of the
//!   README's test command — reports at the end of the run how many were skipped and why.
//! - [`World`]: the one hermetic environment (HOME, the XDG directories, the org bundle, git's
//!   configuration, the clock and the ids) every program a test starts and every in-process
//!   session runs in, and the settings every snapshot is taken with.
//! - [`model`]: a fake model, a loopback server speaking a provider's real wire format and
//!   playing scripted turns.
//! - [`wire`]: the same fake at the level of bytes (tokio), for the providers' parsers: replies
//!   cut, stalled, framed and split at will, every request recorded.
//! - [`events`]: a session's log, or a JSON event stream, read into events and waited on.
//! - [`GitProject`]: a bare project that is a git repository with a first commit, for tests that
//!   need no more than that.
//! - [`microvm`]: where the microVM suites find QEMU, the guest's init and its kernel.
//! - `git_servers` (feature `git-servers`): real git remotes on loopback, one taking a password over
//!   smart HTTP, one an `sshd` whose key only a test `ssh-agent` holds.
#![forbid(unsafe_code)]
// No library makes an async runtime or blocks on one (the workspace's clippy.toml).
#![cfg_attr(not(test), deny(clippy::disallowed_methods))]

pub mod events;
#[cfg(feature = "git-servers")]
pub mod git_servers;
pub mod microvm;
pub mod model;
pub mod processes;
mod project;
mod skip;
pub mod wire;
pub mod world;

pub use project::GitProject;
pub use skip::{SKIPPED_DIR, installed, requires, skipped_dir};
pub use world::{CLOCK, FIRST_SESSION, World, on_path, regex_escape, text};
