//! Reading the overlay's upper directory from the host, without mounting anything.
//!
//! What the kernel leaves there is described in [`chock_beneath::is_whiteout`]. A `rename` of a
//! lower directory is refused by the kernel without `redirect_dir`, so tools copy it: it arrives as
//! a whiteout plus a new directory.
//!
//! The upper directory is written by the sandbox, possibly while it is scanned (a background
//! command goes on running), so the scan walks it by descriptor ([`chock_beneath::Dir`]): a
//! directory swapped for a symlink to a host directory mid-scan is read as the symlink it now is,
//! never followed. The scan is not a consistent snapshot of a directory being changed under it; it
//! is a faithful reading of what was in the upper directory, entry by entry, and nothing outside.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;

use chock_beneath::{Dir, FileType, Meta, is_opaque, is_whiteout};
use rustix::io::Errno;

use crate::entry::Entry;
use crate::error::{Result, WorkspaceError};
use crate::old::{Old, OldSide};

/// One path whose before and after differ (or may: equal pairs are dropped by [`scan`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawChange {
    pub old: Option<Entry>,
    pub new: Option<Entry>,
}

/// Compares the upper directory against the before side and returns every path that differs,
/// sorted. `.git` at the top is skipped: a git run inside the sandbox writes there, and it is
/// never part of the session's work.
///
/// `skip` names paths to leave out entirely (and not read): for the git backing, new paths the
/// project's ignore rules exclude.
pub fn scan(
    upper: &Path,
    old: &dyn OldSide,
    skip: &dyn Fn(&str) -> bool,
) -> Result<BTreeMap<String, RawChange>> {
    let root = Dir::open_root(upper).map_err(|e| WorkspaceError::io("open", upper, e))?;
    let mut scanner = Scanner {
        upper,
        old,
        skip,
        out: BTreeMap::new(),
    };
    scanner.dir(&root, "")?;
    scanner.out.retain(|_, c| c.old != c.new);
    Ok(scanner.out)
}

/// Whether the upper directory holds nothing of the project (a `.git` at its top is not the
/// project's content, as in [`scan`]): one listing of one directory.
pub(crate) fn untouched(upper: &Path) -> Result<bool> {
    let root = Dir::open_root(upper).map_err(|e| WorkspaceError::io("open", upper, e))?;
    let names = root
        .names()
        .map_err(|e| WorkspaceError::io("list", upper, e))?;
    Ok(names.iter().all(|n| n == ".git"))
}

/// Every path in the upper directory (files, directories, whiteouts), names only; `.git` at the
/// top is left out as in [`scan`]. Walked by descriptor, as the scan is.
pub(crate) fn names(upper: &Path, out: &mut Vec<String>) -> Result<()> {
    let root = Dir::open_root(upper).map_err(|e| WorkspaceError::io("open", upper, e))?;
    names_below(&root, upper, "", out)
}

fn names_below(dir: &Dir, upper: &Path, rel: &str, out: &mut Vec<String>) -> Result<()> {
    for child in children(dir, upper, rel)? {
        out.push(child.rel.clone());
        if child.meta.kind == FileType::Directory
            && let Ok(sub) = dir.child(&child.name)
        {
            names_below(&sub, upper, &child.rel, out)?;
        }
    }
    Ok(())
}

/// One entry of an upper directory.
pub struct Child {
    /// The path below the project.
    pub rel: String,
    /// The name in its directory.
    pub name: OsString,
    /// Its `lstat` when listed.
    pub meta: Meta,
}

/// The entries of upper directory `dir` (at `rel` below the project), sorted; `.git` at the top
/// is left out (see [`scan`]), and so is an entry gone since the listing.
pub fn children(dir: &Dir, upper: &Path, rel: &str) -> Result<Vec<Child>> {
    let shown = upper.join(rel);
    let mut out = Vec::new();
    for name in dir
        .names()
        .map_err(|e| WorkspaceError::io("list", &shown, e))?
    {
        let Some(text) = name.to_str() else {
            return Err(WorkspaceError::NonUtf8Path(shown.join(&name)));
        };
        if rel.is_empty() && text == ".git" {
            continue;
        }
        let child = if rel.is_empty() {
            text.to_string()
        } else {
            format!("{rel}/{text}")
        };
        let Some(meta) = dir
            .meta(&name)
            .map_err(|e| WorkspaceError::io("inspect", shown.join(&name), e))?
        else {
            continue;
        };
        out.push(Child {
            rel: child,
            name,
            meta,
        });
    }
    Ok(out)
}

struct Scanner<'a> {
    upper: &'a Path,
    old: &'a dyn OldSide,
    skip: &'a dyn Fn(&str) -> bool,
    out: BTreeMap<String, RawChange>,
}

impl Scanner<'_> {
    fn dir(&mut self, dir: &Dir, rel: &str) -> Result<()> {
        for child in children(dir, self.upper, rel)? {
            if (self.skip)(&child.rel) {
                continue;
            }
            if is_whiteout(dir, &child.name, &child.meta) {
                self.delete(&child.rel, true)?;
            } else if child.meta.kind == FileType::Directory {
                match dir.child(&child.name) {
                    Ok(sub) => self.subdir(&sub, &child.rel)?,
                    // Swapped for a symlink or a file since it was listed: read as what it is now.
                    Err(Errno::LOOP | Errno::NOTDIR) => self.leaf(dir, &child)?,
                    Err(Errno::NOENT) => {}
                    Err(e) => {
                        let shown = self.upper.join(&child.rel);
                        return Err(WorkspaceError::io("open", shown, e.into()));
                    }
                }
            } else if matches!(child.meta.kind, FileType::RegularFile | FileType::Symlink) {
                self.leaf(dir, &child)?;
            }
            // A fifo, socket or device the session left (a dev server's socket, say) is not work
            // that can be applied: it is left out of the diff, so nothing of it lands, rather than
            // making the whole session unreviewable.
        }
        Ok(())
    }

    /// A file or symlink (or what a directory became since it was listed).
    fn leaf(&mut self, dir: &Dir, child: &Child) -> Result<()> {
        let shown = self.upper.join(&child.rel);
        let now = dir
            .meta(&child.name)
            .map_err(|e| WorkspaceError::io("inspect", &shown, e))?;
        if !now.is_some_and(|m| matches!(m.kind, FileType::RegularFile | FileType::Symlink)) {
            // Gone, or swapped for a directory, fifo or device since it was listed: the next
            // scan reads whatever stays.
            return Ok(());
        }
        let entry = Entry::read_at(dir, &child.name, &shown)?;
        if self.old.lookup(&child.rel)? == Old::Tree {
            self.delete(&child.rel, false)?;
            self.set(&child.rel, Some(Entry::Dir), entry);
        } else {
            let before = self.before(&child.rel)?;
            self.set(&child.rel, before, entry);
        }
        Ok(())
    }

    fn subdir(&mut self, dir: &Dir, rel: &str) -> Result<()> {
        let old = self.old.lookup(rel)?;
        match &old {
            Old::Entry(Entry::File { .. } | Entry::Symlink { .. }) => {
                let before = self.before(rel)?;
                self.set(rel, before, Some(Entry::Dir));
            }
            Old::Missing => self.set(rel, None, Some(Entry::Dir)),
            Old::Tree => {
                if is_opaque(dir) {
                    self.delete(rel, false)?;
                }
                // Still a directory (equal pairs are dropped at the end).
                self.set(rel, Some(Entry::Dir), Some(Entry::Dir));
            }
            Old::Entry(Entry::Dir) => self.set(rel, Some(Entry::Dir), Some(Entry::Dir)),
        }
        self.dir(dir, rel)?;
        // A new directory with something in it needs no entry of its own: its files make it.
        let has_children = !dir
            .is_empty()
            .map_err(|e| WorkspaceError::io("list", self.upper.join(rel), e))?;
        if has_children && matches!(old, Old::Missing) {
            self.out.remove(rel);
        }
        Ok(())
    }
    /// Marks `rel` deleted: everything the before side has below it, and (with `itself`) `rel`.
    fn delete(&mut self, rel: &str, itself: bool) -> Result<()> {
        match self.old.lookup(rel)? {
            Old::Missing => {}
            Old::Entry(entry) => {
                if itself {
                    self.set(rel, Some(entry), None);
                }
            }
            Old::Tree => {
                for (path, entry) in self.old.under(rel)? {
                    self.out.entry(path).or_insert(RawChange {
                        old: Some(entry),
                        new: None,
                    });
                }
                if itself {
                    self.set(rel, Some(Entry::Dir), None);
                }
            }
        }
        Ok(())
    }

    fn before(&mut self, rel: &str) -> Result<Option<Entry>> {
        if let Some(change) = self.out.get(rel) {
            return Ok(change.old.clone());
        }
        Ok(match self.old.lookup(rel)? {
            Old::Entry(entry) => Some(entry),
            Old::Missing | Old::Tree => None,
        })
    }

    fn set(&mut self, rel: &str, old: Option<Entry>, new: Option<Entry>) {
        let slot = self.out.entry(rel.to_string()).or_insert(RawChange {
            old: None,
            new: None,
        });
        if slot.old.is_none() {
            slot.old = old;
        }
        slot.new = new;
    }
}
