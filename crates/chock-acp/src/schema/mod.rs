//! The few Agent Client Protocol types Chock speaks, written by hand.
//!
//! They follow the stable ACP schema, protocol version 1 (the `schema/schema.json` of
//! agent-client-protocol 0.4–0.6, as documented at agentclientprotocol.com/protocol/schema).
//! The SDK crates move fast and bring a transport of their own; these types pin only the wire
//! shapes Chock needs, so a newer SDK never changes what Chock sends. Fields Chock does not
//! read are ignored on input (a client may send newer ones), and optional fields are left out
//! on output rather than sent as `null`.

mod update;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use update::{
    PlanEntry, PlanEntryPriority, PlanEntryStatus, SessionNotification, SessionUpdate, ToolCall,
    ToolCallContent, ToolCallLocation, ToolCallStatus, ToolCallUpdate, ToolKind,
};

/// The protocol version Chock speaks (ACP's major version).
pub const PROTOCOL_VERSION: u16 = 1;

/// `initialize`'s params.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeRequest {
    /// The newest version the client speaks.
    pub protocol_version: u16,
    /// What the client offers (Chock reads it only to say it uses none of it).
    #[serde(default)]
    pub client_capabilities: ClientCapabilities,
    /// The client's name, for the log's answerer name.
    #[serde(default)]
    pub client_info: Option<Implementation>,
}

/// What a client offers the agent. Chock uses none of it: the file and terminal methods would
/// act outside the sandbox and the reviewed apply.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientCapabilities {
    /// `fs/read_text_file` and `fs/write_text_file`.
    #[serde(default)]
    pub fs: FileSystemCapability,
    /// `terminal/*`.
    #[serde(default)]
    pub terminal: bool,
}

/// The client's file methods.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileSystemCapability {
    /// `fs/read_text_file` is available.
    #[serde(default)]
    pub read_text_file: bool,
    /// `fs/write_text_file` is available.
    #[serde(default)]
    pub write_text_file: bool,
}

/// A program's name and version (`clientInfo`, `agentInfo`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Implementation {
    /// Its name.
    pub name: String,
    /// A name for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Its version.
    #[serde(default)]
    pub version: String,
}

/// `initialize`'s result.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResponse {
    /// The version both speak.
    pub protocol_version: u16,
    /// What Chock offers.
    pub agent_capabilities: AgentCapabilities,
    /// None: keys are Chock's own (`chock login`).
    pub auth_methods: Vec<Value>,
    /// Chock's name and version.
    pub agent_info: Implementation,
}

/// What Chock offers a client.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCapabilities {
    /// `session/load` resumes a session from its log.
    pub load_session: bool,
    /// What a prompt may hold beyond text and resource links.
    pub prompt_capabilities: PromptCapabilities,
    /// MCP transports Chock connects to: none yet.
    pub mcp_capabilities: McpCapabilities,
}

/// What a prompt may hold.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptCapabilities {
    /// Images.
    pub image: bool,
    /// Audio.
    pub audio: bool,
    /// Embedded resources (a file's text the editor attaches).
    pub embedded_context: bool,
}

/// MCP transports beyond stdio.
#[derive(Debug, Clone, Serialize)]
pub struct McpCapabilities {
    /// Streamable HTTP.
    pub http: bool,
    /// Server-sent events.
    pub sse: bool,
}

/// `authenticate`'s params.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthenticateRequest {
    /// One of the methods `initialize` advertised.
    pub method_id: String,
}

/// An MCP server the client asks the agent to connect to. A stdio one is started by Chock under
/// the same confinement as its own (chock-mcp); `env` values are not passed (Chock passes
/// environment variables by name only, from its own environment).
#[derive(Debug, Clone, Deserialize)]
pub struct McpServer {
    /// Its name.
    pub name: String,
    /// `http` or `sse`; absent for stdio.
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    /// The program, for stdio.
    #[serde(default)]
    pub command: Option<String>,
    /// Its arguments, for stdio.
    #[serde(default)]
    pub args: Vec<String>,
    /// Environment variables the editor would set (names and values): not passed.
    #[serde(default)]
    pub env: Vec<serde_json::Value>,
    /// The address, for http and sse.
    #[serde(default)]
    pub url: Option<String>,
}

/// `session/new`'s params.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewSessionRequest {
    /// The project: an absolute path.
    pub cwd: PathBuf,
    /// MCP servers to connect to.
    pub mcp_servers: Vec<McpServer>,
    /// Extensions: `{"chock": {"provider": …, "model": …}}` chooses the provider and model.
    #[serde(default, rename = "_meta")]
    pub meta: Option<Value>,
}

/// `session/new`'s result.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NewSessionResponse {
    /// The session's id: Chock's own session id.
    pub session_id: String,
}

/// `session/load`'s params.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadSessionRequest {
    /// The session to go on with.
    pub session_id: String,
    /// The project: must be the one the session works on.
    pub cwd: PathBuf,
    /// MCP servers to connect to.
    pub mcp_servers: Vec<McpServer>,
}

/// `session/prompt`'s params.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptRequest {
    /// The session.
    pub session_id: String,
    /// The person's message.
    pub prompt: Vec<ContentBlock>,
}

/// `session/prompt`'s result.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptResponse {
    /// Why the turn ended.
    pub stop_reason: StopReason,
}

/// Why a prompt turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model answered without calling a tool.
    EndTurn,
    /// The model's reply hit its token limit.
    MaxTokens,
    /// The task's turn limit was reached.
    MaxTurnRequests,
    /// The model refused.
    Refusal,
    /// The client cancelled the turn.
    Cancelled,
}

/// `session/cancel`'s params.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelNotification {
    /// The session whose turn stops.
    pub session_id: String,
}

/// A piece of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// An image (not accepted in prompts: not advertised).
    Image {
        /// Its MIME type.
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
    /// Audio (not accepted in prompts: not advertised).
    Audio {
        /// Its MIME type.
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
    /// A reference to a resource the agent may read itself.
    ResourceLink {
        /// Its URI.
        uri: String,
        /// Its name.
        name: String,
    },
    /// A resource's contents, attached by the client.
    Resource {
        /// The contents.
        resource: EmbeddedResource,
    },
}

impl ContentBlock {
    /// Text content.
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text { text: text.into() }
    }
}

/// An attached resource's contents: text, or a blob (which Chock does not read).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmbeddedResource {
    /// Its URI.
    pub uri: String,
    /// Its text, when it is text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Its MIME type.
    #[serde(default, rename = "mimeType", skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
}

/// `session/request_permission`'s params.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestPermissionRequest {
    /// The session.
    pub session_id: String,
    /// The tool call asked about, with the exact act as its title.
    pub tool_call: ToolCallUpdate,
    /// The answers the person may choose.
    pub options: Vec<PermissionOption>,
}

/// One answer the person may choose.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PermissionOption {
    /// Its id, as the response names it.
    pub option_id: String,
    /// Its label.
    pub name: String,
    /// What it means.
    pub kind: PermissionOptionKind,
}

/// What a permission option means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PermissionOptionKind {
    /// Yes, this once.
    AllowOnce,
    /// Yes, and remember.
    AllowAlways,
    /// No, this once.
    RejectOnce,
    /// No, and remember.
    RejectAlways,
}

/// `session/request_permission`'s result.
#[derive(Debug, Clone, Deserialize)]
pub struct RequestPermissionResponse {
    /// What the person chose.
    pub outcome: RequestPermissionOutcome,
}

/// What the person chose.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum RequestPermissionOutcome {
    /// The turn was cancelled before an answer.
    Cancelled,
    /// One of the options.
    Selected {
        /// The option's id.
        #[serde(rename = "optionId")]
        option_id: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_call_update_sends_only_what_changed() {
        let update = SessionUpdate::ToolCallUpdate(ToolCallUpdate {
            tool_call_id: "c1".into(),
            status: Some(ToolCallStatus::InProgress),
            ..ToolCallUpdate::default()
        });
        assert_eq!(
            serde_json::to_value(&update).unwrap(),
            serde_json::json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "in_progress"})
        );
    }

    #[test]
    fn permission_outcomes_read_both_shapes() {
        let selected: RequestPermissionResponse = serde_json::from_value(
            serde_json::json!({"outcome": {"outcome": "selected", "optionId": "allow_once"}}),
        )
        .unwrap();
        assert_eq!(
            selected.outcome,
            RequestPermissionOutcome::Selected {
                option_id: "allow_once".into()
            }
        );
        let cancelled: RequestPermissionResponse =
            serde_json::from_value(serde_json::json!({"outcome": {"outcome": "cancelled"}}))
                .unwrap();
        assert_eq!(cancelled.outcome, RequestPermissionOutcome::Cancelled);
    }

    #[test]
    fn a_new_session_without_mcp_servers_names_the_field() {
        let err = serde_json::from_value::<NewSessionRequest>(serde_json::json!({"cwd": "/p"}))
            .unwrap_err();
        assert!(err.to_string().contains("mcpServers"), "{err}");
    }
}
