//! Where Chock keeps things on this machine: the sessions root, the state and data directories,
//! and the daemon's runtime directory with its socket.
//!
//! One resolution, shared by the log (which writes sessions), the daemon (which listens) and the
//! client (which connects), so a client never looks for a socket where the daemon did not put it.
//! It reads only the environment: nothing here touches the file system. Both the state and the
//! runtime directory are among the paths chock-policy refuses as `[sandbox]` paths.
#![forbid(unsafe_code)]

use std::path::PathBuf;

/// The daemon socket's file name in the runtime directory.
pub const SOCKET_FILE: &str = "daemon.sock";
/// The daemon lock's file name in the runtime directory: held (flock) by the running daemon,
/// holding its pid.
pub const LOCK_FILE: &str = "daemon.lock";
/// The file (0600) in the runtime directory holding the loopback HTTP token, for clients that
/// send it as a bearer token.
pub const TOKEN_FILE: &str = "http-token";
/// The file in the runtime directory naming the loopback HTTP address the daemon serves, when it
/// does.
pub const HTTP_FILE: &str = "http-address";

/// Why a directory could not be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DirsError {
    /// Neither the XDG variable nor `$HOME` is set (to an absolute path), so there is no default
    /// place.
    #[error("cannot find the {what} directory: set ${var} or $HOME")]
    NoHome {
        /// "state" or "data".
        what: &'static str,
        /// The XDG variable that would have named it.
        var: &'static str,
    },
}

/// `$XDG_STATE_HOME/chock`, else `~/.local/state/chock`: what belongs to this machine (session
/// logs, the daemon's record of its sessions).
pub fn state_root() -> Result<PathBuf, DirsError> {
    Ok(xdg_dir("XDG_STATE_HOME", ".local/state", "state")?.join("chock"))
}

/// `<state>/sessions`: one directory per session. Logs are state, not data: they belong to this
/// machine and are not meant to be synced as configuration.
pub fn sessions_root() -> Result<PathBuf, DirsError> {
    Ok(state_root()?.join("sessions"))
}

/// `$XDG_DATA_HOME/chock`, else `~/.local/share/chock`: Chock's own data (the seal key, the
/// agent's notes under `memory/`).
pub fn data_root() -> Result<PathBuf, DirsError> {
    Ok(xdg_dir("XDG_DATA_HOME", ".local/share", "data")?.join("chock"))
}

/// The daemon's runtime directory: `$XDG_RUNTIME_DIR/chock`, else `<state>/run`. The daemon
/// makes it private (0700) and refuses it when it is anything else.
pub fn runtime_dir() -> Result<PathBuf, DirsError> {
    if let Some(dir) = absolute_var("XDG_RUNTIME_DIR") {
        return Ok(dir.join("chock"));
    }
    Ok(state_root()?.join("run"))
}

/// The daemon socket's path: `<runtime>/daemon.sock`.
pub fn socket_path() -> Result<PathBuf, DirsError> {
    Ok(runtime_dir()?.join(SOCKET_FILE))
}

/// An environment variable's value as a path, when it is absolute: the XDG spec says a relative
/// value is invalid and must be ignored.
fn absolute_var(var: &str) -> Option<PathBuf> {
    std::env::var_os(var)
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
}

fn xdg_dir(var: &'static str, fallback: &str, what: &'static str) -> Result<PathBuf, DirsError> {
    if let Some(dir) = absolute_var(var) {
        return Ok(dir);
    }
    absolute_var("HOME")
        .map(|home| home.join(fallback))
        .ok_or(DirsError::NoHome { what, var })
}
