//! One session's items to its subscribers and observers, from the session itself: the log's
//! writer tells the feed of each line as it is written ([`chock_log::LineTap`]) and the runtime's
//! event sink of each live item, so nobody reads the file of a session this process owns — except
//! a subscription's catch-up, which reads the lines written before it joined, once.
//!
//! Order: a line is pushed under the writer's lock after it is in the file, a live item when it
//! is emitted, both under the feed's lock, so every subscriber sees them in the order they
//! happened. A subscription registers under the same lock and notes the last line pushed before
//! it; the file holds every line up to that one, so its catch-up joins the live stream with no
//! gap and no repeat.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use chock_log::{Event, LineTap, Log};
use chock_protocol::rpc::SessionState;
use chock_protocol::view::SessionView;
use chock_tools::events::{AgentEvent, EventSink};
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};

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
    subs: Vec<UnboundedSender<Item>>,
    observers: Vec<Arc<dyn Observer>>,
    /// The seq of the last line pushed (or read at binding).
    head: Option<u64>,
    view: SessionView,
    session: Option<SessionState>,
    /// The session ended: subscriptions get their catch-up and end.
    closed: bool,
}

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
        state.subs.retain(|sub| sub.send(item.clone()).is_ok());
    }

    /// A subscription from seq `from`: the lines before it joined are read from the file by its
    /// first `next`, then the live stream.
    pub(crate) fn subscribe(&self, from: u64) -> Subscription {
        let (tx, rx) = unbounded_channel();
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
        let state = self.lock();
        (
            state.view.clone(),
            state.session.unwrap_or(SessionState::Idle),
            state.head,
        )
    }

    /// The session's state now.
    pub(crate) fn state(&self) -> SessionState {
        self.lock().session.unwrap_or(SessionState::Idle)
    }

    /// Moves the session from idle to working; otherwise returns the state it is in.
    pub(crate) fn start_working(&self) -> Result<(), SessionState> {
        let mut state = self.lock();
        match state.session.unwrap_or(SessionState::Idle) {
            SessionState::Idle => {
                state.session = Some(SessionState::Working);
                Self::push(&mut state, &Item::State(SessionState::Working));
                Ok(())
            }
            other => Err(other),
        }
    }

    /// A task ended: its outcome, then the state it leaves the session in.
    pub(crate) fn task_ended(&self, outcome: TaskOutcome) {
        let mut state = self.lock();
        let next = match outcome {
            TaskOutcome::Ended(_) => SessionState::Idle,
            TaskOutcome::Failed(_) => SessionState::Ended,
        };
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
        if let Ok(event) = serde_json::from_str::<Event>(line) {
            state.view.apply(event.at(), event.payload().ok().as_ref());
        }
        Self::push(
            &mut state,
            &Item::Logged(Logged {
                seq,
                line: Arc::from(line),
            }),
        );
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
