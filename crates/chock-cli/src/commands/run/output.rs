//! How `chock run` shows a session: the model's words as they stream and one line per tool call for a
//! person, one JSON object per event for a script (docs/json-events.md), and the closing summary.

use std::io::Write;
use std::sync::Mutex;

use chock_agent::events::{AgentEvent, EventSink, Summary};

use crate::commands::sessions::printable;

/// Text the model, a command or a web page wrote, made safe for the person's terminal: each line as
/// `chock sessions show` prints it (escape sequences, carriage returns and bidi overrides escaped), the
/// newlines kept. Raw, it could drive the terminal or rewrite what the person saw of the session.
fn terminal_text(text: &str) -> String {
    text.split('\n')
        .map(printable)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Prints events for a person: the model's words as they stream, one line per tool call and result.
pub(crate) struct HumanSink {
    pub(crate) verbose: bool,
    pub(crate) at_line_start: Mutex<bool>,
}

impl HumanSink {
    fn line(&self, text: &str) {
        let mut out = std::io::stdout().lock();
        let mut start = self
            .at_line_start
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !*start {
            let _ = writeln!(out);
        }
        let _ = writeln!(out, "{}", terminal_text(text));
        let _ = out.flush();
        *start = true;
    }
}

impl EventSink for HumanSink {
    fn emit(&self, event: &AgentEvent) {
        match event {
            AgentEvent::Text { text, .. } => {
                let mut out = std::io::stdout().lock();
                let _ = out.write_all(terminal_text(text).as_bytes());
                let _ = out.flush();
                if let Ok(mut start) = self.at_line_start.lock() {
                    *start = text.ends_with('\n');
                }
            }
            AgentEvent::ToolCall { tool, input, .. } => self.line(&format!(
                "  → {tool} {}",
                chock_agent::events::input_line(input)
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
                let lines: Vec<String> = steps
                    .iter()
                    .map(|s| format!("    [{}] {}", s.status, s.step))
                    .collect();
                self.line(&format!("  plan:\n{}", lines.join("\n")));
            }
            AgentEvent::SessionEnded { .. } => {
                let mut start = self
                    .at_line_start
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if !*start {
                    println!();
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
        if let Ok(line) = serde_json::to_string(event) {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{line}");
            let _ = out.flush();
        }
    }
}

pub(crate) fn print_summary(s: &Summary) {
    let d = &s.decisions;
    let allowed = d.allowed_by_table + d.allowed_by_person + d.allowed_by_reviewer;
    let refused = d.denied_by_table + d.denied_by_answer + d.unanswered;
    let cost = chock_protocol::live::cost_text(s.cost_usd);
    println!();
    println!("── session {} ──", s.session);
    if let Some(title) = &s.title {
        println!("title       {title}");
    }
    println!("ended       {}", s.ended);
    println!("turns       {}", s.turns);
    println!("tool calls  {}", s.tool_calls);
    println!(
        "decisions   {allowed} allowed (table {}, person {}, reviewer {}); {refused} refused (table {}, answered no {}, nobody answered {})",
        d.allowed_by_table,
        d.allowed_by_person,
        d.allowed_by_reviewer,
        d.denied_by_table,
        d.denied_by_answer,
        d.unanswered
    );
    println!(
        "cost        {cost} ({} input, {} output tokens)",
        s.input_tokens, s.output_tokens
    );
    for child in &s.children {
        let cost = chock_protocol::live::cost_text(child.cost_usd);
        let ended = serde_json::to_value(child.ended)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        println!(
            "child       {} {ended}: {cost} ({} tokens)",
            child.session, child.tokens
        );
    }
    println!(
        "review      {}   (then `{}` to take the work)",
        s.review, s.take
    );
}

#[cfg(test)]
mod tests {
    use super::terminal_text;

    #[test]
    fn what_the_model_wrote_cannot_drive_the_terminal() {
        let text = terminal_text("done\u{1b}]52;c;ZXZpbA==\u{7}\r\u{202e}\nnext line\n");
        assert!(
            !text.contains('\u{1b}') && !text.contains('\r') && !text.contains('\u{202e}'),
            "{text:?}"
        );
        assert_eq!(text.lines().count(), 2, "newlines are kept: {text:?}");
        assert!(text.ends_with("next line\n"), "{text:?}");
    }
}
