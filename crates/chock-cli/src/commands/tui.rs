//! `chock tui`, and bare `chock` at a terminal: the full-screen interface (`chock-tui`). This file
//! only parses the arguments, finds the session asked for, and maps the outcome to an exit status.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use chock_tui::driver::local::LocalOptions;
use chock_tui::{Options, Start, TuiError};

use crate::exit::{self, Exit};

/// Arguments of `chock tui`.
#[derive(Debug, Default, clap::Args)]
pub struct TuiArgs {
    /// The provider: a name from config.toml, `demo`, or `script:FILE` (default: config.toml's
    /// `default_provider`).
    #[arg(long, value_name = "NAME")]
    pub provider: Option<String>,
    /// The model to ask for.
    #[arg(long)]
    pub model: Option<String>,
    /// The project (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub project: Option<PathBuf>,
    /// Stop each task after this many turns.
    #[arg(long, default_value_t = 50, value_name = "N")]
    pub max_turns: u32,
    /// Open with this ended or interrupted session resumed (its id or a unique prefix).
    #[arg(long, value_name = "SESSION", conflicts_with = "attach")]
    pub resume: Option<String>,
    /// Open attached to this session of the running daemon (`chock serve`).
    #[arg(long, value_name = "SESSION")]
    pub attach: Option<String>,
}

/// Whether bare `chock` should open the interface: no task on the line, and a person at both
/// ends (standard input and output are terminals). A pipe keeps `echo TASK | chock` as it is.
pub fn wanted(words: &[String]) -> bool {
    words.is_empty() && std::io::stdin().is_terminal() && std::io::stdout().is_terminal()
}

pub fn run(args: &TuiArgs) -> anyhow::Result<ExitCode> {
    if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
        return Err(Exit::new(
            exit::BAD_INPUT,
            "chock tui needs a terminal: give a task with `chock run TASK` or on standard input",
        )
        .into());
    }
    let start = match (&args.resume, &args.attach) {
        (Some(query), _) => {
            let root =
                chock_log::sessions_root().map_err(|e| Exit::new(exit::FAILURE, e.to_string()))?;
            let dir = chock_log::find_session(&root, query)
                .map_err(|e| Exit::new(exit::BAD_INPUT, e.to_string()))?;
            Start::Resume(dir)
        }
        (None, Some(session)) => Start::Attach(session.clone()),
        (None, None) => Start::Fresh,
    };
    let opts = Options {
        local: LocalOptions {
            provider: args.provider.clone(),
            model: args.model.clone(),
            project: args.project.clone(),
            max_turns: args.max_turns,
        },
        start,
    };
    match chock_tui::run(opts) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e @ TuiError::Config(_)) => Err(Exit::new(exit::BAD_INPUT, e.to_string()).into()),
        Err(e) => Err(Exit::new(exit::FAILURE, e.to_string()).into()),
    }
}
