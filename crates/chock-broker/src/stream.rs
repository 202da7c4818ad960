//! A connection an HTTP client keeps open for as long as it likes (the streamable HTTP MCP client
//! pools them): the door's sequence for `net.connect.<reversed host>.<port>` (decide, log, resolve,
//! check every address, log, connect to a checked one, log), TLS that verifies the host asked for
//! (never the address connected to), and the close logged with its bytes when the client drops it.
//! Each connection the client opens comes through here and is decided on its own.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

#[cfg(doc)]
use crate::Broker;
use crate::door::{ByteCounts, Counted, DoorKeeper};
use crate::error::BrokerError;
use crate::events::{Door, NetLog};

/// The stream under a [`BrokeredStream`]: plain TCP or TLS over it, both counted.
#[derive(Debug)]
enum Inner {
    Plain(Counted<TcpStream>),
    Tls(Box<tokio_rustls::client::TlsStream<Counted<TcpStream>>>),
}

/// A decided, pinned connection (TLS when asked for) whose close is logged when it is dropped.
#[derive(Debug)]
pub struct BrokeredStream {
    inner: Inner,
    log: NetLog,
    door: Door,
    host: String,
    port: u16,
    address: SocketAddr,
    counts: ByteCounts,
}

impl BrokeredStream {
    /// The checked address it is connected to.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The host asked for (canonical: the spelling the act and the log name).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// Decide `net.connect.<reversed host>.<port>`, resolve, check and connect through `keeper`
    /// (as [`Broker::connect`]), then, with `tls`, speak TLS verifying `host`'s certificate with
    /// `tls_config` (the webpki roots and the configured extra roots). Nothing is sent before the
    /// decision and the address check are logged.
    pub(crate) async fn open(
        keeper: &DoorKeeper,
        tls_config: &Arc<rustls::ClientConfig>,
        door: Door,
        host: &str,
        port: u16,
        tls: bool,
    ) -> Result<BrokeredStream, BrokerError> {
        let connection = keeper.connect(door, host, port).await?;
        let counts = ByteCounts::default();
        let counted = Counted::new(connection.stream, counts.clone());
        let inner = if tls {
            let tls_err = |reason: String| BrokerError::Tls {
                host: connection.host.clone(),
                reason,
            };
            let name = ServerName::try_from(connection.host.clone())
                .map_err(|e| tls_err(e.to_string()))?;
            let stream = tokio_rustls::TlsConnector::from(tls_config.clone())
                .connect(name, counted)
                .await;
            match stream {
                Ok(stream) => Inner::Tls(Box::new(stream)),
                Err(e) => {
                    keeper.log.closed(
                        door,
                        (&connection.host, port),
                        connection.address,
                        counts.get(),
                    )?;
                    return Err(tls_err(e.to_string()));
                }
            }
        } else {
            Inner::Plain(counted)
        };
        Ok(BrokeredStream {
            inner,
            log: keeper.log.clone(),
            door,
            host: connection.host,
            port,
            address: connection.address,
            counts,
        })
    }
}

impl Drop for BrokeredStream {
    fn drop(&mut self) {
        // A close that cannot be logged changes nothing now; the open was logged before any byte.
        let _ = self.log.closed(
            self.door,
            (&self.host, self.port),
            self.address,
            self.counts.get(),
        );
    }
}

impl AsyncRead for BrokeredStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match &mut self.get_mut().inner {
            Inner::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Inner::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for BrokeredStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().inner {
            Inner::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Inner::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().inner {
            Inner::Plain(s) => Pin::new(s).poll_flush(cx),
            Inner::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().inner {
            Inner::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Inner::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}
