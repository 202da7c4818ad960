//! Who settles a confined call's act: the one decision pipeline (chock-decide) over the session's
//! log and live policy, with the caller's answerers. The call never writes a question, an answer
//! or a decision itself; nobody answering is a refusal (rule 3).

use chock_decide::{ApprovalBroker, Pipeline};

use crate::Session;

/// Gives the confined call the pipeline it settles its act (and its command's connections) by.
pub trait Deciding: Send + Sync {
    /// The pipeline for a call of `session`.
    fn pipeline_for(&self, session: &Session) -> Pipeline;
}

impl Deciding for Pipeline {
    fn pipeline_for(&self, _session: &Session) -> Pipeline {
        self.clone()
    }
}

/// Nobody to ask: the table alone settles the call; every question is unanswered, a refusal.
/// `chock exec` without a terminal uses this.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoApprover;

impl Deciding for NoApprover {
    fn pipeline_for(&self, session: &Session) -> Pipeline {
        session.pipeline(ApprovalBroker::new())
    }
}

impl Session {
    /// The session's decision pipeline with `broker`'s answerers: the log and the live policy
    /// are the session's. Use one broker for the whole session (its question ids and "yes for
    /// this session" answers are the broker's).
    pub fn pipeline(&self, broker: ApprovalBroker) -> Pipeline {
        Pipeline::new(self.log.clone(), self.shared_policy(), broker)
    }
}
