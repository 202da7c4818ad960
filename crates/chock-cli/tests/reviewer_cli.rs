//! The reviewer model (`agent_review`) through the binary: its call booked in the log as a call
//! outside the turns (counted by the summary and a resumed session's budget, never part of the
//! agent's conversation), and an offline recording that answers reviews.

mod run_support;

use run_support::{
    World, anthropic_server, fake_provider, reply, reviewed_hello, reviewed_read, text,
};

/// The reviewer model's call is a call of the session outside its turns: booked in the log (turn
/// 0, naming the question it answered) so that a resumed session's budget counts it, and left
/// out of the conversation the resumed session sends.
#[test]
fn a_resumed_session_counts_its_reviewers_call_and_leaves_it_out_of_the_conversation() {
    let w = World::new();
    reviewed_hello(&w);
    let mut replies = reviewed_read("a harmless read of a project file", 37);
    replies.push(reply("msg_3", 10, "Still hello.", None));
    let (port, server) = anthropic_server(replies);
    fake_provider(&w, port, "CHOCK_TEST_KEY");
    let key = [("CHOCK_TEST_KEY", "sk-test-review-key-12345")];
    let first = w.chock_with_env(&["run", "--provider", "fake", "read hello.txt"], &key);
    assert_eq!(first.status.code(), Some(0), "{}", text(&first.stderr));
    let events = w.events();
    let asked = events
        .iter()
        .find(|(k, _, _)| k == "approval.ask")
        .expect("the reviewer was asked");
    let question = asked.2["question"].as_str().unwrap().to_string();
    let off_turn = events
        .iter()
        .position(|(k, _, d)| k == "model.request" && d["turn"] == 0)
        .expect("the reviewer's call is a model.request of turn 0");
    assert_eq!(events[off_turn].2["new_message"]["reviewer"], question);
    let booked = &events[off_turn + 1];
    assert_eq!(
        (
            booked.0.as_str(),
            &booked.2["turn"],
            &booked.2["usage"]["input_tokens"]
        ),
        (
            "model.response",
            &serde_json::json!(0),
            &serde_json::json!(37)
        ),
        "its reply is booked with its usage, for the budget of a resumed session"
    );
    let end = events
        .iter()
        .find(|(k, _, _)| k == "session.end")
        .expect("the first run ended");
    assert_eq!(
        end.2["summary"]["input_tokens"], 57,
        "the summary counts the reviewer's 37 input tokens beside the turns' 10 and 10: {}",
        end.2
    );
    let id = w.session_id();
    let second = w.chock_with_env(
        &[
            "run",
            "--provider",
            "fake",
            "--resume",
            &id,
            "read it again",
        ],
        &key,
    );
    assert_eq!(
        second.status.code(),
        Some(0),
        "{}{}",
        text(&second.stdout),
        text(&second.stderr)
    );
    let ends: Vec<serde_json::Value> = w
        .events()
        .into_iter()
        .filter(|(k, _, _)| k == "session.end")
        .map(|(_, _, d)| d["summary"]["input_tokens"].clone())
        .collect();
    assert_eq!(
        ends,
        [serde_json::json!(57), serde_json::json!(67)],
        "the resumed summary goes on from the log's totals"
    );
    let requests = server.join().unwrap();
    let resumed = &requests[3];
    assert!(resumed.contains("It says hello."), "{resumed}");
    assert!(resumed.contains("read it again"), "{resumed}");
    for reviewers in ["a harmless read of a project file", "Act: fs.read"] {
        assert!(
            !resumed.contains(reviewers),
            "the reviewer's exchange is not the agent's conversation: {resumed}"
        );
    }
    w.assert_log_verifies();
}

/// A recording with a `review` answer has a reviewer: `agent_review` is its verdict, offline, and
/// a refusal stops the act.
#[test]
fn an_offline_recording_that_answers_reviews_decides_agent_review() {
    for (verdict, allowed) in [
        (r#"{"allow": true, "reasons": "a project file"}"#, true),
        (r#"{"allow": false, "reasons": "not needed"}"#, false),
    ] {
        let w = World::new();
        reviewed_hello(&w);
        let contains = if allowed { "hello" } else { "refused" };
        let script = w.script(&format!(
            r#"
review = '{verdict}'
[[turn]]
[[turn.call]]
tool = "read_file"
input = {{ path = "hello.txt" }}
expect = {{ is_error = {}, contains = "{contains}" }}

[[turn]]
text = "done"
"#,
            !allowed
        ));
        let out = w.chock(&["run", "--json", "--provider", &script, "read hello.txt"]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
        let approval = text(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .find(|e| e["type"] == "item_started" && e["kind"]["kind"] == "approval")
            .expect("the question is a live item");
        assert_eq!(approval["turn"], 1, "it names its turn: {approval}");
        let events = w.events();
        let answer = events
            .iter()
            .find(|(k, _, _)| k == "approval.answer")
            .expect("the recording's reviewer answered");
        let expected = if allowed { "allow_once" } else { "deny" };
        assert_eq!(answer.2["answer"], expected, "{}", answer.2);
        assert!(answer.2["by"].as_str().unwrap().starts_with("reviewer:"));
        w.assert_log_verifies();
    }
}
