//! The daemon: the sessions it owns, every client connected, and what each method does.

mod adopt;
mod workspace_acts;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chock_agent::runtime::SessionBuilder;
use chock_config::config::Config;
use chock_decide::{Answer, ApprovalBroker};
use chock_log::Liveness;
use chock_protocol::rpc::{
    AnswerParams, Approval, Call, DropReason, ErrorKind, Pending, RpcError, SessionInfo,
    SessionList, SessionState, Started,
};
use chock_runtime::{Op, Opening, SessionHandle, StartError};
use serde_json::Value;

use crate::hub::{Conn, DEFAULT_QUEUE, Hub};
use crate::paths::Owned;
use crate::pending::pending_in;
use crate::session::OwnedSession;

/// How a daemon is set up.
#[derive(Debug, Clone)]
pub struct DaemonOptions {
    /// Where session directories live.
    pub sessions_root: PathBuf,
    /// `$XDG_STATE_HOME/chock`: the record of owned sessions lives below it.
    pub state_dir: PathBuf,
    /// config.toml, when not the user's (tests).
    pub config: Option<PathBuf>,
    /// How many frames each client's queue holds.
    pub queue: usize,
    /// At most this many turns per task.
    pub max_turns: u32,
}

impl DaemonOptions {
    /// The user's directories, from the environment.
    pub fn from_env() -> Result<DaemonOptions, crate::DaemonError> {
        Ok(DaemonOptions {
            sessions_root: chock_dirs::sessions_root()?,
            state_dir: chock_dirs::state_root()?,
            config: None,
            queue: DEFAULT_QUEUE,
            max_turns: 50,
        })
    }
}

/// Who sent a request: how its answers are named, and its queue when it has one (a WebSocket).
#[derive(Debug, Clone)]
pub(crate) struct Caller {
    pub(crate) name: String,
    pub(crate) conn: Option<Conn>,
}

/// The daemon.
#[derive(Debug)]
pub struct Daemon {
    opts: DaemonOptions,
    owned: Owned,
    sessions: Mutex<HashMap<String, Arc<OwnedSession>>>,
    /// Brokers of reviews of sessions that do not run here, while their question is open.
    reviews: Mutex<HashMap<String, ApprovalBroker>>,
    pub(crate) hub: Arc<Hub>,
    /// Set when the daemon stops: a wait under way (an adopt's for the old owner's lock) gives up.
    stopping: tokio::sync::watch::Sender<bool>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn internal(e: impl std::fmt::Display) -> RpcError {
    RpcError::new(ErrorKind::Internal, e.to_string())
}

impl Daemon {
    /// A daemon with nothing running yet.
    pub fn new(opts: DaemonOptions) -> Arc<Daemon> {
        Arc::new(Daemon {
            owned: Owned::new(&opts.state_dir),
            opts,
            sessions: Mutex::default(),
            reviews: Mutex::default(),
            hub: Arc::new(Hub::default()),
            stopping: tokio::sync::watch::Sender::new(false),
        })
    }

    /// The options it runs with.
    pub fn options(&self) -> &DaemonOptions {
        &self.opts
    }

    /// The sessions running in it now.
    pub fn running(&self) -> Vec<String> {
        lock(&self.sessions)
            .values()
            .filter(|s| s.state() != SessionState::Ended)
            .map(|s| s.id.clone())
            .collect()
    }

    fn owned_session(&self, id: &str) -> Option<Arc<OwnedSession>> {
        lock(&self.sessions)
            .get(id)
            .filter(|s| s.state() != SessionState::Ended)
            .cloned()
    }

    /// The id and directory of the session `query` names (an id or a unique prefix).
    fn resolve(&self, query: &str) -> Result<(String, PathBuf), RpcError> {
        let dir = chock_log::find_session(&self.opts.sessions_root, query)
            .map_err(|e| RpcError::new(ErrorKind::UnknownSession, e.to_string()))?;
        let id = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        Ok((id, dir))
    }

    fn running_or_refuse(&self, query: &str) -> Result<Arc<OwnedSession>, RpcError> {
        let (id, _) = self.resolve(query)?;
        self.owned_session(&id).ok_or_else(|| {
            RpcError::new(
                ErrorKind::NotRunning,
                format!(
                    "session {id} does not run in this daemon (it ended, or stopped with the \
                     daemon that ran it, or another process runs it); `sessions.resume` or \
                     `chock run --resume {id}` goes on with it"
                ),
            )
        })
    }

    /// Carries out one call (all but `sessions.subscribe`, which [`crate::conn`] runs).
    pub(crate) async fn call(
        self: &Arc<Self>,
        call: Call,
        caller: &Caller,
    ) -> Result<Value, RpcError> {
        fn out(v: impl serde::Serialize) -> Result<Value, RpcError> {
            serde_json::to_value(v).map_err(internal)
        }
        match call {
            Call::SessionsList(_) => out(self.list()?),
            Call::SessionsStart(p) => out(self.start(p, caller).await?),
            Call::SessionsSubscribe(_) => Err(RpcError::new(
                ErrorKind::InvalidRequest,
                "sessions.subscribe needs a WebSocket (/ws): its events come as notifications",
            )),
            Call::SessionsUnsubscribe(p) => {
                let (id, _) = self.resolve(&p.session)?;
                if let (Some(s), Some(conn)) = (lock(&self.sessions).get(&id), &caller.conn) {
                    s.fanout.leave(conn.id);
                }
                out(chock_protocol::rpc::Done {})
            }
            Call::SessionsInput(p) => {
                self.running_or_refuse(&p.session)?
                    .send(Op::UserInput { text: p.text })
                    .await?;
                out(chock_protocol::rpc::Done {})
            }
            Call::SessionsInterrupt(p) => {
                self.running_or_refuse(&p.session)?
                    .send(Op::Interrupt)
                    .await?;
                out(chock_protocol::rpc::Done {})
            }
            Call::SessionsEnd(p) => {
                self.running_or_refuse(&p.session)?.end().await?;
                out(chock_protocol::rpc::Done {})
            }
            Call::ApprovalsPending(p) => out(self.pending(p.session.as_deref())?),
            Call::ApprovalsAnswer(p) => {
                self.answer(p, &caller.name).await?;
                out(chock_protocol::rpc::Done {})
            }
            Call::ReviewDiff(p) => out(self.diff(&p.session, p.selection).await?),
            Call::ReviewApply(p) => out(self.apply(&p.session, p.selection, p.digest).await?),
            Call::ReviewUndo(p) => out(self.undo(&p.apply_id).await?),
            Call::LogVerify(p) => out(self.verify(&p.session).await?),
            Call::SessionsResume(p) => out(self.resume(p, caller).await?),
            Call::SessionsFork(p) => out(self.fork(&p.session, p.turn).await?),
            Call::SessionsAdopt(p) => out(self.adopt(p, caller).await?),
        }
    }

    fn list(&self) -> Result<SessionList, RpcError> {
        let owned: std::collections::HashSet<String> = self.owned.read().into_iter().collect();
        let listed = chock_log::list_sessions(&self.opts.sessions_root).map_err(internal)?;
        let sessions = listed
            .into_iter()
            .map(|s| {
                let id = s.id.to_string();
                let live = self.owned_session(&id);
                let view = &s.view;
                let mut info = SessionInfo {
                    session: id.clone(),
                    state: SessionState::Stopped,
                    owned: owned.contains(&id) || live.is_some(),
                    project: view.project().map(str::to_string),
                    provider: view.start.as_ref().and_then(|st| st.provider.clone()),
                    model: view.start.as_ref().and_then(|st| st.model.clone()),
                    title: view.title.clone(),
                    cost_usd: view.cost_usd(),
                    last_seq: view.last_seq,
                    last_kind: view.last_kind.map(|k| k.as_str().to_string()),
                    last_ts: view.last_ts.clone(),
                    pending: u32::try_from(view.questions.len()).unwrap_or(u32::MAX),
                };
                info.state = match (&live, view.ended(), s.liveness) {
                    (Some(live), _, _) => live.state(),
                    (None, true, _) => SessionState::Ended,
                    (None, false, Liveness::Live { .. }) => SessionState::Elsewhere,
                    (None, false, _) => SessionState::Stopped,
                };
                info
            })
            .collect();
        Ok(SessionList { sessions })
    }

    async fn start(
        self: &Arc<Self>,
        p: chock_protocol::rpc::StartParams,
        caller: &Caller,
    ) -> Result<Started, RpcError> {
        let task = p.task.trim().to_string();
        if task.is_empty() {
            return Err(RpcError::new(ErrorKind::BadInput, "the task is empty"));
        }
        let project = PathBuf::from(&p.project);
        if !project.is_absolute() {
            return Err(RpcError::new(
                ErrorKind::BadInput,
                format!("project `{}` is not an absolute path", p.project),
            ));
        }
        let builder = self
            .builder(p.provider, p.model, &task)?
            .project(Some(project));
        let handle = chock_runtime::start(builder, Opening::New, None)
            .await
            .map_err(|e| start_error(&e))?;
        self.take_up(handle, Some(task), p.subscribe, caller).await
    }

    /// `sessions.resume`: a session no process runs, taken up again on a follow-up.
    async fn resume(
        self: &Arc<Self>,
        p: chock_protocol::rpc::ResumeParams,
        caller: &Caller,
    ) -> Result<Started, RpcError> {
        let task = p.task.trim().to_string();
        if task.is_empty() {
            return Err(RpcError::new(ErrorKind::BadInput, "the task is empty"));
        }
        let (id, dir) = self.resolve(&p.session)?;
        if self.owned_session(&id).is_some() {
            return Err(RpcError::new(
                ErrorKind::Busy,
                format!("session {id} runs in this daemon: send `sessions.input` instead"),
            ));
        }
        let builder = self.builder(p.provider, p.model, &task)?;
        let handle = chock_runtime::start(builder, Opening::Resume(dir), None)
            .await
            .map_err(|e| {
                if e.is_busy() {
                    RpcError::new(
                        ErrorKind::Busy,
                        format!("session {id} is still written by another process: {e}"),
                    )
                } else {
                    start_error(&e)
                }
            })?;
        self.take_up(handle, Some(task), p.subscribe, caller).await
    }

    /// A session builder from config.toml (read again for each session) and the daemon's options.
    fn builder(
        &self,
        provider: Option<String>,
        model: Option<String>,
        task: &str,
    ) -> Result<SessionBuilder, RpcError> {
        let config = match &self.opts.config {
            Some(path) => Config::load_from(path),
            None => Config::load(),
        }
        .map_err(|e| RpcError::new(ErrorKind::BadInput, e.to_string()))?;
        Ok(SessionBuilder::new(config)
            .provider(provider)
            .model(model)
            .sessions_root(Some(self.opts.sessions_root.clone()))
            .max_turns(self.opts.max_turns)
            .reviewer_for(task))
    }

    /// Owns the session of `handle` from now on: registered, followed, its questions forwarded,
    /// `task` begun (after the caller subscribed, when it asked to; a session taken over from
    /// another process goes on with its own task, and has none).
    async fn take_up(
        self: &Arc<Self>,
        handle: SessionHandle,
        task: Option<String>,
        subscribe: bool,
        caller: &Caller,
    ) -> Result<Started, RpcError> {
        let started = Started {
            session: handle.id().to_string(),
            log_dir: handle.dir().display().to_string(),
            provider: handle.provider().to_string(),
            model: handle.model().to_string(),
        };
        if let Err(e) = self.owned.add(&started.session) {
            let _ = handle.send(Op::End).await;
            return Err(internal(e));
        }
        let session = OwnedSession::start(handle, &self.hub, task);
        lock(&self.sessions).insert(started.session.clone(), Arc::clone(&session));
        if subscribe && let Some(conn) = &caller.conn {
            // Subscribed from seq 0 before the task begins: the relay gives every line from
            // there, so nothing is read from the file for it.
            let _ = session.fanout.join(conn, 0, None);
        }
        session.begin().await?;
        Ok(started)
    }

    /// The open questions of `session`, or of every session this daemon owns.
    fn pending(&self, session: Option<&str>) -> Result<Pending, RpcError> {
        let ids: Vec<String> = match session {
            Some(query) => vec![self.resolve(query)?.0],
            None => {
                let mut ids = self.owned.read();
                ids.sort();
                ids.dedup();
                ids
            }
        };
        let mut approvals: Vec<Approval> = Vec::new();
        for id in ids {
            if let Some(session) = self.owned_session(&id) {
                // A session running here: from its handle's view, never its file.
                approvals.extend(session.pending());
                continue;
            }
            let dir = self.opts.sessions_root.join(&id);
            let live = lock(&self.reviews).contains_key(&id);
            approvals.extend(pending_in(&id, &dir, live));
        }
        Ok(Pending { approvals })
    }

    /// `approvals.answer`: to the session's handle when it runs here (logged naming `by`), else
    /// to the broker of a review of it that waits for an answer.
    async fn answer(&self, p: AnswerParams, by: &str) -> Result<(), RpcError> {
        let (id, _) = self.resolve(&p.session)?;
        if let Some(session) = self.owned_session(&id) {
            let op = Op::Answer {
                question: p.question,
                answer: p.answer,
                reasons: p.reasons,
                reply: p.reply,
            };
            return session.send_as(by, op).await.map(|_| ());
        }
        let broker = lock(&self.reviews).get(&id).cloned().ok_or_else(|| {
            RpcError::new(
                ErrorKind::NotRunning,
                format!(
                    "session {id} does not run in this daemon, so nobody waits for this answer; \
                     its question stays unanswered in the log"
                ),
            )
        })?;
        let answer = Answer::from_kind(p.answer, p.reasons, p.reply)
            .map_err(|e| RpcError::new(ErrorKind::AnswerRefused, e.to_string()))?;
        broker
            .answer(&p.question, by, answer)
            .map_err(|e| RpcError::new(ErrorKind::AnswerRefused, e.to_string()))
    }

    /// The session a subscription names — its id and directory — and, when this daemon owns it,
    /// the session itself, whose fanout the subscription joins; else (a session that does not
    /// run here) its log alone is sent.
    pub(crate) fn subscription(
        &self,
        session: &str,
    ) -> Result<(String, PathBuf, Option<Arc<OwnedSession>>), RpcError> {
        let (id, dir) = self.resolve(session)?;
        let owned = lock(&self.sessions).get(&id).cloned();
        Ok((id, dir, owned))
    }

    /// A client left: its subscriptions go.
    pub(crate) fn left(&self, conn: u64) {
        for session in lock(&self.sessions).values() {
            session.fanout.leave(conn);
        }
        self.hub.leave(conn);
    }

    /// Stops: every client is told and dropped; idle sessions end cleanly; a session that waits
    /// for an answer is left as it is (its question stays unanswered in the log, for no one answers
    /// on anyone's behalf); a session working otherwise is interrupted first.
    pub async fn stop(&self) {
        self.stopping.send_replace(true);
        self.hub.drop_all(DropReason::Stopping);
        let sessions: Vec<Arc<OwnedSession>> = lock(&self.sessions).values().cloned().collect();
        for session in &sessions {
            if session.state() == SessionState::Working && !session.waits_for_answer() {
                session.interrupt_and_wait(Duration::from_secs(2)).await;
            }
        }
        for session in &sessions {
            match session.state() {
                SessionState::Idle => {
                    let _ = tokio::time::timeout(Duration::from_secs(30), session.end()).await;
                }
                SessionState::Ended => {}
                _ => session.abandon().await,
            }
        }
        lock(&self.sessions).clear();
    }
}

/// A start's error as the protocol's: what the caller asked for that cannot be, or the machine.
fn start_error(e: &StartError) -> RpcError {
    let kind = if e.is_bad_input() {
        ErrorKind::BadInput
    } else {
        ErrorKind::Internal
    };
    RpcError::new(kind, e.to_string())
}
