//! JSON helpers the three wire clients share: reading event data, tool input in both directions.
//!
//! The three formats differ in their events but agree on these small rules, so each rule is written
//! once: a tool's input is assembled from text fragments and parsed only at the end, and goes back to
//! the OpenAI formats as the string form.

use serde_json::Value;

use crate::error::{ProviderError, StreamFault};
use crate::sse::SseEvent;

/// The most characters of something a server sent (an event, an error body, its message) that an error
/// message quotes: enough to recognise it, and a 10 KB event (a `response.created` echoing the request's
/// tool list) does not flood the screen and the log.
pub(crate) const QUOTE_CHARS: usize = 160;

/// The most characters of a server-chosen name (an event name, an error type or code) an error shows.
pub(crate) const NAME_CHARS: usize = 48;

/// `text` cut to its first `max_chars` characters (so on a char boundary), followed by an ellipsis and the
/// whole length when anything was cut. The one way an error quotes what a server sent.
pub(crate) fn clip(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        None => text.to_owned(),
        Some((cut, _)) => format!("{}… ({} bytes)", &text[..cut], text.len()),
    }
}

/// The `StreamBroken` error of a stream that reached its end before `terminal`, the event (or field)
/// its format ends a complete reply with: a reply cut short is never taken as whole.
pub(crate) fn ended_before(provider: String, terminal: &str) -> ProviderError {
    ProviderError::StreamBroken {
        provider,
        fault: StreamFault::Cut(format!("the stream ended before {terminal}")),
    }
}

/// One event's data, parsed: a JSON object, as every event of the three formats is (Chat's `[DONE]` is
/// handled before parsing). The raw text is kept for the error that quotes it.
#[derive(Debug)]
pub(crate) struct EventData<'e> {
    /// The event as an error names it: `` `content_block_delta` event``, or `chunk` when unnamed.
    what: String,
    raw: &'e str,
    /// The parsed object.
    pub(crate) json: Value,
}

impl<'e> EventData<'e> {
    /// Parses `event`'s data; data that is not JSON, or JSON that is not an object, is a malformed event.
    pub(crate) fn parse(provider: &str, event: &'e SseEvent) -> Result<Self, ProviderError> {
        let name = |name: &str| format!("`{}` event", clip(name, NAME_CHARS));
        let mut data = EventData {
            // Chat Completions names no events: its data lines are chunks.
            what: if event.event.is_empty() {
                "chunk".to_owned()
            } else {
                name(&event.event)
            },
            raw: &event.data,
            json: Value::Null,
        };
        match serde_json::from_str::<Value>(&event.data) {
            Ok(json @ Value::Object(_)) => {
                if event.event.is_empty()
                    && let Some(kind) = json.get("type").and_then(Value::as_str)
                {
                    data.what = name(kind);
                }
                data.json = json;
                Ok(data)
            }
            Ok(_) => Err(data.malformed(provider, "not a JSON object")),
            Err(e) if e.classify() == serde_json::error::Category::Eof => {
                Err(data.malformed(provider, "not JSON (cut off)"))
            }
            Err(e) => Err(data.malformed(
                provider,
                format!("not JSON (line {} column {})", e.line(), e.column()),
            )),
        }
    }

    /// The error for this event lacking the shape its format requires: `problem` says what is wrong.
    pub(crate) fn malformed(&self, provider: &str, problem: impl Into<String>) -> ProviderError {
        ProviderError::StreamBroken {
            provider: provider.to_owned(),
            fault: StreamFault::Malformed {
                what: self.what.clone(),
                problem: problem.into(),
                quote: clip(self.raw, QUOTE_CHARS),
            },
        }
    }

    /// The object at `key`, which the format requires.
    pub(crate) fn object(&self, provider: &str, key: &str) -> Result<&Value, ProviderError> {
        self.json
            .get(key)
            .filter(|v| v.is_object())
            .ok_or_else(|| self.malformed(provider, format!("no `{key}` object")))
    }

    /// The string at `key`, which the format requires.
    pub(crate) fn string(&self, provider: &str, key: &str) -> Result<&str, ProviderError> {
        self.json
            .get(key)
            .and_then(Value::as_str)
            .ok_or_else(|| self.malformed(provider, format!("no `{key}` string")))
    }

    /// The index at `key` (`index`, `output_index`), which the format requires.
    pub(crate) fn index(&self, provider: &str, key: &str) -> Result<u64, ProviderError> {
        self.json
            .get(key)
            .and_then(Value::as_u64)
            .ok_or_else(|| self.malformed(provider, format!("no `{key}`")))
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn event(name: &str, data: &str) -> SseEvent {
        SseEvent {
            event: name.to_owned(),
            data: data.to_owned(),
        }
    }

    fn fault(result: Result<EventData<'_>, ProviderError>) -> StreamFault {
        match result {
            Err(ProviderError::StreamBroken { fault, .. }) => fault,
            other => panic!("expected a broken stream, got {other:?}"),
        }
    }

    #[test]
    fn clip_keeps_short_text_and_cuts_long_text_on_a_char_boundary() {
        assert_eq!(clip("short", 10), "short");
        assert_eq!(clip("exactly10!", 10), "exactly10!");
        assert_eq!(clip("abcdefghijk", 10), "abcdefghij… (11 bytes)");
        // Multi-byte characters are counted as characters and never split.
        let text = "é".repeat(300);
        let clipped = clip(&text, 200);
        assert_eq!(clipped, format!("{}… (600 bytes)", "é".repeat(200)));
    }

    #[test]
    fn an_event_that_is_not_a_json_object_is_malformed_and_quoted_clipped() {
        let long = format!("{{\"type\":\"x\",\"pad\":\"{}", "a".repeat(10_000));
        let StreamFault::Malformed {
            what,
            problem,
            quote,
        } = fault(EventData::parse("p", &event("content_block_delta", &long)))
        else {
            panic!("malformed")
        };
        assert_eq!(what, "`content_block_delta` event");
        assert_eq!(problem, "not JSON (cut off)");
        assert_eq!(quote, clip(&long, QUOTE_CHARS));
        assert!(
            quote.ends_with(&format!("… ({} bytes)", long.len())),
            "{quote}"
        );

        let array = fault(EventData::parse("p", &event("", "[1, 2]")));
        assert!(
            matches!(&array, StreamFault::Malformed { what, problem, .. } if what == "chunk" && problem == "not a JSON object"),
            "{array:?}"
        );
        let garbage = fault(EventData::parse("p", &event("", "{\"a\": 1} trailing")));
        assert!(
            matches!(&garbage, StreamFault::Malformed { problem, .. } if problem == "not JSON (line 1 column 10)"),
            "{garbage:?}"
        );
    }

    #[test]
    fn an_unnamed_event_is_named_by_its_type_and_required_fields_are_checked() {
        let sse = event("", r#"{"type":"content_block_delta","delta":"x"}"#);
        let data = EventData::parse("p", &sse).expect("an object");
        let missing = data.index("p", "index").expect_err("no index");
        assert_eq!(
            missing.to_string(),
            format!(
                "p: the stream broke: malformed `content_block_delta` event: no `index`: {}",
                sse.data
            )
        );
        assert!(data.object("p", "delta").is_err());
        assert_eq!(data.string("p", "delta").expect("a string"), "x");
    }
}
