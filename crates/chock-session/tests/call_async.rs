//! The confined call awaited end to end (`Session::confined_call_async`), through a real sandbox:
//! the same record as the synchronous call, a refusal that never reaches the sandbox, and an
//! interrupt that ends the call through its confiner's killer.

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
