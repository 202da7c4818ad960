//! A running session as an actor, and the handle every front end holds.
//!
//! [`start`] builds (or resumes) a session and gives a [`SessionHandle`]. The session's one task
//! loop runs in a task of its own (the actor); the handle is the only way to act on it
//! ([`SessionHandle::send`] takes the protocol's [`Op`]), to follow it
//! ([`SessionHandle::subscribe`]: its log lines from any seq, then the live items, in order) and
//! to look at it ([`SessionHandle::snapshot`]). The CLI's `run`, the terminal interface, ACP and
//! the daemon are clients of this handle, so a session behaves the same whichever of them holds
//! it: one end rule, one apply and undo ([`review`]), one `session_started`.
//!
//! The handle learns of the session from the session itself — the log writer's tap and the
//! runtime's event sink — never by reading back the file it writes, except once for a
//! subscription's catch-up.
#![forbid(unsafe_code)]
// No library makes an async runtime or blocks on one (the workspace's clippy.toml).
#![cfg_attr(not(test), deny(clippy::disallowed_methods))]

mod actor;
mod feed;
mod handle;
mod item;
pub mod review;
pub mod sessions;
mod subscription;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

pub use chock_agent::runtime::handover::Handover;
pub use chock_agent::runtime::{BuildError, SessionBuilder};
pub use chock_config::config::Config;
pub use chock_decide::{Notice, Question, QuestionKind, Resolution, Role};
pub use chock_protocol::ops::Op;
use chock_tools::events::{AgentEvent, EventSink};
/// The conversation's messages, as [`SessionHandle::earlier`] gives a resumed session's.
pub mod conversation {
    pub use chock_provider::{Block, Message, Role};
}
use tokio::sync::mpsc;

pub use feed::{Observer, SUBSCRIBER_QUEUE};
pub use handle::{HandoverOutcome, OpError, Reply, SessionHandle, Snapshot};
pub use item::{Item, Logged, TaskOutcome};
pub use subscription::Subscription;

/// Which session to start.
#[derive(Debug, Clone)]
pub enum Opening {
    /// A new one.
    New,
    /// The ended or crashed session in this directory, going on from its log.
    Resume(PathBuf),
    /// The session in this directory, which another process was running and has let go of (or
    /// died): taken up where it stands, its task going on at the next turn (`chock detach`).
    Adopt(PathBuf, Handover),
}

/// Why a session could not be started.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Building it failed (configuration, credentials, the workspace, the sandbox's checks).
    #[error(transparent)]
    Build(#[from] BuildError),
    /// Its log could not be followed.
    #[error("following the session's log: {0}")]
    Log(#[from] chock_log::LogError),
    /// The thread building it panicked.
    #[error("building the session: {0}")]
    Panicked(String),
}

impl StartError {
    /// Whether what the caller asked for cannot be (a provider, a project, a policy), rather
    /// than the machine failing: a front end's exit status or typed error.
    pub fn is_bad_input(&self) -> bool {
        match self {
            StartError::Build(e) => e.is_bad_input(),
            StartError::Log(_) | StartError::Panicked(_) => false,
        }
    }

    /// Whether the session's log is still written by another process (a resume refused until it
    /// lets go).
    pub fn is_busy(&self) -> bool {
        matches!(
            self,
            StartError::Build(BuildError::Session(chock_session::SessionError::Log(
                chock_log::LogError::Busy { .. }
            ))) | StartError::Log(chock_log::LogError::Busy { .. })
        )
    }
}

/// Builds (or resumes) a session from `builder` and starts its actor; `observer`, if any, sees
/// every item synchronously from the first (a terminal renderer). The builder's own event sink is
/// replaced: the session's items reach clients through the handle. The session is idle: send it
/// [`Op::UserInput`]. Blocks a worker thread while the workspace is made; its MCP servers are
/// started on the caller's runtime.
pub async fn start(
    builder: SessionBuilder,
    opening: Opening,
    observer: Option<Arc<dyn Observer>>,
) -> Result<SessionHandle, StartError> {
    let feed = Arc::new(feed::Feed::default());
    if let Some(observer) = observer {
        feed.observe(observer);
    }
    let builder = builder.sink(Arc::new(feed::FeedSink(Arc::clone(&feed))));
    let adopting = matches!(opening, Opening::Adopt(..));
    let mut runtime = tokio::task::spawn_blocking(move || match opening {
        Opening::New => builder.build(),
        Opening::Resume(dir) => builder.resume(&dir),
        Opening::Adopt(dir, handover) => builder.adopt(&dir, handover),
    })
    .await
    .map_err(|e| StartError::Panicked(e.to_string()))??;
    if adopting {
        // A task the person interrupted is not taken up again: the session waits for input.
        runtime.wait_if_task_stopped()?;
    }
    // Its MCP servers start here, on the caller's runtime, which drives them for the session's
    // life.
    runtime.start_mcp().await?;
    feed.bind(runtime.log())?;
    let earlier = runtime.conversation().to_vec();
    // How the earlier calls are shown, as the session's own tools describe them (the tools live
    // in the actor from now on).
    let earlier_calls: HashMap<String, chock_protocol::live::ToolDisplay> = earlier
        .iter()
        .flat_map(|message| &message.content)
        .filter_map(|block| match block {
            chock_provider::Block::ToolUse { id, name, input } => {
                Some((id.clone(), runtime.display(name, input)))
            }
            _ => None,
        })
        .collect();
    let (commands, received) = mpsc::unbounded_channel();
    let shared = Arc::new(handle::Shared {
        id: runtime.id().to_string(),
        dir: runtime.log().dir().to_path_buf(),
        project: runtime.project().to_path_buf(),
        provider: runtime.chosen().name.clone(),
        model: runtime.chosen().model.clone(),
        feed: Arc::clone(&feed),
        commands,
        pipeline: runtime.pipeline(),
        log: runtime.log().clone(),
        interrupter: runtime.interrupter(),
        handover: runtime.handover(),
        actor: Mutex::new(None),
        earlier,
        earlier_calls,
    });
    // The one `session_started`, whichever front end started the session.
    feed::FeedSink(Arc::clone(&feed)).emit(&AgentEvent::SessionStarted {
        session: shared.id.clone(),
        log_dir: shared.dir.display().to_string(),
        project: shared.project.display().to_string(),
        provider: shared.provider.clone(),
        model: shared.model.clone(),
    });
    if runtime.carries_on() {
        // A task taken over goes on at once: the session is working from its first item.
        let _ = feed.start_working();
    }
    let actor = tokio::spawn(actor::run(runtime, received, feed));
    *shared
        .actor
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(actor);
    Ok(SessionHandle::new(shared))
}
