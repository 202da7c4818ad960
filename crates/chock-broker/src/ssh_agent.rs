//! The ssh-agent proxy an approved push over ssh is given: a unix socket bound into one call that
//! speaks the ssh-agent protocol (draft-miller-ssh-agent) and passes on to the user's own agent only
//! the two requests a push needs — list the identities, sign one challenge — and answers every other
//! request (add, remove, lock, unlock, extensions, anything unknown) with a failure itself, so no key
//! is ever added, removed or handed out through it, and the user's agent cannot be locked. The socket
//! is removed and every connection cut when the call ends ([`AgentProxy::close`], or drop).

use std::io::{Read, Write};
use std::net::Shutdown;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// `SSH_AGENT_FAILURE`.
const FAILURE: u8 = 5;
/// `SSH_AGENTC_REQUEST_IDENTITIES`.
const REQUEST_IDENTITIES: u8 = 11;
/// `SSH_AGENTC_SIGN_REQUEST`.
const SIGN_REQUEST: u8 = 13;
/// How often the accept loop looks for a new client (and for the proxy being closed).
const ACCEPT_POLL: std::time::Duration = std::time::Duration::from_millis(20);
/// The largest message read (OpenSSH's agent takes 256 KiB).
const MAX_MESSAGE: usize = 256 * 1024;

/// What the proxy has passed on and refused, for the log and the tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentCounts {
    /// Identity lists passed on.
    pub listed: u64,
    /// Signatures passed on.
    pub signed: u64,
    /// The message types answered with a failure, in order.
    pub refused: Vec<u8>,
}

#[derive(Debug, Default)]
struct Shared {
    listed: AtomicU64,
    signed: AtomicU64,
    refused: Mutex<Vec<u8>>,
    open: Mutex<Vec<UnixStream>>,
    closing: AtomicBool,
}

/// One call's proxy to the user's agent. Closed when dropped.
#[derive(Debug)]
pub struct AgentProxy {
    path: PathBuf,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl AgentProxy {
    /// Binds `path` (which must not exist; its directory should be the call's own, unreadable by
    /// others) and serves it, passing the allowed requests to the agent at `upstream` (the user's
    /// `SSH_AUTH_SOCK`), one upstream connection per client connection.
    pub fn start(path: &Path, upstream: &Path) -> std::io::Result<AgentProxy> {
        let listener = UnixListener::bind(path)?;
        // Polled, so closing never depends on reaching the socket by its path again (the path may
        // go through a call's root that is gone by then).
        listener.set_nonblocking(true)?;
        let shared = Arc::new(Shared::default());
        let accept = {
            let (shared, upstream) = (shared.clone(), upstream.to_path_buf());
            std::thread::Builder::new()
                .name("ssh-agent-proxy".into())
                .spawn(move || {
                    while !shared.closing.load(Ordering::SeqCst) {
                        let client = match listener.accept() {
                            Ok((client, _)) => client,
                            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                                std::thread::sleep(ACCEPT_POLL);
                                continue;
                            }
                            Err(_) => {
                                std::thread::sleep(ACCEPT_POLL);
                                continue;
                            }
                        };
                        if client.set_nonblocking(false).is_err() {
                            continue;
                        }
                        if let Ok(copy) = client.try_clone() {
                            shared.open.lock().expect("the open list").push(copy);
                        }
                        let (shared, upstream) = (shared.clone(), upstream.clone());
                        std::thread::spawn(move || {
                            let _ = serve(client, &upstream, &shared);
                        });
                    }
                })?
        };
        Ok(AgentProxy {
            path: path.to_path_buf(),
            shared,
            accept: Some(accept),
        })
    }

    /// The socket to name in the call's `SSH_AUTH_SOCK`.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What has been passed on and refused so far.
    pub fn counts(&self) -> AgentCounts {
        AgentCounts {
            listed: self.shared.listed.load(Ordering::SeqCst),
            signed: self.shared.signed.load(Ordering::SeqCst),
            refused: self.shared.refused.lock().expect("the list").clone(),
        }
    }

    /// Stops accepting, cuts every open connection and removes the socket. Returns the counts.
    pub fn close(mut self) -> AgentCounts {
        self.shut();
        self.counts()
    }

    fn shut(&mut self) {
        if self.shared.closing.swap(true, Ordering::SeqCst) {
            return;
        }
        // The accept loop sees the flag within one poll; then whatever is open is cut.
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
        for stream in self.shared.open.lock().expect("the open list").drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Drop for AgentProxy {
    fn drop(&mut self) {
        self.shut();
    }
}

/// Reads one framed message (a 4-byte big-endian length, then that many bytes); `None` at a clean end.
fn read_message(stream: &mut UnixStream) -> std::io::Result<Option<Vec<u8>>> {
    let mut len = [0u8; 4];
    match stream.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_be_bytes(len) as usize;
    if len == 0 || len > MAX_MESSAGE {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("an agent message of {len} bytes"),
        ));
    }
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body)?;
    Ok(Some(body))
}

fn write_message(stream: &mut UnixStream, body: &[u8]) -> std::io::Result<()> {
    let len = u32::try_from(body.len())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "too long"))?;
    let mut framed = Vec::with_capacity(body.len() + 4);
    framed.extend_from_slice(&len.to_be_bytes());
    framed.extend_from_slice(body);
    stream.write_all(&framed)
}

/// Serves one client: each request either passed on and its answer passed back, or refused here.
fn serve(mut client: UnixStream, upstream: &Path, shared: &Shared) -> std::io::Result<()> {
    let mut agent: Option<UnixStream> = None;
    while let Some(request) = read_message(&mut client)? {
        let kind = request[0];
        let counter = match kind {
            REQUEST_IDENTITIES => &shared.listed,
            SIGN_REQUEST => &shared.signed,
            other => {
                shared.refused.lock().expect("the list").push(other);
                write_message(&mut client, &[FAILURE])?;
                continue;
            }
        };
        if shared.closing.load(Ordering::SeqCst) {
            return Ok(());
        }
        let upstream_stream = match &mut agent {
            Some(a) => a,
            None => agent.insert(UnixStream::connect(upstream)?),
        };
        write_message(upstream_stream, &request)?;
        let answer = read_message(upstream_stream)?.ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the agent closed")
        })?;
        counter.fetch_add(1, Ordering::SeqCst);
        write_message(&mut client, &answer)?;
    }
    Ok(())
}
