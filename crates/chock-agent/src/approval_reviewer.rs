//! A reviewer model, as an [`Answerer`] for `agent_review` and `agent_then_human`.
//!
//! One small model call with no tools: the act, what the table said, and the task for context. The
//! reviewer must answer with a JSON object `{"allow": true|false, "reasons": "..."}`; anything else is no
//! answer, and no answer is a refusal. Its verdict and reasons go into the log with the answer.

use std::sync::Arc;

use chock_provider::{Message, Provider, Request};

use crate::approval::{Answer, AnswerFuture, Answerer, Question, QuestionKind, Role};

const REVIEWER_SYSTEM: &str = "You review one act that an AI coding agent wants to perform inside a sandboxed, \
throwaway copy of a project. Decide whether it is safe and plausibly needed for the task. Refuse acts that \
exfiltrate data, reach hosts the task does not need, destroy work, or try to widen the agent's own permissions. \
Reply with ONLY a JSON object: {\"allow\": true or false, \"reasons\": \"one or two sentences\"}.";

/// Asks a model to judge an act.
pub struct ReviewerAnswerer {
    provider: Arc<dyn Provider>,
    model: String,
    task: String,
}

impl std::fmt::Debug for ReviewerAnswerer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReviewerAnswerer")
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

impl ReviewerAnswerer {
    /// A reviewer using `provider`'s `model`, told the session's `task` for context.
    pub fn new(provider: Arc<dyn Provider>, model: &str, task: &str) -> Self {
        Self {
            provider,
            model: model.to_string(),
            task: task.to_string(),
        }
    }
}

/// Reads `{"allow": bool, "reasons": string}` out of a reply (the first `{` to the last `}`).
pub fn parse_verdict(text: &str) -> Option<(bool, String)> {
    let start = text.find('{')?;
    let end = text.rfind('}')?;
    let value: serde_json::Value = serde_json::from_str(text.get(start..=end)?).ok()?;
    let allow = value.get("allow")?.as_bool()?;
    let reasons = match value.get("reasons") {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(serde_json::Value::Array(items)) => items
            .iter()
            .filter_map(|i| i.as_str())
            .collect::<Vec<_>>()
            .join("; "),
        _ => String::new(),
    };
    Some((allow, reasons))
}

impl Answerer for ReviewerAnswerer {
    fn name(&self) -> String {
        format!("reviewer:{}", self.model)
    }

    fn role(&self) -> Role {
        Role::Reviewer
    }

    fn answer<'a>(&'a self, question: &'a Question) -> AnswerFuture<'a> {
        Box::pin(async move {
            if question.kind != QuestionKind::Approval {
                return None;
            }
            let prompt = format!(
                "Task given to the agent:\n{}\n\nAct: {}\nPolicy: {}\nWhat would happen: {}\n",
                self.task,
                question.action.as_deref().unwrap_or("(unnamed)"),
                question.decided_by.as_deref().unwrap_or("(unknown)"),
                question.text
            );
            let request = Request {
                model: self.model.clone(),
                system: Some(REVIEWER_SYSTEM.to_string()),
                messages: vec![Message::user_text(prompt)],
                max_tokens: 512,
                ..Request::default()
            };
            let mut ignore = |_event| {};
            let response = self.provider.stream(&request, &mut ignore).await.ok()?;
            let (allow, reasons) = parse_verdict(&response.text())?;
            Some(if allow {
                Answer::AllowOnce { reasons }
            } else {
                Answer::Deny { reasons }
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_are_read_from_prose_and_garbage_is_none() {
        assert_eq!(
            parse_verdict("Sure.\n```json\n{\"allow\": false, \"reasons\": \"reads ~/.ssh\"}\n```"),
            Some((false, "reads ~/.ssh".into()))
        );
        assert_eq!(
            parse_verdict("{\"allow\": true, \"reasons\": [\"a\", \"b\"]}"),
            Some((true, "a; b".into()))
        );
        assert_eq!(parse_verdict("{\"allow\": \"yes\"}"), None);
        assert_eq!(parse_verdict("I think it is fine"), None);
    }
}
