//! Background work of the session that is not a command (a background subagent,
//! docs/subagents.md): `read_output` shows it running and then its end, the model is told of its
//! end as of a background command's, and work that moves with the session is not waited for
//! when this process lets the session go (docs/handover.md): the next owner takes it up.

use std::sync::Arc;
use std::time::Instant;

use chock_sandbox::BoxFuture;

use super::kept::Keeper;
use super::{Commands, Job};
use crate::events::AgentEvent;

/// What a piece of background work came to, for the model.
#[derive(Debug, Clone)]
pub struct BackgroundEnd {
    /// What `read_output` shows of its end.
    pub text: String,
    /// Its status, when it has one.
    pub status: Option<i32>,
}

/// Whether this process has let the session go (a handover): work that moves with the session
/// then records nothing more here, since its next owner records its end.
#[derive(Clone)]
pub struct Released(Arc<Keeper>);

impl Released {
    /// The session was let go.
    pub fn released(&self) -> bool {
        self.0.released()
    }
}

impl std::fmt::Debug for Released {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Released").field(&self.released()).finish()
    }
}

impl Commands {
    /// Runs `work` in the background of the session under `handle` (`bg-<call>`), described as
    /// `what`: `read_output` says it runs until `work` gives its end, then shows that end, and
    /// the model hears of it at its next turn. `work` is given the [`Released`] to look at
    /// before it records its end, and gives `None` when there is nothing to tell here (the
    /// session was let go). It moves with the session: a handover does not wait for it, and the
    /// session's end does.
    pub fn run_in_background(
        &self,
        handle: &str,
        what: &str,
        work: impl FnOnce(Released) -> BoxFuture<'static, Option<BackgroundEnd>>,
    ) {
        if let Ok(mut jobs) = self.jobs.lock() {
            jobs.insert(
                handle.to_string(),
                Job::Running {
                    started: Instant::now(),
                    command: what.to_string(),
                },
            );
        }
        let running = work(Released(Arc::clone(&self.keeper)));
        let (jobs, sink) = (Arc::clone(&self.jobs), Arc::clone(&self.sink));
        let (handle, what) = (handle.to_string(), what.to_string());
        let waiter = tokio::spawn(async move {
            let Some(end) = running.await else { return };
            sink.emit(&AgentEvent::BackgroundEnded {
                handle: handle.clone(),
                status: end.status,
            });
            if let Ok(mut jobs) = jobs.lock() {
                jobs.insert(
                    handle,
                    Job::Ended {
                        command: what,
                        text: end.text,
                        status: end.status,
                        told: false,
                    },
                );
            }
        });
        if let Ok(mut handles) = self.handles.lock() {
            handles.push((true, waiter));
        }
    }
}
