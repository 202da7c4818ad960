//! `chock workspace list|rm|adopt`, and the helpers `diff`, `apply` and `undo` share: finding a
//! session, asking the policy table, and logging into the session's own log before the act.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use chock_log::{EventKind, Liveness, Log};
use chock_policy::{Action, Decision, Policy};
use chock_workspace::{Backing, Workspace};
use serde_json::json;

use crate::exit::{BAD_INPUT, Exit, REFUSED};

/// `chock workspace …`.
#[derive(Debug, clap::Subcommand)]
pub enum WorkspaceCommand {
    /// List session workspaces (kept until removed, also after a session ended abnormally).
    List,
    /// Remove a session's workspace (its upper layer and, for git, refs/chock/<session>).
    Rm {
        /// The session.
        session: String,
    },
    /// Copy an overlay session's changed files into <project>/.chock-adopted/<session>/ (decided by
    /// `workspace.adopt`). Never overwrites, never deletes.
    Adopt {
        /// The session.
        session: String,
    },
}

pub fn run(cmd: WorkspaceCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        WorkspaceCommand::List => list(),
        WorkspaceCommand::Rm { session } => rm(&session),
        WorkspaceCommand::Adopt { session } => adopt(&session),
    }
}

fn list() -> anyhow::Result<ExitCode> {
    let root = chock_log::sessions_root()?;
    let mut out = std::io::stdout().lock();
    for item in chock_workspace::list(&root)? {
        let id = item
            .session_dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let live = match chock_log::is_live(&item.session_dir) {
            Ok(Liveness::Live { .. }) => "running",
            _ => "ended",
        };
        match item.meta {
            Some(meta) => {
                let backing = match meta.backing {
                    Backing::Git { ref_name, .. } => format!("git {ref_name}"),
                    Backing::Overlay => "overlay".into(),
                };
                writeln!(out, "{id}  {live}  {backing}  {}", meta.project.display())?;
            }
            None => writeln!(
                out,
                "{id}  {live}  unreadable: {}",
                item.problem.unwrap_or_default()
            )?,
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn rm(session: &str) -> anyhow::Result<ExitCode> {
    let dir = session_dir(session)?;
    if let Ok(Liveness::Live { pid }) = chock_log::is_live(&dir) {
        return Err(Exit::new(
            BAD_INPUT,
            format!("session {session} is still running (pid {pid}); not removing its workspace"),
        )
        .into());
    }
    chock_workspace::remove(&dir)?;
    println!("removed the workspace of session {session}");
    Ok(ExitCode::SUCCESS)
}

fn adopt(session: &str) -> anyhow::Result<ExitCode> {
    let dir = session_dir(session)?;
    let ws = Workspace::open(&dir)?;
    let plan = ws.plan_adopt()?;
    let total = plan.copies.len() + plan.dirs.len() + plan.deleted.len();
    if total == 0 {
        println!("session {session} changed nothing; nothing to adopt");
        return Ok(ExitCode::SUCCESS);
    }
    let question = format!(
        "Copy {} file(s), {} empty dir(s) and a list of {} deleted path(s) into {}?",
        plan.copies.len(),
        plan.dirs.len(),
        plan.deleted.len(),
        plan.dest.display()
    );
    let log = open_log(&dir)?;
    approve(&log, ws.project(), "workspace.adopt", &question)?;
    let data = json!({
        "dest": plan.dest,
        "files": plan.copies.len(),
        "dirs": plan.dirs.len(),
        "deleted": plan.deleted.len(),
    });
    log.append(EventKind::WorkspaceAdopt, None, data)?;
    let counts = plan.commit()?;
    println!(
        "adopted into {}: {} file(s), {} empty dir(s), {} deleted path(s) listed in {}",
        plan.dest.display(),
        counts.files,
        counts.dirs,
        counts.deleted,
        plan.dest.join("deleted").display()
    );
    Ok(ExitCode::SUCCESS)
}

/// The directory of `session` under the sessions root (an exact id, or a unique prefix of one).
pub(crate) fn session_dir(session: &str) -> anyhow::Result<PathBuf> {
    let root = chock_log::sessions_root()?;
    if session.is_empty() || session.contains('/') || session.starts_with('.') {
        return Err(Exit::new(BAD_INPUT, format!("`{session}` is not a session id")).into());
    }
    let exact = root.join(session);
    if exact.is_dir() {
        return Ok(exact);
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir(&root)
        .map(|items| {
            items
                .flatten()
                .filter(|i| i.file_name().to_string_lossy().starts_with(session))
                .map(|i| i.path())
                .collect()
        })
        .unwrap_or_default();
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err(Exit::new(
            BAD_INPUT,
            format!("no session `{session}` in {}", root.display()),
        )
        .into()),
        n => Err(Exit::new(
            BAD_INPUT,
            format!("`{session}` matches {n} sessions; give more of the id"),
        )
        .into()),
    }
}

/// Opens the session's log to append the decision and the act (a running session holds it).
pub(crate) fn open_log(session_dir: &Path) -> anyhow::Result<Log> {
    Log::open(session_dir)
        .with_context(|| format!("cannot record in the log of {}", session_dir.display()))
}

/// Decides `act` by the project's policy table, asking on the terminal when the table says ask,
/// and logs the decision before anything is done. A refusal is an error with exit status 123.
pub(crate) fn approve(log: &Log, project: &Path, act: &str, question: &str) -> anyhow::Result<()> {
    let policy = Policy::load(project).map_err(|e| Exit::new(BAD_INPUT, e.to_string()))?;
    let action = Action::parse(act).map_err(|e| anyhow::anyhow!("{e}"))?;
    let verdict = policy.decide(&action);
    let by = verdict.decided_by.to_string();
    let (allowed, answered_by) = match verdict.decision {
        Decision::Allow => (true, "table"),
        Decision::Deny => (false, "table"),
        Decision::Ask | Decision::AgentThenHuman => ask(question)?,
        Decision::AgentReview => (false, "no reviewer agent outside a session"),
    };
    let data = json!({
        "act": act,
        "decision": verdict.decision.as_str(),
        "decided_by": by,
        "answered_by": answered_by,
        "allowed": allowed,
    });
    log.append(EventKind::Decision, None, data)?;
    if allowed {
        return Ok(());
    }
    let why = match verdict.decision {
        Decision::Deny => format!("{act} is denied by {by}"),
        Decision::AgentReview => {
            format!("{act} asks for an agent review ({by}), and no agent is here to review")
        }
        _ if answered_by == "nobody" => {
            format!("{act} must be asked ({by}) and there is no terminal to ask")
        }
        _ => format!("{act} refused"),
    };
    Err(Exit::new(REFUSED, why).into())
}

/// Asks on the terminal; no terminal means nobody answered, which is a refusal.
fn ask(question: &str) -> anyhow::Result<(bool, &'static str)> {
    if !std::io::stdin().is_terminal() || !std::io::stderr().is_terminal() {
        return Ok((false, "nobody"));
    }
    eprint!("{question} [y/N] ");
    std::io::stderr().flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    Ok((matches!(line.trim(), "y" | "Y" | "yes"), "person"))
}
