//! The handle of a running session: what every front end holds. [`SessionHandle::send`] is the
//! only way to act on the session; [`SessionHandle::subscribe`] follows it from any seq;
//! [`SessionHandle::snapshot`] looks at it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use chock_agent::runtime::Interrupter;
use chock_decide::{Answer, AnswerError, Client, Pipeline, RestrictError};
use chock_log::Log;
use chock_protocol::live::ToolDisplay;
use chock_protocol::ops::Op;
use chock_protocol::rpc::{ErrorKind, RpcError, SessionState};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::actor::Command;
use crate::feed::Feed;
use crate::item::TaskOutcome;
use crate::review;
use crate::subscription::Subscription;

/// What an operation did, and a session as it stands: the protocol's types
/// ([`chock_protocol::handle`]), so the daemon's client gives the same ones.
pub use chock_protocol::handle::{Reply, Snapshot};

/// Why an operation was refused.
#[derive(Debug, thiserror::Error)]
pub enum OpError {
    /// A task runs: a new input waits until it ends (or interrupt it).
    #[error("session {session} is working on a task: interrupt it or wait until it is idle")]
    Busy {
        /// The session.
        session: String,
    },
    /// The session has ended.
    #[error("session {session} has ended")]
    Ended {
        /// The session.
        session: String,
    },
    /// An answer that does not fit (unknown or answered question, wrong kind of answer).
    #[error(transparent)]
    Answer(#[from] AnswerError),
    /// A narrowing the policy refuses (a bad pattern, or one that would widen).
    #[error("restrict {pattern}: {source}")]
    Restrict {
        /// The pattern asked for.
        pattern: String,
        /// Why not.
        source: RestrictError,
    },
    /// An apply, undo or fork that was refused or failed.
    #[error("{}", .0.message)]
    Review(RpcError),
    /// Ending the session failed (its log could not be finished).
    #[error("ending session {session}: {reason}")]
    Ending {
        /// The session.
        session: String,
        /// What went wrong.
        reason: String,
    },
}

impl OpError {
    /// The protocol's typed error for this refusal.
    pub fn to_rpc(&self) -> RpcError {
        let kind = match self {
            OpError::Busy { .. } => ErrorKind::Busy,
            OpError::Ended { .. } => ErrorKind::NotRunning,
            OpError::Answer(_) | OpError::Restrict { .. } => ErrorKind::BadInput,
            OpError::Review(e) => return e.clone(),
            OpError::Ending { .. } => ErrorKind::Internal,
        };
        RpcError::new(kind, self.to_string())
    }
}

/// What the handles of one session share.
pub(crate) struct Shared {
    pub(crate) id: String,
    pub(crate) dir: PathBuf,
    pub(crate) project: PathBuf,
    pub(crate) provider: String,
    pub(crate) model: String,
    pub(crate) feed: Arc<Feed>,
    pub(crate) commands: mpsc::UnboundedSender<Command>,
    pub(crate) pipeline: Pipeline,
    pub(crate) log: Log,
    pub(crate) interrupter: Interrupter,
    pub(crate) handover: chock_agent::runtime::HandoverSwitch,
    pub(crate) actor: Mutex<Option<JoinHandle<()>>>,
    /// The conversation the session started with (a resumed one's, rebuilt from its log).
    pub(crate) earlier: Vec<chock_provider::Message>,
    /// How each tool call of `earlier` is shown, by call id.
    pub(crate) earlier_calls: HashMap<String, ToolDisplay>,
}

/// How [`SessionHandle::hand_over`] came out: typed, so every front end acts on the runtime's
/// decision rather than guessing it from the session's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandoverOutcome {
    /// Let go at once with no task running (the session was idle): the new owner waits for the
    /// next input.
    Idle,
    /// Let go at the running task's next turn boundary: the new owner goes on with the task.
    AtTurnBoundary,
    /// Let go at once while a person's question waited: it stays open for the new owner.
    QuestionOpen,
    /// Not let go: the running task ended some other way before its next turn boundary. The
    /// session is idle here: the caller's to end, or to hand over idle by asking again.
    TaskEndedFirst,
    /// Not let go: the session has ended (or was let go already).
    Ended,
}

impl HandoverOutcome {
    /// Whether the session was let go (this process no longer owns it).
    pub fn handed_over(self) -> bool {
        matches!(
            self,
            HandoverOutcome::Idle | HandoverOutcome::AtTurnBoundary | HandoverOutcome::QuestionOpen
        )
    }
}

/// A running session. Cheap to clone; every clone acts on the same session.
#[derive(Clone)]
pub struct SessionHandle {
    pub(crate) shared: Arc<Shared>,
    /// Who answers questions through this handle (logged as `by`).
    by: Arc<str>,
    /// Whether an apply sent through this handle is put to a person even when the table allows
    /// it ([`SessionHandle::confirming_applies`]).
    confirm: review::Confirm,
}

impl std::fmt::Debug for SessionHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionHandle")
            .field("session", &self.shared.id)
            .field("by", &self.by)
            .finish_non_exhaustive()
    }
}

impl SessionHandle {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        SessionHandle {
            shared,
            by: Arc::from("client"),
            confirm: review::Confirm::Table,
        }
    }

    /// This handle, answering as `name` (`browser`, `tui`, an editor's name): the log's
    /// `approval.answer` names who answered.
    pub fn named(&self, name: &str) -> SessionHandle {
        SessionHandle {
            shared: Arc::clone(&self.shared),
            by: Arc::from(name),
            confirm: self.confirm,
        }
    }

    /// This handle, putting every apply it sends to a person even when the table allows it: for
    /// a front end that offers an apply nobody asked for (an editor, at the end of each turn), so
    /// the project is never written just because the table would let it. A table's `deny` or a
    /// reviewer still stands.
    pub fn confirming_applies(&self) -> SessionHandle {
        SessionHandle {
            shared: Arc::clone(&self.shared),
            by: Arc::clone(&self.by),
            confirm: review::Confirm::Person,
        }
    }

    /// The session's id.
    pub fn id(&self) -> &str {
        &self.shared.id
    }

    /// Its directory (holding `log.jsonl` and the workspace).
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    /// The project it works on.
    pub fn project(&self) -> &Path {
        &self.shared.project
    }

    /// The provider it asks.
    pub fn provider(&self) -> &str {
        &self.shared.provider
    }

    /// The model it asks.
    pub fn model(&self) -> &str {
        &self.shared.model
    }

    /// The conversation it started with: a resumed session's earlier turns (a new one has none).
    pub fn earlier(&self) -> &[chock_provider::Message] {
        &self.shared.earlier
    }

    /// How the earlier tool call `call_id` (one of [`SessionHandle::earlier`]'s) is shown, as
    /// the session's tool describes it: for a client replaying the conversation.
    pub fn earlier_call(&self, call_id: &str) -> Option<&ToolDisplay> {
        self.shared.earlier_calls.get(call_id)
    }

    /// Working, idle or ended.
    pub fn state(&self) -> SessionState {
        self.shared.feed.state()
    }

    /// The session as it stands.
    pub fn snapshot(&self) -> Snapshot {
        let (view, state, head) = self.shared.feed.snapshot();
        Snapshot { view, state, head }
    }

    /// Its items from log seq `from` on: the lines already written (read once from the file),
    /// then everything as it happens, in order, with no gap and no repeat.
    pub fn subscribe(&self, from: u64) -> Subscription {
        self.shared.feed.subscribe(from)
    }

    /// How many tasks have ended so far and how the last one did: what a subscriber that lagged
    /// ([`Item::Lagged`](crate::Item::Lagged)) while a task ended reads instead of its item.
    pub fn last_task(&self) -> Option<(u64, crate::TaskOutcome)> {
        self.shared.feed.last_task()
    }

    /// Its items from now on (no earlier line).
    pub fn subscribe_live(&self) -> Subscription {
        self.shared.feed.subscribe(u64::MAX)
    }

    /// Attaches a push-style answerer named `name`: while the returned [`Client`] lives,
    /// questions for people wait for it too (the first valid answer wins).
    pub fn attach(&self, name: &str) -> Client {
        self.shared.pipeline.broker().attach(name)
    }

    /// The questions asked and resolved, as the broker tells them (for a client that shows them
    /// with the answers they take).
    pub fn questions(&self) -> tokio::sync::broadcast::Receiver<chock_decide::Notice> {
        self.shared.pipeline.broker().subscribe()
    }

    /// The session's decision pipeline: for a client that settles an act of its own in the
    /// session's name (it is decided, asked and logged as the session's own acts are).
    pub fn pipeline(&self) -> &Pipeline {
        &self.shared.pipeline
    }

    /// Acts on the session: the only way to. A task or follow-up is taken at once (its end comes
    /// to subscribers); an interrupt, an answer, a narrowing, an apply, an undo and a fork are
    /// answered even while a task runs; the end waits for the running task, interrupted first.
    pub async fn send(&self, op: Op) -> Result<Reply, OpError> {
        let shared = &self.shared;
        if self.state() == SessionState::Ended && !matches!(op, Op::Fork { .. }) {
            return Err(self.ended());
        }
        match op {
            Op::UserInput { text } => {
                shared.feed.start_working().map_err(|state| match state {
                    SessionState::Working => OpError::Busy {
                        session: shared.id.clone(),
                    },
                    _ => self.ended(),
                })?;
                shared
                    .commands
                    .send(Command::Input(text))
                    .map_err(|_| self.ended())?;
                Ok(Reply::Accepted)
            }
            Op::Interrupt => {
                shared.interrupter.interrupt();
                Ok(Reply::Interrupted)
            }
            Op::Answer {
                question,
                answer,
                reasons,
                reply,
            } => {
                let answer = Answer::from_kind(answer, reasons, reply)?;
                shared
                    .pipeline
                    .broker()
                    .answer(&question, &self.by, answer)?;
                Ok(Reply::Answered)
            }
            Op::Restrict { pattern, decision } => {
                let decision = chock_decide::policy_decision(decision);
                shared
                    .pipeline
                    .restrict(&pattern, decision)
                    .map_err(|source| OpError::Restrict { pattern, source })?;
                Ok(Reply::Restricted)
            }
            Op::Apply { selection, digest } => review::apply_as(
                &shared.pipeline,
                &shared.log,
                shared.dir.clone(),
                selection,
                digest,
                self.confirm,
            )
            .await
            .map(Reply::Applied)
            .map_err(OpError::Review),
            Op::Undo { apply_id } => {
                let root = shared.dir.parent().unwrap_or(&shared.dir).to_path_buf();
                review::undo(&shared.pipeline, &shared.log, root, apply_id)
                    .await
                    .map(Reply::Applied)
                    .map_err(OpError::Review)
            }
            Op::Fork { turn } => review::fork(shared.dir.clone(), turn)
                .await
                .map(Reply::Forked)
                .map_err(OpError::Review),
            Op::End => {
                if self.state() == SessionState::Working {
                    shared.interrupter.interrupt();
                }
                let (tx, rx) = oneshot::channel();
                shared
                    .commands
                    .send(Command::End(tx))
                    .map_err(|_| self.ended())?;
                match rx.await {
                    Ok(Ok(summary)) => Ok(Reply::Ended(summary)),
                    Ok(Err(reason)) => Err(OpError::Ending {
                        session: shared.id.clone(),
                        reason,
                    }),
                    Err(_) => Err(self.ended()),
                }
            }
        }
    }

    fn ended(&self) -> OpError {
        OpError::Ended {
            session: self.shared.id.clone(),
        }
    }

    /// Waits until the session has ended (by any way: an end, an error, an abandon).
    pub async fn closed(&self) {
        let actor = self
            .shared
            .actor
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        match actor {
            Some(actor) => {
                let _ = actor.await;
            }
            None => {
                let mut sub = self.subscribe_live();
                while sub.next().await.is_some() {}
            }
        }
    }

    /// Lets go of the session for another process to take it up (`chock detach`; the daemon's
    /// `sessions.adopt` asks for it). The runtime decides how, by the state the session is in:
    /// an idle one (no task running: between tasks, waiting for a follow-up) is let go at once,
    /// nothing run; a working one stops at the task's next turn boundary, or at once while a
    /// question waits for an answer (the question stays open in the log, for the new owner's
    /// clients). No `session.end` is written; subscribers get [`TaskOutcome::HandedOver`] and the
    /// end of the stream. A task that ends some other way before its boundary is not handed over
    /// ([`HandoverOutcome::TaskEndedFirst`]: the session is then idle here, for the caller to
    /// end, or to hand over idle by asking again).
    pub async fn hand_over(&self) -> HandoverOutcome {
        match self.shared.feed.hold_for_handover() {
            Ok(()) => return self.let_go_idle().await,
            Err(SessionState::Working) => {}
            Err(_) => return HandoverOutcome::Ended,
        }
        let mut items = self.subscribe_live();
        let mut notices = self.questions();
        self.shared.handover.request();
        // Only a person's question holds the session where it is: a reviewer answers soon.
        let person = |q: &chock_protocol::view::OpenQuestion| {
            q.ask.asked == chock_protocol::log::Asked::Person
        };
        if self.snapshot().view.questions.iter().any(person) {
            self.let_go();
            return HandoverOutcome::QuestionOpen;
        }
        loop {
            tokio::select! {
                item = items.next() => match item {
                    Some(crate::Item::TaskEnded(TaskOutcome::HandedOver)) => {
                        return HandoverOutcome::AtTurnBoundary;
                    }
                    Some(crate::Item::TaskEnded(TaskOutcome::Ended(_))) => {
                        // Not reached: the next task must not stop on it.
                        self.shared.handover.withdraw();
                        return HandoverOutcome::TaskEndedFirst;
                    }
                    Some(crate::Item::TaskEnded(TaskOutcome::Failed(_))) | None => {
                        return HandoverOutcome::Ended;
                    }
                    Some(_) => {}
                },
                notice = notices.recv() => match notice {
                    Ok(chock_decide::Notice::Asked { role: chock_decide::Role::Human, .. }) => {
                        self.let_go();
                        return HandoverOutcome::QuestionOpen;
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => {}
                    Ok(_) | Err(_) => {}
                },
            }
        }
    }

    /// Lets go of the idle session, held for it ([`Feed::hold_for_handover`]: no task starts
    /// meanwhile): the loop, waiting for input, lets go where it stands.
    async fn let_go_idle(&self) -> HandoverOutcome {
        let (tx, rx) = oneshot::channel();
        if self.shared.commands.send(Command::HandOver(tx)).is_err() {
            return HandoverOutcome::Ended;
        }
        match rx.await {
            Ok(()) => HandoverOutcome::Idle,
            // An end sent before the handover was taken first: the loop ended the session.
            Err(_) => HandoverOutcome::Ended,
        }
    }

    /// Lets go of the session where it stands, a question open: the question stays open, the
    /// loop is stopped without writing an end.
    fn let_go(&self) {
        self.shared.pipeline.broker().keep_questions_open();
        self.shared.handover.release();
        let actor = self
            .shared
            .actor
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(actor) = actor {
            actor.abort();
        }
        let _ = self.shared.log.sync();
        self.shared.feed.task_ended(TaskOutcome::HandedOver);
        self.shared.feed.ended();
    }

    /// Stops the session where it is without answering anything (a stopping daemon): its open
    /// questions stay open in the log for whoever resumes it, and dropping the runtime writes
    /// `session.end` as interrupted.
    pub async fn abandon(&self) {
        self.shared.pipeline.broker().keep_questions_open();
        let actor = self
            .shared
            .actor
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(actor) = actor {
            actor.abort();
            let _ = actor.await;
        }
        self.shared.feed.ended();
        let _ = self.shared.log.sync();
    }
}
