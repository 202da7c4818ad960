//! A session end to end: policy, log, workspace and the confined call, through a real sandbox.

mod support;

use std::path::PathBuf;

use std::sync::Arc;

use chock_decide::{Answer, AnswerFuture, Answerer, ApprovalBroker, Pipeline, Question, Role};
use chock_protocol::EventData;
use chock_protocol::log::{AnswerKind, CommandResult};
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

/// A person's answer (the one fake: a human at a terminal).
#[derive(Debug)]
struct Person(Answer);

impl Answerer for Person {
    fn name(&self) -> String {
        "person".into()
    }
    fn role(&self) -> Role {
        Role::Human
    }
    fn answer<'a>(&'a self, _q: &'a Question) -> AnswerFuture<'a> {
        Box::pin(async move { Some(self.0.clone()) })
    }
}

fn answered_by(s: &Session, answer: Answer) -> Pipeline {
    s.pipeline(ApprovalBroker::new().with(Arc::new(Person(answer))))
}

/// The session's events, each parsed strictly as its kind's type.
fn payloads(s: &Session) -> Vec<EventData> {
    chock_log::read_events(s.log().dir())
        .unwrap()
        .iter()
        .map(|e| EventData::parse_exact(e.kind, &e.data).unwrap())
        .collect()
}

#[test]
fn an_allowed_call_runs_in_the_workspace_and_is_logged_in_order() {
    let f = fixture("");
    let s = open(&f);
    let opts = CallOptions {
        call_id: Some("toolu_1".into()),
        ..CallOptions::default()
    };
    let r = support::confined_call(
        &s,
        &argv(&["sh", "-c", "cat data.txt; echo w > new.txt"]),
        &opts,
        &NoApprover,
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
    assert_eq!(call, ["tool.call", "decision", "command.result"]);
    payloads(&s);
}

#[test]
fn a_deny_never_reaches_the_sandbox() {
    let f = fixture("[[rule]]\naction = \"exec.system.sh\"\ndecision = \"deny\"\n");
    let s = open(&f);
    let r = support::confined_call(
        &s,
        &argv(&["sh", "-c", "echo x > x"]),
        &CallOptions::default(),
        &NoApprover,
    )
    .unwrap();
    assert!(matches!(r.outcome, CallOutcome::Refused { .. }));
    let names: Vec<String> = kinds(&s).into_iter().map(|(k, _)| k).collect();
    assert_eq!(
        names,
        ["session.start", "tool.call", "decision", "command.result"]
    );
    // The refused call's record ends with a result saying it did not run, and why.
    let events = payloads(&s);
    assert!(matches!(&events[2], EventData::Decision(d) if !d.allowed));
    assert!(
        matches!(&events[3], EventData::CommandResult(CommandResult::Refused { reason, .. }) if reason == "the policy denies it"),
        "{:?}",
        events[3]
    );
}

#[test]
fn an_ask_runs_only_when_approved() {
    let f = fixture("[[rule]]\naction = \"exec.system.*\"\ndecision = \"ask\"\n");
    let s = open(&f);
    let refused = support::confined_call(
        &s,
        &argv(&["true"]),
        &CallOptions::default(),
        &answered_by(
            &s,
            Answer::Deny {
                reasons: "no".into(),
            },
        ),
    )
    .unwrap();
    assert!(matches!(refused.outcome, CallOutcome::Refused { ref by, .. } if by == "person"));
    let approved = support::confined_call(
        &s,
        &argv(&["true"]),
        &CallOptions::default(),
        &answered_by(
            &s,
            Answer::AllowOnce {
                reasons: String::new(),
            },
        ),
    )
    .unwrap();
    assert!(matches!(approved.outcome, CallOutcome::Ran { .. }));
    let names: Vec<String> = kinds(&s).into_iter().map(|(k, _)| k).collect();
    assert_eq!(
        names,
        [
            "session.start",
            "tool.call",
            "approval.ask",
            "approval.answer",
            "decision",
            "command.result",
            "tool.call",
            "approval.ask",
            "approval.answer",
            "decision",
            "command.result"
        ]
    );
    // Each answer names its question, and the question ids are the session's own.
    let events = payloads(&s);
    let (EventData::ApprovalAsk(ask), EventData::ApprovalAnswer(answer)) = (&events[2], &events[3])
    else {
        panic!("{events:?}")
    };
    assert_eq!(ask.question.as_deref(), Some("q-1"));
    assert_eq!(answer.question.as_deref(), Some("q-1"));
    assert_eq!(answer.answer, AnswerKind::Deny);
    assert!(matches!(&events[4], EventData::Decision(d) if !d.allowed));
    assert!(
        matches!(&events[7], EventData::ApprovalAsk(a) if a.question.as_deref() == Some("q-2"))
    );
    assert!(matches!(&events[9], EventData::Decision(d) if d.allowed));
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
