//! A session's live events as ACP `session/update` notifications: the model's text and
//! reasoning as message and thought chunks, each tool call as a `tool_call` whose status and
//! content `tool_call_update`s carry (decided → `in_progress`, a command's output as it comes,
//! the result → `completed` or `failed`), the plan as `plan`.
//!
//! Every text is made visible first ([`visible`]): a command's escape sequences, carriage
//! returns and bidi overrides are shown as `\u{…}` escapes, so nothing the agent's output holds
//! can redraw a terminal client or disguise what a question asks.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Duration;

use chock_agent::events::{AgentEvent, EventSink};
use chock_protocol::live::{ItemKind, PlanStep, StepStatus};
use serde_json::Value;
use tokio::sync::watch;

use crate::rpc::Peer;
use crate::schema::{
    ContentBlock, PlanEntry, PlanEntryPriority, PlanEntryStatus, SessionNotification,
    SessionUpdate, ToolCall, ToolCallContent, ToolCallLocation, ToolCallStatus, ToolCallUpdate,
    ToolKind,
};

/// How much of a running command's output a tool call shows (its tail).
const OUTPUT_TAIL: usize = 32 * 1024;

/// `text` as the one escaper (chock-protocol's `text`) shows a block: every control, bidi control
/// and invisible character but newline and tab written as a visible `\u{…}` escape (a `\r\n`
/// becomes `\n` first: a client lays out lines itself).
pub fn visible(text: &str) -> String {
    chock_protocol::text::escaped(
        &text.replace("\r\n", "\n"),
        chock_protocol::text::Layout::Block,
    )
}

/// What is known of one tool call.
#[derive(Debug, Default)]
struct Call {
    status: Option<ToolCallStatus>,
    output: String,
}

/// What one session's updates and questions share: its id (known once it is built), the
/// project, the connection, its tool calls, and its cancellations.
#[derive(Debug)]
pub(crate) struct Shared {
    id: OnceLock<String>,
    project: PathBuf,
    pub(crate) peer: Peer,
    calls: Mutex<HashMap<String, Call>>,
    /// Output items (`<call>.output`) and the call each belongs to.
    outputs: Mutex<HashMap<String, String>>,
    /// The tool call of the apply offered now: its question is asked about that call.
    pub(crate) offer: Mutex<Option<String>>,
    /// Bumped by every `session/cancel`: a question open then is given up.
    pub(crate) cancel: watch::Sender<u64>,
    /// How long a question waits for the editor (`None`: for ever).
    pub(crate) answer_timeout: Option<Duration>,
    /// The answerer's name in the log (`editor:<client>`).
    pub(crate) answerer: String,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    pub(crate) fn new(
        project: PathBuf,
        peer: Peer,
        answer_timeout: Option<Duration>,
        answerer: String,
    ) -> Self {
        Self {
            id: OnceLock::new(),
            project,
            peer,
            calls: Mutex::default(),
            outputs: Mutex::default(),
            offer: Mutex::default(),
            cancel: watch::Sender::new(0),
            answer_timeout,
            answerer,
        }
    }

    /// Names the session once it is built; updates before that are dropped (there are none: a
    /// session says nothing before its first prompt).
    pub(crate) fn set_id(&self, id: &str) {
        let _ = self.id.set(id.to_string());
    }

    /// The session's id, once built.
    pub(crate) fn id(&self) -> Option<&str> {
        self.id.get().map(String::as_str)
    }

    /// Sends `update`.
    pub(crate) fn send(&self, update: SessionUpdate) {
        if let Some(id) = self.id() {
            self.peer.notify(
                "session/update",
                SessionNotification {
                    session_id: id.to_string(),
                    update,
                },
            );
        }
    }

    /// Whether the editor has been told of tool call `id`.
    pub(crate) fn knows_call(&self, id: &str) -> bool {
        lock(&self.calls).contains_key(id)
    }

    /// Tells the editor of a tool call Chock makes itself (an apply, a question with no call).
    pub(crate) fn start_call(&self, call: ToolCall) {
        lock(&self.calls).insert(
            call.tool_call_id.clone(),
            Call {
                status: Some(call.status),
                output: String::new(),
            },
        );
        self.send(SessionUpdate::ToolCall(call));
    }

    /// Ends a tool call Chock made itself.
    pub(crate) fn end_call(&self, id: &str, ok: bool, text: &str) {
        let status = if ok {
            ToolCallStatus::Completed
        } else {
            ToolCallStatus::Failed
        };
        if let Some(call) = lock(&self.calls).get_mut(id) {
            call.status = Some(status);
        }
        self.send(SessionUpdate::ToolCallUpdate(ToolCallUpdate {
            tool_call_id: id.to_string(),
            status: Some(status),
            content: Some(vec![ToolCallContent::text(visible(text))]),
            ..ToolCallUpdate::default()
        }));
    }

    /// The update (if any) for one live event, with the call state it implies.
    fn update_for(&self, event: &AgentEvent) -> Option<SessionUpdate> {
        Some(match event {
            AgentEvent::Text { text, .. } => SessionUpdate::AgentMessageChunk {
                content: ContentBlock::text(visible(text)),
            },
            AgentEvent::Thinking { text, .. } => SessionUpdate::AgentThoughtChunk {
                content: ContentBlock::text(visible(text)),
            },
            AgentEvent::ToolCall {
                call_id,
                tool,
                input,
            } => {
                lock(&self.calls).insert(
                    call_id.clone(),
                    Call {
                        status: Some(ToolCallStatus::Pending),
                        output: String::new(),
                    },
                );
                SessionUpdate::ToolCall(ToolCall {
                    tool_call_id: call_id.clone(),
                    title: visible(&title(tool, input)),
                    kind: kind(tool),
                    status: ToolCallStatus::Pending,
                    content: Vec::new(),
                    locations: locations(&self.project, tool, input),
                    raw_input: Some(input.clone()),
                })
            }
            AgentEvent::Decision {
                call_id,
                allowed: true,
                ..
            } => {
                let mut calls = lock(&self.calls);
                let call = calls.get_mut(call_id)?;
                if call.status != Some(ToolCallStatus::Pending) {
                    return None;
                }
                call.status = Some(ToolCallStatus::InProgress);
                SessionUpdate::ToolCallUpdate(ToolCallUpdate {
                    tool_call_id: call_id.clone(),
                    status: Some(ToolCallStatus::InProgress),
                    ..ToolCallUpdate::default()
                })
            }
            AgentEvent::ItemStarted {
                item,
                kind: ItemKind::CommandOutput { call_id },
                ..
            } => {
                lock(&self.outputs).insert(item.clone(), call_id.clone());
                return None;
            }
            AgentEvent::ItemDelta { item, text } => {
                let call_id = lock(&self.outputs).get(item).cloned()?;
                let mut calls = lock(&self.calls);
                let call = calls.get_mut(&call_id)?;
                call.output.push_str(&visible(text));
                keep_tail(&mut call.output, OUTPUT_TAIL);
                SessionUpdate::ToolCallUpdate(ToolCallUpdate {
                    tool_call_id: call_id,
                    content: Some(vec![ToolCallContent::text(call.output.clone())]),
                    ..ToolCallUpdate::default()
                })
            }
            AgentEvent::ToolResult {
                call_id,
                ok,
                summary,
                ..
            } => {
                let status = if *ok {
                    ToolCallStatus::Completed
                } else {
                    ToolCallStatus::Failed
                };
                let mut calls = lock(&self.calls);
                let call = calls.entry(call_id.clone()).or_default();
                call.status = Some(status);
                let mut content = Vec::new();
                if !call.output.is_empty() {
                    content.push(ToolCallContent::text(call.output.clone()));
                }
                content.push(ToolCallContent::text(visible(summary)));
                SessionUpdate::ToolCallUpdate(ToolCallUpdate {
                    tool_call_id: call_id.clone(),
                    status: Some(status),
                    content: Some(content),
                    ..ToolCallUpdate::default()
                })
            }
            AgentEvent::PlanUpdated { steps } => SessionUpdate::Plan {
                entries: steps.iter().map(plan_entry).collect(),
            },
            _ => return None,
        })
    }
}

/// The event sink a session is built with: its updates go to the editor.
#[derive(Debug)]
pub(crate) struct Sink(pub(crate) std::sync::Arc<Shared>);

impl EventSink for Sink {
    fn emit(&self, event: &AgentEvent) {
        if let Some(update) = self.0.update_for(event) {
            self.0.send(update);
        }
    }
}

fn keep_tail(text: &mut String, max: usize) {
    if text.len() > max {
        let mut cut = text.len() - max;
        while !text.is_char_boundary(cut) {
            cut += 1;
        }
        text.replace_range(..cut, "…");
    }
}

fn plan_entry(step: &PlanStep) -> PlanEntry {
    PlanEntry {
        content: visible(&step.step),
        priority: PlanEntryPriority::Medium,
        status: match step.status {
            StepStatus::InProgress => PlanEntryStatus::InProgress,
            StepStatus::Done => PlanEntryStatus::Completed,
            StepStatus::Pending => PlanEntryStatus::Pending,
        },
    }
}

fn field<'a>(input: &'a Value, name: &str) -> &'a str {
    input.get(name).and_then(Value::as_str).unwrap_or("")
}

/// One line of at most 160 characters.
fn one_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or("");
    let mut out: String = line.chars().take(160).collect();
    if out.len() < line.len() || text.lines().nth(1).is_some() {
        out.push('…');
    }
    out
}

/// What a tool call does, for people.
pub(crate) fn title(tool: &str, input: &Value) -> String {
    let f = |name| one_line(field(input, name));
    match tool {
        "run_command" => format!("Run `{}`", f("command")),
        "read_file" => format!("Read {}", f("path")),
        "write_file" => format!("Write {} (in the sandbox copy)", f("path")),
        "edit_file" => format!("Edit {} (in the sandbox copy)", f("path")),
        "list" => format!("List {}", f("path")),
        "glob" => format!("Find files matching {}", f("pattern")),
        "grep" => format!("Search for {}", f("pattern")),
        "fetch_url" => format!("Fetch {}", f("url")),
        "web_search" => format!("Search the web for {}", f("query")),
        "update_plan" => "Update the plan".to_string(),
        "set_title" => format!("Title: {}", f("title")),
        "ask_user" => format!("Ask: {}", f("question")),
        "read_output" => format!("Read the output of {}", f("handle")),
        other => other.to_string(),
    }
}

/// A tool's kind, for the editor's icon.
pub(crate) fn kind(tool: &str) -> ToolKind {
    match tool {
        "read_file" | "list" | "read_output" | "read_guidance" => ToolKind::Read,
        "write_file" | "edit_file" => ToolKind::Edit,
        "glob" | "grep" => ToolKind::Search,
        "run_command" => ToolKind::Execute,
        "fetch_url" | "web_search" => ToolKind::Fetch,
        "update_plan" => ToolKind::Think,
        _ => ToolKind::Other,
    }
}

/// The real file a read names (writes land in the sandbox copy, so the editor is not sent to
/// the project's file, which they have not changed).
fn locations(project: &Path, tool: &str, input: &Value) -> Vec<ToolCallLocation> {
    if !matches!(tool, "read_file" | "list") {
        return Vec::new();
    }
    let rel = Path::new(field(input, "path"));
    let inside = rel
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if !inside {
        return Vec::new();
    }
    vec![ToolCallLocation {
        path: project.join(rel),
    }]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_overrides_are_shown_not_obeyed() {
        assert_eq!(
            visible("ok\r\n\u{1b}[2Jred\rover \u{202e}txt.exe\tend\n"),
            "ok\n\\u{1b}[2Jred\\rover \\u{202e}txt.exe\tend\n"
        );
    }

    #[test]
    fn a_long_output_keeps_its_tail_on_a_character_boundary() {
        let mut text = "é".repeat(10);
        keep_tail(&mut text, 5);
        assert_eq!(text, "…éé");
    }

    #[test]
    fn only_reads_inside_the_project_name_a_location() {
        let p = Path::new("/p");
        let read = serde_json::json!({"path": "src/a.rs"});
        assert_eq!(
            locations(p, "read_file", &read),
            vec![ToolCallLocation {
                path: "/p/src/a.rs".into()
            }]
        );
        assert!(locations(p, "write_file", &read).is_empty());
        let out = serde_json::json!({"path": "../etc/passwd"});
        assert!(locations(p, "read_file", &out).is_empty());
        let abs = serde_json::json!({"path": "/etc/passwd"});
        assert!(locations(p, "read_file", &abs).is_empty());
    }

    #[test]
    fn a_command_title_is_one_line() {
        let input = serde_json::json!({"command": "echo a\necho b"});
        assert_eq!(title("run_command", &input), "Run `echo a…`");
    }
}
