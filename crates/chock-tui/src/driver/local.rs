//! A session in this process, driven through its handle (`chock-runtime`): the interface's
//! commands become the protocol's operations, the handle's items and questions come back as
//! [`Feed`]. The session's loop, its end rule and its one apply and undo are the runtime's: this
//! driver holds no loop of its own.

use std::path::PathBuf;

use chock_protocol::ops::Op;
use chock_protocol::rpc::{ErrorKind, RpcError};
use chock_runtime::{Config, Notice, QuestionKind, Role, SessionBuilder};
use chock_runtime::{HandoverOutcome, Item, Opening, Reply, SessionHandle};
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

/// The builder of a session as `opts` say (`task`: what the reviewer model is told it was asked).
pub fn builder(opts: &LocalOptions, task: Option<&str>) -> Result<SessionBuilder, TuiError> {
    let config = Config::load().map_err(|e| TuiError::Config(e.to_string()))?;
    let builder = SessionBuilder::new(config)
        .provider(opts.provider.clone())
        .model(opts.model.clone())
        .project(opts.project.clone())
        .max_turns(opts.max_turns);
    Ok(match task {
        Some(task) => builder.reviewer_for(task),
        None => builder,
    })
}

/// Starts the session `builder` makes (`opening`: new, or the ended or crashed one to resume) and
/// drives it: returns where to send [`Cmd`]s; what happens comes back on `feed`.
pub async fn start(
    builder: SessionBuilder,
    opening: Opening,
    feed: UnboundedSender<Feed>,
) -> Result<UnboundedSender<Cmd>, TuiError> {
    let handle = chock_runtime::start(builder, opening, None).await?;
    Ok(drive(handle.named("tui"), feed))
}

/// Drives `handle`: returns where to send [`Cmd`]s; what happens comes back on `feed`.
pub fn drive(handle: SessionHandle, feed: UnboundedSender<Feed>) -> UnboundedSender<Cmd> {
    let _ = feed.send(Feed::Started {
        session: handle.id().to_string(),
        provider: handle.provider().to_string(),
        model: handle.model().to_string(),
    });
    // A resumed session's conversation (a new one has none), drawn before its first new turn.
    if !handle.earlier().is_empty() {
        let _ = feed.send(Feed::Earlier(handle.earlier().to_vec()));
    }
    forward_items(&handle, feed.clone());
    forward_questions(&handle, feed.clone());
    let_go_when_asked(&handle);
    let (tx, mut rx) = unbounded_channel::<Cmd>();
    tokio::spawn(async move {
        // The attachment lives as long as this dispatcher: while it does, questions for people
        // wait for the person here.
        let _attached = handle.attach("tui");
        while let Some(cmd) = rx.recv().await {
            let (handle, feed) = (handle.clone(), feed.clone());
            // Each command is its own task: an answer or an apply is taken while a task runs.
            tokio::spawn(async move { dispatch(&handle, cmd, &feed).await });
        }
    });
    tx
}

/// Carries out one command.
async fn dispatch(handle: &SessionHandle, cmd: Cmd, feed: &UnboundedSender<Feed>) {
    let failed = |e: String| {
        let _ = feed.send(Feed::Failed(e));
    };
    match cmd {
        Cmd::Input(text) => {
            if let Err(e) = handle.send(Op::UserInput { text }).await {
                failed(e.to_string());
            }
        }
        Cmd::Interrupt => {
            let _ = handle.send(Op::Interrupt).await;
        }
        Cmd::End => match handle.send(Op::End).await {
            Ok(Reply::Ended(summary)) => {
                let _ = feed.send(Feed::Ended(Some(summary)));
            }
            Ok(_) => {}
            Err(e) => {
                failed(format!("ending the session: {e}"));
                let _ = feed.send(Feed::Ended(None));
            }
        },
        Cmd::Answer {
            question,
            answer,
            reply,
        } => {
            let op = Op::Answer {
                question: question.clone(),
                answer,
                reasons: None,
                reply,
            };
            if let Err(e) = handle.send(op).await {
                failed(format!("your answer to {question}: {e}"));
            }
        }
        Cmd::Diff { selection, whole } => {
            let kind = if whole {
                Review::Whole
            } else {
                Review::Selected
            };
            let (id, dir) = (handle.id().to_string(), handle.dir().to_path_buf());
            let read = tokio::task::spawn_blocking(move || {
                chock_runtime::review::diff(&id, &dir, &selection)
            })
            .await
            .unwrap_or_else(|e| Err(RpcError::new(ErrorKind::Internal, e.to_string())));
            let _ = feed.send(match read {
                Ok(diff) => Feed::Diff(kind, Box::new(diff)),
                Err(e) => Feed::ReviewFailed(kind, e),
            });
        }
        Cmd::Apply { selection, digest } => {
            let done = handle.send(Op::Apply { selection, digest }).await;
            let _ = feed.send(reviewed(Review::Apply, done));
        }
        Cmd::Undo(apply_id) => {
            let done = handle.send(Op::Undo { apply_id }).await;
            let _ = feed.send(reviewed(Review::Undo, done));
        }
    }
}

/// What an apply or undo came to.
fn reviewed(kind: Review, done: Result<Reply, chock_runtime::OpError>) -> Feed {
    match done {
        Ok(Reply::Applied(applied)) => Feed::Applied(kind, applied),
        Ok(other) => Feed::Failed(format!("unexpected reply {other:?}")),
        Err(e) => Feed::ReviewFailed(kind, e.to_rpc()),
    }
}

/// The session `id` moved to the daemon: it stopped here, and goes on there.
fn handed_over(id: &str) -> Vec<Feed> {
    vec![Feed::HandedOver {
        follow: chock_client::handover::how_to_follow(id),
    }]
}

/// The daemon's adopt (a detach key here, `chock detach` from elsewhere) asks this process to let
/// go of its session with SIGUSR1: the runtime hands it over — at once when no task runs (idle,
/// waiting for a follow-up), at the next turn boundary when one does, at once while a person's
/// question waits. Listened for while `handle`'s session lives here.
fn let_go_when_asked(handle: &SessionHandle) {
    let Ok(mut asked) =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::user_defined1())
    else {
        return;
    };
    let handle = handle.clone();
    let mut items = handle.subscribe_live();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                signal = asked.recv() => {
                    if signal.is_none() || let_go(&handle).await {
                        return;
                    }
                }
                item = items.next() => match item {
                    Some(Item::Lagged { .. }) => items = handle.subscribe_live(),
                    Some(_) => {}
                    None => return,
                },
            }
        }
    });
}

/// Hands the session over as the runtime decides; `true` once it is no longer this process's
/// (handed over, or ended). A task that ended before its turn boundary leaves the session idle
/// here, waiting for a follow-up, and the interface's idle session is handed over all the same.
async fn let_go(handle: &SessionHandle) -> bool {
    loop {
        match handle.hand_over().await {
            HandoverOutcome::TaskEndedFirst => {}
            HandoverOutcome::Idle
            | HandoverOutcome::AtTurnBoundary
            | HandoverOutcome::QuestionOpen
            | HandoverOutcome::Ended => return true,
        }
    }
}

/// The session's live items and task ends, as they come.
fn forward_items(handle: &SessionHandle, feed: UnboundedSender<Feed>) {
    let mut items = handle.subscribe_live();
    let handle = handle.clone();
    tokio::spawn(async move {
        // Tasks ended so far, to tell one that ended while the subscription lagged.
        let mut ended = handle.last_task().map_or(0, |(n, _)| n);
        while let Some(item) = items.next().await {
            let fed: &[Feed] = &match item {
                // Fell behind: the live items missed are gone (never stored); go on from now, and
                // give the end of a task that ended meanwhile.
                Item::Lagged { .. } => {
                    items = handle.subscribe_live();
                    match handle.last_task() {
                        Some((n, outcome)) if n > ended => {
                            ended = n;
                            match outcome {
                                chock_runtime::TaskOutcome::Ended(end) => {
                                    vec![Feed::TaskEnded(TaskOutcome::Ended(end))]
                                }
                                chock_runtime::TaskOutcome::Failed(why) => vec![
                                    Feed::TaskEnded(TaskOutcome::Failed(why)),
                                    Feed::Ended(None),
                                ],
                                chock_runtime::TaskOutcome::HandedOver => handed_over(handle.id()),
                            }
                        }
                        _ => Vec::new(),
                    }
                }
                Item::Live { event, .. } => vec![Feed::Live(Box::new((*event).clone()))],
                Item::TaskEnded(chock_runtime::TaskOutcome::Ended(end)) => {
                    ended += 1;
                    vec![Feed::TaskEnded(TaskOutcome::Ended(end))]
                }
                Item::TaskEnded(chock_runtime::TaskOutcome::Failed(why)) => {
                    ended += 1;
                    vec![Feed::TaskEnded(TaskOutcome::Failed(why)), Feed::Ended(None)]
                }
                Item::TaskEnded(chock_runtime::TaskOutcome::HandedOver) => {
                    ended += 1;
                    handed_over(handle.id())
                }
                Item::Logged(_) | Item::State(_) => Vec::new(),
            };
            for one in fed {
                if feed.send(one.clone()).is_err() {
                    return;
                }
            }
        }
    });
}

/// The questions for people, as the session's broker tells them.
fn forward_questions(handle: &SessionHandle, feed: UnboundedSender<Feed>) {
    let mut notices = handle.questions();
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
                } => feed.send(Feed::Asked(Asked {
                    id: question.id,
                    approval: question.kind == QuestionKind::Approval,
                    action: question.action,
                    what: question.text,
                    decided_by: question.decided_by,
                    context: question.context,
                    secret: question.secret,
                })),
                Notice::Asked { .. } => Ok(()),
                Notice::Resolved(r) => feed.send(Feed::Resolved {
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
}
