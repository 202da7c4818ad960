//! The actor: the one task loop of a session. It owns the runtime and takes, one at a time, the
//! operations that need it — a task or follow-up, and the end — while the handle answers the
//! others (an interrupt, an answer, a narrowing, an apply) at once, even while a task runs.

use std::sync::Arc;

use chock_agent::agent::TaskEnd;
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
    /// Let go of the idle session for another process (no `session.end`), and say when it is
    /// let go.
    HandOver(oneshot::Sender<()>),
}

/// Runs the session's loop until it ends: by [`Command::End`], by an error, or by every handle
/// going away (the runtime is dropped, which writes `session.end` as interrupted).
pub(crate) async fn run(
    mut runtime: SessionRuntime,
    mut commands: mpsc::UnboundedReceiver<Command>,
    feed: Arc<Feed>,
) {
    let _ends = EndsOnPanic(Arc::clone(&feed));
    if runtime.carries_on() {
        let outcome = runtime.carry_on().await;
        if !went_on(outcome, &feed) {
            drop(runtime);
            feed.ended();
            return;
        }
    }
    while let Some(command) = commands.recv().await {
        match command {
            Command::Input(text) => {
                let outcome = runtime.submit(&text).await;
                if !went_on(outcome, &feed) {
                    drop(runtime);
                    feed.ended();
                    return;
                }
            }
            Command::End(reply) => {
                // The one rule: the session ends as its last task ended.
                let closed = runtime.close().await.map_err(|e| e.to_string());
                feed.ended();
                let _ = reply.send(closed);
                return;
            }
            Command::HandOver(reply) => {
                // Nothing runs: the session is let go where it stands. An error syncing the log
                // still lets go (the new owner reads what is on disk).
                let _ = runtime.let_go().await;
                feed.task_ended(TaskOutcome::HandedOver);
                drop(runtime);
                feed.ended();
                let _ = reply.send(());
                return;
            }
        }
    }
    drop(runtime);
    feed.ended();
}

/// Tells the feed how a task ended; `false` when the session does not go on here (an error ended
/// it, and the runtime wrote `session.end` itself; or it was handed over and writes none).
fn went_on(outcome: Result<TaskEnd, chock_agent::agent::AgentError>, feed: &Feed) -> bool {
    match outcome {
        Ok(TaskEnd::HandedOver) => {
            feed.task_ended(TaskOutcome::HandedOver);
            false
        }
        Ok(end) => {
            feed.task_ended(TaskOutcome::Ended(end.ended()));
            true
        }
        Err(err) => {
            feed.task_ended(TaskOutcome::Failed(err.to_string()));
            false
        }
    }
}

/// Ends the feed if the loop unwinds: a panic in the session's loop (or in a blocking task it
/// awaits and unwraps) ends the task as failed and the session with it, so whoever waits on a
/// subscription hears of it instead of waiting for ever. The panic itself is reported by the
/// panic hook, on stderr.
struct EndsOnPanic(Arc<Feed>);

impl Drop for EndsOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.task_ended(TaskOutcome::Failed(
                "the session's loop panicked (its message is on stderr)".into(),
            ));
            self.0.ended();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::item::Item;

    #[test]
    fn a_panic_in_the_loop_ends_the_task_as_failed_and_the_stream() {
        let feed = Arc::new(Feed::default());
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut items = feed.subscribe(u64::MAX);
            let held = Arc::clone(&feed);
            let task = tokio::spawn(async move {
                let _ends = EndsOnPanic(held);
                tokio::task::yield_now().await;
                panic!("a worker's unwrap");
            });
            assert!(task.await.unwrap_err().is_panic());
            let mut seen = Vec::new();
            let wait = tokio::time::timeout(std::time::Duration::from_secs(5), async {
                while let Some(item) = items.next().await {
                    seen.push(item);
                }
            });
            wait.await.expect("the stream ended instead of hanging");
            assert!(
                seen.iter()
                    .any(|i| matches!(i, Item::TaskEnded(TaskOutcome::Failed(_)))),
                "{seen:?}"
            );
        });
    }
}
