//! fetch_url and web_search: the network reached from the host, through chock-broker, never from the
//! sandbox. The broker decides `net.fetch.<reversed host>` (for the URL and every redirect) and
//! `web.search` by asking its [`Gate`]; here that gate is the agent's
//! [`CallGate`](crate::gate::CallGate), so the table, a person or a reviewer answer exactly as for
//! any other act, and each decision is logged (as a `decision` event under the tool call's id)
//! before the broker connects.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use chock_broker::{Broker, BrokerConfig};
use chock_decide::{AllowScope, Gate, GateAnswer, GateFuture};
use chock_log::LogError;
use chock_policy::{Action, Decision};
use schemars::JsonSchema;
use serde::Deserialize;

use super::ToolOutput;
use crate::gate::{Decider, Settled};

/// Most search hits asked for.
const MAX_HITS: usize = 10;

/// fetch_url's input.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct FetchInput {
    /// An http or https URL.
    pub url: String,
}

/// web_search's input.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct SearchInput {
    /// What to search for.
    pub query: String,
    /// How many hits (at most 10; default 10).
    #[serde(default)]
    #[schemars(range(min = 1, max = 10))]
    pub max_results: Option<usize>,
}

/// The gate of one network tool call: settles each act through the agent's decider and writes the
/// `decision` event before answering the broker.
struct LoggingGate {
    decider: Decider,
    call_id: String,
    decided: AtomicBool,
}

impl Gate for LoggingGate {
    fn decide<'a>(&'a self, action: &'a Action, detail: &'a str) -> GateFuture<'a> {
        Box::pin(async move {
            // The decision seam logs the `decision` before it returns.
            let settled = match self
                .decider
                .settle(Some(&self.call_id), action, detail)
                .await
            {
                Ok(settled) => settled,
                Err(err) => {
                    return GateAnswer::refuse(format!(
                        "refused: the decision could not be logged: {err}"
                    ));
                }
            };
            self.decided.store(true, Ordering::SeqCst);
            if settled.allowed {
                let scope = if settled.exact_rule {
                    AllowScope::ExactHost
                } else {
                    AllowScope::Pattern
                };
                GateAnswer::Allow {
                    scope,
                    decided_by: settled.decided_by,
                }
            } else {
                GateAnswer::refuse(settled.refusal)
            }
        })
    }
}

/// Runs `work` on a broker whose gate settles each act through `decider` under `call_id` (the door
/// fetch_url, web_search and a plugin's fetch share); a call refused before any act was named still
/// gets its one `decision`.
pub(crate) async fn with_broker<T>(
    decider: &Decider,
    config: &BrokerConfig,
    call_id: &str,
    work: impl AsyncFnOnce(Broker) -> Result<T, chock_broker::BrokerError>,
) -> Result<Result<T, String>, LogError> {
    let gate = Arc::new(LoggingGate {
        decider: decider.clone(),
        call_id: call_id.to_string(),
        decided: AtomicBool::new(false),
    });
    let outcome = match Broker::new(gate.clone(), decider.log.clone(), config.clone()) {
        Ok(broker) => work(broker.for_call(call_id))
            .await
            .map_err(|e| e.to_string()),
        Err(err) => Err(err.to_string()),
    };
    if !gate.decided.load(Ordering::SeqCst) {
        // Refused before any act could be named (a malformed URL, no backend): still one decision per call.
        let reason = outcome.as_ref().err().cloned().unwrap_or_default();
        decider.decide_without_table(
            call_id,
            None,
            &Settled {
                allowed: false,
                decision: Decision::Deny,
                decided_by: format!("not decided: {reason}"),
                exact_rule: false,
                refusal: reason,
            },
        )?;
    }
    Ok(outcome)
}

/// fetch_url: the page as readable, redacted text.
pub async fn fetch_url(
    decider: &Decider,
    config: &BrokerConfig,
    call_id: &str,
    input: &FetchInput,
) -> Result<ToolOutput, LogError> {
    let url = input.url.clone();
    let outcome = with_broker(decider, config, call_id, async move |broker: Broker| {
        broker.fetch_url(&url).await
    })
    .await?;
    Ok(match outcome {
        Ok(page) => {
            let mut text = format!("{} (HTTP {}", page.final_url, page.status);
            if let Some(kind) = &page.content_type {
                text.push_str(&format!(", {kind}"));
            }
            text.push_str(")\n");
            if !page.redirects.is_empty() {
                text.push_str(&format!("redirected via {}\n", page.redirects.join(" → ")));
            }
            text.push('\n');
            text.push_str(&page.text);
            if page.truncated {
                text.push_str("\n… [cut at the size limit]");
            }
            if page.status >= 400 {
                ToolOutput::error(text)
            } else {
                ToolOutput::ok(text)
            }
        }
        Err(reason) => ToolOutput::error(format!("fetch_url {}: {reason}", input.url)),
    })
}

/// web_search: the hits as title, URL and snippet.
pub async fn web_search(
    decider: &Decider,
    config: &BrokerConfig,
    call_id: &str,
    input: &SearchInput,
) -> Result<ToolOutput, LogError> {
    let query = input.query.clone();
    let max = input.max_results.unwrap_or(MAX_HITS).clamp(1, MAX_HITS);
    let outcome = with_broker(decider, config, call_id, async move |broker: Broker| {
        broker.web_search(&query, max).await
    })
    .await?;
    Ok(match outcome {
        Ok(results) => {
            let mut text = format!(
                "{} results for {:?} ({})\n",
                results.hits.len(),
                results.query,
                results.backend
            );
            for (i, hit) in results.hits.iter().enumerate() {
                text.push_str(&format!(
                    "\n{}. {}\n   {}\n   {}\n",
                    i + 1,
                    hit.title,
                    hit.url,
                    hit.snippet
                ));
            }
            ToolOutput::ok(text)
        }
        Err(reason) => ToolOutput::error(format!("web_search: {reason}")),
    })
}
