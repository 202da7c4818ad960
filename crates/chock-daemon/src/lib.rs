//! `chock serve`: the daemon that owns sessions.
//!
//! It starts sessions (task, project, provider, model), holds each through its
//! [`chock_runtime::SessionHandle`] (a transport adapter: requests become the handle's operations,
//! its items notifications; `session`), keeps them running with no client attached, and serves
//! the protocol (`chock_protocol::rpc`, documented in docs/daemon.md) to its clients:
//!
//! - on a unix socket in a private directory ([`paths`]), letting in only this user (and one
//!   `--group`) from this user's own namespaces ([`peer`]): a confined call, whose user namespace
//!   maps back to the user, is refused;
//! - on loopback TCP with `--host`, for the browser: a token per start, handed over through a
//!   one-time login link, with `Host` and `Origin` checked ([`web`]).
//!
//! The session log is the event source: a subscription sends the log from a seq, then the live
//! stream, through bounded queues (a client too slow is told and dropped). An owned session's
//! lines come from its handle (the log writer's tap), never by reading back its file beyond a
//! subscription's one catch-up (`fanout`). Questions are derived from the log, so a late client
//! or a restarted daemon still shows them, and the daemon never answers one on anyone's behalf.
#![forbid(unsafe_code)]
// No library makes an async runtime or blocks on one (the workspace's clippy.toml).
#![cfg_attr(not(test), deny(clippy::disallowed_methods))]

mod conn;
mod daemon;
mod error;
mod fanout;
mod hub;
pub mod paths;
pub mod peer;
mod pending;
mod server;
mod session;
mod ui;
pub mod web;

pub use daemon::{Daemon, DaemonOptions};
pub use error::DaemonError;
pub use hub::DEFAULT_QUEUE;

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::net::{TcpListener, UnixListener};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use chock_dirs::{HTTP_FILE, SOCKET_FILE, TOKEN_FILE};

use crate::paths::DaemonLock;
use crate::peer::PeerRule;
use crate::server::{App, TcpGate, UnixGate, router};

/// How `chock serve` was asked to serve.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The daemon's directories and limits.
    pub daemon: DaemonOptions,
    /// Where the socket, lock and token go ([`chock_dirs::runtime_dir`]).
    pub runtime_dir: PathBuf,
    /// `--group`: one more group let in on the socket.
    pub group: Option<String>,
    /// `--host`: a loopback address to serve HTTP on (port 0: any free port).
    pub host: Option<String>,
}

/// The loopback transport, as started.
#[derive(Debug, Clone)]
pub struct HttpInfo {
    /// The address bound.
    pub addr: SocketAddr,
    /// The one-time login link `chock serve` prints.
    pub login_link: String,
    /// The file holding the token (0600), for bearer clients.
    pub token_file: PathBuf,
}

/// A running daemon.
#[derive(Debug)]
pub struct Server {
    daemon: Arc<Daemon>,
    socket: PathBuf,
    http: Option<HttpInfo>,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    _lock: DaemonLock,
}

/// Reads `--host`: an address with a port, on loopback.
pub fn loopback_addr(host: &str) -> Result<SocketAddr, DaemonError> {
    let addr: SocketAddr = host.parse().map_err(|_| DaemonError::BadHost {
        addr: host.to_string(),
    })?;
    if !addr.ip().is_loopback() {
        return Err(DaemonError::NotLoopback {
            addr: host.to_string(),
        });
    }
    Ok(addr)
}

/// Starts the daemon: the lock (refused when another daemon holds it), the socket, and with
/// `--host` the loopback HTTP transport. Must be called on a tokio runtime.
pub async fn serve(opts: ServeOptions) -> Result<Server, DaemonError> {
    let addr = opts.host.as_deref().map(loopback_addr).transpose()?;
    let gid = match &opts.group {
        Some(name) => Some(peer::group_id(name).ok_or_else(|| DaemonError::NoGroup(name.clone()))?),
        None => None,
    };
    let dir = &opts.runtime_dir;
    paths::private_dir(dir, if gid.is_some() { 0o710 } else { 0o700 }, gid)?;
    let lock = DaemonLock::acquire(dir)?;
    let socket = dir.join(SOCKET_FILE);
    // The lock is ours: a socket left here is a dead daemon's.
    let _ = std::fs::remove_file(&socket);
    let listener = UnixListener::bind(&socket).map_err(|e| DaemonError::io("bind", &socket, e))?;
    if let Some(gid) = gid {
        std::os::unix::fs::chown(&socket, None, Some(gid))
            .map_err(|e| DaemonError::io("give the group to", &socket, e))?;
    }
    std::fs::set_permissions(
        &socket,
        std::fs::Permissions::from_mode(if gid.is_some() { 0o660 } else { 0o600 }),
    )
    .map_err(|e| DaemonError::io("chmod", &socket, e))?;
    let daemon = Daemon::new(opts.daemon.clone());
    let (stop, stopped) = watch::channel(false);
    let mut tasks = Vec::new();
    let unix = router(App {
        daemon: Arc::clone(&daemon),
        web: None,
    });
    let gate = UnixGate {
        listener,
        rule: PeerRule::this_user(gid),
    };
    let mut until = stopped.clone();
    tasks.push(tokio::spawn(async move {
        let _ = axum::serve(
            gate,
            unix.into_make_service_with_connect_info::<server::PeerAddr>(),
        )
        .with_graceful_shutdown(async move {
            let _ = until.wait_for(|s| *s).await;
        })
        .await;
    }));
    let mut http = None;
    let _ = std::fs::remove_file(dir.join(TOKEN_FILE));
    let _ = std::fs::remove_file(dir.join(HTTP_FILE));
    if let Some(addr) = addr {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|e| DaemonError::io("bind", &PathBuf::from(addr.to_string()), e))?;
        let bound = listener.local_addr().map_err(|e| {
            DaemonError::io("read the address of", &PathBuf::from(addr.to_string()), e)
        })?;
        let web = Arc::new(web::Web::new(bound));
        let token_file = dir.join(TOKEN_FILE);
        paths::write_private(&token_file, web.token())?;
        paths::write_private(&dir.join(HTTP_FILE), &bound.to_string())?;
        http = Some(HttpInfo {
            addr: bound,
            login_link: web.login_link(),
            token_file,
        });
        let tcp = router(App {
            daemon: Arc::clone(&daemon),
            web: Some(web),
        });
        let mut until = stopped.clone();
        tasks.push(tokio::spawn(async move {
            let _ = axum::serve(
                TcpGate { listener },
                tcp.into_make_service_with_connect_info::<server::PeerAddr>(),
            )
            .with_graceful_shutdown(async move {
                let _ = until.wait_for(|s| *s).await;
            })
            .await;
        }));
    }
    Ok(Server {
        daemon,
        socket,
        http,
        stop,
        tasks,
        _lock: lock,
    })
}

impl Server {
    /// The unix socket's path.
    pub fn socket(&self) -> &std::path::Path {
        &self.socket
    }

    /// The loopback transport, when serving one.
    pub fn http(&self) -> Option<&HttpInfo> {
        self.http.as_ref()
    }

    /// The daemon.
    pub fn daemon(&self) -> &Arc<Daemon> {
        &self.daemon
    }

    /// The one line `chock serve` prints: where it listens.
    pub fn listening_line(&self) -> String {
        match &self.http {
            None => format!("chock: serving on {}", self.socket.display()),
            Some(http) => format!(
                "chock: serving on {} and http://{} — open {} (works once)",
                self.socket.display(),
                http.addr,
                http.login_link
            ),
        }
    }

    /// Stops: clients dropped, sessions ended or left unanswered ([`Daemon::stop`]), listeners
    /// closed, the socket and token files removed.
    pub async fn stop(self) {
        self.daemon.stop().await;
        let _ = self.stop.send(true);
        for task in self.tasks {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), task).await;
        }
        let _ = std::fs::remove_file(&self.socket);
        if let Some(http) = &self.http {
            let _ = std::fs::remove_file(&http.token_file);
            if let Some(dir) = self.socket.parent() {
                let _ = std::fs::remove_file(dir.join(HTTP_FILE));
            }
        }
    }
}
