//! The throwaway workspace: git and overlay backings, diff review, audited apply and undo.
//!
//! A session's tool calls never write the user's project. They write into an overlay whose lower
//! layer is the project and whose upper layer lives in the session directory; this crate reads that
//! upper layer from the host (no mount needed), shows it as a diff with stable file and hunk ids,
//! and carries selected changes back into the project only through an [`ApplyPlan`], which checks
//! the project still matches the base under every selected hunk before it writes anything.
//! docs/workspace.md explains the choices and their measured cost.
#![forbid(unsafe_code)]
// No library makes an async runtime or blocks on one (the workspace's clippy.toml).
#![cfg_attr(not(test), deny(clippy::disallowed_methods))]

mod adopt;
mod apply;
mod background;
mod base;
mod before;
mod beneath;
mod checkpoint;
mod diff;
mod entry;
mod error;
mod fetch;
mod git;
mod hunks;
mod late_sync;
mod manage;
mod meta;
mod old;
mod push;
mod record;
mod remote;
mod render;
mod select;
mod tree;
mod tree_write;
mod turns;
mod undo;
mod upper;
mod workspace;
mod write;

pub use adopt::{ADOPTED_DIR, AdoptCounts, AdoptPlan};
pub use apply::{ApplyOptions, ApplyPlan, Selection};
pub use background::BackgroundPause;
pub use diff::{Diff, FileChange, Sensitive, Status, file_id, sensitive_path};
pub use entry::Entry;
pub use error::WorkspaceError;
pub use fetch::{FetchPlan, FetchRequest, plan_fetch};
pub use hunks::{Hunk, HunkLine};
pub use manage::{Listed, list, remove};
pub use meta::{Backing, Meta};
pub use push::{PushError, PushPlan, PushRequest, PushSource, PushedRef, plan_push};
pub use record::{ApplyRecord, session_of as session_dir_of_apply};
pub use remote::{PromptKind, RemoteOp, RemotePlan, host_config, read_prompt};
pub use render::{RenderMode, render, render_content};
pub use turns::{TURNS_DIR, TurnRecord, TurnSummary, read_record as read_turn, state_digest};
pub use undo::plan_undo;
pub use workspace::Workspace;

/// How many git processes the calling thread has started (for tests and benches).
#[doc(hidden)]
pub fn git_processes_started() -> u64 {
    git::processes_started()
}
pub use write::Op;

/// How many tree objects of a git base this process has read (for tests and benches).
#[doc(hidden)]
pub fn git_trees_read() -> u64 {
    tree::trees_read()
}
