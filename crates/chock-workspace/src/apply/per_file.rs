//! One file's part of an apply plan: a text file's picked hunks merged onto what the project
//! holds now, or a whole file's change checked against it.

use std::path::Path;

use super::{Plan, real, whole};
use crate::diff::FileChange;
use crate::entry::Entry;
use crate::error::Result;
use crate::hunks::{Edit, merge};
use crate::write::Op;

/// A text file, some or all of its hunks: merged onto whatever the project holds now.
pub(super) fn plan_hunks(
    project: &Path,
    file: &FileChange,
    picked: &[&crate::hunks::Hunk],
    is_whole: bool,
    out: &mut Plan,
) -> Result<()> {
    let (
        Some(Entry::File {
            exec: old_exec,
            data: base,
        }),
        Some(Entry::File { exec: new_exec, .. }),
    ) = (&file.old, &file.new)
    else {
        return Ok(());
    };
    let now = real(project, &file.path)?;
    let Some(Entry::File {
        exec: now_exec,
        data: now_data,
    }) = &now
    else {
        out.conflicts
            .push(format!("{}: no longer a file in the project", file.path));
        return Ok(());
    };
    let selected: Vec<(String, Edit)> = picked
        .iter()
        .map(|h| {
            (
                h.id.clone(),
                Edit {
                    range: h.span.clone(),
                    lines: h.replacement.clone(),
                },
            )
        })
        .collect();
    let merged = match merge(base, now_data, &selected) {
        Ok(m) => m,
        Err(clashes) => {
            for c in clashes {
                out.conflicts.push(format!(
                    "hunk {} ({} lines {}-{}): the project changed there since the session started",
                    c.label, file.path, c.lines.0, c.lines.1
                ));
            }
            return Ok(());
        }
    };
    let exec = if is_whole && old_exec != new_exec {
        if now_exec != old_exec && now_exec != new_exec {
            out.conflicts.push(format!(
                "{}: mode changed in the project since the session started",
                file.path
            ));
        }
        *new_exec
    } else {
        *now_exec
    };
    out.already.extend(merged.already);
    let after = Entry::File {
        exec,
        data: merged.data,
    };
    if now.as_ref() != Some(&after) {
        out.ops.push(Op {
            path: file.path.clone(),
            before: now.clone(),
            after: Some(after),
        });
    }
    Ok(())
}

/// A whole-entry change: binary, symlink, mode only, added, deleted, renamed, directory.
pub(super) fn plan_file(project: &Path, file: &FileChange, out: &mut Plan) -> Result<()> {
    let why = "the project changed there since the session started";
    if let Some(from) = &file.old_path {
        whole(project, from, file.old.as_ref(), None, why, out)?;
        whole(project, &file.path, None, file.new.as_ref(), why, out)?;
        return Ok(());
    }
    whole(
        project,
        &file.path,
        file.old.as_ref(),
        file.new.as_ref(),
        why,
        out,
    )
}
