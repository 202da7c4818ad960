//! Load errors: every one names the file, line and column, what is wrong, and the offending text.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

use crate::action::ActionError;

/// What is wrong with a policy file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The file exists but cannot be read.
    #[error("cannot read the file: {0}")]
    Io(String),
    /// Not TOML, or TOML of the wrong shape (an unknown field, a missing `decision`, a wrong type).
    #[error("{0}")]
    Toml(String),
    /// `decision` is not one of the five.
    #[error("unknown decision (expected allow, deny, ask, agent_review or agent_then_human)")]
    UnknownDecision,
    /// The action pattern is not well formed.
    #[error("malformed action name: {0}")]
    MalformedAction(ActionError),
    /// The pattern is well formed but no action this build defines matches it.
    #[error(
        "this pattern matches no action this build defines (see `chock policy catalogue` or docs/policy.md)"
    )]
    UndefinedAction,
    /// Two rules of the same specificity match the same actions with different decisions.
    #[error(
        "ambiguous: {other} says `{other_decision}` for the same actions, and this rule says `{decision}`"
    )]
    Ambiguous {
        /// Where the other rule is (file:line and its pattern).
        other: String,
        /// What the other rule decides.
        other_decision: String,
        /// What this rule decides.
        decision: String,
    },
    /// A project rule would loosen what the org bundle decides.
    #[error(
        "org conflict: the org bundle's rule at {org_rule} decides `{org_decision}` for these actions, and a project \
         rule cannot loosen it to `{decision}`"
    )]
    OrgConflict {
        /// Where the org bundle's rule is.
        org_rule: String,
        /// What the org bundle decides.
        org_decision: String,
        /// The looser decision the project rule asked for.
        decision: String,
    },
    /// A `[sandbox]` path that may not be handed to the sandbox.
    #[error("sandbox path refused: {0}")]
    SandboxPath(String),
    /// A `[sandbox]` env name that may not be passed into the sandbox.
    #[error("sandbox env name refused: {0}")]
    SandboxEnv(String),
    /// A `[sandbox] toolchains` name that is unknown, not on this host, or expands to a path
    /// the host path checker refuses.
    #[error("toolchain refused: {0}")]
    Toolchain(String),
    /// A `[limits]` or `[subagents]` value out of range or above the org bundle's ceiling.
    #[error("limit refused: {0}")]
    Limit(String),
    /// An `[mcp.servers.NAME]` table that cannot be used (the field and the problem).
    #[error("{0}")]
    Mcp(String),
    /// A `[plugins.NAME]` table that cannot be used (a bad name, path, digest or limit).
    #[error("plugin refused: {0}")]
    Plugin(String),
    /// `[sandbox] isolation` is not one of the isolations this build has.
    #[error(
        "unknown `[sandbox] isolation` (expected \"process\", the in-process sandbox, or \"microvm\", the same sandbox inside a guest with a kernel of its own)"
    )]
    Isolation,
    /// `[sandbox] snapshots = true` without `isolation = "microvm"`.
    #[error(
        "`[sandbox] snapshots = true` needs `isolation = \"microvm\"`: a snapshot is of a microVM guest"
    )]
    Snapshots,
}

/// A policy file that cannot be loaded. Nothing runs after one of these.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyError {
    /// The file as it was named when loading.
    pub file: PathBuf,
    /// 1-based line; 0 when the error is about the whole file (it cannot be read).
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
    /// What is wrong (boxed to keep `Result<_, PolicyError>` small).
    pub kind: Box<ErrorKind>,
    /// The offending text, as written in the file.
    pub text: String,
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let file = self.file.display();
        if self.line == 0 {
            write!(f, "{file}: {}", self.kind)
        } else {
            write!(
                f,
                "{file}:{}:{}: {}: `{}`",
                self.line, self.column, self.kind, self.text
            )
        }
    }
}

impl std::error::Error for PolicyError {}

/// A file's text and name, used to turn byte spans into `file:line:column`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Located<'a> {
    pub file: &'a Path,
    pub text: &'a str,
}

impl Located<'_> {
    /// 1-based line and column (in characters) of a byte offset.
    pub fn line_column(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let before = self.text.get(..offset).unwrap_or(self.text);
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before.get(line_start..).map_or(0, |s| s.chars().count()) + 1;
        (line, column)
    }

    /// The 1-based line of a byte offset.
    pub fn line(&self, offset: usize) -> usize {
        self.line_column(offset).0
    }

    /// An error at `span`, quoting the text under it (only its first line, trimmed, for long spans).
    pub fn error(&self, span: Range<usize>, kind: ErrorKind) -> PolicyError {
        let (line, column) = self.line_column(span.start);
        let raw = self.text.get(span.clone()).unwrap_or("");
        let mut first = raw.lines().next().unwrap_or("").trim();
        if first.is_empty() {
            // A point rather than a range (toml reports where it stopped): quote that whole line.
            first = self.text.lines().nth(line - 1).unwrap_or("").trim();
        }
        let text = strip_quotes(first).to_owned();
        PolicyError {
            file: self.file.to_path_buf(),
            line,
            column,
            kind: Box::new(kind),
            text,
        }
    }

    /// `file:line` for naming a rule in another rule's error.
    pub fn place(&self, offset: usize) -> String {
        format!("{}:{}", self.file.display(), self.line(offset))
    }
}

/// `"exec.*"` → `exec.*`: the quotes are TOML's, not the user's text.
fn strip_quotes(text: &str) -> &str {
    for quote in ['"', '\''] {
        if text.len() >= 2 && text.starts_with(quote) && text.ends_with(quote) {
            return &text[1..text.len() - 1];
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_and_column_count_characters_from_one() {
        let text = "a = 1\nbé = \"x\"\n";
        let loc = Located {
            file: Path::new("f.toml"),
            text,
        };
        assert_eq!(loc.line_column(0), (1, 1));
        assert_eq!(loc.line_column(6), (2, 1));
        // `=` on line 2 follows `bé ` (3 characters, 4 bytes).
        assert_eq!(loc.line_column(10), (2, 4));
        let err = loc.error(6..9, ErrorKind::UnknownDecision);
        assert_eq!(
            err.to_string(),
            "f.toml:2:1: unknown decision (expected allow, deny, ask, agent_review or agent_then_human): `bé`"
        );
    }
}
