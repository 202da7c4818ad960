//! The protocol's operations ([`chock_protocol::ops::Op`]) applied to a session runtime: what a
//! client (the daemon, a terminal interface, an editor) sends, in one typed entry point.

use chock_decide::{Answer, AnswerError, Client};
use chock_protocol::log::{Note, RatchetChange};
use chock_protocol::ops::Op;

use super::SessionRuntime;
use crate::agent::{AgentError, TaskEnd};
use crate::events::Summary;

/// What an operation did.
#[derive(Debug, Clone, PartialEq)]
// A return value, never stored in bulk: boxing the summary would only cost its callers a deref.
#[allow(clippy::large_enum_variant)]
pub enum Operated {
    /// The input was worked on until the task ended.
    Task(TaskEnd),
    /// The current turn was told to stop (nothing happens when idle).
    Interrupted,
    /// The answer was taken (the first valid answer wins; the question is resolved).
    Answered,
    /// The policy was narrowed.
    Restricted,
    /// The session ended.
    Ended(Summary),
}

/// Why an operation was refused.
#[derive(Debug, thiserror::Error)]
pub enum OpError {
    /// The loop failed (the session has ended with an error).
    #[error(transparent)]
    Agent(#[from] AgentError),
    /// An answer that does not fit (unknown or answered question, wrong kind of answer).
    #[error(transparent)]
    Answer(#[from] AnswerError),
    /// A narrowing the policy refuses (a bad pattern, or one that would widen).
    #[error("restrict {pattern}: {reason}")]
    Restrict { pattern: String, reason: String },
    /// The session has ended.
    #[error("the session has ended")]
    Ended,
    /// The log refused a write.
    #[error(transparent)]
    Log(#[from] chock_log::LogError),
}

impl SessionRuntime {
    /// Attaches a push-style answerer named `name` (a client of the daemon, an editor): while
    /// the returned [`Client`] lives, questions for people wait for it too (the first valid answer
    /// wins), and it answers by question id — from another task while a turn runs, or through
    /// [`Op::Answer`].
    pub fn attach(&self, name: &str) -> Client {
        self.agent.decider().broker.attach(name)
    }

    /// The session's decision pipeline — its log, its live policy (ratchet included) and its
    /// answerers — for an act a client asks for outside a turn (the daemon's `review.apply`): it
    /// is decided, asked and logged exactly as the session's own acts are, and its questions get
    /// ids from the same sequence. Its broker is the one [`SessionRuntime::attach`] attaches to.
    pub fn pipeline(&self) -> chock_decide::Pipeline {
        let decider = self.agent.decider();
        chock_decide::Pipeline::new(
            decider.log.clone(),
            std::sync::Arc::clone(&decider.policy),
            decider.broker.clone(),
        )
    }

    /// Applies one operation. A task runs to its end here; [`Op::Interrupt`] and [`Op::Answer`]
    /// also come while one runs, through [`SessionRuntime::interrupter`] and the attached
    /// [`Client`] (both usable from another task).
    pub async fn operate(&mut self, op: Op) -> Result<Operated, OpError> {
        if self.ended {
            return Err(OpError::Ended);
        }
        match op {
            Op::UserInput { text } => Ok(Operated::Task(self.submit(&text).await?)),
            Op::Interrupt => {
                self.interrupter().interrupt();
                Ok(Operated::Interrupted)
            }
            Op::Answer {
                question,
                answer,
                reasons,
                reply,
            } => {
                let answer = Answer::from_kind(answer, reasons, reply)?;
                self.agent
                    .decider()
                    .broker
                    .answer(&question, "client", answer)?;
                Ok(Operated::Answered)
            }
            Op::Restrict { pattern, decision } => {
                let decision = chock_decide::policy_decision(decision);
                let decider = self.agent.decider();
                decider
                    .policy
                    .write()
                    .map_err(|_| OpError::Restrict {
                        pattern: pattern.clone(),
                        reason: "the session's policy is unavailable".into(),
                    })?
                    .restrict(&pattern, decision)
                    .map_err(|e| OpError::Restrict {
                        pattern: pattern.clone(),
                        reason: e.to_string(),
                    })?;
                // An earlier "yes for this session" never outlives a narrowing.
                decider.broker.forget_session_allows();
                decider.log.record(
                    None,
                    Note::Ratchet {
                        change: RatchetChange::Restrict,
                        pattern,
                        decision: decision.as_str().to_string(),
                        removed: None,
                    },
                )?;
                Ok(Operated::Restricted)
            }
            Op::End => {
                let reason = crate::agent::end_reason(self.last_task);
                let mut summary = self.closing(reason);
                self.agent.finish(&mut summary, reason, None).await?;
                Ok(Operated::Ended(summary))
            }
        }
    }
}
