//! What can go wrong with a workspace, each error naming the path, command or id involved.

use std::path::PathBuf;

use chock_protocol::text;

/// Errors of the workspace crate. Every variant names what it was working on, so the CLI can
/// print it as is.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    /// A filesystem operation failed.
    #[error("cannot {op} {}: {source}", path.display())]
    Io {
        /// What was being done ("read", "write", "inspect", ...).
        op: &'static str,
        /// The path it was done to.
        path: PathBuf,
        /// What the filesystem said.
        #[source]
        source: std::io::Error,
    },
    /// A `git` command failed.
    #[error("`git {args}` in {} failed: {stderr}", dir.display())]
    Git {
        /// Its arguments, joined by spaces.
        args: String,
        /// The directory it ran in.
        dir: PathBuf,
        /// What it wrote to stderr (or why it could not be talked to).
        stderr: String,
    },
    /// `meta.json` or an apply record could not be read or written.
    #[error("{}: {reason}", path.display())]
    Record {
        /// The record's file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The session has no workspace (never created, or removed).
    #[error("no workspace in {} (it was never created, or `chock workspace rm` removed it)", .0.display())]
    Missing(PathBuf),
    /// A workspace already exists where a new one was to be created.
    #[error("a workspace already exists in {}", .0.display())]
    Exists(PathBuf),
    /// A path in the workspace cannot be represented (not UTF-8).
    #[error("path {} is not UTF-8; chock's diff and apply handle UTF-8 paths only", .0.display())]
    NonUtf8Path(PathBuf),
    /// A selection named a file or hunk that is not in the diff.
    #[error("{kind} `{name}` is not in this session's diff (see `chock diff`)")]
    UnknownSelection {
        /// What was named: "file" or "hunk".
        kind: &'static str,
        /// The name as given.
        name: String,
    },
    /// A selection matched more than one file or hunk (ids are short hashes of agent-chosen
    /// paths): refused rather than guessed.
    #[error("{kind} `{name}` matches more than one change ({}); select by path", paths.join(", "))]
    AmbiguousSelection {
        /// What was named: "file" or "hunk".
        kind: &'static str,
        /// The name as given.
        name: String,
        /// The paths of every change it matches.
        paths: Vec<String>,
    },
    /// The operation needs the other backing.
    #[error("{0}")]
    WrongBacking(String),
    /// Selected changes no longer fit the project: nothing was written.
    #[error("refused, nothing was written: {}", conflicts.join("; "))]
    Conflict {
        /// Each conflict, in words, naming its path.
        conflicts: Vec<String>,
    },
    /// `apply --expect`: the selected changes are no longer the ones reviewed (the session ran on
    /// after the review): nothing was written.
    #[error(
        "refused, nothing was written: session {session} changed since the review (the selected \
         changes now have digest {actual}, not {expected}); review them again with `chock diff {session}`"
    )]
    DigestMismatch {
        /// The session whose changes were selected.
        session: String,
        /// The digest given with `--expect` (what was reviewed).
        expected: String,
        /// The digest of the selected changes now.
        actual: String,
    },
    /// The selected changes touch a path that configures Chock ([`crate::Sensitive`]: its policy
    /// for the next session), and the person did not name it: nothing was written. Such a change
    /// lands only when named (`--include-policy PATH`) and confirmed separately.
    #[error(
        "refused, nothing was written: session {session} changes {}, Chock's own policy for the \
         next session; review it with `chock diff {session}`, then either take it by naming it \
         ({}) and confirming it at a terminal, or leave it out by selecting the other changes \
         with --file",
        escaped(paths).join(", "),
        escaped(paths).iter().map(|p| format!("--include-policy {p}")).collect::<Vec<_>>().join(" ")
    )]
    ConfiguresChock {
        /// The session whose changes were selected.
        session: String,
        /// The paths (relative to the project) that were not named.
        paths: Vec<String>,
    },
    /// `adopt` would overwrite something: nothing was written.
    #[error("refused, nothing was written: {} already exists", .0.display())]
    WouldOverwrite(PathBuf),
    /// No apply with this id.
    #[error("no apply `{0}` (apply ids are printed by `chock apply`)")]
    UnknownApply(String),
    /// The apply was already undone.
    #[error("apply `{0}` was already undone")]
    AlreadyUndone(String),
    /// A fork asked for a turn whose end state was never recorded (not a completed turn, or a
    /// session older than forks).
    #[error("session {session} has no recorded workspace state for turn {turn} ({})", .path.display())]
    NoTurnState {
        /// The session whose turn was asked for (its id).
        session: String,
        /// The turn.
        turn: u32,
        /// The turn record that is not there.
        path: PathBuf,
    },
}

impl WorkspaceError {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            op,
            path: path.into(),
            source,
        }
    }

    pub(crate) fn record(path: impl Into<PathBuf>, reason: impl std::fmt::Display) -> Self {
        Self::Record {
            path: path.into(),
            reason: reason.to_string(),
        }
    }
}

/// Paths as a message shows them: through the one escaper ([`chock_protocol::text`]), so a name
/// cannot forge a line or reorder itself.
fn escaped(paths: &[String]) -> Vec<String> {
    paths.iter().map(|p| text::line(p).to_string()).collect()
}

/// Short alias used throughout the crate.
pub type Result<T, E = WorkspaceError> = std::result::Result<T, E>;
