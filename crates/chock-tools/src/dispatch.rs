//! One tool call, from the model's request to the result it reads, for whichever tool the
//! [`Registry`] holds: the input is checked against the tool's schema and parsed, `tool.call` is
//! logged, the acts the tool names are settled (each `decision` logged before the act), the tool
//! runs, `tool.result` is logged. A call the session's confined call carries (run_command) is
//! recorded by the session itself.

use std::sync::{Arc, PoisonError};

use chock_log::LogError;
use chock_policy::Decision;
use chock_protocol::log::{ShownLines, ToolCall, ToolResult};
use chock_provider::ToolSpec;
use serde_json::Value;

mod acts;

use super::ToolOutput;
use super::registry::{CallError, Registry, RegistryError};
use super::tool::{Access, Act, DynTool, ToolContext, ToolState};
use crate::events::EventSink;
use crate::gate::{Decider, Settled};
use crate::host::Host;

/// Runs the model's tool calls for one session.
pub struct Toolbox {
    host: Arc<Host>,
    decider: Decider,
    sink: Arc<dyn EventSink>,
    registry: Registry,
    state: ToolState,
    calls: u32,
}

impl std::fmt::Debug for Toolbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Toolbox")
            .field("tools", &self.registry)
            .field("calls", &self.calls)
            .finish_non_exhaustive()
    }
}

/// A settled "no capability needed" decision, for tools that grant nothing (plan, title, guidance).
fn no_capability(why: &str) -> Settled {
    Settled {
        allowed: true,
        decision: Decision::Allow,
        decided_by: format!("grants no capability ({why})"),
        exact_rule: false,
        refusal: String::new(),
    }
}

/// A call refused before any act could be named: the tool is unknown, its input does not fit, or
/// it could not name its act.
fn refused(decided_by: String, refusal: String) -> Settled {
    Settled {
        allowed: false,
        decision: Decision::Deny,
        decided_by,
        exact_rule: false,
        refusal,
    }
}

fn refused_call(err: &CallError) -> Settled {
    match err {
        CallError::Unknown { name } => refused(
            format!("no tool named {name}"),
            format!("there is no tool named {name}"),
        ),
        CallError::Field { .. } | CallError::Parse { .. } => refused(
            format!("bad input: {err}"),
            format!("bad input: {err}; see the tool's schema"),
        ),
    }
}

impl Toolbox {
    /// The built-in tools, for one session.
    pub fn new(host: Arc<Host>, decider: Decider, sink: Arc<dyn EventSink>) -> Self {
        Self::with_registry(host, decider, sink, Registry::builtin())
    }

    /// The tools of `registry`, for one session.
    pub fn with_registry(
        host: Arc<Host>,
        decider: Decider,
        sink: Arc<dyn EventSink>,
        registry: Registry,
    ) -> Self {
        let state = ToolState::new(&host, &decider, &sink);
        Self {
            host,
            decider,
            sink,
            registry,
            state,
            calls: 0,
        }
    }

    /// Adds a tool for the rest of the session: it is offered from the next request on.
    pub fn register(&mut self, tool: impl DynTool + 'static) -> Result<(), RegistryError> {
        self.registry.register(tool)
    }

    /// Adds a tool another part holds too (an MCP server's, a plugin's): offered from the next
    /// request on.
    pub fn register_shared(&mut self, tool: Arc<dyn DynTool>) -> Result<(), RegistryError> {
        self.registry.register_shared(tool)
    }

    /// The session's tools.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// What the model is offered: every tool's name, description and input schema.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.registry.specs()
    }

    /// Takes back what the model was shown of files, as a log recorded it (resume).
    pub fn restore_seen(&self, shown: &[ShownLines]) {
        if let Ok(mut seen) = self.state.seen.lock() {
            for entry in shown {
                seen.restore(std::path::Path::new(&entry.path), &entry.hash, &entry.lines);
            }
            seen.take_changes();
        }
    }

    /// How many tool calls were made.
    pub fn calls(&self) -> u32 {
        self.calls
    }

    /// The title the model set, if any.
    pub fn title(&self) -> Option<String> {
        self.state
            .title
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Lines telling the model which background commands ended since it last heard.
    pub fn background_notes(&self) -> Vec<String> {
        self.state.commands.ended_notes()
    }

    /// A background command another process ran for this session before it was handed over
    /// (`handle`, running `command`), which ended with `status`: read_output says so. Its output
    /// stayed with that process.
    pub fn ended_elsewhere(&self, handle: &str, command: &str, status: Option<i32>) {
        self.state.commands.ended_elsewhere(handle, command, status);
    }

    /// Waits for (and records the end of) background commands before the session ends.
    pub async fn finish_background(&self) {
        self.state.commands.finish_all().await;
    }

    /// The session is let go (a handover): background commands the session's keeper keeps move
    /// with it; any other is waited for and its end recorded here.
    pub async fn release_background(&self) {
        self.state.commands.release_all().await;
    }

    /// A new owner: the handles of the background commands the old owner's keeper still keeps
    /// (this owner holds the keeper from now on).
    pub fn take_up_kept(&self) -> Vec<String> {
        self.state.commands.take_up_kept()
    }

    /// A new owner: follows the kept background command `handle` (running `command`) to its end,
    /// recording the rest of its output and its end (its `command.result` unless `has_result`).
    pub fn follow_kept(&self, handle: &str, command: &str, has_result: bool) {
        self.state.commands.follow_kept(handle, command, has_result);
    }

    /// Background work that is not a command (a background subagent a new owner adopted): see
    /// [`crate::commands::Commands::run_in_background`].
    pub fn run_in_background(
        &self,
        handle: &str,
        what: &str,
        work: impl FnOnce(
            crate::commands::Released,
        )
            -> chock_sandbox::BoxFuture<'static, Option<crate::commands::BackgroundEnd>>,
    ) {
        self.state.commands.run_in_background(handle, what, work);
    }

    /// Runs one call and returns what the model reads. Errors are only the log's: a failed tool is
    /// an error *result*, not an error.
    pub async fn call(
        &mut self,
        call_id: &str,
        name: &str,
        input: &Value,
    ) -> Result<ToolOutput, LogError> {
        self.calls += 1;
        let prepared = match self.registry.prepare(name, input) {
            Ok(prepared) => prepared,
            Err(err) => return self.refuse(call_id, name, input, &refused_call(&err)),
        };
        let access = match prepared.access() {
            Ok(access) => access,
            Err(err) => {
                let settled = refused(
                    format!("internal: {err}"),
                    format!("internal error naming the act: {err}"),
                );
                return self.refuse(call_id, name, input, &settled);
            }
        };
        let cx = ToolContext {
            call_id,
            host: &self.host,
            decider: &self.decider,
            sink: &self.sink,
            state: &self.state,
        };
        if access == Access::Confined {
            return prepared.run(cx).await;
        }
        self.log_call(call_id, name, input)?;
        match &access {
            Access::Free { why } => self.without_table(call_id, &no_capability(why))?,
            Access::Acts(acts) if acts.is_empty() => {
                self.without_table(call_id, &no_capability("it names no act"))?;
            }
            Access::Acts(acts) => {
                for act in acts {
                    let settled = self.settle(call_id, act).await?;
                    if !settled.allowed {
                        let output = ToolOutput::error(settled.refusal);
                        return self.result(call_id, name, output);
                    }
                }
            }
            Access::AtRun { .. } | Access::Confined => {}
        }
        let output = prepared.run(cx).await?;
        self.result(call_id, name, output)
    }

    /// The decision seam for an act the tool named: settled by the table and whoever must answer,
    /// its `decision` logged before this returns.
    async fn settle(&self, call_id: &str, act: &Act) -> Result<Settled, LogError> {
        self.decider
            .settle(Some(call_id), &act.action, &act.detail)
            .await
    }

    /// The decision seam for a call no table row decides (no capability, or refused before an act).
    fn without_table(&self, call_id: &str, settled: &Settled) -> Result<(), LogError> {
        self.decider.decide_without_table(call_id, None, settled)
    }

    /// Records a call refused before anything was decided: call, decision, result.
    fn refuse(
        &self,
        call_id: &str,
        name: &str,
        input: &Value,
        settled: &Settled,
    ) -> Result<ToolOutput, LogError> {
        self.log_call(call_id, name, input)?;
        self.without_table(call_id, settled)?;
        self.result(call_id, name, ToolOutput::error(settled.refusal.clone()))
    }

    fn log_call(&self, call_id: &str, name: &str, input: &Value) -> Result<(), LogError> {
        self.decider.log.record(
            Some(call_id),
            ToolCall {
                tool: name.to_string(),
                input: Some(input.clone()),
                argv: None,
                cwd: None,
                action: None,
                resolved: None,
            },
        )?;
        Ok(())
    }

    fn result(
        &self,
        call_id: &str,
        name: &str,
        output: ToolOutput,
    ) -> Result<ToolOutput, LogError> {
        self.decider.log.record(
            Some(call_id),
            ToolResult {
                tool: name.to_string(),
                is_error: output.is_error,
                output: output.text.clone(),
                changed: output
                    .changed
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect(),
                shown: self
                    .state
                    .seen
                    .lock()
                    .map(|mut seen| seen.take_changes())
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(path, hash, lines)| ShownLines {
                        path: path.display().to_string(),
                        hash,
                        lines,
                    })
                    .collect(),
            },
        )?;
        Ok(output)
    }
}
