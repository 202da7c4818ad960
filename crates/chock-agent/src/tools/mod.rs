//! The tools the model can call, each mapped to the action names the table decides before it runs.
//! docs/tools.md lists them with their inputs, outputs and action names.

pub mod commands;
pub mod dispatch;
pub mod files;
pub mod seen;
pub mod web;

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
