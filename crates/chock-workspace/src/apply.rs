//! `apply`: carrying selected changes into the real project (and, in `undo.rs`, taking one back).
//! Both are two steps, so the caller can decide by policy and log between checking and writing:
//! `plan_*` reads and checks everything and writes nothing; [`ApplyPlan::commit`] writes.

mod per_file;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use chock_log::clock::now_rfc3339;

use crate::diff::FileChange;
use crate::entry::{Entry, entry_hash, sha256_hex};
use crate::error::{Result, WorkspaceError};
use crate::meta::Backing;
use crate::record::{ApplyRecord, FileRecord, RECORD_FORMAT, Records};
use crate::select::{digest, pick};
use crate::workspace::Workspace;
use crate::write::{Op, check_parents, perform, setid_stripped};
use per_file::{plan_file, plan_hunks};

/// Which changes to apply: whole files (by path or file id) and single hunks (by hunk id). Both
/// empty means everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// Whole files, each by its path or file id.
    pub files: Vec<String>,
    /// Single hunks, each by its hunk id.
    pub hunks: Vec<String>,
}

/// What an apply may take beyond the ordinary review; the default is nothing beyond it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApplyOptions {
    /// The digest of the reviewed selection (`chock diff`'s last line): the apply is refused with
    /// [`WorkspaceError::DigestMismatch`] unless the selected changes still have it.
    pub expect: Option<String>,
    /// Paths of selected changes that configure Chock ([`crate::Sensitive`]) which the person named
    /// and will confirm separately. A selected change to such a path that is not named here is
    /// refused with [`WorkspaceError::ConfiguresChock`]; a name here that is no such path among the
    /// selected changes is refused as an unknown selection. The confirmation is the caller's duty:
    /// this crate cannot ask (the CLI asks at a terminal, and refuses with none; the agent's
    /// in-session apply never names any).
    pub include_policy: Vec<String>,
}

/// A checked apply or undo, not yet written.
#[derive(Debug, Clone)]
pub struct ApplyPlan {
    /// The id the apply will have (`<session>.<n>`): `chock undo` takes it.
    pub apply_id: String,
    /// The writes, one per path.
    pub ops: Vec<Op>,
    /// Selected hunks or files the project already holds (nothing to write for them).
    pub already: Vec<String>,
    /// The digest of the selected changes this plan was made from (`None` for an undo).
    pub(crate) digest: Option<String>,
    pub(crate) record: ApplyRecord,
    pub(crate) records: Records,
    pub(crate) project: PathBuf,
}

impl ApplyPlan {
    /// The real project this plan writes into.
    pub fn project(&self) -> &Path {
        &self.project
    }

    /// Whether there is nothing to write.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// The digest of the selected changes (what `chock diff` prints for the same selection): what
    /// `--expect` compares, and what the `workspace.apply` event records. `None` for an undo.
    pub fn digest(&self) -> Option<&str> {
        self.digest.as_deref()
    }

    /// The question a person approving this plan is asked, the same in every interface: how many
    /// paths land where, and the digest of the reviewed selection they came from. `verb` names
    /// the act (`apply`, `undo`).
    pub fn question(&self, verb: &str) -> String {
        let digest = self
            .digest()
            .map(|d| format!(" — digest {d}"))
            .unwrap_or_default();
        format!(
            "{verb}: write {} path(s) into {}{digest}",
            self.ops.len(),
            self.project().display()
        )
    }

    /// A `--stat`-like summary of exactly what will be written: one line per path, measured
    /// against what the project holds now (not against the base).
    pub fn summary(&self) -> String {
        let files = self
            .ops
            .iter()
            .map(|op| FileChange::new(op.path.clone(), None, op.before.clone(), op.after.clone()))
            .collect();
        crate::render::render(
            &crate::diff::Diff { files },
            crate::render::RenderMode::Stat,
            false,
        )
    }

    /// The writes to paths that configure Chock (see [`crate::Sensitive`]): what a person must
    /// confirm, one by one, before [`ApplyPlan::commit`]. Empty unless
    /// [`ApplyOptions::include_policy`] named them (an undo restores what an earlier apply found).
    pub fn sensitive_ops(&self) -> Vec<(&Op, crate::Sensitive)> {
        self.ops
            .iter()
            .filter_map(|op| crate::diff::sensitive_path(&op.path).map(|s| (op, s)))
            .collect()
    }

    /// SHA-256 over the touched paths as they are now.
    pub fn base_hash(&self) -> &str {
        &self.record.base_hash
    }

    /// SHA-256 over the touched paths as they will be.
    pub fn result_hash(&self) -> &str {
        &self.record.result_hash
    }

    /// The `workspace.apply` event: ids, hashes, the touched paths, and the changes to Chock's
    /// own configuration among them (named and confirmed by the person, or the plan would not exist).
    pub fn event(&self) -> chock_protocol::log::WorkspaceApply {
        let r = &self.record;
        chock_protocol::log::WorkspaceApply {
            apply_id: r.apply_id.clone(),
            kind: r.kind.clone(),
            undo_of: r.undo_of.clone(),
            project: r.project.to_string_lossy().into_owned(),
            base_commit: r.base_commit.clone(),
            checkpoint: r.checkpoint.clone(),
            base_hash: r.base_hash.clone(),
            result_hash: r.result_hash.clone(),
            digest: self.digest.clone(),
            hunks: r.hunks.clone(),
            already: self.already.clone(),
            setid_stripped: r.setid_stripped.clone(),
            files: self
                .ops
                .iter()
                .map(|op| chock_protocol::log::AppliedFile {
                    path: op.path.clone(),
                    before: entry_hash(op.before.as_ref()),
                    after: entry_hash(op.after.as_ref()),
                })
                .collect(),
            policy_files: self
                .sensitive_ops()
                .into_iter()
                .map(|(op, _)| op.path.clone())
                .collect(),
        }
    }

    /// Writes the plan into the project: the record first (so an interrupted write can still be
    /// undone), then every staged file renamed into place. Returns the record and the directories
    /// left in place because they still hold other things.
    pub fn commit(self) -> Result<(ApplyRecord, Vec<String>)> {
        let mut record = self.record;
        for op in &self.ops {
            let before = op
                .before
                .as_ref()
                .map(|e| self.records.store(e))
                .transpose()?;
            let after = op
                .after
                .as_ref()
                .map(|e| self.records.store(e))
                .transpose()?;
            record.files.push(FileRecord {
                path: op.path.clone(),
                before,
                after,
            });
        }
        record.created = now_rfc3339();
        let kept = perform(&self.project, &self.ops, &record.apply_id, || {
            self.records.save(&record)
        })?;
        if let Some(of) = &record.undo_of {
            let mut original = self.records.read(of)?;
            original.undone_by = Some(record.apply_id.clone());
            self.records.save(&original)?;
        }
        Ok((record, kept))
    }
}

pub(crate) fn state_hash(ops: &[Op], after: bool) -> String {
    let mut text = String::new();
    for op in ops {
        let entry = if after {
            op.after.as_ref()
        } else {
            op.before.as_ref()
        };
        text.push_str(&format!("{}\0{}\n", op.path, entry_hash(entry)));
    }
    sha256_hex(text.as_bytes())
}

/// Reads what the project holds at `rel`, never through a symlinked parent: a path below a
/// symlink reads as absent (so a planned write there fails its parent check, and a planned removal
/// is a conflict) instead of reading, and later writing, wherever the link points.
pub(crate) fn real(project: &Path, rel: &str) -> Result<Option<Entry>> {
    let root = crate::beneath::open_root(project)?;
    match crate::beneath::parent(&root, project, rel, false) {
        Ok(crate::beneath::Parent::Found(dir, name)) => {
            Entry::read_at(&dir, Path::new(&name), &project.join(rel))
        }
        Ok(crate::beneath::Parent::Missing) | Err(WorkspaceError::Conflict { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Plans a whole-entry change at `path`: the project must hold `expected` (or already `wanted`).
pub(crate) fn whole(
    project: &Path,
    path: &str,
    expected: Option<&Entry>,
    wanted: Option<&Entry>,
    why: &str,
    out: &mut Plan,
) -> Result<()> {
    let now = real(project, path)?;
    if now.as_ref() == wanted {
        out.already.push(path.to_string());
    } else if now.as_ref() == expected {
        out.ops.push(Op {
            path: path.to_string(),
            before: now,
            after: wanted.cloned(),
        });
    } else {
        let was = expected.map_or("nothing", Entry::kind_name);
        out.conflicts
            .push(format!("{path}: {why} (expected {was} there)"));
    }
    Ok(())
}

#[derive(Default)]
pub(crate) struct Plan {
    pub(crate) ops: Vec<Op>,
    pub(crate) already: Vec<String>,
    pub(crate) conflicts: Vec<String>,
}

impl Plan {
    /// Names every planned write to a path an apply must never touch (see
    /// [`crate::beneath::refusal`]) as a conflict, so it is refused before the decision and the log.
    /// A destination below something in the project that is not a directory (a symlink the user
    /// made since the base, say) is named here too, rather than only when the write starts.
    pub(crate) fn refuse_unsafe_paths(&mut self, project: &Path) {
        let refused = self
            .ops
            .iter()
            .filter_map(|op| crate::beneath::refusal(&op.path));
        self.conflicts.extend(refused);
        if self.conflicts.is_empty()
            && let Err(WorkspaceError::Conflict { conflicts }) = check_parents(project, &self.ops)
        {
            self.conflicts.extend(conflicts);
        }
    }
}

impl ApplyPlan {
    /// Checks `selection` of `workspace`'s changes against the project and plans the writes,
    /// pinned to a reviewed digest and taking the changes to Chock's own configuration the person
    /// named ([`ApplyOptions`]). Checked in this order, each before anything is decided, logged or
    /// written: the selection, the digest, the paths that configure Chock, then the project under
    /// every change. Refused for the overlay backing (its before side is the live project itself;
    /// take its work with [`Workspace::plan_adopt`]).
    pub(crate) fn new(
        workspace: &Workspace,
        selection: &Selection,
        options: &ApplyOptions,
    ) -> Result<ApplyPlan> {
        let expect = options.expect.as_deref();
        let Backing::Git { top, ref_name, .. } = workspace.backing() else {
            return Err(WorkspaceError::WrongBacking(format!(
                "session {} has an overlay workspace (the project has no git), so there is no base to \
                 check an apply against; use `chock workspace adopt {}` to copy its changes aside",
                workspace.session(),
                workspace.session()
            )));
        };
        let base = workspace.wait_base()?;
        workspace.checkpoint("before apply")?;
        let checkpoint = crate::git::Git::new(top)
            .text(&["rev-parse", "--verify", ref_name])
            .ok();
        let diff = workspace.diff()?;
        let picked = pick(&diff, selection)?;
        let digest = digest(&picked);
        if let Some(expected) = expect
            && !expected.eq_ignore_ascii_case(&digest)
        {
            return Err(WorkspaceError::DigestMismatch {
                session: workspace.session().to_string(),
                expected: expected.to_string(),
                actual: digest,
            });
        }
        refuse_unnamed_sensitive(
            workspace.session(),
            picked.iter().map(|p| p.file),
            &options.include_policy,
        )?;
        let hunk_ids: BTreeSet<&str> = selection.hunks.iter().map(String::as_str).collect();
        let project = workspace.project().to_path_buf();
        let mut plan = Plan::default();
        for p in &picked {
            if p.file.is_text() && !p.hunks.is_empty() {
                plan_hunks(&project, p.file, &p.hunks, p.whole, &mut plan)?;
            } else if p.whole {
                plan_file(&project, p.file, &mut plan)?;
            }
        }
        plan.refuse_unsafe_paths(&project);
        if !plan.conflicts.is_empty() {
            return Err(WorkspaceError::Conflict {
                conflicts: plan.conflicts,
            });
        }
        let records = Records::new(workspace.layout().applies());
        let apply_id = records.next_id(workspace.session())?;
        let record = ApplyRecord {
            format: RECORD_FORMAT,
            apply_id: apply_id.clone(),
            kind: "apply".into(),
            undo_of: None,
            session: workspace.session().to_string(),
            project: project.clone(),
            created: String::new(),
            base_commit: base,
            checkpoint,
            base_hash: state_hash(&plan.ops, false),
            result_hash: state_hash(&plan.ops, true),
            hunks: hunk_ids.iter().map(|s| s.to_string()).collect(),
            files: Vec::new(),
            setid_stripped: setid_stripped(&project, &plan.ops),
            undone_by: None,
        };
        Ok(ApplyPlan {
            apply_id,
            ops: plan.ops,
            already: plan.already,
            digest: Some(digest),
            record,
            records,
            project,
        })
    }
}

/// Refuses `files` (the selected changes) if one touches a path that configures Chock and
/// `named` does not name it ([`WorkspaceError::ConfiguresChock`], naming every such path), or if
/// `named` holds a name that is no such path among them ([`WorkspaceError::UnknownSelection`]).
/// Names are exact paths, never file ids: an id is a short hash of a path the agent chose.
pub(crate) fn refuse_unnamed_sensitive<'a>(
    session: &str,
    files: impl Iterator<Item = &'a FileChange>,
    named: &[String],
) -> Result<()> {
    let touched: BTreeSet<&str> = files
        .flat_map(|f| f.sensitive_paths().into_iter().map(|(p, _)| p))
        .collect();
    let named: BTreeSet<&str> = named.iter().map(|n| n.trim_end_matches('/')).collect();
    if let Some(stray) = named.difference(&touched).next() {
        return Err(WorkspaceError::UnknownSelection {
            kind: "policy file (--include-policy)",
            name: stray.to_string(),
        });
    }
    let unnamed: Vec<String> = touched.difference(&named).map(|p| p.to_string()).collect();
    if unnamed.is_empty() {
        Ok(())
    } else {
        Err(WorkspaceError::ConfiguresChock {
            session: session.to_string(),
            paths: unnamed,
        })
    }
}
