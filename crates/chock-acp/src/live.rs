//! A session's live events as ACP `session/update` notifications: the model's text and
//! reasoning as message and thought chunks, each tool call as a `tool_call` whose status and
//! content `tool_call_update`s carry (decided → `in_progress`, a command's output as it comes,
//! the result → `completed` or `failed`), the plan as `plan`.
//!
//! Every text is made visible first ([`visible`]): a command's escape sequences, carriage
//! returns and bidi overrides are shown as `\u{…}` escapes, so nothing the agent's output holds
//! can redraw a terminal client or disguise what a question asks.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Duration;

use chock_protocol::live::{AgentEvent, ItemKind, PlanStep, StepStatus, ToolDisplay};
use chock_runtime::{Item, Observer};
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
                display,
            } => {
                let shown = display.clone().unwrap_or_else(|| ToolDisplay::named(tool));
                lock(&self.calls).insert(
                    call_id.clone(),
                    Call {
                        status: Some(ToolCallStatus::Pending),
                        output: String::new(),
                    },
                );
                SessionUpdate::ToolCall(ToolCall {
                    tool_call_id: call_id.clone(),
                    title: visible(&shown.title),
                    kind: kind(shown.kind),
                    status: ToolCallStatus::Pending,
                    content: Vec::new(),
                    locations: locations(&self.project, &shown),
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

/// The session's live items as the editor's updates: an [`Observer`] of the session's handle,
/// not a subscription. An observer sees each item synchronously, on the thread that made it,
/// so an update is in the connection's one queue before anything that follows it on that
/// thread — above all the `session/request_permission` the answerer sends when the decision
/// pipeline asks about the call: the editor has the `tool_call` before the question about it,
/// and the answerer finds the call it knows ([`Shared::knows_call`]). A subscription is read by
/// another task, which could lag behind the question. The prompt's response, sent once its
/// subscription gives the task's end, comes after every update: those were queued before the
/// end was.
#[derive(Debug)]
pub(crate) struct Updates(pub(crate) std::sync::Arc<Shared>);

impl Observer for Updates {
    fn item(&self, item: &Item) {
        if let Item::Live { event, .. } = item
            && let Some(update) = self.0.update_for(event)
        {
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

/// ACP's icon for a call of `kind` (the tool describes its call; nothing here knows tool names).
pub(crate) fn kind(kind: chock_protocol::live::ToolKind) -> ToolKind {
    use chock_protocol::live::ToolKind as K;
    match kind {
        K::Read => ToolKind::Read,
        K::Edit => ToolKind::Edit,
        K::Search => ToolKind::Search,
        K::Execute => ToolKind::Execute,
        K::Fetch => ToolKind::Fetch,
        K::Think => ToolKind::Think,
        K::Other => ToolKind::Other,
    }
}

/// The real files a call reads, as its tool names them (relative to the project, inside it):
/// writes land in the sandbox copy, so the editor is not sent to the project's file, which they
/// have not changed.
fn locations(project: &Path, shown: &ToolDisplay) -> Vec<ToolCallLocation> {
    shown
        .locations
        .iter()
        .map(|rel| ToolCallLocation {
            path: project.join(rel),
        })
        .collect()
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
    fn a_calls_locations_are_its_tools_paths_under_the_project() {
        let shown = ToolDisplay::new("Read src/a.rs", chock_protocol::live::ToolKind::Read)
            .reading("src/a.rs");
        assert_eq!(
            locations(Path::new("/p"), &shown),
            vec![ToolCallLocation {
                path: "/p/src/a.rs".into()
            }]
        );
        assert_eq!(kind(shown.kind), ToolKind::Read);
    }
}
