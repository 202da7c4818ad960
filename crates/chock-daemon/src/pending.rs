//! Questions asked and not answered, derived from a session's log: an `approval.ask` naming a
//! question that no `approval.answer` names. The log is the source, so a client that attaches
//! late, or a daemon that restarted, sees the same list; nothing here answers anything.

use std::collections::HashSet;
use std::path::Path;

use chock_log::{EventData, read_events};
use chock_protocol::log::{Asked, answers_for};
use chock_protocol::rpc::Approval;

/// The open questions of the session `session` in `dir`, in log order. `live` says whether an
/// answer is taken now (the session runs in this daemon); a reviewer's question never is.
pub(crate) fn pending_in(session: &str, dir: &Path, live: bool) -> Vec<Approval> {
    let Ok(events) = read_events(dir) else {
        return Vec::new();
    };
    let mut asked = Vec::new();
    let mut answered = HashSet::new();
    for event in &events {
        match event.payload() {
            Ok(EventData::ApprovalAsk(ask)) => {
                if let Some(question) = ask.question.clone() {
                    asked.push((event.seq, event.call_id.clone(), question, ask));
                }
            }
            Ok(EventData::ApprovalAnswer(answer)) => {
                if let Some(question) = answer.question {
                    answered.insert(question);
                }
            }
            _ => {}
        }
    }
    asked
        .into_iter()
        .filter(|(_, _, question, _)| !answered.contains(question))
        .map(|(seq, call_id, question, ask)| Approval {
            session: session.to_string(),
            question,
            seq,
            call_id,
            answers: answers_for(ask.asked, ask.action.as_deref()),
            answerable: live && ask.asked == Asked::Person,
            action: ask.action,
            decision: ask.decision,
            decided_by: ask.decided_by,
            what: ask.what,
            asked: ask.asked,
        })
        .collect()
}
