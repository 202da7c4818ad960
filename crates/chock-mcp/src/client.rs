//! Chock's side of the MCP session with one server (rmcp's `ClientHandler`): what the server may
//! ask of Chock. Sampling is the act `mcp.<server>.sampling`, decided and logged with its prompt
//! before the model is called, then charged like the agent's own calls (the [`Sampler`]);
//! elicitation is a question to the session's answerers (nobody answering declines); `roots`
//! lists only the project's path (the real project, read-only, inside a stdio server's sandbox); a
//! `tools/list_changed` marks the server's tools for a fresh look before the next call.

// rmcp 3.11 marks sampling and roots deprecated (SEP-2577), and servers in use still send them:
// Chock answers them until the SDK drops them.
#![allow(deprecated)]

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use chock_decide::Pipeline;
use chock_protocol::log::McpSampling;
use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequestParams, ElicitResult, Implementation, ListRootsResult, ProtocolVersion,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ClientHandler, ErrorData, RoleClient};
use serde_json::{Value, json};

/// A server's request for a model call, as Chock passes it on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleRequest {
    /// The server asking.
    pub server: String,
    /// The system prompt it asked for.
    pub system: Option<String>,
    /// Its messages: (`user` or `assistant`, text).
    pub messages: Vec<(String, String)>,
    /// The token limit it asked for.
    pub max_tokens: u32,
}

/// The model's reply to a [`SampleRequest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleReply {
    /// The reply's text.
    pub text: String,
    /// The model that answered.
    pub model: String,
    /// Why it stopped.
    pub stop_reason: String,
}

/// The future a [`Sampler`] returns.
pub type SampleFuture<'a> = Pin<Box<dyn Future<Output = Result<SampleReply, String>> + Send + 'a>>;

/// Calls the session's model for a server and charges the session for it, through the same
/// accounting the agent's own model calls use (chock-agent implements it).
pub trait Sampler: Send + Sync {
    /// One model call for `request`.
    fn sample(&self, request: SampleRequest) -> SampleFuture<'_>;
}

/// What a server's requests reach on the host.
#[derive(Clone)]
pub(crate) struct Handler {
    pub server: String,
    pub pipeline: Pipeline,
    pub sampler: Option<Arc<dyn Sampler>>,
    /// The project's path: a stdio server sees the real project there, read-only.
    pub root: PathBuf,
    /// Set by `tools/list_changed`.
    pub tools_changed: Arc<AtomicBool>,
}

fn internal(message: String) -> ErrorData {
    ErrorData::internal_error(message, None)
}

fn text_of(content: &Value) -> String {
    match content {
        Value::Array(items) => items.iter().map(text_of).collect::<Vec<_>>().join("\n"),
        Value::Object(map) => match map.get("text") {
            Some(Value::String(t)) => t.clone(),
            _ => format!(
                "[{} content]",
                map.get("type").and_then(Value::as_str).unwrap_or("other")
            ),
        },
        other => other.to_string(),
    }
}

/// The messages of a sampling request, as (role, text).
fn messages_of(params: &Value) -> Vec<(String, String)> {
    params
        .get("messages")
        .and_then(Value::as_array)
        .map(|messages| {
            messages
                .iter()
                .map(|m| {
                    let role = m.get("role").and_then(Value::as_str).unwrap_or("user");
                    (
                        role.to_string(),
                        text_of(m.get("content").unwrap_or(&Value::Null)),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

impl Handler {
    pub(crate) async fn sample(
        &self,
        params: CreateMessageRequestParams,
    ) -> Result<CreateMessageResult, ErrorData> {
        let raw = serde_json::to_value(&params).unwrap_or(Value::Null);
        let request = SampleRequest {
            server: self.server.clone(),
            system: params.system_prompt.clone(),
            messages: messages_of(&raw),
            max_tokens: params.max_tokens,
        };
        let prompt = request
            .messages
            .iter()
            .map(|(role, text)| format!("{role}: {text}"))
            .collect::<Vec<_>>()
            .join("\n");
        let action =
            crate::names::sampling_action(&self.server).map_err(|e| internal(e.to_string()))?;
        let detail = format!(
            "MCP server `{}` asks to call the model (up to {} tokens, charged to this session):\n{prompt}",
            self.server, request.max_tokens
        );
        let settled = self
            .pipeline
            .settle(None, &action, &detail)
            .await
            .map_err(|e| internal(e.to_string()))?;
        let called = settled.allowed() && self.sampler.is_some();
        self.pipeline
            .log()
            .record(
                None,
                McpSampling {
                    server: self.server.clone(),
                    prompt,
                    system_prompt: request.system.clone(),
                    max_tokens: request.max_tokens,
                    called,
                },
            )
            .map_err(|e| internal(e.to_string()))?;
        if !settled.allowed() {
            return Err(ErrorData::invalid_request(
                format!(
                    "Chock refused sampling: {}",
                    settled.refusal().unwrap_or_default()
                ),
                None,
            ));
        }
        let Some(sampler) = &self.sampler else {
            return Err(ErrorData::invalid_request(
                "this Chock session has no model to sample".to_string(),
                None,
            ));
        };
        let reply = sampler.sample(request).await.map_err(internal)?;
        serde_json::from_value(json!({
            "model": reply.model,
            "stopReason": reply.stop_reason,
            "role": "assistant",
            "content": {"type": "text", "text": reply.text},
        }))
        .map_err(|e| internal(e.to_string()))
    }

    pub(crate) async fn elicit(
        &self,
        request: ElicitRequestParams,
    ) -> Result<ElicitResult, ErrorData> {
        let raw = serde_json::to_value(&request).unwrap_or(Value::Null);
        let message = raw.get("message").and_then(Value::as_str).unwrap_or("");
        let url = raw
            .get("url")
            .and_then(Value::as_str)
            .filter(|_| raw.get("mode").and_then(Value::as_str) == Some("url"));
        let text = match url {
            Some(url) => format!(
                "MCP server `{}` asks you to open a page (Chock does not open it; reply `accept` once done, or nothing to decline):\n{message}\n{url}",
                self.server
            ),
            None => format!(
                "MCP server `{}` asks you (reply with JSON fitting the schema, or nothing to decline; fields left out take the schema's defaults):\n{message}\n{}",
                self.server,
                raw.get("requestedSchema")
                    .map(|s| serde_json::to_string_pretty(s).unwrap_or_default())
                    .unwrap_or_default()
            ),
        };
        let answer = self
            .pipeline
            .ask_person(None, &text)
            .await
            .map_err(|e| internal(e.to_string()))?;
        let reply = answer
            .map(|(_, reply)| reply.trim().to_string())
            .filter(|r| !r.is_empty());
        let result = match (reply, url) {
            (Some(reply), Some(_)) if reply.eq_ignore_ascii_case("accept") => {
                json!({"action": "accept"})
            }
            (Some(reply), None) => match serde_json::from_str::<Value>(&reply) {
                Ok(Value::Object(mut content)) => {
                    with_defaults(&mut content, raw.get("requestedSchema"));
                    json!({"action": "accept", "content": content})
                }
                _ => json!({"action": "decline"}),
            },
            _ => json!({"action": "decline"}),
        };
        serde_json::from_value(result).map_err(|e| internal(e.to_string()))
    }
}

/// Fills in every property of a form elicitation's schema that the answer left out and the schema
/// gives a `default` for (SEP-1034): the person accepted the form as shown, defaults included.
fn with_defaults(content: &mut serde_json::Map<String, Value>, schema: Option<&Value>) {
    let Some(properties) = schema
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object)
    else {
        return;
    };
    for (name, property) in properties {
        if let Some(default) = property.get("default")
            && !content.contains_key(name)
        {
            content.insert(name.clone(), default.clone());
        }
    }
}

impl Handler {
    /// The roots: only the project's path.
    pub(crate) fn roots(&self) -> Result<ListRootsResult, ErrorData> {
        let uri = format!("file://{}", self.root.display());
        serde_json::from_value(json!({
            "roots": [{"uri": uri, "name": "the project (read-only; the agent's workspace is not in the server's sandbox)"}]
        }))
        .map_err(|e| internal(e.to_string()))
    }
}

impl ClientHandler for Handler {
    fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> impl Future<Output = Result<CreateMessageResult, ErrorData>> + Send + '_ {
        self.sample(params)
    }

    fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> impl Future<Output = Result<ListRootsResult, ErrorData>> + Send + '_ {
        std::future::ready(self.roots())
    }

    fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> impl Future<Output = Result<ElicitResult, ErrorData>> + Send + '_ {
        self.elicit(request)
    }

    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        self.tools_changed.store(true, Ordering::SeqCst);
        std::future::ready(())
    }

    fn get_info(&self) -> ClientConfig {
        let capabilities: ClientCapabilities = serde_json::from_value(json!({
            "roots": {"listChanged": false},
            "sampling": {},
            "elicitation": {"form": {}, "url": {}},
        }))
        .unwrap_or_default();
        let info: Implementation = serde_json::from_value(json!({
            "name": "chock",
            "version": env!("CARGO_PKG_VERSION"),
        }))
        .unwrap_or_default();
        // The version an `initialize` offers: the newest one whose lifecycle is `initialize`.
        ClientConfig::new(capabilities, info)
            .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }
}
