//! Every outcome of the pipeline, with a real policy file and a real session log; fakes only for
//! a person's and a reviewer's answer. Every event read is parsed strictly as its kind's type.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use chock_decide::{
    AllowedBy, Answer, AnswerError, AnswerFuture, Answerer, ApprovalBroker, Count, Nobody, Notice,
    Outcome, Pipeline, Question, RefusedBy, Resolution, Role, Settled,
};
use chock_log::{Log, SessionHeader};
use chock_policy::{Action, Policy};
use chock_protocol::EventData;
use chock_protocol::log::AnswerKind;

/// An answerer that gives `answer` after `delay_ms`, counting questions and resolutions.
#[derive(Debug)]
struct Fake {
    name: &'static str,
    role: Role,
    delay_ms: u64,
    answer: Option<Answer>,
    asked: AtomicUsize,
    resolved: Mutex<Vec<Resolution>>,
}

impl Answerer for Fake {
    fn name(&self) -> String {
        self.name.into()
    }
    fn role(&self) -> Role {
        self.role
    }
    fn answer<'a>(&'a self, _q: &'a Question) -> AnswerFuture<'a> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(self.delay_ms)).await;
            self.answer.clone()
        })
    }
    fn resolved(&self, resolution: &Resolution) {
        self.resolved.lock().unwrap().push(resolution.clone());
    }
}

fn fake(name: &'static str, role: Role, delay_ms: u64, answer: Option<Answer>) -> Arc<Fake> {
    Arc::new(Fake {
        name,
        role,
        delay_ms,
        answer,
        asked: AtomicUsize::new(0),
        resolved: Mutex::default(),
    })
}

fn yes() -> Option<Answer> {
    Some(Answer::AllowOnce {
        reasons: "fine".into(),
    })
}

fn no() -> Option<Answer> {
    Some(Answer::Deny {
        reasons: "not that".into(),
    })
}

struct Setup {
    dir: tempfile::TempDir,
    pipeline: Pipeline,
}

fn setup(rule: &str, broker: ApprovalBroker) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(
        project.join("chock.toml"),
        format!("[[rule]]\naction = \"fs.write\"\ndecision = \"{rule}\"\n"),
    )
    .unwrap();
    let policy = Policy::load(&project).unwrap();
    let log = Log::create(&dir.path().join("sessions"), SessionHeader::default()).unwrap();
    let pipeline = Pipeline::new(log, Arc::new(RwLock::new(policy)), broker);
    Setup { dir, pipeline }
}

impl Setup {
    async fn settle(&self, detail: &str) -> Settled {
        self.pipeline
            .settle(Some("c1"), &Action::parse("fs.write").unwrap(), detail)
            .await
            .unwrap()
    }

    /// The call's events after session.start, each parsed strictly.
    fn events(&self) -> Vec<EventData> {
        chock_log::read_events(self.pipeline.log().dir())
            .unwrap()
            .iter()
            .skip(1)
            .map(|e| EventData::parse_exact(e.kind, &e.data).unwrap())
            .collect()
    }

    fn kinds(&self) -> Vec<&'static str> {
        self.events().iter().map(|e| e.kind().as_str()).collect()
    }
}

/// The log of one asked act: ask → answer → decision, the answer naming the ask's question.
fn assert_asked(events: &[EventData], answer: AnswerKind, by: Option<&str>, allowed: bool) {
    let [
        EventData::ApprovalAsk(ask),
        EventData::ApprovalAnswer(answered),
        EventData::Decision(decision),
    ] = events
    else {
        panic!("not ask → answer → decision: {events:?}");
    };
    assert!(ask.question.as_deref().is_some_and(|q| q.starts_with("q-")));
    assert_eq!(answered.question, ask.question);
    assert_eq!(answered.answer, answer);
    assert_eq!(answered.by.as_deref(), by);
    assert_eq!(decision.allowed, allowed);
}

#[tokio::test]
async fn allowed_and_refused_by_the_table_ask_nobody() {
    let person = fake("person", Role::Human, 0, yes());
    let s = setup("allow", ApprovalBroker::new().with(person.clone()));
    let settled = s.settle("write x").await;
    assert!(matches!(
        settled.outcome,
        Outcome::Allowed {
            by: AllowedBy::Table,
            ..
        }
    ));
    assert_eq!(settled.count(), Some(Count::AllowedByTable));
    assert_eq!(s.kinds(), ["decision"]);

    let s = setup("deny", ApprovalBroker::new().with(person.clone()));
    let settled = s.settle("write x").await;
    assert!(matches!(
        settled.outcome,
        Outcome::Refused {
            by: RefusedBy::Table,
            ..
        }
    ));
    assert!(
        settled
            .refusal()
            .unwrap()
            .contains("chock.toml:2 (rule `fs.write`)"),
        "{settled:?}"
    );
    assert_eq!(settled.count(), Some(Count::DeniedByTable));
    assert_eq!(s.kinds(), ["decision"]);
    assert_eq!(person.asked.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn allowed_and_refused_by_a_person_are_logged_ask_answer_decision() {
    let s = setup(
        "ask",
        ApprovalBroker::new().with(fake("person", Role::Human, 0, yes())),
    );
    let settled = s.settle("write x").await;
    assert_eq!(
        settled.outcome,
        Outcome::Allowed {
            by: AllowedBy::Person {
                name: "person".into()
            },
            // A project row naming the act exactly keeps its reach when a person allows it.
            scope: chock_decide::AllowScope::ExactHost,
        }
    );
    assert_eq!(settled.questions, ["q-1"]);
    assert_asked(&s.events(), AnswerKind::AllowOnce, Some("person"), true);

    let s = setup(
        "ask",
        ApprovalBroker::new().with(fake("person", Role::Human, 0, no())),
    );
    let settled = s.settle("write x").await;
    assert!(matches!(
        &settled.outcome,
        Outcome::Refused { by: RefusedBy::Person { name }, .. } if name == "person"
    ));
    assert_eq!(settled.count(), Some(Count::DeniedByAnswer));
    assert!(settled.refusal().unwrap().contains("was refused by person"));
    assert_asked(&s.events(), AnswerKind::Deny, Some("person"), false);
}

#[tokio::test]
async fn allowed_and_refused_by_a_reviewer() {
    let person = fake("person", Role::Human, 0, yes());
    let s = setup(
        "agent_review",
        ApprovalBroker::new()
            .with(fake("reviewer:m", Role::Reviewer, 0, yes()))
            .with(person.clone()),
    );
    let settled = s.settle("write x").await;
    assert!(matches!(
        &settled.outcome,
        Outcome::Allowed { by: AllowedBy::Reviewer { name, reasons }, .. }
            if name == "reviewer:m" && reasons == "fine"
    ));
    assert_eq!(settled.count(), Some(Count::AllowedByReviewer));
    assert_asked(&s.events(), AnswerKind::AllowOnce, Some("reviewer:m"), true);
    assert_eq!(
        person.asked.load(Ordering::SeqCst),
        0,
        "agent_review asks no person"
    );

    let s = setup(
        "agent_review",
        ApprovalBroker::new().with(fake("reviewer:m", Role::Reviewer, 0, no())),
    );
    let settled = s.settle("write x").await;
    assert!(matches!(
        settled.outcome,
        Outcome::Refused {
            by: RefusedBy::Reviewer { .. },
            ..
        }
    ));
    assert!(
        settled.refusal().unwrap().contains("not that"),
        "{settled:?}"
    );
    let events = s.events();
    let EventData::ApprovalAnswer(answer) = &events[1] else {
        panic!("{events:?}")
    };
    assert_eq!(answer.reasons.as_deref(), Some("not that"));
}

#[tokio::test]
async fn agent_then_human_asks_the_reviewer_then_the_person() {
    let s = setup(
        "agent_then_human",
        ApprovalBroker::new()
            .with(fake("reviewer:m", Role::Reviewer, 0, yes()))
            .with(fake("person", Role::Human, 0, yes())),
    );
    let settled = s.settle("write x").await;
    assert!(matches!(
        settled.outcome,
        Outcome::Allowed {
            by: AllowedBy::Person { .. },
            ..
        }
    ));
    assert_eq!(settled.questions, ["q-1", "q-2"]);
    assert_eq!(
        s.kinds(),
        [
            "approval.ask",
            "approval.answer",
            "approval.ask",
            "approval.answer",
            "decision"
        ]
    );
}

#[tokio::test]
async fn yes_for_this_session_is_asked_once_and_then_allowed_by_the_session_allow() {
    let person = fake("person", Role::Human, 0, Some(Answer::AllowSession));
    let s = setup("ask", ApprovalBroker::new().with(person.clone()));
    s.settle("write x").await;
    let again = s.settle("write x").await;
    assert!(matches!(
        again.outcome,
        Outcome::Allowed {
            by: AllowedBy::SessionAllow,
            ..
        }
    ));
    assert_eq!(again.count(), Some(Count::AllowedByPerson));
    assert_eq!(person.asked.load(Ordering::SeqCst), 1);
    assert_eq!(
        s.kinds(),
        ["approval.ask", "approval.answer", "decision", "decision"]
    );
}

#[tokio::test]
async fn nobody_to_ask_nobody_in_time_and_everyone_giving_up_are_unanswered() {
    let s = setup("ask", ApprovalBroker::new());
    let settled = s.settle("write x").await;
    assert_eq!(
        settled.outcome,
        Outcome::Unanswered {
            asked: Role::Human,
            why: Nobody::NoAnswerer
        }
    );
    assert_eq!(settled.count(), Some(Count::Unanswered));
    assert!(
        settled
            .refusal()
            .unwrap()
            .contains("nobody was there to answer")
    );
    assert_asked(&s.events(), AnswerKind::None, None, false);

    let asleep = fake("asleep", Role::Human, 5_000, Some(Answer::AllowSession));
    let s = setup(
        "ask",
        ApprovalBroker::new()
            .with(asleep.clone())
            .with_timeout(Duration::from_millis(30)),
    );
    let settled = s.settle("write x").await;
    assert_eq!(
        settled.outcome,
        Outcome::Unanswered {
            asked: Role::Human,
            why: Nobody::TimedOut
        }
    );
    assert_asked(&s.events(), AnswerKind::None, None, false);
    assert_eq!(
        asleep.resolved.lock().unwrap()[0].by,
        None,
        "told it closed"
    );
    assert!(
        !s.pipeline
            .broker()
            .allowed_for_session("fs.write", "write x")
    );

    let s = setup(
        "agent_review",
        ApprovalBroker::new().with(fake("reviewer:m", Role::Reviewer, 0, None)),
    );
    let settled = s.settle("write x").await;
    assert_eq!(
        settled.outcome,
        Outcome::Unanswered {
            asked: Role::Reviewer,
            why: Nobody::Dropped
        }
    );
}

#[tokio::test]
async fn two_answerers_race_the_first_valid_wins_and_the_other_is_told() {
    let slow = fake("slow", Role::Human, 300, yes());
    let fast = fake("fast", Role::Human, 10, no());
    let s = setup(
        "ask",
        ApprovalBroker::new()
            .with(slow.clone())
            .with(fake(
                "confused",
                Role::Human,
                0,
                Some(Answer::Reply {
                    text: "sure".into(),
                }),
            ))
            .with(fast.clone()),
    );
    let settled = s.settle("write x").await;
    assert!(matches!(
        &settled.outcome,
        Outcome::Refused { by: RefusedBy::Person { name }, .. } if name == "fast"
    ));
    let told = slow.resolved.lock().unwrap().clone();
    assert_eq!(
        told,
        [Resolution {
            question: "q-1".into(),
            by: Some("fast".into()),
            answer: Some(AnswerKind::Deny),
        }]
    );
    // A late answer to the same question, and an answer to one never asked, are errors.
    let broker = s.pipeline.broker();
    assert_eq!(
        broker.answer("q-1", "slow", yes().unwrap()),
        Err(AnswerError::AlreadyAnswered {
            question: "q-1".into(),
            by: Some("fast".into())
        })
    );
    assert_eq!(
        broker.answer("q-9", "slow", yes().unwrap()),
        Err(AnswerError::Unknown("q-9".into()))
    );
}

#[tokio::test]
async fn a_push_client_answers_by_question_id_and_the_pull_answerer_is_told() {
    let slow = fake("terminal", Role::Human, 2_000, no());
    let s = setup("ask", ApprovalBroker::new().with(slow.clone()));
    let broker = s.pipeline.broker().clone();
    let client = broker.attach("browser");
    let mut notices = broker.subscribe();
    let answering = tokio::spawn(async move {
        let Ok(Notice::Asked { question, role }) = notices.recv().await else {
            panic!("no question")
        };
        assert_eq!(role, Role::Human);
        // A reply does not answer an approval; the error changes nothing.
        assert!(matches!(
            client.answer(&question.id, Answer::Reply { text: "hm".into() }),
            Err(AnswerError::DoesNotFit { .. })
        ));
        client.answer(&question.id, Answer::AllowSession).unwrap();
        let Ok(Notice::Resolved(resolution)) = notices.recv().await else {
            panic!("no resolution")
        };
        (question.id, resolution, client)
    });
    let settled = s.settle("write x").await;
    let (id, resolution, client) = answering.await.unwrap();
    assert!(matches!(
        &settled.outcome,
        Outcome::Allowed { by: AllowedBy::Person { name }, .. } if name == "browser"
    ));
    assert_eq!(resolution.by.as_deref(), Some("browser"));
    assert_eq!(slow.resolved.lock().unwrap()[0].question, id);
    assert!(matches!(
        client.answer(&id, Answer::AllowSession),
        Err(AnswerError::AlreadyAnswered { .. })
    ));
    assert_asked(&s.events(), AnswerKind::AllowSession, Some("browser"), true);
    // With the client gone and nobody else, a question is unanswered at once.
    drop(client);
    let s2 = Pipeline::new(
        s.pipeline.log().clone(),
        Arc::clone(s.pipeline.policy()),
        ApprovalBroker::new(),
    );
    let settled = s2
        .settle(None, &Action::parse("fs.write").unwrap(), "write y")
        .await
        .unwrap();
    assert!(matches!(settled.outcome, Outcome::Unanswered { .. }));
}

#[tokio::test]
async fn question_ids_go_on_from_the_log_when_a_session_is_reopened() {
    let s = setup(
        "ask",
        ApprovalBroker::new().with(fake("person", Role::Human, 0, yes())),
    );
    s.settle("write x").await;
    let dir = s.pipeline.log().dir().to_path_buf();
    let policy = Arc::clone(s.pipeline.policy());
    let _keep = s.dir;
    drop(s.pipeline);
    let log = Log::open(&dir).unwrap();
    let again = Pipeline::new(
        log,
        policy,
        ApprovalBroker::new().with(fake("person", Role::Human, 0, yes())),
    );
    let settled = again
        .settle(None, &Action::parse("fs.write").unwrap(), "write x")
        .await
        .unwrap();
    assert_eq!(settled.questions, ["q-2"]);
}

#[tokio::test]
async fn the_agents_free_question_is_logged_with_its_reply() {
    let s = setup(
        "ask",
        ApprovalBroker::new().with(fake(
            "person",
            Role::Human,
            0,
            Some(Answer::Reply {
                text: "tabs".into(),
            }),
        )),
    );
    let reply = s.pipeline.ask_person(Some("c1"), "tabs?").await.unwrap();
    assert_eq!(reply, Some(("person".into(), "tabs".into())));
    let events = s.events();
    let [
        EventData::ApprovalAsk(ask),
        EventData::ApprovalAnswer(answer),
    ] = &events[..]
    else {
        panic!("{events:?}")
    };
    assert_eq!(ask.question, answer.question);
    assert_eq!(answer.answer, AnswerKind::Reply);
    assert_eq!(answer.reply.as_deref(), Some("tabs"));
}

/// Answers every question the moment an observer hears of it, through the broker by its id: what
/// a client does that learns the id from the live event.
struct AnswersAtOnce {
    client: chock_decide::Client,
}

impl chock_decide::Observer for AnswersAtOnce {
    fn asked(&self, question: &chock_decide::Question, _decision: chock_policy::Decision) {
        self.client
            .answer(
                &question.id,
                Answer::AllowOnce {
                    reasons: String::new(),
                },
            )
            .expect("the question is open by the time anyone hears of it");
    }
}

#[tokio::test]
async fn a_question_is_open_for_answers_before_anyone_hears_of_it() {
    let broker = ApprovalBroker::new();
    let client = broker.attach("editor");
    let s = setup("ask", broker.clone());
    let observer = Arc::new(AnswersAtOnce { client });
    let pipeline = s.pipeline.clone().with_observer(observer);
    let settled = pipeline
        .settle(Some("c1"), &Action::parse("fs.write").unwrap(), "write y")
        .await
        .unwrap();
    assert!(matches!(
        &settled.outcome,
        Outcome::Allowed { by: AllowedBy::Person { name }, .. } if name == "editor"
    ));
}
