//! A session end to end: policy, log, workspace and the confined call, through a real sandbox.

use std::path::PathBuf;

use chock_session::{
    Approval, ApprovalRequest, Approver, CallOptions, CallOutcome, Session, SessionOptions,
};

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

fn kinds(session: &Session) -> Vec<(String, Option<String>)> {
    chock_log::read_events(session.log().dir())
        .unwrap()
        .into_iter()
        .map(|e| (e.kind.to_string(), e.call_id.clone()))
        .collect()
}

fn argv(words: &[&str]) -> Vec<String> {
    words.iter().map(|s| s.to_string()).collect()
}

struct Answer(Approval);

impl Approver for Answer {
    fn approve(&self, _request: &ApprovalRequest) -> Approval {
        self.0.clone()
    }
}

#[test]
fn an_allowed_call_runs_in_the_workspace_and_is_logged_in_order() {
    let f = fixture("");
    let s = open(&f);
    let opts = CallOptions {
        call_id: Some("toolu_1".into()),
        ..CallOptions::default()
    };
    let r = s
        .confined_call(
            &argv(&["sh", "-c", "cat data.txt; echo w > new.txt"]),
            &opts,
            &Answer(Approval::NoAnswer),
        )
        .unwrap();
    assert_eq!(r.action, "exec.system.sh");
    match r.outcome {
        CallOutcome::Ran {
            outcome, stdout, ..
        } => {
            assert_eq!(outcome.status, chock_sandbox::ExitStatus::Exited(0));
            assert_eq!(stdout, b"data\n");
        }
        other => panic!("{other:?}"),
    }
    assert!(
        !f.project.join("new.txt").exists(),
        "the project is never written"
    );
    let k = kinds(&s);
    let call: Vec<&str> = k
        .iter()
        .filter(|(_, c)| c.as_deref() == Some("toolu_1"))
        .map(|(k, _)| k.as_str())
        .collect();
    assert_eq!(call, ["tool.call", "decision", "tool.result"]);
}

#[test]
fn a_deny_never_reaches_the_sandbox() {
    let f = fixture("[[rule]]\naction = \"exec.system.sh\"\ndecision = \"deny\"\n");
    let s = open(&f);
    let r = s
        .confined_call(
            &argv(&["sh", "-c", "echo x > x"]),
            &CallOptions::default(),
            &Answer(Approval::NoAnswer),
        )
        .unwrap();
    assert!(matches!(r.outcome, CallOutcome::Refused { .. }));
    let names: Vec<String> = kinds(&s).into_iter().map(|(k, _)| k).collect();
    assert_eq!(
        names,
        ["session.start", "tool.call", "decision", "tool.result"]
    );
    // The refused call's record ends with a result saying it did not run, and why.
    let events = chock_log::read_events(s.log().dir()).unwrap();
    assert_eq!(events[3].data["ran"], false);
    assert_eq!(events[3].data["refused"], true);
    assert_eq!(events[3].data["reason"], "the policy denies it");
}

#[test]
fn an_ask_runs_only_when_approved() {
    let f = fixture("[[rule]]\naction = \"exec.system.*\"\ndecision = \"ask\"\n");
    let s = open(&f);
    let refused = s
        .confined_call(
            &argv(&["true"]),
            &CallOptions::default(),
            &Answer(Approval::Refused {
                by: "person".into(),
                reason: "no".into(),
            }),
        )
        .unwrap();
    assert!(matches!(refused.outcome, CallOutcome::Refused { ref by, .. } if by == "person"));
    let approved = s
        .confined_call(
            &argv(&["true"]),
            &CallOptions::default(),
            &Answer(Approval::Approved {
                by: "person".into(),
            }),
        )
        .unwrap();
    assert!(matches!(approved.outcome, CallOutcome::Ran { .. }));
    let names: Vec<String> = kinds(&s).into_iter().map(|(k, _)| k).collect();
    assert_eq!(
        names,
        [
            "session.start",
            "tool.call",
            "decision",
            "approval.ask",
            "approval.answer",
            "tool.result",
            "tool.call",
            "decision",
            "approval.ask",
            "approval.answer",
            "tool.result"
        ]
    );
}

#[test]
fn close_removes_the_workspace_unless_kept() {
    let f = fixture("");
    let s = open(&f);
    let dir = s.log().dir().to_path_buf();
    assert!(dir.join("workspace").is_dir());
    s.close(false).unwrap();
    assert!(!dir.join("workspace").exists());
    assert!(dir.join("log.jsonl").is_file(), "the log stays");
}
