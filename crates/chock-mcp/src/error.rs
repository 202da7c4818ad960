//! Why an MCP server could not be used: the crate's one error type.

use std::path::PathBuf;

use crate::trust::{self, TrustState};

/// Why an MCP server could not be used.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// Neither `$XDG_DATA_HOME` nor `$HOME` is set.
    #[error("no data directory for the MCP trust file: set XDG_DATA_HOME or HOME")]
    NoHome,
    /// The trust file cannot be read or written.
    #[error("the MCP trust file {}: {problem}", path.display())]
    TrustFile {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// The server's definition is not trusted.
    #[error("MCP server `{server}` is {}: run `chock mcp trust {server}`", state.word())]
    NotTrusted {
        /// The server.
        server: String,
        /// Its trust state.
        state: TrustState,
    },
    /// A file the server's command line names in the project is not what was trusted.
    #[error(
        "MCP server `{server}` is changed since trusted: {change}: run `chock mcp trust {server}`"
    )]
    FileChanged {
        /// The server.
        server: String,
        /// Which file, and how.
        change: trust::FileChange,
    },
    /// A file the server's command line names in the project cannot be read to pin or check it.
    #[error("MCP server `{server}`: cannot read `{word}` ({}) to check it against its pin: {problem}", path.display())]
    ProjectFile {
        /// The server.
        server: String,
        /// The word of its command line.
        word: String,
        /// Where it leads.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// No server of that name is configured.
    #[error("no MCP server named `{0}` in chock.toml or config.toml")]
    Unknown(String),
    /// The server could not be started.
    #[error("MCP server `{server}` did not start: {message}")]
    Start {
        /// The server.
        server: String,
        /// Why.
        message: String,
    },
    /// The server's definition asks for a path or a variable no confined process may have
    /// (`message` names the file, the field and the path or name).
    #[error("MCP server `{server}` refused: {message}")]
    Refused {
        /// The server.
        server: String,
        /// Why, naming the file and field.
        message: String,
    },
    /// The server did not answer in time.
    #[error("MCP server `{server}` did not answer {what} in time")]
    Timeout {
        /// The server.
        server: String,
        /// The request.
        what: String,
    },
    /// The server broke the protocol or answered with an error.
    #[error("MCP server `{server}`: {message}")]
    Protocol {
        /// The server.
        server: String,
        /// What it said.
        message: String,
    },
    /// The log refused a write.
    #[error(transparent)]
    Log(#[from] chock_log::LogError),
    /// The pipeline could not settle an act.
    #[error(transparent)]
    Decide(#[from] chock_decide::DecideError),
    /// A name cannot be an act.
    #[error(transparent)]
    Action(#[from] chock_policy::ActionError),
    /// A lock was poisoned by a panic elsewhere.
    #[error("a lock of the MCP client was poisoned")]
    Poisoned,
}
