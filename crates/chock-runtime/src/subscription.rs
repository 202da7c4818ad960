//! A subscription to one session: the log's lines from a seq, read from the file once, then the
//! live stream, with no gap and no repeat ([`crate::feed`] says why).

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::mpsc::Receiver;

use crate::item::{Item, Logged};

/// The lines a subscription reads from the file before it goes live.
#[derive(Debug)]
pub(crate) struct CatchUp {
    /// `log.jsonl`.
    pub(crate) file: PathBuf,
    /// The first seq wanted.
    pub(crate) from: u64,
    /// The last line pushed before the subscription joined.
    pub(crate) through: u64,
}

/// A stream of a session's items from a seq on. It ends when the session has ended (after the
/// item saying so), or after [`Item::Lagged`] when it fell a whole queue behind.
#[derive(Debug)]
pub struct Subscription {
    catch_up: Option<CatchUp>,
    backlog: VecDeque<Item>,
    from: u64,
    rx: Receiver<Item>,
}

impl Subscription {
    pub(crate) fn new(catch_up: Option<CatchUp>, from: u64, rx: Receiver<Item>) -> Self {
        Subscription {
            catch_up,
            backlog: VecDeque::new(),
            from,
            rx,
        }
    }

    /// The next item; None once the session has ended and everything before was given.
    pub async fn next(&mut self) -> Option<Item> {
        if let Some(catch_up) = self.catch_up.take() {
            let read = tokio::task::spawn_blocking(move || read_lines(&catch_up)).await;
            self.backlog
                .extend(read.unwrap_or_default().into_iter().map(Item::Logged));
        }
        if let Some(item) = self.backlog.pop_front() {
            return Some(item);
        }
        loop {
            match self.rx.recv().await? {
                Item::Logged(l) if l.seq < self.from => continue,
                item => return Some(item),
            }
        }
    }
}

/// The complete lines of the file with seq in `from..=through`.
fn read_lines(catch_up: &CatchUp) -> Vec<Logged> {
    #[derive(serde::Deserialize)]
    struct SeqOnly {
        seq: u64,
    }
    let bytes = std::fs::read(&catch_up.file).unwrap_or_default();
    let Some(end) = bytes.iter().rposition(|&b| b == b'\n') else {
        return Vec::new();
    };
    bytes[..end]
        .split(|&b| b == b'\n')
        .filter_map(|line| {
            let seq = serde_json::from_slice::<SeqOnly>(line).ok()?.seq;
            let text = std::str::from_utf8(line).ok()?;
            (catch_up.from..=catch_up.through)
                .contains(&seq)
                .then(|| Logged {
                    seq,
                    line: Arc::from(text),
                })
        })
        .collect()
}
