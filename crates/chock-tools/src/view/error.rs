//! Why the view refused a path or failed on it, in words the model reads.

/// Why a path could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    /// The path leaves the workspace.
    #[error(
        "{0}: outside the workspace (paths are relative to the project root, or absolute under it)"
    )]
    Outside(String),
    /// Nothing there.
    #[error("{0}: no such file or directory")]
    NotFound(String),
    /// The project's policy file: read-only to the agent (rule 2), as the sandbox binds it.
    #[error(
        "{0}: the project's policy file is read-only to the agent; say what you would change in your final message"
    )]
    Policy(String),
    /// Too many symlinks.
    #[error("{0}: too many levels of symbolic links")]
    Loop(String),
    /// An operation the overlay view cannot do without the kernel's help.
    #[error("{path}: {reason}")]
    Unsupported {
        /// The path.
        path: String,
        /// Why.
        reason: String,
    },
    /// A file operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The path as the model gave it.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
}
