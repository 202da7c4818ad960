//! One session's workspace: creating it, opening it again, the mount the sandbox builds, checkpoints
//! and the diff.

use std::fs;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use chock_log::clock::now_rfc3339;
use chock_sandbox::WorkspaceMount;

use crate::background::BackgroundPause;
use crate::base::BaseJob;
use crate::diff::Diff;
use crate::entry::Entry;
use crate::error::{Result, WorkspaceError};
use crate::git::Git;
use crate::late_sync::LateSync;
use crate::meta::{Backing, Layout, META_FORMAT, Meta};
use crate::old::{GitSide, LowerSide};
use crate::upper::{RawChange, scan};

mod checkpoint;
mod scratch;

/// A session's throwaway copy of the project: an overlay whose lower layer is the project itself
/// and whose upper and work directories live in `<session>/workspace/`. See docs/workspace.md.
#[derive(Debug)]
pub struct Workspace {
    layout: Layout,
    meta: Meta,
    /// The git base commit being written in the background (git backing, just created), and the
    /// session ref's loose file.
    base_job: Mutex<Option<BaseJob>>,
    /// The base commit's listing, read once: the base never changes.
    side: Mutex<Option<Arc<GitSide>>>,
    /// What the last checkpoint recorded, to skip one that would record the same again.
    last: Mutex<Option<LastCheckpoint>>,
    /// Turn records and their blobs, synced off the turn's path.
    late: LateSync,
}

/// The change set a checkpoint recorded and the commit the session ref then pointed at.
#[derive(Debug, Clone)]
struct LastCheckpoint {
    digest: [u8; 32],
    tip: String,
    ref_file: PathBuf,
}

impl LastCheckpoint {
    /// Whether the session ref still points at `tip`, read from its loose file (no git). A ref
    /// that is packed, gone, symbolic or kept by another backend reads as not: the caller then
    /// takes the full path.
    fn still_tip(&self) -> bool {
        fs::read(&self.ref_file).is_ok_and(|text| text.trim_ascii() == self.tip.as_bytes())
    }
}

/// A digest of a whole change set, every path with its before and after entry (kind, executable
/// bit, bytes, link target). A checkpoint's tree is a function of the base and this set alone.
fn digest(raw: &std::collections::BTreeMap<String, RawChange>) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    fn bytes(h: &mut Sha256, b: &[u8]) {
        h.update((b.len() as u64).to_le_bytes());
        h.update(b);
    }
    fn entry(h: &mut Sha256, e: Option<&Entry>) {
        match e {
            None => h.update([0]),
            Some(Entry::Dir) => h.update([1]),
            Some(Entry::File { exec, data }) => {
                h.update([2, u8::from(*exec)]);
                bytes(h, data);
            }
            Some(Entry::Symlink { target }) => {
                h.update([3]);
                bytes(h, target);
            }
        }
    }
    let mut h = Sha256::new();
    h.update((raw.len() as u64).to_le_bytes());
    for (path, change) in raw {
        bytes(&mut h, path.as_bytes());
        entry(&mut h, change.old.as_ref());
        entry(&mut h, change.new.as_ref());
    }
    h.finalize().into()
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
        let (project, layout) = make_dirs(project, session_dir)?;
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
        let base_job = match &meta.backing {
            Backing::Git { top, ref_name, .. } => Some(BaseJob::start(
                Git::new(top),
                layout.clone(),
                ref_name.clone(),
                session_id.to_string(),
            )),
            Backing::Overlay => None,
        };
        Ok(Workspace {
            layout,
            meta,
            base_job: Mutex::new(base_job),
            side: Mutex::new(None),
            last: Mutex::new(None),
            late: LateSync::default(),
        })
    }

    /// Opens the workspace of an existing session.
    pub fn open(session_dir: &Path) -> Result<Workspace> {
        let layout = Layout::new(session_dir);
        let meta = Meta::load(&layout.meta())?;
        Ok(Workspace {
            layout,
            meta,
            base_job: Mutex::new(None),
            side: Mutex::new(None),
            last: Mutex::new(None),
            late: LateSync::default(),
        })
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

    /// Where turn records are written to be synced off the turn's path.
    pub(crate) fn late(&self) -> &LateSync {
        &self.late
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
        let Backing::Git {
            top,
            ref_name,
            base,
            ..
        } = &self.meta.backing
        else {
            return Ok(None);
        };
        if let Some(base) = base {
            return Ok(Some(base.clone()));
        }
        if let Some(job) = self.take_base_job() {
            let (base, ref_file) = job.join(&self.layout)?;
            // The ref points at the base, whose tree is the base's own: the empty change set.
            *self
                .last
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(LastCheckpoint {
                digest: digest(&std::collections::BTreeMap::new()),
                tip: base.clone(),
                ref_file,
            });
            return Ok(Some(base));
        }
        if let Backing::Git {
            base: Some(base), ..
        } = Meta::load(&self.layout.meta())?.backing
        {
            return Ok(Some(base));
        }
        crate::base::record(
            &Git::new(top),
            &self.layout,
            ref_name,
            &self.meta.session,
            None,
        )
        .map(Some)
    }

    /// Whether the upper directory holds nothing of the project (a `.git` at its top is not the
    /// project's content, as in the scan): one listing of one directory.
    fn upper_untouched(&self) -> Result<bool> {
        let upper = self.layout.upper();
        let root = chock_beneath::Dir::open_root(&upper)
            .map_err(|e| WorkspaceError::io("open", &upper, e))?;
        let names = root
            .names()
            .map_err(|e| WorkspaceError::io("list", &upper, e))?;
        Ok(names.iter().all(|n| n == ".git"))
    }

    /// The commit the last checkpoint of this process left the session ref at.
    pub(crate) fn last_tip(&self) -> Option<String> {
        self.last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .map(|l| l.tip.clone())
    }

    /// Pauses the git base this process is still writing, until the returned guard is dropped
    /// (see `crate::background`): the session holds it while it works, not while it waits.
    /// Nothing to pause is not an error: the guard is then empty.
    pub fn pause_background(&self) -> BackgroundPause {
        BackgroundPause::hold(self.background())
    }

    /// Lets the git base run while the returned guard lives, whatever pauses are held: the time
    /// a person takes to answer a question is the base's to use.
    pub fn lend_background(&self) -> BackgroundPause {
        BackgroundPause::lend(self.background())
    }

    fn background(&self) -> Option<std::sync::Arc<crate::background::Background>> {
        self.base_job
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .filter(|job| job.running())
            .map(BaseJob::control)
    }

    /// Stops a git base this process is still writing (its git is killed, its thread joined), for
    /// a workspace about to be removed: nothing may write into it, or set its session ref, while
    /// it goes.
    pub fn abandon_base(&self) {
        if let Some(job) = self.take_base_job() {
            job.abandon();
        }
    }

    /// The git base job this process still owns, taken out of the workspace (joined or abandoned
    /// by the caller).
    fn take_base_job(&self) -> Option<BaseJob> {
        self.base_job
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }

    /// Whether this process is still writing the git base.
    pub(crate) fn base_pending(&self) -> bool {
        self.base_job
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .is_some_and(BaseJob::running)
    }

    /// Every path whose content differs between the before side and the overlay's upper layer.
    /// For a git project, new paths the project's ignore rules exclude are left out (build output
    /// the session made is not its work); they stay visible in the overlay.
    pub(crate) fn raw_changes(&self) -> Result<std::collections::BTreeMap<String, RawChange>> {
        let upper = self.layout.upper();
        if self.upper_untouched()? {
            // Nothing was copied up, made or deleted: no path can differ, whatever the base is.
            return Ok(std::collections::BTreeMap::new());
        }
        match &self.meta.backing {
            Backing::Git { top, prefix, .. } => {
                let side = self.git_side(top, prefix)?;
                // Decided before any content is read: a build in the overlay can leave gigabytes
                // of ignored output in the upper directory.
                let mut names = Vec::new();
                upper_names(&upper, &mut names)?;
                let mut input = Vec::new();
                for name in names.iter().filter(|n| !side.tracked(n)) {
                    input.extend_from_slice(format!("{prefix}{name}").as_bytes());
                    input.push(0);
                }
                let mut ignored = std::collections::BTreeSet::new();
                if !input.is_empty() {
                    let out = Git::new(top).check_ignore(&input)?;
                    for path in out.split(|b| *b == 0).filter(|p| !p.is_empty()) {
                        if let Some(rel) =
                            String::from_utf8_lossy(path).strip_prefix(prefix.as_str())
                        {
                            ignored.insert(rel.to_string());
                        }
                    }
                }
                scan(&upper, &*side, &|rel| ignored.contains(rel))
            }
            Backing::Overlay => {
                let side = LowerSide {
                    root: self.meta.project.clone(),
                };
                scan(&upper, &side, &|_| false)
            }
        }
    }

    /// The base commit's listing, read the first time it is needed and kept: the base is a commit,
    /// it never changes (empty directories, which git cannot record, are still read live).
    fn git_side(&self, top: &Path, prefix: &str) -> Result<Arc<GitSide>> {
        let base = self.wait_base()?.expect("git backing has a base");
        let mut side = self
            .side
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(side) = side.as_ref() {
            return Ok(side.clone());
        }
        let made = Arc::new(GitSide::new(
            Git::new(top),
            &base,
            prefix,
            self.meta.project.clone(),
        )?);
        *side = Some(made.clone());
        Ok(made)
    }

    /// The session's changes, with file and hunk ids.
    pub fn diff(&self) -> Result<Diff> {
        Ok(Diff::from_raw(self.raw_changes()?))
    }
}

/// Every path in the upper directory (files, directories, whiteouts), names only; `.git` at the
/// top is left out as in [`scan`]. Walked by descriptor, as the scan is.
fn upper_names(upper: &Path, out: &mut Vec<String>) -> Result<()> {
    let root =
        chock_beneath::Dir::open_root(upper).map_err(|e| WorkspaceError::io("open", upper, e))?;
    names_below(&root, upper, "", out)
}

fn names_below(
    dir: &chock_beneath::Dir,
    upper: &Path,
    rel: &str,
    out: &mut Vec<String>,
) -> Result<()> {
    for child in crate::upper::children(dir, upper, rel)? {
        out.push(child.rel.clone());
        if child.meta.kind == chock_beneath::FileType::Directory
            && let Ok(sub) = dir.child(&child.name)
        {
            names_below(&sub, upper, &child.rel, out)?;
        }
    }
    Ok(())
}

impl Drop for Workspace {
    /// A base still being written is waited for if the session changed anything (its changes must
    /// be measured against the state before they were made), and abandoned if it changed nothing
    /// (see `crate::base`): a session that made no change ends without a `git add -A`'s wait.
    fn drop(&mut self) {
        let job = self
            .base_job
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        let Some(job) = job else { return };
        if job.running() && self.upper_untouched().unwrap_or(false) {
            job.abandon();
        } else {
            let _ = job.join(&self.layout);
        }
    }
}

/// The resolved project and a new workspace's directories (work 0700, the upper root with the
/// project root's mode, both in a 0700 directory), refusing a session directory that already has
/// a workspace.
pub(crate) fn make_dirs(project: &Path, session_dir: &Path) -> Result<(PathBuf, Layout)> {
    use std::os::unix::fs::PermissionsExt;
    let project =
        fs::canonicalize(project).map_err(|e| WorkspaceError::io("resolve", project, e))?;
    let layout = Layout::new(session_dir);
    if layout.dir.exists() {
        return Err(WorkspaceError::Exists(layout.dir.clone()));
    }
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true).mode(0o700);
    for dir in [layout.dir.clone(), layout.upper(), layout.work()] {
        builder
            .create(&dir)
            .map_err(|e| WorkspaceError::io("create", &dir, e))?;
    }
    // The overlay's root shows its upper root's mode: the project root's, not 0700, inside the
    // sandbox. The workspace directory above it stays 0700 on the host.
    let mode = fs::metadata(&project)
        .map_err(|e| WorkspaceError::io("stat", &project, e))?
        .permissions()
        .mode()
        & 0o7777;
    fs::set_permissions(layout.upper(), fs::Permissions::from_mode(mode))
        .map_err(|e| WorkspaceError::io("chmod", layout.upper(), e))?;
    Ok((project, layout))
}
