//! What an agent streams to its client while a prompt turn runs (`session/update`): message and
//! thought chunks, tool calls and their updates, the plan.

use std::path::PathBuf;

use serde::Serialize;
use serde_json::Value;

use super::ContentBlock;

/// `session/update`'s params.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionNotification {
    /// The session.
    pub session_id: String,
    /// What happened.
    pub update: SessionUpdate,
}

/// One streamed update.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "sessionUpdate", rename_all = "snake_case")]
pub enum SessionUpdate {
    /// The person's message, replayed by `session/load`.
    UserMessageChunk {
        /// The text.
        content: ContentBlock,
    },
    /// More of the model's reply.
    AgentMessageChunk {
        /// The text.
        content: ContentBlock,
    },
    /// More of the model's visible reasoning.
    AgentThoughtChunk {
        /// The text.
        content: ContentBlock,
    },
    /// A tool call began.
    ToolCall(ToolCall),
    /// A tool call changed.
    ToolCallUpdate(ToolCallUpdate),
    /// The model's plan, whole.
    Plan {
        /// The steps.
        entries: Vec<PlanEntry>,
    },
}

/// A tool call as first reported.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    /// Its id, unique in the session (Chock's call id).
    pub tool_call_id: String,
    /// What it does, for people.
    pub title: String,
    /// Its kind, for the client's icon.
    pub kind: ToolKind,
    /// Where it is.
    pub status: ToolCallStatus,
    /// What it produced so far.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub content: Vec<ToolCallContent>,
    /// Files it touches, in the real project.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub locations: Vec<ToolCallLocation>,
    /// Its input, as the model sent it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw_input: Option<Value>,
}

/// A change to a tool call: only the fields given change.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallUpdate {
    /// The call.
    pub tool_call_id: String,
    /// A new title.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// A new status.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<ToolCallStatus>,
    /// The content, replacing what was there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<Vec<ToolCallContent>>,
}

/// A tool call's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    /// Reads files.
    Read,
    /// Changes files.
    Edit,
    /// Removes files.
    Delete,
    /// Searches.
    Search,
    /// Runs a command.
    Execute,
    /// Plans.
    Think,
    /// Reaches the network.
    Fetch,
    /// Anything else.
    Other,
}

/// Where a tool call is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolCallStatus {
    /// Not started: being decided, or waiting for an answer.
    Pending,
    /// Running.
    InProgress,
    /// Done.
    Completed,
    /// Failed, refused or interrupted.
    Failed,
}

/// What a tool call produced.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToolCallContent {
    /// A content block.
    Content {
        /// The block.
        content: ContentBlock,
    },
    /// A file's change, shown (never written by the client).
    Diff {
        /// The file's absolute path in the project.
        path: PathBuf,
        /// What it holds now (`None`: it does not exist).
        #[serde(rename = "oldText")]
        old_text: Option<String>,
        /// What it would hold.
        #[serde(rename = "newText")]
        new_text: String,
    },
}

impl ToolCallContent {
    /// Text content.
    pub fn text(text: impl Into<String>) -> Self {
        ToolCallContent::Content {
            content: ContentBlock::text(text),
        }
    }
}

/// A file a tool call works on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolCallLocation {
    /// Its absolute path.
    pub path: PathBuf,
}

/// One step of the plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanEntry {
    /// What to do.
    pub content: String,
    /// Chock's plans have no priorities: every step is `medium`.
    pub priority: PlanEntryPriority,
    /// Where it is.
    pub status: PlanEntryStatus,
}

/// A plan step's priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanEntryPriority {
    /// High.
    High,
    /// Medium.
    Medium,
    /// Low.
    Low,
}

/// A plan step's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanEntryStatus {
    /// Not started.
    Pending,
    /// Being worked on.
    InProgress,
    /// Done.
    Completed,
}
