//! The session's budget: the one accounting point every model call of the session goes through.
//!
//! A session may have a limit in dollars and/or tokens (`[budget]` in chock.toml, `--budget`, or
//! the slice a parent reserved for it). Before a model call, [`Budget::admit`] checks that the call
//! would fit what is left — its input is at least what the previous call carried (the conversation
//! only grows), and its output is capped to what is left — and refuses it otherwise; after the
//! call, [`Budget::charge`] books what it really cost. Spawning a child reserves a slice of what is
//! left ([`Budget::reserve`]); when the child ends, what it spent is booked and the rest returns
//! ([`Budget::settle`]). A resumed session rebuilds all of it from its log ([`Budget::from_log`]), so
//! a slice promised to a child whose end was never recorded stays promised.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use chock_log::Event;
use chock_protocol::EventData;
use chock_protocol::live::ChildCost;
use chock_protocol::log::{BudgetAmount, ChildEnd, Note};

/// Why a model call or a slice was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BudgetError {
    /// The call would exceed what is left.
    #[error(
        "the budget is spent: {spent} of {limit} used{reserved}, and the next model call needs at least {needs}"
    )]
    Exhausted {
        /// Spent so far, in words.
        spent: String,
        /// The limit, in words.
        limit: String,
        /// Reserved for running children, in words (empty when nothing is).
        reserved: String,
        /// What the next call needs at least, in words.
        needs: String,
    },
    /// A dollar limit is set but the model has no price: the budget cannot be kept.
    #[error(
        "the budget is in dollars but model `{model}` has no price: add it under [prices] in config.toml, or give a token budget"
    )]
    Unpriced {
        /// The model.
        model: String,
    },
    /// A child asked for more than is left.
    #[error("a slice of {asked} was asked for, but only {left} is left to hand out")]
    SliceTooLarge {
        /// The slice asked for, in words.
        asked: String,
        /// What is left, in words.
        left: String,
    },
}

/// What a model call costs per token, in dollars (from the price table).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenPrice {
    /// Dollars per input token.
    pub input: f64,
    /// Dollars per output token.
    pub output: f64,
}

impl TokenPrice {
    /// `model`'s price in `prices` (per million tokens there), per token; None: unknown.
    pub fn of(prices: &chock_provider::PriceTable, model: &str) -> Option<TokenPrice> {
        prices.lookup(model).map(|p| TokenPrice {
            input: p.input / 1e6,
            output: p.output / 1e6,
        })
    }
}

/// A lower bound of a request's input tokens from its size in bytes: roughly four bytes a token,
/// which the last call's real input usually beats ([`Budget::admit`] takes the larger).
pub fn input_at_least(bytes: usize) -> u64 {
    (bytes / 4) as u64
}

/// The sum of two prices; unknown once either is.
pub fn add_cost(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a + b),
        _ => None,
    }
}

/// What the next model call is allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admission {
    /// The largest reply it may ask for (`max_tokens`), within what is left.
    pub max_output_tokens: u32,
}

#[derive(Debug, Default)]
struct State {
    limit: BudgetAmount,
    own_usd: f64,
    own_tokens: u64,
    /// The input tokens of the last call: the next carries at least as much.
    last_input: u64,
    /// Slices promised to children still running (or never seen to end), by child id.
    reserved: BTreeMap<String, BudgetAmount>,
    children_usd: f64,
    children_tokens: u64,
    /// A call of its own, or an ended child, had no price: the dollars spent are unknown (a
    /// `None`, never a sum that left the unpriced part out).
    unpriced: bool,
    /// Each ended child's cost, in the order they ended.
    ended: Vec<ChildCost>,
}

/// The session's budget. Cheap to clone: every clone is the same account.
#[derive(Debug, Clone, Default)]
pub struct Budget {
    state: Arc<Mutex<State>>,
}

fn words(amount: BudgetAmount) -> String {
    match (amount.usd, amount.tokens) {
        (Some(usd), Some(tokens)) => format!("${usd:.4} and {tokens} tokens"),
        (Some(usd), None) => format!("${usd:.4}"),
        (None, Some(tokens)) => format!("{tokens} tokens"),
        (None, None) => "nothing".to_string(),
    }
}

impl Budget {
    /// A budget of `limit` (no field set: unlimited, but still counting).
    pub fn new(limit: BudgetAmount) -> Self {
        let budget = Self::default();
        budget.lock().limit = limit;
        budget
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Lowers the limit to `limit` where that is stricter (a field None leaves it as it is).
    pub fn restrict_limit(&self, limit: BudgetAmount) {
        let mut s = self.lock();
        s.limit = stricter(s.limit, limit);
    }

    /// The limit (both fields None: no budget).
    pub fn limit(&self) -> BudgetAmount {
        self.lock().limit
    }

    /// Whether a limit is set.
    pub fn is_limited(&self) -> bool {
        let limit = self.limit();
        limit.usd.is_some() || limit.tokens.is_some()
    }

    /// Spent so far: the session's own calls and its ended children's (dollars unknown once any
    /// of them had no price).
    pub fn spent(&self) -> BudgetAmount {
        let s = self.lock();
        BudgetAmount {
            usd: (!s.unpriced).then_some(s.own_usd + s.children_usd),
            tokens: Some(s.own_tokens + s.children_tokens),
        }
    }

    /// What is left to spend or hand out: the limit less what was spent and what is reserved for
    /// children (None per field without a limit).
    pub fn left(&self) -> BudgetAmount {
        let s = self.lock();
        left_of(&s)
    }

    /// Checks the next model call against what is left. `input_at_least` is a lower bound of the
    /// call's input tokens (the request's size); `price` is the model's (None: unknown).
    pub fn admit(
        &self,
        model: &str,
        input_at_least: u64,
        max_output: u32,
        price: Option<TokenPrice>,
    ) -> Result<Admission, BudgetError> {
        let s = self.lock();
        let left = left_of(&s);
        let input = input_at_least.max(s.last_input);
        let mut max_output = u64::from(max_output);
        let exhausted = |needs: String| BudgetError::Exhausted {
            spent: words(BudgetAmount {
                usd: s.limit.usd.map(|_| s.own_usd + s.children_usd),
                tokens: s.limit.tokens.map(|_| s.own_tokens + s.children_tokens),
            }),
            limit: words(s.limit),
            reserved: if s.reserved.is_empty() {
                String::new()
            } else {
                format!(
                    ", {} reserved for {} running child(ren)",
                    words(sum(s.reserved.values())),
                    s.reserved.len()
                )
            },
            needs,
        };
        if let Some(tokens) = left.tokens {
            // At least the input and one token of reply.
            if tokens < input + 1 {
                return Err(exhausted(format!("{} tokens", input + 1)));
            }
            max_output = max_output.min(tokens - input);
        }
        if let Some(usd) = left.usd {
            let Some(price) = price else {
                return Err(BudgetError::Unpriced {
                    model: model.to_string(),
                });
            };
            let input_cost = input as f64 * price.input;
            let one = input_cost + price.output;
            if usd < one {
                return Err(exhausted(format!("${one:.4}")));
            }
            if price.output > 0.0 {
                let affordable = ((usd - input_cost) / price.output).floor();
                if affordable < max_output as f64 {
                    // Floored, at least 1 (one token of reply fits, checked above) and below
                    // `max_output`: the cast neither truncates nor loses a sign.
                    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                    {
                        max_output = affordable as u64;
                    }
                }
            }
        }
        Ok(Admission {
            max_output_tokens: u32::try_from(max_output.max(1)).unwrap_or(u32::MAX),
        })
    }

    /// Books one model call of a turn: its input tokens (cache reads and writes included), output
    /// tokens and price (None: unknown, booked as nothing against a limit — [`Budget::admit`]
    /// refuses a dollar budget an unpriced model — and what was spent is then unknown in dollars).
    /// Its input is what the next call's admission assumes at least.
    pub fn charge(&self, input_tokens: u64, output_tokens: u64, usd: Option<f64>) {
        let mut s = self.lock();
        s.own_tokens += input_tokens + output_tokens;
        s.own_usd += usd.unwrap_or(0.0);
        s.unpriced |= usd.is_none();
        s.last_input = input_tokens;
    }

    /// Books one model call outside the turns (an MCP server's sampling, the reviewer): counted
    /// like a turn's, but its input, which has nothing to do with the conversation's, leaves the
    /// next turn's admission where the last turn put it.
    fn charge_aside(&self, input_tokens: u64, output_tokens: u64, usd: Option<f64>) {
        let mut s = self.lock();
        s.own_tokens += input_tokens + output_tokens;
        s.own_usd += usd.unwrap_or(0.0);
        s.unpriced |= usd.is_none();
    }

    /// Books the reply of a call of `turn`, as the log names it: a turn's
    /// ([`Budget::charge`]), or one outside the turns ([`chock_protocol::log::OFF_TURN`],
    /// `Budget::charge_aside`).
    pub fn book(&self, turn: u32, input_tokens: u64, output_tokens: u64, usd: Option<f64>) {
        if turn == chock_protocol::log::OFF_TURN {
            self.charge_aside(input_tokens, output_tokens, usd);
        } else {
            self.charge(input_tokens, output_tokens, usd);
        }
    }

    /// The slice a child gets when it asks for `asked` (a field None: half of what is left of it).
    /// A field this session has no limit of is the child's only if it asked for it.
    pub fn slice_for(&self, asked: BudgetAmount) -> Result<BudgetAmount, BudgetError> {
        let left = self.left();
        let field_f = |asked: Option<f64>, left: Option<f64>| match (asked, left) {
            (Some(a), Some(l)) if a > l => Err(()),
            (Some(a), _) => Ok(Some(a)),
            (None, Some(l)) => Ok(Some(l / 2.0)),
            (None, None) => Ok(None),
        };
        let field_t = |asked: Option<u64>, left: Option<u64>| match (asked, left) {
            (Some(a), Some(l)) if a > l => Err(()),
            (Some(a), _) => Ok(Some(a)),
            (None, Some(l)) => Ok(Some(l / 2)),
            (None, None) => Ok(None),
        };
        let too_large = || BudgetError::SliceTooLarge {
            asked: words(asked),
            left: words(left),
        };
        Ok(BudgetAmount {
            usd: field_f(asked.usd, left.usd).map_err(|()| too_large())?,
            tokens: field_t(asked.tokens, left.tokens).map_err(|()| too_large())?,
        })
    }

    /// Each ended child's cost, in the order they ended (the summary shows them).
    pub fn children(&self) -> Vec<ChildCost> {
        self.lock().ended.clone()
    }

    /// Reserves `slice` for the child `child` (from [`Budget::slice_for`]).
    pub fn reserve(&self, child: &str, slice: BudgetAmount) {
        self.lock().reserved.insert(child.to_string(), slice);
    }

    /// The child `child` ended having spent `spent`: its reservation is released and what it
    /// spent booked (never more than its slice is counted against a limit it had).
    pub fn settle(&self, child: &str, spent: BudgetAmount, ended: ChildEnd) {
        let mut s = self.lock();
        s.ended.push(ChildCost {
            session: child.to_string(),
            ended,
            cost_usd: spent.usd,
            tokens: spent.tokens.unwrap_or(0),
        });
        s.unpriced |= spent.usd.is_none();
        let slice = s.reserved.remove(child).unwrap_or_default();
        let cap_f = |spent: f64, cap: Option<f64>| cap.map_or(spent, |c| spent.min(c));
        let cap_t = |spent: u64, cap: Option<u64>| cap.map_or(spent, |c| spent.min(c));
        s.children_usd += cap_f(spent.usd.unwrap_or(0.0), slice.usd);
        s.children_tokens += cap_t(spent.tokens.unwrap_or(0), slice.tokens);
    }

    /// The budget as `events` (a session's whole log) leave it: the limit its `note {about:
    /// budget}` set (unless `limit` is given), its own calls' cost, each ended child's spend, and
    /// the slices of children whose end it never recorded, still reserved.
    pub fn from_log(events: &[Event], limit: Option<BudgetAmount>) -> Self {
        let budget = Budget::default();
        let mut logged_limit = BudgetAmount::default();
        for event in events {
            match event.payload() {
                Ok(EventData::Note(Note::Budget { limit })) => logged_limit = limit,
                Ok(EventData::ModelResponse(r)) => budget.book(
                    r.turn,
                    r.usage.input_tokens + r.usage.cache_read_tokens + r.usage.cache_write_tokens,
                    r.usage.output_tokens,
                    r.cost_usd,
                ),
                Ok(EventData::SessionSpawn(spawn)) => {
                    budget.reserve(&spawn.child, spawn.budget.unwrap_or_default());
                }
                Ok(EventData::AgentComplete(done)) => {
                    if let Some(child) = &done.child {
                        budget.settle(
                            child,
                            done.spent.unwrap_or_default(),
                            done.ended.unwrap_or(ChildEnd::Crashed),
                        );
                    }
                }
                _ => {}
            }
        }
        budget.lock().limit = limit.unwrap_or(logged_limit);
        budget
    }
}

fn sum<'a>(amounts: impl Iterator<Item = &'a BudgetAmount>) -> BudgetAmount {
    let mut total = BudgetAmount::default();
    for a in amounts {
        if let Some(usd) = a.usd {
            total.usd = Some(total.usd.unwrap_or(0.0) + usd);
        }
        if let Some(tokens) = a.tokens {
            total.tokens = Some(total.tokens.unwrap_or(0) + tokens);
        }
    }
    total
}

fn left_of(s: &State) -> BudgetAmount {
    let reserved = sum(s.reserved.values());
    BudgetAmount {
        usd: s.limit.usd.map(|limit| {
            (limit - s.own_usd - s.children_usd - reserved.usd.unwrap_or(0.0)).max(0.0)
        }),
        tokens: s.limit.tokens.map(|limit| {
            limit.saturating_sub(s.own_tokens + s.children_tokens + reserved.tokens.unwrap_or(0))
        }),
    }
}

/// What a session's log says it spent: its own model calls and what each of its children spent,
/// as recorded in `agent.complete` (a child still running, or whose end was never recorded, counts
/// its whole slice). The dollars are unknown (`None`) when any of those had no price.
pub fn spent_in_log(events: &[Event]) -> BudgetAmount {
    let budget = Budget::from_log(events, None);
    let s = budget.lock();
    let reserved = sum(s.reserved.values());
    BudgetAmount {
        usd: (!s.unpriced).then_some(s.own_usd + s.children_usd + reserved.usd.unwrap_or(0.0)),
        tokens: Some(s.own_tokens + s.children_tokens + reserved.tokens.unwrap_or(0)),
    }
}

/// The stricter of two amounts, field by field (None: no limit on that field).
pub fn stricter(a: BudgetAmount, b: BudgetAmount) -> BudgetAmount {
    BudgetAmount {
        usd: match (a.usd, b.usd) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        },
        tokens: match (a.tokens, b.tokens) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        },
    }
}

#[cfg(test)]
mod tests;
