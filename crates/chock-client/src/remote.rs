//! One session in the daemon, behind the session runtime's handle shape: send an [`Op`],
//! subscribe from a seq, take a snapshot — each mapped onto the daemon's methods.
//!
//! Every operation and every snapshot opens a connection of its own and closes it: the daemon
//! pushes every question and state change to every connection, and a connection held open but
//! unread would fill its bounded queue and be dropped. A subscription holds its connection for as
//! long as it is read.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

use chock_protocol::handle::{Item, Logged, Reply, Snapshot, TaskOutcome};
use chock_protocol::live::Summary;
use chock_protocol::ops::Op;
use chock_protocol::rpc::{
    AnswerParams, ApplyParams, Call, Done, ErrorKind, ForkParams, InputParams, LogEvent, NoParams,
    RpcError, SessionInfo, SessionList, SessionLive, SessionParams, SessionState, StartParams,
    Started, StateChange, SubscribeParams, Subscribed, UndoParams,
};
use chock_protocol::view::{At, SessionView};
use chock_protocol::{EventData, EventKind};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::connection::{ClientError, DaemonClient};

/// Where the daemon listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Its unix socket (this user's: [`Target::local`]).
    Unix(PathBuf),
    /// Its loopback HTTP port, with the bearer token from its runtime directory.
    Tcp {
        /// The address it serves.
        addr: SocketAddr,
        /// The token.
        token: String,
        /// The `Host` header (the daemon refuses any but its own address).
        host: String,
    },
}

impl Target {
    /// This user's daemon, at its socket ([`chock_dirs::socket_path`]).
    pub fn local() -> Result<Target, ClientError> {
        Ok(Target::Unix(chock_dirs::socket_path()?))
    }

    /// A new connection.
    pub async fn connect(&self) -> Result<DaemonClient, ClientError> {
        match self {
            Target::Unix(path) => DaemonClient::unix(path).await,
            Target::Tcp { addr, token, host } => DaemonClient::tcp(*addr, token, host, None).await,
        }
    }
}

/// A session the daemon runs. Cheap to clone; every clone acts on the same session.
#[derive(Debug, Clone)]
pub struct RemoteSession {
    target: Target,
    id: String,
}

impl RemoteSession {
    /// Starts a session in the daemon on `params.task` and subscribes to it from its first line,
    /// before it starts working (so no live item is missed). The daemon takes the first task with
    /// the start, so there is no idle session to send it to: the subscription sees it work.
    pub async fn start(
        target: Target,
        mut params: StartParams,
    ) -> Result<(RemoteSession, Started, RemoteSubscription), ClientError> {
        params.subscribe = true;
        let mut client = target.connect().await?;
        let started: Started = client.call(&Call::SessionsStart(params)).await?;
        let session = RemoteSession {
            target,
            id: started.session.clone(),
        };
        let subscription = RemoteSubscription::new(client, session.id.clone(), None);
        Ok((session, started, subscription))
    }

    /// The session `session` (its id, or a unique prefix of it) in the daemon at `target`.
    pub async fn attach(target: Target, session: &str) -> Result<RemoteSession, ClientError> {
        let mut client = target.connect().await?;
        let info = find(&mut client, session).await;
        client.close().await;
        Ok(RemoteSession {
            target,
            id: info?.session,
        })
    }

    /// The session's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Where its daemon listens.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// Acts on the session, as the in-process handle's `send` does: a task or follow-up is taken
    /// at once (`sessions.input`; refused `busy` while one runs), an interrupt, an answer, an
    /// apply, an undo and a fork are answered even while a task runs, and the end waits for
    /// `session.end` to be written. A narrowing has no method in the daemon's protocol and is
    /// refused ([`ClientError::Unsupported`]).
    pub async fn send(&self, op: Op) -> Result<Reply, ClientError> {
        if matches!(op, Op::Restrict { .. }) {
            return Err(ClientError::Unsupported {
                op: "restrict",
                why: "the daemon offers no method to narrow a running session's policy; narrow it in chock.toml, or at the terminal interface",
            });
        }
        let mut client = self.target.connect().await?;
        let reply = self.call(&mut client, op).await;
        client.close().await;
        let reply = reply?;
        if let Reply::Ended(_) = reply {
            let ended = self.snapshot().await?;
            let summary = ended
                .view
                .end
                .and_then(|end| end.summary)
                .unwrap_or_else(|| Summary {
                    session: self.id.clone(),
                    ..Summary::default()
                });
            return Ok(Reply::Ended(summary));
        }
        Ok(reply)
    }

    async fn call(&self, client: &mut DaemonClient, op: Op) -> Result<Reply, ClientError> {
        let session = self.id.clone();
        Ok(match op {
            Op::UserInput { text } => {
                let _: Done = client
                    .call(&Call::SessionsInput(InputParams { session, text }))
                    .await?;
                Reply::Accepted
            }
            Op::Interrupt => {
                let _: Done = client
                    .call(&Call::SessionsInterrupt(SessionParams { session }))
                    .await?;
                Reply::Interrupted
            }
            Op::Answer {
                question,
                answer,
                reasons,
                reply,
            } => {
                let _: Done = client
                    .call(&Call::ApprovalsAnswer(AnswerParams {
                        session,
                        question,
                        answer,
                        reasons,
                        reply,
                    }))
                    .await?;
                Reply::Answered
            }
            Op::Apply { selection, digest } => Reply::Applied(
                client
                    .call(&Call::ReviewApply(ApplyParams {
                        session,
                        digest,
                        selection,
                    }))
                    .await?,
            ),
            Op::Undo { apply_id } => Reply::Applied(
                client
                    .call(&Call::ReviewUndo(UndoParams { apply_id }))
                    .await?,
            ),
            Op::Fork { turn } => Reply::Forked(
                client
                    .call(&Call::SessionsFork(ForkParams { session, turn }))
                    .await?,
            ),
            Op::End => {
                let _: Done = client
                    .call(&Call::SessionsEnd(SessionParams { session }))
                    .await?;
                Reply::Ended(Summary::default())
            }
            Op::Restrict { .. } => unreachable!("refused before connecting"),
        })
    }

    /// Its items from log seq `from` on: the lines already written, then everything as it
    /// happens, in order (`sessions.subscribe`). A session that no longer runs gives its lines
    /// and ends.
    pub async fn subscribe(&self, from: u64) -> Result<RemoteSubscription, ClientError> {
        let mut client = self.target.connect().await?;
        let info = find(&mut client, &self.id).await?;
        let subscribed: Subscribed = client
            .call(&Call::SessionsSubscribe(SubscribeParams {
                session: self.id.clone(),
                from_seq: Some(from),
            }))
            .await?;
        // A session nobody writes any more sends no state change: its stream ends at its head.
        let last = matches!(info.state, SessionState::Ended | SessionState::Stopped)
            .then_some(subscribed.head_seq);
        let mut subscription = RemoteSubscription::new(client, self.id.clone(), last);
        // Nothing at or after `from` will come.
        subscription.reader.done = last.is_some_and(|head| from > head);
        Ok(subscription)
    }

    /// The session as it stands: its state as the daemon lists it, and its log folded through
    /// the one fold every front end uses ([`SessionView`]), read from the daemon up to its head.
    pub async fn snapshot(&self) -> Result<Snapshot, ClientError> {
        let mut client = self.target.connect().await?;
        let snapshot = self.read_snapshot(&mut client).await;
        client.close().await;
        snapshot
    }

    async fn read_snapshot(&self, client: &mut DaemonClient) -> Result<Snapshot, ClientError> {
        let info = find(client, &self.id).await?;
        let subscribed: Subscribed = client
            .call(&Call::SessionsSubscribe(SubscribeParams {
                session: self.id.clone(),
                from_seq: Some(0),
            }))
            .await?;
        let mut reader = Reader::new(self.id.clone(), Some(subscribed.head_seq));
        let mut view = SessionView::default();
        let mut head = None;
        while let Some(item) = reader.next(client).await? {
            if let Item::Logged(logged) = item {
                fold(&mut view, &logged.line);
                head = Some(logged.seq);
            }
        }
        Ok(Snapshot {
            view,
            state: info.state,
            head,
        })
    }
}

/// Folds one log line into `view` as the runtime's feed does: a line that is not an event of a
/// known kind is not folded.
fn fold(view: &mut SessionView, line: &str) {
    let Ok(event) = serde_json::from_str::<LogEvent>(line) else {
        return;
    };
    let Ok(kind) = EventKind::from_str(&event.kind) else {
        return;
    };
    let data = EventData::parse(kind, &event.data).ok();
    view.apply(
        At {
            seq: event.seq,
            ts: &event.ts,
            kind,
            call_id: event.call_id.as_deref(),
        },
        data.as_ref(),
    );
}

/// The session `session` names (its id or a unique prefix), as `sessions.list` shows it.
async fn find(client: &mut DaemonClient, session: &str) -> Result<SessionInfo, ClientError> {
    let list: SessionList = client.call(&Call::SessionsList(NoParams {})).await?;
    let mut matching = list
        .sessions
        .into_iter()
        .filter(|s| s.session.starts_with(session))
        .collect::<Vec<_>>();
    if let Some(exact) = matching.iter().position(|s| s.session == session) {
        return Ok(matching.swap_remove(exact));
    }
    match matching.len() {
        1 => Ok(matching.remove(0)),
        0 => Err(RpcError::new(ErrorKind::UnknownSession, format!("no session {session}")).into()),
        n => Err(RpcError::new(
            ErrorKind::BadInput,
            format!("{session} names {n} sessions: give more of the id"),
        )
        .into()),
    }
}

/// A subscription to one session in the daemon: the same items, in the same order, as the
/// in-process handle's. It ends after the session's end (or, for a session that no longer runs,
/// at the head of its log).
#[derive(Debug)]
pub struct RemoteSubscription {
    client: DaemonClient,
    reader: Reader,
}

/// What a subscription reads of one session's notifications.
#[derive(Debug)]
struct Reader {
    session: String,
    /// The seq after which the stream ends (a session that no longer runs).
    last: Option<u64>,
    done: bool,
    /// An item read with the one before it (a state change's state, after its task's end).
    queued: Option<Item>,
}

/// A `session.event`'s params, its event kept as the bytes the daemon sent.
#[derive(Deserialize)]
struct EventParams<'a> {
    session: String,
    #[serde(borrow)]
    event: &'a RawValue,
}

#[derive(Deserialize)]
struct SeqOnly {
    seq: u64,
}

/// A notification, its params left unparsed.
#[derive(Deserialize)]
struct RawNotice<'a> {
    method: String,
    #[serde(borrow)]
    params: &'a RawValue,
}

impl RemoteSubscription {
    fn new(client: DaemonClient, session: String, last: Option<u64>) -> Self {
        RemoteSubscription {
            client,
            reader: Reader::new(session, last),
        }
    }

    /// The next item; `None` once the session has ended and everything before was given.
    pub async fn next(&mut self) -> Result<Option<Item>, ClientError> {
        self.reader.next(&mut self.client).await
    }

    /// Stops the subscription and closes its connection.
    pub async fn close(self) {
        self.client.close().await;
    }
}

impl Reader {
    fn new(session: String, last: Option<u64>) -> Self {
        Reader {
            session,
            last,
            done: false,
            queued: None,
        }
    }

    async fn next(&mut self, client: &mut DaemonClient) -> Result<Option<Item>, ClientError> {
        if let Some(item) = self.queued.take() {
            return Ok(Some(item));
        }
        loop {
            if self.done {
                return Ok(None);
            }
            let text = client.next_notice_text().await?;
            if let Some(item) = self.item(&text)? {
                return Ok(Some(item));
            }
        }
    }

    /// The item a notification's text carries for this session, if any.
    fn item(&mut self, text: &str) -> Result<Option<Item>, ClientError> {
        let bad = |e: serde_json::Error| {
            ClientError::Rpc(RpcError::new(ErrorKind::ParseError, e.to_string()))
        };
        let notice: RawNotice<'_> = serde_json::from_str(text).map_err(bad)?;
        let item = match notice.method.as_str() {
            "session.event" => {
                let params: EventParams<'_> =
                    serde_json::from_str(notice.params.get()).map_err(bad)?;
                if params.session != self.session {
                    return Ok(None);
                }
                let line = params.event.get();
                let SeqOnly { seq } = serde_json::from_str(line).map_err(bad)?;
                if self.last.is_some_and(|last| seq >= last) {
                    self.done = true;
                }
                Item::Logged(Logged {
                    seq,
                    line: Arc::from(line),
                })
            }
            "session.live" => {
                let live: SessionLive = serde_json::from_str(notice.params.get()).map_err(bad)?;
                if live.session != self.session {
                    return Ok(None);
                }
                Item::Live {
                    after_seq: Some(live.after_seq),
                    event: Arc::new(live.event),
                }
            }
            "session.state" => {
                let change: StateChange = serde_json::from_str(notice.params.get()).map_err(bad)?;
                if change.session != self.session {
                    return Ok(None);
                }
                if matches!(change.state, SessionState::Ended | SessionState::Stopped) {
                    self.done = true;
                }
                // A task's end comes with the state that follows it: the same two items, in the
                // same order, as the in-process handle gives.
                match change.task {
                    Some(ended) => {
                        self.queued = Some(Item::State(change.state));
                        Item::TaskEnded(match ended {
                            chock_protocol::live::Ended::Error(why) => TaskOutcome::Failed(why),
                            ended => TaskOutcome::Ended(ended),
                        })
                    }
                    None => Item::State(change.state),
                }
            }
            // Questions asked and resolved are log lines of the session too (`approval.ask`,
            // `approval.answer`): the subscription gives them as such, as the runtime's does.
            _ => return Ok(None),
        };
        Ok(Some(item))
    }
}
