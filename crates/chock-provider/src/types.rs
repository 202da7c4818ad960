//! Neutral conversation types shared by every provider.
//!
//! The agent speaks only these types; each wire client translates them to and from its own format.
//! They serialise (serde) so the agent can write requests and replies into the session log as they are.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One model call: everything a provider needs to produce the next assistant turn.
///
/// Build it with struct-update syntax over `Request::default()` so new optional fields do not break callers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Request {
    /// The provider's model id, for example `claude-sonnet-4-5` or `gpt-5`.
    pub model: String,
    /// The system prompt. Anthropic takes it top level, Responses as `instructions`, Chat as a `system` message.
    pub system: Option<String>,
    /// The conversation so far, oldest first, ending with a user message.
    pub messages: Vec<Message>,
    /// The tools the model may call.
    pub tools: Vec<ToolSpec>,
    /// Upper bound on the reply's output tokens (thinking included). 0 means the provider's default
    /// (Anthropic, which requires a value, gets 8192; the OpenAI formats get none).
    pub max_tokens: u32,
    /// Anthropic extended thinking budget in tokens (≥ 1024 and below `max_tokens`); `None` leaves thinking off.
    pub thinking_budget: Option<u32>,
    /// OpenAI reasoning effort (`minimal`, `low`, `medium`, `high`); `None` leaves the server default.
    pub reasoning_effort: Option<String>,
    /// Sampling temperature; `None` leaves the server default (reasoning models reject it).
    pub temperature: Option<f32>,
}

/// Who said a message. Tool results travel in a `User` message, as in the Anthropic API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The person (or the harness speaking for tools).
    User,
    /// The model.
    Assistant,
}

/// One message of the conversation: a role and its blocks in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who said it.
    pub role: Role,
    /// What was said, in the order it was said.
    pub content: Vec<Block>,
}

impl Message {
    /// A user message holding one text block.
    pub fn user_text(text: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            content: vec![Block::Text { text: text.into() }],
        }
    }

    /// An assistant message holding the given blocks (typically a `Response::content`).
    pub fn assistant(content: Vec<Block>) -> Self {
        Self {
            role: Role::Assistant,
            content,
        }
    }
}

/// A piece of a message.
///
/// `Thinking` and `Reasoning` blocks must be sent back unmodified with the assistant turn they came in:
/// Anthropic checks thinking signatures during tool loops, and OpenAI's stateless Responses mode needs the
/// encrypted reasoning item before its function call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Block {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// A tool call by the model.
    ToolUse {
        /// The id that the matching `ToolResult` must name (Anthropic `toolu_…`, OpenAI `call_…`).
        id: String,
        /// The tool's name.
        name: String,
        /// The arguments: a JSON object. If the model produced text that is not valid JSON, this holds that
        /// text as a JSON string, so the tool can answer with an error the model can read.
        input: Value,
    },
    /// The harness's answer to a `ToolUse`.
    ToolResult {
        /// The `ToolUse::id` this answers.
        tool_use_id: String,
        /// What the tool returned (or why it failed).
        content: String,
        /// True when the call failed or was refused.
        is_error: bool,
    },
    /// Visible model reasoning (Anthropic thinking, or `reasoning_content` of compatible servers).
    Thinking {
        /// The reasoning text.
        thinking: String,
        /// Anthropic's signature over the block; empty when the provider gives none.
        signature: String,
    },
    /// Anthropic's redacted thinking: opaque data that must be sent back as is.
    RedactedThinking {
        /// The opaque payload.
        data: String,
    },
    /// An opaque provider item to echo back as is (OpenAI Responses `reasoning` items with `encrypted_content`).
    Reasoning {
        /// Which wire format produced it (`openai-responses`); other providers drop it when sending.
        provider: String,
        /// The item exactly as the provider finished it.
        item: Value,
    },
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The tool's name, as the model will call it.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// A JSON Schema object for the input.
    pub input_schema: Value,
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model finished its turn.
    EndTurn,
    /// The model wants tool results (derived from the calls present, not only from the provider's flag).
    ToolUse,
    /// The output hit `max_tokens`.
    MaxTokens,
    /// A stop sequence matched.
    StopSequence,
    /// The model refused, or a content filter stopped it.
    Refusal,
    /// Anthropic asks the caller to send the turn back so it can continue.
    PauseTurn,
    /// Anything else the provider said, kept verbatim.
    Other(String),
}

/// Token counts of one reply, normalised across providers.
///
/// `input_tokens` counts only input billed at the base rate: tokens read from the cache are in
/// `cache_read_tokens`, tokens written to it in `cache_write_tokens` (OpenAI's `input_tokens` includes
/// cached tokens; the OpenAI clients subtract them). `reasoning_tokens` is already included in
/// `output_tokens` and is informational.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Uncached input tokens.
    pub input_tokens: u64,
    /// Output tokens, thinking and reasoning included.
    pub output_tokens: u64,
    /// Input tokens served from the prompt cache.
    pub cache_read_tokens: u64,
    /// Input tokens written to the prompt cache.
    pub cache_write_tokens: u64,
    /// Of `output_tokens`, those spent on hidden reasoning (OpenAI).
    pub reasoning_tokens: u64,
}

impl Usage {
    /// Adds another reply's usage to this one (for session totals).
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
        self.reasoning_tokens += other.reasoning_tokens;
    }
}

/// A complete assistant turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response {
    /// The blocks in order: append them to the conversation as `Message::assistant(content)`.
    pub content: Vec<Block>,
    /// Why the model stopped.
    pub stop_reason: StopReason,
    /// Token counts.
    pub usage: Usage,
    /// The model that answered, as the provider reported it (may carry a date suffix).
    pub model: String,
    /// The provider's id for this reply (`msg_…`, `resp_…`, `chatcmpl-…`), when it gave one.
    pub id: Option<String>,
}

impl Response {
    /// The tool calls in this reply, in order: `(id, name, input)`.
    pub fn tool_calls(&self) -> impl Iterator<Item = (&str, &str, &Value)> {
        self.content.iter().filter_map(|b| match b {
            Block::ToolUse { id, name, input } => Some((id.as_str(), name.as_str(), input)),
            _ => None,
        })
    }

    /// All text blocks joined, for summaries.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for block in &self.content {
            if let Block::Text { text } = block {
                out.push_str(text);
            }
        }
        out
    }
}

/// Something that happened while a reply streamed in. The final `Response` is authoritative; these are
/// for showing progress and for the log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", content = "data", rename_all = "snake_case")]
#[non_exhaustive]
pub enum StreamEvent {
    /// More reply text.
    TextDelta(String),
    /// More visible reasoning text.
    ThinkingDelta(String),
    /// The model started a tool call; its input is still streaming.
    ToolCallStarted {
        /// The call id.
        id: String,
        /// The tool's name.
        name: String,
    },
    /// The request failed in a way worth another try and will be sent again after `wait`.
    /// Any deltas already shown belong to the abandoned attempt: the next attempt starts the reply over.
    /// The agent records this as a `model.retry` event.
    Retrying {
        /// The attempt that failed (1-based).
        attempt: u32,
        /// How long the client waits before the next attempt.
        wait: Duration,
        /// Why (status, error type, or how the stream broke).
        reason: String,
    },
}
