//! The loop: turn after turn, ask the model, decide and run its tool calls, until it stops calling tools.
//!
//! One turn: `turn.start` → `model.request` → the reply streams (events out; provider retries become
//! `model.retry`) → `model.response` (tokens, cost, the reply's blocks) → for each tool call:
//! `tool.call` → (`approval.ask` → `approval.answer`) → `decision` → the act → `tool.result` →
//! `turn.end`. The decision is durable in the log before the act. A task is turns until the model
//! stops calling tools; a session is one or more tasks ([`crate::runtime::SessionRuntime`] keeps the
//! conversation between them) and ends with `session.end` carrying the summary.

use std::sync::Arc;

use chock_log::{Log, LogError};
use chock_protocol::live::Ended;
use chock_protocol::log::{EndReason, Note, SessionEnd, TurnEnd, TurnEndReason, TurnStart};
use chock_provider::{Message, PriceTable, Provider, Role, StopReason};
use serde_json::Value;
use tokio::sync::watch;

use chock_tools::dispatch::Toolbox;
use chock_tools::events::{AgentEvent, EventSink, Summary};
use chock_tools::gate::Decider;
use chock_tools::host::Host;
use chock_tools::prompt::system_prompt;

mod carry;
mod turn;

pub use carry::{CallState, Carried, OpenCall};

/// How the loop is bounded and what it asks for.
#[derive(Debug, Clone)]
pub struct LoopLimits {
    /// The model to ask for.
    pub model: String,
    /// At most this many turns; then the session ends with `max_turns`.
    pub max_turns: u32,
    /// Output tokens per reply.
    pub max_tokens: u32,
}

impl Default for LoopLimits {
    fn default() -> Self {
        Self {
            model: String::new(),
            max_turns: 50,
            max_tokens: 16_000,
        }
    }
}

/// Why the loop failed (the session still ends with `session.end` when the log allows it).
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The log refused a write: nothing more may happen, since the decision must be logged before the act.
    #[error("the session log refused a write: {0}")]
    Log(#[from] LogError),
    /// The model could not be asked.
    #[error("model call failed: {0}")]
    Provider(#[from] chock_provider::ProviderError),
    /// The session has ended: it takes no more input.
    #[error("the session has ended")]
    Ended,
}

/// A session's agent: the host (log, policy, workspace, confined calls), a model, and the broker.
pub struct Agent {
    host: Arc<Host>,
    provider: Arc<dyn Provider>,
    decider: Decider,
    sink: Arc<dyn EventSink>,
    limits: LoopLimits,
    prices: PriceTable,
    toolbox: Toolbox,
    /// The system prompt, made once per session (the view it describes does not change).
    system: String,
    /// Turns taken in the whole session (a follow-up goes on counting).
    turn: u32,
    /// Whether `note {about: task}` (the system prompt) is in the log yet.
    task_noted: bool,
    /// The session's budget: every model call is admitted and charged here.
    budget: crate::budget::Budget,
    /// Set when another process is to take the session up (`chock detach`): the loop stops at
    /// the next turn boundary.
    handover: Arc<std::sync::atomic::AtomicBool>,
}

/// How one task ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskEnd {
    /// The model answered without calling a tool.
    Done,
    /// The model's reply hit its token limit.
    MaxTokens,
    /// The model refused.
    Refusal,
    /// The task's turn limit was reached.
    MaxTurns,
    /// A client interrupted it.
    Interrupted,
    /// The next model call would have exceeded the session's budget.
    OutOfBudget,
    /// It stopped at a turn boundary for another process to go on with it (`chock detach`).
    HandedOver,
}

impl TaskEnd {
    /// What the summary's `ended` says of a task that ended so.
    pub fn ended(self) -> Ended {
        match self {
            TaskEnd::Done => Ended::Done,
            TaskEnd::MaxTokens => Ended::MaxTokens,
            TaskEnd::Refusal => Ended::Refusal,
            TaskEnd::MaxTurns => Ended::MaxTurns,
            TaskEnd::Interrupted => Ended::Interrupted,
            TaskEnd::OutOfBudget => Ended::OutOfBudget,
            // Not ended: it goes on in another process.
            TaskEnd::HandedOver => Ended::Open,
        }
    }
}

/// The one rule for how a session ends once its last task ended as `last` (None: it ran no
/// task): the reason its `session.end` is logged under. Every front end ends a session through
/// it ([`crate::runtime::SessionRuntime::close`]), so a session stopped by its budget ends
/// `out_of_budget` whoever ran it, never `done`.
pub fn end_reason(last: Option<TaskEnd>) -> EndReason {
    last.and_then(|end| end.ended().reason())
        .unwrap_or(EndReason::Done)
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

fn truncate_summary(text: &str) -> String {
    let first: Vec<&str> = text.lines().take(3).collect();
    let mut s = first.join(" | ");
    if s.chars().count() > 200 {
        s = s.chars().take(200).collect::<String>() + "…";
    }
    s
}

impl Agent {
    /// An agent over `host`, asking `provider`, deciding through `decider`, telling `sink`.
    pub fn new(
        host: Arc<Host>,
        provider: Arc<dyn Provider>,
        decider: Decider,
        sink: Arc<dyn EventSink>,
        limits: LoopLimits,
        prices: PriceTable,
    ) -> Self {
        let toolbox = Toolbox::new(Arc::clone(&host), decider.clone(), Arc::clone(&sink));
        let system = system_prompt(host.view());
        Self {
            host,
            provider,
            decider,
            sink,
            limits,
            prices,
            toolbox,
            system,
            turn: 0,
            task_noted: false,
            budget: crate::budget::Budget::default(),
            handover: Arc::default(),
        }
    }

    /// The turn limit of each task.
    pub(crate) fn max_turns(&self) -> u32 {
        self.limits.max_turns
    }

    /// The session's budget: the one account every model call of the session is admitted and
    /// charged through (and children's slices reserved from).
    pub fn budget(&self) -> &crate::budget::Budget {
        &self.budget
    }

    /// Puts the session under `budget` (before its first model call).
    pub fn set_budget(&mut self, budget: crate::budget::Budget) {
        self.budget = budget;
    }

    /// The session log.
    pub fn log(&self) -> &Log {
        &self.decider.log
    }

    /// The decision seam (the log, the live policy, the answerers).
    pub fn decider(&self) -> &Decider {
        &self.decider
    }

    /// The host the agent acts through.
    pub fn host(&self) -> &Arc<Host> {
        &self.host
    }

    /// The session's tools.
    pub(crate) fn toolbox(&self) -> &Toolbox {
        &self.toolbox
    }

    /// What tells the loop to stop at the next turn boundary for a handover.
    pub(crate) fn handover_flag(&self) -> Arc<std::sync::atomic::AtomicBool> {
        Arc::clone(&self.handover)
    }

    /// Sets the turn count a resumed session goes on from, and that its task is noted.
    pub(crate) fn resume_at(&mut self, turn: u32) {
        self.turn = turn;
        self.task_noted = true;
    }

    /// Adds a tool to the session (offered from the next request on, dispatched by its name).
    pub fn register_tool(
        &mut self,
        tool: Arc<dyn chock_tools::tool::DynTool>,
    ) -> Result<(), chock_tools::registry::RegistryError> {
        self.toolbox.register_shared(tool)
    }

    /// Adds `tool` unless nobody may call it: one whose fixed act ([`DynTool::fixed_act`]) the live
    /// table denies outright is not offered, as an MCP tool the table denies is not (an `ask` is
    /// still offered: someone may allow it). Returns whether it was added.
    ///
    /// [`DynTool::fixed_act`]: chock_tools::tool::DynTool::fixed_act
    pub fn offer_tool(
        &mut self,
        tool: Arc<dyn chock_tools::tool::DynTool>,
    ) -> Result<bool, chock_tools::registry::RegistryError> {
        if let Some(act) = tool.fixed_act()
            && self.decider.pipeline().verdict(&act).decision == chock_policy::Decision::Deny
        {
            return Ok(false);
        }
        self.toolbox.register_shared(tool).map(|()| true)
    }

    /// Takes back what the model was shown of files, as the log recorded it (resume).
    pub(crate) fn restore_seen(&self, shown: &[chock_protocol::log::ShownLines]) {
        self.toolbox.restore_seen(shown);
    }

    /// A fresh summary for this session.
    pub(crate) fn new_summary(&self) -> Summary {
        let id = self.log().id().as_str().to_string();
        Summary {
            review: format!("chock diff {id}"),
            take: match self.host.session().workspace().backing() {
                chock_workspace::Backing::Git { .. } => format!("chock apply {id}"),
                _ => format!("chock workspace adopt {id}"),
            },
            session: id,
            cost_usd: Some(0.0),
            ..Summary::default()
        }
    }

    /// How a call of `tool` with `input` is shown, as the session's tool describes it (a tool the
    /// session does not hold: its name).
    pub fn display(&self, tool: &str, input: &Value) -> chock_protocol::live::ToolDisplay {
        self.toolbox
            .registry()
            .display(tool, input)
            .unwrap_or_else(|| chock_protocol::live::ToolDisplay::named(tool))
    }

    /// Runs `task` to the end as a session of one task and returns the summary. `session.end` is
    /// written whatever happens.
    pub async fn run(&mut self, task: &str) -> Result<Summary, AgentError> {
        let mut summary = self.new_summary();
        let mut conversation = Vec::new();
        let (_interrupt, mut interrupted) = watch::channel(0u64);
        let outcome = self
            .task(&mut conversation, task, &mut interrupted, &mut summary)
            .await;
        let reason = match &outcome {
            Ok(end) => end_reason(Some(*end)),
            Err(_) => EndReason::Error,
        };
        summary.ended = match &outcome {
            Ok(end) => end.ended(),
            Err(err) => Ended::Error(err.to_string()),
        };
        let error = outcome.as_ref().err().map(ToString::to_string);
        let end = self.finish(&mut summary, reason, error).await;
        outcome?;
        end?;
        Ok(summary)
    }

    /// Ends the session: waits for background commands, takes a last checkpoint, writes
    /// `session.end` with the summary and tells the sink.
    pub(crate) async fn finish(
        &mut self,
        summary: &mut Summary,
        reason: EndReason,
        error: Option<String>,
    ) -> Result<(), AgentError> {
        summary.children = self.budget.children();
        summary.tool_calls = self.toolbox.calls();
        summary.title = self.toolbox.title();
        if let Ok(counts) = self.decider.counts.lock() {
            summary.decisions = counts.clone();
        }
        self.toolbox.finish_background().await;
        self.host.checkpoint("session end");
        self.host.flush_turns();
        let end = self.log().record(
            None,
            SessionEnd {
                reason,
                error,
                summary: Some(summary.clone()),
                workspace_kept: None,
            },
        );
        self.sink.emit(&AgentEvent::SessionEnded {
            summary: summary.clone(),
        });
        end?;
        Ok(())
    }

    /// Works on `input` (a task or a follow-up) in `conversation`: turns until the model stops
    /// calling tools, the task's turn limit, or an interrupt (a change on `interrupt`), which
    /// stops the model stream or kills the running command's process tree and ends the turn as
    /// `interrupted`. The conversation stays valid for a follow-up either way: every tool call
    /// of the model gets a result.
    pub(crate) async fn task(
        &mut self,
        conversation: &mut Vec<Message>,
        input: &str,
        interrupt: &mut watch::Receiver<u64>,
        summary: &mut Summary,
    ) -> Result<TaskEnd, AgentError> {
        interrupt.mark_unchanged();
        conversation.push(Message::user_text(input));
        if !self.task_noted {
            self.log().record(
                None,
                Note::Task {
                    task: input.to_string(),
                    system: self.system.clone(),
                },
            )?;
            self.task_noted = true;
        }
        self.turns(conversation, Some(input), 0, interrupt, summary)
            .await
    }

    /// The task's turns from where `conversation` stands; `input` is the task's (written in its
    /// first `turn.start`), `None` for a task taken over from another process, which has had
    /// `used` of its turn limit's turns already. Stops at the next turn boundary once a handover
    /// is asked for.
    pub(crate) async fn turns(
        &mut self,
        conversation: &mut Vec<Message>,
        input: Option<&str>,
        used: u32,
        interrupt: &mut watch::Receiver<u64>,
        summary: &mut Summary,
    ) -> Result<TaskEnd, AgentError> {
        let tools = self.toolbox.specs();
        // The session's background git (the base) is paused while the agent works and runs only
        // while it waits (for the model's reply, for a person's answer to a command's question):
        // beside the agent's work, even at nice 19, it slowed each call of a 100,000-file project
        // by a quarter to a half on this two-core machine.
        let _working = self.host.session().workspace().pause_background();
        let mut first = true;
        for _ in used..self.limits.max_turns {
            if interrupt.has_changed().unwrap_or(false) {
                return Ok(TaskEnd::Interrupted);
            }
            if self.handover.load(std::sync::atomic::Ordering::SeqCst) {
                // A background command the session's keeper keeps moves with the session; one
                // that lives in this process (no keeper) has its end recorded here first.
                self.toolbox.release_background().await;
                return Ok(TaskEnd::HandedOver);
            }
            let Some(max_tokens) = self.admit(conversation, &tools)? else {
                return Ok(TaskEnd::OutOfBudget);
            };
            self.turn += 1;
            let turn = self.turn;
            self.decider
                .turn
                .store(turn, std::sync::atomic::Ordering::Relaxed);
            summary.turns += 1;
            self.log().record(
                None,
                TurnStart {
                    turn,
                    input: input.filter(|_| first).map(str::to_string),
                },
            )?;
            first = false;
            self.sink.emit(&AgentEvent::TurnStarted { turn });
            let Some(response) = self
                .ask_model(turn, conversation, &tools, max_tokens, interrupt, summary)
                .await?
            else {
                self.end_turn(turn, TurnEndReason::Interrupted)?;
                return Ok(TaskEnd::Interrupted);
            };
            let calls: Vec<(String, String, Value)> = response
                .tool_calls()
                .map(|(id, name, input)| (id.to_string(), name.to_string(), input.clone()))
                .collect();
            conversation.push(Message::assistant(response.content.clone()));
            if calls.is_empty() {
                self.end_turn(turn, TurnEndReason::NoToolCalls)?;
                return Ok(match response.stop_reason {
                    StopReason::MaxTokens => TaskEnd::MaxTokens,
                    StopReason::Refusal => TaskEnd::Refusal,
                    _ => TaskEnd::Done,
                });
            }
            let (results, interrupted) = self.run_calls(calls, interrupt).await?;
            conversation.push(Message {
                role: Role::User,
                content: results,
            });
            if interrupted {
                self.end_turn(turn, TurnEndReason::Interrupted)?;
                return Ok(TaskEnd::Interrupted);
            }
            self.end_turn(turn, TurnEndReason::ToolResults)?;
        }
        Ok(TaskEnd::MaxTurns)
    }

    /// Asks the budget whether the next model call fits: its largest reply, or None (logged as
    /// `note {about: budget_exhausted}`) when it does not.
    fn admit(
        &self,
        conversation: &[Message],
        tools: &[chock_provider::ToolSpec],
    ) -> Result<Option<u32>, AgentError> {
        let size = self.system.len()
            + serde_json::to_string(conversation).map_or(0, |t| t.len())
            + serde_json::to_string(tools).map_or(0, |t| t.len());
        match self.budget.admit(
            &self.limits.model,
            crate::budget::input_at_least(size),
            self.limits.max_tokens,
            crate::budget::TokenPrice::of(&self.prices, &self.limits.model),
        ) {
            Ok(admitted) => Ok(Some(admitted.max_output_tokens)),
            Err(err) => {
                self.log().record(
                    None,
                    Note::BudgetExhausted {
                        spent: self.budget.spent(),
                        limit: self.budget.limit(),
                        why: err.to_string(),
                    },
                )?;
                Ok(None)
            }
        }
    }

    fn end_turn(&self, turn: u32, reason: TurnEndReason) -> Result<(), AgentError> {
        // A completed turn records the workspace it ended with: a fork can start there.
        let workspace = match reason {
            TurnEndReason::NoToolCalls | TurnEndReason::ToolResults => self.host.record_turn(turn),
            TurnEndReason::Interrupted | TurnEndReason::Error => None,
        };
        self.log().record(
            None,
            TurnEnd {
                turn,
                reason,
                workspace,
            },
        )?;
        self.sink.emit(&AgentEvent::TurnEnded { turn });
        Ok(())
    }
}
