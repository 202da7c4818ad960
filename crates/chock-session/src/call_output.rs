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

/// Takes a started call to be kept by another process (a session's keeper, docs/handover.md)
/// and follows it to its end: given as [`crate::CallOptions::keep`] for a background command,
/// so the command outlives this process and its output is recorded wherever the session goes.
pub trait Keep: Send + Sync {
    /// Hands `kept` (the started call `call_id`) over and follows it; resolves once the call has
    /// ended and its output was recorded, with how it ended and its output (as much as the
    /// capture keeps).
    fn follow(
        &self,
        call_id: &str,
        kept: chock_sandbox::KeptCall,
    ) -> chock_sandbox::BoxFuture<'static, std::io::Result<KeptEnd>>;
}

/// How a kept call ended, as its keeper said, and its output.
#[derive(Debug, Clone)]
pub struct KeptEnd {
    /// The command's status.
    pub status: chock_sandbox::ExitStatus,
    /// Its stdout (up to the capture limit).
    pub stdout: Vec<u8>,
    /// Its stderr (up to the capture limit).
    pub stderr: Vec<u8>,
    /// Whether the capture was cut.
    pub truncated: bool,
}

/// A [`Keep`] shared by a call's options.
#[derive(Clone)]
pub struct Keeping(pub Arc<dyn Keep>);

impl std::fmt::Debug for Keeping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Keeping(..)")
    }
}
