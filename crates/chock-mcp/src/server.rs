//! Starting one server and speaking to it: the trust check; for a stdio server the network act,
//! the confined process (chock-session's service: the same plan and driver as every call) and
//! rmcp's client over its pipes (crate::stdio); for a streamable HTTP one rmcp's client over the broker's door
//! (crate::remote); then the tool list checked against the pins.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use chock_decide::Pipeline;
use chock_log::Log;
use chock_policy::mcp::Transport;
use chock_protocol::log::{McpDefinition, McpServer};
use chock_session::{Service, Session};
use rmcp::RoleClient;
use rmcp::service::RunningService;

use crate::client::{Handler, Sampler};
use crate::tools::ToolDef;
use crate::trust::{Origin, TrustState, TrustStore};
use crate::{Configured, McpError};

/// What starting servers needs from the session.
#[derive(Clone)]
pub struct StartContext {
    /// The session's pipeline (its log, live policy and answerers): the network act, every
    /// tool call, sampling and elicitation are settled here.
    pub pipeline: Pipeline,
    /// Who calls the model for a server's sampling request (none: sampling is refused).
    pub sampler: Option<Arc<dyn Sampler>>,
    /// The trust file.
    pub trust: Arc<Mutex<TrustStore>>,
    /// `chock mcp trust`: the person is trusting this definition now, and its tools are pinned
    /// as they are listed.
    pub trusting: bool,
    /// How the broker that reaches a streamable HTTP server resolves and verifies (the same
    /// configuration `fetch_url` uses: nameservers, extra roots).
    pub network: chock_broker::BrokerConfig,
    /// Who sends the person to an authorization server when a server asks for more scope or
    /// no longer takes its token mid-session (none: that is reported, pointing to
    /// `chock mcp login`).
    pub browser: Option<Arc<dyn chock_oauth::Browser>>,
    /// What signing in again goes through instead of the server's door (none: the door). The
    /// conformance adapter's own.
    pub sign_in_transport: Option<Arc<dyn chock_oauth::DynTransport>>,
}

impl std::fmt::Debug for StartContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StartContext")
            .field("trusting", &self.trusting)
            .finish_non_exhaustive()
    }
}

/// Whether a listed tool may be offered, as far as its definition goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PinState {
    /// The definition is the one approved.
    Pinned,
    /// Not what was approved (or never approved): refused until `chock mcp trust` again.
    Changed {
        /// The approved hash (`None`: never approved).
        pinned: Option<String>,
    },
}

/// A tool a server lists, with its pin.
#[derive(Debug, Clone)]
pub struct Listed {
    /// Its definition now.
    pub def: ToolDef,
    /// How it stands against the pin.
    pub pin: PinState,
}

/// A running server.
pub struct Server {
    pub(crate) configured: Configured,
    pub(crate) client: Mutex<Option<RunningService<RoleClient, Handler>>>,
    pub(crate) peer: rmcp::service::Peer<RoleClient>,
    /// What answers the server's requests: also the input a 2026-07-28 server asks for in a
    /// call's `input_required` result (crate::mrtr).
    pub(crate) handler: Handler,
    pub(crate) service: Mutex<Option<Service>>,
    pub(crate) tools: Mutex<Vec<Listed>>,
    pub(crate) changed: Arc<AtomicBool>,
    pub(crate) trust: Arc<Mutex<TrustStore>>,
    pub(crate) log: Log,
    pub(crate) network: bool,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("name", &self.configured.def.name)
            .finish_non_exhaustive()
    }
}

impl Server {
    /// Its name.
    pub fn name(&self) -> &str {
        &self.configured.def.name
    }

    /// Its configuration.
    pub fn configured(&self) -> &Configured {
        &self.configured
    }

    /// Whether it has the network.
    pub fn has_network(&self) -> bool {
        self.network
    }

    /// Its tools as last listed.
    pub fn tools(&self) -> Vec<Listed> {
        self.tools.lock().map(|t| t.clone()).unwrap_or_default()
    }

    /// Lists its tools again when it said they changed (`tools/list_changed`), checking each
    /// against its pin (a changed one is logged and refused). A server spoken to in a stateless
    /// revision (2026-07-28) sends no such notification outside a `subscriptions/listen` stream,
    /// so its tools are listed again before every call: a definition swapped after approval is
    /// still caught before the call.
    pub(crate) async fn refresh_if_changed(&self) -> Result<(), McpError> {
        let stateless = self
            .peer
            .peer_info()
            .is_some_and(|info| !info.protocol_version.has_initialize());
        if self.changed.swap(false, Ordering::SeqCst) || stateless {
            let listed = list_and_check(self, false).await?;
            if let Ok(mut tools) = self.tools.lock() {
                *tools = listed;
            }
        }
        Ok(())
    }

    /// Ends the MCP session with it.
    pub(crate) async fn stop_client(&self) {
        let client = self.client.lock().ok().and_then(|mut c| c.take());
        if let Some(client) = client {
            let _ = client.cancel().await;
        }
    }

    /// Stops its sandbox through its confiner's handle (every process in it is gone when this
    /// returns) and its proxy, and logs it when there is a `reason`.
    pub(crate) async fn stop_service(&self, reason: Option<&str>) {
        let service = self.service.lock().ok().and_then(|mut s| s.take());
        if let Some(service) = service {
            service.stop().await;
        }
        if let Some(reason) = reason {
            let _ = self.log.record(
                None,
                McpServer::Stopped {
                    server: self.name().to_string(),
                    reason: reason.to_string(),
                },
            );
        }
    }

    /// Kills its sandbox without waiting (a hub dropped unstopped, maybe outside any runtime):
    /// the handle's drop then reaps what is left.
    pub(crate) fn kill_service(&self) {
        let service = self.service.lock().ok().and_then(|mut s| s.take());
        if let Some(service) = service {
            service.killer().kill();
        }
    }
}

/// Lists the server's tools and checks each against the trust file's pins; with `pin_new`, a tool
/// without a pin (its server's own configuration, or `chock mcp trust`) is pinned now.
async fn list_and_check(server: &Server, pin_new: bool) -> Result<Vec<Listed>, McpError> {
    let name = server.name().to_string();
    let tools = tokio::time::timeout(
        server.configured.def.startup_timeout(),
        server.peer.list_all_tools(),
    )
    .await
    .map_err(|_| McpError::Timeout {
        server: name.clone(),
        what: "tools/list".into(),
    })?
    .map_err(|e| McpError::Protocol {
        server: name.clone(),
        message: e.to_string(),
    })?;
    let origin = &server.configured.origin;
    let mut listed = Vec::new();
    let mut store = server.trust.lock().map_err(|_| McpError::Poisoned)?;
    let mut dirty = false;
    for tool in &tools {
        let Some(def) = ToolDef::from_rmcp(&name, tool) else {
            continue;
        };
        let pinned = store.pinned(origin, &name, &def.name).map(str::to_string);
        let pin = match pinned {
            Some(h) if h == def.hash => PinState::Pinned,
            // Approved now (`chock mcp trust`), or first seen from the person's own
            // configuration: pinned as it is.
            _ if pin_new || (pinned.is_none() && !origin.needs_trust()) => {
                store.pin(origin, &name, &def.name, &def.hash);
                dirty = true;
                server.log.record(
                    None,
                    McpDefinition::Pinned {
                        server: name.clone(),
                        tool: def.name.clone(),
                        action: def.action.as_str().to_string(),
                        hash: def.hash.clone(),
                    },
                )?;
                PinState::Pinned
            }
            pinned => {
                server.log.record(
                    None,
                    McpDefinition::Changed {
                        server: name.clone(),
                        tool: def.name.clone(),
                        action: def.action.as_str().to_string(),
                        pinned: pinned.clone().unwrap_or_else(|| "none".to_string()),
                        now: def.hash.clone(),
                    },
                )?;
                PinState::Changed { pinned }
            }
        };
        listed.push(Listed { def, pin });
    }
    if dirty {
        store.save()?;
    }
    Ok(listed)
}

/// Starts `configured` for `session`: refused (and logged) unless its definition is trusted;
/// then the network act, the confined process, `initialize`, the tool list against the pins.
pub(crate) async fn start(
    session: &Session,
    configured: &Configured,
    cx: &StartContext,
) -> Result<Server, McpError> {
    let def = &configured.def;
    let log = cx.pipeline.log().clone();
    let state = cx.trust.lock().map_err(|_| McpError::Poisoned)?.state(
        &configured.origin,
        &def.name,
        &configured.hash,
    );
    if !state.may_start() && !cx.trusting {
        let reason = format!(
            "its definition in {} is {}: run `chock mcp trust {}` to review and trust it",
            configured.file_words(),
            state.word(),
            def.name
        );
        log.record(
            None,
            McpServer::Refused {
                server: def.name.clone(),
                reason: reason.clone(),
            },
        )?;
        return Err(McpError::NotTrusted {
            server: def.name.clone(),
            state,
        });
    }
    let files = crate::files::checked(configured, cx, &log)?;
    if cx.trusting && configured.origin.needs_trust() {
        let mut store = cx.trust.lock().map_err(|_| McpError::Poisoned)?;
        store.trust(&configured.origin, &def.name, &configured.hash);
        if let Some(files) = &files {
            store.pin_files(&configured.origin, &def.name, files);
        }
        store.save()?;
    }
    let changed = Arc::new(AtomicBool::new(false));
    let handler = Handler {
        server: def.name.clone(),
        pipeline: cx.pipeline.clone(),
        sampler: cx.sampler.clone(),
        root: session.project().to_path_buf(),
        tools_changed: Arc::clone(&changed),
    };
    let answering = handler.clone();
    let (client, service, network) = match &def.transport {
        Transport::Stdio { command, args } => {
            let argv: Vec<String> = std::iter::once(command.clone())
                .chain(args.iter().cloned())
                .collect();
            let (client, service, network) =
                crate::stdio::launch(session, def, cx, &argv, handler).await?;
            (client, Some(service), network)
        }
        // Boxed: a remote server's handshake (rmcp's client, hyper's, the broker's door) is a
        // large future, and inline it made every frame that awaits it as large; a debug build's
        // frames then outgrew a 2 MiB thread stack.
        Transport::Http { url } => (
            Box::pin(crate::remote::reach(def, cx, url, false, handler)).await?,
            None,
            false,
        ),
        Transport::Sse { url } => (
            Box::pin(crate::remote::reach(def, cx, url, true, handler)).await?,
            None,
            false,
        ),
    };
    let server_info = client
        .peer_info()
        .and_then(|info| info.server_info.clone())
        .map(|info| format!("{} {}", info.name, info.version));
    log.record(
        None,
        McpServer::Started {
            server: def.name.clone(),
            origin: configured.origin.word().to_string(),
            transport: match def.transport {
                Transport::Stdio { .. } => "stdio",
                Transport::Http { .. } => "http",
                Transport::Sse { .. } => "sse",
            }
            .to_string(),
            definition: configured.hash.clone(),
            network,
            server_info,
        },
    )?;
    let server = Server {
        configured: configured.clone(),
        peer: client.peer().clone(),
        handler: answering,
        client: Mutex::new(Some(client)),
        service: Mutex::new(service),
        tools: Mutex::new(Vec::new()),
        changed,
        trust: Arc::clone(&cx.trust),
        log,
        network,
    };
    let listed = match list_and_check(&server, cx.trusting).await {
        Ok(listed) => listed,
        Err(e) => {
            server.stop_client().await;
            let reason = format!("listing its tools failed: {e}");
            server.stop_service(Some(&reason)).await;
            return Err(e);
        }
    };
    if let Ok(mut tools) = server.tools.lock() {
        *tools = listed;
    }
    Ok(server)
}

/// Logs that `server` did not start and why; the error to return.
pub(crate) fn failed(log: &Log, server: &str, error: String) -> McpError {
    let _ = log.record(
        None,
        McpServer::Failed {
            server: server.to_string(),
            error: error.clone(),
        },
    );
    McpError::Start {
        server: server.to_string(),
        message: error,
    }
}

impl Configured {
    /// Where its definition was read, in words.
    pub fn file_words(&self) -> String {
        match &self.origin {
            Origin::Project { file, .. } | Origin::User { file } => file.display().to_string(),
            Origin::Editor => "the editor's session/new".to_string(),
        }
    }
}

/// Whether a start failure is the server not being trusted.
pub fn is_untrusted(e: &McpError) -> Option<TrustState> {
    match e {
        McpError::NotTrusted { state, .. } => Some(*state),
        McpError::FileChanged { .. } => Some(TrustState::Changed),
        _ => None,
    }
}
