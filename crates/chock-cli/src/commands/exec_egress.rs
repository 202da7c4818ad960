//! The person at the terminal of `chock exec`, as an answerer of the session's decision pipeline:
//! the command's own act and its asked connections (`ask` on `net.connect.*`) are put to them on
//! the same terminal and through the same prompt, with the command's output held back while a
//! question is open ([`ExecTerminal`]). The pipeline logs the question, the answer and the
//! decision and sets an allow's reach from the row that was asked; this only puts the question.
//! No answer is a refusal.

use std::sync::Arc;

use chock_agent::approval::{AnswerFuture, Answerer, Question, Role};

use super::exec_terminal::ExecTerminal;

/// Asks the person at the terminal. Questions from connections made at the same time are put one
/// after another, never interleaved on the terminal.
#[derive(Debug, Clone)]
pub(crate) struct TerminalAnswerer {
    terminal: Arc<ExecTerminal>,
}

impl TerminalAnswerer {
    /// Asks on `terminal`.
    pub(crate) fn new(terminal: Arc<ExecTerminal>) -> Self {
        Self { terminal }
    }
}

/// The question as the terminal shows it: a connection is the command's, so it says so.
fn as_shown(question: &Question) -> Question {
    let connects = question
        .action
        .as_deref()
        .is_some_and(|a| a.starts_with("net.connect."));
    let mut shown = question.clone();
    if connects {
        shown.text = format!("let the command {}", question.text);
    }
    shown
}

impl Answerer for TerminalAnswerer {
    fn name(&self) -> String {
        "terminal".to_string()
    }

    fn role(&self) -> Role {
        Role::Human
    }

    fn answer<'a>(&'a self, question: &'a Question) -> AnswerFuture<'a> {
        let terminal = Arc::clone(&self.terminal);
        let question = as_shown(question);
        Box::pin(async move {
            // Reading the terminal blocks; keep it off the async workers.
            let ask = move || terminal.ask(&question);
            match tokio::runtime::Handle::try_current() {
                Ok(handle) => handle.spawn_blocking(ask).await.unwrap_or(None),
                Err(_) => ask(),
            }
        })
    }
}
