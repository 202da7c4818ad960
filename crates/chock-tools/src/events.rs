//! What the loop tells whoever runs it, as it happens.
//!
//! The events are the session protocol's live events ([`chock_protocol::live`]): for showing
//! progress (the CLI prints them; `--json` writes one per line; a daemon forwards them). They are not
//! the session log: the log is the hash-chained record and is written by the loop itself, before
//! each act. The JSON form is documented in docs/json-events.md.

pub use chock_protocol::live::{AgentEvent, DecisionCounts, PlanStep, Summary, input_line};

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
