//! Walking a directory that a sandboxed process can write, from the host, without ever leaving it.
//!
//! The host reads and writes directories whose content the agent controls: the overlay's upper
//! layer (scanned after every call, hashed into the user's repository at each checkpoint, read by
//! the file tools) and the project an apply writes into. A command still running in the sandbox (a
//! background one) can swap a directory for a symlink to `/home/user/.ssh` at any moment, including
//! between the host's look at a path and its open. A path string is resolved by the kernel afresh
//! at every use, and `O_NOFOLLOW` guards only its last component, so no host-side walk here ever
//! opens a path string below the directory it starts from: each step is an `openat` of one plain
//! name relative to the descriptor of the step before, with `O_NOFOLLOW | O_DIRECTORY`, and every
//! read, list, stat and xattr look-up is relative to a descriptor. A component that is (or has just
//! become) a symlink ends the walk with [`WalkError::NotADirectory`] instead of being followed;
//! there is no window in which a swapped component could redirect the host.
//!
//! This is the one place for that walk: the workspace (scan, diff, checkpoint, apply, adopt, undo)
//! and the agent's host-side file tools all go through it.
#![forbid(unsafe_code)]
// No library makes an async runtime or blocks on one (the workspace's clippy.toml).
#![cfg_attr(not(test), deny(clippy::disallowed_methods))]

mod dir;
mod make;
mod overlay;

pub use dir::{Dir, Meta, WalkError, plain_names};
pub use overlay::{is_opaque, is_whiteout};
pub use rustix::fs::FileType;
