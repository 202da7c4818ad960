//! The gate of one HTTP server's connections: its destination is put to a person once per session.
//!
//! rmcp's client opens several connections to one server (the POSTs, the server's GET event
//! stream, the closing DELETE), and each is decided by the broker's door as
//! `net.connect.<host>.<port>`. Settled one by one, a table that says `ask` would ask two or three
//! times for one server. Once a person (or a reviewer) allowed the destination, this server's
//! later connections to it are allowed without asking again — still each decided and logged
//! before it is opened, naming the earlier answer, with the same reach (an approval reaches public
//! addresses only). The table is read again each time: a row that now allows or denies the act
//! decides it as it would any act; only a question is not asked twice.

use std::collections::HashMap;

use chock_decide::{AllowScope, Gate, GateAnswer, GateFuture, Harness, Pipeline, PipelineGate};
use chock_policy::{Action, Decision};
use tokio::sync::Mutex;

/// The pipeline's gate for one server's connections, asking once per destination.
pub struct OnceGate {
    pipeline: Pipeline,
    inner: PipelineGate,
    call_id: String,
    /// Destinations a question allowed: the reach and who allowed it. Held while a question is
    /// out, so a second connection waits for the first answer instead of asking again.
    answered: Mutex<HashMap<String, (AllowScope, String)>>,
}

impl std::fmt::Debug for OnceGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnceGate")
            .field("call_id", &self.call_id)
            .finish_non_exhaustive()
    }
}

impl OnceGate {
    /// The gate of the connections made under `call_id` (`mcp-<server>`).
    pub fn new(pipeline: &Pipeline, call_id: &str) -> OnceGate {
        OnceGate {
            pipeline: pipeline.clone(),
            inner: pipeline.gate(call_id),
            call_id: call_id.to_string(),
            answered: Mutex::new(HashMap::new()),
        }
    }

    async fn decide_once(&self, action: &Action, detail: &str) -> GateAnswer {
        let asks = !matches!(
            self.pipeline.verdict(action).decision,
            Decision::Allow | Decision::Deny
        );
        if !asks {
            return self.inner.decide(action, detail).await;
        }
        let mut answered = self.answered.lock().await;
        if let Some((scope, by)) = answered.get(action.as_str()).cloned() {
            let why = format!("this server's destination was allowed earlier this session ({by})");
            return match self.pipeline.decide_without_table(
                Some(&self.call_id),
                Some(action),
                Harness::Allow { why: why.clone() },
            ) {
                Ok(_) => GateAnswer::Allow {
                    scope,
                    decided_by: why,
                },
                Err(e) => {
                    GateAnswer::refuse(format!("refused: the decision could not be logged: {e}"))
                }
            };
        }
        let answer = self.inner.decide(action, detail).await;
        if let GateAnswer::Allow { scope, decided_by } = &answer {
            answered.insert(action.as_str().to_string(), (*scope, decided_by.clone()));
        }
        answer
    }
}

impl Gate for OnceGate {
    fn decide<'a>(&'a self, action: &'a Action, detail: &'a str) -> GateFuture<'a> {
        Box::pin(self.decide_once(action, detail))
    }
}
