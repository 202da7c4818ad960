//! The overlay backing (a project with no git) on real overlay mounts: diff, adopt, and the
//! round trip of every kind of change through adopt; list and rm.

mod common;

use std::fs;

use chock_workspace::{Backing, Selection, Status, WorkspaceError, list, remove};
use common::{Env, in_overlay};

#[test]
fn a_project_without_git_gets_the_overlay_backing_and_apply_points_to_adopt() {
    let env = Env::new();
    env.write("a.txt", "a\n");
    let ws = env.workspace("o1");
    assert_eq!(ws.backing(), &Backing::Overlay);
    assert_eq!(ws.wait_base().unwrap(), None);
    assert_eq!(ws.checkpoint("x").unwrap(), None);
    let err = ws.plan_apply(&Selection::default()).unwrap_err();
    assert!(matches!(err, WorkspaceError::WrongBacking(_)));
    assert!(
        err.to_string().contains("chock workspace adopt o1"),
        "{err}"
    );
}

#[test]
fn every_kind_of_change_is_adopted_aside_and_nothing_of_the_user_is_touched() {
    let env = Env::new();
    env.write("text.txt", "one\ntwo\n");
    env.write("gone.txt", "bye\n");
    env.write("dir/x", "x\n");
    env.write("moved.txt", "moving\n");
    env.write("run.sh", "echo\n");
    env.sh("printf 'a\\000b' > bin && ln -s text.txt link");
    let ws = env.workspace("o2");
    in_overlay(
        &ws,
        "echo three >> text.txt && rm gone.txt && rm -r dir && mv moved.txt renamed.txt && chmod +x run.sh \
         && printf 'z\\000z' > bin && ln -sfn gone.txt link && mkdir -p empty/dir",
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
            ("bin".into(), 'M'),
            ("dir".into(), 'D'),
            ("dir/x".into(), 'D'),
            ("empty/dir".into(), 'A'),
            ("gone.txt".into(), 'D'),
            ("link".into(), 'M'),
            ("renamed.txt".into(), 'R'),
            ("run.sh".into(), 'M'),
            ("text.txt".into(), 'M'),
        ]
    );
    let plan = ws.plan_adopt().unwrap();
    let counts = plan.commit().unwrap();
    assert_eq!((counts.files, counts.dirs, counts.deleted), (5, 1, 4));
    let adopted = env.project.join(".chock-adopted/o2");
    assert_eq!(
        fs::read_to_string(adopted.join("files/text.txt")).unwrap(),
        "one\ntwo\nthree\n"
    );
    assert_eq!(fs::read(adopted.join("files/bin")).unwrap(), b"z\0z");
    assert_eq!(
        fs::read_link(adopted.join("files/link")).unwrap().to_str(),
        Some("gone.txt")
    );
    assert!(adopted.join("files/empty/dir").is_dir());
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        fs::metadata(adopted.join("files/run.sh"))
            .unwrap()
            .permissions()
            .mode()
            & 0o111,
        0o111
    );
    assert_eq!(
        fs::read_to_string(adopted.join("deleted")).unwrap(),
        "dir\ndir/x\ngone.txt\nmoved.txt\n"
    );
    // Nothing of the user's was written or deleted.
    assert_eq!(env.read("text.txt"), "one\ntwo\n");
    assert_eq!(env.read("gone.txt"), "bye\n");
    assert_eq!(env.read("moved.txt"), "moving\n");
    assert_eq!(env.read("dir/x"), "x\n");
    // A second adopt would overwrite: refused by name, nothing written.
    let err = ws.plan_adopt().unwrap_err();
    assert!(
        matches!(err, WorkspaceError::WouldOverwrite(ref p) if p.starts_with(&adopted)),
        "{err}"
    );
}

#[test]
fn the_overlay_diff_has_hunks_with_stable_ids() {
    let env = Env::new();
    env.write(
        "a.txt",
        &(1..=30).map(|i| format!("{i}\n")).collect::<String>(),
    );
    let ws = env.workspace("o3");
    in_overlay(&ws, "sed -i 's/^4$/four/' a.txt");
    let first = ws.diff().unwrap();
    in_overlay(&ws, "sed -i 's/^20$/twenty/' a.txt");
    let second = ws.diff().unwrap();
    assert_eq!(second.files[0].hunks.len(), 2);
    assert_eq!(first.files[0].hunks[0].id, second.files[0].hunks[0].id);
    assert_eq!(first.files[0].id, chock_workspace::file_id("a.txt"));
    assert_eq!(second.files[0].status(), Status::Modified);
}

#[test]
fn workspaces_are_kept_until_removed_and_rm_removes_the_git_ref_too() {
    let env = Env::git(&[("a", "a\n")]);
    let ws = env.workspace("20261130T000000Z-aaaaaa");
    in_overlay(&ws, "echo b > a");
    ws.checkpoint("c").unwrap();
    let other = Env::new();
    let _ = fs::create_dir_all(env.sessions.join("20261130T000001Z-bbbbbb"));
    let ws2 = chock_workspace::Workspace::create(
        &other.project,
        &env.sessions.join("20261130T000001Z-bbbbbb"),
        "20261130T000001Z-bbbbbb",
    )
    .unwrap();
    in_overlay(&ws2, "echo x > y");
    fs::create_dir_all(env.sessions.join("no-workspace")).unwrap();
    let listed = list(&env.sessions).unwrap();
    let ids: Vec<String> = listed
        .iter()
        .map(|l| l.meta.as_ref().unwrap().session.clone())
        .collect();
    assert_eq!(
        ids,
        vec!["20261130T000000Z-aaaaaa", "20261130T000001Z-bbbbbb"]
    );
    remove(&env.sessions.join("20261130T000001Z-bbbbbb")).unwrap();
    remove(&env.sessions.join("20261130T000000Z-aaaaaa")).unwrap();
    assert!(list(&env.sessions).unwrap().is_empty());
    assert!(env.sh("git for-each-ref refs/chock").is_empty());
    assert!(
        env.session_dir("20261130T000000Z-aaaaaa").is_dir(),
        "only the workspace goes, not the session"
    );
    assert!(matches!(
        remove(&env.sessions.join("20261130T000000Z-aaaaaa")),
        Err(WorkspaceError::Missing(_))
    ));
}
