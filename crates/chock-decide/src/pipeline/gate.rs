//! The pipeline as the network broker's one gate: every outbound act of a call decided, asked and
//! logged the way its command was.

use crate::{Gate, GateAnswer, GateFuture};
use chock_policy::Action;

use super::Pipeline;

/// The pipeline as the network broker's [`Gate`] for one call: fetch_url's URL and redirects,
/// web_search, a command's connections through its egress proxy. Nobody answering is a refusal.
#[derive(Debug, Clone)]
pub struct PipelineGate {
    pub(super) pipeline: Pipeline,
    pub(super) call_id: String,
}

impl Gate for PipelineGate {
    fn decide<'a>(&'a self, action: &'a Action, detail: &'a str) -> GateFuture<'a> {
        Box::pin(async move {
            match self
                .pipeline
                .settle(Some(&self.call_id), action, detail)
                .await
            {
                Ok(settled) => match settled.refusal() {
                    None => GateAnswer::Allow {
                        scope: settled.scope(),
                        decided_by: settled.decided_by(),
                    },
                    Some(refusal) => GateAnswer::refuse(refusal),
                },
                Err(err) => {
                    GateAnswer::refuse(format!("refused: the decision could not be logged: {err}"))
                }
            }
        })
    }
}
