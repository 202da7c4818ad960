//! What a session runtime lends the actor that owns it (`chock-runtime`), so operations that come
//! while a task runs (an answer, a narrowing, an apply) reach the session without waiting for it.

use chock_decide::Client;

use super::SessionRuntime;

impl SessionRuntime {
    /// Attaches a push-style answerer named `name` (a client of the daemon, an editor): while
    /// the returned [`Client`] lives, questions for people wait for it too (the first valid answer
    /// wins), and it answers by question id — from another task while a turn runs.
    pub fn attach(&self, name: &str) -> Client {
        self.agent.decider().broker.attach(name)
    }

    /// The session's decision pipeline — its log, its live policy (ratchet included) and its
    /// answerers — for an act a client asks for outside a turn (the daemon's `review.apply`): it
    /// is decided, asked and logged exactly as the session's own acts are, and its questions get
    /// ids from the same sequence. Its broker is the one [`SessionRuntime::attach`] attaches to.
    pub fn pipeline(&self) -> chock_decide::Pipeline {
        let decider = self.agent.decider();
        chock_decide::Pipeline::new(
            decider.log.clone(),
            std::sync::Arc::clone(&decider.policy),
            decider.broker.clone(),
        )
    }
}
