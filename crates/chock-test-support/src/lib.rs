//! What Chock's tests share, so each suite does not grow its own copy:
//!
//! - [`requires`] and [`installed`]: a test that needs something the machine may lack (a program
//!   `.ci/run` installs, an IPv6 loopback) says so in one call. In CI (`CI=true`) a missing
//!   requirement fails the test, so nothing CI was meant to run is skipped in silence; outside CI
//!   the test is skipped, the skip is shown at once (past the test harness's output capture) and
//!   recorded, and `cargo run -q -p chock-test-support --bin skipped` — the second half of the
//!   README's test command — reports at the end of the run how many were skipped and why.
//! - [`GitProject`]: a project that is a git repository with a first commit, as sessions expect.
//! - `git_servers` (feature `git-servers`): real git remotes on loopback, one taking a password over
//!   smart HTTP, one an `sshd` whose key only a test `ssh-agent` holds.
#![forbid(unsafe_code)]

#[cfg(feature = "git-servers")]
pub mod git_servers;
mod project;
mod skip;

pub use project::GitProject;
pub use skip::{SKIPPED_DIR, installed, requires, skipped_dir};
