//! The egress proxy for commands in the sandbox.
//!
//! The sandbox's network namespace holds one thing that leads out: a listener on 127.0.0.1 that the
//! host created there and serves here. A command (curl, cargo, pip, git over https) finds it through
//! `HTTP_PROXY`/`HTTPS_PROXY`. Each `CONNECT host:port` and each plain `GET http://host/…` is decided at
//! `net.connect.<reversed host>.<port>`, resolved, checked and pinned on the host like every other act;
//! a refusal is a `403` and a closed connection, and an event in the log. Nothing else leaves: the
//! sandbox has no DNS and no other route.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::{JoinHandle, JoinSet};

use crate::door::DoorKeeper;
use crate::error::BrokerError;
use crate::events::Door;

/// How long a client may take to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);
/// How long `shutdown` waits for open connections to end by themselves.
const DRAIN_GRACE: Duration = Duration::from_secs(2);
/// Connections served at once; more are closed at once (a command cannot exhaust the host).
const MAX_CONNECTIONS: usize = 256;
/// The largest request head accepted.
const MAX_HEAD: usize = 32 * 1024;

/// A running proxy. Dropping it (or [`ProxyHandle::shutdown`]) stops accepting and closes every
/// connection it still serves.
#[derive(Debug)]
pub struct ProxyHandle {
    local_addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl ProxyHandle {
    /// The address the proxy listens on (inside the sandbox's namespace, when served there).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stop accepting, close open connections, and wait until the proxy task has ended.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for ProxyHandle {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// The egress proxy served into a sandbox: it holds only the door, through which every CONNECT
/// and every plain request is decided (`net.connect`), resolved, checked, pinned and logged.
#[derive(Clone)]
pub struct EgressProxy {
    keeper: DoorKeeper,
}

impl std::fmt::Debug for EgressProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EgressProxy").finish_non_exhaustive()
    }
}

impl EgressProxy {
    /// A proxy opening every upstream connection through `keeper`.
    pub(crate) fn new(keeper: DoorKeeper) -> EgressProxy {
        EgressProxy { keeper }
    }

    /// Serve the egress proxy on `listener` (already bound; typically created inside the call's
    /// network namespace and handed back by the sandbox). Must be called inside a tokio runtime.
    pub fn serve(&self, listener: std::net::TcpListener) -> Result<ProxyHandle, BrokerError> {
        let io = |e: std::io::Error| BrokerError::Connect {
            host: "proxy listener".into(),
            port: 0,
            reason: e.to_string(),
        };
        listener.set_nonblocking(true).map_err(io)?;
        let local_addr = listener.local_addr().map_err(io)?;
        let listener = tokio::net::TcpListener::from_std(listener).map_err(io)?;
        let (stop, mut stopped) = oneshot::channel();
        let proxy = self.clone();
        let task = tokio::spawn(async move {
            let mut connections = JoinSet::new();
            loop {
                tokio::select! {
                    _ = &mut stopped => break,
                    accepted = listener.accept() => match accepted {
                        Ok((client, _)) if connections.len() >= MAX_CONNECTIONS => drop(client),
                        Ok((client, _)) => {
                            let proxy = proxy.clone();
                            connections.spawn(async move { proxy.serve_client(client).await });
                        }
                        Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                    },
                    Some(_) = connections.join_next(), if !connections.is_empty() => {}
                }
            }
            // Connections whose client is gone end on their own and log their close; give them a
            // moment, then cut the rest.
            let drain = async { while connections.join_next().await.is_some() {} };
            let _ = tokio::time::timeout(DRAIN_GRACE, drain).await;
            connections.shutdown().await;
        });
        Ok(ProxyHandle {
            local_addr,
            stop: Some(stop),
            task: Some(task),
        })
    }

    async fn serve_client(&self, mut client: TcpStream) {
        let head = match tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut client)).await {
            Ok(Ok(Some(head))) => head,
            _ => return,
        };
        let request = match ProxyRequest::parse(&head.bytes) {
            Ok(request) => request,
            Err(reason) => return respond(&mut client, 400, &reason).await,
        };
        let mut upstream = match self
            .keeper
            .connect(Door::Proxy, &request.host, request.port)
            .await
        {
            Ok(upstream) => upstream,
            Err(e) => {
                let status = match e {
                    _ if e.is_refusal() => 403,
                    BrokerError::BadHost { .. } | BrokerError::BadUrl { .. } => 400,
                    _ => 502,
                };
                return respond(&mut client, status, &format!("chock: {e}")).await;
            }
        };
        let mut sent = head.leftover.len() as u64;
        let opening = match &request.forward_head {
            None => {
                client
                    .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    .await
            }
            Some(forward) => {
                sent += forward.len() as u64;
                upstream.stream.write_all(forward).await
            }
        };
        let spliced = match opening {
            Ok(()) => match upstream.stream.write_all(&head.leftover).await {
                Ok(()) => tokio::io::copy_bidirectional(&mut client, &mut upstream.stream)
                    .await
                    .ok(),
                Err(_) => None,
            },
            Err(_) => None,
        };
        let (up, down) = spliced.unwrap_or((0, 0));
        let target = (request.host.as_str(), request.port);
        let _ = self
            .keeper
            .log
            .closed(Door::Proxy, target, upstream.address, (sent + up, down));
    }
}

/// A request head and whatever the client sent after it.
struct Head {
    bytes: Vec<u8>,
    leftover: Vec<u8>,
}

async fn read_head(client: &mut TcpStream) -> std::io::Result<Option<Head>> {
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    loop {
        let n = client.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let leftover = buf.split_off(end + 4);
            return Ok(Some(Head {
                bytes: buf,
                leftover,
            }));
        }
        if buf.len() > MAX_HEAD {
            return Ok(None);
        }
    }
}

/// What a client asked the proxy for.
#[derive(Debug, PartialEq, Eq)]
struct ProxyRequest {
    host: String,
    port: u16,
    /// For plain HTTP: the head to send upstream (origin-form, proxy headers removed, one request
    /// per connection). `None` for CONNECT.
    forward_head: Option<Vec<u8>>,
}

/// Headers that speak to the proxy, not the origin.
const HOP_HEADERS: &[&str] = &[
    "proxy-connection",
    "proxy-authorization",
    "connection",
    "keep-alive",
];

impl ProxyRequest {
    fn parse(head: &[u8]) -> Result<ProxyRequest, String> {
        let mut headers = [httparse::EMPTY_HEADER; 96];
        let mut request = httparse::Request::new(&mut headers);
        match request.parse(head) {
            Ok(httparse::Status::Complete(_)) => {}
            Ok(httparse::Status::Partial) => return Err("incomplete request head".into()),
            Err(e) => return Err(format!("malformed request head: {e}")),
        }
        let method = request.method.unwrap_or_default();
        let target = request.path.unwrap_or_default();
        if method.eq_ignore_ascii_case("CONNECT") {
            let (host, port) = split_authority(target)
                .ok_or_else(|| format!("CONNECT needs host:port, not `{target}`"))?;
            return Ok(ProxyRequest {
                host,
                port,
                forward_head: None,
            });
        }
        let url = url::Url::parse(target).map_err(|_| {
            format!("a proxy request needs an absolute http:// URL, not `{target}`")
        })?;
        if url.scheme() != "http" {
            return Err(format!(
                "only http:// is forwarded as a plain request (use CONNECT for {})",
                url.scheme()
            ));
        }
        let host = url
            .host_str()
            .ok_or("the URL has no host")?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let port = url.port_or_known_default().unwrap_or(80);
        let mut forward = format!(
            "{method} {} HTTP/1.1\r\n",
            &url[url::Position::BeforePath..url::Position::AfterQuery]
        );
        // The Host header is the decided host, whatever the client wrote.
        forward.push_str(&format!(
            "Host: {}\r\n",
            &url[url::Position::BeforeHost..url::Position::AfterPort]
        ));
        for header in request.headers.iter() {
            let name = header.name.to_ascii_lowercase();
            if name == "host" || HOP_HEADERS.contains(&name.as_str()) {
                continue;
            }
            forward.push_str(header.name);
            forward.push_str(": ");
            forward.push_str(&String::from_utf8_lossy(header.value));
            forward.push_str("\r\n");
        }
        forward.push_str("Connection: close\r\n\r\n");
        Ok(ProxyRequest {
            host,
            port,
            forward_head: Some(forward.into_bytes()),
        })
    }
}

/// `host:port` or `[v6]:port`.
fn split_authority(authority: &str) -> Option<(String, u16)> {
    let (host, port) = authority.rsplit_once(':')?;
    let port: u16 = port.parse().ok().filter(|p| *p != 0)?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return None;
    }
    Some((host.to_owned(), port))
}

async fn respond(client: &mut TcpStream, status: u16, message: &str) {
    let reason = match status {
        400 => "Bad Request",
        403 => "Forbidden",
        _ => "Bad Gateway",
    };
    let body = format!("{message}\n");
    let text = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = client.write_all(text.as_bytes()).await;
    let _ = client.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_targets_parse_with_ipv6_and_reject_nonsense() {
        let parse = |s: &str| ProxyRequest::parse(s.as_bytes());
        assert_eq!(
            parse("CONNECT example.org:443 HTTP/1.1\r\nHost: example.org:443\r\n\r\n"),
            Ok(ProxyRequest {
                host: "example.org".into(),
                port: 443,
                forward_head: None
            })
        );
        assert_eq!(
            parse("CONNECT [2001:db8::1]:8443 HTTP/1.1\r\n\r\n"),
            Ok(ProxyRequest {
                host: "2001:db8::1".into(),
                port: 8443,
                forward_head: None
            })
        );
        assert!(parse("CONNECT example.org HTTP/1.1\r\n\r\n").is_err());
        assert!(parse("CONNECT example.org:0 HTTP/1.1\r\n\r\n").is_err());
        assert!(parse("GET /relative HTTP/1.1\r\n\r\n").is_err());
        assert!(parse("GET ftp://example.org/ HTTP/1.1\r\n\r\n").is_err());
    }

    #[test]
    fn plain_requests_are_rewritten_to_origin_form_without_proxy_headers() {
        let head = "GET http://example.org:8080/a/b?c=1 HTTP/1.1\r\nHost: internal.corp\r\n\
                    Proxy-Connection: keep-alive\r\nProxy-Authorization: Basic eA==\r\nAccept: */*\r\n\r\n";
        let request = ProxyRequest::parse(head.as_bytes()).expect("parses");
        assert_eq!((request.host.as_str(), request.port), ("example.org", 8080));
        assert_eq!(
            String::from_utf8(request.forward_head.expect("plain request")).expect("utf-8"),
            "GET /a/b?c=1 HTTP/1.1\r\nHost: example.org:8080\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
    }
}
