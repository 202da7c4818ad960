//! A server's sampling request as a model call of the session: the same provider and model, the
//! same `model.request`/`model.response` events with the same price table, so the session's cost
//! (and any budget kept from it) counts it like the agent's own calls. chock-mcp has already
//! decided `mcp.<server>.sampling` and logged the prompt before this is called.

use std::sync::Arc;

use chock_log::Log;
use chock_mcp::{SampleFuture, SampleReply, SampleRequest, Sampler};
use chock_protocol::log::{ModelRequest, ModelResponse, Usage};
use chock_provider::{Block, Message, PriceTable, Provider, Request, Role};
use serde_json::Value;

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
        let req = Request {
            model: self.model.clone(),
            system: request.system.clone(),
            messages,
            max_tokens: request.max_tokens.clamp(1, 8192),
            ..Request::default()
        };
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
        let cost = if response.usage == chock_provider::Usage::default() {
            Some(0.0)
        } else {
            self.prices
                .cost(&response.model, &response.usage)
                .usd()
                .or_else(|| self.prices.cost(&req.model, &response.usage).usd())
        };
        let text: String = response
            .content
            .iter()
            .filter_map(|b| match b {
                Block::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("");
        let stop_reason = serde_json::to_value(&response.stop_reason)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        self.log
            .record(
                None,
                ModelResponse {
                    turn: 0,
                    model: response.model.clone(),
                    id: response.id.clone(),
                    usage: Usage {
                        input_tokens: response.usage.input_tokens,
                        output_tokens: response.usage.output_tokens,
                        cache_read_tokens: response.usage.cache_read_tokens,
                        cache_write_tokens: response.usage.cache_write_tokens,
                    },
                    cost_usd: cost,
                    stop_reason: stop_reason.clone(),
                    content: serde_json::to_value(&response.content).unwrap_or(Value::Null),
                },
            )
            .map_err(|e| e.to_string())?;
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
