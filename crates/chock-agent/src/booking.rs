//! One model reply booked: priced from the session's table, charged to the session's budget, and
//! recorded as its `model.response` line — the same for a turn of the agent's loop and for an MCP
//! server's sampling request, so the two can never price, count or log a reply differently.

use chock_log::{Log, LogError};
use chock_protocol::log::{ModelResponse, Usage};
use chock_provider::{PriceTable, Response, StopReason};
use serde_json::Value;

use crate::budget::Budget;

/// What booking a reply found.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Booked {
    /// Its price (None: the model has no price).
    pub(crate) cost: Option<f64>,
    /// Why the reply stopped, as the provider named it.
    pub(crate) stop_reason: String,
}

/// Prices `response` (a reply to a request for model `asked`), charges it to `budget` and writes
/// its `model.response` line for `turn` (0: not a turn of the loop).
pub(crate) fn book_reply(
    log: &Log,
    prices: &PriceTable,
    budget: &Budget,
    turn: u32,
    asked: &str,
    response: &Response,
) -> Result<Booked, LogError> {
    let usage = &response.usage;
    let cost = if *usage == chock_provider::Usage::default() {
        // No tokens (the offline player) cost nothing, whatever the model's name.
        Some(0.0)
    } else {
        prices
            .cost(&response.model, usage)
            .usd()
            .or_else(|| prices.cost(asked, usage).usd())
    };
    budget.charge(
        usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens,
        usage.output_tokens,
        cost,
    );
    let stop_reason = match &response.stop_reason {
        StopReason::Other(s) => s.clone(),
        other => serde_json::to_value(other)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
    };
    log.record(
        None,
        ModelResponse {
            turn,
            model: response.model.clone(),
            id: response.id.clone(),
            usage: Usage {
                input_tokens: usage.input_tokens,
                output_tokens: usage.output_tokens,
                cache_read_tokens: usage.cache_read_tokens,
                cache_write_tokens: usage.cache_write_tokens,
            },
            cost_usd: cost,
            stop_reason: stop_reason.clone(),
            content: serde_json::to_value(&response.content).unwrap_or(Value::Null),
        },
    )?;
    Ok(Booked { cost, stop_reason })
}
