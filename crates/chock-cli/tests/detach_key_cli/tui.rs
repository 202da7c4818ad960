//! The terminal interface in tmux (`tmux` feature): the detach key hands its session to the
//! daemon while a task runs and while none does (idle, waiting for a follow-up), and `chock
//! detach SESSION` from another process takes an idle interface session too.

use std::time::{Duration, Instant};

use chock_client::DaemonClient;
use chock_protocol::rpc::{Call, Done, InputParams, SessionParams, SessionState};

use crate::handover_support::{Daemon, count, handovers, rt, wait_for_log, wait_state};
use crate::run_support::*;
use crate::{TWO_COMMANDS, daemon_finishes};

/// `tmux args` on the world's own tmux server.
fn tmux(w: &World, args: &[&str]) -> std::process::Output {
    w.program("tmux")
        .arg("-S")
        .arg(w.base.join("tmux.sock"))
        .args(args)
        .env("TERM", "xterm-256color")
        .output()
        .unwrap()
}

/// Waits (up to a minute) until tmux's screen shows `what`; the screen then.
fn tmux_wait_for(w: &World, what: &str) -> String {
    tmux_wait_until(w, what, |screen| screen.contains(what))
}

/// Waits (up to a minute) until `done` says yes to tmux's screen and history (`what` names it).
fn tmux_wait_until(w: &World, what: &str, done: impl Fn(&str) -> bool) -> String {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let screen = text(&tmux(w, &["capture-pane", "-p", "-J", "-t", "t", "-S", "-"]).stdout);
        if done(&screen) {
            return screen;
        }
        assert!(
            Instant::now() < until,
            "never {what:?}; the screen:\n{screen}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
#[cfg_attr(
    not(feature = "tmux"),
    ignore = "needs tmux: the `tmux` feature (.ci/run tests with --all-features)"
)]
fn ctrl_backslash_in_the_terminal_interface_hands_the_session_to_the_daemon() {
    if !chock_test_support::requires(
        on_path("tmux"),
        "tmux is not installed (apt-get install tmux, as .ci/run does)",
    ) {
        return;
    }
    let w = World::with_git_project();
    let _daemon = Daemon::start(&w);
    let _server = start_tui(&w, TWO_COMMANDS, "make two files");
    // The footer of a working session names the key.
    tmux_wait_for(&w, "Ctrl-\\ detaches");
    wait_for_log(&w, "the first command is called", |e| {
        count(e, "tool.call", Some("play_1_1")) == 1
    });
    let id = w.session_id();
    tmux(&w, &["send-keys", "-t", "t", "C-\\"]);
    // The shell's `echo exit=$?` once the interface has exited.
    left_handed_over(&w, &id);
    daemon_finishes(&w, &id);
    let events = w.events_exact();
    let handed: Vec<&serde_json::Value> = events
        .iter()
        .filter(|(k, _, _)| k == "session.handover")
        .map(|(_, _, d)| d)
        .collect();
    assert_eq!(handed.len(), 1, "{events:#?}");
    assert_eq!(handed[0]["how"], "released");
    assert_eq!(handed[0]["from"]["process"], "chock tui");
    assert_eq!(count(&events, "command.result", Some("play_1_1")), 1);
    assert_eq!(count(&events, "command.result", Some("play_2_1")), 1);
    assert_eq!(count(&events, "session.end", None), 1);
    w.assert_log_verifies();
}

/// Stops the world's tmux server when dropped.
struct KillTmux<'w>(&'w World);

impl Drop for KillTmux<'_> {
    fn drop(&mut self) {
        let _ = tmux(self.0, &["kill-server"]);
    }
}

/// Starts `chock tui` with the recording `script` in a tmux session of the world's own server,
/// and gives it `task`; the server stops when the returned guard is dropped.
fn start_tui<'w>(w: &'w World, script: &str, task: &str) -> KillTmux<'w> {
    let provider = w.script(script);
    let started = tmux(
        w,
        &[
            "new-session",
            "-d",
            "-s",
            "t",
            "-x",
            "100",
            "-y",
            "30",
            "env",
            "PS1=$ ",
            "sh",
        ],
    );
    assert!(started.status.success(), "{}", text(&started.stderr));
    let server = KillTmux(w);
    tmux_wait_for(w, "$");
    let line = format!("{CHOCK} tui --provider {provider}; echo exit=$?");
    assert!(
        tmux(w, &["send-keys", "-t", "t", &line, "Enter"])
            .status
            .success()
    );
    tmux_wait_for(w, "What should chock do?");
    tmux(w, &["send-keys", "-t", "t", task, "Enter"]);
    server
}

/// Waits (up to a minute) for the interface to exit (the shell's `echo exit=$?`): it exited 0
/// and its transcript's last line says the session `id` was handed over and how to follow it.
fn left_handed_over(w: &World, id: &str) {
    let screen = tmux_wait_until(w, "the interface's exit", |s| {
        s.lines().any(|l| l.starts_with("exit="))
    });
    assert!(screen.lines().any(|l| l.trim_end() == "exit=0"), "{screen}");
    // The interface wraps its lines at the terminal's width.
    let words = screen.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains(&format!(
            "session {id} was handed over to the daemon; follow it: chock attach {id}"
        )),
        "{screen}"
    );
}

/// One task (a command, then the model's answer), then a follow-up that runs a command.
const A_TASK_THEN_A_FOLLOW_UP: &str = r#"
[[turn]]
[[turn.call]]
tool = "run_command"
input = { command = "echo one > one.txt" }

[[turn]]
text = "one made"

[[turn]]
[[turn.call]]
tool = "run_command"
input = { command = "echo two > two.txt" }
expect = { is_error = false }

[[turn]]
text = "the follow-up, run by the daemon"
"#;

/// Starts the interface on `A_TASK_THEN_A_FOLLOW_UP` and waits until its first task has ended
/// and the interface shows the session idle; the session's id.
fn idle_tui(w: &World) -> (KillTmux<'_>, String) {
    let server = start_tui(w, A_TASK_THEN_A_FOLLOW_UP, "make one file");
    wait_for_log(w, "the first task ends", |e| {
        count(e, "turn.end", None) == 2
    });
    tmux_wait_for(w, "one made");
    (server, w.session_id())
}

/// The idle session `id` is the daemon's: it ran nothing when it took it up; a follow-up sent
/// through a client runs there; the session ends once, in the daemon. `from` is the process
/// that let go.
fn idle_session_goes_on_in_the_daemon(w: &World, id: &str, from: u32) {
    rt().block_on(async {
        let mut client = DaemonClient::unix(&w.runtime.join("chock/daemon.sock"))
            .await
            .unwrap();
        wait_state(&mut client, id, SessionState::Idle).await;
        // Taken up idle: nothing was run for it.
        let events = w.events_exact();
        let at = events
            .iter()
            .position(|(k, _, _)| k == "session.handover")
            .expect("a session.handover");
        assert_eq!(count(&events[at..], "turn.start", None), 0, "{events:#?}");
        let _: Done = client
            .call(&Call::SessionsInput(InputParams {
                session: id.to_string(),
                text: "and make two".into(),
            }))
            .await
            .unwrap();
        wait_state(&mut client, id, SessionState::Idle).await;
        let _: Done = client
            .call(&Call::SessionsEnd(SessionParams {
                session: id.to_string(),
            }))
            .await
            .unwrap();
    });
    let events = w.events_exact();
    let handed = handovers(&events);
    assert_eq!(handed.len(), 1, "{events:#?}");
    assert_eq!(handed[0]["how"], "released");
    assert_eq!(handed[0]["from"]["pid"], from);
    assert_eq!(handed[0]["from"]["process"], "chock tui");
    assert!(handed[0].get("unknown").is_none(), "{:?}", handed[0]);
    let at = events
        .iter()
        .position(|(k, _, _)| k == "session.handover")
        .unwrap();
    // The interface wrote no end; the daemon ran the follow-up (turns 3 and 4) and ended it.
    assert_eq!(count(&events[..at], "session.end", None), 0);
    assert_eq!(count(&events, "session.end", None), 1);
    assert_eq!(count(&events[..at], "command.result", Some("play_1_1")), 1);
    assert_eq!(count(&events[at..], "command.result", Some("play_3_1")), 1);
    let turns: Vec<(u64, Option<String>)> = events
        .iter()
        .filter(|(k, _, _)| k == "turn.start")
        .map(|(_, _, d)| {
            let input = d["input"].as_str().map(str::to_string);
            (d["turn"].as_u64().unwrap(), input)
        })
        .collect();
    assert_eq!(
        turns,
        [
            (1, Some("make one file".into())),
            (2, None),
            (3, Some("and make two".into())),
            (4, None)
        ],
        "{events:#?}"
    );
    let upper = w.session().join("workspace/upper");
    assert!(upper.join("one.txt").exists() && upper.join("two.txt").exists());
    w.assert_log_verifies();
}

/// The pid of the interface (the shell's one child, `chock tui`).
fn tui_pid(w: &World) -> u32 {
    let out = tmux(w, &["list-panes", "-t", "t", "-F", "#{pane_pid}"]);
    let shell = text(&out.stdout).trim().to_string();
    let children =
        std::fs::read_to_string(format!("/proc/{shell}/task/{shell}/children")).unwrap_or_default();
    children
        .split_whitespace()
        .next()
        .and_then(|p| p.parse().ok())
        .expect("the interface runs under the pane's shell")
}

#[test]
#[cfg_attr(
    not(feature = "tmux"),
    ignore = "needs tmux: the `tmux` feature (.ci/run tests with --all-features)"
)]
fn ctrl_backslash_hands_an_idle_interface_session_to_the_daemon() {
    if !chock_test_support::requires(
        on_path("tmux"),
        "tmux is not installed (apt-get install tmux, as .ci/run does)",
    ) {
        return;
    }
    let w = World::with_git_project();
    let _daemon = Daemon::start(&w);
    let (_server, id) = idle_tui(&w);
    let pid = tui_pid(&w);
    tmux(&w, &["send-keys", "-t", "t", "C-\\"]);
    left_handed_over(&w, &id);
    idle_session_goes_on_in_the_daemon(&w, &id, pid);
}

#[test]
#[cfg_attr(
    not(feature = "tmux"),
    ignore = "needs tmux: the `tmux` feature (.ci/run tests with --all-features)"
)]
fn chock_detach_from_another_process_takes_an_idle_interface_session() {
    if !chock_test_support::requires(
        on_path("tmux"),
        "tmux is not installed (apt-get install tmux, as .ci/run does)",
    ) {
        return;
    }
    let w = World::with_git_project();
    let _daemon = Daemon::start(&w);
    let (_server, id) = idle_tui(&w);
    let pid = tui_pid(&w);
    let out = w.chock(&["detach", &id, "--wait", "30"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    left_handed_over(&w, &id);
    idle_session_goes_on_in_the_daemon(&w, &id, pid);
}
