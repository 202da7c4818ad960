//! A session through its handle: operations by `send` only (input, an answer by question id, a
//! narrowing, an apply pinned to a digest, end), a second input refused while one runs, and
//! subscriptions from any seq that see every line once, in order, then the live stream; an idle
//! session handed over at once and taken up with nothing running.

use std::path::{Path, PathBuf};
use std::time::Duration;

use chock_agent::runtime::SessionBuilder;
use chock_config::config::Config;
use chock_log::{EventData, read_events};
use chock_protocol::live::{AgentEvent, Ended};
use chock_protocol::log::{AnswerKind, TableDecision};
use chock_protocol::rpc::{Selection, SessionState};
use chock_runtime::{Item, Op, OpError, Opening, Reply, Subscription, TaskOutcome};
use chock_test_support::GitProject;

/// A project (a git repository with a README and `policy` as its chock.toml), a sessions root,
/// and recordings.
struct Env {
    _git: GitProject,
    project: PathBuf,
    sessions: PathBuf,
    dir: PathBuf,
}

impl Env {
    fn new(policy: &str) -> Env {
        let git = GitProject::with_files(&[("README.md", "hello\n"), ("chock.toml", policy)]);
        Env {
            project: git.path().to_path_buf(),
            sessions: git.root().join("sessions"),
            dir: git.root().to_path_buf(),
            _git: git,
        }
    }

    fn builder(&self, recording: &str) -> SessionBuilder {
        let path = self.dir.join("recording.toml");
        std::fs::write(&path, recording).unwrap();
        SessionBuilder::new(Config::parse("", Path::new("config.toml")).unwrap())
            .provider(Some(format!("script:{}", path.display())))
            .project(Some(self.project.clone()))
            .sessions_root(Some(self.sessions.clone()))
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}

async fn next(sub: &mut Subscription) -> Item {
    tokio::time::timeout(Duration::from_secs(60), sub.next())
        .await
        .expect("an item within 60 s")
        .expect("the subscription goes on")
}

/// Waits on `sub` for the end of the running task.
async fn task_end(sub: &mut Subscription) -> TaskOutcome {
    loop {
        if let Item::TaskEnded(outcome) = next(sub).await {
            return outcome;
        }
    }
}

/// Every item left in `sub` until it ends (the session has ended).
async fn drain(sub: &mut Subscription) -> Vec<Item> {
    let mut items = Vec::new();
    while let Some(item) = tokio::time::timeout(Duration::from_secs(60), sub.next())
        .await
        .expect("the subscription ends within 60 s")
    {
        items.push(item);
    }
    items
}

fn seqs(items: &[Item]) -> Vec<u64> {
    items
        .iter()
        .filter_map(|i| match i {
            Item::Logged(l) => Some(l.seq),
            _ => None,
        })
        .collect()
}

const ASKED_THEN_REFUSED: &str = r#"
[[turn]]
[[turn.call]]
tool = "run_command"
input = { command = "echo asked-and-allowed" }
expect = { contains = "asked-and-allowed" }

[[turn]]
text = "first done"

[[turn]]
[[turn.call]]
tool = "run_command"
input = { command = "echo never" }
expect = { is_error = true }

[[turn]]
text = "second done"
"#;

/// The protocol's operations drive a session through the handle alone: input, an answer from a
/// client by question id (an unknown id refused), a narrowing that refuses the next call with
/// nobody asked, and the end; nothing is taken once it has ended.
#[test]
fn the_protocols_operations_drive_a_session_through_its_handle() {
    let env = Env::new("[[rule]]\naction = \"exec.*\"\ndecision = \"ask\"\n");
    let rt = runtime();
    rt.block_on(async {
        let session = chock_runtime::start(env.builder(ASKED_THEN_REFUSED), Opening::New, None)
            .await
            .unwrap();
        let browser = session.named("browser");
        let _attached = browser.attach("browser");
        let mut sub = session.subscribe_live();
        assert_eq!(
            session
                .send(Op::UserInput { text: "go".into() })
                .await
                .unwrap(),
            Reply::Accepted
        );
        let question = loop {
            if let Item::Live { event, .. } = next(&mut sub).await
                && let AgentEvent::ApprovalAsked { question, .. } = &*event
            {
                break question.clone();
            }
        };
        let busy = session
            .send(Op::UserInput {
                text: "more".into(),
            })
            .await;
        assert!(matches!(busy, Err(OpError::Busy { .. })), "{busy:?}");
        let answered = browser
            .send(Op::Answer {
                question,
                answer: AnswerKind::AllowOnce,
                reasons: None,
                reply: None,
            })
            .await
            .unwrap();
        assert_eq!(answered, Reply::Answered);
        assert_eq!(task_end(&mut sub).await, TaskOutcome::Ended(Ended::Done));
        assert_eq!(session.state(), SessionState::Idle);
        let unknown = session
            .send(Op::Answer {
                question: "q-999".into(),
                answer: AnswerKind::AllowOnce,
                reasons: None,
                reply: None,
            })
            .await;
        assert!(matches!(unknown, Err(OpError::Answer(_))), "{unknown:?}");
        let widening = session
            .send(Op::Restrict {
                pattern: "exec.*".into(),
                decision: TableDecision::Allow,
            })
            .await;
        assert!(
            matches!(widening, Err(OpError::Restrict { .. })),
            "{widening:?}"
        );
        let narrowed = session
            .send(Op::Restrict {
                pattern: "exec.*".into(),
                decision: TableDecision::Deny,
            })
            .await
            .unwrap();
        assert_eq!(narrowed, Reply::Restricted);
        session
            .send(Op::UserInput {
                text: "again".into(),
            })
            .await
            .unwrap();
        assert_eq!(task_end(&mut sub).await, TaskOutcome::Ended(Ended::Done));
        let Reply::Ended(summary) = session.send(Op::End).await.unwrap() else {
            panic!("not ended")
        };
        assert_eq!(summary.ended, Ended::Done);
        let after = session.send(Op::Interrupt).await;
        assert!(matches!(after, Err(OpError::Ended { .. })), "{after:?}");
        let rest = drain(&mut sub).await;
        assert_eq!(rest.last(), Some(&Item::State(SessionState::Ended)));
    });
    let dir = std::fs::read_dir(&env.sessions)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let events: Vec<EventData> = read_events(&dir)
        .unwrap()
        .iter()
        .map(|e| e.payload().unwrap())
        .collect();
    let answers: Vec<Option<String>> = events
        .iter()
        .filter_map(|d| match d {
            EventData::ApprovalAnswer(a) => Some(a.by.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(answers, vec![Some("browser".to_string())]);
    let allowed: Vec<bool> = events
        .iter()
        .filter_map(|d| match d {
            EventData::Decision(d) => Some(d.allowed),
            _ => None,
        })
        .collect();
    assert_eq!(allowed, vec![true, false]);
}

const WRITES_A_FILE: &str = r#"
[[turn]]
[[turn.call]]
tool = "write_file"
input = { path = "made.txt", content = "made in the workspace\n" }

[[turn]]
text = "written"
"#;

/// Subscriptions joined before, during and after the work see the same lines — every seq once,
/// in order, from where each asked — and end when the session does.
#[test]
fn subscriptions_from_any_seq_see_every_line_once_in_order() {
    let env = Env::new("");
    let rt = runtime();
    rt.block_on(async {
        let session = chock_runtime::start(env.builder(WRITES_A_FILE), Opening::New, None)
            .await
            .unwrap();
        let mut before = session.subscribe(0);
        session
            .send(Op::UserInput { text: "go".into() })
            .await
            .unwrap();
        let mut during = session.subscribe(0);
        let mut from_three = session.subscribe(3);
        assert!(matches!(
            task_end(&mut before).await,
            TaskOutcome::Ended(Ended::Done)
        ));
        let mut after = session.subscribe(0);
        session.send(Op::End).await.unwrap();
        let mut all = Vec::new();
        for sub in [&mut before, &mut during, &mut from_three, &mut after] {
            all.push(seqs(&drain(sub).await));
        }
        let head = session.snapshot().head.unwrap();
        let everything: Vec<u64> = (0..=head).collect();
        // `before` gave its items up to the task's end already; the rest follow in its drain.
        assert_eq!(all[1], everything, "joined during the task");
        assert_eq!(all[2], (3..=head).collect::<Vec<u64>>(), "from seq 3");
        assert_eq!(all[3], everything, "joined after the task");
        assert!(all[0].windows(2).all(|w| w[1] == w[0] + 1), "{:?}", all[0]);
        assert_eq!(session.snapshot().state, SessionState::Ended);
        assert!(session.snapshot().view.ended());
    });
}

/// An apply through the handle, pinned to the digest of the diff shown: decided as
/// `workspace.apply` and logged before the project changes; a stale digest is refused and
/// writes nothing.
#[test]
fn an_apply_through_the_handle_is_decided_logged_and_written() {
    let env = Env::new("[[rule]]\naction = \"workspace.apply\"\ndecision = \"allow\"\n");
    let rt = runtime();
    rt.block_on(async {
        let session = chock_runtime::start(env.builder(WRITES_A_FILE), Opening::New, None)
            .await
            .unwrap();
        let mut sub = session.subscribe_live();
        session
            .send(Op::UserInput { text: "go".into() })
            .await
            .unwrap();
        task_end(&mut sub).await;
        let stale = session
            .send(Op::Apply {
                selection: Selection::default(),
                digest: "0".repeat(64),
            })
            .await;
        assert!(matches!(stale, Err(OpError::Review(_))), "{stale:?}");
        assert!(!env.project.join("made.txt").exists());
        let shown = chock_runtime::review::diff(session.id(), session.dir(), &Selection::default())
            .unwrap();
        let Reply::Applied(applied) = session
            .send(Op::Apply {
                selection: Selection::default(),
                digest: shown.digest.clone(),
            })
            .await
            .unwrap()
        else {
            panic!("not applied")
        };
        assert_eq!(applied.paths, vec!["made.txt".to_string()]);
        assert_eq!(
            std::fs::read_to_string(env.project.join("made.txt")).unwrap(),
            "made in the workspace\n"
        );
        let Reply::Applied(undone) = session
            .send(Op::Undo {
                apply_id: applied.apply_id.clone().unwrap(),
            })
            .await
            .unwrap()
        else {
            panic!("not undone")
        };
        assert_eq!(undone.paths, vec!["made.txt".to_string()]);
        assert!(!env.project.join("made.txt").exists());
        session.send(Op::End).await.unwrap();
        let kinds: Vec<String> = read_events(session.dir())
            .unwrap()
            .iter()
            .map(|e| e.kind.as_str().to_string())
            .collect();
        let decision = kinds.iter().rposition(|k| k == "decision").unwrap();
        let apply = kinds.iter().rposition(|k| k == "workspace.apply").unwrap();
        assert!(decision < apply, "{kinds:?}");
    });
}

/// Waits (up to 10 s) until nothing holds the log's lock in `dir`: the session let go of it once
/// its last writer (the log's flusher among them) is gone.
fn lock_freed(dir: &Path) {
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while matches!(
        chock_log::is_live(dir).unwrap(),
        chock_log::Liveness::Live { .. }
    ) {
        assert!(
            std::time::Instant::now() < until,
            "the log's lock is still held"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A handover from `process` (pid 1), which let the session go, to this test.
fn released_by(process: &str) -> chock_runtime::Handover {
    use chock_protocol::log::{HandoverHow, Owner};
    chock_runtime::Handover {
        from: Owner {
            pid: 1,
            process: process.into(),
        },
        to: Owner {
            pid: std::process::id(),
            process: "test".into(),
        },
        how: HandoverHow::Released,
    }
}

const ONE_TASK_THEN_A_FOLLOW_UP: &str = r#"
[[turn]]
text = "first done"

[[turn]]
text = "the follow-up, in the new owner"
"#;

/// An idle session (its task ended, waiting for a follow-up) is let go at once: the runtime says
/// so (`HandoverOutcome::Idle`), subscribers get `HandedOver` and the end of the stream, no task
/// starts here any more, no `session.end` is written, and the log's lock is free once the
/// handles are gone. The new owner takes it up with nothing running and runs the follow-up.
#[test]
fn an_idle_session_is_let_go_at_once_and_taken_up_with_nothing_running() {
    use chock_log::EventKind;
    use chock_runtime::HandoverOutcome;
    let env = Env::new("");
    let rt = runtime();
    let dir = rt.block_on(async {
        let session =
            chock_runtime::start(env.builder(ONE_TASK_THEN_A_FOLLOW_UP), Opening::New, None)
                .await
                .unwrap();
        let mut items = session.subscribe_live();
        session
            .send(Op::UserInput { text: "go".into() })
            .await
            .unwrap();
        assert!(matches!(
            task_end(&mut items).await,
            TaskOutcome::Ended(Ended::Done)
        ));
        assert_eq!(session.state(), SessionState::Idle);
        assert_eq!(session.hand_over().await, HandoverOutcome::Idle);
        let rest = drain(&mut items).await;
        assert!(
            rest.iter()
                .any(|i| matches!(i, Item::TaskEnded(TaskOutcome::HandedOver))),
            "{rest:?}"
        );
        let refused = session
            .send(Op::UserInput {
                text: "more".into(),
            })
            .await;
        assert!(matches!(refused, Err(OpError::Ended { .. })), "{refused:?}");
        assert_eq!(session.hand_over().await, HandoverOutcome::Ended);
        session.dir().to_path_buf()
    });
    let kinds = |dir: &Path| -> Vec<EventKind> {
        read_events(dir).unwrap().iter().map(|e| e.kind).collect()
    };
    let before = kinds(&dir);
    assert!(!before.contains(&EventKind::SessionEnd), "{before:?}");
    lock_freed(&dir);
    rt.block_on(async {
        let handover = released_by("chock tui");
        let session = chock_runtime::start(
            env.builder(ONE_TASK_THEN_A_FOLLOW_UP),
            Opening::Adopt(dir.clone(), handover),
            None,
        )
        .await
        .unwrap();
        // Taken up idle: nothing runs until the next input.
        assert_eq!(session.state(), SessionState::Idle);
        let mut items = session.subscribe_live();
        session
            .send(Op::UserInput {
                text: "and then".into(),
            })
            .await
            .unwrap();
        assert!(matches!(
            task_end(&mut items).await,
            TaskOutcome::Ended(Ended::Done)
        ));
        session.send(Op::End).await.unwrap();
    });
    let after = kinds(&dir);
    let at = after
        .iter()
        .position(|k| *k == EventKind::SessionHandover)
        .unwrap();
    let turns_after = after[at..]
        .iter()
        .filter(|k| **k == EventKind::TurnStart)
        .count();
    assert_eq!(turns_after, 1, "only the follow-up ran: {after:?}");
    let ends = after
        .iter()
        .filter(|k| **k == EventKind::SessionEnd)
        .count();
    assert_eq!(ends, 1);
}

const A_LONG_COMMAND_THEN_A_FOLLOW_UP: &str = r#"
[[turn]]
[[turn.call]]
tool = "run_command"
input = { command = "sleep 30" }

[[turn]]
text = "the follow-up, in the new owner"
"#;

/// A session whose task the person interrupted, then let go idle: the new owner does not go on
/// with the interrupted task (no model request after `session.handover`) but waits for the
/// next input, and the follow-up is the next turn.
#[test]
fn an_interrupted_idle_session_is_taken_up_waiting_for_input() {
    use chock_log::EventKind;
    use chock_runtime::HandoverOutcome;
    let env = Env::new("[[rule]]\naction = \"exec.*\"\ndecision = \"allow\"\n");
    let rt = runtime();
    let dir = rt.block_on(async {
        let session = chock_runtime::start(
            env.builder(A_LONG_COMMAND_THEN_A_FOLLOW_UP),
            Opening::New,
            None,
        )
        .await
        .unwrap();
        let mut items = session.subscribe_live();
        session
            .send(Op::UserInput { text: "go".into() })
            .await
            .unwrap();
        loop {
            if let Item::Live { event, .. } = next(&mut items).await
                && matches!(*event, AgentEvent::Decision { .. })
            {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        session.send(Op::Interrupt).await.unwrap();
        assert!(matches!(
            task_end(&mut items).await,
            TaskOutcome::Ended(Ended::Interrupted)
        ));
        assert_eq!(session.hand_over().await, HandoverOutcome::Idle);
        session.dir().to_path_buf()
    });
    lock_freed(&dir);
    rt.block_on(async {
        let handover = released_by("chock tui");
        let session = chock_runtime::start(
            env.builder(A_LONG_COMMAND_THEN_A_FOLLOW_UP),
            Opening::Adopt(dir.clone(), handover),
            None,
        )
        .await
        .unwrap();
        assert_eq!(session.state(), SessionState::Idle, "not taken up working");
        let mut items = session.subscribe_live();
        session
            .send(Op::UserInput {
                text: "something else".into(),
            })
            .await
            .unwrap();
        assert!(matches!(
            task_end(&mut items).await,
            TaskOutcome::Ended(Ended::Done)
        ));
        session.send(Op::End).await.unwrap();
    });
    let events = read_events(&dir).unwrap();
    let at = events
        .iter()
        .position(|e| e.kind == EventKind::SessionHandover)
        .unwrap();
    let requests = events[at..]
        .iter()
        .filter(|e| e.kind == EventKind::ModelRequest)
        .count();
    assert_eq!(requests, 1, "only the follow-up asked the model");
    let first_turn_after = events[at..].iter().find_map(|e| match e.payload() {
        Ok(EventData::TurnStart(t)) => Some(t),
        _ => None,
    });
    let turn = first_turn_after.expect("the follow-up's turn");
    assert_eq!(turn.turn, 2);
    assert_eq!(turn.input.as_deref(), Some("something else"));
    let sleeps = events
        .iter()
        .filter(|e| e.kind == EventKind::ToolCall)
        .count();
    assert_eq!(sleeps, 1, "the interrupted command is not run again");
}

const THREE_COMMANDS_THEN_A_FOLLOW_UP: &str = r#"
[[turn]]
[[turn.call]]
tool = "run_command"
input = { command = "echo one" }

[[turn]]
[[turn.call]]
tool = "run_command"
input = { command = "echo two" }

[[turn]]
text = "the follow-up, in the new owner"
"#;

/// A session whose task stopped at its turn limit (two turns, each calling a tool), then let go
/// idle: that task is over, so the new owner does not go on with it (which would also have
/// given it a fresh turn limit) but waits for the next input.
#[test]
fn a_task_stopped_at_its_turn_limit_is_not_carried_on_by_the_new_owner() {
    use chock_log::EventKind;
    use chock_runtime::HandoverOutcome;
    let env = Env::new("[[rule]]\naction = \"exec.*\"\ndecision = \"allow\"\n");
    let rt = runtime();
    let dir = rt.block_on(async {
        let session = chock_runtime::start(
            env.builder(THREE_COMMANDS_THEN_A_FOLLOW_UP).max_turns(2),
            Opening::New,
            None,
        )
        .await
        .unwrap();
        let mut items = session.subscribe_live();
        session
            .send(Op::UserInput { text: "go".into() })
            .await
            .unwrap();
        assert!(matches!(
            task_end(&mut items).await,
            TaskOutcome::Ended(Ended::MaxTurns)
        ));
        assert_eq!(session.hand_over().await, HandoverOutcome::Idle);
        session.dir().to_path_buf()
    });
    lock_freed(&dir);
    rt.block_on(async {
        let handover = released_by("chock tui");
        let session = chock_runtime::start(
            env.builder(THREE_COMMANDS_THEN_A_FOLLOW_UP).max_turns(2),
            Opening::Adopt(dir.clone(), handover),
            None,
        )
        .await
        .unwrap();
        assert_eq!(session.state(), SessionState::Idle, "not taken up working");
        let mut items = session.subscribe_live();
        session
            .send(Op::UserInput {
                text: "something else".into(),
            })
            .await
            .unwrap();
        assert!(matches!(
            task_end(&mut items).await,
            TaskOutcome::Ended(Ended::Done)
        ));
        session.send(Op::End).await.unwrap();
    });
    let events = read_events(&dir).unwrap();
    let at = events
        .iter()
        .position(|e| e.kind == EventKind::SessionHandover)
        .unwrap();
    let requests = events[at..]
        .iter()
        .filter(|e| e.kind == EventKind::ModelRequest)
        .count();
    assert_eq!(requests, 1, "only the follow-up asked the model");
    let calls = events
        .iter()
        .filter(|e| e.kind == EventKind::ToolCall)
        .count();
    assert_eq!(calls, 2, "no third turn in the stopped task");
}

const FOUR_COMMANDS: &str = r#"
[[turn]]
[[turn.call]]
tool = "run_command"
input = { command = "sleep 1" }

[[turn]]
[[turn.call]]
tool = "run_command"
input = { command = "echo two" }

[[turn]]
[[turn.call]]
tool = "run_command"
input = { command = "echo three" }

[[turn]]
[[turn.call]]
tool = "run_command"
input = { command = "echo four" }

[[turn]]
text = "never reached under the limit"
"#;

/// A task handed over at a turn boundary keeps the turns it has had: under a limit of three,
/// the old owner's first turn counts, so the new owner runs two more and the task stops at its
/// limit with three commands run, not four.
#[test]
fn a_task_carried_on_keeps_the_turns_it_has_had() {
    use chock_log::EventKind;
    use chock_runtime::HandoverOutcome;
    let env = Env::new("[[rule]]\naction = \"exec.*\"\ndecision = \"allow\"\n");
    let rt = runtime();
    let dir = rt.block_on(async {
        let session =
            chock_runtime::start(env.builder(FOUR_COMMANDS).max_turns(3), Opening::New, None)
                .await
                .unwrap();
        let mut items = session.subscribe_live();
        session
            .send(Op::UserInput { text: "go".into() })
            .await
            .unwrap();
        loop {
            if let Item::Live { event, .. } = next(&mut items).await
                && matches!(*event, AgentEvent::Decision { .. })
            {
                break;
            }
        }
        assert_eq!(session.hand_over().await, HandoverOutcome::AtTurnBoundary);
        session.dir().to_path_buf()
    });
    lock_freed(&dir);
    rt.block_on(async {
        let handover = released_by("chock run");
        let session = chock_runtime::start(
            env.builder(FOUR_COMMANDS).max_turns(3),
            Opening::Adopt(dir.clone(), handover),
            None,
        )
        .await
        .unwrap();
        let mut items = session.subscribe_live();
        assert!(matches!(
            task_end(&mut items).await,
            TaskOutcome::Ended(Ended::MaxTurns)
        ));
        session.send(Op::End).await.unwrap();
    });
    let events = read_events(&dir).unwrap();
    let calls = events
        .iter()
        .filter(|e| e.kind == EventKind::ToolCall)
        .count();
    assert_eq!(calls, 3, "the limit counts the old owner's turn");
}
