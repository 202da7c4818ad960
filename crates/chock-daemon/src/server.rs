//! The two transports, one router: a unix socket whose peers are checked at accept
//! ([`crate::peer`]), and loopback TCP whose requests are checked by [`crate::web`]. Both serve
//! `GET /ws` (the protocol on a WebSocket), `POST /rpc` (one request, one response) and the UI.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::connect_info::{ConnectInfo, Connected};
use axum::extract::ws::WebSocketUpgrade;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::serve::IncomingStream;
use chock_protocol::rpc::{Call, ErrorKind, Request, Response as RpcResponse, RpcError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};

use crate::daemon::{Caller, Daemon};
use crate::peer::{PeerRule, UnixPeer};
use crate::web::{Web, check_json_post};

/// Who is on the other end of a connection.
#[derive(Debug, Clone)]
pub(crate) enum PeerAddr {
    /// A unix peer that passed the checks.
    Unix(UnixPeer),
    /// A loopback TCP peer (checked per request).
    Tcp(SocketAddr),
    /// The listener itself.
    Listener,
}

/// The unix listener, letting in only the peers [`PeerRule`] allows; a refused peer is answered
/// `403` with a `forbidden` error and closed.
pub(crate) struct UnixGate {
    pub(crate) listener: UnixListener,
    pub(crate) rule: PeerRule,
}

impl axum::serve::Listener for UnixGate {
    type Io = UnixStream;
    type Addr = PeerAddr;

    async fn accept(&mut self) -> (UnixStream, PeerAddr) {
        loop {
            match self.listener.accept().await {
                Ok((stream, _)) => match self.rule.check(&stream) {
                    Ok(peer) => return (stream, PeerAddr::Unix(peer)),
                    Err(why) => {
                        eprintln!(
                            "chock serve: refused a connection: {}",
                            chock_protocol::text::line(&why)
                        );
                        tokio::spawn(refuse(stream, why));
                    }
                },
                // Out of descriptors and the like: wait a little rather than spin.
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<PeerAddr> {
        Ok(PeerAddr::Listener)
    }
}

/// The loopback TCP listener.
pub(crate) struct TcpGate {
    pub(crate) listener: TcpListener,
}

impl axum::serve::Listener for TcpGate {
    type Io = TcpStream;
    type Addr = PeerAddr;

    async fn accept(&mut self) -> (TcpStream, PeerAddr) {
        loop {
            match self.listener.accept().await {
                Ok((stream, addr)) => {
                    let _ = stream.set_nodelay(true);
                    return (stream, PeerAddr::Tcp(addr));
                }
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<PeerAddr> {
        self.listener.local_addr().map(PeerAddr::Tcp)
    }
}

impl Connected<IncomingStream<'_, UnixGate>> for PeerAddr {
    fn connect_info(stream: IncomingStream<'_, UnixGate>) -> Self {
        stream.remote_addr().clone()
    }
}

impl Connected<IncomingStream<'_, TcpGate>> for PeerAddr {
    fn connect_info(stream: IncomingStream<'_, TcpGate>) -> Self {
        stream.remote_addr().clone()
    }
}

fn forbidden_body(why: &str) -> String {
    serde_json::to_string(&RpcResponse::err(
        None,
        RpcError::new(ErrorKind::Forbidden, format!("refused: {why}")),
    ))
    .expect("responses serialise")
}

async fn refuse(mut stream: UnixStream, why: String) {
    // Read the request's head first: closing with it unread would reset the connection, and the
    // peer would never see why it was refused.
    let mut head = vec![0u8; 8192];
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), stream.read(&mut head)).await;
    let body = forbidden_body(&why);
    let reply = format!(
        "HTTP/1.1 403 Forbidden\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(
        std::time::Duration::from_secs(1),
        stream.write_all(reply.as_bytes()),
    )
    .await;
    let _ = stream.shutdown().await;
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), stream.read(&mut head)).await;
}

fn forbidden(why: &str) -> Response {
    (
        StatusCode::FORBIDDEN,
        [(header::CONTENT_TYPE, "application/json")],
        forbidden_body(why),
    )
        .into_response()
}

/// What every handler shares.
#[derive(Clone)]
pub(crate) struct App {
    pub(crate) daemon: Arc<Daemon>,
    /// The loopback transport's checks; `None` on the unix socket.
    pub(crate) web: Option<Arc<Web>>,
}

impl App {
    /// Whether a request on this transport may go on; `need_token`: it reads or changes state.
    /// `Err` holds the refusal to send (`403`, a `forbidden` error).
    fn admit(&self, headers: &HeaderMap, need_token: bool) -> Result<(), Box<Response>> {
        let refuse = |why: &str| Box::new(forbidden(why));
        match &self.web {
            Some(web) => {
                web.check_place(headers).map_err(|why| refuse(&why))?;
                if need_token {
                    web.check_token(headers).map_err(|why| refuse(&why))?;
                }
                Ok(())
            }
            // Over the socket the peer's uid is the authentication; a browser's request (an
            // `Origin`, through a proxy) is refused: browsers use the loopback transport.
            None if headers.contains_key(header::ORIGIN) => Err(refuse(
                "a browser's request on the unix socket (it carries an Origin); use `chock serve --host`",
            )),
            None => Ok(()),
        }
    }
}

fn caller_name(peer: &PeerAddr, web: bool) -> String {
    match peer {
        PeerAddr::Unix(peer) => peer.name(),
        PeerAddr::Tcp(addr) if web => format!("web:{}", addr.port()),
        PeerAddr::Tcp(addr) => format!("tcp:{addr}"),
        PeerAddr::Listener => "daemon".into(),
    }
}

/// The router of one transport.
pub(crate) fn router(app: App) -> Router {
    Router::new()
        .route("/ws", get(ws))
        .route("/rpc", post(rpc))
        .route("/login", post(login))
        .fallback(get(ui))
        .with_state(app)
}

async fn ws(
    State(app): State<App>,
    ConnectInfo(peer): ConnectInfo<PeerAddr>,
    headers: HeaderMap,
    upgrade: WebSocketUpgrade,
) -> Response {
    if let Err(refused) = app.admit(&headers, true) {
        return *refused;
    }
    let name = caller_name(&peer, app.web.is_some());
    let daemon = Arc::clone(&app.daemon);
    upgrade
        .protocols([crate::web::WS_PROTOCOL])
        .max_message_size(1 << 20)
        .on_upgrade(move |socket| crate::conn::serve(socket, daemon, name))
}

async fn rpc(
    State(app): State<App>,
    ConnectInfo(peer): ConnectInfo<PeerAddr>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(refused) = app.admit(&headers, true) {
        return *refused;
    }
    if let Err(why) = check_json_post(&headers) {
        return forbidden(&why);
    }
    let response = match serde_json::from_slice::<Request>(&body) {
        Err(e) => RpcResponse::err(None, RpcError::new(ErrorKind::ParseError, e.to_string())),
        Ok(request) => match request.call() {
            Err(e) => RpcResponse::err(Some(request.id), e),
            Ok(call @ Call::SessionsSubscribe(_)) => RpcResponse::err(
                Some(request.id),
                RpcError::new(
                    ErrorKind::InvalidRequest,
                    format!("{} needs the WebSocket at /ws", call.method()),
                ),
            ),
            Ok(call) => {
                let caller = Caller {
                    name: caller_name(&peer, app.web.is_some()),
                    conn: None,
                };
                match app.daemon.call(call, &caller).await {
                    Ok(result) => RpcResponse::ok(request.id, &result),
                    Err(e) => RpcResponse::err(Some(request.id), e),
                }
            }
        },
    };
    (
        [(header::CONTENT_TYPE, "application/json")],
        serde_json::to_string(&response).expect("responses serialise"),
    )
        .into_response()
}

#[derive(serde::Deserialize)]
struct Once {
    once: String,
}

/// Trades a one-time login code for the token (JSON in, JSON out, `X-Chock: 1`): the page keeps
/// the token in its own origin's storage (see [`crate::web`] for why no cookie).
async fn login(State(app): State<App>, headers: HeaderMap, body: Bytes) -> Response {
    let Some(web) = &app.web else {
        return StatusCode::NOT_FOUND.into_response();
    };
    if let Err(why) = web.check_place(&headers) {
        return forbidden(&why);
    }
    if let Err(why) = check_json_post(&headers) {
        return forbidden(&why);
    }
    let Ok(once) = serde_json::from_slice::<Once>(&body) else {
        return forbidden("the body is not {\"once\": CODE}");
    };
    if !web.redeem(&once.once) {
        return forbidden("this login link was used already, or is not one this daemon made");
    }
    (
        [(header::CONTENT_TYPE, "application/json")],
        serde_json::json!({ "token": web.token() }).to_string(),
    )
        .into_response()
}

/// The UI's files: static, holding no secret, so no token is needed (the page could not show the
/// sign-in message otherwise); `Host` and `Origin` are still checked.
async fn ui(State(app): State<App>, headers: HeaderMap, uri: Uri) -> Response {
    if let Err(refused) = app.admit(&headers, false) {
        return *refused;
    }
    crate::ui::asset(uri.path())
}
