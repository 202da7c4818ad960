//! `spawn_agent`: one child session in its own `chock` process, from the spawn's record to its end's.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use chock_log::{Event, EventKind, LogError, SessionId};
use chock_policy::{Action, ActionError};
use chock_protocol::EventData;
use chock_protocol::log::{AgentComplete, BudgetAmount, SessionSpawn};
use schemars::JsonSchema;
use serde::Deserialize;

use super::changes::{changes_of, snapshot};
use super::child::{read_end, report, start};
use super::{ChildSpec, Subagents, child_dir};
use chock_tools::ToolOutput;
use chock_tools::tool::{Access, Act, Effect, Tool, ToolContext};

/// `spawn_agent`'s input.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct SpawnInput {
    /// What the child agent should do: a whole task, with everything it needs to know (it does
    /// not see this conversation).
    pub task: String,
    /// Dollars of this session's budget to reserve for the child (default: half of what is left).
    #[serde(default)]
    pub budget_usd: Option<f64>,
    /// Tokens of this session's budget to reserve for the child (default: half of what is left).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub budget_tokens: Option<u64>,
    /// Run the child in the background (spawn_agent only): the call returns once it runs, you
    /// are told when it ends, and read_output shows its report then.
    #[serde(default)]
    pub background: bool,
}

/// `spawn_agent`: a child agent session on a copy of this workspace, decided as
/// `subagent.spawn`; the call waits for the child and returns its final text and its changes.
#[derive(Debug)]
pub struct SpawnAgent {
    subagents: Arc<Subagents>,
}

impl SpawnAgent {
    /// The tool over the session's subagent state.
    pub fn new(subagents: Arc<Subagents>) -> Self {
        Self { subagents }
    }
}

impl Tool for SpawnAgent {
    type Input = SpawnInput;

    fn name(&self) -> &str {
        "spawn_agent"
    }

    fn description(&self) -> &str {
        "Start a child agent on a task, in a copy of your workspace as it is now, under your \
         policy and a slice of your budget. Waits for it to end and returns its final answer and \
         the files it changed (with background: true, returns once it runs; you are told when it \
         ends and read_output shows its report); take_subagent writes those changes into your \
         workspace. Decided as subagent.spawn."
    }

    fn effect(&self) -> Effect {
        Effect::Mutating
    }

    fn fixed_act(&self) -> Option<Action> {
        Action::parse("subagent.spawn").ok()
    }

    fn access(&self, input: &SpawnInput) -> Result<Access, ActionError> {
        let task: String = input.task.chars().take(200).collect();
        Ok(Access::Acts(vec![Act::new(
            Action::parse("subagent.spawn")?,
            format!("start a child agent on: {task}"),
        )]))
    }

    async fn run<'a>(
        &'a self,
        cx: ToolContext<'a>,
        input: SpawnInput,
    ) -> Result<ToolOutput, LogError> {
        let subagents = &*self.subagents;
        if let Err(refusal) = check_bounds(cx, subagents, 1) {
            return Ok(ToolOutput::error(refusal));
        }
        if input.background {
            return super::background::spawn(cx, &self.subagents, &input);
        }
        let _alive = Alive::count(subagents, 1);
        spawn_one(cx, subagents, &input, None).await
    }
}

/// Refuses a spawn of `n` children past `[subagents]`: too deep, or too many alive at once.
fn check_bounds(cx: ToolContext<'_>, subagents: &Subagents, n: u32) -> Result<(), String> {
    let bounds = *cx.host.session().policy().subagents();
    let depth = subagents.config.depth + 1;
    if u64::from(depth) > bounds.max_depth {
        return Err(format!(
            "not spawned: a child here would be {depth} generations below the top agent, and [subagents] max_depth is {}",
            bounds.max_depth
        ));
    }
    let alive = subagents.alive.load(Ordering::SeqCst);
    if u64::from(alive + n) > bounds.max_width {
        return Err(format!(
            "not spawned: {alive} children are running, {n} more were asked for, and [subagents] max_width is {}",
            bounds.max_width
        ));
    }
    Ok(())
}

/// One child, from its `session.spawn` to its `agent.complete`. `part` tells it apart from the
/// other children of the same call (`spawn_agents`).
async fn spawn_one(
    cx: ToolContext<'_>,
    subagents: &Subagents,
    input: &SpawnInput,
    part: Option<&str>,
) -> Result<ToolOutput, LogError> {
    let child = match prepare(cx, subagents, input)? {
        Ok(child) => child,
        Err(refused) => return Ok(refused),
    };
    let status = match start(cx, &subagents.config, &child.spec, &child.dir, part).await {
        Ok(status) => Some(status),
        Err(e) => {
            let _ = std::fs::write(child.dir.join("start-error"), e.as_bytes());
            None
        }
    };
    finish(&cx.decider.log, subagents, cx.call_id, &child, status)
}

/// A child whose spawn is on the record, ready to be started.
pub(super) struct Prepared {
    pub(super) spec: ChildSpec,
    /// Where the parent keeps what it made for the child (its spec, snapshot and output).
    pub(super) dir: std::path::PathBuf,
}

/// Everything before the child's process: its slice of the budget, the snapshot of the
/// workspace it works on, and its `session.spawn`, durable (a resumed parent finds it). The
/// inner `Err` is what the model is told when the child cannot be spawned.
pub(super) fn prepare(
    cx: ToolContext<'_>,
    subagents: &Subagents,
    input: &SpawnInput,
) -> Result<Result<Prepared, ToolOutput>, LogError> {
    let config = &subagents.config;
    let depth = config.depth + 1;
    let asked = BudgetAmount {
        usd: input.budget_usd,
        tokens: input.budget_tokens,
    };
    let slice = match subagents.budget.slice_for(asked) {
        Ok(slice) => slice,
        Err(e) => return Ok(Err(ToolOutput::error(format!("not spawned: {e}")))),
    };
    let log = &cx.decider.log;
    let child = SessionId::new();
    let dir = child_dir(log.dir(), child.as_str());
    let project = dir.join("project");
    let policy_file = cx
        .host
        .session()
        .policy()
        .project_file()
        .map(Path::to_path_buf);
    if let Err(e) = snapshot(cx.host.view(), policy_file.as_deref(), &project) {
        return Ok(Err(ToolOutput::error(format!(
            "not spawned: the copy of the workspace failed: {e}"
        ))));
    }
    let ratchet: Vec<(String, String)> = cx
        .decider
        .policy
        .read()
        .map(|p| {
            p.ratchet()
                .inherited()
                .iter()
                .chain(p.ratchet().entries())
                .map(|(pattern, decision)| (pattern.to_string(), decision.as_str().to_string()))
                .collect()
        })
        .unwrap_or_default();
    // The promise is on the record before the child exists: a resumed parent finds it.
    log.record(
        Some(cx.call_id),
        SessionSpawn {
            child: child.as_str().to_string(),
            task: input.task.clone(),
            depth: Some(depth),
            budget: (slice.usd.is_some() || slice.tokens.is_some()).then_some(slice),
            ratchet: ratchet.clone(),
        },
    )?;
    let (_, parent_head) = log.head();
    subagents.budget.reserve(child.as_str(), slice);
    let spec = ChildSpec {
        id: child.as_str().to_string(),
        parent: log.id().as_str().to_string(),
        parent_head,
        depth,
        task: input.task.clone(),
        budget: slice,
        ratchet,
        project,
    };
    Ok(Ok(Prepared { spec, dir }))
}

/// Everything after the child's process ended (`status`: `None` when it never started): how it
/// ended, read from its log, its changes, its `agent.complete` (under call `call_id`) and what it
/// spent booked; what the model is told.
pub(super) fn finish(
    log: &chock_log::Log,
    subagents: &Subagents,
    call_id: &str,
    child: &Prepared,
    status: Option<std::process::ExitStatus>,
) -> Result<ToolOutput, LogError> {
    let id = child.spec.id.as_str();
    let root = log
        .dir()
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let ended = read_end(&root.join(id), status);
    let summary = ended
        .final_text
        .lines()
        .take(3)
        .collect::<Vec<_>>()
        .join(" | ");
    let changes = if ended.ran {
        changes_of(&child.spec.project, &root.join(id)).ok()
    } else {
        None
    };
    let (digest, changed) = match &changes {
        Some(c) if !c.files.is_empty() => (Some(c.digest()), c.paths()),
        _ => (None, Vec::new()),
    };
    log.record(
        Some(call_id),
        AgentComplete {
            summary: summary.chars().take(300).collect(),
            child: Some(id.to_string()),
            ended: Some(ended.how),
            child_head: ended.head.clone(),
            spent: Some(ended.spent),
            digest: digest.clone(),
            changed: changed.clone(),
        },
    )?;
    subagents.budget.settle(id, ended.spent, ended.how);
    Ok(report(id, &ended, digest.as_deref(), &changed))
}

/// Records the end of each child this session's log spawned but never saw end (this session died
/// while the child ran) whose process is gone now, and books what it spent; a child still running
/// keeps its slice reserved. A call none of whose children still runs, and which never got its
/// result, is told now what each of its children came to (every child of a `spawn_agents` call,
/// in the order they were spawned, as the call itself gives them). Returns the children
/// completed. Called when a session is resumed or adopted.
pub fn complete_orphans(
    log: &chock_log::Log,
    events: &[Event],
    budget: &crate::budget::Budget,
) -> Result<Vec<String>, LogError> {
    let mut spawned: Vec<(String, Option<String>)> = Vec::new();
    let mut open: Vec<(String, Option<String>)> = Vec::new();
    for event in events {
        match event.payload() {
            Ok(EventData::SessionSpawn(spawn)) => {
                spawned.push((spawn.child.clone(), event.call_id.clone()));
                open.push((spawn.child, event.call_id.clone()));
            }
            Ok(EventData::AgentComplete(done)) => {
                open.retain(|(child, _)| Some(child) != done.child.as_ref());
            }
            _ => {}
        }
    }
    let root = log
        .dir()
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let live = |child: &str| {
        matches!(
            chock_log::is_live(&root.join(child)),
            Ok(chock_log::Liveness::Live { .. })
        )
    };
    let mut completed = Vec::new();
    let mut calls: Vec<String> = Vec::new();
    for (child, call_id) in open {
        if live(&child) {
            continue;
        }
        let (ended, changes) = end_of(log, &root, &child);
        let (digest, changed) = match &changes {
            Some(c) if !c.files.is_empty() => (Some(c.digest()), c.paths()),
            _ => (None, Vec::new()),
        };
        log.record(
            call_id.as_deref(),
            AgentComplete {
                summary: ended
                    .final_text
                    .lines()
                    .take(3)
                    .collect::<Vec<_>>()
                    .join(" | "),
                child: Some(child.clone()),
                ended: Some(ended.how),
                child_head: ended.head.clone(),
                spent: Some(ended.spent),
                digest,
                changed,
            },
        )?;
        budget.settle(&child, ended.spent, ended.how);
        if let Some(id) = call_id.filter(|id| !calls.contains(id)) {
            calls.push(id);
        }
        completed.push(child);
    }
    // The calls whose children never got to tell them: the model is told now (the resumed
    // conversation reads it from here), once none of the call's children runs.
    let answered = |id: &str| {
        events
            .iter()
            .any(|e| e.kind == EventKind::ToolResult && e.call_id.as_deref() == Some(id))
    };
    for id in calls.iter().filter(|id| !answered(id)) {
        let children: Vec<&str> = spawned
            .iter()
            .filter(|(_, call)| call.as_deref() == Some(id.as_str()))
            .map(|(child, _)| child.as_str())
            .collect();
        if children.iter().any(|c| live(c)) {
            continue;
        }
        let tool = tool_of(events, id);
        let outs: Vec<ToolOutput> = children.iter().map(|child| report_of(log, child)).collect();
        let is_error = outs.iter().any(|o| o.is_error);
        let text = if tool == "spawn_agents" {
            let each: Vec<String> = outs
                .iter()
                .enumerate()
                .map(|(i, o)| format!("[{}] {}", i + 1, o.text))
                .collect();
            each.join("\n\n")
        } else {
            outs.into_iter()
                .map(|o| o.text)
                .collect::<Vec<_>>()
                .join("\n\n")
        };
        log.record(
            Some(id),
            chock_protocol::log::ToolResult {
                tool,
                is_error,
                output: log.redact(&text),
                changed: Vec::new(),
                shown: Vec::new(),
            },
        )?;
    }
    Ok(completed)
}

/// How child `child` (beside `log`'s session under `root`) ended, and what it changed.
fn end_of(
    log: &chock_log::Log,
    root: &Path,
    child: &str,
) -> (super::child::Ended, Option<super::Changes>) {
    let session = root.join(child);
    let ended = read_end(&session, None);
    let project = child_dir(log.dir(), child).join("project");
    let changes = if ended.ran {
        changes_of(&project, &session).ok()
    } else {
        None
    };
    (ended, changes)
}

/// What the model is told of child `child` of `log`'s session, once it has ended.
pub(super) fn report_of(log: &chock_log::Log, child: &str) -> ToolOutput {
    let root = log
        .dir()
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let (ended, changes) = end_of(log, &root, child);
    let changed = changes_paths(changes.as_ref());
    let digest = (!changed.is_empty())
        .then(|| changes.as_ref().map(super::Changes::digest))
        .flatten();
    report(child, &ended, digest.as_deref(), &changed)
}

/// The tool call `id` called (`spawn_agent` when the log does not say).
fn tool_of(events: &[Event], id: &str) -> String {
    events
        .iter()
        .filter(|e| e.call_id.as_deref() == Some(id))
        .find_map(|e| match e.payload() {
            Ok(EventData::ToolCall(call)) => Some(call.tool),
            _ => None,
        })
        .unwrap_or_else(|| "spawn_agent".into())
}

fn changes_paths(changes: Option<&super::Changes>) -> Vec<String> {
    changes.map(super::Changes::paths).unwrap_or_default()
}

/// Counts children alive until dropped.
struct Alive<'a>(&'a Subagents, u32);

impl<'a> Alive<'a> {
    fn count(subagents: &'a Subagents, n: u32) -> Self {
        subagents.alive.fetch_add(n, Ordering::SeqCst);
        Self(subagents, n)
    }
}

impl Drop for Alive<'_> {
    fn drop(&mut self) {
        self.0.alive.fetch_sub(self.1, Ordering::SeqCst);
    }
}

/// `spawn_agents`' input.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct SpawnManyInput {
    /// The children, each as spawn_agent takes one; they run at the same time.
    #[schemars(length(min = 1))]
    pub agents: Vec<SpawnInput>,
}

/// `spawn_agents`: several child agents at once (at most `[subagents] max_width` alive), each
/// decided as `subagent.spawn`; the call waits for all of them.
#[derive(Debug)]
pub struct SpawnAgents {
    subagents: Arc<Subagents>,
}

impl SpawnAgents {
    /// The tool over the session's subagent state.
    pub fn new(subagents: Arc<Subagents>) -> Self {
        Self { subagents }
    }
}

impl Tool for SpawnAgents {
    type Input = SpawnManyInput;

    fn name(&self) -> &str {
        "spawn_agents"
    }

    fn description(&self) -> &str {
        "Start several child agents at once, each as spawn_agent would (a copy of your workspace          as it is now, your policy, a slice of your budget: by default an equal share of what is          left). Waits for all of them and returns each one's end, answer and changes. Each child          is decided as subagent.spawn."
    }

    fn effect(&self) -> Effect {
        Effect::Mutating
    }

    fn fixed_act(&self) -> Option<Action> {
        Action::parse("subagent.spawn").ok()
    }

    fn access(&self, input: &SpawnManyInput) -> Result<Access, ActionError> {
        let mut acts = Vec::new();
        for agent in &input.agents {
            let task: String = agent.task.chars().take(200).collect();
            acts.push(Act::new(
                Action::parse("subagent.spawn")?,
                format!("start a child agent on: {task}"),
            ));
        }
        Ok(Access::Acts(acts))
    }

    async fn run<'a>(
        &'a self,
        cx: ToolContext<'a>,
        input: SpawnManyInput,
    ) -> Result<ToolOutput, LogError> {
        let subagents = &*self.subagents;
        if input.agents.iter().any(|a| a.background) {
            return Ok(ToolOutput::error(
                "not spawned: spawn_agents waits for its children; start a child in the \
                 background with spawn_agent {\"background\": true}"
                    .into(),
            ));
        }
        let n = u32::try_from(input.agents.len()).unwrap_or(u32::MAX);
        if let Err(refusal) = check_bounds(cx, subagents, n) {
            return Ok(ToolOutput::error(refusal));
        }
        let _alive = Alive::count(subagents, n);
        // An equal share of what is left for each child that names no slice of its own.
        let left = subagents.budget.left();
        let share = BudgetAmount {
            usd: left.usd.map(|usd| usd / f64::from(n)),
            tokens: left.tokens.map(|tokens| tokens / u64::from(n)),
        };
        let inputs: Vec<SpawnInput> = input
            .agents
            .into_iter()
            .map(|a| SpawnInput {
                budget_usd: a.budget_usd.or(share.usd),
                budget_tokens: a.budget_tokens.or(share.tokens),
                task: a.task,
                background: false,
            })
            .collect();
        let parts: Vec<String> = (1..=inputs.len()).map(|i| i.to_string()).collect();
        let runs = inputs
            .iter()
            .zip(&parts)
            .map(|(one, part)| spawn_one(cx, subagents, one, Some(part)));
        let outputs = futures_util::future::join_all(runs).await;
        let mut text = Vec::new();
        let mut is_error = false;
        for (i, output) in outputs.into_iter().enumerate() {
            let output = output?;
            is_error |= output.is_error;
            text.push(format!("[{}] {}", i + 1, output.text));
        }
        let mut out = ToolOutput::ok(text.join("\n\n"));
        out.is_error = is_error;
        Ok(out)
    }
}
