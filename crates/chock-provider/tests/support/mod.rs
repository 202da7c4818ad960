//! A loopback HTTP/1.1 server that plays scripted replies byte for byte, and a sleeper that does not sleep.
//!
//! Each connection gets the next scripted reply; every request is recorded (path, headers, JSON body) so
//! tests can check what the client sent. Bodies are written in small pieces with a flush after each, so
//! the client meets events split at arbitrary points; a reply can also be cut short to break the stream.
#![allow(dead_code, unreachable_pub)]

pub mod anthropic;

use std::collections::VecDeque;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use chock_provider::{
    Block, Message, ProviderConfig, ProviderError, Request, Response, RetryPolicy, Role, Sleeper,
    StreamEvent, connect,
};
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
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Write the body in pieces of this many bytes, flushing after each.
    pub piece: usize,
    /// Stop after this many body bytes and close the connection.
    pub cut_after: Option<usize>,
    /// Stop after this many body bytes and keep the connection open, silent, for a minute.
    pub stall_after: Option<usize>,
    /// Read the request, then send nothing at all (not even headers) for a minute.
    pub silent: bool,
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

    pub fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.into(), value.into()));
        self
    }

    pub fn in_pieces(mut self, piece: usize) -> Reply {
        self.piece = piece.max(1);
        self
    }

    pub fn cut_after(mut self, bytes: usize) -> Reply {
        self.cut_after = Some(bytes);
        self
    }

    pub fn stall_after(mut self, bytes: usize) -> Reply {
        self.stall_after = Some(bytes);
        self
    }

    pub fn framing(mut self, framing: Framing) -> Reply {
        self.framing = framing;
        self
    }
}

/// A request as the server received it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

impl Recorded {
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

    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

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

/// A sleeper that records each wait and returns at once; its clock is fixed.
#[derive(Debug, Default)]
pub struct RecordingSleeper {
    pub waits: Mutex<Vec<Duration>>,
}

impl RecordingSleeper {
    pub fn waits(&self) -> Vec<Duration> {
        self.waits.lock().expect("waits").clone()
    }
}

/// The fixed "now" of `RecordingSleeper`: 2015-10-21T07:27:50Z.
pub const FIXED_NOW_SECS: u64 = 1_445_412_470;

impl Sleeper for RecordingSleeper {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        self.waits.lock().expect("waits").push(duration);
        Box::pin(async {})
    }

    fn now(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(FIXED_NOW_SECS)
    }
}

/// `config` pointed at the fake server, with a recording sleeper and exact (jitter-free) backoff.
pub fn wire_to(
    mut config: ProviderConfig,
    server: &FakeServer,
) -> (ProviderConfig, Arc<RecordingSleeper>) {
    let sleeper = Arc::new(RecordingSleeper::default());
    config.base_url = server.base_url();
    config.sleeper = sleeper.clone();
    config.retry = RetryPolicy {
        jitter: false,
        ..RetryPolicy::default()
    };
    config.idle_timeout = Duration::from_secs(10);
    (config, sleeper)
}

/// The byte ranges of the events of an SSE stream: each from its first line through the blank line that
/// ends it, so that `body[..ranges[k].start]` is the stream cut just before its event `k`.
pub fn event_ranges(body: &str) -> Vec<std::ops::Range<usize>> {
    let mut ranges = Vec::new();
    let mut start = 0;
    while start < body.len() {
        let end = body[start..]
            .find("\n\n")
            .map_or(body.len(), |at| start + at + 2);
        ranges.push(start..end);
        start = end;
    }
    ranges
}

/// A fixture from tests/fixtures.
pub fn fixture(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Collects stream events.
pub fn collector() -> (Arc<Mutex<Vec<StreamEvent>>>, impl FnMut(StreamEvent) + Send) {
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = events.clone();
    (events, move |event| {
        sink.lock().expect("events").push(event)
    })
}

/// One call through a fresh provider built from `config`: the common act of most client tests.
pub async fn stream_once(
    config: &ProviderConfig,
    request: &Request,
    sink: &mut (dyn FnMut(StreamEvent) + Send),
) -> Result<Response, ProviderError> {
    connect(config)
        .expect("provider")
        .stream(request, sink)
        .await
}

/// Two turns through one provider: `request`, then its reply sent back as history with `results` as the
/// user's answer, so a test can read how the format carries a call and its result in the second request.
pub async fn turn_with_results(config: &ProviderConfig, mut request: Request, results: Vec<Block>) {
    let provider = connect(config).expect("provider");
    let (_, mut sink) = collector();
    let response = provider.stream(&request, &mut sink).await.expect("reply");
    request.messages.push(Message::assistant(response.content));
    request.messages.push(Message {
        role: Role::User,
        content: results,
    });
    provider
        .stream(&request, &mut sink)
        .await
        .expect("second reply");
}

/// The text of all `TextDelta` events.
pub fn streamed_text(events: &[StreamEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}

/// The `Retrying` events as (attempt, wait, reason).
pub fn retries(events: &[StreamEvent]) -> Vec<(u32, Duration, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Retrying {
                attempt,
                wait,
                reason,
            } => Some((*attempt, *wait, reason.clone())),
            _ => None,
        })
        .collect()
}

/// The reasons of the `Retrying` events, in order.
pub fn retry_reasons(events: &[StreamEvent]) -> Vec<String> {
    retries(events).into_iter().map(|r| r.2).collect()
}
