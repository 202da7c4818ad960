//! What a client sends to a running session.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::log::{AnswerKind, TableDecision};
use crate::rpc::Selection;

/// One operation, as a client sends it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    /// A task, or a follow-up once the current turn has ended.
    UserInput {
        /// The text.
        text: String,
    },
    /// Stop the current turn: the model stream ends and a running command's whole process tree
    /// is killed. Logged.
    Interrupt,
    /// An answer to question `question` (an approval, or the agent's question to the person).
    Answer {
        /// The question's id, as the ask named it.
        question: String,
        /// The answer; only the answers the question listed are valid.
        answer: AnswerKind,
        /// The person's note, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reasons: Option<String>,
        /// The reply to a free question.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reply: Option<String>,
    },
    /// Narrow the session's policy (never widen): `pattern` gets `decision`.
    Restrict {
        /// An action pattern (`net.connect.*`).
        pattern: String,
        /// A decision at least as strict as the table's for it.
        decision: TableDecision,
    },
    /// Apply the selected files and hunks of the workspace to the real project, pinned to the
    /// digest of the diff the person reviewed: decided as `workspace.apply` and logged before
    /// anything is written.
    Apply {
        /// What to apply (empty: everything).
        #[serde(default)]
        selection: Selection,
        /// The digest `review.diff` returned for that selection.
        digest: String,
    },
    /// Revert an earlier apply of this session, decided and logged as the apply was.
    Undo {
        /// The apply's id.
        apply_id: String,
    },
    /// Make a new session beside this one, starting after turn `turn` of it (left closed: resume
    /// it to go on).
    Fork {
        /// The turn to fork after.
        turn: u32,
    },
    /// End the session after the current turn (or now, when idle).
    End,
}
