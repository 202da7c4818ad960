//! `chock sessions show`: one line per event, read through the event's typed payload
//! (`chock_protocol::log`), so every field its type documents is shown and nothing the type does
//! not know is mistaken for it. An event whose data does not fit its type (an older log, a
//! foreign line) is still shown, raw, and marked.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context as _;
use chock_log::{Event, EventData, EventKind, PayloadError};
use serde_json::{Map, Value};

use chock_protocol::text::{self, Layout};

use super::{find, short_time, truncate};

use crate::say::say;

/// The longest a single value is shown (a model's reply, a command's output, a system prompt).
const VALUE_MAX: usize = 80;
/// The longest the raw data of an event that does not fit its type is shown.
const RAW_MAX: usize = 240;

pub(super) fn show(id: &str) -> anyhow::Result<ExitCode> {
    let dir = find(id)?;
    let events = chock_log::read_events(&dir).with_context(|| format!("reading session {id}"))?;
    say!(
        "session {} ({})",
        dir.file_name().unwrap_or_default().to_string_lossy(),
        dir.display()
    );
    say!(
        "{:>4}  {:<19}  {:<16}  {:<12}  SUMMARY",
        "SEQ",
        "TIME (UTC)",
        "KIND",
        "CALL"
    );
    for event in &events {
        say!(
            "{:>4}  {:<19}  {:<16}  {:<12}  {}",
            event.seq,
            short_time(&event.ts),
            event.kind.as_str(),
            event.call_id.as_deref().unwrap_or("-"),
            summary(event)
        );
    }
    trailer(&dir)
}

/// A reader should not mistake a damaged log for a whole one.
fn trailer(dir: &Path) -> anyhow::Result<ExitCode> {
    let report = chock_log::verify(dir)?;
    if let Some(torn) = &report.torn_tail {
        say!(
            "(line {} is torn, a write cut short by a crash, and is not shown)",
            torn.line
        );
    }
    if !report.is_intact() {
        say!(
            "(this log does not verify: run `chock sessions verify {}`)",
            report.session_id
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The fields shown first for each kind (a variant's tag, then what identifies the event); every
/// other field of the type follows in name order. Only an order: no field is left out.
fn lead(kind: EventKind) -> &'static [&'static str] {
    match kind {
        EventKind::SessionStart => &["command", "project", "provider", "model", "parent"],
        EventKind::TurnStart | EventKind::TurnEnd => &["turn"],
        EventKind::ModelRequest => &["turn", "provider", "model", "messages"],
        EventKind::ModelResponse => &["turn", "model", "stop_reason", "usage", "cost_usd"],
        EventKind::ModelRetry => &["turn", "attempt", "wait_ms", "reason"],
        EventKind::ToolCall => &["tool", "action", "argv", "cwd", "resolved"],
        EventKind::Decision => &["action", "decision", "allowed", "decided_by"],
        EventKind::ApprovalAsk => &["question", "action", "decision", "decided_by", "asked"],
        EventKind::ApprovalAnswer => &["question", "action", "answer", "by"],
        EventKind::ToolResult => &["tool", "is_error", "changed"],
        EventKind::CommandResult => &["outcome", "status", "exit_code"],
        EventKind::PluginCall => &["plugin", "tool", "end"],
        EventKind::WorkspaceApply => &["kind", "apply_id", "undo_of", "digest"],
        EventKind::NetDecision => &["stage", "door", "action", "host", "port", "decision"],
        EventKind::NetConnect => &["phase", "door", "host", "port"],
        EventKind::McpServer => &["phase", "server", "origin", "transport"],
        EventKind::McpDefinition => &["change", "server", "tool", "action"],
        EventKind::McpSampling => &["server", "called", "max_tokens"],
        EventKind::Note => &["about"],
        EventKind::SessionHandover => &["number", "how"],
        EventKind::SessionEnd => &["reason", "error"],
        _ => &[],
    }
}

/// One event's fields as `key=value, …`, escaped for the terminal.
pub(super) fn summary(event: &Event) -> String {
    let line = match event.payload() {
        Ok(payload) => typed(event, &payload),
        Err(err) => mismatch(event, &err),
    };
    // Keys, values and the raw fallback: everything that reaches the terminal is escaped (here, so
    // a caller that measures the line measures what is shown).
    text::escaped(&line, Layout::Line)
}

fn typed(event: &Event, payload: &EventData) -> String {
    let kept = payload.to_value();
    let mut parts = Vec::new();
    if let Value::Object(fields) = &kept {
        for (key, value) in ordered(fields, lead(event.kind)) {
            flatten(key, value, &mut parts);
        }
    }
    // Fields the type does not describe (a newer writer, or a writer not yet converted): shown,
    // and marked, so that nothing in the line is lost and nothing is mistaken for a known field.
    if let (Value::Object(written), Value::Object(known)) = (&event.data, &kept) {
        let mut extra = Vec::new();
        for (key, value) in written {
            if !known.contains_key(key) && !value.is_null() {
                flatten(key, value, &mut extra);
            }
        }
        if !extra.is_empty() {
            parts.push(format!("(not in its type: {})", extra.join(", ")));
        }
    }
    if parts.is_empty() {
        "-".to_owned()
    } else {
        parts.join(", ")
    }
}

/// The fields of `fields`, those named in `lead` first and in that order, then the rest by name.
fn ordered<'a>(fields: &'a Map<String, Value>, lead: &[&str]) -> Vec<(&'a str, &'a Value)> {
    let mut out: Vec<(&str, &Value)> = lead
        .iter()
        .filter_map(|key| fields.get_key_value(*key))
        .map(|(k, v)| (k.as_str(), v))
        .collect();
    out.extend(
        fields
            .iter()
            .filter(|(k, _)| !lead.contains(&k.as_str()))
            .map(|(k, v)| (k.as_str(), v)),
    );
    out
}

/// `key=value` for a scalar; an object's members as `key.member=value`; an array as compact
/// JSON. Absent optional fields (null) are left out. Long values are clipped.
fn flatten(key: &str, value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Null => {}
        Value::Object(members) if !members.is_empty() => {
            for (member, inner) in members {
                flatten(&format!("{key}.{member}"), inner, out);
            }
        }
        Value::String(s) => out.push(format!("{key}={}", truncate(s, VALUE_MAX))),
        other => out.push(format!("{key}={}", truncate(&other.to_string(), VALUE_MAX))),
    }
}

/// An event whose data does not fit its kind's type: the reason and the raw data.
fn mismatch(event: &Event, err: &PayloadError) -> String {
    let why = match err {
        PayloadError::Shape { source, .. } => source.to_string(),
        other => other.to_string(),
    };
    format!(
        "[does not match its type: {why}] {}",
        truncate(&event.data.to_string(), RAW_MAX)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: EventKind, data: Value) -> Event {
        Event {
            seq: 1,
            ts: "2026-11-30T00:00:00Z".into(),
            kind,
            call_id: None,
            prev: String::new(),
            data,
        }
    }

    /// Text from a model or a web page cannot drive the terminal of whoever reads the log.
    #[test]
    fn escape_sequences_and_bidi_overrides_are_shown_escaped() {
        let note = event(
            EventKind::Note,
            serde_json::json!({"about": "text", "text": "ok\u{1b}[2J\rrm -rf\u{202e}txt.exe\nnext"}),
        );
        let line = summary(&note);
        assert!(
            !line.chars().any(|c| c.is_control() || c == '\u{202e}'),
            "{line:?}"
        );
        assert_eq!(
            line,
            "about=text, text=ok\\u{1b}[2J\\rrm -rf\\u{202e}txt.exe\\nnext"
        );
        // A line that does not fit its type is shown raw, and escaped all the same.
        let raw = event(
            EventKind::Note,
            serde_json::json!({"\u{1b}k": "\u{202e}x\u{9b}"}),
        );
        let line = summary(&raw);
        assert!(line.starts_with("[does not match its type: "), "{line}");
        assert!(
            !line.chars().any(|c| c.is_control() || c == '\u{202e}'),
            "{line:?}"
        );
        // A field the type does not know is shown, marked, and escaped.
        let extra = event(
            EventKind::Note,
            serde_json::json!({"about": "text", "text": "t", "\u{1b}k": 1}),
        );
        assert_eq!(
            summary(&extra),
            "about=text, text=t, (not in its type: \\u{1b}k=1)"
        );
    }

    #[test]
    fn a_connection_event_shows_the_address_used_and_the_bytes() {
        let close = event(
            EventKind::NetConnect,
            serde_json::json!({"phase": "close", "door": "proxy", "host": "example.org",
                "port": 443, "address_used": "1.2.3.4:443", "bytes_sent": 10, "bytes_received": 20}),
        );
        assert_eq!(
            summary(&close),
            "phase=close, door=proxy, host=example.org, port=443, address_used=1.2.3.4:443, bytes_received=20, bytes_sent=10"
        );
    }

    #[test]
    fn a_retry_shows_its_wait_and_nested_fields_are_named_by_path() {
        let retry = event(
            EventKind::ModelRetry,
            serde_json::json!({"turn": 2, "attempt": 1, "wait_ms": 500, "reason": "cut"}),
        );
        assert_eq!(
            summary(&retry),
            "turn=2, attempt=1, wait_ms=500, reason=cut"
        );
        let old = event(
            EventKind::ModelRetry,
            serde_json::json!({"attempt": 1, "delay_ms": 500}),
        );
        assert!(
            summary(&old).starts_with("[does not match its type: missing field"),
            "{}",
            summary(&old)
        );
    }
}
