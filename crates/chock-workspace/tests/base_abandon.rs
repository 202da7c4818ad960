//! The git base is waited for only by what needs it. A workspace that never changed ends without
//! waiting for its `git add -A` (the job is abandoned, its git process killed, `meta.json` keeps
//! `base: null`, and the next open records the base); a workspace that changed waits for it, so
//! its changes are measured against the state before they were made.
//!
//! `git add` is slowed by a wrapper first on `PATH` (`slow_git`; this file is its own test
//! process, so the changed `PATH` reaches no other test).

mod common;
mod slow_git;

use std::time::Duration;

use chock_workspace::Workspace;
use common::Env;
use slow_git::{MARK, base_of, marked_sleeps, marked_sleeps_nice, set_env, slow_git_add, wait_for};

#[test]
fn an_unchanged_workspace_never_waits_for_its_base_and_a_changed_one_always_does() {
    let env = Env::git(&[("a.txt", "one\n")]);
    slow_git_add(&env.tmp.path().join("bin"));

    // Unchanged: a checkpoint does not wait, and the drop abandons the job (its git killed).
    set_env("SLOW_ADD", MARK);
    let ws = Workspace::create(&env.project, &env.sessions.join("s1"), "s1").unwrap();
    let dir = ws.session_dir().to_path_buf();
    wait_for("the slowed git add to start", || marked_sleeps() == 1);
    assert_eq!(
        marked_sleeps_nice(),
        [19],
        "the base's git runs at the lowest priority: the session's calls come first"
    );
    assert_eq!(ws.checkpoint("nothing happened").unwrap(), None);
    assert!(ws.diff().unwrap().files.is_empty());
    assert_eq!(
        marked_sleeps(),
        1,
        "neither the checkpoint nor the diff waited for the base"
    );
    let dropping = std::time::Instant::now();
    drop(ws);
    assert_eq!(marked_sleeps(), 0, "the abandoned job's git was killed");
    assert!(
        dropping.elapsed() < Duration::from_secs(20),
        "the drop waited for the slowed add instead of killing it"
    );
    assert_eq!(base_of(&dir), None, "an abandoned base is not recorded");

    // The next open records it then.
    set_env("SLOW_ADD", "");
    let reopened = Workspace::open(&dir).unwrap();
    let base = reopened.wait_base().unwrap().expect("recorded on reopen");
    assert_eq!(base_of(&dir).as_deref(), Some(base.as_str()));
    drop(reopened);

    // Changed: the drop waits for the base, which is recorded.
    set_env("SLOW_ADD", "0.3");
    let ws = Workspace::create(&env.project, &env.sessions.join("s2"), "s2").unwrap();
    let dir = ws.session_dir().to_path_buf();
    std::fs::write(ws.upper().join("new.txt"), "made\n").unwrap();
    drop(ws);
    assert!(
        base_of(&dir).is_some(),
        "a changed workspace's base was waited for"
    );
    let diff = Workspace::open(&dir).unwrap().diff().unwrap();
    assert_eq!(diff.files.len(), 1);
}
