//! The actor: the one task loop of a session. It owns the runtime and takes, one at a time, the
//! operations that need it — a task or follow-up, and the end — while the handle answers the
//! others (an interrupt, an answer, a narrowing, an apply) at once, even while a task runs.

use std::sync::Arc;

use chock_agent::runtime::SessionRuntime;
use chock_tools::events::Summary;
use tokio::sync::{mpsc, oneshot};

use crate::feed::Feed;
use crate::item::TaskOutcome;

/// What the actor is told.
pub(crate) enum Command {
    /// Work on this input until the task ends.
    Input(String),
    /// End the session (after the task running now, if any) and say how it went.
    End(oneshot::Sender<Result<Summary, String>>),
}

/// Runs the session's loop until it ends: by [`Command::End`], by an error, or by every handle
/// going away (the runtime is dropped, which writes `session.end` as interrupted).
pub(crate) async fn run(
    mut runtime: SessionRuntime,
    mut commands: mpsc::UnboundedReceiver<Command>,
    feed: Arc<Feed>,
) {
    while let Some(command) = commands.recv().await {
        match command {
            Command::Input(text) => match runtime.submit(&text).await {
                Ok(end) => feed.task_ended(TaskOutcome::Ended(end.ended())),
                Err(err) => {
                    // The runtime wrote `session.end` (error) itself.
                    feed.task_ended(TaskOutcome::Failed(err.to_string()));
                    return;
                }
            },
            Command::End(reply) => {
                // The one rule: the session ends as its last task ended.
                let closed = runtime.close().await.map_err(|e| e.to_string());
                feed.ended();
                let _ = reply.send(closed);
                return;
            }
        }
    }
    drop(runtime);
    feed.ended();
}
