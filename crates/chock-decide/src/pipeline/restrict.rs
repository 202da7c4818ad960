//! The one narrowing of a session's live policy: a front end's `restrict` operation and the
//! agent's `restrict_self` both go through it. The narrowing is tried on a copy first, so a refused
//! one changes nothing and logs nothing; an accepted one is in the log before the live table
//! changes (rule 3), and no earlier "yes for this session" outlives it.

use chock_policy::Decision;
use chock_protocol::log as record;

use super::Pipeline;
use crate::Harness;
use crate::error::RestrictError;

/// Why the harness allows a tool call that narrows the session's own policy: it grants nothing.
const NARROWING_GRANTS_NOTHING: &str = "grants no capability (narrowing the session's own policy)";

impl Pipeline {
    /// Narrows the session's live policy (never widens): `pattern` is decided at least as
    /// strictly as `decision` from now on. The change is logged (`note` `ratchet`, `restrict`)
    /// before it applies, and an earlier "yes for this session" does not outlive it.
    pub fn restrict(&self, pattern: &str, decision: Decision) -> Result<(), RestrictError> {
        self.narrow(None, pattern, decision)
    }

    /// [`Pipeline::restrict`] asked by the tool call `call_id` (the agent's `restrict_self`): the
    /// call's `decision` (allowed by the harness: a narrowing grants nothing) and the `ratchet`
    /// note are logged under the call, both before the narrowing applies. A refused narrowing
    /// logs nothing here (a widening is the caller's to settle as `ratchet.widen_action`).
    pub fn restrict_for_call(
        &self,
        call_id: &str,
        pattern: &str,
        decision: Decision,
    ) -> Result<(), RestrictError> {
        self.narrow(Some(call_id), pattern, decision)
    }

    fn narrow(
        &self,
        call_id: Option<&str>,
        pattern: &str,
        decision: Decision,
    ) -> Result<(), RestrictError> {
        // Held until the narrowing applies: no decision reads the table between the log and it.
        let mut live = self
            .policy
            .write()
            .map_err(|_| RestrictError::Unavailable)?;
        let mut narrowed = live.clone();
        narrowed
            .restrict(pattern, decision)
            .map_err(RestrictError::Ratchet)?;
        if let Some(call_id) = call_id {
            self.decide_without_table(
                Some(call_id),
                None,
                Harness::Allow {
                    why: NARROWING_GRANTS_NOTHING.to_string(),
                },
            )?;
        }
        self.log.record(
            call_id,
            record::Note::Ratchet {
                change: record::RatchetChange::Restrict,
                pattern: pattern.to_string(),
                decision: decision.as_str().to_string(),
                removed: None,
            },
        )?;
        *live = narrowed;
        self.broker.forget_session_allows();
        Ok(())
    }
}
