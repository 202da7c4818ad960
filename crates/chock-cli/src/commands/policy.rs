//! `chock policy`. Not built yet: owned by the issue that builds it.

use std::process::ExitCode;

/// `chock policy …`.
#[derive(Debug, clap::Subcommand)]
pub enum PolicyCommand {
    /// Print the decision for ACTION and what decided it.
    Check { action: String },
}

pub fn run(_cmd: PolicyCommand) -> anyhow::Result<ExitCode> {
    anyhow::bail!("chock policy is not built yet")
}
