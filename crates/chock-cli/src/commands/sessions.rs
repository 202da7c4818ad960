//! `chock sessions`. Not built yet: owned by the issue that builds it.

use std::process::ExitCode;

/// `chock sessions …`.
#[derive(Debug, clap::Subcommand)]
pub enum SessionsCommand {
    /// List sessions.
    List,
}

pub fn run(_cmd: SessionsCommand) -> anyhow::Result<ExitCode> {
    anyhow::bail!("chock sessions is not built yet")
}
