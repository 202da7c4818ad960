//! A user's git-shim layers, kept between sessions (docs/git.md, "The shim").
//!
//! Finding the host's gits costs a session a `git --exec-path` per git on `PATH` and a read of
//! each one's directory, and its layers (`shim_layers.rs`) a hard link per hidden name: a few
//! milliseconds, paid again by every `chock exec`. What they come to depends only on the shim
//! program, the gits on `PATH` and the directories holding them, so they are kept, once made, in
//! an entry of a private directory beside the sessions root (`git-shims`), named by those inputs:
//!
//! - an index file per `PATH` and shim (`index-<hash>.json`) records what was found, the entry
//!   holding the layers, and the directories' status as it was then;
//! - a session takes the entry when its key still matches and no directory changed since (a git
//!   upgraded, a hard link added: each changes a file's inode or a directory's times), holding a
//!   shared lock on the entry for as long as it may mount the entry's layers;
//! - an entry is made whole under a temporary name and renamed into place, so a session sees one
//!   complete or none; one no index names any more is removed once nobody holds it.
//!
//! The directory is used only when it is this user's own and no one else may write it: its
//! layers are what every call is shown in place of git. Anything that fails here leaves the
//! session to make its own layers, as before: the shim hides every git either way.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::git_shim::Gits;
use crate::shim_layers::Shown;

/// The cache's directory beside a sessions root.
pub(crate) const CACHE_DIR: &str = "git-shims";

/// What a session takes from the cache: the gits, how a plan shows the shim over them, and the
/// shared lock that keeps the entry's layers in place while the session may mount them.
#[derive(Debug)]
pub(crate) struct Taken {
    pub(crate) gits: Gits,
    pub(crate) shown: Shown,
    pub(crate) hold: File,
}

/// One index file: what `key` (the shim and the gits on one `PATH`) found, and where.
#[derive(Debug, Serialize, Deserialize)]
struct Index {
    key: String,
    entry: String,
    dirs: Vec<DirStatus>,
    gits: Gits,
    shown: Shown,
}

/// A directory's status, enough to see an entry added, removed or renamed there.
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
struct DirStatus {
    path: PathBuf,
    ino: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

impl DirStatus {
    fn of(path: &Path) -> Option<DirStatus> {
        let m = std::fs::metadata(path).ok()?;
        Some(DirStatus {
            path: path.to_path_buf(),
            ino: m.ino(),
            mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
            ctime_ns: i128::from(m.ctime()) * 1_000_000_000 + i128::from(m.ctime_nsec()),
        })
    }
}

/// The layers and gits for `shim` over the gits on `path`, from the cache under `root` (made
/// there when missing or stale). `None` when the cache cannot be used.
pub(crate) fn take(root: &Path, shim: &Path, path: &str) -> Option<Taken> {
    own_private_dir(root)?;
    let key = key_of(shim, path)?;
    let index_file = root.join(format!("index-{:016x}.json", fnv1a(key.as_bytes())));
    if let Some(taken) = read_index(root, &index_file, &key) {
        return Some(taken);
    }
    let taken = make(root, &index_file, key, shim, path);
    collect(root);
    taken
}

/// The index at `file`, when it is `key`'s, its directories are as they were and its entry can
/// be held.
fn read_index(root: &Path, file: &Path, key: &str) -> Option<Taken> {
    let index: Index = serde_json::from_slice(&std::fs::read(file).ok()?).ok()?;
    if index.key != key || !unchanged(&index.dirs) {
        return None;
    }
    let hold = hold(&root.join(&index.entry))?;
    Some(Taken {
        gits: index.gits,
        shown: index.shown,
        hold,
    })
}

fn unchanged(dirs: &[DirStatus]) -> bool {
    dirs.iter()
        .all(|d| DirStatus::of(&d.path).is_some_and(|now| now == *d))
}

/// Finds the gits, makes their layers in a new entry and names it in the index.
fn make(root: &Path, index_file: &Path, key: String, shim: &Path, path: &str) -> Option<Taken> {
    let gits = Gits::find(path);
    let dirs: Vec<DirStatus> = gits.dirs().filter_map(|d| DirStatus::of(&d)).collect();
    let entry = format!(
        "entry-{:016x}",
        fnv1a(format!("{key}\n{dirs:?}").as_bytes())
    );
    let at = root.join(&entry);
    let building = root.join(format!(
        ".building-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default()
    ));
    let shown = crate::shim_layers::show(shim, gits.masked(), Some(&building), false);
    if shown.dirs.len() < directories_of_several(gits.masked()) {
        // A layer could not be made (its gits are bound one by one instead): not kept, so the
        // next session tries again.
        let _ = std::fs::remove_dir_all(&building);
        return None;
    }
    // An entry with no layer (each git alone in its directory) is kept too: what was found is
    // what it spares the next session.
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&building)
        .ok()?;
    File::create(building.join("lock")).ok()?;
    if let Err(e) = std::fs::rename(&building, &at) {
        let _ = std::fs::remove_dir_all(&building);
        // Another session made the same entry from the same inputs first: it is the same.
        use std::io::ErrorKind::{AlreadyExists, DirectoryNotEmpty};
        if !matches!(e.kind(), AlreadyExists | DirectoryNotEmpty) {
            return None;
        }
    }
    let shown = shown.moved(&building, &at);
    let hold = hold(&at)?;
    let index = Index {
        key,
        entry,
        dirs,
        gits: gits.clone(),
        shown: shown.clone(),
    };
    write_atomically(index_file, &serde_json::to_vec(&index).ok()?)?;
    Some(Taken { gits, shown, hold })
}

/// How many directories hold two or more of `masked`: the layers a whole entry has.
fn directories_of_several(masked: &[PathBuf]) -> usize {
    let mut per_dir: std::collections::BTreeMap<&Path, usize> = std::collections::BTreeMap::new();
    for m in masked {
        if let Some(dir) = m.parent() {
            *per_dir.entry(dir).or_default() += 1;
        }
    }
    per_dir.values().filter(|n| **n > 1).count()
}

/// A shared lock on the entry at `at`, once it is certain the entry is still there (its lock
/// file taken after a removal would be an unlinked one).
fn hold(at: &Path) -> Option<File> {
    let lock = at.join("lock");
    let file = File::open(&lock).ok()?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockShared).ok()?;
    let held = file.metadata().ok()?;
    let there = std::fs::metadata(&lock).ok()?;
    (held.ino() == there.ino() && held.dev() == there.dev()).then_some(file)
}

/// Removes every entry no index names and nobody holds, and what a crashed build left.
fn collect(root: &Path) {
    let Ok(items) = std::fs::read_dir(root) else {
        return;
    };
    let items: Vec<(String, PathBuf)> = items
        .flatten()
        .filter_map(|i| Some((i.file_name().into_string().ok()?, i.path())))
        .collect();
    let named: Vec<String> = items
        .iter()
        .filter(|(n, _)| n.starts_with("index-"))
        .filter_map(|(_, p)| serde_json::from_slice::<Index>(&std::fs::read(p).ok()?).ok())
        .map(|i| i.entry)
        .collect();
    for (name, path) in &items {
        if name.starts_with("entry-") && !named.contains(name) {
            let Ok(lock) = File::open(path.join("lock")) else {
                continue;
            };
            if rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive)
                .is_ok()
            {
                let _ = std::fs::remove_dir_all(path);
            }
        } else if name.starts_with(".building-") && stale(path) {
            let _ = std::fs::remove_dir_all(path);
        }
    }
}

/// A build left for an hour is one whose maker died.
fn stale(path: &Path) -> bool {
    std::fs::symlink_metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age.as_secs() > 3600)
}

/// The cache's key: the `PATH`, and the shim and every git on it as files (a replaced file is a
/// new inode; a rewritten one has a new modification time).
fn key_of(shim: &Path, path: &str) -> Option<String> {
    let mut key = format!("PATH={path}\n");
    key.push_str(&file_status(shim)?);
    for dir in path.split(':').filter(|d| d.starts_with('/')) {
        if let Ok(real) = Path::new(dir).join("git").canonicalize()
            && let Some(status) = file_status(&real)
        {
            key.push_str(&status);
        }
    }
    Some(key)
}

fn file_status(path: &Path) -> Option<String> {
    let m = std::fs::metadata(path).ok()?;
    // Not its change time: linking the shim into an entry changes the shim's.
    Some(format!(
        "{} {} {} {} {}.{}\n",
        path.display(),
        m.dev(),
        m.ino(),
        m.len(),
        m.mtime(),
        m.mtime_nsec(),
    ))
}

/// Makes `root` (0700) when missing; `Some` only when it is a directory of this user's that no
/// one else may write, reached without a symbolic link.
fn own_private_dir(root: &Path) -> Option<()> {
    let _ = std::fs::DirBuilder::new().mode(0o700).create(root);
    let m = std::fs::symlink_metadata(root).ok()?;
    let mine = m.uid() == rustix::process::geteuid().as_raw();
    (m.is_dir() && mine && m.mode() & 0o022 == 0).then_some(())
}

fn write_atomically(file: &Path, bytes: &[u8]) -> Option<()> {
    let tmp = file.with_extension(format!("tmp-{}", std::process::id()));
    let mut f = File::create(&tmp).ok()?;
    f.write_all(bytes).ok()?;
    drop(f);
    std::fs::rename(&tmp, file).ok()
}

/// FNV-1a, 64 bits: a stable name for a key (not a defence: the key itself is compared).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shim(dir: &Path) -> PathBuf {
        let shim = dir.join("shim");
        std::fs::write(&shim, "#!/bin/sh\n").unwrap();
        shim
    }

    fn entries(root: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(root)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.starts_with("entry-"))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_second_session_takes_the_first_ones_layers_and_a_changed_directory_makes_new_ones() {
        let dir = tempfile::tempdir().unwrap();
        let shim = shim(dir.path());
        let root = dir.path().join(CACHE_DIR);
        let path = chock_sandbox::DEFAULT_PATH;
        let first = take(&root, &shim, path).expect("what was found is kept");
        let second = take(&root, &shim, path).expect("the same inputs are taken again");
        let layers = |t: &Taken| -> Vec<PathBuf> {
            t.shown.dirs.iter().map(|(d, _)| d.layer.clone()).collect()
        };
        assert_eq!(layers(&first), layers(&second));
        assert_eq!(first.gits.masked(), second.gits.masked());
        assert_eq!(entries(&root).len(), 1);
        // (A machine whose gits are each alone in their directory has an entry with no layer.)
        if let Some((layer, _)) = first.shown.dirs.first() {
            assert!(layer.layer.starts_with(root.join(&entries(&root)[0])));
            assert!(std::fs::read_dir(&layer.layer).unwrap().count() > 1);
        }
        // The index records a directory as it was; once that directory changes, the index is
        // stale and is not taken.
        let index_file = std::fs::read_dir(&root)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| {
                p.file_name()
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .starts_with("index-")
            })
            .unwrap();
        let key = key_of(&shim, path).unwrap();
        let mut index: Index =
            serde_json::from_slice(&std::fs::read(&index_file).unwrap()).unwrap();
        let watched = dir.path().join("watched");
        std::fs::create_dir(&watched).unwrap();
        index.dirs.push(DirStatus::of(&watched).unwrap());
        std::fs::write(&index_file, serde_json::to_vec(&index).unwrap()).unwrap();
        assert!(read_index(&root, &index_file, &key).is_some());
        std::fs::write(watched.join("git-new"), "").unwrap();
        assert!(
            read_index(&root, &index_file, &key).is_none(),
            "a changed directory"
        );
        // Another key (another shim program) is another entry; the first stays while held.
        std::fs::write(&shim, "#!/bin/sh\n# rebuilt\n").unwrap();
        let third = take(&root, &shim, path).expect("a new entry");
        assert_eq!(entries(&root).len(), 2);
        drop((first, second, third));
    }

    #[test]
    fn an_entry_nobody_names_or_holds_is_collected_and_a_held_one_stays() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join(CACHE_DIR);
        own_private_dir(&root).unwrap();
        for name in ["entry-1", "entry-2"] {
            std::fs::create_dir(root.join(name)).unwrap();
            File::create(root.join(name).join("lock")).unwrap();
        }
        let held = hold(&root.join("entry-2")).unwrap();
        collect(&root);
        assert_eq!(entries(&root), ["entry-2"]);
        drop(held);
        collect(&root);
        assert!(entries(&root).is_empty());
    }

    #[test]
    fn a_directory_others_may_write_is_not_used() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join(CACHE_DIR);
        own_private_dir(&root).unwrap();
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(own_private_dir(&root).is_none());
        assert!(take(&root, &shim(dir.path()), chock_sandbox::DEFAULT_PATH).is_none());
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(dir.path(), &link).unwrap();
        assert!(
            own_private_dir(&link).is_none(),
            "reached through a symbolic link"
        );
    }
}
