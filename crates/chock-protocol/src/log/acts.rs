//! Acts: tool calls, their decisions and approvals, results, and the workspace's way back.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The model (or `chock exec`) asked for a tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolCall {
    /// The tool (`run_command`, `read_file`, …; `exec` for `chock exec`).
    pub tool: String,
    /// Its input as the model sent it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    /// A confined command: its argv.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argv: Option<Vec<String>>,
    /// A confined command: where it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// A confined command: the act it was classified as (`exec.cargo`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// A confined command: the program's resolved path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved: Option<String>,
}

/// What the table says of an act.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TableDecision {
    /// Runs.
    Allow,
    /// Refused.
    Deny,
    /// A person is asked.
    Ask,
    /// A reviewer model is asked.
    AgentReview,
    /// A reviewer model, then a person.
    AgentThenHuman,
}

/// An act was decided: written before the act happens (or is refused).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Decision {
    /// The act (null when the input could not be classified: such a call is refused).
    pub action: Option<String>,
    /// What the table said.
    pub decision: TableDecision,
    /// Whether the act goes ahead (after any question).
    pub allowed: bool,
    /// Which rule, person or reviewer decided, in words (`chock.toml:12 (rule `exec.*`)`).
    pub decided_by: String,
}

/// Who is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Asked {
    /// A person (at a terminal, a browser, an editor).
    Person,
    /// A reviewer model.
    Reviewer,
}

/// A question was put: an approval of an act, or the agent's question to the person.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ApprovalAsk {
    /// The question's id, unique in the session: the answer names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
    /// The act (absent for the agent's free question to the person).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// What the table said (`ask`, `agent_review`, `agent_then_human`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<TableDecision>,
    /// Which rule said it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    /// Who is asked.
    pub asked: Asked,
    /// The question as shown (the act and its detail).
    pub what: String,
    /// The reviewer model, when a reviewer is asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reviewer: Option<String>,
    /// The policy file the question is about (`chock apply --include-policy PATH`'s separate yes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_file: Option<String>,
    /// The answer is a secret (a password): every client reads it without echo and shows it
    /// masked. Absent is `false`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub secret: bool,
}

/// What the answer was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AnswerKind {
    /// Yes, this once.
    AllowOnce,
    /// Yes, and for this exact act again in this session.
    AllowSession,
    /// No.
    Deny,
    /// A reply to the agent's free question.
    Reply,
    /// Nobody answered: a refusal.
    None,
}

/// The act an apply or an undo is settled as.
pub const WORKSPACE_APPLY: &str = "workspace.apply";

/// The answers a question takes, decided here once for every answerer (the broker, the daemon's
/// `approval.asked` and `approvals.pending`, the browser, the terminal interface, the editor):
/// for an act, yes once or no, and also yes for this session unless the act is
/// [`WORKSPACE_APPLY`] — an apply writes one reviewed diff, so a yes to it must never cover a later
/// one (after an undo, the same digest would apply again unasked); a reply for the agent's free
/// question (no act); nothing for a question put to a reviewer model.
pub fn answers_for(asked: Asked, action: Option<&str>) -> Vec<AnswerKind> {
    match (asked, action) {
        (Asked::Reviewer, _) => Vec::new(),
        (Asked::Person, Some(WORKSPACE_APPLY)) => vec![AnswerKind::AllowOnce, AnswerKind::Deny],
        (Asked::Person, Some(_)) => vec![
            AnswerKind::AllowOnce,
            AnswerKind::AllowSession,
            AnswerKind::Deny,
        ],
        (Asked::Person, None) => vec![AnswerKind::Reply],
    }
}

/// The answer to a question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ApprovalAnswer {
    /// The question's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
    /// The act.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// The answer.
    pub answer: AnswerKind,
    /// Who answered (`terminal`, `reviewer:<model>`; null when nobody did).
    pub by: Option<String>,
    /// The answerer's reasons (a reviewer's, a person's note).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasons: Option<String>,
    /// The reply, for [`AnswerKind::Reply`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<String>,
    /// The policy file the question is about (`chock apply --include-policy PATH`'s separate yes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_file: Option<String>,
}

/// A tool call finished: what the model was told.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolResult {
    /// The tool.
    pub tool: String,
    /// Whether the model is told it failed (or was refused).
    pub is_error: bool,
    /// What the model was told.
    pub output: String,
    /// The workspace paths the call changed (a file tool's writes).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed: Vec<String>,
    /// What the model now knows of files, for each file version the call showed or wrote: so a
    /// resumed session's edit_file guard knows what the model was shown.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shown: Vec<ShownLines>,
}

/// The lines of one file version the model has been shown (or wrote) in the session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ShownLines {
    /// The path below the project.
    pub path: String,
    /// The version: the file's content hash as the file tools compute it.
    pub hash: String,
    /// 1-based inclusive line ranges, sorted and disjoint.
    pub lines: Vec<[usize; 2]>,
}

/// How a confined command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum CommandStatus {
    /// It exited with this code.
    Exited(i32),
    /// A signal killed it.
    Signaled(i32),
    /// Its timeout killed it.
    TimedOut,
}

/// A confined command ended, or never ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum CommandResult {
    /// The decision refused it.
    Refused {
        /// Who refused (the table, a person, a reviewer, nobody answering).
        by: String,
        /// Why.
        reason: String,
    },
    /// A sandbox layer or the egress proxy could not be set up: the call fails (rule 1).
    Failed {
        /// What failed (`layer_missing`, `proxy`, …).
        error: String,
        /// The layer, when one is named.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        layer: Option<String>,
        /// The error.
        message: String,
    },
    /// It ran.
    Ran {
        /// How it ended.
        status: CommandStatus,
        /// Its exit code as a shell reports it (128 + signal; null on a timeout).
        exit_code: Option<i32>,
        /// The limits it ran under, as the sandbox reported them.
        limits: Value,
        /// Wall time.
        duration_ms: u64,
        /// Bytes of standard output.
        stdout_bytes: usize,
        /// Bytes of standard error.
        stderr_bytes: usize,
        /// Whether the output kept was cut.
        truncated: bool,
        /// The workspace checkpoint taken after it (git backing), if anything changed.
        checkpoint: Option<String>,
    },
}

/// One path an apply or undo wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AppliedFile {
    /// The path below the project.
    pub path: String,
    /// Hash of the entry before (`-` for none).
    pub before: String,
    /// Hash of the entry after (`-` for none).
    pub after: String,
}

/// Selected workspace changes were written into the real project (or an apply was undone).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WorkspaceApply {
    /// The apply's id (`chock undo` takes it).
    pub apply_id: String,
    /// `apply` or `undo`.
    pub kind: String,
    /// For an undo: the apply it reverted.
    pub undo_of: Option<String>,
    /// The project written.
    pub project: String,
    /// Git backing: the base commit.
    pub base_commit: Option<String>,
    /// Git backing: the checkpoint the changes came from.
    pub checkpoint: Option<String>,
    /// SHA-256 over the touched paths as they were before.
    pub base_hash: String,
    /// SHA-256 over the touched paths as they are after.
    pub result_hash: String,
    /// The digest of what was applied (the one `chock diff` prints).
    pub digest: Option<String>,
    /// Selected hunk ids (empty when whole files were chosen).
    pub hunks: Vec<String>,
    /// Selected hunks or files the project already held.
    pub already: Vec<String>,
    /// Paths whose set-uid/set-gid bits the write dropped.
    pub setid_stripped: Vec<String>,
    /// Every path written.
    pub files: Vec<AppliedFile>,
    /// Paths that configure Chock (its policy) that the person named and confirmed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policy_files: Vec<String>,
}

/// The workspace was adopted: copied aside into the project.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WorkspaceAdopt {
    /// Where it was copied.
    pub dest: String,
    /// Files copied.
    pub files: usize,
    /// Directories made.
    pub dirs: usize,
    /// Paths listed as deleted.
    pub deleted: usize,
}
