//! `session/load` replays the conversation so far as `session/update`s, as ACP asks: the
//! person's messages, the model's replies, and every tool call with its result. It is rebuilt
//! from the log exactly as the resumed runtime rebuilds it, so the editor shows what the model
//! will carry on from.

use std::path::Path;

use chock_agent::runtime::resume::{ResumeError, rebuild};
use chock_provider::{Block, Role};

use chock_protocol::live::ToolDisplay;
use serde_json::Value;

use crate::live::{Shared, kind, visible};
use crate::schema::{
    ContentBlock, SessionUpdate, ToolCall, ToolCallContent, ToolCallStatus, ToolCallUpdate,
};

/// Why the conversation could not be replayed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReplayError {
    /// The log could not be read.
    #[error(transparent)]
    Log(#[from] chock_log::LogError),
    /// The log does not rebuild.
    #[error(transparent)]
    Resume(#[from] ResumeError),
}

/// Sends the conversation of the session in `dir`.
/// `display` describes an earlier tool call as its tool does (the session's registry).
pub(crate) fn replay(
    shared: &Shared,
    dir: &Path,
    display: impl Fn(&str, &Value) -> ToolDisplay,
) -> Result<(), ReplayError> {
    let events = chock_log::read_events(dir)?;
    for message in rebuild(&events)?.messages {
        for block in message.content {
            let update = match (message.role, block) {
                (Role::User, Block::Text { text }) => SessionUpdate::UserMessageChunk {
                    content: ContentBlock::text(visible(&text)),
                },
                (Role::Assistant, Block::Text { text }) => SessionUpdate::AgentMessageChunk {
                    content: ContentBlock::text(visible(&text)),
                },
                (Role::Assistant, Block::Thinking { thinking, .. }) => {
                    SessionUpdate::AgentThoughtChunk {
                        content: ContentBlock::text(visible(&thinking)),
                    }
                }
                (_, Block::ToolUse { id, name, input }) => {
                    let shown = display(&name, &input);
                    SessionUpdate::ToolCall(ToolCall {
                        tool_call_id: id,
                        title: visible(&shown.title),
                        kind: kind(shown.kind),
                        status: ToolCallStatus::Pending,
                        content: Vec::new(),
                        locations: Vec::new(),
                        raw_input: Some(input),
                    })
                }
                (
                    _,
                    Block::ToolResult {
                        tool_use_id,
                        content,
                        is_error,
                    },
                ) => SessionUpdate::ToolCallUpdate(ToolCallUpdate {
                    tool_call_id: tool_use_id,
                    status: Some(if is_error {
                        ToolCallStatus::Failed
                    } else {
                        ToolCallStatus::Completed
                    }),
                    content: Some(vec![ToolCallContent::text(visible(&content))]),
                    ..ToolCallUpdate::default()
                }),
                _ => continue,
            };
            shared.send(update);
        }
    }
    Ok(())
}
