//! A session's MCP servers (docs/mcp.md): read and made ready while the session is built, which
//! is synchronous (its workspace is made on a blocking thread), and started afterwards on the
//! caller's runtime ([`SessionRuntime::start_mcp`]), where their rmcp clients, stderr drains and
//! proxies then run for the session's life. Starting them builds no runtime of its own.

use std::path::Path;
use std::sync::Arc;

use chock_config::config::Config;

use super::{BuildError, SessionRuntime};
use crate::agent::Agent;
use crate::booking::OffTurn;

/// Servers configured for a session and what starting them needs, until they are started.
pub(crate) struct PendingMcp {
    pub(crate) servers: Vec<chock_mcp::Configured>,
    pub(crate) cx: chock_mcp::StartContext,
}

/// The session's MCP servers (chock.toml's once trusted, config.toml's `config`, an editor's
/// `extra`) and what starting them needs (`trust`: the trust file, else the person's; `off_turn`:
/// the account a server's sampling is booked to); `None` when there are none.
pub(crate) fn pending(
    agent: &Agent,
    config: &Config,
    extra: &[chock_mcp::Configured],
    trust: Option<&Path>,
    off_turn: impl FnOnce() -> OffTurn,
) -> Result<Option<PendingMcp>, BuildError> {
    let session = agent.host().session();
    let mut servers = chock_mcp::configured(
        session.policy(),
        session.project(),
        &config.mcp_servers,
        config.source.as_deref(),
    );
    for extra in extra {
        if !servers.iter().any(|s| s.def.name == extra.def.name) {
            servers.push(extra.clone());
        }
    }
    if servers.is_empty() {
        return Ok(None);
    }
    let pipeline = agent.decider().pipeline();
    let sampler = crate::mcp_sampler::ModelSampler {
        session: off_turn(),
    };
    let trust_path = match trust {
        Some(path) => path.to_path_buf(),
        None => chock_mcp::default_trust_path()?,
    };
    let trust = chock_mcp::TrustStore::open(&trust_path)?;
    let cx = chock_mcp::StartContext {
        pipeline: pipeline.clone(),
        sampler: Some(Arc::new(sampler)),
        trust: Arc::new(std::sync::Mutex::new(trust)),
        trusting: false,
        network: agent.host().network().clone(),
        // A server that needs a new sign-in mid-session sends the person there by a question
        // every client shows (its authorization server's host decided first, as `net.connect`).
        browser: Some(Arc::new(chock_mcp::QuestionBrowser::new(pipeline.clone()))),
        sign_in_transport: None,
    };
    Ok(Some(PendingMcp { servers, cx }))
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
