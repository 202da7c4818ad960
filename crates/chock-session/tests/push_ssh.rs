//! An approved ssh push's agent proxy in a real sandbox: bound into the call for that call only, it
//! lists the user's key and refuses to remove it, and it is gone — socket and all — once the call
//! ends. The host's agent is a test `ssh-agent` whose only key an `sshd` on loopback accepts.

mod remote_support;

use std::path::PathBuf;
use std::process::Command;

use chock_test_support::git_servers::{SSHD, SshServer};
use chock_test_support::installed;
use remote_support::{Person, open, proxy_threads, ssh_project};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_proxy_lives_in_the_approved_call_only_and_never_gives_the_key_away() {
    if !installed(SSHD) {
        return;
    }
    let server = SshServer::start();
    let (f, home) = ssh_project(&server);
    // The host's user trusts the server's key (an ssh push goes nowhere else).
    std::fs::copy(server.known_hosts(), home.join(".ssh/known_hosts")).unwrap();
    let s = open(&f);
    let yes = Person::new(true);
    let sock = PathBuf::from("/tmp/chock-agent-s1-0.sock");
    let script = format!(
        "git push origin main >/dev/null 2>&1; \
         echo \"listed: $(SSH_AUTH_SOCK='{sock}' ssh-add -L | cut -d' ' -f2)\"; \
         SSH_AUTH_SOCK='{sock}' ssh-add -D >/dev/null 2>&1; echo \"removed: $?\"",
        sock = sock.display()
    );
    let (_, out, err) = remote_support::run(&s, &yes, "s1", &script).await;
    assert_eq!(yes.acts(), ["git.push"], "{out}{err}");
    let key = server
        .agent()
        .public_key()
        .split_whitespace()
        .nth(1)
        .unwrap();
    assert!(out.contains(&format!("listed: {key}")), "{out}{err}");
    assert!(
        !out.contains("removed: 0"),
        "the proxy removed the keys: {out}"
    );
    // The user's agent still holds its key, and the call's socket is gone.
    let listed = Command::new("ssh-add")
        .arg("-L")
        .env("SSH_AUTH_SOCK", server.agent().socket())
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&listed.stdout).contains(key));
    // And on the host the proxy is closed: none of its threads is left in this process.
    assert_eq!(proxy_threads(), 0, "the agent proxy outlived its call");
    let left = remote_support::left_in_git_host(&s);
    assert!(left.is_empty(), "left after the call: {left:?}");
}
