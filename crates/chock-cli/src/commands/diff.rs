//! `chock diff SESSION`: what the session changed, with the file and hunk ids `chock apply` takes.

use std::io::IsTerminal;
use std::process::ExitCode;

use chock_workspace::{RenderMode, Selection, Workspace, render};

use super::workspace::session_dir;

use crate::say::say;

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
    /// Show only this whole file, by path or file id (repeatable): the digest is then that of
    /// the selection, as `chock apply --expect DIGEST --file …` takes it.
    #[arg(long = "file", value_name = "PATH")]
    pub files: Vec<String>,
    /// Show only this hunk, by id (repeatable); see --file.
    #[arg(long = "hunk", value_name = "ID")]
    pub hunks: Vec<String>,
    /// Colour: auto (when standard output is a terminal), always, never.
    #[arg(long, default_value = "auto", value_parser = ["auto", "always", "never"])]
    pub color: String,
}

pub fn run(args: DiffArgs) -> anyhow::Result<ExitCode> {
    let DiffArgs {
        session,
        stat,
        name_only,
        files,
        hunks,
        color,
    } = args;
    let ws = Workspace::open(&session_dir(&session)?)?;
    let selection = Selection { files, hunks };
    let whole = ws.diff()?;
    // The digest and the shown diff come from one reading of the session, so the digest printed
    // is the digest of what was shown.
    let digest = whole.digest(&selection).map_err(super::apply::refusal)?;
    let diff = whole.selected(&selection).map_err(super::apply::refusal)?;
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
    if diff.is_empty() {
        if mode != RenderMode::NameOnly {
            say!("session {} changed nothing", ws.session());
        }
        return Ok(ExitCode::SUCCESS);
    }
    // Every path and line of it went through the one escaper in `render`.
    crate::say::rendered(&render(&diff, mode, colour));
    // Not after --name-only: that form is a list of paths for scripts, and a digest line would
    // read as one more path.
    if mode != RenderMode::NameOnly {
        say!("digest {digest}");
    }
    Ok(ExitCode::SUCCESS)
}
