//! Deciding one act: the table first, then (for ask / agent_review / agent_then_human) the approval
//! broker, with `approval.ask` and `approval.answer` written to the log before anyone is asked and
//! before the answer is acted on. The caller writes the `decision` event (or, for run_command, the
//! session's confined call does) before the act.

use std::sync::{Arc, Mutex, RwLock};

use chock_broker::{AllowScope, Gate, GateAnswer, GateFuture, scope_of};
use chock_log::{EventKind, Log, LogError};
use chock_policy::{Action, Decision, Policy};
use serde_json::json;

use crate::approval::{
    Answer, Answered, ApprovalBroker, Question, QuestionKind, ReviewerVerdict, Role,
};
use crate::events::{AgentEvent, DecisionCounts, EventSink};

/// What was settled about one act.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settled {
    /// Whether the act may run.
    pub allowed: bool,
    /// What the table said.
    pub decision: Decision,
    /// Which rule said it (DecidedBy's Display), and who answered if anyone was asked.
    pub decided_by: String,
    /// Whether the deciding row reaches exactly-named hosts on private addresses too
    /// ([`chock_broker::scope_of`] is `ExactHost`), for the network broker's address rules.
    pub exact_rule: bool,
    /// The refusal in words the model can read (empty when allowed).
    pub refusal: String,
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
}

impl std::fmt::Debug for Decider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decider")
            .field("broker", &self.broker)
            .finish_non_exhaustive()
    }
}

fn answer_json(answered: &Answered) -> serde_json::Value {
    match &answered.answer {
        None => json!({"answer": "none", "by": null, "reasons": null}),
        Some(Answer::AllowOnce { reasons }) => {
            json!({"answer": "allow_once", "by": answered.by, "reasons": reasons})
        }
        Some(Answer::AllowSession) => {
            json!({"answer": "allow_session", "by": answered.by, "reasons": null})
        }
        Some(Answer::Deny { reasons }) => {
            json!({"answer": "deny", "by": answered.by, "reasons": reasons})
        }
        Some(Answer::Reply { .. }) => json!({"answer": "reply", "by": answered.by}),
    }
}

fn reasons_of(answered: &Answered) -> String {
    match &answered.answer {
        Some(Answer::AllowOnce { reasons } | Answer::Deny { reasons }) => reasons.clone(),
        _ => String::new(),
    }
}

impl Decider {
    fn count(&self, f: impl FnOnce(&mut DecisionCounts)) {
        if let Ok(mut counts) = self.counts.lock() {
            f(&mut counts);
        }
    }

    /// Asks one role, logging the question and the answer around it.
    async fn ask_logged(
        &self,
        role: Role,
        question: &Question,
        decision: Decision,
        log_questions: bool,
    ) -> Result<Answered, LogError> {
        let call_id = question.call_id.as_deref();
        let emit = || {
            self.sink.emit(&AgentEvent::ApprovalAsked {
                call_id: call_id.unwrap_or_default().to_string(),
                action: question.action.clone().unwrap_or_default(),
                decision: decision.as_str().to_string(),
                decided_by: question.decided_by.clone().unwrap_or_default(),
            });
        };
        if !log_questions {
            emit();
            return Ok(self.broker.ask(role, question).await);
        }
        self.log.append(
            EventKind::ApprovalAsk,
            call_id,
            json!({
                "action": question.action,
                "decision": decision.as_str(),
                "decided_by": question.decided_by,
                "asked": match role { Role::Human => "person", Role::Reviewer => "reviewer" },
                "what": question.text,
                "reviewer": question.reviewer,
            }),
        )?;
        emit();
        let answered = self.broker.ask(role, question).await;
        self.log
            .append(EventKind::ApprovalAnswer, call_id, answer_json(&answered))?;
        Ok(answered)
    }

    /// Settles `action` for the call `call_id`: table, then whoever must answer. `detail` says what
    /// exactly would happen, for the person or reviewer.
    pub async fn settle(
        &self,
        call_id: Option<&str>,
        action: &Action,
        detail: &str,
    ) -> Result<Settled, LogError> {
        let verdict = match self.policy.read() {
            Ok(policy) => policy.decide(action),
            Err(_) => {
                return Ok(Settled {
                    allowed: false,
                    decision: Decision::Deny,
                    decided_by: "the policy is unavailable".into(),
                    exact_rule: false,
                    refusal: format!("refused: {action}: the session's policy is unavailable"),
                });
            }
        };
        // The reach of the row, whoever then answers: chock-broker's one rule for every door.
        let exact_rule = scope_of(&verdict, action) == AllowScope::ExactHost;
        self.answer(
            call_id,
            action,
            verdict.decision,
            &verdict.decided_by.to_string(),
            exact_rule,
            detail,
        )
        .await
    }

    /// Settles an act the table already decided as `decision` (by `rule`): allow and deny stand;
    /// ask, agent_review and agent_then_human go to the broker.
    pub async fn answer(
        &self,
        call_id: Option<&str>,
        action: &Action,
        decision: Decision,
        rule: &str,
        exact_rule: bool,
        detail: &str,
    ) -> Result<Settled, LogError> {
        self.answer_with(call_id, action, decision, rule, exact_rule, detail, true)
            .await
    }

    /// As [`Decider::answer`], for a caller that writes `approval.ask` / `approval.answer` itself (the
    /// session's confined call).
    pub async fn answer_quietly(
        &self,
        call_id: Option<&str>,
        action: &Action,
        decision: Decision,
        rule: &str,
        detail: &str,
    ) -> Settled {
        match self
            .answer_with(call_id, action, decision, rule, false, detail, false)
            .await
        {
            Ok(settled) => settled,
            Err(err) => Settled {
                allowed: false,
                decision,
                decided_by: format!("{rule}: the log failed"),
                exact_rule: false,
                refusal: format!("refused: {err}"),
            },
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn answer_with(
        &self,
        call_id: Option<&str>,
        action: &Action,
        decision: Decision,
        rule: &str,
        exact_rule: bool,
        detail: &str,
        log_questions: bool,
    ) -> Result<Settled, LogError> {
        let verdict_decision = decision;
        let rule = rule.to_string();
        let name = action.as_str().to_string();
        let settled = |allowed: bool, decided_by: String, refusal: String| Settled {
            allowed,
            decision: verdict_decision,
            decided_by,
            exact_rule,
            refusal,
        };
        let question = |reviewer: Option<ReviewerVerdict>| Question {
            kind: QuestionKind::Approval,
            call_id: call_id.map(str::to_string),
            action: Some(name.clone()),
            decided_by: Some(format!("{rule}: {}", verdict_decision)),
            text: detail.to_string(),
            reviewer,
        };
        let from_person = |answered: &Answered, what: &str| {
            if answered.allows() {
                self.count(|c| c.allowed_by_person += 1);
                settled(
                    true,
                    format!(
                        "{rule}: {what}; allowed by {}",
                        answered.by.as_deref().unwrap_or("?")
                    ),
                    String::new(),
                )
            } else if let Some(by) = &answered.by {
                self.count(|c| c.denied_by_answer += 1);
                settled(
                    false,
                    format!("{rule}: {what}; refused by {by}"),
                    format!("refused: {name} was refused by {by} ({rule}: {what})"),
                )
            } else {
                self.count(|c| c.unanswered += 1);
                settled(
                    false,
                    format!("{rule}: {what}; nobody answered"),
                    format!(
                        "refused: {name} needs a person's approval ({rule}: {what}) and nobody was there to answer"
                    ),
                )
            }
        };
        Ok(match verdict_decision {
            Decision::Allow => {
                self.count(|c| c.allowed_by_table += 1);
                settled(true, rule.clone(), String::new())
            }
            Decision::Deny => {
                self.count(|c| c.denied_by_table += 1);
                settled(
                    false,
                    rule.clone(),
                    format!("refused: {name} is denied by {rule}"),
                )
            }
            Decision::Ask => {
                if self.broker.allowed_for_session(&name, detail) {
                    self.count(|c| c.allowed_by_person += 1);
                    settled(
                        true,
                        format!("{rule}: ask; allowed for this session earlier"),
                        String::new(),
                    )
                } else {
                    let answered = self
                        .ask_logged(
                            Role::Human,
                            &question(None),
                            verdict_decision,
                            log_questions,
                        )
                        .await?;
                    from_person(&answered, "ask")
                }
            }
            Decision::AgentReview => {
                let answered = self
                    .ask_logged(
                        Role::Reviewer,
                        &question(None),
                        verdict_decision,
                        log_questions,
                    )
                    .await?;
                let reasons = reasons_of(&answered);
                if answered.allows() {
                    self.count(|c| c.allowed_by_reviewer += 1);
                    settled(
                        true,
                        format!("{rule}: agent_review; allowed by reviewer: {reasons}"),
                        String::new(),
                    )
                } else if answered.by.is_some() {
                    self.count(|c| c.denied_by_answer += 1);
                    settled(
                        false,
                        format!("{rule}: agent_review; refused by reviewer"),
                        format!(
                            "refused: {name} was refused by the reviewer model ({rule}): {reasons}"
                        ),
                    )
                } else {
                    self.count(|c| c.unanswered += 1);
                    settled(
                        false,
                        format!("{rule}: agent_review; no reviewer verdict"),
                        format!(
                            "refused: {name} needs a reviewer's verdict ({rule}) and none came"
                        ),
                    )
                }
            }
            Decision::AgentThenHuman => {
                let review = self
                    .ask_logged(
                        Role::Reviewer,
                        &question(None),
                        verdict_decision,
                        log_questions,
                    )
                    .await?;
                let reasons = reasons_of(&review);
                if !review.allows() {
                    self.count(|c| c.denied_by_answer += 1);
                    settled(
                        false,
                        format!("{rule}: agent_then_human; refused by reviewer"),
                        format!(
                            "refused: {name} was refused by the reviewer model ({rule}): {reasons}"
                        ),
                    )
                } else {
                    let verdict_seen = ReviewerVerdict {
                        allow: true,
                        reasons,
                    };
                    let answered = self
                        .ask_logged(
                            Role::Human,
                            &question(Some(verdict_seen)),
                            verdict_decision,
                            log_questions,
                        )
                        .await?;
                    from_person(&answered, "agent_then_human")
                }
            }
        })
    }

    /// Writes the `decision` event (before the act) and tells the sink.
    pub fn log_decision(
        &self,
        call_id: &str,
        action: Option<&Action>,
        settled: &Settled,
    ) -> Result<(), LogError> {
        self.log.append(
            EventKind::Decision,
            Some(call_id),
            json!({
                "action": action.map(Action::as_str),
                "decision": settled.decision.as_str(),
                "allowed": settled.allowed,
                "decided_by": settled.decided_by,
            }),
        )?;
        self.sink.emit(&AgentEvent::Decision {
            call_id: call_id.to_string(),
            action: action.map(|a| a.as_str().to_string()).unwrap_or_default(),
            allowed: settled.allowed,
            decision: settled.decision.as_str().to_string(),
            decided_by: settled.decided_by.clone(),
        });
        Ok(())
    }
}

/// The gate handed to the session's confined call and to the network broker for one tool call: it
/// decides with [`Decider::settle`] under that call's id.
#[derive(Debug, Clone)]
pub struct CallGate {
    decider: Decider,
    call_id: String,
}

impl CallGate {
    /// A gate for the call `call_id`.
    pub fn new(decider: Decider, call_id: &str) -> Self {
        Self {
            decider,
            call_id: call_id.to_string(),
        }
    }
}

impl Gate for CallGate {
    fn decide<'a>(&'a self, action: &'a Action, detail: &'a str) -> GateFuture<'a> {
        Box::pin(async move {
            match self
                .decider
                .settle(Some(&self.call_id), action, detail)
                .await
            {
                Ok(s) if s.allowed => GateAnswer::Allow {
                    scope: if s.exact_rule {
                        AllowScope::ExactHost
                    } else {
                        AllowScope::Pattern
                    },
                    decided_by: s.decided_by,
                },
                Ok(s) => GateAnswer::refuse(s.refusal),
                Err(err) => GateAnswer::refuse(format!(
                    "refused: the log could not record the question: {err}"
                )),
            }
        })
    }
}

/// The answerer a command's egress proxy asks when the table puts one of the command's connections
/// to a question (chock-session's `EgressAsker`). The session has read the table and writes
/// `approval.ask` / `approval.answer` itself, so this only puts the question to the approval broker
/// (a person, a reviewer) under the call's id; nobody answering is a refusal.
#[derive(Debug, Clone)]
pub struct EgressAskGate {
    decider: Decider,
    call_id: String,
}

impl EgressAskGate {
    /// The asker for the call `call_id`, or `None` when the broker has nobody to ask (then the
    /// session decides the command's connections by the table alone, as `chock exec` does).
    pub fn for_call(decider: &Decider, call_id: &str) -> Option<Self> {
        (decider.broker.has(Role::Human) || decider.broker.has(Role::Reviewer)).then(|| Self {
            decider: decider.clone(),
            call_id: call_id.to_string(),
        })
    }
}

impl Gate for EgressAskGate {
    fn decide<'a>(&'a self, action: &'a Action, detail: &'a str) -> GateFuture<'a> {
        Box::pin(async move {
            let verdict = match self.decider.policy.read() {
                Ok(policy) => policy.decide(action),
                Err(_) => {
                    return GateAnswer::refuse("refused: the session's policy is unavailable");
                }
            };
            let rule = verdict.decided_by.to_string();
            let settled = self
                .decider
                .answer_quietly(Some(&self.call_id), action, verdict.decision, &rule, detail)
                .await;
            if settled.allowed {
                // The session names the rule and the decision itself; this says who answered.
                let prefix = format!("{rule}: {}; ", verdict.decision.as_str());
                let by = settled
                    .decided_by
                    .strip_prefix(&prefix)
                    .map_or_else(|| settled.decided_by.clone(), str::to_string);
                GateAnswer::Allow {
                    // The session sets the reach from the row that was asked.
                    scope: AllowScope::Pattern,
                    decided_by: by,
                }
            } else {
                GateAnswer::refuse(settled.refusal)
            }
        })
    }
}
