//! `undo`: taking one apply back, from its record. The reverse of each text change is merged onto
//! the file as it is now (the user's later edits elsewhere stay); everything else must still be
//! what the apply left. Planned like an apply, and written by the same [`ApplyPlan::commit`].

use std::path::Path;

use crate::apply::{ApplyPlan, Plan, real, state_hash, whole};
use crate::entry::Entry;
use crate::error::{Result, WorkspaceError};
use crate::hunks::{Edit, edits, merge, split_lines};
use crate::record::{ApplyRecord, RECORD_FORMAT, Records, session_of};
use crate::write::{Op, setid_stripped};

/// Plans the undo of `apply_id`, found under `sessions_root`.
pub fn plan_undo(sessions_root: &Path, apply_id: &str) -> Result<ApplyPlan> {
    let session_dir = session_of(sessions_root, apply_id)?;
    let records = Records::new(session_dir.join(crate::meta::APPLIES_DIR));
    let original = records.read(apply_id)?;
    if let Some(by) = &original.undone_by {
        return Err(WorkspaceError::AlreadyUndone(format!(
            "{apply_id} (by {by})"
        )));
    }
    let project = original.project.clone();
    let mut plan = Plan::default();
    for file in &original.files {
        let before = file.before.as_ref().map(|s| records.load(s)).transpose()?;
        let after = file.after.as_ref().map(|s| records.load(s)).transpose()?;
        let now = real(&project, &file.path)?;
        match (&before, &after, &now) {
            (
                Some(Entry::File { exec: bx, data: bd }),
                Some(a @ Entry::File { exec: ax, data: ad }),
                Some(Entry::File { exec: nx, data: nd }),
            ) if a.is_text() && now.as_ref() != before.as_ref() => {
                let reverse: Vec<(String, Edit)> = edits(&split_lines(ad), &split_lines(bd))
                    .into_iter()
                    .map(|e| (String::new(), e))
                    .collect();
                match merge(ad, nd, &reverse) {
                    Ok(m) => {
                        let exec = if nx == ax { *bx } else { *nx };
                        let restored = Entry::File { exec, data: m.data };
                        if now.as_ref() != Some(&restored) {
                            plan.ops.push(Op {
                                path: file.path.clone(),
                                before: now.clone(),
                                after: Some(restored),
                            });
                        }
                    }
                    Err(clashes) => {
                        for c in clashes {
                            plan.conflicts.push(format!(
                                "{} lines {}-{}: edited since apply {apply_id}",
                                file.path, c.lines.0, c.lines.1
                            ));
                        }
                    }
                }
            }
            _ => whole(
                &project,
                &file.path,
                after.as_ref(),
                before.as_ref(),
                &format!("changed since apply {apply_id}"),
                &mut plan,
            )?,
        }
    }
    plan.refuse_unsafe_paths(&project);
    if !plan.conflicts.is_empty() {
        return Err(WorkspaceError::Conflict {
            conflicts: plan.conflicts,
        });
    }
    let new_id = records.next_id(&original.session)?;
    let record = ApplyRecord {
        format: RECORD_FORMAT,
        apply_id: new_id.clone(),
        kind: "undo".into(),
        undo_of: Some(apply_id.to_string()),
        session: original.session.clone(),
        project: project.clone(),
        created: String::new(),
        base_commit: original.base_commit.clone(),
        checkpoint: original.checkpoint.clone(),
        base_hash: state_hash(&plan.ops, false),
        result_hash: state_hash(&plan.ops, true),
        hunks: Vec::new(),
        files: Vec::new(),
        setid_stripped: setid_stripped(&project, &plan.ops),
        undone_by: None,
    };
    Ok(ApplyPlan {
        apply_id: new_id,
        ops: plan.ops,
        already: plan.already,
        digest: None,
        record,
        records,
        project,
    })
}
