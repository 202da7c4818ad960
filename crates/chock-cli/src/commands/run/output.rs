//! How `chock run` shows a session: the model's words as they stream and one line per tool call for a
//! person, one JSON object per event for a script (docs/json-events.md), and the closing summary.

use std::sync::Mutex;

use chock_tools::events::{AgentEvent, EventSink, Summary};

use crate::say::say;

/// Prints events for a person: the model's words as they stream, one line per tool call and result.
pub(crate) struct HumanSink {
    pub(crate) verbose: bool,
    pub(crate) at_line_start: Mutex<bool>,
}

impl HumanSink {
    /// One line of Chock's own, on a line of its own: `say!` escapes what it quotes (a tool's
    /// input, a command's summary, a reason), a newline in it too.
    fn line(&self, text: &str) {
        let mut start = self
            .at_line_start
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !*start {
            say!();
        }
        say!("{text}");
        *start = true;
    }
}

impl EventSink for HumanSink {
    fn emit(&self, event: &AgentEvent) {
        match event {
            AgentEvent::Text { text, .. } => {
                // The model's words as they stream: its lines kept, everything else escaped.
                crate::say::block(text);
                if let Ok(mut start) = self.at_line_start.lock() {
                    *start = text.ends_with('\n');
                }
            }
            AgentEvent::ToolCall { tool, input, .. } => self.line(&format!(
                "  → {tool} {}",
                chock_tools::events::input_line(input)
            )),
            AgentEvent::ToolResult { ok, summary, .. } => {
                self.line(&format!("    {} {summary}", if *ok { "✓" } else { "✗" }));
            }
            AgentEvent::Decision {
                action,
                allowed,
                decided_by,
                ..
            } if (self.verbose || !allowed) && !action.is_empty() => {
                self.line(&format!(
                    "    {} {action}: {decided_by}",
                    if *allowed { "allowed" } else { "refused" }
                ));
            }
            AgentEvent::ModelRetry {
                attempt,
                wait_ms,
                reason,
            } => {
                self.line(&format!("  (model request failed: {reason}; attempt {attempt}, retrying in {wait_ms} ms)"));
            }
            AgentEvent::PlanUpdated { steps } => {
                self.line("  plan:");
                for s in steps {
                    self.line(&format!("    [{}] {}", s.status, s.step));
                }
            }
            AgentEvent::SessionEnded { .. } => {
                let mut start = self
                    .at_line_start
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if !*start {
                    say!();
                    *start = true;
                }
            }
            AgentEvent::BackgroundEnded { handle, status } => {
                self.line(&format!("  (background {handle} ended: {status:?})"));
            }
            _ => {}
        }
    }
}

/// Writes each event as one JSON line on standard output.
pub(super) struct JsonSink;

impl EventSink for JsonSink {
    fn emit(&self, event: &AgentEvent) {
        // An event that cannot be serialized is left out, as before: a script reads the rest.
        let _ = crate::say::json(event);
    }
}

pub(crate) fn print_summary(s: &Summary) {
    let d = &s.decisions;
    let allowed = d.allowed_by_table + d.allowed_by_person + d.allowed_by_reviewer;
    let refused = d.denied_by_table + d.denied_by_answer + d.unanswered;
    let cost = chock_protocol::live::cost_text(s.cost_usd);
    say!();
    say!("── session {} ──", s.session);
    if let Some(title) = &s.title {
        say!("title       {title}");
    }
    say!("ended       {}", s.ended);
    say!("turns       {}", s.turns);
    say!("tool calls  {}", s.tool_calls);
    say!(
        "decisions   {allowed} allowed (table {}, person {}, reviewer {}); {refused} refused (table {}, answered no {}, nobody answered {})",
        d.allowed_by_table,
        d.allowed_by_person,
        d.allowed_by_reviewer,
        d.denied_by_table,
        d.denied_by_answer,
        d.unanswered
    );
    say!(
        "cost        {cost} ({} input, {} output tokens)",
        s.input_tokens,
        s.output_tokens
    );
    for child in &s.children {
        let cost = chock_protocol::live::cost_text(child.cost_usd);
        let ended = serde_json::to_value(child.ended)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        say!(
            "child       {} {ended}: {cost} ({} tokens)",
            child.session,
            child.tokens
        );
    }
    say!(
        "review      {}   (then `{}` to take the work)",
        s.review,
        s.take
    );
}
