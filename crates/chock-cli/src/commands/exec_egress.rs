//! The egress asker of `chock exec` at a terminal: when the table puts one of the command's
//! connections to a question (`ask` on `net.connect.*`), the person who answers the command's own
//! ask answers it too, on the same terminal and in the same yes/no way. The session reads the table,
//! writes `approval.ask` / `approval.answer` around this gate and sets the allow's reach from the row
//! that was asked; this only puts the question and reports the answer. No answer is a refusal.

use std::sync::{Arc, Mutex};

use chock_broker::{AllowScope, Gate, GateAnswer, GateFuture};
use chock_policy::Action;

use super::exec::ask_terminal;
use super::sessions::printable;

/// Asks the person on `/dev/tty` about one connection of the command. Questions from connections
/// made at the same time are put one after another, never interleaved on the terminal.
#[derive(Debug, Clone, Default)]
pub(crate) struct TerminalEgressGate {
    one_at_a_time: Arc<Mutex<()>>,
}

impl TerminalEgressGate {
    pub(crate) fn new() -> Self {
        Self::default()
    }
}

/// The question for `action`, with everything the command chose shown escaped.
fn question(action: &Action, detail: &str) -> String {
    format!(
        "let the command {} ({})?",
        printable(detail),
        printable(action.as_str())
    )
}

fn answer_of(reply: Option<bool>) -> GateAnswer {
    match reply {
        Some(true) => GateAnswer::Allow {
            // The session replaces this with the reach of the row that was asked.
            scope: AllowScope::Pattern,
            decided_by: "approved by terminal".into(),
        },
        Some(false) => GateAnswer::refuse("refused: answered no by terminal"),
        None => GateAnswer::refuse("refused: nobody answered at the terminal"),
    }
}

impl Gate for TerminalEgressGate {
    fn decide<'a>(&'a self, action: &'a Action, detail: &'a str) -> GateFuture<'a> {
        let text = question(action, detail);
        let lock = Arc::clone(&self.one_at_a_time);
        Box::pin(async move {
            // Reading the terminal blocks; keep it off the proxy's async workers.
            let ask = move || {
                let _turn = lock
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                ask_terminal(&text)
            };
            let reply = match tokio::runtime::Handle::try_current() {
                Ok(handle) => handle.spawn_blocking(ask).await.unwrap_or(None),
                Err(_) => ask(),
            };
            answer_of(reply)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_question_shows_escape_sequences_escaped() {
        let action = Action::parse("net.connect.localhost.80").expect("action");
        let q = question(&action, "connect evil\u{1b}[2Khost:80");
        assert!(!q.contains('\u{1b}'), "{q}");
        assert!(q.contains("\\u{1b}[2Khost:80"), "{q}");
    }

    #[test]
    fn only_a_yes_allows_and_no_answer_refuses() {
        assert!(matches!(answer_of(Some(true)), GateAnswer::Allow { .. }));
        assert!(matches!(answer_of(Some(false)), GateAnswer::Refuse { .. }));
        assert!(matches!(answer_of(None), GateAnswer::Refuse { .. }));
    }
}
