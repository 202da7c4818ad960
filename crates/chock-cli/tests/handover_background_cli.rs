//! Background commands move with a handover (docs/handover.md), as real processes: a `chock run`
//! starts a background command that prints numbered lines for a while, the session is moved to
//! the daemon (`chock detach`) or its owner is killed outright, the `chock run` is SIGKILLed,
//! and the daemon records the rest of the command's output — every line once, in order — and
//! its end, and the session goes on through a client; in a git project and in a project without
//! git (the overlay backing).

mod handover_support;
mod run_support;

use std::process::Stdio;

use chock_protocol::rpc::SessionState;
use handover_support::*;
use run_support::*;

const MOVES: &str = r#"
[[turn]]
[[turn.call]]
tool = "run_command"
input = { command = "for i in $(seq 1 60); do echo line $i; sleep 0.1; done; echo finished >&2", background = true }

[[turn]]
[[turn.call]]
tool = "run_command"
input = { command = "sleep 2" }

[[turn]]
text = "it runs in the background"

[[turn]]
[[turn.call]]
tool = "read_output"
input = { handle = "bg-play_1_1" }
expect = { is_error = false, contains = "line 60" }

[[turn]]
text = "the follow-up, answered by the daemon"
"#;

/// What the session directory and the log hold of the background command once it has moved:
/// its output recorded whole, each line once and in order; its end (`command.result` and the
/// `background_ended` note, status 0) recorded once, by the daemon, after the handover.
fn assert_moved_whole(w: &World, events: &[Logged]) {
    let bg = w.session().join("background");
    assert_eq!(
        std::fs::read_to_string(bg.join("bg-play_1_1.stdout")).unwrap(),
        lines()
    );
    assert_eq!(
        std::fs::read_to_string(bg.join("bg-play_1_1.stderr")).unwrap(),
        "finished\n"
    );
    let at = events
        .iter()
        .position(|(k, _, _)| k == "session.handover")
        .unwrap();
    assert_eq!(count(events, "tool.call", Some("play_1_1")), 1);
    assert_eq!(count(events, "command.result", Some("play_1_1")), 1);
    assert_eq!(count(&events[at..], "command.result", Some("play_1_1")), 1);
    let result = events
        .iter()
        .find(|(k, c, _)| k == "command.result" && c.as_deref() == Some("play_1_1"))
        .map(|(_, _, d)| d)
        .unwrap();
    assert_eq!(result["exit_code"], 0, "{result}");
    assert_eq!(result["stdout_bytes"], lines().len(), "{result}");
    let ended: Vec<&serde_json::Value> = events
        .iter()
        .filter(|(k, _, d)| k == "note" && d["about"] == "background_ended")
        .map(|(_, _, d)| d)
        .collect();
    assert_eq!(ended.len(), 1, "{events:#?}");
    assert_eq!(ended[0]["status"], 0);
    assert_eq!(ended[0]["is_error"], false);
    let ended_at = events
        .iter()
        .position(|(k, _, d)| k == "note" && d["about"] == "background_ended")
        .unwrap();
    assert!(ended_at > at, "the end was recorded before the handover");
}

/// Once the daemon has recorded the command's end (the task itself ended before), a follow-up
/// through a client: the model reads the command's whole output with read_output there.
fn follow_up_once_ended(w: &World, id: &str) {
    rt().block_on(async {
        let mut client = connect(w).await;
        wait_state(&mut client, id, SessionState::Idle).await;
        wait_for_log(w, "the daemon records the command's end", |e| {
            e.iter()
                .any(|(k, _, d)| k == "note" && d["about"] == "background_ended")
        });
        send_input(&mut client, id, "and one more thing").await;
        wait_state(&mut client, id, SessionState::Idle).await;
        end_session(&mut client, id).await;
    });
}

/// Every keeper process this user runs is confined: no new privileges and a seccomp filter.
/// Returns how many there were.
fn keepers_confined() -> usize {
    let mut seen = 0;
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let dir = entry.path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.trim() != "chock-keeper" {
            continue;
        }
        // A keeper another test starts at this moment confines itself a few milliseconds after
        // its exec (before it answers anyone): it is given a second to do so.
        let until = std::time::Instant::now() + std::time::Duration::from_secs(2);
        let status = loop {
            let Ok(status) = std::fs::read_to_string(dir.join("status")) else {
                break None;
            };
            let confined = status.contains("NoNewPrivs:\t1") && status.contains("Seccomp:\t2");
            if confined || std::time::Instant::now() >= until {
                break Some(status);
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        let Some(status) = status else { continue };
        assert!(status.contains("NoNewPrivs:\t1"), "{status}");
        assert!(status.contains("Seccomp:\t2"), "{status}");
        seen += 1;
    }
    seen
}

/// The session moves while its background command prints; the first process is SIGKILLed;
/// the daemon records the rest and the end, and takes a follow-up.
fn moves_with_the_session(w: &World) {
    let _daemon = Daemon::start(w);
    let mut run = chock_run(w, MOVES, "in the background", Stdio::null());
    wait_for_log(w, "the background command runs", |e| {
        count(e, "tool.result", Some("play_1_1")) == 1
    });
    assert!(keepers_confined() >= 1, "no keeper runs");
    let id = w.session_id();
    detach(w);
    signal(run.id(), rustix::process::Signal::KILL);
    let _ = run.wait();
    let out = w.session().join("background/bg-play_1_1.stdout");
    let recorded_first = std::fs::read_to_string(&out).unwrap_or_default();
    assert!(
        !recorded_first.is_empty() && recorded_first != lines(),
        "the first process recorded {} bytes before it let go: the move was not mid-output",
        recorded_first.len()
    );
    follow_up_once_ended(w, &id);
    let events = w.events_exact();
    let h = &handovers(&events)[0];
    assert_eq!(h["how"], "released");
    assert!(h.get("unknown").is_none(), "{h}");
    assert_moved_whole(w, &events);
    assert_eq!(count(&events, "session.end", None), 1);
    assert_keeper_gone(w);
    w.assert_log_verifies();
}

#[test]
fn a_background_command_moves_with_a_git_session_and_its_output_is_recorded_once_whole() {
    let w = World::with_git_project();
    moves_with_the_session(&w);
}

#[test]
fn a_background_command_moves_with_an_overlay_session_and_its_output_is_recorded_once_whole() {
    let w = World::new();
    w.write("readme.txt", "a project without git\n");
    moves_with_the_session(&w);
    let meta = std::fs::read_to_string(w.session().join("workspace/meta.json")).unwrap();
    assert!(meta.contains("overlay"), "{meta}");
}

const OWNER_DIES: &str = r#"
[[turn]]
[[turn.call]]
tool = "run_command"
input = { command = "for i in $(seq 1 60); do echo line $i; sleep 0.1; done; echo finished >&2", background = true }

[[turn]]
[[turn.call]]
tool = "run_command"
input = { command = "sleep 20", timeout_secs = 60 }
expect = { is_error = true, contains = "outcome unknown" }

[[turn]]
text = "noted"

[[turn]]
[[turn.call]]
tool = "read_output"
input = { handle = "bg-play_1_1" }
expect = { is_error = false, contains = "line 60" }

[[turn]]
text = "the follow-up, answered by the daemon"
"#;

/// The owner is SIGKILLed while its background command prints (it never let go): the keeper
/// keeps the command running, and the daemon that takes the session up records the rest of its
/// output and its end; only the foreground call that was running is outcome unknown.
#[test]
fn a_background_command_outlives_an_owner_killed_outright_and_the_daemon_records_it() {
    let w = World::with_git_project();
    let _daemon = Daemon::start(&w);
    let mut run = chock_run(&w, OWNER_DIES, "in the background", Stdio::null());
    wait_for_log(&w, "the second command is allowed", |e| {
        count(e, "decision", Some("play_2_1")) == 1
    });
    let id = w.session_id();
    signal(run.id(), rustix::process::Signal::KILL);
    let _ = run.wait();
    detach(&w);
    follow_up_once_ended(&w, &id);
    let events = w.events_exact();
    let h = &handovers(&events)[0];
    assert_eq!(h["how"], "found_dead");
    assert_eq!(h["unknown"], serde_json::json!(["play_2_1"]), "{events:#?}");
    assert_moved_whole(&w, &events);
    assert_eq!(count(&events, "session.end", None), 1);
    assert_keeper_gone(&w);
    w.assert_log_verifies();
}
