//! An approved ssh push from inside a real sandbox reaches a real `sshd`: the call has no route but
//! its egress proxy, so the push's ssh is tunnelled by the shim (`ProxyCommand`) through that proxy
//! to exactly the plan's host and port, signs with the host's agent through the call's agent proxy,
//! and trusts only the host user's own `known_hosts` entry for the server. A refused push reaches
//! nothing, and a server whose key the host's user has never trusted is not pushed to.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use chock_decide::{Answer, AnswerFuture, Answerer, ApprovalBroker, Question, Role};
use chock_session::{CallOptions, CallOutcome, Calls, Session, SessionOptions};
use chock_test_support::git_servers::{SSHD, SshServer};
use chock_test_support::installed;

fn host_git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// A person who answers every approval `allow` (or `deny`), noting each act asked about.
#[derive(Debug)]
struct Person {
    allow: bool,
    asked: Mutex<Vec<String>>,
}

impl Answerer for Person {
    fn name(&self) -> String {
        "person".into()
    }
    fn role(&self) -> Role {
        Role::Human
    }
    fn answer<'a>(&'a self, q: &'a Question) -> AnswerFuture<'a> {
        self.asked
            .lock()
            .unwrap()
            .push(q.action.clone().unwrap_or_default());
        let answer = if self.allow {
            Answer::AllowOnce {
                reasons: String::new(),
            }
        } else {
            Answer::Deny {
                reasons: "not now".into(),
            }
        };
        Box::pin(async move { Some(answer) })
    }
}

/// Runs `git push origin main` in a call of `s` answered by a person who says `allow`; returns
/// what was asked about and the call's standard error.
async fn push(s: &Session, id: &str, allow: bool) -> (Vec<String>, String) {
    let person = Arc::new(Person {
        allow,
        asked: Mutex::new(Vec::new()),
    });
    let pipeline = s.pipeline(ApprovalBroker::new().with(person.clone()));
    let call = CallOptions {
        call_id: Some(id.into()),
        ..CallOptions::default()
    };
    let argv: Vec<String> = ["git", "push", "origin", "main"].map(String::from).to_vec();
    let r = s
        .confined_call_async(&argv, &call, &pipeline)
        .await
        .unwrap();
    let CallOutcome::Ran { stderr, .. } = r.outcome else {
        panic!("{:?}", r.outcome)
    };
    let asked = person.asked.lock().unwrap().clone();
    (asked, String::from_utf8_lossy(&stderr).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_ssh_push_is_tunnelled_through_the_call_s_proxy_to_the_host_s_remote() {
    if !installed(SSHD) {
        return;
    }
    let server = SshServer::start();
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let home = base.join("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    // SAFETY: this binary's only test sets them before any thread of its own reads the
    // environment; the host side of a push reads the user's agent and `~/.ssh/known_hosts`.
    unsafe {
        std::env::set_var("SSH_AUTH_SOCK", server.agent().socket());
        std::env::set_var("HOME", &home);
    }
    let project = base.join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("README"), "one\n").unwrap();
    host_git(&project, &["init", "-q", "-b", "main"]);
    host_git(&project, &["config", "user.name", "t"]);
    host_git(&project, &["config", "user.email", "t@example.invalid"]);
    host_git(&project, &["remote", "add", "origin", &server.url()]);
    host_git(&project, &["add", "-A"]);
    host_git(&project, &["commit", "-qm", "one"]);
    let commit = host_git(&project, &["rev-parse", "HEAD"])
        .trim()
        .to_string();
    let opts = SessionOptions {
        sessions_root: Some(base.join("sessions")),
        git_shim: Some(PathBuf::from(env!("CARGO_BIN_EXE_chock-git-shim"))),
        calls: Calls::Overlapping,
        ..SessionOptions::default()
    };
    let s = Session::open(&project, opts).unwrap();
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
