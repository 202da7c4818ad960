//! The search tools: list, glob and grep — reading the workspace view, decided as `fs.read`. Apart
//! from read_file and the writers because they walk many files and bound what they return.

use std::fmt::Write as _;
use std::path::Path;

use schemars::JsonSchema;
use serde::Deserialize;

use super::super::ToolOutput;
use super::super::seen::SeenLines;
use super::{file_hash, is_binary, show_line};
use crate::view::{EntryKind, WorkspaceView};

/// Most paths glob returns.
const MAX_GLOB: usize = 1000;
/// Most matches grep returns.
const MAX_GREP: usize = 200;
/// Most files a walk visits.
const MAX_WALK: usize = 50_000;

/// list's input.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListInput {
    /// The directory (default: the project root).
    #[serde(default)]
    pub path: Option<String>,
}

/// Lists one directory: directories end in `/`, symlinks in `@`.
pub fn list(view: &WorkspaceView, input: &ListInput) -> ToolOutput {
    let given = input.path.as_deref().unwrap_or(".");
    let rel = match view.locate(given) {
        Ok(rel) => rel,
        Err(err) => return ToolOutput::error(err.to_string()),
    };
    match view.list(given, &rel) {
        Ok(entries) => {
            let mut out = String::new();
            for (name, kind) in entries {
                let mark = match kind {
                    EntryKind::Dir => "/",
                    EntryKind::Symlink => "@",
                    _ => "",
                };
                let _ = writeln!(out, "{name}{mark}");
            }
            if out.is_empty() {
                out.push_str("(empty directory)\n");
            }
            ToolOutput::ok(out)
        }
        Err(err) => ToolOutput::error(err.to_string()),
    }
}

/// glob's input.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct GlobInput {
    /// A glob over project-relative paths, such as `**/*.rs` (`*` does not cross `/`).
    pub pattern: String,
}

/// Files whose workspace-relative path matches a glob.
pub fn glob(view: &WorkspaceView, input: &GlobInput) -> ToolOutput {
    let pattern = input.pattern.trim_start_matches("./");
    let matcher = match globset::GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
    {
        Ok(glob) => glob.compile_matcher(),
        Err(err) => return ToolOutput::error(format!("bad glob {:?}: {err}", input.pattern)),
    };
    let files = match view.walk(".", Path::new(""), MAX_WALK) {
        Ok(files) => files,
        Err(err) => return ToolOutput::error(err.to_string()),
    };
    let hits: Vec<_> = files.iter().filter(|f| matcher.is_match(f)).collect();
    let mut out = String::new();
    for hit in hits.iter().take(MAX_GLOB) {
        let _ = writeln!(out, "{}", hit.display());
    }
    if hits.len() > MAX_GLOB {
        let _ = writeln!(out, "… {} more", hits.len() - MAX_GLOB);
    }
    if hits.is_empty() {
        out.push_str("(no file matches)\n");
    }
    ToolOutput::ok(out)
}

/// grep's input.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct GrepInput {
    /// A regular expression (Rust regex syntax).
    pub pattern: String,
    /// A file or directory to search (default: the project).
    #[serde(default)]
    pub path: Option<String>,
}

/// Lines matching a regular expression, as `path:line:text`; the lines shown count as seen.
pub fn grep(view: &WorkspaceView, seen: &mut SeenLines, input: &GrepInput) -> ToolOutput {
    let re = match regex::Regex::new(&input.pattern) {
        Ok(re) => re,
        Err(err) => return ToolOutput::error(format!("bad pattern: {err}")),
    };
    let given = input.path.as_deref().unwrap_or(".");
    let rel = match view.locate(given) {
        Ok(rel) => rel,
        Err(err) => return ToolOutput::error(err.to_string()),
    };
    let files = match view.lstat(&rel) {
        Some((EntryKind::File, _)) => vec![rel.clone()],
        Some((EntryKind::Dir, _)) => match view.walk(given, &rel, MAX_WALK) {
            Ok(files) => files,
            Err(err) => return ToolOutput::error(err.to_string()),
        },
        _ => return ToolOutput::error(format!("{given}: no such file or directory")),
    };
    let mut out = String::new();
    let mut count = 0;
    'files: for file in files {
        let Ok(bytes) = view.read(&file.to_string_lossy(), &file) else {
            continue;
        };
        if is_binary(&bytes) {
            continue;
        }
        let hash = file_hash(&bytes);
        let text = String::from_utf8_lossy(&bytes);
        let mut shown = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if re.is_match(line) {
                if count >= MAX_GREP {
                    seen.record(&file, &hash, shown);
                    let _ = writeln!(
                        out,
                        "… more matches not shown; narrow the pattern or the path"
                    );
                    break 'files;
                }
                count += 1;
                shown.push(i + 1);
                let _ = writeln!(out, "{}:{}:{}", file.display(), i + 1, show_line(line));
            }
        }
        seen.record(&file, &hash, shown);
    }
    if count == 0 {
        out.push_str("(no match)\n");
    }
    ToolOutput::ok(out)
}
