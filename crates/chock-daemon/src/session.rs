//! A session the daemon owns: a client of its [`SessionHandle`], like every other front end.
//!
//! The daemon turns requests into the handle's operations ([`Op`]) and the handle's items into
//! notifications. It keeps no task loop, command channel or state of its own: the session's actor
//! (in chock-runtime) runs the tasks, and the handle says where the session stands.
//!
//! Per session the daemon runs two small tasks, both waiting on channels (nothing is polled, and
//! nothing runs while the session is idle):
//! - the relay: one subscription of the handle, from seq 0, whose items go to the session's
//!   [`Fanout`] (log lines and live items, to the clients subscribed to it) and whose state
//!   changes go to every client, after the lines written before them;
//! - the question forwarder: the broker's notices ([`SessionHandle::questions`]) as
//!   `approval.asked` (the ask as the log wrote it, from the handle's folded view: the ask is
//!   logged before the question opens) and `approval.resolved`.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use chock_decide::{Client, Notice as BrokerNotice, Question, Role};
use chock_protocol::log::{AnswerKind, Asked, answers_for};
use chock_protocol::rpc::{
    Applied, Approval, ErrorKind, Notice, Resolved, RpcError, SessionState, StateChange,
};
use chock_protocol::view::OpenQuestion;
use chock_runtime::{Item, Op, OpError, Reply, SessionHandle, Subscription, TaskOutcome};
use tokio::sync::broadcast;

use crate::fanout::Fanout;
use crate::hub::Hub;

/// What the daemon knows of a session's questions beyond its log.
#[derive(Debug, Default)]
struct Questions {
    /// The ones its broker has open now (from the broker's notices).
    open: HashSet<String>,
    /// The seq of the last line written before the daemon took the session up: a question
    /// asked up to there was asked by an earlier run, and nobody here will take its answer.
    since: Option<u64>,
}

/// One owned session.
pub(crate) struct OwnedSession {
    pub(crate) id: String,
    pub(crate) fanout: Arc<Fanout>,
    /// Its handle while it runs: let go when it ends, so the log's writer lock goes with the
    /// session (an apply after the end opens the log itself).
    handle: Mutex<Option<SessionHandle>>,
    questions: Mutex<Questions>,
    /// The daemon's own attachment: while it lives, questions to people wait for a push answer.
    attached: Mutex<Option<Client>>,
    /// The task it was started with, until [`OwnedSession::begin`] (none for a session taken
    /// over from another process, which goes on with its own).
    pending_task: Mutex<Option<String>>,
}

impl std::fmt::Debug for OwnedSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnedSession")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// An operation's refusal as the protocol's typed error: an answer that does not fit is
/// `answer_refused`, as the daemon has always said.
pub(crate) fn op_error(e: &OpError) -> RpcError {
    match e {
        OpError::Answer(_) => RpcError::new(ErrorKind::AnswerRefused, e.to_string()),
        other => other.to_rpc(),
    }
}

impl OwnedSession {
    /// Takes `handle` over: attaches to its questions, starts its relay and its question
    /// forwarder, and keeps `task` for [`OwnedSession::begin`].
    pub(crate) fn start(
        handle: SessionHandle,
        hub: &Arc<Hub>,
        task: Option<String>,
    ) -> Arc<OwnedSession> {
        let id = handle.id().to_string();
        let fanout = Arc::new(Fanout::new(&id));
        // Both taken before anything is sent to the session: nothing it does is missed.
        let items = handle.subscribe(0);
        let notices = handle.questions();
        let session = Arc::new(OwnedSession {
            id,
            fanout,
            attached: Mutex::new(Some(handle.attach("daemon"))),
            questions: Mutex::new(Questions {
                open: HashSet::new(),
                since: handle.snapshot().head,
            }),
            handle: Mutex::new(Some(handle)),
            pending_task: Mutex::new(task),
        });
        tokio::spawn(relay(Arc::downgrade(&session), items, Arc::clone(hub)));
        tokio::spawn(forward(
            Arc::downgrade(&session),
            notices,
            Arc::clone(hub),
            session.id.clone(),
        ));
        session
    }

    /// The handle, while the session runs.
    pub(crate) fn handle(&self) -> Option<SessionHandle> {
        lock(&self.handle).clone()
    }

    fn not_running(&self) -> RpcError {
        RpcError::new(
            ErrorKind::NotRunning,
            format!("session {} has ended", self.id),
        )
    }

    /// Sends `op` to the session.
    pub(crate) async fn send(&self, op: Op) -> Result<Reply, RpcError> {
        let handle = self.handle().ok_or_else(|| self.not_running())?;
        handle.send(op).await.map_err(|e| op_error(&e))
    }

    /// Sends `op` to the session in the name of `by` (an answer is logged naming who answered).
    pub(crate) async fn send_as(&self, by: &str, op: Op) -> Result<Reply, RpcError> {
        let handle = self.handle().ok_or_else(|| self.not_running())?;
        handle.named(by).send(op).await.map_err(|e| op_error(&e))
    }

    /// An apply or an undo through the session's own pipeline.
    pub(crate) async fn review(&self, op: Op) -> Result<Applied, RpcError> {
        match self.send(op).await? {
            Reply::Applied(applied) => Ok(applied),
            other => Err(RpcError::new(
                ErrorKind::Internal,
                format!("an apply was answered {other:?}"),
            )),
        }
    }

    /// Starts working on the task it was started with (after any first subscriber joined).
    pub(crate) async fn begin(&self) -> Result<(), RpcError> {
        let task = lock(&self.pending_task).take();
        if let Some(task) = task {
            self.send(Op::UserInput { text: task }).await?;
        }
        Ok(())
    }

    /// Where it is now.
    pub(crate) fn state(&self) -> SessionState {
        self.handle()
            .map_or(SessionState::Ended, |handle| handle.state())
    }

    /// Ends the session (its running task interrupted first), and lets it go.
    pub(crate) async fn end(&self) -> Result<(), RpcError> {
        let outcome = self.send(Op::End).await.map(|_| ());
        if outcome.is_ok() {
            self.finish();
        }
        outcome
    }

    /// Interrupts a task that is running and waits (up to `limit`) until it has stopped.
    pub(crate) async fn interrupt_and_wait(&self, limit: Duration) {
        let Some(handle) = self.handle() else { return };
        let mut items = handle.subscribe_live();
        if handle.state() != SessionState::Working {
            return;
        }
        let _ = handle.send(Op::Interrupt).await;
        let stopped = async {
            while let Some(item) = items.next().await {
                if matches!(item, Item::State(s) if s != SessionState::Working) {
                    return;
                }
            }
        };
        let _ = tokio::time::timeout(limit, stopped).await;
    }

    /// Whether a question asked in this run waits for an answer (open in the broker, or logged a
    /// moment before it opens).
    pub(crate) fn waits_for_answer(&self) -> bool {
        let Some(handle) = self.handle() else {
            return false;
        };
        let questions = lock(&self.questions);
        !questions.open.is_empty()
            || handle
                .snapshot()
                .view
                .questions
                .iter()
                .any(|q| questions.since.is_none_or(|since| q.seq > since))
    }

    /// The questions open in its log, as `approvals.pending` lists them: one its broker has open
    /// takes an answer; one an earlier run asked takes none; one logged a moment ago and not open
    /// yet is left out until it is (an answer to it now would find no question).
    pub(crate) fn pending(&self) -> Vec<Approval> {
        let Some(handle) = self.handle() else {
            return Vec::new();
        };
        let view = handle.snapshot().view;
        let questions = lock(&self.questions);
        view.questions
            .into_iter()
            .filter_map(|q| {
                let open = questions.open.contains(&q.question);
                let earlier = questions.since.is_some_and(|since| q.seq <= since);
                (open || earlier).then(|| approval(&self.id, q, open))
            })
            .collect()
    }

    /// Stops the session where it is, without answering anything: a question it waits on stays
    /// unanswered in the log ([`SessionHandle::abandon`]).
    ///
    /// A command's question is asked from the blocking thread that runs the call, which no abort
    /// reaches; it gives up (and logs "nobody answered") the moment no client is attached. So the
    /// daemon's attachment is never let go: it is kept until the process ends, and the question
    /// stays open in the log for whoever resumes the session.
    pub(crate) async fn abandon(&self) {
        // Before the session is told: its end lets the relay finish it, which drops whatever
        // attachment is left.
        if let Some(attached) = lock(&self.attached).take() {
            std::mem::forget(attached);
        }
        if let Some(handle) = self.handle() {
            handle.abandon().await;
        }
        self.finish();
    }

    /// The session has ended: its handle (and with it the log) and the attachment are let go.
    fn finish(&self) {
        self.fanout.ended();
        lock(&self.attached).take();
        lock(&self.handle).take();
    }
}

/// `question` of `session` as the protocol lists it; `open`: its broker takes an answer now.
pub(crate) fn approval(session: &str, question: OpenQuestion, open: bool) -> Approval {
    let ask = question.ask;
    let mut answers = answers_for(ask.asked, ask.action.as_deref());
    // A secret may also be refused, as its broker takes (`chock_decide::Question::answers`).
    if ask.secret && ask.asked == Asked::Person && !answers.contains(&AnswerKind::Deny) {
        answers.push(AnswerKind::Deny);
    }
    Approval {
        session: session.to_string(),
        question: question.question,
        seq: question.seq,
        call_id: question.call_id,
        answers,
        answerable: open && ask.asked == Asked::Person,
        action: ask.action,
        decision: ask.decision,
        decided_by: ask.decided_by,
        what: ask.what,
        asked: ask.asked,
        secret: ask.secret,
    }
}

/// The session's items to its fanout and its state changes to every client, in the order they
/// happened, until the session ends.
async fn relay(session: Weak<OwnedSession>, mut items: Subscription, hub: Arc<Hub>) {
    let Some((fanout, id)) = session
        .upgrade()
        .map(|s| (Arc::clone(&s.fanout), s.id.clone()))
    else {
        return;
    };
    // How the last task ended, carried on the state change that follows it.
    let mut task = None;
    while let Some(item) = items.next().await {
        match item {
            // The relay fell a whole queue behind (a burst while the daemon was starved): it
            // takes the lines up again from the file, from the first it missed. Live items and
            // state changes in between are lost; the state now is sent again.
            Item::Lagged { from_seq } => {
                let Some(handle) = session.upgrade().and_then(|s| s.handle()) else {
                    break;
                };
                items = handle.subscribe(from_seq);
                hub.broadcast(&Notice::SessionState(StateChange {
                    session: id.clone(),
                    state: handle.state(),
                    task: task.take(),
                }));
            }
            Item::Logged(line) => fanout.logged(line.seq, &line.line),
            Item::Live { after_seq, event } => fanout.live(after_seq, &event),
            Item::State(state) => hub.broadcast(&Notice::SessionState(StateChange {
                session: id.clone(),
                state,
                task: task.take(),
            })),
            Item::TaskEnded(outcome) => {
                task = Some(match outcome {
                    TaskOutcome::Ended(ended) => ended,
                    TaskOutcome::Failed(why) => chock_protocol::live::Ended::Error(why),
                    // Not this daemon's to tell: the session goes on in another process.
                    TaskOutcome::HandedOver => chock_protocol::live::Ended::Open,
                });
            }
        }
    }
    // The session ended (its last state was sent): let it go.
    if let Some(session) = session.upgrade() {
        session.finish();
    }
}

/// Where a question forwarder finds a question's ask as the log wrote it, and keeps which
/// questions the broker has open.
pub(crate) trait Asks: Send + Sync + 'static {
    /// Question `id`'s ask as logged, folded from the lines as they were written.
    fn logged(&self, id: &str) -> Option<OpenQuestion>;
    /// The broker opened (`true`) or resolved (`false`) question `id`.
    fn mark(&self, id: &str, open: bool);
}

impl Asks for Weak<OwnedSession> {
    fn logged(&self, id: &str) -> Option<OpenQuestion> {
        let view = self.upgrade()?.handle()?.snapshot().view;
        view.questions.into_iter().find(|q| q.question == id)
    }

    fn mark(&self, id: &str, open: bool) {
        if let Some(session) = self.upgrade() {
            let mut questions = lock(&session.questions);
            if open {
                questions.open.insert(id.to_string());
            } else {
                questions.open.remove(id);
            }
        }
    }
}

/// The broker's notices of session `id` to every client — `approval.asked` (the ask as logged,
/// with the answers it takes) and `approval.resolved` (naming who answered) — until its broker is
/// gone.
pub(crate) async fn forward(
    asks: impl Asks,
    mut notices: broadcast::Receiver<BrokerNotice>,
    hub: Arc<Hub>,
    id: String,
) {
    loop {
        let notice = match notices.recv().await {
            Ok(notice) => notice,
            Err(broadcast::error::RecvError::Lagged(_)) => continue,
            Err(broadcast::error::RecvError::Closed) => return,
        };
        match notice {
            BrokerNotice::Asked { question, role } => {
                asks.mark(&question.id, true);
                let approval = match asks.logged(&question.id) {
                    Some(q) => approval(&id, q, true),
                    None => unlogged(&id, &question, role),
                };
                hub.broadcast(&Notice::ApprovalAsked(approval));
            }
            BrokerNotice::Resolved(resolution) => {
                asks.mark(&resolution.question, false);
                hub.broadcast(&Notice::ApprovalResolved(Resolved {
                    session: id.clone(),
                    question: resolution.question,
                    by: resolution.by,
                    answer: resolution.answer,
                }));
            }
        }
    }
}

/// A question as its broker tells it, for when the folded log cannot be looked at (the session
/// was let go in between: it ended). The ask is always logged before the question opens.
pub(crate) fn unlogged(session: &str, question: &Question, role: Role) -> Approval {
    Approval {
        session: session.to_string(),
        question: question.id.clone(),
        seq: 0,
        call_id: question.call_id.clone(),
        action: question.action.clone(),
        decision: None,
        decided_by: question.decided_by.clone(),
        what: question.text.clone(),
        asked: match role {
            Role::Human => Asked::Person,
            Role::Reviewer => Asked::Reviewer,
        },
        answers: match role {
            Role::Human => question.answers(),
            Role::Reviewer => Vec::new(),
        },
        answerable: role == Role::Human,
        secret: question.secret,
    }
}
