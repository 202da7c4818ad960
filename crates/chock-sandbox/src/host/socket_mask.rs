//! Host unix sockets under declared `[sandbox]` write paths (and read paths that are files),
//! masked before the call starts.
//!
//! A bind does not stop `connect(2)` on a socket inode it shows, Landlock below ABI 9 has no right
//! for connecting to a named socket, and seccomp cannot see the path `connect` is given. So a
//! daemon that keeps its socket inside a declared path (an agent, a build server, a language
//! server in a cache directory) would be reachable from the call, outside the broker. Declared read
//! directories are shown through an overlay, whose inodes no socket is bound to
//! (`read_overlay.rs`); a write path cannot be (an overlay's upper directory is one mount's
//! alone), so before the call is built, the sockets under every bound declared path are found on
//! the host (no symlink is followed, no other filesystem entered: the bind is not recursive, so
//! other filesystems are not in the sandbox anyway), and each one gets an empty read-only file
//! bound over it inside the sandbox: `connect` there answers `ECONNREFUSED`.
//!
//! A session finds them in its [`crate::SocketIndex`] (walked once, kept current by inotify); a
//! call without one walks every such path here. Either way the walk is bounded ([`WALK_LIMIT`]
//! entries per declared path); a larger tree fails the call (rule 1: no protection that silently
//! covers only part of a path). A socket made under a write path after the sockets were found
//! (between building the call and the command's `connect`) is not masked in that call: on kernels
//! with Landlock ABI 9 (`LANDLOCK_ACCESS_FS_RESOLVE_UNIX`) the call's ruleset, which grants that
//! right only in writable places, refuses it elsewhere; below, that window remains (the next call
//! of the session masks it).

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::wire::error::{Layer, SandboxError};

/// The most directory entries walked under one declared path.
pub(crate) const WALK_LIMIT: usize = 200_000;

/// Where the empty file the masks are bound from lives while the tree is built (the fresh root's
/// tmpfs); it is unlinked once every mask is in place.
pub(crate) const MASK_SOURCE: &str = "/.chock-socket-mask";

pub(crate) fn too_large(root: &Path, limit: usize) -> SandboxError {
    SandboxError::Layer {
        layer: Layer::Filesystem,
        reason: format!(
            "the declared path {} holds more than {limit} entries; every one is checked for \
             host sockets before a call, and a larger tree cannot be checked",
            root.display()
        ),
        hint: format!(
            "declare a narrower path in [sandbox] (the directory the tool needs inside {}, \
             not the whole tree)",
            root.display()
        ),
    }
}

pub(crate) fn unreadable(dir: &Path, e: &std::io::Error) -> SandboxError {
    SandboxError::Layer {
        layer: Layer::Filesystem,
        reason: format!(
            "{} cannot be listed to check it for host sockets: {e}",
            dir.display()
        ),
        hint: "make the directory readable, or declare a path that does not contain it".into(),
    }
}

/// Every unix socket under `root` (or `root` itself), on `root`'s filesystem, without following
/// a symlink. Fails past [`WALK_LIMIT`] entries, and on a directory it cannot list but the call
/// could pass through (a socket in it would be reachable by name).
pub(crate) fn sockets_under(root: &Path) -> Result<Vec<PathBuf>, SandboxError> {
    walk(root, WALK_LIMIT)
}

pub(crate) fn walk(root: &Path, limit: usize) -> Result<Vec<PathBuf>, SandboxError> {
    let Ok(meta) = std::fs::symlink_metadata(root) else {
        return Ok(Vec::new());
    };
    if meta.file_type().is_socket() {
        return Ok(vec![root.to_path_buf()]);
    }
    if !meta.is_dir() {
        return Ok(Vec::new());
    }
    let dev = meta.dev();
    let mut found = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    let mut walked = 0usize;
    while let Some(dir) = pending.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                // Not listable but searchable: a name inside could still be connected to.
                if nix::unistd::access(&dir, nix::unistd::AccessFlags::X_OK).is_ok() {
                    return Err(unreadable(&dir, &e));
                }
                continue;
            }
        };
        for entry in entries {
            let entry = match entry {
                Ok(e) => e,
                Err(e) => return Err(unreadable(&dir, &e)),
            };
            walked += 1;
            if walked > limit {
                return Err(too_large(root, limit));
            }
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_socket() {
                found.push(entry.path());
            } else if kind.is_dir() {
                let path = entry.path();
                if std::fs::symlink_metadata(&path).is_ok_and(|m| m.dev() == dev) {
                    pending.push(path);
                }
            }
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    #[test]
    fn finds_sockets_without_following_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        let deep = root.join("a").join("b");
        std::fs::create_dir_all(&deep).unwrap();
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        let _l1 = UnixListener::bind(deep.join("one.sock")).unwrap();
        let _l2 = UnixListener::bind(outside.join("two.sock")).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("link")).unwrap();
        std::fs::write(root.join("file"), "").unwrap();
        let found = sockets_under(&root).unwrap();
        assert_eq!(found, vec![deep.join("one.sock")]);
        // A declared path that is itself a socket.
        assert_eq!(
            sockets_under(&deep.join("one.sock")).unwrap(),
            vec![deep.join("one.sock")]
        );
        assert!(
            sockets_under(&dir.path().join("missing"))
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn a_tree_past_the_limit_fails_naming_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("big");
        std::fs::create_dir_all(&root).unwrap();
        for i in 0..4 {
            let sub = root.join(format!("{i}"));
            std::fs::create_dir(&sub).unwrap();
            for j in 0..4 {
                std::fs::File::create(sub.join(format!("{j}"))).unwrap();
            }
        }
        // 4 directories + 16 files = 20 entries.
        assert!(walk(&root, 20).unwrap().is_empty());
        match walk(&root, 19) {
            Err(SandboxError::Layer {
                layer,
                reason,
                hint,
            }) => {
                assert_eq!(layer, Layer::Filesystem);
                assert!(reason.contains(&root.display().to_string()), "{reason}");
                assert!(hint.contains("narrower"), "{hint}");
            }
            other => panic!("expected a layer error, got {other:?}"),
        }
    }
}
