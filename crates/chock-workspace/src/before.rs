//! The before side of one workspace: what the session's changes are measured against.
//!
//! For the git backing that is the base commit (written on a thread of its own while the session
//! starts, see `crate::base`) and its listing, read once; for the overlay backing it is the live
//! project, the overlay's lower layer. [`Before`] owns everything that concerns it — the base job
//! still running, the pauses that steer it, the listing, and the rule for a job nobody needed —
//! so the rest of the workspace asks it for a base or for the change set and never touches the
//! job itself.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use crate::background::{Background, BackgroundPause};
use crate::base::BaseJob;
use crate::error::Result;
use crate::git::Git;
use crate::meta::{Backing, Layout, Meta};
use crate::old::{GitSide, LowerSide};
use crate::upper::{RawChange, names, scan, untouched};

/// Where a git backing keeps the session's work: the repository, the project's place in it and
/// the session ref.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Repo<'a> {
    /// The repository's top-level directory.
    pub(crate) top: &'a Path,
    /// The project's path inside the repository (`""` or `sub/dir/`).
    pub(crate) prefix: &'a str,
    /// `refs/chock/<session>`.
    pub(crate) ref_name: &'a str,
}

/// The base a session's changes are measured against, and the job still writing it; see the
/// module.
#[derive(Debug)]
pub(crate) struct Before {
    layout: Layout,
    session: String,
    project: PathBuf,
    /// The backing as `meta.json` said when the workspace was made or opened (a git base still
    /// being written is `None` here).
    backing: Backing,
    /// The git base commit being written in the background (git backing, just created).
    job: Mutex<Option<BaseJob>>,
    /// The base commit's listing, read once: the base never changes.
    side: Mutex<Option<Arc<GitSide>>>,
    /// The base this process's job wrote and the session ref's loose file, once joined: the ref
    /// then points at the base, whose tree is the base's own (the empty change set).
    joined: Mutex<Option<(String, PathBuf)>>,
}

impl Before {
    /// The before side of the workspace `meta` describes, in `layout`; for a git workspace just
    /// created, the base is written in the background from now on.
    pub(crate) fn new(meta: &Meta, layout: &Layout, start_base: bool) -> Before {
        let job = match &meta.backing {
            Backing::Git { top, ref_name, .. } if start_base => Some(BaseJob::start(
                Git::new(top),
                layout.clone(),
                ref_name.clone(),
                meta.session.clone(),
            )),
            _ => None,
        };
        Before {
            layout: layout.clone(),
            session: meta.session.clone(),
            project: meta.project.clone(),
            backing: meta.backing.clone(),
            job: Mutex::new(job),
            side: Mutex::new(None),
            joined: Mutex::new(None),
        }
    }

    /// The repository and session ref of a git backing; `None` for the overlay backing.
    pub(crate) fn repo(&self) -> Option<Repo<'_>> {
        match &self.backing {
            Backing::Git {
                top,
                prefix,
                ref_name,
                ..
            } => Some(Repo {
                top,
                prefix,
                ref_name,
            }),
            Backing::Overlay => None,
        }
    }

    /// Waits for the git base commit and returns it (`None` for the overlay backing). A workspace
    /// whose base was never finished (the process that created it died first) records it now.
    pub(crate) fn wait(&self) -> Result<Option<String>> {
        let Backing::Git {
            top,
            ref_name,
            base,
            ..
        } = &self.backing
        else {
            return Ok(None);
        };
        if let Some(base) = base {
            return Ok(Some(base.clone()));
        }
        if let Some(job) = self.take_job() {
            let (base, ref_file) = job.join(&self.layout)?;
            *self.joined.lock().unwrap_or_else(PoisonError::into_inner) =
                Some((base.clone(), ref_file));
            return Ok(Some(base));
        }
        if let Backing::Git {
            base: Some(base), ..
        } = Meta::load(&self.layout.meta())?.backing
        {
            return Ok(Some(base));
        }
        crate::base::record(&Git::new(top), &self.layout, ref_name, &self.session, None).map(Some)
    }

    /// The base this process's own job wrote, and the session ref's loose file, once it was
    /// joined; `None` before that, and for a base recorded by another process.
    pub(crate) fn joined(&self) -> Option<(String, PathBuf)> {
        self.joined
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The backing as a turn record keeps it: for git, with its base, except that a base still
    /// being written for a session that changed nothing (`changed` false) is not waited for (a
    /// fork of it records its own).
    pub(crate) fn recorded_backing(&self, changed: bool) -> Result<Backing> {
        let mut backing = self.backing.clone();
        if let Backing::Git { base, .. } = &mut backing {
            *base = if !changed && self.pending() {
                None
            } else {
                self.wait()?
            };
        }
        Ok(backing)
    }

    /// Whether this process is still writing the git base.
    pub(crate) fn pending(&self) -> bool {
        self.job
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .is_some_and(BaseJob::running)
    }

    /// Whether the upper directory holds nothing of the project: no path can differ from the
    /// base, whatever it is.
    pub(crate) fn untouched(&self) -> Result<bool> {
        untouched(&self.layout.upper())
    }

    /// A guard pausing the base this process still writes (empty when there is none).
    pub(crate) fn pause(&self) -> BackgroundPause {
        BackgroundPause::hold(self.background())
    }

    /// A guard letting the base run whatever pauses are held (empty when there is none).
    pub(crate) fn lend(&self) -> BackgroundPause {
        BackgroundPause::lend(self.background())
    }

    fn background(&self) -> Option<Arc<Background>> {
        self.job
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .filter(|job| job.running())
            .map(BaseJob::control)
    }

    /// Stops a base this process is still writing (its git killed, its thread joined).
    pub(crate) fn abandon(&self) {
        if let Some(job) = self.take_job() {
            job.abandon();
        }
    }

    /// The base job this process still owns, taken out (joined or abandoned by the caller).
    fn take_job(&self) -> Option<BaseJob> {
        self.job
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    /// Every path whose content differs between the before side and the overlay's upper layer.
    /// For a git project, new paths the project's ignore rules exclude are left out (build output
    /// the session made is not its work); they stay visible in the overlay.
    pub(crate) fn changes(&self) -> Result<BTreeMap<String, RawChange>> {
        let upper = self.layout.upper();
        if self.untouched()? {
            // Nothing was copied up, made or deleted: no path can differ, whatever the base is.
            return Ok(BTreeMap::new());
        }
        let Some(repo) = self.repo() else {
            let side = LowerSide {
                root: self.project.clone(),
            };
            return scan(&upper, &side, &|_| false);
        };
        let side = self.side()?;
        // Decided before any content is read: a build in the overlay can leave gigabytes of
        // ignored output in the upper directory.
        let mut listed = Vec::new();
        names(&upper, &mut listed)?;
        let mut input = Vec::new();
        for name in listed.iter().filter(|n| !side.tracked(n)) {
            input.extend_from_slice(format!("{}{name}", repo.prefix).as_bytes());
            input.push(0);
        }
        let mut ignored = BTreeSet::new();
        if !input.is_empty() {
            let out = Git::new(repo.top).check_ignore(&input)?;
            for path in out.split(|b| *b == 0).filter(|p| !p.is_empty()) {
                if let Some(rel) = String::from_utf8_lossy(path).strip_prefix(repo.prefix) {
                    ignored.insert(rel.to_string());
                }
            }
        }
        scan(&upper, &*side, &|rel| ignored.contains(rel))
    }

    /// The base commit's listing, read the first time it is needed and kept: the base is a commit,
    /// it never changes (empty directories, which git cannot record, are still read live). Git
    /// backing only.
    pub(crate) fn side(&self) -> Result<Arc<GitSide>> {
        let repo = self.repo().expect("the git backing has a base listing");
        let base = self.wait()?.expect("git backing has a base");
        let mut side = self.side.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(side) = side.as_ref() {
            return Ok(side.clone());
        }
        let made = Arc::new(GitSide::new(
            Git::new(repo.top),
            &base,
            repo.prefix,
            self.project.clone(),
        )?);
        *side = Some(made.clone());
        Ok(made)
    }
}

impl Drop for Before {
    /// A base still being written is waited for if the session changed anything (its changes must
    /// be measured against the state before they were made), and abandoned if it changed nothing
    /// (see `crate::base`): a session that made no change ends without a `git add -A`'s wait.
    fn drop(&mut self) {
        let job = self
            .job
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let Some(job) = job else { return };
        if job.running() && self.untouched().unwrap_or(false) {
            job.abandon();
        } else {
            let _ = job.join(&self.layout);
        }
    }
}
