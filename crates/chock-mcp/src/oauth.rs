//! The host's side of MCP authorization: the OAuth client's transport over the broker's door
//! (shared by `chock mcp login` and a session's HTTP client), and the grant a session's client
//! attaches to its requests. A stored grant's token goes to its resource's origin only
//! ([`chock_oauth::Token::authorization_for`]); when it expires within a minute it is refreshed
//! first (the authorization server found again by discovery, through the same door) and the fresh
//! grant is stored. Nothing here logs or prints a token.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use chock_broker::Broker;
use chock_oauth::client::ClientConfig;
use chock_oauth::flow::StepUp;
use chock_oauth::metadata::{canonical_resource, check_url};
use chock_oauth::store::{self, Grant};
use chock_oauth::{
    Browser, Challenge, ClientChoice, DynTransport, HttpRequest, HttpResponse, Transport, Visit,
    discover, sign_in_with_code,
};
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

impl DoorTransport {
    /// Decides (and logs) `net.connect` to `url`'s host and port by opening a connection there
    /// through the door, and closes it: a person is sent to an authorization endpoint only once
    /// the table has let Chock reach that host itself.
    pub async fn admit(&self, url: &url::Url) -> Result<(), String> {
        let host = url.host_str().ok_or("the URL names no host")?;
        let port = url.port_or_known_default().ok_or("the URL names no port")?;
        let tls = url.scheme() == "https";
        self.broker
            .open_stream(chock_broker::Door::Mcp, host, port, tls)
            .await
            .map(drop)
            .map_err(|e| format!("{e} (destination {host}:{port})"))
    }
}

/// How long a person has to finish signing in.
pub const SIGN_IN_WAIT: Duration = Duration::from_secs(300);

/// Who Chock is to `def`'s authorization server, as its table says: a pre-registered client
/// (its secret read now from the host environment variable the table names), the client ID
/// metadata document URL, else nothing (dynamic registration). A named variable that is unset
/// is an error naming the server and field.
pub fn client_config(def: &chock_policy::mcp::ServerDef) -> Result<ClientConfig, String> {
    let mut config = ClientConfig {
        client_name: "Chock".into(),
        ..ClientConfig::default()
    };
    let Some(oauth) = &def.oauth else {
        return Ok(config);
    };
    config.client_id = oauth.client_id.clone();
    config.metadata_document = oauth.client_metadata_url.clone();
    if let Some(var) = &oauth.client_secret_env {
        let secret = std::env::var(var).map_err(|_| {
            format!(
                "mcp.servers.{}.client_secret_env: the environment variable `{var}` is not set",
                def.name
            )
        })?;
        config.client_secret = Some(chock_oauth::Secret::new(secret));
    }
    Ok(config)
}

/// How a session signs in again when a server wants more scope or no longer takes the token:
/// who sends the person to the authorization server, and who the client is to a new one.
#[derive(Clone)]
pub struct Reauthorization {
    /// Sends the person to the authorization URL (their browser at a terminal).
    pub browser: Arc<dyn Browser>,
    /// The client to register as at an authorization server the grant's client is not known to
    /// (a client ID metadata document, a pre-registered client, else dynamic registration).
    pub client: ClientConfig,
    /// How long the person has.
    pub wait: Duration,
    /// What the sign-in's requests go through instead of the session's door (none: the door,
    /// which also decides the authorization endpoint's host before the person is sent there).
    /// The conformance adapter's, whose every request is decided by a table naming exactly its
    /// destination (its authorization servers listen on ports learnt only from discovery).
    pub transport: Option<Arc<dyn DynTransport>>,
}

impl std::fmt::Debug for Reauthorization {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reauthorization")
            .field("wait", &self.wait)
            .finish_non_exhaustive()
    }
}

/// A session's grant for one server, refreshed in place, and signed in again (more scope, or a
/// new authorization server) when the session may send the person to authorise.
pub(crate) struct Authorizer {
    grant: tokio::sync::Mutex<Grant>,
    transport: DoorTransport,
    again: Option<Reauthorization>,
    /// The resource server's last DPoP nonce.
    dpop_nonce: std::sync::Mutex<Option<String>>,
}

impl Authorizer {
    pub(crate) fn new(grant: Grant, broker: Broker, again: Option<Reauthorization>) -> Authorizer {
        Authorizer {
            grant: tokio::sync::Mutex::new(grant),
            transport: DoorTransport::new(broker),
            again,
            dpop_nonce: std::sync::Mutex::new(None),
        }
    }

    /// Whether the session can sign in again at all.
    pub(crate) fn can_reauthorize(&self) -> bool {
        self.again.is_some()
    }

    /// Signs in again after the server answered `sent` (the `Authorization` value the request
    /// carried) with a 403 `insufficient_scope` (the scope asked: what the grant held and what
    /// the challenge names, RFC 6750 §3.1 and the MCP spec's step-up) or a 401 (the token is no
    /// longer taken: discovery again, which finds a new authorization server if the resource
    /// moved, and registration anew there, since a client is the issuer's). When another request
    /// already replaced the token, nothing is done and the caller sends again. The discovery,
    /// registration and token requests go through the session's door (each destination decided
    /// and logged), and so does the authorization endpoint's host before the person is sent there.
    pub(crate) async fn reauthorize(
        &self,
        challenge: Option<&Challenge>,
        sent: Option<&str>,
        step: &mut StepUp,
    ) -> Result<(), String> {
        let Some(again) = &self.again else {
            return Err("this session cannot send anyone to sign in".into());
        };
        let mut grant = self.grant.lock().await;
        let current = grant.token.access_token.expose();
        if sent.is_some_and(|s| s.split_once(' ').map(|(_, t)| t) != Some(current)) {
            return Ok(());
        }
        let scope = step
            .next_scope(
                grant.token.scope.as_deref(),
                &challenge.cloned().unwrap_or_default(),
            )
            .map_err(|e| e.to_string())?;
        let scope = (!scope.is_empty()).then_some(scope);
        let fresh = match &again.transport {
            Some(own) => {
                let browser = again.browser.as_ref();
                sign_in_again(own, &grant, again, challenge, scope, browser).await
            }
            None => {
                let admit = AdmittingBrowser {
                    transport: &self.transport,
                    inner: again.browser.as_ref(),
                };
                sign_in_again(&self.transport, &grant, again, challenge, scope, &admit).await
            }
        };
        *grant = fresh.map_err(|e| format!("signing in again: {e}"))?;
        store::save(&grant).map_err(|e| format!("storing the new token: {e}"))?;
        Ok(())
    }

    /// The `Authorization` value for a request to `endpoint`, refreshing the token first when it
    /// expires within a minute (and storing the fresh grant). `None`: the token may not go there.
    pub(crate) async fn header_for(
        &self,
        method: &str,
        endpoint: &url::Url,
    ) -> Result<Option<(String, Option<String>)>, String> {
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
        let Some(authorization) = grant.token.authorization_for(endpoint) else {
            return Ok(None);
        };
        // A DPoP-bound token goes with a fresh proof of this request (RFC 9449 §7.1).
        let proof = match (&grant.dpop_key, grant.token.token_type.as_str()) {
            (Some(key), "DPoP") => {
                let nonce = self
                    .dpop_nonce
                    .lock()
                    .map(|n| n.clone())
                    .unwrap_or_default();
                Some(
                    key.proof(
                        method,
                        endpoint,
                        Some(grant.token.access_token.expose()),
                        nonce.as_deref(),
                    )
                    .map_err(|e| e.to_string())?,
                )
            }
            _ => None,
        };
        Ok(Some((authorization, proof)))
    }

    /// Keeps the nonce a server asked DPoP proofs to carry (`use_dpop_nonce`, RFC 9449 §9),
    /// for the proofs that follow; whether it was kept.
    pub(crate) fn take_dpop_nonce(&self, nonce: &str) -> bool {
        match self.dpop_nonce.lock() {
            Ok(mut held) => {
                *held = Some(nonce.to_string());
                true
            }
            Err(_) => false,
        }
    }
}

/// Discovery again from `challenge`, then the code flow for `scope` as the grant's client when
/// the authorization server is the one that issued it, else as a client registered anew there
/// (a client is its issuer's: it is never presented to another).
async fn sign_in_again<T: Transport>(
    transport: &T,
    grant: &Grant,
    again: &Reauthorization,
    challenge: Option<&Challenge>,
    scope: Option<String>,
    browser: &dyn Browser,
) -> Result<Grant, chock_oauth::OAuthError> {
    let found = discover(transport, &grant.server, challenge).await?;
    let known = grant.issuer == found.auth_server.issuer.as_str();
    let mut reused = grant.client();
    reused.private_key = again.client.private_key.clone();
    let choice = if known {
        ClientChoice::Reuse(&reused)
    } else if again.client.client_id.is_some() {
        // A configured client was registered with the authorization server it was first used
        // at; its ID and secret are not shown to another (the MCP spec, SEP-2352).
        return Err(chock_oauth::OAuthError::Refused {
            endpoint: found.auth_server.issuer.to_string(),
            error: "client_not_registered_here".into(),
            description: Some(format!(
                "the server now sends Chock to this authorization server, not {}; the configured `client_id` is not presented to it: register a client there, change the table and sign in with `chock mcp login`",
                grant.issuer
            )),
        });
    } else {
        ClientChoice::Register(&again.client)
    };
    let (client, token) = sign_in_with_code(
        transport,
        &found,
        choice,
        scope.as_deref().or(found.scope.as_deref()),
        browser,
        again.wait,
    )
    .await?;
    Ok(Grant {
        server: grant.server.clone(),
        resource: found.resource.clone(),
        issuer: found.auth_server.issuer.to_string(),
        client_id: client.client_id.clone(),
        client_secret: client.client_secret.clone(),
        auth_method: client.auth_method.name().to_string(),
        revocation_endpoint: found
            .auth_server
            .revocation_endpoint
            .as_ref()
            .map(|u| u.to_string()),
        token,
        dpop_key: client.dpop.clone(),
    })
}

/// A browser that first has the door decide the authorization endpoint's host.
struct AdmittingBrowser<'a> {
    transport: &'a DoorTransport,
    inner: &'a dyn Browser,
}

impl Browser for AdmittingBrowser<'_> {
    fn visit<'a>(&'a self, url: &'a url::Url, host: &'a str) -> Visit<'a> {
        Box::pin(async move {
            self.transport.admit(url).await?;
            self.inner.visit(url, host).await
        })
    }
}
