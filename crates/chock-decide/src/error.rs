//! The pipeline's errors.

use chock_protocol::log::AnswerKind;

/// What stopped the pipeline from settling an act. Any error means the act does not happen.
#[derive(Debug, thiserror::Error)]
pub enum DecideError {
    /// The log could not record the question, the answer or the decision.
    #[error(transparent)]
    Log(#[from] chock_log::LogError),
}

/// Why a narrowing of the session's policy was refused.
#[derive(Debug, thiserror::Error)]
pub enum RestrictError {
    /// The pattern is malformed, or the decision would widen.
    #[error(transparent)]
    Ratchet(chock_policy::RatchetError),
    /// The live policy's lock was poisoned by a panic.
    #[error("the session's policy is unavailable")]
    Unavailable,
    /// The narrowing could not be logged, so it was not made.
    #[error(transparent)]
    Log(#[from] chock_log::LogError),
    /// The decision of the call that asked for the narrowing could not be logged, so it was not
    /// made.
    #[error(transparent)]
    Decision(#[from] DecideError),
}

/// Why a push-style answer was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnswerError {
    /// No question with this id was asked in the session.
    #[error("no question {0} was asked")]
    Unknown(String),
    /// The question is closed: another answer won, or nobody answered in time.
    #[error("question {question} is already resolved{}", by.as_ref().map(|b| format!(" (answered by {b})")).unwrap_or_else(|| " (nobody answered it: it was refused)".into()))]
    AlreadyAnswered {
        /// The question's id.
        question: String,
        /// Who answered it (`None`: it closed unanswered).
        by: Option<String>,
    },
    /// The question is put to reviewer models only.
    #[error("question {0} is for a reviewer model, not for a person")]
    NotForPeople(String),
    /// The answer is not one the question offers (a reply to an approval, a yes to a free
    /// question, yes for the session to an apply, which is offered once or not at all).
    #[error("`{}` does not answer question {question}: it takes {}", answer_name(*answer), offered.iter().map(|a| answer_name(*a)).collect::<Vec<_>>().join(", "))]
    DoesNotFit {
        /// The question's id.
        question: String,
        /// The answer given.
        answer: AnswerKind,
        /// The answers it takes.
        offered: Vec<AnswerKind>,
    },
    /// `none` is what the log writes when nobody answered; a client cannot send it.
    #[error("`none` is not an answer")]
    NotAnAnswer,
    /// A reply without its text.
    #[error("a reply needs its text")]
    NoReplyText,
}

/// An answer as the protocol spells it (`allow_session`).
fn answer_name(answer: AnswerKind) -> &'static str {
    match answer {
        AnswerKind::AllowOnce => "allow_once",
        AnswerKind::AllowSession => "allow_session",
        AnswerKind::Deny => "deny",
        AnswerKind::Reply => "reply",
        AnswerKind::None => "none",
    }
}
