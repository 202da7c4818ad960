//! Anthropic Messages API: request body and stream decoder.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::error::ProviderError;
use crate::sse::SseEvent;
use crate::transport::{Decoder, OnEvent, Transport};
use crate::types::{Block, Message, Request, Response, Role, StopReason, StreamEvent, Usage};
use crate::wire_json::{
    EventData, NAME_CHARS, QUOTE_CHARS, clip, ended_before, parse_input, text_of,
};
use crate::{Provider, ProviderFuture};

/// The `anthropic-version` header value.
pub(crate) const API_VERSION: &str = "2023-06-01";

/// `max_tokens` when the request leaves it 0: the API requires one.
const DEFAULT_MAX_TOKENS: u32 = 8192;

/// The Messages API client.
#[derive(Debug)]
pub(crate) struct Anthropic {
    transport: Transport,
    caching: Caching,
}

impl Anthropic {
    pub(crate) fn new(transport: Transport, caching: Caching) -> Self {
        Self { transport, caching }
    }
}

/// Whether to mark prompt-cache breakpoints. Anthropic caches only what a request marks, and an agent
/// resends the same growing prefix every turn, so marking it makes later turns read it at a tenth of the
/// input price (writes cost 1.25x; prefixes under the model's minimum, about 1024 tokens, are not cached).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Caching {
    Marked,
    Off,
}

impl Provider for Anthropic {
    fn name(&self) -> &str {
        &self.transport.provider
    }

    fn stream<'a>(
        &'a self,
        req: &'a Request,
        on_event: &'a mut (dyn FnMut(StreamEvent) + Send),
    ) -> ProviderFuture<'a> {
        Box::pin(async move {
            let body = request_body(req, self.caching);
            let provider = self.transport.provider.clone();
            let new_decoder = move || Box::new(MessagesDecoder::new(&provider)) as Box<dyn Decoder>;
            self.transport.run(&body, &new_decoder, on_event).await
        })
    }
}

/// The JSON body for `req`.
pub(crate) fn request_body(req: &Request, caching: Caching) -> Value {
    let mut body = json!({
        "model": req.model,
        "max_tokens": if req.max_tokens == 0 { DEFAULT_MAX_TOKENS } else { req.max_tokens },
        "stream": true,
        "messages": req.messages.iter().filter_map(message_json).collect::<Vec<_>>(),
    });
    if let Some(system) = req.system.as_deref().filter(|s| !s.is_empty()) {
        body["system"] = json!(system);
    }
    if !req.tools.is_empty() {
        body["tools"] = req
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.input_schema}))
            .collect();
    }
    if let Some(budget) = req.thinking_budget {
        body["thinking"] = json!({"type": "enabled", "budget_tokens": budget});
    }
    if let Some(temperature) = req.temperature {
        body["temperature"] = json!(temperature);
    }
    if caching == Caching::Marked {
        mark_cache_breakpoints(&mut body);
    }
    body
}

/// Marks up to four breakpoints (the API's limit): the last tool, the system prompt, and the ends of the
/// last two user messages, so each turn reads what the previous one wrote and writes its own extension.
fn mark_cache_breakpoints(body: &mut Value) {
    let mark = json!({"type": "ephemeral"});
    if let Some(last_tool) = body
        .get_mut("tools")
        .and_then(Value::as_array_mut)
        .and_then(|t| t.last_mut())
    {
        last_tool["cache_control"] = mark.clone();
    }
    if let Some(system) = body
        .get("system")
        .and_then(Value::as_str)
        .map(str::to_owned)
    {
        body["system"] = json!([{"type": "text", "text": system, "cache_control": mark.clone()}]);
    }
    let Some(messages) = body.get_mut("messages").and_then(Value::as_array_mut) else {
        return;
    };
    let user_messages = messages
        .iter_mut()
        .rev()
        .filter(|m| m["role"] == "user")
        .take(2);
    for message in user_messages {
        if let Some(last_block) = message["content"].as_array_mut().and_then(|c| c.last_mut()) {
            last_block["cache_control"] = mark.clone();
        }
    }
}

fn message_json(message: &Message) -> Option<Value> {
    let mut blocks: Vec<Value> = message.content.iter().filter_map(block_json).collect();
    if message.role == Role::User {
        // tool_result blocks must open the message, before any text.
        blocks.sort_by_key(|b| b["type"] != "tool_result");
    }
    if blocks.is_empty() {
        return None;
    }
    let role = match message.role {
        Role::User => "user",
        Role::Assistant => "assistant",
    };
    Some(json!({"role": role, "content": blocks}))
}

fn block_json(block: &Block) -> Option<Value> {
    Some(match block {
        // The API rejects empty text blocks.
        Block::Text { text } if text.is_empty() => return None,
        Block::Text { text } => json!({"type": "text", "text": text}),
        Block::ToolUse { id, name, input } => {
            // The API wants an object; text that was not valid JSON goes back wrapped, so the call and
            // its error result still pair up.
            let input = if input.is_object() {
                input.clone()
            } else {
                json!({ "invalid_json": input })
            };
            json!({"type": "tool_use", "id": id, "name": name, "input": input})
        }
        Block::ToolResult {
            tool_use_id,
            content,
            is_error,
        } => {
            let mut result =
                json!({"type": "tool_result", "tool_use_id": tool_use_id, "content": content});
            if *is_error {
                result["is_error"] = json!(true);
            }
            result
        }
        // Only signed thinking can be sent back; unsigned thinking came from another provider.
        Block::Thinking { signature, .. } if signature.is_empty() => return None,
        Block::Thinking {
            thinking,
            signature,
        } => json!({"type": "thinking", "thinking": thinking, "signature": signature}),
        Block::RedactedThinking { data } => json!({"type": "redacted_thinking", "data": data}),
        Block::Reasoning { .. } => return None,
    })
}

/// A content block being assembled.
#[derive(Debug)]
enum Partial {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        json: String,
        start_input: Value,
    },
    Thinking {
        thinking: String,
        signature: String,
    },
    Redacted(String),
    Unknown,
}

/// Assembles one streamed message.
#[derive(Debug)]
pub(crate) struct MessagesDecoder {
    provider: String,
    id: Option<String>,
    model: String,
    blocks: BTreeMap<u64, Partial>,
    usage: Usage,
    stop_reason: Option<String>,
    done: bool,
}

impl MessagesDecoder {
    pub(crate) fn new(provider: &str) -> Self {
        Self {
            provider: provider.to_owned(),
            id: None,
            model: String::new(),
            blocks: BTreeMap::new(),
            usage: Usage::default(),
            stop_reason: None,
            done: false,
        }
    }

    fn apply_usage(&mut self, usage: &Value) {
        let field = |key: &str| usage.get(key).and_then(Value::as_u64);
        // message_delta counts are cumulative: each present field replaces, none adds.
        if let Some(n) = field("input_tokens") {
            self.usage.input_tokens = n;
        }
        if let Some(n) = field("output_tokens") {
            self.usage.output_tokens = n;
        }
        if let Some(n) = field("cache_read_input_tokens") {
            self.usage.cache_read_tokens = n;
        }
        if let Some(n) = field("cache_creation_input_tokens") {
            self.usage.cache_write_tokens = n;
        }
    }
}

impl Decoder for MessagesDecoder {
    fn event(&mut self, event: SseEvent, on_event: &mut OnEvent<'_>) -> Result<(), ProviderError> {
        let parsed = EventData::parse(&self.provider, &event)?;
        let data = &parsed.json;
        let kind = data
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(event.event.as_str())
            .to_owned();
        match kind.as_str() {
            "message_start" => {
                let message = parsed.object(&self.provider, "message")?;
                self.id = message.get("id").and_then(Value::as_str).map(str::to_owned);
                text_of(message, "model").clone_into(&mut self.model);
                if let Some(usage) = message.get("usage") {
                    self.apply_usage(usage);
                }
            }
            "content_block_start" => {
                let index = parsed.index(&self.provider, "index")?;
                // Without the block's type its deltas could not be kept: a reply would lose text or a call.
                let block = parsed.object(&self.provider, "content_block")?;
                let partial = match text_of(block, "type") {
                    "text" => {
                        let text = text_of(block, "text").to_owned();
                        if !text.is_empty() {
                            on_event(StreamEvent::TextDelta(text.clone()));
                        }
                        Partial::Text(text)
                    }
                    "tool_use" => {
                        let (id, name) = (
                            text_of(block, "id").to_owned(),
                            text_of(block, "name").to_owned(),
                        );
                        on_event(StreamEvent::ToolCallStarted {
                            id: id.clone(),
                            name: name.clone(),
                        });
                        let start_input = block.get("input").cloned().unwrap_or_else(|| json!({}));
                        Partial::ToolUse {
                            id,
                            name,
                            json: String::new(),
                            start_input,
                        }
                    }
                    "thinking" => Partial::Thinking {
                        thinking: text_of(block, "thinking").to_owned(),
                        signature: text_of(block, "signature").to_owned(),
                    },
                    "redacted_thinking" => Partial::Redacted(text_of(block, "data").to_owned()),
                    // Server tools and future block types: not ours to echo or run.
                    _ => Partial::Unknown,
                };
                self.blocks.insert(index, partial);
            }
            "content_block_delta" => {
                let index = parsed.index(&self.provider, "index")?;
                let delta = parsed.object(&self.provider, "delta")?;
                let Some(partial) = self.blocks.get_mut(&index) else {
                    return Err(parsed.malformed(
                        &self.provider,
                        format!("a delta for block {index}, which never started"),
                    ));
                };
                match (text_of(delta, "type"), partial) {
                    ("text_delta", Partial::Text(text)) => {
                        let piece = text_of(delta, "text");
                        text.push_str(piece);
                        on_event(StreamEvent::TextDelta(piece.to_owned()));
                    }
                    ("input_json_delta", Partial::ToolUse { json, .. }) => {
                        json.push_str(text_of(delta, "partial_json"))
                    }
                    ("thinking_delta", Partial::Thinking { thinking, .. }) => {
                        let piece = text_of(delta, "thinking");
                        thinking.push_str(piece);
                        on_event(StreamEvent::ThinkingDelta(piece.to_owned()));
                    }
                    // The signature is set, not appended.
                    ("signature_delta", Partial::Thinking { signature, .. }) => {
                        text_of(delta, "signature").clone_into(signature);
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(reason) = data["delta"].get("stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(reason.to_owned());
                }
                if let Some(usage) = data.get("usage") {
                    self.apply_usage(usage);
                }
            }
            "message_stop" => self.done = true,
            "error" => {
                let error = data.get("error").unwrap_or(data);
                let (kind, message) = (
                    clip(text_of(error, "type"), NAME_CHARS),
                    clip(text_of(error, "message"), QUOTE_CHARS),
                );
                return Err(if kind == "overloaded_error" {
                    ProviderError::Overloaded {
                        provider: self.provider.clone(),
                        message,
                    }
                } else {
                    ProviderError::Api {
                        provider: self.provider.clone(),
                        kind,
                        message,
                    }
                });
            }
            // ping, content_block_stop (blocks are finished at the end) and future events.
            _ => {}
        }
        Ok(())
    }

    fn done(&self) -> bool {
        self.done
    }

    fn finish(self: Box<Self>, eof: bool) -> Result<Response, ProviderError> {
        if eof && !self.done {
            return Err(ended_before(self.provider, "`message_stop`"));
        }
        let content: Vec<Block> = self.blocks.into_values().filter_map(finish_block).collect();
        let has_calls = content.iter().any(|b| matches!(b, Block::ToolUse { .. }));
        let stop_reason = match self.stop_reason.as_deref() {
            Some("tool_use") => StopReason::ToolUse,
            Some("max_tokens") => StopReason::MaxTokens,
            Some("pause_turn") => StopReason::PauseTurn,
            Some("refusal") => StopReason::Refusal,
            _ if has_calls => StopReason::ToolUse,
            Some("end_turn") | None => StopReason::EndTurn,
            Some("stop_sequence") => StopReason::StopSequence,
            Some(other) => StopReason::Other(other.to_owned()),
        };
        Ok(Response {
            content,
            stop_reason,
            usage: self.usage,
            model: self.model,
            id: self.id,
        })
    }
}

fn finish_block(partial: Partial) -> Option<Block> {
    Some(match partial {
        Partial::Text(text) if text.is_empty() => return None,
        Partial::Text(text) => Block::Text { text },
        Partial::ToolUse {
            id,
            name,
            json,
            start_input,
        } => Block::ToolUse {
            id,
            name,
            input: parse_input(&json, start_input),
        },
        Partial::Thinking {
            thinking,
            signature,
        } => Block::Thinking {
            thinking,
            signature,
        },
        Partial::Redacted(data) => Block::RedactedThinking { data },
        Partial::Unknown => return None,
    })
}
