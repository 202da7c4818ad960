//! `chock diff SESSION`: what the session changed, with the file and hunk ids `chock apply` takes.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use chock_workspace::{RenderMode, Workspace, render};

use super::workspace::session_dir;

/// Arguments of `chock diff`.
#[derive(Debug, clap::Args)]
pub struct DiffArgs {
    /// The session (its id, or a unique prefix of it).
    pub session: String,
    /// A summary: one line per file with its id and counts.
    #[arg(long, conflicts_with = "name_only")]
    pub stat: bool,
    /// Only the changed paths.
    #[arg(long)]
    pub name_only: bool,
    /// Colour: auto (when standard output is a terminal), always, never.
    #[arg(long, default_value = "auto", value_parser = ["auto", "always", "never"])]
    pub color: String,
}

pub fn run(args: DiffArgs) -> anyhow::Result<ExitCode> {
    let DiffArgs {
        session,
        stat,
        name_only,
        color,
    } = args;
    let ws = Workspace::open(&session_dir(&session)?)?;
    let diff = ws.diff()?;
    let mode = if stat {
        RenderMode::Stat
    } else if name_only {
        RenderMode::NameOnly
    } else {
        RenderMode::Patch
    };
    let colour = match color.as_str() {
        "always" => true,
        "never" => false,
        _ => std::io::stdout().is_terminal(),
    };
    let mut out = std::io::stdout().lock();
    if diff.is_empty() {
        if mode != RenderMode::NameOnly {
            writeln!(out, "session {} changed nothing", ws.session())?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    out.write_all(render(&diff, mode, colour).as_bytes())?;
    Ok(ExitCode::SUCCESS)
}
