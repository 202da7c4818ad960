//! `chock acp` driven by a scripted editor over real pipes: the session's streamed updates, its
//! questions as `session/request_permission`, the apply offered at the turn's end (yes writes the
//! project, no leaves it untouched), `session/cancel` killing a long command, a question nobody
//! answers refused, the editor's MCP servers started confined (and a note for those not started), `session/load`, and errors that name the
//! method and field. The editor offers its file and terminal methods every time; Chock must never
//! call them.

mod acp_support;
mod run_support;

use acp_support::*;
use run_support::*;
use serde_json::{Value, json};

/// `fs.write` asks, so the recorded model's write is a question for the editor.
const ASK_WRITES: &str = "[[rule]]\naction = \"fs.write\"\ndecision = \"ask\"\n";

/// A model that plans, runs a command, writes a note, and says it is done.
const NOTE_SCRIPT: &str = r#"
[[turn]]
text = "I'll check the project, then add a note."
[[turn.call]]
tool = "update_plan"
input = { steps = [{ step = "check", status = "in_progress" }, { step = "write the note" }] }
[[turn.call]]
tool = "run_command"
input = { command = "echo checked" }
[[turn.call]]
tool = "write_file"
input = { path = "NOTES.md", content = "calc.sh subtracts; test.sh expects a sum\n" }

[[turn]]
text = "Done: NOTES.md says what is wrong."
"#;

/// The world's filters, and the ids that would vary with another clock or build: session and
/// apply ids, digests, Chock's version.
fn transcript_settings(w: &World) -> insta::Settings {
    let mut s = w.settings();
    s.add_filter(r"\d{8}T\d{6}Z-\d{6}", "[SESSION]");
    s.add_filter(r"[0-9a-f]{64}", "[DIGEST]");
    s.add_filter(r#""version":"[^"]*""#, r#""version":"[VERSION]""#);
    s
}

fn no_requests(_: &mut Editor, frame: &Value) {
    panic!("unexpected request from chock acp: {frame}");
}

/// Chock never asks the editor to read, write or run anything, whatever the editor offered.
fn assert_never_used_the_editor_to_act(frames: &[&Value]) {
    for method in requests_made(frames) {
        assert!(
            !method.starts_with("fs/") && !method.starts_with("terminal/"),
            "chock acp asked the editor to act: {method}"
        );
    }
}

/// Drives one prompt of the note script, answering the write's question with `write` and the
/// apply's with `apply`; returns the world, the prompt's response and the editor.
fn note_session(write: &'static str, apply: &'static str) -> (World, Value, Editor) {
    let w = World::with_git_project_and_policy(Some(ASK_WRITES));
    let provider = w.script(NOTE_SCRIPT);
    let mut ed = Editor::start(&w, &["--provider", &provider]);
    ed.initialize();
    let session = ed.new_session(&w);
    let id = ed.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "add a note about the bug"}]}),
    );
    let response = ed.until_response(id, |ed, frame| {
        assert_eq!(frame["method"], "session/request_permission", "{frame}");
        let call = frame["params"]["toolCall"]["toolCallId"].as_str().unwrap();
        let answer = if call.starts_with("apply-") {
            apply
        } else {
            write
        };
        ed.choose(frame, answer);
    });
    (w, response, ed)
}

#[test]
fn an_editor_drives_a_session_and_applies_the_turns_work_when_allowed() {
    let (w, response, ed) = note_session("allow_once", "allow_once");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(
        w.read("NOTES.md"),
        "calc.sh subtracts; test.sh expects a sum\n"
    );
    let frames = ed.received();
    assert_never_used_the_editor_to_act(&frames);
    assert_eq!(
        requests_made(&frames),
        ["session/request_permission", "session/request_permission"]
    );
    // The command's tool call went pending → in_progress → completed, with its output.
    let command = updates(&frames, "tool_call")
        .into_iter()
        .find(|u| u["kind"] == "execute")
        .unwrap()["toolCallId"]
        .clone();
    let statuses: Vec<&Value> = updates(&frames, "tool_call_update")
        .into_iter()
        .filter(|u| u["toolCallId"] == command && u.get("status").is_some())
        .map(|u| &u["status"])
        .collect();
    assert_eq!(statuses, ["in_progress", "completed"]);
    assert_eq!(updates(&frames, "plan").len(), 1);
    assert!(!updates(&frames, "agent_message_chunk").is_empty());
    let (status, _, transcript) = ed.close();
    assert_eq!(status, Some(0));
    // The apply was decided and logged like any act, before the write.
    let events = w.events();
    let apply = events
        .iter()
        .position(|(k, _, d)| k == "decision" && d["action"] == "workspace.apply")
        .expect("a workspace.apply decision");
    assert_eq!(events[apply].2["allowed"], true);
    let record = events
        .iter()
        .position(|(k, _, _)| k == "workspace.apply")
        .expect("the apply's record");
    assert!(apply < record);
    w.assert_log_verifies();
    transcript_settings(&w).bind(|| {
        insta::assert_snapshot!("acp_transcript_allowed", render(&transcript));
    });
}

#[test]
fn a_rejected_apply_leaves_the_project_untouched() {
    let (w, response, ed) = note_session("allow_always", "reject_once");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(!w.project.join("NOTES.md").exists());
    let frames = ed.received();
    assert_never_used_the_editor_to_act(&frames);
    let offer = updates(&frames, "tool_call_update")
        .into_iter()
        .rfind(|u| u["toolCallId"] == "apply-1")
        .unwrap()
        .clone();
    assert_eq!(offer["status"], "failed");
    assert!(
        offer["content"][0]["content"]["text"]
            .as_str()
            .unwrap()
            .contains("chock apply"),
        "{offer}"
    );
    drop(ed);
    let events = w.events();
    let apply = events
        .iter()
        .find(|(k, _, d)| k == "decision" && d["action"] == "workspace.apply")
        .unwrap();
    assert_eq!(apply.2["allowed"], false);
    assert!(!events.iter().any(|(k, _, _)| k == "workspace.apply"));
    // The work stays reviewable in the session.
    let diff = w.chock(&["diff", &w.session_id()]);
    assert!(
        text(&diff.stdout).contains("NOTES.md"),
        "{}",
        text(&diff.stdout)
    );
}

#[test]
fn cancel_during_a_long_command_ends_the_turn_as_cancelled_and_kills_the_command() {
    let w = World::with_git_project();
    let provider = w.script(
        r#"
[[turn]]
[[turn.call]]
tool = "run_command"
input = { command = "echo started; sleep 31.4159; echo never > late.txt" }

[[turn]]
text = "not reached"
"#,
    );
    let mut ed = Editor::start(&w, &["--provider", &provider]);
    ed.initialize();
    let session = ed.new_session(&w);
    let id = ed.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "wait a while"}]}),
    );
    ed.until(|f| {
        f["params"]["update"]["sessionUpdate"] == "tool_call_update"
            && f["params"]["update"]["content"][0]["content"]["text"]
                .as_str()
                .is_some_and(|t| t.contains("started"))
    });
    // `echo` has printed; the shell starts the sleep a moment later.
    let running = (0..50).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(100));
        sleepers().len() == 1
    });
    assert!(running, "the command runs: {:?}", sleepers());
    ed.notify("session/cancel", json!({"sessionId": session}));
    let response = ed.until_response(id, no_requests);
    assert_eq!(response["result"]["stopReason"], "cancelled", "{response}");
    let gone = (0..50).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(100));
        sleepers().is_empty()
    });
    assert!(gone, "the command still runs: {:?}", sleepers());
    let frames = ed.received();
    let last = (*updates(&frames, "tool_call_update").last().unwrap()).clone();
    assert_eq!(last["status"], "failed", "{last}");
    assert!(
        requests_made(&frames).is_empty(),
        "nothing to apply, nothing asked"
    );
    drop(ed);
    assert!(
        w.events()
            .iter()
            .any(|(k, _, d)| k == "turn.end" && d["reason"] == "interrupted")
    );
}

/// Processes whose command line holds the long command's unusual sleep.
fn sleepers() -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| std::fs::read(e.ok()?.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.starts_with("sleep 31.4159"))
        .collect()
}

#[test]
fn a_question_the_editor_does_not_answer_is_a_refusal() {
    let w = World::with_git_project_and_policy(Some(ASK_WRITES));
    let provider = w.script(
        r#"
[[turn]]
[[turn.call]]
tool = "write_file"
input = { path = "x.txt", content = "x" }
expect = { is_error = true, contains = "refused" }

[[turn]]
text = "could not write"
"#,
    );
    let mut ed = Editor::start(&w, &["--provider", &provider, "--answer-timeout", "1"]);
    ed.initialize();
    let session = ed.new_session(&w);
    let id = ed.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "write x"}]}),
    );
    let mut asked = Vec::new();
    // The question is never answered.
    let response = ed.until_response(id, |_, f| asked.push(f.clone()));
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(asked.len(), 1, "only the write was asked about: {asked:?}");
    let frames = ed.received();
    let write = (*updates(&frames, "tool_call_update").last().unwrap()).clone();
    assert_eq!(write["status"], "failed", "{write}");
    drop(ed);
    let events = w.events();
    let answer = events
        .iter()
        .find(|(k, _, _)| k == "approval.answer")
        .unwrap();
    assert_eq!(answer.2["answer"], "none", "{}", answer.2);
    assert!(!w.project.join("x.txt").exists());
}

#[test]
#[cfg_attr(
    not(feature = "mcp-servers"),
    ignore = "needs the MCP servers under /opt/chock-mcp: the `mcp-servers` feature (.ci/run tests with --all-features)"
)]
fn the_editors_mcp_servers_start_confined_like_chocks_own() {
    let time = std::path::PathBuf::from(
        std::env::var("CHOCK_MCP_PREFIX").unwrap_or_else(|_| "/opt/chock-mcp".into()),
    );
    let time_bin = time.join("venv/bin/mcp-server-time");
    if !chock_test_support::installed(&time_bin) {
        return;
    }
    let w = World::with_git_project();
    // The real server is outside the sandbox's system directories: the project declares it.
    // The editor's HTTP server is reached by the host through the broker: its destination is
    // denied here, so it fails before any connection, decided and logged.
    w.write(
        "chock.toml",
        &format!(
            "[sandbox]\nread = [\"{}\"]\n\n[[rule]]\naction = \"net.connect.1.0.0.127.9\"\ndecision = \"deny\"\n",
            time.display()
        ),
    );
    w.git(&["add", "-A"]);
    w.git(&["commit", "-q", "-m", "policy"]);
    let provider = w.script("[[turn]]\ntext = \"hi\"\n");
    let marker = w.base.join("mcp-started");
    let mut ed = Editor::start(&w, &[]);
    ed.initialize();
    let id = ed.request(
        "session/new",
        json!({
            "cwd": w.project,
            "mcpServers": [
                {"name": "files", "command": "/bin/sh", "args": ["-c", format!("touch {}", marker.display())], "env": []},
                {"name": "time", "command": time_bin, "args": [], "env": [{"name": "TOKEN", "value": "secret-value"}]},
                {"name": "web", "type": "http", "url": "http://127.0.0.1:9/mcp", "headers": []}
            ],
            "_meta": {"chock": {"provider": provider}}
        }),
    );
    let response = ed.until_response(id, no_requests);
    assert!(response["result"]["sessionId"].is_string(), "{response}");
    let note = ed.until(|f| f["params"]["update"]["sessionUpdate"] == "agent_message_chunk");
    let said = note["params"]["update"]["content"]["text"]
        .as_str()
        .unwrap();
    assert!(said.contains("env values were not passed"), "{said}");
    let (status, _stderr, _) = ed.close();
    assert_eq!(status, Some(0));
    // The shell "server" ran confined: its write outside the project never landed.
    assert!(
        !marker.exists(),
        "the editor's MCP server wrote outside its sandbox"
    );
    let servers: Vec<serde_json::Value> = w
        .events()
        .into_iter()
        .filter(|(k, _, _)| k == "mcp.server")
        .map(|(_, _, d)| d)
        .collect();
    assert!(
        servers
            .iter()
            .any(|d| d["phase"] == "started" && d["server"] == "time" && d["origin"] == "editor"),
        "{servers:?}"
    );
    assert!(
        servers
            .iter()
            .any(|d| d["phase"] == "failed" && d["server"] == "files"),
        "{servers:?}"
    );
    assert!(
        servers.iter().any(|d| d["phase"] == "failed"
            && d["server"] == "web"
            && d["error"]
                .as_str()
                .is_some_and(|e| e.contains("net.connect.1.0.0.127.9"))),
        "the editor's HTTP server is reached through the broker, which refused it: {servers:?}"
    );
    let logged = w
        .events()
        .into_iter()
        .any(|(k, _, d)| k == "note" && d["text"].as_str().is_some_and(|t| t.contains("MCP")));
    assert!(logged, "the note is in the session log");
}

#[test]
fn load_replays_the_conversation_and_goes_on() {
    let w = World::with_git_project();
    let provider =
        w.script("[[turn]]\ntext = \"first answer\"\n\n[[turn]]\ntext = \"second answer\"\n");
    let mut ed = Editor::start(&w, &["--provider", &provider]);
    ed.initialize();
    let session = ed.new_session(&w);
    let id = ed.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "first question"}]}),
    );
    ed.until_response(id, no_requests);
    assert_eq!(ed.close().0, Some(0));

    let mut ed = Editor::start(&w, &["--provider", &provider]);
    ed.initialize();
    let id = ed.request(
        "session/load",
        json!({"sessionId": session, "cwd": w.project, "mcpServers": []}),
    );
    let loaded = ed.until_response(id, no_requests);
    assert_eq!(loaded["result"], json!({}), "{loaded}");
    let frames = ed.received();
    let said: Vec<(&str, &str)> = frames
        .iter()
        .filter(|f| f["method"] == "session/update")
        .map(|f| &f["params"]["update"])
        .map(|u| {
            (
                u["sessionUpdate"].as_str().unwrap(),
                u["content"]["text"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        said,
        [
            ("user_message_chunk", "first question"),
            ("agent_message_chunk", "first answer")
        ]
    );
    let id = ed.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "and then?"}]}),
    );
    let before = ed.received().len();
    let response = ed.until_response(id, no_requests);
    assert_eq!(response["result"]["stopReason"], "end_turn");
    let frames = ed.received();
    let answer: String = updates(&frames[before..], "agent_message_chunk")
        .iter()
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert_eq!(answer, "second answer");
    let id = ed.request(
        "session/load",
        json!({"sessionId": "20260101T000000Z-999999", "cwd": w.project, "mcpServers": []}),
    );
    let unknown = ed.until_response(id, no_requests);
    assert_eq!(unknown["error"]["code"], -32002, "{unknown}");
    assert_eq!(ed.close().0, Some(0));
}

#[test]
fn errors_name_the_method_and_the_field() {
    let w = World::with_git_project();
    let mut ed = Editor::start(&w, &[]);
    let early = ed.request("session/new", json!({"cwd": w.project, "mcpServers": []}));
    ed.until_response(early, no_requests);
    ed.initialize();
    let calls = [
        ("session/new", json!({"mcpServers": []})),
        (
            "session/new",
            json!({"cwd": "relative/dir", "mcpServers": []}),
        ),
        ("session/new", json!({"cwd": w.project, "mcpServers": []})),
        (
            "session/prompt",
            json!({"sessionId": "nope", "prompt": [{"type": "text", "text": "x"}]}),
        ),
        (
            "session/prompt",
            json!({"sessionId": "nope", "prompt": [{"type": "image", "mimeType": "image/png", "data": ""}]}),
        ),
        ("authenticate", json!({"methodId": "oauth"})),
        ("session/set_mode", json!({})),
    ];
    for (method, params) in calls {
        let id = ed.request(method, params);
        let response = ed.until_response(id, no_requests);
        assert!(response.get("error").is_some(), "{method}: {response}");
    }
    ed.send_raw("{not json");
    ed.recv();
    let (status, _, transcript) = ed.close();
    assert_eq!(status, Some(0));
    transcript_settings(&w).bind(|| {
        insta::assert_snapshot!("acp_errors", render(&transcript));
    });
}

/// An editor's session has a reviewer model like any other, though it is built before its task is
/// known: `agent_review` is the session's own model judging the act against the prompt.
#[test]
fn agent_review_in_an_editor_session_is_the_reviewer_models_verdict_on_the_prompt() {
    let w = World::with_git_project_and_policy(Some(REVIEWED_READS));
    w.write("hello.txt", "hello\n");
    let (port, server) = anthropic_server(reviewed_read("reading a project file is harmless", 10));
    fake_provider(&w, port, "CHOCK_TEST_KEY");
    let mut ed = Editor::start_with_env(
        &w,
        &["--provider", "fake"],
        &[("CHOCK_TEST_KEY", "sk-test-review-key-12345")],
    );
    ed.initialize();
    let session = ed.new_session(&w);
    let id = ed.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "what does hello.txt say?"}]}),
    );
    let response = ed.until_response(id, no_requests);
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let (status, stderr, _) = ed.close();
    assert_eq!(status, Some(0), "{stderr}");
    // The log first: without a reviewer the server would wait for a request that never comes.
    let events = w.events();
    let answer = events
        .iter()
        .find(|(k, _, _)| k == "approval.answer")
        .expect("the reviewer answered");
    assert_eq!(answer.2["answer"], "allow_once", "{}", answer.2);
    assert!(answer.2["by"].as_str().unwrap().starts_with("reviewer:"));
    let read = events
        .iter()
        .find(|(k, _, _)| k == "tool.result")
        .expect("the read ran");
    assert_eq!(read.2["is_error"], false, "{}", read.2);
    let requests = server.join().unwrap();
    assert!(
        requests[1].contains("Act: fs.read") && requests[1].contains("what does hello.txt say?"),
        "the reviewer judges the act against the prompt: {}",
        requests[1]
    );
    w.assert_log_verifies();
}

/// A session stopped by its budget ends `out_of_budget` when the editor closes it, as through
/// every other front end (not `done`); its prompt stops with ACP's nearest word, `max_tokens`.
#[test]
fn a_session_stopped_by_its_budget_ends_out_of_budget_when_the_editor_closes() {
    let w = World::with_git_project_and_policy(Some("[budget]\ntokens = 1\n"));
    let provider = w.script("[[turn]]\ntext = \"never asked\"\n");
    let mut ed = Editor::start(&w, &["--provider", &provider]);
    ed.initialize();
    let session = ed.new_session(&w);
    let id = ed.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "spend"}]}),
    );
    let response = ed.until_response(id, no_requests);
    assert_eq!(response["result"]["stopReason"], "max_tokens", "{response}");
    let (status, _, _) = ed.close();
    assert_eq!(status, Some(0));
    let events = w.events();
    assert!(!events.iter().any(|(k, _, _)| k == "model.request"));
    let end = events
        .iter()
        .find(|(k, _, _)| k == "session.end")
        .expect("the session ended");
    assert_eq!(end.2["reason"], "out_of_budget", "{end:?}");
    assert_eq!(end.2["summary"]["ended"], "out_of_budget", "{end:?}");
}

/// The daemon's adopt (`chock detach`) asks a session's owner to let go with SIGUSR1. `chock acp`
/// holds the editor's sessions and does not hand them over: the signal, while a session is idle
/// between prompts, neither ends the process nor the session, and the next prompt runs here.
#[test]
fn a_handover_request_leaves_the_editors_sessions_where_they_are() {
    let w = World::with_git_project();
    let provider = w.script("[[turn]]\ntext = \"first\"\n\n[[turn]]\ntext = \"second\"\n");
    let mut ed = Editor::start(&w, &["--provider", &provider]);
    ed.initialize();
    let session = ed.new_session(&w);
    let prompt = |ed: &mut Editor, text: &str| {
        let id = ed.request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
        );
        ed.until_response(id, no_requests)
    };
    let first = prompt(&mut ed, "one");
    assert_eq!(first["result"]["stopReason"], "end_turn", "{first}");
    let pid = rustix::process::Pid::from_raw(i32::try_from(ed.pid()).unwrap()).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::USR1).unwrap();
    let second = prompt(&mut ed, "two");
    assert_eq!(second["result"]["stopReason"], "end_turn", "{second}");
    let (status, stderr, _) = ed.close();
    assert_eq!(status, Some(0), "{stderr}");
    assert!(
        stderr.contains("an editor's sessions are not handed over"),
        "{stderr}"
    );
    let events = w.events();
    assert!(!events.iter().any(|(k, _, _)| k == "session.handover"));
    let ends = events.iter().filter(|(k, _, _)| k == "session.end").count();
    assert_eq!(ends, 1, "{events:?}");
}
