//! What a reply cost: a price table in code, overridable from configuration.
//!
//! Prices are public list prices in US dollars per million tokens (standard tier, no batch discount, no
//! long-context surcharge). A model the table does not know has an *unknown* cost, never zero: a zero would
//! read as "free" in a session summary.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::types::Usage;

/// Dollars per million tokens for one model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Price {
    /// Uncached input.
    pub input: f64,
    /// Output (thinking and reasoning included).
    pub output: f64,
    /// Input read from the prompt cache.
    pub cache_read: f64,
    /// Input written to the prompt cache (Anthropic 5-minute writes; OpenAI charges none beyond input).
    pub cache_write: f64,
}

impl Price {
    const fn anthropic(input: f64, output: f64) -> Self {
        // Anthropic: cache reads cost 0.1× input, 5-minute cache writes 1.25× input.
        Price {
            input,
            output,
            cache_read: input * 0.1,
            cache_write: input * 1.25,
        }
    }

    const fn openai(input: f64, output: f64, cached: f64) -> Self {
        // OpenAI caches automatically: no write charge, cached input at its own rate.
        Price {
            input,
            output,
            cache_read: cached,
            cache_write: input,
        }
    }

    /// The cost of `usage` at this price.
    pub fn cost(&self, usage: &Usage) -> f64 {
        let per =
            |tokens: u64, dollars_per_mtok: f64| tokens as f64 * dollars_per_mtok / 1_000_000.0;
        per(usage.input_tokens, self.input)
            + per(usage.output_tokens, self.output)
            + per(usage.cache_read_tokens, self.cache_read)
            + per(usage.cache_write_tokens, self.cache_write)
    }
}

/// The cost of one or more replies.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "cost", content = "usd", rename_all = "snake_case")]
pub enum Cost {
    /// Known, in US dollars.
    Known(f64),
    /// The model is not in the price table.
    Unknown,
}

impl Cost {
    /// Sums two costs; anything unknown makes the sum unknown (the summary then says so).
    #[must_use]
    pub fn plus(self, other: Cost) -> Cost {
        match (self, other) {
            (Cost::Known(a), Cost::Known(b)) => Cost::Known(a + b),
            _ => Cost::Unknown,
        }
    }

    /// The dollars, if known.
    pub fn usd(self) -> Option<f64> {
        match self {
            Cost::Known(usd) => Some(usd),
            Cost::Unknown => None,
        }
    }
}

impl fmt::Display for Cost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cost::Known(usd) => write!(f, "${usd:.4}"),
            Cost::Unknown => f.write_str("unknown (model not in the price table)"),
        }
    }
}

/// Built-in list prices ($/Mtok). Keys are model ids; a key also matches the same id with a date suffix
/// (`claude-sonnet-4-20250514`, `gpt-5-2025-08-07`) but never a longer name (`gpt-5` does not price
/// `gpt-5.2` or `gpt-5-mini`), so a new model is unknown rather than mispriced.
const BUILT_IN: &[(&str, Price)] = &[
    // Anthropic Claude 4.x
    ("claude-opus-4", Price::anthropic(15.0, 75.0)),
    ("claude-opus-4-0", Price::anthropic(15.0, 75.0)),
    ("claude-opus-4-1", Price::anthropic(15.0, 75.0)),
    ("claude-opus-4-5", Price::anthropic(5.0, 25.0)),
    ("claude-sonnet-4", Price::anthropic(3.0, 15.0)),
    ("claude-sonnet-4-0", Price::anthropic(3.0, 15.0)),
    ("claude-sonnet-4-5", Price::anthropic(3.0, 15.0)),
    ("claude-haiku-4-5", Price::anthropic(1.0, 5.0)),
    ("claude-3-7-sonnet", Price::anthropic(3.0, 15.0)),
    ("claude-3-5-haiku", Price::anthropic(0.8, 4.0)),
    // OpenAI GPT-5 family
    ("gpt-5", Price::openai(1.25, 10.0, 0.125)),
    ("gpt-5-codex", Price::openai(1.25, 10.0, 0.125)),
    ("gpt-5.1", Price::openai(1.25, 10.0, 0.125)),
    ("gpt-5.1-codex", Price::openai(1.25, 10.0, 0.125)),
    ("gpt-5-mini", Price::openai(0.25, 2.0, 0.025)),
    ("gpt-5-nano", Price::openai(0.05, 0.40, 0.005)),
    // OpenAI GPT-4.1 and 4o
    ("gpt-4.1", Price::openai(2.0, 8.0, 0.50)),
    ("gpt-4.1-mini", Price::openai(0.40, 1.60, 0.10)),
    ("gpt-4.1-nano", Price::openai(0.10, 0.40, 0.025)),
    ("gpt-4o", Price::openai(2.50, 10.0, 1.25)),
    ("gpt-4o-mini", Price::openai(0.15, 0.60, 0.075)),
    // OpenAI o-series
    ("o1", Price::openai(15.0, 60.0, 7.50)),
    ("o3", Price::openai(2.0, 8.0, 0.50)),
    ("o3-mini", Price::openai(1.10, 4.40, 0.55)),
    ("o3-pro", Price::openai(20.0, 80.0, 20.0)),
    ("o4-mini", Price::openai(1.10, 4.40, 0.275)),
    // The offline player's default model names: a recorded model costs nothing.
    ("chock-demo", Price::openai(0.0, 0.0, 0.0)),
    ("offline", Price::openai(0.0, 0.0, 0.0)),
];

/// A price table: the built-in list plus overrides (from `config.toml`), overrides winning.
#[derive(Debug, Clone, PartialEq)]
pub struct PriceTable {
    prices: BTreeMap<String, Price>,
}

impl Default for PriceTable {
    fn default() -> Self {
        Self::built_in()
    }
}

impl PriceTable {
    /// The built-in list prices.
    pub fn built_in() -> Self {
        Self {
            prices: BUILT_IN
                .iter()
                .map(|(name, price)| ((*name).to_owned(), *price))
                .collect(),
        }
    }

    /// The built-in table with `overrides` added or replacing entries (same matching rules).
    pub fn with_overrides(overrides: impl IntoIterator<Item = (String, Price)>) -> Self {
        let mut table = Self::built_in();
        table.prices.extend(overrides);
        table
    }

    /// The price for `model`: an exact entry, else an entry of which `model` is the same id plus a date
    /// suffix (`-20250514` or `-2025-08-07`).
    pub fn lookup(&self, model: &str) -> Option<Price> {
        if let Some(price) = self.prices.get(model) {
            return Some(*price);
        }
        let base = strip_date_suffix(model)?;
        self.prices.get(base).copied()
    }

    /// What `usage` on `model` cost.
    pub fn cost(&self, model: &str, usage: &Usage) -> Cost {
        match self.lookup(model) {
            Some(price) => Cost::Known(price.cost(usage)),
            None => Cost::Unknown,
        }
    }
}

/// `model` without a trailing `-YYYYMMDD` or `-YYYY-MM-DD`, if it has one.
fn strip_date_suffix(model: &str) -> Option<&str> {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if let Some((base, date)) = model.rsplit_once('-')
        && date.len() == 8
        && digits(date)
    {
        return Some(base);
    }
    // -YYYY-MM-DD: three trailing dash-separated numeric parts.
    let mut parts = model.rsplitn(4, '-');
    let (day, month, year, base) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    (day.len() == 2
        && month.len() == 2
        && year.len() == 4
        && digits(day)
        && digits(month)
        && digits(year))
    .then_some(base)
}

/// What `usage` on `model` cost at built-in list prices.
pub fn price(model: &str, usage: &Usage) -> Cost {
    PriceTable::built_in().cost(model, usage)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(input: u64, output: u64, read: u64, write: u64) -> Usage {
        Usage {
            input_tokens: input,
            output_tokens: output,
            cache_read_tokens: read,
            cache_write_tokens: write,
            reasoning_tokens: 0,
        }
    }

    #[test]
    fn sonnet_with_cache_is_priced_per_token_class() {
        // 1M uncached in ($3) + 100k out ($1.5) + 1M cache read ($0.30) + 1M cache write ($3.75).
        let cost = price(
            "claude-sonnet-4-20250514",
            &usage(1_000_000, 100_000, 1_000_000, 1_000_000),
        );
        let usd = cost.usd().expect("sonnet is in the table");
        assert!((usd - 8.55).abs() < 1e-9, "{usd}");
    }

    #[test]
    fn date_suffixes_match_but_longer_names_do_not() {
        let table = PriceTable::built_in();
        assert_eq!(table.lookup("gpt-5-2025-08-07"), table.lookup("gpt-5"));
        assert_eq!(
            table.lookup("claude-opus-4-1-20250805"),
            table.lookup("claude-opus-4-1")
        );
        assert_ne!(
            table.lookup("claude-opus-4-5-20251101"),
            table.lookup("claude-opus-4")
        );
        assert_eq!(table.lookup("gpt-5.9"), None);
        assert_eq!(table.lookup("gpt-5-turbo-ultra"), None);
        assert_eq!(price("llama3.1:8b", &usage(10, 10, 0, 0)), Cost::Unknown);
    }

    #[test]
    fn overrides_replace_and_add() {
        let local = Price {
            input: 0.0,
            output: 0.0,
            cache_read: 0.0,
            cache_write: 0.0,
        };
        let cheap = Price {
            input: 1.0,
            output: 1.0,
            cache_read: 1.0,
            cache_write: 1.0,
        };
        let table = PriceTable::with_overrides([
            ("llama3.1:8b".to_owned(), local),
            ("gpt-5".to_owned(), cheap),
        ]);
        assert_eq!(
            table.cost("llama3.1:8b", &usage(10, 10, 0, 0)),
            Cost::Known(0.0)
        );
        assert_eq!(
            table.cost("gpt-5", &usage(1_000_000, 0, 0, 0)),
            Cost::Known(1.0)
        );
    }

    #[test]
    fn unknown_poisons_a_sum() {
        assert_eq!(Cost::Known(1.0).plus(Cost::Known(2.0)), Cost::Known(3.0));
        assert_eq!(Cost::Known(1.0).plus(Cost::Unknown), Cost::Unknown);
    }
}
