//! A question's end: its reply as the act's [`Outcome`], or, when its waiter goes away first, the
//! question given up and logged as nobody answering ([`Unanswered`]); and where a reopened
//! session's question numbers go on from.

use crate::AllowScope;
use chock_log::{EventKind, Log};
use chock_protocol::log::{self as record, AnswerKind};

use super::Pipeline;
use crate::broker::{Answer, Question, Reply, Role};
use crate::outcome::{AllowedBy, Outcome, RefusedBy, Settled};

/// A question in the log whose answer is not yet: dropped armed (its settle's future dropped, the
/// waiter gone), it gives the question up in the broker and logs it as nobody answering, and the
/// act as refused — the same events as a question nobody answered in time.
pub(super) struct Unanswered<'a> {
    pub(super) pipeline: &'a Pipeline,
    pub(super) call_id: Option<&'a str>,
    pub(super) question: &'a Question,
    pub(super) role: Role,
    pub(super) policy_file: Option<&'a str>,
    /// The refused decision to log (`None`: the agent's free question, which has none).
    pub(super) settled: Option<Settled>,
    pub(super) armed: bool,
}

impl Unanswered<'_> {
    /// The answer came: the caller logs it.
    pub(super) fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for Unanswered<'_> {
    fn drop(&mut self) {
        let broker = self.pipeline.broker();
        if !self.armed || broker.keeps_questions_open() {
            return;
        }
        // Closed first, so no answer is taken after the log says nobody gave one; everyone is
        // told once the log says so.
        if !broker.withdraw(&self.question.id) {
            return;
        }
        // A drop cannot return an error: a log that cannot record leaves the question open in
        // the file, which a reader takes as never answered (and nothing acts on it).
        let _ = self.pipeline.log.record(
            self.call_id,
            record::ApprovalAnswer {
                question: Some(self.question.id.clone()),
                action: self.question.action.clone(),
                answer: AnswerKind::None,
                by: None,
                reasons: None,
                reply: None,
                policy_file: self.policy_file.map(str::to_string),
            },
        );
        if let Some(settled) = self.settled.take() {
            let _ = self.pipeline.record_decision(self.call_id, &settled);
        }
        broker.tell_nobody(&self.question.id, self.role);
    }
}

pub(super) fn reasons_of(answer: &Answer) -> String {
    match answer {
        Answer::AllowOnce { reasons } | Answer::Deny { reasons } => reasons.clone(),
        Answer::AllowSession | Answer::Reply { .. } => String::new(),
    }
}

pub(super) fn from_reply(role: Role, reply: Reply, scope: AllowScope) -> Outcome {
    match reply {
        Reply::Nobody(why) => Outcome::Unanswered { asked: role, why },
        Reply::Answered { by, answer } if answer.allows() => Outcome::Allowed {
            by: match role {
                Role::Human => AllowedBy::Person { name: by },
                Role::Reviewer => AllowedBy::Reviewer {
                    name: by,
                    reasons: reasons_of(&answer),
                },
            },
            scope,
        },
        Reply::Answered { by, answer } => Outcome::Refused {
            by: match role {
                Role::Human => RefusedBy::Person { name: by },
                Role::Reviewer => RefusedBy::Reviewer { name: by },
            },
            reason: reasons_of(&answer),
        },
    }
}

/// The highest `q-<n>` an ask in the log names (0 for none): a reopened session goes on from it.
pub(super) fn highest_question_number(log: &Log) -> u64 {
    let Ok(events) = chock_log::read_events(log.dir()) else {
        return 0;
    };
    events
        .iter()
        .filter(|e| e.kind == EventKind::ApprovalAsk)
        .filter_map(|e| {
            e.data
                .get("question")?
                .as_str()?
                .strip_prefix("q-")?
                .parse()
                .ok()
        })
        .max()
        .unwrap_or(0)
}
