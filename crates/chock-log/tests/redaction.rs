//! The redaction funnel: no known secret reaches log.jsonl, wherever it hides in an event.

use chock_log::{EventKind, Log, LogError, MIN_SECRET_LEN, SessionHeader, read_events};
use serde_json::json;

const KEY: &str = "sk-ant-api03-SECRETSECRET";
const PASSWORD: &str = "correct horse battery";

#[test]
fn secrets_never_reach_the_file() {
    let root = tempfile::tempdir().unwrap();
    let header = SessionHeader {
        secrets: vec![KEY.into()],
        provider: Some(format!("x-api-key: {KEY}")),
        ..Default::default()
    };
    let log = Log::create(root.path(), header).unwrap();
    log.add_secret(PASSWORD).unwrap();

    log.append(
        EventKind::ToolCall,
        Some(&format!("call-{PASSWORD}")),
        json!({
            "tool": "run_command",
            "input": {"argv": ["mysql", format!("--password={PASSWORD}")], "env": {KEY: "as a key"}},
            "nested": [[{"deeper": format!("Bearer {KEY} and {PASSWORD}")}]],
        }),
    )
    .unwrap();
    log.append(EventKind::ToolResult, None, json!(format!("echoed {KEY}")))
        .unwrap();

    let text = std::fs::read_to_string(log.dir().join("log.jsonl")).unwrap();
    assert!(!text.contains(KEY), "{text}");
    assert!(!text.contains(PASSWORD), "{text}");

    let events = read_events(log.dir()).unwrap();
    assert_eq!(events[0].data["provider"], "x-api-key: [REDACTED]");
    assert_eq!(events[1].call_id.as_deref(), Some("call-[REDACTED]"));
    assert_eq!(events[1].data["input"]["argv"][1], "--password=[REDACTED]");
    assert_eq!(events[1].data["input"]["env"]["[REDACTED]"], "as a key");
    assert_eq!(
        events[1].data["nested"][0][0]["deeper"],
        "Bearer [REDACTED] and [REDACTED]"
    );
    // A non-object payload is kept under `value`, redacted too.
    assert_eq!(events[2].data, json!({"value": "echoed [REDACTED]"}));
    assert!(chock_log::verify(log.dir()).unwrap().is_intact());
}

#[test]
fn a_too_short_secret_is_refused_and_nothing_is_redacted_for_it() {
    let root = tempfile::tempdir().unwrap();
    let log = Log::create(root.path(), SessionHeader::default()).unwrap();
    let short = "a".repeat(MIN_SECRET_LEN - 1);
    match log.add_secret(&short) {
        Err(LogError::SecretTooShort { len, min }) => {
            assert_eq!((len, min), (MIN_SECRET_LEN - 1, MIN_SECRET_LEN))
        }
        other => panic!("short secret accepted: {other:?}"),
    }
    log.append(EventKind::Note, None, json!({"text": "aaaaa banana"}))
        .unwrap();
    assert_eq!(
        read_events(log.dir()).unwrap()[1].data["text"],
        "aaaaa banana"
    );
}

#[test]
fn a_too_short_secret_in_the_header_refuses_the_session() {
    let root = tempfile::tempdir().unwrap();
    let header = SessionHeader {
        secrets: vec!["pw".into()],
        ..Default::default()
    };
    assert!(matches!(
        Log::create(root.path(), header),
        Err(LogError::SecretTooShort { .. })
    ));
}

#[test]
fn a_secret_added_later_applies_only_from_then_on() {
    // Redaction happens before the write; earlier lines are never rewritten (that would break
    // the chain). The caller must add a secret before the event that carries it.
    let root = tempfile::tempdir().unwrap();
    let log = Log::create(root.path(), SessionHeader::default()).unwrap();
    log.append(
        EventKind::Note,
        None,
        json!({"text": "token tok-123456 seen"}),
    )
    .unwrap();
    log.add_secret("tok-123456").unwrap();
    log.append(
        EventKind::Note,
        None,
        json!({"text": "token tok-123456 seen"}),
    )
    .unwrap();
    let events = read_events(log.dir()).unwrap();
    assert_eq!(events[1].data["text"], "token tok-123456 seen");
    assert_eq!(events[2].data["text"], "token [REDACTED] seen");
}

#[test]
fn text_leaving_the_host_goes_through_the_same_funnel() {
    let root = tempfile::tempdir().unwrap();
    let log = Log::create(root.path(), SessionHeader::default()).unwrap();
    log.add_secret(KEY).unwrap();
    assert_eq!(
        log.redact(&format!("page says {KEY}.")),
        "page says [REDACTED]."
    );
    // A clone shares the funnel.
    assert_eq!(log.clone().redact(KEY), "[REDACTED]");
}

/// Two secrets that run into each other in the text, and a secret passed as a JSON number:
/// neither reaches the file, not even a tail of one.
#[test]
fn overlapping_and_numeric_secrets_never_reach_the_file() {
    let root = tempfile::tempdir().unwrap();
    let log = Log::create(root.path(), SessionHeader::default()).unwrap();
    log.add_secret("tok-AAAAAAAA-77").unwrap();
    log.add_secret("77-BBBBBBBB").unwrap();
    log.add_secret("86420975").unwrap();
    log.append(
        EventKind::ToolResult,
        None,
        json!({"out": "tok-AAAAAAAA-77-BBBBBBBB", "pin": 86420975}),
    )
    .unwrap();
    let text = std::fs::read_to_string(log.dir().join("log.jsonl")).unwrap();
    for leak in ["AAAAAAAA", "BBBBBBBB", "86420975"] {
        assert!(!text.contains(leak), "{leak} in {text}");
    }
    let events = read_events(log.dir()).unwrap();
    assert_eq!(events[1].data["out"], "[REDACTED]");
    assert_eq!(events[1].data["pin"], "[REDACTED]");
}
