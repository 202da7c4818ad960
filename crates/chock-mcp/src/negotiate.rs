//! How Chock opens a session with a server: the version negotiation of MCP 2026-07-28
//! (basic/versioning, backward compatibility with initialization-based versions).
//!
//! Chock first offers the stateless revision: `server/discover`, then the version, the client's
//! name and its capabilities in every request's `_meta` (rmcp's discover lifecycle). A server of
//! the stateful era refuses that probe — a JSON-RPC error that is not a modern refusal, a 4xx over
//! HTTP ([`discover_refused`], which crate::http calls), an answer that is no discover result, or
//! silence until rmcp's probe timeout — and is then opened with `initialize`, offering the newest dated version that has one
//! (2025-11-25), which the server may lower to one it speaks. Each revision is spoken with its own
//! lifecycle: `initialize` never names 2026-07-28.

use std::collections::HashSet;

use http::StatusCode;
use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, JsonRpcMessage, ProtocolVersion, RequestId,
    ServerJsonRpcMessage, ServerResult,
};
use rmcp::service::{ClientInitializeError, RunningService, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::streamable_http_client::StreamableHttpPostResponse;
use rmcp::transport::{IntoTransport, Transport};
use rmcp::{ClientLifecycleMode, ClientServiceExt, ErrorData, RoleClient};

use crate::client::Handler;

/// The versions Chock offers in `server/discover`, newest first: the stateless ones rmcp speaks.
fn stateless_versions() -> Vec<ProtocolVersion> {
    ProtocolVersion::KNOWN_VERSIONS
        .iter()
        .rev()
        .filter(|v| !v.has_initialize())
        .cloned()
        .collect()
}

/// Discovery first, `initialize` with the newest stateful version if the server is of that era.
fn lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: stateless_versions(),
        legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
    }
}

/// rmcp's client session with the server behind `transport`, its version negotiated.
pub(crate) async fn serve<T, E, A>(
    handler: Handler,
    transport: T,
) -> Result<RunningService<RoleClient, Handler>, ClientInitializeError>
where
    T: IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let probed = Probed {
        inner: transport.into_transport(),
        probes: HashSet::new(),
    };
    handler.serve_with_lifecycle(probed, lifecycle()).await
}

/// rmcp's client session over the legacy HTTP+SSE transport: a transport of the stateful era
/// only (2026-07-28 has none), so `initialize` offering 2025-11-25 straight away, no probe.
pub(crate) async fn serve_stateful<T, E, A>(
    handler: Handler,
    transport: T,
) -> Result<RunningService<RoleClient, Handler>, ClientInitializeError>
where
    T: IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    handler
        .serve_with_lifecycle(transport, ClientLifecycleMode::Initialize)
        .await
}

/// A server of the stateful era refuses the `server/discover` probe with a client error of its own
/// making (400 "not initialized", often with no request id, or no JSON-RPC body at all): that
/// answer, made the JSON-RPC error of the probe itself, is what tells rmcp's negotiation to fall
/// back to `initialize` (MCP 2026-07-28, basic/versioning). A server's own JSON-RPC error is kept
/// (a modern server refusing the version names the ones it speaks); `None` for anything but a
/// sessionless probe's 4xx, and for 401 and 403, which stay failures.
pub(crate) fn discover_refused(
    message: &ClientJsonRpcMessage,
    had_session: bool,
    status: StatusCode,
    parsed: Option<&ServerJsonRpcMessage>,
    body: &[u8],
) -> Option<StreamableHttpPostResponse> {
    let JsonRpcMessage::Request(request) = message else {
        return None;
    };
    if had_session
        || !status.is_client_error()
        || matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN)
        || !matches!(request.request, ClientRequest::DiscoverRequest(_))
    {
        return None;
    }
    let error = match parsed {
        Some(JsonRpcMessage::Error(error)) => error.error.clone(),
        _ => ErrorData::invalid_request(
            format!(
                "server/discover answered HTTP {status}: {}",
                String::from_utf8_lossy(&body[..body.len().min(512)])
            ),
            None,
        ),
    };
    Some(StreamableHttpPostResponse::Json(
        ServerJsonRpcMessage::error(error, Some(request.id.clone())),
        None,
    ))
}

/// A transport that makes a stateful-era server's answer to the discovery probe the error it
/// means. rmcp falls back to `initialize` on a correlated JSON-RPC error; servers of that era
/// answer the unknown method in other ways too: an empty result (a server that answers every
/// method it does not know with `{}`) or an error without the request's id.
struct Probed<T> {
    inner: T,
    /// The ids of `server/discover` requests not answered yet.
    probes: HashSet<RequestId>,
}

/// The error a stateful-era answer to the probe stands for.
fn not_modern(what: &str) -> ErrorData {
    ErrorData::new(
        rmcp::model::ErrorCode::METHOD_NOT_FOUND,
        format!("server/discover answered {what}: a server of the initialize era"),
        None,
    )
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for Probed<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        if let ClientJsonRpcMessage::Request(request) = &item
            && matches!(request.request, ClientRequest::DiscoverRequest(_))
        {
            self.probes.insert(request.id.clone());
        }
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let message = self.inner.receive().await?;
        if self.probes.is_empty() {
            return Some(message);
        }
        Some(match message {
            JsonRpcMessage::Response(response) if self.probes.remove(&response.id) => {
                if matches!(response.result, ServerResult::DiscoverResult(_)) {
                    JsonRpcMessage::Response(response)
                } else {
                    JsonRpcMessage::error(not_modern("with no discover result"), Some(response.id))
                }
            }
            JsonRpcMessage::Error(mut error) => {
                match &error.id {
                    Some(id) => {
                        self.probes.remove(id);
                    }
                    // One probe outstanding and an error that names no request: the probe's.
                    None if self.probes.len() == 1 => {
                        error.id = self.probes.drain().next();
                    }
                    None => {}
                }
                JsonRpcMessage::Error(error)
            }
            other => other,
        })
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
