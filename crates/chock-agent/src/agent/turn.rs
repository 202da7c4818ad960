//! One turn's two halves: the model request with its streamed reply, and the model's tool calls,
//! each interruptible.

use std::sync::{Arc, Mutex};

use chock_log::LogError;
use chock_protocol::log::{ModelRequest, ModelRetry};
use chock_provider::{Block, Message, Request, StreamEvent, ToolSpec};
use serde_json::Value;
use tokio::sync::watch;

use super::{Agent, AgentError, truncate_summary};
use chock_protocol::live::ItemKind;
use chock_tools::ToolOutput;
use chock_tools::events::{AgentEvent, EventSink, Summary};

/// How long a model's reply is waited for before the session's background work may run.
const LEND_AFTER: std::time::Duration = std::time::Duration::from_millis(5);

impl Agent {
    /// One model request and its streamed reply, logged; `None` when interrupted first.
    pub(super) async fn ask_model(
        &self,
        turn: u32,
        conversation: &[Message],
        tools: &[ToolSpec],
        max_tokens: u32,
        interrupt: &mut watch::Receiver<u64>,
        summary: &mut Summary,
    ) -> Result<Option<chock_provider::Response>, AgentError> {
        let request = Request {
            model: self.limits.model.clone(),
            system: Some(self.system.clone()),
            messages: conversation.to_vec(),
            tools: tools.to_vec(),
            max_tokens,
            ..Request::default()
        };
        let new_message = conversation
            .last()
            .map(|m| serde_json::to_value(m).unwrap_or(Value::Null));
        self.log().record(
            None,
            ModelRequest {
                turn,
                provider: self.provider.name().to_string(),
                model: request.model.clone(),
                messages: request.messages.len(),
                new_message,
            },
        )?;
        let log = self.log().clone();
        let sink = Arc::clone(&self.sink);
        let retry_error: Arc<Mutex<Option<LogError>>> = Arc::default();
        let retry_error_in = Arc::clone(&retry_error);
        // The reply's message and reasoning are items: started at their first delta, completed
        // when the reply is (or is cut short).
        let items = Arc::new(Mutex::new(StreamItems::default()));
        let items_in = Arc::clone(&items);
        let sink_in = Arc::clone(&sink);
        let mut on_event = move |event: StreamEvent| match event {
            StreamEvent::TextDelta(text) => {
                let item = items_in
                    .lock()
                    .map(|mut i| i.open(&sink_in, turn, ItemKind::Message))
                    .unwrap_or_default();
                sink_in.emit(&AgentEvent::Text { item, text });
            }
            StreamEvent::ThinkingDelta(text) => {
                let item = items_in
                    .lock()
                    .map(|mut i| i.open(&sink_in, turn, ItemKind::Reasoning))
                    .unwrap_or_default();
                sink_in.emit(&AgentEvent::Thinking { item, text });
            }
            StreamEvent::Retrying {
                attempt,
                wait,
                reason,
            } => {
                let wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
                let retry = ModelRetry {
                    turn,
                    attempt,
                    wait_ms,
                    reason: reason.clone(),
                };
                if let Err(err) = log.record(None, retry)
                    && let Ok(mut slot) = retry_error_in.lock()
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
        // The model's reply is a wait: once it has taken longer than a moment, the session's
        // background git runs meanwhile (a reply from the offline player is back before that, and
        // stopping and continuing git around it would cost more than it gives).
        let stream = self.provider.stream(&request, &mut on_event);
        tokio::pin!(stream);
        let mut waiting = None;
        let result = loop {
            tokio::select! {
                result = &mut stream => break result,
                // Dropping the stream closes the connection: the reply stops where it is.
                _ = interrupt.changed() => {
                    close_items(&items, &self.sink, false);
                    return Ok(None);
                }
                () = tokio::time::sleep(LEND_AFTER), if waiting.is_none() => {
                    waiting = Some(self.host.session().workspace().lend_background());
                }
            }
        };
        drop(waiting);
        close_items(&items, &self.sink, result.is_ok());
        if let Some(err) = retry_error.lock().ok().and_then(|mut e| e.take()) {
            return Err(err.into());
        }
        let response = result?;
        let booked = crate::booking::book_reply(
            self.log(),
            &self.prices,
            &self.budget,
            turn,
            &request.model,
            &response,
        )?;
        let (cost, stop_reason) = (booked.cost, booked.stop_reason);
        summary.input_tokens += response.usage.input_tokens;
        summary.output_tokens += response.usage.output_tokens;
        summary.cost_usd = crate::budget::add_cost(summary.cost_usd, cost);
        self.sink.emit(&AgentEvent::ModelResponse {
            turn,
            input_tokens: response.usage.input_tokens,
            output_tokens: response.usage.output_tokens,
            cache_read_tokens: response.usage.cache_read_tokens,
            cache_write_tokens: response.usage.cache_write_tokens,
            cost_usd: cost,
            stop_reason,
        });
        Ok(Some(response))
    }

    /// Runs the model's tool calls in order and returns their result blocks, and whether an
    /// interrupt came. An interrupt kills the running call's process tree (its result says how it
    /// ended) and the calls after it are not run: each still gets a result saying so.
    pub(super) async fn run_calls(
        &mut self,
        calls: Vec<(String, String, Value)>,
        interrupt: &mut watch::Receiver<u64>,
    ) -> Result<(Vec<Block>, bool), AgentError> {
        let mut results = Vec::with_capacity(calls.len());
        let mut interrupted = false;
        for (id, name, input) in calls {
            // An interrupt that came between two calls stops the next before it starts.
            interrupted = interrupted || interrupt.has_changed().unwrap_or(false);
            if interrupted {
                results.push(Block::ToolResult {
                    tool_use_id: id,
                    content: "not run: the turn was interrupted".into(),
                    is_error: true,
                });
                continue;
            }
            self.sink.emit(&AgentEvent::ItemStarted {
                item: id.clone(),
                turn: self.turn,
                kind: ItemKind::ToolCall {
                    call_id: id.clone(),
                    tool: name.clone(),
                },
            });
            self.sink.emit(&AgentEvent::ToolCall {
                call_id: id.clone(),
                tool: name.clone(),
                input: input.clone(),
                display: self.toolbox.registry().display(&name, &input),
            });
            let running = self.host.session().running().clone();
            let output: ToolOutput = {
                let call = self.toolbox.call(&id, &name, &input);
                tokio::pin!(call);
                tokio::select! {
                    output = &mut call => output?,
                    _ = interrupt.changed() => {
                        interrupted = true;
                        // The call's init dies and its pid namespace with it; the call then ends
                        // and reports how (killed), so its result is still logged.
                        // A call not yet spawned is killed when its init registers.
                        running.kill(&id);
                        let output = call.await;
                        running.forget(&id);
                        output?
                    }
                }
            };
            let content = self.log().redact(&output.text);
            self.sink.emit(&AgentEvent::ToolResult {
                call_id: id.clone(),
                tool: name.clone(),
                ok: !output.is_error,
                summary: truncate_summary(&content),
            });
            self.sink.emit(&AgentEvent::ItemCompleted {
                item: id.clone(),
                ok: !output.is_error,
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
        Ok((results, interrupted))
    }
}

/// The model items a streaming reply has opened.
#[derive(Debug, Default)]
struct StreamItems {
    open: Vec<String>,
}

impl StreamItems {
    /// The id of the reply's item of `kind`, announcing it at its first delta.
    fn open(&mut self, sink: &Arc<dyn EventSink>, turn: u32, kind: ItemKind) -> String {
        let word = match kind {
            ItemKind::Reasoning => "reasoning",
            _ => "message",
        };
        let item = format!("t{turn}.{word}");
        if !self.open.contains(&item) {
            self.open.push(item.clone());
            sink.emit(&AgentEvent::ItemStarted {
                item: item.clone(),
                turn,
                kind,
            });
        }
        item
    }
}

/// Completes every item the reply opened.
fn close_items(items: &Mutex<StreamItems>, sink: &Arc<dyn EventSink>, ok: bool) {
    let open = items.lock().map(|mut i| std::mem::take(&mut i.open));
    for item in open.unwrap_or_default() {
        sink.emit(&AgentEvent::ItemCompleted { item, ok });
    }
}
