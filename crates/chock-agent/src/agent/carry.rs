//! Going on with a task that another process was working on (a handover, `chock detach`).
//!
//! The new owner rebuilt the conversation from the log. When the old owner let go at a turn
//! boundary, every call of the last reply has its result in the log, and the task goes on at the
//! next turn. When it let go with a question open, or died, the last reply's calls are where the
//! log left them: a call with its result is told that result; a call that was started and never
//! recorded its end is told its outcome is unknown (the new owner logged that) and is never run
//! again; a call that waits on a person's question that is still open, or that never started, is
//! run now (nothing of it ran: its decision is not in the log), its question put again under the
//! same id. The turn they belong to ends, and the next begins.

use std::collections::HashMap;

use chock_provider::{Block, Message, Role};
use chock_tools::events::Summary;
use serde_json::Value;
use tokio::sync::watch;

use super::{Agent, AgentError, TaskEnd};
use chock_protocol::log::TurnEndReason;

/// What a model's call left open by the old owner gets now.
#[derive(Debug, Clone, PartialEq)]
pub enum CallState {
    /// It ended, and the log has what the model was told.
    Answered {
        /// The result's text.
        content: String,
        /// Whether it was an error.
        is_error: bool,
    },
    /// It was started and its end was never recorded: the model is told the outcome is unknown.
    Unknown(String),
    /// It spawned these children, which still run: its result comes when they end (their
    /// `agent.complete` is recorded then).
    Children(Vec<String>),
    /// Nothing of it ran: it is run now.
    Run,
}

/// One call of the last reply.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenCall {
    /// The model's call id.
    pub id: String,
    /// The tool.
    pub name: String,
    /// Its input.
    pub input: Value,
    /// What it gets.
    pub state: CallState,
}

/// Where the task stood when the old owner let go.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Carried {
    /// The calls of the model's last reply, when no results followed it yet.
    pub calls: Vec<OpenCall>,
    /// Whether the turn they belong to has no `turn.end` yet.
    pub turn_open: bool,
}

impl Agent {
    /// Goes on with the task from `carried`: the open calls get their results (running those
    /// that never ran), their turn ends, and the turns go on as in any task.
    pub(crate) async fn carry_on(
        &mut self,
        conversation: &mut Vec<Message>,
        carried: Carried,
        interrupt: &mut watch::Receiver<u64>,
        summary: &mut Summary,
    ) -> Result<TaskEnd, AgentError> {
        interrupt.mark_unchanged();
        if !carried.calls.is_empty() {
            let mut carried = carried;
            // An interrupt while adopted children run stops them (as it stops a child
            // `spawn_agent` runs itself), and ends the turn: nothing else of it is run.
            let mut stopped = false;
            for call in &mut carried.calls {
                if let CallState::Children(children) = &call.state {
                    let (state, interrupted) =
                        self.adopt_children(&call.id, children, interrupt).await?;
                    call.state = state;
                    stopped |= interrupted;
                }
            }
            let turn = self.turn;
            self.decider
                .turn
                .store(turn, std::sync::atomic::Ordering::Relaxed);
            let to_run: Vec<(String, String, Value)> = carried
                .calls
                .iter()
                .filter(|c| c.state == CallState::Run && !stopped)
                .map(|c| (c.id.clone(), c.name.clone(), c.input.clone()))
                .collect();
            let (ran, interrupted) = self.run_calls(to_run, interrupt).await?;
            let interrupted = interrupted || stopped;
            let mut by_id: HashMap<String, Block> = HashMap::new();
            let mut notes = Vec::new();
            for block in ran {
                match &block {
                    Block::ToolResult { tool_use_id, .. } => {
                        by_id.insert(tool_use_id.clone(), block);
                    }
                    _ => notes.push(block),
                }
            }
            let mut content: Vec<Block> = carried
                .calls
                .into_iter()
                .map(|call| match call.state {
                    CallState::Answered { content, is_error } => Block::ToolResult {
                        tool_use_id: call.id,
                        content,
                        is_error,
                    },
                    CallState::Unknown(content) => Block::ToolResult {
                        tool_use_id: call.id,
                        content,
                        is_error: true,
                    },
                    CallState::Run | CallState::Children(_) => {
                        by_id.remove(&call.id).unwrap_or(Block::ToolResult {
                            tool_use_id: call.id,
                            content: "not run: the turn was interrupted".into(),
                            is_error: true,
                        })
                    }
                })
                .collect();
            content.extend(notes);
            conversation.push(Message {
                role: Role::User,
                content,
            });
            if carried.turn_open {
                if interrupted {
                    self.end_turn(turn, TurnEndReason::Interrupted)?;
                    return Ok(TaskEnd::Interrupted);
                }
                self.end_turn(turn, TurnEndReason::ToolResults)?;
            }
        }
        // The task keeps the turns it has had: its limit counts from its first turn, whoever ran
        // it.
        let events = chock_log::read_events(self.log().dir())?;
        let used = crate::runtime::last_task::last_task(&events, self.max_turns()).turns;
        self.turns(conversation, None, used, interrupt, summary)
            .await
    }

    /// Waits for the children call `call` spawned, records their end, and gives the result the
    /// call was told (logged by [`crate::subagent::complete_orphans`]), and whether the session
    /// was interrupted meanwhile. Each child still running is registered as a part of `call`
    /// (by the pid its log's lock names), so an interrupt reaches it as it reaches a child
    /// `spawn_agent` runs itself (SIGINT: it ends its turn as interrupted and writes its end);
    /// the wait then goes on until it has ended.
    async fn adopt_children(
        &self,
        call: &str,
        children: &[String],
        interrupt: &mut watch::Receiver<u64>,
    ) -> Result<(CallState, bool), AgentError> {
        let running = self.host.session().running().clone();
        let root = self.log().dir().parent().unwrap_or(self.log().dir());
        let _registered: Vec<_> = children
            .iter()
            .filter_map(|child| match chock_log::is_live(&root.join(child)) {
                Ok(chock_log::Liveness::Live { pid }) => {
                    running.register_interruptible_part(call, child, pid)
                }
                _ => None,
            })
            .collect();
        let waiting = crate::subagent::adopt::await_children(self.log(), &self.budget, children);
        tokio::pin!(waiting);
        let interrupted = tokio::select! {
            done = &mut waiting => {
                done?;
                false
            }
            _ = interrupt.changed() => {
                running.kill(call);
                waiting.await?;
                true
            }
        };
        running.forget(call);
        let told = chock_log::read_events(self.log().dir())?
            .into_iter()
            .rev()
            .find_map(|e| match e.payload() {
                Ok(chock_protocol::EventData::ToolResult(r))
                    if e.call_id.as_deref() == Some(call) =>
                {
                    Some(CallState::Answered {
                        content: r.output,
                        is_error: r.is_error,
                    })
                }
                _ => None,
            });
        let state = told.unwrap_or_else(|| {
            CallState::Unknown("its children ended, and their end says nothing of it".into())
        });
        Ok((state, interrupted))
    }
}
