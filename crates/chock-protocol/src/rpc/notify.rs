//! The notifications the daemon pushes: a subscribed session's log events and live items, every
//! question asked and resolved, a session's state, and the notice that a client is dropped.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Approval, ErrorKind, JSONRPC, RpcError, SessionState};
use crate::live::AgentEvent;
use crate::log::AnswerKind;

/// A notification as it is on the wire (no `id`: nothing answers it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Notification {
    /// Always `"2.0"`.
    pub jsonrpc: String,
    /// What it is (`session.event`, …).
    pub method: String,
    /// Its params.
    pub params: Value,
}

impl Notification {
    /// The frame for `notice`.
    pub fn new(notice: &Notice) -> Notification {
        let (method, params) = notice.to_parts();
        Notification {
            jsonrpc: JSONRPC.to_string(),
            method: method.to_string(),
            params,
        }
    }

    /// The typed notice.
    pub fn notice(&self) -> Result<Notice, RpcError> {
        Notice::from_parts(&self.method, self.params.clone())
    }
}

macro_rules! notices {
    ($( $(#[doc = $doc:literal])* $variant:ident($name:literal, $params:ty), )*) => {
        /// One notification, typed.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Notice {
            $( $(#[doc = $doc])* $variant($params), )*
        }

        /// Every notification's name, in docs/daemon.md's order.
        pub const NOTIFICATIONS: &[&str] = &[$($name,)*];

        impl Notice {
            /// Its name.
            pub fn method(&self) -> &'static str {
                match self { $(Notice::$variant(_) => $name,)* }
            }

            /// Its name and params as JSON.
            pub fn to_parts(&self) -> (&'static str, Value) {
                let params = match self {
                    $(Notice::$variant(p) => serde_json::to_value(p),)*
                };
                (self.method(), params.expect("notices serialise"))
            }

            /// Reads `params` as the params of notification `method`.
            pub fn from_parts(method: &str, params: Value) -> Result<Notice, RpcError> {
                let bad = |e: serde_json::Error| {
                    RpcError::new(ErrorKind::InvalidParams, format!("{method}: {e}"))
                };
                match method {
                    $($name => Ok(Notice::$variant(serde_json::from_value(params).map_err(bad)?)),)*
                    other => Err(RpcError::new(
                        ErrorKind::MethodNotFound,
                        format!("no notification `{other}`"),
                    )),
                }
            }
        }

        /// What the reference says of one notification: its doc and its params schema.
        pub fn notice_doc(method: &str) -> Option<(String, schemars::Schema)> {
            match method {
                $($name => Some((
                    [$($doc),*].iter().map(|l| l.trim()).collect::<Vec<_>>().join(" "),
                    schemars::schema_for!($params),
                )),)*
                _ => None,
            }
        }
    };
}

notices! {
    /// One event of a subscribed session's log, in seq order with no gap: first the ones from
    /// `from_seq` up to the head, then each one as it is written.
    SessionEvent("session.event", SessionEvent),
    /// A live item of a subscribed session (the model's text streaming, a command's output, a
    /// tool call starting): for showing progress, not the record; not sent again on a later
    /// subscription.
    SessionLive("session.live", SessionLive),
    /// A session this daemon owns changed state (started, a task began or ended, it ended). Sent
    /// to every client.
    SessionState("session.state", StateChange),
    /// A question was asked in a session this daemon runs: sent to every client, with the answers
    /// it takes.
    ApprovalAsked("approval.asked", Approval),
    /// A question was resolved: sent to every client, naming who answered (null: nobody did, and
    /// the act was refused).
    ApprovalResolved("approval.resolved", Resolved),
    /// The client fell too far behind (its queue of frames is bounded): this is the last frame it
    /// gets before the daemon closes the connection. It reconnects and subscribes from the last
    /// seq it had plus one.
    ClientDropped("client.dropped", Dropped),
}

/// One log event, as written (docs/log.md describes the kinds and their `data`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LogEvent {
    /// 0 for `session.start`, then +1 per line.
    pub seq: u64,
    /// When it was written (RFC 3339, UTC).
    pub ts: String,
    /// Its kind (`tool.call`, …).
    pub kind: String,
    /// The tool call it is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// SHA-256 of the previous line.
    pub prev: String,
    /// The kind's fields.
    pub data: Value,
}

/// `session.event`'s params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionEvent {
    /// The session.
    pub session: String,
    /// The event.
    pub event: LogEvent,
}

/// `session.live`'s params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionLive {
    /// The session.
    pub session: String,
    /// The seq of the last log event sent before it.
    pub after_seq: u64,
    /// The item (docs/json-events.md describes them).
    pub event: AgentEvent,
}

/// `session.state`'s params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct StateChange {
    /// The session.
    pub session: String,
    /// Where it is now.
    pub state: SessionState,
    /// How the task that just ended ended: on the state that follows a task (idle; ended, when
    /// the loop failed), so a client knows without reading the log (`chock run --daemon` exits by
    /// it). Absent on every other change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<crate::live::Ended>,
}

/// `approval.resolved`'s params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Resolved {
    /// The session.
    pub session: String,
    /// The question.
    pub question: String,
    /// Who answered (`unix:uid=1000,pid=4242`, `web`, `reviewer:<model>`; null: nobody).
    pub by: Option<String>,
    /// The winning answer (null: nobody answered).
    pub answer: Option<AnswerKind>,
}

/// Why a client is dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DropReason {
    /// It did not read its frames fast enough: its bounded queue filled.
    TooSlow,
    /// The daemon is stopping.
    Stopping,
}

/// `client.dropped`'s params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Dropped {
    /// Why.
    pub reason: DropReason,
    /// How many frames its queue holds at most.
    pub queue: usize,
}
