//! `chock diff`. Not built yet: owned by the issue that builds it.

use std::process::ExitCode;

/// Arguments of `chock diff`.
#[derive(Debug, clap::Args)]
pub struct DiffArgs {
    /// The session.
    pub session: String,
}

pub fn run(_args: DiffArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("chock diff is not built yet")
}
