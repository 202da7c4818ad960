//! The end of a turn that changed files: the editor is shown the diff as a tool call ("Apply N
//! files to the project", every file's change and the digest) and asked, through the session's
//! own decision pipeline, whether to write it into the real project.
//!
//! The apply is the same act `chock apply --expect DIGEST` and the daemon's `review.apply` carry
//! out: chock-workspace plans it pinned to the digest of exactly what was shown (a session that
//! changed since is refused before anything is decided), the `workspace.apply` act is settled and
//! logged, the plan's record is logged, and only then is anything written. The table's word
//! stands when it says deny or asks a reviewer; when it says allow, the editor is still asked —
//! an apply is never made at every turn's end just because the table would let it.
//! A change to Chock's own policy (`chock.toml`) is never applied from an editor: it stays for
//! `chock apply --include-policy`.

use std::path::Path;

use chock_decide::{Pipeline, Ruling};
use chock_log::Log;
use chock_policy::{Action, Decision};
use chock_protocol::log::Note;
use chock_workspace::{
    ApplyOptions, ApplyPlan, Backing, Entry, FileChange, Selection, Workspace, WorkspaceError,
};

use crate::live::{Shared, visible};
use crate::schema::{ToolCall, ToolCallContent, ToolCallStatus, ToolKind};

/// How the offer at a turn's end went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Offered {
    /// Nothing to apply: no change, or the project holds it already.
    Nothing,
    /// The project has no git, so there is no base to apply against.
    NotGit,
    /// Written, as apply `apply_id`.
    Applied {
        /// The apply's id (`chock undo` takes it).
        apply_id: String,
    },
    /// Not written: refused by the table, the person, or nobody answering.
    Refused {
        /// The refusal, in words.
        why: String,
    },
    /// Not written: the plan or the write failed.
    Failed {
        /// Why.
        why: String,
    },
}

/// What was planned, with what the editor is shown.
struct Planned {
    plan: ApplyPlan,
    digest: String,
    content: Vec<ToolCallContent>,
}

fn text_of(entry: Option<&Entry>) -> Option<String> {
    match entry {
        Some(Entry::File { data, .. }) => String::from_utf8(data.clone()).ok(),
        _ => None,
    }
}

/// A file's change as the editor shows it: a diff for text, a line for anything else.
fn shown(project: &Path, file: &FileChange) -> ToolCallContent {
    let path = project.join(&file.path);
    let (old, new) = (file.old.as_ref(), file.new.as_ref());
    let old_text = text_of(old);
    let new_text = text_of(new);
    let text_on_both_sides =
        (old.is_none() || old_text.is_some()) && (new.is_none() || new_text.is_some());
    if text_on_both_sides && (old.is_some() || new.is_some()) {
        ToolCallContent::Diff {
            path,
            old_text: old_text.map(|t| visible(&t)),
            new_text: new_text.map(|t| visible(&t)).unwrap_or_default(),
        }
    } else {
        ToolCallContent::text(visible(&format!(
            "{} {} (not text)",
            file.status().letter(),
            file.path
        )))
    }
}

fn plan(dir: &Path) -> Result<Option<Planned>, WorkspaceError> {
    let ws = Workspace::open(dir)?;
    if !matches!(ws.backing(), Backing::Git { .. }) {
        return Err(WorkspaceError::WrongBacking(String::new()));
    }
    let diff = ws.diff()?;
    let (kept, offered): (Vec<&FileChange>, Vec<&FileChange>) =
        diff.files.iter().partition(|f| f.sensitive().is_some());
    let kept_back: Vec<String> = kept.iter().map(|f| f.path.clone()).collect();
    if offered.is_empty() {
        return Ok(None);
    }
    let selection = Selection {
        files: offered.iter().map(|f| f.id.clone()).collect(),
        hunks: Vec::new(),
    };
    let digest = diff.digest(&selection)?;
    let plan = ws.plan_apply_with(
        &selection,
        &ApplyOptions {
            expect: Some(digest.clone()),
            include_policy: Vec::new(),
        },
    )?;
    if plan.is_empty() {
        return Ok(None);
    }
    let writing: std::collections::BTreeSet<&str> =
        plan.ops.iter().map(|op| op.path.as_str()).collect();
    let mut content: Vec<ToolCallContent> = offered
        .iter()
        .filter(|f| writing.contains(f.path.as_str()))
        .map(|f| shown(ws.project(), f))
        .collect();
    content.push(ToolCallContent::text(format!(
        "digest {digest}: exactly these changes are written if you allow it, checked against the \
         project first"
    )));
    if !kept_back.is_empty() {
        content.push(ToolCallContent::text(visible(&format!(
            "not offered here (Chock's own policy; use `chock apply {} --include-policy PATH`): {}",
            ws.session(),
            kept_back.join(", ")
        ))));
    }
    Ok(Some(Planned {
        plan,
        digest,
        content,
    }))
}

/// The `n`th offer of session `session` (in `dir`, logging to `log`, deciding through
/// `pipeline`): shown, settled, and written when allowed.
pub(crate) async fn offer(
    shared: &Shared,
    pipeline: &Pipeline,
    log: &Log,
    dir: &Path,
    n: u32,
) -> Offered {
    let at = dir.to_path_buf();
    let planned = match tokio::task::spawn_blocking(move || plan(&at)).await {
        Ok(Ok(Some(planned))) => planned,
        Ok(Ok(None)) => return Offered::Nothing,
        Ok(Err(WorkspaceError::WrongBacking(_))) => return Offered::NotGit,
        Ok(Err(e)) => return Offered::Failed { why: e.to_string() },
        Err(e) => return Offered::Failed { why: e.to_string() },
    };
    let Planned {
        plan,
        digest,
        content,
    } = planned;
    let files = plan.ops.len();
    let id = format!("apply-{n}");
    shared.start_call(ToolCall {
        tool_call_id: id.clone(),
        title: format!(
            "Apply {files} file{} to the project",
            if files == 1 { "" } else { "s" }
        ),
        kind: ToolKind::Edit,
        status: ToolCallStatus::Pending,
        content,
        locations: Vec::new(),
        raw_input: None,
    });
    let outcome = settle_and_write(shared, pipeline, log, plan, &id).await;
    match &outcome {
        Offered::Applied { apply_id } => shared.end_call(
            &id,
            true,
            &format!("applied as {apply_id} (revert with `chock undo {apply_id}`)"),
        ),
        Offered::Refused { why } | Offered::Failed { why } => shared.end_call(
            &id,
            false,
            &format!(
                "not applied: {why}. The work stays in session {}: `chock apply {} --expect {digest}`",
                shared.id().unwrap_or("?"),
                shared.id().unwrap_or("SESSION"),
            ),
        ),
        Offered::Nothing | Offered::NotGit => {}
    }
    outcome
}

async fn settle_and_write(
    shared: &Shared,
    pipeline: &Pipeline,
    log: &Log,
    plan: ApplyPlan,
    id: &str,
) -> Offered {
    let question = plan.question("apply");
    let action = match Action::parse("workspace.apply") {
        Ok(action) => action,
        Err(e) => return Offered::Failed { why: e.to_string() },
    };
    let mut ruling = Ruling {
        context: plan.summary().lines().map(str::to_string).collect(),
        ..Ruling::of(&pipeline.verdict(&action), &action)
    };
    if ruling.decision == Decision::Allow {
        ruling.decision = Decision::Ask;
        ruling.rule = format!(
            "{}; an editor's apply is still put to the person",
            ruling.rule
        );
    }
    if let Ok(mut offer) = shared.offer.lock() {
        *offer = Some(id.to_string());
    }
    let settled = pipeline
        .settle_ruled(None, &action, &question, ruling)
        .await;
    if let Ok(mut offer) = shared.offer.lock() {
        *offer = None;
    }
    let settled = match settled {
        Ok(settled) => settled,
        Err(e) => return Offered::Failed { why: e.to_string() },
    };
    if let Some(why) = settled.refusal() {
        return Offered::Refused { why };
    }
    if let Err(e) = log.record(None, plan.event()) {
        return Offered::Failed { why: e.to_string() };
    }
    let apply_id = plan.apply_id.clone();
    let digest = plan.digest().map(str::to_string);
    match tokio::task::spawn_blocking(move || plan.commit()).await {
        Ok(Ok(_)) => Offered::Applied { apply_id },
        Ok(Err(e)) => {
            let _ = log.record(
                None,
                Note::ApplyFailed {
                    apply_id: Some(apply_id.clone()),
                    digest,
                    failed: e.to_string(),
                },
            );
            Offered::Failed {
                why: format!("{e}; if it wrote anything, `chock undo {apply_id}` reverts it"),
            }
        }
        Err(e) => Offered::Failed { why: e.to_string() },
    }
}
