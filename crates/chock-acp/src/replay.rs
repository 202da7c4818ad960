//! `session/load` replays the conversation so far as `session/update`s, as ACP asks: the
//! person's messages, the model's replies, and every tool call with its result. It is the
//! conversation the resumed runtime rebuilt from the log and carries on from
//! ([`SessionHandle::earlier`]), not a second reading of the log, so the editor shows exactly
//! what the model will continue.

use chock_protocol::live::ToolDisplay;
use chock_provider::{Block, Role};
use chock_runtime::SessionHandle;

use crate::live::{Shared, kind, visible};
use crate::schema::{
    ContentBlock, SessionUpdate, ToolCall, ToolCallContent, ToolCallStatus, ToolCallUpdate,
};

/// Sends the conversation the session in `handle` was resumed with, each earlier tool call shown
/// as its tool describes it.
pub(crate) fn replay(shared: &Shared, handle: &SessionHandle) {
    for message in handle.earlier() {
        for block in message.content.iter().cloned() {
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
                    let shown = handle
                        .earlier_call(&id)
                        .cloned()
                        .unwrap_or_else(|| ToolDisplay::named(&name));
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
}
