//! A resume takes up the session's keeper as an adopt does (docs/handover.md), as real
//! processes: a `chock run` starts a background command that prints numbered lines for a while
//! and is SIGKILLed while it prints; `chock run --resume` (or the daemon's `sessions.resume`)
//! of the session follows the command from where its record stands and records the rest of
//! its output — every line once, in order — and its end; in a git project and in a project
//! without git (the overlay backing). With the keeper gone too, the command's end is recorded as
//! unknown and nothing waits for it.

mod handover_support;
mod run_support;

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use chock_client::DaemonClient;
use chock_protocol::rpc::{Call, ResumeParams, SessionParams, SessionState, Started};
use handover_support::*;
use run_support::*;

/// Turn 1 starts the background command; turn 2's command runs when the first process is
/// killed (the resume tells the model it never finished, as a resume always has); the resumed
/// session waits a while, then reads the background command's whole output.
const RESUMED: &str = r#"
[[turn]]
[[turn.call]]
tool = "run_command"
input = { command = "for i in $(seq 1 60); do echo line $i; sleep 0.1; done; echo finished >&2", background = true }

[[turn]]
[[turn.call]]
tool = "run_command"
input = { command = "sleep 20", timeout_secs = 60 }

[[turn]]
[[turn.call]]
tool = "run_command"
input = { command = "sleep 12" }
expect = { is_error = false }

[[turn]]
[[turn.call]]
tool = "read_output"
input = { handle = "bg-play_1_1" }
expect = { is_error = false, contains = "line 60" }

[[turn]]
text = "the resumed session read the whole output"
"#;

/// The same, with the keeper gone before the resume: read_output says the end is unknown.
const KEEPER_GONE: &str = r#"
[[turn]]
[[turn.call]]
tool = "run_command"
input = { command = "for i in $(seq 1 60); do echo line $i; sleep 0.1; done; echo finished >&2", background = true }

[[turn]]
[[turn.call]]
tool = "run_command"
input = { command = "sleep 20", timeout_secs = 60 }

[[turn]]
[[turn.call]]
tool = "read_output"
input = { handle = "bg-play_1_1" }
expect = { is_error = false, contains = "exit status unknown" }

[[turn]]
text = "its end is unknown"

[[turn]]
text = "nothing more to do"
"#;

/// The pids of the `chock-keeper` processes whose parent is `parent`.
fn keepers_of(parent: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let dir = entry.path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.trim() != "chock-keeper" {
            continue;
        }
        let status = std::fs::read_to_string(dir.join("status")).unwrap_or_default();
        let ppid = status
            .lines()
            .find_map(|l| l.strip_prefix("PPid:"))
            .and_then(|p| p.trim().parse::<u32>().ok());
        if ppid == Some(parent)
            && let Some(pid) = dir.file_name().and_then(|n| n.to_str()?.parse().ok())
        {
            found.push(pid);
        }
    }
    found
}

/// Starts `chock run` on `script`, waits until its background command prints and its second
/// command runs, and SIGKILLs it (and, with `kill_keeper`, its keeper too). Returns the session's
/// id and what the dead owner recorded of the command's stdout (part of it, not all).
fn owner_killed_while_it_prints(w: &World, script: &str, kill_keeper: bool) -> (String, String) {
    let mut run: Child = chock_run(w, script, "in the background", Stdio::null());
    wait_for_log(w, "the second command is allowed", |e| {
        count(e, "decision", Some("play_2_1")) == 1
    });
    let out = w.session().join("background/bg-play_1_1.stdout");
    let until = Instant::now() + Duration::from_secs(30);
    while std::fs::metadata(&out).map_or(0, |m| m.len()) == 0 {
        assert!(
            Instant::now() < until,
            "the background command printed nothing"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let keepers = keepers_of(run.id());
    assert_eq!(keepers.len(), 1, "the owner started one keeper");
    let id = w.session_id();
    signal(run.id(), rustix::process::Signal::KILL);
    let _ = run.wait();
    if kill_keeper {
        signal(keepers[0], rustix::process::Signal::KILL);
        let until = Instant::now() + Duration::from_secs(10);
        while matches!(chock_sandbox::keeper::connect(&w.session()), Ok(Some(_))) {
            assert!(Instant::now() < until, "the keeper still answers");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let recorded = std::fs::read_to_string(&out).unwrap();
    assert!(
        !recorded.is_empty() && recorded != lines(),
        "the first process recorded {} bytes: it was not killed mid-output",
        recorded.len()
    );
    (id, recorded)
}

/// `chock run --resume ID` with the recording `script`, which must end within a minute.
fn resume(w: &World, script: &str, id: &str) {
    let provider = w.script(script);
    let mut child = w
        .command(&["run", "--provider", &provider, "--resume", id, "go on"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > until {
            let _ = child.kill();
            panic!("the resumed session did not end within a minute");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

/// Where the resume's note (`resumed: …`) is in the log.
fn resumed_at(events: &[Logged]) -> usize {
    events
        .iter()
        .position(|(k, _, d)| {
            k == "note"
                && d["text"]
                    .as_str()
                    .is_some_and(|t| t.starts_with("resumed:"))
        })
        .expect("a resume's note")
}

/// The command's output is recorded whole, each line once and in order, and its end
/// (`command.result`, the `background_ended` note, status 0) once, after the resume.
fn assert_recorded_whole_after_resume(w: &World, events: &[Logged]) {
    let bg = w.session().join("background");
    assert_eq!(
        std::fs::read_to_string(bg.join("bg-play_1_1.stdout")).unwrap(),
        lines()
    );
    assert_eq!(
        std::fs::read_to_string(bg.join("bg-play_1_1.stderr")).unwrap(),
        "finished\n"
    );
    let at = resumed_at(events);
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
    let ended: Vec<(usize, &serde_json::Value)> = events
        .iter()
        .enumerate()
        .filter(|(_, (k, _, d))| k == "note" && d["about"] == "background_ended")
        .map(|(i, (_, _, d))| (i, d))
        .collect();
    assert_eq!(ended.len(), 1, "{events:#?}");
    assert!(ended[0].0 > at, "the end was recorded before the resume");
    assert_eq!(ended[0].1["status"], 0);
    assert_eq!(ended[0].1["is_error"], false);
    // The call the dead owner was running is neither recorded as ended nor run again.
    assert_eq!(count(events, "tool.call", Some("play_2_1")), 1);
    assert_eq!(count(events, "command.result", Some("play_2_1")), 0);
}

/// The owner dies while the command prints; `chock run --resume` records the rest and the end,
/// and the resumed session reads the whole output.
fn resumed_while_it_prints(w: &World) {
    let (id, _) = owner_killed_while_it_prints(w, RESUMED, false);
    resume(w, RESUMED, &id);
    let events = w.events_exact();
    assert_recorded_whole_after_resume(w, &events);
    assert_eq!(count(&events, "session.end", None), 1, "the resume's end");
    assert_keeper_gone(w);
    w.assert_log_verifies();
}

#[test]
fn a_resume_follows_a_background_command_the_dead_owner_left_in_a_git_session() {
    let w = World::with_git_project();
    resumed_while_it_prints(&w);
}

#[test]
fn a_resume_follows_a_background_command_the_dead_owner_left_in_an_overlay_session() {
    let w = World::new();
    w.write("readme.txt", "a project without git\n");
    resumed_while_it_prints(&w);
    let meta = std::fs::read_to_string(w.session().join("workspace/meta.json")).unwrap();
    assert!(meta.contains("overlay"), "{meta}");
}

/// The owner and its keeper are killed while the command prints: the resume finds no keeper,
/// records the command's end as unknown (once, even when resumed again) and goes on at once.
#[test]
fn a_resume_with_the_keeper_gone_records_the_end_as_unknown() {
    let w = World::with_git_project();
    let (id, recorded) = owner_killed_while_it_prints(&w, KEEPER_GONE, true);
    let began = Instant::now();
    resume(&w, KEEPER_GONE, &id);
    assert!(
        began.elapsed() < Duration::from_secs(25),
        "the resume waited {:?}",
        began.elapsed()
    );
    let events = w.events_exact();
    let at = resumed_at(&events);
    assert_eq!(count(&events, "command.result", Some("play_1_1")), 0);
    let ended: Vec<(usize, &serde_json::Value)> = events
        .iter()
        .enumerate()
        .filter(|(_, (k, _, d))| k == "note" && d["about"] == "background_ended")
        .map(|(i, (_, _, d))| (i, d))
        .collect();
    assert_eq!(ended.len(), 1, "{events:#?}");
    assert!(ended[0].0 > at, "the end was recorded before the resume");
    assert_eq!(ended[0].1["background"], "bg-play_1_1");
    assert_eq!(ended[0].1["status"], serde_json::Value::Null);
    assert_eq!(ended[0].1["is_error"], true);
    // The command died with its keeper: nothing more was recorded of it.
    let out = w.session().join("background/bg-play_1_1.stdout");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), recorded);
    // A second resume does not record its end again.
    let again = w.script(KEEPER_GONE);
    let out = w.chock(&["run", "--provider", &again, "--resume", &id, "once more"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let events = w.events_exact();
    let notes = events
        .iter()
        .filter(|(k, _, d)| k == "note" && d["about"] == "background_ended")
        .count();
    assert_eq!(notes, 1, "{events:#?}");
    w.assert_log_verifies();
}

/// The daemon's `sessions.resume` goes through the same opening: it follows the command too.
#[test]
fn the_daemons_resume_follows_a_background_command_the_dead_owner_left() {
    let w = World::with_git_project();
    let _daemon = Daemon::start(&w);
    let (id, _) = owner_killed_while_it_prints(&w, RESUMED, false);
    let provider = w.script(RESUMED);
    rt().block_on(async {
        let mut client = DaemonClient::unix(&w.runtime.join("chock/daemon.sock"))
            .await
            .unwrap();
        let _: Started = client
            .call(&Call::SessionsResume(ResumeParams {
                session: id.clone(),
                task: "go on".into(),
                provider: Some(provider),
                model: None,
                subscribe: false,
            }))
            .await
            .unwrap();
        wait_for_log(&w, "the resumed session reads the output", |e| {
            count(e, "tool.result", Some("play_4_1")) == 1
        });
        wait_state(&mut client, &id, SessionState::Idle).await;
        let _: chock_protocol::rpc::Done = client
            .call(&Call::SessionsEnd(SessionParams {
                session: id.clone(),
            }))
            .await
            .unwrap();
    });
    let events = wait_for_log(&w, "the daemon ends the session", |e| {
        count(e, "session.end", None) == 1
    });
    assert_recorded_whole_after_resume(&w, &events);
    assert_keeper_gone(&w);
    w.assert_log_verifies();
}
