//! Background subagents (`spawn_agent {background: true}`, docs/subagents.md): the call returns
//! once the child runs, and the child's end is recorded when it comes (`agent.complete`, what it
//! spent booked), told to the model at its next turn and shown by `read_output`, as a background
//! command's is. A child is a process of its own: it outlives a parent that dies or hands the
//! session over (docs/handover.md). The next owner adopts it by its log's lock and its pid file
//! descriptor ([`super::adopt`]) and records its end, so every `session.spawn` is still followed
//! by an `agent.complete`.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use chock_log::{Event, EventKind, Log, LogError};
use chock_protocol::EventData;
use chock_tools::ToolOutput;
use chock_tools::commands::BackgroundEnd;
use chock_tools::dispatch::Toolbox;
use chock_tools::tool::ToolContext;

use super::Subagents;
use super::child::launch;
use super::spawn::{SpawnInput, finish, prepare};
use crate::budget::Budget;

/// The handle a background child of call `call` is followed by (as a background command's).
pub(crate) fn handle_of(call: &str) -> String {
    format!("bg-{call}")
}

/// Counts a background child alive (the width bound) until its end is recorded.
struct Alive(Arc<Subagents>);

impl Drop for Alive {
    fn drop(&mut self) {
        self.0.alive.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Starts the child of `input` in the background: its spawn on the record, its process started,
/// and its end recorded when it comes (unless this process has let the session go by then: the
/// next owner records it).
pub(super) fn spawn(
    cx: ToolContext<'_>,
    subagents: &Arc<Subagents>,
    input: &SpawnInput,
) -> Result<ToolOutput, LogError> {
    let child = match prepare(cx, subagents, input)? {
        Ok(child) => child,
        Err(refused) => return Ok(refused),
    };
    subagents.alive.fetch_add(1, Ordering::SeqCst);
    let alive = Alive(Arc::clone(subagents));
    let launched = launch(&subagents.config, &child.spec, &child.dir, true);
    let id = child.spec.id.clone();
    let handle = handle_of(cx.call_id);
    let what = format!("child {id}: {}", first_line(&input.task));
    let (log, call) = (cx.decider.log.clone(), cx.call_id.to_string());
    let started = launched.is_ok();
    cx.state
        .commands
        .run_in_background(&handle, &what, move |released| {
            Box::pin(async move {
                let status = match launched {
                    Ok(mut process) => process.wait().await.ok(),
                    Err(e) => {
                        let _ = std::fs::write(child.dir.join("start-error"), e.as_bytes());
                        None
                    }
                };
                if released.released() {
                    // The next owner adopts the child and records its end.
                    return None;
                }
                let told = finish(&log, &alive.0, &call, &child, status).ok()?;
                let _ = log.sync();
                Some(BackgroundEnd {
                    text: told.text,
                    status: None,
                })
            })
        });
    Ok(if started {
        ToolOutput::ok(format!(
            "child {id} runs in the background as {handle}. You are told when it ends; then \
             read_output {{\"handle\": \"{handle}\"}} shows its report, and take_subagent \
             {{\"child\": \"{id}\"}} takes its changes."
        ))
    } else {
        ToolOutput::error(format!(
            "child {id} could not be started; its end is recorded as never started ({handle})"
        ))
    })
}

fn first_line(task: &str) -> String {
    task.lines().next().unwrap_or("").chars().take(80).collect()
}

/// A new owner (docs/handover.md): the background children the session's log spawned, whose
/// `spawn_agent` call was answered (it returned once the child ran), are taken up. One whose end
/// is not recorded is followed under its handle until it has ended (its pid file descriptor, then
/// its log's lock), its end is recorded as a resume records it (`agent.complete`, what it spent
/// booked), and the model is told; one that ended while nobody owned the session (`completed`:
/// recorded when the session was reopened) is told at once. Returns the handles taken up.
pub(crate) fn adopt(
    toolbox: &Toolbox,
    log: &Log,
    budget: &Budget,
    events: &[Event],
    completed: &[String],
) -> Vec<String> {
    let mut handles = Vec::new();
    for (call, child, task, ended) in background_children(events) {
        if ended && !completed.contains(&child) {
            continue;
        }
        let handle = handle_of(&call);
        let what = format!("child {child}: {}", first_line(&task));
        let (log, budget) = (log.clone(), budget.clone());
        toolbox.run_in_background(&handle, &what, move |released| {
            Box::pin(async move {
                let waited =
                    super::adopt::await_children(&log, &budget, std::slice::from_ref(&child)).await;
                if released.released() || waited.is_err() {
                    return None;
                }
                Some(BackgroundEnd {
                    text: super::spawn::report_of(&log, &child).text,
                    status: None,
                })
            })
        });
        handles.push(handle);
    }
    handles
}

/// (call, child, task, whether its end is recorded) of each child spawned in the background
/// (its `spawn_agent` call has its result).
fn background_children(events: &[Event]) -> Vec<(String, String, String, bool)> {
    let answered: HashSet<&str> = events
        .iter()
        .filter(|e| e.kind == EventKind::ToolResult)
        .filter_map(|e| e.call_id.as_deref())
        .collect();
    let mut spawned: Vec<(String, String, String, bool)> = Vec::new();
    for event in events {
        match event.payload() {
            Ok(EventData::SessionSpawn(spawn)) => {
                if let Some(call) = event.call_id.as_deref() {
                    spawned.push((call.to_string(), spawn.child, spawn.task, false));
                }
            }
            Ok(EventData::AgentComplete(done)) => {
                for s in &mut spawned {
                    if Some(&s.1) == done.child.as_ref() {
                        s.3 = true;
                    }
                }
            }
            _ => {}
        }
    }
    // A child's call is answered before its end only when it ran in the background (a
    // foreground spawn's result comes after its `agent.complete`).
    spawned.retain(|(call, _, _, _)| answered.contains(call.as_str()));
    spawned
        .into_iter()
        .filter(|(call, child, _, _)| background_spawn(events, call, child))
        .collect()
}

/// Whether `call`'s result came before `child`'s end: the child ran in the background.
fn background_spawn(events: &[Event], call: &str, child: &str) -> bool {
    let result = events
        .iter()
        .position(|e| e.kind == EventKind::ToolResult && e.call_id.as_deref() == Some(call));
    let complete = events.iter().position(|e| {
        matches!(e.payload(), Ok(EventData::AgentComplete(done)) if done.child.as_deref() == Some(child))
    });
    match (result, complete) {
        (Some(r), Some(c)) => r < c,
        (Some(_), None) => true,
        _ => false,
    }
}
