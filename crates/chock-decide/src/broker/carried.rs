//! Questions carried over a handover: the process that owned the session before let go (or died)
//! while a person's question was open in the log. The call that asked it never ran (its decision
//! is not in the log), so the new owner settles it again; when that settle comes to ask the same
//! person about the same act of the same call, it puts the question that is already in the log,
//! under its id, rather than asking a second one: the question stays open across the move and is
//! answered once.

use super::{ApprovalBroker, Role, lock};

/// One question left open by an earlier owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Carried {
    call_id: String,
    action: String,
    question: String,
}

impl ApprovalBroker {
    /// Question `question`, asked in the log about `action` for call `call_id` by an earlier
    /// owner of the session and not answered, is put again under its id when that call's settle
    /// asks about that act ([`crate::Pipeline`]), instead of a new question.
    pub fn carry_question(&self, call_id: &str, action: &str, question: &str) {
        lock(&self.shared.carried).push(Carried {
            call_id: call_id.to_string(),
            action: action.to_string(),
            question: question.to_string(),
        });
    }

    /// The carried question for `action` of `call_id` when it is put to a person, taken (it is
    /// put once).
    pub(crate) fn take_carried(
        &self,
        role: Role,
        call_id: Option<&str>,
        action: &str,
    ) -> Option<String> {
        let call_id = call_id.filter(|_| role == Role::Human)?;
        let mut carried = lock(&self.shared.carried);
        let at = carried
            .iter()
            .position(|c| c.call_id == call_id && c.action == action)?;
        Some(carried.remove(at).question)
    }
}
