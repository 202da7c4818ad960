//! A tool's input schema, derived from its input type, as providers take it, and the check of a
//! model's input against it.
//!
//! The schema the model is offered is `schemars::schema_for!(Input)` passed through
//! [`for_provider`]: the same type that parses the input describes it, so the two cannot drift.
//! [`check`] then refuses an input that does not fit the advertised schema, naming the field, before
//! serde parses it (serde stays the last word; the check is what makes the refusal name the field).

use std::fmt;

use serde_json::{Map, Value};

/// A schema as providers take it (Anthropic's `input_schema`, OpenAI's `parameters`): a plain
/// object schema with no `$schema`, no titles, no `$defs` (every `$ref` inlined), no integer
/// `format`s of Rust's own (`uint`, `int64`, …), and `properties` present on the root object.
pub fn for_provider(schema: schemars::Schema) -> Value {
    let mut root = schema.to_value();
    let defs = root
        .as_object_mut()
        .and_then(|o| o.remove("$defs"))
        .and_then(|d| d.as_object().cloned())
        .unwrap_or_default();
    if let Some(object) = root.as_object_mut() {
        object.remove("$schema");
        // The struct's own doc comment: the tool's description says it to the model instead.
        object.remove("description");
    }
    let mut value = tidy(root, &defs, 0);
    if let Some(object) = value.as_object_mut()
        && object.get("type").and_then(Value::as_str) == Some("object")
    {
        object
            .entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
    }
    value
}

/// How deep `$ref`s are followed: a recursive type would otherwise never end.
const MAX_DEPTH: usize = 32;

fn tidy(value: Value, defs: &Map<String, Value>, depth: usize) -> Value {
    match value {
        Value::Object(mut object) => {
            if let Some(target) = object.get("$ref").and_then(Value::as_str)
                && let Some(def) = target
                    .strip_prefix("#/$defs/")
                    .and_then(|name| defs.get(name))
                && depth < MAX_DEPTH
            {
                let mut inlined = tidy(def.clone(), defs, depth + 1);
                object.remove("$ref");
                // Keywords beside the `$ref` (a field's description) win over the definition's.
                if let Value::Object(target) = &mut inlined {
                    for (k, v) in object {
                        target.insert(k, tidy(v, defs, depth));
                    }
                }
                return inlined;
            }
            object.remove("title");
            if object
                .get("format")
                .and_then(Value::as_str)
                .is_some_and(is_rust_number_format)
            {
                object.remove("format");
            }
            Value::Object(
                object
                    .into_iter()
                    .map(|(k, v)| {
                        // `properties` maps names to schemas; its keys are not keywords.
                        if k == "properties"
                            && let Value::Object(props) = v
                        {
                            let props = props
                                .into_iter()
                                .map(|(name, s)| (name, tidy(s, defs, depth)))
                                .collect();
                            return (k, Value::Object(props));
                        }
                        let v = tidy(v, defs, depth);
                        (k, v)
                    })
                    .collect(),
            )
        }
        Value::Array(items) => {
            Value::Array(items.into_iter().map(|v| tidy(v, defs, depth)).collect())
        }
        other => other,
    }
}

fn is_rust_number_format(format: &str) -> bool {
    matches!(format, "float" | "double")
        || ["int", "uint"].iter().any(|p| {
            format
                .strip_prefix(p)
                .is_some_and(|rest| rest.chars().all(|c| c.is_ascii_digit()))
        })
}

/// What is wrong with one field of an input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldProblem {
    /// A required field is absent.
    Missing,
    /// The value is of another JSON type.
    WrongType {
        /// The type(s) the schema allows (`integer`, `string or null`).
        expected: String,
        /// The type given.
        got: &'static str,
    },
    /// The value is not one of the schema's `enum`.
    NotOneOf {
        /// The allowed values, as JSON.
        allowed: Vec<String>,
    },
    /// A number under the schema's `minimum`.
    TooSmall {
        /// The minimum.
        minimum: String,
    },
    /// A number over the schema's `maximum`.
    TooLarge {
        /// The maximum.
        maximum: String,
    },
    /// The value fits none of the schema's alternatives (`anyOf` / `oneOf`).
    NoAlternative,
}

impl fmt::Display for FieldProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FieldProblem::Missing => f.write_str("is required and missing"),
            FieldProblem::WrongType { expected, got } => {
                write!(f, "must be {expected}, not {got}")
            }
            FieldProblem::NotOneOf { allowed } => {
                write!(f, "must be one of {}", allowed.join(", "))
            }
            FieldProblem::TooSmall { minimum } => write!(f, "must be at least {minimum}"),
            FieldProblem::TooLarge { maximum } => write!(f, "must be at most {maximum}"),
            FieldProblem::NoAlternative => f.write_str("fits none of the allowed shapes"),
        }
    }
}

/// The first place where `value` does not fit `schema`: the field's path (`steps[0].status`; empty
/// for the input itself) and the problem. Keywords other than `type`, `enum`, `minimum`,
/// `maximum`, `properties`, `required`, `items`, `anyOf` and `oneOf` are not checked here (the
/// parser still is).
pub fn check(schema: &Value, value: &Value) -> Result<(), (String, FieldProblem)> {
    let mut path = String::new();
    check_at(schema, value, &mut path).map_err(|problem| (path, problem))
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn type_fits(allowed: &str, got: &str) -> bool {
    allowed == got || (allowed == "number" && got == "integer")
}

fn check_at(schema: &Value, value: &Value, path: &mut String) -> Result<(), FieldProblem> {
    let Some(schema) = schema.as_object() else {
        return Ok(());
    };
    if let Some(types) = schema.get("type") {
        let allowed: Vec<&str> = match types {
            Value::String(t) => vec![t.as_str()],
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        let got = json_type(value);
        if !allowed.is_empty() && !allowed.iter().any(|t| type_fits(t, got)) {
            return Err(FieldProblem::WrongType {
                expected: allowed.join(" or "),
                got,
            });
        }
    }
    if let Some(Value::Array(options)) = schema.get("enum")
        && !options.contains(value)
    {
        return Err(FieldProblem::NotOneOf {
            allowed: options.iter().map(Value::to_string).collect(),
        });
    }
    if let Some(n) = value.as_f64() {
        if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
            && n < min
        {
            return Err(FieldProblem::TooSmall {
                minimum: schema["minimum"].to_string(),
            });
        }
        if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
            && n > max
        {
            return Err(FieldProblem::TooLarge {
                maximum: schema["maximum"].to_string(),
            });
        }
    }
    if let Some(constant) = schema.get("const")
        && constant != value
    {
        return Err(FieldProblem::NotOneOf {
            allowed: vec![constant.to_string()],
        });
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(alternatives)) = schema.get(key)
            && !alternatives
                .iter()
                .any(|alt| check_at(alt, value, &mut path.clone()).is_ok())
        {
            // An enum whose variants carry descriptions is a `oneOf` of constants.
            let constants: Option<Vec<String>> = alternatives
                .iter()
                .map(|alt| alt.get("const").map(Value::to_string))
                .collect();
            return Err(match constants {
                Some(allowed) => FieldProblem::NotOneOf { allowed },
                None => FieldProblem::NoAlternative,
            });
        }
    }
    if let Value::Object(fields) = value {
        if let Some(Value::Array(required)) = schema.get("required") {
            for name in required.iter().filter_map(Value::as_str) {
                if !fields.contains_key(name) {
                    push_field(path, name);
                    return Err(FieldProblem::Missing);
                }
            }
        }
        if let Some(Value::Object(properties)) = schema.get("properties") {
            for (name, field) in fields {
                if let Some(field_schema) = properties.get(name) {
                    let len = path.len();
                    push_field(path, name);
                    check_at(field_schema, field, path)?;
                    path.truncate(len);
                }
            }
        }
    }
    if let (Value::Array(items), Some(item_schema)) = (value, schema.get("items")) {
        for (i, item) in items.iter().enumerate() {
            let len = path.len();
            path.push_str(&format!("[{i}]"));
            check_at(item_schema, item, path)?;
            path.truncate(len);
        }
    }
    Ok(())
}

fn push_field(path: &mut String, name: &str) {
    if !path.is_empty() {
        path.push('.');
    }
    path.push_str(name);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[allow(dead_code)]
    struct Inner {
        /// A count.
        #[schemars(range(min = 1, max = 5))]
        n: u32,
        kind: Kind,
    }

    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[serde(rename_all = "snake_case")]
    #[allow(dead_code)]
    enum Kind {
        One,
        TwoWords,
    }

    /// The outer type.
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[allow(dead_code)]
    struct Outer {
        /// The name.
        name: String,
        #[serde(default)]
        items: Vec<Inner>,
        #[serde(default)]
        size: Option<u64>,
    }

    #[test]
    fn the_provider_form_inlines_definitions_and_drops_what_providers_refuse() {
        let schema = for_provider(schemars::schema_for!(Outer));
        let text = schema.to_string();
        for absent in [
            "$schema",
            "$defs",
            "$ref",
            "title",
            "uint",
            "The outer type",
        ] {
            assert!(!text.contains(absent), "{absent} in {text}");
        }
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["required"], json!(["name"]));
        assert_eq!(schema["properties"]["name"]["description"], "The name.");
        let item = &schema["properties"]["items"]["items"];
        assert_eq!(item["properties"]["n"]["minimum"], 1);
        assert_eq!(
            item["properties"]["kind"]["enum"],
            json!(["one", "two_words"])
        );
    }

    #[test]
    fn a_misfit_names_its_field_and_the_problem() {
        let schema = for_provider(schemars::schema_for!(Outer));
        let misfit = |value: Value| check(&schema, &value).unwrap_err();
        assert_eq!(misfit(json!({})), ("name".into(), FieldProblem::Missing));
        assert_eq!(
            misfit(json!({"name": 3})).0,
            "name",
            "a number where a string is due"
        );
        let (field, problem) = misfit(json!({"name": "x", "items": [{"n": 9, "kind": "one"}]}));
        assert_eq!(field, "items[0].n");
        assert_eq!(problem.to_string(), "must be at most 5");
        let (field, problem) = misfit(json!({"name": "x", "items": [{"n": 1, "kind": "three"}]}));
        assert_eq!(field, "items[0].kind");
        assert_eq!(problem.to_string(), r#"must be one of "one", "two_words""#);
        let (field, problem) = misfit(json!("text"));
        assert_eq!(field, "");
        assert_eq!(problem.to_string(), "must be object, not string");
        assert!(check(&schema, &json!({"name": "x", "size": null})).is_ok());
        assert!(check(&schema, &json!({"name": "x", "extra": true})).is_ok());
    }
}
