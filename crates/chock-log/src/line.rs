//! The bytes of one log line, and the hashes that chain them. docs/log.md describes the same
//! format for readers who do not use this crate.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::EventKind;

/// Written in `session.start`'s data as `format`; part of the genesis string.
pub const LOG_FORMAT: &str = "chock-log/1";

/// The file name of the log inside a session directory.
pub const LOG_FILE: &str = "log.jsonl";

/// SHA-256 of `bytes`, as 64 lowercase hex digits.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The `prev` of line 0: SHA-256 of `"chock-log/1 genesis <session id>\n"`. Binding the first
/// link to the session id means a log cannot be presented as another session's, nor lines of
/// one session spliced in front of another's.
pub fn genesis_hash(session_id: &str) -> String {
    sha256_hex(format!("{LOG_FORMAT} genesis {session_id}\n").as_bytes())
}

/// One event as it is read back from `log.jsonl`.
///
/// Unknown top-level fields are ignored, so a later format can add some; they still count for
/// the hash chain because the chain hashes bytes, not parsed values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// 0 for `session.start`, then +1 per line, no gaps.
    pub seq: u64,
    /// When the event was written, RFC 3339 in UTC (`2026-11-30T00:26:38.123456789Z`).
    pub ts: String,
    /// What the event records.
    pub kind: EventKind,
    /// The tool call this event is about, if any: follow one call from request to result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// SHA-256 (hex) of the previous line's exact bytes, its trailing newline included.
    pub prev: String,
    /// The kind's own fields (always a JSON object; see docs/log.md).
    pub data: Value,
}

impl Event {
    /// The payload, parsed as its kind's type (unknown fields tolerated).
    pub fn payload(&self) -> Result<chock_protocol::EventData, chock_protocol::PayloadError> {
        chock_protocol::EventData::parse(self.kind, &self.data)
    }

    /// Where the event sits in its log, as the session's view folds it.
    pub fn at(&self) -> chock_protocol::view::At<'_> {
        chock_protocol::view::At {
            seq: self.seq,
            ts: &self.ts,
            kind: self.kind,
            call_id: self.call_id.as_deref(),
        }
    }
}

/// Serialises one line (with its trailing `\n`) in the fixed field order
/// `seq, ts, kind, call_id, prev, data`.
pub fn render_line(
    seq: u64,
    ts: &str,
    kind: EventKind,
    call_id: Option<&str>,
    prev: &str,
    data: &Value,
) -> Result<Vec<u8>, serde_json::Error> {
    #[derive(Serialize)]
    struct Line<'a> {
        seq: u64,
        ts: &'a str,
        kind: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        call_id: Option<&'a str>,
        prev: &'a str,
        data: &'a Value,
    }
    let mut bytes = serde_json::to_vec(&Line {
        seq,
        ts,
        kind: kind.as_str(),
        call_id,
        prev,
        data,
    })?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// Splits a log file into its complete lines (each with its `\n`) and a trailing fragment
/// without a newline, if any (a write torn by a crash).
pub fn split_lines(bytes: &[u8]) -> (Vec<&[u8]>, Option<&[u8]>) {
    let mut lines = Vec::new();
    let mut start = 0;
    for (i, b) in bytes.iter().enumerate() {
        if *b == b'\n' {
            lines.push(&bytes[start..=i]);
            start = i + 1;
        }
    }
    let rest = &bytes[start..];
    (lines, (!rest.is_empty()).then_some(rest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_line_has_fixed_field_order_and_a_newline() {
        let line = render_line(
            3,
            "2026-11-30T00:00:00Z",
            EventKind::ToolCall,
            Some("c1"),
            "ab",
            &json!({"tool": "x"}),
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(line).unwrap(),
            "{\"seq\":3,\"ts\":\"2026-11-30T00:00:00Z\",\"kind\":\"tool.call\",\"call_id\":\"c1\",\"prev\":\"ab\",\"data\":{\"tool\":\"x\"}}\n"
        );
    }

    #[test]
    fn genesis_is_bound_to_the_session_id() {
        assert_ne!(
            genesis_hash("20261130T002638Z-3fa9c1"),
            genesis_hash("20261130T002638Z-3fa9c2")
        );
        assert_eq!(genesis_hash("x"), sha256_hex(b"chock-log/1 genesis x\n"));
    }

    #[test]
    fn split_keeps_newlines_and_returns_the_torn_fragment() {
        let (lines, torn) = split_lines(b"a\nb\nc");
        assert_eq!(lines, vec![&b"a\n"[..], &b"b\n"[..]]);
        assert_eq!(torn, Some(&b"c"[..]));
        assert_eq!(split_lines(b"a\n").1, None);
    }
}
