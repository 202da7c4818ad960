//! `sessions.fork` through the daemon: a session the daemon ran is forked at its first turn; the
//! fork's workspace holds that turn's file (not the second turn's), its log names the parent's
//! line, and a turn that is not there is `bad_input` with nothing made.

mod support;

use chock_client::ClientError;
use chock_protocol::rpc::{
    Call, DiffParams, ErrorKind, ForkMade, ForkParams, Notice, ReviewDiff, Selection,
    SessionParams, SessionState,
};
use support::*;

#[test]
fn a_session_is_forked_at_its_first_turn_through_the_daemon() {
    let world = World::new();
    world.policy("");
    let provider = world.script(
        "two.toml",
        "[[turn]]\n[[turn.call]]\ntool = \"write_file\"\ninput = { path = \"a.txt\", content = \"one\\n\" }\n\n\
         [[turn]]\n[[turn.call]]\ntool = \"write_file\"\ninput = { path = \"a.txt\", content = \"two\\n\" }\n\n\
         [[turn]]\ntext = \"done\"\n",
    );
    runtime().block_on(async {
        let server = world.serve().await;
        let mut client = world.client(&server).await;
        let started = start(&mut client, &world, &provider, "write a").await;
        let id = started.session.clone();
        until(&mut client, |n| match n {
            Notice::SessionState(s) if s.session == id && s.state == SessionState::Idle => Some(()),
            _ => None,
        })
        .await;
        let made: ForkMade = client
            .call(&Call::SessionsFork(ForkParams {
                session: id.clone(),
                turn: 1,
            }))
            .await
            .unwrap();
        assert_ne!(made.session, id);
        assert_eq!(
            (made.origin.session.as_str(), made.origin.turn),
            (id.as_str(), 1)
        );
        let diff: ReviewDiff = client
            .call(&Call::ReviewDiff(DiffParams {
                session: made.session.clone(),
                selection: Selection::default(),
            }))
            .await
            .unwrap();
        assert!(
            diff.patch.contains("+one") && !diff.patch.contains("+two"),
            "{}",
            diff.patch
        );
        let log = world.log_lines(&made.session);
        assert_eq!(log[0]["data"]["fork"]["session"], id.as_str());
        assert_eq!(log[0]["data"]["fork"]["hash"], made.origin.hash.as_str());

        let before = std::fs::read_dir(&world.sessions).unwrap().count();
        let refused = client
            .call::<ForkMade>(&Call::SessionsFork(ForkParams {
                session: id.clone(),
                turn: 9,
            }))
            .await
            .unwrap_err();
        match refused {
            ClientError::Rpc(e) => {
                assert_eq!(e.kind(), ErrorKind::BadInput, "{e}");
                assert!(e.to_string().contains("has no turn 9"), "{e}");
            }
            other => panic!("{other}"),
        }
        assert_eq!(std::fs::read_dir(&world.sessions).unwrap().count(), before);
        let _: chock_protocol::rpc::Done = client
            .call(&Call::SessionsEnd(SessionParams { session: id }))
            .await
            .unwrap();
        server.stop().await;
    });
}
