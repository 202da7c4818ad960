//! One ACP session: a Chock session runtime (built or resumed by `SessionBuilder`), its prompts
//! one at a time, its cancellations, and the apply offered at the end of each turn.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use chock_agent::agent::TaskEnd;
use chock_agent::runtime::{BuildError, Interrupter, SessionBuilder, SessionRuntime};
use chock_log::EventData;
use chock_protocol::log::Note;
use tokio::sync::Mutex;

use crate::Options;
use crate::apply::{self, Offered};
use crate::live::{Shared, Sink};
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
    runtime: Mutex<Option<SessionRuntime>>,
    interrupter: Interrupter,
    dir: PathBuf,
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

fn internal(method: &str, err: impl std::fmt::Display) -> RpcError {
    RpcError::new(code::INTERNAL_ERROR, format!("{method}: {err}"))
}

/// The project a logged session works on.
fn logged_project(dir: &Path) -> Result<Option<PathBuf>, RpcError> {
    let events = chock_log::read_events(dir).map_err(|e| internal("session/load", e))?;
    Ok(events.iter().find_map(|e| match e.payload() {
        Ok(EventData::SessionStart(start)) => start.project.map(PathBuf::from),
        _ => None,
    }))
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// The editor's MCP servers Chock starts (stdio ones, under the same confinement as its own:
/// chock-mcp), and a note about those it does not (streamable HTTP and SSE are not built yet; a
/// name that cannot be an act; env values, which are never passed).
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
            (Some(kind), _, Some(url)) => notes.push(format!(
                "{} ({kind} {url}) was not started: Chock does not reach HTTP MCP servers yet",
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
            .sink(Arc::new(Sink(Arc::clone(&shared))))
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
        let runtime = tokio::task::spawn_blocking(move || match &load {
            Some(dir) => builder.resume(dir),
            None => builder.build(),
        })
        .await
        .map_err(|e| internal(method, e))?
        .map_err(|e| build_error(method, &e))?;
        shared.set_id(runtime.id());
        if let Some(note) = &note {
            runtime
                .log()
                .record(None, Note::Text { text: note.clone() })
                .map_err(|e| internal(method, e))?;
            eprintln!(
                "chock acp: session {}: {}",
                runtime.id(),
                chock_protocol::text::line(note)
            );
        }
        if method == "session/load" {
            let dir = runtime.log().dir().to_path_buf();
            crate::replay::replay(&shared, &dir, |tool, input| runtime.display(tool, input))
                .map_err(|e| internal(method, e))?;
        }
        let session = Arc::new(AcpSession {
            interrupter: runtime.interrupter(),
            dir: runtime.log().dir().to_path_buf(),
            runtime: Mutex::new(Some(runtime)),
            shared,
            offers: AtomicU32::new(0),
        });
        Ok((session, note))
    }

    /// The session's id.
    pub(crate) fn id(&self) -> &str {
        self.shared.id().unwrap_or_default()
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
        self.interrupter.interrupt();
    }

    /// Works on one prompt until its turn ends, then offers the apply. `cancels` is
    /// [`AcpSession::cancels`] when the prompt arrived: a cancel since then ends it as
    /// cancelled.
    pub(crate) async fn prompt(&self, text: &str, cancels: u64) -> Result<StopReason, RpcError> {
        let Ok(mut held) = self.runtime.try_lock() else {
            return Err(RpcError::new(
                code::INVALID_REQUEST,
                format!(
                    "session/prompt: session {} is working on a prompt: wait for its response, or \
                     send session/cancel",
                    self.id()
                ),
            ));
        };
        let Some(runtime) = held.as_mut() else {
            return Err(RpcError::new(
                code::INVALID_REQUEST,
                format!("session/prompt: session {} has ended", self.id()),
            ));
        };
        if self.cancels() != cancels {
            return Ok(StopReason::Cancelled);
        }
        let end = match runtime.submit(text).await {
            Ok(end) => end,
            Err(e) => {
                // The runtime has ended the session (its `session.end` says why).
                held.take();
                return Err(internal(
                    "session/prompt",
                    format!("session {} ended with an error: {e}", self.id()),
                ));
            }
        };
        if end == TaskEnd::Interrupted || self.cancels() != cancels {
            return Ok(StopReason::Cancelled);
        }
        let pipeline = runtime.pipeline();
        let log = runtime.log().clone();
        let n = self.offers.fetch_add(1, Ordering::Relaxed) + 1;
        match apply::offer(&self.shared, &pipeline, &log, &self.dir, n).await {
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
        Ok(match end {
            TaskEnd::Done => StopReason::EndTurn,
            TaskEnd::MaxTokens => StopReason::MaxTokens,
            TaskEnd::MaxTurns => StopReason::MaxTurnRequests,
            TaskEnd::Refusal => StopReason::Refusal,
            TaskEnd::Interrupted => StopReason::Cancelled,
            // The session's budget is spent: ACP's nearest word is a token limit.
            TaskEnd::OutOfBudget => StopReason::MaxTokens,
        })
    }

    /// Ends the session (after the prompt running now, which the caller cancels first):
    /// background commands are waited for, the workspace checkpointed, `session.end` logged.
    pub(crate) async fn end(&self) {
        let runtime = self.runtime.lock().await.take();
        if let Some(runtime) = runtime {
            let _ = runtime.close().await;
        }
    }
}
