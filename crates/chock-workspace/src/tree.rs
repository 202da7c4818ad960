//! The base commit's trees, read one directory at a time and kept.
//!
//! A git-backed session measures its changes against the base commit and records checkpoints on
//! top of it. Both only need the directories along the changed paths, so the base is never listed
//! whole: a directory's tree object is read through one long-running `git cat-file --batch` the
//! first time a path in it is asked about, and kept for the session (the base is a commit: it
//! never changes). The cost of a lookup is the depth of the path and the size of the directories
//! on the way, not the size of the project.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::error::{Result, WorkspaceError};
use crate::git::{Git, ObjectReader};

/// How many tree objects this process has read from a base: what a test uses to show that a
/// checkpoint reads the directories on the way to a change and no others.
static TREES_READ: AtomicU64 = AtomicU64::new(0);

/// See [`TREES_READ`].
pub(crate) fn trees_read() -> u64 {
    TREES_READ.load(Ordering::Relaxed)
}

/// The kind of a tree entry, by its git mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    File,
    Exec,
    Symlink,
    Tree,
    /// A submodule's commit: carried as it is, never read.
    Gitlink,
}

impl Mode {
    /// The mode as git writes it in a tree object and in `ls-tree`/`mktree` lines.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Mode::File => "100644",
            Mode::Exec => "100755",
            Mode::Symlink => "120000",
            Mode::Tree => "40000",
            Mode::Gitlink => "160000",
        }
    }

    /// The object type an entry of this mode names.
    pub(crate) fn object_type(self) -> &'static str {
        match self {
            Mode::Tree => "tree",
            Mode::Gitlink => "commit",
            _ => "blob",
        }
    }

    fn parse(mode: &[u8]) -> Option<Self> {
        Some(match mode {
            b"100644" | b"100664" | b"100640" => Mode::File,
            b"100755" => Mode::Exec,
            b"120000" => Mode::Symlink,
            b"40000" | b"040000" => Mode::Tree,
            b"160000" => Mode::Gitlink,
            _ => return None,
        })
    }
}

/// One entry of a tree object. `name` is the raw bytes git stores (not always UTF-8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TreeEntry {
    pub(crate) name: Vec<u8>,
    pub(crate) mode: Mode,
    /// The object id, in hex.
    pub(crate) sha: String,
}

/// One directory of the base: its tree's id and entries.
#[derive(Debug)]
pub(crate) struct Listing {
    pub(crate) sha: String,
    pub(crate) entries: Vec<TreeEntry>,
}

impl Listing {
    fn find(&self, name: &[u8]) -> Option<&TreeEntry> {
        self.entries.iter().find(|e| e.name == name)
    }
}

/// The base commit's trees (see the module docs).
#[derive(Debug)]
pub(crate) struct BaseTree {
    git: Git,
    root: String,
    /// Raw object-id length in a tree object: 20 (SHA-1) or 32 (SHA-256 repositories).
    hash_len: usize,
    reader: Mutex<Option<ObjectReader>>,
    dirs: Mutex<HashMap<String, Option<Arc<Listing>>>>,
}

impl BaseTree {
    /// The trees of `commit` in `git`'s repository; reads the commit object only.
    pub(crate) fn new(git: Git, commit: &str) -> Result<Self> {
        let hash_len = commit.len() / 2;
        let tree = Self {
            git,
            root: String::new(),
            hash_len,
            reader: Mutex::new(None),
            dirs: Mutex::new(HashMap::new()),
        };
        let body = tree.read(commit, "commit")?;
        let root = body
            .strip_prefix(b"tree ")
            .and_then(|rest| rest.get(..hash_len * 2))
            .map(|sha| String::from_utf8_lossy(sha).into_owned())
            .ok_or_else(|| tree.malformed(commit, "a commit without a tree line"))?;
        Ok(Self { root, ..tree })
    }

    /// The repository these trees live in.
    pub(crate) fn git(&self) -> &Git {
        &self.git
    }

    /// The raw length of an object id in this repository.
    pub(crate) fn hash_len(&self) -> usize {
        self.hash_len
    }

    /// Reads object `sha` of type `kind` through the one batch reader.
    pub(crate) fn read(&self, sha: &str, kind: &str) -> Result<Vec<u8>> {
        let mut reader = self.reader.lock().unwrap_or_else(PoisonError::into_inner);
        if reader.is_none() {
            *reader = Some(self.git.object_reader()?);
        }
        reader.as_mut().expect("just started").read(sha, kind)
    }

    /// The directory `dir` of the base (`""` is the repository's top, no trailing slash), or
    /// `None` when the base has no directory there.
    pub(crate) fn listing(&self, dir: &str) -> Result<Option<Arc<Listing>>> {
        if let Some(known) = self
            .dirs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(dir)
        {
            return Ok(known.clone());
        }
        let found = match dir.rsplit_once('/') {
            _ if dir.is_empty() => Some(self.load(&self.root.clone())?),
            split => {
                let (parent, name) = split.unwrap_or(("", dir));
                match self.listing(parent)? {
                    Some(up) => match up.find(name.as_bytes()) {
                        Some(e) if e.mode == Mode::Tree => Some(self.load(&e.sha)?),
                        _ => None,
                    },
                    None => None,
                }
            }
        };
        let found = found.map(Arc::new);
        self.dirs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(dir.to_string(), found.clone());
        Ok(found)
    }

    /// The entry at `path` (relative to the repository's top), if the base has one.
    pub(crate) fn entry(&self, path: &str) -> Result<Option<TreeEntry>> {
        let (parent, name) = path.rsplit_once('/').unwrap_or(("", path));
        Ok(self
            .listing(parent)?
            .and_then(|l| l.find(name.as_bytes()).cloned()))
    }

    /// Every entry below directory `dir`, depth first, with its path; directories included.
    pub(crate) fn walk(&self, dir: &str) -> Result<Vec<(String, TreeEntry)>> {
        let mut out = Vec::new();
        let mut stack = vec![dir.to_string()];
        while let Some(at) = stack.pop() {
            let Some(listing) = self.listing(&at)? else {
                continue;
            };
            for entry in &listing.entries {
                let path = join(&at, &String::from_utf8_lossy(&entry.name));
                if entry.mode == Mode::Tree {
                    stack.push(path.clone());
                }
                out.push((path, entry.clone()));
            }
        }
        Ok(out)
    }

    fn load(&self, sha: &str) -> Result<Listing> {
        let body = self.read(sha, "tree")?;
        TREES_READ.fetch_add(1, Ordering::Relaxed);
        Ok(Listing {
            sha: sha.to_string(),
            entries: parse_tree(&body, self.hash_len)
                .ok_or_else(|| self.malformed(sha, "a tree"))?,
        })
    }

    fn malformed(&self, sha: &str, what: &str) -> WorkspaceError {
        WorkspaceError::Git {
            args: format!("cat-file --batch ({sha})"),
            dir: self.git.top().to_path_buf(),
            stderr: format!("cannot parse {what}"),
        }
    }
}

/// `dir/name`, or `name` at the top.
pub(crate) fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

/// A tree object's entries: `<mode> <name>\0<raw id>` repeated. `None` if it does not parse.
fn parse_tree(mut body: &[u8], hash_len: usize) -> Option<Vec<TreeEntry>> {
    let mut entries = Vec::new();
    while !body.is_empty() {
        let space = body.iter().position(|b| *b == b' ')?;
        let mode = Mode::parse(&body[..space])?;
        let rest = &body[space + 1..];
        let nul = rest.iter().position(|b| *b == 0)?;
        let name = rest[..nul].to_vec();
        let id = rest.get(nul + 1..nul + 1 + hash_len)?;
        entries.push(TreeEntry {
            name,
            mode,
            sha: hex::encode(id),
        });
        body = &rest[nul + 1 + hash_len..];
    }
    Some(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_object_parses_into_its_entries_with_raw_names() {
        let mut body = b"100644 a\xff\0".to_vec();
        body.extend([0x11; 20]);
        body.extend(b"40000 dir\0");
        body.extend([0x22; 20]);
        let entries = parse_tree(&body, 20).unwrap();
        assert_eq!(entries[0].name, b"a\xff");
        assert_eq!(entries[0].mode, Mode::File);
        assert_eq!(entries[1].mode, Mode::Tree);
        assert_eq!(entries[1].sha, "22".repeat(20));
    }

    #[test]
    fn a_truncated_tree_object_is_refused() {
        let mut body = b"100644 a\0".to_vec();
        body.extend([0x11; 19]);
        assert!(parse_tree(&body, 20).is_none());
        assert!(parse_tree(b"777 a\0", 20).is_none());
    }
}
