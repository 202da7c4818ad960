//! The "before" side of a diff: the git base commit (git backing) or the live project (overlay).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use chock_beneath::{Dir, WalkError};

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
