//! `--group` for a daemon that is not root: the peer check reads only what `/proc` shows any
//! process of another uid, so a member of the group is let in, a uid outside it is refused, and
//! a member inside a user, mount or pid namespace of its own (a confined call, a container) is
//! refused. The daemon runs as the unprivileged user `chockci` in a process of its own (this test
//! binary again, running [`serve_helper`]); the peers are `curl` under `setpriv` as other uids.

mod support;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use support::*;

/// The unprivileged user the daemon runs as; its group is the daemon's `--group`.
const USER: &str = "chockci";
/// A uid with no account, a member of the group (a supplementary group).
const MEMBER: &str = "40001";
/// A uid with no account, in no group of the daemon's.
const STRANGER: &str = "40002";

/// Not a test of its own: the daemon side, when [`a_non_root_daemon_lets_its_group_in_and_no_other_namespace`]
/// runs this binary again with `CHOCK_TEST_SERVE` naming the world's directory. It prints the
/// socket's path, then serves until its stdin closes.
#[test]
fn serve_helper() {
    let Ok(base) = std::env::var("CHOCK_TEST_SERVE") else {
        return;
    };
    let base = PathBuf::from(base);
    let opts = chock_daemon::ServeOptions {
        daemon: chock_daemon::DaemonOptions {
            sessions_root: base.join("state/chock/sessions"),
            state_dir: base.join("state/chock"),
            config: Some(base.join("config/chock/config.toml")),
            queue: 64,
            max_turns: 1,
        },
        runtime_dir: base.join("runtime/chock"),
        group: Some(USER.into()),
        host: None,
    };
    runtime().block_on(async {
        let server = chock_daemon::serve(opts).await.unwrap();
        println!("SOCKET {}", server.socket().display());
        tokio::task::spawn_blocking(|| {
            let mut line = String::new();
            let _ = std::io::stdin().read_line(&mut line);
        })
        .await
        .unwrap();
        server.stop().await;
    });
}

fn id_of(name: &str, flag: &str) -> Option<String> {
    let out = Command::new("id").args([flag, name]).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn let_in(out: &str) -> bool {
    out.contains("\"sessions\"")
}

#[test]
fn a_non_root_daemon_lets_its_group_in_and_no_other_namespace() {
    if !is_root() {
        println!("skipped: running the daemon and its peers as other uids needs root (CI is)");
        return;
    }
    let (Some(uid), Some(gid)) = (id_of(USER, "-u"), id_of(USER, "-g")) else {
        println!("skipped: no unprivileged user `{USER}` to run the daemon as");
        return;
    };
    let world = World::new();
    let base = world.base.clone();
    // The daemon's user owns the world; a copy of this binary it may run sits in it.
    let exe = base.join("daemon-helper");
    std::fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    let chown = Command::new("chown")
        .args(["-R", &format!("{uid}:{gid}")])
        .arg(&base)
        .status()
        .unwrap();
    assert!(chown.success());
    std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut daemon = Command::new("setpriv")
        .args([
            &format!("--reuid={uid}"),
            &format!("--regid={gid}"),
            "--clear-groups",
        ])
        .arg(&exe)
        .args(["--exact", "serve_helper", "--nocapture", "--test-threads=1"])
        .env("CHOCK_TEST_SERVE", &base)
        .env("HOME", &base)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(daemon.stdout.take().unwrap()).lines();
    let socket = loop {
        let line = lines.next().expect("the daemon printed no socket").unwrap();
        // libtest writes `test serve_helper ... ` before it on the same line.
        if let Some((_, path)) = line.split_once("SOCKET ") {
            break PathBuf::from(path);
        }
    };
    // Every directory above the socket's own may be passed by the peers.
    let mut at = socket.parent().unwrap().parent().unwrap().to_path_buf();
    while at.starts_with(&base) {
        std::fs::set_permissions(&at, std::fs::Permissions::from_mode(0o755)).unwrap();
        at.pop();
    }

    let member = [
        "setpriv",
        &format!("--reuid={MEMBER}"),
        &format!("--regid={MEMBER}"),
        &format!("--groups={gid}"),
    ]
    .map(|s| s.to_string());
    let member: Vec<&str> = member.iter().map(String::as_str).collect();
    let (_, out) = curl_list(&member, &socket);
    assert!(let_in(&out), "a member of the group is let in: {out}");

    let stranger = [
        "setpriv",
        &format!("--reuid={STRANGER}"),
        &format!("--regid={STRANGER}"),
        "--clear-groups",
    ]
    .map(|s| s.to_string());
    let stranger: Vec<&str> = stranger.iter().map(String::as_str).collect();
    let (_, out) = curl_list(&stranger, &socket);
    assert!(!let_in(&out), "{out}");

    // A member in a user namespace that maps back to its uid, as a confined call's does.
    let in_userns: Vec<&str> = member
        .iter()
        .copied()
        .chain(["unshare", "--user", "--map-current-user"])
        .collect();
    let (_, out) = curl_list(&in_userns, &socket);
    assert!(out.contains("\"kind\":\"forbidden\""), "{out}");
    assert!(out.contains("another user namespace"), "{out}");

    // A member (root, in the group) in a mount namespace, and in a pid namespace, of its own.
    let root_member = format!("--groups={gid}");
    for (ns, how) in [
        ("mnt", &["unshare", "--mount"][..]),
        ("pid", &["unshare", "--pid", "--fork"][..]),
    ] {
        let prefix: Vec<&str> = ["setpriv", root_member.as_str()]
            .into_iter()
            .chain(how.iter().copied())
            .collect();
        let (_, out) = curl_list(&prefix, &socket);
        assert!(out.contains("\"kind\":\"forbidden\""), "{ns}: {out}");
        assert!(
            out.contains(&format!("another {ns} namespace")),
            "{ns}: {out}"
        );
    }
    // The same root member outside any namespace of its own is let in.
    let (_, out) = curl_list(&["setpriv", root_member.as_str()], &socket);
    assert!(let_in(&out), "{out}");

    drop(daemon.stdin.take());
    let status = daemon.wait().unwrap();
    assert!(status.success(), "the daemon as {USER}: {status}");
}
