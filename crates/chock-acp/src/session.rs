//! One ACP session: a client of the session's handle (`chock_runtime`), like the daemon and
//! the terminal. A prompt is [`Op::UserInput`] and ends when the handle's subscription gives the
//! task's end; `session/cancel` is [`Op::Interrupt`]; the apply offered at the end of a turn is
//! [`Op::Apply`]; the session ends by [`Op::End`], by the runtime's one rule.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use chock_protocol::live::Ended;
use chock_protocol::log::Note;
use chock_runtime::{
    BuildError, Item, Op, OpError, SessionBuilder, SessionHandle, StartError, TaskOutcome,
};
use tokio::sync::Mutex;

use crate::Options;
use crate::apply::{self, Offered};
use crate::live::{Shared, Updates};
use crate::permission::EditorAnswerer;
use crate::rpc::{Peer, RpcError, code};
use crate::schema::{ContentBlock, McpServer, SessionUpdate, StopReason};

/// How a session comes to be.
pub(crate) enum Opening {
    /// `session/new`: a new session on `cwd`.
    New {
        /// The project.
        cwd: PathBuf,
        /// The provider chosen in the request (`_meta.chock.provider`).
        provider: Option<String>,
        /// The model chosen in the request (`_meta.chock.model`).
        model: Option<String>,
    },
    /// `session/load`: the session in `dir`, which works on `cwd`.
    Load {
        /// The session's directory.
        dir: PathBuf,
        /// The project the client names.
        cwd: PathBuf,
    },
}

/// A session served to the editor.
pub(crate) struct AcpSession {
    pub(crate) shared: Arc<Shared>,
    /// The session: the only way to act on it.
    handle: SessionHandle,
    /// Held by the prompt running now, through the apply offered at its end: the handle takes a
    /// new input once the task has ended, but the editor's next prompt waits for the offer too.
    prompting: Mutex<()>,
    offers: AtomicU32,
}

impl std::fmt::Debug for AcpSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AcpSession")
            .field("id", &self.shared.id())
            .finish_non_exhaustive()
    }
}

fn build_error(method: &str, err: &BuildError) -> RpcError {
    let code = match err {
        BuildError::NoKey { .. } | BuildError::Credentials(_) => code::AUTH_REQUIRED,
        e if e.is_bad_input() => code::INVALID_PARAMS,
        _ => code::INTERNAL_ERROR,
    };
    RpcError::new(code, format!("{method}: {err}"))
}

fn start_error(method: &str, err: &StartError) -> RpcError {
    match err {
        StartError::Build(e) => build_error(method, e),
        other => internal(method, other),
    }
}

fn internal(method: &str, err: impl std::fmt::Display) -> RpcError {
    RpcError::new(code::INTERNAL_ERROR, format!("{method}: {err}"))
}

/// The project a logged session works on, as the protocol's fold of its log says.
fn logged_project(dir: &Path) -> Result<Option<PathBuf>, RpcError> {
    let events = chock_log::read_events(dir).map_err(|e| internal("session/load", e))?;
    Ok(chock_log::view_of(&events)
        .start
        .and_then(|start| start.project)
        .map(PathBuf::from))
}

/// ACP's stop reason for a task that ended as `ended`.
fn stop_reason(ended: &Ended) -> StopReason {
    match ended {
        Ended::MaxTokens => StopReason::MaxTokens,
        Ended::MaxTurns => StopReason::MaxTurnRequests,
        Ended::Refusal => StopReason::Refusal,
        Ended::Interrupted => StopReason::Cancelled,
        // The session's budget is spent: ACP's nearest word is a token limit.
        Ended::OutOfBudget => StopReason::MaxTokens,
        // A task ends as one of the above or done; the rest name how a session ended.
        Ended::Done | Ended::Open | Ended::Closed | Ended::Error(_) | Ended::Other(_) => {
            StopReason::EndTurn
        }
    }
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// The editor's MCP servers Chock starts (stdio ones under the same confinement as its own; HTTP
/// and SSE ones reached by the host through the broker's door: chock-mcp), and a note about those
/// it does not (a name that cannot be an act, a transport it does not speak; env values, which
/// are never passed).
fn editor_servers(servers: &[McpServer]) -> (Vec<chock_mcp::Configured>, Option<String>) {
    let mut started = Vec::new();
    let mut notes = Vec::new();
    for s in servers {
        match (&s.kind, &s.command, &s.url) {
            (None, Some(command), _) => {
                let raw = chock_policy::mcp::RawServer {
                    command: Some(command.clone()),
                    args: s.args.clone(),
                    ..chock_policy::mcp::RawServer::default()
                };
                match raw.check(Path::new("session/new"), &s.name) {
                    Ok(def) => {
                        started.push(chock_mcp::Configured::new(def, chock_mcp::Origin::Editor));
                        if !s.env.is_empty() {
                            notes.push(format!(
                                "{}: its env values were not passed (Chock passes variables by name only)",
                                s.name
                            ));
                        }
                    }
                    Err(e) => notes.push(format!("{} was not started: {e}", s.name)),
                }
            }
            // Reached by the host through the broker's door, like the person's own HTTP servers.
            (Some(kind), _, Some(url)) if kind == "http" || kind == "sse" => {
                let raw = chock_policy::mcp::RawServer {
                    url: Some(url.clone()),
                    transport: (kind == "sse").then(|| "sse".to_string()),
                    ..chock_policy::mcp::RawServer::default()
                };
                match raw.check(Path::new("session/new"), &s.name) {
                    Ok(def) => {
                        started.push(chock_mcp::Configured::new(def, chock_mcp::Origin::Editor));
                    }
                    Err(e) => notes.push(format!("{} was not started: {e}", s.name)),
                }
            }
            (Some(kind), _, _) => notes.push(format!(
                "{} was not started: `{kind}` is not a transport Chock speaks (stdio, http, sse)",
                s.name
            )),
            _ => notes.push(format!("{} was not started: no command", s.name)),
        }
    }
    let note = (!notes.is_empty()).then(|| {
        format!(
            "MCP servers from the editor: {}. The ones started run confined in the session's sandbox, each call decided by the policy.",
            notes.join("; ")
        )
    });
    (started, note)
}

impl AcpSession {
    /// Builds or resumes a session; returns it and the note about MCP servers not started
    /// (logged already; the caller tells the editor after its response).
    pub(crate) async fn open(
        options: &Options,
        peer: &Peer,
        answerer: &str,
        opening: Opening,
        mcp_servers: &[McpServer],
    ) -> Result<(Arc<AcpSession>, Option<String>), RpcError> {
        let method = match opening {
            Opening::New { .. } => "session/new",
            Opening::Load { .. } => "session/load",
        };
        let cwd = match &opening {
            Opening::New { cwd, .. } | Opening::Load { cwd, .. } => cwd.clone(),
        };
        if !cwd.is_absolute() {
            return Err(RpcError::new(
                code::INVALID_PARAMS,
                format!("{method}: cwd `{}` is not an absolute path", cwd.display()),
            ));
        }
        let shared = Arc::new(Shared::new(
            cwd.clone(),
            peer.clone(),
            options.answer_timeout,
            answerer.to_string(),
        ));
        let mut builder = SessionBuilder::new(options.config.clone())
            .provider(options.provider.clone())
            .model(options.model.clone())
            .project(Some(cwd.clone()))
            .sessions_root(options.sessions_root.clone())
            .max_turns(options.max_turns)
            .person(Arc::new(EditorAnswerer(Arc::clone(&shared))));
        let (editor_mcp, note) = editor_servers(mcp_servers);
        builder = builder.mcp_servers(editor_mcp);
        let load = match opening {
            Opening::New {
                provider, model, ..
            } => {
                if provider.is_some() {
                    builder = builder.provider(provider);
                }
                if model.is_some() {
                    builder = builder.model(model);
                }
                None
            }
            Opening::Load { dir, .. } => {
                let project = logged_project(&dir)?;
                if let Some(project) = project.filter(|p| !same_dir(p, &cwd)) {
                    return Err(RpcError::new(
                        code::INVALID_PARAMS,
                        format!(
                            "session/load: the session works on {}, not on cwd {}",
                            project.display(),
                            cwd.display()
                        ),
                    ));
                }
                Some(dir)
            }
        };
        let opening = match load {
            Some(dir) => chock_runtime::Opening::Resume(dir),
            None => chock_runtime::Opening::New,
        };
        let updates: Arc<dyn chock_runtime::Observer> = Arc::new(Updates(Arc::clone(&shared)));
        let handle = chock_runtime::start(builder, opening, Some(updates))
            .await
            .map_err(|e| start_error(method, &e))?
            .named(answerer)
            .confirming_applies();
        shared.set_id(handle.id());
        if let Some(note) = &note {
            handle
                .pipeline()
                .log()
                .record(None, Note::Text { text: note.clone() })
                .map_err(|e| internal(method, e))?;
            eprintln!(
                "chock acp: session {}: {}",
                handle.id(),
                chock_protocol::text::line(note)
            );
        }
        if method == "session/load" {
            crate::replay::replay(&shared, &handle);
        }
        let session = Arc::new(AcpSession {
            handle,
            prompting: Mutex::new(()),
            shared,
            offers: AtomicU32::new(0),
        });
        Ok((session, note))
    }

    /// The session's id.
    pub(crate) fn id(&self) -> &str {
        self.handle.id()
    }

    /// Says `text` to the editor as the agent's message.
    pub(crate) fn say(&self, text: &str) {
        self.shared.send(SessionUpdate::AgentMessageChunk {
            content: ContentBlock::text(text),
        });
    }

    /// How many `session/cancel`s have come so far.
    pub(crate) fn cancels(&self) -> u64 {
        *self.shared.cancel.borrow()
    }

    /// `session/cancel`: the turn stops (the model stream ends, a running command's process
    /// tree is killed) and a question open now is given up, which refuses its act.
    pub(crate) fn cancel(&self) {
        self.shared.cancel.send_modify(|n| *n += 1);
        let handle = self.handle.clone();
        // An interrupt is answered at once; an ended session has nothing to stop.
        tokio::spawn(async move {
            let _ = handle.send(Op::Interrupt).await;
        });
    }

    fn busy(&self) -> RpcError {
        RpcError::new(
            code::INVALID_REQUEST,
            format!(
                "session/prompt: session {} is working on a prompt: wait for its response, or \
                 send session/cancel",
                self.id()
            ),
        )
    }

    fn ended(&self) -> RpcError {
        RpcError::new(
            code::INVALID_REQUEST,
            format!("session/prompt: session {} has ended", self.id()),
        )
    }

    /// Works on one prompt until its task ends, then offers the apply. `cancels` is
    /// [`AcpSession::cancels`] when the prompt arrived: a cancel since then ends it as
    /// cancelled.
    pub(crate) async fn prompt(&self, text: &str, cancels: u64) -> Result<StopReason, RpcError> {
        let Ok(_prompting) = self.prompting.try_lock() else {
            return Err(self.busy());
        };
        if self.cancels() != cancels {
            return Ok(StopReason::Cancelled);
        }
        // Subscribed before the input is sent, so the task's end cannot pass unseen.
        let mut items = self.handle.subscribe_live();
        let ended_before = self.handle.last_task().map_or(0, |(n, _)| n);
        match self
            .handle
            .send(Op::UserInput {
                text: text.to_string(),
            })
            .await
        {
            Ok(_) => {}
            Err(OpError::Busy { .. }) => return Err(self.busy()),
            Err(OpError::Ended { .. }) => return Err(self.ended()),
            Err(e) => return Err(internal("session/prompt", e)),
        }
        let ended = loop {
            let item = match items.next().await {
                // Fell behind: go on from now; a task that ended meanwhile is read from the
                // session.
                Some(Item::Lagged { .. }) => {
                    items = self.handle.subscribe_live();
                    match self.handle.last_task() {
                        Some((n, outcome)) if n > ended_before => Some(Item::TaskEnded(outcome)),
                        _ => continue,
                    }
                }
                other => other,
            };
            match item {
                Some(Item::TaskEnded(TaskOutcome::Ended(ended))) => break ended,
                Some(Item::TaskEnded(TaskOutcome::Failed(e))) => {
                    // The runtime has ended the session (its `session.end` says why).
                    return Err(internal(
                        "session/prompt",
                        format!("session {} ended with an error: {e}", self.id()),
                    ));
                }
                Some(_) => {}
                None => return Err(self.ended()),
            }
        };
        drop(items);
        if ended == Ended::Interrupted || self.cancels() != cancels {
            return Ok(StopReason::Cancelled);
        }
        let n = self.offers.fetch_add(1, Ordering::Relaxed) + 1;
        match apply::offer(&self.shared, &self.handle, n).await {
            Offered::NotGit if n == 1 => self.say(&format!(
                "\n\nThis project has no git, so its changes cannot be applied from the editor: \
                 `chock workspace adopt {}` copies them aside.",
                self.id()
            )),
            _ => {}
        }
        if self.cancels() != cancels {
            return Ok(StopReason::Cancelled);
        }
        Ok(stop_reason(&ended))
    }

    /// Ends the session (after the prompt running now, which the caller cancels first) by the
    /// runtime's one rule: background commands are waited for, the workspace checkpointed,
    /// `session.end` logged as its last task ended. An ended session stays ended.
    pub(crate) async fn end(&self) {
        let _ = self.handle.send(Op::End).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tasks_end_is_acps_stop_reason() {
        assert_eq!(stop_reason(&Ended::Done), StopReason::EndTurn);
        assert_eq!(stop_reason(&Ended::MaxTurns), StopReason::MaxTurnRequests);
        assert_eq!(stop_reason(&Ended::OutOfBudget), StopReason::MaxTokens);
        assert_eq!(stop_reason(&Ended::Interrupted), StopReason::Cancelled);
        assert_eq!(stop_reason(&Ended::Refusal), StopReason::Refusal);
    }
}
