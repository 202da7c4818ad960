//! A secret asked of the person for one act (git's password for an approved push, `chock askpass`):
//! the act (`secret.password.<host>`) is settled by the table like any other, and its grant is
//! what a person types at a prompt put to the people like a free question — added to the log's
//! redaction the moment it arrives and before anything about it is written, never written itself,
//! and wiped from memory when dropped.

use chock_policy::{Action, Decision};
use chock_protocol::log::{self as record, AnswerKind};

use super::questions::{from_reply, reasons_of};
use super::{Pipeline, Ruling};
use crate::broker::{Answer, Nobody, Reply, Role};
use crate::error::DecideError;
use crate::outcome::{AllowedBy, Outcome, RefusedBy, Settled};

/// A secret a person typed. Its text is overwritten when it is dropped; `Debug` never shows it.
pub struct Secret(String);

impl Secret {
    /// The text, for the one program it is meant for.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl From<String> for Secret {
    fn from(text: String) -> Secret {
        Secret(text)
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret([REDACTED])")
    }
}

impl Drop for Secret {
    fn drop(&mut self) {
        let mut bytes = std::mem::take(&mut self.0).into_bytes();
        bytes.fill(0);
        // Keeps the writes from being optimised away as dead stores.
        std::hint::black_box(&bytes);
    }
}

/// How [`Pipeline::settle_secret`] ended: the act as settled (its `decision` is in the log) and,
/// only when it is allowed, the secret the person typed.
#[derive(Debug)]
pub struct SettledSecret {
    /// The act as settled.
    pub settled: Settled,
    /// What the person typed; `Some` exactly when [`Settled::allowed`].
    pub secret: Option<Secret>,
}

impl Pipeline {
    /// Settles `action` (`secret.password.<host>`) whose grant is a secret only a person can give:
    /// the table, then the prompt. `text` says what for and is shown as is.
    ///
    /// - `deny`: nobody is asked; the refusal is logged.
    /// - `ask` and `allow`: the prompt itself is the question (`approval.ask`, `"secret": true`) —
    ///   there is no separate approval, and `allow` hands out nothing stored: the answer is only
    ///   ever what a person typed after seeing the prompt.
    /// - `agent_review`, `agent_then_human`: a reviewer's yes first, then the prompt.
    ///
    /// The typed answer is added to the log's redaction before anything about it is written, the
    /// logged answer carries no text, and the `decision` is logged before this returns. Nobody
    /// answering, an answerer refusing, or a secret too short for the redaction to cover is a
    /// refusal (`Err` for the last: it is never handed out).
    pub async fn settle_secret(
        &self,
        call_id: Option<&str>,
        action: &Action,
        text: &str,
    ) -> Result<SettledSecret, DecideError> {
        let ruling = Ruling::of(&self.verdict(action), action);
        let mut settled = Settled {
            action: Some(action.as_str().to_string()),
            decision: ruling.decision,
            rule: ruling.rule.clone(),
            outcome: Outcome::Refused {
                by: RefusedBy::Table,
                reason: String::new(),
            },
            questions: Vec::new(),
        };
        match ruling.decision {
            Decision::Deny => return self.settled_secret(call_id, settled, None),
            Decision::AgentReview | Decision::AgentThenHuman => {
                let (id, reply) = self
                    .put(call_id, action, text, &ruling, Role::Reviewer, None, &[])
                    .await?;
                settled.questions.push(id);
                if !matches!(&reply, Reply::Answered { answer, .. } if answer.allows()) {
                    settled.outcome = from_reply(Role::Reviewer, reply, ruling.scope);
                    return self.settled_secret(call_id, settled, None);
                }
            }
            Decision::Allow | Decision::Ask => {}
        }
        let if_dropped = Settled {
            outcome: Outcome::Unanswered {
                asked: Role::Human,
                why: Nobody::Dropped,
            },
            ..settled.clone()
        };
        let (question, reply) = self
            .put_free_question(call_id, text, true, Some(if_dropped))
            .await?;
        settled.questions.push(question.clone());
        let (by, secret, reasons) = match reply {
            Reply::Answered {
                by,
                answer: Answer::Reply { text },
            } => {
                settled.outcome = Outcome::Allowed {
                    by: AllowedBy::Person { name: by.clone() },
                    scope: ruling.scope,
                };
                (Some(by), Some(Secret(text)), None)
            }
            Reply::Answered { by, answer } => {
                let reasons = reasons_of(&answer);
                settled.outcome = Outcome::Refused {
                    by: RefusedBy::Person { name: by.clone() },
                    reason: reasons.clone(),
                };
                (Some(by), None, Some(reasons).filter(|r| !r.is_empty()))
            }
            Reply::Nobody(why) => {
                settled.outcome = Outcome::Unanswered {
                    asked: Role::Human,
                    why,
                };
                (None, None, None)
            }
        };
        // Redacted from every later event (git echoing it, an error quoting it) before the answer
        // is logged. A secret the funnel cannot cover (too short to redact without mangling the
        // log) is not handed out: the answer is logged, textless, and the act refused.
        let covered = match &secret {
            Some(secret) => self.log.add_secret(secret.expose()),
            None => Ok(()),
        };
        self.log.record(
            call_id,
            record::ApprovalAnswer {
                question: Some(question),
                action: None,
                answer: match (&secret, &by) {
                    (Some(_), _) => AnswerKind::Reply,
                    (None, Some(_)) => AnswerKind::Deny,
                    (None, None) => AnswerKind::None,
                },
                by,
                reasons,
                reply: None,
                policy_file: None,
            },
        )?;
        if let Err(e) = covered {
            settled.outcome = Outcome::Refused {
                by: RefusedBy::Harness,
                reason: format!("the answer cannot be redacted from the log: {e}"),
            };
            self.record_decision(call_id, &settled)?;
            return Err(e.into());
        }
        self.settled_secret(call_id, settled, secret)
    }

    /// Logs `settled`'s decision; the secret goes out only with an allowed one.
    fn settled_secret(
        &self,
        call_id: Option<&str>,
        settled: Settled,
        secret: Option<Secret>,
    ) -> Result<SettledSecret, DecideError> {
        self.record_decision(call_id, &settled)?;
        let secret = secret.filter(|_| settled.allowed());
        Ok(SettledSecret { settled, secret })
    }
}
