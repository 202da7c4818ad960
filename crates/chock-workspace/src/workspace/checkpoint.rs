//! A git-backed workspace's checkpoint: the overlay's state recorded as a commit on
//! `refs/chock/<session>`, rewriting only the directories on the way to a change.

use std::path::Path;

use super::{LastCheckpoint, Workspace, digest};
use crate::entry::Entry;
use crate::error::{Result, WorkspaceError};
use crate::git::Git;
use crate::meta::Backing;
use crate::tree::Mode;
use crate::tree_write::{PathChange, write_tree};

impl Workspace {
    /// Git backing: records the overlay's current state as a commit on `refs/chock/<session>`
    /// (parent: the previous checkpoint, or the base) and returns it; `None` when nothing changed
    /// since the last checkpoint, and always `None` for the overlay backing (its upper directory is
    /// the record). Empty directories are not recorded (git has no way to).
    pub fn checkpoint(&self, label: &str) -> Result<Option<String>> {
        let Backing::Git {
            top,
            prefix,
            ref_name,
            ..
        } = &self.meta.backing
        else {
            return Ok(None);
        };
        if self.base_pending() && self.upper_untouched()? {
            // No checkpoint can exist before the base does, and the upper directory holds nothing
            // to record: the base is not waited for (a session that changes nothing never is).
            return Ok(None);
        }
        self.wait_base()?.expect("git backing has a base");
        let raw = self.raw_changes()?;
        let digest = digest(&raw);
        let last = self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        if let Some(last) = &last
            && last.digest == digest
            && last.still_tip()
        {
            // The same change set as the commit the ref still points at: the same tree again.
            return Ok(None);
        }
        let git = Git::new(top);
        let ref_file = match last {
            Some(last) => last.ref_file,
            None => git.ref_file(ref_name)?,
        };
        let remember = |tip: &str| {
            *self
                .last
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(LastCheckpoint {
                digest,
                tip: tip.to_string(),
                ref_file: ref_file.clone(),
            });
        };
        // Regular files are hashed in one `--stdin-paths` run, from private copies of the bytes
        // the scan read (and the diff shows), not from the upper directory: git opens a path
        // following symlinks, so a file the agent swapped for a link to a host file after the scan
        // would put that host file into the user's repository. Symlink targets one by one.
        let files: Vec<(&String, &[u8])> = raw
            .iter()
            .filter_map(|(p, c)| match &c.new {
                Some(Entry::File { data, .. }) => Some((p, data.as_slice())),
                _ => None,
            })
            .collect();
        let hashed = if files.is_empty() {
            String::new()
        } else {
            let copies = self
                .layout
                .dir
                .join(format!("hashing.{}", std::process::id()));
            let result = hash_copies(&git, &copies, &files);
            let _ = std::fs::remove_dir_all(&copies);
            result?
        };
        let mut shas: std::collections::BTreeMap<&str, &str> = files
            .iter()
            .map(|(p, _)| p.as_str())
            .zip(hashed.lines())
            .collect();
        let mut changes = std::collections::BTreeMap::new();
        for (path, change) in &raw {
            let full = format!("{prefix}{path}");
            let change = match &change.new {
                Some(entry @ Entry::File { data, .. }) => {
                    let sha = match shas.remove(path.as_str()) {
                        Some(sha) => sha.to_string(),
                        None => git.text_with_input(
                            &["hash-object", "-w", "--no-filters", "--stdin"],
                            data,
                        )?,
                    };
                    let mode = if entry.git_mode() == "100755" {
                        Mode::Exec
                    } else {
                        Mode::File
                    };
                    PathChange::Set(mode, sha)
                }
                Some(Entry::Symlink { target }) => PathChange::Set(
                    Mode::Symlink,
                    git.text_with_input(&["hash-object", "-w", "--stdin"], target)?,
                ),
                _ if matches!(change.old, Some(Entry::File { .. } | Entry::Symlink { .. })) => {
                    PathChange::Remove
                }
                _ => continue,
            };
            changes.insert(full, change);
        }
        // The base's own subtrees, with only the directories on the way to a change rewritten.
        let tree = write_tree(self.git_side(top, prefix)?.base(), &changes)?;
        let tip = git.text(&["rev-parse", "--verify", ref_name])?;
        let tip_tree = git.text(&["rev-parse", &format!("{tip}^{{tree}}")])?;
        if tree == tip_tree {
            remember(&tip);
            return Ok(None);
        }
        let commit = git.commit_tree(
            &tree,
            &[&tip],
            &format!("chock: {label}\n\nsession {}", self.meta.session),
        )?;
        git.run(&[
            "update-ref",
            "-m",
            &format!("chock: {label}"),
            ref_name,
            &commit,
            &tip,
        ])?;
        remember(&commit);
        Ok(Some(commit))
    }
}

/// Writes each of `files`' bytes into the new private directory `dir` and hashes them into the
/// repository with one `git hash-object -w --stdin-paths`; the object ids, one a line, in order.
fn hash_copies(git: &Git, dir: &Path, files: &[(&String, &[u8])]) -> Result<String> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(dir)
        .map_err(|e| WorkspaceError::io("create", dir, e))?;
    let mut paths = Vec::new();
    for (n, (_, data)) in files.iter().enumerate() {
        let copy = dir.join(n.to_string());
        std::fs::write(&copy, data).map_err(|e| WorkspaceError::io("write", &copy, e))?;
        paths.extend_from_slice(copy.as_os_str().as_encoded_bytes());
        paths.push(b'\n');
    }
    git.text_with_input(
        &["hash-object", "-w", "--no-filters", "--stdin-paths"],
        &paths,
    )
}
