//! The background commands a session's last owner left, taken up by the process that opens the
//! session next: an adopt (`chock detach`, the daemon's `sessions.adopt`) and a resume (`chock run
//! --resume`, the daemon's `sessions.resume`) alike (docs/handover.md).
//!
//! A background `run_command` runs under the session's keeper, which outlives the process that
//! started it: the next owner takes the keeper up and follows each command it keeps from where
//! its record in the session's directory stands, writing its end (`command.result`, `note
//! {about: background_ended}`) as the old owner would have. A background command that never
//! recorded its end and that no keeper keeps died with the process that ran it: its end is
//! unknown, and the log says so. Both openings share this, so a resume never leaves a running
//! command to the keeper's ownerless wait.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use chock_log::{Event, EventKind, Log};
use chock_protocol::EventData;
use chock_protocol::log::Note;
use chock_tools::dispatch::Toolbox;

use super::BuildError;

/// What the last owner left of its background commands, once the keeper (if one runs) is taken
/// up.
pub(super) struct LeftBackground {
    /// The handles the keeper keeps.
    kept: HashSet<String>,
    /// The calls whose command never recorded its end and that the keeper keeps: they run on.
    moving: Vec<String>,
    /// The calls whose command never recorded its end and that no keeper keeps: they died with
    /// the process that ran them.
    lost: Vec<String>,
}

impl LeftBackground {
    /// Takes up the keeper the last owner left (this process holds it from now on) and sorts the
    /// background commands whose end `events` (the session's own log) does not record. Call it
    /// before anything is logged that depends on which command's end is unknown.
    pub(super) fn take_up(toolbox: &Toolbox, events: &[Event]) -> LeftBackground {
        let kept: HashSet<String> = toolbox.take_up_kept().into_iter().collect();
        let (moving, lost) = background_left(events)
            .into_iter()
            .partition(|call| kept.contains(&background_handle(call)));
        LeftBackground { kept, moving, lost }
    }

    /// The handles (`bg-<call>`) of the commands whose end is unknown.
    pub(super) fn lost_handles(&self) -> Vec<String> {
        self.lost
            .iter()
            .map(|call| background_handle(call))
            .collect()
    }

    /// Logs the end of each command that died with the last owner as unknown (`status: null`,
    /// `is_error`); the model is told so.
    pub(super) fn record_lost(&self, log: &Log) -> Result<(), BuildError> {
        for handle in self.lost_handles() {
            log.record(
                Some(&handle),
                Note::BackgroundEnded {
                    background: handle.clone(),
                    status: None,
                    is_error: true,
                },
            )?;
        }
        Ok(())
    }

    /// Follows each command the keeper keeps from where its record stands (its end is then
    /// recorded here), and tells read_output of every background command whose end the log of
    /// `session_dir` records. Call it once the runtime is made (the output is recorded under its
    /// turn).
    pub(super) fn follow(self, toolbox: &Toolbox, session_dir: &Path) -> Result<(), BuildError> {
        let own = chock_log::read_events(session_dir)?;
        let commands = background_commands(&own);
        let ends = background_ends(&own);
        for call in &self.moving {
            let handle = background_handle(call);
            let command = commands.get(&handle).cloned().unwrap_or_default();
            toolbox.follow_kept(&handle, &command, false);
        }
        // A kept command whose `command.result` the last owner wrote just before it stopped, but
        // not the note that ends it: only the note is left to write.
        for handle in self.kept.iter().filter(|h| {
            !self.moving.iter().any(|c| background_handle(c) == **h)
                && !ends.iter().any(|(b, _, _)| b == *h)
        }) {
            let command = commands.get(handle).cloned().unwrap_or_default();
            toolbox.follow_kept(handle, &command, true);
        }
        // read_output knows the earlier owners' background commands that ended.
        for (handle, command, status) in ends {
            toolbox.ended_elsewhere(&handle, &command, status);
        }
        Ok(())
    }
}

/// The handle run_command gives a background command of call `call`.
fn background_handle(call: &str) -> String {
    format!("bg-{call}")
}

/// The run_command calls that were told they run in the background and whose command never
/// recorded its end (no `command.result`, no `background_ended` note): they ran in an earlier
/// owner. (A command in the foreground records its end before the model is told anything.)
fn background_left(events: &[Event]) -> Vec<String> {
    let mut told: Vec<String> = Vec::new();
    let mut ended: HashSet<String> = HashSet::new();
    for event in events {
        let Some(call) = event.call_id.as_deref() else {
            continue;
        };
        match event.kind {
            EventKind::ToolResult => {
                if let Ok(EventData::ToolResult(r)) = event.payload()
                    && r.tool == "run_command"
                    && !ended.contains(call)
                {
                    told.push(call.to_string());
                }
            }
            EventKind::CommandResult => {
                ended.insert(call.to_string());
            }
            EventKind::Note => {
                // An end recorded as unknown by an earlier taking up.
                if let Ok(EventData::Note(Note::BackgroundEnded { background, .. })) =
                    event.payload()
                    && let Some(call) = background.strip_prefix("bg-")
                {
                    ended.insert(call.to_string());
                }
            }
            _ => {}
        }
    }
    told.retain(|call| !ended.contains(call));
    told
}

/// The command (the shell's script, as the model wrote it) of each call's background handle.
fn background_commands(events: &[Event]) -> HashMap<String, String> {
    let mut commands: HashMap<String, String> = HashMap::new();
    for event in events {
        if let Ok(EventData::ToolCall(call)) = event.payload()
            && let (Some(id), Some(argv)) = (&event.call_id, call.argv)
        {
            commands.insert(
                background_handle(id),
                argv.last().cloned().unwrap_or_default(),
            );
        }
    }
    commands
}

/// Every background command whose end the log records: its handle, its command (the shell's
/// script, as the model wrote it) and its status.
fn background_ends(events: &[Event]) -> Vec<(String, String, Option<i32>)> {
    let commands = background_commands(events);
    let mut ends = Vec::new();
    for event in events {
        if let Ok(EventData::Note(Note::BackgroundEnded {
            background, status, ..
        })) = event.payload()
        {
            let command = commands.get(&background).cloned().unwrap_or_default();
            ends.push((background, command, status));
        }
    }
    ends
}

/// The children the last owner ran in the background move with the session too, for a resume
/// as for an adopt (`crate::subagent::background::adopt`): `completed` are those whose end was
/// recorded at the reopen.
pub(super) fn take_up_children(
    runtime: &super::SessionRuntime,
    own: &[Event],
    completed: &[String],
) {
    crate::subagent::background::adopt(
        runtime.agent.toolbox(),
        runtime.agent.log(),
        runtime.agent.budget(),
        own,
        completed,
    );
}
