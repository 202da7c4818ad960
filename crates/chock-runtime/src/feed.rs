//! One session's items to its subscribers and observers, from the session itself: the log's
//! writer tells the feed of each line as it is written ([`chock_log::LineTap`]) and the runtime's
//! event sink of each live item, so nobody reads the file of a session this process owns — except
//! a subscription's catch-up, which reads the lines written before it joined, once.
//!
//! Order: a line is pushed under the writer's lock after it is in the file, a live item when it
//! is emitted, both under the feed's lock, so every subscriber sees them in the order they
//! happened. Under the writer's lock a line is only handed on (an `Arc` of its text): it is
//! parsed into the view later, by whoever next needs the view or emits a live item, off that
//! lock (or, past [`UNFOLDED_MAX`] lines waiting, by the line that would exceed it).
//!
//! Each subscriber's queue holds at most [`SUBSCRIBER_QUEUE`] items. One that falls a whole
//! queue behind gets [`Item::Lagged`] in the slot kept for it, naming the first line it missed,
//! and is dropped: a slow reader costs the session a bounded amount of memory, and catches up
//! from the file with `subscribe(from_seq)`. A subscription registers under the same lock and notes the last line pushed before
//! it; the file holds every line up to that one, so its catch-up joins the live stream with no
//! gap and no repeat.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use chock_log::{Event, LineTap, Log};
use chock_protocol::rpc::SessionState;
use chock_protocol::view::SessionView;
use chock_tools::events::{AgentEvent, EventSink};
use tokio::sync::mpsc::{Sender, channel};

use crate::item::{Item, Logged, TaskOutcome};
use crate::subscription::{CatchUp, Subscription};

/// Sees every item of a session synchronously, in order, on the thread that made it: for a
/// renderer that shares a terminal with a prompt asked on that same thread (what it printed is on
/// the screen before the prompt is). It must be quick and must not act on the session.
pub trait Observer: Send + Sync {
    /// One item.
    fn item(&self, item: &Item);
}

/// Where the feed of a session stands.
#[derive(Default)]
struct State {
    subs: Vec<Sender<Item>>,
    /// Lines handed on but not yet folded into `view`, oldest first.
    unfolded: Vec<Arc<str>>,
    observers: Vec<Arc<dyn Observer>>,
    /// The seq of the last line pushed (or read at binding).
    head: Option<u64>,
    view: SessionView,
    session: Option<SessionState>,
    /// The session ended: subscriptions get their catch-up and end.
    closed: bool,
    /// How many tasks have ended, and how the last did: for a subscriber that lagged past it.
    last_task: Option<(u64, TaskOutcome)>,
    /// The idle session is being let go for another process: no task starts here any more.
    letting_go: bool,
}

/// How many items a subscriber's queue holds (one more slot is kept for [`Item::Lagged`]).
pub const SUBSCRIBER_QUEUE: usize = 4096;

/// How many lines may wait to be folded into the view before the next one is folded at once.
pub(crate) const UNFOLDED_MAX: usize = 4096;

/// The feed of one session.
#[derive(Default)]
pub(crate) struct Feed {
    state: Mutex<State>,
    /// The session's log file, once the session exists.
    log_file: OnceLock<PathBuf>,
}

impl std::fmt::Debug for Feed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Feed")
            .field("log_file", &self.log_file.get())
            .finish_non_exhaustive()
    }
}

impl Feed {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds an observer (before the session is built, to see everything).
    pub(crate) fn observe(&self, observer: Arc<dyn Observer>) {
        self.lock().observers.push(observer);
    }

    /// Follows `log` from now on: installs the feed as its tap and folds the lines already
    /// written into the view. Holds the feed's lock throughout, so a line written meanwhile
    /// waits and is folded after them.
    pub(crate) fn bind(self: &Arc<Self>, log: &Log) -> Result<(), chock_log::LogError> {
        let mut state = self.lock();
        let head = log.tap(Arc::clone(self) as Arc<dyn LineTap>)?;
        let _ = self.log_file.set(log.dir().join(chock_log::LOG_FILE));
        let events = chock_log::read_events(log.dir())?;
        for event in events.iter().filter(|e| head.is_some_and(|h| e.seq <= h)) {
            state.view.apply(event.at(), event.payload().ok().as_ref());
        }
        state.head = head;
        state.session = Some(SessionState::Idle);
        Ok(())
    }

    fn push(state: &mut State, item: &Item) {
        for observer in &state.observers {
            observer.item(item);
        }
        // The first line a lagging subscriber misses: this one, or the next.
        let missed = match item {
            Item::Logged(l) => l.seq,
            _ => state.head.map_or(0, |h| h + 1),
        };
        state.subs.retain(|sub| {
            if sub.is_closed() {
                return false;
            }
            if sub.capacity() > 1 {
                return sub.try_send(item.clone()).is_ok();
            }
            // The last slot is the lag notice's; the subscriber is dropped after it.
            let _ = sub.try_send(Item::Lagged { from_seq: missed });
            false
        });
    }

    /// Folds the lines waiting into the view (parsing each), off the writer's lock.
    fn fold(state: &mut State) {
        for line in std::mem::take(&mut state.unfolded) {
            if let Ok(event) = serde_json::from_str::<Event>(&line) {
                state.view.apply(event.at(), event.payload().ok().as_ref());
            }
        }
    }

    /// A subscription from seq `from`: the lines before it joined are read from the file by its
    /// first `next`, then the live stream.
    pub(crate) fn subscribe(&self, from: u64) -> Subscription {
        let (tx, rx) = channel(SUBSCRIBER_QUEUE + 1);
        let mut state = self.lock();
        let catch_up = match (state.head, self.log_file.get()) {
            (Some(head), Some(file)) if head >= from => Some(CatchUp {
                file: file.clone(),
                from,
                through: head,
            }),
            _ => None,
        };
        if !state.closed {
            state.subs.push(tx);
        }
        Subscription::new(catch_up, from, rx)
    }

    /// The view folded from every line so far, the state, and the last seq.
    pub(crate) fn snapshot(&self) -> (SessionView, SessionState, Option<u64>) {
        let mut state = self.lock();
        Self::fold(&mut state);
        (
            state.view.clone(),
            state.session.unwrap_or(SessionState::Idle),
            state.head,
        )
    }

    /// How many tasks have ended so far, and how the last one did.
    pub(crate) fn last_task(&self) -> Option<(u64, TaskOutcome)> {
        self.lock().last_task.clone()
    }

    /// The session's state now.
    pub(crate) fn state(&self) -> SessionState {
        self.lock().session.unwrap_or(SessionState::Idle)
    }

    /// Moves the session from idle to working; otherwise returns the state it is in (an idle
    /// session being let go counts as ended).
    pub(crate) fn start_working(&self) -> Result<(), SessionState> {
        let mut state = self.lock();
        if state.letting_go {
            return Err(SessionState::Ended);
        }
        match state.session.unwrap_or(SessionState::Idle) {
            SessionState::Idle => {
                state.session = Some(SessionState::Working);
                Self::push(&mut state, &Item::State(SessionState::Working));
                Ok(())
            }
            other => Err(other),
        }
    }

    /// Holds an idle session for a handover: from now on no task starts ([`Feed::start_working`]
    /// refuses), so the loop can let go with nothing running. Returns the state it is in
    /// otherwise (working, ended, or let go already).
    pub(crate) fn hold_for_handover(&self) -> Result<(), SessionState> {
        let mut state = self.lock();
        if state.letting_go {
            return Err(SessionState::Ended);
        }
        match state.session.unwrap_or(SessionState::Idle) {
            SessionState::Idle => {
                state.letting_go = true;
                Ok(())
            }
            other => Err(other),
        }
    }

    /// A task ended: its outcome, then the state it leaves the session in.
    pub(crate) fn task_ended(&self, outcome: TaskOutcome) {
        let mut state = self.lock();
        Self::fold(&mut state);
        let next = match outcome {
            TaskOutcome::Ended(_) => SessionState::Idle,
            TaskOutcome::Failed(_) | TaskOutcome::HandedOver => SessionState::Ended,
        };
        let count = state.last_task.as_ref().map_or(0, |(n, _)| *n) + 1;
        state.last_task = Some((count, outcome.clone()));
        Self::push(&mut state, &Item::TaskEnded(outcome));
        if state.session != Some(SessionState::Ended) {
            state.session = Some(next);
            Self::push(&mut state, &Item::State(next));
        }
        if next == SessionState::Ended {
            Self::close(&mut state);
        }
    }

    /// The session ended: subscribers are told, and their streams end.
    pub(crate) fn ended(&self) {
        let mut state = self.lock();
        if state.closed {
            return;
        }
        state.session = Some(SessionState::Ended);
        Self::push(&mut state, &Item::State(SessionState::Ended));
        Self::close(&mut state);
    }

    fn close(state: &mut State) {
        state.closed = true;
        state.subs.clear();
    }
}

impl LineTap for Feed {
    fn line(&self, seq: u64, line: &str) {
        let mut state = self.lock();
        state.head = Some(seq);
        if state.unfolded.len() >= UNFOLDED_MAX {
            Self::fold(&mut state);
        }
        let line: Arc<str> = Arc::from(line);
        state.unfolded.push(Arc::clone(&line));
        Self::push(&mut state, &Item::Logged(Logged { seq, line }));
    }
}

/// The runtime's event sink: each live item goes through the feed.
#[derive(Debug)]
pub(crate) struct FeedSink(pub(crate) Arc<Feed>);

impl EventSink for FeedSink {
    fn emit(&self, event: &AgentEvent) {
        self.0.live(event);
    }
}

impl Feed {
    /// A live item, after the lines written before it.
    pub(crate) fn live(&self, event: &AgentEvent) {
        let mut state = self.lock();
        Self::fold(&mut state);
        if state.subs.is_empty() && state.observers.is_empty() {
            return;
        }
        let item = Item::Live {
            after_seq: state.head,
            event: Arc::new(event.clone()),
        };
        Self::push(&mut state, &item);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chock_protocol::log::TurnStart;
    use std::time::Duration;

    fn turn(log: &Log, n: u32) {
        log.record(
            None,
            TurnStart {
                turn: n,
                input: None,
            },
        )
        .unwrap();
    }

    /// Reads items until `want` log lines came or the stream ends or stays silent.
    async fn read(sub: &mut Subscription, want: usize) -> (Vec<u64>, Option<u64>) {
        let mut seqs = Vec::new();
        let mut lagged = None;
        while seqs.len() < want {
            match tokio::time::timeout(Duration::from_secs(5), sub.next()).await {
                Ok(Some(Item::Logged(l))) => seqs.push(l.seq),
                Ok(Some(Item::Lagged { from_seq })) => lagged = Some(from_seq),
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => break,
            }
        }
        (seqs, lagged)
    }

    #[test]
    fn a_subscriber_that_never_reads_is_bounded_told_to_catch_up_and_misses_nothing_by_seq() {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::create(dir.path(), chock_log::SessionHeader::default()).unwrap();
        let feed = Arc::new(Feed::default());
        feed.bind(&log).unwrap();
        let mut slow = feed.subscribe(0);
        let lines = u32::try_from(SUBSCRIBER_QUEUE).unwrap() + 500;
        for n in 1..=lines {
            turn(&log, n);
        }
        // The queue never held more than its bound: the writer was not held up and the slow
        // subscriber was dropped from the feed.
        assert!(
            feed.lock().subs.is_empty(),
            "the slow subscriber was dropped"
        );
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            // Line 0 from the file, then the queue's lines, then the lag notice, then the end.
            let (first, lagged) = read(&mut slow, usize::MAX).await;
            assert_eq!(first.len(), 1 + SUBSCRIBER_QUEUE, "bounded by the queue");
            let from = lagged.expect("a typed lag item");
            assert_eq!(from, *first.last().unwrap() + 1);
            assert!(
                slow.next().await.is_none(),
                "the stream ended after the lag item"
            );
            // Catching up from the log by seq gives every later line, once.
            let mut again = feed.subscribe(from);
            let rest = u64::from(lines) + 1 - from;
            let (second, none) = read(&mut again, usize::try_from(rest).unwrap()).await;
            assert_eq!(none, None);
            let all: Vec<u64> = first.iter().chain(&second).copied().collect();
            assert_eq!(all, (0..=u64::from(lines)).collect::<Vec<_>>());
        });
        // The view was folded from every line, off the writer's lock.
        let (_, _, head) = feed.snapshot();
        assert_eq!(head, Some(u64::from(lines)));
        assert!(feed.lock().unfolded.is_empty());
    }
}
