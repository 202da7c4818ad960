//! Why the interface could not run.

/// A failure of the interface itself (the session's own failures are shown in it).
#[derive(Debug, thiserror::Error)]
pub enum TuiError {
    /// The terminal could not be set up or written.
    #[error("the terminal: {0}")]
    Terminal(#[from] std::io::Error),
    /// config.toml could not be read.
    #[error("{0}")]
    Config(String),
    /// The session could not be made or resumed.
    #[error(transparent)]
    Build(#[from] chock_runtime::BuildError),
    /// The session could not be started.
    #[error(transparent)]
    Start(#[from] chock_runtime::StartError),
    /// The daemon could not be reached or refused.
    #[error(transparent)]
    Daemon(#[from] chock_client::ClientError),
    /// The sessions could not be listed.
    #[error(transparent)]
    Log(#[from] chock_runtime::sessions::LogError),
}
