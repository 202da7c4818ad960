//! One model reply booked: priced from the session's table, charged to the session's budget, and
//! recorded as its `model.response` line — the same for a turn of the agent's loop and for the
//! calls outside its turns (an MCP server's sampling request, the reviewer model: [`OffTurn`]), so
//! none can price, count or log a reply differently, and a resumed session counts them all.

use std::sync::{Arc, Mutex, PoisonError};

use chock_log::{Log, LogError};
use chock_protocol::log::{ModelRequest, ModelResponse, OFF_TURN, StopReason as Stop, Usage};
use chock_provider::{PriceTable, Provider, ProviderError, Request, Response, StopReason};
use serde_json::Value;

use crate::budget::{Budget, BudgetError, TokenPrice, add_cost, input_at_least};

/// What booking a reply found.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Booked {
    /// Its price (None: the model has no price).
    pub(crate) cost: Option<f64>,
    /// Why the reply stopped, as the provider named it.
    pub(crate) stop_reason: Stop,
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
    budget.book(
        turn,
        usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens,
        usage.output_tokens,
        cost,
    );
    let stop_reason = match &response.stop_reason {
        StopReason::EndTurn => Stop::EndTurn,
        StopReason::ToolUse => Stop::ToolUse,
        StopReason::MaxTokens => Stop::MaxTokens,
        StopReason::StopSequence => Stop::StopSequence,
        StopReason::Refusal => Stop::Refusal,
        StopReason::PauseTurn => Stop::PauseTurn,
        StopReason::Other(s) => Stop::Other(s.clone()),
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

/// What a model call of the session outside the loop's turns is made with and charged to: the
/// session's provider and model, its price table, its log and its budget.
#[derive(Clone)]
pub struct OffTurn {
    /// The session's provider.
    pub provider: Arc<dyn Provider>,
    /// The model asked.
    pub model: String,
    /// The session's price table.
    pub prices: PriceTable,
    /// The session's log.
    pub log: Log,
    /// The session's budget.
    pub budget: Budget,
    /// Where what it spent waits for the runtime's summary.
    pub tally: OffTurnTally,
}

/// What the calls outside the turns spent since the session runtime last took it into its
/// summary (the turns' calls go there directly): the summary a person reads counts every call
/// the log and the budget count. Clones share one tally.
#[derive(Debug, Clone, Default)]
pub struct OffTurnTally(Arc<Mutex<Spent>>);

#[derive(Debug)]
struct Spent {
    input_tokens: u64,
    output_tokens: u64,
    /// The price of every call since the last take (None once one had none).
    cost_usd: Option<f64>,
}

impl Default for Spent {
    /// Nothing, which costs nothing.
    fn default() -> Self {
        Spent {
            input_tokens: 0,
            output_tokens: 0,
            cost_usd: Some(0.0),
        }
    }
}

impl OffTurnTally {
    fn add(&self, usage: &chock_provider::Usage, cost: Option<f64>) {
        let mut spent = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        spent.input_tokens += usage.input_tokens;
        spent.output_tokens += usage.output_tokens;
        spent.cost_usd = add_cost(spent.cost_usd, cost);
    }

    /// Adds what was spent since the last time to `summary`, and starts again from nothing.
    pub(crate) fn take_into(&self, summary: &mut chock_tools::events::Summary) {
        let spent = std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner));
        summary.input_tokens += spent.input_tokens;
        summary.output_tokens += spent.output_tokens;
        summary.cost_usd = add_cost(summary.cost_usd, spent.cost_usd);
    }
}

impl std::fmt::Debug for OffTurn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OffTurn")
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

/// Why a call outside the turns was not made, or was made and could not be booked.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OffTurnError {
    /// The budget cannot hold it: nothing was sent.
    #[error("{0}")]
    Budget(#[from] BudgetError),
    /// The log could not be written.
    #[error("{0}")]
    Log(#[from] LogError),
    /// The model gave no reply.
    #[error("{0}")]
    Provider(#[from] ProviderError),
}

impl OffTurn {
    /// Asks the session's model `request` as a call outside the loop's turns (turn 0): admitted
    /// by the budget (its output capped to what is left; nothing sent when nothing fits),
    /// recorded as a `model.request` whose `new_message` is `asker` (who asked:
    /// `{"mcp_sampling": SERVER}`, `{"reviewer": QUESTION}`), and its reply booked as a turn's is.
    pub(crate) async fn call(
        &self,
        mut request: Request,
        asker: Value,
    ) -> Result<(Response, Booked), OffTurnError> {
        request.model.clone_from(&self.model);
        let size = request.system.as_deref().map_or(0, str::len)
            + serde_json::to_string(&request.messages).map_or(0, |t| t.len());
        let admitted = self.budget.admit(
            &self.model,
            input_at_least(size),
            request.max_tokens,
            TokenPrice::of(&self.prices, &self.model),
        )?;
        request.max_tokens = admitted.max_output_tokens;
        self.log.record(
            None,
            ModelRequest {
                turn: OFF_TURN,
                provider: self.provider.name().to_string(),
                model: request.model.clone(),
                messages: request.messages.len(),
                new_message: Some(asker),
            },
        )?;
        let response = self.provider.stream(&request, &mut |_| {}).await?;
        let booked = book_reply(
            &self.log,
            &self.prices,
            &self.budget,
            OFF_TURN,
            &request.model,
            &response,
        )?;
        self.tally.add(&response.usage, booked.cost);
        Ok((response, booked))
    }
}
