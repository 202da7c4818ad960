//! The detach key as a person presses it, through real terminals: `chock run` on a
//! pseudo-terminal of its own (`setsid -c`: the pty is its controlling terminal, so the Ctrl-\
//! written to the pty's master reaches it as the line discipline sends it) hands its session to
//! a running `chock serve` and exits 0 saying how to follow it, and the daemon goes on with the
//! task; with no daemon, the key says so and the session goes on where it is (the process is
//! not quit by the key's SIGQUIT). The terminal interface, in tmux, does the same with Ctrl-\
//! (`tui`), working or idle.

mod handover_support;
mod run_support;
#[path = "detach_key_cli/tui.rs"]
mod tui;

use std::io::{Read, Write};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chock_protocol::rpc::{Call, SessionList, SessionState};
use handover_support::{Daemon, connect, count, end_session, rt, signal, wait_for_log};
use run_support::*;

/// Waits (up to a minute) until the daemon lists session `id` as idle, then ends it there.
pub fn daemon_finishes(w: &World, id: &str) {
    rt().block_on(async {
        let mut client = connect(w).await;
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            let list: SessionList = client
                .call(&Call::SessionsList(chock_protocol::rpc::NoParams {}))
                .await
                .unwrap();
            let state = list
                .sessions
                .iter()
                .find(|s| s.session == id && s.owned)
                .map(|s| s.state);
            if state == Some(SessionState::Idle) {
                break;
            }
            assert!(
                Instant::now() < until,
                "the daemon never ran {id}: {state:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        end_session(&mut client, id).await;
    });
}

/// A `chock run` on a pty of its own, and everything the pty showed so far.
struct OnPty {
    child: Child,
    master: std::fs::File,
    seen: Arc<Mutex<String>>,
}

impl OnPty {
    fn start(w: &World, script: &str, task: &str) -> OnPty {
        let (master, slave) = open_pty();
        let provider = w.script(script);
        let child = w
            .program("setsid")
            .args(["-c", CHOCK, "run", "--provider", &provider, task])
            .stdin(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave))
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let seen = Arc::new(Mutex::new(String::new()));
        let mut reader = master.try_clone().unwrap();
        let into = Arc::clone(&seen);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            // Ends with EIO once nothing holds the pty's other end.
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                into.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        OnPty {
            child,
            master,
            seen,
        }
    }

    /// Ctrl-\, as a keyboard sends it.
    fn detach_key(&mut self) {
        self.master.write_all(b"\x1c").unwrap();
    }

    /// Waits (up to a minute) for the process to exit: its status code (None: a signal ended it)
    /// and what the pty showed.
    fn exit(mut self) -> (Option<i32>, String) {
        let until = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                Instant::now() < until,
                "chock run did not exit: {}",
                self.seen.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        // What it printed last may still be on its way through the pty.
        std::thread::sleep(Duration::from_millis(300));
        let seen = self.seen.lock().unwrap().clone();
        (status.code(), seen)
    }
}

/// Two turns that each run a command (the first sleeps), then the model's answer.
pub const TWO_COMMANDS: &str = r#"
[[turn]]
[[turn.call]]
tool = "run_command"
input = { command = "sleep 3; echo one > one.txt" }

[[turn]]
[[turn.call]]
tool = "run_command"
input = { command = "echo two > two.txt" }
expect = { is_error = false }

[[turn]]
text = "both made"
"#;

#[test]
fn ctrl_backslash_in_chock_run_hands_the_session_to_the_daemon_and_exits_0() {
    let w = World::with_git_project();
    let _daemon = Daemon::start(&w);
    let mut run = OnPty::start(&w, TWO_COMMANDS, "make two files");
    let pid = run.child.id();
    wait_for_log(&w, "the first command is called", |e| {
        count(e, "tool.call", Some("play_1_1")) == 1
    });
    let id = w.session_id();
    run.detach_key();
    let (code, seen) = run.exit();
    assert_eq!(code, Some(0), "{seen}");
    assert!(
        seen.contains(&format!("handing session {id} to the daemon")),
        "{seen}"
    );
    assert!(
        seen.contains(&format!(
            "session {id} was handed over; follow it: chock attach {id}"
        )),
        "{seen}"
    );
    daemon_finishes(&w, &id);
    let events = w.events_exact();
    let handed: Vec<&serde_json::Value> = events
        .iter()
        .filter(|(k, _, _)| k == "session.handover")
        .map(|(_, _, d)| d)
        .collect();
    assert_eq!(handed.len(), 1, "{events:#?}");
    assert_eq!(handed[0]["how"], "released");
    assert_eq!(handed[0]["from"]["pid"], pid);
    assert_eq!(handed[0]["from"]["process"], "chock run");
    // Turn 1's command ran once, in chock run; turn 2's in the daemon; one end, the daemon's.
    let at = events
        .iter()
        .position(|(k, _, _)| k == "session.handover")
        .unwrap();
    assert_eq!(count(&events[..at], "command.result", Some("play_1_1")), 1);
    assert_eq!(count(&events[at..], "command.result", Some("play_2_1")), 1);
    assert_eq!(count(&events, "session.end", None), 1);
    let upper = w.session().join("workspace/upper");
    assert!(upper.join("one.txt").exists() && upper.join("two.txt").exists());
    w.assert_log_verifies();
}

#[test]
fn ctrl_backslash_with_no_daemon_says_so_and_the_session_goes_on_here() {
    let w = World::with_git_project();
    let mut run = OnPty::start(&w, TWO_COMMANDS, "make two files");
    wait_for_log(&w, "the first command is called", |e| {
        count(e, "tool.call", Some("play_1_1")) == 1
    });
    run.detach_key();
    let (code, seen) = run.exit();
    assert_eq!(code, Some(0), "not quit by the key: {seen}");
    assert!(
        seen.contains("not handed over: no daemon is listening"),
        "{seen}"
    );
    assert!(seen.contains("the session goes on here"), "{seen}");
    let events = w.events_exact();
    assert_eq!(count(&events, "session.handover", None), 0);
    assert_eq!(count(&events, "command.result", Some("play_2_1")), 1);
    assert_eq!(count(&events, "session.end", None), 1);
}

/// The daemon's wait for an owner that does not let go (a `chock run` stopped with SIGSTOP: the
/// SIGUSR1 waits) gives up when `--wait` is out, and when the daemon is stopped meanwhile it
/// stops at once, not held by the wait on the lock; the session is then still the owner's.
#[test]
fn the_wait_for_an_owner_that_does_not_let_go_gives_up_on_time_and_when_the_daemon_stops() {
    let w = World::with_git_project();
    let mut daemon = Daemon::start(&w);
    let provider = w.script(TWO_COMMANDS);
    let mut run = w
        .command(&["run", "--provider", &provider, "make two files"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_log(&w, "the first command is called", |e| {
        count(e, "tool.call", Some("play_1_1")) == 1
    });
    signal(run.id(), rustix::process::Signal::STOP);
    let id = w.session_id();
    let started = Instant::now();
    let out = w.chock(&["detach", &id, "--wait", "1"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("was asked to let go and still runs it after 1 s"),
        "{}",
        text(&out.stderr)
    );
    assert!(started.elapsed() < Duration::from_secs(20));
    // A second wait, long; the daemon is stopped while it waits.
    let waiting = w
        .command(&["detach", &id])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(1));
    let stopping = Instant::now();
    signal(daemon.0.id(), rustix::process::Signal::TERM);
    let status = daemon.0.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert!(
        stopping.elapsed() < Duration::from_secs(10),
        "the daemon took {:?} to stop",
        stopping.elapsed()
    );
    let detach = waiting.wait_with_output().unwrap();
    assert_eq!(detach.status.code(), Some(1));
    // Nothing was taken over: the owner still holds the session.
    assert_eq!(count(&w.events(), "session.handover", None), 0);
    assert!(matches!(
        chock_log::is_live(&w.session()).unwrap(),
        chock_log::Liveness::Live { .. }
    ));
    signal(run.id(), rustix::process::Signal::KILL);
    let _ = run.wait();
}
