//! Reading the overlay's upper directory from the host, without mounting anything.
//!
//! What the kernel leaves there (checked on 6.18 with `unshare -Urm` and `-o userxattr`): a changed
//! or new file or symlink as itself; a deleted path as a whiteout, a character device 0:0; a
//! directory that replaced one of the lower layer as a directory with `user.overlay.opaque="y"`
//! (`trusted.overlay.opaque` when mounted without `userxattr` by real root). A `rename` of a lower
//! directory is refused by the kernel without `redirect_dir`, so tools copy it: it arrives as a
//! whiteout plus a new directory.

use std::collections::BTreeMap;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

use crate::entry::Entry;
use crate::error::{Result, WorkspaceError};
use crate::old::{Old, OldSide, sorted_children};

/// One path whose before and after differ (or may: equal pairs are dropped by [`scan`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawChange {
    pub old: Option<Entry>,
    pub new: Option<Entry>,
}

/// Whether `meta` is an overlay whiteout.
fn is_whiteout(path: &Path, meta: &std::fs::Metadata) -> bool {
    if meta.file_type().is_char_device() {
        return meta.rdev() == 0;
    }
    meta.is_file() && meta.len() == 0 && xattr_is(path, "user.overlay.whiteout", None)
}

/// Whether directory `path` is opaque (hides everything the lower layer had there).
fn is_opaque(path: &Path) -> bool {
    xattr_is(path, "user.overlay.opaque", Some(b"y"))
        || xattr_is(path, "trusted.overlay.opaque", Some(b"y"))
}

fn xattr_is(path: &Path, name: &str, value: Option<&[u8]>) -> bool {
    let mut buf = [0u8; 16];
    match rustix::fs::lgetxattr(path, name, &mut buf[..]) {
        Ok(len) => value.is_none_or(|v| buf.get(..len) == Some(v)),
        Err(_) => false,
    }
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
    let mut scanner = Scanner {
        old,
        skip,
        out: BTreeMap::new(),
    };
    scanner.dir(upper, "")?;
    scanner.out.retain(|_, c| c.old != c.new);
    Ok(scanner.out)
}

/// The entries of upper directory `abs` (at `rel` below the project) as (project-relative path,
/// absolute path), sorted; `.git` at the top is left out (see [`scan`]).
pub fn children(abs: &Path, rel: &str) -> Result<Vec<(String, std::path::PathBuf)>> {
    let mut out = Vec::new();
    for (name, path) in sorted_children(abs)? {
        if rel.is_empty() && name == ".git" {
            continue;
        }
        let child = if rel.is_empty() {
            name
        } else {
            format!("{rel}/{name}")
        };
        out.push((child, path));
    }
    Ok(out)
}

struct Scanner<'a> {
    old: &'a dyn OldSide,
    skip: &'a dyn Fn(&str) -> bool,
    out: BTreeMap<String, RawChange>,
}

impl Scanner<'_> {
    fn dir(&mut self, abs: &Path, rel: &str) -> Result<()> {
        for (child, path) in children(abs, rel)? {
            if (self.skip)(&child) {
                continue;
            }
            let meta = std::fs::symlink_metadata(&path)
                .map_err(|e| WorkspaceError::io("inspect", &path, e))?;
            if is_whiteout(&path, &meta) {
                self.delete(&child, true)?;
            } else if meta.is_dir() {
                self.subdir(&path, &child)?;
            } else if !meta.is_file() && !meta.file_type().is_symlink() {
                // A fifo, socket or device the session left (a dev server's socket, say) is not
                // work that can be applied: it is left out of the diff, so nothing of it lands,
                // rather than making the whole session unreviewable.
                continue;
            } else {
                let entry = Entry::read(&path)?;
                if self.old.lookup(&child)? == Old::Tree {
                    self.delete(&child, false)?;
                    self.set(&child, Some(Entry::Dir), entry);
                } else {
                    let before = self.before(&child)?;
                    self.set(&child, before, entry);
                }
            }
        }
        Ok(())
    }

    fn subdir(&mut self, abs: &Path, rel: &str) -> Result<()> {
        let old = self.old.lookup(rel)?;
        match &old {
            Old::Entry(Entry::File { .. } | Entry::Symlink { .. }) => {
                let before = self.before(rel)?;
                self.set(rel, before, Some(Entry::Dir));
            }
            Old::Missing => self.set(rel, None, Some(Entry::Dir)),
            Old::Tree => {
                if is_opaque(abs) {
                    self.delete(rel, false)?;
                }
                // Still a directory (equal pairs are dropped at the end).
                self.set(rel, Some(Entry::Dir), Some(Entry::Dir));
            }
            Old::Entry(Entry::Dir) => self.set(rel, Some(Entry::Dir), Some(Entry::Dir)),
        }
        self.dir(abs, rel)?;
        // A new directory with something in it needs no entry of its own: its files make it.
        let has_children = std::fs::read_dir(abs)
            .map_err(|e| WorkspaceError::io("list", abs, e))?
            .next()
            .is_some();
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
