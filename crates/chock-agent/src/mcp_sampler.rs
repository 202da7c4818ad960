//! A server's sampling request as a model call of the session: the same provider and model, the
//! same `model.request`/`model.response` events with the same price table, so the session's cost
//! (and any budget kept from it) counts it like the agent's own calls. chock-mcp has already
//! decided `mcp.<server>.sampling` and logged the prompt before this is called.

use std::sync::Arc;

use chock_log::Log;
use chock_mcp::{SampleFuture, SampleReply, SampleRequest, Sampler};
use chock_protocol::log::ModelRequest;
use chock_provider::{Block, Message, PriceTable, Provider, Request, Role};

/// Calls the session's model for MCP servers.
pub struct ModelSampler {
    /// The session's provider.
    pub provider: Arc<dyn Provider>,
    /// The model.
    pub model: String,
    /// The session's price table.
    pub prices: PriceTable,
    /// The session's log.
    pub log: Log,
    /// The session's budget: a sampling request is admitted and charged like the agent's own
    /// model calls (refused, with nothing sent, when it would not fit).
    pub budget: crate::budget::Budget,
}

impl std::fmt::Debug for ModelSampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelSampler")
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

impl ModelSampler {
    async fn call(&self, request: SampleRequest) -> Result<SampleReply, String> {
        let messages: Vec<Message> = request
            .messages
            .iter()
            .map(|(role, text)| Message {
                role: if role == "assistant" {
                    Role::Assistant
                } else {
                    Role::User
                },
                content: vec![Block::Text { text: text.clone() }],
            })
            .collect();
        let mut req = Request {
            model: self.model.clone(),
            system: request.system.clone(),
            messages,
            max_tokens: request.max_tokens.clamp(1, 8192),
            ..Request::default()
        };
        let price = self
            .prices
            .lookup(&self.model)
            .map(|p| crate::budget::TokenPrice {
                input: p.input / 1e6,
                output: p.output / 1e6,
            });
        // Four bytes a token: a lower bound of the input, as for the agent's own calls.
        let size = request.system.as_deref().map_or(0, str::len)
            + request.messages.iter().map(|(_, t)| t.len()).sum::<usize>();
        let admitted = self
            .budget
            .admit(&self.model, (size / 4) as u64, req.max_tokens, price)
            .map_err(|e| format!("the session's budget refuses this sampling request: {e}"))?;
        req.max_tokens = admitted.max_output_tokens;
        // Turn 0: not a turn of the loop; the events say which server asked in `new_message`.
        self.log
            .record(
                None,
                ModelRequest {
                    turn: 0,
                    provider: self.provider.name().to_string(),
                    model: req.model.clone(),
                    messages: req.messages.len(),
                    new_message: Some(serde_json::json!({"mcp_sampling": request.server})),
                },
            )
            .map_err(|e| e.to_string())?;
        let response = self
            .provider
            .stream(&req, &mut |_| {})
            .await
            .map_err(|e| e.to_string())?;
        let booked = crate::booking::book_reply(
            &self.log,
            &self.prices,
            &self.budget,
            0,
            &req.model,
            &response,
        )
        .map_err(|e| e.to_string())?;
        let text: String = response
            .content
            .iter()
            .filter_map(|b| match b {
                Block::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("");
        let stop_reason = booked.stop_reason;
        Ok(SampleReply {
            text,
            model: response.model,
            stop_reason: if stop_reason == "max_tokens" {
                "maxTokens".into()
            } else {
                "endTurn".into()
            },
        })
    }
}

impl Sampler for ModelSampler {
    fn sample(&self, request: SampleRequest) -> SampleFuture<'_> {
        Box::pin(self.call(request))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chock_protocol::log::BudgetAmount;

    fn sampler(dir: &std::path::Path, budget: crate::budget::Budget) -> ModelSampler {
        ModelSampler {
            provider: Arc::new(chock_provider::Player::demo()),
            model: "chock-demo".into(),
            prices: PriceTable::default(),
            log: Log::create(dir, chock_log::SessionHeader::default()).unwrap(),
            budget,
        }
    }

    fn request() -> SampleRequest {
        SampleRequest {
            server: "hostile".into(),
            system: None,
            messages: vec![("user".into(), "six times seven? ".repeat(20))],
            max_tokens: 100,
        }
    }

    #[tokio::test]
    async fn a_sampling_request_the_budget_cannot_hold_is_refused_before_the_model_is_asked() {
        let dir = tempfile::tempdir().unwrap();
        let budget = crate::budget::Budget::new(BudgetAmount {
            usd: None,
            tokens: Some(10),
        });
        let s = sampler(dir.path(), budget);
        let refused = s.sample(request()).await.unwrap_err();
        assert!(refused.contains("budget"), "{refused}");
        let log_dir = s.log.dir().to_path_buf();
        drop(s);
        let events = chock_log::read_events(&log_dir).unwrap();
        assert!(
            !events.iter().any(|e| e.kind.to_string() == "model.request"),
            "nothing was sent to the model"
        );
    }
}
