//! The agent's seam to the one decision pipeline ([`chock_decide::Pipeline`]): [`Decider`] holds
//! what the pipeline needs (the log, the live policy, the approval broker) and what the agent adds
//! (the event sink, the summary's counts), and [`Decider::settle`] settles an act through it —
//! the table, the question and its answer, and the `decision`, all logged before it returns.
//!
//! [`Settled`] is the agent's view of the typed outcome: the words the model reads are derived
//! from [`chock_decide::Settled`], never the other way round.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use chock_decide::{AllowScope, Gate, GateFuture};
use chock_decide::{Count, DecideError, Harness, Observer, Pipeline, Question};
use chock_log::{Log, LogError};
use chock_policy::{Action, Decision, Policy};

use chock_decide::broker::ApprovalBroker;
use chock_protocol::live::ItemKind;

use crate::events::{AgentEvent, DecisionCounts, EventSink};

/// What was settled about one act, as the agent's tools read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settled {
    /// Whether the act may run.
    pub allowed: bool,
    /// What the table said.
    pub decision: Decision,
    /// Which rule said it (DecidedBy's Display), and who answered if anyone was asked.
    pub decided_by: String,
    /// Whether the deciding row reaches exactly-named hosts on private addresses too
    /// ([`chock_decide::scope_of`] is `ExactHost`), for the network broker's address rules.
    pub exact_rule: bool,
    /// The refusal in words the model can read (empty when allowed).
    pub refusal: String,
}

impl From<&chock_decide::Settled> for Settled {
    fn from(settled: &chock_decide::Settled) -> Self {
        Self {
            allowed: settled.allowed(),
            decision: settled.decision,
            decided_by: settled.decided_by(),
            exact_rule: settled.scope() == AllowScope::ExactHost,
            refusal: settled.refusal().unwrap_or_default(),
        }
    }
}

/// What every decision needs: the log, the table, the broker, the event sink, and the tally.
#[derive(Clone)]
pub struct Decider {
    /// The session log.
    pub log: Log,
    /// The session's policy (its ratchet changes during the session).
    pub policy: Arc<RwLock<Policy>>,
    /// Who answers questions.
    pub broker: ApprovalBroker,
    /// Where progress goes.
    pub sink: Arc<dyn EventSink>,
    /// Decisions counted by kind, for the summary.
    pub counts: Arc<Mutex<DecisionCounts>>,
    /// The turn the agent is in (0 before its first): the live items the pipeline and a command
    /// start name it.
    pub turn: Arc<AtomicU32>,
}

impl std::fmt::Debug for Decider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decider")
            .field("broker", &self.broker)
            .finish_non_exhaustive()
    }
}

/// Streams the pipeline's questions and decisions to the sink and counts them for the summary.
struct Tally {
    sink: Arc<dyn EventSink>,
    counts: Arc<Mutex<DecisionCounts>>,
    /// Approval items asked and not yet decided: (call id, question id).
    open: Mutex<Vec<(Option<String>, String)>>,
    /// The agent's turn now.
    turn: Arc<AtomicU32>,
}

impl Observer for Tally {
    fn asked(&self, question: &Question, decision: Decision) {
        if let Ok(mut open) = self.open.lock() {
            open.push((question.call_id.clone(), question.id.clone()));
        }
        self.sink.emit(&AgentEvent::ItemStarted {
            item: question.id.clone(),
            turn: self.turn.load(Ordering::Relaxed),
            kind: ItemKind::Approval {
                call_id: question.call_id.clone().unwrap_or_default(),
                action: question.action.clone().unwrap_or_default(),
            },
        });
        self.sink.emit(&AgentEvent::ApprovalAsked {
            question: question.id.clone(),
            call_id: question.call_id.clone().unwrap_or_default(),
            action: question.action.clone().unwrap_or_default(),
            decision: chock_decide::table_decision(decision),
            decided_by: question.decided_by.clone().unwrap_or_default(),
        });
    }

    fn decided(&self, call_id: Option<&str>, settled: &chock_decide::Settled) {
        if let (Some(count), Ok(mut counts)) = (settled.count(), self.counts.lock()) {
            match count {
                Count::AllowedByTable => counts.allowed_by_table += 1,
                Count::AllowedByPerson => counts.allowed_by_person += 1,
                Count::AllowedByReviewer => counts.allowed_by_reviewer += 1,
                Count::DeniedByTable => counts.denied_by_table += 1,
                Count::DeniedByAnswer => counts.denied_by_answer += 1,
                Count::Unanswered => counts.unanswered += 1,
            }
        }
        // The questions about this act are answered: their items end with the decision.
        let answered: Vec<String> = self
            .open
            .lock()
            .map(|mut open| {
                let (done, rest): (Vec<_>, Vec<_>) = open
                    .drain(..)
                    .partition(|(call, _)| call.as_deref() == call_id);
                *open = rest;
                done.into_iter().map(|(_, q)| q).collect()
            })
            .unwrap_or_default();
        for item in answered {
            self.sink.emit(&AgentEvent::ItemCompleted {
                item,
                ok: settled.allowed(),
            });
        }
        self.sink.emit(&AgentEvent::Decision {
            call_id: call_id.unwrap_or_default().to_string(),
            action: settled.action.clone().unwrap_or_default(),
            allowed: settled.allowed(),
            decision: chock_decide::table_decision(settled.decision),
            decided_by: settled.decided_by(),
        });
    }
}

/// A pipeline error as the agent's tools report it: the log's (the only way settling fails).
pub(crate) fn log_error(err: DecideError) -> LogError {
    let DecideError::Log(err) = err;
    err
}

impl Decider {
    /// The session's decision pipeline, telling this decider's sink and counts.
    pub fn pipeline(&self) -> Pipeline {
        Pipeline::new(
            self.log.clone(),
            Arc::clone(&self.policy),
            self.broker.clone(),
        )
        .with_observer(Arc::new(Tally {
            open: Mutex::default(),
            sink: Arc::clone(&self.sink),
            counts: Arc::clone(&self.counts),
            turn: Arc::clone(&self.turn),
        }))
    }

    /// Settles `action` for the call `call_id` through the pipeline: table, then whoever must
    /// answer. `detail` says what exactly would happen, for the person or reviewer. The
    /// `decision` event is in the log when this returns: act on the result, log nothing more.
    pub async fn settle(
        &self,
        call_id: Option<&str>,
        action: &Action,
        detail: &str,
    ) -> Result<Settled, LogError> {
        let settled = self
            .pipeline()
            .settle(call_id, action, detail)
            .await
            .map_err(log_error)?;
        Ok(Settled::from(&settled))
    }

    /// Records a decision the agent makes with no table row (the input did not parse, the tool
    /// grants no capability): `settled.allowed` and `settled.decided_by` are written as the
    /// `decision` event, by the pipeline. Never for an act [`Decider::settle`] decided.
    pub fn decide_without_table(
        &self,
        call_id: &str,
        action: Option<&Action>,
        settled: &Settled,
    ) -> Result<(), LogError> {
        let why = settled.decided_by.clone();
        let harness = if settled.allowed {
            Harness::Allow { why }
        } else {
            Harness::Refuse { why }
        };
        self.pipeline()
            .decide_without_table(Some(call_id), action, harness)
            .map_err(log_error)?;
        Ok(())
    }
}

impl Decider {
    /// The agent's free question to the person (`ask_user`), logged as `approval.ask` and
    /// `approval.answer` by the pipeline. `Ok(None)`: nobody answered.
    pub async fn ask_person(&self, call_id: &str, text: &str) -> Result<Option<String>, LogError> {
        let reply = self
            .pipeline()
            .ask_person(Some(call_id), text)
            .await
            .map_err(log_error)?;
        Ok(reply.map(|(_, text)| text))
    }
}

/// The gate handed to the network broker for one tool call: every act it names is settled by the
/// pipeline under that call's id.
#[derive(Debug, Clone)]
pub struct CallGate(chock_decide::PipelineGate);

impl CallGate {
    /// A gate for the call `call_id`.
    pub fn new(decider: &Decider, call_id: &str) -> Self {
        Self(decider.pipeline().gate(call_id))
    }
}

impl Gate for CallGate {
    fn decide<'a>(&'a self, action: &'a Action, detail: &'a str) -> GateFuture<'a> {
        self.0.decide(action, detail)
    }
}
