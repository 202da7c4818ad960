//! Reaching a streamable HTTP server. The host speaks to it, never a sandboxed process: rmcp's
//! streamable HTTP transport over Chock's own client (crate::http), whose every connection the
//! broker's door opens under the call id `mcp-<server>`. Each destination is the act
//! `net.connect.<reversed host>.<port>`, settled by the session's pipeline (the table, then whoever
//! must answer; a question once per server and session, crate::gate) and logged before the name is
//! even resolved; the broker resolves it, checks every
//! address (loopback and private ones only for a project or org rule naming the host exactly) and
//! connects to a checked one. A refused destination fails the start with the server, the act, the
//! rule and the host in the error.

use std::sync::Arc;

use chock_broker::Broker;
use chock_policy::mcp::ServerDef;
use rmcp::RoleClient;
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

use crate::McpError;
use crate::client::Handler;
use crate::http::DoorHttpClient;
use crate::server::{StartContext, failed};

/// rmcp's client of the server at `url` (its event stream when `sse`, the legacy transport),
/// initialized within the startup timeout.
pub(crate) async fn reach(
    def: &ServerDef,
    cx: &StartContext,
    url: &str,
    sse: bool,
    handler: Handler,
) -> Result<RunningService<RoleClient, Handler>, McpError> {
    let log = cx.pipeline.log().clone();
    let failed = |error: String| failed(&log, &def.name, error);
    let call_id = format!("mcp-{}", def.name);
    let broker = Broker::new(
        Arc::new(crate::gate::OnceGate::new(&cx.pipeline, &call_id)),
        log.clone(),
        cx.network.clone(),
    )
    .map_err(|e| failed(e.to_string()))?
    .for_call(&call_id);
    // The token `chock mcp login` stored for this server, if any (keyed by its URL and resource).
    // A legacy SSE server is not signed in to (`chock mcp login` takes streamable HTTP only).
    let grant = if sse {
        None
    } else {
        crate::oauth::stored_grant(url).map_err(&failed)?
    };
    let again = match &cx.browser {
        Some(browser) if grant.is_some() => Some(crate::oauth::Reauthorization {
            browser: Arc::clone(browser),
            client: crate::oauth::client_config(def).map_err(&failed)?,
            wait: crate::oauth::SIGN_IN_WAIT,
            transport: cx.sign_in_transport.clone(),
        }),
        _ => None,
    };
    let client = DoorHttpClient::new(broker, url, grant, again).map_err(failed)?;
    let mut config = StreamableHttpClientTransportConfig::with_uri(url);
    // A server that lost the session is not silently initialized again: its tools would not be
    // listed and checked against their pins. Its calls fail instead, as a stdio server's do once it
    // exited.
    config.reinit_on_expired_session = false;
    // Boxed, as each step inside: the handshake's futures are large (rmcp's client, hyper's,
    // the broker's door), and inline each made the frames awaiting it as large; a debug build's
    // frames outgrew a 2 MiB thread stack.
    let started = tokio::time::timeout(
        def.startup_timeout(),
        Box::pin(async {
            if sse {
                let transport = Box::pin(crate::sse::SseTransport::connect(client.clone(), url))
                    .await
                    .map_err(|e| e.to_string())?;
                Box::pin(crate::negotiate::serve_stateful(handler, transport))
                    .await
                    .map_err(|e| e.to_string())
            } else {
                let transport = StreamableHttpClientTransport::with_client(client.clone(), config);
                Box::pin(crate::negotiate::serve(handler, transport))
                    .await
                    .map_err(|e| e.to_string())
            }
        }),
    )
    .await;
    let refused = || {
        client
            .refusal()
            .map(|r| format!("the broker refused its destination: {r}"))
    };
    match started {
        Ok(Ok(running)) => Ok(running),
        Ok(Err(e)) => {
            Err(failed(refused().unwrap_or_else(|| {
                format!("initialize over {url} failed: {e}")
            })))
        }
        Err(_) => Err(failed(refused().unwrap_or_else(|| {
            format!(
                "did not answer initialize over {url} within {}s",
                def.startup_timeout_secs
            )
        }))),
    }
}

/// The act each connection to the endpoint `url` is decided as, `net.connect.<reversed
/// host>.<port>` (what `chock mcp list` shows; the broker decides the same name). `None`: the
/// URL names no host.
pub fn destination_action(url: &str) -> Option<chock_policy::Action> {
    let uri: http::Uri = url.parse().ok()?;
    let port = uri
        .port_u16()
        .unwrap_or(if uri.scheme_str() == Some("https") {
            443
        } else {
            80
        });
    chock_policy::Action::net_connect(uri.host()?, port).ok()
}
