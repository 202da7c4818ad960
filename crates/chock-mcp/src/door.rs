//! hyper's connector for a streamable HTTP server: every connection the client opens comes from the
//! broker's door ([`chock_broker::Broker::open_stream`]), and the first destination the door refuses
//! is kept, so the start-up error can name the act, the rule and the host.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use chock_broker::{Broker, BrokeredStream, Door};
use http::Uri;
use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A connection the door opened, as hyper's client takes it.
#[derive(Debug)]
pub(crate) struct DoorStream(BrokeredStream);

impl Connection for DoorStream {
    fn connected(&self) -> Connected {
        Connected::new()
    }
}

impl AsyncRead for DoorStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_read(cx, buf)
    }
}

impl AsyncWrite for DoorStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }
}

/// hyper's connector: every connection through the broker's door, the first refusal kept for the
/// start-up error.
#[derive(Clone)]
pub(crate) struct DoorConnector {
    pub(crate) broker: Broker,
    pub(crate) refusal: Arc<Mutex<Option<String>>>,
}

impl tower_service::Service<Uri> for DoorConnector {
    type Response = TokioIo<DoorStream>;
    type Error = chock_broker::BrokerError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let broker = self.broker.clone();
        let refusal = Arc::clone(&self.refusal);
        Box::pin(async move {
            let tls = uri.scheme_str() == Some("https");
            let host = uri.host().unwrap_or_default().to_string();
            let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
            match broker.open_stream(Door::Mcp, &host, port, tls).await {
                Ok(stream) => Ok(TokioIo::new(DoorStream(stream))),
                Err(e) => {
                    if e.is_refusal()
                        && let Ok(mut slot) = refusal.lock()
                    {
                        slot.get_or_insert_with(|| format!("{e} (destination {host}:{port})"));
                    }
                    Err(e)
                }
            }
        })
    }
}
