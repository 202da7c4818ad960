//! `chock apply SESSION [--file PATH]... [--hunk ID]... [--include-policy PATH]...` and
//! `chock undo APPLY-ID`: the reviewed door from the workspace into the real project. Each is
//! decided by `workspace.apply` and recorded as a `workspace.apply` event (ids and hashes) before
//! anything is written. A change to Chock's own policy is refused unless named with
//! `--include-policy` and confirmed at a terminal, apart from the table's decision.

use std::process::ExitCode;

use chock_protocol::log::Note;
use chock_workspace::{ApplyOptions, ApplyPlan, Selection, Workspace, WorkspaceError, plan_undo};

use super::workspace::{
    PolicyChange, approve, confirm_policy_changes, open_log, pipeline, session_dir,
};
use crate::exit::{BAD_INPUT, Exit, FAILURE};
use crate::say::say;

/// Arguments of `chock apply`.
#[derive(Debug, clap::Args)]
pub struct ApplyArgs {
    /// The session (its id, or a unique prefix of it).
    pub session: String,
    /// A whole file to apply, by path or file id (repeatable). With no --file and no --hunk,
    /// everything is applied.
    #[arg(long = "file", value_name = "PATH")]
    pub files: Vec<String>,
    /// One hunk to apply, by the id `chock diff` prints (repeatable).
    #[arg(long = "hunk", value_name = "ID")]
    pub hunks: Vec<String>,
    /// The digest `chock diff` printed for the same selection: the apply is refused (exit 1,
    /// nothing written) if the selected changes are no longer exactly the ones reviewed.
    #[arg(long, value_name = "DIGEST")]
    pub expect: Option<String>,
    /// Also write this selected change to Chock's own policy (a `chock.toml`, by its exact path;
    /// repeatable). Without it such a change is refused (exit 1, nothing written); with it a
    /// separate yes at a terminal, which shows the file's whole new content, is still needed
    /// (no terminal: refused, exit 123).
    #[arg(long = "include-policy", value_name = "PATH")]
    pub include_policy: Vec<String>,
}

/// Arguments of `chock undo`.
#[derive(Debug, clap::Args)]
pub struct UndoArgs {
    /// The apply to revert (printed by `chock apply`).
    pub apply_id: String,
}

pub fn run_apply(args: ApplyArgs) -> anyhow::Result<ExitCode> {
    let dir = session_dir(&args.session)?;
    let ws = Workspace::open(&dir)?;
    if let Some(digest) = &args.expect
        && (digest.len() != 64 || !digest.bytes().all(|b| b.is_ascii_hexdigit()))
    {
        return Err(Exit::new(
            BAD_INPUT,
            format!(
                "--expect `{digest}` is not a digest: give the 64 hex digits of the `digest` line `chock diff` printed"
            ),
        )
        .into());
    }
    let selection = Selection {
        files: args.files,
        hunks: args.hunks,
    };
    let options = ApplyOptions {
        expect: args.expect,
        include_policy: args.include_policy,
    };
    let plan = ws.plan_apply_with(&selection, &options).map_err(refusal)?;
    finish(plan, &dir, "apply")
}

pub fn run_undo(args: UndoArgs) -> anyhow::Result<ExitCode> {
    let UndoArgs { apply_id } = args;
    let root = chock_log::sessions_root()?;
    let plan = plan_undo(&root, &apply_id).map_err(refusal)?;
    let dir = chock_workspace::session_dir_of_apply(&root, &apply_id)?;
    finish(plan, &dir, "undo")
}

/// A conflict (or a session changed since the review) is the command refusing on the user's
/// behalf: exit 1 with every clash named. A selection naming nothing, or several things: exit 2.
pub(crate) fn refusal(err: WorkspaceError) -> anyhow::Error {
    match err {
        WorkspaceError::Conflict { .. }
        | WorkspaceError::DigestMismatch { .. }
        | WorkspaceError::ConfiguresChock { .. }
        | WorkspaceError::AlreadyUndone(_)
        | WorkspaceError::WrongBacking(_) => Exit::new(FAILURE, err.to_string()).into(),
        WorkspaceError::UnknownSelection { .. }
        | WorkspaceError::AmbiguousSelection { .. }
        | WorkspaceError::UnknownApply(_) => Exit::new(BAD_INPUT, err.to_string()).into(),
        other => other.into(),
    }
}

fn finish(plan: ApplyPlan, session_dir: &std::path::Path, verb: &str) -> anyhow::Result<ExitCode> {
    if plan.is_empty() {
        say!(
            "nothing to {verb}: the project already holds {} selected change(s)",
            plan.already.len()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let project = plan.project().to_path_buf();
    // A person approving sees exactly what lands: every path measured against the project as it
    // is now, and the digest of the reviewed selection it came from.
    let question = plan.question(verb);
    let summary: Vec<String> = plan.summary().lines().map(str::to_string).collect();
    let log = open_log(session_dir)?;
    let pipeline = pipeline(&log, &project)?;
    // A change to Chock's own configuration reaches the plan only when named with
    // --include-policy (planning refuses it otherwise); it is confirmed by a person, apart from
    // the table's decision. An undo puts back what the undone apply found in the project.
    if verb == "apply" {
        let changes: Vec<PolicyChange<'_>> = plan
            .sensitive_ops()
            .into_iter()
            .map(|(op, what)| PolicyChange {
                path: &op.path,
                what,
                after: op.after.as_ref(),
            })
            .collect();
        confirm_policy_changes(
            &pipeline,
            "workspace.apply",
            "write this policy file into the project",
            &changes,
        )?;
    }
    approve(&pipeline, "workspace.apply", &question, summary)?;
    log.record(None, plan.event())?;
    let id = plan.apply_id.clone();
    let digest = plan.digest().map(str::to_string);
    let paths: Vec<String> = plan.ops.iter().map(|op| op.path.clone()).collect();
    match plan.commit() {
        Ok((_, kept)) => {
            for path in &paths {
                say!("  {path}");
            }
            for dir in kept {
                say!("  kept directory {dir}: it holds other files");
            }
            if let Some(digest) = &digest {
                say!("digest {digest}");
            }
            match verb {
                "undo" => say!("undone as {id}"),
                _ => say!("applied as {id} (revert with `chock undo {id}`)"),
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            let _ = log.record(
                None,
                Note::ApplyFailed {
                    apply_id: Some(id.clone()),
                    digest: digest.clone(),
                    failed: e.to_string(),
                },
            );
            // The record was saved before the first write, so whatever did land can be reverted.
            Err(anyhow::Error::new(e).context(format!(
                "{verb} {id} stopped; if it wrote anything, `chock undo {id}` reverts it"
            )))
        }
    }
}
