//! The offline player: the built-in demo and `script:FILE` recordings, played through `Provider`.

mod support;

use std::io::Write;

use chock_provider::{
    Block, Message, Player, Provider, ProviderError, Request, Response, Role, StopReason,
    StreamEvent, ToolSpec,
};
use serde_json::json;
use support::collector;

const AGENT_TOOLS: &[&str] = &[
    "read_file",
    "write_file",
    "edit_file",
    "list",
    "glob",
    "grep",
    "run_command",
    "update_plan",
    "ask_user",
    "set_title",
    "restrict_self",
    "request_action",
    "read_guidance",
];

fn request() -> Request {
    Request {
        model: "offline".into(),
        messages: vec![Message::user_text("take some notes")],
        tools: AGENT_TOOLS
            .iter()
            .map(|name| ToolSpec {
                name: (*name).into(),
                description: String::new(),
                input_schema: json!({"type": "object"}),
            })
            .collect(),
        max_tokens: 1000,
        ..Request::default()
    }
}

/// Plays one turn and appends the reply and the given results (one per call, in order) to the request.
async fn turn(player: &Player, req: &mut Request, results: &[(&str, bool)]) -> Response {
    let (_, mut sink) = collector();
    let response = player.stream(req, &mut sink).await.expect("turn");
    let calls: Vec<String> = response
        .tool_calls()
        .map(|(id, _, _)| id.to_owned())
        .collect();
    req.messages
        .push(Message::assistant(response.content.clone()));
    if !calls.is_empty() {
        let content = calls
            .iter()
            .zip(results)
            .map(|(id, (text, is_error))| Block::ToolResult {
                tool_use_id: id.clone(),
                content: (*text).into(),
                is_error: *is_error,
            })
            .collect();
        req.messages.push(Message {
            role: Role::User,
            content,
        });
    }
    response
}

#[tokio::test]
async fn demo_lists_writes_reads_edits_runs_and_finishes() {
    let player = Player::demo();
    assert_eq!(player.name(), "demo");
    let mut req = request();
    let mut tools = Vec::new();
    let results = [
        ("(empty directory)", false),
        ("wrote chock-demo.md", false),
        ("1 # Notes\n5 - status: draft\n", false),
        ("edited chock-demo.md", false),
        ("chock-demo.md\n6 chock-demo.md", false),
    ];
    for result in results {
        let response = turn(&player, &mut req, &[result]).await;
        assert_eq!(response.stop_reason, StopReason::ToolUse);
        tools.extend(
            response
                .tool_calls()
                .map(|(_, name, input)| (name.to_owned(), input.clone())),
        );
    }
    let names: Vec<&str> = tools.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "list",
            "write_file",
            "read_file",
            "edit_file",
            "run_command"
        ]
    );
    assert_eq!(
        tools[3].1,
        json!({"path": "chock-demo.md", "old": "- status: draft", "new": "- status: reviewed"})
    );
    assert!(
        tools[1].1["content"]
            .as_str()
            .expect("content")
            .contains("- status: draft")
    );

    let last = turn(&player, &mut req, &[]).await;
    assert_eq!(last.stop_reason, StopReason::EndTurn);
    assert!(last.text().starts_with("Done."), "{}", last.text());
    assert_eq!(last.tool_calls().count(), 0);

    // One more request than the recording holds ends the session with a clear error.
    let (_, mut sink) = collector();
    req.messages.push(Message::user_text("anything else?"));
    let error = player.stream(&req, &mut sink).await.expect_err("ran out");
    assert_eq!(
        error.to_string(),
        "offline player `demo`: the recording has 6 turns and all were played; the session asked for turn 7"
    );
}

#[tokio::test]
async fn demo_streams_its_text_and_announces_calls() {
    let (events, mut sink) = collector();
    Player::demo()
        .stream(&request(), &mut sink)
        .await
        .expect("turn");
    let events = events.lock().expect("events").clone();
    assert_eq!(
        support::streamed_text(&events),
        "I'll start by looking at what is in the project."
    );
    assert!(events.contains(&StreamEvent::ToolCallStarted {
        id: "play_1_1".into(),
        name: "list".into()
    }));
}

#[tokio::test]
async fn a_failed_expectation_stops_the_session() {
    let player = Player::demo();
    let mut req = request();
    turn(&player, &mut req, &[("listing", false)]).await;
    turn(&player, &mut req, &[("permission denied: fs.write", true)]).await;
    let (_, mut sink) = collector();
    let error = player
        .stream(&req, &mut sink)
        .await
        .expect_err("expectation");
    assert_eq!(
        error.to_string(),
        "offline player `demo`: turn 2, call 1 (`write_file`): expected is_error = false, got an error: permission denied: fs.write"
    );
}

fn script(text: &str) -> (tempfile::NamedTempFile, String) {
    let mut file = tempfile::NamedTempFile::new().expect("temp file");
    file.write_all(text.as_bytes()).expect("write");
    let spec = format!("script:{}", file.path().display());
    (file, spec)
}

#[tokio::test]
async fn a_script_plays_its_turns_and_checks_contains() {
    let (_file, spec) = script(
        r#"
name = "mine"
[[turn]]
[[turn.call]]
tool = "run_command"
input = { command = "cargo test", timeout_secs = 600 }
expect = { contains = "test result: ok" }
[[turn.call]]
tool = "grep"
input = { pattern = "TODO" }

[[turn]]
text = "All tests pass."
"#,
    );
    let player = Player::from_spec(&spec)
        .expect("a script spec")
        .expect("valid");
    let mut req = request();
    let first = turn(
        &player,
        &mut req,
        &[("test result: FAILED", false), ("", false)],
    )
    .await;
    assert_eq!(
        first.content.len(),
        2,
        "no text block when the turn has no text"
    );
    let (_, mut sink) = collector();
    let error = player
        .stream(&req, &mut sink)
        .await
        .expect_err("contains fails");
    assert!(
        error
            .to_string()
            .contains("expected the result to contain \"test result: ok\""),
        "{error}"
    );
}

#[tokio::test]
async fn a_call_the_session_does_not_offer_is_an_error() {
    let (_file, spec) = script(
        "[[turn]]\n[[turn.call]]\ntool = \"ask_user\"\ninput = { question = \"ok?\" }\n[[turn]]\ntext = \"bye\"\n",
    );
    let player = Player::from_spec(&spec).expect("spec").expect("valid");
    let mut req = request();
    req.tools.retain(|t| t.name != "ask_user");
    let (_, mut sink) = collector();
    let error = player
        .stream(&req, &mut sink)
        .await
        .expect_err("not offered");
    assert!(
        error
            .to_string()
            .contains("`ask_user`, which this session does not offer"),
        "{error}"
    );
}

#[test]
fn bad_recordings_are_refused_with_file_turn_and_field() {
    let cases = [
        (
            "[[turn]]\n[[turn.call]]\ntool = \"list\"\ninput = { path = \".\" }\n",
            "the last turn must have no calls",
        ),
        (
            "[[turn]]\n",
            "turn 1 has neither `text` nor a `[[turn.call]]`",
        ),
        ("name = \"x\"\n", "it has no `[[turn]]`"),
        (
            "[[turn]]\ntext = \"x\"\nspeed = 3\n",
            "unknown field `speed`",
        ),
    ];
    for (text, expected) in cases {
        let (file, spec) = script(text);
        let error = Player::from_spec(&spec)
            .expect("a script spec")
            .expect_err(expected);
        let message = error.to_string();
        assert!(
            matches!(error, ProviderError::Recording { .. }),
            "{message}"
        );
        assert!(
            message.contains(&file.path().display().to_string()),
            "{message}"
        );
        assert!(
            message.contains(expected),
            "expected {expected:?} in {message}"
        );
    }
    let missing = Player::from_spec("script:/nonexistent/recording.toml")
        .expect("spec")
        .expect_err("missing file");
    assert!(
        missing
            .to_string()
            .starts_with("recording /nonexistent/recording.toml: cannot read it"),
        "{missing}"
    );
    assert!(Player::from_spec("anthropic").is_none());
}

#[tokio::test]
async fn a_tool_less_request_gets_the_review_answer_without_using_a_turn() {
    let (_file, spec) = script(
        "review = '{\"allow\": false, \"reasons\": \"touches ~/.ssh\"}'\n[[turn]]\n[[turn.call]]\ntool = \"list\"\ninput = { path = \".\" }\nexpect = { contains = \"b\" }\n[[turn]]\ntext = \"done\"\n",
    );
    let player = Player::from_spec(&spec).expect("spec").expect("valid");
    let reviewer = Request {
        messages: vec![Message::user_text("may it run `cat ~/.ssh/id_rsa`?")],
        ..Request::default()
    };
    let (_, mut sink) = collector();
    let verdict = player.stream(&reviewer, &mut sink).await.expect("review");
    assert_eq!(
        verdict.text(),
        "{\"allow\": false, \"reasons\": \"touches ~/.ssh\"}"
    );
    // The session's own first turn is still the first recorded one.
    let mut req = request();
    let first = turn(&player, &mut req, &[("a\nb", false)]).await;
    assert_eq!(
        first
            .tool_calls()
            .map(|(_, name, _)| name.to_owned())
            .collect::<Vec<_>>(),
        ["list"]
    );
    // A note the harness adds after the results does not hide them from the checks.
    req.messages
        .push(Message::user_text("(a background command finished)"));
    let last = turn(&player, &mut req, &[]).await;
    assert_eq!(last.text(), "done");
}
