//! The review methods' params and results: which changes (`review.diff`, `review.apply`,
//! `review.undo`), the changes themselves, what an apply wrote, and what `log.verify` found.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Which changes: whole files and single hunks, by the ids (or paths) `review.diff` gives. Both
/// empty: everything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Selection {
    /// Whole files, by path or file id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
    /// Single hunks, by hunk id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hunks: Vec<String>,
}

/// `review.diff`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiffParams {
    /// The session.
    pub session: String,
    /// Only these changes (absent: all): the digest is then that of the selection.
    #[serde(default)]
    pub selection: Selection,
}

/// `review.apply`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApplyParams {
    /// The session.
    pub session: String,
    /// The digest `review.diff` gave for this same selection: pinned, never optional.
    pub digest: String,
    /// The changes to write (absent: all).
    #[serde(default)]
    pub selection: Selection,
}

/// `review.undo`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UndoParams {
    /// The apply to revert, as `review.apply` returned it.
    pub apply_id: String,
}

/// How a file changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FileStatus {
    /// New.
    Added,
    /// Removed.
    Deleted,
    /// Changed in place.
    Modified,
    /// Moved (same content).
    Renamed,
    /// A file became a link or a directory, or the other way round.
    TypeChanged,
}

/// One changed file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DiffFile {
    /// Its id (a selection names it).
    pub id: String,
    /// Its path below the project.
    pub path: String,
    /// Where a renamed file came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_path: Option<String>,
    /// How it changed.
    pub status: FileStatus,
    /// Whether its bytes are not text (no hunks).
    pub binary: bool,
    /// Whether it configures Chock (a policy file): `review.apply` refuses it.
    pub policy_file: bool,
    /// Lines added.
    pub added: usize,
    /// Lines removed.
    pub removed: usize,
    /// Its hunks, each selectable alone (empty for an added, deleted or binary file).
    pub hunks: Vec<DiffHunk>,
}

/// One hunk of a text file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DiffHunk {
    /// Its id (a selection names it).
    pub id: String,
    /// First line shown in the old file (1-based).
    pub old_start: usize,
    /// Lines shown from the old file.
    pub old_len: usize,
    /// First line shown in the new file (1-based).
    pub new_start: usize,
    /// Lines shown from the new file.
    pub new_len: usize,
    /// The lines, each starting with ` `, `-` or `+`, without its newline (bytes that are not
    /// UTF-8 replaced; `patch` shows a missing newline at the end).
    pub lines: Vec<String>,
}

/// `review.diff`'s result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ReviewDiff {
    /// The session.
    pub session: String,
    /// The digest of exactly the selection shown: `review.apply` takes it.
    pub digest: String,
    /// The selected changes.
    pub files: Vec<DiffFile>,
    /// The same as a unified diff (what `chock diff` prints).
    pub patch: String,
}

/// `review.apply`'s and `review.undo`'s result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Applied {
    /// The apply's id (`review.undo` takes it); absent when nothing was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apply_id: Option<String>,
    /// The digest of what was applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// Every path written.
    pub paths: Vec<String>,
    /// Selected changes the project already held.
    pub already: Vec<String>,
    /// Directories an undo kept because they hold other files.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kept_dirs: Vec<String>,
}

/// What the seal says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SealState {
    /// There is no seal.
    Unsealed,
    /// The seal holds (against the key written in it).
    Sealed,
    /// The seal does not hold.
    Broken,
}

/// `log.verify`'s result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Verified {
    /// The session.
    pub session: String,
    /// No break in the chain and no broken seal.
    pub intact: bool,
    /// Complete lines read.
    pub lines: usize,
    /// The last complete line's seq.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_seq: Option<u64>,
    /// SHA-256 of the last complete line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_hash: Option<String>,
    /// Every break found, in words, by line.
    pub problems: Vec<String>,
    /// Whether a last line was cut short by a crash (not a break).
    pub torn_tail: bool,
    /// The seal.
    pub seal: SealState,
    /// Events written after the sealed one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events_after_seal: Option<u64>,
}
