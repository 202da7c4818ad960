//! A running command's output, sent to clients while it runs as a live item, with every secret
//! the log knows redacted even when the reads cut it in two.

use std::sync::{Arc, Mutex};

use chock_protocol::live::ItemKind;

use crate::events::{AgentEvent, EventSink};

/// A running command's output as a live item: started at its first bytes, a delta per line, and
/// completed when the command ends.
///
/// The redaction funnel matches whole secrets, so text is only redacted and sent once a secret
/// cannot be cut in two by the next read: whole lines, or, for a line that grows past
/// [`LINE_HOLD`], all of it but a tail longer than any secret. The rest goes out at completion.
pub(crate) struct OutputItem {
    item: String,
    /// The turn the command runs in.
    turn: u32,
    call_id: String,
    log: chock_log::Log,
    sink: Arc<dyn EventSink>,
    state: Mutex<OutputState>,
}

/// How much of a line without its end is held back before part of it is sent; the part kept
/// back ([`SECRET_TAIL`] bytes) is longer than any key a session holds.
const LINE_HOLD: usize = 64 * 1024;
const SECRET_TAIL: usize = 4096;

#[derive(Default)]
struct OutputState {
    started: bool,
    completed: bool,
    /// Bytes read and not sent yet (an unfinished line, a cut UTF-8 sequence).
    pending: Vec<u8>,
}

impl OutputItem {
    /// An item named `item`, of the call `call_id`'s output in `turn`, redacted by `log`, sent
    /// to `sink`.
    pub(crate) fn new(
        item: String,
        turn: u32,
        call_id: &str,
        log: chock_log::Log,
        sink: Arc<dyn EventSink>,
    ) -> OutputItem {
        OutputItem {
            item,
            turn,
            call_id: call_id.to_string(),
            log,
            sink,
            state: Mutex::new(OutputState::default()),
        }
    }

    /// Sends `bytes` (whole lines or a safe prefix) as one redacted delta, starting the item.
    fn send(&self, state: &mut OutputState, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        if !state.started {
            state.started = true;
            self.sink.emit(&AgentEvent::ItemStarted {
                item: self.item.clone(),
                turn: self.turn,
                kind: ItemKind::CommandOutput {
                    call_id: self.call_id.clone(),
                },
            });
        }
        self.sink.emit(&AgentEvent::ItemDelta {
            item: self.item.clone(),
            text: self.log.redact(&String::from_utf8_lossy(bytes)),
        });
    }

    /// Sends what is held back and completes the item (once; later calls do nothing).
    pub(crate) fn complete(&self, ok: bool) {
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        if state.completed {
            return;
        }
        let rest = std::mem::take(&mut state.pending);
        self.send(&mut state, &rest);
        if state.started {
            state.completed = true;
            self.sink.emit(&AgentEvent::ItemCompleted {
                item: self.item.clone(),
                ok,
            });
        }
    }
}

impl OutputItem {
    /// Whether cutting `bytes` at `cut` would split a secret the log redacts: the two halves
    /// redacted apart differ from the whole redacted.
    fn cut_splits_a_secret(&self, bytes: &[u8], cut: usize) -> bool {
        let text = |b: &[u8]| self.log.redact(&String::from_utf8_lossy(b));
        text(bytes) != text(&bytes[..cut]) + &text(&bytes[cut..])
    }
}

impl chock_session::OutputSink for OutputItem {
    fn write(&self, _stream: chock_session::Stream, bytes: &[u8]) {
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        state.pending.extend_from_slice(bytes);
        let ready = match state.pending.iter().rposition(|b| *b == b'\n') {
            Some(newline) => newline + 1,
            None if state.pending.len() > LINE_HOLD => {
                // Cut on a character boundary, keeping a tail no secret is longer than (for a
                // secret still arriving), and never inside a secret that has arrived whole: a
                // cut there would redact neither half.
                let mut cut = state.pending.len() - SECRET_TAIL;
                loop {
                    while cut > 0 && (state.pending[cut] & 0xC0) == 0x80 {
                        cut -= 1;
                    }
                    if cut == 0 || !self.cut_splits_a_secret(&state.pending, cut) {
                        break cut;
                    }
                    cut = cut.saturating_sub(SECRET_TAIL);
                }
            }
            None => 0,
        };
        let rest = state.pending.split_off(ready);
        let out = std::mem::replace(&mut state.pending, rest);
        self.send(&mut state, &out);
    }
}

#[cfg(test)]
mod tests {
    use chock_session::OutputSink;

    use super::*;

    type Seen = Arc<Mutex<Vec<AgentEvent>>>;

    /// An output item of a log that redacts `secret`, and the events it sends (the directory
    /// holds the log).
    fn item_redacting(secret: &str) -> (OutputItem, Seen, tempfile::TempDir) {
        let root = tempfile::tempdir().unwrap();
        let log = chock_log::Log::create(root.path(), chock_log::SessionHeader::default()).unwrap();
        log.add_secret(secret).unwrap();
        let events: Seen = Arc::default();
        let seen = Arc::clone(&events);
        let sink: Arc<dyn EventSink> =
            Arc::new(move |e: &AgentEvent| seen.lock().unwrap().push(e.clone()));
        let item = OutputItem::new("c1.output".into(), 1, "c1", log, sink);
        (item, events, root)
    }

    /// The text of every delta sent.
    fn deltas(events: &Seen) -> Vec<String> {
        events
            .lock()
            .unwrap()
            .iter()
            .filter_map(|e| match e {
                AgentEvent::ItemDelta { text, .. } => Some(text.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_secret_cut_in_two_by_the_reads_is_still_redacted_in_the_live_output() {
        let (item, events, _root) = item_redacting("sk-live-0123456789");
        let out = chock_session::Stream::Stdout;
        item.write(out, b"first line\nkey=sk-live-0123");
        item.write(out, b"456789 and more\nno newline sk-live-");
        item.write(out, b"0123456789");
        item.complete(true);
        let text: String = deltas(&events).concat();
        assert!(!text.contains("sk-live-0123456789"), "{text}");
        assert_eq!(
            text,
            "first line\nkey=[REDACTED] and more\nno newline [REDACTED]"
        );
    }

    /// A line longer than the hold is sent in parts; a secret that arrived whole across where the
    /// first part would end moves the cut before it.
    #[test]
    fn a_long_line_is_never_cut_inside_a_secret_that_has_arrived() {
        let key = "sk-ant-api03-0123456789abcdefghijklmnopqrstuv";
        let (item, events, _root) = item_redacting(key);
        let out = chock_session::Stream::Stdout;
        item.write(out, &vec![b'x'; 62_000]);
        // With these 4,110 bytes the line passes the hold, and the first cut would fall 14 bytes
        // into the key.
        let mut chunk = key.as_bytes().to_vec();
        chunk.extend(vec![b'y'; 4_070]);
        item.write(out, &chunk);
        let deltas = deltas(&events);
        assert!(!deltas.is_empty(), "the long line was sent before its end");
        for delta in &deltas {
            assert!(!delta.contains(&key[..14]), "a part of the key went out");
        }
        item.complete(true);
    }
}
