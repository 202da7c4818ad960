//! `chock run`. Not built yet: owned by the issue that builds it.

use std::process::ExitCode;

/// Arguments of `chock run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The task; read from standard input when absent.
    pub task: Vec<String>,
}

pub fn run(_args: RunArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("chock run is not built yet")
}

/// `chock -- TASK WORDS`, or bare `chock`.
pub fn run_task_words(words: Vec<String>) -> anyhow::Result<ExitCode> {
    run(RunArgs { task: words })
}
