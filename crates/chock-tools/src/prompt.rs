//! What the model is told: the system prompt, the AGENTS.md paths, and the compiled-in guidance
//! shelf that `read_guidance` reads. The tool specifications come from the tools' registry.
//!
//! AGENTS.md files reach the model as paths it can read, never pasted in: a project's notes are data
//! the model chooses to read, and a large file costs nothing until it is needed. The guidance shelf is
//! compiled into the binary so no tool call can write it.

use std::path::{Path, PathBuf};

use chock_provider::ToolSpec;

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

/// The AGENTS.md files that hold instructions for `rel`: one in each directory from the root down
/// to `rel` (itself included, when it is a directory), shallowest first, as relative paths.
///
/// Found by name, one `lstat` per directory on the way, never by walking the project: a session
/// starts in the same time in a tree of any size, and a subdirectory's notes reach the model when it
/// first works there (the file tools point them out), not as a list made up front.
pub fn agents_md_for(view: &WorkspaceView, rel: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = rel
        .ancestors()
        .map(|dir| dir.join(AGENTS_MD))
        .filter(|p| matches!(view.lstat(p), Some((EntryKind::File, _))))
        .collect();
    found.reverse();
    found
}

/// The file name of a project's notes for agents.
pub const AGENTS_MD: &str = "AGENTS.md";

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
    if !agents_md_for(view, Path::new("")).is_empty() {
        s.push_str(
            "\nThe project has notes for agents in AGENTS.md at its root: read it before you start \
(read_file). A subdirectory may have its own AGENTS.md for the files under it; the file tools name it \
when you first work in that directory, and you read it before working there.\n",
        );
    } else {
        s.push_str(
            "\nA directory of the project may have an AGENTS.md with notes for the files under it; the \
file tools name it when you first work in that directory, and you read it before working there.\n",
        );
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

/// Every built-in tool the model is offered, with its JSON Schema derived from the tool's input type
/// ([`crate::Registry::builtin`]). A session offers what its
/// [`Toolbox`](crate::dispatch::Toolbox) holds, which may be more.
pub fn tool_specs() -> Vec<ToolSpec> {
    crate::Registry::builtin().specs()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agents_md_files_are_found_on_the_way_down_as_paths_never_as_text() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("b/c")).unwrap();
        std::fs::write(dir.path().join("b/c/AGENTS.md"), "deep").unwrap();
        std::fs::write(dir.path().join("AGENTS.md"), "SECRET-ROOT-TEXT").unwrap();
        std::fs::create_dir_all(dir.path().join("b/AGENTS.md")).unwrap();
        let view = WorkspaceView::direct(Path::new("/p"), dir.path());
        assert_eq!(
            agents_md_for(&view, Path::new("b/c/main.rs")),
            [PathBuf::from("AGENTS.md"), PathBuf::from("b/c/AGENTS.md")],
            "root first; a directory named AGENTS.md is not notes"
        );
        assert_eq!(
            agents_md_for(&view, Path::new("b/c")),
            [PathBuf::from("AGENTS.md"), PathBuf::from("b/c/AGENTS.md")]
        );
        assert_eq!(
            agents_md_for(&view, Path::new("")),
            [PathBuf::from("AGENTS.md")]
        );
        let prompt = system_prompt(&view);
        assert!(prompt.contains("AGENTS.md at its root"), "{prompt}");
        assert!(
            !prompt.contains("b/c/AGENTS.md"),
            "found when the model works there"
        );
        assert!(!prompt.contains("SECRET-ROOT-TEXT"), "paths, not contents");
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
