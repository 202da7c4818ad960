//! The index against the real kernel: host sockets bound, directories made, renamed, removed and
//! swapped after the index was built, each seen at the next look (the walk is the reference).

use super::*;
use std::os::unix::net::UnixListener;

fn sorted(mut v: Vec<PathBuf>) -> Vec<PathBuf> {
    v.sort();
    v
}

/// What the index says about `root` now, checked against a fresh walk of the same tree.
fn look(index: &SocketIndex, root: &Path) -> Vec<PathBuf> {
    let found = sorted(index.sockets(&[root.to_path_buf()]).unwrap().remove(0));
    let walked = sorted(walk(root, WALK_LIMIT).unwrap());
    assert_eq!(found, walked, "the index and a fresh walk disagree");
    found
}

/// How many watches the index holds (one per directory it knows).
fn watches(index: &SocketIndex) -> usize {
    index.lock().watcher.as_ref().map_or(0, |w| w.wds.len())
}

fn tree() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap().join("root");
    std::fs::create_dir_all(root.join("a").join("b")).unwrap();
    std::fs::write(root.join("a").join("file"), "").unwrap();
    (dir, root)
}

#[test]
fn a_socket_bound_after_the_index_was_built_is_found() {
    let (_dir, root) = tree();
    let index = SocketIndex::new();
    assert!(index.watching(), "{:?}", index.degraded());
    let _first = UnixListener::bind(root.join("a").join("first.sock")).unwrap();
    assert_eq!(look(&index, &root), vec![root.join("a/first.sock")]);
    // Bound after the walk: only an event says it is there.
    let _late = UnixListener::bind(root.join("a").join("b").join("late.sock")).unwrap();
    assert_eq!(
        look(&index, &root),
        vec![root.join("a/b/late.sock"), root.join("a/first.sock")]
    );
    // Removed: gone from the next look.
    std::fs::remove_file(root.join("a/first.sock")).unwrap();
    assert_eq!(look(&index, &root), vec![root.join("a/b/late.sock")]);
}

#[test]
fn a_socket_in_a_directory_made_later_is_found() {
    let (_dir, root) = tree();
    let index = SocketIndex::new();
    assert!(look(&index, &root).is_empty());
    // Three levels made at once, the socket at the bottom, before the next look.
    let deep = root.join("new").join("x").join("y");
    std::fs::create_dir_all(&deep).unwrap();
    let _l = UnixListener::bind(deep.join("s.sock")).unwrap();
    assert_eq!(look(&index, &root), vec![deep.join("s.sock")]);
    // The new directory is watched itself: a second socket in it is found too.
    let _m = UnixListener::bind(root.join("new").join("t.sock")).unwrap();
    assert_eq!(
        look(&index, &root),
        vec![root.join("new/t.sock"), deep.join("s.sock")]
    );
}

#[test]
fn renamed_and_replaced_directories_are_followed() {
    let (dir, root) = tree();
    let index = SocketIndex::new();
    let _l = UnixListener::bind(root.join("a/b/s.sock")).unwrap();
    assert_eq!(look(&index, &root), vec![root.join("a/b/s.sock")]);
    // Renamed inside the tree: the socket is at its new path, and the moved directory is still
    // watched under its new name.
    std::fs::rename(root.join("a"), root.join("c")).unwrap();
    assert_eq!(look(&index, &root), vec![root.join("c/b/s.sock")]);
    let _m = UnixListener::bind(root.join("c/b/t.sock")).unwrap();
    assert_eq!(
        look(&index, &root),
        vec![root.join("c/b/s.sock"), root.join("c/b/t.sock")]
    );
    // Moved out of the tree: nothing of it is left.
    let outside = dir.path().join("outside");
    std::fs::rename(root.join("c"), &outside).unwrap();
    assert!(look(&index, &root).is_empty());
    assert_eq!(watches(&index), 1, "only the root is left to watch");
    let _n = UnixListener::bind(outside.join("b/u.sock")).unwrap();
    assert!(look(&index, &root).is_empty());
    // A directory swapped for a symlink to one that holds a socket: not followed.
    std::fs::create_dir(root.join("d")).unwrap();
    assert!(look(&index, &root).is_empty());
    std::fs::remove_dir(root.join("d")).unwrap();
    std::os::unix::fs::symlink(outside.join("b"), root.join("d")).unwrap();
    assert!(look(&index, &root).is_empty());
    // Removed and made again under the same name (its inode number may come back).
    std::fs::create_dir(root.join("e")).unwrap();
    assert!(look(&index, &root).is_empty());
    std::fs::remove_dir(root.join("e")).unwrap();
    std::fs::create_dir(root.join("e")).unwrap();
    assert!(look(&index, &root).is_empty());
    let _o = UnixListener::bind(root.join("e/v.sock")).unwrap();
    assert_eq!(look(&index, &root), vec![root.join("e/v.sock")]);
}

#[test]
fn the_declared_directory_itself_replaced_is_walked_again() {
    let (dir, root) = tree();
    let index = SocketIndex::new();
    assert!(look(&index, &root).is_empty());
    std::fs::rename(&root, dir.path().join("old")).unwrap();
    std::fs::create_dir_all(root.join("z")).unwrap();
    let _l = UnixListener::bind(root.join("z/s.sock")).unwrap();
    assert_eq!(look(&index, &root), vec![root.join("z/s.sock")]);
    assert_eq!(watches(&index), 2);
    // Removed altogether: nothing (the mount builder then refuses the missing path itself), and
    // no watch is left behind.
    std::fs::remove_dir_all(&root).unwrap();
    assert!(look(&index, &root).is_empty());
    assert_eq!(watches(&index), 0);
}

#[test]
fn a_queue_overflow_walks_again() {
    let (_dir, root) = tree();
    let index = SocketIndex::new();
    assert!(look(&index, &root).is_empty());
    // More events than the default queue holds (16384): some are lost, the index must notice.
    let queued: usize = std::fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(16384);
    let many = root.join("many");
    std::fs::create_dir(&many).unwrap();
    assert!(look(&index, &root).is_empty());
    for i in 0..=queued {
        std::fs::File::create(many.join(i.to_string())).unwrap();
    }
    // The queue is full: this socket's event is among the lost ones.
    let _l = UnixListener::bind(root.join("a/b/s.sock")).unwrap();
    assert_eq!(look(&index, &root), vec![root.join("a/b/s.sock")]);
    assert!(index.watching());
    // And it is kept current again after the new walk.
    let _m = UnixListener::bind(many.join("t.sock")).unwrap();
    assert_eq!(
        look(&index, &root),
        vec![root.join("a/b/s.sock"), many.join("t.sock")]
    );
}

#[test]
fn a_tree_that_grows_past_the_limit_fails_naming_the_path() {
    let (_dir, root) = tree();
    // a, a/b, a/file: 3 entries.
    let index = SocketIndex::with_limit(5);
    assert!(index.sockets(std::slice::from_ref(&root)).unwrap()[0].is_empty());
    for i in 0..3 {
        std::fs::write(root.join("a/b").join(i.to_string()), "").unwrap();
    }
    match index.sockets(std::slice::from_ref(&root)) {
        Err(SandboxError::Layer { reason, hint, .. }) => {
            assert!(reason.contains(&root.display().to_string()), "{reason}");
            assert!(hint.contains("narrower"), "{hint}");
        }
        other => panic!("expected a layer error, got {other:?}"),
    }
    // Back under the limit: checked again, and fine.
    std::fs::remove_file(root.join("a/b/0")).unwrap();
    assert!(index.sockets(std::slice::from_ref(&root)).unwrap()[0].is_empty());
}

#[test]
fn nested_and_non_directory_roots() {
    let (dir, root) = tree();
    let index = SocketIndex::new();
    let inner = root.join("a");
    let sock = dir.path().canonicalize().unwrap().join("lone.sock");
    let _l = UnixListener::bind(&sock).unwrap();
    let roots = vec![
        root.clone(),
        inner.clone(),
        sock.clone(),
        root.join("missing"),
    ];
    assert_eq!(
        index.sockets(&roots).unwrap(),
        vec![vec![], vec![], vec![sock.clone()], vec![]]
    );
    // One directory under two declared paths shares one watch; both see the socket.
    let _m = UnixListener::bind(inner.join("b/s.sock")).unwrap();
    let found = index.sockets(&roots).unwrap();
    assert_eq!(found[0], vec![inner.join("b/s.sock")]);
    assert_eq!(found[1], vec![inner.join("b/s.sock")]);
    // Renamed: each tree forgets the old name and walks the new one, and the one watch they
    // share (the same inode) must survive the first tree letting go of the old name.
    std::fs::rename(inner.join("b"), inner.join("b2")).unwrap();
    let found = index.sockets(&roots).unwrap();
    assert_eq!(found[0], vec![inner.join("b2/s.sock")]);
    assert_eq!(found[1], vec![inner.join("b2/s.sock")]);
    let _n = UnixListener::bind(inner.join("b2/t.sock")).unwrap();
    let want = vec![inner.join("b2/s.sock"), inner.join("b2/t.sock")];
    let found = index.sockets(&roots).unwrap();
    assert_eq!(sorted(found[0].clone()), want);
    assert_eq!(sorted(found[1].clone()), want);
    assert_eq!(look(&index, &root), want);
}
