//! The one sequence every outbound act goes through: decide, log, resolve, check every address, log,
//! connect to a checked address, log. `fetch_url`, `web_search` and the proxy all open connections
//! here, so none of them can skip a step.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use chock_policy::Action;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::address::AddressPolicy;
use crate::canonical_host;
use crate::error::BrokerError;
use crate::events::{Door, NetLog};
use crate::resolve::NameResolver;
use chock_decide::{AllowScope, Gate, GateAnswer};

/// A TCP connection opened by the broker to an address it checked. The stream is connected to
/// `address` itself; nothing resolves the name again.
#[derive(Debug)]
pub struct PinnedConnection {
    /// The stream, already connected.
    pub stream: TcpStream,
    /// The address it is connected to (one of `checked`).
    pub address: SocketAddr,
    /// Every address the name resolved to, all of which passed the check.
    pub checked: Vec<IpAddr>,
    /// The host that was asked for.
    pub host: String,
    /// The port.
    pub port: u16,
}

/// What the door needs: who decides, where to log, how to resolve.
#[derive(Clone)]
pub(crate) struct DoorKeeper {
    pub gate: Arc<dyn Gate>,
    pub log: NetLog,
    pub resolver: NameResolver,
    pub connect_timeout: Duration,
}

impl std::fmt::Debug for DoorKeeper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DoorKeeper")
            .field("log", &self.log)
            .finish_non_exhaustive()
    }
}

impl DoorKeeper {
    /// Decide `action` and log the answer, before anything is resolved or sent: the scope an
    /// allowed act's addresses are checked against, or the refusal. `web.search`, which opens no
    /// connection of its own, is decided here too.
    pub async fn decide(
        &self,
        door: Door,
        action: &Action,
        target: (&str, u16),
        detail: &str,
    ) -> Result<AllowScope, BrokerError> {
        match self.gate.decide(action, detail).await {
            GateAnswer::Allow { scope, decided_by } => {
                self.log
                    .gate(door, action.as_str(), target, Ok(&decided_by))?;
                Ok(scope)
            }
            GateAnswer::Refuse { reason } => {
                self.log.gate(door, action.as_str(), target, Err(&reason))?;
                Err(BrokerError::Refused {
                    action: action.to_string(),
                    reason,
                })
            }
        }
    }

    /// The act `net.connect.<reversed host>.<port>`: `host` read in its one canonical spelling,
    /// then [`DoorKeeper::open`]. What the proxy does for every CONNECT and what a host-side
    /// client stream opens.
    pub async fn connect(
        &self,
        door: Door,
        host: &str,
        port: u16,
    ) -> Result<PinnedConnection, BrokerError> {
        let host = canonical_host(host)?;
        let action = Action::net_connect(&host, port).map_err(|e| BrokerError::BadHost {
            host: host.clone(),
            reason: e.to_string(),
        })?;
        let detail = format!("open a TCP connection to {host}:{port}");
        self.open(door, &action, (&host, port), &detail).await
    }

    /// Decide `action`, then resolve `host`, check every address, and connect to a checked one.
    pub async fn open(
        &self,
        door: Door,
        action: &Action,
        target: (&str, u16),
        detail: &str,
    ) -> Result<PinnedConnection, BrokerError> {
        let (host, port) = target;
        let scope = self.decide(door, action, target, detail).await?;
        let addresses = match self.resolver.lookup(host).await {
            Ok(addresses) => addresses,
            Err(e) => {
                self.log.failed(door, target, &e.to_string())?;
                return Err(e);
            }
        };
        if let Err(refusal) = AddressPolicy::for_scope(scope).check_all(&addresses) {
            self.log
                .addresses(door, target, &addresses, Some(&refusal.to_string()))?;
            return Err(BrokerError::AddressRefused {
                host: host.to_owned(),
                refusal,
            });
        }
        self.log.addresses(door, target, &addresses, None)?;
        let mut last_error = String::from("no address");
        for ip in &addresses {
            let address = SocketAddr::new(*ip, port);
            match tokio::time::timeout(self.connect_timeout, TcpStream::connect(address)).await {
                Ok(Ok(stream)) => {
                    self.log.opened(door, target, address)?;
                    return Ok(PinnedConnection {
                        stream,
                        address,
                        checked: addresses,
                        host: host.to_owned(),
                        port,
                    });
                }
                Ok(Err(e)) => last_error = format!("{address}: {e}"),
                Err(_) => {
                    last_error = format!("{address}: no answer in {:?}", self.connect_timeout)
                }
            }
        }
        self.log.failed(door, target, &last_error)?;
        Err(BrokerError::Connect {
            host: host.to_owned(),
            port,
            reason: last_error,
        })
    }
}

/// Bytes each way over a connection, shared between the stream and whoever logs its close.
#[derive(Debug, Clone, Default)]
pub struct ByteCounts {
    sent: Arc<AtomicU64>,
    received: Arc<AtomicU64>,
}

impl ByteCounts {
    /// (sent, received) so far.
    pub fn get(&self) -> (u64, u64) {
        (
            self.sent.load(Ordering::Relaxed),
            self.received.load(Ordering::Relaxed),
        )
    }
}

/// A stream that counts the bytes through it.
#[derive(Debug)]
pub struct Counted<S> {
    inner: S,
    counts: ByteCounts,
}

impl<S> Counted<S> {
    /// Wrap `inner`, adding to `counts`.
    pub fn new(inner: S, counts: ByteCounts) -> Self {
        Self { inner, counts }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Counted<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let poll = Pin::new(&mut this.inner).poll_read(cx, buf);
        let n = buf.filled().len().saturating_sub(before) as u64;
        this.counts.received.fetch_add(n, Ordering::Relaxed);
        poll
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Counted<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = &poll {
            this.counts.sent.fetch_add(*n as u64, Ordering::Relaxed);
        }
        poll
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}
