//! `chock sessions …` run as a real process in the hermetic test world (HOME and the XDG
//! directories in a temporary directory) against sessions made by chock-log. Times, ids, hashes
//! and paths are redacted in the snapshots.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use chock_log::{EventData, EventKind, Log, SessionHeader};
use serde_json::json;

use run_support::World;

/// The shared hermetic world, with the sessions tests' helpers.
struct Env(World);

impl std::ops::Deref for Env {
    type Target = World;
    fn deref(&self) -> &World {
        &self.0
    }
}

struct Out {
    status: i32,
    stdout: String,
    stderr: String,
}

impl Env {
    fn new() -> Self {
        Self(World::new())
    }

    fn key(&self) -> PathBuf {
        self.data.join("chock").join("seal.key")
    }

    fn chock(&self, args: &[&str]) -> Out {
        let out = self.command(args).stdin(Stdio::null()).output().unwrap();
        let clean = |b: &[u8]| redact(&String::from_utf8_lossy(b), &self.base);
        Out {
            status: out.status.code().unwrap_or(-1),
            stdout: clean(&out.stdout),
            stderr: clean(&out.stderr),
        }
    }

    /// A finished session with one tool call followed through decision, approval and result.
    fn finished_session(&self) -> Log {
        let header = SessionHeader {
            project: Some("/src/project".into()),
            ..Default::default()
        };
        let log = Log::create(&self.sessions_root(), header).unwrap();
        log.add_secret("sk-test-0123456789").unwrap();
        let call = Some("call_1");
        for (call_id, kind, data) in [
            (
                None,
                EventKind::TurnStart,
                json!({"turn": 1, "input": "fetch it"}),
            ),
            (
                None,
                EventKind::ModelRequest,
                json!({"turn": 1, "provider": "anthropic", "model": "claude", "messages": 1}),
            ),
            (
                None,
                EventKind::ModelResponse,
                json!({"turn": 1, "model": "claude", "usage": {"input_tokens": 1200, "output_tokens": 80,
                    "cache_read_tokens": 0, "cache_write_tokens": 0},
                    "cost_usd": 0.0048, "stop_reason": "tool_use", "content": []}),
            ),
            (
                call,
                EventKind::ToolCall,
                json!({"tool": "run_command", "input": {"argv": ["curl", "-H", "x-api-key: sk-test-0123456789", "https://example.com"]}}),
            ),
            (
                call,
                EventKind::ApprovalAsk,
                json!({"action": "net.fetch.com.example", "decision": "ask",
                    "decided_by": "no rule and no shipped default", "asked": "person", "what": "fetch example.com"}),
            ),
            (
                call,
                EventKind::ApprovalAnswer,
                json!({"action": "net.fetch.com.example", "answer": "deny", "by": "terminal"}),
            ),
            (
                call,
                EventKind::Decision,
                json!({"action": "net.fetch.com.example", "decision": "ask", "allowed": false,
                    "decided_by": "no rule and no shipped default; refused by terminal"}),
            ),
            (
                call,
                EventKind::ToolResult,
                json!({"tool": "run_command", "is_error": true, "output": "refused"}),
            ),
            (
                None,
                EventKind::TurnEnd,
                json!({"turn": 1, "reason": "no_tool_calls"}),
            ),
            (None, EventKind::SessionEnd, json!({"reason": "done"})),
        ] {
            record(&log, call_id, kind, &data);
        }
        log
    }
}

/// Appends `data` as the payload of `kind`, which it must fit exactly.
fn record(log: &Log, call_id: Option<&str>, kind: EventKind, data: &serde_json::Value) {
    let payload = EventData::parse_exact(kind, data).unwrap_or_else(|e| panic!("{kind}: {e}"));
    log.record(call_id, payload).unwrap();
}

fn redact(text: &str, base: &Path) -> String {
    text.replace(&base.display().to_string(), "[TMP]")
}

fn settings() -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.add_filter(r"\d{8}T\d{6}Z-[0-9a-f]{6}", "[ID]");
    s.add_filter(
        r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(\.\d+)?Z?",
        "[TIME]",
    );
    s.add_filter(r"[0-9a-f]{16,}", "[HEX]");
    s.add_filter(r"live:\d+ +", "live:[PID]  ");
    s.add_filter(r"offset \d+", "offset [N]");
    s.add_filter(r"\d+ bytes,", "[N] bytes,");
    s.add_filter(r"chock_version=[0-9.]+", "chock_version=[V]");
    s.add_filter(r"pid=\d+", "pid=[PID]");
    s
}

fn lines_of(log_dir: &Path) -> Vec<String> {
    std::fs::read_to_string(log_dir.join("log.jsonl"))
        .unwrap()
        .split_inclusive('\n')
        .map(str::to_owned)
        .collect()
}

#[test]
fn list_with_no_sessions() {
    let env = Env::new();
    let out = env.chock(&["sessions", "list"]);
    assert_eq!(out.status, 0);
    settings()
        .bind(|| insta::assert_snapshot!(out.stdout, @"no sessions in [TMP]/state/chock/sessions"));
}

#[test]
fn list_shows_state_and_counts() {
    let env = Env::new();
    drop(env.finished_session());
    std::thread::sleep(std::time::Duration::from_millis(1100)); // ids sort by the second
    let live = Log::create(&env.sessions_root(), SessionHeader::default()).unwrap();
    let out = env.chock(&["sessions", "list"]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(out.stdout.contains(&format!("live:{}", std::process::id())));
    settings().bind(|| insta::assert_snapshot!(out.stdout));
    drop(live);
}

#[test]
fn show_prints_one_readable_line_per_event_with_secrets_redacted() {
    let env = Env::new();
    let log = env.finished_session();
    let id = log.id().to_string();
    let out = env.chock(&["sessions", "show", &id[..20]]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(!out.stdout.contains("sk-test-0123456789"));
    settings().bind(|| insta::assert_snapshot!(out.stdout));
}

#[test]
fn verify_an_intact_session() {
    let env = Env::new();
    let log = env.finished_session();
    let out = env.chock(&["sessions", "verify", log.id().as_str()]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    settings().bind(|| insta::assert_snapshot!(out.stdout));
}

#[test]
fn verify_names_an_edited_and_a_deleted_line_and_exits_1() {
    let env = Env::new();
    let log = env.finished_session();
    let mut lines = lines_of(log.dir());
    lines[5] = lines[5].replace("\"ask\"", "\"allow\"");
    lines.remove(8);
    std::fs::write(log.dir().join("log.jsonl"), lines.concat()).unwrap();
    let out = env.chock(&["sessions", "verify", log.id().as_str()]);
    assert_eq!(out.status, 1);
    settings().bind(|| insta::assert_snapshot!(out.stdout));
    let show = env.chock(&["sessions", "show", log.id().as_str()]);
    assert!(
        show.stdout
            .contains("(this log does not verify: run `chock sessions verify"),
        "{}",
        show.stdout
    );
}

#[test]
fn verify_reports_a_torn_tail_and_still_passes() {
    let env = Env::new();
    let log = env.finished_session();
    let mut text = std::fs::read_to_string(log.dir().join("log.jsonl")).unwrap();
    text.push_str("{\"seq\":11,\"ts\":\"20");
    std::fs::write(log.dir().join("log.jsonl"), text).unwrap();
    let out = env.chock(&["sessions", "verify", log.id().as_str()]);
    assert_eq!(out.status, 0);
    settings().bind(|| insta::assert_snapshot!(out.stdout));
    let show = env.chock(&["sessions", "show", log.id().as_str()]);
    assert_eq!(show.status, 0);
    assert!(
        show.stdout
            .ends_with("(line 12 is torn, a write cut short by a crash, and is not shown)\n"),
        "{}",
        show.stdout
    );
}

#[test]
fn seal_then_verify_here_and_elsewhere() {
    let env = Env::new();
    let log = env.finished_session();
    let id = log.id().to_string();
    drop(log);

    let out = env.chock(&["sessions", "seal", &id]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    settings().bind(|| insta::assert_snapshot!("seal", out.stdout));
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(env.key()).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }

    // On this machine, the seal is recognised as this machine's.
    let out = env.chock(&["sessions", "verify", &id]);
    assert_eq!(out.status, 0);
    settings().bind(|| insta::assert_snapshot!("verify_sealed_here", out.stdout));

    // "Another machine": only the log and the exported public key.
    let other = Env::new();
    let pubkey = other.base.join("their.pub");
    std::fs::write(&pubkey, env.chock(&["sessions", "pubkey"]).stdout).unwrap();
    let copied = other.sessions_root().join(&id);
    std::fs::create_dir_all(&copied).unwrap();
    for file in ["log.jsonl", "seal.json"] {
        std::fs::copy(env.sessions_root().join(&id).join(file), copied.join(file)).unwrap();
    }
    let out = other.chock(&[
        "sessions",
        "verify",
        &id,
        "--pubkey",
        pubkey.to_str().unwrap(),
    ]);
    assert_eq!(out.status, 0, "{}{}", out.stdout, out.stderr);
    settings().bind(|| insta::assert_snapshot!("verify_with_pubkey", out.stdout));

    // A different key is refused.
    let wrong = other.chock(&["sessions", "pubkey"]).stdout;
    std::fs::write(&pubkey, wrong).unwrap();
    let out = other.chock(&[
        "sessions",
        "verify",
        &id,
        "--pubkey",
        pubkey.to_str().unwrap(),
    ]);
    assert_eq!(out.status, 1);
    settings().bind(|| insta::assert_snapshot!("verify_with_wrong_pubkey", out.stdout));

    // The log grows after the seal.
    let log = Log::open(&env.sessions_root().join(&id)).unwrap();
    log.append(EventKind::Note, None, json!({"text": "after the seal"}))
        .unwrap();
    let out = env.chock(&["sessions", "verify", &id]);
    assert_eq!(out.status, 0);
    assert!(
        out.stdout.contains("sealed at seq 10, 1 events after"),
        "{}",
        out.stdout
    );
}

#[test]
fn pubkey_prints_a_pem_and_creates_the_key_once() {
    let env = Env::new();
    let first = env.chock(&["sessions", "pubkey"]);
    assert_eq!(first.status, 0, "{}", first.stderr);
    assert!(
        first.stdout.starts_with("-----BEGIN PUBLIC KEY-----\n"),
        "{}",
        first.stdout
    );
    assert!(env.key().exists());
    assert_eq!(env.chock(&["sessions", "pubkey"]).stdout, first.stdout);
}

#[test]
fn an_unknown_session_exits_2_naming_it() {
    let env = Env::new();
    drop(env.finished_session());
    for args in [
        ["sessions", "show", "nope"],
        ["sessions", "verify", "nope"],
        ["sessions", "seal", "nope"],
    ] {
        let out = env.chock(&args);
        assert_eq!(out.status, 2, "{args:?}");
        settings().bind(|| {
            insta::allow_duplicates! {
                insta::assert_snapshot!(out.stderr, @"chock: unknown session: no session matches `nope` in [TMP]/state/chock/sessions");
            }
        });
    }
}

#[test]
fn an_ambiguous_prefix_exits_2_naming_the_candidates() {
    let env = Env::new();
    drop(env.finished_session());
    drop(env.finished_session());
    let out = env.chock(&["sessions", "show", "2"]);
    assert_eq!(out.status, 2);
    settings().bind(|| {
        insta::assert_snapshot!(out.stderr, @"chock: unknown session: `2` matches several sessions: [ID], [ID]");
    });
}

#[path = "run_support/mod.rs"]
mod run_support;

#[path = "sessions_cli/replay.rs"]
mod replay;

#[path = "sessions_cli/show.rs"]
mod show;
