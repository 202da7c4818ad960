//! The terminal interface's own session driver (a session in this process): a session stopped by
//! its budget ends `out_of_budget` when the person leaves, as through every other front end, not
//! `done`. Everything is real (sandbox, log, workspace); the model is the offline player.

use std::path::Path;

use chock_protocol::live::Ended;
use chock_runtime::Config;
use chock_runtime::Opening;
use chock_runtime::SessionBuilder;
use chock_tui::driver::local::start;
use chock_tui::feed::{Cmd, Feed, TaskOutcome};
use tokio::sync::mpsc::unbounded_channel;

fn git(project: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .current_dir(project)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

#[test]
fn a_session_stopped_by_its_budget_ends_out_of_budget_when_the_person_leaves() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    let sessions = tmp.path().join("sessions");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("chock.toml"), "[budget]\ntokens = 1\n").unwrap();
    git(&project, &["init", "-q", "-b", "main"]);
    git(&project, &["add", "-A"]);
    git(&project, &["commit", "-qm", "init"]);
    let script = tmp.path().join("one.toml");
    std::fs::write(&script, "[[turn]]\ntext = \"never asked\"\n").unwrap();
    let config = Config::parse("", Path::new("config.toml")).unwrap();
    let builder = SessionBuilder::new(config)
        .provider(Some(format!("script:{}", script.display())))
        .project(Some(project))
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
    let dir = std::fs::read_dir(&sessions)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let events = chock_log::read_events(&dir).unwrap();
    let view = chock_log::view_of(&events);
    assert_eq!(
        view.end_reason(),
        Some(chock_protocol::log::EndReason::OutOfBudget)
    );
}
