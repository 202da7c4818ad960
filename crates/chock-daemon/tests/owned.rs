//! A session the daemon owns is followed through its handle, not its file: a client that
//! subscribes in the middle of a task gets every log line once, in order, exactly as written;
//! and while the session runs, nothing reads its `log.jsonl` back (watched with inotify: no open,
//! no read) beyond the one catch-up of a subscription.

mod support;

use std::os::fd::OwnedFd;
use std::path::Path;

use chock_client::DaemonClient;
use chock_protocol::rpc::{
    Call, Notice, SessionState, StartParams, Started, SubscribeParams, Subscribed,
};
use rustix::fs::inotify;
use support::*;

/// One slow command (about 2 s of output), then another, then the end of the task.
const SLOW: &str = r#"
[[turn]]
text = "Counting slowly."
[[turn.call]]
tool = "run_command"
input = { command = "for i in 1 2 3 4 5 6 7 8; do echo tick$i; sleep 0.25; done", timeout_secs = 60 }

[[turn]]
[[turn.call]]
tool = "run_command"
input = { command = "echo second" }

[[turn]]
text = "done counting"
"#;

/// Starts the slow session with `client` subscribed from seq 0, and waits until its command
/// prints (the task is under way): its id, and the events `client` got until then.
async fn start_slow(
    client: &mut DaemonClient,
    world: &World,
) -> (String, Vec<(u64, serde_json::Value)>) {
    let provider = world.script("slow.toml", SLOW);
    let started: Started = client
        .call(&Call::SessionsStart(StartParams {
            task: "count".into(),
            project: path_str(&world.project),
            provider: Some(provider),
            model: None,
            subscribe: true,
        }))
        .await
        .unwrap();
    let id = started.session;
    let mut seen = Vec::new();
    until(client, |n| match n {
        Notice::SessionEvent(e) if e.session == id => {
            seen.push((e.event.seq, serde_json::to_value(&e.event).unwrap()));
            None
        }
        Notice::SessionLive(l) if l.session == id => serde_json::to_string(&l.event)
            .unwrap()
            .contains("tick1")
            .then_some(()),
        _ => None,
    })
    .await;
    (id, seen)
}

/// What one subscription got: each `session.event`'s seq and its event as JSON, in the order
/// they came, up to the session going idle.
async fn events_until_idle(client: &mut DaemonClient, id: &str) -> Vec<(u64, serde_json::Value)> {
    let mut seen = Vec::new();
    until(client, |n| match n {
        Notice::SessionEvent(e) if e.session == id => {
            seen.push((e.event.seq, serde_json::to_value(&e.event).unwrap()));
            None
        }
        Notice::SessionState(s) if s.session == id && s.state == SessionState::Idle => Some(()),
        _ => None,
    })
    .await;
    seen
}

async fn subscribe(client: &mut DaemonClient, id: &str, from: u64) -> Subscribed {
    client
        .call(&Call::SessionsSubscribe(SubscribeParams {
            session: id.into(),
            from_seq: Some(from),
        }))
        .await
        .unwrap()
}

/// Clients that join while the task runs — from seq 0 and from seq 3 — get every line of the
/// log from there, each once, in seq order, as written; so does the one subscribed at the start.
#[test]
fn a_subscription_joined_mid_task_sees_every_seq_once_in_order() {
    let world = World::new();
    runtime().block_on(async {
        let server = world.serve().await;
        let mut first = world.client(&server).await;
        let (id, mut seen_first) = start_slow(&mut first, &world).await;
        let mut from_zero = world.client(&server).await;
        let joined = subscribe(&mut from_zero, &id, 0).await;
        let mut from_three = world.client(&server).await;
        subscribe(&mut from_three, &id, 3).await;
        seen_first.extend(events_until_idle(&mut first, &id).await);
        let seen_zero = events_until_idle(&mut from_zero, &id).await;
        let seen_three = events_until_idle(&mut from_three, &id).await;
        let log = world.log_lines(&id);
        let last = u64::try_from(log.len() - 1).unwrap();
        assert!(
            joined.head_seq < last,
            "joined mid-task: head {} of {last}",
            joined.head_seq
        );
        for (name, seen, from) in [
            ("subscribed at the start", &seen_first, 0),
            ("joined mid-task from 0", &seen_zero, 0),
            ("joined mid-task from 3", &seen_three, 3),
        ] {
            let seqs: Vec<u64> = seen.iter().map(|(s, _)| *s).collect();
            assert_eq!(seqs, (from..=last).collect::<Vec<_>>(), "{name}");
            for (seq, event) in seen {
                assert_eq!(
                    &log[usize::try_from(*seq).unwrap()],
                    event,
                    "{name}: seq {seq}"
                );
            }
        }
        server.stop().await;
    });
}

/// An inotify watch on one file, for opens and reads.
struct Watch(OwnedFd);

impl Watch {
    fn new(file: &Path) -> Watch {
        let fd = inotify::init(inotify::CreateFlags::NONBLOCK | inotify::CreateFlags::CLOEXEC)
            .expect("an inotify instance");
        inotify::add_watch(
            &fd,
            file,
            inotify::WatchFlags::OPEN | inotify::WatchFlags::ACCESS,
        )
        .expect("a watch on the log");
        Watch(fd)
    }

    /// The opens and reads seen so far.
    fn seen(&self) -> Vec<String> {
        let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 4096];
        let mut reader = inotify::Reader::new(&self.0, &mut buf);
        let mut seen = Vec::new();
        while let Ok(event) = reader.next() {
            seen.push(format!("{:?}", event.events()));
        }
        seen
    }
}

/// Once the subscriptions have caught up, the log of the session the daemon runs is neither
/// opened nor read again while it works and its lines reach both clients: the daemon follows it
/// through its handle. (A daemon tailing the file reads it at every live item.)
#[test]
fn an_owned_session_is_never_read_back_from_its_file_while_it_runs() {
    let world = World::new();
    runtime().block_on(async {
        let server = world.serve().await;
        let mut first = world.client(&server).await;
        let (id, _) = start_slow(&mut first, &world).await;
        let mut late = world.client(&server).await;
        let joined = subscribe(&mut late, &id, 0).await;
        // The late client's catch-up (the one read of the file) is over once it has the head.
        until(&mut late, |n| match n {
            Notice::SessionEvent(e) if e.session == id => {
                (e.event.seq >= joined.head_seq).then_some(())
            }
            _ => None,
        })
        .await;
        let lines_before = world.log_lines(&id).len();
        let watch = Watch::new(&world.sessions.join(&id).join("log.jsonl"));
        let seen_first = events_until_idle(&mut first, &id).await;
        let seen_late = events_until_idle(&mut late, &id).await;
        let during = watch.seen();
        let written = world.log_lines(&id).len();
        let new_first = seen_first
            .iter()
            .filter(|(s, _)| *s >= u64::try_from(lines_before).unwrap())
            .count();
        assert!(
            written > lines_before + 5 && new_first == written - lines_before,
            "lines were written and sent while watched: {lines_before} then {written}, {new_first} sent"
        );
        assert!(
            seen_late.iter().all(|(s, _)| *s > joined.head_seq),
            "the late client got no line twice"
        );
        assert_eq!(
            during,
            Vec::<String>::new(),
            "the log of a session this daemon runs was opened or read while it ran"
        );
        server.stop().await;
    });
}
