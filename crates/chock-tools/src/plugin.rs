//! WebAssembly plugin tools (chock-plugin) in the registry: each tool a plugin lists is a
//! [`DynTool`] named `plugin__<plugin>__<tool>` and decided as `plugin.<plugin>.tool.<tool>` by the
//! toolbox like any other call. While it runs, every door it imports is its own act, settled
//! through the same decider under the same call id before it acts: `fs.read` and `fs.write` on the
//! workspace view (the session's throwaway copy, walked by descriptor, never through a symlink out,
//! never the policy file), and `net.fetch.<host>` through the broker's fetch, fetch_url's door.
//! The call's limits, what it used and how it ended are logged as `plugin.call` before its
//! `tool.result`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use chock_log::LogError;
use chock_plugin::{CallEnd, Doors, LoadedPlugin, Page, PluginEngine, PluginError, ToolDef};
use chock_policy::{Action, ActionError, Policy};
use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;

use super::ToolOutput;
use super::tool::{Access, Act, DynTool, Effect, Prepared, ToolContext, ToolFuture};
use crate::gate::Decider;
use crate::host::Host;

/// Loads every plugin the project's chock.toml configures (pin, compile, imports decided by
/// `policy`) and returns their tools, in chock.toml's order. The first plugin that cannot start
/// is the error: a configured plugin never silently goes missing.
pub fn load_all(project: &Path, policy: &Policy) -> Result<Vec<Arc<dyn DynTool>>, PluginError> {
    let mut tools: Vec<Arc<dyn DynTool>> = Vec::new();
    if policy.plugins().is_empty() {
        return Ok(tools);
    }
    let engine = PluginEngine::shared().map_err(|reason| PluginError::Engine {
        plugin: policy.plugins()[0].name.clone(),
        reason,
    })?;
    for config in policy.plugins() {
        let plugin = Arc::new(LoadedPlugin::load(&engine, project, config, policy)?);
        for index in 0..plugin.tools().len() {
            tools.push(Arc::new(PluginTool::new(Arc::clone(&plugin), index)));
        }
    }
    Ok(tools)
}

/// One tool of a loaded plugin.
pub struct PluginTool {
    plugin: Arc<LoadedPlugin>,
    index: usize,
    name: String,
    description: String,
}

impl std::fmt::Debug for PluginTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginTool")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl PluginTool {
    /// The tool `index` of `plugin`.
    pub fn new(plugin: Arc<LoadedPlugin>, index: usize) -> Self {
        let def = &plugin.tools()[index];
        let name = format!("plugin__{}__{}", plugin.name(), def.name);
        let description = format!(
            "{} (WebAssembly plugin `{}`; decided as {})",
            def.description,
            plugin.name(),
            def.action
        );
        Self {
            plugin,
            index,
            name,
            description,
        }
    }

    fn def(&self) -> &ToolDef {
        &self.plugin.tools()[self.index]
    }
}

impl DynTool for PluginTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> Value {
        self.def().input_schema.clone()
    }

    fn fixed_act(&self) -> Option<Action> {
        Some(self.def().action.clone())
    }

    fn effect(&self) -> Effect {
        let changes = self.plugin.imports().iter().any(|i| {
            matches!(
                i,
                chock_plugin::Import::Chock {
                    capability: chock_plugin::Capability::WorkspaceWrite
                        | chock_plugin::Capability::Fetch,
                    ..
                }
            )
        });
        if changes {
            Effect::Mutating
        } else {
            Effect::ReadOnly
        }
    }

    fn prepare(&self, input: &Value) -> Result<Box<dyn Prepared + '_>, serde_json::Error> {
        Ok(Box::new(PluginCall {
            tool: self,
            input: input.clone(),
        }))
    }
}

struct PluginCall<'t> {
    tool: &'t PluginTool,
    input: Value,
}

impl Prepared for PluginCall<'_> {
    fn access(&self) -> Result<Access, ActionError> {
        let def = self.tool.def();
        Ok(Access::Acts(vec![Act::new(
            def.action.clone(),
            format!(
                "plugin {} (sha256 {}) runs its tool {} on {}",
                self.tool.plugin.name(),
                self.tool.plugin.sha256(),
                def.name,
                self.input
            ),
        )]))
    }

    fn run<'a>(self: Box<Self>, cx: ToolContext<'a>) -> ToolFuture<'a>
    where
        Self: 'a,
    {
        Box::pin(async move {
            let plugin = Arc::clone(&self.tool.plugin);
            let tool = self.tool.def().name.clone();
            let input = self.input.to_string();
            let policy = match cx.decider.policy.read() {
                Ok(policy) => policy.clone(),
                Err(_) => return Ok(ToolOutput::error("the session's policy is poisoned".into())),
            };
            let changed = Arc::new(Mutex::new(Vec::new()));
            let (asks, mut asked) = tokio::sync::mpsc::unbounded_channel();
            let doors = AgentDoors {
                plugin: plugin.name().to_string(),
                host: Arc::clone(cx.host),
                asks,
                changed: Arc::clone(&changed),
            };
            let runner = Arc::clone(&plugin);
            let call_tool = tool.clone();
            let mut running = tokio::task::spawn_blocking(move || {
                runner.call(&policy, &call_tool, &input, Box::new(doors))
            });
            // The plugin runs on the blocking pool; each door it opens is settled here, on the
            // call's own task, and answered over the door's channel. Dropping this call drops
            // `asked`, so a door opened after it is refused, never decided.
            let report = loop {
                tokio::select! {
                    ended = &mut running => break ended,
                    Some(ask) = asked.recv() => ask.answer(cx.decider, cx.call_id, cx.host).await,
                }
            }
            .map_err(|e| LogError::Poisoned {
                path: cx.decider.log.dir().to_path_buf(),
                reason: format!("the plugin's thread failed: {e}"),
            })?;
            cx.decider.log.record(
                Some(cx.call_id),
                report.to_event(plugin.name(), &tool, plugin.sha256()),
            )?;
            let name = format!("plugin {} tool {tool}", plugin.name());
            let mut output = match report.end {
                CallEnd::Returned(text) => ToolOutput::ok(text),
                CallEnd::ToolError(text) => ToolOutput::error(format!("{name}: {text}")),
                CallEnd::Refused(reason) => ToolOutput::error(format!("refused: {reason}")),
                CallEnd::OutOfFuel => ToolOutput::error(format!(
                    "{name} was stopped: it used all its fuel ({}); nothing it returned is kept",
                    report.fuel_limit
                )),
                CallEnd::TimedOut => ToolOutput::error(format!(
                    "{name} was stopped: it ran past its timeout of {} s",
                    report.timeout.as_secs()
                )),
                CallEnd::MemoryCap(why) => {
                    ToolOutput::error(format!("{name} was stopped at its memory cap: {why}"))
                }
                CallEnd::OutputTooLarge { bytes } => ToolOutput::error(format!(
                    "{name} returned {bytes} bytes, over its output cap of {} bytes; none of it is kept",
                    report.output_limit
                )),
                CallEnd::Trapped(why) => ToolOutput::error(format!("{name} trapped: {why}")),
            };
            if let Ok(changed) = changed.lock() {
                for path in changed.iter() {
                    output = output.with_changed(path);
                }
            }
            Ok(output)
        })
    }
}

/// The doors of one plugin call, on the plugin's thread: every act is sent to the call's task,
/// which settles it through the agent's decider under the call's id (durably logged before it
/// acts) and, for a fetch, runs it through the broker; the door waits for the answer until the
/// call's deadline. Reads and writes are done here, on the workspace view, once allowed.
struct AgentDoors {
    plugin: String,
    host: Arc<Host>,
    asks: UnboundedSender<Ask>,
    changed: Arc<Mutex<Vec<PathBuf>>>,
}

/// What a door asks of the call's task, with where to send the answer.
enum Ask {
    /// Settle `action`: `Ok` if it may happen, the refusal in words if not.
    Settle {
        action: Action,
        detail: String,
        deadline: Instant,
        reply: std::sync::mpsc::SyncSender<Result<(), String>>,
    },
    /// Fetch `url` through the broker (which settles `net.fetch.<host>` itself).
    Fetch {
        url: String,
        deadline: Instant,
        reply: std::sync::mpsc::SyncSender<Result<Page, String>>,
    },
}

impl Ask {
    /// Answers this ask on the call's task, within its deadline.
    async fn answer(self, decider: &Decider, call_id: &str, host: &Host) {
        match self {
            Ask::Settle {
                action,
                detail,
                deadline,
                reply,
            } => {
                let settle = decider.settle(Some(call_id), &action, &detail);
                let answer = match within(deadline, settle).await {
                    Some(Ok(settled)) if settled.allowed => Ok(()),
                    Some(Ok(settled)) => Err(settled.refusal),
                    Some(Err(err)) => {
                        Err(format!("refused: the decision could not be logged: {err}"))
                    }
                    None => Err(format!(
                        "refused: {action} was not decided before the call's timeout"
                    )),
                };
                let _ = reply.send(answer);
            }
            Ask::Fetch {
                url,
                deadline,
                reply,
            } => {
                let config = host.network().clone();
                let work = super::web::with_broker(
                    decider,
                    &config,
                    call_id,
                    async move |broker: chock_broker::Broker| broker.fetch_url(&url).await,
                );
                let answer = match within(deadline, work).await {
                    Some(Ok(Ok(page))) => Ok(Page {
                        final_url: page.final_url,
                        status: page.status,
                        text: page.text,
                    }),
                    Some(Ok(Err(reason))) => Err(reason),
                    Some(Err(err)) => {
                        Err(format!("refused: the decision could not be logged: {err}"))
                    }
                    None => Err("the fetch did not finish before the call's timeout".into()),
                };
                let _ = reply.send(answer);
            }
        }
    }
}

/// `work`'s output if it ends before `deadline`.
async fn within<F: std::future::Future>(deadline: Instant, work: F) -> Option<F::Output> {
    tokio::time::timeout_at(tokio::time::Instant::from_std(deadline), work)
        .await
        .ok()
}

impl AgentDoors {
    /// Sends an ask made with `reply` to the call's task and waits for its answer until
    /// `deadline`. A call that is gone (dropped) or silent past the deadline is a refusal.
    fn ask<T>(
        &self,
        deadline: Instant,
        make: impl FnOnce(std::sync::mpsc::SyncSender<Result<T, String>>) -> Ask,
    ) -> Result<T, String> {
        let (reply, answer) = std::sync::mpsc::sync_channel(1);
        if self.asks.send(make(reply)).is_err() {
            return Err("refused: the call has ended".into());
        }
        let wait = deadline.saturating_duration_since(Instant::now());
        match answer.recv_timeout(wait) {
            Ok(answer) => answer,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                Err("refused: the act was not decided before the call's timeout".into())
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                Err("refused: the call has ended".into())
            }
        }
    }

    /// Settles `action` before `deadline`; the refusal in words if it may not happen.
    fn settle(&self, action: &Action, detail: &str, deadline: Instant) -> Result<(), String> {
        self.ask(deadline, |reply| Ask::Settle {
            action: action.clone(),
            detail: detail.to_string(),
            deadline,
            reply,
        })
    }
}

fn fixed(text: &str) -> Action {
    Action::parse(text).unwrap_or_else(|_| Action::exec_unparsed())
}

impl Doors for AgentDoors {
    fn read_file(&mut self, path: &str, deadline: Instant) -> Result<Vec<u8>, String> {
        self.settle(
            &fixed("fs.read"),
            &format!("plugin {} reads {path}", self.plugin),
            deadline,
        )?;
        let view = self.host.view();
        let rel = view.locate(path).map_err(|e| e.to_string())?;
        view.read(path, &rel).map_err(|e| e.to_string())
    }

    fn write_file(&mut self, path: &str, contents: &[u8], deadline: Instant) -> Result<(), String> {
        self.settle(
            &fixed("fs.write"),
            &format!(
                "plugin {} writes {} bytes to {path}",
                self.plugin,
                contents.len()
            ),
            deadline,
        )?;
        let view = self.host.view();
        let rel = view.locate(path).map_err(|e| e.to_string())?;
        view.write(path, &rel, contents)
            .map_err(|e| e.to_string())?;
        if let Ok(mut changed) = self.changed.lock() {
            changed.push(rel);
        }
        Ok(())
    }

    fn fetch(&mut self, url: &str, deadline: Instant) -> Result<Page, String> {
        self.ask(deadline, |reply| Ask::Fetch {
            url: url.to_string(),
            deadline,
            reply,
        })
    }
}
