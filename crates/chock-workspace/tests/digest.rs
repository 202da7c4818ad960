//! The diff digest on real repositories and real overlay mounts: stable for the same content,
//! different for any change of content, mode or symlink target, and `plan_apply_expecting` refusing
//! a session that ran on after the review without writing anything.

mod common;

use chock_workspace::{Selection, WorkspaceError};
use common::{Env, in_overlay};

fn all() -> Selection {
    Selection::default()
}

fn lines(n: usize) -> String {
    (1..=n).map(|i| format!("line {i}\n")).collect()
}

/// A repository with a text file, a script and a link, and a session `id` that edits all three.
fn session(env: &Env, id: &str, script: &str) -> String {
    let ws = env.workspace(id);
    in_overlay(&ws, script);
    ws.diff().unwrap().digest(&all()).unwrap()
}

const EDIT: &str = "sed -i 's/^line 3$/three/; s/^line 25$/twenty-five/' a.txt && chmod +x run.sh \
                    && ln -sfn a.txt link && printf 'new\\n' > new.bin";

fn repo() -> Env {
    let env = Env::git(&[("a.txt", &lines(30)), ("run.sh", "echo run\n")]);
    env.sh("ln -s run.sh link && git add link && git commit -q -m link");
    env
}

#[test]
fn digest_is_stable_across_runs_and_sessions_with_the_same_content() {
    let env = repo();
    let first = session(&env, "s1", EDIT);
    assert_eq!(first.len(), 64);
    assert!(first.bytes().all(|b| b.is_ascii_hexdigit()));
    // The same session read again, and another session making the same changes.
    let ws = chock_workspace::Workspace::open(&env.session_dir("s1")).unwrap();
    assert_eq!(ws.diff().unwrap().digest(&all()).unwrap(), first);
    assert_eq!(session(&env, "s2", EDIT), first);
    // And a plan made from it carries the same digest.
    assert_eq!(
        ws.plan_apply(&all()).unwrap().digest(),
        Some(first.as_str())
    );
}

#[test]
fn digest_changes_with_content_mode_and_symlink_target() {
    let env = repo();
    let base = session(&env, "s0", EDIT);
    let content = session(&env, "s1", &format!("{EDIT} && printf 'new!\\n' > new.bin"));
    let mode = session(&env, "s2", &format!("{EDIT} && chmod +x new.bin"));
    let target = session(&env, "s3", &format!("{EDIT} && ln -sfn new.bin link"));
    let no_mode = session(&env, "s4", &format!("{EDIT} && chmod -x run.sh"));
    let all_digests = [&base, &content, &mode, &target, &no_mode];
    for (i, a) in all_digests.iter().enumerate() {
        for b in &all_digests[i + 1..] {
            assert_ne!(a, b, "every variant has its own digest");
        }
    }
}

#[test]
fn digest_of_a_selection_covers_only_what_it_takes() {
    let env = repo();
    let ws = env.workspace("s1");
    in_overlay(&ws, EDIT);
    let diff = ws.diff().unwrap();
    let file = diff.file("a.txt").unwrap();
    let hunk = file.hunks[0].id.clone();
    let one_hunk = Selection {
        files: vec![],
        hunks: vec![hunk.clone()],
    };
    let one_file = Selection {
        files: vec!["new.bin".into()],
        hunks: vec![],
    };
    let d_hunk = diff.digest(&one_hunk).unwrap();
    let d_file = diff.digest(&one_file).unwrap();
    assert_ne!(d_hunk, d_file);
    assert_ne!(d_hunk, diff.digest(&all()).unwrap());
    // The other hunk of a.txt changing does not move the digest of the first hunk's selection.
    in_overlay(&ws, "sed -i 's/^twenty-five$/25!/' a.txt");
    let again = ws.diff().unwrap();
    assert_eq!(again.digest(&one_hunk).unwrap(), d_hunk);
    assert_eq!(again.digest(&one_file).unwrap(), d_file);
    assert_ne!(again.digest(&all()).unwrap(), diff.digest(&all()).unwrap());
    // The shown selection is exactly the picked hunk.
    let shown = again.selected(&one_hunk).unwrap();
    assert_eq!(shown.files.len(), 1);
    assert_eq!(shown.files[0].hunks.len(), 1);
    assert_eq!(shown.files[0].hunks[0].id, hunk);
}

#[test]
fn expect_refuses_a_session_that_changed_after_the_review_and_writes_nothing() {
    let env = repo();
    let ws = env.workspace("s1");
    in_overlay(&ws, EDIT);
    let reviewed = ws.diff().unwrap().digest(&all()).unwrap();
    // The session runs on after the review: one more change lands in its upper directory.
    in_overlay(&ws, "printf 'unreviewed\\n' >> run.sh");
    let status = env.sh("git status --porcelain");
    match ws.plan_apply_expecting(&all(), Some(&reviewed)) {
        Err(e @ WorkspaceError::DigestMismatch { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("changed since the review"), "{msg}");
            assert!(msg.contains(&reviewed), "{msg}");
        }
        other => panic!("expected a digest mismatch, got {other:?}"),
    }
    assert_eq!(env.sh("git status --porcelain"), status);
    assert_eq!(env.read("a.txt"), lines(30));
    assert_eq!(env.read("run.sh"), "echo run\n");
    assert!(!env.exists("new.bin"));
    assert!(
        !env.session_dir("s1").join("applies").exists()
            || std::fs::read_dir(env.session_dir("s1").join("applies"))
                .unwrap()
                .flatten()
                .all(|e| e.file_name() == "blobs"),
        "no apply record was written"
    );
    // Reviewed again, the new digest applies, and exactly what it covers lands.
    let now = ws.diff().unwrap().digest(&all()).unwrap();
    assert_ne!(now, reviewed);
    let plan = ws.plan_apply_expecting(&all(), Some(&now)).unwrap();
    assert_eq!(plan.digest(), Some(now.as_str()));
    assert_eq!(plan.event().digest.as_deref(), Some(now.as_str()));
    plan.commit().unwrap();
    assert_eq!(env.read("run.sh"), "echo run\nunreviewed\n");
    assert!(env.read("a.txt").contains("three\n"));
    assert_eq!(env.read("new.bin"), "new\n");
    assert_eq!(env.mode("run.sh") & 0o111, 0o111);
}
