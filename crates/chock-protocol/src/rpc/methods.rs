//! The methods: one variant of [`Call`] per method, each with its params type and result type.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::review::{Applied, ApplyParams, DiffParams, ReviewDiff, UndoParams, Verified};
use super::{ErrorKind, RpcError};
use crate::log::{AnswerKind, Asked, TableDecision};

macro_rules! methods {
    ($( $(#[doc = $doc:literal])* $variant:ident($name:literal, $params:ty) -> $result:ty, )*) => {
        /// One method call with its params, as a client sends it.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Call {
            $( $(#[doc = $doc])* $variant($params), )*
        }

        /// Every method's name, in docs/daemon.md's order.
        pub const METHODS: &[&str] = &[$($name,)*];

        impl Call {
            /// The method's name.
            pub fn method(&self) -> &'static str {
                match self { $(Call::$variant(_) => $name,)* }
            }

            /// The method's name and its params as JSON.
            pub fn to_parts(&self) -> (&'static str, Value) {
                let params = match self {
                    $(Call::$variant(p) => serde_json::to_value(p),)*
                };
                (self.method(), params.expect("params serialise"))
            }

            /// Reads `params` (null is `{}`) as the params of `method`.
            pub fn from_parts(method: &str, params: Value) -> Result<Call, RpcError> {
                let params = if params.is_null() { Value::Object(Default::default()) } else { params };
                let bad = |e: serde_json::Error| {
                    RpcError::new(ErrorKind::InvalidParams, format!("{method}: {e}"))
                };
                match method {
                    $($name => Ok(Call::$variant(serde_json::from_value(params).map_err(bad)?)),)*
                    other => Err(RpcError::new(
                        ErrorKind::MethodNotFound,
                        format!("no method `{other}`"),
                    )),
                }
            }
        }

        /// What the method reference says of one method: its doc, its params and result schemas.
        pub fn method_doc(method: &str) -> Option<(String, schemars::Schema, schemars::Schema)> {
            match method {
                $($name => Some((
                    [$($doc),*].iter().map(|l| l.trim()).collect::<Vec<_>>().join(" "),
                    schemars::schema_for!($params),
                    schemars::schema_for!($result),
                )),)*
                _ => None,
            }
        }
    };
}

methods! {
    /// The sessions under the sessions root, newest last: the ones this daemon owns (running, or
    /// started by a daemon earlier) and the others, each with its state.
    SessionsList("sessions.list", NoParams) -> SessionList,
    /// Starts a session in the daemon on `task` and returns its id; it runs without any client.
    /// Subscribe to watch it.
    SessionsStart("sessions.start", StartParams) -> Started,
    /// Sends the session's log events with `seq` from `from_seq` on (the log is the source, its
    /// `seq` the cursor), then every new one as it is written, with the live items
    /// (`session.live`) in between. A client that comes back subscribes from the last seq it had
    /// plus one and misses nothing. Subscribing again to the same session replaces the earlier
    /// subscription.
    SessionsSubscribe("sessions.subscribe", SubscribeParams) -> Subscribed,
    /// Stops sending the session's events to this client.
    SessionsUnsubscribe("sessions.unsubscribe", SessionParams) -> Done,
    /// A follow-up: the session works on `text` once the current task has ended (refused with
    /// `busy` while one runs). Logged as the next turn's input.
    SessionsInput("sessions.input", InputParams) -> Done,
    /// Stops the current turn: the model stream ends, a running command's process tree is
    /// killed, the turn ends `interrupted` in the log. Nothing happens when idle.
    SessionsInterrupt("sessions.interrupt", SessionParams) -> Done,
    /// Ends the session (after its current task is interrupted): background commands waited for,
    /// the workspace checkpointed, `session.end` written.
    SessionsEnd("sessions.end", SessionParams) -> Done,
    /// The questions asked and not answered, derived from the logs (an `approval.ask` with no
    /// `approval.answer` naming it): of one session, or of every session the daemon owns. A
    /// question whose session no longer runs stays listed, unanswered, and cannot be answered.
    ApprovalsPending("approvals.pending", PendingParams) -> Pending,
    /// Answers a question by its id with one of the answers it lists. The first valid answer
    /// wins; every client is then sent `approval.resolved` naming who answered. An answer to a
    /// question already resolved is refused (`answer_refused`) and changes nothing.
    ApprovalsAnswer("approvals.answer", AnswerParams) -> Done,
    /// The session's changes against its base, with the file and hunk ids a selection names and
    /// the digest of exactly the selection shown (what `review.apply` pins).
    ReviewDiff("review.diff", DiffParams) -> ReviewDiff,
    /// Writes the selected changes into the real project, if they are still exactly the ones the
    /// digest was taken of (else `digest_mismatch`, nothing written). Decided by
    /// `workspace.apply` through the session's decision pipeline (an `ask` goes to the clients as
    /// a question), and logged as `workspace.apply` before anything is written. A change to
    /// Chock's own policy file is refused here (only `chock apply --include-policy` at a
    /// terminal writes one).
    ReviewApply("review.apply", ApplyParams) -> Applied,
    /// Reverts exactly what one apply wrote, decided and logged as `workspace.apply` like the
    /// apply.
    ReviewUndo("review.undo", UndoParams) -> Applied,
    /// Checks the session's log: the hash chain, the header, the seq order, a torn tail, the
    /// seal.
    LogVerify("log.verify", SessionParams) -> Verified,
    /// Takes up a session that no longer runs (it ended, crashed, or ran in a daemon or `chock run`
    /// that is gone; a fork made by `sessions.fork`) and works on `task` as its next turn: its log
    /// goes on, its workspace is the one it had, its conversation and narrowings are rebuilt from
    /// the log, and the policy is read again before any sandbox exists. Refused (`busy`) while any
    /// process still writes the session.
    SessionsResume("sessions.resume", ResumeParams) -> Started,
    /// Makes a new session that starts at the end of completed turn `turn` of `session`: its
    /// workspace is the one that turn ended with, its ratchet and conversation the session's up to
    /// that turn, and its log's first line names the parent's line (docs/forks.md). The fork is
    /// not started: `sessions.resume`, `chock run --resume ID` or the terminal interface takes it
    /// up. A turn that
    /// does not exist or did not complete is `bad_input`.
    SessionsFork("sessions.fork", ForkParams) -> ForkMade,
    /// Takes a session that runs in another process (`chock run`, the terminal interface) into
    /// this daemon while it works (`chock detach`), or — the terminal interface's — while it
    /// waits for a follow-up: the owner is asked to let go (it stops at the next turn boundary,
    /// or at once while a question is open or no task runs; an idle session is taken up with
    /// nothing run, and waits for the next input), or is found gone; the daemon opens the
    /// session's log and workspace, writes `session.handover` naming both processes, and goes on
    /// with the task at its next turn. A call the old owner left running is logged as outcome
    /// unknown and never run again; an open question stays open for this daemon's clients.
    /// Refused (`not_running`) for a session that ended: `sessions.resume` takes that up.
    SessionsAdopt("sessions.adopt", AdoptParams) -> Started,
}

/// `sessions.adopt`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AdoptParams {
    /// The session's id, or a unique prefix of it.
    pub session: String,
    /// How long to wait for the owner to let go, in seconds (default 600: it lets go at the end
    /// of the turn it is in).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_secs: Option<u64>,
    /// Subscribe this client (a WebSocket) to the session from seq 0 before it goes on.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub subscribe: bool,
}

/// `sessions.resume`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResumeParams {
    /// The session's id, or a unique prefix of it.
    pub session: String,
    /// The follow-up it works on.
    pub task: String,
    /// The provider; default: config.toml's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// The model; default: config.toml's, then the provider's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Subscribe this client (a WebSocket) to the session from seq 0 before it goes on.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub subscribe: bool,
}

/// `sessions.fork`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ForkParams {
    /// The session to fork: its id, or a unique prefix of it.
    pub session: String,
    /// The completed turn to start after (1-based).
    pub turn: u32,
}

/// `sessions.fork`'s result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ForkMade {
    /// The new session's id.
    pub session: String,
    /// The line it starts after: the parent, the turn, that `turn.end` line's seq and hash.
    pub origin: crate::log::ForkOrigin,
}

/// No params (`{}` or absent).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoParams {}

/// A session named by its id (or a unique prefix of it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionParams {
    /// The session's id, or a unique prefix of it.
    pub session: String,
}

/// `sessions.start`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StartParams {
    /// The task.
    pub task: String,
    /// The project directory (absolute): what the session's workspace copies.
    pub project: String,
    /// The provider (`demo`, `script:FILE`, a config.toml table); default: config.toml's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// The model; default: config.toml's, then the provider's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Subscribe this client (a WebSocket) to the session from seq 0 before it starts working, so
    /// no live item is missed; its first events may then come before this response.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub subscribe: bool,
}

/// `sessions.subscribe`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SubscribeParams {
    /// The session.
    pub session: String,
    /// The first seq to send: the last seq the client has, plus one (absent: 0, the whole log).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_seq: Option<u64>,
}

/// `sessions.input`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InputParams {
    /// The session.
    pub session: String,
    /// The follow-up.
    pub text: String,
}

/// `approvals.pending`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PendingParams {
    /// Only this session's (absent: every session the daemon owns).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
}

/// `approvals.answer`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AnswerParams {
    /// The session.
    pub session: String,
    /// The question's id (`q-3`), as `approval.asked` and `approvals.pending` name it.
    pub question: String,
    /// One of the answers the question lists.
    pub answer: AnswerKind,
    /// A note, logged with the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasons: Option<String>,
    /// The reply to a free question (with `answer: reply`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<String>,
}

/// Nothing to report beyond success.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Done {}

/// Where a session is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SessionState {
    /// Running in this daemon, working on a task.
    Working,
    /// Running in this daemon, its task ended: waiting for a follow-up.
    Idle,
    /// Another process writes it (a `chock run` at a terminal).
    Elsewhere,
    /// Its writer is gone without a `session.end` (it crashed, or the daemon running it
    /// stopped): its questions stay unanswered; `chock run --resume` goes on with it.
    Stopped,
    /// `session.end` is written.
    Ended,
}

/// One session, as `sessions.list` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionInfo {
    /// Its id.
    pub session: String,
    /// Where it is.
    pub state: SessionState,
    /// Whether this daemon started it (now, or a daemon before a restart).
    pub owned: bool,
    /// The project it works on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// The provider's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// The model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The title the model gave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Its price so far in US dollars (null when a model's price is unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// The seq of its last event (what a subscription from `last_seq + 1` starts after).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seq: Option<u64>,
    /// The kind of its last event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_kind: Option<String>,
    /// When its last event was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_ts: Option<String>,
    /// Questions asked and not answered.
    pub pending: u32,
}

/// `sessions.list`'s result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionList {
    /// Every session, oldest first.
    pub sessions: Vec<SessionInfo>,
}

/// `sessions.start`'s result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Started {
    /// The new session's id.
    pub session: String,
    /// Its directory (holding `log.jsonl`).
    pub log_dir: String,
    /// The provider it asks.
    pub provider: String,
    /// The model.
    pub model: String,
}

/// `sessions.subscribe`'s result: sent before the first `session.event` of the subscription.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Subscribed {
    /// The session's full id.
    pub session: String,
    /// The first seq the subscription sends.
    pub from_seq: u64,
    /// The seq the log has reached: events up to it come from the log, later ones as written.
    pub head_seq: u64,
}

/// A question asked and not answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Approval {
    /// The session.
    pub session: String,
    /// The question's id: `approvals.answer` names it.
    pub question: String,
    /// The seq of its `approval.ask` in the session's log.
    pub seq: u64,
    /// The tool call it is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// The act (absent for the agent's free question to the person).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// What the table said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<TableDecision>,
    /// Which rule said it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    /// The act and its detail as asked (raw: a client escapes it before showing it).
    pub what: String,
    /// Who is asked.
    pub asked: Asked,
    /// The answers a client may send (none when a reviewer model is asked).
    pub answers: Vec<AnswerKind>,
    /// Whether an answer is taken now: the session runs in this daemon and a person is asked.
    pub answerable: bool,
    /// The answer is a secret (a password git asked for): read it without echo and show it
    /// masked. Absent is `false`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub secret: bool,
}

/// `approvals.pending`'s result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Pending {
    /// The open questions, by session then seq.
    pub approvals: Vec<Approval>,
}
