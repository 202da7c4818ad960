//! The loop: turn after turn, ask the model, decide and run its tool calls, until it stops calling tools.
//!
//! One turn: `turn.start` → `model.request` → the reply streams (events out; provider retries become
//! `model.retry`) → `model.response` (tokens, cost, the reply's blocks) → for each tool call:
//! `tool.call` → (`approval.ask` → `approval.answer`) → `decision` → the act → `tool.result` →
//! `turn.end`. The decision is durable in the log before the act. The session ends with `session.end`
//! carrying the summary.

use std::sync::{Arc, Mutex};

use chock_log::{EventKind, Log, LogError};
use chock_provider::{
    Block, Message, PriceTable, Provider, Request, Role, StopReason, StreamEvent,
};
use serde_json::{Value, json};

use crate::events::{AgentEvent, EventSink, Summary};
use crate::gate::Decider;
use crate::host::Host;
use crate::prompt::{system_prompt, tool_specs};
use crate::tools::ToolOutput;
use crate::tools::dispatch::Toolbox;

/// How the loop is bounded and what it asks for.
#[derive(Debug, Clone)]
pub struct LoopLimits {
    /// The model to ask for.
    pub model: String,
    /// At most this many turns; then the session ends with `max_turns`.
    pub max_turns: u32,
    /// Output tokens per reply.
    pub max_tokens: u32,
}

impl Default for LoopLimits {
    fn default() -> Self {
        Self {
            model: String::new(),
            max_turns: 50,
            max_tokens: 16_000,
        }
    }
}

/// Why the loop failed (the session still ends with `session.end` when the log allows it).
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The log refused a write: nothing more may happen, since the decision must be logged before the act.
    #[error("the session log refused a write: {0}")]
    Log(#[from] LogError),
    /// The model could not be asked.
    #[error("model call failed: {0}")]
    Provider(#[from] chock_provider::ProviderError),
}

/// A session's agent: the host (log, policy, workspace, confined calls), a model, and the broker.
pub struct Agent {
    host: Arc<Host>,
    provider: Arc<dyn Provider>,
    decider: Decider,
    sink: Arc<dyn EventSink>,
    limits: LoopLimits,
    prices: PriceTable,
    toolbox: Toolbox,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

fn truncate_summary(text: &str) -> String {
    let first: Vec<&str> = text.lines().take(3).collect();
    let mut s = first.join(" | ");
    if s.chars().count() > 200 {
        s = s.chars().take(200).collect::<String>() + "…";
    }
    s
}

impl Agent {
    /// An agent over `host`, asking `provider`, deciding through `decider`, telling `sink`.
    pub fn new(
        host: Arc<Host>,
        provider: Arc<dyn Provider>,
        decider: Decider,
        sink: Arc<dyn EventSink>,
        limits: LoopLimits,
        prices: PriceTable,
    ) -> Self {
        let toolbox = Toolbox::new(Arc::clone(&host), decider.clone(), Arc::clone(&sink));
        Self {
            host,
            provider,
            decider,
            sink,
            limits,
            prices,
            toolbox,
        }
    }

    fn log(&self) -> &Log {
        &self.decider.log
    }

    /// Runs `task` to the end and returns the summary. `session.end` is written whatever happens.
    pub async fn run(&mut self, task: &str) -> Result<Summary, AgentError> {
        let mut summary = Summary {
            session: self.log().id().as_str().to_string(),
            review: format!("chock diff {}", self.log().id().as_str()),
            take: match self.host.session().workspace().backing() {
                chock_workspace::Backing::Git { .. } => {
                    format!("chock apply {}", self.log().id().as_str())
                }
                _ => format!("chock workspace adopt {}", self.log().id().as_str()),
            },
            cost_usd: Some(0.0),
            ..Summary::default()
        };
        let outcome = self.turns(task, &mut summary).await;
        summary.ended = match &outcome {
            Ok(ended) => ended.clone(),
            Err(err) => format!("error: {err}"),
        };
        summary.tool_calls = self.toolbox.calls();
        summary.title = self.toolbox.title();
        if let Ok(counts) = self.decider.counts.lock() {
            summary.decisions = counts.clone();
        }
        self.toolbox.finish_background().await;
        self.host.checkpoint("session end");
        let end = self
            .log()
            .append(EventKind::SessionEnd, None, json!({ "summary": summary }));
        self.sink.emit(&AgentEvent::SessionEnded {
            summary: summary.clone(),
        });
        match outcome {
            Ok(_) => {
                end?;
                Ok(summary)
            }
            Err(err) => Err(err),
        }
    }

    async fn turns(&mut self, task: &str, summary: &mut Summary) -> Result<String, AgentError> {
        let system = system_prompt(self.host.view());
        let tools = tool_specs();
        let mut messages = vec![Message::user_text(task)];
        self.log().append(
            EventKind::Note,
            None,
            json!({ "task": task, "system": system }),
        )?;
        for turn in 1..=self.limits.max_turns {
            summary.turns = turn;
            self.log()
                .append(EventKind::TurnStart, None, json!({ "turn": turn }))?;
            self.sink.emit(&AgentEvent::TurnStarted { turn });
            let request = Request {
                model: self.limits.model.clone(),
                system: Some(system.clone()),
                messages: messages.clone(),
                tools: tools.clone(),
                max_tokens: self.limits.max_tokens,
                ..Request::default()
            };
            let new_message = messages
                .last()
                .map(|m| serde_json::to_value(m).unwrap_or(Value::Null));
            self.log().append(
                EventKind::ModelRequest,
                None,
                json!({
                    "turn": turn,
                    "provider": self.provider.name(),
                    "model": request.model,
                    "messages": request.messages.len(),
                    "new_message": new_message,
                }),
            )?;
            let response = {
                let log = self.log().clone();
                let sink = Arc::clone(&self.sink);
                let retry_error: Arc<Mutex<Option<LogError>>> = Arc::default();
                let retry_error_in = Arc::clone(&retry_error);
                let mut on_event = move |event: StreamEvent| match event {
                    StreamEvent::TextDelta(text) => sink.emit(&AgentEvent::Text { text }),
                    StreamEvent::ThinkingDelta(text) => sink.emit(&AgentEvent::Thinking { text }),
                    StreamEvent::Retrying {
                        attempt,
                        wait,
                        reason,
                    } => {
                        let wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
                        if let Err(err) = log.append(
                            EventKind::ModelRetry,
                            None,
                            json!({ "turn": turn, "attempt": attempt, "wait_ms": wait_ms, "reason": reason }),
                        ) && let Ok(mut slot) = retry_error_in.lock()
                        {
                            *slot = Some(err);
                        }
                        sink.emit(&AgentEvent::ModelRetry {
                            attempt,
                            wait_ms,
                            reason,
                        });
                    }
                    _ => {}
                };
                let result = self.provider.stream(&request, &mut on_event).await;
                if let Some(err) = retry_error.lock().ok().and_then(|mut e| e.take()) {
                    return Err(err.into());
                }
                result?
            };
            let cost = if response.usage == chock_provider::Usage::default() {
                // No tokens (the offline player) cost nothing, whatever the model's name.
                Some(0.0)
            } else {
                self.prices
                    .cost(&response.model, &response.usage)
                    .usd()
                    .or_else(|| self.prices.cost(&request.model, &response.usage).usd())
            };
            summary.input_tokens += response.usage.input_tokens;
            summary.output_tokens += response.usage.output_tokens;
            summary.cost_usd = match (summary.cost_usd, cost) {
                (Some(total), Some(c)) => Some(total + c),
                _ => None,
            };
            let stop = serde_json::to_value(&response.stop_reason).unwrap_or(Value::Null);
            self.log().append(
                EventKind::ModelResponse,
                None,
                json!({
                    "turn": turn,
                    "model": response.model,
                    "id": response.id,
                    "usage": response.usage,
                    "cost_usd": cost,
                    "stop_reason": stop,
                    "content": response.content,
                }),
            )?;
            self.sink.emit(&AgentEvent::ModelResponse {
                turn,
                input_tokens: response.usage.input_tokens,
                output_tokens: response.usage.output_tokens,
                cache_read_tokens: response.usage.cache_read_tokens,
                cache_write_tokens: response.usage.cache_write_tokens,
                cost_usd: cost,
                stop_reason: match &response.stop_reason {
                    StopReason::Other(s) => s.clone(),
                    other => serde_json::to_value(other)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default(),
                },
            });
            let calls: Vec<(String, String, Value)> = response
                .tool_calls()
                .map(|(id, name, input)| (id.to_string(), name.to_string(), input.clone()))
                .collect();
            messages.push(Message::assistant(response.content.clone()));
            if calls.is_empty() {
                self.log().append(
                    EventKind::TurnEnd,
                    None,
                    json!({ "turn": turn, "reason": "no tool calls" }),
                )?;
                self.sink.emit(&AgentEvent::TurnEnded { turn });
                let ended = match response.stop_reason {
                    StopReason::MaxTokens => "max_tokens",
                    StopReason::Refusal => "refusal",
                    _ => "done",
                };
                return Ok(ended.to_string());
            }
            let mut results = Vec::with_capacity(calls.len());
            for (id, name, input) in calls {
                self.sink.emit(&AgentEvent::ToolCall {
                    call_id: id.clone(),
                    tool: name.clone(),
                    input: input.clone(),
                });
                let output: ToolOutput = self.toolbox.call(&id, &name, &input).await?;
                let content = self.log().redact(&output.text);
                self.sink.emit(&AgentEvent::ToolResult {
                    call_id: id.clone(),
                    tool: name.clone(),
                    ok: !output.is_error,
                    summary: truncate_summary(&content),
                });
                results.push(Block::ToolResult {
                    tool_use_id: id,
                    content,
                    is_error: output.is_error,
                });
            }
            results.extend(
                self.toolbox
                    .background_notes()
                    .into_iter()
                    .map(|text| Block::Text { text }),
            );
            messages.push(Message {
                role: Role::User,
                content: results,
            });
            self.log().append(
                EventKind::TurnEnd,
                None,
                json!({ "turn": turn, "reason": "tool results" }),
            )?;
            self.sink.emit(&AgentEvent::TurnEnded { turn });
        }
        Ok("max_turns".to_string())
    }
}
