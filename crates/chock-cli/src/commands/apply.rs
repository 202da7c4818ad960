//! `chock apply`. Not built yet: owned by the issue that builds it.

use std::process::ExitCode;

/// Arguments of `chock apply`.
#[derive(Debug, clap::Args)]
pub struct ApplyArgs {
    /// The session.
    pub session: String,
}

/// Arguments of `chock undo`.
#[derive(Debug, clap::Args)]
pub struct UndoArgs {
    /// The apply to revert.
    pub apply_id: String,
}

pub fn run_apply(_args: ApplyArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("chock apply is not built yet")
}

pub fn run_undo(_args: UndoArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("chock undo is not built yet")
}
