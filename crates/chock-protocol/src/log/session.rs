//! The session's own events: its start and end, turns, the model, notes.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::live::Summary;

/// Line 0 of every log: who, where, which version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionStart {
    /// The log format (`chock-log/1`).
    pub format: String,
    /// The session's id (also the directory's name).
    pub session_id: String,
    /// The version of chock that wrote the log.
    pub chock_version: String,
    /// The writing process.
    pub pid: u32,
    /// The real project the session works on.
    pub project: Option<String>,
    /// The session that spawned this one, or the session this one was forked from.
    pub parent: Option<String>,
    /// The command that started it (`run`, `exec`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The provider's name (`anthropic`, `demo`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// The model asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The project's `chock.toml`, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_file: Option<String>,
    /// The organisation bundle, if one is installed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub org_policy_file: Option<String>,
    /// For a fork (`chock sessions fork`): the parent's log at the end of the turn this session
    /// starts from. Its conversation and ratchet are the parent's up to that line, its workspace
    /// the one that turn ended with (docs/forks.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fork: Option<ForkOrigin>,
    /// What each `[sandbox] toolchains` name of the policy expanded to on this host, so what a
    /// name opened in the sandbox is on the record (docs/toolchains.md).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub toolchains: Vec<ToolchainExpansion>,
}

/// One `[sandbox] toolchains` name and the paths and names it added to the sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct ToolchainExpansion {
    /// The profile's name (`rust`).
    pub name: String,
    /// Where its programs were found on the host.
    pub found: Vec<String>,
    /// Host paths shown read-only.
    pub read: Vec<String>,
    /// Caches bound read-write: shared with the host, or this project's own copy (docs/toolchains.md).
    pub write: Vec<String>,
    /// Host environment names passed in.
    pub env: Vec<String>,
    /// The files that named it: the project's chock.toml, the person's config.toml, or both
    /// (absent in logs written before the person's config could name toolchains).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub from: Vec<String>,
}

/// Where a fork starts: one line of the parent's log, named by its seq and hash so a changed or
/// truncated parent is noticed when the fork is resumed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ForkOrigin {
    /// The parent session's id.
    pub session: String,
    /// The parent's completed turn the fork starts after.
    pub turn: u32,
    /// The seq of that turn's `turn.end` line in the parent's log.
    pub seq: u64,
    /// SHA-256 of that line's exact bytes with its newline (the `prev` of the line after it): the
    /// parent's chain head at the end of the turn.
    pub hash: String,
}

/// The agent loop begins a turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TurnStart {
    /// 1-based, counted over the whole session (a follow-up task goes on counting).
    pub turn: u32,
    /// The person's input that starts this turn: the task, or a follow-up. Absent on a turn that
    /// answers tool results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<String>,
}

/// Why a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TurnEndReason {
    /// The model answered without calling a tool: the task's last turn.
    NoToolCalls,
    /// The model called tools; their results go into the next turn.
    ToolResults,
    /// A client interrupted it.
    Interrupted,
    /// The model request failed for good.
    Error,
}

/// A turn ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TurnEnd {
    /// The turn.
    pub turn: u32,
    /// Why.
    pub reason: TurnEndReason,
    /// The workspace's state at the end of a completed turn (what a fork at this turn starts
    /// from); absent for a turn that was interrupted or failed, and in logs older than forks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<TurnState>,
}

/// The workspace at the end of a turn: the change set since the session started, recorded in
/// `<session>/turns/<turn>.json` (docs/forks.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TurnState {
    /// SHA-256 over the recorded change set (every path with its entry after the turn).
    pub digest: String,
    /// How many paths differ from the session's start.
    pub paths: u64,
    /// Git backing: the checkpoint commit the session ref pointed at then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
}

/// The `turn` of a `model.request` and its `model.response` made outside the loop's turns (an
/// MCP server's sampling request, the reviewer model): their tokens and price count for the
/// session, their messages are not the agent's conversation, and their input is not what the
/// next turn's admission starts from.
pub const OFF_TURN: u32 = 0;

/// A request is about to go to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ModelRequest {
    /// The turn; 0 for a call of the session outside the loop's turns (an MCP server's sampling
    /// request, the reviewer model), which a resumed session leaves out of its conversation.
    pub turn: u32,
    /// The provider's name.
    pub provider: String,
    /// The model asked for.
    pub model: String,
    /// How many messages the request carries.
    pub messages: usize,
    /// The message appended since the previous request (the user's input or the tool results),
    /// in chock's provider-neutral message form: with each `model.response`'s `content`, the
    /// conversation can be rebuilt from the log. At turn 0, who asked instead:
    /// `{"mcp_sampling": SERVER}` or `{"reviewer": QUESTION}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_message: Option<Value>,
}

/// Tokens of one reply.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Usage {
    /// Uncached input tokens.
    #[serde(default)]
    pub input_tokens: u64,
    /// Output tokens.
    #[serde(default)]
    pub output_tokens: u64,
    /// Tokens read from the prompt cache.
    #[serde(default)]
    pub cache_read_tokens: u64,
    /// Tokens written to the prompt cache.
    #[serde(default)]
    pub cache_write_tokens: u64,
}

/// The model answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ModelResponse {
    /// The turn (0: the reply to a `model.request` of turn 0, outside the loop's turns; its
    /// tokens and price count for the session's cost and budget all the same).
    pub turn: u32,
    /// The model that answered.
    pub model: String,
    /// The provider's id for the reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Its tokens.
    pub usage: Usage,
    /// Its price in US dollars (null when the model's price is unknown).
    pub cost_usd: Option<f64>,
    /// Why the model stopped (`end_turn`, `tool_use`, `max_tokens`, …).
    pub stop_reason: super::StopReason,
    /// The reply's content blocks, in chock's provider-neutral form.
    pub content: Value,
}

/// A request to the model is being sent again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ModelRetry {
    /// The turn.
    pub turn: u32,
    /// The attempt that failed (1-based).
    pub attempt: u32,
    /// Milliseconds before the next attempt.
    pub wait_ms: u64,
    /// Why the attempt failed.
    pub reason: String,
}

/// A sub-session is about to start (`spawn_agent`): written, durable, before the child's process
/// exists, so the slice of the budget it was promised is on the record before it can be spent.
/// Every `session.spawn` is followed by an `agent.complete` naming the same child.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionSpawn {
    /// The child session's id (chosen by the parent; the child's log is created under it).
    pub child: String,
    /// Its task.
    pub task: String,
    /// How many generations below the top agent the child is (1: a child of the top).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depth: Option<u32>,
    /// The slice of this session's budget reserved for the child (absent: the child has no
    /// budget of its own, and this session none either).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<BudgetAmount>,
    /// The ratchet narrowings the child starts under (`pattern`, `decision`), the parent's at the
    /// spawn: the child can only narrow further.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ratchet: Vec<(String, String)>,
}

/// Dollars and/or tokens: a budget, a slice of one, or what was spent of it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BudgetAmount {
    /// US dollars.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd: Option<f64>,
    /// Tokens, input and output together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
}

/// How a child session ended, as its parent saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ChildEnd {
    /// It ended its task (its `session.end` says `done`).
    Done,
    /// Its budget slice ran out before the task ended.
    OutOfBudget,
    /// It hit its turn limit.
    MaxTurns,
    /// It was interrupted (the parent was).
    Interrupted,
    /// It ended with an error.
    Error,
    /// Its process died without ending its log (killed, crashed).
    Crashed,
    /// Its process could not be started.
    NotStarted,
}

/// The agent declared the task complete, or — with `child` — a child session ended: written by
/// the parent after every `session.spawn`, however the child ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AgentComplete {
    /// What it says it did (a child's: the first lines of its final text).
    pub summary: String,
    /// The child session's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child: Option<String>,
    /// How the child ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<ChildEnd>,
    /// The hash of the child's last log line (its head), as the parent read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child_head: Option<String>,
    /// What the child spent, its own children included (read from its log).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spent: Option<BudgetAmount>,
    /// The digest of the child's changes (what `take_subagent` would take), when it changed
    /// anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// Paths the child changed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed: Vec<String>,
}

/// Another harness's transcript was imported (`chock migrate --sessions`): copied beside this log,
/// named by its SHA-256, and never replayed as events, so the chain signs only what Chock saw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionImported {
    /// What it came from: the harness and the file read (`claude-code /home/u/.claude/projects/…/ID.jsonl`).
    pub from: String,
    /// How many lines the transcript held (none of them is an event of this log).
    pub events: u64,
    /// The copy's file name in this session's directory (`<sha256>.jsonl`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcript: Option<String>,
    /// SHA-256 (hex) of the transcript's bytes as read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

/// What a note is about.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "about", rename_all = "snake_case")]
pub enum Note {
    /// Free text from the host (an operator remark).
    Text {
        /// The remark.
        text: String,
    },
    /// The writer found a torn last line (a crash mid-write) and set it aside.
    TornTail {
        /// The seq the torn line would have had.
        torn_line: u64,
        /// Its length.
        torn_bytes: u64,
        /// Where its bytes were saved.
        saved_to: String,
    },
    /// The task and system prompt the loop starts from.
    Task {
        /// The task.
        task: String,
        /// The system prompt sent with it.
        system: String,
    },
    /// A checkpoint of the workspace failed after a call (the call's result stands).
    CheckpointFailed {
        /// The checkpoint's label.
        checkpoint: String,
        /// Why.
        failed: String,
    },
    /// The session's index of the sockets under declared `[sandbox]` paths is no longer kept
    /// current by inotify (no instance, or the watches ran out): from this call on every call
    /// walks its declared paths. As strict as before, only slower; written once per session.
    SocketIndexDegraded {
        /// Why, in words.
        why: String,
    },
    /// The session's keeper (docs/handover.md) is installed but could not be started: the
    /// session's background commands run in this process, as with no keeper, and do not move
    /// with a handover (a handover waits for them). Written once per session, at the first
    /// background command it concerns.
    KeeperUnavailable {
        /// Why, in words.
        why: String,
    },
    /// An apply was decided but did not land.
    ApplyFailed {
        /// The apply's id, when it had one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        apply_id: Option<String>,
        /// The digest that was approved, when the refusal came after the approval.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        digest: Option<String>,
        /// Why.
        failed: String,
    },
    /// The agent narrowed (or, by an approved act, widened back) its own policy.
    Ratchet {
        /// `restrict` or `widen`.
        change: RatchetChange,
        /// The pattern.
        pattern: String,
        /// The decision it carries (`deny`, `ask`, …).
        decision: String,
        /// For a widen: the narrowings it removed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        removed: Option<Vec<String>>,
    },
    /// The session's budget (`[budget]`, `--budget`, or a parent's slice): its model calls stop
    /// when they would exceed it. Written once, before the first model request.
    Budget {
        /// The limit.
        limit: BudgetAmount,
    },
    /// This session was spawned by another: names the parent's log by id and by the hash of its
    /// `session.spawn` line. Written right after `session.start`.
    Spawned {
        /// The parent session's id.
        parent: String,
        /// The hash of the parent's `session.spawn` line for this child.
        parent_head: String,
        /// How many generations below the top agent this session is.
        depth: u32,
        /// The parent's ratchet at the spawn (`pattern`, `decision`): inherited restrictions,
        /// which bind this session and which it cannot widen (applied again on resume).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        ratchet: Vec<(String, String)>,
    },
    /// A model call was not made: it would exceed the session's budget.
    BudgetExhausted {
        /// What had been spent (the session's own calls and its children's).
        spent: BudgetAmount,
        /// The limit.
        limit: BudgetAmount,
        /// Why, in words.
        why: String,
    },
    /// Changes of a finished child session were taken into this session's workspace.
    SubagentTaken {
        /// The child session's id.
        child: String,
        /// The digest of the changes taken.
        digest: String,
        /// The paths written or removed.
        paths: Vec<String>,
    },
    /// The agent wrote one of its notes kept between sessions of the project (`memory_write`,
    /// decided as `memory.write` before this line; docs/memory.md).
    Memory {
        /// The note's name.
        note: String,
        /// Its size in bytes.
        bytes: u64,
        /// SHA-256 (hex) of the text written.
        sha256: String,
        /// Whether it replaced a note of that name.
        replaced: bool,
    },
    /// A background command ended.
    BackgroundEnded {
        /// Its handle.
        background: String,
        /// Its exit status (null when killed by a signal or timed out).
        status: Option<i32>,
        /// Whether the model is told it failed.
        is_error: bool,
    },
}

/// A change to the agent's ratchet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RatchetChange {
    /// A narrowing the agent chose (`restrict_self`).
    Restrict,
    /// An approved removal of earlier narrowings.
    Widen,
}

/// Why a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EndReason {
    /// The task is done (the model answered without a tool call).
    Done,
    /// The turn limit was reached.
    MaxTurns,
    /// The next model call would have exceeded the session's budget.
    OutOfBudget,
    /// A client interrupted the session (Ctrl-C) or asked it to end.
    Interrupted,
    /// An error ended it (the model request failed for good, the log could not be written).
    Error,
    /// A session with no agent loop (`chock exec`) was closed by its command.
    Closed,
}

/// The session ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionEnd {
    /// Why.
    pub reason: EndReason,
    /// The error, for [`EndReason::Error`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The totals, for a session with an agent loop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<Summary>,
    /// Whether the workspace was kept (a session with no agent loop may remove it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_kept: Option<bool>,
}
