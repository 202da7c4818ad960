//! docs/log.md's event reference, generated from the payload types.
//!
//! The page holds the output of [`log_reference`] between two marker lines; the crate's test
//! compares them and fails when a type changed and the page did not (run the test with
//! `CHOCK_BLESS=1` to rewrite the page).

use serde_json::{Map, Value};

use crate::{EventData, EventKind};

/// The line before the generated reference in docs/log.md.
pub const BEGIN_MARK: &str =
    "<!-- BEGIN event reference: generated from crates/chock-protocol; do not edit -->";
/// The line after it.
pub const END_MARK: &str = "<!-- END event reference -->";

/// Whether events of `kind` carry the top-level `call_id` of the tool call they are about.
pub fn about_a_call(kind: EventKind) -> bool {
    matches!(
        kind,
        EventKind::ToolCall
            | EventKind::Decision
            | EventKind::ApprovalAsk
            | EventKind::ApprovalAnswer
            | EventKind::ToolResult
            | EventKind::CommandResult
            | EventKind::PluginCall
            | EventKind::SessionSpawn
            | EventKind::NetDecision
            | EventKind::NetConnect
    )
}

/// The event reference: for every kind, its description and a table of its `data` fields.
pub fn log_reference() -> String {
    let mut out = String::new();
    for &kind in EventKind::ALL {
        let schema = EventData::schema(kind);
        let root = schema.as_value();
        out.push_str(&format!("### `{kind}`\n\n"));
        if let Some(text) = description(root) {
            out.push_str(&text);
            if about_a_call(kind) {
                out.push_str(" Carries the `call_id` of its tool call.");
            }
            out.push_str("\n\n");
        }
        let durability = kind.durability();
        out.push_str(if durability.before_return() {
            "*Durable before `record` returns.* "
        } else {
            "*Grouped into a later sync.* "
        });
        out.push_str(durability.why());
        out.push_str("\n\n");
        render_type(&mut out, root);
    }
    out
}

/// The table of one type's fields (one per variant for a tagged enum), then those of every type
/// it names, each once.
pub(crate) fn render_type(out: &mut String, root: &Value) {
    render_type_except(out, root, &[]);
}

/// [`render_type`], leaving out the named types (documented on another page) and what only they
/// name.
pub(crate) fn render_type_except(out: &mut String, root: &Value, skip: &[&str]) {
    let defs = root
        .get("$defs")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    render_body(out, root, &defs);
    let mut named = Vec::new();
    collect_refs(root, &mut named);
    let mut shown = std::collections::BTreeSet::new();
    while let Some(name) = named.pop() {
        if !shown.insert(name.clone()) || skip.contains(&name.as_str()) {
            continue;
        }
        let Some(def) = defs.get(&name) else { continue };
        if strings_of(def).is_some() {
            values_list(out, &name, def);
            continue;
        }
        if def.get("properties").is_none() && def.get("oneOf").is_none() {
            continue;
        }
        out.push_str(&format!("`{name}`:\n\n"));
        render_body(out, def, &defs);
        collect_refs(def, &mut named);
    }
}

/// A struct's table, or for a tagged enum, one table per variant.
fn render_body(out: &mut String, schema: &Value, defs: &Map<String, Value>) {
    if let Some(variants) = schema.get("oneOf").and_then(Value::as_array)
        && variants.iter().all(|v| v.get("properties").is_some())
    {
        for variant in variants {
            let (tag, value) = tag_of(variant);
            out.push_str(&format!(
                "- `{tag}`: `{value}` — {}\n\n",
                description(variant).unwrap_or_default()
            ));
            table(out, variant, defs, Some(&tag));
        }
        return;
    }
    table(out, schema, defs, None);
}

/// The tag member of an internally tagged variant: the property with a `const`.
fn tag_of(variant: &Value) -> (String, String) {
    let props = variant.get("properties").and_then(Value::as_object);
    for (name, prop) in props.into_iter().flatten() {
        if let Some(value) = prop.get("const").and_then(Value::as_str) {
            return (name.clone(), value.to_string());
        }
    }
    ("?".into(), "?".into())
}

fn table(out: &mut String, schema: &Value, defs: &Map<String, Value>, skip: Option<&str>) {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        out.push_str("(no fields)\n\n");
        return;
    };
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let rows: Vec<_> = props
        .iter()
        .filter(|(n, _)| Some(n.as_str()) != skip)
        .collect();
    if rows.is_empty() {
        out.push_str("(no fields)\n\n");
        return;
    }
    out.push_str("| field | type | meaning |\n|---|---|---|\n");
    for (name, prop) in rows {
        let mut ty = type_name(prop, defs);
        if !required.contains(&name.as_str()) {
            ty.push_str(", optional");
        }
        let meaning = description(prop).unwrap_or_default().replace('\n', " ");
        out.push_str(&format!("| `{name}` | {ty} | {meaning} |\n"));
    }
    out.push('\n');
}

pub(crate) fn description(schema: &Value) -> Option<String> {
    schema.get("description").and_then(Value::as_str).map(|s| {
        s.replace('\n', " ")
            .replace('|', "\\|")
            .replace("[`", "`")
            .replace("`]", "`")
    })
}

/// A string enum whose values carry descriptions: one line per value.
fn values_list(out: &mut String, name: &str, def: &Value) {
    let Some(variants) = def.get("oneOf").and_then(Value::as_array) else {
        return; // a bare `enum`: its values are in the field's type, with nothing more to say
    };
    out.push_str(&format!("`{name}`:\n\n"));
    for v in variants {
        if let Some(value) = v.get("const").and_then(Value::as_str) {
            out.push_str(&format!(
                "- `{value}`: {}\n",
                description(v).unwrap_or_default()
            ));
        }
    }
    out.push('\n');
}

/// A short type for the table: `integer`, `string or null`, `array of string`, `Usage`, or the
/// values of a string enum.
fn type_name(schema: &Value, defs: &Map<String, Value>) -> String {
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        let name = r.rsplit('/').next().unwrap_or(r);
        return match defs.get(name) {
            Some(def) if def.get("properties").is_none() && def.get("oneOf").is_none() => {
                type_name(def, defs)
            }
            Some(def) if strings_of(def).is_some() => type_name(def, defs),
            _ => format!("`{name}`"),
        };
    }
    if let Some(values) = strings_of(schema) {
        return values
            .iter()
            .map(|v| format!("`{v}`"))
            .collect::<Vec<_>>()
            .join(", ");
    }
    if let Some(any) = schema.get("anyOf").and_then(Value::as_array) {
        return any
            .iter()
            .map(|s| type_name(s, defs))
            .collect::<Vec<_>>()
            .join(" or ");
    }
    match schema.get("type") {
        Some(Value::String(t)) if t == "array" => format!(
            "array of {}",
            schema
                .get("items")
                .map_or_else(|| "any".into(), |i| type_name(i, defs))
        ),
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) => {
            let names: Vec<String> = ts
                .iter()
                .filter_map(Value::as_str)
                .map(|t| {
                    if t == "array" {
                        format!(
                            "array of {}",
                            schema
                                .get("items")
                                .map_or_else(|| "any".into(), |i| type_name(i, defs))
                        )
                    } else {
                        t.to_string()
                    }
                })
                .collect();
            names.join(" or ")
        }
        _ => "any JSON".into(),
    }
}

/// The values of an enum of strings (`enum` or `oneOf` of `const`s).
fn strings_of(schema: &Value) -> Option<Vec<String>> {
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        return values
            .iter()
            .map(|v| v.as_str().map(str::to_string))
            .collect();
    }
    schema
        .get("oneOf")
        .and_then(Value::as_array)
        .and_then(|vs| {
            vs.iter()
                .map(|v| v.get("const").and_then(Value::as_str).map(str::to_string))
                .collect()
        })
}

fn collect_refs(schema: &Value, out: &mut Vec<String>) {
    match schema {
        Value::Object(map) => {
            if let Some(r) = map.get("$ref").and_then(Value::as_str) {
                out.push(r.rsplit('/').next().unwrap_or(r).to_string());
            }
            for (k, v) in map {
                if k != "$defs" {
                    collect_refs(v, out);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_refs(v, out)),
        _ => {}
    }
}
