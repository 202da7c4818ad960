//! A session stopped by its budget ends `out_of_budget` in the daemon too, not `done`: when a
//! client ends it, `session.end` and its summary say how its last task ended (the one rule the
//! CLI, the terminal interface and the editor server end a session by).

mod support;

use chock_protocol::rpc::{Call, Done, Notice, SessionParams, SessionState, Subscribed};
use support::*;

#[test]
fn a_session_stopped_by_its_budget_ends_out_of_budget_when_a_client_ends_it() {
    let world = World::new();
    world.policy("[budget]\ntokens = 1\n");
    let provider = world.script("one.toml", "[[turn]]\ntext = \"never asked\"\n");
    let id = runtime().block_on(async {
        let server = world.serve().await;
        let mut client = world.client(&server).await;
        let id = start(&mut client, &world, &provider, "spend").await.session;
        let _: Subscribed = client
            .call(&Call::SessionsSubscribe(
                chock_protocol::rpc::SubscribeParams {
                    session: id.clone(),
                    from_seq: None,
                },
            ))
            .await
            .unwrap();
        until(&mut client, |n| match n {
            Notice::SessionState(s) if s.session == id && s.state == SessionState::Idle => Some(()),
            _ => None,
        })
        .await;
        let _: Done = client
            .call(&Call::SessionsEnd(SessionParams {
                session: id.clone(),
            }))
            .await
            .unwrap();
        until(&mut client, |n| match n {
            Notice::SessionState(s) if s.session == id && s.state == SessionState::Ended => {
                Some(())
            }
            _ => None,
        })
        .await;
        server.stop().await;
        id
    });
    let log = world.log_lines(&id);
    assert!(
        !log.iter().any(|l| l["kind"] == "model.request"),
        "no model call fits a budget of one token"
    );
    let end = log
        .iter()
        .find(|l| l["kind"] == "session.end")
        .expect("the session ended");
    assert_eq!(end["data"]["reason"], "out_of_budget", "{end}");
    assert_eq!(end["data"]["summary"]["ended"], "out_of_budget", "{end}");
}
