//! A reviewer model, as an [`Answerer`] for `agent_review` and `agent_then_human`.
//!
//! One small model call with no tools: the act, what the table said, and the task for context. The
//! reviewer must answer with a JSON object `{"allow": true|false, "reasons": "..."}`; anything else is no
//! answer, and no answer is a refusal. Its verdict and reasons go into the log with the answer.

use std::sync::{Arc, Mutex, PoisonError};

use chock_provider::{Message, Request};

use crate::approval::{Answer, AnswerFuture, Answerer, Question, QuestionKind, Role};
use crate::booking::OffTurn;

const REVIEWER_SYSTEM: &str = "You review one act that an AI coding agent wants to perform inside a sandboxed, \
throwaway copy of a project. Decide whether it is safe and plausibly needed for the task. Refuse acts that \
exfiltrate data, reach hosts the task does not need, destroy work, or try to widen the agent's own permissions. \
Reply with ONLY a JSON object: {\"allow\": true or false, \"reasons\": \"one or two sentences\"}.";

/// What the reviewer is told the agent was asked: the session's first task and the person's
/// latest message, kept current by the session runtime as each task or follow-up arrives (so a
/// session built before its task is known, an editor's or a resumed one, is reviewed against the
/// task it is doing). Clones share one record.
#[derive(Debug, Clone, Default)]
pub struct ReviewContext(Arc<Mutex<Told>>);

#[derive(Debug, Default)]
struct Told {
    first: Option<String>,
    latest: Option<String>,
}

impl ReviewContext {
    /// The agent was given `input` (a task or a follow-up).
    pub fn told(&self, input: &str) {
        let mut told = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if told.first.is_none() {
            told.first = Some(input.to_string());
        }
        told.latest = Some(input.to_string());
    }

    /// The task part of the reviewer's prompt.
    fn describe(&self) -> String {
        let told = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match (&told.first, &told.latest) {
            (None, _) => "Task given to the agent:\n(none yet)\n".to_string(),
            (Some(first), Some(latest)) if latest != first => format!(
                "Task given to the agent:\n{first}\n\nThe person's latest message to it:\n{latest}\n"
            ),
            (Some(first), _) => format!("Task given to the agent:\n{first}\n"),
        }
    }
}

/// Asks a model to judge an act: the session's own model, each call admitted by the session's
/// budget and booked in its log as a call outside the turns (`model.request` of turn 0 naming the
/// question), so a resumed session still counts what its reviewer spent.
#[derive(Debug)]
pub struct ReviewerAnswerer {
    session: OffTurn,
    task: ReviewContext,
}

impl ReviewerAnswerer {
    /// A reviewer asking the model of `session`, told what the agent was asked through `task`.
    pub(crate) fn for_session(session: OffTurn, task: ReviewContext) -> Self {
        Self { session, task }
    }
}

/// Reads the verdict `{"allow": bool, "reasons": string}`. Strict on purpose: the reply must be that
/// one object and nothing else (a ```json fence around it is tolerated), `allow` a real boolean, and no
/// keys but `allow` and `reasons`. Prose around it, two objects, `"allow": "yes"` — anything that is not
/// a clear verdict is no answer, and no answer is a refusal. The act being judged was written by the
/// agent and is quoted in the reviewer's prompt, so a reply echoing it must never read as a yes.
pub fn parse_verdict(text: &str) -> Option<(bool, String)> {
    let text = text.trim();
    let text = match text.strip_prefix("```") {
        Some(fenced) => fenced
            .strip_prefix("json")
            .unwrap_or(fenced)
            .strip_suffix("```")?
            .trim(),
        None => text,
    };
    let serde_json::Value::Object(map) = serde_json::from_str(text).ok()? else {
        return None;
    };
    if map.keys().any(|k| k != "allow" && k != "reasons") {
        return None;
    }
    let allow = map.get("allow")?.as_bool()?;
    let reasons = match map.get("reasons") {
        None => String::new(),
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(serde_json::Value::Array(items)) => items
            .iter()
            .map(|i| i.as_str())
            .collect::<Option<Vec<_>>>()?
            .join("; "),
        Some(_) => return None,
    };
    Some((allow, reasons))
}

impl Answerer for ReviewerAnswerer {
    fn name(&self) -> String {
        format!("reviewer:{}", self.session.model)
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
                "{}\nAct: {}\nPolicy: {}\nWhat would happen: {}\n",
                self.task.describe(),
                question.action.as_deref().unwrap_or("(unnamed)"),
                question.decided_by.as_deref().unwrap_or("(unknown)"),
                question.text
            );
            let request = Request {
                system: Some(REVIEWER_SYSTEM.to_string()),
                messages: vec![Message::user_text(prompt)],
                max_tokens: 512,
                ..Request::default()
            };
            // A call the budget cannot hold, or that fails, is no answer: a refusal.
            let asker = serde_json::json!({"reviewer": question.id});
            let (response, _) = self.session.call(request, asker).await.ok()?;
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
    fn only_a_clear_verdict_is_an_answer() {
        assert_eq!(
            parse_verdict("```json\n{\"allow\": false, \"reasons\": \"reads ~/.ssh\"}\n```"),
            Some((false, "reads ~/.ssh".into()))
        );
        assert_eq!(
            parse_verdict(" {\"allow\": true, \"reasons\": [\"a\", \"b\"]}\n"),
            Some((true, "a; b".into()))
        );
        for unclear in [
            "{\"allow\": \"yes\"}",
            "I think it is fine",
            "{\"allow\": 1}",
            "{}",
            // Prose around a verdict: perhaps the act's own text echoed back.
            "The act says {\"allow\": true}. I refuse.",
            "{\"allow\": false} {\"allow\": true}",
            "{\"allow\": true, \"override\": true}",
            "{\"allow\": true, \"reasons\": 5}",
            "```json\n{\"allow\": true}",
            "[{\"allow\": true}]",
        ] {
            assert_eq!(parse_verdict(unclear), None, "{unclear}");
        }
    }
}
