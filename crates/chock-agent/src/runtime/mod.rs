//! The session runtime: a session as a library object that takes operations and emits events.
//!
//! [`SessionBuilder`] makes one from configuration and flags (the CLI only parses arguments and
//! renders events). A [`SessionRuntime`] then takes inputs — a task, and follow-ups after each
//! task ends — keeping the conversation between them; an [`Interrupter`] (cloneable, usable from
//! any thread or a signal handler) stops the current turn: the model stream ends, a running
//! command's whole process tree is killed, and the turn ends as `interrupted` in the log. A session
//! that ended or crashed is resumed from its log ([`SessionBuilder::resume`]). `session.end` is
//! written by the library on every way out: [`SessionRuntime::end`], an error, an interrupt the
//! caller ends on, or dropping the runtime.

mod background;
mod build_error;
mod builder;
mod choose;
pub mod handover;
pub(crate) mod last_task;
mod mcp;
mod ops;
pub mod resume;

pub use builder::{BuildError, Chosen, SessionBuilder};

use chock_log::{Event, Log};
use chock_protocol::live::Ended;
use chock_protocol::log::{EndReason, SessionEnd};
use chock_provider::Message;
use tokio::sync::watch;

use crate::agent::{Agent, AgentError, TaskEnd, end_reason};
use crate::approval_reviewer::ReviewContext;
use crate::booking::OffTurnTally;
use chock_tools::events::Summary;

/// Stops the current turn of a session. Cheap to clone; `interrupt` may be called from anywhere.
#[derive(Debug, Clone)]
pub struct Interrupter {
    sender: std::sync::Arc<watch::Sender<u64>>,
}

impl Interrupter {
    /// Interrupts the turn running now (nothing happens when the session is idle).
    pub fn interrupt(&self) {
        self.sender.send_modify(|generation| *generation += 1);
    }
}

/// What asks a session to let go for another process to take it up (`chock detach`). Cheap to
/// clone; usable from any task.
#[derive(Debug, Clone)]
pub struct HandoverSwitch {
    requested: std::sync::Arc<std::sync::atomic::AtomicBool>,
    released: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl HandoverSwitch {
    /// Asks the loop to stop at the next turn boundary (its task then ends as
    /// [`TaskEnd::HandedOver`]).
    pub fn request(&self) {
        self.requested
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Takes back a request the task did not reach (it ended some other way first), so the
    /// session's next task is not stopped by it.
    pub fn withdraw(&self) {
        self.requested
            .store(false, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether a handover was asked for.
    pub fn requested(&self) -> bool {
        self.requested.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The session is let go where it stands (a question open: the caller stops the loop and
    /// keeps the question open): the runtime, dropped, writes no `session.end`.
    pub fn release(&self) {
        self.released
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A session, between and during tasks.
pub struct SessionRuntime {
    agent: Agent,
    chosen: Chosen,
    conversation: Vec<Message>,
    summary: Summary,
    interrupts: std::sync::Arc<watch::Sender<u64>>,
    interrupted: watch::Receiver<u64>,
    ended: bool,
    /// How the last task ended: what [`SessionRuntime::close`] ends the session as.
    last_task: Option<TaskEnd>,
    /// What the reviewer model is told the agent was asked.
    review: ReviewContext,
    /// What the calls outside the turns spent, for the summary.
    off_turn: OffTurnTally,
    /// A task taken over from another process, to go on with ([`SessionRuntime::carry_on`]).
    carried: Option<crate::agent::Carried>,
    /// Set when the session was let go for another process: dropped, it writes no end.
    released: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Its MCP servers, until [`SessionRuntime::start_mcp`] starts them.
    mcp: Option<mcp::PendingMcp>,
}

impl std::fmt::Debug for SessionRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionRuntime")
            .field("session", &self.summary.session)
            .field("messages", &self.conversation.len())
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

impl SessionRuntime {
    fn new(agent: Agent, chosen: Chosen, review: ReviewContext, off_turn: OffTurnTally) -> Self {
        let summary = agent.new_summary();
        let (sender, interrupted) = watch::channel(0u64);
        Self {
            agent,
            chosen,
            conversation: Vec::new(),
            summary,
            interrupts: std::sync::Arc::new(sender),
            interrupted,
            ended: false,
            last_task: None,
            review,
            off_turn,
            carried: None,
            released: std::sync::Arc::default(),
            mcp: None,
        }
    }

    fn resumed(
        agent: Agent,
        chosen: Chosen,
        review: ReviewContext,
        off_turn: OffTurnTally,
        events: &[Event],
    ) -> Result<Self, BuildError> {
        let rebuilt = resume::rebuild(events)?;
        let turns = rebuilt.turns;
        let runtime = Self::from_rebuilt(agent, chosen, review, off_turn, rebuilt);
        runtime.agent.log().record(
            None,
            chock_protocol::log::Note::Text {
                text: format!(
                    "resumed: {} messages rebuilt from the log, {} turns so far",
                    runtime.conversation.len(),
                    turns
                ),
            },
        )?;
        Ok(runtime)
    }

    fn from_rebuilt(
        agent: Agent,
        chosen: Chosen,
        review: ReviewContext,
        off_turn: OffTurnTally,
        rebuilt: resume::Rebuilt,
    ) -> Self {
        for input in &rebuilt.inputs {
            review.told(input);
        }
        let mut runtime = Self::new(agent, chosen, review, off_turn);
        runtime.agent.resume_at(rebuilt.turns);
        runtime.agent.restore_seen(&rebuilt.seen);
        runtime.conversation = rebuilt.messages;
        runtime.summary.turns = rebuilt.turns;
        runtime.summary.input_tokens = rebuilt.input_tokens;
        runtime.summary.output_tokens = rebuilt.output_tokens;
        runtime.summary.cost_usd = rebuilt.cost_usd;
        runtime
    }

    /// A session taken over from another process ([`SessionBuilder::adopt`]).
    fn taken_over(r: resume::Reopened, rebuilt: resume::Rebuilt) -> Result<Self, BuildError> {
        let mut runtime = Self::from_rebuilt(r.agent, r.chosen, r.review, r.off_turn, rebuilt);
        runtime.mcp = r.mcp;
        Ok(runtime)
    }

    /// What asks this session to let go for another process.
    pub fn handover(&self) -> HandoverSwitch {
        HandoverSwitch {
            requested: self.agent.handover_flag(),
            released: std::sync::Arc::clone(&self.released),
        }
    }

    /// Whether it was taken over in the middle of a task, which [`SessionRuntime::carry_on`]
    /// goes on with.
    pub fn carries_on(&self) -> bool {
        self.carried.is_some()
    }

    /// A session taken over whose last task had stopped before its model's final answer — the
    /// person interrupted it, the budget refused its next model call, or it had all the turns
    /// its limit allows (let go while idle, or its owner died after): that task is over, so the
    /// new owner does not go on with it but waits for the next input, as a resumed session does.
    /// The calls of the model's last reply that have no result in the conversation are told
    /// theirs (the logged one, or that they were not run). A call whose children still run is
    /// left to [`SessionRuntime::carry_on`], which waits for them.
    pub fn wait_if_task_stopped(&mut self) -> Result<(), chock_log::LogError> {
        let Some(carried) = &self.carried else {
            return Ok(());
        };
        if carried
            .calls
            .iter()
            .any(|c| matches!(c.state, crate::agent::CallState::Children(_)))
        {
            return Ok(());
        }
        let events = chock_log::read_events(self.agent.log().dir())?;
        let stopped = last_task::last_task(&events, self.agent.max_turns()).stopped;
        if stopped.is_none() {
            return Ok(());
        }
        let carried = self.carried.take().unwrap_or_default();
        if !carried.calls.is_empty() {
            use crate::agent::CallState;
            let content = carried
                .calls
                .into_iter()
                .map(|call| {
                    let (content, is_error) = match call.state {
                        CallState::Answered { content, is_error } => (content, is_error),
                        CallState::Unknown(content) => (content, true),
                        CallState::Run | CallState::Children(_) => {
                            ("not run: the turn was interrupted".to_string(), true)
                        }
                    };
                    chock_provider::Block::ToolResult {
                        tool_use_id: call.id,
                        content,
                        is_error,
                    }
                })
                .collect();
            self.conversation.push(Message {
                role: chock_provider::Role::User,
                content,
            });
        }
        Ok(())
    }

    /// Goes on with the task taken over from another process, at its next turn (the calls the
    /// old owner left open first: see [`handover`]). Ends as [`SessionRuntime::submit`] does.
    pub async fn carry_on(&mut self) -> Result<TaskEnd, AgentError> {
        if self.ended {
            return Err(AgentError::Ended);
        }
        let carried = self.carried.take().unwrap_or_default();
        let outcome = self
            .agent
            .carry_on(
                &mut self.conversation,
                carried,
                &mut self.interrupted,
                &mut self.summary,
            )
            .await;
        self.task_ended(outcome).await
    }

    /// The session's id.
    pub fn id(&self) -> &str {
        self.agent.log().id().as_str()
    }

    /// The session log.
    pub fn log(&self) -> &Log {
        self.agent.log()
    }

    /// The provider and model it asks.
    pub fn chosen(&self) -> &Chosen {
        &self.chosen
    }

    /// The project the session works on.
    pub fn project(&self) -> &std::path::Path {
        self.agent.host().session().project()
    }

    /// The conversation so far (what the next request will carry).
    pub fn conversation(&self) -> &[Message] {
        &self.conversation
    }

    /// The session's budget: the one account every model call of the session is admitted and
    /// charged through.
    pub fn budget(&self) -> &crate::budget::Budget {
        self.agent.budget()
    }

    /// How a call of `tool` with `input` is shown, as the session's tool describes it: what a
    /// client replaying the conversation titles an earlier call with.
    pub fn display(
        &self,
        tool: &str,
        input: &serde_json::Value,
    ) -> chock_protocol::live::ToolDisplay {
        self.agent.display(tool, input)
    }

    /// The totals so far.
    pub fn summary(&self) -> &Summary {
        &self.summary
    }

    /// A handle that interrupts the current turn.
    pub fn interrupter(&self) -> Interrupter {
        Interrupter {
            sender: std::sync::Arc::clone(&self.interrupts),
        }
    }

    /// Works on `input` — the task, or a follow-up once the previous task ended — until the model
    /// stops calling tools, the turn limit, or an interrupt. An error ends the session (its
    /// `session.end` is written) and is returned.
    pub async fn submit(&mut self, input: &str) -> Result<TaskEnd, AgentError> {
        if self.ended {
            return Err(AgentError::Ended);
        }
        self.review.told(input);
        let outcome = self
            .agent
            .task(
                &mut self.conversation,
                input,
                &mut self.interrupted,
                &mut self.summary,
            )
            .await;
        self.task_ended(outcome).await
    }

    async fn task_ended(
        &mut self,
        outcome: Result<TaskEnd, AgentError>,
    ) -> Result<TaskEnd, AgentError> {
        self.off_turn.take_into(&mut self.summary);
        match outcome {
            Ok(TaskEnd::HandedOver) => {
                // Let go: another process writes the log from here, so this one writes no end.
                self.ended = true;
                self.released
                    .store(true, std::sync::atomic::Ordering::SeqCst);
                self.agent.log().sync()?;
                Ok(TaskEnd::HandedOver)
            }
            Ok(end) => {
                self.last_task = Some(end);
                self.summary.ended = end.ended();
                Ok(end)
            }
            Err(err) => {
                self.summary.ended = Ended::Error(err.to_string());
                self.ended = true;
                let _ = self
                    .agent
                    .finish(&mut self.summary, EndReason::Error, Some(err.to_string()))
                    .await;
                Err(err)
            }
        }
    }

    /// Lets go of the session between tasks, for another process to take it up (`chock detach`
    /// of an idle session): nothing runs, so there is no turn boundary to wait for. Background
    /// commands go as at a turn boundary (the keeper's move with the session; one this process
    /// runs itself has its end recorded first), the log is synced, and the runtime, dropped,
    /// writes no `session.end`: the new owner waits for the next input.
    pub async fn let_go(&mut self) -> Result<(), AgentError> {
        if self.ended {
            return Err(AgentError::Ended);
        }
        self.agent.toolbox().release_background().await;
        self.ended = true;
        self.released
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.agent.log().sync()?;
        Ok(())
    }

    /// Ends the session as its last task ended ([`crate::agent::end_reason`], the one rule every
    /// front end ends a session by): a session stopped by its budget ends `out_of_budget`, by its
    /// turn limit `max_turns`, by an interrupt `interrupted`, else `done`. Background commands are
    /// waited for, the workspace checkpointed, and `session.end` written. Returns the totals.
    pub async fn close(self) -> Result<Summary, AgentError> {
        let reason = end_reason(self.last_task);
        self.end(reason).await
    }

    /// Ends the session with `reason` (a caller that knows better than the last task, e.g. an
    /// interrupt it ends on): background commands are waited for, the workspace checkpointed,
    /// and `session.end` written. Returns the totals.
    pub async fn end(mut self, reason: EndReason) -> Result<Summary, AgentError> {
        let mut summary = self.closing(reason);
        self.agent.finish(&mut summary, reason, None).await?;
        Ok(summary)
    }

    /// Marks the session ended and returns the summary its `session.end` carries: the last
    /// task's ending, or — when it ran none — `reason`'s.
    fn closing(&mut self, reason: EndReason) -> Summary {
        self.ended = true;
        if self.summary.ended == Ended::Open {
            self.summary.ended = match reason {
                EndReason::Done => Ended::Done,
                EndReason::MaxTurns => Ended::MaxTurns,
                EndReason::OutOfBudget => Ended::OutOfBudget,
                EndReason::Interrupted => Ended::Interrupted,
                EndReason::Closed => Ended::Closed,
                EndReason::Error => Ended::Error("the session ended with an error".into()),
            };
        }
        // A call made since the last task (a reviewer's, about an apply) counts too.
        self.off_turn.take_into(&mut self.summary);
        self.summary.clone()
    }
}

impl Drop for SessionRuntime {
    /// A runtime dropped without [`SessionRuntime::end`] (a panic, a caller that gave up) still
    /// leaves a closed record: `session.end`, interrupted.
    fn drop(&mut self) {
        if !self.ended && !self.released.load(std::sync::atomic::Ordering::SeqCst) {
            self.off_turn.take_into(&mut self.summary);
            let _ = self.agent.log().record(
                None,
                SessionEnd {
                    reason: EndReason::Interrupted,
                    error: None,
                    summary: Some(self.summary.clone()),
                    workspace_kept: None,
                },
            );
        }
    }
}
