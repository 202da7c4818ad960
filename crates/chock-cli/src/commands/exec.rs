//! `chock exec`. Not built yet: owned by the issue that builds it.

use std::process::ExitCode;

/// Arguments of `chock exec`.
#[derive(Debug, clap::Args)]
pub struct ExecArgs {
    /// The command and its arguments.
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

pub fn run(_args: ExecArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("chock exec is not built yet")
}
