//! A microVM session with `[sandbox] snapshots = true`: its overlay workspace is mounted by the
//! guest's monitor and shown to the guest merged (a deletion is a whiteout in the session's upper
//! directory, which its diff reads); after a completed turn its warm guest is snapshotted into
//! the session's directory, and a fork at that turn starts its guest from the snapshot (the same
//! boot id: no kernel booted) showing the fork's workspace, while the parent's guest still shows
//! the parent's. A fork at an earlier turn boots cold.

#[path = "support/guest.rs"]
mod guest;
mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use chock_log::SessionHeader;
use chock_protocol::log::{TurnEnd, TurnEndReason, TurnStart, TurnState};
use chock_session::{CallOptions, CallOutcome, NoApprover, Session, SessionOptions};

/// Runs `script` in the session: its stdout, after checking it exited 0.
fn run(session: &Session, script: &str) -> String {
    let argv = vec!["sh".to_owned(), "-c".to_owned(), script.to_owned()];
    let result =
        support::confined_call(session, &argv, &CallOptions::default(), &NoApprover).expect("call");
    let CallOutcome::Ran {
        stdout,
        stderr,
        outcome,
        ..
    } = &result.outcome
    else {
        panic!("the call did not run: {:?}", result.outcome);
    };
    let (stdout, stderr) = (
        String::from_utf8_lossy(stdout),
        String::from_utf8_lossy(stderr),
    );
    assert_eq!(
        outcome.status.code(),
        Some(0),
        "{script}:\n{stdout}\n{stderr}"
    );
    stdout.into_owned()
}

/// Logs turn `turn` as completed, with its workspace recorded, and snapshots the guest.
fn end_turn(session: &Session, turn: u32) -> bool {
    let state = session
        .workspace()
        .record_turn(turn)
        .expect("record the turn");
    session
        .log()
        .record(
            None,
            TurnEnd {
                turn,
                reason: TurnEndReason::ToolResults,
                workspace: Some(TurnState {
                    digest: state.digest,
                    paths: state.paths,
                    commit: state.commit,
                }),
            },
        )
        .expect("turn.end");
    session.snapshot_guest(turn).expect("snapshot the guest")
}

fn start_turn(session: &Session, turn: u32) {
    session
        .log()
        .record(
            None,
            TurnStart {
                turn,
                input: Some("t".into()),
            },
        )
        .expect("turn.start");
}

const WHO: &str = "cat /proc/sys/kernel/random/boot_id; cat who; ls";

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).expect("stat").permissions().mode() & 0o777
}

#[test]
#[cfg_attr(
    not(feature = "microvm"),
    ignore = "needs the `microvm` feature (QEMU, a kernel)"
)]
fn a_fork_at_the_snapshotted_turn_starts_its_guest_from_it_with_its_own_workspace() {
    if !guest::ready(&[]) {
        return;
    }
    let kernel = PathBuf::from(std::env::var_os("CHOCK_VM_DIR").expect("named by guest::ready"));
    let nine_p = chock_vm::GuestKernel::open(&kernel).is_ok_and(|k| k.nine_p);
    if !chock_test_support::requires(nine_p, "a guest kernel with the 9p modules") {
        return;
    }
    let (project, sessions) = (
        tempfile::tempdir().expect("dir"),
        tempfile::tempdir().expect("dir"),
    );
    std::fs::write(
        project.path().join("chock.toml"),
        "[sandbox]\nisolation = \"microvm\"\nsnapshots = true\n",
    )
    .expect("chock.toml");
    std::fs::write(project.path().join("who"), "project\n").expect("who");
    std::fs::write(project.path().join("gone.txt"), "lower\n").expect("gone");
    let options = || SessionOptions {
        sessions_root: Some(sessions.path().to_path_buf()),
        ..SessionOptions::default()
    };
    let parent = Session::open(project.path(), options()).expect("open the session");

    start_turn(&parent, 1);
    let first = run(&parent, &format!("echo parent > who; rm gone.txt; {WHO}"));
    let boot_id = first.lines().next().expect("a boot id").to_owned();
    assert_eq!(first.lines().nth(1), Some("parent"), "{first}");
    assert!(!first.contains("gone.txt"), "{first}");
    // The session reads the upper layer the monitor's overlay wrote: the deletion too.
    let diff = parent.workspace().diff().expect("diff");
    let changes: Vec<_> = diff
        .files
        .iter()
        .map(|f| (f.path.as_str(), f.status().letter()))
        .collect();
    assert_eq!(changes, [("gone.txt", 'D'), ("who", 'M')], "{changes:?}");
    assert!(end_turn(&parent, 1), "no snapshot was taken");
    let snapshot = parent.log().dir().join("guest-snapshot");
    assert_eq!(mode(&snapshot), 0o700);
    for f in std::fs::read_dir(&snapshot).expect("snapshot") {
        let f = f.expect("entry").path();
        assert_eq!(mode(&f), 0o600, "{}", f.display());
    }
    // After the turn: the fork at turn 1 must not see this.
    assert!(run(&parent, "echo later > who; cat who").ends_with("later\n"));

    let forked = chock_session::fork(parent.log().dir(), 1, SessionHeader::default())
        .expect("fork at turn 1");
    let fork = Session::reopen(&forked.dir, options()).expect("resume the fork");
    let seen = run(&fork, &format!("{WHO}; echo fork > who"));
    assert_eq!(
        seen.lines().next(),
        Some(boot_id.as_str()),
        "the fork's guest booted instead of starting from the snapshot:\n{seen}"
    );
    assert_eq!(seen.lines().nth(1), Some("parent"), "{seen}");
    assert!(!seen.contains("gone.txt"), "{seen}");
    // The parent's guest still shows the parent's workspace.
    let parent_now = run(&parent, WHO);
    assert_eq!(parent_now.lines().next(), Some(boot_id.as_str()));
    assert_eq!(parent_now.lines().nth(1), Some("later"), "{parent_now}");
    assert_eq!(
        std::fs::read_to_string(project.path().join("who")).expect("who"),
        "project\n"
    );

    // A second turn replaces the snapshot; a fork at turn 1 now finds none and boots cold.
    start_turn(&parent, 2);
    run(&parent, "true");
    assert!(end_turn(&parent, 2));
    let early = chock_session::fork(parent.log().dir(), 1, SessionHeader::default())
        .expect("fork at turn 1 again");
    assert!(!early.dir.join("guest-snapshot").exists());
    let early = Session::reopen(&early.dir, options()).expect("resume the early fork");
    let cold = run(&early, WHO);
    assert_ne!(cold.lines().next(), Some(boot_id.as_str()), "{cold}");
    assert_eq!(cold.lines().nth(1), Some("parent"), "{cold}");
}
