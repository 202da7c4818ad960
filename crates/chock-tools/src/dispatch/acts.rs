//! The tools that act on the session itself rather than on files or commands: ask_user (a question
//! through the approval broker), restrict_self (the ratchet: narrowing is free, widening is the act
//! `ratchet.widen_action`), and request_action (`workspace.apply`, decided and then carried out).

use chock_decide::RestrictError;
use chock_log::LogError;
use chock_policy::{Action, Decision, RatchetError};
use chock_protocol::log::{Note, RatchetChange};

use crate::ToolOutput;
use crate::builtin::{RequestInput, RestrictInput};
use crate::gate::Settled;
use crate::tool::ToolContext;

impl ToolContext<'_> {
    pub(crate) async fn ask_user(&self, call_id: &str, text: &str) -> Result<ToolOutput, LogError> {
        // The pipeline logs the question and its answer (a reply, or none) around asking.
        let reply = self.decider.ask_person(call_id, text).await?;
        Ok(match reply {
            Some(text) => ToolOutput::ok(format!("the person answered: {text}")),
            None => ToolOutput::ok("no answer: nobody is there to answer; decide yourself or say what you need in your final message".into()),
        })
    }

    pub(crate) async fn restrict_self(
        &self,
        call_id: &str,
        input: &RestrictInput,
    ) -> Result<ToolOutput, LogError> {
        let Some(decision) = Decision::from_name(input.decision.trim()) else {
            let settled = Settled {
                allowed: false,
                decision: Decision::Deny,
                decided_by: "unknown decision".into(),
                exact_rule: false,
                refusal: format!(
                    "unknown decision {:?}: use allow, deny, ask, agent_review or agent_then_human",
                    input.decision
                ),
            };
            self.decider.decide_without_table(call_id, None, &settled)?;
            return Ok(ToolOutput::error(settled.refusal));
        };
        let pattern = input.action.trim();
        // Narrowing needs nobody's permission; try it first, through the one narrowing: the
        // pipeline logs this call's decision and the ratchet note before the table changes.
        if decision != Decision::Allow {
            match self
                .decider
                .pipeline()
                .restrict_for_call(call_id, pattern, decision)
            {
                Ok(()) => {
                    return Ok(ToolOutput::ok(format!(
                        "restricted: {pattern} is now decided at least as strictly as {decision} for the rest of this session"
                    )));
                }
                Err(RestrictError::Ratchet(RatchetError::Widening { .. })) => {}
                Err(RestrictError::Ratchet(err)) => {
                    let settled = Settled {
                        allowed: false,
                        decision: Decision::Deny,
                        decided_by: "the ratchet refused the pattern".into(),
                        exact_rule: false,
                        refusal: format!("restrict_self refused: {err}"),
                    };
                    self.decider.decide_without_table(call_id, None, &settled)?;
                    return Ok(ToolOutput::error(settled.refusal));
                }
                Err(RestrictError::Unavailable) => {
                    return Ok(ToolOutput::error(
                        "the session's policy is unavailable".into(),
                    ));
                }
                Err(RestrictError::Log(err)) => return Err(err),
                Err(RestrictError::Decision(err)) => {
                    return Err(crate::gate::log_error(err));
                }
            }
        }
        // A widening: it is the act ratchet.widen_action, decided like any other.
        let action = Action::parse("ratchet.widen_action").map_err(|e| LogError::Poisoned {
            path: self.decider.log.dir().to_path_buf(),
            reason: e.to_string(),
        })?;
        let detail = format!("widen the agent's own restriction on {pattern} (to {decision})");
        // The pipeline logs the decision before it returns.
        let settled = self.decider.settle(Some(call_id), &action, &detail).await?;
        if !settled.allowed {
            return Ok(ToolOutput::error(settled.refusal));
        }
        let outcome = self.decider.policy.write().map(|mut p| {
            p.widen(pattern).and_then(|removed| {
                if decision != Decision::Allow {
                    p.restrict(pattern, decision)?;
                }
                Ok(removed)
            })
        });
        match outcome {
            Ok(Ok(removed)) => {
                self.decider.broker.forget_session_allows();
                let count = removed.len();
                self.decider.log.record(
                    Some(call_id),
                    Note::Ratchet {
                        change: RatchetChange::Widen,
                        pattern: pattern.to_string(),
                        decision: decision.as_str().to_string(),
                        removed: Some(removed.iter().map(|(p, _)| p.to_string()).collect()),
                    },
                )?;
                Ok(ToolOutput::ok(format!(
                    "widened: {count} restriction(s) inside {pattern} removed"
                )))
            }
            Ok(Err(err)) => Ok(ToolOutput::error(format!("restrict_self: {err}"))),
            Err(_) => Ok(ToolOutput::error(
                "the session's policy is unavailable".into(),
            )),
        }
    }

    pub(crate) async fn request_action(
        &self,
        call_id: &str,
        input: &RequestInput,
    ) -> Result<ToolOutput, LogError> {
        if input.action.trim() != "workspace.apply" {
            let settled = Settled {
                allowed: false,
                decision: Decision::Deny,
                decided_by: "request_action takes workspace.apply only".into(),
                exact_rule: false,
                refusal: format!(
                    "request_action cannot ask for {:?}: only workspace.apply can be requested",
                    input.action
                ),
            };
            self.decider.decide_without_table(call_id, None, &settled)?;
            return Ok(ToolOutput::error(settled.refusal));
        }
        self.host
            .request_apply(call_id, self.decider, &input.reason)
            .await
    }
}
