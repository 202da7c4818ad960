//! What the broker carries: a question, the answers it takes, who may answer it ([`Role`],
//! [`Answerer`]) and how it ended ([`Reply`], [`Resolution`], [`Notice`]). A leaf of the broker:
//! the answerers (a terminal, a reviewer, the daemon's clients) need these types, not its
//! machinery.

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use chock_protocol::log::{AnswerKind, Asked, answers_for};
use serde::Serialize;

use crate::error::AnswerError;

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
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Question {
    /// Its id, unique in the session (`q-3`): the log's ask and answer name it, and a push-style
    /// answer gives it.
    pub id: String,
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
    /// Lines shown before the act to whoever answers (a policy file's whole new content),
    /// already rendered; a prompt still escapes each one.
    pub context: Vec<String>,
    /// A reviewer's verdict, when a person is asked after one (`agent_then_human`).
    pub reviewer: Option<ReviewerVerdict>,
    /// The answer is a secret (a password git asked for): a client reads it without echo and
    /// shows it masked.
    pub secret: bool,
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

    /// The answer as the log and the client protocol name it.
    pub fn kind(&self) -> AnswerKind {
        match self {
            Answer::AllowOnce { .. } => AnswerKind::AllowOnce,
            Answer::AllowSession => AnswerKind::AllowSession,
            Answer::Deny { .. } => AnswerKind::Deny,
            Answer::Reply { .. } => AnswerKind::Reply,
        }
    }

    /// The answer a client sent as `Op::Answer { answer, reasons, reply }`. `none` is not an
    /// answer, and a reply needs its text.
    pub fn from_kind(
        kind: AnswerKind,
        reasons: Option<String>,
        reply: Option<String>,
    ) -> Result<Answer, AnswerError> {
        let reasons = reasons.unwrap_or_default();
        Ok(match kind {
            AnswerKind::AllowOnce => Answer::AllowOnce { reasons },
            AnswerKind::AllowSession => Answer::AllowSession,
            AnswerKind::Deny => Answer::Deny { reasons },
            AnswerKind::Reply => Answer::Reply {
                text: reply.ok_or(AnswerError::NoReplyText)?,
            },
            AnswerKind::None => return Err(AnswerError::NotAnAnswer),
        })
    }

    /// Whether the answer is one `question` offers ([`Question::answers`]).
    pub(super) fn fits(&self, kind: QuestionKind, action: Option<&str>, secret: bool) -> bool {
        offered(kind, action, secret).contains(&self.kind())
    }
}

/// The answers a person may give a question of `kind` about `action`. A secret may also be
/// refused with a reason: an answerer that cannot take one masked (an editor over ACP) says so
/// in the log instead of leaving the prompt to time out.
pub(super) fn offered(kind: QuestionKind, action: Option<&str>, secret: bool) -> Vec<AnswerKind> {
    match kind {
        // An approval always names its act; one that did not would still be an act.
        QuestionKind::Approval => answers_for(Asked::Person, Some(action.unwrap_or_default())),
        QuestionKind::Question if secret => vec![AnswerKind::Reply, AnswerKind::Deny],
        QuestionKind::Question => answers_for(Asked::Person, None),
    }
}

impl Question {
    /// The answers a person may give it (yes once, yes for the session, no; only yes once or no
    /// for an apply; a reply to a free question): what an answerer offers, and all the broker
    /// takes.
    pub fn answers(&self) -> Vec<AnswerKind> {
        offered(self.kind, self.action.as_deref(), self.secret)
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

/// How a question was resolved, as every answerer and subscriber is told.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Resolution {
    /// The question's id.
    pub question: String,
    /// Who answered (`None`: nobody did, and the question is closed as a refusal).
    pub by: Option<String>,
    /// The winning answer (`None`: nobody answered).
    pub answer: Option<AnswerKind>,
}

/// What the broker tells its subscribers (a daemon forwards these to its clients).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "notice", rename_all = "snake_case")]
pub enum Notice {
    /// A question is open; push-style answers to it are taken when `role` is [`Role::Human`].
    Asked {
        /// The question.
        question: Question,
        /// Who it is put to.
        role: Role,
    },
    /// A question is closed: the first valid answer won (or nobody answered).
    Resolved(Resolution),
}

/// Something that answers questions when asked (pull-style). `answer` returns `None` when it
/// cannot (its channel closed, the reviewer's reply was unreadable): that answerer drops out.
pub trait Answerer: Send + Sync + fmt::Debug {
    /// A short name for the log (`terminal`, `reviewer:claude-haiku-4-5`).
    fn name(&self) -> String;
    /// Whether it speaks for a person or is a reviewer model.
    fn role(&self) -> Role;
    /// Answers one question.
    fn answer<'a>(&'a self, question: &'a Question) -> AnswerFuture<'a>;
    /// Told that a question it was asked is closed (another answer won, or nobody answered in
    /// time), so it can take the question off its screen. The default does nothing.
    fn resolved(&self, resolution: &Resolution) {
        let _ = resolution;
    }
}

/// How the broker's question ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// The first valid answer.
    Answered {
        /// The answerer's name.
        by: String,
        /// The answer.
        answer: Answer,
    },
    /// Nobody answered: a refusal.
    Nobody(Nobody),
}

/// Why nobody answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Nobody {
    /// There was nobody of the role to ask.
    NoAnswerer,
    /// No valid answer came within the broker's timeout.
    TimedOut,
    /// Every answerer gave up (end of input, an unreadable verdict, clients gone).
    Dropped,
}
