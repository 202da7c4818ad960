//! A fake model server for the providers' own tests: a loopback HTTP/1.1 server (tokio) that plays
//! scripted replies byte for byte, as a provider's stream arrives at its parser.
//!
//! Each connection gets the next scripted reply; every request is recorded (path, headers, JSON
//! body) so tests can check what the client sent. Bodies are written in small pieces with a flush
//! after each, so the client meets events split at arbitrary points; a reply can also be cut short
//! or stalled to break the stream, or never come. [`crate::model`] is the same fake at the level
//! of whole turns, for tests that run sessions.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How a reply's body is framed on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// `Transfer-Encoding: chunked`; a cut leaves the chunked body unterminated (a transport error).
    Chunked,
    /// No length, `Connection: close`; a cut is a clean end of stream.
    CloseDelimited,
}

/// One scripted reply.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The HTTP status.
    pub status: u16,
    /// The headers, beside the framing's own.
    pub headers: Vec<(String, String)>,
    /// The body, byte for byte (a recorded stream, an error's JSON).
    pub body: Vec<u8>,
    /// Write the body in pieces of this many bytes, flushing after each.
    pub piece: usize,
    /// Stop after this many body bytes and close the connection.
    pub cut_after: Option<usize>,
    /// Stop after this many body bytes and keep the connection open, silent, for a minute.
    pub stall_after: Option<usize>,
    /// Read the request, then send nothing at all (not even headers) for a minute.
    pub silent: bool,
    /// How the body is framed.
    pub framing: Framing,
}

impl Reply {
    /// A 200 event stream with `body`.
    pub fn sse(body: impl Into<Vec<u8>>) -> Reply {
        Reply {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            body: body.into(),
            piece: 4096,
            cut_after: None,
            stall_after: None,
            silent: false,
            framing: Framing::Chunked,
        }
    }

    /// A non-success JSON reply.
    pub fn error(status: u16, body: &str) -> Reply {
        Reply {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.as_bytes().to_vec(),
            piece: 4096,
            cut_after: None,
            stall_after: None,
            silent: false,
            framing: Framing::Chunked,
        }
    }

    /// A reply that never comes: the request is read and the connection then stays open and silent.
    pub fn silent() -> Reply {
        Reply {
            silent: true,
            ..Reply::sse("")
        }
    }

    /// The reply with one more header.
    pub fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// The body written `piece` bytes at a time, flushed after each.
    pub fn in_pieces(mut self, piece: usize) -> Reply {
        self.piece = piece.max(1);
        self
    }

    /// The connection closed after `bytes` of the body.
    pub fn cut_after(mut self, bytes: usize) -> Reply {
        self.cut_after = Some(bytes);
        self
    }

    /// Silence (the connection held open) after `bytes` of the body.
    pub fn stall_after(mut self, bytes: usize) -> Reply {
        self.stall_after = Some(bytes);
        self
    }

    /// The body framed so.
    pub fn framing(mut self, framing: Framing) -> Reply {
        self.framing = framing;
        self
    }
}

/// A Chat Completions event stream as it goes on the wire: each chunk (a chunk's JSON, or the
/// closing `[DONE]`) as a `data:` line and a blank line, for [`Reply::sse`].
pub fn chat_sse(chunks: &[&str]) -> Vec<u8> {
    chunks
        .iter()
        .map(|chunk| format!("data: {chunk}\n\n"))
        .collect::<String>()
        .into_bytes()
}

/// A request as the server received it.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// `POST`.
    pub method: String,
    /// The request's path (`/v1/messages`).
    pub path: String,
    /// Every header, its name in lower case.
    pub headers: Vec<(String, String)>,
    /// The body as JSON (`null` when it is not).
    pub body: Value,
}

impl Recorded {
    /// The value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// The running server.
#[derive(Debug)]
pub struct FakeServer {
    /// Where it listens (loopback).
    pub addr: SocketAddr,
    requests: Arc<Mutex<Vec<Recorded>>>,
}

impl FakeServer {
    /// Starts serving `replies`, one per connection, in order.
    pub async fn start(replies: Vec<Reply>) -> FakeServer {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        let addr = listener.local_addr().expect("local addr");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let queue = Arc::new(Mutex::new(VecDeque::from(replies)));
        let recorded = requests.clone();
        tokio::spawn(async move {
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    return;
                };
                let next = queue.lock().expect("queue").pop_front();
                let recorded = recorded.clone();
                tokio::spawn(async move { serve(socket, next, recorded).await });
            }
        });
        FakeServer { addr, requests }
    }

    /// `http://ADDR`, the base URL a provider is pointed at.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().expect("requests").clone()
    }
}

async fn serve(mut socket: TcpStream, reply: Option<Reply>, recorded: Arc<Mutex<Vec<Recorded>>>) {
    socket.set_nodelay(true).expect("nodelay");
    let Some(request) = read_request(&mut socket).await else {
        return;
    };
    recorded.lock().expect("recorded").push(request);
    let reply = reply.unwrap_or_else(|| {
        Reply::error(
            599,
            "{\"error\":{\"type\":\"test\",\"message\":\"no more scripted replies\"}}",
        )
    });
    if reply.silent {
        tokio::time::sleep(Duration::from_secs(60)).await;
        return;
    }
    let mut head = format!("HTTP/1.1 {} Scripted\r\n", reply.status);
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    match reply.framing {
        Framing::Chunked => head.push_str("transfer-encoding: chunked\r\n"),
        Framing::CloseDelimited => head.push_str("connection: close\r\n"),
    }
    head.push_str("\r\n");
    if socket.write_all(head.as_bytes()).await.is_err() {
        return;
    }
    let end = reply
        .stall_after
        .or(reply.cut_after)
        .unwrap_or(reply.body.len())
        .min(reply.body.len());
    for piece in reply.body[..end].chunks(reply.piece) {
        let framed = match reply.framing {
            Framing::Chunked => {
                [format!("{:x}\r\n", piece.len()).as_bytes(), piece, b"\r\n"].concat()
            }
            Framing::CloseDelimited => piece.to_vec(),
        };
        if socket.write_all(&framed).await.is_err() || socket.flush().await.is_err() {
            return;
        }
        tokio::task::yield_now().await;
    }
    if reply.stall_after.is_some() {
        tokio::time::sleep(Duration::from_secs(60)).await;
        return;
    }
    if reply.cut_after.is_none() && reply.framing == Framing::Chunked {
        let _ = socket.write_all(b"0\r\n\r\n").await;
    }
    let _ = socket.flush().await;
    let _ = socket.shutdown().await;
}

async fn read_request(socket: &mut TcpStream) -> Option<Recorded> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1024];
    let head_end = loop {
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos;
        }
        let n = socket.read(&mut byte).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&byte[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let (method, path) = (first.next()?.to_owned(), first.next()?.to_owned());
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        let n = socket.read(&mut byte).await.ok()?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&byte[..n]);
    }
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    Some(Recorded {
        method,
        path,
        headers,
        body,
    })
}
