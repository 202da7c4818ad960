//! One connection to the daemon, over its unix socket or its loopback HTTP port: the protocol's
//! JSON-RPC frames on a WebSocket. `chock attach` and `chock sessions list` use it directly, and
//! so do the tests; [`crate::RemoteSession`] is built on it; the browser UI speaks the same frames.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::{Context, Poll};

use chock_protocol::rpc::{
    Call, ErrorKind, Notification, Request, RequestId, RpcError, ServerFrame,
};
use futures_util::{SinkExt, StreamExt};
use serde::de::DeserializeOwned;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpStream, UnixStream};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// There is no place to look for the daemon's socket (no `$XDG_RUNTIME_DIR`, no `$HOME`).
    #[error("cannot find the daemon's socket: {0}")]
    NoSocket(#[from] chock_dirs::DirsError),
    /// The operation has no method in the daemon's protocol.
    #[error("{op}: {why}")]
    Unsupported {
        /// The operation.
        op: &'static str,
        /// Why it is not offered, and what to do instead.
        why: &'static str,
    },
    /// The daemon answered with an error.
    #[error(transparent)]
    Rpc(#[from] RpcError),
    /// Nothing listens at the socket.
    #[error("no daemon is listening at {}: start one with `chock serve`", path.display())]
    NotListening {
        /// The socket.
        path: PathBuf,
    },
    /// The daemon refused the connection (another user, a confined call, a missing token).
    #[error("the daemon refused this connection: {0}")]
    Refused(String),
    /// The connection broke.
    #[error("the daemon connection: {0}")]
    Connection(String),
    /// The daemon dropped this client (it read too slowly, or the daemon stops).
    #[error("the daemon dropped this client: {0:?}")]
    Dropped(chock_protocol::rpc::DropReason),
}

/// A stream to the daemon: its socket or a loopback TCP connection.
#[derive(Debug)]
pub enum Stream {
    /// The unix socket.
    Unix(UnixStream),
    /// Loopback TCP.
    Tcp(TcpStream),
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Unix(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tcp(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Stream::Unix(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tcp(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Unix(s) => Pin::new(s).poll_flush(cx),
            Stream::Tcp(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Unix(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tcp(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

/// A connected client.
#[derive(Debug)]
pub struct DaemonClient {
    ws: WebSocketStream<Stream>,
    next_id: u64,
    /// Notifications read while waiting for a response, as their text (a log line inside one is
    /// kept byte for byte: its hash was taken of those bytes).
    notices: VecDeque<String>,
}

fn refused(e: tokio_tungstenite::tungstenite::Error) -> ClientError {
    match e {
        tokio_tungstenite::tungstenite::Error::Http(response) => {
            let body = response
                .body()
                .as_ref()
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .unwrap_or_default();
            let message = serde_json::from_str::<chock_protocol::rpc::Response>(&body)
                .ok()
                .and_then(|r| r.error)
                .map_or(body, |e| e.message);
            ClientError::Refused(format!("{} {message}", response.status()))
        }
        other => ClientError::Connection(other.to_string()),
    }
}

impl DaemonClient {
    /// Connects to this user's daemon, at its socket ([`chock_dirs::socket_path`]).
    pub async fn connect() -> Result<DaemonClient, ClientError> {
        Self::unix(&chock_dirs::socket_path()?).await
    }

    /// Connects to the socket at `path`.
    pub async fn unix(path: &Path) -> Result<DaemonClient, ClientError> {
        let stream = UnixStream::connect(path)
            .await
            .map_err(|_| ClientError::NotListening {
                path: path.to_path_buf(),
            })?;
        let request = "ws://localhost/ws"
            .into_client_request()
            .map_err(|e| ClientError::Connection(e.to_string()))?;
        let (ws, _) = tokio_tungstenite::client_async(request, Stream::Unix(stream))
            .await
            .map_err(refused)?;
        Ok(Self::over(ws))
    }

    /// Connects to the loopback port at `addr` with `token` as the bearer token, sending `host`
    /// as the `Host` header (the daemon refuses any but its own address) and `origin` if given.
    pub async fn tcp(
        addr: std::net::SocketAddr,
        token: &str,
        host: &str,
        origin: Option<&str>,
    ) -> Result<DaemonClient, ClientError> {
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|e| ClientError::Connection(e.to_string()))?;
        let mut request = format!("ws://{addr}/ws")
            .into_client_request()
            .map_err(|e| ClientError::Connection(e.to_string()))?;
        let headers = request.headers_mut();
        let value = |v: &str| {
            v.parse::<http::HeaderValue>()
                .map_err(|e| ClientError::Connection(e.to_string()))
        };
        headers.insert(http::header::HOST, value(host)?);
        headers.insert(
            http::header::AUTHORIZATION,
            value(&format!("Bearer {token}"))?,
        );
        if let Some(origin) = origin {
            headers.insert(http::header::ORIGIN, value(origin)?);
        }
        let (ws, _) = tokio_tungstenite::client_async(request, Stream::Tcp(stream))
            .await
            .map_err(refused)?;
        Ok(Self::over(ws))
    }

    fn over(ws: WebSocketStream<Stream>) -> DaemonClient {
        DaemonClient {
            ws,
            next_id: 0,
            notices: VecDeque::new(),
        }
    }

    /// Sends `call` and returns its request id, without waiting for the response.
    pub async fn send(&mut self, call: &Call) -> Result<RequestId, ClientError> {
        self.next_id += 1;
        let id = RequestId::Number(self.next_id);
        let text = serde_json::to_string(&Request::new(id.clone(), call))
            .map_err(|e| ClientError::Connection(e.to_string()))?;
        self.ws
            .send(Message::Text(text.into()))
            .await
            .map_err(|e| ClientError::Connection(e.to_string()))?;
        Ok(id)
    }

    /// Sends `call` and waits for its result (notifications that arrive meanwhile are kept for
    /// [`DaemonClient::next_notice`]).
    pub async fn call<T: DeserializeOwned>(&mut self, call: &Call) -> Result<T, ClientError> {
        let id = self.send(call).await?;
        loop {
            let text = self.text().await?;
            match parse(&text)? {
                ServerFrame::Response(response) if response.id.as_ref() == Some(&id) => {
                    return Ok(response.into_result()?);
                }
                ServerFrame::Response(response) => {
                    if let Some(error) = response.error
                        && response.id.is_none()
                    {
                        return Err(error.into());
                    }
                }
                ServerFrame::Notification(n) => {
                    dropped(&n)?;
                    self.notices.push_back(text);
                }
            }
        }
    }

    /// The next text message from the daemon.
    async fn text(&mut self) -> Result<String, ClientError> {
        loop {
            let message = self
                .ws
                .next()
                .await
                .ok_or_else(|| ClientError::Connection("the daemon closed the connection".into()))?
                .map_err(|e| ClientError::Connection(e.to_string()))?;
            match message {
                Message::Text(text) => return Ok(text.as_str().to_string()),
                Message::Close(_) => {
                    return Err(ClientError::Connection(
                        "the daemon closed the connection".into(),
                    ));
                }
                _ => {}
            }
        }
    }

    /// The next frame from the daemon.
    pub async fn frame(&mut self) -> Result<ServerFrame, ClientError> {
        parse(&self.text().await?)
    }

    /// The next notification (a response to a request sent with [`DaemonClient::send`] is
    /// skipped: use [`DaemonClient::frame`] to see those).
    pub async fn next_notice(&mut self) -> Result<Notification, ClientError> {
        match parse(&self.next_notice_text().await?)? {
            ServerFrame::Notification(n) => Ok(n),
            ServerFrame::Response(_) => Err(ClientError::Connection(
                "a response was kept as a notification".into(),
            )),
        }
    }

    /// The next notification's text, exactly as the daemon sent it; `client.dropped` is the
    /// error it announces.
    pub(crate) async fn next_notice_text(&mut self) -> Result<String, ClientError> {
        if let Some(text) = self.notices.pop_front() {
            return Ok(text);
        }
        loop {
            let text = self.text().await?;
            if let ServerFrame::Notification(n) = parse(&text)? {
                dropped(&n)?;
                return Ok(text);
            }
        }
    }

    /// Closes the connection.
    pub async fn close(mut self) {
        let _ = self.ws.close(None).await;
    }
}

/// A frame's text as a frame.
fn parse(text: &str) -> Result<ServerFrame, ClientError> {
    serde_json::from_str(text)
        .map_err(|e| ClientError::Rpc(RpcError::new(ErrorKind::ParseError, e.to_string())))
}

/// `client.dropped` as the error it announces.
fn dropped(n: &Notification) -> Result<(), ClientError> {
    if n.method == "client.dropped"
        && let Ok(chock_protocol::rpc::Notice::ClientDropped(d)) = n.notice()
    {
        return Err(ClientError::Dropped(d.reason));
    }
    Ok(())
}
