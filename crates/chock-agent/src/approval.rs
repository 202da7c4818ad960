//! The approval broker: where every question the loop cannot answer from the table goes.
//!
//! The loop never talks to a terminal. It puts a [`Question`] to the [`ApprovalBroker`], which asks its
//! answerers — a person at a terminal today; a daemon client or a browser later; a reviewer model for
//! `agent_review` — and returns the first valid answer. Nobody to ask, or nobody answering in time, is a
//! refusal. The broker also remembers "yes for this session" per action, so the person is asked once.
//!
//! Who answers what:
//! - `ask`: the people (every [`Role::Human`] answerer, raced; first valid answer wins).
//! - `agent_review`: the reviewers (every [`Role::Reviewer`] answerer, raced).
//! - `agent_then_human`: the reviewers first; a reviewer's refusal refuses; a reviewer's allow is then put
//!   to the people, with the reviewer's reasons attached, and the person decides.
//!
//! The caller writes `approval.ask` before asking and `approval.answer` after, and the decision event
//! before the act: see [`crate::gate`].

use std::collections::HashSet;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::stream::{FuturesUnordered, StreamExt};
use serde::Serialize;

/// A boxed future, so answerers can be held as `Arc<dyn Answerer>`.
pub type AnswerFuture<'a> = Pin<Box<dyn Future<Output = Option<Answer>> + Send + 'a>>;

/// What kind of question it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum QuestionKind {
    /// May this act run? (yes once / yes for this session / no)
    Approval,
    /// The model's `ask_user`: a free-text question for the person.
    Question,
}

/// A question put to the answerers.
#[derive(Debug, Clone, Serialize)]
pub struct Question {
    /// Approval or free-text question.
    pub kind: QuestionKind,
    /// The tool call it belongs to.
    pub call_id: Option<String>,
    /// The act's name (`exec.cargo.test`), for approvals.
    pub action: Option<String>,
    /// What the table said and which rule said it.
    pub decided_by: Option<String>,
    /// What exactly would happen ("run `cargo test` in the sandbox"), or the model's question.
    pub text: String,
    /// A reviewer's verdict, when a person is asked after one (`agent_then_human`).
    pub reviewer: Option<ReviewerVerdict>,
}

/// A reviewer model's verdict, kept with the question a person then sees.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReviewerVerdict {
    /// Whether the reviewer allowed the act.
    pub allow: bool,
    /// Its reasons, verbatim.
    pub reasons: String,
}

/// One answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "answer", rename_all = "snake_case")]
pub enum Answer {
    /// Yes, this once.
    AllowOnce {
        /// Why (a reviewer's reasons; empty for a person).
        reasons: String,
    },
    /// Yes, and for the very same act (same action name, same detail: the same command line, the
    /// same host and port) later in this session — until the session's policy narrows. Never a
    /// whole class of acts: a yes to one `curl` is not a yes to every command.
    AllowSession,
    /// No.
    Deny {
        /// Why (a reviewer's reasons; empty for a person).
        reasons: String,
    },
    /// The text a person typed in reply to `ask_user`.
    Reply {
        /// The reply.
        text: String,
    },
}

impl Answer {
    /// Whether the act may run.
    pub fn allows(&self) -> bool {
        matches!(self, Answer::AllowOnce { .. } | Answer::AllowSession)
    }
}

/// Who an answerer speaks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// A person (terminal, browser, daemon client).
    Human,
    /// A reviewer model.
    Reviewer,
}

/// Something that can answer questions. `answer` returns `None` when it cannot (its channel closed, the
/// reviewer's reply was unreadable): that answerer simply drops out of the race.
pub trait Answerer: Send + Sync + fmt::Debug {
    /// A short name for the log (`terminal`, `reviewer:claude-haiku-4-5`).
    fn name(&self) -> String;
    /// Whether it speaks for a person or is a reviewer model.
    fn role(&self) -> Role;
    /// Answers one question.
    fn answer<'a>(&'a self, question: &'a Question) -> AnswerFuture<'a>;
}

/// The broker's settled answer: what was answered and by whom. `by == None` means nobody answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Answered {
    /// The answer; `None`: nobody answered, which is a refusal.
    pub answer: Option<Answer>,
    /// The answerer's name.
    pub by: Option<String>,
}

impl Answered {
    fn nobody() -> Self {
        Self {
            answer: None,
            by: None,
        }
    }

    /// Whether the act may run.
    pub fn allows(&self) -> bool {
        self.answer.as_ref().is_some_and(Answer::allows)
    }
}

/// The broker.
#[derive(Clone, Default)]
pub struct ApprovalBroker {
    answerers: Vec<Arc<dyn Answerer>>,
    /// (action name, detail) pairs a person allowed for the session.
    session_allows: Arc<Mutex<HashSet<(String, String)>>>,
    timeout: Option<Duration>,
}

impl fmt::Debug for ApprovalBroker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApprovalBroker")
            .field(
                "answerers",
                &self.answerers.iter().map(|a| a.name()).collect::<Vec<_>>(),
            )
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl ApprovalBroker {
    /// A broker with nobody to ask: every question is refused.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an answerer.
    #[must_use]
    pub fn with(mut self, answerer: Arc<dyn Answerer>) -> Self {
        self.answerers.push(answerer);
        self
    }

    /// Gives up (a refusal) when no answer arrives within `timeout`.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Whether anyone of `role` could be asked.
    pub fn has(&self, role: Role) -> bool {
        self.answerers.iter().any(|a| a.role() == role)
    }

    /// Whether a person already said "yes for this session" to exactly this act.
    pub fn allowed_for_session(&self, action: &str, detail: &str) -> bool {
        self.session_allows
            .lock()
            .map(|s| s.contains(&(action.to_string(), detail.to_string())))
            .unwrap_or(false)
    }

    /// Drops every "yes for this session": called when the session's policy narrows, so an earlier
    /// yes never outlives a restriction the agent (or anyone) placed afterwards.
    pub fn forget_session_allows(&self) {
        if let Ok(mut allows) = self.session_allows.lock() {
            allows.clear();
        }
    }

    /// Puts `question` to every answerer of `role` at once; the first valid answer wins. An approval
    /// answered with a reply (or a question answered with a yes/no) is not valid and is ignored.
    pub async fn ask(&self, role: Role, question: &Question) -> Answered {
        let mut race: FuturesUnordered<_> = self
            .answerers
            .iter()
            .filter(|a| a.role() == role)
            .map(|a| {
                let a = Arc::clone(a);
                async move { (a.name(), a.answer(question).await) }
            })
            .collect();
        if race.is_empty() {
            return Answered::nobody();
        }
        let first_valid = async {
            while let Some((name, answer)) = race.next().await {
                let Some(answer) = answer else { continue };
                let valid = match question.kind {
                    QuestionKind::Approval => !matches!(answer, Answer::Reply { .. }),
                    QuestionKind::Question => matches!(answer, Answer::Reply { .. }),
                };
                // A reviewer cannot grant a whole session.
                let answer = match (role, answer) {
                    (Role::Reviewer, Answer::AllowSession) => Answer::AllowOnce {
                        reasons: String::new(),
                    },
                    (_, answer) => answer,
                };
                if valid {
                    return Answered {
                        answer: Some(answer),
                        by: Some(name),
                    };
                }
            }
            Answered::nobody()
        };
        let answered = match self.timeout {
            Some(timeout) => tokio::time::timeout(timeout, first_valid)
                .await
                .unwrap_or_else(|_| Answered::nobody()),
            None => first_valid.await,
        };
        if let (Some(Answer::AllowSession), Some(action)) = (&answered.answer, &question.action)
            && let Ok(mut allows) = self.session_allows.lock()
        {
            allows.insert((action.clone(), question.text.clone()));
        }
        answered
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Fixed {
        name: &'static str,
        role: Role,
        delay_ms: u64,
        answer: Option<Answer>,
    }

    impl Answerer for Fixed {
        fn name(&self) -> String {
            self.name.to_string()
        }
        fn role(&self) -> Role {
            self.role
        }
        fn answer<'a>(&'a self, _q: &'a Question) -> AnswerFuture<'a> {
            Box::pin(async move {
                tokio::time::sleep(Duration::from_millis(self.delay_ms)).await;
                self.answer.clone()
            })
        }
    }

    fn approval(action: &str) -> Question {
        Question {
            kind: QuestionKind::Approval,
            call_id: Some("c1".into()),
            action: Some(action.into()),
            decided_by: Some("shipped default".into()),
            text: "run it".into(),
            reviewer: None,
        }
    }

    fn fixed(
        name: &'static str,
        role: Role,
        delay_ms: u64,
        answer: Option<Answer>,
    ) -> Arc<dyn Answerer> {
        Arc::new(Fixed {
            name,
            role,
            delay_ms,
            answer,
        })
    }

    #[tokio::test]
    async fn nobody_to_ask_is_a_refusal() {
        let broker = ApprovalBroker::new();
        let answered = broker.ask(Role::Human, &approval("exec.x")).await;
        assert_eq!(
            answered,
            Answered {
                answer: None,
                by: None
            }
        );
        assert!(!answered.allows());
    }

    #[tokio::test]
    async fn the_first_valid_answer_wins() {
        let broker = ApprovalBroker::new()
            .with(fixed(
                "slow",
                Role::Human,
                200,
                Some(Answer::AllowOnce {
                    reasons: String::new(),
                }),
            ))
            .with(fixed("gone", Role::Human, 0, None))
            .with(fixed(
                "fast",
                Role::Human,
                10,
                Some(Answer::Deny {
                    reasons: String::new(),
                }),
            ))
            .with(fixed(
                "reviewer",
                Role::Reviewer,
                0,
                Some(Answer::AllowOnce {
                    reasons: String::new(),
                }),
            ));
        let answered = broker.ask(Role::Human, &approval("exec.x")).await;
        assert_eq!(answered.by.as_deref(), Some("fast"));
        assert!(!answered.allows());
    }

    #[tokio::test]
    async fn a_reply_is_not_an_approval() {
        let broker = ApprovalBroker::new().with(fixed(
            "confused",
            Role::Human,
            0,
            Some(Answer::Reply {
                text: "sure".into(),
            }),
        ));
        assert_eq!(
            broker.ask(Role::Human, &approval("exec.x")).await,
            Answered::nobody()
        );
    }

    #[tokio::test]
    async fn nobody_answering_in_time_is_a_refusal() {
        let broker = ApprovalBroker::new()
            .with(fixed(
                "asleep",
                Role::Human,
                5_000,
                Some(Answer::AllowSession),
            ))
            .with_timeout(Duration::from_millis(20));
        assert_eq!(
            broker.ask(Role::Human, &approval("exec.x")).await,
            Answered::nobody()
        );
        assert!(!broker.allowed_for_session("exec.x", "run it"));
    }

    #[tokio::test]
    async fn yes_for_this_session_covers_that_exact_act_until_forgotten() {
        let broker =
            ApprovalBroker::new().with(fixed("me", Role::Human, 0, Some(Answer::AllowSession)));
        assert!(
            broker
                .ask(Role::Human, &approval("exec.cargo.test"))
                .await
                .allows()
        );
        assert!(broker.allowed_for_session("exec.cargo.test", "run it"));
        assert!(!broker.allowed_for_session("exec.cargo.build", "run it"));
        // The same action name with another detail (another command line, another host) is another act.
        assert!(!broker.allowed_for_session("exec.cargo.test", "run something else"));
        broker.forget_session_allows();
        assert!(!broker.allowed_for_session("exec.cargo.test", "run it"));
    }
}
