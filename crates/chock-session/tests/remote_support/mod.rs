//! What the approved push and fetch suites (and the askpass suite) share: real servers a test
//! starts, one test at a time, a project on the host whose `origin` is one of them, a session with
//! the git shim, a person who answers, one call run through it, and a look at every byte a session
//! wrote.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use chock_decide::{Answer, AnswerFuture, Answerer, ApprovalBroker, Question, QuestionKind, Role};
use chock_session::{CallOptions, CallOutcome, Calls, Session, SessionOptions};
use chock_test_support::git_servers::{GitHttpServer, HTTP_BACKEND, SshServer};
use chock_test_support::installed;

/// The password the test servers take and the person types.
pub const PASSWORD: &str = "correct-horse-battery-staple";

/// A smart-HTTP server of user `alice` taking `password`, or `None` (reported by `installed`, which
/// fails in CI) when git's HTTP backend is missing.
pub fn http_server(password: &str) -> Option<GitHttpServer> {
    installed(HTTP_BACKEND).then(|| GitHttpServer::start("alice", password))
}

/// One test of a binary at a time: each runs sandboxes and servers.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The turn of one test ([`http_remotes`]): the next waits until it is dropped.
pub type Turn = tokio::sync::MutexGuard<'static, ()>;

/// Once the test before has ended: this test's turn, the project's real remote and a decoy (both
/// taking [`PASSWORD`]), or `None` when git's HTTP backend is missing. Bind the turn first, so it
/// is dropped after the servers.
pub async fn http_remotes() -> Option<(Turn, GitHttpServer, GitHttpServer)> {
    if !installed(HTTP_BACKEND) {
        return None;
    }
    let turn = ONE_AT_A_TIME.lock().await;
    let real = GitHttpServer::start("alice", PASSWORD);
    let decoy = GitHttpServer::start("alice", PASSWORD);
    Some((turn, real, decoy))
}

/// The host's git in `dir`, with no system configuration and `dir` as its home.
pub fn host_git(dir: &Path, args: &[&str]) -> String {
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

/// A person: approvals answered `approve`, free questions (git's password prompt) answered with
/// [`PASSWORD`]; every question noted as (kind, act, text).
#[derive(Debug)]
pub struct Person {
    pub approve: bool,
    pub asked: Mutex<Vec<(QuestionKind, Option<String>, String)>>,
}

impl Person {
    /// A person who approves (or refuses) every act.
    pub fn new(approve: bool) -> Arc<Person> {
        Arc::new(Person {
            approve,
            asked: Mutex::default(),
        })
    }

    /// Every question so far.
    pub fn asked(&self) -> Vec<(QuestionKind, Option<String>, String)> {
        self.asked.lock().unwrap().clone()
    }

    /// The acts asked about, in order.
    pub fn acts(&self) -> Vec<String> {
        self.asked()
            .into_iter()
            .filter_map(|(_, action, _)| action)
            .collect()
    }

    /// How many password prompts were put to the person.
    pub fn prompts(&self) -> usize {
        self.asked()
            .iter()
            .filter(|(k, _, _)| *k == QuestionKind::Question)
            .count()
    }
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
            .push((q.kind, q.action.clone(), q.text.clone()));
        let answer = match q.kind {
            QuestionKind::Question => Answer::Reply {
                text: PASSWORD.into(),
            },
            _ if self.approve => Answer::AllowOnce {
                reasons: String::new(),
            },
            _ => Answer::Deny {
                reasons: "not now".into(),
            },
        };
        Box::pin(async move { Some(answer) })
    }
}

/// A project on the host and where its sessions go.
pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub project: PathBuf,
    pub root: PathBuf,
}

/// A project whose `origin` is `origin_url`, with one commit, and `table` as its `chock.toml`.
pub fn project(origin_url: &str, table: &str) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let project = base.join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("chock.toml"), table).unwrap();
    host_git(&project, &["init", "-q", "-b", "main"]);
    host_git(&project, &["config", "user.name", "t"]);
    host_git(&project, &["config", "user.email", "t@example.invalid"]);
    host_git(&project, &["remote", "add", "origin", origin_url]);
    host_git(&project, &["add", "-A"]);
    host_git(&project, &["commit", "-qm", "one"]);
    Fixture {
        dir,
        project,
        root: base.join("sessions"),
    }
}

/// A project whose `origin` is `real`, with a table that asks about `act` and lets commands reach
/// the decoy (so only the operation's own planning keeps it from there) and says nothing of the
/// real server (only the approved operation's grant reaches it); `rows` are added.
pub fn http_project(real: &GitHttpServer, decoy: &GitHttpServer, act: &str, rows: &str) -> Fixture {
    let mut table = format!("[[rule]]\naction = \"{act}\"\ndecision = \"ask\"\n");
    table.push_str(&format!(
        "[[rule]]\naction = \"net.connect.1.0.0.127.{}\"\ndecision = \"allow\"\n",
        decoy.addr().port()
    ));
    table.push_str(rows);
    project(&real.url(), &table)
}

/// A project whose `origin` is the ssh `server`, with a home of its own on the host whose
/// `~/.ssh` exists (empty: the host's user trusts no server yet), set as this process's `HOME`,
/// and the server's test agent as its `SSH_AUTH_SOCK`. The host side of an ssh operation reads
/// both, so a binary that calls this holds one test.
pub fn ssh_project(server: &SshServer) -> (Fixture, PathBuf) {
    let f = project(&server.url(), "");
    let home = f.dir.path().canonicalize().unwrap().join("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    // SAFETY: the binary's only test sets them before any thread of its own reads the environment.
    unsafe {
        std::env::set_var("SSH_AUTH_SOCK", server.agent().socket());
        std::env::set_var("HOME", &home);
    }
    (f, home)
}

/// A session of `f`'s project with the git shim.
pub fn open(f: &Fixture) -> Session {
    let opts = SessionOptions {
        sessions_root: Some(f.root.clone()),
        git_shim: Some(PathBuf::from(env!("CARGO_BIN_EXE_chock-git-shim"))),
        calls: Calls::Overlapping,
        ..SessionOptions::default()
    };
    Session::open(&f.project, opts).unwrap()
}

/// Runs `argv` as the call `id` of `s`, `person` answering; its exit code, output and errors.
pub async fn run_argv(
    s: &Session,
    person: &Arc<Person>,
    id: &str,
    argv: &[String],
) -> (i32, String, String) {
    let pipeline = s.pipeline(ApprovalBroker::new().with(person.clone()));
    let opts = CallOptions {
        call_id: Some(id.into()),
        ..CallOptions::default()
    };
    let r = s.confined_call_async(argv, &opts, &pipeline).await.unwrap();
    match r.outcome {
        CallOutcome::Ran {
            outcome,
            stdout,
            stderr,
            ..
        } => {
            let code = match outcome.status {
                chock_sandbox::ExitStatus::Exited(c) => c,
                other => panic!("{other:?}"),
            };
            (
                code,
                String::from_utf8_lossy(&stdout).into_owned(),
                String::from_utf8_lossy(&stderr).into_owned(),
            )
        }
        other => panic!("{other:?}"),
    }
}

/// Runs the shell `script` as the call `id` of `s`.
pub async fn run(
    s: &Session,
    person: &Arc<Person>,
    id: &str,
    script: &str,
) -> (i32, String, String) {
    let argv = ["sh", "-c", script].map(String::from).to_vec();
    run_argv(s, person, id, &argv).await
}

/// Every byte under `dir`, as text (the session's directory holds its log and its workspace).
pub fn all_text(dir: &Path) -> String {
    let mut text = String::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return text;
    };
    for e in entries.flatten() {
        let path = e.path();
        let Ok(kind) = e.file_type() else { continue };
        if kind.is_dir() {
            text.push_str(&all_text(&path));
        } else if kind.is_file()
            && let Ok(bytes) = std::fs::read(&path)
        {
            text.push_str(&String::from_utf8_lossy(&bytes));
        }
    }
    text
}

/// What the host left under the session's `git-host/` (nothing, once every call ended).
pub fn left_in_git_host(s: &Session) -> Vec<PathBuf> {
    std::fs::read_dir(s.log().dir().join("git-host"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default()
}

/// How many threads of this process are an agent proxy's accept loop (it names its thread).
pub fn proxy_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .flatten()
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm"))
                .is_ok_and(|c| c.trim() == "ssh-agent-proxy")
        })
        .count()
}
