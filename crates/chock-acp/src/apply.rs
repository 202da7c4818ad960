//! The end of a turn that changed files: the editor is shown the diff as a tool call ("Apply N
//! files to the project", every file's change and the digest) and asked, through the session's
//! own decision pipeline, whether to write it into the real project.
//!
//! The apply is not carried out here: it is the session's one apply, [`Op::Apply`] through the
//! session's handle, pinned to the digest of exactly what the editor was shown — the same act
//! the daemon's `review.apply` and the terminal carry out (`chock_runtime::review`). The
//! runtime plans it against that digest (a session or project that changed since is refused
//! before anything is decided), settles the `workspace.apply` act through the session's own
//! pipeline, logs the decision and the plan's record, and only then writes. The handle is
//! [`SessionHandle::confirming_applies`]: the table's word stands when it says deny or asks a
//! reviewer; when it says allow, the editor is still asked — an apply is never made at every
//! turn's end just because the table would let it.
//! A change to Chock's own policy (`chock.toml`) is never applied from an editor: it stays for
//! `chock apply --include-policy`.

use std::path::Path;

use chock_protocol::rpc::{Applied, ErrorKind, Selection};
use chock_runtime::{Op, OpError, Reply, SessionHandle};
use chock_workspace::{Backing, Entry, FileChange, Workspace};

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

/// What is offered, with what the editor is shown.
struct Planned {
    /// Every change but those to Chock's own policy.
    selection: Selection,
    /// The digest of exactly that selection, as it was read for `content`.
    digest: String,
    /// How many files the apply writes.
    files: usize,
    content: Vec<ToolCallContent>,
}

/// Why nothing is offered.
enum NoOffer {
    /// Nothing to apply.
    Nothing,
    /// The project has no git.
    NotGit,
    /// Reading or planning failed.
    Failed(String),
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

fn failed(e: impl std::fmt::Display) -> NoOffer {
    NoOffer::Failed(e.to_string())
}

/// The workspace's changes read once: what the editor is shown (whole files, which the
/// protocol's `review.diff` does not carry) and the digest of exactly that selection (taken as
/// `review.diff` takes it), then the runtime's own plan of the apply pinned to it, for which
/// files it writes.
fn plan(session: &str, dir: &Path) -> Result<Planned, NoOffer> {
    let ws = Workspace::open(dir).map_err(failed)?;
    if !matches!(ws.backing(), Backing::Git { .. }) {
        return Err(NoOffer::NotGit);
    }
    let diff = ws.diff().map_err(failed)?;
    let (kept, offered): (Vec<&FileChange>, Vec<&FileChange>) =
        diff.files.iter().partition(|f| f.sensitive().is_some());
    let kept_back: Vec<String> = kept.iter().map(|f| f.path.clone()).collect();
    if offered.is_empty() {
        return Err(NoOffer::Nothing);
    }
    let selection = Selection {
        files: offered.iter().map(|f| f.id.clone()).collect(),
        hunks: Vec::new(),
    };
    let digest = diff
        .digest(&chock_workspace::Selection {
            files: selection.files.clone(),
            hunks: Vec::new(),
        })
        .map_err(failed)?;
    let plan = chock_runtime::review::plan_apply(dir, &selection, &digest)
        .map_err(|e| NoOffer::Failed(e.message))?;
    if plan.is_empty() {
        return Err(NoOffer::Nothing);
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
            "not offered here (Chock's own policy; use `chock apply {session} --include-policy PATH`): {}",
            kept_back.join(", ")
        ))));
    }
    Ok(Planned {
        selection,
        digest,
        files: plan.ops.len(),
        content,
    })
}

/// The `n`th offer of the session `handle` holds: shown, then applied through the handle when
/// the editor allows it.
pub(crate) async fn offer(shared: &Shared, handle: &SessionHandle, n: u32) -> Offered {
    let session = handle.id().to_string();
    let dir = handle.dir().to_path_buf();
    let planned = match tokio::task::spawn_blocking(move || plan(&session, &dir)).await {
        Ok(Ok(planned)) => planned,
        Ok(Err(NoOffer::Nothing)) => return Offered::Nothing,
        Ok(Err(NoOffer::NotGit)) => return Offered::NotGit,
        Ok(Err(NoOffer::Failed(why))) => return Offered::Failed { why },
        Err(e) => return Offered::Failed { why: e.to_string() },
    };
    let Planned {
        selection,
        digest,
        files,
        content,
    } = planned;
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
    // The question the apply asks is about this tool call.
    if let Ok(mut offer) = shared.offer.lock() {
        *offer = Some(id.clone());
    }
    let applied = handle
        .send(Op::Apply {
            selection,
            digest: digest.clone(),
        })
        .await;
    if let Ok(mut offer) = shared.offer.lock() {
        *offer = None;
    }
    let outcome = outcome(applied);
    match &outcome {
        Offered::Applied { apply_id } => shared.end_call(
            &id,
            true,
            &format!("applied as {apply_id} (revert with `chock undo {apply_id}`)"),
        ),
        Offered::Nothing => shared.end_call(
            &id,
            true,
            "nothing written: the project holds these changes already",
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
        Offered::NotGit => {}
    }
    outcome
}

/// What the handle's apply came to, for the editor.
fn outcome(applied: Result<Reply, OpError>) -> Offered {
    match applied {
        Ok(Reply::Applied(Applied {
            apply_id: Some(apply_id),
            ..
        })) => Offered::Applied { apply_id },
        // The project came to hold the changes between the offer and the apply.
        Ok(Reply::Applied(Applied { apply_id: None, .. })) => Offered::Nothing,
        Ok(other) => Offered::Failed {
            why: format!("the session answered the apply with {other:?}"),
        },
        Err(OpError::Review(e)) if e.kind() == ErrorKind::Refused => {
            Offered::Refused { why: e.message }
        }
        Err(e) => Offered::Failed { why: e.to_string() },
    }
}
