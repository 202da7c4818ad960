//! An approved ssh push from inside a real sandbox reaches a real `sshd`: the call has no route but
//! its egress proxy, so the push's ssh is tunnelled by the shim (`ProxyCommand`) through that proxy
//! to exactly the plan's host and port, signs with the host's agent through the call's agent proxy,
//! and trusts only the host user's own `known_hosts` entry for the server. A refused push reaches
//! nothing, and a server whose key the host's user has never trusted is not pushed to.

mod remote_support;

use chock_session::Session;
use chock_test_support::git_servers::{SSHD, SshServer};
use chock_test_support::installed;
use remote_support::{Person, host_git, open, ssh_project};

/// Runs `git push origin main` in a call of `s` answered by a person who says `allow`; returns
/// what was asked about and the call's standard error.
async fn push(s: &Session, id: &str, allow: bool) -> (Vec<String>, String) {
    let person = Person::new(allow);
    let argv: Vec<String> = ["git", "push", "origin", "main"].map(String::from).to_vec();
    let (_, _, err) = remote_support::run_argv(s, &person, id, &argv).await;
    (person.acts(), err)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_ssh_push_is_tunnelled_through_the_call_s_proxy_to_the_host_s_remote() {
    if !installed(SSHD) {
        return;
    }
    let server = SshServer::start();
    let (f, home) = ssh_project(&server);
    let commit = host_git(&f.project, &["rev-parse", "HEAD"])
        .trim()
        .to_string();
    let s = open(&f);
    let host_dir = s.log().dir().join("git-host");

    // The host's user has never trusted the server's key: refused before anyone is asked.
    let (asked, err) = push(&s, "s1", true).await;
    assert!(asked.is_empty(), "asked about an unknown host: {asked:?}");
    assert!(
        err.contains("is not in") && err.contains("known_hosts"),
        "{err}"
    );
    assert_eq!(server.head("main"), None, "{err}");

    // Trusted, but refused by the person: nothing reaches the server.
    std::fs::copy(server.known_hosts(), home.join(".ssh/known_hosts")).unwrap();
    let (asked, err) = push(&s, "s2", false).await;
    assert_eq!(asked, ["git.push"], "{err}");
    assert_eq!(server.head("main"), None, "{err}");

    // Approved: through the call's proxy and agent proxy, the commit is in the server's repository.
    let (asked, err) = push(&s, "s3", true).await;
    assert_eq!(asked, ["git.push"], "{err}");
    assert_eq!(
        server.head("main").as_deref(),
        Some(commit.as_str()),
        "{err}"
    );
    let left: Vec<_> = std::fs::read_dir(&host_dir).unwrap().collect();
    assert!(left.is_empty(), "left after the calls: {left:?}");
}
