//! `chock migrate`: reads another harness's configuration and renders `chock.toml` rows.
//!
//! The crate is pure: it is handed the bytes of each file and returns what it found. A foreign
//! allow was judged under another tool's threat model, so it never becomes `allow` here: it becomes
//! `ask`, except for the hosts a source itself named for fetching when the person passes
//! `--permission net.fetch`. What has no equivalent (a hook, a plugin, a rule over command text, a
//! stance over the whole session) is refused and named, never guessed at. [`vet`] runs last on
//! every read and moves any row this build does not act on into the refusals. See docs/migrate.md.
#![forbid(unsafe_code)]
// No library makes an async runtime or blocks on one (the workspace's clippy.toml).
#![cfg_attr(not(test), deny(clippy::disallowed_methods))]

mod claude;
mod codex;
mod jsonc;
mod mcp;
mod notes;
mod opencode;
mod render;
mod transcript;
mod vet;
mod zed;

use std::fmt;
use std::path::{Path, PathBuf};

use chock_policy::Decision;
use sha2::{Digest, Sha256};

pub use notes::{Note, notes};
pub use render::{render, report};
pub use transcript::{Transcript, transcript};
pub use vet::vet;

/// A harness this build reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Harness {
    /// Anthropic's Claude Code.
    ClaudeCode,
    /// OpenAI's Codex CLI.
    Codex,
    /// OpenCode.
    OpenCode,
    /// The Zed editor's agent.
    Zed,
    /// oh-my-pi (`omp`): its MCP files only (docs/migrate.md says why).
    OhMyPi,
}

/// Every harness name `--from` accepts, in the order the error lists them.
pub const HARNESSES: &[(&str, Harness)] = &[
    ("claude-code", Harness::ClaudeCode),
    ("codex", Harness::Codex),
    ("opencode", Harness::OpenCode),
    ("zed", Harness::Zed),
    ("oh-my-pi", Harness::OhMyPi),
];

impl Harness {
    /// Parses a `--from` name; a name this build does not read is refused against the list.
    pub fn parse(name: &str) -> Result<Harness, MigrateError> {
        HARNESSES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, h)| *h)
            .ok_or_else(|| MigrateError::UnknownHarness {
                name: name.to_owned(),
                known: HARNESSES
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }

    /// The name `--from` takes.
    pub fn name(self) -> &'static str {
        HARNESSES
            .iter()
            .find(|(_, h)| *h == self)
            .map(|(n, _)| *n)
            .unwrap_or("?")
    }

    /// The files this harness documents for a person (`home`) and a project, in reading order:
    /// user files first, so a project's rows and servers come after (a server name both define is
    /// kept from the first, the user's).
    pub fn default_files(self, home: &Path, project: &Path) -> Vec<PathBuf> {
        match self {
            Harness::ClaudeCode => vec![
                home.join(".claude/settings.json"),
                home.join(".claude.json"),
                project.join(".claude/settings.json"),
                project.join(".claude/settings.local.json"),
                project.join(".mcp.json"),
            ],
            Harness::Codex => vec![
                home.join(".codex/config.toml"),
                project.join(".codex/config.toml"),
            ],
            Harness::OpenCode => vec![
                home.join(".config/opencode/opencode.json"),
                project.join("opencode.json"),
            ],
            Harness::Zed => vec![
                home.join(".config/zed/settings.json"),
                project.join(".zed/settings.json"),
            ],
            Harness::OhMyPi => vec![
                home.join(".omp/agent/mcp.json"),
                project.join(".omp/mcp.json"),
            ],
        }
    }
}

impl fmt::Display for Harness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One file as read: its path and its bytes, hashed before anything is parsed.
#[derive(Debug, Clone)]
pub struct Input {
    /// Where it was read.
    pub path: PathBuf,
    /// Its bytes as read.
    pub bytes: Vec<u8>,
}

/// How to read: what the person allowed beyond the default, and which project this is.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// `--permission net.fetch`: the hosts a source named as allowed for fetching become `allow`.
    pub carry_net_fetch: bool,
    /// The project (canonical), so that of `~/.claude.json`'s per-project servers only this
    /// project's are read. None: none of them.
    pub project: Option<PathBuf>,
}

/// One `[[rule]]` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The action pattern.
    pub action: String,
    /// The decision: `deny`, `ask`, or `allow` only for a named fetch host under `--permission`.
    pub decision: Decision,
    /// Where it came from, written as the rule's `why`.
    pub why: String,
    /// The file it was read from.
    pub file: PathBuf,
}

/// One `[mcp.servers.NAME]` table; it still needs `chock mcp trust` before it starts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Server {
    /// The server's name (one label).
    pub name: String,
    /// A stdio server's program.
    pub command: Option<String>,
    /// Its arguments.
    pub args: Vec<String>,
    /// An HTTP server's endpoint.
    pub url: Option<String>,
    /// `Some("sse")` for a legacy SSE server.
    pub transport: Option<String>,
    /// The NAMES of the variables the source set for it; never their values.
    pub env: Vec<String>,
    /// The file it came from.
    pub from: PathBuf,
}

/// Something read that carries into no field, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The file it was read from.
    pub file: PathBuf,
    /// What it was (a key, a rule as written, a server's name).
    pub item: String,
    /// Why it has no equivalent here.
    pub reason: String,
}

/// A file read, with the SHA-256 of its bytes as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Carried {
    /// Where.
    pub path: PathBuf,
    /// Lower-case hex SHA-256.
    pub sha256: String,
}

/// Everything one `chock migrate` found.
#[derive(Debug, Clone, Default)]
pub struct Migration {
    /// The rows to write.
    pub rows: Vec<Row>,
    /// The servers to write.
    pub servers: Vec<Server>,
    /// What carries into no field.
    pub refused: Vec<Refusal>,
    /// Every file read.
    pub carried: Vec<Carried>,
}

impl Migration {
    pub(crate) fn refuse(
        &mut self,
        file: &Path,
        item: impl Into<String>,
        reason: impl Into<String>,
    ) {
        self.refused.push(Refusal {
            file: file.to_owned(),
            item: item.into(),
            reason: reason.into(),
        });
    }

    pub(crate) fn row(&mut self, file: &Path, action: String, decision: Decision, why: String) {
        self.rows.push(Row {
            action,
            decision,
            why,
            file: file.to_owned(),
        });
    }
}

/// Why a migration could not be read at all.
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    /// `--from` named a harness this build does not read.
    #[error("`{name}` is not a harness this build reads; it reads: {known}")]
    UnknownHarness {
        /// The name given.
        name: String,
        /// The names it reads.
        known: String,
    },
    /// A file is not the format its harness documents.
    #[error("{}: {problem}", path.display())]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
}

pub(crate) fn format_error(path: &Path, problem: impl fmt::Display) -> MigrateError {
    MigrateError::Format {
        path: path.to_owned(),
        problem: problem.to_string(),
    }
}

/// Reads `inputs` as `harness` files, then vets the result. Every input is hashed and listed under
/// "carried", whatever it held.
pub fn read(
    harness: Harness,
    inputs: &[Input],
    options: &Options,
) -> Result<Migration, MigrateError> {
    let mut found = Migration::default();
    for input in inputs {
        found.carried.push(Carried {
            path: input.path.clone(),
            sha256: sha256_hex(&input.bytes),
        });
        match harness {
            Harness::ClaudeCode => claude::read(input, options, &mut found)?,
            Harness::Codex => codex::read(input, &mut found)?,
            Harness::OpenCode => opencode::read(input, &mut found)?,
            Harness::Zed => zed::read(input, &mut found)?,
            Harness::OhMyPi => mcp::read_mcp_json(input, "oh-my-pi", &mut found)?,
        }
    }
    vet(&mut found);
    Ok(found)
}

/// The decision a foreign verdict renders at: a deny stays `deny`, anything else is `ask`.
pub(crate) fn foreign(deny: bool) -> Decision {
    if deny { Decision::Deny } else { Decision::Ask }
}

/// The lower-case hex SHA-256 of `bytes`: how every file read is named in the header and report.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}
