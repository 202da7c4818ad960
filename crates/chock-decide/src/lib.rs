//! The one decision pipeline: every act Chock may do — a tool call, a command's connection, an
//! apply or undo from the command line, `chock exec` — is settled by [`Pipeline::settle`].
//!
//! 1. The live table decides (the session's policy, its ratchet included).
//! 2. For `ask`, `agent_review` and `agent_then_human` the question gets an id unique in the session
//!    (`q-<n>`), is logged as `approval.ask`, and is put to the [`ApprovalBroker`]'s answerers of the
//!    role (people, reviewer models; pull-style [`Answerer`]s and push-style [`Client`]s at once).
//!    The first valid answer wins and every answerer is told the question is resolved; the answer
//!    is logged as `approval.answer`, naming the question.
//! 3. The `decision` is logged.
//! 4. The caller gets a typed [`Settled`]: allowed by whom, refused by whom and why, or
//!    unanswered. Every text (the log's `decided_by`, the refusal the model reads) is derived from
//!    it.
//!
//! Nobody answering — nobody to ask, no answer in time, every answerer giving up — is a refusal.
#![forbid(unsafe_code)]
// No library makes an async runtime or blocks on one (the workspace's clippy.toml).
#![cfg_attr(not(test), deny(clippy::disallowed_methods))]

pub mod broker;
mod error;
pub mod gate;
mod outcome;
mod pipeline;

pub use broker::{
    Answer, AnswerFuture, Answerer, ApprovalBroker, Client, Nobody, Notice, Question, QuestionKind,
    Reply, Resolution, ReviewerVerdict, Role,
};
pub use error::{AnswerError, DecideError, RestrictError};
pub use gate::{
    AllowScope, Gate, GateAnswer, GateFuture, RuleGate, TableGate, a_connect_rule_decides,
    commands_may_connect, scope_of,
};
pub use outcome::{AllowedBy, Count, Outcome, RefusedBy, Settled};
pub use pipeline::{
    Harness, Observer, Pipeline, PipelineGate, Ruling, Secret, SettledSecret, policy_decision,
    table_decision,
};
