//! Where the session's last task stands, read from its log: what a process that takes the
//! session over (docs/handover.md) needs to decide whether the task goes on, and for how many
//! turns. A task stopped by the person (an interrupt), by the budget or at its turn limit is
//! over: the new owner waits for the next input rather than going on with it, and a task it does
//! go on with keeps the turns it has already had.

use chock_log::Event;
use chock_protocol::EventData;
use chock_protocol::log::{Note, TurnEndReason};

/// Why the last task stopped before its model gave a final answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stopped {
    /// Its last turn ended interrupted.
    Interrupted,
    /// A model call was refused by the budget after its last turn began.
    OutOfBudget,
    /// It had as many turns as the limit allows.
    TurnLimit,
}

/// The last task of a session's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LastTask {
    /// The turns it has had: from the turn that carried its input to the last.
    pub(crate) turns: u32,
    /// Why it stopped early, if it did.
    pub(crate) stopped: Option<Stopped>,
}

/// Reads the last task of `events` under a turn limit of `max_turns`.
pub(crate) fn last_task(events: &[Event], max_turns: u32) -> LastTask {
    let mut turns = 0u32;
    let mut last_end = None;
    let mut out_of_budget = false;
    for event in events {
        match event.payload() {
            Ok(EventData::TurnStart(start)) => {
                turns = if start.input.is_some() { 1 } else { turns + 1 };
                last_end = None;
                out_of_budget = false;
            }
            Ok(EventData::TurnEnd(end)) => last_end = Some(end.reason),
            Ok(EventData::Note(Note::BudgetExhausted { .. })) => out_of_budget = true,
            _ => {}
        }
    }
    let stopped = if last_end == Some(TurnEndReason::Interrupted) {
        Some(Stopped::Interrupted)
    } else if out_of_budget {
        Some(Stopped::OutOfBudget)
    } else if turns >= max_turns && last_end == Some(TurnEndReason::ToolResults) {
        Some(Stopped::TurnLimit)
    } else {
        None
    };
    LastTask { turns, stopped }
}
