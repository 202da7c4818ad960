//! The JSON Schema of the client-facing protocol: the live events and the operations.

use serde_json::json;

use crate::PROTOCOL_VERSION;
use crate::live::AgentEvent;
use crate::ops::Op;

/// One JSON Schema document with the live events (`event`) and the operations (`op`), stamped
/// with [`PROTOCOL_VERSION`]. `chock protocol schema` prints it.
pub fn client_schema() -> serde_json::Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "chock session protocol",
        "version": PROTOCOL_VERSION,
        "event": schemars::schema_for!(AgentEvent),
        "op": schemars::schema_for!(Op),
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_client_schema_names_every_live_event_and_operation() {
        let schema = super::client_schema();
        assert_eq!(schema["version"], crate::PROTOCOL_VERSION);
        let text = schema.to_string();
        for name in [
            "session_started",
            "turn_started",
            "approval_asked",
            "session_ended",
        ] {
            assert!(text.contains(name), "{name}");
        }
        for op in ["user_input", "interrupt", "answer", "restrict", "end"] {
            assert!(text.contains(op), "{op}");
        }
    }
}
