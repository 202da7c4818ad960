//! How a tool call is shown: each tool describes its own calls ([`ToolDisplay`]), so no client
//! matches tool names to title them, pick an icon, or find the file a call reads.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a tool call is, for a client's icon.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    /// Reads files or output.
    Read,
    /// Changes files (in the session's workspace).
    Edit,
    /// Searches files.
    Search,
    /// Runs a command.
    Execute,
    /// Reaches the network.
    Fetch,
    /// Plans or reasons.
    Think,
    /// Anything else.
    #[default]
    Other,
}

/// A tool call described by its tool: a title, a kind, and the project paths it reads.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ToolDisplay {
    /// One line for people (raw: a client escapes it before showing it).
    pub title: String,
    /// What it is.
    pub kind: ToolKind,
    /// Paths relative to the project that the call reads (a write lands in the session's copy,
    /// not the project, so it names none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub locations: Vec<String>,
}

impl ToolDisplay {
    /// A call of a tool that says nothing more of itself: its name, kind other.
    pub fn named(tool: &str) -> ToolDisplay {
        ToolDisplay {
            title: tool.to_string(),
            kind: ToolKind::Other,
            locations: Vec::new(),
        }
    }

    /// A call titled `title`, of kind `kind`.
    pub fn new(title: impl Into<String>, kind: ToolKind) -> ToolDisplay {
        ToolDisplay {
            title: title.into(),
            kind,
            locations: Vec::new(),
        }
    }

    /// With `path` (relative to the project) as a location, when it stays inside the project.
    pub fn reading(mut self, path: &str) -> ToolDisplay {
        let inside = !path.is_empty()
            && std::path::Path::new(path).components().all(|c| {
                matches!(
                    c,
                    std::path::Component::Normal(_) | std::path::Component::CurDir
                )
            });
        if inside {
            self.locations.push(path.to_string());
        }
        self
    }
}

/// The first line of `input`'s string field `name`, at most 160 characters (`…` when cut): what a
/// title quotes of a call's input.
pub fn input_field(input: &Value, name: &str) -> String {
    let text = input.get(name).and_then(Value::as_str).unwrap_or("");
    let line = text.lines().next().unwrap_or("");
    let mut out: String = line.chars().take(160).collect();
    if out.len() < line.len() || text.lines().nth(1).is_some() {
        out.push('…');
    }
    out
}

/// A tool's input in one short line for a person watching: its fields but the long ones (file
/// contents, an edit's old and new text), at most 100 characters. One place, so every interface
/// shows a call the same way.
pub fn input_line(value: &serde_json::Value) -> String {
    let text = match value {
        serde_json::Value::Object(map) => map
            .iter()
            .filter(|(k, _)| !matches!(k.as_str(), "content" | "new" | "old"))
            .map(|(k, v)| {
                format!(
                    "{k}={}",
                    v.as_str().map_or_else(|| v.to_string(), str::to_string)
                )
            })
            .collect::<Vec<_>>()
            .join(" "),
        other => other.to_string(),
    };
    let text = text.replace('\n', " ");
    if text.chars().count() > 100 {
        text.chars().take(100).collect::<String>() + "…"
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_location_is_only_a_path_inside_the_project() {
        let d = ToolDisplay::new("Read", ToolKind::Read);
        assert_eq!(d.clone().reading("src/a.rs").locations, ["src/a.rs"]);
        assert!(d.clone().reading("../out").locations.is_empty());
        assert!(d.clone().reading("/etc/passwd").locations.is_empty());
        assert!(d.reading("").locations.is_empty());
    }

    #[test]
    fn a_quoted_field_is_one_line_of_at_most_160_characters() {
        assert_eq!(input_field(&json!({"c": "echo a\necho b"}), "c"), "echo a…");
        assert_eq!(
            input_field(&json!({"c": "x".repeat(200)}), "c")
                .chars()
                .count(),
            161
        );
        assert_eq!(input_field(&json!({}), "c"), "");
    }
}
