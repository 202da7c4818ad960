//! One server's tools as Chock sees them: each definition hashed (name, description, input schema,
//! annotations: what the model is shown and what the annotations claim), checked against the hash
//! pinned when it was approved, and given the decision its act would get.

use chock_policy::{Action, Decision};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// One tool a server lists.
#[derive(Debug, Clone)]
pub struct ToolDef {
    /// Its name as the server gives it.
    pub name: String,
    /// Its description.
    pub description: String,
    /// Its input schema (a JSON object).
    pub input_schema: Value,
    /// Its annotations as given (or null).
    pub annotations: Value,
    /// The act a call is decided as (`mcp.<server>.tool.<escaped name>`).
    pub action: Action,
    /// The SHA-256 of the definition.
    pub hash: String,
}

/// Canonical JSON: object keys sorted at every level, so a hash does not depend on the order a
/// server happens to write them in.
fn canonical(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let mut out = serde_json::Map::new();
            for k in keys {
                out.insert(k.clone(), canonical(&map[k]));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

/// The SHA-256 of any serialisable value's canonical JSON.
pub fn hash_of(value: &Value) -> String {
    hex::encode(Sha256::digest(canonical(value).to_string().as_bytes()))
}

impl ToolDef {
    /// The definition of `tool` (rmcp's), for `server`. `None` for a tool whose name cannot be
    /// an act (empty).
    pub fn from_rmcp(server: &str, tool: &rmcp::model::Tool) -> Option<ToolDef> {
        let name = tool.name.to_string();
        let action = crate::names::tool_action(server, &name).ok()?;
        let description = tool.description.as_deref().unwrap_or("").to_string();
        let input_schema = Value::Object((*tool.input_schema).clone());
        let annotations = tool
            .annotations
            .as_ref()
            .and_then(|a| serde_json::to_value(a).ok())
            .unwrap_or(Value::Null);
        let hash = hash_of(&json!({
            "name": name,
            "description": description,
            "input_schema": input_schema,
            "annotations": annotations,
        }));
        Some(ToolDef {
            name,
            description,
            input_schema,
            annotations,
            action,
            hash,
        })
    }

    fn hint(&self, key: &str) -> Option<bool> {
        self.annotations.get(key).and_then(Value::as_bool)
    }

    /// Whether the server says the tool changes nothing (only ever used to be *stricter*
    /// elsewhere: a read-only claim never loosens a decision).
    pub fn claims_read_only(&self) -> bool {
        self.hint("readOnlyHint") == Some(true)
    }

    /// The floor the server's own annotations put under the table's decision: a tool that says
    /// it is destructive (and not read-only) is asked about at least. Annotations can only make
    /// a decision stricter: nothing here turns an `ask` into an `allow`.
    pub fn annotation_floor(&self) -> Option<(Decision, &'static str)> {
        (!self.claims_read_only() && self.hint("destructiveHint") == Some(true))
            .then_some((Decision::Ask, "the server marks it destructive"))
    }

    /// The decision a call would get: the table's verdict made stricter by the annotations.
    pub fn decision(&self, table: Decision) -> Decision {
        match self.annotation_floor() {
            Some((floor, _)) => table.stricter(floor),
            None => table,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[allow(clippy::needless_pass_by_value)]
    fn def(annotations: Value) -> ToolDef {
        let tool: rmcp::model::Tool = serde_json::from_value(json!({
            "name": "t",
            "description": "d",
            "inputSchema": {"type": "object", "properties": {"b": {}, "a": {}}},
            "annotations": annotations,
        }))
        .unwrap();
        ToolDef::from_rmcp("s", &tool).unwrap()
    }

    #[test]
    fn annotations_only_tighten() {
        assert_eq!(
            def(json!({"destructiveHint": true})).decision(Decision::Allow),
            Decision::Ask
        );
        assert_eq!(
            def(json!({"destructiveHint": true})).decision(Decision::Deny),
            Decision::Deny
        );
        assert_eq!(
            def(json!({"readOnlyHint": true})).decision(Decision::Ask),
            Decision::Ask
        );
        assert_eq!(def(json!({})).decision(Decision::Allow), Decision::Allow);
    }

    #[test]
    fn the_hash_covers_the_definition_not_key_order() {
        let a = def(json!({}));
        let b = def(json!({"destructiveHint": false}));
        assert_ne!(a.hash, b.hash);
        assert_eq!(
            hash_of(&json!({"x": 1, "y": [1, {"b": 2, "a": 1}]})),
            hash_of(&json!({"y": [1, {"a": 1, "b": 2}], "x": 1}))
        );
    }
}
