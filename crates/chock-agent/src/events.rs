//! What the loop tells whoever runs it, as it happens.
//!
//! The events are the session protocol's live events ([`chock_protocol::live`]): for showing
//! progress (the CLI prints them; `--json` writes one per line; a daemon forwards them). They are not
//! the session log: the log is the hash-chained record and is written by the loop itself, before
//! each act. The JSON form is documented in docs/json-events.md.

pub use chock_protocol::live::{AgentEvent, DecisionCounts, PlanStep, Summary};

/// Where events go. The CLI prints them; tests collect them; a daemon forwards them.
pub trait EventSink: Send + Sync {
    /// Receives one event, in order.
    fn emit(&self, event: &AgentEvent);
}

/// A sink that drops everything.
#[derive(Debug, Default)]
pub struct NoEvents;

impl EventSink for NoEvents {
    fn emit(&self, _event: &AgentEvent) {}
}

impl<F: Fn(&AgentEvent) + Send + Sync> EventSink for F {
    fn emit(&self, event: &AgentEvent) {
        self(event);
    }
}

/// A tool's input in one short line for a person watching: its fields but the long ones (file
/// contents, an edit's old and new text), at most 100 characters. One place, so every interface
/// shows a call the same way.
pub fn input_line(value: &serde_json::Value) -> String {
    let text = match value {
        serde_json::Value::Object(map) => map
            .iter()
            .filter(|(k, _)| !matches!(k.as_str(), "content" | "new" | "old"))
            .map(|(k, v)| {
                format!(
                    "{k}={}",
                    v.as_str().map_or_else(|| v.to_string(), str::to_string)
                )
            })
            .collect::<Vec<_>>()
            .join(" "),
        other => other.to_string(),
    };
    let text = text.replace('\n', " ");
    if text.chars().count() > 100 {
        text.chars().take(100).collect::<String>() + "…"
    } else {
        text
    }
}
