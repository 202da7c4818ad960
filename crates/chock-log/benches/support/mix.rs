//! A session's events in the proportions a real one has, for the benches that say how fast the
//! log appends: chock-log's `throughput` and chock-cli's `per_call` include this file (`#[path]`),
//! so both measure the same mix. One turn is `turn.start`, then two tool calls of
//! `model.request`, `model.response`, `tool.call`, `decision`, `command.result`, `tool.result`,
//! then the closing `model.request`, `model.response` and `turn.end`: 16 events, of which the kinds
//! an act waits on (`EventKind::durability`) are synced before `append` returns.

use chock_log::{EventKind, Log};
use serde_json::Value;

/// What one call of [`turn`] appends.
pub const EVENTS_PER_TURN: u64 = 16;

/// Appends turn `i` of the mix, each event carrying `data`; returns [`EVENTS_PER_TURN`].
pub fn turn(log: &Log, i: u64, data: &Value) -> u64 {
    append(log, EventKind::TurnStart, i, data);
    for _ in 0..2 {
        for kind in [
            EventKind::ModelRequest,
            EventKind::ModelResponse,
            EventKind::ToolCall,
            EventKind::Decision,
            EventKind::CommandResult,
            EventKind::ToolResult,
        ] {
            append(log, kind, i, data);
        }
    }
    for kind in [
        EventKind::ModelRequest,
        EventKind::ModelResponse,
        EventKind::TurnEnd,
    ] {
        append(log, kind, i, data);
    }
    EVENTS_PER_TURN
}

/// Appends one event of `kind` for call `i`.
pub fn append(log: &Log, kind: EventKind, i: u64, data: &Value) {
    let call = format!("call-{i}");
    log.append(kind, Some(&call), data.clone()).expect("append");
}
