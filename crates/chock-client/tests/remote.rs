//! The session handle over the daemon's socket, against a real daemon (served in-process on its
//! own socket, its sessions on the `script:` provider): the same operations, items and snapshot
//! as the in-process handle, and the example client run as a process.

use std::path::{Path, PathBuf};
use std::time::Duration;

use chock_client::{ClientError, Item, Op, RemoteSession, RemoteSubscription, Reply, Target};
use chock_daemon::{DaemonOptions, ServeOptions, Server, serve};
use chock_protocol::live::Ended;
use chock_protocol::log::TableDecision;
use chock_protocol::rpc::{SessionState, StartParams};

/// A git project and the daemon's directories, in the shared hermetic world.
struct World {
    env: chock_test_support::World,
    project: PathBuf,
}

impl World {
    fn new() -> World {
        let env = chock_test_support::World::with_git_files(&[
            ("README.md", "hello\n"),
            ("chock.toml", ""),
        ]);
        env.config_toml("");
        World {
            project: env.project.clone(),
            env,
        }
    }

    /// The `script:FILE` provider of `toml`.
    fn script(&self, toml: &str) -> String {
        self.env.script(toml)
    }

    fn sessions(&self) -> PathBuf {
        self.env.sessions_root()
    }

    async fn serve(&self) -> Server {
        serve(ServeOptions {
            daemon: DaemonOptions {
                sessions_root: self.sessions(),
                state_dir: self.env.chock_state(),
                config: Some(self.env.config_file()),
                queue: chock_daemon::DEFAULT_QUEUE,
                max_turns: 20,
            },
            // Where the world's `$XDG_RUNTIME_DIR` puts it, for the example's process.
            runtime_dir: self.env.chock_runtime(),
            group: None,
            host: None,
        })
        .await
        .unwrap()
    }

    fn start(&self, provider: &str, task: &str) -> StartParams {
        StartParams {
            task: task.into(),
            project: self.project.display().to_string(),
            provider: Some(provider.into()),
            model: None,
            subscribe: false,
        }
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The items up to and with the first state `until` (60 s at most).
async fn items_until(sub: &mut RemoteSubscription, until: SessionState) -> Vec<Item> {
    let read = async {
        let mut items = Vec::new();
        while let Some(item) = sub.next().await.unwrap() {
            let last = item == Item::State(until);
            items.push(item);
            if last {
                return items;
            }
        }
        panic!("the stream ended before {until:?}: {items:?}");
    };
    tokio::time::timeout(Duration::from_secs(60), read)
        .await
        .expect("the state never came")
}

fn logged(items: &[Item]) -> Vec<(u64, String)> {
    items
        .iter()
        .filter_map(|i| match i {
            Item::Logged(l) => Some((l.seq, l.line.to_string())),
            _ => None,
        })
        .collect()
}

fn log_file(world: &World, session: &str) -> Vec<String> {
    std::fs::read_to_string(world.sessions().join(session).join("log.jsonl"))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

const TWO_TASKS: &str = "[[turn]]\n[[turn.call]]\ntool = \"write_file\"\ninput = { path = \"a.txt\", content = \"one\\n\" }\n\n\
                         [[turn]]\ntext = \"done\"\n\n[[turn]]\ntext = \"again\"\n";

#[test]
fn a_session_in_the_daemon_is_driven_through_the_handle_shape() {
    let world = World::new();
    let provider = world.script(TWO_TASKS);
    runtime().block_on(async {
        let server = world.serve().await;
        let target = Target::Unix(server.socket().to_path_buf());
        let (session, started, mut sub) =
            RemoteSession::start(target.clone(), world.start(&provider, "write a"))
                .await
                .unwrap();
        assert_eq!(session.id(), started.session);

        // The first task, from line 0: the log's lines byte for byte, in seq order with no gap,
        // the live items between them, and the states.
        let first = items_until(&mut sub, SessionState::Idle).await;
        let lines = logged(&first);
        let file = log_file(&world, session.id());
        assert_eq!(
            lines.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
            (0..lines.len() as u64).collect::<Vec<_>>()
        );
        assert_eq!(
            lines.iter().map(|(_, l)| l.clone()).collect::<Vec<_>>(),
            file[..lines.len()]
        );
        assert!(
            first.contains(&Item::State(SessionState::Working)),
            "{first:?}"
        );
        assert!(
            first.iter().any(|i| matches!(i, Item::Live { .. })),
            "{first:?}"
        );

        // A follow-up is `sessions.input`; a second one while it runs would be refused.
        let reply = session
            .send(Op::UserInput {
                text: "and again".into(),
            })
            .await
            .unwrap();
        assert_eq!(reply, Reply::Accepted);
        let second = items_until(&mut sub, SessionState::Idle).await;
        let next_seq = logged(&second).first().map(|(s, _)| *s);
        assert_eq!(next_seq, Some(lines.len() as u64), "no gap, no repeat");

        // The snapshot is the log folded by the one fold, up to the head the stream reached.
        let snap = session.snapshot().await.unwrap();
        assert_eq!(snap.state, SessionState::Idle);
        assert_eq!(snap.head, logged(&second).last().map(|(s, _)| *s));
        assert_eq!(snap.view.turns, 3);
        assert!(snap.view.end.is_none());

        // A fork is `sessions.fork`; a narrowing has no method and is refused, naming the op.
        match session.send(Op::Fork { turn: 1 }).await.unwrap() {
            Reply::Forked(made) => assert_eq!(made.origin.session, session.id()),
            other => panic!("{other:?}"),
        }
        let refused = session
            .send(Op::Restrict {
                pattern: "net.connect.*".into(),
                decision: TableDecision::Deny,
            })
            .await
            .unwrap_err();
        assert!(
            matches!(refused, ClientError::Unsupported { op: "restrict", .. }),
            "{refused}"
        );

        // Attached by a prefix of its id, the same session; the end gives its summary, and the
        // stream ends after saying so.
        let again = RemoteSession::attach(target.clone(), &session.id()[..21])
            .await
            .unwrap();
        assert_eq!(again.id(), session.id());
        match again.send(Op::End).await.unwrap() {
            Reply::Ended(summary) => {
                assert_eq!(summary.session, session.id());
                assert_eq!(summary.ended, Ended::Done);
            }
            other => panic!("{other:?}"),
        }
        let rest = items_until(&mut sub, SessionState::Ended).await;
        assert!(
            logged(&rest)
                .iter()
                .any(|(_, l)| l.contains("\"session.end\""))
        );
        let end = tokio::time::timeout(Duration::from_secs(30), sub.next()).await;
        assert!(end.expect("the stream never ended").unwrap().is_none());

        // An ended session's subscription gives its whole log and ends.
        let mut replay = session.subscribe(0).await.unwrap();
        let mut all = Vec::new();
        let whole = async {
            while let Some(item) = replay.next().await.unwrap() {
                all.push(item);
            }
        };
        tokio::time::timeout(Duration::from_secs(30), whole)
            .await
            .expect("the ended session's stream never ended");
        assert_eq!(
            logged(&all).into_iter().map(|(_, l)| l).collect::<Vec<_>>(),
            log_file(&world, session.id())
        );
        let mut past = session.subscribe(10_000).await.unwrap();
        let nothing = tokio::time::timeout(Duration::from_secs(30), past.next()).await;
        assert!(
            nothing
                .expect("a stream past the end never ended")
                .unwrap()
                .is_none()
        );
        assert_eq!(
            session.send(Op::Interrupt).await.unwrap_err().to_string(),
            RemoteSession::attach(target, session.id())
                .await
                .unwrap()
                .send(Op::Interrupt)
                .await
                .unwrap_err()
                .to_string()
        );
        server.stop().await;
    });
}

/// The example client, run as a process against the daemon at `$XDG_RUNTIME_DIR/chock`.
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let path = exe
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .join("examples")
        .join(name);
    assert!(
        path.exists(),
        "{} is not built: `cargo test -p chock-client` builds the examples first",
        path.display()
    );
    path
}

#[test]
fn the_example_client_watches_a_session_to_its_end() {
    let world = World::new();
    let provider = world.script("[[turn]]\ntext = \"hello from the script\"\n");
    let watch = example("watch");
    runtime().block_on(async {
        let server = world.serve().await;
        let mut cmd = world.env.program(&watch);
        cmd.args(["say hello", &provider]);
        let out = tokio::process::Command::from(cmd).output();
        let out = tokio::time::timeout(Duration::from_secs(60), out)
            .await
            .expect("the example never finished")
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{out:?}");
        assert!(stdout.contains("#0 {\"seq\":0,"), "{stdout}");
        let said: String = stdout
            .lines()
            .filter_map(|l| l.strip_prefix("model: "))
            .collect();
        assert_eq!(said, "hello from the script", "{stdout}");
        assert!(stdout.contains("state: Idle"), "{stdout}");
        assert!(stdout.contains("snapshot: Idle, 1 turns"), "{stdout}");
        assert!(stdout.ends_with("ended: done\n"), "{stdout}");
        server.stop().await;
    });
}
