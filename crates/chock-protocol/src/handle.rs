//! What a session's handle speaks, whoever holds it: the items a subscriber receives, what an
//! operation did, and a session as it stands.
//!
//! The session runtime's in-process handle (`chock_runtime::SessionHandle`) and the daemon's
//! client (`chock_client::RemoteSession`) both give these types, so a front end written against
//! one reads the other the same way. The actor that makes them stays in the runtime; only the
//! shapes are here, so a client needs nothing but this crate to read them.

use std::sync::Arc;

use crate::live::{AgentEvent, Ended, Summary};
use crate::rpc::{Applied, ForkMade, SessionState};
use crate::view::SessionView;

/// One thing that happened in a session, as its subscribers see it.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// A line of the session's log, exactly as written (the bytes its hash was taken of).
    Logged(Logged),
    /// A live item: streamed text, a running command's output, a started call. Never stored; it
    /// follows the log line `after_seq` (None: before any line a subscriber saw).
    Live {
        /// The seq of the last log line written before it.
        after_seq: Option<u64>,
        /// The item.
        event: Arc<AgentEvent>,
    },
    /// The session's state changed (working, idle, ended).
    State(SessionState),
    /// A task (or follow-up) ended: how, or the error that ended the session with it. Sent
    /// before the [`Item::State`] it leaves the session in; a client that only needs to know
    /// that the task is over waits for that state, which every holder of a handle sends.
    TaskEnded(TaskOutcome),
    /// The subscriber fell behind by a whole queue: the session went on without it, and this is
    /// its stream's last item. Every log line before `from_seq` was given; a new subscription
    /// from `from_seq` gives every later line once (live items in between are lost: they are
    /// never stored).
    Lagged {
        /// The first log line this subscription did not give.
        from_seq: u64,
    },
}

/// A log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Logged {
    /// Its seq.
    pub seq: u64,
    /// Its JSON text, no newline.
    pub line: Arc<str>,
}

/// How a task ended.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskOutcome {
    /// It ended, and so (the session goes on: it waits for a follow-up).
    Ended(Ended),
    /// The loop failed: the session ended with this error (its `session.end` says so).
    Failed(String),
    /// This process let go of the session for another to take it up (`chock detach`): it stopped
    /// at a turn boundary, or at once with a question open, and wrote no `session.end`.
    HandedOver,
}

/// What an operation did.
#[derive(Debug, Clone, PartialEq)]
// A return value, never stored in bulk: boxing the summary would only cost its callers a deref.
#[allow(clippy::large_enum_variant)]
pub enum Reply {
    /// The input was taken: the session works on it (its end comes as [`Item::TaskEnded`] and
    /// [`Item::State`]).
    Accepted,
    /// The current turn was told to stop (nothing happens when idle).
    Interrupted,
    /// The answer was taken (the first valid answer wins; the question is resolved).
    Answered,
    /// The policy was narrowed.
    Restricted,
    /// The apply or undo was decided, logged and written.
    Applied(Applied),
    /// The fork was made.
    Forked(ForkMade),
    /// The session ended.
    Ended(Summary),
}

/// A session as it stands.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// Its log folded: title, cost, turns, open questions, how it ended.
    pub view: SessionView,
    /// Working, idle or ended.
    pub state: SessionState,
    /// The seq of its last log line.
    pub head: Option<u64>,
}
