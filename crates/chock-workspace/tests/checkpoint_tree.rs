//! A checkpoint's tree is built from the base's own subtrees: the right tree for every kind of
//! change (checked against `git ls-tree` and `git fsck`), and only the directories on the way to a
//! change are read. One test per binary: the tree counter is process-wide.

mod common;

use common::{Env, in_overlay};

#[test]
fn every_kind_of_change_gives_the_tree_git_would_and_only_changed_directories_are_read() {
    let env = Env::git(&[
        ("top.txt", "top\n"),
        ("a/b/c/deep.txt", "deep\n"),
        ("a/b/keep.txt", "keep\n"),
        ("alone/only.txt", "only\n"),
        ("file-then-dir", "a file\n"),
        ("dir-then-file/inner.txt", "inner\n"),
        ("tool.sh", "#!/bin/sh\n"),
        ("caf\u{e9} tab\there.txt", "odd name\n"),
        ("with-sub/other.txt", "other\n"),
    ]);
    // A submodule's commit (a gitlink) in a directory the session rewrites: carried as it is.
    env.sh(
        "mkdir -p with-sub/module && cd with-sub/module && git init -q \
         && git -c user.name=t -c user.email=t@t commit -q --allow-empty -m m && cd ../.. \
         && git add with-sub/module 2>/dev/null && git commit -q -m gitlink",
    );
    // Many directories nobody touches: none of them may be read.
    for d in 0..150 {
        env.write(&format!("untouched/d{d}/f.txt"), "x\n");
    }
    env.sh("git add -A && git commit -q -m many");
    let ws = env.workspace("tree");
    in_overlay(
        &ws,
        "echo deeper > a/b/c/deep.txt && rm alone/only.txt && rm file-then-dir && mkdir file-then-dir \
         && echo now > file-then-dir/x.txt && rm -r dir-then-file && echo now > dir-then-file \
         && chmod +x tool.sh && ln -s top.txt link && mkdir -p n1/n2/n3 && echo new > n1/n2/n3/new.txt \
         && echo more >> 'caf\u{e9} tab\there.txt' && rm with-sub/other.txt",
    );
    let before = chock_workspace::git_trees_read();
    let commit = ws.checkpoint("call").unwrap().expect("a commit");
    let read = chock_workspace::git_trees_read() - before;

    let listing = env.sh(&format!("git ls-tree -r --full-tree {commit}"));
    let lines: Vec<String> = listing
        .lines()
        .filter(|l| !l.contains("\tuntouched/"))
        .map(|l| {
            let (head, path) = l.split_once('\t').unwrap();
            let mut parts = head.split(' ');
            format!("{} {}", parts.next().unwrap(), path)
        })
        .collect();
    assert_eq!(
        lines,
        [
            "100644 a/b/c/deep.txt",
            "100644 a/b/keep.txt",
            "100644 \"caf\\303\\251 tab\\there.txt\"",
            "100644 dir-then-file",
            "100644 file-then-dir/x.txt",
            "120000 link",
            "100644 n1/n2/n3/new.txt",
            "100755 tool.sh",
            "100644 top.txt",
            "160000 with-sub/module",
        ],
        "{listing}"
    );
    assert_eq!(
        env.sh(&format!("git show {commit}:a/b/c/deep.txt")),
        "deeper\n"
    );
    assert_eq!(env.sh(&format!("git show {commit}:link")), "top.txt");
    assert_eq!(
        env.sh(&format!("git ls-tree -r {commit} untouched | wc -l"))
            .trim(),
        "150"
    );
    // Well-formed objects in git's own order (fsck checks the sorting and the modes).
    env.sh(&format!("git fsck --no-dangling --strict {commit} 2>&1"));
    assert!(
        env.sh(&format!("git rev-parse {commit}:untouched"))
            == env.sh("git rev-parse HEAD:untouched"),
        "an untouched directory is the base's own tree object"
    );
    // The directories on the way: top, a, a/b, a/b/c, alone, file-then-dir, dir-then-file, n1…
    // (absent ones cost nothing) and with-sub — never the 150 untouched ones.
    assert!(
        read <= 10,
        "{read} trees read for a change in 8 directories"
    );

    // A second checkpoint of a further change reads nothing again (the trees are kept).
    in_overlay(&ws, "echo again > a/b/keep.txt");
    let before = chock_workspace::git_trees_read();
    let second = ws.checkpoint("call 2").unwrap().expect("a commit");
    assert_eq!(chock_workspace::git_trees_read() - before, 0);
    assert_eq!(
        env.sh(&format!("git show {second}:a/b/keep.txt")),
        "again\n"
    );
    assert_eq!(
        env.sh(&format!("git show {second}:a/b/c/deep.txt")),
        "deeper\n"
    );
}
