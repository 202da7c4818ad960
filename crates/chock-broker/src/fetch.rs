//! `fetch_url`: one GET through the door, each redirect decided and checked again, HTTP/1.1 over the
//! pinned stream, TLS verifying the original host name, size and time limits, HTML made readable, and
//! the result passed through the log's redaction funnel.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use chock_policy::Action;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncRead, AsyncWrite};
use url::{Position, Url};

use crate::door::{ByteCounts, Counted, DoorKeeper, PinnedConnection};
use crate::error::BrokerError;
use crate::events::Door;
use crate::html::html_to_text;
use crate::{CONNECT_TIMEOUT, canonical_host};

/// Limits on one fetch (all redirects included).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchLimits {
    /// The most body bytes read; the rest is cut and `truncated` is set.
    pub max_bytes: usize,
    /// The whole fetch, redirects included.
    pub timeout: Duration,
    /// Redirects followed before giving up.
    pub max_redirects: usize,
    /// One connection attempt to one address.
    pub connect_timeout: Duration,
}

impl Default for FetchLimits {
    fn default() -> Self {
        Self {
            max_bytes: 2 * 1024 * 1024,
            timeout: Duration::from_secs(30),
            max_redirects: 5,
            connect_timeout: CONNECT_TIMEOUT,
        }
    }
}

/// A fetched page, made readable and redacted.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FetchedPage {
    /// The URL asked for.
    pub url: String,
    /// The URL finally read (after redirects).
    pub final_url: String,
    /// Every URL redirected to, in order.
    pub redirects: Vec<String>,
    /// The final HTTP status.
    pub status: u16,
    /// The `Content-Type`, if given.
    pub content_type: Option<String>,
    /// The readable text (HTML turned into text; other text as is), redacted.
    pub text: String,
    /// True if the body was longer than the limit and was cut.
    pub truncated: bool,
}

/// A raw response (body bytes as read, up to the limit).
#[derive(Debug)]
pub(crate) struct RawResponse {
    pub final_url: Url,
    pub redirects: Vec<String>,
    pub status: u16,
    pub content_type: Option<String>,
    /// A `Content-Encoding` other than identity (asked for identity, but a server may ignore that).
    pub content_encoding: Option<String>,
    pub body: Vec<u8>,
    pub truncated: bool,
}

/// The rustls client configuration: webpki roots plus `extra`, ring as the provider.
pub(crate) fn tls_config(
    extra: &[CertificateDer<'static>],
) -> Result<rustls::ClientConfig, BrokerError> {
    let mut roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    for cert in extra {
        roots.add(cert.clone()).map_err(|e| BrokerError::Tls {
            host: "(extra root)".into(),
            reason: e.to_string(),
        })?;
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| BrokerError::Tls {
        host: "(config)".into(),
        reason: e.to_string(),
    })?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(config)
}

trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

fn parse_url(text: &str) -> Result<Url, BrokerError> {
    let url = Url::parse(text).map_err(|e| BrokerError::BadUrl {
        url: text.to_owned(),
        reason: e.to_string(),
    })?;
    check_url(&url)?;
    Ok(url)
}

fn check_url(url: &Url) -> Result<(), BrokerError> {
    let bad = |reason: &str| BrokerError::BadUrl {
        url: url.to_string(),
        reason: reason.to_owned(),
    };
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad("only http and https are fetched"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(bad("no host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(bad("credentials in a URL are not sent"));
    }
    Ok(())
}

/// `fetch_url` and every GET the broker makes (a search backend's too): what a fetch needs and
/// nothing else — the door every connection goes through, the TLS roots, the limits.
#[derive(Clone)]
pub struct Fetcher {
    keeper: DoorKeeper,
    tls: Arc<rustls::ClientConfig>,
    limits: FetchLimits,
}

impl std::fmt::Debug for Fetcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fetcher")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl Fetcher {
    /// A fetcher opening its connections through `keeper`, verifying TLS with `tls`.
    pub(crate) fn new(
        keeper: DoorKeeper,
        tls: Arc<rustls::ClientConfig>,
        limits: FetchLimits,
    ) -> Fetcher {
        Fetcher {
            keeper,
            tls,
            limits,
        }
    }

    /// Pass `text` through the log's redaction funnel.
    fn redact(&self, text: &str) -> String {
        self.keeper.log.log().redact(text)
    }

    /// Fetch `url` and return it as readable, redacted text. Decided at `net.fetch.<reversed host>`
    /// for the URL and for every redirect.
    pub async fn fetch_url(&self, url: &str) -> Result<FetchedPage, BrokerError> {
        let raw = self.get(Door::Fetch, url, &[]).await?;
        let text = readable(&raw);
        // The redirect chain is the server's words too (a `Location` can echo what it was sent),
        // so it passes the funnel like the text.
        Ok(FetchedPage {
            url: url.to_owned(),
            final_url: self.redact(raw.final_url.as_str()),
            redirects: raw.redirects.iter().map(|r| self.redact(r)).collect(),
            status: raw.status,
            content_type: raw.content_type,
            text: self.redact(&text),
            truncated: raw.truncated,
        })
    }

    /// GET `url` with `headers`, following redirects, within the time limit.
    pub(crate) async fn get(
        &self,
        door: Door,
        url: &str,
        headers: &[(&str, String)],
    ) -> Result<RawResponse, BrokerError> {
        let limits = self.limits;
        let work = self.get_following(door, url, headers);
        tokio::time::timeout(limits.timeout, work)
            .await
            .map_err(|_| BrokerError::TimedOut {
                url: url.to_owned(),
                seconds: limits.timeout.as_secs(),
            })?
    }

    async fn get_following(
        &self,
        door: Door,
        start: &str,
        headers: &[(&str, String)],
    ) -> Result<RawResponse, BrokerError> {
        let limits = self.limits;
        let mut url = parse_url(start)?;
        let origin = url.origin();
        let mut redirects = Vec::new();
        loop {
            // Extra headers (a search API key) go only to the origin they were meant for; a redirect
            // elsewhere gets none of them.
            let hop_headers = if url.origin() == origin { headers } else { &[] };
            let mut response = self.get_once(door, &url, hop_headers).await?;
            let location = match response.status {
                301 | 302 | 303 | 307 | 308 => response.location.take(),
                _ => None,
            };
            let Some(location) = location else {
                return Ok(RawResponse {
                    redirects,
                    ..response.raw
                });
            };
            if redirects.len() >= limits.max_redirects {
                return Err(BrokerError::TooManyRedirects {
                    url: start.to_owned(),
                    limit: limits.max_redirects,
                });
            }
            let next = url.join(&location).map_err(|e| BrokerError::BadUrl {
                url: location.clone(),
                reason: format!("redirect from {url}: {e}"),
            })?;
            check_url(&next)?;
            redirects.push(next.to_string());
            url = next;
        }
    }

    /// One request to one URL: decide, check, pin, exchange.
    async fn get_once(
        &self,
        door: Door,
        url: &Url,
        headers: &[(&str, String)],
    ) -> Result<OneResponse, BrokerError> {
        let host = canonical_host(url.host_str().unwrap_or_default())?;
        let port = url.port_or_known_default().unwrap_or(80);
        let action = Action::net_fetch(&host).map_err(|e| BrokerError::BadHost {
            host: host.clone(),
            reason: e.to_string(),
        })?;
        let detail = format!("fetch {url}");
        let connection = self
            .keeper
            .open(door, &action, (&host, port), &detail)
            .await?;
        let counts = ByteCounts::default();
        let used = connection.address;
        let result = self
            .exchange(connection, url, headers, counts.clone())
            .await;
        self.keeper
            .log
            .closed(door, (&host, port), used, counts.get())?;
        result
    }

    async fn exchange(
        &self,
        connection: PinnedConnection,
        url: &Url,
        headers: &[(&str, String)],
        counts: ByteCounts,
    ) -> Result<OneResponse, BrokerError> {
        let http_err = |e: &dyn std::fmt::Display| BrokerError::Http {
            url: url.to_string(),
            reason: e.to_string(),
        };
        let counted = Counted::new(connection.stream, counts);
        let stream: Box<dyn Io> = if url.scheme() == "https" {
            // Verify the certificate against the host the URL names, not the address connected to.
            let name =
                ServerName::try_from(connection.host.clone()).map_err(|e| BrokerError::Tls {
                    host: connection.host.clone(),
                    reason: e.to_string(),
                })?;
            let tls = tokio_rustls::TlsConnector::from(self.tls.clone())
                .connect(name, counted)
                .await
                .map_err(|e| BrokerError::Tls {
                    host: connection.host.clone(),
                    reason: e.to_string(),
                })?;
            Box::new(tls)
        } else {
            Box::new(counted)
        };
        let (mut sender, driver) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| http_err(&e))?;
        let driver = tokio::spawn(async move {
            // The connection's own errors surface through the response below.
            let _ = driver.await;
        });
        let mut request = http::Request::get(&url[Position::BeforePath..Position::AfterQuery])
            .header(
                http::header::HOST,
                &url[Position::BeforeHost..Position::AfterPort],
            )
            .header(
                http::header::USER_AGENT,
                concat!("chock/", env!("CARGO_PKG_VERSION")),
            )
            .header(
                http::header::ACCEPT,
                "text/html, text/plain;q=0.9, application/json;q=0.9, */*;q=0.5",
            )
            .header(http::header::ACCEPT_ENCODING, "identity")
            .header(http::header::CONNECTION, "close");
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        let request = request
            .body(Empty::<Bytes>::new())
            .map_err(|e| http_err(&e))?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| http_err(&e))?;
        let status = response.status().as_u16();
        let header = |name| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let location = header(http::header::LOCATION);
        let content_type = header(http::header::CONTENT_TYPE);
        let content_encoding = header(http::header::CONTENT_ENCODING)
            .filter(|e| !e.trim().eq_ignore_ascii_case("identity"));
        let mut body = response.into_body();
        let mut bytes = Vec::new();
        let mut truncated = false;
        let is_redirect = (300..400).contains(&status) && location.is_some();
        if !is_redirect {
            while let Some(frame) = body.frame().await {
                let Ok(data) = frame.map_err(|e| http_err(&e))?.into_data() else {
                    continue;
                };
                let room = self.limits.max_bytes - bytes.len();
                if data.len() > room {
                    bytes.extend_from_slice(&data[..room]);
                    truncated = true;
                    break;
                }
                bytes.extend_from_slice(&data);
            }
        }
        drop(body);
        drop(sender);
        driver.abort();
        Ok(OneResponse {
            location,
            status,
            raw: RawResponse {
                final_url: url.clone(),
                redirects: Vec::new(),
                status,
                content_type,
                content_encoding,
                body: bytes,
                truncated,
            },
        })
    }
}

struct OneResponse {
    location: Option<String>,
    status: u16,
    raw: RawResponse,
}

/// The body as text a model can read.
fn readable(raw: &RawResponse) -> String {
    let kind = raw
        .content_type
        .as_deref()
        .unwrap_or("")
        .to_ascii_lowercase();
    if let Some(encoding) = &raw.content_encoding {
        return format!(
            "[{} bytes of {kind} encoded as {encoding}, which is not decoded]",
            raw.body.len()
        );
    }
    let body = String::from_utf8_lossy(&raw.body);
    if kind.contains("html") || (kind.is_empty() && body.trim_start().starts_with('<')) {
        html_to_text(&body)
    } else if kind.is_empty()
        || kind.starts_with("text/")
        || kind.contains("json")
        || kind.contains("xml")
    {
        body.into_owned()
    } else {
        format!("[{} bytes of {kind}, not shown]", raw.body.len())
    }
}
