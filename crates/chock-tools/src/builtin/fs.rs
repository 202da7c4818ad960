//! The file tools as [`Tool`]s: data operations on the workspace view, decided as `fs.read`
//! (read_file, list, glob, grep) and `fs.write` (write_file, edit_file). The work itself is in
//! [`crate::files`].

use std::sync::PoisonError;

use chock_log::LogError;
use chock_policy::{Action, ActionError};
use chock_protocol::live::{ToolDisplay, ToolKind, input_field};
use serde_json::Value;

use crate::ToolOutput;
use crate::files::{
    self, EditFileInput, GlobInput, GrepInput, ListInput, ReadFileInput, WriteFileInput,
};
use crate::prompt::agents_md_for;
use crate::seen::SeenLines;
use crate::tool::{Access, Act, Effect, Tool, ToolContext};
use crate::view::WorkspaceView;

fn one(action: &str, detail: String) -> Result<Access, ActionError> {
    Ok(Access::Acts(vec![Act::new(Action::parse(action)?, detail)]))
}

/// Runs `work` with the view and the seen-lines record (held only while `work` runs: it never awaits).
fn with_seen(
    cx: &ToolContext<'_>,
    work: impl FnOnce(&WorkspaceView, &mut SeenLines) -> ToolOutput,
) -> ToolOutput {
    let mut seen = cx.state.seen.lock().unwrap_or_else(PoisonError::into_inner);
    work(cx.host.view(), &mut seen)
}

/// Names the AGENTS.md files on the way to `given` that the model has not been pointed to yet, after
/// the tool's own output (the root's is in the system prompt). Reading one counts as being pointed
/// to it.
fn with_notes(cx: &ToolContext<'_>, given: Option<&str>, mut out: ToolOutput) -> ToolOutput {
    if out.is_error {
        return out;
    }
    let view = cx.host.view();
    let Ok(rel) = view.relative(given.unwrap_or(".")) else {
        return out;
    };
    let mut pointed = cx
        .state
        .pointed
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    for notes in agents_md_for(view, &rel) {
        let Some(dir) = notes.parent().filter(|d| !d.as_os_str().is_empty()) else {
            continue;
        };
        if pointed.insert(notes.clone()) && notes != rel {
            out.text.push_str(&format!(
                "\n\n[{} holds notes for the files under {}/: read it before working there.]",
                notes.display(),
                dir.display()
            ));
        }
    }
    out
}

/// Checkpoints the workspace after a write that changed it, before its result is logged.
fn checkpointed(cx: &ToolContext<'_>, name: &str, out: ToolOutput) -> ToolOutput {
    if !out.changed.is_empty() {
        cx.host.checkpoint(&format!("{name} {}", cx.call_id));
    }
    out
}

/// `read_file`.
#[derive(Debug)]
pub struct ReadFile;

impl Tool for ReadFile {
    type Input = ReadFileInput;

    fn name(&self) -> &str {
        "read_file"
    }

    fn display(&self, input: &Value) -> ToolDisplay {
        ToolDisplay::new(
            format!("Read {}", input_field(input, "path")),
            ToolKind::Read,
        )
        .reading(&input_field(input, "path"))
    }

    fn description(&self) -> &str {
        "Read a text file. Shows numbered lines and the whole file's file_hash. Decided as fs.read."
    }

    fn effect(&self) -> Effect {
        Effect::ReadOnly
    }

    fn access(&self, input: &ReadFileInput) -> Result<Access, ActionError> {
        one("fs.read", format!("read {}", input.path))
    }

    async fn run<'a>(
        &'a self,
        cx: ToolContext<'a>,
        input: ReadFileInput,
    ) -> Result<ToolOutput, LogError> {
        let out = with_seen(&cx, |view, seen| files::read_file(view, seen, &input));
        Ok(with_notes(&cx, Some(&input.path), out))
    }
}

/// `write_file`.
#[derive(Debug)]
pub struct WriteFile;

impl Tool for WriteFile {
    type Input = WriteFileInput;

    fn name(&self) -> &str {
        "write_file"
    }

    fn display(&self, input: &Value) -> ToolDisplay {
        ToolDisplay::new(
            format!("Write {} (in the sandbox copy)", input_field(input, "path")),
            ToolKind::Edit,
        )
    }

    fn description(&self) -> &str {
        "Create or replace a whole file (parent directories are created). Decided as fs.write."
    }

    fn effect(&self) -> Effect {
        Effect::Mutating
    }

    fn access(&self, input: &WriteFileInput) -> Result<Access, ActionError> {
        one(
            "fs.write",
            format!("write {} ({} bytes)", input.path, input.content.len()),
        )
    }

    async fn run<'a>(
        &'a self,
        cx: ToolContext<'a>,
        input: WriteFileInput,
    ) -> Result<ToolOutput, LogError> {
        let out = with_seen(&cx, |view, seen| files::write_file(view, seen, &input));
        let out = checkpointed(&cx, Tool::name(self), out);
        Ok(with_notes(&cx, Some(&input.path), out))
    }
}

/// `edit_file`.
#[derive(Debug)]
pub struct EditFile;

impl Tool for EditFile {
    type Input = EditFileInput;

    fn name(&self) -> &str {
        "edit_file"
    }

    fn display(&self, input: &Value) -> ToolDisplay {
        ToolDisplay::new(
            format!("Edit {} (in the sandbox copy)", input_field(input, "path")),
            ToolKind::Edit,
        )
    }

    fn description(&self) -> &str {
        "Replace one exact, unique piece of text in a file. The lines replaced must have been shown to you \
by read_file or grep in the file's current version; pass file_hash to be sure the file has not changed. \
Decided as fs.write."
    }

    fn effect(&self) -> Effect {
        Effect::Mutating
    }

    fn access(&self, input: &EditFileInput) -> Result<Access, ActionError> {
        one("fs.write", format!("edit {}", input.path))
    }

    async fn run<'a>(
        &'a self,
        cx: ToolContext<'a>,
        input: EditFileInput,
    ) -> Result<ToolOutput, LogError> {
        let out = with_seen(&cx, |view, seen| files::edit_file(view, seen, &input));
        let out = checkpointed(&cx, Tool::name(self), out);
        Ok(with_notes(&cx, Some(&input.path), out))
    }
}

/// `list`.
#[derive(Debug)]
pub struct List;

impl Tool for List {
    type Input = ListInput;

    fn name(&self) -> &str {
        "list"
    }

    fn display(&self, input: &Value) -> ToolDisplay {
        ToolDisplay::new(
            format!("List {}", input_field(input, "path")),
            ToolKind::Read,
        )
        .reading(&input_field(input, "path"))
    }

    fn description(&self) -> &str {
        "List a directory (directories end in /, symlinks in @). Decided as fs.read."
    }

    fn effect(&self) -> Effect {
        Effect::ReadOnly
    }

    fn access(&self, input: &ListInput) -> Result<Access, ActionError> {
        one(
            "fs.read",
            format!("list {}", input.path.as_deref().unwrap_or(".")),
        )
    }

    async fn run<'a>(
        &'a self,
        cx: ToolContext<'a>,
        input: ListInput,
    ) -> Result<ToolOutput, LogError> {
        let out = files::list(cx.host.view(), &input);
        Ok(with_notes(&cx, input.path.as_deref(), out))
    }
}

/// `glob`.
#[derive(Debug)]
pub struct Glob;

impl Tool for Glob {
    type Input = GlobInput;

    fn name(&self) -> &str {
        "glob"
    }

    fn display(&self, input: &Value) -> ToolDisplay {
        ToolDisplay::new(
            format!("Find files matching {}", input_field(input, "pattern")),
            ToolKind::Search,
        )
    }

    fn description(&self) -> &str {
        "Find files whose project-relative path matches a glob such as **/*.rs. Decided as fs.read."
    }

    fn effect(&self) -> Effect {
        Effect::ReadOnly
    }

    fn access(&self, input: &GlobInput) -> Result<Access, ActionError> {
        one("fs.read", format!("find files matching {}", input.pattern))
    }

    async fn run<'a>(
        &'a self,
        cx: ToolContext<'a>,
        input: GlobInput,
    ) -> Result<ToolOutput, LogError> {
        Ok(files::glob(cx.host.view(), &input))
    }
}

/// `grep`.
#[derive(Debug)]
pub struct Grep;

impl Tool for Grep {
    type Input = GrepInput;

    fn name(&self) -> &str {
        "grep"
    }

    fn display(&self, input: &Value) -> ToolDisplay {
        ToolDisplay::new(
            format!("Search for {}", input_field(input, "pattern")),
            ToolKind::Search,
        )
    }

    fn description(&self) -> &str {
        "Search file contents with a regular expression; prints path:line:text. Decided as fs.read."
    }

    fn effect(&self) -> Effect {
        Effect::ReadOnly
    }

    fn access(&self, input: &GrepInput) -> Result<Access, ActionError> {
        one(
            "fs.read",
            format!(
                "search {} for /{}/",
                input.path.as_deref().unwrap_or("the project"),
                input.pattern
            ),
        )
    }

    async fn run<'a>(
        &'a self,
        cx: ToolContext<'a>,
        input: GrepInput,
    ) -> Result<ToolOutput, LogError> {
        let out = with_seen(&cx, |view, seen| files::grep(view, seen, &input));
        Ok(with_notes(&cx, input.path.as_deref(), out))
    }
}
