//! An approved ssh push's agent proxy in a real sandbox: bound into the call for that call only, it
//! lists the user's key and refuses to remove it, and it is gone — socket and all — once the call
//! ends. The host's agent is a test `ssh-agent` whose only key an `sshd` on loopback accepts.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use chock_decide::{Answer, AnswerFuture, Answerer, ApprovalBroker, Question, Role};
use chock_session::{CallOptions, CallOutcome, Calls, Session, SessionOptions};
use chock_test_support::git_servers::{SSHD, SshServer};
use chock_test_support::installed;

fn host_git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// A person who approves, noting each act asked about.
#[derive(Debug, Default)]
struct Yes(Mutex<Vec<String>>);

impl Answerer for Yes {
    fn name(&self) -> String {
        "person".into()
    }
    fn role(&self) -> Role {
        Role::Human
    }
    fn answer<'a>(&'a self, q: &'a Question) -> AnswerFuture<'a> {
        self.0
            .lock()
            .unwrap()
            .push(q.action.clone().unwrap_or_default());
        Box::pin(async move {
            Some(Answer::AllowOnce {
                reasons: String::new(),
            })
        })
    }
}

/// How many threads of this process are an agent proxy's accept loop (it names its thread).
fn proxy_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .flatten()
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm"))
                .is_ok_and(|c| c.trim() == "ssh-agent-proxy")
        })
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_proxy_lives_in_the_approved_call_only_and_never_gives_the_key_away() {
    if !installed(SSHD) {
        return;
    }
    let server = SshServer::start();
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    // The host's user trusts the server's key (an ssh push goes nowhere else).
    let home = base.join("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::copy(server.known_hosts(), home.join(".ssh/known_hosts")).unwrap();
    // SAFETY: this binary's only test sets them before any thread of its own reads the
    // environment; the host side of a push reads the user's agent from `SSH_AUTH_SOCK` and
    // `~/.ssh/known_hosts`.
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
    let opts = SessionOptions {
        sessions_root: Some(base.join("sessions")),
        git_shim: Some(PathBuf::from(env!("CARGO_BIN_EXE_chock-git-shim"))),
        calls: Calls::Overlapping,
        ..SessionOptions::default()
    };
    let s = Session::open(&project, opts).unwrap();
    let host_dir = s.log().dir().join("git-host");
    let yes = Arc::new(Yes::default());
    let pipeline = s.pipeline(ApprovalBroker::new().with(yes.clone()));
    let sock = PathBuf::from("/tmp/chock-agent-s1-0.sock");
    let script = format!(
        "git push origin main >/dev/null 2>&1; \
         echo \"listed: $(SSH_AUTH_SOCK='{sock}' ssh-add -L | cut -d' ' -f2)\"; \
         SSH_AUTH_SOCK='{sock}' ssh-add -D >/dev/null 2>&1; echo \"removed: $?\"",
        sock = sock.display()
    );
    let call = CallOptions {
        call_id: Some("s1".into()),
        ..CallOptions::default()
    };
    let argv = vec!["sh".to_string(), "-c".to_string(), script];
    let r = s
        .confined_call_async(&argv, &call, &pipeline)
        .await
        .unwrap();
    let CallOutcome::Ran { stdout, stderr, .. } = r.outcome else {
        panic!("{:?}", r.outcome)
    };
    let out = String::from_utf8_lossy(&stdout).into_owned();
    let err = String::from_utf8_lossy(&stderr).into_owned();
    assert_eq!(*yes.0.lock().unwrap(), ["git.push"], "{out}{err}");
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
    let left: Vec<_> = std::fs::read_dir(&host_dir).unwrap().collect();
    assert!(left.is_empty(), "left after the call: {left:?}");
}
