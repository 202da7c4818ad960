//! The one confined call (`Session::confined_call_async`), awaited end to end through a real
//! sandbox: its record, a refusal that never reaches the sandbox, an interrupt that ends the call
//! through its confiner's killer, and the sessions whose calls take turns (`chock exec`'s one
//! call, a second refused; two calls awaited at once that never overlap).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use chock_sandbox::ExitStatus;
use chock_session::{CallOptions, CallOutcome, NoApprover, Session, SessionOptions};

struct Fixture {
    _dir: tempfile::TempDir,
    project: PathBuf,
    root: PathBuf,
}

fn fixture(policy: &str) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let project = base.join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("chock.toml"), policy).unwrap();
    std::fs::write(project.join("data.txt"), "data\n").unwrap();
    Fixture {
        _dir: dir,
        project,
        root: base.join("sessions"),
    }
}

fn open(f: &Fixture) -> Session {
    let opts = SessionOptions {
        sessions_root: Some(f.root.clone()),
        ..SessionOptions::default()
    };
    Session::open(&f.project, opts).unwrap()
}

fn argv(words: &[&str]) -> Vec<String> {
    words.iter().map(|s| s.to_string()).collect()
}

/// The kinds of the events logged under `call_id`, in order.
fn kinds_of(s: &Session, call_id: &str) -> Vec<String> {
    chock_log::read_events(s.log().dir())
        .unwrap()
        .into_iter()
        .filter(|e| e.call_id.as_deref() == Some(call_id))
        .map(|e| e.kind.to_string())
        .collect()
}

fn with_id(id: &str) -> CallOptions {
    CallOptions {
        call_id: Some(id.into()),
        ..CallOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_awaited_call_runs_in_the_workspace_and_is_logged_in_order() {
    let f = fixture("");
    let s = open(&f);
    let r = s
        .confined_call_async(
            &argv(&["sh", "-c", "cat data.txt; echo w > new.txt; exit 4"]),
            &with_id("a1"),
            &NoApprover,
        )
        .await
        .unwrap();
    match r.outcome {
        CallOutcome::Ran {
            outcome, stdout, ..
        } => {
            assert_eq!(outcome.status, ExitStatus::Exited(4));
            assert_eq!(stdout, b"data\n");
        }
        other => panic!("{other:?}"),
    }
    assert!(
        !f.project.join("new.txt").exists(),
        "the project is never written"
    );
    assert_eq!(
        kinds_of(&s, "a1"),
        ["tool.call", "decision", "command.result"]
    );
    // The next call sees the first one's write (the session's one workspace).
    let r = s
        .confined_call_async(&argv(&["cat", "new.txt"]), &with_id("a2"), &NoApprover)
        .await
        .unwrap();
    assert!(
        matches!(&r.outcome, CallOutcome::Ran { stdout, .. } if stdout == b"w\n"),
        "{:?}",
        r.outcome
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_awaited_call_never_runs() {
    let f = fixture("[[rule]]\naction = \"exec.system.sh\"\ndecision = \"deny\"\n");
    let s = open(&f);
    let marker = f.project.join("ran");
    let r = s
        .confined_call_async(
            &argv(&["sh", "-c", &format!("touch {}", marker.display())]),
            &with_id("d1"),
            &NoApprover,
        )
        .await
        .unwrap();
    assert!(
        matches!(r.outcome, CallOutcome::Refused { .. }),
        "{:?}",
        r.outcome
    );
    assert_eq!(
        kinds_of(&s, "d1"),
        ["tool.call", "decision", "command.result"]
    );
    assert!(!marker.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_ends_an_awaited_call_through_its_killer() {
    let f = fixture("");
    let s = std::sync::Arc::new(open(&f));
    let running = s.running().clone();
    let began = Instant::now();
    let interrupting = tokio::spawn(async move {
        // Killed as soon as it registers, or at once if it is running already.
        tokio::time::sleep(Duration::from_millis(300)).await;
        running.kill("k1")
    });
    let r = s
        .confined_call_async(&argv(&["sleep", "60"]), &with_id("k1"), &NoApprover)
        .await
        .unwrap();
    interrupting.await.unwrap();
    match r.outcome {
        CallOutcome::Ran { outcome, .. } => {
            assert_eq!(outcome.status, ExitStatus::Signaled(9));
        }
        other => panic!("{other:?}"),
    }
    assert!(
        began.elapsed() < Duration::from_secs(20),
        "{:?}",
        began.elapsed()
    );
}

/// On a runtime of one thread, where a `block_on` inside the call would panic (a runtime cannot
/// be entered from within itself) and a thread blocked on the decision would starve it: the
/// awaited call blocks on nothing.
#[tokio::test(flavor = "current_thread")]
async fn an_awaited_call_runs_on_a_runtime_of_one_thread() {
    let f = fixture("");
    let s = open(&f);
    let r = s
        .confined_call_async(&argv(&["cat", "data.txt"]), &with_id("c1"), &NoApprover)
        .await
        .unwrap();
    assert!(
        matches!(&r.outcome, CallOutcome::Ran { stdout, .. } if stdout == b"data\n"),
        "{:?}",
        r.outcome
    );
}

fn open_calls(f: &Fixture, calls: chock_session::Calls) -> Session {
    let opts = SessionOptions {
        sessions_root: Some(f.root.clone()),
        scratch: true,
        calls,
        ..SessionOptions::default()
    };
    Session::open(&f.project, opts).unwrap()
}

/// A session of one call (`chock exec`'s) makes it through the one confined call: logged
/// call → decision → result, its write in the workspace and not the project; a second call is
/// refused before anything is logged for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_call_session_makes_its_call_awaited_and_refuses_a_second() {
    let f = fixture("");
    let s = open_calls(&f, chock_session::Calls::One);
    let r = s
        .confined_call_async(
            &argv(&["sh", "-c", "echo w > new.txt; cat data.txt new.txt"]),
            &with_id("o1"),
            &NoApprover,
        )
        .await
        .unwrap();
    assert!(
        matches!(&r.outcome, CallOutcome::Ran { stdout, .. } if stdout == b"data\nw\n"),
        "{:?}",
        r.outcome
    );
    assert!(!f.project.join("new.txt").exists());
    assert_eq!(
        kinds_of(&s, "o1"),
        ["tool.call", "decision", "command.result"]
    );
    let before = chock_log::read_events(s.log().dir()).unwrap().len();
    let second = s
        .confined_call_async(&argv(&["true"]), &with_id("o2"), &NoApprover)
        .await;
    assert!(
        matches!(second, Err(chock_session::SessionError::OneCallMade)),
        "{second:?}"
    );
    assert_eq!(chock_log::read_events(s.log().dir()).unwrap().len(), before);
}

/// The span (start, end, in nanoseconds since the epoch) a call's command ran in, as it printed.
fn span(r: &chock_session::CallResult) -> (u128, u128) {
    let CallOutcome::Ran { stdout, .. } = &r.outcome else {
        panic!("{:?}", r.outcome);
    };
    let text = String::from_utf8_lossy(stdout);
    let times: Vec<u128> = text
        .split_whitespace()
        .map(|t| t.parse().unwrap())
        .collect();
    assert_eq!(times.len(), 2, "{text}");
    (times[0], times[1])
}

/// Two calls of a session whose calls take turns, awaited at once on one runtime, never run at
/// the same time (each mounts its own overlay instance of the one upper directory): the second
/// waits for the first one's turn, without a runtime thread blocked on it; both run, and the
/// second sees the first one's write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_taking_turns_awaited_together_never_overlap() {
    let f = fixture("");
    let s = open_calls(&f, chock_session::Calls::InTurn);
    let script = "date +%s%N; echo x >> turns.txt; sleep 0.5; date +%s%N";
    let cmd = argv(&["sh", "-c", script]);
    let (one, two) = (with_id("t1"), with_id("t2"));
    let (a, b) = tokio::join!(
        s.confined_call_async(&cmd, &one, &NoApprover),
        s.confined_call_async(&cmd, &two, &NoApprover),
    );
    let (a, b) = (span(&a.unwrap()), span(&b.unwrap()));
    let (first, second) = if a.0 <= b.0 { (a, b) } else { (b, a) };
    assert!(
        first.1 <= second.0,
        "the calls overlapped: {first:?} and {second:?}"
    );
    let r = s
        .confined_call_async(&argv(&["cat", "turns.txt"]), &with_id("t3"), &NoApprover)
        .await
        .unwrap();
    assert!(
        matches!(&r.outcome, CallOutcome::Ran { stdout, .. } if stdout == b"x\nx\n"),
        "{:?}",
        r.outcome
    );
}
