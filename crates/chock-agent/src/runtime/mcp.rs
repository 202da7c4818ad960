//! A session's MCP servers (docs/mcp.md): read and made ready while the session is built, which
//! is synchronous (its workspace is made on a blocking thread), and started afterwards on the
//! caller's runtime ([`SessionRuntime::start_mcp`]), where their rmcp clients, stderr drains and
//! proxies then run for the session's life. Starting them builds no runtime of its own.

use std::sync::Arc;

use super::{BuildError, SessionRuntime};

/// Servers configured for a session and what starting them needs, until they are started.
pub(crate) struct PendingMcp {
    pub(crate) servers: Vec<chock_mcp::Configured>,
    pub(crate) cx: chock_mcp::StartContext,
}

impl SessionRuntime {
    /// Starts the session's MCP servers (chock.toml's once trusted, config.toml's, an editor's)
    /// on the caller's runtime, and registers the tools they offer under the session's table.
    /// A session built by [`super::SessionBuilder::build`] or `resume` offers them only once
    /// this was awaited (`chock_runtime::start` does, before the session takes its first
    /// input); awaiting it again does nothing.
    pub async fn start_mcp(&mut self) -> Result<(), BuildError> {
        let Some(pending) = self.mcp.take() else {
            return Ok(());
        };
        let hub =
            chock_mcp::McpHub::start(self.agent.host().session(), &pending.servers, &pending.cx)
                .await?;
        let hub = Arc::new(hub);
        for tool in chock_tools::mcp::McpToolAdapter::offered(&hub, &pending.cx.pipeline) {
            self.agent.register_tool(tool)?;
        }
        Ok(())
    }
}
