//! A server's sampling request as a model call of the session: the same provider and model, the
//! same `model.request`/`model.response` events with the same price table, so the session's cost
//! (and any budget kept from it) counts it like the agent's own calls. chock-mcp has already
//! decided `mcp.<server>.sampling` and logged the prompt before this is called.

use chock_mcp::{SampleFuture, SampleReply, SampleRequest, Sampler};
use chock_provider::{Block, Message, Request, Role};

use crate::booking::{OffTurn, OffTurnError};

/// Calls the session's model for MCP servers: a sampling request is admitted and charged like the
/// agent's own model calls (refused, with nothing sent, when it would not fit).
#[derive(Debug)]
pub struct ModelSampler {
    /// The session's model, price table, log and budget.
    pub session: OffTurn,
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
            system: request.system.clone(),
            messages,
            max_tokens: request.max_tokens.clamp(1, 8192),
            ..Request::default()
        };
        let asker = serde_json::json!({"mcp_sampling": request.server});
        let (response, booked) = self.session.call(req, asker).await.map_err(|e| match e {
            OffTurnError::Budget(e) => {
                format!("the session's budget refuses this sampling request: {e}")
            }
            other => other.to_string(),
        })?;
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
            stop_reason: if stop_reason == chock_protocol::log::StopReason::MaxTokens {
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
            session: OffTurn {
                provider: std::sync::Arc::new(chock_provider::Player::demo()),
                model: "chock-demo".into(),
                prices: chock_provider::PriceTable::default(),
                log: chock_log::Log::create(dir, chock_log::SessionHeader::default()).unwrap(),
                budget,
                tally: crate::booking::OffTurnTally::default(),
            },
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
        let log_dir = s.session.log.dir().to_path_buf();
        drop(s);
        let events = chock_log::read_events(&log_dir).unwrap();
        assert!(
            !events.iter().any(|e| e.kind.to_string() == "model.request"),
            "nothing was sent to the model"
        );
    }
}
