//! The "before" side of a diff: the git base commit (git backing) or the live project (overlay).

use std::path::{Path, PathBuf};

use chock_beneath::{Dir, WalkError};

use crate::entry::Entry;
use crate::error::{Result, WorkspaceError};
use crate::git::Git;
use crate::tree::{BaseTree, Mode, TreeEntry};

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
        let Some((dir, name)) = beneath_parent(&self.root, rel)? else {
            return Ok(Old::Missing);
        };
        let shown = self.root.join(rel);
        match Entry::read_at(&dir, name, &shown)? {
            None => Ok(Old::Missing),
            Some(Entry::Dir) => match dir.child(name.as_ref()) {
                Ok(sub)
                    if !sub
                        .is_empty()
                        .map_err(|e| WorkspaceError::io("list", &shown, e))? =>
                {
                    Ok(Old::Tree)
                }
                Ok(_) => Ok(Old::Entry(Entry::Dir)),
                Err(_) => Ok(Old::Missing),
            },
            Some(entry) => Ok(Old::Entry(entry)),
        }
    }

    fn under(&self, rel: &str) -> Result<Vec<(String, Entry)>> {
        let mut out = Vec::new();
        let shown = self.root.join(rel);
        let root = open_root(&self.root)?;
        match root.open_dir(Path::new(rel), false) {
            Ok(dir) => walk_dir(&dir, &shown, rel, &mut out)?,
            Err(WalkError::Missing { .. } | WalkError::NotADirectory { .. }) => {}
            Err(e) => return Err(WorkspaceError::io("open", &shown, e.into())),
        }
        Ok(out)
    }
}

fn open_root(root: &Path) -> Result<Dir> {
    Dir::open_root(root).map_err(|e| WorkspaceError::io("open", root, e))
}

/// The directory holding `rel` below `root`, reached without following a symlink, and `rel`'s
/// last name; `None` when a directory on the way is missing or is not one (below the project,
/// nothing is reached through a link).
fn beneath_parent<'r>(root: &Path, rel: &'r str) -> Result<Option<(Dir, &'r str)>> {
    let (parent, name) = rel.rsplit_once('/').unwrap_or(("", rel));
    match open_root(root)?.open_dir(Path::new(parent), false) {
        Ok(dir) => Ok(Some((dir, name))),
        Err(WalkError::Missing { .. } | WalkError::NotADirectory { .. }) => Ok(None),
        Err(e) => Err(WorkspaceError::io("open", root.join(parent), e.into())),
    }
}

fn walk_dir(dir: &Dir, shown: &Path, rel: &str, out: &mut Vec<(String, Entry)>) -> Result<()> {
    for name in dir
        .names()
        .map_err(|e| WorkspaceError::io("list", shown, e))?
    {
        let path = shown.join(&name);
        let Some(text) = name.to_str() else {
            return Err(WorkspaceError::NonUtf8Path(path));
        };
        let child = format!("{rel}/{text}");
        match Entry::read_at(dir, &name, &path)? {
            Some(Entry::Dir) => {
                out.push((child.clone(), Entry::Dir));
                if let Ok(sub) = dir.child(&name) {
                    walk_dir(&sub, &path, &child, out)?;
                }
            }
            Some(entry) => out.push((child, entry)),
            None => {}
        }
    }
    Ok(())
}

/// The base commit of a git-backed workspace, read one directory at a time ([`BaseTree`]).
#[derive(Debug)]
pub struct GitSide {
    base: BaseTree,
    /// The project's path inside the repository: empty, or ending in `/`.
    prefix: String,
    /// The live project, for empty directories git cannot record.
    lower: PathBuf,
}

impl GitSide {
    /// The base `commit`, seen from the project's directory `prefix` inside the repository.
    /// Reads the commit object only; directories are read when a path in them is asked about.
    pub fn new(git: Git, commit: &str, prefix: &str, lower: PathBuf) -> Result<Self> {
        Ok(Self {
            base: BaseTree::new(git, commit)?,
            prefix: prefix.to_string(),
            lower,
        })
    }

    /// The base's trees, for building a checkpoint on them.
    pub(crate) fn base(&self) -> &BaseTree {
        &self.base
    }

    fn full(&self, rel: &str) -> String {
        format!("{}{rel}", self.prefix)
    }

    /// The base's entry at `rel` as this side shows it: a submodule's commit is not carried
    /// (docs/workspace.md, limits), nor a directory that holds nothing but submodules. Only the
    /// directories on the way are read.
    fn carried(&self, rel: &str) -> Result<Option<TreeEntry>> {
        Ok(match self.base.entry(&self.full(rel))? {
            Some(e) if e.mode == Mode::Gitlink => None,
            Some(e) if e.mode == Mode::Tree => {
                let listing = self.base.listing(&self.full(rel))?;
                let carries =
                    listing.is_some_and(|l| l.entries.iter().any(|c| c.mode != Mode::Gitlink));
                carries.then_some(e)
            }
            other => other,
        })
    }

    fn content(&self, item: &TreeEntry) -> Result<Entry> {
        let data = self.base.read(&item.sha, "blob")?;
        Ok(match item.mode {
            Mode::Symlink => Entry::Symlink { target: data },
            Mode::Exec => Entry::File { exec: true, data },
            _ => Entry::File { exec: false, data },
        })
    }

    /// Whether the base has `rel` as a file or as a directory with files: such a path is never
    /// "ignored", whatever the ignore rules say.
    pub fn tracked(&self, rel: &str) -> bool {
        self.carried(rel).is_ok_and(|e| e.is_some())
    }
}

impl OldSide for GitSide {
    fn lookup(&self, rel: &str) -> Result<Old> {
        match self.carried(rel)? {
            Some(e) if e.mode == Mode::Tree => return Ok(Old::Tree),
            Some(e) => return Ok(Old::Entry(self.content(&e)?)),
            None => {}
        }
        // git records no empty directory; one that is empty in the project counts as there.
        if let Some((dir, name)) = beneath_parent(&self.lower, rel)?
            && dir
                .child(name.as_ref())
                .is_ok_and(|sub| sub.is_empty().unwrap_or(false))
        {
            return Ok(Old::Entry(Entry::Dir));
        }
        Ok(Old::Missing)
    }

    fn under(&self, rel: &str) -> Result<Vec<(String, Entry)>> {
        let top = self.full(rel);
        let mut out = Vec::new();
        for (path, e) in self.base.walk(&top)? {
            let Some(shown) = path.strip_prefix(&self.prefix) else {
                continue;
            };
            match e.mode {
                Mode::Gitlink => {}
                Mode::Tree => out.push((shown.to_string(), Entry::Dir)),
                _ => out.push((shown.to_string(), self.content(&e)?)),
            }
        }
        // A directory holding only submodules or nothing is not carried, as at the top.
        let carried: std::collections::BTreeSet<String> = out
            .iter()
            .filter(|(_, e)| !matches!(e, Entry::Dir))
            .flat_map(|(p, _)| ancestors(p))
            .collect();
        out.retain(|(p, e)| !matches!(e, Entry::Dir) || carried.contains(p));
        Ok(out)
    }
}

/// Every proper ancestor directory of `path`.
fn ancestors(path: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut at = path;
    while let Some((up, _)) = at.rsplit_once('/') {
        out.push(up.to_string());
        at = up;
    }
    out
}
