//! The "before" side of a diff: the git base commit (git backing) or the live project (overlay).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::entry::Entry;
use crate::error::{Result, WorkspaceError};
use crate::git::Git;

/// What the before side holds at one path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Old {
    /// Nothing.
    Missing,
    /// A file, a symlink or an empty directory.
    Entry(Entry),
    /// A directory with something in it.
    Tree,
}

/// A before side.
pub trait OldSide {
    /// What is at `rel`.
    fn lookup(&self, rel: &str) -> Result<Old>;
    /// Everything below directory `rel` (files, symlinks, and each directory as [`Entry::Dir`]).
    fn under(&self, rel: &str) -> Result<Vec<(String, Entry)>>;
}

/// The live project directory (overlay backing: the lower layer is the only "before").
#[derive(Debug)]
pub struct LowerSide {
    pub root: PathBuf,
}

impl OldSide for LowerSide {
    fn lookup(&self, rel: &str) -> Result<Old> {
        let path = self.root.join(rel);
        match Entry::read_shallow(&path)? {
            None => Ok(Old::Missing),
            Some(Entry::Dir) => {
                let mut it =
                    fs::read_dir(&path).map_err(|e| WorkspaceError::io("list", &path, e))?;
                Ok(if it.next().is_some() {
                    Old::Tree
                } else {
                    Old::Entry(Entry::Dir)
                })
            }
            Some(_) => Ok(Entry::read(&path)?.map_or(Old::Missing, Old::Entry)),
        }
    }

    fn under(&self, rel: &str) -> Result<Vec<(String, Entry)>> {
        let mut out = Vec::new();
        walk_dir(&self.root.join(rel), rel, &mut out)?;
        Ok(out)
    }
}

fn walk_dir(abs: &Path, rel: &str, out: &mut Vec<(String, Entry)>) -> Result<()> {
    for (name, path) in sorted_children(abs)? {
        let child = format!("{rel}/{name}");
        match Entry::read(&path)? {
            Some(Entry::Dir) => {
                out.push((child.clone(), Entry::Dir));
                walk_dir(&path, &child, out)?;
            }
            Some(entry) => out.push((child, entry)),
            None => {}
        }
    }
    Ok(())
}

/// A directory's children as (UTF-8 name, path), sorted by name.
pub fn sorted_children(dir: &Path) -> Result<Vec<(String, PathBuf)>> {
    let mut children = Vec::new();
    for item in fs::read_dir(dir).map_err(|e| WorkspaceError::io("list", dir, e))? {
        let item = item.map_err(|e| WorkspaceError::io("list", dir, e))?;
        let path = item.path();
        let name = item
            .file_name()
            .into_string()
            .map_err(|_| WorkspaceError::NonUtf8Path(path.clone()))?;
        children.push((name, path));
    }
    children.sort();
    Ok(children)
}

/// One tree entry of the base commit.
#[derive(Debug, Clone)]
struct TreeItem {
    mode: String,
    sha: String,
}

/// The base commit of a git-backed workspace, listed once (`git ls-tree -r`).
#[derive(Debug)]
pub struct GitSide {
    git: Git,
    items: BTreeMap<String, TreeItem>,
    /// The live project, for empty directories git cannot record.
    lower: PathBuf,
    /// Started on the first blob read.
    reader: std::sync::Mutex<Option<crate::git::BlobReader>>,
}

impl GitSide {
    /// Lists `commit`'s tree below `prefix` (the project's path inside the repository).
    pub fn new(git: Git, commit: &str, prefix: &str, lower: PathBuf) -> Result<Self> {
        let mut args = vec!["ls-tree", "-r", "-z", "--full-tree", commit];
        if !prefix.is_empty() {
            args.push("--");
            args.push(prefix);
        }
        let out = git.run(&args)?;
        let mut items = BTreeMap::new();
        for record in out.split(|b| *b == 0).filter(|r| !r.is_empty()) {
            let text = String::from_utf8_lossy(record);
            let Some((head, path)) = text.split_once('\t') else {
                continue;
            };
            let mut parts = head.split(' ');
            let (Some(mode), Some(_kind), Some(sha)) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            if mode == "160000" {
                continue; // a submodule's commit: not carried (docs/workspace.md, limits)
            }
            let Some(rel) = path.strip_prefix(prefix) else {
                continue;
            };
            items.insert(
                rel.to_string(),
                TreeItem {
                    mode: mode.to_string(),
                    sha: sha.to_string(),
                },
            );
        }
        Ok(Self {
            git,
            items,
            lower,
            reader: std::sync::Mutex::new(None),
        })
    }

    fn entry(&self, item: &TreeItem) -> Result<Entry> {
        let mut reader = self
            .reader
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if reader.is_none() {
            *reader = Some(self.git.blob_reader()?);
        }
        let data = reader.as_mut().expect("just started").read(&item.sha)?;
        Ok(match item.mode.as_str() {
            "120000" => Entry::Symlink { target: data },
            "100755" => Entry::File { exec: true, data },
            _ => Entry::File { exec: false, data },
        })
    }

    /// Whether the base has `rel` as a file or as a directory with files: such a path is never
    /// "ignored", whatever the ignore rules say.
    pub fn tracked(&self, rel: &str) -> bool {
        self.items.contains_key(rel) || self.has_children(rel)
    }

    fn has_children(&self, rel: &str) -> bool {
        let start = format!("{rel}/");
        self.items
            .range(start.clone()..)
            .next()
            .is_some_and(|(k, _)| k.starts_with(&start))
    }
}

impl OldSide for GitSide {
    fn lookup(&self, rel: &str) -> Result<Old> {
        if let Some(item) = self.items.get(rel) {
            return Ok(Old::Entry(self.entry(item)?));
        }
        if self.has_children(rel) {
            return Ok(Old::Tree);
        }
        // git records no empty directory; one that is empty in the project counts as there.
        let path = self.lower.join(rel);
        if fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir())
            && fs::read_dir(&path).is_ok_and(|mut it| it.next().is_none())
        {
            return Ok(Old::Entry(Entry::Dir));
        }
        Ok(Old::Missing)
    }

    fn under(&self, rel: &str) -> Result<Vec<(String, Entry)>> {
        let start = format!("{rel}/");
        let mut out = Vec::new();
        let mut dirs = std::collections::BTreeSet::new();
        for (path, item) in self.items.range(start.clone()..) {
            if !path.starts_with(&start) {
                break;
            }
            let mut cut = start.len();
            while let Some(pos) = path[cut..].find('/') {
                dirs.insert(path[..cut + pos].to_string());
                cut += pos + 1;
            }
            out.push((path.clone(), self.entry(item)?));
        }
        out.extend(dirs.into_iter().map(|d| (d, Entry::Dir)));
        Ok(out)
    }
}
