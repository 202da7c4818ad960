//! One session's workspace: what it is made of, and the one interface the rest of Chock uses.
//!
//! [`Workspace`] holds a session's identity (`meta.json` and the directories) and composes the
//! parts that each keep their own state: [`Before`] the base the changes are measured against
//! (and the background job writing it), [`Checkpoints`] what the last checkpoint recorded,
//! [`Turns`] the turn records and their late sync. Planning an apply or an adopt reads the
//! workspace through this interface and lives with its plan ([`ApplyPlan`], [`AdoptPlan`]).

use std::fs;
use std::path::{Path, PathBuf};

use chock_log::clock::now_rfc3339;
use chock_sandbox::WorkspaceMount;

use crate::adopt::AdoptPlan;
use crate::apply::{ApplyOptions, ApplyPlan, Selection};
use crate::background::BackgroundPause;
use crate::before::Before;
use crate::checkpoint::Checkpoints;
use crate::diff::Diff;
use crate::error::{Result, WorkspaceError};
use crate::git::Git;
use crate::meta::{Backing, Layout, META_FORMAT, Meta};
use crate::turns::{TurnContext, TurnSummary, Turns};

/// A session's throwaway copy of the project: an overlay whose lower layer is the project itself
/// and whose upper and work directories live in `<session>/workspace/`. See docs/workspace.md.
#[derive(Debug)]
pub struct Workspace {
    layout: Layout,
    meta: Meta,
    /// Dropped first: a base still being written is joined or abandoned before the turn records
    /// are flushed.
    before: Before,
    checkpoints: Checkpoints,
    turns: Turns,
}

impl Workspace {
    /// Creates the workspace of session `session_id` for `project` in `session_dir`.
    ///
    /// Nothing of the project is copied: the upper and work directories start empty. For a git
    /// project, the base commit (the user's state now) is written on a background thread, because
    /// that costs a `git add -A` over the whole tree; the first [`Workspace::checkpoint`],
    /// [`Workspace::diff`] or [`Workspace::wait_base`] waits for it. It reads only the project,
    /// which the session never writes, so it records the same state as if taken before returning.
    pub fn create(project: &Path, session_dir: &Path, session_id: &str) -> Result<Workspace> {
        let (project, layout) = Layout::create(project, session_dir)?;
        let backing = match Git::discover(&project) {
            Some((top, prefix)) => Backing::Git {
                top,
                prefix,
                ref_name: format!("refs/chock/{session_id}"),
                base: None,
            },
            None => Backing::Overlay,
        };
        let meta = Meta {
            format: META_FORMAT,
            session: session_id.to_string(),
            project,
            backing,
            created: now_rfc3339(),
        };
        meta.store(&layout.meta())?;
        Ok(Self::assemble(layout, meta, true))
    }

    /// Opens the workspace of an existing session.
    pub fn open(session_dir: &Path) -> Result<Workspace> {
        let layout = Layout::new(session_dir);
        let meta = Meta::load(&layout.meta())?;
        Ok(Self::assemble(layout, meta, false))
    }

    /// Creates a workspace that will be removed without review (`chock exec` without `--keep`):
    /// the overlay backing whatever the project is (no git process, no base commit, no
    /// checkpoints: [`Workspace::checkpoint`] returns `None`), and `meta.json` written without an
    /// fsync.
    ///
    /// What a git workspace adds to the overlay — the base commit, a checkpoint commit after every
    /// call, the session ref — exists so the work can be reviewed and applied later; a session
    /// that removes its workspace at close does neither, and the ref is deleted at that close.
    /// The confined call is the same either way, and a crash that leaves the workspace behind
    /// leaves one that `chock diff` (against the live project) and `chock workspace rm` still
    /// handle. `meta.json` is what `chock workspace list` shows and [`Workspace::open`] reads;
    /// losing it in a power cut costs a listing line ("missing"). It is still renamed into place,
    /// so a reader never sees half of it.
    pub fn create_scratch(
        project: &Path,
        session_dir: &Path,
        session_id: &str,
    ) -> Result<Workspace> {
        let (project, layout) = Layout::create(project, session_dir)?;
        let meta = scratch_meta(project, session_id);
        meta.store_unsynced(&layout.meta())?;
        Ok(Self::assemble(layout, meta, false))
    }

    /// A scratch workspace of which nothing is made on disk: its one call keeps the upper layer in
    /// a tmpfs of its own (chock-sandbox's `OwnOverlay::InMemory`), so there is no upper or work
    /// directory, no `meta.json`, nothing for `chock workspace list` to show or `chock diff` to
    /// read, and nothing to remove ([`crate::remove`] is not called for it). Its
    /// [`Workspace::mount`] still names the overlay's lower layer, the project; the upper and work
    /// paths it names are never made.
    pub fn in_memory(project: &Path, session_dir: &Path, session_id: &str) -> Result<Workspace> {
        let project =
            fs::canonicalize(project).map_err(|e| WorkspaceError::io("resolve", project, e))?;
        let meta = scratch_meta(project, session_id);
        Ok(Self::assemble(Layout::new(session_dir), meta, false))
    }

    /// Makes the workspace of fork `session_id` (in `session_dir`) from the record of `turn` in
    /// the parent session `parent_dir`, which must have the digest the parent's log names
    /// (`expect`). The new upper directory holds exactly that turn's change set; a git fork
    /// measures against the parent's base commit and its ref starts at the turn's checkpoint.
    pub fn fork(
        parent_dir: &Path,
        turn: u32,
        expect: &str,
        session_dir: &Path,
        session_id: &str,
    ) -> Result<Workspace> {
        crate::turns::fork(parent_dir, turn, expect, session_dir, session_id)
    }

    /// The parts around `meta`; `start_base` starts writing a git base in the background.
    fn assemble(layout: Layout, meta: Meta, start_base: bool) -> Workspace {
        Workspace {
            before: Before::new(&meta, &layout, start_base),
            checkpoints: Checkpoints::default(),
            turns: Turns::new(&layout.session_dir),
            layout,
            meta,
        }
    }

    /// What the sandbox mounts at the project's path: the overlay, project as the read-only lower
    /// layer. The driver must mount it with `userxattr` (it runs in a user namespace).
    pub fn mount(&self) -> WorkspaceMount {
        WorkspaceMount::Overlay {
            lower: self.meta.project.clone(),
            upper: self.layout.upper(),
            work: self.layout.work(),
        }
    }

    /// The real project.
    pub fn project(&self) -> &Path {
        &self.meta.project
    }

    /// The session id.
    pub fn session(&self) -> &str {
        &self.meta.session
    }

    /// How the work is kept.
    pub fn backing(&self) -> &Backing {
        &self.meta.backing
    }

    /// `meta.json` as loaded (a git base still being written shows as `None` here: ask
    /// [`Workspace::wait_base`]).
    pub fn meta(&self) -> &Meta {
        &self.meta
    }

    /// The session directory.
    pub fn session_dir(&self) -> &Path {
        &self.layout.session_dir
    }

    /// The overlay's upper directory (where the session's writes land).
    pub fn upper(&self) -> PathBuf {
        self.layout.upper()
    }

    /// The overlay's work directory.
    pub fn work(&self) -> PathBuf {
        self.layout.work()
    }

    pub(crate) fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Waits for the git base commit and returns it (`None` for the overlay backing). A workspace
    /// whose base was never finished (the process that created it died first) records it now.
    pub fn wait_base(&self) -> Result<Option<String>> {
        self.before.wait()
    }

    /// Pauses the git base this process is still writing, until the returned guard is dropped
    /// (see `crate::background`): the session holds it while it works, not while it waits.
    /// Nothing to pause is not an error: the guard is then empty.
    pub fn pause_background(&self) -> BackgroundPause {
        self.before.pause()
    }

    /// Lets the git base run while the returned guard lives, whatever pauses are held: the time
    /// a person takes to answer a question is the base's to use.
    pub fn lend_background(&self) -> BackgroundPause {
        self.before.lend()
    }

    /// Stops a git base this process is still writing (its git is killed, its thread joined), for
    /// a workspace about to be removed: nothing may write into it, or set its session ref, while
    /// it goes.
    pub fn abandon_base(&self) {
        self.before.abandon();
    }

    /// The session's changes, with file and hunk ids.
    pub fn diff(&self) -> Result<Diff> {
        Ok(Diff::from_raw(self.before.changes()?))
    }

    /// Git backing: records the overlay's current state as a commit on `refs/chock/<session>`
    /// (parent: the previous checkpoint, or the base) and returns it; `None` when nothing changed
    /// since the last checkpoint, and always `None` for the overlay backing (its upper directory is
    /// the record). Empty directories are not recorded (git has no way to).
    pub fn checkpoint(&self, label: &str) -> Result<Option<String>> {
        self.checkpoints
            .record(&self.before, &self.layout.dir, &self.meta.session, label)
    }

    /// Records the workspace as it is at the end of `turn` (see `crate::turns`). The record is in
    /// place when this returns and durable soon after ([`Workspace::flush_turns`]).
    pub fn record_turn(&self, turn: u32) -> Result<TurnSummary> {
        let raw = self.before.changes()?;
        // The base is in the record so a fork measures against the same start.
        let backing = self.before.recorded_backing(!raw.is_empty())?;
        let context = TurnContext {
            session: &self.meta.session,
            project: &self.meta.project,
            backing,
            commit: self.checkpoints.tip(&self.before),
        };
        self.turns.record(turn, raw, context)
    }

    /// Waits until every turn record written so far (and its blobs) is durable: they are synced
    /// off the turn's path (late_sync.rs). A session's end waits for it before its last line.
    pub fn flush_turns(&self) -> Result<()> {
        self.turns.flush()
    }

    /// Checks `selection` against the project and plans the writes. Refused for the overlay backing
    /// (its before side is the live project itself; take its work with [`Workspace::plan_adopt`]).
    pub fn plan_apply(&self, selection: &Selection) -> Result<ApplyPlan> {
        self.plan_apply_expecting(selection, None)
    }

    /// [`Workspace::plan_apply`], pinned to a reviewed diff: when `expect` is given and the digest
    /// of the selected changes (as [`crate::Diff::digest`] computes it, from the diff this plan
    /// writes) differs, the session changed since the review and the apply is refused with
    /// [`WorkspaceError::DigestMismatch`] before anything is decided, logged or written.
    pub fn plan_apply_expecting(
        &self,
        selection: &Selection,
        expect: Option<&str>,
    ) -> Result<ApplyPlan> {
        self.plan_apply_with(
            selection,
            &ApplyOptions {
                expect: expect.map(str::to_string),
                include_policy: Vec::new(),
            },
        )
    }

    /// [`Workspace::plan_apply`] with [`ApplyOptions`]: pinned to a reviewed digest, and taking
    /// the changes to Chock's own configuration the person named. Checked in this order, each
    /// before anything is decided, logged or written: the selection, the digest, the paths that
    /// configure Chock, then the project under every change.
    pub fn plan_apply_with(
        &self,
        selection: &Selection,
        options: &ApplyOptions,
    ) -> Result<ApplyPlan> {
        ApplyPlan::new(self, selection, options)
    }

    /// Lists what adopt would copy and checks that no destination exists yet. A change to a path
    /// that configures Chock is refused ([`WorkspaceError::ConfiguresChock`]): see
    /// [`Workspace::plan_adopt_with`].
    pub fn plan_adopt(&self) -> Result<AdoptPlan> {
        self.plan_adopt_with(&[])
    }

    /// [`Workspace::plan_adopt`], also taking the changes to Chock's own configuration whose paths
    /// `include_policy` names (the person named them and the caller has them confirmed, as for
    /// [`crate::ApplyOptions::include_policy`]): adopt copies into the project too, and a copied
    /// policy file is one `cp` away from governing the next session.
    pub fn plan_adopt_with(&self, include_policy: &[String]) -> Result<AdoptPlan> {
        AdoptPlan::new(self, include_policy)
    }
}

/// The `meta.json` of a scratch workspace: the overlay backing whatever the project is.
fn scratch_meta(project: PathBuf, session_id: &str) -> Meta {
    Meta {
        format: META_FORMAT,
        session: session_id.to_string(),
        project,
        backing: Backing::Overlay,
        created: now_rfc3339(),
    }
}
