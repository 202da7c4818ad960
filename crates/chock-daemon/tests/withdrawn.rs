//! An apply whose client goes away while its question is open: refused and logged as nobody
//! answering (`approval.answer` `none`, then the refused `decision`), nothing written, the question
//! closed for every answerer (`approval.resolved`, `approvals.pending` empty, a later answer an
//! error), and the session's log free for the next review — over a WebSocket that closes and over
//! a `POST /rpc` whose connection closes, for a session running in the daemon and one that ended.
//! An apply's question takes yes once or no, never yes for the session.

mod support;

use chock_client::{ClientError, DaemonClient};
use chock_protocol::log::AnswerKind;
use chock_protocol::rpc::{
    AnswerParams, Applied, ApplyParams, Approval, Call, DiffParams, ErrorKind, Notice, Pending,
    PendingParams, ReviewDiff, Selection, SessionParams, SessionState,
};
use support::*;
use tokio::io::AsyncWriteExt;

const EDIT: &str = r#"
[[turn]]
[[turn.call]]
tool = "write_file"
input = { path = "README.md", content = "hello, changed\n" }

[[turn]]
text = "done"
"#;

/// Waits for the `workspace.apply` question of `session` to be asked.
async fn asked(client: &mut DaemonClient, session: &str) -> Approval {
    until(client, |n| match n {
        Notice::ApprovalAsked(q) if q.session == session => Some(q.clone()),
        _ => None,
    })
    .await
}

/// Waits for `question` to be resolved; who answered (`None`: nobody).
async fn resolved(
    client: &mut DaemonClient,
    question: &str,
) -> (Option<String>, Option<AnswerKind>) {
    until(client, |n| match n {
        Notice::ApprovalResolved(r) if r.question == question => Some((r.by.clone(), r.answer)),
        _ => None,
    })
    .await
}

async fn answer(
    client: &mut DaemonClient,
    session: &str,
    question: &str,
    answer: AnswerKind,
) -> Result<chock_protocol::rpc::Done, ClientError> {
    client
        .call(&Call::ApprovalsAnswer(AnswerParams {
            session: session.into(),
            question: question.into(),
            answer,
            reasons: None,
            reply: None,
        }))
        .await
}

fn refused_kind(outcome: Result<chock_protocol::rpc::Done, ClientError>) -> (ErrorKind, String) {
    match outcome {
        Err(ClientError::Rpc(e)) => (e.kind(), e.message.clone()),
        other => panic!("the answer was taken: {other:?}"),
    }
}

/// The log holds `question`'s ask, then its answer `none` (nobody), then a refused decision.
fn refusal_logged(world: &World, session: &str, question: &str) {
    let log = world.log_lines(session);
    let at = |pred: &dyn Fn(&serde_json::Value) -> bool| log.iter().position(pred);
    let ask = at(&|l| l["kind"] == "approval.ask" && l["data"]["question"] == question)
        .unwrap_or_else(|| panic!("no ask: {log:#?}"));
    let answer = at(&|l| l["kind"] == "approval.answer" && l["data"]["question"] == question)
        .unwrap_or_else(|| panic!("the question was left open in the log: {log:#?}"));
    assert!(ask < answer);
    assert_eq!(log[answer]["data"]["answer"], "none", "{:#?}", log[answer]);
    assert!(log[answer]["data"]["by"].is_null(), "{:#?}", log[answer]);
    let decision = log[answer..]
        .iter()
        .find(|l| l["kind"] == "decision")
        .unwrap_or_else(|| panic!("no decision after the answer: {log:#?}"));
    assert_eq!(decision["data"]["allowed"], false, "{decision:#?}");
    assert_eq!(
        decision["data"]["action"], "workspace.apply",
        "{decision:#?}"
    );
    assert!(
        !log.iter().any(|l| l["kind"] == "workspace.apply"),
        "nothing was applied: {log:#?}"
    );
}

async fn nothing_pending(client: &mut DaemonClient, session: &str) {
    let pending: Pending = client
        .call(&Call::ApprovalsPending(PendingParams {
            session: Some(session.into()),
        }))
        .await
        .unwrap();
    assert!(pending.approvals.is_empty(), "{pending:#?}");
}

/// `review.apply` as one `POST /rpc` on the socket, whose connection is dropped once its
/// question is asked (`watcher` hears it).
async fn post_and_leave(
    world: &World,
    socket: &std::path::Path,
    watcher: &mut DaemonClient,
    params: &ApplyParams,
) -> Approval {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": 7,
        "method": "review.apply",
        "params": params,
    })
    .to_string();
    let mut stream = tokio::net::UnixStream::connect(socket).await.unwrap();
    let request = format!(
        "POST /rpc HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nX-Chock: 1\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let q = asked(watcher, &params.session).await;
    drop(stream);
    let _ = world;
    q
}

#[test]
fn an_apply_whose_client_leaves_mid_question_is_refused_logged_and_the_log_let_go() {
    let world = World::new();
    world.policy("");
    let provider = world.script("edit.toml", EDIT);
    let original = std::fs::read_to_string(world.project.join("README.md")).unwrap();
    runtime().block_on(async {
        let server = world.serve().await;
        let mut watcher = world.client(&server).await;
        let started = start(&mut watcher, &world, &provider, "edit the readme").await;
        let id = started.session.clone();
        until(&mut watcher, |n| match n {
            Notice::SessionState(s) if s.session == id && s.state == SessionState::Idle => Some(()),
            _ => None,
        })
        .await;
        let diff: ReviewDiff = watcher
            .call(&Call::ReviewDiff(DiffParams {
                session: id.clone(),
                selection: Selection::default(),
            }))
            .await
            .unwrap();
        let params = ApplyParams {
            session: id.clone(),
            digest: diff.digest.clone(),
            selection: Selection::default(),
        };

        // 1. The session runs here; the client that asked for the apply closes its WebSocket.
        let mut leaver = world.client(&server).await;
        leaver
            .send(&Call::ReviewApply(params.clone()))
            .await
            .unwrap();
        let q = asked(&mut watcher, &id).await;
        assert_eq!(q.action.as_deref(), Some("workspace.apply"));
        assert_eq!(
            q.answers,
            [AnswerKind::AllowOnce, AnswerKind::Deny],
            "an apply is offered once or not at all"
        );
        leaver.close().await;
        assert_eq!(resolved(&mut watcher, &q.question).await, (None, None));
        refusal_logged(&world, &id, &q.question);
        nothing_pending(&mut watcher, &id).await;
        let (kind, message) =
            refused_kind(answer(&mut watcher, &id, &q.question, AnswerKind::AllowOnce).await);
        assert_eq!(kind, ErrorKind::AnswerRefused, "{message}");
        assert!(message.contains("already resolved"), "{message}");
        assert_eq!(
            std::fs::read_to_string(world.project.join("README.md")).unwrap(),
            original
        );

        // 2. The session ended: the review opens its log itself; the POST's connection closes.
        let _: chock_protocol::rpc::Done = watcher
            .call(&Call::SessionsEnd(SessionParams {
                session: id.clone(),
            }))
            .await
            .unwrap();
        let q = post_and_leave(&world, server.socket(), &mut watcher, &params).await;
        assert_eq!(q.answers, [AnswerKind::AllowOnce, AnswerKind::Deny]);
        assert_eq!(resolved(&mut watcher, &q.question).await, (None, None));
        refusal_logged(&world, &id, &q.question);
        nothing_pending(&mut watcher, &id).await;
        let (kind, message) =
            refused_kind(answer(&mut watcher, &id, &q.question, AnswerKind::AllowOnce).await);
        assert!(
            matches!(kind, ErrorKind::AnswerRefused | ErrorKind::NotRunning),
            "{kind:?}: {message}"
        );
        assert_eq!(
            std::fs::read_to_string(world.project.join("README.md")).unwrap(),
            original
        );

        // 3. The log was let go: the next review opens it, refuses yes-for-the-session, and
        // applies on yes once.
        let mut answerer = world.client(&server).await;
        let apply = watcher
            .send(&Call::ReviewApply(params.clone()))
            .await
            .unwrap();
        let q = asked(&mut answerer, &id).await;
        let (kind, message) =
            refused_kind(answer(&mut answerer, &id, &q.question, AnswerKind::AllowSession).await);
        assert_eq!(kind, ErrorKind::AnswerRefused, "{message}");
        assert!(message.contains("allow_session"), "{message}");
        answer(&mut answerer, &id, &q.question, AnswerKind::AllowOnce)
            .await
            .unwrap();
        let applied: Applied = loop {
            match watcher.frame().await.unwrap() {
                chock_protocol::rpc::ServerFrame::Response(r) if r.id.as_ref() == Some(&apply) => {
                    break r.into_result().unwrap();
                }
                _ => {}
            }
        };
        assert_eq!(applied.paths, ["README.md"]);
        assert_eq!(
            std::fs::read_to_string(world.project.join("README.md")).unwrap(),
            "hello, changed\n"
        );
        server.stop().await;
    });
}
