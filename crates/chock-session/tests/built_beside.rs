//! A call the table allows outright has its sandbox built while its decision is written and
//! synced, not after (docs/architecture.md, "One confined call, awaited"): the build is already
//! under way — the call's setup forked from this process — by the time the `decision` line is in
//! the log. The command itself still waits for the decision (rule 3: `tests/call_async.rs` and
//! chock-sandbox's `built_call.rs`).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chock_log::LineTap;
use chock_session::{CallOptions, CallOutcome, Calls, NoApprover, Session, SessionOptions};

/// The processes whose parent is this one, from `/proc` (every user may read a process's stat).
fn children() -> Vec<u32> {
    let me = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // `pid (comm) state ppid …`: the name may hold spaces and parentheses.
            let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
            after.split_whitespace().nth(1) == Some(me.to_string().as_str())
        })
        .collect()
}

/// Told of each line as it is written (after its sync, with the log held): at the `decision`,
/// waits up to `patience` for a process of this one's that was not there before the call.
#[derive(Debug)]
struct AtDecision {
    before: Vec<u32>,
    patience: Duration,
    /// Whether the setup was seen at the decision (None: no decision was written).
    seen: Mutex<Option<bool>>,
}

impl LineTap for AtDecision {
    fn line(&self, _seq: u64, line: &str) {
        let event: serde_json::Value = serde_json::from_str(line).unwrap();
        if event["kind"] != "decision" {
            return;
        }
        let deadline = Instant::now() + self.patience;
        let found = loop {
            if children().iter().any(|pid| !self.before.contains(pid)) {
                break true;
            }
            if Instant::now() >= deadline {
                break false;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        *self.seen.lock().unwrap() = Some(found);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allowed_calls_sandbox_is_being_built_when_its_decision_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let project = base.join("project");
    std::fs::create_dir_all(&project).unwrap();
    // `chock exec`'s kind of session: no background git forks beside the call.
    let s = Session::open(
        &project,
        SessionOptions {
            sessions_root: Some(base.join("sessions")),
            scratch: true,
            calls: Calls::One,
            ..SessionOptions::default()
        },
    )
    .unwrap();
    let tap = Arc::new(AtDecision {
        before: children(),
        patience: Duration::from_secs(10),
        seen: Mutex::new(None),
    });
    s.log().tap(tap.clone()).unwrap();
    let opts = CallOptions {
        call_id: Some("b1".into()),
        ..CallOptions::default()
    };
    let r = s
        .confined_call_async(&["true".to_string()], &opts, &NoApprover)
        .await
        .unwrap();
    assert!(
        matches!(r.outcome, CallOutcome::Ran { .. }),
        "{:?}",
        r.outcome
    );
    assert_eq!(
        *tap.seen.lock().unwrap(),
        Some(true),
        "the call's setup was not forked while its decision was synced"
    );
}
