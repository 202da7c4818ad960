//! Text forms of a diff: the unified diff (optionally coloured), `--stat` and `--name-only`.
//! Every file line carries the file id and every hunk header its hunk id, so what a reviewer reads
//! is what `chock apply --file/--hunk` takes.

use std::fmt::Write;

use chock_protocol::text::{self, Layout};

use crate::diff::{Diff, FileChange, Sensitive, Status};
use crate::entry::Entry;
use crate::hunks::split_lines;

/// Which form to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RenderMode {
    /// A unified diff of every change.
    Patch,
    /// Lines added and removed per file (`--stat`).
    Stat,
    /// The changed paths only, one a line.
    NameOnly,
}

const BOLD: &str = "\x1b[1m";
const RED: &str = "\x1b[31m";
const GREEN: &str = "\x1b[32m";
const CYAN: &str = "\x1b[36m";
const RESET: &str = "\x1b[0m";

/// Renders `diff` in `mode`; `colour` adds ANSI colours (for a terminal).
pub fn render(diff: &Diff, mode: RenderMode, colour: bool) -> String {
    let mut out = String::new();
    match mode {
        RenderMode::NameOnly => {
            for f in &diff.files {
                let _ = writeln!(out, "{}", text::line(&f.path));
            }
        }
        RenderMode::Stat => stat(&mut out, diff),
        RenderMode::Patch => {
            for f in &diff.files {
                patch(&mut out, f, colour);
            }
        }
    }
    out
}

fn paint(colour: bool, code: &str, text: &str) -> String {
    if colour {
        format!("{code}{text}{RESET}")
    } else {
        text.to_string()
    }
}

fn stat(out: &mut String, diff: &Diff) {
    let width = diff
        .files
        .iter()
        .map(|f| display_path(f).len())
        .max()
        .unwrap_or(0);
    let (mut adds, mut dels) = (0, 0);
    for f in &diff.files {
        let (a, d) = f.line_counts();
        adds += a;
        dels += d;
        let what = if f.is_binary() {
            "Bin".to_string()
        } else if a + d == 0 {
            match (&f.old, &f.new) {
                (_, Some(Entry::Dir)) | (Some(Entry::Dir), None) => "dir".to_string(),
                (Some(Entry::Symlink { .. }), _) | (_, Some(Entry::Symlink { .. })) => {
                    "link".to_string()
                }
                _ if f.mode_change().is_some() => "mode".to_string(),
                _ => "0".to_string(),
            }
        } else {
            format!(
                "{} {}{}",
                a + d,
                "+".repeat(a.min(40)),
                "-".repeat(d.min(40))
            )
        };
        let mark = if f.sensitive().is_some() {
            "  !! Chock's own policy"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            " {} {} {:width$} | {what}{mark}",
            f.id,
            f.status().letter(),
            display_path(f)
        );
    }
    let n = diff.files.len();
    let _ = writeln!(
        out,
        " {n} file{} changed, {adds} insertion{}(+), {dels} deletion{}(-)",
        if n == 1 { "" } else { "s" },
        if adds == 1 { "" } else { "s" },
        if dels == 1 { "" } else { "s" }
    );
}

fn display_path(f: &FileChange) -> String {
    match &f.old_path {
        Some(from) => format!("{} => {}", text::line(from), text::line(&f.path)),
        None => text::line(&f.path).to_string(),
    }
}

fn patch(out: &mut String, f: &FileChange, colour: bool) {
    let head = format!("file {} {} {}", f.id, f.status().letter(), display_path(f));
    let _ = writeln!(out, "{}", paint(colour, BOLD, &head));
    for (path, what) in f.sensitive_paths() {
        let banner = sensitive_banner(path, what);
        let _ = writeln!(out, "{}", paint(colour, &format!("{BOLD}{RED}"), &banner));
    }
    let old_name = text::line(f.old_path.as_deref().unwrap_or(&f.path));
    if let Some(from) = &f.old_path {
        let _ = writeln!(
            out,
            "rename from {}\nrename to {}",
            text::line(from),
            text::line(&f.path)
        );
    }
    if let Some((a, b)) = f.mode_change() {
        let mode = |x: bool| if x { "100755" } else { "100644" };
        let _ = writeln!(out, "old mode {}\nnew mode {}", mode(a), mode(b));
    }
    match (&f.old, &f.new) {
        (None, Some(Entry::Dir)) => {
            let _ = writeln!(out, "new empty directory");
        }
        (Some(Entry::Dir), None) => {
            let _ = writeln!(out, "deleted directory");
        }
        (Some(Entry::Symlink { target: a }), Some(Entry::Symlink { target: b })) => {
            let _ = writeln!(out, "symlink {} -> {}", target(a), target(b));
        }
        _ if f.status() == Status::Renamed => {}
        (Some(Entry::File { data: a, .. }), Some(Entry::File { data: b, .. })) if a == b => {}
        _ if f.is_binary() => {
            let _ = writeln!(
                out,
                "Binary files a/{old_name} and b/{} differ",
                text::line(&f.path)
            );
        }
        _ if !f.hunks.is_empty() => {
            let _ = writeln!(out, "--- a/{old_name}\n+++ b/{}", text::line(&f.path));
            for h in &f.hunks {
                let range = |start: usize, len: usize| {
                    if len == 0 {
                        format!("{start},0")
                    } else {
                        format!("{},{len}", start + 1)
                    }
                };
                let header = format!(
                    "@@ -{} +{} @@ hunk {}",
                    range(h.old_start, h.old_len),
                    range(h.new_start, h.new_len),
                    h.id
                );
                let _ = writeln!(out, "{}", paint(colour, CYAN, &header));
                for line in &h.lines {
                    body_line(out, line.tag, &line.text, colour);
                }
            }
        }
        (old, new) => whole_side(out, f, old.as_ref(), new.as_ref(), colour),
    }
}

/// The line `chock diff` prints under the file line of a change to `path`, which configures Chock:
/// what it is, whose sessions it governs, and that an apply takes it only when named.
fn sensitive_banner(path: &str, what: Sensitive) -> String {
    let dir = match path.rsplit_once('/') {
        Some((dir, _)) => format!("{}/", text::line(dir)),
        None => "the project".to_string(),
    };
    format!(
        "!! {}: this changes {} for the next session started in {dir}; chock apply will not write it \
         without --include-policy {} and a yes at a terminal",
        text::line(path),
        what.what(),
        text::line(path)
    )
}

/// An entry's whole new content as a question shows it before it lands: every line indented
/// under `    | ` with control characters spelled out as the diff does (a carriage return or an
/// escape sequence cannot hide a line), a missing final newline said, a deletion, symlink or
/// directory named. For confirming a change that configures Chock, which is shown in full.
pub fn render_content(entry: Option<&Entry>) -> String {
    let mut out = String::new();
    match entry {
        None => out.push_str("    (deleted)\n"),
        Some(Entry::Dir) => out.push_str("    (a directory)\n"),
        Some(Entry::Symlink { target: t }) => {
            let _ = writeln!(out, "    (a symlink to {})", target(t));
        }
        Some(Entry::File { data, .. }) if data.is_empty() => out.push_str("    (empty)\n"),
        Some(Entry::File { data, .. }) => {
            for line in split_lines(data) {
                let lossy = String::from_utf8_lossy(line);
                let (body, newline) = match lossy.strip_suffix('\n') {
                    Some(body) => (body, true),
                    None => (lossy.as_ref(), false),
                };
                let _ = writeln!(out, "    | {}", text::block(body));
                if !newline {
                    let _ = writeln!(out, "    \\ No newline at end of file");
                }
            }
        }
    }
    out
}

/// An added, deleted or retyped entry shown whole.
fn whole_side(
    out: &mut String,
    f: &FileChange,
    old: Option<&Entry>,
    new: Option<&Entry>,
    colour: bool,
) {
    let old_name = text::line(f.old_path.as_deref().unwrap_or(&f.path));
    let _ = writeln!(
        out,
        "--- {}\n+++ {}",
        if old.is_some() {
            format!("a/{old_name}")
        } else {
            "/dev/null".into()
        },
        if new.is_some() {
            format!("b/{}", text::line(&f.path))
        } else {
            "/dev/null".into()
        }
    );
    for (tag, entry) in [('-', old), ('+', new)] {
        match entry {
            Some(Entry::File { data, .. }) => {
                let lines = split_lines(data);
                if lines.is_empty() {
                    continue;
                }
                let header = if tag == '-' {
                    format!("@@ -1,{} +0,0 @@", lines.len())
                } else {
                    format!("@@ -0,0 +1,{} @@", lines.len())
                };
                let _ = writeln!(out, "{}", paint(colour, CYAN, &header));
                for line in lines {
                    body_line(out, tag, line, colour);
                }
            }
            Some(Entry::Symlink { target }) => {
                let _ = writeln!(out, "{tag}symlink -> {}", self::target(target));
            }
            Some(Entry::Dir) => {
                let _ = writeln!(out, "{tag}directory");
            }
            None => {}
        }
    }
}

/// A symlink target as the review shows it.
fn target(bytes: &[u8]) -> String {
    text::escaped(&String::from_utf8_lossy(bytes), Layout::Line)
}

fn body_line(out: &mut String, tag: char, bytes: &[u8], colour: bool) {
    let lossy = String::from_utf8_lossy(bytes);
    let (body, newline) = match lossy.strip_suffix('\n') {
        Some(body) => (body, true),
        None => (lossy.as_ref(), false),
    };
    // A CRLF line's final carriage return hides nothing (the newline follows): kept as is, so
    // such files do not show `\r` on every line.
    let (body, cr) = match body.strip_suffix('\r') {
        Some(body) if newline => (body, "\r"),
        _ => (body, ""),
    };
    let line = format!("{tag}{}{cr}", text::block(body));
    let code = match tag {
        '-' => RED,
        '+' => GREEN,
        _ => "",
    };
    let _ = writeln!(
        out,
        "{}",
        if code.is_empty() {
            line
        } else {
            paint(colour, code, &line)
        }
    );
    if !newline {
        let _ = writeln!(out, "\\ No newline at end of file");
    }
}
