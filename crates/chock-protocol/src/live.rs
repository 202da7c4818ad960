//! What a client sees while a session runs, as it happens.
//!
//! These events are for showing progress (the CLI prints them; `--json` writes one per line; a
//! daemon forwards them). They are not the session log: the log is the hash-chained record, written
//! before each act ([`crate::log`]). The JSON form is the client protocol, documented in
//! docs/json-events.md: every line is an object with a `type` field naming the variant in
//! snake_case, and the variant's fields.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

mod display;
mod ended;

pub use display::{ToolDisplay, ToolKind, input_field, input_line};
pub use ended::Ended;

/// One thing that happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AgentEvent {
    /// The session exists; nothing has been sent to a model yet.
    SessionStarted {
        /// The session's name (`chock diff <session>` takes it).
        session: String,
        /// The session directory holding `log.jsonl`.
        log_dir: String,
        /// The project the workspace copies.
        project: String,
        /// The provider's name.
        provider: String,
        /// The model asked for.
        model: String,
    },
    /// A turn begins.
    TurnStarted {
        /// 1-based turn number.
        turn: u32,
    },
    /// More reply text from the model: a delta of the `message` item named.
    Text {
        /// The item (`t<turn>.message`).
        item: String,
        /// The new text.
        text: String,
    },
    /// More visible reasoning from the model: a delta of the `reasoning` item named.
    Thinking {
        /// The item (`t<turn>.reasoning`).
        item: String,
        /// The new text.
        text: String,
    },
    /// An item of the current turn began: the model's message or reasoning, a tool call, a
    /// running command's output, an approval. Its deltas and its completion name the same item.
    ItemStarted {
        /// The item's id, unique in the session (`t3.message`, the call id, `<call id>.output`,
        /// the question id).
        item: String,
        /// The turn it belongs to.
        turn: u32,
        /// What it is.
        kind: ItemKind,
    },
    /// More of an item that is not model text: what a running command printed (escape sequences
    /// as the command wrote them; known secrets redacted).
    ItemDelta {
        /// The item.
        item: String,
        /// The new text.
        text: String,
    },
    /// An item ended.
    ItemCompleted {
        /// The item.
        item: String,
        /// False when it failed, was refused, interrupted, or (an approval) not allowed.
        ok: bool,
    },
    /// The model request failed and is being sent again after a wait.
    ModelRetry {
        /// The attempt that failed (1-based).
        attempt: u32,
        /// Milliseconds before the next attempt.
        wait_ms: u64,
        /// Why.
        reason: String,
    },
    /// The model's reply is complete.
    ModelResponse {
        /// The turn.
        turn: u32,
        /// Uncached input tokens.
        input_tokens: u64,
        /// Output tokens.
        output_tokens: u64,
        /// Tokens read from the prompt cache.
        cache_read_tokens: u64,
        /// Tokens written to the prompt cache.
        cache_write_tokens: u64,
        /// This reply's price in US dollars (null when the model's price is unknown).
        cost_usd: Option<f64>,
        /// Why the model stopped (`end_turn`, `tool_use`, `max_tokens`, …).
        stop_reason: crate::log::StopReason,
    },
    /// The model called a tool.
    ToolCall {
        /// The call's id (also on every log event about it).
        call_id: String,
        /// The tool.
        tool: String,
        /// Its input as the model sent it.
        input: serde_json::Value,
        /// How the call is shown, as its tool describes it (absent: a tool this session does not
        /// know, shown by its name).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        display: Option<ToolDisplay>,
    },
    /// A person or reviewer is being asked about an act.
    ApprovalAsked {
        /// The question's id (the approval item; an answer names it).
        #[serde(default)]
        question: String,
        /// The call.
        call_id: String,
        /// The act.
        action: String,
        /// What the table said (`ask`, `agent_review`, `agent_then_human`).
        decision: crate::log::TableDecision,
        /// Which rule said it.
        decided_by: String,
    },
    /// The act was decided (this precedes the act, as the log event does).
    Decision {
        /// The call.
        call_id: String,
        /// The act.
        action: String,
        /// Whether it runs.
        allowed: bool,
        /// The table's decision.
        decision: crate::log::TableDecision,
        /// Which rule, person or reviewer decided.
        decided_by: String,
    },
    /// A tool call finished.
    ToolResult {
        /// The call.
        call_id: String,
        /// The tool.
        tool: String,
        /// False when it failed or was refused.
        ok: bool,
        /// The first lines of what the model was told.
        summary: String,
    },
    /// The model replaced its plan.
    PlanUpdated {
        /// The steps, in order.
        steps: Vec<PlanStep>,
    },
    /// The model named the session.
    TitleSet {
        /// The title.
        title: String,
    },
    /// A background command ended.
    BackgroundEnded {
        /// Its handle.
        handle: String,
        /// Its exit status (null when killed by a signal or timed out).
        status: Option<i32>,
    },
    /// A turn ended.
    TurnEnded {
        /// The turn.
        turn: u32,
    },
    /// The session ended.
    SessionEnded {
        /// The totals.
        summary: Summary,
    },
}

/// One step of the model's plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PlanStep {
    /// What to do.
    pub step: String,
    /// `pending`, `in_progress` or `done`.
    #[serde(default)]
    pub status: StepStatus,
}

/// A step's status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    /// Not started.
    #[default]
    Pending,
    /// Being done now.
    InProgress,
    /// Done.
    Done,
}

impl StepStatus {
    /// The wire word (`pending`, `in_progress`, `done`), for a client that prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            StepStatus::Pending => "pending",
            StepStatus::InProgress => "in_progress",
            StepStatus::Done => "done",
        }
    }
}

impl std::fmt::Display for StepStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The session's totals, shown at the end.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Summary {
    /// The session's name.
    pub session: String,
    /// Why it ended (`done`, `max_turns`, `out_of_budget`, `error: …`; see [`Ended`]).
    pub ended: Ended,
    /// Turns taken.
    pub turns: u32,
    /// Tool calls made.
    pub tool_calls: u32,
    /// Decisions by outcome: allowed by the table, by a person, by a reviewer; refused likewise.
    pub decisions: DecisionCounts,
    /// Tokens.
    pub input_tokens: u64,
    /// Tokens.
    pub output_tokens: u64,
    /// Price in US dollars (None when some model's price is unknown).
    pub cost_usd: Option<f64>,
    /// The session's title, if the model set one.
    pub title: Option<String>,
    /// How to review the work (`chock diff <session>`).
    pub review: String,
    /// How to take the work: `chock apply <session>` (git project), or `chock workspace adopt <session>`
    /// (a project with no git, whose work is copied aside).
    pub take: String,
    /// Each child session this one spawned (`spawn_agent`), with what it cost, in spawn order.
    /// `cost_usd` above is this session's own model calls; a child's cost is here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<ChildCost>,
}

/// A price as every client shows it: `$0.1234`, or `unknown` when some model call had no price
/// (never `$0.0000`, which would read as free). One rule for a session's own cost and a child's.
pub fn cost_text(cost_usd: Option<f64>) -> String {
    cost_usd.map_or_else(|| "unknown".to_string(), |usd| format!("${usd:.4}"))
}

/// What one child session cost its parent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ChildCost {
    /// The child's session id.
    pub session: String,
    /// How it ended.
    pub ended: crate::log::ChildEnd,
    /// Price in US dollars, its own children included (None when a price was unknown).
    pub cost_usd: Option<f64>,
    /// Tokens, input and output, its own children included.
    pub tokens: u64,
}

/// Decisions counted by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DecisionCounts {
    /// Allowed by the table outright.
    pub allowed_by_table: u32,
    /// Allowed by a person (or an earlier "yes for this session").
    pub allowed_by_person: u32,
    /// Allowed by a reviewer model.
    pub allowed_by_reviewer: u32,
    /// Refused by the table.
    pub denied_by_table: u32,
    /// Refused by a person or reviewer.
    pub denied_by_answer: u32,
    /// Refused because nobody answered.
    pub unanswered: u32,
}

/// What an item is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ItemKind {
    /// The model's reply text.
    Message,
    /// The model's visible reasoning.
    Reasoning,
    /// A tool call (its `tool_call` event carries the input, its `tool_result` the outcome).
    ToolCall {
        /// The call.
        call_id: String,
        /// The tool.
        tool: String,
    },
    /// What a confined command prints while it runs.
    CommandOutput {
        /// The call that runs it.
        call_id: String,
    },
    /// A question about an act put to a person or a reviewer.
    Approval {
        /// The call it belongs to.
        call_id: String,
        /// The act.
        action: String,
    },
}
