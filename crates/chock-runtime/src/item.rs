//! What a subscriber of a session receives, in order: the log's lines, the live items between
//! them, and the session's state as it changes.

use std::sync::Arc;

use chock_protocol::live::{AgentEvent, Ended};
use chock_protocol::rpc::SessionState;

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
    /// A task (or follow-up) ended: how, or the error that ended the session with it.
    TaskEnded(TaskOutcome),
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
}
