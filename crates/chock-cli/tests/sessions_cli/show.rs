//! `chock sessions show` on a session holding every kind of event.

use chock_log::{EventKind, Log, SessionHeader};
use serde_json::json;

use crate::{Env, record, settings};

/// One event of every kind (every variant of the kinds that have several), each with every field
/// its type has; then two lines of an older shape that do not fit their types.
fn every_kind_session(env: &Env) -> Log {
    let parent = Log::create(&env.sessions_root(), SessionHeader::default()).unwrap();
    let header = SessionHeader {
        project: Some("/p".into()),
        parent: Some(parent.id().clone()),
        command: Some("run".into()),
        provider: Some("demo".into()),
        model: Some("m".into()),
        policy_file: Some("/p/chock.toml".into()),
        org_policy_file: Some("/etc/chock/org.toml".into()),
        ..SessionHeader::default()
    };
    let log = Log::create(&env.sessions_root(), header).unwrap();
    let c = Some("call_1");
    let door = "proxy";
    let events = [
        (
            None,
            EventKind::TurnStart,
            json!({"turn": 1, "input": "do it"}),
        ),
        (
            None,
            EventKind::ModelRequest,
            json!({"turn": 1, "provider": "demo", "model": "m", "messages": 1,
            "new_message": {"role": "user", "content": [{"type": "text", "text": "do it"}]}}),
        ),
        (
            None,
            EventKind::ModelRetry,
            json!({"turn": 1, "attempt": 1, "wait_ms": 250, "reason": "stream cut"}),
        ),
        (
            None,
            EventKind::ModelResponse,
            json!({"turn": 1, "model": "m", "id": "r1",
            "usage": {"input_tokens": 10, "output_tokens": 5, "cache_read_tokens": 2, "cache_write_tokens": 1},
            "cost_usd": 0.01, "stop_reason": "tool_use", "content": [{"type": "text", "text": "ok"}]}),
        ),
        (
            c,
            EventKind::ToolCall,
            json!({"tool": "exec", "input": {"command": "ls"}, "argv": ["/bin/ls"],
            "cwd": "/p", "action": "exec.system.ls", "resolved": "/usr/bin/ls"}),
        ),
        (
            c,
            EventKind::ApprovalAsk,
            json!({"question": "q1", "action": "exec.system.ls", "decision": "ask",
            "decided_by": "chock.toml:2", "asked": "reviewer", "what": "run ls", "reviewer": "m",
            "policy_file": "sub/chock.toml"}),
        ),
        (
            c,
            EventKind::ApprovalAnswer,
            json!({"question": "q1", "action": "exec.system.ls", "answer": "allow_once",
            "by": "reviewer:m", "reasons": "harmless", "policy_file": "sub/chock.toml"}),
        ),
        (
            None,
            EventKind::ApprovalAnswer,
            json!({"question": "q2", "answer": "reply", "by": "terminal", "reply": "yes"}),
        ),
        (
            c,
            EventKind::Decision,
            json!({"action": "exec.system.ls", "decision": "ask", "allowed": true,
            "decided_by": "chock.toml:2; allowed by reviewer"}),
        ),
        (
            c,
            EventKind::NetDecision,
            json!({"stage": "gate", "door": door, "action": "net.connect.com.example.443",
            "host": "example.com", "port": 443, "decision": "allow", "decided_by": "chock.toml:3"}),
        ),
        (
            c,
            EventKind::NetDecision,
            json!({"stage": "gate", "door": "fetch_url", "action": "net.fetch.com.evil",
            "host": "evil.com", "port": 443, "decision": "refuse", "reason": "denied"}),
        ),
        (
            c,
            EventKind::NetDecision,
            json!({"stage": "address", "door": door, "host": "example.com", "port": 443,
            "addresses_checked": ["93.184.215.14"], "decision": "refuse", "reason": "a private address"}),
        ),
        (
            c,
            EventKind::NetConnect,
            json!({"phase": "open", "door": door, "host": "example.com", "port": 443,
            "address_used": "93.184.215.14:443"}),
        ),
        (
            c,
            EventKind::NetConnect,
            json!({"phase": "failed", "door": "web_search", "host": "example.com", "port": 443,
            "reason": "refused"}),
        ),
        (
            c,
            EventKind::NetConnect,
            json!({"phase": "close", "door": door, "host": "example.com", "port": 443,
            "address_used": "93.184.215.14:443", "bytes_sent": 10, "bytes_received": 20}),
        ),
        (
            None,
            EventKind::McpServer,
            json!({"phase": "started", "server": "time", "origin": "project", "transport": "stdio",
            "definition": "ab12", "network": false}),
        ),
        (
            None,
            EventKind::McpDefinition,
            json!({"change": "changed", "server": "time", "tool": "now", "action": "mcp.time.tool.now",
            "pinned": "ab12", "now": "cd34"}),
        ),
        (
            None,
            EventKind::McpSampling,
            json!({"server": "time", "prompt": "user: hi", "max_tokens": 50, "called": true}),
        ),
        (
            c,
            EventKind::PluginCall,
            json!({"plugin": "example", "tool": "word_count", "sha256": "ef56",
            "end": {"kind": "out_of_fuel"}, "fuel_limit": 1000, "fuel_used": 1000,
            "timeout_ms": 10000, "duration_ms": 12, "memory_limit": 65536, "memory_peak": 4096,
            "output_limit": 1024, "output_bytes": 0,
            "log": [{"level": "info", "message": "counting"}], "log_dropped": 2}),
        ),
        (
            c,
            EventKind::CommandResult,
            json!({"outcome": "ran", "status": {"kind": "exited", "value": 0},
            "exit_code": 0, "limits": {"pids_max": 512}, "duration_ms": 33, "stdout_bytes": 10,
            "stderr_bytes": 0, "truncated": false, "checkpoint": "cp-1"}),
        ),
        (
            c,
            EventKind::CommandResult,
            json!({"outcome": "refused", "by": "the table", "reason": "denied"}),
        ),
        (
            c,
            EventKind::CommandResult,
            json!({"outcome": "failed", "error": "layer_missing", "layer": "landlock",
            "message": "no landlock"}),
        ),
        (
            c,
            EventKind::ToolResult,
            json!({"tool": "exec", "is_error": false, "output": "a\nb\n", "changed": ["a.txt"],
                "shown": [{"path": "a.txt", "hash": "f1", "lines": [[1, 2]]}]}),
        ),
        (
            c,
            EventKind::SessionSpawn,
            json!({"child": "20261130T000000Z-000000", "task": "sub"}),
        ),
        (
            None,
            EventKind::AgentComplete,
            json!({"summary": "done it"}),
        ),
        (
            None,
            EventKind::WorkspaceApply,
            json!({"apply_id": "a1", "kind": "undo", "undo_of": "a0",
            "project": "/p", "base_commit": "c0", "checkpoint": "cp-1", "base_hash": "h0", "result_hash": "h1",
            "digest": "d1", "hunks": ["h-1"], "already": ["h-2"], "setid_stripped": ["bin/x"],
            "files": [{"path": "x", "before": "-", "after": "f1"}], "policy_files": ["chock.toml"]}),
        ),
        (
            None,
            EventKind::WorkspaceAdopt,
            json!({"dest": "/p.adopted", "files": 3, "dirs": 1, "deleted": 0}),
        ),
        (
            None,
            EventKind::SessionImported,
            json!({"from": "20261130T000000Z-000001", "events": 7}),
        ),
        (
            None,
            EventKind::Note,
            json!({"about": "text", "text": "a remark"}),
        ),
        (
            None,
            EventKind::Note,
            json!({"about": "torn_tail", "torn_line": 9, "torn_bytes": 12, "saved_to": "log.jsonl.torn"}),
        ),
        (
            None,
            EventKind::Note,
            json!({"about": "task", "task": "do it", "system": "you are"}),
        ),
        (
            c,
            EventKind::Note,
            json!({"about": "checkpoint_failed", "checkpoint": "cp-2", "failed": "disk full"}),
        ),
        (
            None,
            EventKind::Note,
            json!({"about": "apply_failed", "apply_id": "a2", "digest": "d2", "failed": "conflict"}),
        ),
        (
            c,
            EventKind::Note,
            json!({"about": "ratchet", "change": "widen", "pattern": "exec.*", "decision": "ask",
            "removed": ["exec.system.*"]}),
        ),
        (
            c,
            EventKind::Note,
            json!({"about": "background_ended", "background": "bg-1", "status": 0, "is_error": false}),
        ),
        (
            None,
            EventKind::TurnEnd,
            json!({"turn": 1, "reason": "tool_results"}),
        ),
        (
            None,
            EventKind::SessionHandover,
            json!({"number": 1, "how": "found_dead", "from": {"pid": 41, "process": "chock run"},
            "to": {"pid": 42, "process": "chock serve"}, "unknown": ["call_1"],
            "open_questions": ["q-1"]}),
        ),
        (
            None,
            EventKind::SessionEnd,
            json!({"reason": "error", "error": "boom", "workspace_kept": true,
            "summary": {"session": "s", "ended": "error: boom", "turns": 1, "tool_calls": 1,
                "decisions": {"allowed_by_table": 1, "allowed_by_person": 0, "allowed_by_reviewer": 1,
                    "denied_by_table": 0, "denied_by_answer": 0, "unanswered": 0},
                "input_tokens": 10, "output_tokens": 5, "cost_usd": 0.01, "title": "t", "review": "chock diff s",
                "take": "chock apply s"}}),
        ),
    ];
    for (call_id, kind, data) in &events {
        record(&log, *call_id, *kind, data);
    }
    // An older writer's shapes: a decision without `allowed`, a retry with `delay_ms`.
    log.append(
        EventKind::Decision,
        c,
        json!({"action": "exec.system.ls", "decision": "allow", "decided_by": "old\u{1b}[2J"}),
    )
    .unwrap();
    log.append(
        EventKind::ModelRetry,
        None,
        json!({"attempt": 2, "delay_ms": 500}),
    )
    .unwrap();
    log
}

/// Every kind's every field, read through its type; a line that does not fit is shown raw and
/// marked, never dropped.
#[test]
fn show_shows_every_field_of_every_kind_and_marks_lines_that_do_not_fit() {
    let env = Env::new();
    let log = every_kind_session(&env);
    let out = env.chock(&["sessions", "show", log.id().as_str()]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let events = chock_log::read_events(log.dir()).unwrap();
    let kinds: std::collections::BTreeSet<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(
        kinds.len(),
        EventKind::ALL.len(),
        "the session holds every kind"
    );
    for event in &events {
        let line = out
            .stdout
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{}  ", event.seq)))
            .unwrap_or_else(|| panic!("no line for seq {}:\n{}", event.seq, out.stdout));
        if event.payload().is_err() {
            assert!(line.contains("[does not match its type: "), "{line}");
            continue;
        }
        for (field, value) in event.data.as_object().unwrap() {
            if !value.is_null() {
                assert!(
                    line.contains(&format!(" {field}=")) || line.contains(&format!(" {field}.")),
                    "seq {} ({}) does not show `{field}`: {line}",
                    event.seq,
                    event.kind
                );
            }
        }
    }
    assert!(!out.stdout.contains('\u{1b}'));
    let mut settings = settings();
    settings.set_snapshot_path("../snapshots");
    settings.bind(|| insta::assert_snapshot!(out.stdout));
}
