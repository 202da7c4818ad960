//! A git-backed workspace's checkpoints: the overlay's state recorded as a commit on
//! `refs/chock/<session>`, rewriting only the directories on the way to a change.
//!
//! [`Checkpoints`] remembers what the last checkpoint of this process recorded, so a checkpoint
//! that would record the same change set again, onto the commit the ref still points at, is
//! skipped without hashing anything or starting git.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use crate::before::{Before, Repo};
use crate::entry::Entry;
use crate::error::{Result, WorkspaceError};
use crate::git::Git;
use crate::tree::Mode;
use crate::tree_write::{PathChange, write_tree};
use crate::upper::RawChange;

/// The checkpoints of one workspace made by this process; see the module.
#[derive(Debug, Default)]
pub(crate) struct Checkpoints {
    /// What the last checkpoint recorded (before the first: the base this process joined, if
    /// any, see [`Checkpoints::last`]).
    last: Mutex<Option<LastCheckpoint>>,
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
fn digest(raw: &BTreeMap<String, RawChange>) -> [u8; 32] {
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

impl Checkpoints {
    /// What the last checkpoint of this process recorded; before the first, the base this
    /// process's job wrote (the ref points at it, and its tree is the empty change set's).
    fn last(&self, before: &Before) -> Option<LastCheckpoint> {
        let last = self
            .last
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        last.or_else(|| {
            before.joined().map(|(tip, ref_file)| LastCheckpoint {
                digest: digest(&BTreeMap::new()),
                tip,
                ref_file,
            })
        })
    }

    /// The commit the last checkpoint of this process (or the base it joined) left the session
    /// ref at.
    pub(crate) fn tip(&self, before: &Before) -> Option<String> {
        self.last(before).map(|l| l.tip)
    }

    /// Git backing: records the overlay's current state as a commit on `refs/chock/<session>`
    /// (parent: the previous checkpoint, or the base) and returns it; `None` when nothing changed
    /// since the last checkpoint, and always `None` for the overlay backing (its upper directory is
    /// the record). Empty directories are not recorded (git has no way to).
    ///
    /// `before` is the workspace's before side, `scratch` a directory of the workspace's own for
    /// private copies, `session` the session id the commit message names.
    pub(crate) fn record(
        &self,
        before: &Before,
        scratch: &Path,
        session: &str,
        label: &str,
    ) -> Result<Option<String>> {
        let Some(Repo {
            top,
            prefix,
            ref_name,
        }) = before.repo()
        else {
            return Ok(None);
        };
        if before.pending() && before.untouched()? {
            // No checkpoint can exist before the base does, and the upper directory holds nothing
            // to record: the base is not waited for (a session that changes nothing never is).
            return Ok(None);
        }
        before.wait()?.expect("git backing has a base");
        let raw = before.changes()?;
        let digest = digest(&raw);
        let last = self.last(before);
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
            *self.last.lock().unwrap_or_else(PoisonError::into_inner) = Some(LastCheckpoint {
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
            let copies = scratch.join(format!("hashing.{}", std::process::id()));
            let result = hash_copies(&git, &copies, &files);
            let _ = std::fs::remove_dir_all(&copies);
            result?
        };
        let mut shas: BTreeMap<&str, &str> = files
            .iter()
            .map(|(p, _)| p.as_str())
            .zip(hashed.lines())
            .collect();
        let mut changes = BTreeMap::new();
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
        let tree = write_tree(before.side()?.base(), &changes)?;
        let tip = git.text(&["rev-parse", "--verify", ref_name])?;
        let tip_tree = git.text(&["rev-parse", &format!("{tip}^{{tree}}")])?;
        if tree == tip_tree {
            remember(&tip);
            return Ok(None);
        }
        let commit = git.commit_tree(
            &tree,
            &[&tip],
            &format!("chock: {label}\n\nsession {session}"),
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
