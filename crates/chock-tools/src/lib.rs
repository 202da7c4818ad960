//! The tools the model can call, each mapped to the action names the table decides before it runs.
//!
//! A tool implements [`Tool`] (name, description, an input type its schema is derived from, the
//! acts an input needs, whether it changes anything, and how it runs) and is held by a
//! [`Registry`]; the [`Toolbox`](dispatch::Toolbox) dispatches the model's calls through it. The
//! built-in tools are in [`builtin`]; docs/tools.md lists them with their inputs, outputs and
//! action names, and says how a new tool registers.
//!
//! The tools reach one session through what is here with them: the [`host::Host`] (the session,
//! its workspace as the file tools see it, [`view`], and the reviewed apply), the
//! [`gate::Decider`] (the seam to the one decision pipeline), the [`events::EventSink`] progress
//! goes to, the project's [`memory`], and what the model is told ([`prompt`]: the system prompt
//! and the guidance shelf `read_guidance` reads). The agent's loop (chock-agent) holds a
//! [`dispatch::Toolbox`] and registers its own tools (subagents) on it; nothing here depends on
//! the loop.
#![forbid(unsafe_code)]
// No library makes an async runtime or blocks on one (the workspace's clippy.toml).
#![cfg_attr(not(test), deny(clippy::disallowed_methods))]

pub mod builtin;
pub mod commands;
pub mod dispatch;
pub mod events;
pub mod files;
pub mod gate;
pub mod host;
pub mod mcp;
pub mod memory;
pub mod plugin;
pub mod prompt;
pub mod registry;
pub mod schema;
pub mod seen;
pub mod tool;
pub mod view;
pub mod web;

pub use registry::{CallError, Registry, RegistryError};
pub use tool::{Access, Act, DynTool, Effect, Prepared, Tool, ToolContext, ToolFuture, ToolState};

use std::path::{Path, PathBuf};

/// What a tool hands back to the model (and, summarised, to the log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    /// The text the model reads.
    pub text: String,
    /// True when the call failed or was refused.
    pub is_error: bool,
    /// Workspace paths the call changed (for the log and the checkpoint).
    pub changed: Vec<PathBuf>,
}

impl ToolOutput {
    /// A successful result.
    pub fn ok(text: String) -> Self {
        Self {
            text,
            is_error: false,
            changed: Vec::new(),
        }
    }

    /// A failed or refused call, told to the model in words.
    pub fn error(text: String) -> Self {
        Self {
            text,
            is_error: true,
            changed: Vec::new(),
        }
    }

    /// Notes a changed path.
    #[must_use]
    pub fn with_changed(mut self, path: &Path) -> Self {
        self.changed.push(path.to_path_buf());
        self
    }
}
