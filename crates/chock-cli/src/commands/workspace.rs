//! `chock workspace list|rm|adopt`, and the helpers `diff`, `apply` and `undo` share: finding a
//! session, asking the policy table, and logging into the session's own log before the act.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, RwLock};

use anyhow::Context;
use chock_decide::AllowScope;
use chock_decide::{ApprovalBroker, Outcome, Pipeline, RefusedBy, Role, Ruling, Settled};
use chock_log::{Liveness, Log};
use chock_policy::{Action, Decision, Policy};
use chock_protocol::log::WorkspaceAdopt;
use chock_terminal::TerminalAnswerer;
use chock_workspace::{Backing, Entry, Sensitive, Workspace, render_content, sensitive_path};

use crate::exit::{BAD_INPUT, Exit, REFUSED};
use crate::say::say;

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
                say!("{id}  {live}  {backing}  {}", meta.project.display());
            }
            None => say!(
                "{id}  {live}  unreadable: {}",
                item.problem.unwrap_or_default()
            ),
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
    say!("removed the workspace of session {session}");
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
        say!("session {session} changed nothing; nothing to adopt");
        return Ok(ExitCode::SUCCESS);
    }
    let question = format!(
        "copy {} file(s), {} empty dir(s) and a list of {} deleted path(s) into {}",
        plan.copies.len(),
        plan.dirs.len(),
        plan.deleted.len(),
        plan.dest.display()
    );
    let log = open_log(&dir)?;
    let pipeline = pipeline(&log, ws.project())?;
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
        &pipeline,
        "workspace.adopt",
        "copy this policy file aside into .chock-adopted/",
        &changes,
    )?;
    approve(&pipeline, "workspace.adopt", &question, Vec::new())?;
    log.record(
        None,
        WorkspaceAdopt {
            dest: plan.dest.display().to_string(),
            files: plan.copies.len(),
            dirs: plan.dirs.len(),
            deleted: plan.deleted.len(),
        },
    )?;
    let counts = plan.commit()?;
    say!(
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

/// The decision pipeline of an act from the command line on `log`'s session: the project's
/// table as it is now, and the person at this terminal (the one terminal prompt) when standard
/// input and standard error are one. No terminal: nobody to ask, so an ask is refused.
pub(crate) fn pipeline(log: &Log, project: &Path) -> anyhow::Result<Pipeline> {
    let policy = Policy::load(project).map_err(|e| Exit::new(BAD_INPUT, e.to_string()))?;
    let mut broker = ApprovalBroker::new();
    if std::io::stderr().is_terminal()
        && let Some(terminal) = TerminalAnswerer::stdin_if_terminal()
    {
        broker = broker.with(Arc::new(terminal));
    }
    Ok(Pipeline::new(
        log.clone(),
        Arc::new(RwLock::new(policy)),
        broker,
    ))
}

/// Settles `act` through `pipeline` (the table, then the person at the terminal; the question,
/// the answer and the decision are logged before anything is done), showing `context` lines
/// above the question. A refusal is an error with exit status 123.
pub(crate) fn approve(
    pipeline: &Pipeline,
    act: &str,
    question: &str,
    context: Vec<String>,
) -> anyhow::Result<()> {
    let action = Action::parse(act).map_err(|e| anyhow::anyhow!("{e}"))?;
    let ruling = Ruling {
        context,
        ..Ruling::of(&pipeline.verdict(&action), &action)
    };
    let settled = super::block_on(pipeline.settle_ruled(None, &action, question, ruling))??;
    match refusal(act, &settled) {
        None => Ok(()),
        Some(why) => Err(Exit::new(REFUSED, why).into()),
    }
}

/// What the person reads when `act` was not allowed, from the typed outcome.
fn refusal(act: &str, settled: &Settled) -> Option<String> {
    let rule = &settled.rule;
    Some(match &settled.outcome {
        Outcome::Allowed { .. } => return None,
        Outcome::Refused {
            by: RefusedBy::Table | RefusedBy::Harness,
            ..
        } => format!("{act} is denied by {rule}"),
        Outcome::Refused { by, .. } => {
            let who = match by {
                RefusedBy::Reviewer { name } | RefusedBy::Person { name } => name.as_str(),
                RefusedBy::Table | RefusedBy::Harness => "the table",
            };
            format!("{act} refused (answered no by {who})")
        }
        Outcome::Unanswered {
            asked: Role::Reviewer,
            ..
        } => format!("{act} asks for an agent review ({rule}), and no agent is here to review"),
        Outcome::Unanswered {
            asked: Role::Human, ..
        } => format!("{act} must be asked ({rule}) and nobody answered at a terminal"),
    })
}

/// One change to a path that configures Chock which an act would write, and what the path will
/// hold (`None`: deleted).
pub(crate) struct PolicyChange<'a> {
    pub(crate) path: &'a str,
    pub(crate) what: Sensitive,
    pub(crate) after: Option<&'a Entry>,
}

/// The separate confirmation of each change to Chock's own configuration that the person named
/// with `--include-policy`: one yes/no question per path, put to a person whatever the table says
/// about `act` (the table the change would replace cannot approve it), showing the path and its
/// whole new content with control characters spelled out, and naming `write` (what yes does).
/// Asked through the pipeline, so the question, the answer (both naming the policy file) and the
/// decision are logged before anything is written; with no terminal nobody answers, and that is a
/// refusal (exit 123).
pub(crate) fn confirm_policy_changes(
    pipeline: &Pipeline,
    act: &str,
    write: &str,
    changes: &[PolicyChange<'_>],
) -> anyhow::Result<()> {
    let action = Action::parse(act).map_err(|e| anyhow::anyhow!("{e}"))?;
    for change in changes {
        let path = chock_protocol::text::line(change.path).to_string();
        let dir = match path.rsplit_once('/') {
            Some((dir, _)) => format!("{dir}/"),
            None => "the project".to_string(),
        };
        let what = change.what.what();
        let question = format!(
            "{write}: {path} is {what} for the next session started in {dir}; after this {act} it \
             holds exactly the content above"
        );
        let ruling = Ruling {
            decision: Decision::Ask,
            rule: format!("--include-policy {path}: a change to {what} is confirmed by a person"),
            scope: AllowScope::Pattern,
            policy_file: Some(change.path.to_string()),
            context: render_content(change.after)
                .lines()
                .map(str::to_string)
                .collect(),
        };
        let settled = super::block_on(pipeline.settle_ruled(None, &action, &question, ruling))??;
        let why = match &settled.outcome {
            Outcome::Allowed { .. } => continue,
            Outcome::Unanswered { .. } => format!(
                "{act} refused, nothing was written: {path} changes {what}, and --include-policy \
                 needs a person to confirm it at a terminal; nobody answered"
            ),
            Outcome::Refused { .. } => {
                format!(
                    "{act} refused, nothing was written: you did not confirm the change to {path}"
                )
            }
        };
        return Err(Exit::new(REFUSED, why).into());
    }
    Ok(())
}
