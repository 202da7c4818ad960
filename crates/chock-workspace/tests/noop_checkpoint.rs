//! A checkpoint after a tool call that changed nothing costs nothing: no git runs, no commit. Any
//! change since (content, deletion, mode, a symlink's target) is still a new commit.

mod common;

use chock_workspace::git_processes_started;
use common::*;

/// A checkpoint that must be a new commit, then one right after that must be `None` and must start
/// no git process.
fn commit_then_nothing(ws: &chock_workspace::Workspace, label: &str) -> String {
    let commit = ws.checkpoint(label).unwrap().expect("a new commit");
    let before = git_processes_started();
    assert_eq!(
        ws.checkpoint("again").unwrap(),
        None,
        "nothing changed since"
    );
    assert_eq!(
        git_processes_started(),
        before,
        "a no-op checkpoint runs no git"
    );
    commit
}

#[test]
fn a_checkpoint_with_nothing_new_runs_no_git_and_every_kind_of_change_is_recorded() {
    let env = Env::git(&[("a.txt", "a\n"), ("b.txt", "b\n"), ("run.sh", "true\n")]);
    env.sh("ln -s a.txt link");
    env.sh("git add -A && git commit -q -m link");
    let ws = env.workspace("n1");

    // Fresh from the base, nothing changed: no commit and, once the base is listed, no git.
    assert_eq!(ws.checkpoint("first").unwrap(), None);
    let before = git_processes_started();
    assert_eq!(ws.checkpoint("second").unwrap(), None);
    assert_eq!(git_processes_started(), before);

    in_overlay(&ws, "echo A > a.txt");
    let mut prev = commit_then_nothing(&ws, "content");
    let mut step = |script: &str, label: &str, check: &dyn Fn(&str)| {
        in_overlay(&ws, script);
        let commit = commit_then_nothing(&ws, label);
        assert_eq!(
            env.sh(&format!("git rev-parse {commit}^")).trim(),
            prev,
            "{label}: parent is the previous checkpoint"
        );
        check(&commit);
        prev = commit;
    };
    step("echo B > a.txt", "one byte", &|c| {
        assert_eq!(env.sh(&format!("git show {c}:a.txt")), "B\n");
    });
    step("rm b.txt", "deletion", &|c| {
        assert!(
            !env.sh(&format!("git ls-tree --name-only {c}"))
                .contains("b.txt")
        );
    });
    step("chmod +x run.sh", "mode", &|c| {
        assert!(
            env.sh(&format!("git ls-tree {c} run.sh"))
                .starts_with("100755")
        );
    });
    step("ln -sfn b.txt link", "swapped symlink", &|c| {
        assert_eq!(env.sh(&format!("git cat-file -p {c}:link")), "b.txt");
    });
    step("echo a > a.txt", "back to the base's bytes", &|c| {
        assert_eq!(env.sh(&format!("git show {c}:a.txt")), "a\n");
    });
}

#[test]
fn a_ref_moved_by_someone_else_is_not_skipped() {
    let env = Env::git(&[("a.txt", "a\n")]);
    let ws = env.workspace("n2");
    in_overlay(&ws, "echo A > a.txt");
    let first = ws.checkpoint("one").unwrap().expect("a commit");
    // Another process moves the session ref (say to the base again): the same change set is
    // then no longer what the ref holds, so the next checkpoint records it again.
    env.sh(&format!("git update-ref refs/chock/n2 {first}^"));
    let again = ws.checkpoint("two").unwrap().expect("a commit again");
    assert_ne!(again, first);
    assert_eq!(env.sh(&format!("git show {again}:a.txt")), "A\n");
    // And a second process's view of the same workspace agrees.
    let other = chock_workspace::Workspace::open(&env.session_dir("n2")).unwrap();
    assert_eq!(other.checkpoint("three").unwrap(), None);
}
