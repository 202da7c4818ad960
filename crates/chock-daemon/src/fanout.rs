//! One owned session's frames to the clients subscribed to it.
//!
//! The frames come from the session itself, never from its file: the session's relay
//! ([`crate::session`]) holds one subscription of the session's handle
//! ([`chock_runtime::SessionHandle::subscribe`], fed by the log writer's tap and the runtime's
//! event sink) and gives each item here once, in order. Each log line becomes one `session.event`
//! frame, built once from the line exactly as written and put on every subscriber's queue; a live
//! item (`session.live`) goes to every subscriber after the lines written before it. So one
//! session costs one subscription of its handle however many clients follow it, and nothing is
//! read or done while nothing happens.
//!
//! A client subscribing from seq `n` is caught up from the file by its own task ([`history`],
//! waiting on its queue, so a long history never fills it: the one read of the file, as the
//! runtime's own catch-up is), then joined to the stream here under the fanout's lock, the few
//! lines the relay gave meanwhile taken from a small ring of recent frames: no gap, no repeat.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use chock_protocol::live::AgentEvent;
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
    /// The first seq it still needs from the relay (it had the ones before from the file).
    from: u64,
}

#[derive(Debug, Default)]
struct Tail {
    /// The seq of the last line the relay gave (None: none yet).
    head: Option<u64>,
    ring: VecDeque<(u64, Frame)>,
    subs: Vec<Sub>,
    /// The session ended: the relay gives nothing more, the file holds every line.
    ended: bool,
}

/// The fanout of one session.
#[derive(Debug)]
pub(crate) struct Fanout {
    session: String,
    tail: Mutex<Tail>,
}

/// How a catch-up ended.
pub(crate) enum Joined {
    /// The client is on the live stream.
    Live,
    /// Lines after what it read are no longer in the ring: catch up from the file again.
    Behind,
}

impl Fanout {
    pub(crate) fn new(session: &str) -> Fanout {
        Fanout {
            session: session.to_string(),
            tail: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Tail> {
        self.tail.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Log line `seq`, as written: one frame to every subscriber that needs it, and to the ring.
    pub(crate) fn logged(&self, seq: u64, line: &str) {
        let frame = line_frame(&self.session, line);
        let mut tail = self.lock();
        tail.head = Some(seq);
        for sub in tail.subs.iter().filter(|s| seq >= s.from) {
            sub.conn.push(&frame);
        }
        tail.subs.retain(|s| !s.conn.is_gone());
        if tail.ring.len() == RING {
            tail.ring.pop_front();
        }
        tail.ring.push_back((seq, frame));
    }

    /// A live item, following log line `after_seq`: framed only when someone is subscribed.
    pub(crate) fn live(&self, after_seq: Option<u64>, event: &AgentEvent) {
        let tail = self.lock();
        if tail.subs.is_empty() {
            return;
        }
        let frame = frame(&Notice::SessionLive(SessionLive {
            session: self.session.clone(),
            after_seq: after_seq.unwrap_or(0),
            event: event.clone(),
        }));
        for sub in &tail.subs {
            sub.conn.push(&frame);
        }
    }

    /// The session ended: nothing more comes; a late join reads the (complete) file instead of
    /// the ring, which is let go.
    pub(crate) fn ended(&self) {
        let mut tail = self.lock();
        tail.ended = true;
        tail.ring = VecDeque::new();
    }

    /// Joins `conn`, caught up from the file through seq `after` (None: nothing read) for a
    /// subscription from `from`, to the stream: the lines the relay gave that it lacks come from
    /// the ring, the rest as the relay gives them. Replaces an earlier subscription of the client.
    pub(crate) fn join(&self, conn: &Conn, from: u64, after: Option<u64>) -> Joined {
        let mut tail = self.lock();
        let next = after.map_or(from, |a| (a + 1).max(from));
        let missing: Vec<Frame> = tail
            .ring
            .iter()
            .filter(|(s, _)| *s >= next)
            .map(|(_, f)| Arc::clone(f))
            .collect();
        let first = tail.ring.iter().find(|(s, _)| *s >= next).map(|(s, _)| *s);
        let reaches = match (tail.head, first) {
            // The relay has not reached `next` yet: it gives it (and what follows) later.
            (None, _) => true,
            (Some(head), _) if head < next => true,
            (Some(_), Some(first)) => first == next,
            (Some(_), None) => false,
        };
        if !reaches {
            return Joined::Behind;
        }
        if tail.ended {
            // Whatever the file lacked when it was read, the ring no longer has: read again.
            return if tail.head.is_some_and(|h| h >= next) {
                Joined::Behind
            } else {
                Joined::Live
            };
        }
        for frame in &missing {
            conn.push(frame);
        }
        tail.subs.retain(|s| s.conn.id != conn.id);
        tail.subs.push(Sub {
            conn: conn.clone(),
            from: next,
        });
        Joined::Live
    }

    /// Stops sending to `conn`.
    pub(crate) fn leave(&self, conn: u64) {
        self.lock().subs.retain(|s| s.conn.id != conn);
    }

    /// How many clients follow it now.
    #[cfg(test)]
    fn followers(&self) -> usize {
        self.lock().subs.len()
    }
}

/// The `session.event` frame of one log line, exactly as written.
fn line_frame(session: &str, line: &str) -> Frame {
    // The line is a log event exactly as `LogEvent` describes it: it goes out as written, so the
    // client can check the chain against the bytes the hash was taken of.
    let frame = format!(
        "{{\"jsonrpc\":\"{}\",\"method\":\"session.event\",\"params\":{{\"session\":{},\"event\":{line}}}}}",
        chock_protocol::rpc::JSONRPC,
        serde_json::Value::String(session.to_string())
    );
    Arc::from(frame)
}

/// The `session.event` frames of the log's lines with seq `>= from`, read from the file once: a
/// subscription's catch-up (any session), and the whole of what is sent for a session that does
/// not run in this daemon.
pub(crate) fn history(session: &str, dir: &Path, from: u64) -> Vec<(u64, Frame)> {
    let bytes = std::fs::read(dir.join(chock_log::LOG_FILE)).unwrap_or_default();
    let complete = match bytes.iter().rposition(|&b| b == b'\n') {
        Some(end) => &bytes[..end],
        None => return Vec::new(),
    };
    complete
        .split(|&b| b == b'\n')
        .filter_map(|line| {
            let SeqOnly { seq } = serde_json::from_slice::<SeqOnly>(line).ok()?;
            let line = std::str::from_utf8(line).ok()?;
            (seq >= from).then(|| (seq, line_frame(session, line)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hub::Conn;

    fn line(seq: u64) -> String {
        format!("{{\"seq\":{seq},\"kind\":\"note\"}}")
    }

    fn seqs(rx: &mut tokio::sync::mpsc::Receiver<Frame>) -> Vec<u64> {
        let mut out = Vec::new();
        while let Ok(frame) = rx.try_recv() {
            let v: serde_json::Value = serde_json::from_str(&frame).unwrap();
            out.push(v["params"]["event"]["seq"].as_u64().unwrap());
        }
        out
    }

    /// A client that read the file further than the relay has come is not sent those lines
    /// again; one that read less gets the rest from the ring; one whose gap the ring no longer
    /// holds is sent back to the file.
    #[test]
    fn a_join_fills_the_gap_from_the_ring_and_never_repeats() {
        let fanout = Fanout::new("s");
        for seq in 0..=4 {
            fanout.logged(seq, &line(seq));
        }
        let (ahead, mut ahead_rx, _k1) = Conn::new(1, 64);
        // Read 0..=6 from the file; the relay has given 0..=4 so far.
        assert!(matches!(fanout.join(&ahead, 0, Some(6)), Joined::Live));
        let (behind, mut behind_rx, _k2) = Conn::new(2, 64);
        assert!(matches!(fanout.join(&behind, 0, Some(2)), Joined::Live));
        for seq in 5..=7 {
            fanout.logged(seq, &line(seq));
        }
        assert_eq!(seqs(&mut ahead_rx), [7]);
        assert_eq!(seqs(&mut behind_rx), [3, 4, 5, 6, 7]);
        assert_eq!(fanout.followers(), 2);
        for seq in 8..8 + RING as u64 {
            fanout.logged(seq, &line(seq));
        }
        let (late, _late_rx, _k3) = Conn::new(3, 64);
        assert!(matches!(fanout.join(&late, 0, Some(3)), Joined::Behind));
    }
}
