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
