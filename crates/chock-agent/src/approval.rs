//! The approval broker: where every question the loop cannot answer from the table goes. It lives
//! in chock-decide, with the one decision pipeline that logs each question, its answer and the
//! decision ([`chock_tools::gate`]); re-exported here so the agent's answerers (the terminal, the
//! reviewer model) and their callers name it where they always did.

pub use chock_decide::broker::{
    Answer, AnswerFuture, Answerer, ApprovalBroker, Client, Nobody, Notice, Question, QuestionKind,
    Reply, Resolution, ReviewerVerdict, Role,
};
