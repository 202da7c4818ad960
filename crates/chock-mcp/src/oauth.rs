//! The host's side of MCP authorization: the OAuth client's transport over the broker's door
//! (shared by `chock mcp login` and a session's HTTP client), and the grant a session's client
//! attaches to its requests. A stored grant's token goes to its resource's origin only
//! ([`chock_oauth::Token::authorization_for`]); when it expires within a minute it is refreshed
//! first (the authorization server found again by discovery, through the same door) and the fresh
//! grant is stored. Nothing here logs or prints a token.

use std::time::Duration;

use bytes::Bytes;
use chock_broker::Broker;
use chock_oauth::metadata::{canonical_resource, check_url};
use chock_oauth::store::{self, Grant};
use chock_oauth::{HttpRequest, HttpResponse, Transport, discover};
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;

/// The most of a response body read (metadata and token answers are small).
const MAX_BODY: usize = 1 << 20;
/// The most one request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// A token expiring within this many seconds is refreshed before it is sent.
const REFRESH_MARGIN_SECS: u64 = 60;

/// The OAuth client's transport: HTTP/1.1 over a connection the broker's door opens (decided,
/// logged, resolved, checked, pinned; TLS verifying the URL's host). It follows no redirect.
pub struct DoorTransport {
    broker: Broker,
}

impl std::fmt::Debug for DoorTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DoorTransport").finish_non_exhaustive()
    }
}

impl DoorTransport {
    /// A transport whose every connection `broker` opens (its call id names the server).
    pub fn new(broker: Broker) -> DoorTransport {
        DoorTransport { broker }
    }
}

impl Transport for DoorTransport {
    async fn send(&self, request: HttpRequest) -> Result<HttpResponse, String> {
        tokio::time::timeout(REQUEST_TIMEOUT, self.send_now(request))
            .await
            .map_err(|_| format!("no answer within {}s", REQUEST_TIMEOUT.as_secs()))?
    }
}

impl DoorTransport {
    async fn send_now(&self, request: HttpRequest) -> Result<HttpResponse, String> {
        let url = &request.url;
        let tls = url.scheme() == "https";
        let host = url.host_str().ok_or("the URL names no host")?.to_string();
        let port = url.port_or_known_default().ok_or("the URL names no port")?;
        let stream = self
            .broker
            .open_stream(chock_broker::Door::Mcp, &host, port, tls)
            .await
            .map_err(|e| format!("{e} (destination {host}:{port})"))?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(connection);
        let authority = match url.port() {
            Some(p) => format!("{host}:{p}"),
            None => host.clone(),
        };
        let mut builder = hyper::Request::builder()
            .method(request.method.clone())
            .uri(&url[url::Position::BeforePath..])
            .header("host", authority)
            .header("user-agent", concat!("chock/", env!("CARGO_PKG_VERSION")));
        for (name, value) in &request.headers {
            builder = builder.header(name, value);
        }
        let body = builder
            .body(Full::new(Bytes::from(request.body)))
            .map_err(|e| e.to_string())?;
        let response = sender.send_request(body).await.map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .map(|(n, v)| {
                (
                    n.to_string(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect();
        let body = Limited::new(response.into_body(), MAX_BODY)
            .collect()
            .await
            .map_err(|e| format!("reading the answer: {e}"))?
            .to_bytes()
            .to_vec();
        Ok(HttpResponse {
            status,
            headers,
            body,
        })
    }
}

/// The grant stored for the server at `url` (by `chock mcp login`): for its canonical URI, else
/// for its origin (a root-level metadata document names the origin as the resource).
pub(crate) fn stored_grant(url: &str) -> Result<Option<Grant>, String> {
    let parsed = check_url(url).map_err(|e| e.to_string())?;
    let mut origin = parsed.clone();
    origin.set_path("/");
    for resource in [canonical_resource(&parsed), canonical_resource(&origin)] {
        if let Some(grant) = store::load(url, &resource).map_err(|e| e.to_string())? {
            return Ok(Some(grant));
        }
    }
    Ok(None)
}

/// A session's grant for one server, refreshed in place.
pub(crate) struct Authorizer {
    grant: tokio::sync::Mutex<Grant>,
    transport: DoorTransport,
}

impl Authorizer {
    pub(crate) fn new(grant: Grant, broker: Broker) -> Authorizer {
        Authorizer {
            grant: tokio::sync::Mutex::new(grant),
            transport: DoorTransport::new(broker),
        }
    }

    /// The `Authorization` value for a request to `endpoint`, refreshing the token first when it
    /// expires within a minute (and storing the fresh grant). `None`: the token may not go there.
    pub(crate) async fn header_for(&self, endpoint: &url::Url) -> Result<Option<String>, String> {
        let mut grant = self.grant.lock().await;
        if grant.token.expires_within(REFRESH_MARGIN_SECS) && grant.token.refresh_token.is_some() {
            let found = discover(&self.transport, &grant.server, None)
                .await
                .map_err(|e| format!("refreshing the token: {e}"))?;
            let fresh = found
                .refresh(&self.transport, &grant.client(), &grant.token)
                .await
                .map_err(|e| {
                    format!("refreshing the token: {e}; sign in again with `chock mcp login`")
                })?;
            grant.token = fresh;
            store::save(&grant).map_err(|e| format!("storing the refreshed token: {e}"))?;
        }
        Ok(grant.token.authorization_for(endpoint))
    }
}
