//! One tool call, from the model's request to the result it reads: `tool.call` is logged, the act is
//! named and decided (`decision` logged before the act), the tool runs, `tool.result` is logged.

use std::sync::{Arc, Mutex};

use chock_log::{EventKind, LogError};
use chock_policy::{Action, Decision};
use serde::Deserialize;
use serde_json::{Value, json};

mod acts;

use super::ToolOutput;
use super::commands::Commands;
use super::files;
use super::seen::SeenLines;
use crate::events::{AgentEvent, EventSink, PlanStep};
use crate::gate::{Decider, Settled};
use crate::host::Host;
use crate::prompt::{GUIDANCE, guidance};

/// Runs the model's tool calls for one session.
pub struct Toolbox {
    host: Arc<Host>,
    decider: Decider,
    sink: Arc<dyn EventSink>,
    seen: Mutex<SeenLines>,
    commands: Commands,
    calls: u32,
    title: Option<String>,
    plan: Vec<PlanStep>,
}

impl std::fmt::Debug for Toolbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Toolbox")
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

fn bad_input(tool: &str, err: &serde_json::Error) -> Settled {
    Settled {
        allowed: false,
        decision: Decision::Deny,
        decided_by: format!("the input of {tool} did not parse: {err}"),
        exact_rule: false,
        refusal: format!("bad input for {tool}: {err}; see the tool's schema"),
    }
}

fn parse<T: for<'de> Deserialize<'de>>(tool: &str, input: &Value) -> Result<T, Settled> {
    serde_json::from_value(input.clone()).map_err(|err| bad_input(tool, &err))
}

#[derive(Deserialize)]
struct PlanInput {
    steps: Vec<PlanStep>,
}
#[derive(Deserialize)]
struct TitleInput {
    title: String,
}
#[derive(Deserialize)]
struct GuidanceInput {
    topic: String,
}
#[derive(Deserialize)]
struct AskInput {
    question: String,
}
#[derive(Deserialize)]
struct RestrictInput {
    action: String,
    decision: String,
}
#[derive(Deserialize)]
struct RequestInput {
    action: String,
    #[serde(default)]
    reason: String,
}

/// A parsed call: the act it needs decided (None: grants no capability) and how to run it.
enum Planned {
    Fs(Action, String, FsCall),
    Command,
    ReadOutput(Value),
    Plan(PlanInput),
    Title(TitleInput),
    Guidance(GuidanceInput),
    Ask(AskInput),
    Restrict(RestrictInput),
    Request(RequestInput),
    Fetch(super::web::FetchInput),
    Search(super::web::SearchInput),
}

enum FsCall {
    Read(files::ReadFileInput),
    Write(files::WriteFileInput),
    Edit(files::EditFileInput),
    List(files::ListInput),
    Glob(files::GlobInput),
    Grep(files::GrepInput),
}

impl Toolbox {
    /// The tools of one session.
    pub fn new(host: Arc<Host>, decider: Decider, sink: Arc<dyn EventSink>) -> Self {
        let commands = Commands::new(Arc::clone(&host), decider.clone(), Arc::clone(&sink));
        Self {
            host,
            decider,
            sink,
            seen: Mutex::default(),
            commands,
            calls: 0,
            title: None,
            plan: Vec::new(),
        }
    }

    /// How many tool calls were made.
    pub fn calls(&self) -> u32 {
        self.calls
    }

    /// The title the model set, if any.
    pub fn title(&self) -> Option<String> {
        self.title.clone()
    }

    /// Lines telling the model which background commands ended since it last heard.
    pub fn background_notes(&self) -> Vec<String> {
        self.commands.ended_notes()
    }

    /// Waits for (and records the end of) background commands before the session ends.
    pub async fn finish_background(&self) {
        self.commands.finish_all().await;
    }

    fn plan_call(name: &str, input: &Value) -> Result<Planned, Settled> {
        let read = || Action::parse("fs.read").map_err(|e| bad_action(&e));
        let write = || Action::parse("fs.write").map_err(|e| bad_action(&e));
        Ok(match name {
            "read_file" => {
                let i: files::ReadFileInput = parse(name, input)?;
                let detail = format!("read {}", i.path);
                Planned::Fs(read()?, detail, FsCall::Read(i))
            }
            "list" => {
                let i: files::ListInput = parse(name, input)?;
                let detail = format!("list {}", i.path.as_deref().unwrap_or("."));
                Planned::Fs(read()?, detail, FsCall::List(i))
            }
            "glob" => {
                let i: files::GlobInput = parse(name, input)?;
                let detail = format!("find files matching {}", i.pattern);
                Planned::Fs(read()?, detail, FsCall::Glob(i))
            }
            "grep" => {
                let i: files::GrepInput = parse(name, input)?;
                let detail = format!(
                    "search {} for /{}/",
                    i.path.as_deref().unwrap_or("the project"),
                    i.pattern
                );
                Planned::Fs(read()?, detail, FsCall::Grep(i))
            }
            "write_file" => {
                let i: files::WriteFileInput = parse(name, input)?;
                let detail = format!("write {} ({} bytes)", i.path, i.content.len());
                Planned::Fs(write()?, detail, FsCall::Write(i))
            }
            "edit_file" => {
                let i: files::EditFileInput = parse(name, input)?;
                let detail = format!("edit {}", i.path);
                Planned::Fs(write()?, detail, FsCall::Edit(i))
            }
            "run_command" => Planned::Command,
            "read_output" => Planned::ReadOutput(input.clone()),
            "update_plan" => Planned::Plan(parse(name, input)?),
            "set_title" => Planned::Title(parse(name, input)?),
            "read_guidance" => Planned::Guidance(parse(name, input)?),
            "ask_user" => Planned::Ask(parse(name, input)?),
            "restrict_self" => Planned::Restrict(parse(name, input)?),
            "request_action" => Planned::Request(parse(name, input)?),
            "fetch_url" => Planned::Fetch(parse(name, input)?),
            "web_search" => Planned::Search(parse(name, input)?),
            other => {
                return Err(Settled {
                    allowed: false,
                    decision: Decision::Deny,
                    decided_by: format!("no tool named {other}"),
                    exact_rule: false,
                    refusal: format!("there is no tool named {other}"),
                });
            }
        })
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
        if name == "run_command" {
            // The session's confined call logs tool.call, decision and tool.result itself, so `chock exec`
            // and run_command cannot drift apart.
            return self.commands.run(call_id, input).await;
        }
        let log = self.decider.log.clone();
        log.append(
            EventKind::ToolCall,
            Some(call_id),
            json!({ "tool": name, "input": input }),
        )?;
        let planned = match Self::plan_call(name, input) {
            Ok(planned) => planned,
            Err(settled) => {
                self.decider.log_decision(call_id, None, &settled)?;
                return self.result(call_id, name, ToolOutput::error(settled.refusal));
            }
        };
        let output = match planned {
            Planned::Fs(action, detail, call) => {
                let settled = self.decider.settle(Some(call_id), &action, &detail).await?;
                self.decider
                    .log_decision(call_id, Some(&action), &settled)?;
                if !settled.allowed {
                    return self.result(call_id, name, ToolOutput::error(settled.refusal));
                }
                let view = self.host.view();
                let mut seen = self
                    .seen
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let out = match call {
                    FsCall::Read(i) => files::read_file(view, &mut seen, &i),
                    FsCall::Write(i) => files::write_file(view, &mut seen, &i),
                    FsCall::Edit(i) => files::edit_file(view, &mut seen, &i),
                    FsCall::List(i) => files::list(view, &i),
                    FsCall::Glob(i) => files::glob(view, &i),
                    FsCall::Grep(i) => files::grep(view, &mut seen, &i),
                };
                drop(seen);
                if !out.changed.is_empty() {
                    self.host.checkpoint(&format!("{name} {call_id}"));
                }
                out
            }
            Planned::Command => unreachable_command(),
            Planned::ReadOutput(input) => {
                self.decider.log_decision(
                    call_id,
                    None,
                    &no_capability("reads a command this session already ran"),
                )?;
                self.commands.read_output(&input)
            }
            Planned::Plan(i) => {
                self.decider
                    .log_decision(call_id, None, &no_capability("a plan is words"))?;
                self.plan = i.steps;
                self.sink.emit(&AgentEvent::PlanUpdated {
                    steps: self.plan.clone(),
                });
                let lines: Vec<String> = self
                    .plan
                    .iter()
                    .map(|s| format!("[{}] {}", s.status, s.step))
                    .collect();
                ToolOutput::ok(format!("plan updated:\n{}", lines.join("\n")))
            }
            Planned::Title(i) => {
                self.decider
                    .log_decision(call_id, None, &no_capability("a title is words"))?;
                let title: String = i.title.trim().chars().take(100).collect();
                self.title = Some(title.clone());
                self.sink.emit(&AgentEvent::TitleSet {
                    title: title.clone(),
                });
                ToolOutput::ok(format!("title set: {title}"))
            }
            Planned::Guidance(i) => {
                self.decider.log_decision(
                    call_id,
                    None,
                    &no_capability("the shelf is compiled in"),
                )?;
                match guidance(&i.topic) {
                    Some(text) => ToolOutput::ok(text.to_string()),
                    None => ToolOutput::error(format!(
                        "no guidance on {:?}; topics: {}",
                        i.topic,
                        GUIDANCE
                            .iter()
                            .map(|(t, _)| *t)
                            .collect::<Vec<_>>()
                            .join(", ")
                    )),
                }
            }
            Planned::Ask(i) => {
                self.decider.log_decision(
                    call_id,
                    None,
                    &no_capability("a question to the person"),
                )?;
                self.ask_user(call_id, &i.question).await?
            }
            Planned::Restrict(i) => self.restrict_self(call_id, &i).await?,
            Planned::Request(i) => self.request_action(call_id, &i).await?,
            // The broker asks the gate, which logs each decision (URL and every redirect) before it connects.
            Planned::Fetch(i) => {
                super::web::fetch_url(&self.decider, self.host.network(), call_id, &i).await?
            }
            Planned::Search(i) => {
                super::web::web_search(&self.decider, self.host.network(), call_id, &i).await?
            }
        };
        self.result(call_id, name, output)
    }

    fn result(
        &self,
        call_id: &str,
        name: &str,
        output: ToolOutput,
    ) -> Result<ToolOutput, LogError> {
        let changed: Vec<String> = output
            .changed
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        self.decider.log.append(
            EventKind::ToolResult,
            Some(call_id),
            json!({
                "tool": name,
                "is_error": output.is_error,
                "output": output.text,
                "changed": changed,
            }),
        )?;
        Ok(output)
    }
}

fn bad_action(err: &chock_policy::ActionError) -> Settled {
    Settled {
        allowed: false,
        decision: Decision::Deny,
        decided_by: format!("internal: {err}"),
        exact_rule: false,
        refusal: format!("internal error naming the act: {err}"),
    }
}

fn unreachable_command() -> ToolOutput {
    ToolOutput::error("run_command is handled by the session's confined call".into())
}
