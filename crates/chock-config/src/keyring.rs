//! The OS keyring, where one is running: the freedesktop Secret Service (GNOME Keyring, KWallet,
//! KeePassXC) reached through libsecret's `secret-tool`.
//!
//! Why a program and not a D-Bus client in-process: the Secret Service is a D-Bus API, and a D-Bus
//! client would be a large dependency for one store and one lookup, on machines (servers, CI) that mostly
//! run no session bus at all. `secret-tool` is the reference client, packaged everywhere
//! (`libsecret-tools`). It is used only when there is a session bus (`DBUS_SESSION_BUS_ADDRESS`) and the
//! program is on `PATH`; otherwise, or when it fails (no Secret Service answering, a locked keyring),
//! the caller falls back to the 0600 file. The key travels on the program's standard input, never on its
//! command line, and the program runs on the host (it is the user's own keyring client, not a tool call).
//! A call that does not finish in a few seconds (a keyring waiting for a password prompt nobody sees) is
//! killed and counts as unavailable.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::credentials::ApiKey;

/// How long one keyring call may take.
const TIMEOUT: Duration = Duration::from_secs(10);

/// The attributes a credential is stored under: `application=chock provider=<name>`.
fn attributes(provider: &str) -> [&str; 4] {
    ["application", "chock", "provider", provider]
}

/// `secret-tool` on PATH, when a session bus is there to reach a Secret Service.
pub fn secret_tool() -> Option<PathBuf> {
    std::env::var_os("DBUS_SESSION_BUS_ADDRESS").filter(|a| !a.is_empty())?;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("secret-tool"))
        .find(|p| p.is_file())
}

/// Runs `secret-tool` with `args`, feeding `input`; its standard output on success.
fn run(tool: &PathBuf, args: &[&str], input: Option<&str>) -> Option<String> {
    let mut child = Command::new(tool)
        .args(args)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    if let Some(input) = input {
        let mut stdin = child.stdin.take()?;
        stdin.write_all(input.as_bytes()).ok()?;
    }
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() < TIMEOUT => {
                std::thread::sleep(Duration::from_millis(20))
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    };
    let mut out = String::new();
    child.stdout.take()?.read_to_string(&mut out).ok()?;
    status.success().then_some(out)
}

/// Stores `key` for `provider` in the keyring; false when no keyring took it.
pub fn store(provider: &str, key: &ApiKey) -> bool {
    let Some(tool) = secret_tool() else {
        return false;
    };
    let label = format!("chock: {provider} API key");
    let mut args = vec!["store", "--label", label.as_str()];
    args.extend(attributes(provider));
    run(&tool, &args, Some(key.expose())).is_some() && lookup(provider).as_ref() == Some(key)
}

/// The key stored for `provider` in the keyring, if a keyring is running and has one.
pub fn lookup(provider: &str) -> Option<ApiKey> {
    let tool = secret_tool()?;
    let mut args = vec!["lookup"];
    args.extend(attributes(provider));
    run(&tool, &args, None).as_deref().and_then(ApiKey::new)
}

/// Removes the keyring's entry for `provider` (after a file took its place, so a stale key cannot win).
pub fn forget(provider: &str) {
    if let Some(tool) = secret_tool() {
        let mut args = vec!["clear"];
        args.extend(attributes(provider));
        let _ = run(&tool, &args, None);
    }
}
