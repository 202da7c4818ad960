//! MCP servers as Chock tools (docs/mcp.md).
//!
//! A server comes from a project's chock.toml, the person's config.toml or an editor's ACP
//! `session/new` ([`Configured`]). One a project brings starts only once the person trusted its
//! exact definition ([`trust`]). A stdio server runs confined by the same plan and driver as every
//! call (chock-session's service); rmcp (the official SDK) speaks to it over its pipes. A
//! streamable HTTP server is reached by the host, every connection opened by the broker's door
//! and decided as `net.connect.<host>.<port>` (crate::remote, crate::http). Each tool
//! it lists is hashed and checked against the hash pinned when it was approved; every call is the
//! act `mcp.<server>.tool.<tool>` settled by the one pipeline, made stricter (never looser) by
//! the server's own annotations. The agent registers the tools [`McpHub::offered`] returns: a tool
//! the table denies, or one that would ask with nobody to ask, is never offered.

#![forbid(unsafe_code)]
// No library makes an async runtime or blocks on one (the workspace's clippy.toml).
#![cfg_attr(not(test), deny(clippy::disallowed_methods))]

pub mod client;
mod declared;
mod door;
mod error;
pub mod files;
pub mod gate;
mod http;
mod http_error;
mod mrtr;
pub mod names;
mod negotiate;
pub mod oauth;
mod remote;
pub mod server;
mod sign_in_question;
mod sse;
mod stdio;
pub mod tools;
pub mod trust;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use chock_decide::{Harness, Pipeline, Role, Ruling};
use chock_policy::mcp::ServerDef;
use chock_policy::{Decision, Policy};
use chock_session::Session;
use serde_json::{Value, json};

pub use client::{SampleFuture, SampleReply, SampleRequest, Sampler};
pub use error::McpError;
pub use files::ProjectFiles;
pub use remote::destination_action;
pub use server::{Listed, PinState, Server, StartContext};
pub use sign_in_question::QuestionBrowser;
pub use tools::ToolDef;
pub use trust::{FileChange, Origin, TrustState, TrustStore, default_trust_path};

/// One server definition and where it came from; `hash` is the SHA-256 of the definition (what
/// trusting it records).
#[derive(Debug, Clone)]
pub struct Configured {
    /// The checked definition.
    pub def: ServerDef,
    /// Where it came from.
    pub origin: Origin,
    /// Its hash.
    pub hash: String,
}

impl Configured {
    /// `def` from `origin`, hashed.
    pub fn new(def: ServerDef, origin: Origin) -> Self {
        let hash = tools::hash_of(&serde_json::to_value(&def).unwrap_or(Value::Null));
        Configured { def, origin, hash }
    }
}

/// Every server configured for `project`: the project's chock.toml's (from `policy`) and the
/// person's config.toml's (`user`, read from `user_file`). A name both define is the person's:
/// their own configuration wins over a repository's.
pub fn configured(
    policy: &Policy,
    project: &Path,
    user: &[ServerDef],
    user_file: Option<&Path>,
) -> Vec<Configured> {
    let mut out: Vec<Configured> = user
        .iter()
        .map(|def| {
            Configured::new(
                def.clone(),
                Origin::User {
                    file: user_file.map_or_else(|| PathBuf::from("config.toml"), Path::to_path_buf),
                },
            )
        })
        .collect();
    let project = project
        .canonicalize()
        .unwrap_or_else(|_| project.to_path_buf());
    let file = policy
        .project_file()
        .map_or_else(|| project.join("chock.toml"), Path::to_path_buf);
    for def in policy.mcp_servers() {
        if out.iter().any(|c| c.def.name == def.name) {
            continue;
        }
        out.push(Configured::new(
            def.clone(),
            Origin::Project {
                project: project.clone(),
                file: file.clone(),
            },
        ));
    }
    out
}

/// The servers of one session. They run on the runtime of whoever started them (rmcp's tasks,
/// the stderr drains, a networked server's proxy): that runtime outlives the session, whose
/// front end drives it. Stopping them ([`McpHub::stop`]) ends each through its confiner's
/// handle and waits until every process of it is gone; a hub dropped unstopped kills them
/// without waiting.
pub struct McpHub {
    servers: Vec<Arc<Server>>,
    /// Servers that did not start, with why (they are logged too).
    failures: Vec<(String, McpError)>,
}

impl std::fmt::Debug for McpHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpHub")
            .field("servers", &self.servers)
            .finish_non_exhaustive()
    }
}

/// What a tool call came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallOutcome {
    /// Refused before the server heard of it (the table, a person, a changed definition).
    Refused {
        /// Why, in words.
        reason: String,
    },
    /// The server answered.
    Answered {
        /// Its content as text.
        text: String,
        /// Whether it reported an error.
        is_error: bool,
    },
}

impl McpHub {
    /// Starts every server in `servers` for `session`, on the caller's runtime. A server that
    /// is not trusted, or does not start, is logged and left out (see [`McpHub::failures`]); the
    /// others go on.
    pub async fn start(
        session: &Session,
        servers: &[Configured],
        cx: &StartContext,
    ) -> Result<McpHub, McpError> {
        let mut started = Vec::new();
        let mut failures = Vec::new();
        for configured in servers {
            // Its paths and variables, checked again now (the host may have changed since its
            // table was read): a refusal is logged and the server left out.
            if let Err(e) = declared::check_logged(session, configured, servers) {
                failures.push((configured.def.name.clone(), e));
                continue;
            }
            match server::start(session, configured, cx).await {
                Ok(server) => started.push(Arc::new(server)),
                Err(e) => failures.push((configured.def.name.clone(), e)),
            }
        }
        Ok(McpHub {
            servers: started,
            failures,
        })
    }

    /// The running servers.
    pub fn servers(&self) -> &[Arc<Server>] {
        &self.servers
    }

    /// The servers that did not start, and why.
    pub fn failures(&self) -> &[(String, McpError)] {
        &self.failures
    }

    /// The decision a call of `def` would get from `pipeline`'s table, made stricter by its
    /// annotations.
    pub fn decision_for(pipeline: &Pipeline, def: &ToolDef) -> Decision {
        def.decision(pipeline.verdict(&def.action).decision)
    }

    /// The tools to offer the model: every pinned tool whose act the table does not deny and that
    /// does not need someone `pipeline` cannot ask.
    pub fn offered(&self, pipeline: &Pipeline) -> Vec<McpTool> {
        let broker = pipeline.broker();
        let mut out = Vec::new();
        for server in &self.servers {
            for listed in server.tools() {
                if listed.pin != PinState::Pinned {
                    continue;
                }
                let offer = match Self::decision_for(pipeline, &listed.def) {
                    Decision::Allow => true,
                    Decision::Deny => false,
                    Decision::Ask | Decision::AgentThenHuman => broker.has(Role::Human),
                    Decision::AgentReview => broker.has(Role::Reviewer),
                };
                if offer {
                    out.push(McpTool {
                        server: Arc::clone(server),
                        model_name: names::model_name(server.name(), &listed.def.name),
                        def: listed.def,
                    });
                }
            }
        }
        out
    }

    /// Stops every server, each logged `mcp.server` `stopped` with `reason`: its MCP session
    /// ended, then its sandbox killed through its handle and waited for.
    pub async fn stop(&mut self, reason: &str) {
        for server in std::mem::take(&mut self.servers) {
            server.stop_client().await;
            server.stop_service(Some(reason)).await;
        }
    }
}

impl Drop for McpHub {
    /// Unstopped (the hub goes with its session, whose log may already end with `session.end`,
    /// maybe outside any runtime): each server's sandbox is killed through its handle without
    /// logging, and its client dropped (which cancels rmcp's tasks).
    fn drop(&mut self) {
        for server in &self.servers {
            server.kill_service();
        }
    }
}

/// One tool offered to the model.
#[derive(Debug, Clone)]
pub struct McpTool {
    server: Arc<Server>,
    def: ToolDef,
    model_name: String,
}

fn content_text(result: &Value) -> String {
    let mut parts = Vec::new();
    if let Some(items) = result.get("content").and_then(Value::as_array) {
        for item in items {
            match item.get("text").and_then(Value::as_str) {
                Some(text) => parts.push(text.to_string()),
                None => parts.push(format!(
                    "[{} content]",
                    item.get("type").and_then(Value::as_str).unwrap_or("other")
                )),
            }
        }
    }
    if parts.is_empty()
        && let Some(structured) = result.get("structuredContent")
    {
        parts.push(structured.to_string());
    }
    parts.join("\n")
}

impl McpTool {
    /// The name the model calls it by.
    pub fn model_name(&self) -> &str {
        &self.model_name
    }

    /// Its definition (as approved).
    pub fn def(&self) -> &ToolDef {
        &self.def
    }

    /// The server's name.
    pub fn server(&self) -> &str {
        self.server.name()
    }

    /// What the model is told it is.
    pub fn description(&self) -> String {
        format!(
            "{} (MCP server `{}`, tool `{}`; decided as `{}`)",
            self.def.description.trim(),
            self.server.name(),
            self.def.name,
            self.def.action
        )
    }

    /// Its input schema, as the server gives it.
    pub fn input_schema(&self) -> Value {
        let mut schema = self.def.input_schema.clone();
        if schema.get("type").is_none()
            && let Value::Object(map) = &mut schema
        {
            map.insert("type".into(), json!("object"));
        }
        schema
    }

    /// One call with `arguments`, as call `call_id`: the definition is checked against its pin,
    /// the act settled by `pipeline` (the table made stricter by the annotations; the question
    /// shows the raw server, tool and arguments), and only then is the server asked.
    pub async fn call(
        &self,
        call_id: &str,
        arguments: &Value,
        pipeline: &Pipeline,
    ) -> Result<CallOutcome, McpError> {
        self.server.refresh_if_changed().await?;
        let now = self
            .server
            .tools()
            .into_iter()
            .find(|l| l.def.name == self.def.name);
        let current = match now {
            Some(l) if l.pin == PinState::Pinned && l.def.hash == self.def.hash => l.def,
            _ => {
                let why = format!(
                    "the definition of MCP tool `{}` of server `{}` changed since it was approved: run `chock mcp trust {}` to review it",
                    self.def.name,
                    self.server.name(),
                    self.server.name()
                );
                pipeline.decide_without_table(
                    Some(call_id),
                    Some(&self.def.action),
                    Harness::Refuse { why: why.clone() },
                )?;
                return Ok(CallOutcome::Refused { reason: why });
            }
        };
        let args_text = serde_json::to_string_pretty(arguments).unwrap_or_default();
        let verdict = pipeline.verdict(&current.action);
        let mut ruling = Ruling::of(&verdict, &current.action);
        if let Some((floor, why)) = current.annotation_floor()
            && floor.is_stricter_than(ruling.decision)
        {
            ruling.decision = floor;
            ruling.rule = format!("{} made stricter: {why}", ruling.rule);
        }
        ruling.context = vec![
            format!("server: {}", self.server.name()),
            format!("tool: {}", current.name),
            format!("arguments: {}", arguments),
        ];
        let detail = format!(
            "call MCP server `{}` tool `{}` with arguments:\n{args_text}",
            self.server.name(),
            current.name
        );
        let settled = pipeline
            .settle_ruled(Some(call_id), &current.action, &detail, ruling)
            .await?;
        if !settled.allowed() {
            return Ok(CallOutcome::Refused {
                reason: settled.refusal().unwrap_or_else(|| "refused".to_string()),
            });
        }
        let mut params = rmcp::model::CallToolRequestParams::new(current.name.clone());
        params.arguments = arguments.as_object().cloned();
        let peer = self.server.peer.clone();
        let handler = self.server.handler.clone();
        let timeout = self.server.configured.def.call_timeout();
        let name = self.server.name().to_string();
        let result = tokio::time::timeout(timeout, mrtr::call_tool(&peer, &handler, params))
            .await
            .map_err(|_| McpError::Timeout {
                server: name.clone(),
                what: format!("tools/call {}", current.name),
            })?
            .map_err(|e| McpError::Protocol {
                server: name,
                message: e.to_string(),
            })?;
        let value = serde_json::to_value(&result).unwrap_or(Value::Null);
        Ok(CallOutcome::Answered {
            text: content_text(&value),
            is_error: value
                .get("isError")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        })
    }
}
