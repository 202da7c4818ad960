//! A session the daemon owns: its runtime in a task of its own (the actor), taking inputs and the
//! end one at a time; the fanout of its events; its decision pipeline, to which the daemon stays
//! attached so a question waits for a client's answer however long it takes.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use chock_agent::events::{AgentEvent, EventSink};
use chock_agent::runtime::{Interrupter, SessionRuntime};
use chock_decide::{Client, Notice as BrokerNotice, Pipeline, Role};
use chock_log::Log;
use chock_protocol::log::Asked;
use chock_protocol::rpc::{
    Approval, ErrorKind, Notice, Resolved, RpcError, SessionState, StateChange,
};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::fanout::{Fanout, FanoutSink};
use crate::hub::Hub;
use crate::pending::pending_in;

/// The sink a session is built with, before its id (and so its fanout) exists.
#[derive(Default)]
pub(crate) struct LateSink {
    fanout: OnceLock<FanoutSink>,
}

impl LateSink {
    pub(crate) fn set(&self, fanout: Arc<Fanout>) {
        let _ = self.fanout.set(FanoutSink(fanout));
    }
}

impl EventSink for LateSink {
    fn emit(&self, event: &AgentEvent) {
        if let Some(sink) = self.fanout.get() {
            sink.emit(event);
        }
    }
}

enum Cmd {
    Input(String),
    End(oneshot::Sender<Result<(), RpcError>>),
}

/// One owned session.
pub(crate) struct OwnedSession {
    pub(crate) id: String,
    pub(crate) dir: PathBuf,
    pub(crate) fanout: Arc<Fanout>,
    /// Its pipeline and log while it runs: let go when it ends, so the log's writer lock goes
    /// with the runtime's (an apply after the end opens the log itself).
    acts: Mutex<Option<(Pipeline, Log)>>,
    /// Its broker (answers by question id go here).
    pub(crate) broker: chock_decide::ApprovalBroker,
    interrupter: Interrupter,
    state: Mutex<SessionState>,
    cmds: mpsc::Sender<Cmd>,
    actor: Mutex<Option<JoinHandle<()>>>,
    forwarder: Mutex<Option<JoinHandle<()>>>,
    /// The daemon's own attachment: while it lives, questions to people wait for a push answer.
    attached: Mutex<Option<Client>>,
    hub: Arc<Hub>,
    /// The task it was started with, until [`OwnedSession::begin`].
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

impl OwnedSession {
    /// Takes `runtime` over: attaches to its questions, forwards them to every client, and starts
    /// its actor working on `task`.
    pub(crate) fn start(
        runtime: SessionRuntime,
        sink: &LateSink,
        hub: Arc<Hub>,
        task: String,
    ) -> Arc<OwnedSession> {
        let id = runtime.id().to_string();
        let dir = runtime.log().dir().to_path_buf();
        let fanout = Arc::new(Fanout::new(&id, &dir));
        sink.set(Arc::clone(&fanout));
        let pipeline = runtime.pipeline();
        let broker = pipeline.broker().clone();
        let attached = runtime.attach("daemon");
        let (cmds, rx) = mpsc::channel(4);
        let session = Arc::new(OwnedSession {
            id,
            dir,
            fanout,
            acts: Mutex::new(Some((pipeline.clone(), runtime.log().clone()))),
            broker,
            interrupter: runtime.interrupter(),
            state: Mutex::new(SessionState::Working),
            cmds,
            actor: Mutex::new(None),
            forwarder: Mutex::new(None),
            attached: Mutex::new(Some(attached)),
            hub,
            pending_task: Mutex::new(None),
        });
        *lock(&session.forwarder) = Some(forward_questions(
            Arc::clone(&session.hub),
            session.id.clone(),
            session.dir.clone(),
            &pipeline,
        ));
        *lock(&session.actor) = Some(tokio::spawn(actor(runtime, rx, Arc::clone(&session))));
        *lock(&session.pending_task) = Some(task);
        session
    }

    /// Starts working on the task it was started with (after any first subscriber joined).
    pub(crate) fn begin(&self) {
        if let Some(task) = lock(&self.pending_task).take() {
            let _ = self.cmds.try_send(Cmd::Input(task));
            self.announce(SessionState::Working);
        }
    }

    /// Its pipeline and log, while it runs.
    pub(crate) fn acts(&self) -> Option<(Pipeline, Log)> {
        lock(&self.acts).clone()
    }

    /// Where it is now.
    pub(crate) fn state(&self) -> SessionState {
        *lock(&self.state)
    }

    fn set_state(&self, state: SessionState) {
        *lock(&self.state) = state;
        self.fanout.pump();
        self.announce(state);
    }

    fn announce(&self, state: SessionState) {
        self.hub.broadcast(&Notice::SessionState(StateChange {
            session: self.id.clone(),
            state,
        }));
    }

    /// A follow-up: refused while a task runs or once the session ended.
    pub(crate) fn input(&self, text: String) -> Result<(), RpcError> {
        {
            let mut state = lock(&self.state);
            match *state {
                SessionState::Idle => *state = SessionState::Working,
                SessionState::Working => {
                    return Err(RpcError::new(
                        ErrorKind::Busy,
                        format!(
                            "session {} is working on a task: interrupt it or wait until it is idle",
                            self.id
                        ),
                    ));
                }
                _ => return Err(self.not_running()),
            }
        }
        self.announce(SessionState::Working);
        self.cmds
            .try_send(Cmd::Input(text))
            .map_err(|_| self.not_running())
    }

    /// Interrupts the current turn.
    pub(crate) fn interrupt(&self) {
        self.interrupter.interrupt();
    }

    /// Ends the session (interrupting its task first).
    pub(crate) async fn end(&self) -> Result<(), RpcError> {
        if self.state() == SessionState::Ended {
            return Err(self.not_running());
        }
        if self.state() == SessionState::Working {
            self.interrupt();
        }
        let (tx, rx) = oneshot::channel();
        self.cmds
            .send(Cmd::End(tx))
            .await
            .map_err(|_| self.not_running())?;
        rx.await.map_err(|_| self.not_running())?
    }

    fn not_running(&self) -> RpcError {
        RpcError::new(
            ErrorKind::NotRunning,
            format!("session {} has ended", self.id),
        )
    }

    /// Whether a question of this session waits for an answer now.
    pub(crate) fn waits_for_answer(&self) -> bool {
        !pending_in(&self.id, &self.dir, true).is_empty()
    }

    /// Stops the actor where it is, without answering anything: a question it waits on stays
    /// unanswered in the log (dropping the runtime writes `session.end`, interrupted).
    ///
    /// A command's question is asked from the blocking thread that runs the call, which no abort
    /// reaches; it gives up (and logs "nobody answered") the moment no client is attached. So the
    /// daemon's attachment is never let go: it is kept until the process ends, and the question
    /// stays open in the log for whoever resumes the session. A question whose waiter the abort
    /// drops (the actor's own, a review's) is kept open too, by the broker's
    /// [`chock_decide::ApprovalBroker::keep_questions_open`].
    pub(crate) async fn abandon(&self) {
        self.broker.keep_questions_open();
        let actor = lock(&self.actor).take();
        if let Some(actor) = actor {
            actor.abort();
            let _ = actor.await;
        }
        if let Some(forwarder) = lock(&self.forwarder).take() {
            forwarder.abort();
        }
        if let Some(attached) = lock(&self.attached).take() {
            std::mem::forget(attached);
        }
        *lock(&self.state) = SessionState::Ended;
        if let Some((_, log)) = lock(&self.acts).take() {
            let _ = log.sync();
        }
    }
}

async fn actor(mut runtime: SessionRuntime, mut rx: mpsc::Receiver<Cmd>, me: Arc<OwnedSession>) {
    while let Some(cmd) = rx.recv().await {
        match cmd {
            Cmd::Input(text) => match runtime.submit(&text).await {
                Ok(_) => {
                    me.set_state(SessionState::Idle);
                }
                Err(_) => {
                    // The runtime wrote `session.end` (error) itself.
                    me.finish();
                    return;
                }
            },
            Cmd::End(reply) => {
                let outcome = runtime.close().await.map(|_| ()).map_err(|e| {
                    RpcError::new(ErrorKind::Internal, format!("ending the session: {e}"))
                });
                me.finish();
                let _ = reply.send(outcome);
                return;
            }
        }
    }
}

impl OwnedSession {
    fn finish(&self) {
        if let Some(forwarder) = lock(&self.forwarder).take() {
            forwarder.abort();
        }
        lock(&self.attached).take();
        lock(&self.acts).take();
        self.set_state(SessionState::Ended);
    }
}

/// Forwards the questions of `pipeline`'s broker to every client: `approval.asked` (as the log
/// wrote the ask, with the answers it takes) and `approval.resolved` (naming who answered).
pub(crate) fn forward_questions(
    hub: Arc<Hub>,
    session: String,
    dir: PathBuf,
    pipeline: &Pipeline,
) -> JoinHandle<()> {
    let mut notices = pipeline.broker().subscribe();
    tokio::spawn(async move {
        loop {
            let notice = match notices.recv().await {
                Ok(notice) => notice,
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            };
            match notice {
                BrokerNotice::Asked { question, role } => {
                    let logged = pending_in(&session, &dir, true)
                        .into_iter()
                        .find(|a| a.question == question.id);
                    let asked = match role {
                        Role::Human => Asked::Person,
                        Role::Reviewer => Asked::Reviewer,
                    };
                    let approval = logged.unwrap_or_else(|| Approval {
                        session: session.clone(),
                        question: question.id.clone(),
                        // Not in the log yet: the ask is written before the question opens, so
                        // this is only a reader that lost the race to the file.
                        seq: 0,
                        call_id: question.call_id.clone(),
                        action: question.action.clone(),
                        decision: None,
                        decided_by: question.decided_by.clone(),
                        what: question.text.clone(),
                        asked,
                        answers: match role {
                            Role::Human => question.answers(),
                            Role::Reviewer => Vec::new(),
                        },
                        answerable: role == Role::Human,
                    });
                    hub.broadcast(&Notice::ApprovalAsked(approval));
                }
                BrokerNotice::Resolved(resolution) => {
                    hub.broadcast(&Notice::ApprovalResolved(Resolved {
                        session: session.clone(),
                        question: resolution.question,
                        by: resolution.by,
                        answer: resolution.answer,
                    }));
                }
            }
        }
    })
}
