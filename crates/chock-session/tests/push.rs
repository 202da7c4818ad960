//! An approved `git push` through a real sandbox, the git shim and a real smart-HTTP server that
//! wants a password: the push goes to the remote of the **host's** configuration whatever the
//! workspace says, the password a person typed reaches the server and nowhere else (not the log,
//! not the workspace), a refused push reaches nothing, and what the call was given is gone after it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use chock_decide::{Answer, AnswerFuture, Answerer, ApprovalBroker, Question, QuestionKind, Role};
use chock_session::{CallOptions, CallOutcome, Calls, Session, SessionOptions};
use chock_test_support::git_servers::{GitHttpServer, HTTP_BACKEND};
use chock_test_support::installed;

const PASSWORD: &str = "correct-horse-battery-staple";

/// One test at a time: each runs sandboxes and servers.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

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

/// A person: approvals answered `approve`, free questions answered with the password; every
/// question's text noted.
#[derive(Debug)]
struct Person {
    approve: bool,
    asked: Mutex<Vec<(QuestionKind, Option<String>, String)>>,
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

struct Fixture {
    _dir: tempfile::TempDir,
    project: PathBuf,
    root: PathBuf,
}

/// A project whose `origin` is `real`, with a table that lets commands reach the decoy (so only the
/// push's own planning keeps it from there) and says nothing of the real server (only the approved
/// push's grant reaches it).
fn fixture(real: &GitHttpServer, decoy: &GitHttpServer) -> Fixture {
    fixture_with(real, decoy, "")
}

/// As [`fixture`], with `rows` added to the table.
fn fixture_with(real: &GitHttpServer, decoy: &GitHttpServer, rows: &str) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let project = base.join("project");
    std::fs::create_dir_all(&project).unwrap();
    let mut table = String::from("[[rule]]\naction = \"git.push\"\ndecision = \"ask\"\n");
    table.push_str(&format!(
        "[[rule]]\naction = \"net.connect.1.0.0.127.{}\"\ndecision = \"allow\"\n",
        decoy.addr().port()
    ));
    table.push_str(rows);
    std::fs::write(project.join("chock.toml"), table).unwrap();
    host_git(&project, &["init", "-q", "-b", "main"]);
    host_git(&project, &["config", "user.name", "t"]);
    host_git(&project, &["config", "user.email", "t@example.invalid"]);
    host_git(&project, &["remote", "add", "origin", &real.url()]);
    host_git(&project, &["add", "-A"]);
    host_git(&project, &["commit", "-qm", "one"]);
    Fixture {
        _dir: dir,
        project,
        root: base.join("sessions"),
    }
}

fn open(f: &Fixture) -> Session {
    let opts = SessionOptions {
        sessions_root: Some(f.root.clone()),
        git_shim: Some(PathBuf::from(env!("CARGO_BIN_EXE_chock-git-shim"))),
        calls: Calls::Overlapping,
        ..SessionOptions::default()
    };
    Session::open(&f.project, opts).unwrap()
}

async fn run(s: &Session, person: &Arc<Person>, script: &str) -> (i32, String, String) {
    let pipeline = s.pipeline(ApprovalBroker::new().with(person.clone()));
    let opts = CallOptions {
        call_id: Some("p1".into()),
        ..CallOptions::default()
    };
    let argv = vec!["sh".to_string(), "-c".to_string(), script.to_string()];
    let r = s
        .confined_call_async(&argv, &opts, &pipeline)
        .await
        .unwrap();
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

/// Every byte under `dir`, as text (the session's directory holds its log and its workspace).
fn all_text(dir: &Path) -> String {
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

/// The workspace commits, then rewrites `origin`, points the real URL at the decoy with
/// `insteadOf` and asks git to store credentials, then pushes `origin main`.
fn script(real: &GitHttpServer, decoy: &GitHttpServer) -> String {
    format!(
        "echo new > new.txt && git add new.txt && git commit -qm two && \
         git remote set-url origin '{decoy}' && \
         git config 'url.{decoy}.insteadOf' '{real}' && \
         git config credential.helper store && \
         git push origin main; echo \"push $?\"; \
         echo \"stored: $(cat \"$HOME/.git-credentials\" 2>/dev/null)\"; git rev-parse HEAD",
        decoy = decoy.url(),
        real = real.url()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_push_reaches_the_hosts_remote_with_the_typed_password_and_leaves_nothing() {
    if !installed(HTTP_BACKEND) {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().await;
    let real = GitHttpServer::start("alice", PASSWORD);
    let decoy = GitHttpServer::start("alice", PASSWORD);
    let f = fixture(&real, &decoy);
    let s = open(&f);
    let person = Arc::new(Person {
        approve: true,
        asked: Mutex::default(),
    });
    let (code, out, err) = run(&s, &person, &script(&real, &decoy)).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("push 0"), "{out}{err}");
    let commit = out.lines().last().unwrap().trim().to_string();
    // The workspace's `credential.helper store` was never run: nothing stored in the call's home.
    assert!(out.contains("stored: \n"), "{out}");
    assert!(
        !out.contains(PASSWORD) && !err.contains(PASSWORD),
        "{out}{err}"
    );
    assert_eq!(real.head("main"), Some(commit.clone()), "{err}");
    assert!(
        decoy.served().is_empty(),
        "the decoy was reached: {:?}",
        decoy.served()
    );
    let asked = person.asked.lock().unwrap().clone();
    let push = asked
        .iter()
        .find(|(_, action, _)| action.as_deref() == Some("git.push"))
        .expect("the push was asked about");
    assert!(push.2.contains(&real.url()), "{}", push.2);
    assert!(push.2.contains(&commit[..12]), "{}", push.2);
    assert!(push.2.contains("refs/heads/main"), "{}", push.2);
    assert!(
        push.2
            .contains(&format!("{}, which is not used", decoy.url())),
        "{}",
        push.2
    );
    let password_questions = asked
        .iter()
        .filter(|(k, _, _)| *k == QuestionKind::Question)
        .count();
    assert_eq!(password_questions, 1, "{asked:?}");
    // The transport helpers the push starts (`git remote-http`, `git send-pack`) are the act the
    // person approved: nobody is asked about them, and the harness's allow is logged.
    let approvals: Vec<String> = asked.iter().filter_map(|(_, a, _)| a.clone()).collect();
    assert!(
        approvals.iter().all(|a| a != "git.unknown"),
        "a helper was asked about: {asked:?}"
    );
    assert_eq!(
        approvals.iter().filter(|a| *a == "git.push").count(),
        1,
        "{asked:?}"
    );
    let session_dir = s.log().dir().to_path_buf();
    assert!(
        std::fs::read_to_string(session_dir.join("log.jsonl"))
            .unwrap()
            .contains(&format!(
                "a transport helper of the approved push to {}",
                real.url()
            )),
        "the helpers' decision is logged"
    );
    // The password is in neither the log nor the workspace (the session's directory holds both),
    // nor the project; and what the call was given is gone.
    assert!(
        !all_text(&session_dir).contains(PASSWORD),
        "the password was written"
    );
    assert!(!all_text(&f.project).contains(PASSWORD));
    let left: Vec<_> = std::fs::read_dir(session_dir.join("git-host"))
        .unwrap()
        .collect();
    assert!(left.is_empty(), "left after the call: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_push_reaches_nothing_and_nobody_is_asked_for_a_password() {
    if !installed(HTTP_BACKEND) {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().await;
    let real = GitHttpServer::start("alice", PASSWORD);
    let decoy = GitHttpServer::start("alice", PASSWORD);
    let f = fixture(&real, &decoy);
    let s = open(&f);
    let person = Arc::new(Person {
        approve: false,
        asked: Mutex::default(),
    });
    let (_, out, err) = run(&s, &person, &script(&real, &decoy)).await;
    assert!(out.contains("push 126"), "{out}{err}");
    assert!(real.served().is_empty(), "{:?}", real.served());
    assert!(decoy.served().is_empty(), "{:?}", decoy.served());
    assert_eq!(real.head("main"), None);
    let asked = person.asked.lock().unwrap().clone();
    assert!(
        asked.iter().all(|(k, _, _)| *k != QuestionKind::Question),
        "{asked:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_denying_the_hosts_password_stops_an_approved_push_before_any_prompt() {
    if !installed(HTTP_BACKEND) {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().await;
    let real = GitHttpServer::start("alice", PASSWORD);
    let decoy = GitHttpServer::start("alice", PASSWORD);
    let f = fixture_with(
        &real,
        &decoy,
        "[[rule]]\naction = \"secret.password.1.0.0.127\"\ndecision = \"deny\"\n",
    );
    let s = open(&f);
    let person = Arc::new(Person {
        approve: true,
        asked: Mutex::default(),
    });
    let (_, out, err) = run(&s, &person, &script(&real, &decoy)).await;
    assert!(!out.contains("push 0"), "{out}{err}");
    assert!(
        err.contains("`secret.password.1.0.0.127` is denied by"),
        "{out}{err}"
    );
    assert_eq!(real.head("main"), None);
    assert!(!real.saw_the_password());
    let asked = person.asked.lock().unwrap().clone();
    assert!(
        asked
            .iter()
            .any(|(_, action, _)| action.as_deref() == Some("git.push")),
        "{asked:?}"
    );
    assert!(
        asked.iter().all(|(k, _, _)| *k != QuestionKind::Question),
        "a password prompt was shown: {asked:?}"
    );
    let denied = chock_log::read_events(s.log().dir())
        .unwrap()
        .into_iter()
        .any(|e| {
            e.kind.to_string() == "decision"
                && e.data["action"] == "secret.password.1.0.0.127"
                && e.data["allowed"] == false
        });
    assert!(denied, "the deny is not in the log");
}
