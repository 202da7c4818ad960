//! Server-sent events framing (the WHATWG `text/event-stream` rules), fed with arbitrary byte chunks.
//!
//! Lines end in `\n`, `\r\n` or a lone `\r`; `:` lines are comments; `data:` lines of one event are joined
//! with `\n`; a blank line dispatches. Bytes are buffered until a line is complete, so an event split
//! anywhere across network reads (even inside a UTF-8 sequence) decodes the same as one sent whole.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` name, or empty when the stream gave none (Chat Completions).
    pub event: String,
    /// The joined `data:` lines.
    pub data: String,
}

/// The largest event (its lines and joined data) the parser holds. Real events are kilobytes; a server
/// that streams one endless line (a misconfigured base URL serving a file, a broken proxy) must not
/// grow the host process without bound.
pub const MAX_EVENT_BYTES: usize = 16 << 20;

/// An incremental SSE parser.
#[derive(Debug, Default)]
pub struct SseParser {
    /// Set once an event outgrew [`MAX_EVENT_BYTES`]; from then on nothing more is buffered.
    overflowed: bool,
    line: Vec<u8>,
    /// The previous chunk ended in `\r`: a `\n` starting the next chunk belongs to it.
    after_cr: bool,
    started: bool,
    event: String,
    data: String,
    has_data: bool,
}

impl SseParser {
    /// A parser at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds bytes; returns the events completed by them, in order.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        let mut out = Vec::new();
        if self.overflowed {
            return out;
        }
        for &byte in bytes {
            if self.after_cr {
                self.after_cr = false;
                if byte == b'\n' {
                    continue;
                }
            }
            match byte {
                b'\n' => self.end_line(&mut out),
                b'\r' => {
                    self.after_cr = true;
                    self.end_line(&mut out);
                }
                other => {
                    if self.line.len() + self.data.len() >= MAX_EVENT_BYTES {
                        self.overflowed = true;
                        return out;
                    }
                    self.line.push(other);
                }
            }
        }
        out
    }

    /// True once an event grew past [`MAX_EVENT_BYTES`]: the stream cannot be read, and the caller
    /// should end it with an error (the parser has stopped buffering).
    pub fn overflowed(&self) -> bool {
        self.overflowed
    }

    /// Ends the stream: an event whose lines were all complete but which lacked its closing blank line is
    /// still dispatched. An unterminated last line is dropped, since the connection may have cut it short.
    pub fn finish(&mut self) -> Option<SseEvent> {
        self.line.clear();
        self.take_event()
    }

    fn end_line(&mut self, out: &mut Vec<SseEvent>) {
        let mut line = std::mem::take(&mut self.line);
        if !self.started {
            self.started = true;
            // A byte-order mark may open the stream.
            if line.starts_with(&[0xEF, 0xBB, 0xBF]) {
                line.drain(..3);
            }
        }
        if line.is_empty() {
            if let Some(event) = self.take_event() {
                out.push(event);
            }
            return;
        }
        let line = String::from_utf8_lossy(&line);
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line.as_ref(), ""),
        };
        match field {
            "event" => value.clone_into(&mut self.event),
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            // `id` and `retry` matter only to browsers reconnecting; unknown fields are ignored by the spec.
            _ => {}
        }
    }

    fn take_event(&mut self) -> Option<SseEvent> {
        let event = std::mem::take(&mut self.event);
        if !std::mem::take(&mut self.has_data) {
            return None;
        }
        Some(SseEvent {
            event,
            data: std::mem::take(&mut self.data),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(event: &str, data: &str) -> SseEvent {
        SseEvent {
            event: event.to_owned(),
            data: data.to_owned(),
        }
    }

    fn parse_in_pieces(input: &[u8], piece: usize) -> Vec<SseEvent> {
        let mut parser = SseParser::new();
        let mut out = Vec::new();
        for chunk in input.chunks(piece) {
            out.extend(parser.feed(chunk));
        }
        out.extend(parser.finish());
        out
    }

    #[test]
    fn line_endings_comments_and_multiline_data() {
        let input = b"\xEF\xBB\xBF: hello comment\r\nevent: a\r\ndata: one\r\ndata:two\r\n\r\nevent:b\rdata: x\r\rdata\n\n";
        let expected = vec![ev("a", "one\ntwo"), ev("b", "x"), ev("", "")];
        for piece in 1..=input.len() {
            assert_eq!(
                parse_in_pieces(input, piece),
                expected,
                "piece size {piece}"
            );
        }
    }

    #[test]
    fn event_without_data_is_not_dispatched_and_name_resets() {
        let out = parse_in_pieces(b"event: ping\n\ndata: {}\n\n", 3);
        assert_eq!(out, vec![ev("", "{}")]);
    }

    #[test]
    fn last_event_without_blank_line_is_flushed_but_cut_line_is_not() {
        assert_eq!(
            parse_in_pieces(b"data: [DONE]\n", 4),
            vec![ev("", "[DONE]")]
        );
        assert_eq!(
            parse_in_pieces(b"data: {\"a\":1}\n\ndata: {\"tru", 5),
            vec![ev("", "{\"a\":1}")]
        );
    }

    #[test]
    fn an_endless_line_stops_at_the_cap_instead_of_growing() {
        let mut parser = SseParser::new();
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..20 {
            assert!(parser.feed(&chunk).is_empty());
        }
        assert!(parser.overflowed());
        assert!(parser.line.len() <= MAX_EVENT_BYTES);
        assert_eq!(parser.finish(), None);
    }

    #[test]
    fn multibyte_split_across_chunks() {
        let input = "data: 18°C ☀\n\n".as_bytes();
        assert_eq!(parse_in_pieces(input, 1), vec![ev("", "18°C ☀")]);
    }
}
