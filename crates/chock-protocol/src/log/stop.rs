//! [`StopReason`]: why the model stopped, as `model.response` and the live `model_response` say.

use std::borrow::Cow;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Why the model stopped a reply. On the wire one string: `end_turn`, `tool_use`, `max_tokens`,
/// `stop_sequence`, `refusal`, `pause_turn`, or whatever else the provider said, kept verbatim.
/// Clients read it through this type, never by comparing the string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    /// The model finished its turn.
    EndTurn,
    /// The model wants tool results.
    ToolUse,
    /// The output hit its token limit.
    MaxTokens,
    /// A stop sequence matched.
    StopSequence,
    /// The model refused, or a content filter stopped it.
    Refusal,
    /// The provider asks for the turn to be sent back so it can continue.
    PauseTurn,
    /// Anything else the provider said.
    Other(String),
}

impl StopReason {
    /// The wire form.
    pub fn as_str(&self) -> &str {
        match self {
            StopReason::EndTurn => "end_turn",
            StopReason::ToolUse => "tool_use",
            StopReason::MaxTokens => "max_tokens",
            StopReason::StopSequence => "stop_sequence",
            StopReason::Refusal => "refusal",
            StopReason::PauseTurn => "pause_turn",
            StopReason::Other(word) => word,
        }
    }

    /// Reads the wire form (any other word is [`StopReason::Other`]).
    pub fn parse(text: &str) -> StopReason {
        match text {
            "end_turn" => StopReason::EndTurn,
            "tool_use" => StopReason::ToolUse,
            "max_tokens" => StopReason::MaxTokens,
            "stop_sequence" => StopReason::StopSequence,
            "refusal" => StopReason::Refusal,
            "pause_turn" => StopReason::PauseTurn,
            other => StopReason::Other(other.to_string()),
        }
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for StopReason {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for StopReason {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = Cow::<'de, str>::deserialize(deserializer)?;
        Ok(StopReason::parse(&text))
    }
}

impl schemars::JsonSchema for StopReason {
    fn schema_name() -> Cow<'static, str> {
        "StopReason".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "Why the model stopped: `end_turn`, `tool_use`, `max_tokens`, \
                `stop_sequence`, `refusal`, `pause_turn`, or the provider's own word verbatim."
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_stop_reason_keeps_its_wire_form() {
        for (reason, wire) in [
            (StopReason::EndTurn, "end_turn"),
            (StopReason::ToolUse, "tool_use"),
            (StopReason::MaxTokens, "max_tokens"),
            (StopReason::StopSequence, "stop_sequence"),
            (StopReason::Refusal, "refusal"),
            (StopReason::PauseTurn, "pause_turn"),
            (StopReason::Other("content_filter".into()), "content_filter"),
        ] {
            let json = serde_json::to_value(&reason).unwrap();
            assert_eq!(json, serde_json::json!(wire));
            assert_eq!(serde_json::from_value::<StopReason>(json).unwrap(), reason);
        }
    }
}
