//! What the model is told: the system prompt, the tool specifications, the AGENTS.md paths, and the
//! compiled-in guidance shelf that `read_guidance` reads.
//!
//! AGENTS.md files reach the model as paths it can read, never pasted in: a project's notes are data
//! the model chooses to read, and a large file costs nothing until it is needed. The guidance shelf is
//! compiled into the binary so no tool call can write it.

use std::path::PathBuf;

use chock_provider::ToolSpec;
use serde_json::json;

use crate::view::{EntryKind, WorkspaceView};

/// The guidance shelf: (topic, text).
pub const GUIDANCE: &[(&str, &str)] = &[
    ("sandbox", include_str!("../guidance/sandbox.md")),
    ("editing", include_str!("../guidance/editing.md")),
    ("policy", include_str!("../guidance/policy.md")),
    ("finishing", include_str!("../guidance/finishing.md")),
];

/// The text of one guidance topic.
pub fn guidance(topic: &str) -> Option<&'static str> {
    GUIDANCE
        .iter()
        .find(|(t, _)| *t == topic.trim())
        .map(|(_, text)| *text)
}

/// Every AGENTS.md in the workspace (root first, then subdirectories, sorted), as relative paths.
/// Directories the walk skips (`.git`) are not searched; at most 50 are listed.
pub fn agents_md_paths(view: &WorkspaceView) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = view
        .walk(".", std::path::Path::new(""), 50_000)
        .unwrap_or_default()
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n == "AGENTS.md"))
        .collect();
    found.sort_by_key(|p| (p.components().count(), p.clone()));
    found.truncate(50);
    found
}

/// The system prompt for a session in `view`.
pub fn system_prompt(view: &WorkspaceView) -> String {
    let project = view.project_path().display();
    let mut s = format!(
        "You are a coding agent working through Chock, a sandboxing harness. The project is at {project} \
(a throwaway copy: your changes reach the real project only when a person reviews and applies them). \
Paths you give tools may be relative to the project root or absolute under it.\n\n\
Work in small steps: look before you change, read a file before editing it, run the project's tests after \
changing code, and stop calling tools when the task is done, ending with a short summary of what you did. \
Every tool call is decided by the project's policy table before it runs; a refusal names the rule that \
refused. Do not try to get around a refusal.\n"
    );
    let agents = agents_md_paths(view);
    if !agents.is_empty() {
        s.push_str(
            "\nThe project has notes for agents in these AGENTS.md files. Read the root one before you start, \
and a subdirectory's one before working in that directory (read_file):\n",
        );
        for p in agents {
            s.push_str(&format!("- {}\n", p.display()));
        }
    }
    s.push_str("\nGuidance topics you can read with read_guidance: ");
    s.push_str(
        &GUIDANCE
            .iter()
            .map(|(t, _)| *t)
            .collect::<Vec<_>>()
            .join(", "),
    );
    s.push('\n');
    if matches!(
        view.lstat(std::path::Path::new("chock.toml")),
        Some((EntryKind::File, _))
    ) {
        s.push_str("The project's policy table is chock.toml (read-only to you).\n");
    }
    s
}

fn spec(name: &str, description: &str, schema: serde_json::Value) -> ToolSpec {
    ToolSpec {
        name: name.to_string(),
        description: description.to_string(),
        input_schema: schema,
    }
}

/// Every tool the model is offered, with its JSON Schema.
pub fn tool_specs() -> Vec<ToolSpec> {
    vec![
        spec(
            "read_file",
            "Read a text file. Shows numbered lines and the whole file's file_hash. Decided as fs.read.",
            json!({"type": "object", "properties": {
                "path": {"type": "string", "description": "Relative to the project root, or absolute under it."},
                "offset": {"type": "integer", "minimum": 1, "description": "First line to show (1-based)."},
                "limit": {"type": "integer", "minimum": 1, "description": "How many lines (default 2000)."}
            }, "required": ["path"]}),
        ),
        spec(
            "write_file",
            "Create or replace a whole file (parent directories are created). Decided as fs.write.",
            json!({"type": "object", "properties": {
                "path": {"type": "string"},
                "content": {"type": "string", "description": "The whole new content."}
            }, "required": ["path", "content"]}),
        ),
        spec(
            "edit_file",
            "Replace one exact, unique piece of text in a file. The lines replaced must have been shown to you \
by read_file or grep in the file's current version; pass file_hash to be sure the file has not changed. \
Decided as fs.write.",
            json!({"type": "object", "properties": {
                "path": {"type": "string"},
                "old": {"type": "string", "description": "The exact text to replace; must occur exactly once."},
                "new": {"type": "string", "description": "The replacement."},
                "file_hash": {"type": "string", "description": "The file_hash read_file showed."}
            }, "required": ["path", "old", "new"]}),
        ),
        spec(
            "list",
            "List a directory (directories end in /, symlinks in @). Decided as fs.read.",
            json!({"type": "object", "properties": {
                "path": {"type": "string", "description": "Default: the project root."}
            }}),
        ),
        spec(
            "glob",
            "Find files whose project-relative path matches a glob such as **/*.rs. Decided as fs.read.",
            json!({"type": "object", "properties": {"pattern": {"type": "string"}}, "required": ["pattern"]}),
        ),
        spec(
            "grep",
            "Search file contents with a regular expression; prints path:line:text. Decided as fs.read.",
            json!({"type": "object", "properties": {
                "pattern": {"type": "string", "description": "Rust regex syntax."},
                "path": {"type": "string", "description": "A file or directory (default: the project)."}
            }, "required": ["pattern"]}),
        ),
        spec(
            "run_command",
            "Run a shell command (sh -c) confined in the sandbox, in the project's workspace copy, with no \
network. Decided as exec.<class>.<program>. With background: true it returns a handle at once; read its \
output later with read_output.",
            json!({"type": "object", "properties": {
                "command": {"type": "string"},
                "timeout_secs": {"type": "integer", "minimum": 1, "description": "Default 120."},
                "background": {"type": "boolean"}
            }, "required": ["command"]}),
        ),
        spec(
            "read_output",
            "Read what a background command printed so far, and whether it has ended.",
            json!({"type": "object", "properties": {"handle": {"type": "string"}}, "required": ["handle"]}),
        ),
        spec(
            "update_plan",
            "Replace your plan: an ordered list of steps with status pending, in_progress or done.",
            json!({"type": "object", "properties": {"steps": {"type": "array", "items": {
                "type": "object", "properties": {
                    "step": {"type": "string"},
                    "status": {"type": "string", "enum": ["pending", "in_progress", "done"]}
                }, "required": ["step"]}}}, "required": ["steps"]}),
        ),
        spec(
            "ask_user",
            "Ask the person a question. If nobody is there to answer, the answer is \"no answer\".",
            json!({"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"]}),
        ),
        spec(
            "set_title",
            "Give this session a short title.",
            json!({"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}),
        ),
        spec(
            "restrict_self",
            "Narrow your own permissions for the rest of the session: the given action pattern is decided at \
least as strictly as `decision`. Widening a restriction again asks ratchet.widen_action.",
            json!({"type": "object", "properties": {
                "action": {"type": "string", "description": "An action pattern, e.g. exec.* or fs.write."},
                "decision": {"type": "string", "enum": ["allow", "deny", "ask", "agent_review", "agent_then_human"],
                    "description": "allow means: remove an earlier restriction (a widening, which is asked)."}
            }, "required": ["action", "decision"]}),
        ),
        spec(
            "request_action",
            "Ask for an act outside your reach. Supported: workspace.apply (ask for your work to be written into \
the real project). The policy table or a person answers.",
            json!({"type": "object", "properties": {
                "action": {"type": "string", "enum": ["workspace.apply"]},
                "reason": {"type": "string"}
            }, "required": ["action", "reason"]}),
        ),
        spec(
            "fetch_url",
            "Fetch a web page (http or https) as readable text, through the host: the sandbox has no network. \
Decided as net.fetch.<host reversed> (e.g. net.fetch.com.example.docs) for the URL and every redirect.",
            json!({"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]}),
        ),
        spec(
            "web_search",
            "Search the web with the configured backend, through the host. Decided as web.search.",
            json!({"type": "object", "properties": {
                "query": {"type": "string"},
                "max_results": {"type": "integer", "minimum": 1, "maximum": 10}
            }, "required": ["query"]}),
        ),
        spec(
            "read_guidance",
            "Read a short note from Chock's guidance shelf.",
            json!({"type": "object", "properties": {"topic": {"type": "string",
                "enum": GUIDANCE.iter().map(|(t, _)| *t).collect::<Vec<_>>()}}, "required": ["topic"]}),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agents_md_files_are_listed_as_paths_root_first() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("b/c")).unwrap();
        std::fs::write(dir.path().join("b/c/AGENTS.md"), "deep").unwrap();
        std::fs::write(dir.path().join("AGENTS.md"), "SECRET-ROOT-TEXT").unwrap();
        let view = WorkspaceView::direct(std::path::Path::new("/p"), dir.path());
        assert_eq!(
            agents_md_paths(&view),
            [PathBuf::from("AGENTS.md"), PathBuf::from("b/c/AGENTS.md")]
        );
        let prompt = system_prompt(&view);
        assert!(
            prompt.contains("- AGENTS.md\n- b/c/AGENTS.md\n"),
            "{prompt}"
        );
        assert!(!prompt.contains("SECRET-ROOT-TEXT"), "paths, not contents");
    }

    /// Every tool offered to a model can be exercised by a recording (`demo`, `script:FILE`), so each
    /// has an offline end-to-end path.
    #[test]
    fn the_offline_player_knows_every_tool() {
        let known: Vec<&str> = chock_provider::Recording::known_tools().collect();
        for spec in tool_specs() {
            assert!(
                known.contains(&spec.name.as_str()),
                "{} is offered to the model but a recording cannot call it",
                spec.name
            );
        }
    }

    #[test]
    fn every_guidance_topic_reads_and_tools_have_object_schemas() {
        for (topic, text) in GUIDANCE {
            assert_eq!(guidance(topic), Some(*text));
            assert!(text.starts_with("# "));
        }
        assert_eq!(guidance("nope"), None);
        let specs = tool_specs();
        assert!(specs.iter().all(|s| s.input_schema["type"] == "object"));
        let names: Vec<_> = specs.iter().map(|s| s.name.as_str()).collect();
        for name in [
            "read_file",
            "edit_file",
            "run_command",
            "restrict_self",
            "request_action",
            "read_guidance",
        ] {
            assert!(names.contains(&name), "{name}");
        }
    }
}
