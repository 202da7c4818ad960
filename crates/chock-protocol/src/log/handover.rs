//! A running session moving from one process to another (`chock detach`, the daemon's adopt).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The session moved to another process, which writes this line before it acts on the session:
/// from here on the log is written by `to`. The old owner let go at a turn boundary (or with a
/// question open, which stays open), or was found gone; what it left running is listed, never
/// run again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SessionHandover {
    /// The how-manyth handover of this session (1 for the first).
    pub number: u32,
    /// The process that wrote the log until now.
    pub from: Owner,
    /// The process that writes it from here on.
    pub to: Owner,
    /// How the old owner let go.
    pub how: HandoverHow,
    /// Calls the old owner had started and whose end it never recorded: each is logged as
    /// outcome unknown (a `tool.result` that says so) and is never run again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unknown: Vec<String>,
    /// Questions still open at the handover: they stay open, under the same ids, and the new
    /// owner's clients answer them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub open_questions: Vec<String>,
}

/// A process that owns (writes) a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Owner {
    /// Its process id.
    pub pid: u32,
    /// What it is: `chock run`, `chock serve` (as the new owner knows it).
    pub process: String,
}

/// How the old owner let go of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HandoverHow {
    /// It was asked to, and let go of the log (at a turn boundary, or at once with a question
    /// open).
    Released,
    /// Its log's lock was already free when the new owner came: it had died (nobody asked it).
    FoundDead,
}
