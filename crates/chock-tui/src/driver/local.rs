//! A session in this process: the runtime in a task of its own (the actor takes tasks and the
//! end one at a time), a push-style answerer attached to its broker (`tui`), and the review calls
//! through [`chock_runtime::review`] with the session's own pipeline and log — the same apply the
//! daemon makes, decided by `workspace.apply` and logged before anything is written.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use chock_agent::config::Config;
use chock_agent::events::{AgentEvent, EventSink};
use chock_agent::runtime::{SessionBuilder, SessionRuntime};
use chock_decide::{Answer, Notice, QuestionKind, Role};
use chock_protocol::rpc::{ErrorKind, RpcError, Selection};
use chock_runtime::review;
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};

use crate::TuiError;
use crate::feed::{Asked, Cmd, Feed, Review, TaskOutcome};

/// How a session here is made.
#[derive(Debug, Clone, Default)]
pub struct LocalOptions {
    /// The provider (default: config.toml's).
    pub provider: Option<String>,
    /// The model.
    pub model: Option<String>,
    /// The project (default: the current directory).
    pub project: Option<PathBuf>,
    /// At most this many turns per task.
    pub max_turns: u32,
}

/// The sink that forwards every live event to the interface.
struct Forward(UnboundedSender<Feed>);

impl EventSink for Forward {
    fn emit(&self, event: &AgentEvent) {
        let _ = self.0.send(Feed::Live(Box::new(event.clone())));
    }
}

/// Makes a new session (`resume`: None) or resumes the ended or crashed one in `resume`. Blocks
/// (the workspace is made); call it off the interface's thread.
pub fn build(
    opts: &LocalOptions,
    task: Option<&str>,
    resume: Option<&Path>,
    feed: &UnboundedSender<Feed>,
) -> Result<SessionRuntime, TuiError> {
    let config = Config::load().map_err(|e| TuiError::Config(e.to_string()))?;
    let mut builder = SessionBuilder::new(config)
        .provider(opts.provider.clone())
        .model(opts.model.clone())
        .project(opts.project.clone())
        .max_turns(opts.max_turns)
        .sink(Arc::new(Forward(feed.clone())));
    if let Some(task) = task {
        builder = builder.reviewer_for(task);
    }
    Ok(match resume {
        Some(dir) => builder.resume(dir),
        None => builder.build(),
    }?)
}

/// Drives `runtime`: returns where to send [`Cmd`]s; what happens comes back on `feed`.
pub fn spawn(runtime: SessionRuntime, feed: UnboundedSender<Feed>) -> UnboundedSender<Cmd> {
    let pipeline = runtime.pipeline();
    let log = runtime.log().clone();
    let dir = log.dir().to_path_buf();
    let id = runtime.id().to_string();
    let client = runtime.attach("tui");
    let interrupter = runtime.interrupter();
    let _ = feed.send(Feed::Started {
        session: id.clone(),
        provider: runtime.chosen().name.clone(),
        model: runtime.chosen().model.clone(),
    });
    // A resumed session's conversation (a new one has none), drawn before its first new turn.
    if !runtime.conversation().is_empty() {
        let _ = feed.send(Feed::Earlier(runtime.conversation().to_vec()));
    }
    let mut notices = pipeline.broker().subscribe();
    let questions = feed.clone();
    tokio::spawn(async move {
        loop {
            let notice = match notices.recv().await {
                Ok(notice) => notice,
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            };
            let sent = match notice {
                Notice::Asked {
                    question,
                    role: Role::Human,
                } => questions.send(Feed::Asked(Asked {
                    id: question.id,
                    approval: question.kind == QuestionKind::Approval,
                    action: question.action,
                    what: question.text,
                    decided_by: question.decided_by,
                    context: question.context,
                })),
                Notice::Asked { .. } => Ok(()),
                Notice::Resolved(r) => questions.send(Feed::Resolved {
                    question: r.question,
                    by: r.by,
                    answer: r.answer,
                }),
            };
            if sent.is_err() {
                return;
            }
        }
    });
    let (to_actor, mut actor_rx) = unbounded_channel::<Cmd>();
    let actor_feed = feed.clone();
    tokio::spawn(async move {
        let mut runtime = runtime;
        while let Some(cmd) = actor_rx.recv().await {
            match cmd {
                Cmd::Input(text) => match runtime.submit(&text).await {
                    Ok(end) => {
                        let _ = actor_feed.send(Feed::TaskEnded(TaskOutcome::Ended(end)));
                    }
                    Err(err) => {
                        let _ =
                            actor_feed.send(Feed::TaskEnded(TaskOutcome::Failed(err.to_string())));
                        let _ = actor_feed.send(Feed::Ended(None));
                        return;
                    }
                },
                Cmd::End => {
                    let summary = match runtime.close().await {
                        Ok(summary) => Some(summary),
                        Err(err) => {
                            let _ =
                                actor_feed.send(Feed::Failed(format!("ending the session: {err}")));
                            None
                        }
                    };
                    let _ = actor_feed.send(Feed::Ended(summary));
                    return;
                }
                _ => {}
            }
        }
    });
    let (tx, mut rx) = unbounded_channel::<Cmd>();
    tokio::spawn(async move {
        // The attachment lives as long as this dispatcher: while it does, questions for people
        // wait for the person here.
        let client = client;
        while let Some(cmd) = rx.recv().await {
            match cmd {
                Cmd::Input(_) | Cmd::End => {
                    let _ = to_actor.send(cmd);
                }
                Cmd::Interrupt => interrupter.interrupt(),
                Cmd::Answer {
                    question,
                    answer,
                    reply,
                } => {
                    let taken = Answer::from_kind(answer, None, reply)
                        .and_then(|answer| client.answer(&question, answer));
                    if let Err(e) = taken {
                        let _ = feed.send(Feed::Failed(format!("your answer to {question}: {e}")));
                    }
                }
                Cmd::Diff { selection, whole } => {
                    let kind = if whole {
                        Review::Whole
                    } else {
                        Review::Selected
                    };
                    let (id, dir, feed) = (id.clone(), dir.clone(), feed.clone());
                    tokio::spawn(async move {
                        let read = tokio::task::spawn_blocking(move || {
                            review::diff(&id, &dir, &selection)
                        })
                        .await
                        .unwrap_or_else(|e| Err(internal(&e)));
                        let _ = feed.send(match read {
                            Ok(diff) => Feed::Diff(kind, Box::new(diff)),
                            Err(e) => Feed::ReviewFailed(kind, e),
                        });
                    });
                }
                Cmd::Apply { selection, digest } => {
                    let (pipeline, log, dir, feed) =
                        (pipeline.clone(), log.clone(), dir.clone(), feed.clone());
                    tokio::spawn(async move {
                        let done = apply(&pipeline, &log, dir, selection, digest).await;
                        let _ = feed.send(match done {
                            Ok(applied) => Feed::Applied(Review::Apply, applied),
                            Err(e) => Feed::ReviewFailed(Review::Apply, e),
                        });
                    });
                }
                Cmd::Undo(apply_id) => {
                    let (pipeline, log, dir, feed) =
                        (pipeline.clone(), log.clone(), dir.clone(), feed.clone());
                    tokio::spawn(async move {
                        let done = undo(&pipeline, &log, &dir, apply_id).await;
                        let _ = feed.send(match done {
                            Ok(applied) => Feed::Applied(Review::Undo, applied),
                            Err(e) => Feed::ReviewFailed(Review::Undo, e),
                        });
                    });
                }
            }
        }
    });
    tx
}

fn internal(e: &impl std::fmt::Display) -> RpcError {
    RpcError::new(ErrorKind::Internal, e.to_string())
}

/// The apply of `selection` pinned to `digest`: planned, then settled, logged and written by
/// [`review::carry_out`] through the session's own pipeline.
async fn apply(
    pipeline: &chock_decide::Pipeline,
    log: &chock_log::Log,
    dir: PathBuf,
    selection: Selection,
    digest: String,
) -> Result<chock_protocol::rpc::Applied, RpcError> {
    let plan = tokio::task::spawn_blocking(move || review::plan_apply(&dir, &selection, &digest))
        .await
        .map_err(|e| internal(&e))??;
    review::carry_out(plan, pipeline, log, "apply").await
}

/// The undo of `apply_id` (an apply of this session), settled and logged as the apply was.
async fn undo(
    pipeline: &chock_decide::Pipeline,
    log: &chock_log::Log,
    dir: &Path,
    apply_id: String,
) -> Result<chock_protocol::rpc::Applied, RpcError> {
    let root = dir
        .parent()
        .ok_or_else(|| internal(&"the session has no sessions root"))?
        .to_path_buf();
    let plan = tokio::task::spawn_blocking(move || chock_workspace::plan_undo(&root, &apply_id))
        .await
        .map_err(|e| internal(&e))?
        .map_err(|e| review::workspace_error(&e))?;
    review::carry_out(plan, pipeline, log, "undo").await
}
