//! Where Chock keeps things on this machine: the configuration, data and state directories (the
//! sessions root, stored API keys, the MCP trust file, the seal key), and the daemon's runtime
//! directory with its socket.
//!
//! One resolution, shared by the log (which writes sessions), the daemon (which listens) and the
//! client (which connects), so a client never looks for a socket where the daemon did not put it.
//! It reads only the environment: nothing here touches the file system. Both the state and the
//! runtime directory are among the paths chock-policy refuses as `[sandbox]` paths.
#![forbid(unsafe_code)]
// No library makes an async runtime or blocks on one (the workspace's clippy.toml).
#![cfg_attr(not(test), deny(clippy::disallowed_methods))]

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
        /// "configuration", "state" or "data".
        what: &'static str,
        /// The XDG variable that would have named it.
        var: &'static str,
    },
}

/// Where each directory falls back to under `$HOME`: the configuration, data and state
/// directories' defaults (the runtime directory falls back inside the state directory).
pub const HOME_DEFAULTS: [&str; 3] = [".config", ".local/share", ".local/state"];

/// `$XDG_CONFIG_HOME/chock`, else `~/.config/chock`: the user's configuration (config.toml).
pub fn config_root() -> Result<PathBuf, DirsError> {
    Ok(xdg_dir("XDG_CONFIG_HOME", HOME_DEFAULTS[0], "configuration")?.join("chock"))
}

/// `<data>/credentials`: API keys stored by `chock login` (one 0600 file a provider).
pub fn credentials_dir() -> Result<PathBuf, DirsError> {
    Ok(data_root()?.join("credentials"))
}

/// `<data>/mcp-trust.json`: the MCP servers the person trusted, each pinned to its definition.
pub fn mcp_trust_file() -> Result<PathBuf, DirsError> {
    Ok(data_root()?.join("mcp-trust.json"))
}

/// Every directory Chock keeps something in, as this environment resolves them (configuration,
/// data, state, runtime): what a `[sandbox]` path must never reach. chock-policy adds the
/// defaults under `$HOME` as well ([`HOME_DEFAULTS`]), whatever the environment says.
pub fn own_dirs() -> Vec<PathBuf> {
    [config_root(), data_root(), state_root(), runtime_dir()]
        .into_iter()
        .flatten()
        .collect()
}

/// `$XDG_STATE_HOME/chock`, else `~/.local/state/chock`: what belongs to this machine (session
/// logs, the daemon's record of its sessions).
pub fn state_root() -> Result<PathBuf, DirsError> {
    Ok(xdg_dir("XDG_STATE_HOME", HOME_DEFAULTS[2], "state")?.join("chock"))
}

/// `<state>/sessions`: one directory per session. Logs are state, not data: they belong to this
/// machine and are not meant to be synced as configuration.
pub fn sessions_root() -> Result<PathBuf, DirsError> {
    Ok(state_root()?.join("sessions"))
}

/// `$XDG_DATA_HOME/chock`, else `~/.local/share/chock`: Chock's own data (the seal key, the
/// agent's notes under `memory/`).
pub fn data_root() -> Result<PathBuf, DirsError> {
    Ok(xdg_dir("XDG_DATA_HOME", HOME_DEFAULTS[1], "data")?.join("chock"))
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
