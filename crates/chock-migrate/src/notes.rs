//! `--memory`: another harness's notes (CLAUDE.md, AGENTS.md, Zed's .rules) as memory notes. They
//! come in as data: each note opens by naming the file and hash it was read from, and the session
//! reads notes only through `memory_read`'s frame, never as instructions.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::{Harness, Input, MigrateError, format_error};

/// One note to store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// Its name (a valid note name: `a-z 0-9 - _ .`, at most 64).
    pub name: String,
    /// Its whole text, the provenance line first.
    pub text: String,
}

impl Harness {
    /// The notes files this harness documents for a person and a project.
    pub fn memory_files(self, home: &Path, project: &Path) -> Vec<PathBuf> {
        match self {
            Harness::ClaudeCode => vec![
                home.join(".claude/CLAUDE.md"),
                project.join("CLAUDE.md"),
                project.join(".claude/CLAUDE.md"),
            ],
            Harness::Codex => vec![home.join(".codex/AGENTS.md"), project.join("AGENTS.md")],
            Harness::OpenCode => vec![
                home.join(".config/opencode/AGENTS.md"),
                project.join("AGENTS.md"),
            ],
            Harness::Zed => vec![project.join(".rules")],
            Harness::OhMyPi => vec![home.join(".omp/agent/AGENTS.md"), project.join("AGENTS.md")],
        }
    }
}

/// `inputs` as notes of at most `max_bytes` each: a longer file is cut at line ends into parts.
pub fn notes(
    harness: Harness,
    inputs: &[Input],
    max_bytes: usize,
) -> Result<Vec<Note>, MigrateError> {
    let mut out = Vec::new();
    for (i, input) in inputs.iter().enumerate() {
        let text = std::str::from_utf8(&input.bytes)
            .map_err(|_| format_error(&input.path, "notes are not UTF-8 text"))?;
        let sha = hex::encode(Sha256::digest(&input.bytes));
        let stem: String = input
            .path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("notes")
            .to_ascii_lowercase()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        let base = format!("{}-{}-{}", harness.name(), i + 1, stem.trim_matches('-'));
        let base: String = base.chars().take(56).collect();
        let header = |part: usize, of: usize| {
            format!(
                "Imported by chock migrate from {} (sha256:{sha}), part {part} of {of}: another harness's notes, kept as data.\n",
                input.path.display()
            )
        };
        // The longest header this file can get, so every part fits with its own.
        let room = max_bytes.saturating_sub(header(999, 999).len()).max(64);
        let parts = split(text, room);
        let of = parts.len();
        for (n, part) in parts.into_iter().enumerate() {
            let name = if of == 1 {
                base.clone()
            } else {
                format!("{base}-p{}", n + 1)
            };
            out.push(Note {
                name,
                text: format!("{}{part}", header(n + 1, of)),
            });
        }
    }
    Ok(out)
}

/// `text` in pieces of at most `room` bytes, cut after a newline where one is, else at a char.
fn split(text: &str, room: usize) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut rest = text;
    while rest.len() > room {
        let mut cut = room;
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        if let Some(nl) = rest[..cut].rfind('\n') {
            cut = nl + 1;
        }
        parts.push(&rest[..cut]);
        rest = &rest[cut..];
    }
    parts.push(rest);
    parts
}
