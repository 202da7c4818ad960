//! MCP servers' events: a server starting and stopping, a tool definition pinned or changed, and
//! a server's request to call the model (sampling).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// An MCP server started (confined, or reached over HTTP through the broker), failed to start,
/// was refused a start (not trusted), or stopped. A confined server is named by its server
/// name, never a host pid: it is held through its confiner's handle, and one confined elsewhere
/// (a microVM guest) has no host pid at all. Logs written before carry a `pid` on `started`;
/// it is read past (an unknown field) and their chain verifies as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "phase", rename_all = "snake_case")]
pub enum McpServer {
    /// It answered `initialize`.
    Started {
        /// The server's name (`[mcp.servers.NAME]`).
        server: String,
        /// Where its definition came from: `project` (chock.toml), `user` (config.toml) or
        /// `editor` (an ACP client's `session/new`).
        origin: String,
        /// `stdio` or `http`.
        transport: String,
        /// The SHA-256 of its definition.
        definition: String,
        /// Whether its process may reach the network (`mcp.<server>.network` allowed; stdio only:
        /// an `http` server is reached by the host, each connection decided as
        /// `net.connect.<host>.<port>`, and is `false` here).
        network: bool,
        /// What the server calls itself (`serverInfo`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        server_info: Option<String>,
    },
    /// It was not started: its definition is not trusted, or its network act was refused and it
    /// cannot run without, …
    Refused {
        /// The server's name.
        server: String,
        /// Why, in words.
        reason: String,
    },
    /// It could not be started or did not answer in time.
    Failed {
        /// The server's name.
        server: String,
        /// What went wrong.
        error: String,
    },
    /// It was stopped (the session ended) or exited.
    Stopped {
        /// The server's name.
        server: String,
        /// Why.
        reason: String,
    },
}

/// A tool definition (name, description, input schema, annotations) was pinned the first time it
/// was approved, or differs from the pinned one and is refused until approved again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "change", rename_all = "snake_case")]
pub enum McpDefinition {
    /// Seen and approved for the first time: its hash is recorded.
    Pinned {
        /// The server.
        server: String,
        /// The tool's name as the server gives it.
        tool: String,
        /// The act its calls are decided as.
        action: String,
        /// The SHA-256 of the definition.
        hash: String,
    },
    /// Not what was approved: the tool is not offered and its calls are refused.
    Changed {
        /// The server.
        server: String,
        /// The tool's name as the server gives it.
        tool: String,
        /// The act its calls are decided as.
        action: String,
        /// The hash recorded when it was approved.
        pinned: String,
        /// The hash of what the server gives now.
        now: String,
    },
}

/// A server asked Chock to call the model (`sampling/createMessage`): what it asked and what
/// the call cost. The act `mcp.<server>.sampling` is decided (and logged) before the model is
/// called; the call itself is logged as `model.request`/`model.response` like the agent's own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct McpSampling {
    /// The server.
    pub server: String,
    /// The messages it sent, as text (`role: text`, one per line).
    pub prompt: String,
    /// The system prompt it asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// The token limit it asked for.
    pub max_tokens: u32,
    /// Whether the model was called (false: the act was refused).
    pub called: bool,
}
