//! A password answered over the daemon's socket reaches git and nothing else: the real
//! `chock serve` (its `chock-git` beside it), a scripted agent whose command commits and pushes to
//! a real smart-HTTP server that wants a password, one client answering the push's question and
//! then git's password question (a secret) over the unix socket, and a second client subscribed
//! to the session from its start. The push lands, so the password went through; its bytes are in
//! no notification the second client was sent and not in the session's `log.jsonl`.

mod browser_support;

use browser_support::{World, chock_binary, serve};
use chock_client::DaemonClient;
use chock_protocol::log::AnswerKind;
use chock_protocol::rpc::{
    AnswerParams, Call, Done, Notice, Pending, PendingParams, SessionState, StartParams, Started,
};
use chock_test_support::git_servers::{GitHttpServer, HTTP_BACKEND};
use chock_test_support::installed;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const PASSWORD: &str = "correct-horse-battery-staple";

/// One turn: a commit and a push of it, then closing words.
fn recording() -> String {
    let command = "echo new > new.txt && git add new.txt && \
                   git -c user.name=t -c user.email=t@example.invalid commit -qm two && \
                   git push origin main; echo \"push $?\"";
    format!(
        "[[turn]]\n[[turn.call]]\ntool = \"run_command\"\ninput = {{ command = {} }}\n\n\
         [[turn]]\ntext = \"pushed\"\n",
        serde_json::to_string(command).unwrap()
    )
}

/// Answers the session's questions over the socket as a person at a terminal would: the push
/// `allow_once` (the `git remote-http` and `git send-pack` it starts are part of that act, never
/// asked about), git's password (a secret question) with [`PASSWORD`]; until `done`. Returns whether a password
/// question came and was marked secret.
async fn person(socket: &std::path::Path, session: &str, done: Arc<AtomicBool>) -> bool {
    let mut client = DaemonClient::unix(socket).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(170);
    let mut answered = Vec::new();
    let mut secret = false;
    while !done.load(Ordering::SeqCst) {
        assert!(Instant::now() < deadline, "answered only {answered:?}");
        let pending: Pending = client
            .call(&Call::ApprovalsPending(PendingParams {
                session: Some(session.into()),
            }))
            .await
            .unwrap();
        for q in pending.approvals.into_iter().filter(|q| q.answerable) {
            if answered.contains(&q.question) {
                continue;
            }
            let (answer, reply) = match q.action.as_deref() {
                Some("git.push") => (AnswerKind::AllowOnce, None),
                Some(other) => panic!("unexpected question about {other}: {}", q.what),
                None => (AnswerKind::Reply, Some(PASSWORD.to_string())),
            };
            let _: Done = client
                .call(&Call::ApprovalsAnswer(AnswerParams {
                    session: session.into(),
                    question: q.question.clone(),
                    answer,
                    reasons: None,
                    reply,
                }))
                .await
                .unwrap();
            answered.push(q.question.clone());
            if q.action.is_none() {
                secret = q.secret;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    client.close().await;
    secret
}

#[test]
fn a_password_answered_over_the_socket_is_in_no_notification_and_not_in_the_log() {
    if !installed(HTTP_BACKEND) {
        return;
    }
    let server = GitHttpServer::start("alice", PASSWORD);
    let chock = chock_binary();
    let world = World::new();
    world.write("README.md", "hello\n");
    world.git(&["init", "-q", "-b", "main"]);
    world.git(&["add", "-A"]);
    world.git(&["commit", "-qm", "start"]);
    world.git(&["remote", "add", "origin", &server.url()]);
    let script = world.outside("push.toml", &recording());
    let provider = format!("script:{}", script.display());
    let (daemon, _link) = serve(&world, &chock);
    let socket = world.chock_runtime().join("daemon.sock");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let (session, heard, secret) = runtime.block_on(async {
        // The second client: subscribed from the session's start, every frame kept as sent.
        let mut watcher = DaemonClient::unix(&socket).await.unwrap();
        let started: Started = watcher
            .call(&Call::SessionsStart(StartParams {
                task: "push the change".into(),
                project: world.project.display().to_string(),
                provider: Some(provider),
                model: None,
                subscribe: true,
            }))
            .await
            .unwrap();
        let session = started.session.clone();
        let done = Arc::new(AtomicBool::new(false));
        let answering = tokio::spawn({
            let (socket, session, done) = (socket.clone(), session.clone(), done.clone());
            async move { person(&socket, &session, done).await }
        });
        let mut heard = Vec::new();
        let wait = async {
            loop {
                let n = watcher.next_notice().await.unwrap();
                heard.push(serde_json::to_string(&n).unwrap());
                if let Ok(Notice::SessionState(s)) = n.notice()
                    && s.session == session
                    && s.state == SessionState::Idle
                {
                    break;
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(180), wait)
            .await
            .unwrap_or_else(|_| panic!("the session never went idle: {}", daemon.stderr()));
        done.store(true, Ordering::SeqCst);
        let secret = answering.await.unwrap();
        watcher.close().await;
        (session, heard, secret)
    });
    assert!(secret, "the password question was not marked secret");
    let log = std::fs::read_to_string(world.sessions_root().join(&session).join("log.jsonl"))
        .unwrap_or_else(|e| panic!("the session's log: {e}"));
    assert!(
        server.head("main").is_some(),
        "the push did not land (so the password never reached git): {}",
        log.lines().skip(20).collect::<Vec<_>>().join("\n")
    );
    assert!(
        heard.iter().any(|n| n.contains("\"secret\":true")),
        "the second client never heard of the question"
    );
    for n in &heard {
        assert!(
            !n.contains(PASSWORD),
            "a notification holds the password: {n}"
        );
    }
    assert!(!log.contains(PASSWORD), "log.jsonl holds the password");
    assert!(
        log.contains("secret.password.1.0.0.127"),
        "the password's act is not in the log"
    );
    drop(daemon);
}
