//! A server's elicitation (tests/servers/hostile.py on the real `mcp` Python SDK, spoken to in
//! 2026-07-28, so asked in the call's `input_required` result) is a question to the session's
//! answerers: a form's answer gets the schema's defaults for what it leaves out, a page to open is
//! shown and accepted with `accept`, and nobody to ask declines.

mod support;

use std::sync::{Arc, Mutex};

use chock_mcp::CallOutcome;
use serde_json::{Value, json};
use support::{Person, World, hostile_script, python_server, user_server};

const RULES: &str = "[[rule]]\naction = \"mcp.hostile.tool.ask_person\"\ndecision = \"allow\"\n\
                     [[rule]]\naction = \"mcp.hostile.network\"\ndecision = \"deny\"\n";

/// The server's view of the client's answer to `ask_person` in `mode`, asked of `person`.
fn asked(person: Option<Arc<Person>>, mode: &str) -> Option<Value> {
    let raw = python_server(&hostile_script(), &[])?;
    let world = World::new(RULES);
    let pipeline = world.pipeline(person);
    let hub = world.start(&[user_server("hostile", &raw)], &pipeline, false, None);
    assert_eq!(hub.servers().len(), 1, "{:?}", hub.failures());
    let tool = hub
        .offered(&pipeline)
        .into_iter()
        .find(|t| t.def().name == "ask_person")
        .expect("ask_person offered");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let out = rt
        .block_on(tool.call("c1", &json!({"mode": mode}), &pipeline))
        .unwrap();
    let CallOutcome::Answered { text, is_error } = out else {
        panic!("{out:?}")
    };
    assert!(!is_error, "{text}");
    Some(serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}")))
}

fn replying(text: &str) -> Arc<Person> {
    Arc::new(Person {
        yes: true,
        asked: Mutex::default(),
        reply: Some(text.to_string()),
    })
}

#[test]
fn a_form_is_answered_with_the_schemas_defaults_for_what_the_person_left_out() {
    let person = replying(r#"{"name": "Grace"}"#);
    let Some(answer) = asked(Some(Arc::clone(&person)), "form") else {
        return;
    };
    assert_eq!(
        answer,
        json!({"action": "accept", "content": {"name": "Grace", "age": 36}}),
        "the person's name, the schema's default age, no invented nickname"
    );
    let questions = person.questions();
    assert_eq!(questions.len(), 1, "{questions:?}");
    assert!(
        questions[0].text.contains("Who are you?"),
        "{}",
        questions[0].text
    );
    assert!(questions[0].action.is_none(), "a question, not an act");
}

#[test]
fn a_page_to_open_is_shown_and_accepted_by_the_person() {
    let person = replying("accept");
    let Some(answer) = asked(Some(Arc::clone(&person)), "url") else {
        return;
    };
    assert_eq!(answer, json!({"action": "accept"}));
    let questions = person.questions();
    assert!(
        questions[0].text.contains("https://example.com/sign-in"),
        "{}",
        questions[0].text
    );
}

#[test]
fn with_nobody_to_ask_an_elicitation_is_declined() {
    let Some(answer) = asked(None, "form") else {
        return;
    };
    assert_eq!(answer, json!({"action": "decline"}));
}
