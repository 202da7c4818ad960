//! `chock askpass` for real: git pushes to a smart-HTTP server that wants a password, with
//! `GIT_ASKPASS` the `chock-askpass` program, which carries git's prompt over a call's channel to the
//! host. The host answers only for a push a person approved in the call, only for a prompt about that
//! push's remote, and only with what the person typed; the password is redacted from the log and
//! never written to it or to the workspace.

mod remote_support;

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex, RwLock};

use chock_decide::{Answer, ApprovalBroker, Notice, Pipeline};
use chock_log::{Log, SessionHeader};
use chock_policy::Policy;
use chock_session::channel::{AskpassChannel, Credentials, serve};
use chock_test_support::GitProject;
use chock_test_support::git_servers::GitHttpServer;
use chock_workspace::{PushPlan, PushRequest, PushSource, plan_push};
use remote_support::{PASSWORD, all_text, http_server};

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A project whose `origin` is the server, a workspace cloned from it with one more commit, and
/// the session's pipeline; a person answers every question with `reply` (none: nobody is there).
struct Setup {
    project: GitProject,
    workspace: PathBuf,
    pipeline: Pipeline,
    asked: Arc<Mutex<Vec<String>>>,
    _person: Option<tokio::task::JoinHandle<()>>,
}

fn setup(server: &GitHttpServer, reply: Option<&str>) -> Setup {
    setup_with(server, reply, "")
}

/// As [`setup`], with `table` as the project's chock.toml.
fn setup_with(server: &GitHttpServer, reply: Option<&str>, table: &str) -> Setup {
    let project = GitProject::new();
    if !table.is_empty() {
        project.write("chock.toml", table);
    }
    git(project.path(), &["remote", "add", "origin", &server.url()]);
    let workspace = project.root().join("workspace");
    git(
        project.root(),
        &["clone", "-q", project.path().to_str().unwrap(), "workspace"],
    );
    std::fs::write(workspace.join("new.txt"), "new\n").unwrap();
    git(&workspace, &["add", "new.txt"]);
    git(&workspace, &["commit", "-qm", "second"]);
    let broker = ApprovalBroker::new();
    let asked = Arc::new(Mutex::new(Vec::new()));
    let person = reply.map(|reply| {
        let client = broker.attach("browser");
        let mut notices = broker.subscribe();
        let (asked, reply) = (asked.clone(), reply.to_owned());
        tokio::spawn(async move {
            while let Ok(notice) = notices.recv().await {
                if let Notice::Asked { question, .. } = notice {
                    asked.lock().unwrap().push(question.text.clone());
                    let _ = client.answer(
                        &question.id,
                        Answer::Reply {
                            text: reply.clone(),
                        },
                    );
                }
            }
        })
    });
    let policy = Policy::load(project.path()).unwrap();
    let log = Log::create(&project.root().join("sessions"), SessionHeader::default()).unwrap();
    let pipeline = Pipeline::new(log, Arc::new(RwLock::new(policy)), broker);
    Setup {
        project,
        workspace,
        pipeline,
        asked,
        _person: person,
    }
}

impl Setup {
    fn plan(&self) -> PushPlan {
        let request = PushRequest {
            remote: Some("origin".into()),
            branch: Some("main".into()),
            ..PushRequest::default()
        };
        let source = PushSource {
            git_dir: self.workspace.join(".git"),
        };
        let policy = Policy::load(self.project.path()).unwrap();
        plan_push(self.project.path(), &source, &request, &policy).unwrap()
    }

    /// Runs `plan`'s push with `chock-askpass` as git's askpass, serving the call's channel with
    /// `credentials` until git and everything it started are gone.
    async fn push(&self, plan: &PushPlan, credentials: &Credentials) -> Output {
        let push_dir = self
            .project
            .root()
            .join(format!("push-{}.git", plan.url.port));
        plan.write_push_dir(&push_dir, &[self.workspace.join(".git/objects")])
            .unwrap();
        let (host, call) = channel();
        let mut cmd = Command::new("git");
        cmd.args(plan.git_args())
            .current_dir(&self.workspace)
            .envs(plan.git_env(&push_dir))
            .env("GIT_ASKPASS", env!("CARGO_BIN_EXE_chock-askpass"))
            .env(
                chock_sandbox::HOST_CHANNEL_ENV,
                call.as_raw_fd().to_string(),
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let child = cmd.spawn().expect("git starts");
        drop(call);
        let handler = AskpassChannel {
            pipeline: &self.pipeline,
            call_id: "c1",
            credentials,
        };
        serve(host, &handler).await.expect("the channel is served");
        tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
            .await
            .unwrap()
    }

    /// The push of `main` to `origin`, approved in the call, run: its plan and what git did.
    async fn approved_push(&self) -> (PushPlan, Output) {
        let plan = self.plan();
        let credentials = Credentials::new();
        credentials.approve(&plan);
        let out = self.push(&plan, &credentials).await;
        (plan, out)
    }
}

/// The `decision` events for `action`: (allowed, decided_by).
fn decisions(s: &Setup, action: &str) -> Vec<(bool, String)> {
    chock_log::read_events(s.pipeline.log().dir())
        .unwrap()
        .into_iter()
        .filter(|e| e.kind.to_string() == "decision" && e.data["action"] == action)
        .map(|e| {
            (
                e.data["allowed"].as_bool().unwrap(),
                e.data["decided_by"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

/// The act git's password prompt for the test server is settled as.
const PASSWORD_ACT: &str = "secret.password.1.0.0.127";

/// A socket pair like the call's: the host's end close-on-exec, the call's end inherited.
fn channel() -> (OwnedFd, OwnedFd) {
    let (host, call) = rustix::net::socketpair(
        rustix::net::AddressFamily::UNIX,
        rustix::net::SocketType::SEQPACKET,
        rustix::net::SocketFlags::CLOEXEC,
        None,
    )
    .unwrap();
    rustix::io::fcntl_setfd(&call, rustix::io::FdFlags::empty()).unwrap();
    (host, call)
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approved_push_gets_the_password_the_person_typed_and_the_log_never_holds_it() {
    let Some(server) = http_server(PASSWORD) else {
        return;
    };
    let s = setup(&server, Some(PASSWORD));
    let (plan, out) = s.approved_push().await;
    assert!(out.status.success(), "{out:?}");
    assert_eq!(server.head("main"), Some(plan.refs[0].commit.clone()));
    let asked = s.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(asked[0].contains(&server.url()), "{}", asked[0]);
    assert!(
        asked[0].contains("Password for 'http://alice@"),
        "{}",
        asked[0]
    );
    assert_eq!(s.pipeline.log().redact(PASSWORD), "[REDACTED]");
    let log = all_text(&s.project.root().join("sessions"));
    assert!(log.contains("approval.answer"), "{log}");
    // The question is logged as a secret's, so every client reads its answer without echo.
    let ask = log
        .lines()
        .find(|l| l.contains("approval.ask") && l.contains("Password for"))
        .expect("the password's question is logged");
    assert!(ask.contains("\"secret\":true"), "{ask}");
    assert!(!log.contains(PASSWORD), "the password is in the log");
    assert!(!all_text(&s.workspace).contains(PASSWORD));
    assert!(!all_text(s.project.path()).contains(PASSWORD));
}

#[tokio::test(flavor = "multi_thread")]
async fn without_an_approved_push_nobody_is_asked_and_no_password_reaches_the_server() {
    let Some(server) = http_server(PASSWORD) else {
        return;
    };
    let s = setup(&server, Some(PASSWORD));
    let plan = s.plan();
    let credentials = Credentials::new();
    let out = s.push(&plan, &credentials).await;
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no push or fetch of this call was approved")
    );
    assert!(s.asked.lock().unwrap().is_empty(), "a person was asked");
    assert!(!server.saw_the_password());
    assert_eq!(server.head("main"), None);

    // Approved, then the call ended: the same.
    credentials.approve(&plan);
    credentials.end();
    let out = s.push(&plan, &credentials).await;
    assert!(!out.status.success());
    assert!(s.asked.lock().unwrap().is_empty());
    assert!(!server.saw_the_password());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_prompt_about_another_remote_is_refused_without_asking() {
    let Some(server) = http_server(PASSWORD) else {
        return;
    };
    let other = GitHttpServer::start("alice", PASSWORD);
    let s = setup(&server, Some(PASSWORD));
    let approved = s.plan();
    let credentials = Credentials::new();
    credentials.approve(&approved);
    // The same refs, pushed to another server (another port): git prompts about that one.
    git(
        s.project.path(),
        &["remote", "set-url", "origin", &other.url()],
    );
    let elsewhere = s.plan();
    let out = s.push(&elsewhere, &credentials).await;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not about the approved push's remote"));
    assert!(s.asked.lock().unwrap().is_empty(), "a person was asked");
    assert!(!other.saw_the_password());
    assert_eq!(other.head("main"), None);
}

#[tokio::test(flavor = "multi_thread")]
async fn nobody_answering_is_a_refusal() {
    let Some(server) = http_server(PASSWORD) else {
        return;
    };
    let s = setup(&server, None);
    let (_, out) = s.approved_push().await;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("nobody answered"));
    assert!(!server.saw_the_password());
    assert_eq!(server.head("main"), None);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_password_the_redaction_cannot_cover_is_never_handed_to_git() {
    // Shorter than the log's redaction accepts: git could echo it into a logged line, so the
    // person's answer is refused rather than passed on.
    let short = "pw1";
    let Some(server) = http_server(short) else {
        return;
    };
    let s = setup(&server, Some(short));
    let (_, out) = s.approved_push().await;
    assert!(!out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("could not be asked"),
        "{out:?}"
    );
    assert_eq!(
        s.asked.lock().unwrap().len(),
        1,
        "the person was asked once"
    );
    assert!(!server.saw_the_password());
    assert_eq!(server.head("main"), None);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_table_that_denies_the_hosts_password_asks_nobody_and_the_push_fails() {
    let Some(server) = http_server(PASSWORD) else {
        return;
    };
    let s = setup_with(
        &server,
        Some(PASSWORD),
        "[[rule]]\naction = \"secret.password.1.0.0.127\"\ndecision = \"deny\"\n",
    );
    let (_, out) = s.approved_push().await;
    assert!(!out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("`secret.password.1.0.0.127` is denied by")
            && stderr.contains("chock.toml:2 (rule `secret.password.1.0.0.127`)")
            && stderr.contains("nobody is asked"),
        "{stderr}"
    );
    assert!(s.asked.lock().unwrap().is_empty(), "a prompt was shown");
    assert!(!server.saw_the_password());
    assert_eq!(server.head("main"), None);
    let logged = decisions(&s, PASSWORD_ACT);
    assert!(!logged.is_empty(), "the deny is not logged");
    assert!(logged.iter().all(|(allowed, _)| !allowed), "{logged:?}");
    assert!(logged[0].1.contains("chock.toml:2"), "{logged:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_shipped_ask_puts_the_prompt_to_the_person_and_the_push_works() {
    let Some(server) = http_server(PASSWORD) else {
        return;
    };
    // Another host's password denied: this host's is the shipped `ask`.
    let s = setup_with(
        &server,
        Some(PASSWORD),
        "[[rule]]\naction = \"secret.password.org.example.*\"\ndecision = \"deny\"\n",
    );
    let (plan, out) = s.approved_push().await;
    assert!(out.status.success(), "{out:?}");
    assert_eq!(server.head("main"), Some(plan.refs[0].commit.clone()));
    let asked = s.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "the prompt is the one question: {asked:?}");
    assert!(asked[0].contains(PASSWORD_ACT), "{}", asked[0]);
    let logged = decisions(&s, PASSWORD_ACT);
    assert_eq!(logged.len(), 1, "{logged:?}");
    assert!(logged[0].0, "{logged:?}");
    assert!(
        logged[0].1.contains("`secret.password.*`")
            && logged[0].1.contains("ask; allowed by browser"),
        "{logged:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn allow_still_asks_the_person_and_hands_out_nothing_stored() {
    let table = "[[rule]]\naction = \"secret.password.1.0.0.127\"\ndecision = \"allow\"\n";
    let Some(server) = http_server(PASSWORD) else {
        return;
    };
    let s = setup_with(&server, Some(PASSWORD), table);
    let (plan, out) = s.approved_push().await;
    assert!(out.status.success(), "{out:?}");
    assert_eq!(server.head("main"), Some(plan.refs[0].commit.clone()));
    assert_eq!(s.asked.lock().unwrap().len(), 1, "the person typed it");
    let logged = decisions(&s, PASSWORD_ACT);
    assert_eq!(logged.len(), 1, "{logged:?}");
    assert!(
        logged[0].0 && logged[0].1.contains("allowed by browser"),
        "{logged:?}"
    );

    // With nobody there, `allow` gives git nothing.
    let server = GitHttpServer::start("alice", PASSWORD);
    let s = setup_with(&server, None, table);
    let (_, out) = s.approved_push().await;
    assert!(!out.status.success(), "{out:?}");
    assert!(!server.saw_the_password());
    assert_eq!(server.head("main"), None);
    let logged = decisions(&s, PASSWORD_ACT);
    assert!(logged.iter().all(|(allowed, _)| !allowed), "{logged:?}");
}
