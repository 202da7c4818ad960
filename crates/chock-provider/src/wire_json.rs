//! JSON helpers the three wire clients share: reading event data, tool input in both directions.
//!
//! The three formats differ in their events but agree on these small rules, so each rule is written
//! once: a tool's input is assembled from text fragments and parsed only at the end, and goes back to
//! the OpenAI formats as the string form.

use serde_json::Value;

use crate::error::ProviderError;
use crate::sse::SseEvent;

/// A `Decode` error of `provider`.
pub(crate) fn decode_error(provider: &str, what: &str, detail: impl Into<String>) -> ProviderError {
    ProviderError::Decode {
        provider: provider.to_owned(),
        what: what.to_owned(),
        detail: detail.into(),
    }
}

/// The `StreamBroken` error of a stream that reached its end before `terminal`, the event (or field)
/// its format ends a complete reply with: a reply cut short is never taken as whole.
pub(crate) fn ended_before(provider: String, terminal: &str) -> ProviderError {
    ProviderError::StreamBroken {
        provider,
        reason: format!("the stream ended before {terminal}"),
    }
}

/// The JSON data of one SSE event, or a `Decode` error naming the event and quoting its data.
pub(crate) fn event_json(provider: &str, event: &SseEvent) -> Result<Value, ProviderError> {
    serde_json::from_str(&event.data).map_err(|e| {
        // Chat Completions names no events: its data lines are chunks.
        let what = if event.event.is_empty() {
            "chunk".to_owned()
        } else {
            format!("`{}` event", event.event)
        };
        decode_error(provider, &what, format!("{e}: {}", event.data))
    })
}

/// The string at `key`, or `""` when it is missing or not a string (streams omit fields freely).
pub(crate) fn text_of<'v>(value: &'v Value, key: &str) -> &'v str {
    value.get(key).and_then(Value::as_str).unwrap_or("")
}

/// Tool input from its concatenated fragments: empty means `empty` (the start block's input, `{}`);
/// text that is not a JSON object is kept as a string so the tool can report it.
pub(crate) fn parse_input(json: &str, empty: Value) -> Value {
    if json.trim().is_empty() {
        return empty;
    }
    match serde_json::from_str::<Value>(json) {
        Ok(value @ Value::Object(_)) => value,
        _ => Value::String(json.to_owned()),
    }
}

/// Tool input as the OpenAI formats want it back: always the string form, never an object.
pub(crate) fn arguments_text(input: &Value) -> String {
    match input {
        Value::String(raw) => raw.clone(),
        other => other.to_string(),
    }
}
