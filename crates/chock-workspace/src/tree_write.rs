//! A checkpoint's tree, built from the base's own subtrees: only the directories on the way to a
//! changed path are rewritten, every other directory is the base's tree object as it is.
//!
//! So a checkpoint costs the size of the change (the changed directories' entries), not the size of
//! the project: no index of the whole base is read or written. The new trees' ids are computed
//! here, children first, and all of them are written by one `git mktree --batch`, whose answers
//! must equal the computed ids (a mismatch is an error, never a silently different tree).

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::error::{Result, WorkspaceError};
use crate::tree::{BaseTree, Mode, TreeEntry};

/// What a checkpoint does at one path (relative to the repository's top).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PathChange {
    /// A file or symlink with this mode and (already written) blob.
    Set(Mode, String),
    /// The base's file or symlink is gone.
    Remove,
}

/// Writes the tree of the base with `changes` applied and returns its id.
pub(crate) fn write_tree(
    base: &BaseTree,
    changes: &BTreeMap<String, PathChange>,
) -> Result<String> {
    // Every directory on the way to a change, the top included, with the changes made in it.
    let mut direct: HashMap<String, Vec<(&str, &PathChange)>> = HashMap::new();
    let mut dirs: BTreeSet<String> = BTreeSet::from([String::new()]);
    for (path, change) in changes {
        let (parent, name) = path.rsplit_once('/').unwrap_or(("", path));
        direct
            .entry(parent.to_string())
            .or_default()
            .push((name, change));
        let mut at = parent;
        while !at.is_empty() {
            dirs.insert(at.to_string());
            at = at.rsplit_once('/').map_or("", |(up, _)| up);
        }
    }
    // Deepest first, so each directory sees its rewritten children.
    let mut order: Vec<String> = dirs.into_iter().collect();
    order.sort_by_key(|d| std::cmp::Reverse(depth(d)));

    let mut written: HashMap<String, Option<String>> = HashMap::new();
    let mut batch = Vec::new();
    let mut expected = Vec::new();
    for dir in &order {
        let listing = base.listing(dir)?;
        let mut entries: BTreeMap<Vec<u8>, TreeEntry> = listing
            .iter()
            .flat_map(|l| l.entries.iter())
            .map(|e| (e.name.clone(), e.clone()))
            .collect();
        let changed_here = direct.get(dir.as_str()).map(Vec::as_slice).unwrap_or(&[]);
        for (name, change) in changed_here {
            if **change == PathChange::Remove
                && entries
                    .get(name.as_bytes())
                    .is_some_and(|e| e.mode != Mode::Tree)
            {
                entries.remove(name.as_bytes());
            }
        }
        for (child, sha) in written.iter().filter(|(c, _)| parent_of(c) == dir.as_str()) {
            let name = child
                .rsplit('/')
                .next()
                .unwrap_or(child)
                .as_bytes()
                .to_vec();
            match sha {
                Some(sha) => {
                    entries.insert(
                        name.clone(),
                        TreeEntry {
                            name,
                            mode: Mode::Tree,
                            sha: sha.clone(),
                        },
                    );
                }
                None => {
                    if entries.get(&name).is_some_and(|e| e.mode == Mode::Tree) {
                        entries.remove(&name);
                    }
                }
            }
        }
        for (name, change) in changed_here {
            if let PathChange::Set(mode, sha) = change {
                let name = name.as_bytes().to_vec();
                entries.insert(
                    name.clone(),
                    TreeEntry {
                        name,
                        mode: *mode,
                        sha: sha.clone(),
                    },
                );
            }
        }
        let result = if entries.is_empty() && !dir.is_empty() {
            None // git keeps no empty directory: the parent drops it
        } else {
            let mut sorted: Vec<TreeEntry> = entries.into_values().collect();
            sorted.sort_by(git_order);
            let sha = tree_id(&sorted, base.hash_len())?;
            if listing.as_ref().is_none_or(|l| l.sha != sha) {
                for e in &sorted {
                    batch.extend_from_slice(
                        format!("{} {} {}\t", e.mode.as_str(), e.mode.object_type(), e.sha)
                            .as_bytes(),
                    );
                    batch.extend_from_slice(&quote(&e.name));
                    batch.push(b'\n');
                }
                batch.push(b'\n');
                expected.push(sha.clone());
            }
            Some(sha)
        };
        written.insert(dir.clone(), result);
    }
    if !expected.is_empty() {
        let out = base
            .git()
            .run_with_input(&["mktree", "--batch"], Some(&batch))?;
        let got: Vec<&str> = std::str::from_utf8(&out)
            .unwrap_or_default()
            .lines()
            .filter(|l| !l.is_empty())
            .collect();
        if got != expected {
            return Err(WorkspaceError::Git {
                args: "mktree --batch".into(),
                dir: base.git().top().to_path_buf(),
                stderr: format!(
                    "wrote trees {got:?} where {expected:?} were computed; no checkpoint was recorded"
                ),
            });
        }
    }
    Ok(written
        .remove("")
        .flatten()
        .expect("the top tree is always written"))
}

fn depth(dir: &str) -> usize {
    if dir.is_empty() {
        0
    } else {
        dir.matches('/').count() + 1
    }
}

fn parent_of(dir: &str) -> &str {
    dir.rsplit_once('/').map_or("", |(up, _)| up)
}

/// Git's order of tree entries: by name bytes, a directory's name compared as if it ended in `/`.
fn git_order(a: &TreeEntry, b: &TreeEntry) -> Ordering {
    let key = |e: &TreeEntry| {
        let mut k = e.name.clone();
        if e.mode == Mode::Tree {
            k.push(b'/');
        }
        k
    };
    key(a).cmp(&key(b))
}

/// The id git gives a tree object with these (sorted) entries.
fn tree_id(entries: &[TreeEntry], hash_len: usize) -> Result<String> {
    let mut body = Vec::new();
    for e in entries {
        body.extend_from_slice(e.mode.as_str().as_bytes());
        body.push(b' ');
        body.extend_from_slice(&e.name);
        body.push(0);
        let raw = hex::decode(&e.sha)
            .ok()
            .filter(|r| r.len() == hash_len)
            .ok_or_else(|| WorkspaceError::Git {
                args: "mktree".into(),
                dir: std::path::PathBuf::new(),
                stderr: format!("`{}` is not an object id", e.sha),
            })?;
        body.extend_from_slice(&raw);
    }
    let header = format!("tree {}\0", body.len());
    Ok(if hash_len == 32 {
        use sha2::{Digest, Sha256};
        hex::encode(
            Sha256::new()
                .chain_update(header)
                .chain_update(&body)
                .finalize(),
        )
    } else {
        use sha1::{Digest, Sha1};
        hex::encode(
            Sha1::new()
                .chain_update(header)
                .chain_update(&body)
                .finalize(),
        )
    })
}

/// A name as `mktree` reads it on a line: C-quoted when it holds a byte that would break the line
/// format (control characters, `"`, `\`) or is not ASCII.
fn quote(name: &[u8]) -> Vec<u8> {
    if !name
        .iter()
        .any(|b| *b < 0x20 || *b >= 0x7f || *b == b'"' || *b == b'\\')
    {
        return name.to_vec();
    }
    let mut out = vec![b'"'];
    for &b in name {
        match b {
            b'"' | b'\\' => out.extend([b'\\', b]),
            0x20..0x7f => out.push(b),
            _ => out.extend(format!("\\{b:03o}").as_bytes()),
        }
    }
    out.push(b'"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, mode: Mode) -> TreeEntry {
        TreeEntry {
            name: name.as_bytes().to_vec(),
            mode,
            sha: "00".repeat(20),
        }
    }

    #[test]
    fn a_directory_sorts_as_if_its_name_ended_in_a_slash() {
        let mut v = [
            entry("a", Mode::Tree),
            entry("a.b", Mode::File),
            entry("a-", Mode::File),
            entry("a0", Mode::File),
        ];
        v.sort_by(git_order);
        let names: Vec<_> = v.iter().map(|e| String::from_utf8_lossy(&e.name)).collect();
        assert_eq!(names, ["a-", "a.b", "a", "a0"]);
    }

    #[test]
    fn the_empty_tree_has_gits_well_known_id() {
        assert_eq!(
            tree_id(&[], 20).unwrap(),
            "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
        );
    }

    #[test]
    fn names_that_would_break_a_line_are_c_quoted() {
        assert_eq!(quote(b"plain.rs"), b"plain.rs");
        assert_eq!(
            quote(b"a\tb\"\\\n\xc3\xa9"),
            b"\"a\\011b\\\"\\\\\\012\\303\\251\""
        );
    }
}
