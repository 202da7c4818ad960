//! The ssh-agent proxy against a real `ssh-agent`: it lists and signs through the user's agent, refuses
//! to add, remove or lock anything (the agent is unchanged afterwards), carries a real ssh push, and
//! is gone — socket and connections — once closed.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Output};

use chock_broker::AgentProxy;
use chock_test_support::git_servers::{SSH_AGENT, SSHD, SshServer, TestAgent};
use chock_test_support::{GitProject, installed};

fn with_agent(sock: &Path, program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .env("SSH_AUTH_SOCK", sock)
        .output()
        .expect("the program runs")
}

/// `ssh-add -L` through `sock`: the public keys it lists.
fn listed(sock: &Path) -> String {
    String::from_utf8_lossy(&with_agent(sock, "ssh-add", &["-L"]).stdout).into_owned()
}

fn key_body(public: &str) -> &str {
    public.split_whitespace().nth(1).expect("a key")
}

#[test]
fn the_proxy_lists_and_signs_through_the_users_agent() {
    if !installed(SSH_AGENT) {
        return;
    }
    let agent = TestAgent::start();
    let dir = tempfile::tempdir().unwrap();
    let proxy = AgentProxy::start(&dir.path().join("agent"), &agent.socket()).unwrap();
    assert!(listed(proxy.path()).contains(key_body(agent.public_key())));

    let public = dir.path().join("key.pub");
    std::fs::write(&public, agent.public_key()).unwrap();
    let message = dir.path().join("message");
    std::fs::write(&message, "sign me\n").unwrap();
    let out = with_agent(
        proxy.path(),
        "ssh-keygen",
        &[
            "-Y",
            "sign",
            "-n",
            "test",
            "-f",
            public.to_str().unwrap(),
            message.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{out:?}");
    assert!(dir.path().join("message.sig").exists());
    let counts = proxy.close();
    assert!(counts.listed >= 1 && counts.signed >= 1, "{counts:?}");
}

#[test]
fn the_proxy_refuses_to_add_remove_or_lock_and_the_agent_is_unchanged() {
    if !installed(SSH_AGENT) {
        return;
    }
    let agent = TestAgent::start();
    let dir = tempfile::tempdir().unwrap();
    let proxy = AgentProxy::start(&dir.path().join("agent"), &agent.socket()).unwrap();
    let before = listed(&agent.socket());

    let removed = with_agent(proxy.path(), "ssh-add", &["-D"]);
    assert!(
        !removed.status.success(),
        "removing every key passed: {removed:?}"
    );
    let key = dir.path().join("extra");
    let made = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&key)
        .status()
        .unwrap();
    assert!(made.success());
    let added = with_agent(proxy.path(), "ssh-add", &[key.to_str().unwrap()]);
    assert!(!added.status.success(), "adding a key passed: {added:?}");
    let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
    let deleted = with_agent(
        proxy.path(),
        "ssh-add",
        &["-d", key.with_extension("pub").to_str().unwrap()],
    );
    assert!(!deleted.status.success());
    // Locking reads its password from the terminal; feed it through SSH_ASKPASS.
    let askpass = dir.path().join("askpass");
    std::fs::write(&askpass, "#!/bin/sh\necho pw\n").unwrap();
    Command::new("chmod")
        .arg("+x")
        .arg(&askpass)
        .status()
        .unwrap();
    let locked = Command::new("ssh-add")
        .arg("-x")
        .env("SSH_AUTH_SOCK", proxy.path())
        .env("SSH_ASKPASS", &askpass)
        .env("SSH_ASKPASS_REQUIRE", "force")
        .env("DISPLAY", ":0")
        .output()
        .unwrap();
    assert!(!locked.status.success(), "locking passed: {locked:?}");

    let after = listed(&agent.socket());
    assert_eq!(before, after, "the user's agent changed");
    assert!(!after.contains(key_body(&public)));
    assert!(
        after.contains(key_body(agent.public_key())),
        "the agent lost its key or is locked"
    );
    let counts = proxy.close();
    // remove-all 19, add 17 (or 25 with constraints), remove 18, lock 22.
    for kind in [19u8, 18, 22] {
        assert!(
            counts.refused.contains(&kind),
            "{kind} not refused: {counts:?}"
        );
    }
    assert!(
        counts.refused.iter().any(|k| *k == 17 || *k == 25),
        "{counts:?}"
    );
}

#[test]
fn once_closed_the_socket_and_its_connections_are_gone() {
    if !installed(SSH_AGENT) {
        return;
    }
    let agent = TestAgent::start();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent");
    let proxy = AgentProxy::start(&path, &agent.socket()).unwrap();
    let mut open = UnixStream::connect(&path).unwrap();
    // One round trip (list the identities), so the connection is served when the call ends.
    open.write_all(&[0, 0, 0, 1, 11]).unwrap();
    let mut len = [0u8; 4];
    open.read_exact(&mut len).unwrap();
    let mut answer = vec![0u8; u32::from_be_bytes(len) as usize];
    open.read_exact(&mut answer).unwrap();
    assert_eq!(answer[0], 12, "SSH_AGENT_IDENTITIES_ANSWER");
    proxy.close();
    assert!(!path.exists(), "the socket outlived the call");
    assert!(UnixStream::connect(&path).is_err());
    open.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    let mut buf = [0u8; 1];
    let read = open.read(&mut buf);
    assert!(
        matches!(read, Ok(0)),
        "a connection outlived the call: {read:?}"
    );
}

#[test]
fn a_real_ssh_push_is_signed_through_the_proxy() {
    if !installed(SSHD) {
        return;
    }
    let server = SshServer::start();
    let project = GitProject::new();
    let dir = tempfile::tempdir().unwrap();
    let proxy = AgentProxy::start(&dir.path().join("agent"), &server.agent().socket()).unwrap();
    let out = Command::new("git")
        .args(["push", &server.url(), "main"])
        .current_dir(project.path())
        .env(
            "GIT_SSH_COMMAND",
            format!("ssh {}", server.ssh_options().join(" ")),
        )
        .env("SSH_AUTH_SOCK", proxy.path())
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(server.head("main").is_some());
    let counts = proxy.close();
    assert!(counts.signed >= 1, "{counts:?}");
}
