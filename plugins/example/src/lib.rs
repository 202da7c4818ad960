//! An example Chock plugin: two tools over the session's workspace copy.
//!
//! - `count {"path"}`: the lines, words and bytes of a file (imports `workspace-read`: `fs.read`).
//! - `save {"path", "text"}`: writes `text` to a file (imports `workspace-write`: `fs.write`).
//! - `tally {"path"}`: the file's most frequent word, counted in a `HashMap` (whose hasher std seeds
//!   from `wasi:random`) and timed with `Instant` (`wasi:clocks`): what ordinary Rust reaches for.
//!
//! Its input is parsed by hand to keep the plugin small; a real plugin would use serde_json.

wit_bindgen::generate!({
    world: "plugin",
    path: "../../crates/chock-plugin/wit",
});

use chock::plugin::log::{Level, log};
use chock::plugin::{workspace_read, workspace_write};

struct Example;

impl Guest for Example {
    fn tools() -> Vec<Tool> {
        vec![
            Tool {
                name: "count".into(),
                description: "Counts the lines, words and bytes of one file of the workspace.".into(),
                input_schema: r#"{"type":"object","properties":{"path":{"type":"string","description":"The file, relative to the project root."}},"required":["path"]}"#.into(),
            },
            Tool {
                name: "save".into(),
                description: "Writes text to one file of the workspace.".into(),
                input_schema: r#"{"type":"object","properties":{"path":{"type":"string"},"text":{"type":"string"}},"required":["path","text"]}"#.into(),
            },
            Tool {
                name: "tally".into(),
                description: "The most frequent word of one file of the workspace, and how long counting took.".into(),
                input_schema: r#"{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}"#.into(),
            },
        ]
    }

    fn call(name: String, input: String) -> Result<String, String> {
        match name.as_str() {
            "count" => {
                let path = field(&input, "path")?;
                log(Level::Info, &format!("counting {path}"));
                let bytes = workspace_read::read_file(&path)?;
                let text = String::from_utf8_lossy(&bytes);
                Ok(format!(
                    "{path}: {} lines, {} words, {} bytes",
                    text.lines().count(),
                    text.split_whitespace().count(),
                    bytes.len()
                ))
            }
            "save" => {
                let path = field(&input, "path")?;
                let text = field(&input, "text")?;
                workspace_write::write_file(&path, text.as_bytes())?;
                Ok(format!("saved {} bytes to {path}", text.len()))
            }
            "tally" => {
                let path = field(&input, "path")?;
                let bytes = workspace_read::read_file(&path)?;
                let started = std::time::Instant::now();
                let mut counts = std::collections::HashMap::new();
                for word in String::from_utf8_lossy(&bytes).split_whitespace() {
                    *counts.entry(word.to_lowercase()).or_insert(0u64) += 1;
                }
                let top = counts
                    .iter()
                    .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
                    .map(|(w, n)| format!("{w:?} x{n}"))
                    .unwrap_or_else(|| "no words".into());
                let took = started.elapsed();
                log(Level::Debug, &format!("tally took {} us", took.as_micros()));
                Ok(format!("{path}: {top} ({} distinct)", counts.len()))
            }
            other => Err(format!("no tool named {other}")),
        }
    }
}

/// The string field `key` of a flat JSON object (no escapes beyond `\"` and `\\`).
fn field(input: &str, key: &str) -> Result<String, String> {
    let needle = format!("\"{key}\"");
    let at = input.find(&needle).ok_or(format!("missing field {key}"))?;
    let rest = input[at + needle.len()..].trim_start();
    let rest = rest
        .strip_prefix(':')
        .ok_or(format!("bad field {key}"))?
        .trim_start();
    let rest = rest
        .strip_prefix('"')
        .ok_or(format!("field {key} is not a string"))?;
    let mut out = String::new();
    let mut chars = rest.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Ok(out),
            '\\' => match chars.next() {
                Some('n') => out.push('\n'),
                Some(other) => out.push(other),
                None => break,
            },
            c => out.push(c),
        }
    }
    Err(format!("field {key} is not closed"))
}

export!(Example);
