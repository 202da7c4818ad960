//! rmcp's streamable HTTP transport over a client of Chock's own: hyper, whose every connection is
//! opened by the broker's door ([`chock_broker::Broker::open_stream`]: `net.connect.<host>.<port>`
//! decided by the pipeline and logged, the name resolved by the broker, every address checked and
//! the connection pinned to one, TLS verifying the URL's host). The host, not a sandboxed process,
//! speaks to the server, so nothing reaches it that the table did not let through.
//!
//! What the client does: POST each message (the answer is JSON, an SSE stream or `202 Accepted`),
//! GET the server's own SSE stream, send `Mcp-Session-Id` once the server gave one, DELETE the
//! session when the transport closes. It speaks to the configured endpoint only and follows no
//! redirect (a `3xx` is an error naming where it pointed), so a token never follows one. The table
//! holds no header values; the one credential sent is the token `chock mcp login` stored for the
//! server (crate::oauth), attached here to every request whose origin it was issued for, rmcp's own
//! `auth_header` ignored. A `401` or `403` is [`HttpClientError::Unauthorized`] with the server's
//! Bearer challenge.

use std::borrow::Cow;
use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use chock_broker::Broker;
use futures_util::stream::BoxStream;
use futures_util::{StreamExt, TryStreamExt};
use http::{HeaderName, HeaderValue, Method, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rmcp::model::{ClientJsonRpcMessage, JsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::common::http_header::{
    EVENT_STREAM_MIME_TYPE, HEADER_LAST_EVENT_ID, HEADER_SESSION_ID, JSON_MIME_TYPE,
};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::{Sse, SseStream};

use crate::door::DoorConnector;

pub use crate::http_error::HttpClientError;

pub(crate) type Failure = StreamableHttpError<HttpClientError>;

/// How many times one message may send the person to sign in again (the MCP spec asks for a
/// limit, so a server that keeps asking cannot loop).
const STEP_UP_LIMIT: u32 = 2;

pub(crate) fn failure(message: impl Into<String>) -> Failure {
    StreamableHttpError::Client(HttpClientError::Other(message.into()))
}

/// The words of an error and every error under it (hyper wraps the connector's refusal).
fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut words = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        let next = inner.to_string();
        if !words.contains(&next) {
            words.push_str(": ");
            words.push_str(&next);
        }
        source = inner.source();
    }
    words
}

/// The streamable HTTP client of one server: its endpoint, and hyper over the broker's door.
#[derive(Clone)]
pub(crate) struct DoorHttpClient {
    client: Client<DoorConnector, Full<Bytes>>,
    endpoint: Uri,
    refusal: Arc<Mutex<Option<String>>>,
    /// The stored grant, when `chock mcp login` signed in to this server.
    auth: Option<Arc<crate::oauth::Authorizer>>,
}

impl std::fmt::Debug for DoorHttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DoorHttpClient")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

fn media_type(headers: &http::HeaderMap) -> Option<String> {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase()
        })
}

fn header_text(headers: &http::HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

type Body = hyper::body::Incoming;

/// At most `limit` bytes of `body`; more is an error when `whole`, cut otherwise.
async fn read_body(body: Body, limit: usize, whole: bool) -> Result<Vec<u8>, Failure> {
    let mut stream = body.into_data_stream();
    let mut out = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| failure(chain(&e)))?;
        let room = limit.saturating_sub(out.len());
        if chunk.len() > room {
            if whole {
                return Err(StreamableHttpError::ResponseBodyTooLarge { max_size: limit });
            }
            out.extend_from_slice(&chunk[..room]);
            break;
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// The server's SSE events, each at most `max_event` bytes (counted before parsing, so a server
/// cannot make Chock hold an endless event).
pub(crate) fn sse_events(
    body: hyper::body::Incoming,
    max_event: usize,
) -> BoxStream<'static, Result<Sse, SseError>> {
    let mut since_boundary = 0usize;
    let mut last_newline = false;
    let bytes = body
        .into_data_stream()
        .map_err(|e| io::Error::other(chain(&e)))
        .and_then(move |chunk: Bytes| {
            let mut result = Ok(chunk.clone());
            for &byte in chunk.iter() {
                match byte {
                    b'\n' if last_newline => since_boundary = 0,
                    b'\n' => last_newline = true,
                    b'\r' => {}
                    _ => {
                        last_newline = false;
                        since_boundary += 1;
                    }
                }
                if since_boundary > max_event {
                    result = Err(io::Error::other(format!(
                        "an SSE event is larger than {max_event} bytes"
                    )));
                    break;
                }
            }
            std::future::ready(result)
        });
    SseStream::from_bytes_stream(bytes).boxed()
}

impl DoorHttpClient {
    /// A client of `endpoint` whose connections `broker` opens, attaching `grant`'s token (its
    /// refresh going through the same door).
    pub(crate) fn new(
        broker: Broker,
        endpoint: &str,
        grant: Option<chock_oauth::store::Grant>,
        again: Option<crate::oauth::Reauthorization>,
    ) -> Result<DoorHttpClient, String> {
        let endpoint: Uri = endpoint.parse().map_err(|e| format!("`{endpoint}`: {e}"))?;
        if endpoint.host().is_none_or(str::is_empty) {
            return Err(format!("`{endpoint}` names no host"));
        }
        if endpoint
            .authority()
            .is_some_and(|a| a.as_str().contains('@'))
        {
            return Err(format!(
                "`{endpoint}`: credentials in a URL are not sent (Chock holds no secrets in the table)"
            ));
        }
        let refusal = Arc::new(Mutex::new(None));
        let auth = grant.map(|g| Arc::new(crate::oauth::Authorizer::new(g, broker.clone(), again)));
        let connector = DoorConnector {
            broker,
            refusal: Arc::clone(&refusal),
        };
        let client = Client::builder(TokioExecutor::new()).build(connector);
        Ok(DoorHttpClient {
            client,
            endpoint,
            refusal,
            auth,
        })
    }

    /// The first destination the door refused, in words (the act, the rule, the host).
    pub(crate) fn refusal(&self) -> Option<String> {
        self.refusal.lock().ok().and_then(|r| r.clone())
    }

    /// A request to the endpoint (and nowhere else) with the session and rmcp's headers, and the
    /// stored token where it may go (refreshed first when it is about to expire).
    pub(crate) async fn request(
        &self,
        method: Method,
        uri: &str,
        session: Option<&str>,
        headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<http::request::Builder, Failure> {
        let asked: Uri = uri.parse().map_err(|e| failure(format!("`{uri}`: {e}")))?;
        if asked != self.endpoint {
            return Err(failure(format!(
                "Chock speaks to the configured endpoint {} only, not {asked}",
                self.endpoint
            )));
        }
        let mut builder = http::Request::builder()
            .method(method)
            .uri(self.endpoint.clone())
            .header(
                http::header::USER_AGENT,
                concat!("chock/", env!("CARGO_PKG_VERSION")),
            );
        // No credential of rmcp's or the configuration's: only the stored token, below.
        for (name, value) in headers {
            if name != http::header::AUTHORIZATION {
                builder = builder.header(name, value);
            }
        }
        if let Some(session) = session {
            builder = builder.header(HEADER_SESSION_ID, session);
        }
        if let Some(auth) = &self.auth {
            let url: url::Url = self
                .endpoint
                .to_string()
                .parse()
                .map_err(|e| failure(format!("`{}`: {e}", self.endpoint)))?;
            let method = builder.method_ref().map(|m| m.as_str().to_string());
            if let Some((value, proof)) = auth
                .header_for(method.as_deref().unwrap_or("POST"), &url)
                .await
                .map_err(failure)?
            {
                let mut value = HeaderValue::from_str(&value)
                    .map_err(|_| failure("the stored token is not a valid header value"))?;
                value.set_sensitive(true);
                builder = builder.header(http::header::AUTHORIZATION, value);
                if let Some(proof) = proof {
                    builder = builder.header("dpop", proof);
                }
            }
        }
        Ok(builder)
    }

    /// Sends `request`; a redirect is refused (Chock follows none), an authorization challenge
    /// named (Chock sends no credentials).
    pub(crate) async fn send(
        &self,
        request: http::Request<Full<Bytes>>,
    ) -> Result<http::Response<Body>, Failure> {
        let sent_token = request.headers().contains_key(http::header::AUTHORIZATION);
        let response = self
            .client
            .request(request)
            .await
            .map_err(|e| failure(chain(&e)))?;
        let status = response.status();
        if status.is_redirection() {
            let to = header_text(response.headers(), "location").unwrap_or_default();
            return Err(failure(format!(
                "HTTP {status}: the server redirects to `{to}`, and Chock follows no redirect of an MCP server"
            )));
        }
        if matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
            return Err(StreamableHttpError::Client(
                crate::http_error::unauthorized(status.as_u16(), response.headers(), sent_token),
            ));
        }
        Ok(response)
    }
}

impl StreamableHttpClient for DoorHttpClient {
    type Error = HttpClientError;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, Failure> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, Failure> {
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_sse_event_size = max_sse_event_size;
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            limits,
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, Failure> {
        let body = Bytes::from(serde_json::to_vec(&message)?);
        // A server that wants more scope (403 `insufficient_scope`) or no longer takes the token
        // (401) is signed in to again when the session can send the person, and the message
        // sent again: at most STEP_UP_LIMIT times for one message.
        let mut step = chock_oauth::StepUp::new(STEP_UP_LIMIT);
        let mut nonce_retried = false;
        let response = loop {
            let request = self
                .request(
                    Method::POST,
                    &uri,
                    session_id.as_deref(),
                    custom_headers.clone(),
                )
                .await?
                .header(http::header::CONTENT_TYPE, JSON_MIME_TYPE)
                .header(
                    http::header::ACCEPT,
                    format!("{JSON_MIME_TYPE}, {EVENT_STREAM_MIME_TYPE}"),
                )
                .body(Full::new(body.clone()))
                .map_err(|e| failure(e.to_string()))?;
            let sent = request
                .headers()
                .get(http::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            match self.send(request).await {
                // RFC 9449 §9: the server wants its nonce in the proof; once per message.
                Err(StreamableHttpError::Client(HttpClientError::Unauthorized {
                    dpop_nonce: Some(nonce),
                    sent_token: true,
                    ..
                })) if !nonce_retried
                    && self
                        .auth
                        .as_ref()
                        .is_some_and(|a| a.take_dpop_nonce(&nonce)) =>
                {
                    nonce_retried = true;
                }
                Err(StreamableHttpError::Client(HttpClientError::Unauthorized {
                    status,
                    challenge,
                    sent_token: true,
                    ..
                })) if self.auth.as_ref().is_some_and(|a| a.can_reauthorize())
                    && (status == 401
                        || challenge
                            .as_ref()
                            .is_some_and(chock_oauth::Challenge::insufficient_scope)) =>
                {
                    let auth = self.auth.as_ref().expect("checked above");
                    auth.reauthorize(challenge.as_ref(), sent.as_deref(), &mut step)
                        .await
                        .map_err(|e| failure(format!("HTTP {status}: {e}")))?;
                }
                other => break other?,
            }
        };
        let status = response.status();
        if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if status == StatusCode::NOT_FOUND && session_id.is_some() {
            return Err(StreamableHttpError::SessionExpired);
        }
        let session = header_text(response.headers(), HEADER_SESSION_ID);
        let kind = media_type(response.headers());
        // A notification, a response or an error awaits nothing back.
        let awaits_nothing = !matches!(message, JsonRpcMessage::Request(_));
        if !status.is_success() {
            let json = kind.as_deref() == Some(JSON_MIME_TYPE);
            let limit = if json {
                limits.max_json_response_size
            } else {
                limits.max_error_response_size
            };
            let body = read_body(response.into_body(), limit, false).await?;
            let parsed = if json {
                serde_json::from_slice::<ServerJsonRpcMessage>(&body).ok()
            } else {
                None
            };
            if let Some(answer) = crate::negotiate::discover_refused(
                &message,
                session_id.is_some(),
                status,
                parsed.as_ref(),
                &body,
            ) {
                return Ok(answer);
            }
            if let Some(error @ JsonRpcMessage::Error(_)) = parsed {
                return Ok(StreamableHttpPostResponse::Json(error, session));
            }
            let shown = &body[..body.len().min(limits.max_error_response_size)];
            return Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                format!("HTTP {status}: {}", String::from_utf8_lossy(shown)),
            )));
        }
        match kind.as_deref() {
            Some(EVENT_STREAM_MIME_TYPE) => Ok(StreamableHttpPostResponse::Sse(
                sse_events(response.into_body(), limits.max_sse_event_size),
                session,
            )),
            Some(JSON_MIME_TYPE) => {
                let body =
                    read_body(response.into_body(), limits.max_json_response_size, true).await?;
                match serde_json::from_slice::<ServerJsonRpcMessage>(&body) {
                    Ok(parsed) => Ok(StreamableHttpPostResponse::Json(parsed, session)),
                    Err(_) if awaits_nothing => Ok(StreamableHttpPostResponse::Accepted),
                    Err(e) => Err(StreamableHttpError::Deserialize(e)),
                }
            }
            _ if awaits_nothing => Ok(StreamableHttpPostResponse::Accepted),
            other => Err(StreamableHttpError::UnexpectedContentType(
                other.map(str::to_string),
            )),
        }
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), Failure> {
        let request = self
            .request(Method::DELETE, &uri, Some(&session_id), custom_headers)
            .await?
            .body(Full::new(Bytes::new()))
            .map_err(|e| failure(e.to_string()))?;
        let response = self.send(request).await?;
        let status = response.status();
        if status.is_success() || status == StatusCode::METHOD_NOT_ALLOWED {
            return Ok(());
        }
        Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
            format!("DELETE of the session answered {status}"),
        )))
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, Failure> {
        self.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default().max_sse_event_size,
        )
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, Failure> {
        let mut builder = self
            .request(Method::GET, &uri, session_id.as_deref(), custom_headers)
            .await?
            .header(
                http::header::ACCEPT,
                format!("{EVENT_STREAM_MIME_TYPE}, {JSON_MIME_TYPE}"),
            );
        if let Some(last) = last_event_id {
            builder = builder.header(HEADER_LAST_EVENT_ID, last);
        }
        let request = builder
            .body(Full::new(Bytes::new()))
            .map_err(|e| failure(e.to_string()))?;
        let response = self.send(request).await?;
        let status = response.status();
        if status == StatusCode::METHOD_NOT_ALLOWED {
            return Err(StreamableHttpError::ServerDoesNotSupportSse);
        }
        if !status.is_success() {
            return Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                format!("GET of the event stream answered {status}"),
            )));
        }
        match media_type(response.headers()).as_deref() {
            Some(EVENT_STREAM_MIME_TYPE | JSON_MIME_TYPE) | None => {
                Ok(sse_events(response.into_body(), max_sse_event_size))
            }
            Some(other) => Err(StreamableHttpError::UnexpectedContentType(Some(
                other.to_string(),
            ))),
        }
    }
}
