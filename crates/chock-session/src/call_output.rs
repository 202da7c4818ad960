//! Where a call's output goes: captured, streamed to this process's own stdout and stderr, or
//! handed to a sink (`chock exec`'s terminal hold), and the copy loop that reads each stream.

use std::io::{Read, Write};
use std::sync::Arc;

/// Where the command's output goes.
#[derive(Debug, Clone)]
pub enum Output {
    /// Captured (up to the limit) and returned in the result.
    Capture,
    /// Copied to this process's stdout and stderr as it comes, and captured too.
    Stream,
    /// Handed to this sink as it comes (in the order it is read), and captured too: `chock exec`
    /// holds a command's output back while a question about the command is on the terminal.
    StreamTo(StreamSink),
}

/// Which of the command's streams some output came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Its standard output.
    Stdout,
    /// Its standard error.
    Stderr,
}

/// Takes a streamed command's output ([`Output::StreamTo`]).
pub trait OutputSink: Send + Sync {
    /// `bytes` the command wrote on `stream`. It may block (the command then waits on a full pipe).
    fn write(&self, stream: Stream, bytes: &[u8]);
}

/// An [`OutputSink`] shared by the call's two output threads.
#[derive(Clone)]
pub struct StreamSink(pub Arc<dyn OutputSink>);

impl std::fmt::Debug for StreamSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StreamSink(..)")
    }
}

/// One stream's side of a [`StreamSink`], as the writer the output thread copies into.
pub(crate) struct SinkWriter {
    pub(crate) sink: Arc<dyn OutputSink>,
    pub(crate) stream: Stream,
}

impl Write for SinkWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.sink.write(self.stream, buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Reads `from` to the end, keeping up to `limit` bytes and optionally copying everything to `to`.
pub(crate) fn pump(
    mut from: std::fs::File,
    limit: usize,
    mut to: Option<Box<dyn Write + Send>>,
) -> (Vec<u8>, bool) {
    let mut kept = Vec::new();
    let mut truncated = false;
    let mut buf = [0u8; 8192];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if let Some(w) = to.as_mut() {
            let _ = w.write_all(&buf[..n]);
            let _ = w.flush();
        }
        let room = limit.saturating_sub(kept.len());
        kept.extend_from_slice(&buf[..n.min(room)]);
        truncated |= n > room;
    }
    (kept, truncated)
}
