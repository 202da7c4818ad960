//! A call pauses the workspace's background git base while it is worked on (the base's git is
//! stopped, not only at a lower priority), several calls hold it together, a question to a person
//! lets it run while they think, and whoever needs the base resumes it whatever calls still hold
//! it. A paused base that nobody will need is still
//! killed when the workspace is dropped.
//!
//! `git add` is slowed by a wrapper first on `PATH` (`slow_git`; this file is its own test
//! process, so the changed `PATH` reaches no other test).

mod common;
mod slow_git;

use std::sync::mpsc;
use std::time::Duration;

use chock_workspace::Workspace;
use common::Env;
use slow_git::{
    MARK, base_of, marked_sleeps, marked_sleeps_state, set_env, slow_git_add, wait_for,
};

#[test]
fn a_call_pauses_the_base_and_whoever_needs_the_base_resumes_it() {
    let env = Env::git(&[("a.txt", "one\n")]);
    slow_git_add(&env.tmp.path().join("bin"));

    // Two calls at once: stopped from the first hold until the last is released.
    set_env("SLOW_ADD", MARK);
    let ws = Workspace::create(&env.project, &env.sessions.join("s1"), "s1").unwrap();
    wait_for("the slowed git add to start", || marked_sleeps() == 1);
    assert_ne!(marked_sleeps_state(), ['T'], "nothing holds it yet");
    let first = ws.pause_background();
    let second = ws.pause_background();
    wait_for("the base's git to stop", || marked_sleeps_state() == ['T']);
    // A question open: the base runs while the person thinks, and is paused again after.
    let asking = ws.lend_background();
    wait_for("the base's git to go on while a person is asked", || {
        marked_sleeps_state().first().is_some_and(|s| *s != 'T')
    });
    drop(asking);
    wait_for("the base's git to stop again", || {
        marked_sleeps_state() == ['T']
    });
    drop(first);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        marked_sleeps_state(),
        ['T'],
        "still paused while the second call runs"
    );
    drop(second);
    wait_for("the base's git to go on", || {
        marked_sleeps_state().first().is_some_and(|s| *s != 'T')
    });

    // Dropped while paused and unchanged: the stopped git is killed, not left behind.
    let pause = ws.pause_background();
    wait_for("the base's git to stop", || marked_sleeps_state() == ['T']);
    drop(ws);
    assert_eq!(
        marked_sleeps(),
        0,
        "the paused, abandoned job's git was killed"
    );
    drop(pause);

    // Needed while a call holds it: a checkpoint of a changed workspace resumes it and finishes.
    set_env("SLOW_ADD", "0.3");
    let ws = Workspace::create(&env.project, &env.sessions.join("s2"), "s2").unwrap();
    let dir = ws.session_dir().to_path_buf();
    let pause = ws.pause_background();
    std::fs::write(ws.upper().join("new.txt"), "made\n").unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::scope(|s| {
        s.spawn(|| tx.send(ws.checkpoint("made new.txt").map(|c| c.is_some())));
        let done = rx.recv_timeout(Duration::from_secs(30));
        // Released in any case, so a failing assertion does not leave the thread waiting.
        drop(pause);
        assert!(
            matches!(done, Ok(Ok(true))),
            "the checkpoint finished with the base paused by a running call: {done:?}"
        );
    });
    drop(ws);
    assert!(base_of(&dir).is_some(), "the base was recorded");
}
