//! The terminal interface's own session driver (a session in this process): a session stopped by
//! its budget ends `out_of_budget` when the person leaves, as through every other front end, not
//! `done`. Everything is real (sandbox, log, workspace); the model is the offline player.

use std::path::Path;

use chock_protocol::live::Ended;
use chock_runtime::Config;
use chock_runtime::Opening;
use chock_runtime::SessionBuilder;
use chock_test_support::World;
use chock_test_support::events::only_session;
use chock_tui::driver::local::start;
use chock_tui::feed::{Cmd, Feed, TaskOutcome};
use tokio::sync::mpsc::unbounded_channel;

#[test]
fn a_session_stopped_by_its_budget_ends_out_of_budget_when_the_person_leaves() {
    let world = World::with_git_files(&[("chock.toml", "[budget]\ntokens = 1\n")]);
    let sessions = world.sessions_root();
    let script = world.script("[[turn]]\ntext = \"never asked\"\n");
    let config = Config::parse("", Path::new("config.toml")).unwrap();
    let builder = SessionBuilder::new(config)
        .provider(Some(script))
        .project(Some(world.project.clone()))
        .sessions_root(Some(sessions.clone()));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let summary = rt.block_on(async move {
        let (feed, mut fed) = unbounded_channel();
        let to = start(builder, Opening::New, feed).await.unwrap();
        to.send(Cmd::Input("spend".into())).unwrap();
        loop {
            match fed.recv().await.expect("the driver goes on") {
                Feed::TaskEnded(TaskOutcome::Ended(end)) => {
                    assert_eq!(end, Ended::OutOfBudget);
                    break;
                }
                Feed::TaskEnded(other) => panic!("the task ended so: {other:?}"),
                _ => {}
            }
        }
        to.send(Cmd::End).unwrap();
        loop {
            if let Feed::Ended(summary) = fed.recv().await.expect("the driver ends") {
                break summary.expect("the session ended cleanly");
            }
        }
    });
    assert_eq!(summary.ended, Ended::OutOfBudget);
    let dir = only_session(&sessions);
    let events = chock_log::read_events(&dir).unwrap();
    let view = chock_log::view_of(&events);
    assert_eq!(
        view.end_reason(),
        Some(chock_protocol::log::EndReason::OutOfBudget)
    );
}
