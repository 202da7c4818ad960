//! A child session's process, started and waited for, and what its log says of its end: the
//! record its parent writes and the report its parent's model reads.

use std::path::Path;
use std::process::Stdio;

use chock_log::{Event, EventKind};
use chock_protocol::EventData;
use chock_protocol::log::{BudgetAmount, ChildEnd, EndReason};

use super::ChildSpec;
use crate::budget::spent_in_log;
use chock_tools::ToolOutput;
use chock_tools::tool::ToolContext;

/// Starts the child's `chock run` and waits for it; an interrupt of this session reaches it as
/// SIGINT (it interrupts its own turn, children and commands, and ends its log).
pub(super) async fn start(
    cx: ToolContext<'_>,
    config: &super::SubagentConfig,
    spec: &ChildSpec,
    dir: &Path,
    part: Option<&str>,
) -> Result<std::process::ExitStatus, String> {
    let mut child = launch(config, spec, dir, false)?;
    let running = cx.host.session().running().clone();
    let _registered = child.id().and_then(|pid| match part {
        Some(part) => running.register_interruptible_part(cx.call_id, part, pid),
        None => running.register_interruptible(cx.call_id, pid),
    });
    child.wait().await.map_err(|e| e.to_string())
}

/// Writes the child's spec and starts its `chock run`, its output into `dir`. A child in the
/// background (`background`) is not killed when its handle is dropped: it outlives this process
/// when the session is handed over, and the next owner adopts it.
pub(super) fn launch(
    config: &super::SubagentConfig,
    spec: &ChildSpec,
    dir: &Path,
    background: bool,
) -> Result<tokio::process::Child, String> {
    let spec_path = dir.join("spec.json");
    let text = serde_json::to_string_pretty(spec).map_err(|e| e.to_string())?;
    std::fs::write(&spec_path, text).map_err(|e| format!("{}: {e}", spec_path.display()))?;
    let file = |name: &str| {
        std::fs::File::create(dir.join(name)).map_err(|e| format!("{}: {e}", dir.display()))
    };
    let (stdout, stderr) = (file("stdout")?, file("stderr")?);
    let mut command = tokio::process::Command::new(&config.program);
    command
        .arg("run")
        .arg("--child-spec")
        .arg(&spec_path)
        .args(["--provider", &config.provider, "--model", &config.model])
        .args(["--max-turns", &config.max_turns.to_string(), "--json"])
        .arg(&spec.task)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .kill_on_drop(!background);
    command
        .spawn()
        .map_err(|e| format!("{}: {e}", config.program.display()))
}

/// What the child's log says of its end.
#[derive(Debug)]
pub(super) struct Ended {
    pub(super) how: ChildEnd,
    /// Whether its session was created at all.
    pub(super) ran: bool,
    pub(super) head: Option<String>,
    pub(super) spent: BudgetAmount,
    pub(super) final_text: String,
}

/// Reads the child's end from its log; `status` is its process's (None: it never started).
pub(super) fn read_end(child_session: &Path, status: Option<std::process::ExitStatus>) -> Ended {
    let events: Vec<Event> = chock_log::read_events(child_session).unwrap_or_default();
    let head = chock_log::verify(child_session)
        .ok()
        .and_then(|r| r.head)
        .map(|h| h.hash);
    let mut final_text = String::new();
    let mut end = None;
    let mut out_of_budget = false;
    for event in &events {
        match event.payload() {
            Ok(EventData::ModelResponse(r)) => {
                let blocks: Vec<chock_provider::Block> =
                    serde_json::from_value(r.content).unwrap_or_default();
                let text: Vec<String> = blocks
                    .into_iter()
                    .filter_map(|b| match b {
                        chock_provider::Block::Text { text } => Some(text),
                        _ => None,
                    })
                    .collect();
                if !text.is_empty() {
                    final_text = text.join("\n");
                }
            }
            Ok(EventData::SessionEnd(e)) => end = Some(e.reason),
            Ok(EventData::Note(chock_protocol::log::Note::BudgetExhausted { .. })) => {
                out_of_budget = true;
            }
            _ => {}
        }
    }
    let ran = events.iter().any(|e| e.kind == EventKind::SessionStart);
    let how = match (ran, end, status) {
        (false, _, None) => ChildEnd::NotStarted,
        (false, _, Some(_)) => ChildEnd::NotStarted,
        (true, None, _) => ChildEnd::Crashed,
        (true, Some(_), _) if out_of_budget => ChildEnd::OutOfBudget,
        (true, Some(EndReason::OutOfBudget), _) => ChildEnd::OutOfBudget,
        (true, Some(EndReason::Done | EndReason::Closed), _) => ChildEnd::Done,
        (true, Some(EndReason::MaxTurns), _) => ChildEnd::MaxTurns,
        (true, Some(EndReason::Interrupted), _) => ChildEnd::Interrupted,
        (true, Some(EndReason::Error), _) => ChildEnd::Error,
    };
    Ended {
        how,
        ran,
        head,
        spent: spent_in_log(&events),
        final_text,
    }
}

fn word(how: ChildEnd) -> &'static str {
    match how {
        ChildEnd::Done => "done",
        ChildEnd::OutOfBudget => "out of budget",
        ChildEnd::MaxTurns => "at its turn limit",
        ChildEnd::Interrupted => "interrupted",
        ChildEnd::Error => "with an error",
        ChildEnd::Crashed => "crashed (its process died before its log ended)",
        ChildEnd::NotStarted => "never started",
    }
}

/// What the model reads.
pub(super) fn report(
    child: &str,
    ended: &Ended,
    digest: Option<&str>,
    changed: &[String],
) -> ToolOutput {
    let spent = format!(
        "{} ({} tokens)",
        chock_protocol::live::cost_text(ended.spent.usd),
        ended.spent.tokens.unwrap_or(0)
    );
    let mut text = format!(
        "child {child} ended {}; it spent {spent}.\n",
        word(ended.how)
    );
    if ended.final_text.is_empty() {
        text.push_str("It gave no final answer.\n");
    } else {
        text.push_str(&format!("Its final answer:\n{}\n", ended.final_text));
    }
    match digest {
        Some(digest) => text.push_str(&format!(
            "It changed {} file(s) (digest {digest}): {}. take_subagent {{\"child\": \"{child}\"}} writes them into your workspace.",
            changed.len(),
            changed.join(", ")
        )),
        None => text.push_str("It changed no files."),
    }
    let mut out = ToolOutput::ok(text);
    out.is_error = !matches!(ended.how, ChildEnd::Done);
    out
}
