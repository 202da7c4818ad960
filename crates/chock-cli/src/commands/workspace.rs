//! `chock workspace`. Not built yet: owned by the issue that builds it.

use std::process::ExitCode;

/// `chock workspace …`.
#[derive(Debug, clap::Subcommand)]
pub enum WorkspaceCommand {
    /// List session workspaces.
    List,
}

pub fn run(_cmd: WorkspaceCommand) -> anyhow::Result<ExitCode> {
    anyhow::bail!("chock workspace is not built yet")
}
