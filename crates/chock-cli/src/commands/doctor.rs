//! `chock doctor`. Not built yet: owned by the issue that builds it.

use std::process::ExitCode;

/// Arguments of `chock doctor`.
#[derive(Debug, clap::Args)]
pub struct DoctorArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(_args: DoctorArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("chock doctor is not built yet")
}
