//! The git backing on real repositories and real overlay mounts: base, checkpoints, diff, apply,
//! undo, conflicts, and the round trip of every kind of change.

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;

use chock_workspace::{Backing, Selection, Status, WorkspaceError, plan_undo};
use common::{Env, in_overlay};

fn all() -> Selection {
    Selection::default()
}

fn lines(n: usize) -> String {
    (1..=n).map(|i| format!("line {i}\n")).collect()
}

#[test]
fn base_carries_uncommitted_and_untracked_but_not_ignored_and_moves_nothing() {
    let env = Env::git(&[("a.txt", "a\n"), (".gitignore", "target/\n")]);
    env.write("a.txt", "a changed, not committed\n");
    env.write("new.txt", "untracked\n");
    env.write("target/out", "ignored\n");
    env.sh("git add a.txt"); // staged in the user's index
    let head = env.sh("git rev-parse HEAD");
    let index_before = fs::read(env.project.join(".git/index")).unwrap();
    let inode_before =
        std::os::unix::fs::MetadataExt::ino(&fs::metadata(env.project.join(".git/index")).unwrap());
    let ws = env.workspace("s1");
    let base = ws.wait_base().unwrap().expect("git backing has a base");
    let Backing::Git { ref_name, .. } = ws.meta().backing.clone() else {
        panic!("git backing")
    };
    let Backing::Git { base: on_disk, .. } =
        chock_workspace::Workspace::open(&env.session_dir("s1"))
            .unwrap()
            .meta()
            .backing
            .clone()
    else {
        panic!()
    };
    assert_eq!(on_disk, Some(base.clone()));
    assert_eq!(ref_name, "refs/chock/s1");
    assert_eq!(
        env.sh(&format!("git show {base}:a.txt")),
        "a changed, not committed\n"
    );
    assert_eq!(env.sh(&format!("git show {base}:new.txt")), "untracked\n");
    assert!(
        env.sh(&format!("git ls-tree -r --name-only {base}"))
            .lines()
            .all(|l| !l.starts_with("target"))
    );
    assert_eq!(env.sh(&format!("git rev-parse {base}^")), head);
    assert_eq!(env.sh("git rev-parse HEAD"), head);
    assert_eq!(env.sh("git symbolic-ref HEAD"), "refs/heads/main\n");
    // The base's private index starts as a second name for the user's (not a copy): git wrote
    // its own next to it and renamed that over the private name, never into the user's file.
    assert_eq!(
        fs::read(env.project.join(".git/index")).unwrap(),
        index_before
    );
    assert_eq!(
        std::os::unix::fs::MetadataExt::ino(&fs::metadata(env.project.join(".git/index")).unwrap()),
        inode_before,
        "the user's index is the same file"
    );
    assert!(ws.diff().unwrap().is_empty());
}

#[test]
fn checkpoints_are_commits_on_the_session_ref_and_the_branch_does_not_move() {
    let env = Env::git(&[("a.txt", "a\n")]);
    let head = env.sh("git rev-parse HEAD");
    let ws = env.workspace("s2");
    in_overlay(&ws, "echo b > b.txt && echo A > a.txt");
    let first = ws.checkpoint("call 1").unwrap().expect("a commit");
    assert_eq!(
        ws.checkpoint("call 2").unwrap(),
        None,
        "nothing changed since"
    );
    in_overlay(&ws, "rm b.txt");
    let second = ws.checkpoint("call 3").unwrap().expect("a commit");
    assert_eq!(env.sh("git rev-parse refs/chock/s2").trim(), second);
    assert_eq!(env.sh(&format!("git rev-parse {second}^")).trim(), first);
    assert_eq!(env.sh(&format!("git show {first}:b.txt")), "b\n");
    assert_eq!(env.sh(&format!("git show {second}:a.txt")), "A\n");
    assert!(
        env.sh(&format!("git ls-tree --name-only {second}"))
            .lines()
            .all(|l| l != "b.txt")
    );
    assert_eq!(env.sh("git rev-parse HEAD"), head);
    assert_eq!(env.read("a.txt"), "a\n", "the real project is untouched");
    assert_eq!(env.sh("git status --porcelain"), "");
}

#[test]
fn build_output_the_ignore_rules_exclude_is_not_part_of_the_diff() {
    let env = Env::git(&[
        ("src.c", "int x;\n"),
        (".gitignore", "*.o\ntarget/\nforced.log\n"),
    ]);
    env.write("forced.log", "tracked although ignored\n");
    env.sh("git add -f forced.log && git commit -q -m forced");
    let ws = env.workspace("s3");
    in_overlay(
        &ws,
        "echo obj > src.o && echo 'int y;' >> src.c && mkdir -p .git/x && echo junk > .git/x/y \
         && mkdir -p target/debug && echo bin > target/debug/app && mkdir target/empty \
         && echo more >> forced.log",
    );
    let diff = ws.diff().unwrap();
    let paths: Vec<&str> = diff.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, vec!["forced.log", "src.c"]);
    let commit = ws.checkpoint("build").unwrap().expect("a commit");
    let tree = env.sh(&format!("git ls-tree -r --name-only {commit}"));
    assert!(
        !tree.contains("target") && !tree.contains("src.o"),
        "{tree}"
    );
}

#[test]
fn text_changes_round_trip_and_undo_reverts_exactly_them() {
    let env = Env::git(&[("a.txt", &lines(30)), ("gone.txt", "bye\n")]);
    let ws = env.workspace("s4");
    in_overlay(
        &ws,
        "sed -i 's/^line 3$/three/; s/^line 25$/twenty-five/' a.txt && rm gone.txt && printf 'new\\n' > n.txt",
    );
    let diff = ws.diff().unwrap();
    assert_eq!(diff.files.len(), 3);
    let a = diff.file("a.txt").unwrap();
    assert_eq!(a.hunks.len(), 2);
    let plan = ws.plan_apply(&all()).unwrap();
    let id = plan.apply_id.clone();
    assert_eq!(id, "s4.1");
    assert_ne!(plan.base_hash(), plan.result_hash());
    let (record, kept) = plan.commit().unwrap();
    assert!(kept.is_empty());
    assert_eq!(record.files.len(), 3);
    assert_eq!(
        env.read("a.txt"),
        lines(30)
            .replace("line 3\n", "three\n")
            .replace("line 25\n", "twenty-five\n")
    );
    assert!(!env.exists("gone.txt"));
    assert_eq!(env.read("n.txt"), "new\n");
    // The user edits elsewhere in the file; undo keeps that and reverts only the apply.
    let edited = env.read("a.txt").replace("line 14\n", "user's 14\n");
    env.write("a.txt", &edited);
    let undo = plan_undo(&env.sessions, &id).unwrap();
    undo.commit().unwrap();
    assert_eq!(
        env.read("a.txt"),
        lines(30).replace("line 14\n", "user's 14\n")
    );
    assert_eq!(env.read("gone.txt"), "bye\n");
    assert!(!env.exists("n.txt"));
    assert!(matches!(
        plan_undo(&env.sessions, &id),
        Err(WorkspaceError::AlreadyUndone(_))
    ));
}

#[test]
fn undo_refuses_when_the_user_edited_the_applied_lines_and_names_them() {
    let env = Env::git(&[("a.txt", &lines(10))]);
    let ws = env.workspace("s5");
    in_overlay(&ws, "sed -i 's/^line 5$/five/' a.txt");
    let (record, _) = ws.plan_apply(&all()).unwrap().commit().unwrap();
    env.write(
        "a.txt",
        &env.read("a.txt").replace("five\n", "FIVE by the user\n"),
    );
    let before = env.read("a.txt");
    let err = plan_undo(&env.sessions, &record.apply_id)
        .unwrap_err()
        .to_string();
    assert!(err.contains("a.txt lines 5-5"), "{err}");
    assert!(err.contains("edited since apply s5.1"), "{err}");
    assert_eq!(env.read("a.txt"), before, "nothing written");
}

#[test]
fn a_conflicting_hunk_is_refused_by_name_and_nothing_is_half_written() {
    let env = Env::git(&[("a.txt", &lines(40)), ("b.txt", "b\n")]);
    let ws = env.workspace("s6");
    in_overlay(
        &ws,
        "sed -i 's/^line 5$/five/; s/^line 30$/thirty/' a.txt && echo B > b.txt",
    );
    let diff = ws.diff().unwrap();
    let hunks: Vec<String> = diff
        .file("a.txt")
        .unwrap()
        .hunks
        .iter()
        .map(|h| h.id.clone())
        .collect();
    env.write(
        "a.txt",
        &lines(40).replace("line 30\n", "the user's thirty\n"),
    );
    let err = ws.plan_apply(&all()).unwrap_err();
    let WorkspaceError::Conflict { conflicts } = &err else {
        panic!("{err}")
    };
    assert_eq!(conflicts.len(), 1, "{conflicts:?}");
    assert!(
        conflicts[0].contains(&hunks[1]) && conflicts[0].contains("a.txt lines 30-30"),
        "{conflicts:?}"
    );
    assert_eq!(
        env.read("b.txt"),
        "b\n",
        "the other file was not written either"
    );
    // The hunk that does not clash can still be taken alone, around the user's edit.
    let plan = ws
        .plan_apply(&Selection {
            files: vec![],
            hunks: vec![hunks[0].clone()],
        })
        .unwrap();
    plan.commit().unwrap();
    assert_eq!(
        env.read("a.txt"),
        lines(40)
            .replace("line 5\n", "five\n")
            .replace("line 30\n", "the user's thirty\n")
    );
    assert_eq!(env.read("b.txt"), "b\n");
    let unknown = ws
        .plan_apply(&Selection {
            files: vec!["nope.txt".into()],
            hunks: vec![],
        })
        .unwrap_err();
    assert_eq!(
        unknown.to_string(),
        "file `nope.txt` is not in this session's diff (see `chock diff`)"
    );
}

#[test]
fn binary_files_round_trip() {
    let env = Env::new();
    env.sh("git init -q . && printf 'a\\000b\\001' > bin && git add -A && git -c user.name=t -c user.email=t@t commit -qm i");
    let ws = env.workspace("s7");
    in_overlay(
        &ws,
        "printf 'x\\000y\\377z' > bin && printf '\\000\\001' > new.bin",
    );
    let diff = ws.diff().unwrap();
    assert!(diff.files.iter().all(|f| f.is_binary()), "{:?}", diff.files);
    ws.plan_apply(&all()).unwrap().commit().unwrap();
    assert_eq!(fs::read(env.project.join("bin")).unwrap(), b"x\0y\xffz");
    assert_eq!(fs::read(env.project.join("new.bin")).unwrap(), b"\0\x01");
}

#[test]
fn symlinks_round_trip() {
    let env = Env::git(&[("t1", "one\n"), ("t2", "two\n")]);
    env.sh("ln -s t1 link && git add link && git -c user.name=t -c user.email=t@t commit -qm l");
    let ws = env.workspace("s8");
    in_overlay(&ws, "ln -sfn t2 link && ln -s ../outside newlink");
    let diff = ws.diff().unwrap();
    assert_eq!(diff.files.len(), 2);
    ws.checkpoint("links").unwrap().expect("commit");
    assert_eq!(
        env.sh("git cat-file -p refs/chock/s8:newlink"),
        "../outside"
    );
    ws.plan_apply(&all()).unwrap().commit().unwrap();
    assert_eq!(
        fs::read_link(env.project.join("link")).unwrap().to_str(),
        Some("t2")
    );
    assert_eq!(
        fs::read_link(env.project.join("newlink")).unwrap().to_str(),
        Some("../outside")
    );
}

#[test]
fn mode_changes_round_trip() {
    let env = Env::git(&[("run.sh", "echo hi\n")]);
    let ws = env.workspace("s9");
    in_overlay(&ws, "chmod +x run.sh");
    let diff = ws.diff().unwrap();
    assert_eq!(diff.files[0].mode_change(), Some((false, true)));
    ws.plan_apply(&all()).unwrap().commit().unwrap();
    assert_eq!(env.mode("run.sh") & 0o111, 0o111);
    assert_eq!(env.read("run.sh"), "echo hi\n");
    ws.checkpoint("mode").unwrap();
    assert!(
        env.sh("git ls-tree refs/chock/s9 run.sh")
            .starts_with("100755")
    );
}

#[test]
fn renames_round_trip() {
    let env = Env::git(&[("old/name.txt", "content\n")]);
    let ws = env.workspace("s10");
    in_overlay(&ws, "mkdir new && mv old/name.txt new/name.txt");
    let diff = ws.diff().unwrap();
    let renamed: Vec<_> = diff
        .files
        .iter()
        .filter(|f| f.status() == Status::Renamed)
        .collect();
    assert_eq!(renamed.len(), 1, "{:?}", diff.files);
    assert_eq!(renamed[0].old_path.as_deref(), Some("old/name.txt"));
    ws.plan_apply(&all()).unwrap().commit().unwrap();
    assert_eq!(env.read("new/name.txt"), "content\n");
    assert!(!env.exists("old/name.txt"));
}

#[test]
fn deletions_of_files_and_whole_directories_round_trip() {
    let env = Env::git(&[
        ("keep.txt", "k\n"),
        ("d/x.txt", "x\n"),
        ("d/sub/y.txt", "y\n"),
        ("f.txt", "f\n"),
    ]);
    let ws = env.workspace("s11");
    in_overlay(&ws, "rm -r d && rm f.txt");
    let diff = ws.diff().unwrap();
    assert!(
        diff.files.iter().all(|f| f.status() == Status::Deleted),
        "{:?}",
        diff.files
    );
    let (record, _) = ws.plan_apply(&all()).unwrap().commit().unwrap();
    assert!(!env.exists("d") && !env.exists("f.txt"));
    assert_eq!(env.read("keep.txt"), "k\n");
    plan_undo(&env.sessions, &record.apply_id)
        .unwrap()
        .commit()
        .unwrap();
    assert_eq!(env.read("d/sub/y.txt"), "y\n");
    assert_eq!(env.read("f.txt"), "f\n");
}

#[test]
fn empty_directories_round_trip() {
    let env = Env::git(&[("a.txt", "a\n")]);
    fs::create_dir(env.project.join("was-empty")).unwrap();
    let ws = env.workspace("s12");
    in_overlay(&ws, "mkdir -p empty/inner && rmdir was-empty");
    let diff = ws.diff().unwrap();
    let kinds: Vec<(String, Status)> = diff
        .files
        .iter()
        .map(|f| (f.path.clone(), f.status()))
        .collect();
    assert_eq!(
        kinds,
        vec![
            ("empty/inner".into(), Status::Added),
            ("was-empty".into(), Status::Deleted)
        ]
    );
    ws.plan_apply(&all()).unwrap().commit().unwrap();
    assert!(env.project.join("empty/inner").is_dir());
    assert!(!env.exists("was-empty"));
}

#[test]
fn opaque_directories_replace_what_was_there() {
    let env = Env::git(&[("d/a", "a\n"), ("d/b", "b\n")]);
    let ws = env.workspace("s13");
    in_overlay(&ws, "rm -r d && mkdir d && echo fresh > d/c");
    let diff = ws.diff().unwrap();
    let kinds: Vec<(String, char)> = diff
        .files
        .iter()
        .map(|f| (f.path.clone(), f.status().letter()))
        .collect();
    assert_eq!(
        kinds,
        vec![
            ("d/a".into(), 'D'),
            ("d/b".into(), 'D'),
            ("d/c".into(), 'A')
        ]
    );
}

#[test]
fn a_file_already_applied_is_reported_and_not_written_twice() {
    let env = Env::git(&[("a.txt", "a\n")]);
    let ws = env.workspace("s14");
    in_overlay(&ws, "echo b > a.txt");
    env.write("a.txt", "b\n");
    let plan = ws.plan_apply(&all()).unwrap();
    assert!(plan.is_empty());
    assert_eq!(plan.already.len(), 1);
}

#[test]
fn the_project_mode_bits_other_than_exec_are_kept() {
    let env = Env::git(&[("a.txt", "a\n")]);
    fs::set_permissions(env.project.join("a.txt"), fs::Permissions::from_mode(0o600)).unwrap();
    let ws = env.workspace("s15");
    in_overlay(&ws, "echo b > a.txt");
    ws.plan_apply(&all()).unwrap().commit().unwrap();
    assert_eq!(env.mode("a.txt"), 0o600);
}

#[test]
fn a_write_that_cannot_be_staged_leaves_the_project_and_the_records_untouched() {
    let env = Env::git(&[("a.txt", "a\n")]);
    let ws = env.workspace("s16");
    in_overlay(&ws, "echo A > a.txt && mkdir dir && echo n > dir/new.txt");
    // Named while planning, when it is already there …
    env.write("dir", "the user made a file here\n");
    let err = ws.plan_apply(&all()).unwrap_err();
    assert!(err.to_string().contains("dir is not a directory"), "{err}");
    // … and when it appears between the check and the write.
    fs::remove_file(env.project.join("dir")).unwrap();
    let plan = ws.plan_apply(&all()).unwrap();
    env.write("dir", "the user made a file here\n");
    let err = plan.commit().unwrap_err();
    assert!(err.to_string().contains("dir is not a directory"), "{err}");
    assert_eq!(env.read("a.txt"), "a\n");
    assert_eq!(env.read("dir"), "the user made a file here\n");
    assert!(!env.session_dir("s16").join("applies/s16.1.json").exists());
    let leftovers: Vec<_> = fs::read_dir(&env.project)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(".chock-stage"))
        .collect();
    assert!(leftovers.is_empty());
}

#[test]
fn a_project_in_a_subdirectory_of_a_repository_uses_its_prefix() {
    let env = Env::git(&[("top.txt", "top\n"), ("sub/a.txt", "a\n")]);
    let sub = env.project.join("sub");
    let dir = env.session_dir("s17");
    fs::create_dir_all(&dir).unwrap();
    let ws = chock_workspace::Workspace::create(&sub, &dir, "s17").unwrap();
    let Backing::Git { prefix, .. } = ws.backing().clone() else {
        panic!("git backing")
    };
    assert_eq!(prefix, "sub/");
    in_overlay(&ws, "echo A > a.txt && echo n > new.txt");
    let paths: Vec<String> = ws
        .diff()
        .unwrap()
        .files
        .iter()
        .map(|f| f.path.clone())
        .collect();
    assert_eq!(paths, vec!["a.txt", "new.txt"]);
    let commit = ws.checkpoint("sub").unwrap().expect("a commit");
    assert_eq!(env.sh(&format!("git show {commit}:sub/a.txt")), "A\n");
    assert_eq!(env.sh(&format!("git show {commit}:top.txt")), "top\n");
    ws.plan_apply(&all()).unwrap().commit().unwrap();
    assert_eq!(env.read("sub/a.txt"), "A\n");
    assert_eq!(env.read("sub/new.txt"), "n\n");
}

#[test]
fn a_file_that_became_a_directory_and_a_directory_that_became_a_file_round_trip() {
    let env = Env::git(&[("f", "was a file\n"), ("d/x", "x\n"), ("d/y/z", "z\n")]);
    let ws = env.workspace("s18");
    in_overlay(
        &ws,
        "rm f && mkdir f && echo inside > f/inner && rm -r d && echo now a file > d",
    );
    let diff = ws.diff().unwrap();
    let got: Vec<(String, char)> = diff
        .files
        .iter()
        .map(|f| (f.path.clone(), f.status().letter()))
        .collect();
    assert_eq!(
        got,
        vec![
            ("d".into(), 'T'),
            ("d/x".into(), 'D'),
            ("d/y".into(), 'D'),
            ("d/y/z".into(), 'D'),
            ("f".into(), 'T'),
            ("f/inner".into(), 'A'),
        ]
    );
    let (record, _) = ws.plan_apply(&all()).unwrap().commit().unwrap();
    assert_eq!(env.read("d"), "now a file\n");
    assert_eq!(env.read("f/inner"), "inside\n");
    plan_undo(&env.sessions, &record.apply_id)
        .unwrap()
        .commit()
        .unwrap();
    assert_eq!(env.read("f"), "was a file\n");
    assert_eq!(env.read("d/y/z"), "z\n");
}
