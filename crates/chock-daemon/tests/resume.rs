//! `sessions.resume`: a session that ended in one daemon is taken up by the next on a follow-up —
//! the same id, its log going on (and verifying), the follow-up as its next turn. Refused for a
//! session this daemon runs, one nobody knows, and an empty task.

mod support;

use chock_client::{ClientError, DaemonClient};
use chock_protocol::rpc::{
    Call, Done, ErrorKind, Notice, ResumeParams, SessionParams, SessionState, Started, Verified,
};
use support::*;

fn resume(session: &str, task: &str, provider: &str) -> Call {
    Call::SessionsResume(ResumeParams {
        session: session.into(),
        task: task.into(),
        provider: Some(provider.into()),
        model: None,
        subscribe: true,
    })
}

async fn refused(client: &mut DaemonClient, call: Call, kind: ErrorKind) {
    match client.call::<Started>(&call).await {
        Err(ClientError::Rpc(e)) => assert_eq!(e.kind(), kind, "{e}"),
        other => panic!("expected {kind:?}, got {other:?}"),
    }
}

async fn until_state(client: &mut DaemonClient, id: &str, state: SessionState) {
    until(client, |n| match n {
        Notice::SessionState(s) if s.session == id && s.state == state => Some(()),
        _ => None,
    })
    .await;
}

#[test]
fn a_session_ended_in_one_daemon_goes_on_in_the_next_on_a_follow_up() {
    let world = World::new();
    let provider = world.script(
        "two.toml",
        "[[turn]]\ntext = \"first answer\"\n\n[[turn]]\ntext = \"second answer\"\n",
    );
    let id = runtime().block_on(async {
        let server = world.serve().await;
        let mut client = world.client(&server).await;
        let id = start(&mut client, &world, &provider, "the task")
            .await
            .session;
        let _: chock_protocol::rpc::Subscribed = client
            .call(&Call::SessionsSubscribe(
                chock_protocol::rpc::SubscribeParams {
                    session: id.clone(),
                    from_seq: None,
                },
            ))
            .await
            .unwrap();
        until_state(&mut client, &id, SessionState::Idle).await;
        refused(&mut client, resume(&id, "more", &provider), ErrorKind::Busy).await;
        let _: Done = client
            .call(&Call::SessionsEnd(SessionParams {
                session: id.clone(),
            }))
            .await
            .unwrap();
        until_state(&mut client, &id, SessionState::Ended).await;
        server.stop().await;
        id
    });
    let ended_at = world.log_lines(&id).len();
    runtime().block_on(async {
        let server = world.serve().await;
        let mut client = world.client(&server).await;
        refused(
            &mut client,
            resume(&id, "  ", &provider),
            ErrorKind::BadInput,
        )
        .await;
        refused(
            &mut client,
            resume("20990101T000000Z-ffffff", "more", &provider),
            ErrorKind::UnknownSession,
        )
        .await;
        let started: Started = client
            .call(&resume(&id[..12], "a follow-up", &provider))
            .await
            .unwrap();
        assert_eq!(started.session, id, "the same session, named by a prefix");
        until_state(&mut client, &id, SessionState::Idle).await;
        let verified: Verified = client
            .call(&Call::LogVerify(SessionParams {
                session: id.clone(),
            }))
            .await
            .unwrap();
        assert!(verified.intact, "{verified:?}");
        server.stop().await;
    });
    let log = world.log_lines(&id);
    assert!(log.len() > ended_at, "the log went on");
    let inputs: Vec<&str> = log
        .iter()
        .filter(|l| l["kind"] == "turn.start")
        .filter_map(|l| l["data"]["input"].as_str())
        .collect();
    assert_eq!(inputs, ["the task", "a follow-up"]);
    assert!(
        log[ended_at..]
            .iter()
            .any(|l| l["kind"] == "model.response"),
        "the follow-up was put to the model"
    );
}
