//! A selection resolved against a diff, and its digest: the one fingerprint of "these changes,
//! exactly". `chock diff` prints it and `chock apply --expect` compares it, both computed here from
//! the same picked files and hunks that [`crate::Workspace::plan_apply`] turns into writes, so what
//! a reviewer pinned is what lands — a session that ran on after the review changes the digest.

use std::collections::BTreeSet;

use sha2::{Digest, Sha256};

use crate::apply::Selection;
use crate::diff::{Diff, FileChange};
use crate::entry::{Entry, entry_hash};
use crate::error::{Result, WorkspaceError};
use crate::hunks::Hunk;

/// The version tag hashed first: a change to what the digest covers changes every digest.
const DIGEST_FORMAT: &[u8] = b"chock diff digest 1\n";

/// One file of the diff as selected: the whole change, or some of its hunks.
pub(crate) struct Picked<'a> {
    pub(crate) file: &'a FileChange,
    /// The hunks that go in (all of them for a whole text file).
    pub(crate) hunks: Vec<&'a Hunk>,
    /// Whether the whole change goes in (content, mode, kind, creation, deletion, rename).
    pub(crate) whole: bool,
}

/// Resolves `selection` against `diff`: unknown or ambiguous names are refused; both lists empty
/// means everything. Files come in the diff's order (sorted by path).
pub(crate) fn pick<'a>(diff: &'a Diff, selection: &Selection) -> Result<Vec<Picked<'a>>> {
    let mut whole_files: BTreeSet<&str> = BTreeSet::new();
    let mut hunk_ids: BTreeSet<&str> = BTreeSet::new();
    for key in &selection.files {
        let file = match diff.files_matching(key)[..] {
            [file] => file,
            [] => return Err(unknown("file", key)),
            ref several => return Err(ambiguous("file", key, several.iter().copied())),
        };
        whole_files.insert(&file.path);
    }
    for id in &selection.hunks {
        match diff.hunks_matching(id)[..] {
            [_] => {}
            [] => return Err(unknown("hunk", id)),
            ref several => {
                return Err(ambiguous("hunk", id, several.iter().map(|(f, _)| *f)));
            }
        }
        hunk_ids.insert(id);
    }
    let everything = selection.files.is_empty() && selection.hunks.is_empty();
    let mut picked = Vec::new();
    for file in &diff.files {
        let whole = everything || whole_files.contains(file.path.as_str());
        let hunks: Vec<&Hunk> = file
            .hunks
            .iter()
            .filter(|h| whole || hunk_ids.contains(h.id.as_str()))
            .collect();
        if whole || !hunks.is_empty() {
            picked.push(Picked { file, hunks, whole });
        }
    }
    Ok(picked)
}

/// SHA-256 (hex) over the picked changes: for every file its id, path and old path; for a whole
/// change the old and new entries (kind, executable bit, symlink target, bytes); for single hunks
/// each hunk's id, changed region and the lines it removes and adds. Every field is
/// length-prefixed, so no two different selections hash the same bytes.
pub(crate) fn digest(picked: &[Picked<'_>]) -> String {
    let mut h = Sha256::new();
    h.update(DIGEST_FORMAT);
    let mut field = |bytes: &[u8]| {
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    for p in picked {
        let f = p.file;
        field(b"file");
        field(f.id.as_bytes());
        field(f.path.as_bytes());
        field(f.old_path.as_deref().unwrap_or("\0none").as_bytes());
        if p.whole {
            field(b"whole");
            field(entry_hash(f.old.as_ref()).as_bytes());
            field(entry_hash(f.new.as_ref()).as_bytes());
        } else {
            for hunk in &p.hunks {
                field(b"hunk");
                field(hunk.id.as_bytes());
                field(&(hunk.span.start as u64).to_le_bytes());
                field(&(hunk.span.end as u64).to_le_bytes());
                for line in hunk.lines.iter().filter(|l| l.tag != ' ') {
                    field(&[line.tag as u8]);
                    field(&line.text);
                }
            }
        }
    }
    hex::encode(h.finalize())
}

impl Diff {
    /// The digest of `selection` in this diff (see the module doc); an empty selection is
    /// everything. Unknown or ambiguous names are refused, as `apply` refuses them.
    pub fn digest(&self, selection: &Selection) -> Result<String> {
        Ok(digest(&pick(self, selection)?))
    }

    /// The part of this diff that `selection` takes, for showing it: whole files as they are, and
    /// a file picked by hunks with only those hunks and without its mode change (a mode change
    /// goes with the whole file only).
    pub fn selected(&self, selection: &Selection) -> Result<Diff> {
        let files = pick(self, selection)?
            .into_iter()
            .map(|p| {
                let mut file = p.file.clone();
                if !p.whole {
                    file.hunks = p.hunks.into_iter().cloned().collect();
                    if let (Some(Entry::File { exec: old, .. }), Some(Entry::File { exec, .. })) =
                        (&p.file.old, &mut file.new)
                    {
                        *exec = *old;
                    }
                }
                file
            })
            .collect();
        Ok(Diff { files })
    }
}

fn unknown(kind: &'static str, name: &str) -> WorkspaceError {
    WorkspaceError::UnknownSelection {
        kind,
        name: name.to_string(),
    }
}

/// A selection that names more than one file: refused, naming them all.
fn ambiguous<'a>(
    kind: &'static str,
    name: &str,
    files: impl Iterator<Item = &'a FileChange>,
) -> WorkspaceError {
    WorkspaceError::AmbiguousSelection {
        kind,
        name: name.to_string(),
        paths: files.map(|f| f.path.clone()).collect(),
    }
}
