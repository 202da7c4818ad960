//! One session's events to its subscribers: the log is the source and its seq the cursor.
//!
//! The fanout tails the session's `log.jsonl` (every line is written whole, before the live event
//! that reports it): each new complete line becomes one `session.event` frame, serialised once, put
//! on every subscriber's queue; a live item (`session.live`) follows the lines written before it.
//! With nobody subscribed nothing is read; the next subscription reads from where the tail stopped.
//!
//! A subscription from seq `n` is caught up from the file by the client's own task (waiting on its
//! queue, so a long history never fills it), then joined to the live stream under the fanout's
//! lock with the few lines written meanwhile taken from a small ring of recent frames: no gap, no
//! repeat.

use std::collections::VecDeque;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use chock_agent::events::{AgentEvent, EventSink};
use chock_protocol::rpc::{Notice, SessionLive};
use serde::Deserialize;

use crate::hub::{Conn, Frame, frame};

/// How many recent event frames the fanout keeps for joining subscriptions.
const RING: usize = 512;
/// Room a catch-up leaves in a client's queue for live frames.
pub(crate) const HEADROOM: usize = 64;

#[derive(Deserialize)]
struct SeqOnly {
    seq: u64,
}

#[derive(Debug)]
struct Sub {
    conn: Conn,
    from: u64,
}

#[derive(Debug, Default)]
struct Tail {
    file: Option<File>,
    offset: u64,
    partial: Vec<u8>,
    /// The seq of the last line read.
    head: Option<u64>,
    ring: VecDeque<(u64, Frame)>,
    subs: Vec<Sub>,
}

/// The fanout of one session.
#[derive(Debug)]
pub(crate) struct Fanout {
    session: String,
    log: PathBuf,
    tail: Mutex<Tail>,
}

/// Where a catch-up stands: the last seq sent, or what the joining found missing.
pub(crate) enum Joined {
    /// The client is on the live stream; its last seq from the log is this.
    Live,
    /// Lines after `after` are no longer in the ring: catch up from the file again.
    Behind,
}

impl Fanout {
    pub(crate) fn new(session: &str, dir: &std::path::Path) -> Fanout {
        Fanout {
            session: session.to_string(),
            log: dir.join(chock_log::LOG_FILE),
            tail: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Tail> {
        self.tail.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Reads the lines written since the last read and sends each to the subscribers.
    fn read_new(&self, tail: &mut Tail) {
        if tail.file.is_none() {
            tail.file = File::open(&self.log).ok();
        }
        let Some(file) = &tail.file else { return };
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match file.read_at(&mut buf, tail.offset) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            tail.offset += n as u64;
            tail.partial.extend_from_slice(&buf[..n]);
        }
        let Some(last_newline) = tail.partial.iter().rposition(|&b| b == b'\n') else {
            return;
        };
        let complete: Vec<u8> = tail.partial.drain(..=last_newline).collect();
        for line in complete.split(|&b| b == b'\n') {
            let Some((seq, frame)) = line_frame(&self.session, line) else {
                continue;
            };
            tail.head = Some(seq);
            for sub in tail.subs.iter().filter(|s| seq >= s.from) {
                sub.conn.push(&frame);
            }
            if tail.ring.len() == RING {
                tail.ring.pop_front();
            }
            tail.ring.push_back((seq, frame));
        }
        tail.subs.retain(|s| !s.conn.is_gone());
    }

    /// Sends what the log gained (after an act with no live item: the end of a task, a note).
    pub(crate) fn pump(&self) {
        let mut tail = self.lock();
        if !tail.subs.is_empty() {
            self.read_new(&mut tail);
        }
    }

    /// The seq the log has reached.
    pub(crate) fn head(&self) -> Option<u64> {
        let mut tail = self.lock();
        self.read_new(&mut tail);
        tail.head
    }

    /// A live item: after the log lines written before it.
    fn live(&self, event: &AgentEvent) {
        let mut tail = self.lock();
        if tail.subs.is_empty() {
            return;
        }
        self.read_new(&mut tail);
        let frame = frame(&Notice::SessionLive(SessionLive {
            session: self.session.clone(),
            after_seq: tail.head.unwrap_or(0),
            event: event.clone(),
        }));
        for sub in &tail.subs {
            sub.conn.push(&frame);
        }
    }

    /// Joins `conn`, caught up from the file through seq `after` (None: nothing sent yet) with
    /// its subscription starting at `from`, to the live stream: the lines written since come
    /// from the ring. Replaces an earlier subscription of the same client.
    pub(crate) fn join(&self, conn: &Conn, from: u64, after: Option<u64>) -> Joined {
        let mut tail = self.lock();
        self.read_new(&mut tail);
        let next = after.map_or(from, |a| (a + 1).max(from));
        let missing: Vec<&(u64, Frame)> = tail.ring.iter().filter(|(s, _)| *s >= next).collect();
        let reaches = match (tail.head, missing.first()) {
            (None, _) => true,
            (Some(head), _) if head < next => true,
            (Some(_), Some((first, _))) => *first == next,
            (Some(_), None) => false,
        };
        if !reaches {
            return Joined::Behind;
        }
        for (_, frame) in missing {
            conn.push(frame);
        }
        tail.subs.retain(|s| s.conn.id != conn.id);
        tail.subs.push(Sub {
            conn: conn.clone(),
            from,
        });
        Joined::Live
    }

    /// Stops sending to `conn`.
    pub(crate) fn leave(&self, conn: u64) {
        self.lock().subs.retain(|s| s.conn.id != conn);
    }
}

/// The `session.event` frame of one log line, and its seq (`None`: not a complete event line).
fn line_frame(session: &str, line: &[u8]) -> Option<(u64, Frame)> {
    let SeqOnly { seq } = serde_json::from_slice::<SeqOnly>(line).ok()?;
    let line = std::str::from_utf8(line).ok()?;
    // The line is a log event exactly as `LogEvent` describes it: it goes out as written, so the
    // client can check the chain against the bytes the hash was taken of.
    let frame = format!(
        "{{\"jsonrpc\":\"{}\",\"method\":\"session.event\",\"params\":{{\"session\":{},\"event\":{line}}}}}",
        chock_protocol::rpc::JSONRPC,
        serde_json::Value::String(session.to_string())
    );
    Some((seq, Arc::from(frame)))
}

/// The `session.event` frames of the log's lines with seq `>= from`, read from the file.
pub(crate) fn history(session: &str, dir: &std::path::Path, from: u64) -> Vec<(u64, Frame)> {
    let bytes = std::fs::read(dir.join(chock_log::LOG_FILE)).unwrap_or_default();
    let complete = match bytes.iter().rposition(|&b| b == b'\n') {
        Some(end) => &bytes[..=end],
        None => return Vec::new(),
    };
    complete
        .split(|&b| b == b'\n')
        .filter_map(|line| line_frame(session, line))
        .filter(|(seq, _)| *seq >= from)
        .collect()
}

/// The runtime's event sink: each live item goes through the fanout.
pub(crate) struct FanoutSink(pub(crate) Arc<Fanout>);

impl EventSink for FanoutSink {
    fn emit(&self, event: &AgentEvent) {
        self.0.live(event);
    }
}
