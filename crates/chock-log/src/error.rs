//! The one error type of the log crate: every variant names the path or act that failed.

use std::path::PathBuf;

/// Why a log operation failed. Each variant carries the file or session it is about, so a
/// caller can print it as is.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LogError {
    /// A file or directory operation failed.
    #[error("{act} {}: {source}", path.display())]
    Io {
        /// What we were doing ("create session dir", "fsync", …).
        act: &'static str,
        /// The path it was done on.
        path: PathBuf,
        /// The operating system's reason.
        #[source]
        source: std::io::Error,
    },
    /// Neither `$XDG_STATE_HOME`/`$XDG_DATA_HOME` nor `$HOME` is set, so there is no default place.
    #[error("cannot find the {what} directory: set ${var} or $HOME")]
    NoHome {
        /// "state" or "data".
        what: &'static str,
        /// The XDG variable that would have named it.
        var: &'static str,
    },
    /// Another process is writing this session right now.
    #[error("session {} is being written by a live process (pid {pid})", dir.display())]
    Busy {
        /// The session directory.
        dir: PathBuf,
        /// The pid recorded in the lock file (0 if unreadable).
        pid: u32,
    },
    /// A secret too short to redact safely: replacing it everywhere would mangle the log.
    #[error(
        "secret refused by the redaction funnel: {len} characters is shorter than the minimum of {min}"
    )]
    SecretTooShort {
        /// Its length in characters.
        len: usize,
        /// [`crate::MIN_SECRET_LEN`].
        min: usize,
    },
    /// An event's data could not be serialised.
    #[error("cannot serialise a {kind} event: {source}")]
    Serialize {
        /// The event kind.
        kind: &'static str,
        /// serde's reason.
        #[source]
        source: serde_json::Error,
    },
    /// An earlier write failed and the file could not be restored, so appending more would
    /// corrupt the chain. The log refuses every further append.
    #[error("log {} is unusable after a failed write: {reason}", path.display())]
    Poisoned {
        /// The log file.
        path: PathBuf,
        /// What went wrong first.
        reason: String,
    },
    /// A second [`crate::Log::tap`] on one log: one follower in-process owns the tap and fans out.
    #[error("log {} is already followed in this process", path.display())]
    TapTaken {
        /// The log file.
        path: PathBuf,
    },
    /// A line of `log.jsonl` is not a well-formed event.
    #[error("{}:{line}: {reason}", path.display())]
    BadLine {
        /// The log file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// No session matches the id or prefix.
    #[error("no session matches `{query}` in {}", root.display())]
    NotFound {
        /// What the user typed.
        query: String,
        /// Where we looked.
        root: PathBuf,
    },
    /// A prefix matches more than one session.
    #[error("`{query}` matches several sessions: {}", candidates.join(", "))]
    Ambiguous {
        /// What the user typed.
        query: String,
        /// The matching ids.
        candidates: Vec<String>,
    },
    /// A session id that does not have the `YYYYMMDDTHHMMSSZ-xxxxxx` shape.
    #[error("`{0}` is not a session id (expected YYYYMMDDTHHMMSSZ-xxxxxx)")]
    BadId(String),
    /// A seal key or public key file that cannot be used.
    #[error("{}: {reason}", path.display())]
    BadKey {
        /// The key file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// [`crate::Log::open`] on a log whose chain is broken: appending would hide the break.
    #[error("cannot reopen {} for writing: {reason}", dir.display())]
    Broken {
        /// The session directory.
        dir: PathBuf,
        /// The first problem verify found.
        reason: String,
    },
    /// A fork's lineage cannot be followed: its parent is missing, or no longer has the line the
    /// fork recorded.
    #[error("session {}: {reason}", dir.display())]
    Fork {
        /// The session directory whose line 0 (or parent) is at fault.
        dir: PathBuf,
        /// Why.
        reason: String,
    },
    /// `seal` on a log that has no intact event to seal, or whose chain is broken.
    #[error("cannot seal {}: {reason}", dir.display())]
    CannotSeal {
        /// The session directory.
        dir: PathBuf,
        /// Why.
        reason: String,
    },
}

impl LogError {
    /// Shorthand for [`LogError::Io`].
    pub(crate) fn io(act: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            act,
            path: path.into(),
            source,
        }
    }
}

impl From<chock_dirs::DirsError> for LogError {
    fn from(e: chock_dirs::DirsError) -> Self {
        match e {
            chock_dirs::DirsError::NoHome { what, var } => LogError::NoHome { what, var },
        }
    }
}
