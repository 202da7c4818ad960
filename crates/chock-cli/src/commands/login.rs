//! `chock login`. Not built yet: owned by the issue that builds it.

use std::process::ExitCode;

/// Arguments of `chock login`.
#[derive(Debug, clap::Args)]
pub struct LoginArgs {
    /// The provider whose key to store.
    #[arg(long)]
    pub provider: String,
}

pub fn run(_args: LoginArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("chock login is not built yet")
}
