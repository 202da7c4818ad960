//! A fake model: a loopback HTTP/1.1 server speaking the Anthropic Messages wire format (the
//! event stream of the provider's documentation, `event: <type>` then `data: <json>`), playing
//! scripted turns one request at a time, and the pieces it is made of ([`read_request`],
//! [`write_reply`]) for a test whose server must decide per request (several agents at once).

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use crate::world::World;

/// The model every reply names.
pub const MODEL: &str = "claude-sonnet-4-5";

/// One reply of the fake model.
#[derive(Debug, Clone)]
pub enum Reply {
    /// An HTTP error with this status and JSON body (`retry-after-ms: 10`, so a retry is quick).
    Error(u16, &'static str),
    /// A stream of Anthropic SSE events, each one event's JSON (its `type` names the event).
    Events(Vec<String>),
    /// A whole event stream as it goes on the wire (a reference stream, byte for byte).
    Raw(String),
    /// The stream's headers, then silence for this long, then the connection closes.
    Stall(Duration),
}

/// One request the server read: its request line and headers, and its body.
#[derive(Debug, Clone)]
pub struct Request {
    /// The request line and headers, each ending `\r\n`, and the empty line.
    pub head: String,
    /// The body (`content-length` bytes).
    pub body: Vec<u8>,
}

impl Request {
    /// The body as JSON (a Messages request).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("the request's body is not JSON: {e}: {self}"))
    }
}

impl std::fmt::Display for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{}", self.head, String::from_utf8_lossy(&self.body))
    }
}

/// A `message_start` event: message `id`, `input_tokens` of input.
pub fn message_start(id: &str, input_tokens: u64) -> String {
    format!(
        r#"{{"type":"message_start","message":{{"id":"{id}","type":"message","role":"assistant","model":"{MODEL}","content":[],"stop_reason":null,"usage":{{"input_tokens":{input_tokens},"output_tokens":1}}}}}}"#
    )
}

/// A streamed reply: some text, then optionally one tool call (id, tool, input JSON) whose input
/// arrives in two pieces.
pub fn reply(id: &str, input_tokens: u64, text: &str, call: Option<(&str, &str, &str)>) -> Reply {
    let mut events = vec![
        message_start(id, input_tokens),
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#.to_string(),
        serde_json::json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":text}}).to_string(),
        r#"{"type":"content_block_stop","index":0}"#.to_string(),
    ];
    let stop = if let Some((call_id, name, input)) = call {
        let (a, b) = input.split_at(input.len() / 2);
        events.push(
            serde_json::json!({"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":call_id,"name":name,"input":{}}})
                .to_string(),
        );
        for piece in [a, b] {
            events.push(
                serde_json::json!({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":piece}})
                    .to_string(),
            );
        }
        events.push(r#"{"type":"content_block_stop","index":1}"#.to_string());
        "tool_use"
    } else {
        "end_turn"
    };
    events.push(format!(r#"{{"type":"message_delta","delta":{{"stop_reason":"{stop}"}},"usage":{{"output_tokens":10}}}}"#));
    events.push(r#"{"type":"message_stop"}"#.to_string());
    Reply::Events(events)
}

/// Reads one HTTP/1.1 request (head, then `content-length` bytes of body); `None` when the
/// connection closed before a whole head.
pub fn read_request(reader: &mut impl BufRead) -> Option<Request> {
    let mut head = String::new();
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().expect("a content-length");
        }
        head.push_str(&line);
        if line == "\r\n" {
            break;
        }
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body).ok()?;
    Some(Request { head, body })
}

const STREAM_HEAD: &str = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n";

/// `events` as they go on the wire: `event: <type>` and `data: <json>`, a blank line after each.
pub fn sse(events: &[String]) -> String {
    let mut out = String::new();
    for data in events {
        let kind: serde_json::Value =
            serde_json::from_str(data).unwrap_or_else(|e| panic!("not JSON: {e}: {data}"));
        let kind = kind["type"]
            .as_str()
            .unwrap_or_else(|| panic!("an event with no type: {data}"));
        out.push_str(&format!("event: {kind}\ndata: {data}\n\n"));
    }
    out
}

/// Writes `reply` on `stream`. A [`Reply::Stall`] holds the connection open on a thread of its
/// own, so the caller can go on to the next request.
pub fn write_reply(mut stream: TcpStream, reply: Reply) -> std::io::Result<()> {
    let out = match reply {
        Reply::Stall(silence) => {
            stream.write_all(STREAM_HEAD.as_bytes())?;
            stream.flush()?;
            std::thread::spawn(move || {
                std::thread::sleep(silence);
                drop(stream);
            });
            return Ok(());
        }
        Reply::Error(status, body) => format!(
            "HTTP/1.1 {status} Error\r\ncontent-type: application/json\r\nretry-after-ms: 10\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        ),
        Reply::Events(events) => format!("{STREAM_HEAD}{}", sse(&events)),
        Reply::Raw(stream_text) => format!("{STREAM_HEAD}{stream_text}"),
    };
    stream.write_all(out.as_bytes())?;
    stream.flush()
}

/// A loopback server speaking the Anthropic Messages wire format, one reply per request (one
/// connection each), in order. Returns the port and a handle whose join gives the raw requests it
/// saw (head and body), once every reply has been given.
pub fn anthropic_server(replies: Vec<Reply>) -> (u16, std::thread::JoinHandle<Vec<String>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let port = listener.local_addr().expect("its address").port();
    let server = std::thread::spawn(move || {
        let mut seen = Vec::new();
        for reply in replies {
            let (stream, _) = listener.accept().expect("a connection");
            let mut reader = BufReader::new(stream.try_clone().expect("the stream"));
            let request = read_request(&mut reader).expect("a whole request");
            seen.push(request.to_string());
            write_reply(stream, reply).expect("the reply is written");
        }
        seen
    });
    (port, server)
}

/// A loopback server that hands every connection, on a thread of its own, to `serve` with the
/// request it read: for a model that answers many clients at once. Returns the port.
pub fn serve_each(
    serve: impl Fn(TcpStream, BufReader<TcpStream>, Request) + Send + Sync + 'static,
) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let port = listener.local_addr().expect("its address").port();
    let serve = std::sync::Arc::new(serve);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let serve = std::sync::Arc::clone(&serve);
            std::thread::spawn(move || {
                let Ok(read_half) = stream.try_clone() else {
                    return;
                };
                let mut reader = BufReader::new(read_half);
                if let Some(request) = read_request(&mut reader) {
                    serve(stream, reader, request);
                }
            });
        }
    });
    port
}

/// config.toml naming the loopback server as provider `fake` (kind `anthropic`), its key in the
/// variable `key_env`.
pub fn fake_provider(w: &World, port: u16, key_env: &str) {
    w.config_toml(&format!(
        "[providers.fake]\nkind = \"anthropic\"\nbase_url = \"http://127.0.0.1:{port}\"\nkey_env = \"{key_env}\"\nmodel = \"{MODEL}\"\n"
    ));
}

/// A loopback HTTP server (not a model: a web page for `fetch`, a host for `curl`) answering
/// every request, each connection on a thread of its own, with `body` (and a `content-type`
/// header when `content_type` is given). Returns its port.
pub fn page_server(content_type: Option<&'static str>, body: &'static str) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let port = listener.local_addr().expect("its address").port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            std::thread::spawn(move || {
                let mut reader = BufReader::new(match stream.try_clone() {
                    Ok(s) => s,
                    Err(_) => return,
                });
                // The head only: these requests carry no body the page depends on.
                loop {
                    let mut line = String::new();
                    match reader.read_line(&mut line) {
                        Ok(0) | Err(_) => return,
                        Ok(_) if line == "\r\n" => break,
                        Ok(_) => {}
                    }
                }
                let kind = content_type
                    .map(|t| format!("Content-Type: {t}\r\n"))
                    .unwrap_or_default();
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\n{kind}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            });
        }
    });
    port
}
