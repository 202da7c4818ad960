//! `Pipeline::settle_secret`, the one way a password is had: the table first (`deny` asks nobody),
//! then the prompt as the question (`ask` and `allow` alike), a reviewer first for `agent_review`;
//! an answerer that cannot take a secret refuses it with a reason the log keeps. Real policy
//! file, real log; fakes only for who answers.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use chock_decide::{
    AllowedBy, Answer, AnswerFuture, Answerer, ApprovalBroker, Outcome, Pipeline, Question,
    QuestionKind, RefusedBy, Role,
};
use chock_log::{Log, SessionHeader};
use chock_policy::{Action, Policy};
use chock_protocol::EventData;
use chock_protocol::log::AnswerKind;

const PASSWORD: &str = "correct-horse-battery";

/// Answers every question put to its role with `answer`, counting them (and the secret ones).
#[derive(Debug)]
struct Fake {
    name: &'static str,
    role: Role,
    answer: Answer,
    asked: AtomicUsize,
    secrets: AtomicUsize,
}

impl Answerer for Fake {
    fn name(&self) -> String {
        self.name.into()
    }
    fn role(&self) -> Role {
        self.role
    }
    fn answer<'a>(&'a self, q: &'a Question) -> AnswerFuture<'a> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        if q.secret {
            self.secrets.fetch_add(1, Ordering::SeqCst);
        }
        Box::pin(async move { Some(self.answer.clone()) })
    }
}

fn fake(name: &'static str, role: Role, answer: Answer) -> Arc<Fake> {
    Arc::new(Fake {
        name,
        role,
        answer,
        asked: AtomicUsize::new(0),
        secrets: AtomicUsize::new(0),
    })
}

fn typed() -> Answer {
    Answer::Reply {
        text: PASSWORD.into(),
    }
}

struct Setup {
    _dir: tempfile::TempDir,
    pipeline: Pipeline,
}

fn setup(decision: &str, answerers: &[Arc<Fake>]) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(
        project.join("chock.toml"),
        format!("[[rule]]\naction = \"secret.password.1.0.0.127\"\ndecision = \"{decision}\"\n"),
    )
    .unwrap();
    let policy = Policy::load(&project).unwrap();
    let log = Log::create(&dir.path().join("sessions"), SessionHeader::default()).unwrap();
    let mut broker = ApprovalBroker::new();
    for a in answerers {
        broker = broker.with(a.clone());
    }
    Setup {
        pipeline: Pipeline::new(log, Arc::new(RwLock::new(policy)), broker),
        _dir: dir,
    }
}

impl Setup {
    async fn settle(&self) -> chock_decide::SettledSecret {
        let action = Action::secret_password("127.0.0.1").unwrap();
        self.pipeline
            .settle_secret(Some("c1"), &action, "git asks for the password")
            .await
            .unwrap()
    }

    fn events(&self) -> Vec<EventData> {
        chock_log::read_events(self.pipeline.log().dir())
            .unwrap()
            .iter()
            .skip(1)
            .map(|e| EventData::parse_exact(e.kind, &e.data).unwrap())
            .collect()
    }

    fn raw_log(&self) -> String {
        std::fs::read_to_string(self.pipeline.log().dir().join("log.jsonl")).unwrap()
    }
}

#[tokio::test]
async fn deny_asks_nobody_and_logs_the_refusal() {
    let person = fake("person", Role::Human, typed());
    let s = setup("deny", std::slice::from_ref(&person));
    let settled = s.settle().await;
    assert!(settled.secret.is_none());
    assert!(matches!(
        settled.settled.outcome,
        Outcome::Refused {
            by: RefusedBy::Table,
            ..
        }
    ));
    assert_eq!(person.asked.load(Ordering::SeqCst), 0, "a prompt was shown");
    let events = s.events();
    let [EventData::Decision(d)] = events.as_slice() else {
        panic!("{:?}", s.events());
    };
    assert_eq!(d.action.as_deref(), Some("secret.password.1.0.0.127"));
    assert!(!d.allowed);
}

#[tokio::test]
async fn ask_and_allow_each_put_the_one_prompt_and_log_no_text() {
    for decision in ["ask", "allow"] {
        let person = fake("person", Role::Human, typed());
        let s = setup(decision, std::slice::from_ref(&person));
        let settled = s.settle().await;
        assert_eq!(
            settled.secret.as_ref().map(|p| p.expose()),
            Some(PASSWORD),
            "{decision}"
        );
        assert_eq!(person.secrets.load(Ordering::SeqCst), 1, "{decision}");
        assert_eq!(person.asked.load(Ordering::SeqCst), 1, "{decision}");
        assert!(matches!(
            &settled.settled.outcome,
            Outcome::Allowed { by: AllowedBy::Person { name }, .. } if name == "person"
        ));
        let events = s.events();
        let [
            EventData::ApprovalAsk(ask),
            EventData::ApprovalAnswer(answer),
            EventData::Decision(d),
        ] = events.as_slice()
        else {
            panic!("{:?}", s.events());
        };
        assert!(ask.secret && ask.action.is_none(), "{ask:?}");
        assert_eq!(answer.answer, AnswerKind::Reply);
        assert_eq!(answer.reply, None);
        assert!(
            d.allowed && d.decided_by.contains("allowed by person"),
            "{d:?}"
        );
        assert!(!s.raw_log().contains(PASSWORD), "{decision}");
    }
}

#[tokio::test]
async fn agent_review_asks_the_reviewer_first_and_its_no_prompts_nobody() {
    let person = fake("person", Role::Human, typed());
    let reviewer = fake(
        "reviewer:m",
        Role::Reviewer,
        Answer::Deny {
            reasons: "no pushes today".into(),
        },
    );
    let s = setup("agent_review", &[person.clone(), reviewer.clone()]);
    let settled = s.settle().await;
    assert!(settled.secret.is_none());
    assert_eq!(reviewer.asked.load(Ordering::SeqCst), 1);
    assert_eq!(person.asked.load(Ordering::SeqCst), 0);

    let person = fake("person", Role::Human, typed());
    let reviewer = fake(
        "reviewer:m",
        Role::Reviewer,
        Answer::AllowOnce {
            reasons: "the push was approved".into(),
        },
    );
    let s = setup("agent_review", &[person.clone(), reviewer.clone()]);
    let settled = s.settle().await;
    assert_eq!(settled.secret.as_ref().map(|p| p.expose()), Some(PASSWORD));
    assert_eq!(person.secrets.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn an_answerer_that_cannot_take_a_secret_refuses_it_and_the_reason_is_logged() {
    let editor = fake(
        "editor:zed",
        Role::Human,
        Answer::Deny {
            reasons: "an ACP editor has no masked input".into(),
        },
    );
    let s = setup("ask", std::slice::from_ref(&editor));
    let settled = s.settle().await;
    assert!(settled.secret.is_none());
    assert!(matches!(
        &settled.settled.outcome,
        Outcome::Refused { by: RefusedBy::Person { name }, reason }
            if name == "editor:zed" && reason.contains("masked")
    ));
    let events = s.events();
    let [_, EventData::ApprovalAnswer(answer), EventData::Decision(d)] = events.as_slice() else {
        panic!("{:?}", s.events());
    };
    assert_eq!(answer.answer, AnswerKind::Deny);
    assert_eq!(
        answer.reasons.as_deref(),
        Some("an ACP editor has no masked input")
    );
    assert!(!d.allowed);
}

#[test]
fn a_secret_question_takes_a_reply_or_a_refusal_and_a_free_one_only_a_reply() {
    let mut q = Question {
        id: "q-1".into(),
        kind: QuestionKind::Question,
        call_id: None,
        action: None,
        decided_by: None,
        text: "?".into(),
        context: Vec::new(),
        reviewer: None,
        secret: true,
    };
    assert_eq!(q.answers(), [AnswerKind::Reply, AnswerKind::Deny]);
    q.secret = false;
    assert_eq!(q.answers(), [AnswerKind::Reply]);
}
