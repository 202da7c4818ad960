//! An approved ssh fetch and pull from inside a real sandbox reach a real `sshd` the way an approved
//! push does: tunnelled by the shim through the call's egress proxy to the host's remote, signed
//! through the call's agent proxy with the host's agent, trusting only the host user's own
//! `known_hosts` entry. A refused fetch gets nothing, and the agent proxy ends with its call.

mod remote_support;

use chock_test_support::git_servers::{SSHD, SshServer};
use chock_test_support::installed;
use remote_support::{Person, host_git, open, proxy_threads, run, ssh_project};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_ssh_fetch_and_pull_reach_the_hosts_remote_through_the_calls_proxies() {
    if !installed(SSHD) {
        return;
    }
    let server = SshServer::start();
    let (f, home) = ssh_project(&server);
    std::fs::copy(server.known_hosts(), home.join(".ssh/known_hosts")).unwrap();
    host_git(
        &f.project,
        &["push", "-q", server.repo().to_str().unwrap(), "main"],
    );
    let new = server.add_commit("from the server");
    let s = open(&f);
    // The workspace points `origin` elsewhere; the host's remote is read all the same.
    let fetch = "git remote set-url origin ssh://nobody@127.0.0.1:1/elsewhere.git; \
                 git fetch origin main; echo \"fetch $?\"; \
                 git rev-parse -q --verify refs/remotes/origin/main; \
                 ls /tmp/chock-agent-* 2>/dev/null; echo listed";

    // Refused: nothing fetched.
    let no = Person::new(false);
    let (_, out, err) = run(&s, &no, "s1", fetch).await;
    assert!(out.contains("fetch 126"), "{out}{err}");
    assert!(!out.contains(&new), "{out}{err}");
    assert_eq!(no.acts(), ["git.fetch"], "{err}");
    assert!(!out.contains("/tmp/chock-agent-"), "{out}");

    // Approved: the remote's commit is in the workspace; the agent's socket existed in the call.
    let yes = Person::new(true);
    let (_, out, err) = run(&s, &yes, "s2", fetch).await;
    assert!(out.contains("fetch 0"), "{out}{err}");
    assert!(out.contains(&format!("{new}\n")), "{out}{err}");
    assert!(out.contains("/tmp/chock-agent-s2-"), "{out}{err}");
    assert_eq!(yes.acts(), ["git.fetch"], "{err}");
    assert_eq!(proxy_threads(), 0, "the agent proxy outlived its call");

    // A pull brings it onto the branch.
    let yes = Person::new(true);
    let (code, out, err) = run(
        &s,
        &yes,
        "s3",
        "git pull origin main && git rev-parse HEAD && cat fetched.txt",
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains(&format!("{new}\nfrom the server")),
        "{out}{err}"
    );
    assert_eq!(yes.acts(), ["git.pull"], "{err}");
    assert_eq!(proxy_threads(), 0, "the agent proxy outlived its call");
    assert!(remote_support::left_in_git_host(&s).is_empty());
}
