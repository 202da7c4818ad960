//! Deciding acts through the table and the approval broker, with a real policy file, a real session
//! log, and (for fetch_url) the real network broker against a loopback HTTP server.

use std::sync::{Arc, RwLock};

use chock_decide::broker::{Answer, AnswerFuture, Answerer, ApprovalBroker, Question, Role};
use chock_log::{Log, SessionHeader};
use chock_policy::{Action, Policy};
use chock_protocol::EventData;
use chock_test_support::model::page_server;
use chock_tools::events::NoEvents;
use chock_tools::gate::{Decider, Settled};
use chock_tools::web::{FetchInput, fetch_url};

/// An answerer that always gives the same answer, and counts how often it was asked.
#[derive(Debug)]
struct Fixed {
    role: Role,
    answer: Option<Answer>,
    asked: std::sync::atomic::AtomicUsize,
}

impl Answerer for Fixed {
    fn name(&self) -> String {
        match self.role {
            Role::Human => "person".into(),
            Role::Reviewer => "reviewer".into(),
        }
    }
    fn role(&self) -> Role {
        self.role
    }
    fn answer<'a>(&'a self, _q: &'a Question) -> AnswerFuture<'a> {
        self.asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Box::pin(async move { self.answer.clone() })
    }
}

fn fixed(role: Role, answer: Option<Answer>) -> Arc<Fixed> {
    Arc::new(Fixed {
        role,
        answer,
        asked: Default::default(),
    })
}

struct Setup {
    _dir: tempfile::TempDir,
    decider: Decider,
}

impl Setup {
    /// Settle one act of a call, as the agent loop does before acting.
    async fn settle(&self, call_id: &str, act: &str, detail: &str) -> Settled {
        self.decider
            .settle(Some(call_id), &action(act), detail)
            .await
            .unwrap()
    }
}

fn setup(policy: &str, broker: ApprovalBroker) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("chock.toml"), policy).unwrap();
    // The org bundle comes from CHOCK_ORG_POLICY or /etc/chock/org.toml; a test machine has neither.
    let policy = Policy::load(&project).unwrap();
    let log = Log::create(&dir.path().join("sessions"), SessionHeader::default()).unwrap();
    let decider = Decider {
        log,
        policy: Arc::new(RwLock::new(policy)),
        broker,
        sink: Arc::new(NoEvents),
        counts: Arc::default(),
        turn: Arc::default(),
    };
    Setup { _dir: dir, decider }
}

fn kinds(decider: &Decider) -> Vec<String> {
    chock_log::read_events(decider.log.dir())
        .unwrap()
        .iter()
        .map(|e| e.kind.as_str().to_string())
        .collect()
}

fn action(name: &str) -> Action {
    Action::parse(name).unwrap()
}

#[tokio::test]
async fn a_deny_names_the_rule_and_asks_nobody() {
    let person = fixed(Role::Human, Some(Answer::AllowSession));
    let s = setup(
        "[[rule]]\naction = \"fs.write\"\ndecision = \"deny\"\n",
        ApprovalBroker::new().with(person.clone()),
    );
    let settled = s.settle("c1", "fs.write", "write x").await;
    assert!(!settled.allowed);
    assert!(
        settled.refusal.contains("chock.toml:2 (rule `fs.write`)"),
        "{}",
        settled.refusal
    );
    assert_eq!(person.asked.load(std::sync::atomic::Ordering::SeqCst), 0);
    assert_eq!(kinds(&s.decider), ["session.start", "decision"]);
}

#[tokio::test]
async fn an_ask_with_nobody_is_refused_and_both_halves_are_logged() {
    let s = setup(
        "[[rule]]\naction = \"fs.write\"\ndecision = \"ask\"\n",
        ApprovalBroker::new(),
    );
    let settled = s.settle("c1", "fs.write", "write x").await;
    assert!(!settled.allowed);
    assert!(
        settled.refusal.contains("nobody was there to answer"),
        "{}",
        settled.refusal
    );
    assert_eq!(
        kinds(&s.decider),
        [
            "session.start",
            "approval.ask",
            "approval.answer",
            "decision"
        ]
    );
    // Each event is exactly its type, the answer names the question, and nobody answered.
    let events: Vec<EventData> = chock_log::read_events(s.decider.log.dir())
        .unwrap()
        .iter()
        .map(|e| EventData::parse_exact(e.kind, &e.data).unwrap())
        .collect();
    let (EventData::ApprovalAsk(ask), EventData::ApprovalAnswer(answer)) = (&events[1], &events[2])
    else {
        panic!("{events:?}")
    };
    assert_eq!(ask.question, answer.question);
    assert_eq!(answer.answer, chock_protocol::log::AnswerKind::None);
    assert_eq!(s.decider.counts.lock().unwrap().unanswered, 1);
}

#[tokio::test]
async fn yes_for_this_session_is_asked_once() {
    let person = fixed(Role::Human, Some(Answer::AllowSession));
    let s = setup(
        "[[rule]]\naction = \"fs.write\"\ndecision = \"ask\"\n",
        ApprovalBroker::new().with(person.clone()),
    );
    for _ in 0..3 {
        assert!(s.settle("c", "fs.write", "write").await.allowed);
    }
    assert_eq!(person.asked.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(s.decider.counts.lock().unwrap().allowed_by_person, 3);
    // The yes covered that exact act: the same action on another path is asked again.
    s.settle("c", "fs.write", "write elsewhere").await;
    assert_eq!(person.asked.load(std::sync::atomic::Ordering::SeqCst), 2);
    // A narrowing outranks every earlier yes.
    s.decider
        .policy
        .write()
        .unwrap()
        .restrict("fs.write", chock_policy::Decision::Deny)
        .unwrap();
    s.decider.broker.forget_session_allows();
    let settled = s.settle("c", "fs.write", "write").await;
    assert!(!settled.allowed, "{settled:?}");
    assert!(!s.decider.broker.allowed_for_session("fs.write", "write"));
}

#[tokio::test]
async fn agent_review_is_the_reviewers_verdict_with_its_reasons() {
    let reviewer = fixed(
        Role::Reviewer,
        Some(Answer::Deny {
            reasons: "reads secrets".into(),
        }),
    );
    let person = fixed(
        Role::Human,
        Some(Answer::AllowOnce {
            reasons: String::new(),
        }),
    );
    let s = setup(
        "[[rule]]\naction = \"fs.read\"\ndecision = \"agent_review\"\n",
        ApprovalBroker::new().with(reviewer).with(person.clone()),
    );
    let settled = s.settle("c", "fs.read", "read ~/.ssh").await;
    assert!(!settled.allowed);
    assert!(
        settled.refusal.contains("reads secrets"),
        "{}",
        settled.refusal
    );
    assert_eq!(
        person.asked.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "agent_review asks no person"
    );
    let events = chock_log::read_events(s.decider.log.dir()).unwrap();
    let answer = events
        .iter()
        .find(|e| e.kind.as_str() == "approval.answer")
        .unwrap();
    assert_eq!(answer.data["reasons"], "reads secrets");
}

#[tokio::test]
async fn agent_then_human_needs_both_and_a_reviewer_no_asks_nobody_else() {
    let policy = "[[rule]]\naction = \"fs.read\"\ndecision = \"agent_then_human\"\n";
    let cases = [
        (
            Answer::Deny {
                reasons: "no".into(),
            },
            Some(Answer::AllowOnce {
                reasons: String::new(),
            }),
            false,
            0,
        ),
        (
            Answer::AllowOnce {
                reasons: "fine".into(),
            },
            Some(Answer::Deny {
                reasons: String::new(),
            }),
            false,
            1,
        ),
        (
            Answer::AllowOnce {
                reasons: "fine".into(),
            },
            None,
            false,
            1,
        ),
        (
            Answer::AllowOnce {
                reasons: "fine".into(),
            },
            Some(Answer::AllowOnce {
                reasons: String::new(),
            }),
            true,
            1,
        ),
    ];
    for (review, human, allowed, asked) in cases {
        let person = fixed(Role::Human, human.clone());
        let s = setup(
            policy,
            ApprovalBroker::new()
                .with(fixed(Role::Reviewer, Some(review.clone())))
                .with(person.clone()),
        );
        let settled = s.settle("c", "fs.read", "read").await;
        assert_eq!(
            settled.allowed, allowed,
            "{review:?} then {human:?}: {settled:?}"
        );
        assert_eq!(
            person.asked.load(std::sync::atomic::Ordering::SeqCst),
            asked,
            "{review:?}"
        );
    }
}

#[tokio::test]
async fn fetch_url_is_decided_logged_and_fetched_through_the_broker() {
    let port = page_server(
        Some("text/html"),
        "<html><body><h1>Docs</h1><p>hello &amp; welcome</p></body></html>",
    );
    let s = setup(
        "[[rule]]\naction = \"net.fetch.1.0.0.127\"\ndecision = \"allow\"\n",
        ApprovalBroker::new(),
    );
    let input = FetchInput {
        url: format!("http://127.0.0.1:{port}/docs"),
    };
    let out = fetch_url(
        &s.decider,
        &chock_broker::BrokerConfig::default(),
        "call-9",
        &input,
    )
    .await
    .unwrap();
    assert!(!out.is_error, "{}", out.text);
    assert!(out.text.contains("hello & welcome"), "{}", out.text);
    let events = chock_log::read_events(s.decider.log.dir()).unwrap();
    let decision = events
        .iter()
        .position(|e| e.kind.as_str() == "decision")
        .unwrap();
    assert_eq!(events[decision].data["action"], "net.fetch.1.0.0.127");
    assert_eq!(events[decision].call_id.as_deref(), Some("call-9"));
    let connect = events.iter().position(|e| e.kind.as_str() == "net.connect");
    assert!(
        connect.is_none_or(|c| c > decision),
        "decided before connecting"
    );
}

#[tokio::test]
async fn fetch_url_with_no_rule_and_nobody_to_ask_is_refused_before_any_connection() {
    let s = setup("", ApprovalBroker::new());
    let input = FetchInput {
        url: "http://127.0.0.1:9/".into(),
    };
    let out = fetch_url(
        &s.decider,
        &chock_broker::BrokerConfig::default(),
        "c",
        &input,
    )
    .await
    .unwrap();
    assert!(
        out.is_error && out.text.contains("nobody was there to answer"),
        "{}",
        out.text
    );
    let kinds = kinds(&s.decider);
    assert!(kinds.contains(&"decision".to_string()), "{kinds:?}");
    assert!(!kinds.contains(&"net.connect".to_string()), "{kinds:?}");
}

/// An act the network broker names (a command's connection, a fetch) is settled by the pipeline
/// through the call's gate: asked, answered and decided in the log, in that order.
#[tokio::test]
async fn the_call_gate_puts_an_act_to_the_person_and_logs_ask_answer_decision() {
    use chock_decide::{Gate, GateAnswer};
    use chock_tools::gate::CallGate;

    let rule = "[[rule]]\naction = \"net.connect.1.0.0.127.8080\"\ndecision = \"ask\"\n";
    let act = action("net.connect.1.0.0.127.8080");
    let person = fixed(
        Role::Human,
        Some(Answer::AllowOnce {
            reasons: String::new(),
        }),
    );
    let yes = setup(rule, ApprovalBroker::new().with(person.clone()));
    let gate = CallGate::new(&yes.decider, "call-1");
    match gate.decide(&act, "connect 127.0.0.1:8080").await {
        GateAnswer::Allow { decided_by, .. } => {
            assert!(decided_by.ends_with("allowed by person"), "{decided_by}")
        }
        refused => panic!("refused: {refused:?}"),
    }
    assert_eq!(person.asked.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(
        kinds(&yes.decider),
        [
            "session.start",
            "approval.ask",
            "approval.answer",
            "decision"
        ]
    );

    let refuser = fixed(
        Role::Human,
        Some(Answer::Deny {
            reasons: "not today".into(),
        }),
    );
    let no = setup(rule, ApprovalBroker::new().with(refuser));
    let gate = CallGate::new(&no.decider, "call-2");
    assert!(matches!(
        gate.decide(&act, "connect 127.0.0.1:8080").await,
        GateAnswer::Refuse { .. }
    ));
}
