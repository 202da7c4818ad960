//! The loopback redirect receiver (RFC 8252 §7.3): a one-shot listener on 127.0.0.1 that takes
//! the authorization server's redirect from the person's browser, checks its `state`, and hands
//! back the code. And opening the person's browser on the authorization URL.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::OAuthError;

/// The path the redirect comes back to.
const CALLBACK: &str = "/callback";

/// What the redirect carried: the code, and the `iss` parameter (RFC 9207) when the
/// authorization server sent one, for [`crate::Discovery::exchange_code`] to check.
#[derive(Clone, PartialEq, Eq)]
pub struct AuthorizationResponse {
    /// The authorization code.
    pub code: String,
    /// `iss`: the issuer the response says it came from.
    pub iss: Option<String>,
}

impl std::fmt::Debug for AuthorizationResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthorizationResponse")
            .field("iss", &self.iss)
            .finish_non_exhaustive()
    }
}

/// A listener on 127.0.0.1 waiting for one redirect.
#[derive(Debug)]
pub struct LoopbackReceiver {
    listener: TcpListener,
    redirect_uri: String,
    path: String,
}

impl LoopbackReceiver {
    /// Listens on 127.0.0.1 at a port the kernel picks. Loopback only: nothing off the machine
    /// can deliver a code to it.
    pub async fn bind() -> Result<LoopbackReceiver, OAuthError> {
        let io = |source| OAuthError::Io {
            what: "listening on 127.0.0.1 for the authorization redirect".into(),
            source,
        };
        let listener = TcpListener::bind(("127.0.0.1", 0)).await.map_err(io)?;
        let port = listener.local_addr().map_err(io)?.port();
        Ok(LoopbackReceiver {
            listener,
            redirect_uri: format!("http://127.0.0.1:{port}{CALLBACK}"),
            path: CALLBACK.to_string(),
        })
    }

    /// Listens on 127.0.0.1 at `port` (0: one the kernel picks) for a client whose redirect is
    /// registered as `http://localhost:<port><path>` (a ChatGPT sign-in's is fixed).
    pub async fn bind_registered(port: u16, path: &str) -> Result<LoopbackReceiver, OAuthError> {
        let io = |source| OAuthError::Io {
            what: format!("listening on 127.0.0.1:{port} for the authorization redirect"),
            source,
        };
        let listener = TcpListener::bind(("127.0.0.1", port)).await.map_err(io)?;
        let port = listener.local_addr().map_err(io)?.port();
        Ok(LoopbackReceiver {
            listener,
            redirect_uri: format!("http://localhost:{port}{path}"),
            path: path.to_string(),
        })
    }

    /// `http://127.0.0.1:<port>/callback`, the `redirect_uri` to register and send.
    pub fn redirect_uri(&self) -> &str {
        &self.redirect_uri
    }

    /// Waits up to `timeout` for the redirect carrying `state`, and returns its code and `iss`. Requests to
    /// other paths (a browser's favicon) are answered 404 and waited past. A wrong `state` or an
    /// `error` ends the wait with an error: the answer is refused, not retried.
    pub async fn wait(
        self,
        state: &str,
        timeout: Duration,
    ) -> Result<AuthorizationResponse, OAuthError> {
        let secs = timeout.as_secs();
        tokio::time::timeout(timeout, self.serve(state))
            .await
            .map_err(|_| OAuthError::Timeout(secs))?
    }

    /// [`LoopbackReceiver::wait`] with an owned `state`, for a spawned task.
    pub async fn wait_owned(
        self,
        state: String,
        timeout: Duration,
    ) -> Result<AuthorizationResponse, OAuthError> {
        self.wait(&state, timeout).await
    }

    async fn serve(self, state: &str) -> Result<AuthorizationResponse, OAuthError> {
        loop {
            let (mut stream, _) =
                self.listener
                    .accept()
                    .await
                    .map_err(|source| OAuthError::Io {
                        what: "accepting the authorization redirect".into(),
                        source,
                    })?;
            let Some(target) = read_target(&mut stream).await else {
                continue;
            };
            let (path, query) = target.split_once('?').unwrap_or((&target, ""));
            if path != self.path {
                respond(&mut stream, "404 Not Found", "Not here.").await;
                continue;
            }
            let mut code = None;
            let mut got_state = None;
            let mut error = None;
            let mut description = None;
            let mut iss = None;
            for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
                match &*k {
                    "code" => code = Some(v.into_owned()),
                    "state" => got_state = Some(v.into_owned()),
                    "error" => error = Some(v.into_owned()),
                    "error_description" => description = Some(v.into_owned()),
                    "iss" => iss = Some(v.into_owned()),
                    _ => {}
                }
            }
            if got_state.as_deref() != Some(state) {
                respond(
                    &mut stream,
                    "400 Bad Request",
                    "This answer is not to Chock's request; it was refused.",
                )
                .await;
                return Err(OAuthError::StateMismatch);
            }
            if let Some(error) = error {
                respond(
                    &mut stream,
                    "200 OK",
                    "Authorization was not given. You may close this window.",
                )
                .await;
                return Err(OAuthError::Refused {
                    endpoint: "authorization".into(),
                    error,
                    description,
                });
            }
            let Some(code) = code else {
                respond(
                    &mut stream,
                    "400 Bad Request",
                    "The answer carries no code.",
                )
                .await;
                return Err(OAuthError::Refused {
                    endpoint: "authorization".into(),
                    error: "invalid_request".into(),
                    description: Some("the redirect carried neither a code nor an error".into()),
                });
            };
            respond(
                &mut stream,
                "200 OK",
                "Chock is authorized. You may close this window.",
            )
            .await;
            return Ok(AuthorizationResponse { code, iss });
        }
    }
}

/// The request target of an HTTP/1 GET, from a head of at most 8 KiB.
async fn read_target(stream: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf))
            .await
            .ok()?
            .ok()?;
        if n == 0 || head.len() > 8192 {
            return None;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = head.split(|&b| b == b'\r').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let mut parts = line.split(' ');
    (parts.next()? == "GET").then_some(())?;
    parts.next().map(str::to_string)
}

async fn respond(stream: &mut TcpStream, status: &str, text: &str) {
    let body = format!("<!doctype html><title>Chock</title><p>{text}</p>\n");
    let reply = format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\ncache-control: no-store\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(reply.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// Opens `url` in the person's browser: `$BROWSER` if set, else `xdg-open` if on PATH. Returns
/// whether a program was started (the caller prints the URL either way). The URL is an argument,
/// never passed through a shell.
pub fn open_browser(url: &str) -> bool {
    let program = std::env::var_os("BROWSER")
        .filter(|b| !b.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| {
            let path = std::env::var_os("PATH")?;
            std::env::split_paths(&path)
                .map(|d| d.join("xdg-open"))
                .find(|p| p.is_file())
        });
    let Some(program) = program else {
        return false;
    };
    std::process::Command::new(program)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .is_ok()
}
