//! `adopt`: the overlay backing's way home. Changed files are copied aside into
//! `<project>/.chock-adopted/<session>/files/`, deleted paths are listed in
//! `<project>/.chock-adopted/<session>/deleted`. Nothing of the user's is overwritten (an existing
//! destination is refused by name before anything is written) and nothing is deleted.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::PathBuf;

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
}

/// What an adopt wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdoptCounts {
    pub files: usize,
    pub dirs: usize,
    pub deleted: usize,
}

impl Workspace {
    /// Lists what adopt would copy and checks that no destination exists yet.
    pub fn plan_adopt(&self) -> Result<AdoptPlan> {
        let dest = self.project().join(ADOPTED_DIR).join(self.session());
        let diff = self.diff()?;
        let mut plan = AdoptPlan {
            dest: dest.clone(),
            copies: Vec::new(),
            dirs: Vec::new(),
            deleted: Vec::new(),
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
}

impl AdoptPlan {
    /// Copies the files, makes the directories and writes the `deleted` list. Files are created
    /// with `O_EXCL`, so a destination that appeared since the plan is still never overwritten.
    pub fn commit(&self) -> Result<AdoptCounts> {
        let files = self.dest.join("files");
        let mut builder = fs::DirBuilder::new();
        builder.recursive(true).mode(0o755);
        builder
            .create(&files)
            .map_err(|e| WorkspaceError::io("create", &files, e))?;
        for (path, entry) in &self.copies {
            let to = files.join(path);
            if let Some(parent) = to.parent() {
                builder
                    .create(parent)
                    .map_err(|e| WorkspaceError::io("create", parent, e))?;
            }
            match entry {
                Entry::File { exec, data } => {
                    let mut file = fs::OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .mode(if *exec { 0o755 } else { 0o644 })
                        .open(&to)
                        .map_err(|e| WorkspaceError::io("create (never overwriting)", &to, e))?;
                    file.write_all(data)
                        .map_err(|e| WorkspaceError::io("write", &to, e))?;
                }
                Entry::Symlink { target } => {
                    use std::os::unix::ffi::OsStrExt;
                    std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(target), &to)
                        .map_err(|e| WorkspaceError::io("create symlink", &to, e))?;
                }
                Entry::Dir => {}
            }
        }
        for dir in &self.dirs {
            let to = files.join(dir);
            builder
                .create(&to)
                .map_err(|e| WorkspaceError::io("create", &to, e))?;
        }
        if !self.deleted.is_empty() {
            let path = self.dest.join("deleted");
            let mut file = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o644)
                .open(&path)
                .map_err(|e| WorkspaceError::io("create (never overwriting)", &path, e))?;
            let mut text = self.deleted.join("\n");
            text.push('\n');
            file.write_all(text.as_bytes())
                .map_err(|e| WorkspaceError::io("write", &path, e))?;
        }
        Ok(AdoptCounts {
            files: self.copies.len(),
            dirs: self.dirs.len(),
            deleted: self.deleted.len(),
        })
    }
}
