//! An approved ssh push's route out of the call (docs/git.md, "The approved push"): a call reaches
//! nothing but its egress proxy, so the push's ssh is given a `ProxyCommand` that is the shim
//! itself in connect mode ([`connect_main`]): it asks the proxy for a `CONNECT` to exactly the
//! plan's host and port and splices its standard input and output with the tunnel. The host builds
//! that ssh command line ([`ssh_command`]) with a `known_hosts` it wrote from the host user's own
//! entries for that host ([`known_hosts_for`]), so neither where ssh goes nor which key it trusts
//! is read from the workspace.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;

/// The variable that puts the shim in connect mode (set in an approved ssh push's environment).
pub const CONNECT_MODE: &str = "CHOCK_GIT_CONNECT";
/// The connect mode's first argument: `<shim> --chock-connect HOST PORT`.
pub const CONNECT_FLAG: &str = "--chock-connect";

/// Why the host will not build an ssh push's command.
#[derive(Debug, thiserror::Error)]
pub enum SshPushError {
    /// The host user's `known_hosts` names no key for the remote.
    #[error(
        "the host key of `{name}` is not in {file} on the host: an ssh push goes only to a host \
         whose key the host's user already trusts (connect to it once from the host)"
    )]
    UnknownHost {
        /// The name looked up (`host` or `[host]:port`).
        name: String,
        /// The file searched.
        file: String,
    },
    /// The host's `known_hosts` could not be read.
    #[error("{file} could not be searched for `{name}`: {reason}")]
    Unreadable {
        /// The name looked up.
        name: String,
        /// The file searched.
        file: String,
        /// Why it could not be.
        reason: String,
    },
}

/// The name ssh looks a host up by in `known_hosts`: `host`, or `[host]:port` off port 22.
pub fn known_hosts_name(host: &str, port: u16) -> String {
    if port == 22 {
        host.to_string()
    } else {
        format!("[{host}]:{port}")
    }
}

/// The host user's `known_hosts` lines for `host:port` (`ssh-keygen -F`, which reads hashed
/// entries too), read from `file`. None is a refusal: an unknown host key is never trusted.
pub fn known_hosts_for(file: &Path, host: &str, port: u16) -> Result<String, SshPushError> {
    let name = known_hosts_name(host, port);
    let unreadable = |reason: String| SshPushError::Unreadable {
        name: name.clone(),
        file: file.display().to_string(),
        reason,
    };
    if !file.is_file() {
        return Err(SshPushError::UnknownHost {
            name: name.clone(),
            file: file.display().to_string(),
        });
    }
    let out = std::process::Command::new("ssh-keygen")
        .arg("-F")
        .arg(&name)
        .arg("-f")
        .arg(file)
        .env_clear()
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .map_err(|e| unreadable(format!("ssh-keygen: {e}")))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .collect();
    if lines.is_empty() {
        return Err(SshPushError::UnknownHost {
            name,
            file: file.display().to_string(),
        });
    }
    Ok(lines.iter().map(|l| format!("{l}\n")).collect())
}

/// One word for `sh`: single-quoted, its quotes escaped.
fn quoted(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// The push's `GIT_SSH_COMMAND`: `ssh` at `ssh` with no configuration file, tunnelled through the
/// call's proxy by `shim` (the path the call sees it at) to exactly `host:port`, trusting only the
/// keys in `known_hosts` (a path the call sees, written by the host), never asking anyone.
pub fn ssh_command(ssh: &Path, shim: &Path, host: &str, port: u16, known_hosts: &Path) -> String {
    let proxy = format!(
        "ProxyCommand={} {CONNECT_FLAG} {} {port}",
        quoted(&shim.display().to_string()),
        quoted(host)
    );
    [
        quoted(&ssh.display().to_string()),
        "-F".into(),
        "/dev/null".into(),
        "-o".into(),
        quoted(&proxy),
        "-o".into(),
        quoted(&format!("UserKnownHostsFile={}", known_hosts.display())),
        "-o".into(),
        "GlobalKnownHostsFile=/dev/null".into(),
        "-o".into(),
        "StrictHostKeyChecking=yes".into(),
        "-o".into(),
        "BatchMode=yes".into(),
    ]
    .join(" ")
}

/// The shim in connect mode, inside a call: `CONNECT host:port` to the call's egress proxy, then
/// standard input to the tunnel and the tunnel to standard output until either ends. A refusal is
/// the proxy's status line on standard error and exit 1. Never returns.
pub fn connect_main(host: &str, port: &str) -> ! {
    let fail = |what: String| -> ! {
        eprintln!("chock: git: ssh tunnel to {host}:{port}: {what}");
        std::process::exit(1)
    };
    let port: u16 = port
        .parse()
        .unwrap_or_else(|_| fail(format!("`{port}` is not a port")));
    let target = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    let proxy = ("127.0.0.1", crate::egress::PROXY_PORT);
    let mut tunnel = TcpStream::connect(proxy)
        .unwrap_or_else(|e| fail(format!("the call's proxy cannot be reached: {e}")));
    let ask = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n");
    tunnel
        .write_all(ask.as_bytes())
        .unwrap_or_else(|e| fail(format!("the proxy: {e}")));
    // The response's head, a byte at a time so nothing of the tunnel is read past it.
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match tunnel.read(&mut byte) {
            Ok(1) if head.len() < 8192 => head.push(byte[0]),
            Ok(_) => fail("the proxy closed the connection".into()),
            Err(e) => fail(format!("the proxy: {e}")),
        }
    }
    let head = String::from_utf8_lossy(&head);
    let status = head.lines().next().unwrap_or("").to_string();
    if status.split_whitespace().nth(1) != Some("200") {
        fail(format!("refused by the call's proxy: {status}"))
    }
    let mut upstream = tunnel
        .try_clone()
        .unwrap_or_else(|e| fail(format!("the tunnel: {e}")));
    std::thread::spawn(move || {
        pump(&mut std::io::stdin().lock(), &mut upstream);
        let _ = upstream.shutdown(std::net::Shutdown::Write);
    });
    pump(&mut tunnel, &mut std::io::stdout().lock());
    std::process::exit(0)
}

/// Copies `from` to `to`, each read written and flushed at once, until either ends. Plain reads
/// and writes, not `std::io::copy`: that splices between ssh's pipe and the socket, and inside a
/// call the key exchange stalled there (seen with a real `sshd`).
fn pump(from: &mut impl Read, to: &mut impl Write) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                if to.write_all(&buf[..n]).and_then(|()| to.flush()).is_err() {
                    return;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_quotes_every_path_and_names_the_plan_s_host_only() {
        let cmd = ssh_command(
            Path::new("/usr/bin/ssh"),
            Path::new("/usr/bin/git"),
            "example.org",
            2222,
            Path::new("/s/it's/kh"),
        );
        assert_eq!(
            cmd,
            "'/usr/bin/ssh' -F /dev/null -o 'ProxyCommand='\\''/usr/bin/git'\\'' --chock-connect \
             '\\''example.org'\\'' 2222' -o 'UserKnownHostsFile=/s/it'\\''s/kh' \
             -o GlobalKnownHostsFile=/dev/null -o StrictHostKeyChecking=yes -o BatchMode=yes"
        );
        assert_eq!(known_hosts_name("example.org", 22), "example.org");
        assert_eq!(known_hosts_name("::1", 2222), "[::1]:2222");
    }
}
