//! `chock detach` as real processes: a `chock run` works on a task with the offline player, the
//! daemon (`chock serve`) is asked to take the session over, the `chock run` is killed with
//! SIGKILL, and the session goes on in the daemon at its next turn and takes a follow-up through
//! a client — in a git project and in a project without git (the overlay backing); with a
//! question open at the handover (it stays open, and a client of the daemon answers it); and
//! with the owner killed while a command ran (the call is logged as outcome unknown, never run
//! again).

mod handover_support;
mod run_support;

use std::io::{BufReader, Read};
use std::process::Stdio;
use std::time::{Duration, Instant};

use chock_protocol::log::AnswerKind;
use chock_protocol::rpc::{AnswerParams, Call, Done, Pending, PendingParams, SessionState};
use handover_support::*;
use run_support::*;

const TWO_COMMANDS: &str = r#"
[[turn]]
[[turn.call]]
tool = "run_command"
input = { command = "sleep 2; echo one > one.txt" }

[[turn]]
[[turn.call]]
tool = "run_command"
input = { command = "echo two > two.txt" }
expect = { is_error = false }

[[turn]]
text = "both made"

[[turn]]
text = "the follow-up, answered by the daemon"
"#;

/// The session moves to the daemon at the boundary after turn 1, the original process is
/// killed, and the daemon runs turn 2 and a follow-up sent through a client.
fn moves_at_a_turn_boundary(w: &World) {
    let daemon = Daemon::start(w);
    let mut run = chock_run(w, TWO_COMMANDS, "make two files", Stdio::null());
    wait_for_log(w, "the first command is called", |e| {
        count(e, "tool.call", Some("play_1_1")) == 1
    });
    let id = w.session_id();
    detach(w);
    signal(run.id(), rustix::process::Signal::KILL);
    let mut stderr = String::new();
    run.stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    run.wait().unwrap();
    assert!(stderr.contains("was handed over"), "{stderr}");
    rt().block_on(async {
        let mut client = connect(w).await;
        wait_state(&mut client, &id, SessionState::Idle).await;
        send_input(&mut client, &id, "and one more thing").await;
        wait_state(&mut client, &id, SessionState::Idle).await;
        end_session(&mut client, &id).await;
    });
    let events = w.events_exact();
    let handed = handovers(&events);
    assert_eq!(handed.len(), 1, "{events:#?}");
    let h = &handed[0];
    assert_eq!(h["number"], 1);
    assert_eq!(h["how"], "released");
    assert_eq!(h["from"]["pid"], run.id());
    assert_eq!(h["from"]["process"], "chock run");
    assert_eq!(h["to"]["pid"], daemon.pid());
    assert!(h.get("unknown").is_none(), "{h}");
    // Turn 1's command ran once, in the old owner; turn 2's once, in the daemon; the follow-up
    // was a turn of its own; one end, the daemon's.
    let at = events
        .iter()
        .position(|(k, _, _)| k == "session.handover")
        .unwrap();
    assert_eq!(count(&events[..at], "command.result", Some("play_1_1")), 1);
    assert_eq!(count(&events, "tool.call", Some("play_1_1")), 1);
    assert_eq!(count(&events[at..], "command.result", Some("play_2_1")), 1);
    assert_eq!(count(&events[..at], "session.end", None), 0);
    assert_eq!(count(&events, "session.end", None), 1);
    let turns: Vec<u64> = events
        .iter()
        .filter(|(k, _, _)| k == "turn.start")
        .map(|(_, _, d)| d["turn"].as_u64().unwrap())
        .collect();
    assert_eq!(turns, [1, 2, 3, 4], "{events:#?}");
    // Both files are in the session's workspace, the second written through the daemon's
    // overlay over the layout the first process left.
    let upper = w.session().join("workspace/upper");
    assert_eq!(
        std::fs::read_to_string(upper.join("one.txt")).unwrap(),
        "one\n"
    );
    assert_eq!(
        std::fs::read_to_string(upper.join("two.txt")).unwrap(),
        "two\n"
    );
    w.assert_log_verifies();
}

#[test]
fn a_git_session_moves_to_the_daemon_at_a_turn_boundary_and_goes_on_there() {
    let w = World::with_git_project();
    moves_at_a_turn_boundary(&w);
    let meta = std::fs::read_to_string(w.session().join("workspace/meta.json")).unwrap();
    assert!(meta.contains("refs/chock/"), "{meta}");
}

#[test]
fn an_overlay_session_moves_to_the_daemon_at_a_turn_boundary_and_goes_on_there() {
    let w = World::new();
    w.write("readme.txt", "a project without git\n");
    moves_at_a_turn_boundary(&w);
    let meta = std::fs::read_to_string(w.session().join("workspace/meta.json")).unwrap();
    assert!(meta.contains("overlay"), "{meta}");
}

const ASK_SH: &str = "[[rule]]\naction = \"exec.system.*\"\ndecision = \"ask\"\n";
const ONE_ASKING: &str = r#"
[[turn]]
[[turn.call]]
tool = "run_command"
input = { command = "echo asked > asked.txt" }
expect = { is_error = false }

[[turn]]
text = "done"
"#;

#[test]
fn a_question_open_at_the_handover_stays_open_and_a_client_of_the_daemon_answers_it() {
    let w = World::with_git_project_and_policy(Some(ASK_SH));
    let _daemon = Daemon::start(&w);
    let (_master, slave) = open_pty();
    let mut run = chock_run(&w, ONE_ASKING, "ask first", Stdio::from(slave));
    let mut stderr = BufReader::new(run.stderr.take().unwrap());
    read_until(&mut stderr, "the prompt", |seen| seen.contains("[n] no > "));
    let id = w.session_id();
    detach(&w);
    signal(run.id(), rustix::process::Signal::KILL);
    let _ = run.wait();
    let before = w.events();
    assert_eq!(count(&before, "approval.answer", None), 0, "{before:#?}");
    rt().block_on(async {
        let mut client = connect(&w).await;
        let until = Instant::now() + Duration::from_secs(60);
        let question = loop {
            let pending: Pending = client
                .call(&Call::ApprovalsPending(PendingParams {
                    session: Some(id.clone()),
                }))
                .await
                .unwrap();
            if let Some(a) = pending.approvals.iter().find(|a| a.answerable) {
                assert_eq!(pending.approvals.len(), 1, "{pending:?}");
                break a.question.clone();
            }
            assert!(Instant::now() < until, "never answerable: {pending:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert_eq!(question, "q-1");
        let _: Done = client
            .call(&Call::ApprovalsAnswer(AnswerParams {
                session: id.clone(),
                question,
                answer: AnswerKind::AllowOnce,
                reasons: None,
                reply: None,
            }))
            .await
            .unwrap();
        wait_state(&mut client, &id, SessionState::Idle).await;
        end_session(&mut client, &id).await;
    });
    let events = w.events_exact();
    let h = &handovers(&events)[0];
    assert_eq!(h["how"], "released");
    assert_eq!(h["open_questions"], serde_json::json!(["q-1"]));
    // The first process wrote no end: one, the daemon's, after the handover.
    assert_eq!(count(&events, "session.end", None), 1, "{events:#?}");
    assert_eq!(events.last().unwrap().0, "session.end");
    // One question, asked by the first process and answered through the daemon; then the
    // decision, and the command ran once.
    assert_eq!(count(&events, "approval.ask", None), 1, "{events:#?}");
    let answers: Vec<&serde_json::Value> = events
        .iter()
        .filter(|(k, _, _)| k == "approval.answer")
        .map(|(_, _, d)| d)
        .collect();
    assert_eq!(answers.len(), 1, "{events:#?}");
    assert_eq!(answers[0]["question"], "q-1");
    assert_eq!(answers[0]["answer"], "allow_once");
    assert_eq!(count(&events, "command.result", Some("play_1_1")), 1);
    let upper = w.session().join("workspace/upper");
    assert_eq!(
        std::fs::read_to_string(upper.join("asked.txt")).unwrap(),
        "asked\n"
    );
    w.assert_log_verifies();
}

const SLOW: &str = r#"
[[turn]]
[[turn.call]]
tool = "run_command"
input = { command = "sleep 20; echo late > late.txt", timeout_secs = 60 }
expect = { is_error = true, contains = "outcome unknown" }

[[turn]]
text = "noted"
"#;

#[test]
fn a_call_running_when_the_owner_died_is_logged_as_outcome_unknown_and_never_run_again() {
    let w = World::with_git_project();
    let _daemon = Daemon::start(&w);
    let mut run = chock_run(&w, SLOW, "wait a while", Stdio::null());
    wait_for_log(&w, "the command is allowed", |e| {
        count(e, "decision", Some("play_1_1")) == 1
    });
    let id = w.session_id();
    signal(run.id(), rustix::process::Signal::KILL);
    let _ = run.wait();
    detach(&w);
    rt().block_on(async {
        let mut client = connect(&w).await;
        wait_state(&mut client, &id, SessionState::Idle).await;
        end_session(&mut client, &id).await;
    });
    let events = w.events_exact();
    let h = &handovers(&events)[0];
    assert_eq!(h["how"], "found_dead");
    assert_eq!(h["from"]["pid"], run.id());
    assert_eq!(h["unknown"], serde_json::json!(["play_1_1"]));
    assert_eq!(
        count(&events, "tool.call", Some("play_1_1")),
        1,
        "{events:#?}"
    );
    assert_eq!(count(&events, "command.result", Some("play_1_1")), 0);
    let told: Vec<&serde_json::Value> = events
        .iter()
        .filter(|(k, c, _)| k == "tool.result" && c.as_deref() == Some("play_1_1"))
        .map(|(_, _, d)| d)
        .collect();
    assert_eq!(told.len(), 1);
    assert!(
        told[0]["output"]
            .as_str()
            .unwrap()
            .contains("outcome unknown"),
        "{told:?}"
    );
    w.assert_log_verifies();
}

const CONNECTS: &str = r#"
[[turn]]
[[turn.call]]
tool = "run_command"
input = { command = "curl -s --max-time 60 http://127.0.0.1:9/", timeout_secs = 90 }
expect = { is_error = true, contains = "outcome unknown" }

[[turn]]
text = "noted"
"#;

/// A person's question about a running command's connection (`net.connect`, asked after the
/// command's own decision) is open when the owner dies: what asked died with it, so the new owner
/// settles the question as refused, `owner-gone` (an unanswered question is a refusal), instead
/// of leaving it open in the log for nobody to answer; the call is outcome unknown.
#[test]
fn a_connection_question_open_when_the_owner_died_is_settled_as_refused_owner_gone() {
    if !chock_test_support::installed("/usr/bin/curl") {
        return;
    }
    let w = World::with_git_project_and_policy(Some(
        "[[rule]]\naction = \"exec.system.curl\"\ndecision = \"allow\"\n\n\
         [[rule]]\naction = \"net.connect.1.0.0.127.9\"\ndecision = \"ask\"\n",
    ));
    let _daemon = Daemon::start(&w);
    let (_master, slave) = open_pty();
    let mut run = chock_run(&w, CONNECTS, "connect", Stdio::from(slave));
    let mut stderr = BufReader::new(run.stderr.take().unwrap());
    read_until(&mut stderr, "the connection's question", |seen| {
        seen.contains("net.connect.1.0.0.127.9") && seen.ends_with("[n] no > ")
    });
    let id = w.session_id();
    signal(run.id(), rustix::process::Signal::KILL);
    let _ = run.wait();
    detach(&w);
    rt().block_on(async {
        let mut client = connect(&w).await;
        wait_state(&mut client, &id, SessionState::Idle).await;
        let pending: Pending = client
            .call(&Call::ApprovalsPending(PendingParams {
                session: Some(id.clone()),
            }))
            .await
            .unwrap();
        assert!(pending.approvals.is_empty(), "{pending:?}");
        end_session(&mut client, &id).await;
    });
    let events = w.events_exact();
    let h = &handovers(&events)[0];
    assert_eq!(h["how"], "found_dead");
    assert_eq!(h["unknown"], serde_json::json!(["play_1_1"]));
    let asked: Vec<&serde_json::Value> = events
        .iter()
        .filter(|(k, _, _)| k == "approval.ask")
        .map(|(_, _, d)| d)
        .collect();
    assert_eq!(asked.len(), 1, "{events:#?}");
    let question = asked[0]["question"].as_str().unwrap();
    let answers: Vec<(usize, &serde_json::Value)> = events
        .iter()
        .enumerate()
        .filter(|(_, (k, _, _))| k == "approval.answer")
        .map(|(i, (_, _, d))| (i, d))
        .collect();
    assert_eq!(answers.len(), 1, "{events:#?}");
    let (at, answer) = answers[0];
    assert_eq!(answer["question"], question);
    assert_eq!(answer["answer"], "none");
    assert!(answer["by"].is_null());
    assert!(
        answer["reasons"]
            .as_str()
            .unwrap()
            .starts_with("owner-gone:"),
        "{answer}"
    );
    let handover_at = events
        .iter()
        .position(|(k, _, _)| k == "session.handover")
        .unwrap();
    assert!(at > handover_at, "settled by the new owner");
    w.assert_log_verifies();
}
