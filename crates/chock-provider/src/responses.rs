//! OpenAI Responses API, stateless (`store: false`): request body and stream decoder.
//!
//! Stateless means the whole conversation is sent each turn, with every reasoning item of earlier replies
//! echoed (its `encrypted_content` included) before the call it led to. Item ids are left out of echoed
//! items: with `store: false` the server cannot look them up, and an id it cannot pair makes it refuse
//! the request; the encrypted content carries what it needs.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::error::ProviderError;
use crate::sse::SseEvent;
use crate::transport::{Decoder, OnEvent, Transport};
use crate::types::{Block, Request, Response, Role, StopReason, StreamEvent, Usage};
use crate::wire_json::{
    EventData, NAME_CHARS, QUOTE_CHARS, arguments_text, clip, ended_before, parse_input, text_of,
};
use crate::{Provider, ProviderFuture};

/// The `provider` tag of the reasoning items this client produces and echoes.
pub(crate) const REASONING_TAG: &str = "openai-responses";

/// The Responses API client.
#[derive(Debug)]
pub(crate) struct Responses {
    transport: Transport,
}

impl Responses {
    pub(crate) fn new(transport: Transport) -> Self {
        Self { transport }
    }
}

impl Provider for Responses {
    fn name(&self) -> &str {
        &self.transport.provider
    }

    fn stream<'a>(
        &'a self,
        req: &'a Request,
        on_event: &'a mut (dyn FnMut(StreamEvent) + Send),
    ) -> ProviderFuture<'a> {
        Box::pin(async move {
            let body = request_body(req);
            let provider = self.transport.provider.clone();
            let new_decoder =
                move || Box::new(ResponsesDecoder::new(&provider)) as Box<dyn Decoder>;
            self.transport.run(&body, &new_decoder, on_event).await
        })
    }
}

/// Whether `model` reasons (and so accepts `reasoning` and returns encrypted reasoning items).
fn is_reasoning_model(model: &str) -> bool {
    ["gpt-5", "o1", "o3", "o4", "codex"]
        .iter()
        .any(|p| model.starts_with(p))
}

/// The JSON body for `req`.
pub(crate) fn request_body(req: &Request) -> Value {
    let mut input = Vec::new();
    for message in &req.messages {
        match message.role {
            Role::User => user_items(&message.content, &mut input),
            Role::Assistant => assistant_items(&message.content, &mut input),
        }
    }
    let mut body = json!({
        "model": req.model,
        "stream": true,
        "store": false,
        "input": input,
    });
    if req.max_tokens > 0 {
        body["max_output_tokens"] = json!(req.max_tokens);
    }
    if let Some(system) = req.system.as_deref().filter(|s| !s.is_empty()) {
        body["instructions"] = json!(system);
    }
    if !req.tools.is_empty() {
        // Flat function tools; not strict, because our schemas have optional properties.
        body["tools"] = req
            .tools
            .iter()
            .map(|t| json!({"type": "function", "name": t.name, "description": t.description, "parameters": t.input_schema, "strict": false}))
            .collect();
    }
    if is_reasoning_model(&req.model) || req.reasoning_effort.is_some() {
        body["include"] = json!(["reasoning.encrypted_content"]);
        if let Some(effort) = &req.reasoning_effort {
            body["reasoning"] = json!({"effort": effort});
        }
    }
    if let Some(temperature) = req.temperature {
        body["temperature"] = json!(temperature);
    }
    body
}

fn user_items(blocks: &[Block], input: &mut Vec<Value>) {
    let mut parts = Vec::new();
    for block in blocks {
        match block {
            Block::ToolResult {
                tool_use_id,
                content,
                ..
            } => {
                input.push(json!({"type": "function_call_output", "call_id": tool_use_id, "output": content}));
            }
            Block::Text { text } => parts.push(json!({"type": "input_text", "text": text})),
            _ => {}
        }
    }
    if !parts.is_empty() {
        input.push(json!({"role": "user", "content": parts}));
    }
}

fn assistant_items(blocks: &[Block], input: &mut Vec<Value>) {
    for block in blocks {
        match block {
            Block::Reasoning { provider, item } if provider == REASONING_TAG => {
                let mut item = item.clone();
                if let Some(fields) = item.as_object_mut() {
                    fields.remove("id");
                    fields.remove("status");
                }
                input.push(item);
            }
            Block::Text { text } if !text.is_empty() => {
                input.push(json!({"role": "assistant", "content": [{"type": "output_text", "text": text}]}));
            }
            Block::ToolUse {
                id,
                name,
                input: args,
            } => {
                input.push(json!({"type": "function_call", "call_id": id, "name": name, "arguments": arguments_text(args)}));
            }
            _ => {}
        }
    }
}

/// An output item being assembled, keyed by `output_index`.
#[derive(Debug)]
enum Item {
    Message(String),
    Call {
        call_id: String,
        name: String,
        arguments: String,
    },
    Reasoning(Value),
    Other,
}

/// Assembles one streamed response.
#[derive(Debug)]
pub(crate) struct ResponsesDecoder {
    provider: String,
    id: Option<String>,
    model: String,
    items: BTreeMap<u64, Item>,
    usage: Usage,
    incomplete: Option<String>,
    done: bool,
}

impl ResponsesDecoder {
    pub(crate) fn new(provider: &str) -> Self {
        Self {
            provider: provider.to_owned(),
            id: None,
            model: String::new(),
            items: BTreeMap::new(),
            usage: Usage::default(),
            incomplete: None,
            done: false,
        }
    }

    /// Takes id, model and usage from a Response object; replaces the items with its `output` when final.
    fn read_response(&mut self, response: &Value, final_output: bool) {
        if let Some(id) = response.get("id").and_then(Value::as_str) {
            self.id = Some(id.to_owned());
        }
        if let Some(model) = response.get("model").and_then(Value::as_str) {
            model.clone_into(&mut self.model);
        }
        if let Some(usage) = response.get("usage").filter(|u| u.is_object()) {
            let n = |v: &Value| v.as_u64().unwrap_or(0);
            let cached = n(&usage["input_tokens_details"]["cached_tokens"]);
            self.usage = Usage {
                input_tokens: n(&usage["input_tokens"]).saturating_sub(cached),
                output_tokens: n(&usage["output_tokens"]),
                cache_read_tokens: cached,
                cache_write_tokens: 0,
                reasoning_tokens: n(&usage["output_tokens_details"]["reasoning_tokens"]),
            };
        }
        // The terminal Response's output is the authoritative list of items.
        if let Some(output) = response
            .get("output")
            .and_then(Value::as_array)
            .filter(|o| final_output && !o.is_empty())
        {
            self.items = (0u64..).zip(output.iter().map(item_from_final)).collect();
        }
    }
}

/// An item in its final form (from `output_item.done` or the terminal Response).
fn item_from_final(item: &Value) -> Item {
    match text_of(item, "type") {
        "message" => {
            let mut text = String::new();
            for part in item
                .get("content")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if text_of(part, "type") == "output_text" {
                    text.push_str(text_of(part, "text"));
                } else if text_of(part, "type") == "refusal" {
                    text.push_str(text_of(part, "refusal"));
                }
            }
            Item::Message(text)
        }
        "function_call" => Item::Call {
            call_id: text_of(item, "call_id").to_owned(),
            name: text_of(item, "name").to_owned(),
            arguments: text_of(item, "arguments").to_owned(),
        },
        "reasoning" => Item::Reasoning(item.clone()),
        _ => Item::Other,
    }
}

impl Decoder for ResponsesDecoder {
    fn event(&mut self, event: SseEvent, on_event: &mut OnEvent<'_>) -> Result<(), ProviderError> {
        let parsed = EventData::parse(&self.provider, &event)?;
        let data = &parsed.json;
        let kind = data
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(event.event.as_str())
            .to_owned();
        match kind.as_str() {
            "response.created" | "response.in_progress" => {
                self.read_response(parsed.object(&self.provider, "response")?, false)
            }
            "response.output_item.added" => {
                let index = parsed.index(&self.provider, "output_index")?;
                let item = parsed.object(&self.provider, "item")?;
                let started = match text_of(item, "type") {
                    "function_call" => {
                        let (call_id, name) = (
                            text_of(item, "call_id").to_owned(),
                            text_of(item, "name").to_owned(),
                        );
                        on_event(StreamEvent::ToolCallStarted {
                            id: call_id.clone(),
                            name: name.clone(),
                        });
                        Item::Call {
                            call_id,
                            name,
                            arguments: text_of(item, "arguments").to_owned(),
                        }
                    }
                    "message" => Item::Message(String::new()),
                    // The blob here may be incomplete: the item is kept only from output_item.done.
                    "reasoning" => Item::Other,
                    _ => Item::Other,
                };
                self.items.insert(index, started);
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                let index = parsed.index(&self.provider, "output_index")?;
                let piece = parsed.string(&self.provider, "delta")?;
                if let Some(Item::Message(text)) = self.items.get_mut(&index) {
                    text.push_str(piece);
                }
                on_event(StreamEvent::TextDelta(piece.to_owned()));
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                on_event(StreamEvent::ThinkingDelta(
                    text_of(data, "delta").to_owned(),
                ));
            }
            "response.function_call_arguments.delta" => {
                let index = parsed.index(&self.provider, "output_index")?;
                let piece = parsed.string(&self.provider, "delta")?;
                if let Some(Item::Call { arguments, .. }) = self.items.get_mut(&index) {
                    arguments.push_str(piece);
                }
            }
            "response.function_call_arguments.done" => {
                let index = parsed.index(&self.provider, "output_index")?;
                if let (Some(Item::Call { arguments, .. }), Some(full)) = (
                    self.items.get_mut(&index),
                    data.get("arguments").and_then(Value::as_str),
                ) {
                    full.clone_into(arguments);
                }
            }
            "response.output_item.done" => {
                let index = parsed.index(&self.provider, "output_index")?;
                let item = parsed.object(&self.provider, "item")?;
                self.items.insert(index, item_from_final(item));
            }
            "response.completed" => {
                self.read_response(parsed.object(&self.provider, "response")?, true);
                self.done = true;
            }
            "response.incomplete" => {
                let response = parsed.object(&self.provider, "response")?;
                self.read_response(response, true);
                let reason = response["incomplete_details"]["reason"]
                    .as_str()
                    .unwrap_or("unknown");
                self.incomplete = Some(reason.to_owned());
                self.done = true;
            }
            "response.failed" => {
                let error = &data["response"]["error"];
                let code = text_of(error, "code");
                return Err(ProviderError::Api {
                    provider: self.provider.clone(),
                    kind: if code.is_empty() {
                        "response.failed".to_owned()
                    } else {
                        clip(code, NAME_CHARS)
                    },
                    message: clip(text_of(error, "message"), QUOTE_CHARS),
                });
            }
            "error" => {
                // Documented flat (`code`, `message`) and observed nested under `error`: read both.
                let error = data.get("error").filter(|e| e.is_object()).unwrap_or(data);
                let kind = [text_of(error, "code"), text_of(error, "type")]
                    .into_iter()
                    .find(|k| !k.is_empty() && *k != "error")
                    .unwrap_or("error");
                return Err(ProviderError::Api {
                    provider: self.provider.clone(),
                    kind: clip(kind, NAME_CHARS),
                    message: clip(text_of(error, "message"), QUOTE_CHARS),
                });
            }
            _ => {}
        }
        Ok(())
    }

    fn done(&self) -> bool {
        self.done
    }

    fn finish(self: Box<Self>, eof: bool) -> Result<Response, ProviderError> {
        if eof && !self.done {
            return Err(ended_before(self.provider, "`response.completed`"));
        }
        let mut content = Vec::new();
        for item in self.items.into_values() {
            match item {
                Item::Message(text) if !text.is_empty() => content.push(Block::Text { text }),
                Item::Call {
                    call_id,
                    name,
                    arguments,
                } => {
                    content.push(Block::ToolUse {
                        id: call_id,
                        name,
                        input: parse_input(&arguments, json!({})),
                    });
                }
                Item::Reasoning(item) => content.push(Block::Reasoning {
                    provider: REASONING_TAG.to_owned(),
                    item,
                }),
                _ => {}
            }
        }
        let has_calls = content.iter().any(|b| matches!(b, Block::ToolUse { .. }));
        let stop_reason = match self.incomplete.as_deref() {
            Some("max_output_tokens") => StopReason::MaxTokens,
            Some("content_filter") => StopReason::Refusal,
            Some(other) => StopReason::Other(other.to_owned()),
            None if has_calls => StopReason::ToolUse,
            None => StopReason::EndTurn,
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
