//! What the suites lean on, checked on its own: the world's environment holds nothing of the
//! caller's, the fake model answers on the wire as the provider does (and records what it was
//! sent), and the log readers wait for an event and leave a line still being written alone.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use chock_test_support::World;
use chock_test_support::events::{read_log_live, read_until, wait_for_event};
use chock_test_support::model::{Reply, anthropic_server, reply};

#[test]
fn a_program_in_the_world_sees_only_the_worlds_environment() {
    let w = World::new();
    let out = w
        .program("env")
        .env_remove("PATH")
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    assert!(out.status.success());
    let env = String::from_utf8(out.stdout).unwrap();
    let base = w.base.display().to_string();
    for line in env.lines() {
        let (name, value) = line.split_once('=').unwrap();
        match name {
            "HOME" | "XDG_CONFIG_HOME" | "XDG_STATE_HOME" | "XDG_DATA_HOME" | "XDG_CACHE_HOME"
            | "XDG_RUNTIME_DIR" | "CHOCK_ORG_POLICY" => {
                assert!(value.starts_with(&base), "{line} is outside the world")
            }
            "PATH"
            | "GIT_CONFIG_GLOBAL"
            | "GIT_CONFIG_NOSYSTEM"
            | "GIT_AUTHOR_NAME"
            | "GIT_AUTHOR_EMAIL"
            | "GIT_AUTHOR_DATE"
            | "GIT_COMMITTER_NAME"
            | "GIT_COMMITTER_EMAIL"
            | "GIT_COMMITTER_DATE"
            | "LANG"
            | "TZ"
            | "CHOCK_TEST_CLOCK"
            | "CHOCK_TEST_IDS"
            | "PWD"
            | "SHLVL"
            | "_" => {}
            other => panic!("{other} leaked into the world"),
        }
    }
    assert!(env.contains("CHOCK_TEST_IDS=1"), "{env}");
}

/// Posts `body` to the server and returns the whole response.
fn post(port: u16, body: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn the_fake_model_streams_each_turn_as_the_provider_does_and_records_the_requests() {
    let (port, server) = anthropic_server(vec![
        reply(
            "msg_1",
            7,
            "Reading.",
            Some(("toolu_1", "read_file", r#"{"path": "a"}"#)),
        ),
        Reply::Error(
            529,
            r#"{"type":"error","error":{"type":"overloaded_error"}}"#,
        ),
    ]);
    let first = post(port, r#"{"n":1}"#);
    let (head, stream) = first.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.contains("content-type: text/event-stream"), "{head}");
    // Every event: `event: TYPE`, `data: JSON` whose type is TYPE, a blank line.
    let mut kinds = Vec::new();
    for block in stream.split_terminator("\n\n") {
        let (event, data) = block.split_once('\n').unwrap();
        let kind = event.strip_prefix("event: ").unwrap();
        let data: serde_json::Value =
            serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap();
        assert_eq!(data["type"], kind);
        kinds.push(kind.to_string());
    }
    assert_eq!(kinds.first().map(String::as_str), Some("message_start"));
    assert_eq!(kinds.last().map(String::as_str), Some("message_stop"));
    assert!(stream.contains(r#""stop_reason":"tool_use""#), "{stream}");
    // The tool's input arrives in pieces that join to the whole.
    let pieces: String = stream
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str::<serde_json::Value>(d).unwrap())
        .filter_map(|v| v["delta"]["partial_json"].as_str().map(str::to_string))
        .collect();
    assert_eq!(pieces, r#"{"path": "a"}"#);
    let second = post(port, r#"{"n":2}"#);
    assert!(second.starts_with("HTTP/1.1 529"), "{second}");
    let seen = server.join().unwrap();
    assert_eq!(seen.len(), 2);
    assert!(seen[0].ends_with(r#"{"n":1}"#) && seen[1].ends_with(r#"{"n":2}"#));
}

const LINE: &str = r#"{"seq":0,"kind":"note","data":{"about":"x"}}"#;

#[test]
fn the_log_readers_wait_for_an_event_and_skip_a_line_being_written() {
    let w = World::new();
    let session = w.sessions_root().join("s");
    std::fs::create_dir_all(&session).unwrap();
    let log = session.join("log.jsonl");
    // A whole line, then half of the next.
    std::fs::write(&log, format!("{LINE}\n{{\"seq\":1,\"ki")).unwrap();
    assert_eq!(read_log_live(&session).len(), 1);
    let writer = {
        let log = log.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            let mut f = std::fs::OpenOptions::new().append(true).open(log).unwrap();
            f.write_all(b"nd\":\"session.end\",\"call_id\":\"c\",\"data\":{}}\n")
                .unwrap();
        })
    };
    let call = wait_for_event(&session, Duration::from_secs(30), |(kind, call, _)| {
        (kind == "session.end").then(|| call.clone())
    });
    writer.join().unwrap();
    assert_eq!(call.as_deref(), Some("c"));
    assert_eq!(read_log_live(&session).len(), 2);
}

#[test]
fn a_json_event_stream_is_read_up_to_the_event_wanted() {
    let text = format!("{LINE}\n\n{{\"kind\":\"end\"}}\n{LINE}\n");
    let mut stream = BufReader::new(text.as_bytes());
    let (before, end) = read_until(&mut stream, |v| (v["kind"] == "end").then(|| v.clone()));
    assert_eq!(before.len(), 1);
    assert_eq!(end["kind"], "end");
    let mut rest = String::new();
    stream.read_line(&mut rest).unwrap();
    assert_eq!(rest.trim_end(), LINE);
}
