//! The pipeline's errors.

use chock_protocol::log::AnswerKind;

/// What stopped the pipeline from settling an act. Any error means the act does not happen.
#[derive(Debug, thiserror::Error)]
pub enum DecideError {
    /// The log could not record the question, the answer or the decision.
    #[error(transparent)]
    Log(#[from] chock_log::LogError),
    /// No async runtime could be made to wait for the answer on.
    #[error("cannot wait for an answer: {0}")]
    Runtime(#[source] std::io::Error),
}

/// Why a push-style answer was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnswerError {
    /// No question with this id was asked in the session.
    #[error("no question {0} was asked")]
    Unknown(String),
    /// The question is closed: another answer won, or nobody answered in time.
    #[error("question {question} is already resolved{}", by.as_ref().map(|b| format!(" (answered by {b})")).unwrap_or_else(|| " (nobody answered in time)".into()))]
    AlreadyAnswered {
        /// The question's id.
        question: String,
        /// Who answered it (`None`: it closed unanswered).
        by: Option<String>,
    },
    /// The question is put to reviewer models only.
    #[error("question {0} is for a reviewer model, not for a person")]
    NotForPeople(String),
    /// The answer does not fit the question (a reply to an approval, a yes to a free question).
    #[error("`{answer:?}` does not answer question {question}")]
    DoesNotFit {
        /// The question's id.
        question: String,
        /// The answer given.
        answer: AnswerKind,
    },
    /// `none` is what the log writes when nobody answered; a client cannot send it.
    #[error("`none` is not an answer")]
    NotAnAnswer,
    /// A reply without its text.
    #[error("a reply needs its text")]
    NoReplyText,
}
