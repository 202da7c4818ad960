//! The connection: frames read one line at a time, each request carried out in a task of its
//! own (a prompt runs while `session/cancel` and the client's answers keep coming), every frame
//! sent through one ordered queue.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::rpc::{self, Incoming, Peer, RpcError, code};
use crate::schema::{
    AgentCapabilities, AuthenticateRequest, CancelNotification, ContentBlock, Implementation,
    InitializeRequest, InitializeResponse, LoadSessionRequest, McpCapabilities, NewSessionRequest,
    NewSessionResponse, PROTOCOL_VERSION, PromptCapabilities, PromptRequest, PromptResponse,
};
use crate::session::{AcpSession, Opening};
use crate::{AcpError, Options};

/// How long, once the client has gone, running prompts get to stop and sessions to end.
const WIND_DOWN: Duration = Duration::from_secs(30);

/// The methods `chock acp` serves, for the error naming an unknown one.
const METHODS: &str = "initialize, authenticate, session/new, session/load, session/prompt";

/// A method's result, and what to tell the editor once it has it (a session's note: the editor
/// learns the session's id from the result).
struct Reply {
    result: Value,
    then_say: Option<(Arc<AcpSession>, String)>,
}

impl Reply {
    fn of(result: Value) -> Self {
        Self {
            result,
            then_say: None,
        }
    }
}

struct Conn {
    options: Options,
    peer: Peer,
    /// The answerer's name, from `initialize`'s `clientInfo`; set once initialized.
    answerer: OnceLock<String>,
    sessions: Mutex<HashMap<String, Arc<AcpSession>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn params<T: DeserializeOwned>(method: &str, params: Value) -> Result<T, RpcError> {
    serde_json::from_value(params).map_err(|e| RpcError::params(method, &e))
}

/// `editor`, or `editor:<client name>` with only plain characters kept.
fn answerer_name(info: Option<&Implementation>) -> String {
    let name: String = info
        .map(|i| i.name.as_str())
        .unwrap_or("")
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
        .take(40)
        .collect();
    if name.is_empty() {
        "editor".into()
    } else {
        format!("editor:{name}")
    }
}

/// The prompt's blocks as one text: text as it is, an attached file's text after its URI, a
/// link as its name and URI. Images and audio were not advertised and are refused.
fn prompt_text(blocks: &[ContentBlock]) -> Result<String, RpcError> {
    let mut parts = Vec::new();
    for (n, block) in blocks.iter().enumerate() {
        parts.push(match block {
            ContentBlock::Text { text } => text.clone(),
            ContentBlock::ResourceLink { uri, name } => format!("[{name}]({uri})"),
            ContentBlock::Resource { resource } => match &resource.text {
                Some(text) => format!("{}:\n```\n{text}\n```", resource.uri),
                None => format!(
                    "({} is attached as binary data, which Chock does not read)",
                    resource.uri
                ),
            },
            ContentBlock::Image { .. } | ContentBlock::Audio { .. } => {
                return Err(RpcError::new(
                    code::INVALID_PARAMS,
                    format!(
                        "session/prompt: prompt[{n}]: images and audio are not accepted \
                         (initialize advertised neither)"
                    ),
                ));
            }
        });
    }
    let text = parts.join("\n\n");
    if text.trim().is_empty() {
        return Err(RpcError::new(
            code::INVALID_PARAMS,
            "session/prompt: prompt: the message is empty",
        ));
    }
    Ok(text)
}

impl Conn {
    fn session(&self, method: &str, id: &str) -> Result<Arc<AcpSession>, RpcError> {
        lock(&self.sessions).get(id).cloned().ok_or_else(|| {
            RpcError::new(
                code::RESOURCE_NOT_FOUND,
                format!("{method}: sessionId `{id}` is not a session of this connection"),
            )
        })
    }

    fn initialize(&self, raw: Value) -> Result<Value, RpcError> {
        let request: InitializeRequest = params("initialize", raw)?;
        // The client's file and terminal methods are never used, whatever it offers: they would
        // act outside the sandbox and the reviewed apply.
        let _ = (&request.client_capabilities, request.protocol_version);
        let _ = self
            .answerer
            .set(answerer_name(request.client_info.as_ref()));
        let response = InitializeResponse {
            protocol_version: PROTOCOL_VERSION,
            agent_capabilities: AgentCapabilities {
                load_session: true,
                prompt_capabilities: PromptCapabilities {
                    image: false,
                    audio: false,
                    embedded_context: true,
                },
                mcp_capabilities: McpCapabilities {
                    http: false,
                    sse: false,
                },
            },
            auth_methods: Vec::new(),
            agent_info: Implementation {
                name: "chock".into(),
                title: Some("Chock".into()),
                version: env!("CARGO_PKG_VERSION").into(),
            },
        };
        serde_json::to_value(response)
            .map_err(|e| RpcError::new(code::INTERNAL_ERROR, e.to_string()))
    }

    async fn call(
        self: &Arc<Self>,
        method: &str,
        raw: Value,
        cancels: u64,
    ) -> Result<Reply, RpcError> {
        let Some(answerer) = self.answerer.get().cloned() else {
            return Err(RpcError::new(
                code::INVALID_REQUEST,
                format!("{method}: call initialize first"),
            ));
        };
        match method {
            "authenticate" => {
                let request: AuthenticateRequest = params(method, raw)?;
                Err::<Reply, _>(RpcError::new(
                    code::INVALID_PARAMS,
                    format!(
                        "authenticate: methodId `{}` is not offered: chock acp advertises no \
                         authentication methods; store a provider key with `chock login`",
                        request.method_id
                    ),
                ))
            }
            "session/new" => {
                let request: NewSessionRequest = params(method, raw)?;
                let chosen = |name: &str| {
                    request
                        .meta
                        .as_ref()
                        .and_then(|m| m.get("chock"))
                        .and_then(|c| c.get(name))
                        .and_then(Value::as_str)
                        .map(str::to_string)
                };
                let opening = Opening::New {
                    cwd: request.cwd.clone(),
                    provider: chosen("provider"),
                    model: chosen("model"),
                };
                let (session, note) = AcpSession::open(
                    &self.options,
                    &self.peer,
                    &answerer,
                    opening,
                    &request.mcp_servers,
                )
                .await?;
                let id = session.id().to_string();
                lock(&self.sessions).insert(id.clone(), Arc::clone(&session));
                Ok(Reply {
                    result: json!(NewSessionResponse { session_id: id }),
                    then_say: note.map(|note| (session, note)),
                })
            }
            "session/load" => {
                let request: LoadSessionRequest = params(method, raw)?;
                if lock(&self.sessions).contains_key(&request.session_id) {
                    return Err(RpcError::new(
                        code::INVALID_REQUEST,
                        format!(
                            "session/load: session {} is open in this connection already",
                            request.session_id
                        ),
                    ));
                }
                let root = match &self.options.sessions_root {
                    Some(root) => root.clone(),
                    None => chock_log::sessions_root()
                        .map_err(|e| RpcError::new(code::INTERNAL_ERROR, e.to_string()))?,
                };
                let dir = root.join(&request.session_id);
                let exact = chock_log::find_session(&root, &request.session_id)
                    .is_ok_and(|found| found == dir);
                if !exact {
                    return Err(RpcError::new(
                        code::RESOURCE_NOT_FOUND,
                        format!(
                            "session/load: sessionId `{}` names no session",
                            request.session_id
                        ),
                    ));
                }
                let opening = Opening::Load {
                    dir,
                    cwd: request.cwd.clone(),
                };
                let (session, note) = AcpSession::open(
                    &self.options,
                    &self.peer,
                    &answerer,
                    opening,
                    &request.mcp_servers,
                )
                .await?;
                lock(&self.sessions).insert(request.session_id.clone(), Arc::clone(&session));
                Ok(Reply {
                    result: json!({}),
                    then_say: note.map(|note| (session, note)),
                })
            }
            "session/prompt" => {
                let request: PromptRequest = params(method, raw)?;
                let text = prompt_text(&request.prompt)?;
                let session = self.session(method, &request.session_id)?;
                let stop_reason = session.prompt(&text, cancels).await?;
                Ok(Reply::of(json!(PromptResponse { stop_reason })))
            }
            _ => Err(RpcError::new(
                code::METHOD_NOT_FOUND,
                format!(
                    "`{method}` is not a method chock acp serves (it serves {METHODS}, and the session/cancel notification)"
                ),
            )),
        }
    }

    fn notified(&self, method: &str, raw: Value) {
        if method == "session/cancel" {
            match params::<CancelNotification>(method, raw) {
                Ok(cancel) => match self.session(method, &cancel.session_id) {
                    Ok(session) => session.cancel(),
                    Err(e) => eprintln!("chock acp: {}", chock_protocol::text::line(&e.message)),
                },
                Err(e) => eprintln!("chock acp: {}", chock_protocol::text::line(&e.message)),
            }
        }
        // Other notifications (`$/…`, newer ones) are not for Chock: ACP lets them go unread.
    }

    /// The `cancels` count a prompt arriving now is measured against.
    fn cancels_of(&self, method: &str, raw: &Value) -> u64 {
        if method != "session/prompt" {
            return 0;
        }
        raw.get("sessionId")
            .and_then(Value::as_str)
            .and_then(|id| lock(&self.sessions).get(id).map(|s| s.cancels()))
            .unwrap_or(0)
    }
}

async fn write_frames<W: AsyncWrite + Unpin>(
    mut out: W,
    mut frames: mpsc::UnboundedReceiver<Value>,
) -> std::io::Result<()> {
    while let Some(frame) = frames.recv().await {
        let mut line = serde_json::to_vec(&frame)?;
        line.push(b'\n');
        out.write_all(&line).await?;
        out.flush().await?;
    }
    Ok(())
}

/// Serves one client on `input` and `output` until `input` ends: then every running prompt is
/// cancelled, every open question refused, and every session ended.
pub async fn serve<R, W>(input: R, output: W, options: Options) -> Result<(), AcpError>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (peer, frames) = Peer::new();
    let writer = tokio::spawn(write_frames(output, frames));
    let conn = Arc::new(Conn {
        options,
        peer: peer.clone(),
        answerer: OnceLock::new(),
        sessions: Mutex::default(),
    });
    let mut tasks = JoinSet::new();
    let mut lines = input.lines();
    let read = loop {
        let line = match lines.next_line().await {
            Ok(Some(line)) => line,
            Ok(None) => break Ok(()),
            Err(e) => break Err(AcpError::Read(e)),
        };
        if line.trim().is_empty() {
            continue;
        }
        match rpc::parse(&line) {
            Err((id, error)) => peer.respond(&id, Err(error)),
            Ok(Incoming::Response { id, outcome }) => {
                let outcome = outcome.map_err(|(code, message)| rpc::RpcError::new(code, message));
                if !peer.resolve(&id, outcome) {
                    eprintln!("chock acp: a response to request {id}, which nothing waits for");
                }
            }
            Ok(Incoming::Notification { method, params }) => conn.notified(&method, params),
            Ok(Incoming::Request { id, method, params }) if method == "initialize" => {
                peer.respond(&id, conn.initialize(params));
            }
            Ok(Incoming::Request { id, method, params }) => {
                let conn = Arc::clone(&conn);
                let cancels = conn.cancels_of(&method, &params);
                tasks.spawn(async move {
                    match conn.call(&method, params, cancels).await {
                        Ok(reply) => {
                            conn.peer.respond(&id, Ok(reply.result));
                            if let Some((session, note)) = reply.then_say {
                                session.say(&note);
                            }
                        }
                        Err(error) => conn.peer.respond(&id, Err(error)),
                    }
                });
            }
        }
    };
    // The client is gone: nobody can answer, so every open question is refused and every turn
    // stops; then the sessions end, each with its `session.end`.
    peer.close();
    let sessions: Vec<Arc<AcpSession>> = lock(&conn.sessions).values().cloned().collect();
    for session in &sessions {
        session.cancel();
    }
    let _ = tokio::time::timeout(WIND_DOWN, async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    tasks.abort_all();
    let _ = tokio::time::timeout(WIND_DOWN, async {
        for session in &sessions {
            session.end().await;
        }
    })
    .await;
    drop(sessions);
    lock(&conn.sessions).clear();
    drop(conn);
    drop(peer);
    if let Ok(Ok(Err(e))) = tokio::time::timeout(Duration::from_secs(5), writer).await {
        return Err(AcpError::Write(e));
    }
    read
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answerer_is_named_after_the_client_in_plain_characters() {
        let info = |name: &str| Implementation {
            name: name.into(),
            title: None,
            version: String::new(),
        };
        assert_eq!(answerer_name(None), "editor");
        assert_eq!(answerer_name(Some(&info("zed"))), "editor:zed");
        assert_eq!(
            answerer_name(Some(&info("\u{1b}[31m evil\n"))),
            "editor:31mevil"
        );
    }

    #[test]
    fn a_prompt_joins_its_blocks_and_refuses_what_was_not_advertised() {
        let blocks: Vec<ContentBlock> = serde_json::from_value(json!([
            {"type": "text", "text": "fix it"},
            {"type": "resource", "resource": {"uri": "file:///p/a.rs", "text": "fn a() {}"}},
            {"type": "resource_link", "uri": "file:///p/b.rs", "name": "b.rs"}
        ]))
        .unwrap();
        assert_eq!(
            prompt_text(&blocks).unwrap(),
            "fix it\n\nfile:///p/a.rs:\n```\nfn a() {}\n```\n\n[b.rs](file:///p/b.rs)"
        );
        let image: Vec<ContentBlock> =
            serde_json::from_value(json!([{"type": "image", "mimeType": "image/png", "data": ""}]))
                .unwrap();
        let err = prompt_text(&image).unwrap_err();
        assert!(err.message.contains("prompt[0]"), "{}", err.message);
    }
}
