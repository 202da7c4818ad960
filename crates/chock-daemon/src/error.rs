//! The daemon's errors (starting it, serving); a method's failure is a typed
//! [`chock_protocol::rpc::RpcError`] sent to the client instead.

use std::path::PathBuf;

/// Why the daemon could not start or serve.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// Another daemon holds the lock.
    #[error(
        "a daemon is already running (pid {pid}, lock {}); stop it first, or use it: `chock sessions list`",
        lock.display()
    )]
    AlreadyRunning {
        /// The pid the lock file names.
        pid: u32,
        /// The lock file.
        lock: PathBuf,
    },
    /// No runtime or state directory could be found.
    #[error("cannot find where the daemon's socket goes: {0}")]
    NoRuntimeDir(#[from] chock_dirs::DirsError),
    /// The runtime directory exists but is not safe to use.
    #[error("{}: {why}", path.display())]
    UnsafeDir {
        /// The directory.
        path: PathBuf,
        /// What is wrong with it (owner, mode, a symlink).
        why: String,
    },
    /// `--host` names an address that is not loopback.
    #[error(
        "--host {addr}: only a loopback address is served (127.0.0.1:PORT or [::1]:PORT); the browser UI is not for the network"
    )]
    NotLoopback {
        /// The address given.
        addr: String,
    },
    /// `--host` is not an address.
    #[error("--host {addr}: not an address with a port (127.0.0.1:PORT or [::1]:PORT)")]
    BadHost {
        /// What was given.
        addr: String,
    },
    /// `--group` names no group.
    #[error("--group {0}: no such group")]
    NoGroup(String),
    /// A file or socket operation failed.
    #[error("{what} {}: {source}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file or socket.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// The sessions root could not be found.
    #[error(transparent)]
    Log(#[from] chock_log::LogError),
}

impl DaemonError {
    pub(crate) fn io(what: &'static str, path: &std::path::Path, source: std::io::Error) -> Self {
        DaemonError::Io {
            what,
            path: path.to_path_buf(),
            source,
        }
    }
}
