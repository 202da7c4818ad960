//! The one function that settles an act: the table (the live policy, ratchet included), then for
//! `ask` / `agent_review` / `agent_then_human` the answerers, with `approval.ask`, `approval.answer`
//! and the `decision` written to the log, in that order, before [`Pipeline::settle`] returns. A
//! caller acts only on the returned [`Settled`], so the decision is durable before the act by
//! construction.
//!
//! A settle whose future is dropped while its question is open (the daemon's client that asked for
//! an apply went away) cannot act any more: the question is given up in the broker and logged as
//! nobody answering — the same `approval.answer` (`none`) and refused `decision` as a question
//! nobody answered in time — unless the broker keeps questions open (a stopping daemon).

use std::sync::{Arc, RwLock};

use crate::AllowScope;
use chock_log::Log;
use chock_policy::{Action, Decision, Policy, Verdict};
use chock_protocol::log::{self as record, AnswerKind, Asked};

use crate::broker::{
    Answer, ApprovalBroker, Nobody, Question, QuestionKind, Reply, ReviewerVerdict, Role,
};
use crate::error::DecideError;
use crate::outcome::{AllowedBy, Outcome, RefusedBy, Settled};

mod gate;
mod questions;
mod restrict;
mod ruling;
mod secret;
pub use gate::PipelineGate;
use questions::{Unanswered, from_reply, highest_question_number, reasons_of};
pub use ruling::{Harness, Ruling, policy_decision, table_decision};
pub use secret::{Secret, SettledSecret};

/// Told what the pipeline did, after it is in the log (the agent streams its events from here and
/// counts its summary).
pub trait Observer: Send + Sync {
    /// A question was logged and is being put to the answerers.
    fn asked(&self, question: &Question, decision: Decision) {
        let _ = (question, decision);
    }
    /// An act was settled and its `decision` event is durable.
    fn decided(&self, call_id: Option<&str>, settled: &Settled) {
        let _ = (call_id, settled);
    }
}

/// The pipeline of one session: its log, its live policy and its answerers. Clones share all.
#[derive(Clone)]
pub struct Pipeline {
    log: Log,
    policy: Arc<RwLock<Policy>>,
    broker: ApprovalBroker,
    observers: Vec<Arc<dyn Observer>>,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("broker", &self.broker)
            .finish_non_exhaustive()
    }
}

impl Pipeline {
    /// The pipeline over `log`, deciding by the live `policy` and asking `broker`'s answerers.
    pub fn new(log: Log, policy: Arc<RwLock<Policy>>, broker: ApprovalBroker) -> Self {
        Self {
            log,
            policy,
            broker,
            observers: Vec::new(),
        }
    }

    /// Adds an observer.
    #[must_use]
    pub fn with_observer(mut self, observer: Arc<dyn Observer>) -> Self {
        self.observers.push(observer);
        self
    }

    /// The answerers.
    pub fn broker(&self) -> &ApprovalBroker {
        &self.broker
    }

    /// The session log.
    pub fn log(&self) -> &Log {
        &self.log
    }

    /// The live policy.
    pub fn policy(&self) -> &Arc<RwLock<Policy>> {
        &self.policy
    }

    /// What the live table says of `action` (a poisoned lock still holds the last policy written;
    /// deciding by it is no wider).
    pub fn verdict(&self, action: &Action) -> Verdict {
        match self.policy.read() {
            Ok(policy) => policy.decide(action),
            Err(poisoned) => poisoned.into_inner().decide(action),
        }
    }

    /// Settles `action` for the call `call_id`: the table, then whoever must answer. `detail` says
    /// what exactly would happen, for the person or reviewer. The question, its answer and the
    /// decision are in the log when this returns; only an `Ok` that [`Settled::allowed`] lets the
    /// act happen.
    pub async fn settle(
        &self,
        call_id: Option<&str>,
        action: &Action,
        detail: &str,
    ) -> Result<Settled, DecideError> {
        let ruling = Ruling::of(&self.verdict(action), action);
        self.settle_ruled(call_id, action, detail, ruling).await
    }

    /// As [`Pipeline::settle`], with the table's say given by the caller.
    pub async fn settle_ruled(
        &self,
        call_id: Option<&str>,
        action: &Action,
        detail: &str,
        ruling: Ruling,
    ) -> Result<Settled, DecideError> {
        let name = action.as_str().to_string();
        let mut questions = Vec::new();
        let outcome = match ruling.decision {
            Decision::Allow => Outcome::Allowed {
                by: AllowedBy::Table,
                scope: ruling.scope,
            },
            Decision::Deny => Outcome::Refused {
                by: RefusedBy::Table,
                reason: String::new(),
            },
            Decision::Ask if self.broker.allowed_for_session(&name, detail) => Outcome::Allowed {
                by: AllowedBy::SessionAllow,
                scope: ruling.scope,
            },
            Decision::Ask => {
                let reply = self
                    .put(call_id, action, detail, &ruling, Role::Human, None, &[])
                    .await?;
                questions.push(reply.0);
                from_reply(Role::Human, reply.1, ruling.scope)
            }
            Decision::AgentReview => {
                let reply = self
                    .put(call_id, action, detail, &ruling, Role::Reviewer, None, &[])
                    .await?;
                questions.push(reply.0);
                from_reply(Role::Reviewer, reply.1, ruling.scope)
            }
            Decision::AgentThenHuman => {
                let (id, review) = self
                    .put(call_id, action, detail, &ruling, Role::Reviewer, None, &[])
                    .await?;
                questions.push(id);
                match review {
                    Reply::Answered { answer, .. } if answer.allows() => {
                        let seen = ReviewerVerdict {
                            allow: true,
                            reasons: reasons_of(&answer),
                        };
                        let (id, reply) = self
                            .put(
                                call_id,
                                action,
                                detail,
                                &ruling,
                                Role::Human,
                                Some(seen),
                                &questions,
                            )
                            .await?;
                        questions.push(id);
                        from_reply(Role::Human, reply, ruling.scope)
                    }
                    other => from_reply(Role::Reviewer, other, ruling.scope),
                }
            }
        };
        let settled = Settled {
            action: Some(name),
            decision: ruling.decision,
            rule: ruling.rule,
            outcome,
            questions,
        };
        self.record_decision(call_id, &settled)?;
        Ok(settled)
    }

    /// Records a decision the harness makes with no table row (the input names no act; the act
    /// grants nothing): the `decision` event is written here like every other.
    pub fn decide_without_table(
        &self,
        call_id: Option<&str>,
        action: Option<&Action>,
        harness: Harness,
    ) -> Result<Settled, DecideError> {
        let (decision, rule, outcome) = match harness {
            Harness::Allow { why } => (
                Decision::Allow,
                why.clone(),
                Outcome::Allowed {
                    by: AllowedBy::Harness { why },
                    scope: AllowScope::Pattern,
                },
            ),
            Harness::Refuse { why } => (
                Decision::Deny,
                why.clone(),
                Outcome::Refused {
                    by: RefusedBy::Harness,
                    reason: why,
                },
            ),
        };
        let settled = Settled {
            action: action.map(|a| a.as_str().to_string()),
            decision,
            rule,
            outcome,
            questions: Vec::new(),
        };
        self.record_decision(call_id, &settled)?;
        Ok(settled)
    }

    /// The agent's free question to the person (`ask_user`): logged as `approval.ask` and
    /// `approval.answer` like an approval. `Ok(None)`: nobody answered.
    pub async fn ask_person(
        &self,
        call_id: Option<&str>,
        text: &str,
    ) -> Result<Option<(String, String)>, DecideError> {
        let (question, reply) = self.put_free_question(call_id, text, false, None).await?;
        let answered = match reply {
            Reply::Answered {
                by,
                answer: Answer::Reply { text },
            } => Some((by, text)),
            _ => None,
        };
        self.record_free_answer(
            call_id,
            question,
            answered.as_ref().map(|(by, _)| by),
            answered.as_ref().map(|(_, t)| t.clone()),
        )?;
        Ok(answered)
    }

    /// Puts a free question (not an approval) to the people and waits: its `approval.ask` is
    /// written first, and an unanswered question is closed as such however this ends (with
    /// `if_dropped`, the act's refused decision, logged too). Gives the question's id and its
    /// reply; the caller writes the answer (a secret's differently).
    async fn put_free_question(
        &self,
        call_id: Option<&str>,
        text: &str,
        secret: bool,
        if_dropped: Option<Settled>,
    ) -> Result<(String, Reply), DecideError> {
        let question = Question {
            secret,
            id: self.next_question_id(),
            kind: QuestionKind::Question,
            call_id: call_id.map(str::to_string),
            action: None,
            decided_by: None,
            text: text.to_string(),
            context: Vec::new(),
            reviewer: None,
        };
        self.log.record(
            call_id,
            record::ApprovalAsk {
                secret,
                question: Some(question.id.clone()),
                action: None,
                decision: None,
                decided_by: None,
                asked: Asked::Person,
                what: text.to_string(),
                reviewer: None,
                policy_file: None,
            },
        )?;
        let unanswered = Unanswered {
            pipeline: self,
            call_id,
            question: &question,
            role: Role::Human,
            policy_file: None,
            settled: if_dropped.map(|mut settled| {
                settled.questions.push(question.id.clone());
                settled
            }),
            armed: true,
        };
        let mut opened = self.broker.open(Role::Human, &question);
        opened.given_up_by_caller();
        let reply = self.broker.wait(Role::Human, &question, opened).await;
        unanswered.disarm();
        Ok((question.id, reply))
    }

    /// Writes a free question's `approval.answer`: who answered, and `reply` (none for a secret).
    fn record_free_answer(
        &self,
        call_id: Option<&str>,
        question: String,
        by: Option<&String>,
        reply: Option<String>,
    ) -> Result<(), DecideError> {
        self.log.record(
            call_id,
            record::ApprovalAnswer {
                question: Some(question),
                action: None,
                answer: if by.is_some() {
                    AnswerKind::Reply
                } else {
                    AnswerKind::None
                },
                by: by.cloned(),
                reasons: None,
                reply,
                policy_file: None,
            },
        )?;
        Ok(())
    }

    /// The `Gate` the network broker asks for the call `call_id`: every act it names is
    /// settled here (logged under that call).
    pub fn gate(&self, call_id: &str) -> PipelineGate {
        PipelineGate {
            pipeline: self.clone(),
            call_id: call_id.to_string(),
        }
    }

    fn next_question_id(&self) -> String {
        self.broker
            .next_question_id(|| highest_question_number(&self.log))
    }

    /// Logs the question, puts it to `role`, logs the answer. `asked_before`: the questions this
    /// settle asked already (the reviewer's, for `agent_then_human`), for the decision written if
    /// the waiter goes away.
    #[allow(clippy::too_many_arguments)]
    async fn put(
        &self,
        call_id: Option<&str>,
        action: &Action,
        detail: &str,
        ruling: &Ruling,
        role: Role,
        reviewer: Option<ReviewerVerdict>,
        asked_before: &[String],
    ) -> Result<(String, Reply), DecideError> {
        // A person's question an earlier owner left open for this act: put again, under its id.
        let carried = self.broker.take_carried(role, call_id, action.as_str());
        let question = Question {
            secret: false,
            id: carried.clone().unwrap_or_else(|| self.next_question_id()),
            kind: QuestionKind::Approval,
            call_id: call_id.map(str::to_string),
            action: Some(action.as_str().to_string()),
            decided_by: Some(format!("{}: {}", ruling.rule, ruling.decision.as_str())),
            text: detail.to_string(),
            context: ruling.context.clone(),
            reviewer,
        };
        if carried.is_none() {
            self.log.record(
                call_id,
                record::ApprovalAsk {
                    secret: false,
                    question: Some(question.id.clone()),
                    action: question.action.clone(),
                    decision: Some(table_decision(ruling.decision)),
                    decided_by: Some(ruling.rule.clone()),
                    asked: match role {
                        Role::Human => Asked::Person,
                        Role::Reviewer => Asked::Reviewer,
                    },
                    what: detail.to_string(),
                    reviewer: None,
                    policy_file: ruling.policy_file.clone(),
                },
            )?;
        }
        // From here the question is in the log: if this future is dropped before its answer is,
        // the guard writes it as nobody answering, and the refused decision.
        let unanswered = Unanswered {
            pipeline: self,
            call_id,
            question: &question,
            role,
            policy_file: ruling.policy_file.as_deref(),
            settled: Some(Settled {
                action: Some(action.as_str().to_string()),
                decision: ruling.decision,
                rule: ruling.rule.clone(),
                outcome: Outcome::Unanswered {
                    asked: role,
                    why: Nobody::Dropped,
                },
                questions: asked_before
                    .iter()
                    .cloned()
                    .chain([question.id.clone()])
                    .collect(),
            }),
            armed: true,
        };
        // Open before anyone hears of it: a client that learns the id from the live event can
        // answer at once.
        let mut opened = self.broker.open(role, &question);
        opened.given_up_by_caller();
        for observer in &self.observers {
            observer.asked(&question, ruling.decision);
        }
        let reply = self.broker.wait(role, &question, opened).await;
        unanswered.disarm();
        let (answer, by, reasons) = match &reply {
            Reply::Answered { by, answer } => (
                answer.kind(),
                Some(by.clone()),
                Some(reasons_of(answer)).filter(|r| !r.is_empty()),
            ),
            Reply::Nobody(_) => (AnswerKind::None, None, None),
        };
        self.log.record(
            call_id,
            record::ApprovalAnswer {
                question: Some(question.id.clone()),
                action: question.action.clone(),
                answer,
                by,
                reasons,
                reply: None,
                policy_file: ruling.policy_file.clone(),
            },
        )?;
        Ok((question.id, reply))
    }

    fn record_decision(&self, call_id: Option<&str>, settled: &Settled) -> Result<(), DecideError> {
        self.log.record(
            call_id,
            record::Decision {
                action: settled.action.clone(),
                decision: table_decision(settled.decision),
                allowed: settled.allowed(),
                decided_by: settled.decided_by(),
            },
        )?;
        for observer in &self.observers {
            observer.decided(call_id, settled);
        }
        Ok(())
    }
}
