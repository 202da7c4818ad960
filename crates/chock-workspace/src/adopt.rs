//! `adopt`: the overlay backing's way home. Changed files are copied aside into
//! `<project>/.chock-adopted/<session>/files/`, deleted paths are listed in
//! `<project>/.chock-adopted/<session>/deleted`. Nothing of the user's is overwritten (an existing
//! destination is refused by name before anything is written) and nothing is deleted.

use std::fs;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::PathBuf;

use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;

use chock_beneath::Dir;

use crate::beneath::{Parent, lstat_at, open_root, walk_to_parent};
use crate::entry::Entry;
use crate::error::{Result, WorkspaceError};
use crate::workspace::Workspace;

/// The folder in the project that adopted work goes to.
pub const ADOPTED_DIR: &str = ".chock-adopted";

/// A checked adopt, not yet written.
#[derive(Debug, Clone)]
pub struct AdoptPlan {
    /// `<project>/.chock-adopted/<session>`.
    pub dest: PathBuf,
    /// Files and symlinks to copy (path relative to the project, and what to write).
    pub copies: Vec<(String, Entry)>,
    /// Empty directories the session made.
    pub dirs: Vec<String>,
    /// Paths the session deleted (and the old paths of renames).
    pub deleted: Vec<String>,
    /// The project `dest` is in, and the session: the writes walk from the project down.
    project: PathBuf,
    session: String,
}

/// What an adopt wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdoptCounts {
    /// Files and symlinks copied.
    pub files: usize,
    /// Empty directories made.
    pub dirs: usize,
    /// Deleted paths listed in the `deleted` file (nothing in the project is removed).
    pub deleted: usize,
}

impl AdoptPlan {
    /// Lists what adopting `workspace`'s changes would copy and checks that no destination exists
    /// yet. A change to a path that configures Chock is refused
    /// ([`WorkspaceError::ConfiguresChock`]) unless `include_policy` names it (the person named
    /// it and the caller has it confirmed, as for [`crate::ApplyOptions::include_policy`]): adopt
    /// copies into the project too, and a copied policy file is one `cp` away from governing the
    /// next session.
    pub(crate) fn new(workspace: &Workspace, include_policy: &[String]) -> Result<AdoptPlan> {
        let dest = workspace
            .project()
            .join(ADOPTED_DIR)
            .join(workspace.session());
        let diff = workspace.diff()?;
        crate::apply::refuse_unnamed_sensitive(
            workspace.session(),
            diff.files.iter(),
            include_policy,
        )?;
        let mut plan = AdoptPlan {
            dest: dest.clone(),
            copies: Vec::new(),
            dirs: Vec::new(),
            deleted: Vec::new(),
            project: workspace.project().to_path_buf(),
            session: workspace.session().to_string(),
        };
        for file in &diff.files {
            if let Some(from) = &file.old_path {
                plan.deleted.push(from.clone());
            }
            match &file.new {
                Some(Entry::Dir) => plan.dirs.push(file.path.clone()),
                Some(entry) => plan.copies.push((file.path.clone(), entry.clone())),
                None => plan.deleted.push(file.path.clone()),
            }
        }
        plan.deleted.sort();
        // The same names apply refuses: a copied `.git/config` or hook would make a repository
        // whose code a shell prompt's `git status` runs, and a newline would forge `deleted`.
        let refused: Vec<String> = plan
            .copies
            .iter()
            .map(|(p, _)| p)
            .chain(&plan.dirs)
            .chain(&plan.deleted)
            .filter_map(|p| crate::beneath::refusal(p))
            .collect();
        if !refused.is_empty() {
            return Err(WorkspaceError::Conflict { conflicts: refused });
        }
        let files = dest.join("files");
        let mut taken: Vec<PathBuf> = plan
            .copies
            .iter()
            .map(|(p, _)| files.join(p))
            .chain(plan.dirs.iter().map(|p| files.join(p)))
            .filter(|p| fs::symlink_metadata(p).is_ok())
            .collect();
        if !plan.deleted.is_empty() && fs::symlink_metadata(dest.join("deleted")).is_ok() {
            taken.push(dest.join("deleted"));
        }
        if let Some(first) = taken.into_iter().next() {
            return Err(WorkspaceError::WouldOverwrite(first));
        }
        Ok(plan)
    }

    /// Copies the files, makes the directories and writes the `deleted` list. Files are created
    /// with `O_EXCL`, so a destination that appeared since the plan is still never overwritten,
    /// and every directory on the way is reached without following a symlink (see
    /// `crate::beneath`), so a `.chock-adopted` that is a link leads nowhere.
    pub fn commit(&self) -> Result<AdoptCounts> {
        let root = open_root(&self.project)?;
        let base = format!("{ADOPTED_DIR}/{}", self.session);
        self.mkdir(&root, &format!("{base}/files"))?;
        for (path, entry) in &self.copies {
            let rel = format!("{base}/files/{path}");
            let (dir, name) = self.parent_of(&root, &rel)?;
            match entry {
                Entry::File { exec, data } => {
                    let file = create_new(&dir, &name, if *exec { 0o755 } else { 0o644 }).map_err(
                        |e| WorkspaceError::io("create (never overwriting)", self.shown(&rel), e),
                    )?;
                    fs::File::from(file)
                        .write_all(data)
                        .map_err(|e| WorkspaceError::io("write", self.shown(&rel), e))?;
                }
                Entry::Symlink { target } => {
                    rustix::fs::symlinkat(target.as_slice(), &dir, name.as_str()).map_err(|e| {
                        WorkspaceError::io("create symlink", self.shown(&rel), e.into())
                    })?;
                }
                Entry::Dir => {}
            }
        }
        for dir in &self.dirs {
            self.mkdir(&root, &format!("{base}/files/{dir}"))?;
        }
        if !self.deleted.is_empty() {
            let rel = format!("{base}/deleted");
            let (dir, name) = self.parent_of(&root, &rel)?;
            let file = create_new(&dir, &name, 0o644).map_err(|e| {
                WorkspaceError::io("create (never overwriting)", self.shown(&rel), e)
            })?;
            let mut text = self.deleted.join("\n");
            text.push('\n');
            fs::File::from(file)
                .write_all(text.as_bytes())
                .map_err(|e| WorkspaceError::io("write", self.shown(&rel), e))?;
        }
        Ok(AdoptCounts {
            files: self.copies.len(),
            dirs: self.dirs.len(),
            deleted: self.deleted.len(),
        })
    }

    fn shown(&self, rel: &str) -> PathBuf {
        self.project.join(rel)
    }

    /// The directory holding `rel`'s last component (made as needed) and that component's name.
    fn parent_of(&self, root: &Dir, rel: &str) -> Result<(Dir, String)> {
        match walk_to_parent(root, &self.project, rel, true)? {
            Parent::Found(dir, name) => Ok((dir, name)),
            Parent::Missing => Err(WorkspaceError::io(
                "create",
                self.shown(rel),
                std::io::ErrorKind::NotFound.into(),
            )),
        }
    }

    /// Makes directory `rel` (and its parents); one already there is fine.
    fn mkdir(&self, root: &Dir, rel: &str) -> Result<()> {
        let (dir, name) = self.parent_of(root, rel)?;
        match rustix::fs::mkdirat(&dir, name.as_str(), Mode::from_raw_mode(0o755)) {
            Ok(()) => Ok(()),
            Err(Errno::EXIST) if lstat_at(&dir, &name).is_some_and(|(t, _)| t.is_dir()) => Ok(()),
            Err(e) => Err(WorkspaceError::io("create", self.shown(rel), e.into())),
        }
    }
}

/// Creates `name` in `dir`, never opening something already there (nor following a symlink).
fn create_new(dir: &Dir, name: &str, mode: u32) -> std::io::Result<OwnedFd> {
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    Ok(rustix::fs::openat(
        dir,
        name,
        flags,
        Mode::from_raw_mode(mode),
    )?)
}
