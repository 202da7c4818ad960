//! The file tools: read_file, write_file, edit_file, list, glob, grep — plain data operations on the
//! workspace view, decided as `fs.read` (read_file, list, glob, grep) and `fs.write` (write_file, edit_file).
//! list, glob and grep live in `search`.

use std::fmt::Write as _;
use std::path::PathBuf;

use schemars::JsonSchema;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::ToolOutput;
use super::seen::SeenLines;
use crate::view::{EntryKind, WorkspaceView};

mod search;
pub use search::{GlobInput, GrepInput, ListInput, glob, grep, list};

/// Lines read_file shows when no limit is given.
const DEFAULT_LIMIT: usize = 2000;
/// A longer line is cut when shown.
const MAX_LINE_CHARS: usize = 2000;

/// The version stamp of a whole file: the first 16 hex digits of its SHA-256.
pub fn file_hash(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    digest
        .iter()
        .take(8)
        .fold(String::with_capacity(16), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

fn is_binary(bytes: &[u8]) -> bool {
    bytes.iter().take(8192).any(|&b| b == 0)
}

fn show_line(line: &str) -> String {
    let line = line.strip_suffix('\r').unwrap_or(line);
    if line.chars().count() > MAX_LINE_CHARS {
        let cut: String = line.chars().take(MAX_LINE_CHARS).collect();
        format!("{cut}… [line cut]")
    } else {
        line.to_string()
    }
}

/// The workspace path a model's `path` names, and the file's bytes; an error the model can read.
fn locate_and_read(view: &WorkspaceView, given: &str) -> Result<(PathBuf, Vec<u8>), ToolOutput> {
    let rel = view
        .locate(given)
        .map_err(|err| ToolOutput::error(err.to_string()))?;
    let bytes = view
        .read(given, &rel)
        .map_err(|err| ToolOutput::error(err.to_string()))?;
    Ok((rel, bytes))
}

/// read_file's input.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReadFileInput {
    /// Relative to the project root, or absolute under it.
    pub path: String,
    /// First line to show (1-based).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub offset: Option<usize>,
    /// How many lines (default 2000).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub limit: Option<usize>,
}

/// Shows lines of a file with their numbers and the whole file's hash; records them as seen.
pub fn read_file(view: &WorkspaceView, seen: &mut SeenLines, input: &ReadFileInput) -> ToolOutput {
    let (rel, bytes) = match locate_and_read(view, &input.path) {
        Ok(found) => found,
        Err(out) => return out,
    };
    let hash = file_hash(&bytes);
    if is_binary(&bytes) {
        return ToolOutput::ok(format!(
            "{}: binary file, {} bytes, file_hash {hash}; not shown",
            input.path,
            bytes.len()
        ));
    }
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().collect();
    let first = input.offset.unwrap_or(1).max(1);
    let limit = input.limit.unwrap_or(DEFAULT_LIMIT).max(1);
    let last = (first + limit - 1).min(lines.len());
    let mut out = format!("{} ({} lines, file_hash {hash})\n", input.path, lines.len());
    if lines.is_empty() {
        out.push_str("(empty file)\n");
        return ToolOutput::ok(out);
    }
    if first > lines.len() {
        return ToolOutput::error(format!(
            "{}: offset {first} is past the end ({} lines)",
            input.path,
            lines.len()
        ));
    }
    for (i, line) in lines.iter().enumerate().take(last).skip(first - 1) {
        let _ = writeln!(out, "{:>6}\t{}", i + 1, show_line(line));
    }
    if last < lines.len() {
        let _ = writeln!(
            out,
            "… {} more lines; read on with offset {}",
            lines.len() - last,
            last + 1
        );
    }
    seen.record(&rel, &hash, first..=last);
    ToolOutput::ok(out)
}

/// write_file's input.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct WriteFileInput {
    /// Relative to the project root, or absolute under it.
    pub path: String,
    /// The whole new content.
    pub content: String,
}

/// Writes a whole file (creating parents). The model wrote every line, so all of them count as seen.
pub fn write_file(
    view: &WorkspaceView,
    seen: &mut SeenLines,
    input: &WriteFileInput,
) -> ToolOutput {
    let rel = match view.locate(&input.path) {
        Ok(rel) => rel,
        Err(err) => return ToolOutput::error(err.to_string()),
    };
    if let Some((EntryKind::Dir, _)) = view.lstat(&rel) {
        return ToolOutput::error(format!("{}: is a directory", input.path));
    }
    let existed = view.lstat(&rel).is_some();
    if let Err(err) = view.write(&input.path, &rel, input.content.as_bytes()) {
        return ToolOutput::error(err.to_string());
    }
    let hash = file_hash(input.content.as_bytes());
    seen.record(&rel, &hash, 1..=input.content.lines().count());
    ToolOutput::ok(format!(
        "{} {} ({} bytes, {} lines, file_hash {hash})",
        if existed { "replaced" } else { "created" },
        input.path,
        input.content.len(),
        input.content.lines().count()
    ))
    .with_changed(&rel)
}

/// edit_file's input.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct EditFileInput {
    /// Relative to the project root, or absolute under it.
    pub path: String,
    /// The exact text to replace; must occur exactly once.
    pub old: String,
    /// The replacement.
    pub new: String,
    /// The file_hash read_file showed: the edit is refused if the file has changed since.
    #[serde(default)]
    pub file_hash: Option<String>,
}

/// Replaces one unique piece of text, after checking the version and that its lines were shown.
pub fn edit_file(view: &WorkspaceView, seen: &mut SeenLines, input: &EditFileInput) -> ToolOutput {
    let (rel, bytes) = match locate_and_read(view, &input.path) {
        Ok(found) => found,
        Err(out) => return out,
    };
    let hash = file_hash(&bytes);
    if let Some(given) = input
        .file_hash
        .as_deref()
        .map(str::trim)
        .filter(|h| !h.is_empty())
        && given != hash
    {
        return ToolOutput::error(format!(
            "{}: the file changed since file_hash {given} (it is now {hash}); read it again before editing",
            input.path
        ));
    }
    let Ok(text) = String::from_utf8(bytes) else {
        return ToolOutput::error(format!("{}: not UTF-8 text; use write_file", input.path));
    };
    if input.old.is_empty() {
        return ToolOutput::error(
            "`old` is empty: give the exact text to replace (or use write_file)".into(),
        );
    }
    let count = text.matches(input.old.as_str()).count();
    if count == 0 {
        return ToolOutput::error(format!(
            "{}: `old` does not occur in the file (it must match exactly, whitespace included)",
            input.path
        ));
    }
    if count > 1 {
        return ToolOutput::error(format!(
            "{}: `old` occurs {count} times; include more surrounding lines so it is unique",
            input.path
        ));
    }
    let start = text.find(input.old.as_str()).unwrap_or(0);
    let first = text[..start].matches('\n').count() + 1;
    let old_last = first + input.old.trim_end_matches('\n').matches('\n').count();
    if let Some(line) = seen.first_unseen(&rel, &hash, first, old_last) {
        return ToolOutput::error(format!(
            "{}: line {line} (of the lines {first}-{old_last} this edit replaces) was not shown to you in this version of the file; read_file it first",
            input.path
        ));
    }
    let mut updated = String::with_capacity(text.len() + input.new.len());
    updated.push_str(&text[..start]);
    updated.push_str(&input.new);
    updated.push_str(&text[start + input.old.len()..]);
    if let Err(err) = view.write(&input.path, &rel, updated.as_bytes()) {
        return ToolOutput::error(err.to_string());
    }
    let new_hash = file_hash(updated.as_bytes());
    let new_count = input.new.trim_end_matches('\n').matches('\n').count() + 1;
    let new_count = if input.new.is_empty() { 0 } else { new_count };
    // Lines the old text ended inside keep their identity; count what the replacement spans.
    seen.carry_over_edit(&rel, &hash, &new_hash, first, old_last, new_count);
    ToolOutput::ok(format!(
        "edited {} lines {first}-{old_last} ({} lines now there); file_hash {new_hash}",
        input.path, new_count
    ))
    .with_changed(&rel)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn setup() -> (tempfile::TempDir, WorkspaceView, SeenLines) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "one\ntwo\nthree\nfour\n").unwrap();
        std::fs::create_dir(dir.path().join("src")).unwrap();
        std::fs::write(dir.path().join("src/lib.rs"), "fn a() {}\nfn b() {}\n").unwrap();
        let view = WorkspaceView::direct(Path::new("/proj"), dir.path());
        (dir, view, SeenLines::default())
    }

    fn read(
        view: &WorkspaceView,
        seen: &mut SeenLines,
        path: &str,
        offset: Option<usize>,
        limit: Option<usize>,
    ) -> ToolOutput {
        read_file(
            view,
            seen,
            &ReadFileInput {
                path: path.into(),
                offset,
                limit,
            },
        )
    }

    fn edit(
        view: &WorkspaceView,
        seen: &mut SeenLines,
        old: &str,
        new: &str,
        hash: Option<&str>,
    ) -> ToolOutput {
        edit_file(
            view,
            seen,
            &EditFileInput {
                path: "a.txt".into(),
                old: old.into(),
                new: new.into(),
                file_hash: hash.map(Into::into),
            },
        )
    }

    #[test]
    fn read_file_numbers_lines_and_names_the_hash() {
        let (_d, view, mut seen) = setup();
        let out = read(&view, &mut seen, "a.txt", Some(2), Some(2));
        let hash = file_hash(b"one\ntwo\nthree\nfour\n");
        assert_eq!(
            out.text,
            format!(
                "a.txt (4 lines, file_hash {hash})\n     2\ttwo\n     3\tthree\n… 1 more lines; read on with offset 4\n"
            )
        );
        assert!(!out.is_error);
    }

    #[test]
    fn an_edit_of_unseen_lines_is_refused_and_of_seen_lines_runs() {
        let (dir, view, mut seen) = setup();
        let out = edit(&view, &mut seen, "two\n", "TWO\n", None);
        assert!(
            out.is_error && out.text.contains("was not shown to you"),
            "{}",
            out.text
        );
        read(&view, &mut seen, "a.txt", Some(1), Some(2));
        let out = edit(&view, &mut seen, "two\nthree", "2\n3", None);
        assert!(out.is_error && out.text.contains("line 3"), "{}", out.text);
        let out = edit(&view, &mut seen, "two\n", "TWO\n", None);
        assert!(!out.is_error, "{}", out.text);
        assert_eq!(
            std::fs::read_to_string(dir.path().join("a.txt")).unwrap(),
            "one\nTWO\nthree\nfour\n"
        );
        // The model's own new line is seen; a second edit there needs no re-read.
        let out = edit(&view, &mut seen, "TWO", "two again", None);
        assert!(!out.is_error, "{}", out.text);
    }

    #[test]
    fn an_edit_needs_unique_text_and_a_current_hash() {
        let (dir, view, mut seen) = setup();
        std::fs::write(dir.path().join("a.txt"), "x\nx\n").unwrap();
        read(&view, &mut seen, "a.txt", None, None);
        let out = edit(&view, &mut seen, "x", "y", None);
        assert!(
            out.is_error && out.text.contains("occurs 2 times"),
            "{}",
            out.text
        );
        let out = edit(&view, &mut seen, "x\nx", "y", Some("0000000000000000"));
        assert!(
            out.is_error && out.text.contains("changed since file_hash"),
            "{}",
            out.text
        );
        let out = edit(&view, &mut seen, "x\nx", "y", Some(&file_hash(b"x\nx\n")));
        assert!(!out.is_error, "{}", out.text);
        assert_eq!(
            std::fs::read_to_string(dir.path().join("a.txt")).unwrap(),
            "y\n"
        );
    }

    #[test]
    fn a_file_changed_behind_the_model_must_be_read_again() {
        let (dir, view, mut seen) = setup();
        read(&view, &mut seen, "a.txt", None, None);
        std::fs::write(dir.path().join("a.txt"), "one\ntwo\nthree\nfour\nfive\n").unwrap();
        let out = edit(&view, &mut seen, "two", "2", None);
        assert!(
            out.is_error && out.text.contains("not shown"),
            "{}",
            out.text
        );
    }

    #[test]
    fn grep_shows_matches_and_they_count_as_seen() {
        let (dir, view, mut seen) = setup();
        let out = grep(
            &view,
            &mut seen,
            &GrepInput {
                pattern: "fn b".into(),
                path: None,
            },
        );
        assert_eq!(out.text, "src/lib.rs:2:fn b() {}\n");
        let out = edit_file(
            &view,
            &mut seen,
            &EditFileInput {
                path: "src/lib.rs".into(),
                old: "fn b() {}".into(),
                new: "fn c() {}".into(),
                file_hash: None,
            },
        );
        assert!(!out.is_error, "{}", out.text);
        assert_eq!(
            std::fs::read_to_string(dir.path().join("src/lib.rs")).unwrap(),
            "fn a() {}\nfn c() {}\n"
        );
    }

    #[test]
    fn glob_and_list_see_the_tree() {
        let (_d, view, _seen) = setup();
        assert_eq!(
            glob(
                &view,
                &GlobInput {
                    pattern: "**/*.rs".into()
                }
            )
            .text,
            "src/lib.rs\n"
        );
        assert_eq!(
            glob(
                &view,
                &GlobInput {
                    pattern: "*.txt".into()
                }
            )
            .text,
            "a.txt\n"
        );
        assert_eq!(list(&view, &ListInput { path: None }).text, "a.txt\nsrc/\n");
        assert!(
            list(
                &view,
                &ListInput {
                    path: Some("../".into())
                }
            )
            .is_error
        );
    }
}
