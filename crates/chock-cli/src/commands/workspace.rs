//! `chock workspace list|rm|adopt`, and the helpers `diff`, `apply` and `undo` share: finding a
//! session, asking the policy table, and logging into the session's own log before the act.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use chock_log::{EventKind, Liveness, Log};
use chock_policy::{Action, Decision, Policy};
use chock_workspace::{Backing, Entry, Sensitive, Workspace, render_content, sensitive_path};
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
        /// Also copy this change to Chock's own policy (a `chock.toml`, by its exact path;
        /// repeatable), after a separate yes at a terminal that shows its whole content.
        #[arg(long = "include-policy", value_name = "PATH")]
        include_policy: Vec<String>,
    },
}

pub fn run(cmd: WorkspaceCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        WorkspaceCommand::List => list(),
        WorkspaceCommand::Rm { session } => rm(&session),
        WorkspaceCommand::Adopt {
            session,
            include_policy,
        } => adopt(&session, &include_policy),
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

fn adopt(session: &str, include_policy: &[String]) -> anyhow::Result<ExitCode> {
    let dir = session_dir(session)?;
    let ws = Workspace::open(&dir)?;
    let plan = ws
        .plan_adopt_with(include_policy)
        .map_err(super::apply::refusal)?;
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
    let changes: Vec<PolicyChange<'_>> = plan
        .copies
        .iter()
        .map(|(path, entry)| (path, Some(entry)))
        .chain(plan.dirs.iter().map(|path| (path, Some(&Entry::Dir))))
        .chain(plan.deleted.iter().map(|path| (path, None)))
        .filter_map(|(path, after)| {
            sensitive_path(path).map(|what| PolicyChange { path, what, after })
        })
        .collect();
    confirm_policy_changes(
        &log,
        "workspace.adopt",
        "copy this policy file aside into .chock-adopted/",
        &changes,
    )?;
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

/// One change to a path that configures Chock which an act would write, and what the path will
/// hold (`None`: deleted).
pub(crate) struct PolicyChange<'a> {
    pub(crate) path: &'a str,
    pub(crate) what: Sensitive,
    pub(crate) after: Option<&'a Entry>,
}

/// The separate confirmation of each change to Chock's own configuration that the person named
/// with `--include-policy`: one yes/no question per path, put whatever the table says about
/// `act` (the table the change would replace cannot approve it), showing the path and its whole
/// new content with control characters spelled out, and ending with `write` (what yes does). Asked at a terminal only: with none, nobody
/// answers, and that is a refusal (exit 123). Question and answer are logged
/// (`approval.ask`/`approval.answer`) before anything is written.
pub(crate) fn confirm_policy_changes(
    log: &Log,
    act: &str,
    write: &str,
    changes: &[PolicyChange<'_>],
) -> anyhow::Result<()> {
    for change in changes {
        let path = change.path.escape_debug().to_string();
        let dir = match path.rsplit_once('/') {
            Some((dir, _)) => format!("{dir}/"),
            None => "the project".to_string(),
        };
        let question = format!(
            "chock: {path} is {} for the next session started in {dir}; after this {act} it holds \
             exactly:\n{}chock: {write}?",
            change.what.what(),
            render_content(change.after)
        );
        log.append(
            EventKind::ApprovalAsk,
            None,
            json!({
                "action": act,
                "decision": "ask",
                "decided_by": format!("--include-policy {path}: a change to {} is confirmed by a person", change.what.what()),
                "asked": "person",
                "what": question,
                "policy_file": change.path,
            }),
        )?;
        let (yes, by) = ask(&question)?;
        let answer = match (yes, by) {
            (true, _) => "allow_once",
            (false, "nobody") => "none",
            (false, _) => "deny",
        };
        let by = (by != "nobody").then_some(by);
        log.append(
            EventKind::ApprovalAnswer,
            None,
            json!({ "action": act, "answer": answer, "by": by, "reasons": null, "policy_file": change.path }),
        )?;
        if !yes {
            let why = if by.is_none() {
                format!(
                    "{act} refused, nothing was written: {path} changes {}, and --include-policy \
                     needs a person to confirm it at a terminal; there is none",
                    change.what.what()
                )
            } else {
                format!(
                    "{act} refused, nothing was written: you did not confirm the change to {path}"
                )
            };
            return Err(Exit::new(REFUSED, why).into());
        }
    }
    Ok(())
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
