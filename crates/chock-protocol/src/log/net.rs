//! The network broker's events.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Which door an outbound act came through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Door {
    /// The `fetch_url` tool.
    #[serde(rename = "fetch_url")]
    Fetch,
    /// The `web_search` tool.
    #[serde(rename = "web_search")]
    Search,
    /// The egress proxy serving a command in the sandbox.
    #[serde(rename = "proxy")]
    Proxy,
    /// The host's client of a streamable HTTP MCP server (`[mcp.servers.NAME] url`).
    #[serde(rename = "mcp")]
    Mcp,
}

/// The broker's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NetVerdict {
    /// Goes ahead.
    Allow,
    /// Refused.
    Refuse,
}

/// The network broker decided a destination: first the gate (the table, logged before anything
/// is resolved), then the address check of what the name resolved to (before connecting).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "stage", rename_all = "snake_case")]
pub enum NetDecision {
    /// The table's (or a person's) answer for the act.
    Gate {
        /// The door.
        door: Door,
        /// The act (`net.connect.<host>.<port>`, `net.fetch.…`).
        action: String,
        /// The host asked for.
        host: String,
        /// The port.
        port: u16,
        /// The verdict.
        decision: NetVerdict,
        /// Who allowed it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        decided_by: Option<String>,
        /// Why it was refused.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// The check of the resolved addresses.
    Address {
        /// The door.
        door: Door,
        /// The host.
        host: String,
        /// The port.
        port: u16,
        /// Every address the name resolved to.
        addresses_checked: Vec<String>,
        /// The verdict.
        decision: NetVerdict,
        /// Why it was refused.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
}

/// The broker opened a connection (to the pinned address), failed to, or closed one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "phase", rename_all = "snake_case")]
pub enum NetConnect {
    /// Opened.
    Open {
        /// The door.
        door: Door,
        /// The host.
        host: String,
        /// The port.
        port: u16,
        /// The pinned address connected to.
        address_used: String,
    },
    /// No checked address accepted a connection.
    Failed {
        /// The door.
        door: Door,
        /// The host.
        host: String,
        /// The port.
        port: u16,
        /// Why.
        reason: String,
    },
    /// Closed, with the bytes each way.
    Close {
        /// The door.
        door: Door,
        /// The host.
        host: String,
        /// The port.
        port: u16,
        /// The pinned address.
        address_used: String,
        /// Bytes sent.
        bytes_sent: u64,
        /// Bytes received.
        bytes_received: u64,
    },
}
