//! What a tool is: the [`Tool`] trait a tool implements with a typed input, and [`DynTool`], the
//! object-safe form the [`Registry`](super::registry::Registry) holds (every `Tool` is one; a tool
//! whose schema is only known at run time, such as an MCP server's, implements `DynTool` itself).
//!
//! A tool never decides or logs by itself. It says which acts a given input needs ([`Access`]);
//! the [`Toolbox`](super::dispatch::Toolbox) logs `tool.call`, settles each act through the
//! decision seam and logs its `decision` before [`Tool::run`] is called, then logs `tool.result`.
//! An act that can only be named while the tool runs (a redirect, a command's classification, an
//! apply's digest) is settled by the tool through the same seam ([`ToolContext::decider`]) before
//! it acts on it.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use chock_log::LogError;
use chock_policy::{Action, ActionError};
use chock_protocol::live::ToolDisplay;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::ToolOutput;
use super::commands::Commands;
use super::seen::SeenLines;
use crate::events::{EventSink, PlanStep};
use crate::gate::Decider;
use crate::host::Host;

/// Whether a tool changes anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Reads, or changes only the session's own notes (its plan, its title): safe to repeat, and
    /// to offer in a mode that must change nothing.
    ReadOnly,
    /// Can change the workspace, the real project, the session's policy or something outside.
    Mutating,
}

/// One act a call needs decided before the tool runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Act {
    /// The act, as the table names it (`fs.write`, `plugin.lint.tool.check`).
    pub action: Action,
    /// What exactly would happen, in words, for a person or reviewer asked about it.
    pub detail: String,
}

impl Act {
    /// The act `action`, described by `detail`.
    pub fn new(action: Action, detail: impl Into<String>) -> Self {
        Self {
            action,
            detail: detail.into(),
        }
    }
}

/// What a call needs decided, and by whom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Access {
    /// It grants no capability (a plan, a title, a question to the person): its `decision` is
    /// still logged, as allowed, `grants no capability (why)`.
    Free {
        /// Why it needs nothing.
        why: &'static str,
    },
    /// These acts, settled in order before the tool runs, each `decision` logged before the next;
    /// the first refusal ends the call and the tool never runs.
    Acts(Vec<Act>),
    /// The acts are named while the tool runs, and the tool settles each through
    /// [`ToolContext::decider`] before acting on it (fetch_url: the URL and every redirect;
    /// restrict_self: a widening; request_action: the apply of a planned digest).
    AtRun {
        /// Who names and decides the acts, in words.
        by: &'static str,
    },
    /// The call is the session's confined call (run_command, the same path as `chock exec`): the
    /// session classifies the act, writes `tool.call`, decides it and records the command's end
    /// itself; the tool writes the `tool.result` the model reads. The toolbox logs nothing.
    Confined,
}

/// The future a tool's run returns: what the model reads, or a log failure (a failed tool is an
/// error *result*, not an error).
pub type ToolFuture<'a> = Pin<Box<dyn Future<Output = Result<ToolOutput, LogError>> + Send + 'a>>;

/// The state the built-in tools keep for one session.
pub struct ToolState {
    /// Which lines of which file versions the model was shown (edit_file's guard).
    pub seen: Mutex<SeenLines>,
    /// The model's plan (update_plan).
    pub plan: Mutex<Vec<PlanStep>>,
    /// The title the model set (set_title).
    pub title: Mutex<Option<String>>,
    /// The session's commands, foreground and background (run_command, read_output).
    pub commands: Commands,
    /// The subdirectories' AGENTS.md files the model was pointed to (the file tools name each once).
    pub pointed: Mutex<std::collections::BTreeSet<std::path::PathBuf>>,
}

impl std::fmt::Debug for ToolState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolState")
            .field("commands", &self.commands)
            .finish_non_exhaustive()
    }
}

impl ToolState {
    /// Fresh state for the session behind `host`.
    pub fn new(host: &Arc<Host>, decider: &Decider, sink: &Arc<dyn EventSink>) -> Self {
        Self {
            seen: Mutex::default(),
            plan: Mutex::default(),
            title: Mutex::default(),
            commands: Commands::new(Arc::clone(host), decider.clone(), Arc::clone(sink)),
            pointed: Mutex::default(),
        }
    }
}

/// What a running tool is given: the session, the call, the decision seam and the event sink.
#[derive(Clone, Copy)]
pub struct ToolContext<'a> {
    /// The model's id of this call: every event about it carries it.
    pub call_id: &'a str,
    /// The session: its log, policy, workspace view, confined call and network settings.
    pub host: &'a Arc<Host>,
    /// The decision seam: the table, then whoever must answer, logged before the act.
    pub decider: &'a Decider,
    /// Where progress goes (plan and title updates).
    pub sink: &'a Arc<dyn EventSink>,
    /// The built-in tools' session state.
    pub state: &'a ToolState,
}

impl std::fmt::Debug for ToolContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolContext")
            .field("call_id", &self.call_id)
            .finish_non_exhaustive()
    }
}

/// A tool with a typed input. Its schema is derived from `Input`, which also parses the model's
/// input, so the schema the model sees and the parser cannot drift apart.
pub trait Tool: Send + Sync + 'static {
    /// The input, as the model sends it.
    type Input: DeserializeOwned + schemars::JsonSchema + Send + Sync + 'static;

    /// The name the model calls it by: 1 to 64 of `A-Z a-z 0-9 _ -` (what every provider
    /// accepts; an MCP or plugin tool's *act* is `mcp.<server>.tool.<tool>`, its name is not).
    fn name(&self) -> &str;

    /// What it does, for the model; says which act it is decided as.
    fn description(&self) -> &str;

    /// Whether it changes anything.
    fn effect(&self) -> Effect;

    /// The acts `input` needs decided. An error naming an act is a refusal of the call.
    fn access(&self, input: &Self::Input) -> Result<Access, ActionError>;

    /// The act every call is decided as, whatever its input (`subagent.spawn`,
    /// `plugin.<plugin>.tool.<tool>`); `None` when the act depends on the input. A tool whose
    /// fixed act the table denies is never offered: nobody may call it.
    fn fixed_act(&self) -> Option<Action> {
        None
    }

    /// How a call with `input` (as the model sent it, parsed or not) is shown: clients use this,
    /// never the tool's name, to title a call, pick its icon and find the file it reads. By
    /// default: the name, kind other.
    fn display(&self, input: &Value) -> ToolDisplay {
        let _ = input;
        ToolDisplay::named(self.name())
    }

    /// Does the work, once every act of [`Tool::access`] was allowed.
    fn run<'a>(
        &'a self,
        cx: ToolContext<'a>,
        input: Self::Input,
    ) -> impl Future<Output = Result<ToolOutput, LogError>> + Send + 'a;
}

/// A call whose input parsed: what it needs, and how it runs.
pub trait Prepared: Send + Sync {
    /// The acts it needs decided.
    fn access(&self) -> Result<Access, ActionError>;

    /// Runs it.
    fn run<'a>(self: Box<Self>, cx: ToolContext<'a>) -> ToolFuture<'a>
    where
        Self: 'a;
}

/// A tool as the registry holds it. Every [`Tool`] is one; implement it directly only for a tool
/// whose input schema is known at run time (an MCP server's tool, a plugin's).
pub trait DynTool: Send + Sync {
    /// The name the model calls it by.
    fn name(&self) -> &str;

    /// What it does, for the model.
    fn description(&self) -> &str;

    /// The input's JSON Schema as providers take it ([`super::schema::for_provider`]); the
    /// registry checks every input against it before [`DynTool::prepare`].
    fn input_schema(&self) -> Value;

    /// Whether it changes anything.
    fn effect(&self) -> Effect;

    /// [`Tool::fixed_act`]: the act every call is decided as, if the input does not change it.
    fn fixed_act(&self) -> Option<Action> {
        None
    }

    /// [`Tool::display`]: how a call with `input` is shown.
    fn display(&self, input: &Value) -> ToolDisplay {
        let _ = input;
        ToolDisplay::named(self.name())
    }

    /// Parses `input` into a call.
    fn prepare(&self, input: &Value) -> Result<Box<dyn Prepared + '_>, serde_json::Error>;
}

struct TypedCall<'t, T: Tool> {
    tool: &'t T,
    input: T::Input,
}

impl<T: Tool> Prepared for TypedCall<'_, T> {
    fn access(&self) -> Result<Access, ActionError> {
        self.tool.access(&self.input)
    }

    fn run<'a>(self: Box<Self>, cx: ToolContext<'a>) -> ToolFuture<'a>
    where
        Self: 'a,
    {
        let TypedCall { tool, input } = *self;
        Box::pin(tool.run(cx, input))
    }
}

impl<T: Tool> DynTool for T {
    fn name(&self) -> &str {
        Tool::name(self)
    }

    fn description(&self) -> &str {
        Tool::description(self)
    }

    fn input_schema(&self) -> Value {
        super::schema::for_provider(schemars::schema_for!(T::Input))
    }

    fn effect(&self) -> Effect {
        Tool::effect(self)
    }

    fn fixed_act(&self) -> Option<Action> {
        Tool::fixed_act(self)
    }

    fn display(&self, input: &Value) -> ToolDisplay {
        Tool::display(self, input)
    }

    fn prepare(&self, input: &Value) -> Result<Box<dyn Prepared + '_>, serde_json::Error> {
        let input: T::Input = serde_json::from_value(input.clone())?;
        Ok(Box::new(TypedCall { tool: self, input }))
    }
}
