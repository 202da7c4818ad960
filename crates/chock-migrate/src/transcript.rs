//! `--sessions`: a Claude Code transcript, checked to be the JSON Lines it is documented as and
//! counted, to be copied beside a new session's log. It is never turned into events: the log's
//! hash chain signs only what Chock itself saw.

use std::path::{Path, PathBuf};

use crate::{Harness, Input, MigrateError, format_error, sha256_hex};

/// A transcript to import.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transcript {
    /// SHA-256 (hex) of its bytes as read.
    pub sha256: String,
    /// Its non-empty lines.
    pub lines: u64,
    /// The name its copy takes beside the log: `<sha256>.jsonl`.
    pub file_name: String,
}

impl Harness {
    /// Where this harness keeps its transcripts of `project`, if this build imports them: Claude
    /// Code's `~/.claude/projects/<the project's path, every character not a letter or digit
    /// written `-`>/`.
    pub fn transcript_dir(self, home: &Path, project: &Path) -> Option<PathBuf> {
        match self {
            Harness::ClaudeCode => {
                let encoded: String = project
                    .to_string_lossy()
                    .chars()
                    .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
                    .collect();
                Some(home.join(".claude/projects").join(encoded))
            }
            _ => None,
        }
    }
}

/// Checks `input` as a `harness` transcript: one JSON object a line.
pub fn transcript(harness: Harness, input: &Input) -> Result<Transcript, MigrateError> {
    if harness != Harness::ClaudeCode {
        return Err(format_error(
            &input.path,
            format!("this build imports only claude-code transcripts, not {harness}'s"),
        ));
    }
    let text = std::str::from_utf8(&input.bytes)
        .map_err(|_| format_error(&input.path, "a transcript is UTF-8 JSON Lines"))?;
    let mut lines = 0;
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<serde_json::Value>(line) {
            Ok(serde_json::Value::Object(_)) => lines += 1,
            _ => {
                return Err(format_error(
                    &input.path,
                    format!("line {}: not a JSON object", n + 1),
                ));
            }
        }
    }
    let sha256 = sha256_hex(&input.bytes);
    Ok(Transcript {
        file_name: format!("{sha256}.jsonl"),
        sha256,
        lines,
    })
}
