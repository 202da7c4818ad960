//! Review: the diff with its digest, the apply with the digest pinned, the undo, the log's check.
//! The apply and the undo are `workspace.apply` acts settled by a decision pipeline (the
//! session's own while it runs) and recorded in the session's log before anything is written:
//! the same planning, question and record as `chock apply`, with no terminal.
//!
//! The one apply with no terminal of its own: a running session's handle applies and undoes
//! through it with the session's own pipeline ([`chock_protocol::ops::Op::Apply`]), and the
//! daemon through it with a pipeline over an ended session's log, so there is no second path
//! that could decide or log differently.

use std::path::{Path, PathBuf};

use chock_decide::{Pipeline, Ruling};
use chock_log::Log;
use chock_policy::{Action, Decision};
use chock_protocol::log::Note;
use chock_protocol::rpc::{
    Applied, DiffFile, DiffHunk, ErrorKind, FileStatus, ReviewDiff, RpcError, SealState, Selection,
    Verified,
};
use chock_workspace::{
    ApplyOptions, ApplyPlan, RenderMode, Status, Workspace, WorkspaceError, render,
};

fn selection(s: &Selection) -> chock_workspace::Selection {
    chock_workspace::Selection {
        files: s.files.clone(),
        hunks: s.hunks.clone(),
    }
}

/// A workspace error as the client's typed error.
pub fn workspace_error(err: &WorkspaceError) -> RpcError {
    let kind = match err {
        WorkspaceError::DigestMismatch { .. } => ErrorKind::DigestMismatch,
        WorkspaceError::Conflict { .. } | WorkspaceError::AlreadyUndone(_) => ErrorKind::Conflict,
        WorkspaceError::ConfiguresChock { .. }
        | WorkspaceError::WrongBacking(_)
        | WorkspaceError::UnknownSelection { .. }
        | WorkspaceError::AmbiguousSelection { .. }
        | WorkspaceError::UnknownApply(_) => ErrorKind::BadInput,
        _ => ErrorKind::Internal,
    };
    RpcError::new(kind, err.to_string())
}

fn status(s: Status) -> FileStatus {
    match s {
        Status::Added => FileStatus::Added,
        Status::Deleted => FileStatus::Deleted,
        Status::Modified => FileStatus::Modified,
        Status::Renamed => FileStatus::Renamed,
        Status::TypeChanged => FileStatus::TypeChanged,
    }
}

/// `review.diff`: the selection's changes, read once, with the digest of exactly what is shown.
pub fn diff(session: &str, dir: &Path, sel: &Selection) -> Result<ReviewDiff, RpcError> {
    let ws = Workspace::open(dir).map_err(|e| workspace_error(&e))?;
    let whole = ws.diff().map_err(|e| workspace_error(&e))?;
    let sel = selection(sel);
    let digest = whole.digest(&sel).map_err(|e| workspace_error(&e))?;
    let shown = whole.selected(&sel).map_err(|e| workspace_error(&e))?;
    let files = shown
        .files
        .iter()
        .map(|f| {
            let (added, removed) = f.line_counts();
            DiffFile {
                id: f.id.clone(),
                path: f.path.clone(),
                old_path: f.old_path.clone(),
                status: status(f.status()),
                binary: f.is_binary(),
                policy_file: f.sensitive().is_some(),
                added,
                removed,
                hunks: f
                    .hunks
                    .iter()
                    .map(|h| DiffHunk {
                        id: h.id.clone(),
                        old_start: h.old_start + 1,
                        old_len: h.old_len,
                        new_start: h.new_start + 1,
                        new_len: h.new_len,
                        lines: h
                            .lines
                            .iter()
                            .map(|l| {
                                let text = l.text.strip_suffix(b"\n").unwrap_or(&l.text);
                                format!("{}{}", l.tag, String::from_utf8_lossy(text))
                            })
                            .collect(),
                    })
                    .collect(),
            }
        })
        .collect();
    Ok(ReviewDiff {
        session: session.to_string(),
        digest,
        files,
        patch: render(&shown, RenderMode::Patch, false),
    })
}

/// The plan of `review.apply`, pinned to `digest`; a policy file is refused.
pub fn plan_apply(dir: &Path, sel: &Selection, digest: &str) -> Result<ApplyPlan, RpcError> {
    if digest.len() != 64 || !digest.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(RpcError::new(
            ErrorKind::BadInput,
            format!("`{digest}` is not a digest: give the 64 hex digits review.diff returned"),
        ));
    }
    let ws = Workspace::open(dir).map_err(|e| workspace_error(&e))?;
    ws.plan_apply_with(
        &selection(sel),
        &ApplyOptions {
            expect: Some(digest.to_string()),
            include_policy: Vec::new(),
        },
    )
    .map_err(|e| workspace_error(&e))
}

/// Who must say yes to an apply besides the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confirm {
    /// The table's word stands: its `allow` applies with no question.
    Table,
    /// A table's `allow` is put to a person all the same (an apply nobody asked for, offered by
    /// an editor at a turn's end); its `deny` and a reviewer still stand.
    Person,
}

/// Settles `plan` as a `workspace.apply` act through `pipeline` (the question names every path
/// and the digest), records it in `log`, and writes it.
pub async fn carry_out(
    plan: ApplyPlan,
    pipeline: &Pipeline,
    log: &Log,
    verb: &str,
) -> Result<Applied, RpcError> {
    carry_out_as(plan, pipeline, log, verb, Confirm::Table).await
}

/// [`carry_out`], with a table's `allow` put to a person when `confirm` says so.
async fn carry_out_as(
    plan: ApplyPlan,
    pipeline: &Pipeline,
    log: &Log,
    verb: &str,
    confirm: Confirm,
) -> Result<Applied, RpcError> {
    if plan.is_empty() {
        return Ok(Applied {
            apply_id: None,
            digest: plan.digest().map(str::to_string),
            paths: Vec::new(),
            already: plan.already.clone(),
            kept_dirs: Vec::new(),
        });
    }
    let question = plan.question(verb);
    let action = Action::parse("workspace.apply")
        .map_err(|e| RpcError::new(ErrorKind::Internal, e.to_string()))?;
    let mut ruling = Ruling {
        context: plan.summary().lines().map(str::to_string).collect(),
        ..Ruling::of(&pipeline.verdict(&action), &action)
    };
    if confirm == Confirm::Person && ruling.decision == Decision::Allow {
        ruling.decision = Decision::Ask;
        ruling.rule = format!(
            "{}; an apply offered unasked is still put to the person",
            ruling.rule
        );
    }
    let settled = pipeline
        .settle_ruled(None, &action, &question, ruling)
        .await
        .map_err(|e| RpcError::new(ErrorKind::Internal, e.to_string()))?;
    if let Some(why) = settled.refusal() {
        return Err(RpcError::new(ErrorKind::Refused, why));
    }
    log.record(None, plan.event())
        .map_err(|e| RpcError::new(ErrorKind::Internal, e.to_string()))?;
    let id = plan.apply_id.clone();
    let digest = plan.digest().map(str::to_string);
    let paths: Vec<String> = plan.ops.iter().map(|op| op.path.clone()).collect();
    let already = plan.already.clone();
    let committed = tokio::task::spawn_blocking(move || plan.commit())
        .await
        .map_err(|e| RpcError::new(ErrorKind::Internal, e.to_string()))?;
    match committed {
        Ok((_, kept)) => Ok(Applied {
            apply_id: Some(id),
            digest,
            paths,
            already,
            kept_dirs: kept,
        }),
        Err(e) => {
            let _ = log.record(
                None,
                Note::ApplyFailed {
                    apply_id: Some(id.clone()),
                    digest,
                    failed: e.to_string(),
                },
            );
            Err(RpcError::new(
                ErrorKind::Internal,
                format!(
                    "{verb} {id} stopped ({e}); if it wrote anything, review.undo {id} reverts it"
                ),
            ))
        }
    }
}

/// `log.verify`.
pub fn verify(session: &str, dir: &Path) -> Result<Verified, RpcError> {
    let report =
        chock_log::verify(dir).map_err(|e| RpcError::new(ErrorKind::Internal, e.to_string()))?;
    let (seal, events_after_seal) = match &report.seal {
        chock_log::SealCheck::Unsealed => (SealState::Unsealed, None),
        chock_log::SealCheck::Sealed { events_after, .. } => {
            (SealState::Sealed, Some(*events_after))
        }
        chock_log::SealCheck::Broken { .. } => (SealState::Broken, None),
    };
    Ok(Verified {
        session: session.to_string(),
        intact: report.is_intact(),
        lines: report.lines,
        head_seq: report.head.as_ref().map(|h| h.seq),
        head_hash: report.head.as_ref().map(|h| h.hash.clone()),
        problems: report.problems.iter().map(ToString::to_string).collect(),
        torn_tail: report.torn_tail.is_some(),
        seal,
        events_after_seal,
    })
}

fn internal(e: &impl std::fmt::Display) -> RpcError {
    RpcError::new(ErrorKind::Internal, e.to_string())
}

/// The apply of `selection` of the session in `dir`, pinned to `digest`: planned, then settled,
/// logged and written by [`carry_out`] through `pipeline`.
pub async fn apply(
    pipeline: &Pipeline,
    log: &Log,
    dir: PathBuf,
    selection: Selection,
    digest: String,
) -> Result<Applied, RpcError> {
    apply_as(pipeline, log, dir, selection, digest, Confirm::Table).await
}

/// [`apply`], with a table's `allow` put to a person when `confirm` says so.
pub(crate) async fn apply_as(
    pipeline: &Pipeline,
    log: &Log,
    dir: PathBuf,
    selection: Selection,
    digest: String,
    confirm: Confirm,
) -> Result<Applied, RpcError> {
    let plan = tokio::task::spawn_blocking(move || plan_apply(&dir, &selection, &digest))
        .await
        .map_err(|e| internal(&e))??;
    carry_out_as(plan, pipeline, log, "apply", confirm).await
}

/// The undo of `apply_id` (an apply of a session under `sessions_root`), settled and logged as
/// the apply was.
pub async fn undo(
    pipeline: &Pipeline,
    log: &Log,
    sessions_root: PathBuf,
    apply_id: String,
) -> Result<Applied, RpcError> {
    let plan =
        tokio::task::spawn_blocking(move || chock_workspace::plan_undo(&sessions_root, &apply_id))
            .await
            .map_err(|e| internal(&e))?
            .map_err(|e| workspace_error(&e))?;
    carry_out(plan, pipeline, log, "undo").await
}

/// `sessions.fork`: a new session beside the one in `dir`, starting after its turn `turn`, left
/// closed.
pub async fn fork(dir: PathBuf, turn: u32) -> Result<chock_protocol::rpc::ForkMade, RpcError> {
    let header = chock_log::SessionHeader {
        command: Some("fork".into()),
        ..Default::default()
    };
    let forked = tokio::task::spawn_blocking(move || chock_session::fork(&dir, turn, header))
        .await
        .map_err(|e| internal(&e))?
        .map_err(|e| match e {
            chock_session::SessionError::Fork(refusal) => {
                RpcError::new(ErrorKind::BadInput, format!("cannot fork: {refusal}"))
            }
            other => internal(&format!("cannot fork: {other}")),
        })?;
    Ok(chock_protocol::rpc::ForkMade {
        session: forked.id.to_string(),
        origin: forked.origin,
    })
}
