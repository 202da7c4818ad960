//! OpenAI Chat Completions and compatible servers: request body and stream decoder.
//!
//! The decoder follows the tolerant accumulation servers need: tool calls keyed by `index` when present,
//! a new call whenever a different `id` arrives (Ollama repeats index 0), `arguments` concatenated and
//! parsed only at the end, reasoning read from `reasoning_content` or `reasoning`, usage from whichever
//! chunk carries it, and the end taken from `[DONE]` or from end-of-stream after a `finish_reason`.

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::error::ProviderError;
use crate::sse::SseEvent;
use crate::transport::{Decoder, OnEvent, Transport};
use crate::types::{Block, Request, Response, Role, StopReason, StreamEvent, Usage};
use crate::wire_json::{
    EventData, NAME_CHARS, QUOTE_CHARS, arguments_text, clip, ended_before, parse_input,
};
use crate::{Provider, ProviderFuture};

/// The Chat Completions client.
#[derive(Debug)]
pub(crate) struct Chat {
    transport: Transport,
    limit_field: &'static str,
}

impl Chat {
    pub(crate) fn new(transport: Transport) -> Self {
        let limit_field = limit_field(&transport.url);
        Self {
            transport,
            limit_field,
        }
    }
}

/// The name of the output limit for the server at `url`: OpenAI itself refuses `max_tokens` for its
/// reasoning models and wants `max_completion_tokens`; compatible servers know `max_tokens` (not all know
/// the newer name).
fn limit_field(url: &str) -> &'static str {
    if url.starts_with("https://api.openai.com/") {
        "max_completion_tokens"
    } else {
        "max_tokens"
    }
}

impl Provider for Chat {
    fn name(&self) -> &str {
        &self.transport.provider
    }

    fn stream<'a>(
        &'a self,
        req: &'a Request,
        on_event: &'a mut (dyn FnMut(StreamEvent) + Send),
    ) -> ProviderFuture<'a> {
        Box::pin(async move {
            let body = request_body(req, self.limit_field);
            let provider = self.transport.provider.clone();
            let new_decoder = move || Box::new(ChatDecoder::new(&provider)) as Box<dyn Decoder>;
            self.transport.run(&body, &new_decoder, on_event).await
        })
    }
}

/// The JSON body for `req`.
pub(crate) fn request_body(req: &Request, limit_field: &str) -> Value {
    let mut messages = Vec::new();
    if let Some(system) = req.system.as_deref().filter(|s| !s.is_empty()) {
        messages.push(json!({"role": "system", "content": system}));
    }
    for message in &req.messages {
        match message.role {
            Role::User => user_messages(&message.content, &mut messages),
            Role::Assistant => messages.push(assistant_message(&message.content)),
        }
    }
    let mut body = json!({
        "model": req.model,
        "stream": true,
        "stream_options": {"include_usage": true},
        "messages": messages,
    });
    if req.max_tokens > 0 {
        body[limit_field] = json!(req.max_tokens);
    }
    if !req.tools.is_empty() {
        body["tools"] = req
            .tools
            .iter()
            .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.input_schema}}))
            .collect();
    }
    if let Some(effort) = &req.reasoning_effort {
        body["reasoning_effort"] = json!(effort);
    }
    if let Some(temperature) = req.temperature {
        body["temperature"] = json!(temperature);
    }
    body
}

fn user_messages(blocks: &[Block], messages: &mut Vec<Value>) {
    // One `tool` message per result, right after the assistant message; then any text.
    let mut text = String::new();
    for block in blocks {
        match block {
            Block::ToolResult {
                tool_use_id,
                content,
                ..
            } => {
                messages
                    .push(json!({"role": "tool", "tool_call_id": tool_use_id, "content": content}));
            }
            Block::Text { text: piece } => {
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(piece);
            }
            _ => {}
        }
    }
    if !text.is_empty() {
        messages.push(json!({"role": "user", "content": text}));
    }
}

fn assistant_message(blocks: &[Block]) -> Value {
    let mut text = String::new();
    let mut calls = Vec::new();
    for block in blocks {
        match block {
            Block::Text { text: piece } => text.push_str(piece),
            Block::ToolUse { id, name, input } => {
                calls.push(json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments_text(input)}}));
            }
            // Reasoning text is not sent back: several servers reject it in requests.
            _ => {}
        }
    }
    let mut message = json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { json!(text) }});
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    message
}

#[derive(Debug, Default)]
struct Call {
    id: String,
    name: String,
    arguments: String,
    announced: bool,
}

/// Assembles one streamed completion.
#[derive(Debug)]
pub(crate) struct ChatDecoder {
    provider: String,
    id: Option<String>,
    model: String,
    text: String,
    thinking: String,
    calls: Vec<Call>,
    by_index: HashMap<u64, usize>,
    usage: Option<Usage>,
    finish_reason: Option<String>,
    done: bool,
}

impl ChatDecoder {
    pub(crate) fn new(provider: &str) -> Self {
        Self {
            provider: provider.to_owned(),
            id: None,
            model: String::new(),
            text: String::new(),
            thinking: String::new(),
            calls: Vec::new(),
            by_index: HashMap::new(),
            usage: None,
            finish_reason: None,
            done: false,
        }
    }

    /// The slot a tool-call delta belongs to, created if new.
    fn slot(&mut self, index: Option<u64>, id: Option<&str>) -> usize {
        let fresh_id = |call: &Call| matches!(id, Some(id) if !call.id.is_empty() && call.id != id);
        let existing = match index {
            Some(index) => self.by_index.get(&index).copied(),
            None => self.calls.len().checked_sub(1),
        };
        match existing {
            Some(slot) if !fresh_id(&self.calls[slot]) => slot,
            _ => {
                self.calls.push(Call::default());
                let slot = self.calls.len() - 1;
                if let Some(index) = index {
                    self.by_index.insert(index, slot);
                }
                slot
            }
        }
    }

    fn tool_call_delta(&mut self, delta: &Value, on_event: &mut OnEvent<'_>) {
        let id = delta
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let slot = self.slot(delta.get("index").and_then(Value::as_u64), id);
        let call = &mut self.calls[slot];
        if let Some(id) = id {
            id.clone_into(&mut call.id);
        }
        let function = &delta["function"];
        if let Some(name) = function.get("name").and_then(Value::as_str)
            && call.name.is_empty()
        {
            name.clone_into(&mut call.name);
        }
        if let Some(piece) = function.get("arguments").and_then(Value::as_str) {
            call.arguments.push_str(piece);
        }
        if !call.announced && !call.name.is_empty() {
            call.announced = true;
            if call.id.is_empty() {
                // Some servers send no id at all; the result still needs one to name.
                call.id = format!("call_{}", slot + 1);
            }
            on_event(StreamEvent::ToolCallStarted {
                id: call.id.clone(),
                name: call.name.clone(),
            });
        }
    }
}

impl Decoder for ChatDecoder {
    fn event(&mut self, event: SseEvent, on_event: &mut OnEvent<'_>) -> Result<(), ProviderError> {
        if event.data.trim() == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        let parsed = EventData::parse(&self.provider, &event)?;
        let chunk = &parsed.json;
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null()) {
            let (kind, message) =
                crate::transport::error_fields(&json!({ "error": error }).to_string());
            return Err(ProviderError::Api {
                provider: self.provider.clone(),
                kind: clip(kind.as_deref().unwrap_or("error"), NAME_CHARS),
                message: clip(&message.unwrap_or_else(|| error.to_string()), QUOTE_CHARS),
            });
        }
        // Servers differ in what a chunk carries, never in its skeleton: `choices` is a list of objects
        // whose `delta` is an object with a list of `tool_calls`. A chunk not built so is corrupt.
        let shaped = |value: Option<&Value>, shape: fn(&Value) -> bool| {
            value.is_none_or(|v| v.is_null() || shape(v))
        };
        let choices = chunk.get("choices");
        let well_formed = shaped(choices, Value::is_array)
            && choices
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .all(|choice| {
                    choice.is_object()
                        && shaped(choice.get("delta"), Value::is_object)
                        && shaped(
                            choice.get("delta").and_then(|d| d.get("tool_calls")),
                            |calls| {
                                calls
                                    .as_array()
                                    .is_some_and(|c| c.iter().all(Value::is_object))
                            },
                        )
                });
        if !well_formed {
            return Err(parsed.malformed(
                &self.provider,
                "not a chunk (`choices`, `delta` or `tool_calls` of the wrong type)",
            ));
        }
        if self.id.is_none() {
            self.id = chunk.get("id").and_then(Value::as_str).map(str::to_owned);
        }
        if let Some(model) = chunk.get("model").and_then(Value::as_str) {
            model.clone_into(&mut self.model);
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            let n = |v: &Value| v.as_u64().unwrap_or(0);
            let cached = n(&usage["prompt_tokens_details"]["cached_tokens"]);
            self.usage = Some(Usage {
                input_tokens: n(&usage["prompt_tokens"]).saturating_sub(cached),
                output_tokens: n(&usage["completion_tokens"]),
                cache_read_tokens: cached,
                cache_write_tokens: 0,
                reasoning_tokens: n(&usage["completion_tokens_details"]["reasoning_tokens"]),
            });
        }
        for choice in chunk
            .get("choices")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            // Only the first choice is ours (we never ask for n > 1).
            if choice.get("index").and_then(Value::as_u64).unwrap_or(0) != 0 {
                continue;
            }
            let delta = &choice["delta"];
            for key in ["content", "refusal"] {
                if let Some(piece) = delta
                    .get(key)
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                {
                    self.text.push_str(piece);
                    on_event(StreamEvent::TextDelta(piece.to_owned()));
                }
            }
            for key in ["reasoning_content", "reasoning"] {
                if let Some(piece) = delta
                    .get(key)
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                {
                    self.thinking.push_str(piece);
                    on_event(StreamEvent::ThinkingDelta(piece.to_owned()));
                }
            }
            for call in delta
                .get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                self.tool_call_delta(call, on_event);
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finish_reason = Some(reason.to_owned());
            }
        }
        Ok(())
    }

    fn done(&self) -> bool {
        self.done
    }

    fn finish(self: Box<Self>, eof: bool) -> Result<Response, ProviderError> {
        if eof && !self.done && self.finish_reason.is_none() {
            return Err(ended_before(self.provider, "a `finish_reason` or `[DONE]`"));
        }
        let mut content = Vec::new();
        if !self.thinking.is_empty() {
            content.push(Block::Thinking {
                thinking: self.thinking,
                signature: String::new(),
            });
        }
        if !self.text.is_empty() {
            content.push(Block::Text { text: self.text });
        }
        for call in self.calls {
            let Call {
                id,
                name,
                arguments,
                ..
            } = call;
            content.push(Block::ToolUse {
                id,
                name,
                input: parse_input(&arguments, json!({})),
            });
        }
        let has_calls = content.iter().any(|b| matches!(b, Block::ToolUse { .. }));
        // Decided from the calls present: servers say "stop" after tool calls too.
        let stop_reason = match self.finish_reason.as_deref() {
            _ if has_calls => StopReason::ToolUse,
            Some("length") => StopReason::MaxTokens,
            Some("content_filter") => StopReason::Refusal,
            Some("stop") | None => StopReason::EndTurn,
            Some(other) => StopReason::Other(other.to_owned()),
        };
        Ok(Response {
            content,
            stop_reason,
            usage: self.usage.unwrap_or_default(),
            model: self.model,
            id: self.id,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_itself_gets_max_completion_tokens() {
        let req = Request {
            model: "gpt-5".into(),
            max_tokens: 100,
            ..Request::default()
        };
        assert_eq!(
            limit_field("https://api.openai.com/v1/chat/completions"),
            "max_completion_tokens"
        );
        assert_eq!(
            limit_field("http://localhost:11434/v1/chat/completions"),
            "max_tokens"
        );
        let body = request_body(&req, "max_completion_tokens");
        assert_eq!(
            (body.get("max_tokens"), &body["max_completion_tokens"]),
            (None, &json!(100))
        );
        let zero = Request {
            max_tokens: 0,
            ..req
        };
        assert_eq!(request_body(&zero, "max_tokens").get("max_tokens"), None);
    }
}
