//! The egress asker of `chock exec` at a terminal: when the table puts one of the command's
//! connections to a question (`ask` on `net.connect.*`), the person who answers the command's own
//! ask answers it too, on the same terminal and through the same prompt, with the command's output
//! held back while the question is open ([`ExecTerminal`]). The session reads the table, writes
//! `approval.ask` / `approval.answer` around this gate and sets the allow's reach from the row that
//! was asked; this only puts the question and reports the answer. No answer is a refusal.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use chock_agent::approval::{Answer, Question, QuestionKind};
use chock_broker::{AllowScope, Gate, GateAnswer, GateFuture};
use chock_policy::{Action, Policy};

use super::exec_terminal::ExecTerminal;

/// Asks the person at the terminal about one connection of the command. Questions from connections
/// made at the same time are put one after another, never interleaved on the terminal.
#[derive(Debug, Clone)]
pub(crate) struct TerminalEgressGate {
    terminal: Arc<ExecTerminal>,
    policy: Arc<RwLock<Policy>>,
    /// Acts answered "yes to this exact act for the session" (`a`): (action, detail).
    for_the_session: Arc<Mutex<HashSet<(String, String)>>>,
}

impl TerminalEgressGate {
    /// Asks on `terminal`; `policy` is the session's live table, read only to say which row asks.
    pub(crate) fn new(terminal: Arc<ExecTerminal>, policy: Arc<RwLock<Policy>>) -> Self {
        Self {
            terminal,
            policy,
            for_the_session: Arc::default(),
        }
    }

    /// The question for `action`, as the shared prompt shows it (which escapes what it quotes).
    fn question(&self, action: &Action, detail: &str) -> Question {
        let verdict = self
            .policy
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .decide(action);
        Question {
            kind: QuestionKind::Approval,
            call_id: None,
            action: Some(action.as_str().to_string()),
            decided_by: Some(format!(
                "{}: {}",
                verdict.decided_by,
                verdict.decision.as_str()
            )),
            text: format!("let the command {detail}"),
            reviewer: None,
        }
    }
}

fn answer_of(reply: Option<&Answer>) -> GateAnswer {
    let allow = |by: &str| GateAnswer::Allow {
        // The session replaces this with the reach of the row that was asked.
        scope: AllowScope::Pattern,
        decided_by: by.into(),
    };
    match reply {
        Some(Answer::AllowOnce { .. }) => allow("approved by terminal"),
        Some(Answer::AllowSession) => allow("approved by terminal for this exact act"),
        Some(Answer::Deny { .. } | Answer::Reply { .. }) => {
            GateAnswer::refuse("refused: answered no by terminal")
        }
        None => GateAnswer::refuse("refused: nobody answered at the terminal"),
    }
}

impl Gate for TerminalEgressGate {
    fn decide<'a>(&'a self, action: &'a Action, detail: &'a str) -> GateFuture<'a> {
        let act = (action.as_str().to_string(), detail.to_string());
        let question = self.question(action, detail);
        let gate = self.clone();
        Box::pin(async move {
            if gate
                .for_the_session
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .contains(&act)
            {
                return allow_again();
            }
            // Reading the terminal blocks; keep it off the proxy's async workers.
            let terminal = Arc::clone(&gate.terminal);
            let ask = move || terminal.ask(&question);
            let reply = match tokio::runtime::Handle::try_current() {
                Ok(handle) => handle.spawn_blocking(ask).await.unwrap_or(None),
                Err(_) => ask(),
            };
            if reply == Some(Answer::AllowSession) {
                gate.for_the_session
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(act);
            }
            answer_of(reply.as_ref())
        })
    }
}

fn allow_again() -> GateAnswer {
    GateAnswer::Allow {
        scope: AllowScope::Pattern,
        decided_by: "approved by terminal earlier for this exact act".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_yes_allows_and_no_answer_refuses() {
        let once = Answer::AllowOnce {
            reasons: String::new(),
        };
        let no = Answer::Deny {
            reasons: String::new(),
        };
        assert!(matches!(answer_of(Some(&once)), GateAnswer::Allow { .. }));
        assert!(matches!(
            answer_of(Some(&Answer::AllowSession)),
            GateAnswer::Allow { .. }
        ));
        assert!(matches!(answer_of(Some(&no)), GateAnswer::Refuse { .. }));
        assert!(matches!(answer_of(None), GateAnswer::Refuse { .. }));
    }
}
