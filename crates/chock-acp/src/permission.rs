//! The editor as the person who answers: a question of the decision pipeline becomes a
//! `session/request_permission` about its tool call, with the exact act as the title and yes
//! once / yes for this session / no as the options.
//!
//! Only a chosen option is an answer. A `cancelled` outcome, an error response, a closed
//! connection, a `session/cancel`, an unknown option and no response within the answer timeout
//! all leave the question unanswered — which the pipeline turns into a refusal, logged as
//! nobody answering. An `ask_user` question (free text) has no ACP form: the editor is not
//! asked, and the model is told nobody answered.
//!
//! A secret question (the password git asks for) is refused at once, with [`SECRET_REFUSED`] as
//! the reason — logged with the answer and shown to the editor as a failed tool call: a permission
//! request carries options, not a typed answer, and ACP's elicitation (its form mode) is for
//! non-sensitive data only, so there is no masked input an editor is bound to offer.

use std::sync::Arc;

use chock_decide::{Answer, AnswerFuture, Answerer, Question, QuestionKind, Role};
use chock_protocol::log::AnswerKind;

use crate::live::{Shared, visible};
use crate::schema::{
    PermissionOption, PermissionOptionKind, RequestPermissionOutcome, RequestPermissionRequest,
    RequestPermissionResponse, ToolCall, ToolCallContent, ToolCallStatus, ToolCallUpdate, ToolKind,
};

/// The option ids Chock offers; an answer is read from them only.
const ALLOW_ONCE: &str = "allow_once";
const ALLOW_SESSION: &str = "allow_always";
const REJECT: &str = "reject_once";

/// Why the editor refuses a secret question: the reason logged with the refusal and shown.
pub(crate) const SECRET_REFUSED: &str = "an editor over ACP cannot take a typed secret: a permission request carries options, not a masked input, so this password is refused here (answer it in `chock attach`, the TUI or the browser UI of a daemon's session)";

/// Answers a session's questions by asking the editor.
#[derive(Debug)]
pub(crate) struct EditorAnswerer(pub(crate) Arc<Shared>);

/// The options for an act: yes once, no, and yes for the session when the question offers it
/// ([`Question::answers`]: never for an apply, one writing of one reviewed diff; for any other act
/// the very same act only, as `Answer::AllowSession` says).
fn options(for_session: bool) -> Vec<PermissionOption> {
    let mut options = vec![PermissionOption {
        option_id: ALLOW_ONCE.into(),
        name: "Yes, once".into(),
        kind: PermissionOptionKind::AllowOnce,
    }];
    if for_session {
        options.push(PermissionOption {
            option_id: ALLOW_SESSION.into(),
            name: "Yes, for this session (this exact act)".into(),
            kind: PermissionOptionKind::AllowAlways,
        });
    }
    options.push(PermissionOption {
        option_id: REJECT.into(),
        name: "No".into(),
        kind: PermissionOptionKind::RejectOnce,
    });
    options
}

/// The answer an option stands for (`None`: not one Chock offered).
fn answer_of(option_id: &str, offered: &[PermissionOption]) -> Option<Answer> {
    if !offered.iter().any(|o| o.option_id == option_id) {
        return None;
    }
    match option_id {
        ALLOW_ONCE => Some(Answer::AllowOnce {
            reasons: String::new(),
        }),
        ALLOW_SESSION => Some(Answer::AllowSession),
        REJECT => Some(Answer::Deny {
            reasons: String::new(),
        }),
        _ => None,
    }
}

impl EditorAnswerer {
    /// Refuses secret question `question`, showing the editor why as a failed tool call of its
    /// own: its title is the question (git's prompt), never anything typed.
    fn refuse_secret(&self, question: &Question) -> Option<Answer> {
        self.0.id()?;
        self.0.start_call(ToolCall {
            tool_call_id: question.id.clone(),
            title: visible(&question.text),
            kind: ToolKind::Other,
            status: ToolCallStatus::Pending,
            content: Vec::new(),
            locations: Vec::new(),
            raw_input: None,
        });
        self.0.end_call(&question.id, false, SECRET_REFUSED);
        Some(Answer::Deny {
            reasons: SECRET_REFUSED.into(),
        })
    }

    /// The tool call the question is about: the model's call, the apply offered now, or (a
    /// question with no call, such as a command's connection) one made for the question.
    fn call_for(&self, question: &Question) -> (String, bool) {
        if let Some(call) = &question.call_id
            && self.0.knows_call(call)
        {
            return (call.clone(), false);
        }
        if question.action.as_deref() == Some("workspace.apply")
            && let Some(offer) = self.0.offer.lock().ok().and_then(|o| o.clone())
        {
            return (offer, false);
        }
        let action = question.action.as_deref().unwrap_or("");
        self.0.start_call(ToolCall {
            tool_call_id: question.id.clone(),
            title: visible(&question.text),
            kind: if action.starts_with("net.") {
                ToolKind::Fetch
            } else {
                ToolKind::Other
            },
            status: ToolCallStatus::Pending,
            content: Vec::new(),
            locations: Vec::new(),
            raw_input: None,
        });
        (question.id.clone(), true)
    }

    async fn ask(&self, question: &Question) -> Option<Answer> {
        let session_id = self.0.id()?.to_string();
        let (tool_call_id, own) = self.call_for(question);
        let offered = options(question.answers().contains(&AnswerKind::AllowSession));
        let mut said = vec![format!(
            "Chock asks: {} — {}",
            question.action.as_deref().unwrap_or("this act"),
            question.decided_by.as_deref().unwrap_or("the policy table")
        )];
        if let Some(verdict) = &question.reviewer {
            said.push(format!(
                "The reviewer model {}: {}",
                if verdict.allow {
                    "allowed it"
                } else {
                    "refused it"
                },
                verdict.reasons
            ));
        }
        said.extend(question.context.iter().cloned());
        let mut content: Vec<ToolCallContent> = Vec::new();
        if !own {
            content.push(ToolCallContent::text(visible(&said.join("\n"))));
        }
        let request = RequestPermissionRequest {
            session_id,
            tool_call: ToolCallUpdate {
                tool_call_id: tool_call_id.clone(),
                title: Some(visible(&question.text)),
                status: None,
                // An apply's tool call already shows its diff: the question leaves it as it is.
                content: (question.action.as_deref() != Some("workspace.apply")).then_some(content),
            },
            options: offered.clone(),
        };
        let mut cancelled = self.0.cancel.subscribe();
        cancelled.mark_unchanged();
        let asked = self.0.peer.request("session/request_permission", request);
        let waited = async {
            match self.0.answer_timeout {
                Some(limit) => tokio::time::timeout(limit, asked).await.ok(),
                None => Some(asked.await),
            }
        };
        let reply = tokio::select! {
            reply = waited => reply,
            _ = cancelled.changed() => None,
        };
        let answer = match reply {
            Some(Ok(value)) => match serde_json::from_value::<RequestPermissionResponse>(value) {
                Ok(RequestPermissionResponse {
                    outcome: RequestPermissionOutcome::Selected { option_id },
                }) => answer_of(&option_id, &offered),
                Ok(RequestPermissionResponse {
                    outcome: RequestPermissionOutcome::Cancelled,
                })
                | Err(_) => None,
            },
            Some(Err(_)) | None => None,
        };
        if own {
            let text = match &answer {
                Some(a) if a.allows() => "allowed",
                Some(_) => "refused",
                None => "nobody answered: refused",
            };
            self.0.end_call(
                &tool_call_id,
                answer.as_ref().is_some_and(Answer::allows),
                text,
            );
        }
        answer
    }
}

impl Answerer for EditorAnswerer {
    fn name(&self) -> String {
        self.0.answerer.clone()
    }

    fn role(&self) -> Role {
        Role::Human
    }

    fn answer<'a>(&'a self, question: &'a Question) -> AnswerFuture<'a> {
        Box::pin(async move {
            match question.kind {
                QuestionKind::Approval => self.ask(question).await,
                QuestionKind::Question if question.secret => self.refuse_secret(question),
                QuestionKind::Question => None,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_secret_is_refused_with_its_reason_shown_and_no_permission_asked() {
        let (peer, mut frames) = crate::rpc::Peer::new();
        let shared = Shared::new("/nonexistent".into(), peer, None, "editor:test".into());
        shared.set_id("s-1");
        let editor = EditorAnswerer(Arc::new(shared));
        let question = Question {
            id: "q-4".into(),
            kind: QuestionKind::Question,
            call_id: Some("c-1".into()),
            action: None,
            decided_by: None,
            text: "git asks for the password to push to http://alice@127.0.0.1:8080/r.git".into(),
            context: Vec::new(),
            reviewer: None,
            secret: true,
        };
        let answer = editor.answer(&question).await;
        assert_eq!(
            answer,
            Some(Answer::Deny {
                reasons: SECRET_REFUSED.into()
            })
        );
        let mut sent = Vec::new();
        while let Ok(frame) = frames.try_recv() {
            sent.push(frame);
        }
        assert!(
            sent.iter().all(|f| f["method"] == "session/update"),
            "the editor was asked: {sent:?}"
        );
        let shown = serde_json::to_string(&sent).unwrap();
        assert!(shown.contains("cannot take a typed secret"), "{shown}");
        assert!(shown.contains("\"failed\""), "{shown}");
        // A free question is still not put to the editor at all.
        let free = Question {
            secret: false,
            ..question
        };
        assert_eq!(editor.answer(&free).await, None);
    }

    #[test]
    fn only_an_offered_option_is_an_answer() {
        let apply = options(false);
        assert_eq!(
            apply.iter().map(|o| o.kind).collect::<Vec<_>>(),
            [
                PermissionOptionKind::AllowOnce,
                PermissionOptionKind::RejectOnce
            ]
        );
        assert_eq!(answer_of(ALLOW_SESSION, &apply), None);
        assert_eq!(answer_of("reject_always", &options(true)), None);
        assert_eq!(
            answer_of(ALLOW_SESSION, &options(true)),
            Some(Answer::AllowSession)
        );
        assert!(matches!(
            answer_of(REJECT, &apply),
            Some(Answer::Deny { .. })
        ));
    }
}
