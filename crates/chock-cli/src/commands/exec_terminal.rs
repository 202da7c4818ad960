//! The terminal of `chock exec`: where the command's output is copied and where its questions are
//! put (the command's own act, and its asked connections), through the one terminal prompt
//! (`chock_terminal`).
//!
//! The command's output is raw, so it could redraw a question shown beside it (a carriage return and
//! an erase-line, an unterminated OSC string, concealed text, the alternate screen, a scroll region)
//! and a person would approve a host other than the one they read. So:
//!
//! - while a question is open, the command's output is **held back**: it is kept in memory (in the
//!   order it came, stdout and stderr interleaved as read, up to [`HOLD_LIMIT`] bytes; beyond that
//!   the command waits on its full pipe) and written out only after the answer;
//! - every question is drawn after `PROMPT_RESET` (it ends any sequence in progress and resets the
//!   terminal state that changes how text lands; see its documentation);
//! - everything the question quotes is escaped by the prompt itself;
//! - input typed before the question was drawn is discarded, so an answer typed to a fake question
//!   the command printed earlier is not read as the answer to the real one.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufReader, Write};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use chock_agent::approval::{Answer, Question};
use chock_session::{OutputSink, Stream, StreamSink};
use chock_terminal::TerminalAnswerer;

/// How much of the command's output is kept while a question is open; past it the command waits.
pub(crate) const HOLD_LIMIT: usize = 1 << 20;

/// `/dev/tty` as the prompt's sink: each write first discards what was typed and not yet read, so
/// only what the person types after seeing the question answers it.
struct Tty(File);

impl Write for Tty {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let _ = rustix::termios::tcflush(&self.0, rustix::termios::QueueSelector::IFlush);
        self.0.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// What the command wrote while a question was open.
#[derive(Default)]
struct Held {
    /// Questions open now (connections may ask at once; they are put one after another).
    open: usize,
    chunks: VecDeque<(Stream, Vec<u8>)>,
    bytes: usize,
}

/// The command's output on its way to this process's stdout and stderr, held while a question is open.
pub(crate) struct OutputHold {
    held: Mutex<Held>,
    released: Condvar,
    out: fn(Stream, &[u8]),
}

impl Default for OutputHold {
    fn default() -> Self {
        Self::to(write_out)
    }
}

fn write_out(stream: Stream, bytes: &[u8]) {
    crate::say::passthrough(matches!(stream, Stream::Stderr), bytes);
}

impl OutputHold {
    /// A hold whose output goes to `out` (this process's stdout and stderr, or a test's record).
    fn to(out: fn(Stream, &[u8])) -> Self {
        Self {
            held: Mutex::default(),
            released: Condvar::new(),
            out,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Holds the output back until the returned guard is dropped. When this returns, no write of
    /// the command's output is in progress, so nothing of it lands after the question is drawn.
    pub(crate) fn hold(&self) -> HoldGuard<'_> {
        self.lock().open += 1;
        HoldGuard(self)
    }
}

/// An open question; dropping it releases what was held once no question is open.
pub(crate) struct HoldGuard<'a>(&'a OutputHold);

impl Drop for HoldGuard<'_> {
    fn drop(&mut self) {
        let mut held = self.0.lock();
        held.open -= 1;
        if held.open == 0 {
            while let Some((stream, bytes)) = held.chunks.pop_front() {
                (self.0.out)(stream, &bytes);
            }
            held.bytes = 0;
            self.0.released.notify_all();
        }
    }
}

impl OutputSink for OutputHold {
    fn write(&self, stream: Stream, bytes: &[u8]) {
        let mut held = self.lock();
        loop {
            if held.open == 0 {
                // Written under the lock: a question cannot be drawn in the middle of it.
                (self.out)(stream, bytes);
                return;
            }
            if held.bytes == 0 || held.bytes + bytes.len() <= HOLD_LIMIT {
                held.bytes += bytes.len();
                held.chunks.push_back((stream, bytes.to_vec()));
                return;
            }
            held = self
                .released
                .wait(held)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// The person at `chock exec`'s terminal.
pub(crate) struct ExecTerminal {
    prompt: TerminalAnswerer,
    output: Arc<OutputHold>,
}

impl std::fmt::Debug for ExecTerminal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ExecTerminal")
    }
}

impl ExecTerminal {
    /// The controlling terminal, or `None` when there is none (then nobody answers).
    pub(crate) fn open() -> Option<Self> {
        let tty = File::options()
            .read(true)
            .write(true)
            .open("/dev/tty")
            .ok()?;
        let input = BufReader::new(tty.try_clone().ok()?);
        Some(Self {
            prompt: TerminalAnswerer::new(Box::new(input), Box::new(Tty(tty))).over_raw_output(),
            output: Arc::default(),
        })
    }

    /// Where the call streams the command's output.
    pub(crate) fn output(&self) -> StreamSink {
        StreamSink(Arc::clone(&self.output) as Arc<dyn OutputSink>)
    }

    /// Puts `question` with the command's output held back; `None` when nobody answered.
    pub(crate) fn ask(&self, question: &Question) -> Option<Answer> {
        let _held = self.output.hold();
        self.prompt.ask_now(question)
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;

    thread_local! {
        static WRITTEN: RefCell<Vec<(Stream, Vec<u8>)>> = const { RefCell::new(Vec::new()) };
    }

    fn record(stream: Stream, bytes: &[u8]) {
        WRITTEN.with(|w| w.borrow_mut().push((stream, bytes.to_vec())));
    }

    fn written() -> Vec<(Stream, Vec<u8>)> {
        WRITTEN.with(|w| w.borrow().clone())
    }

    #[test]
    fn output_written_while_a_question_is_open_waits_for_the_answer_in_order() {
        let hold = OutputHold::to(record);
        hold.write(Stream::Stdout, b"before ");
        let guard = hold.hold();
        hold.write(Stream::Stdout, b"one ");
        hold.write(Stream::Stderr, b"two ");
        assert_eq!(written(), vec![(Stream::Stdout, b"before ".to_vec())]);
        let second = hold.hold();
        drop(guard);
        assert_eq!(written().len(), 1, "another question is still open");
        drop(second);
        assert_eq!(
            written(),
            vec![
                (Stream::Stdout, b"before ".to_vec()),
                (Stream::Stdout, b"one ".to_vec()),
                (Stream::Stderr, b"two ".to_vec()),
            ]
        );
        hold.write(Stream::Stdout, b"after");
        assert_eq!(written().len(), 4);
    }

    #[test]
    fn past_the_limit_the_command_waits_until_the_answer() {
        fn discard(_: Stream, _: &[u8]) {}
        let hold = Arc::new(OutputHold::to(discard));
        let guard = hold.hold();
        hold.write(Stream::Stdout, &vec![b'x'; HOLD_LIMIT]);
        let writer = {
            let hold = Arc::clone(&hold);
            std::thread::spawn(move || hold.write(Stream::Stdout, b"more"))
        };
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(!writer.is_finished(), "the write past the limit waits");
        assert_eq!(hold.lock().bytes, HOLD_LIMIT);
        drop(guard);
        writer
            .join()
            .expect("the write goes through after the answer");
        assert_eq!(hold.lock().bytes, 0);
    }
}
