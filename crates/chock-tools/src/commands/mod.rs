//! run_command and read_output: every command goes through chock-session's confined call, the same
//! path `chock exec` takes, so the act is classified (`exec.<class>.<program>`), decided, logged
//! before it runs, run with every sandbox layer, and its result logged.
//!
//! A background command (`background: true`) runs the same confined call on a blocking thread and
//! returns a handle at once. `read_output` shows its output once it has ended (the confined call
//! captures output whole) or says it is still running; its end is recorded as a `note` event with its
//! status, and the model is told at its next turn. Once started, a background command is handed
//! to the session's keeper (`kept.rs`, docs/handover.md), so it moves with the session when the
//! session is handed over; its output is recorded in the session's directory as it comes.

mod adopt;
mod kept;
pub(crate) mod live_output;
mod work;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chock_decide::Observer;
use chock_log::LogError;
use chock_protocol::log::{Note, ToolResult};
use chock_session::{CallOptions, CallOutcome, CallResult, SessionError};
use schemars::JsonSchema;
use serde::Deserialize;

use super::ToolOutput;
use crate::events::{AgentEvent, EventSink};
use crate::gate::Decider;
use crate::host::Host;
use live_output::OutputItem;
pub use work::{BackgroundEnd, Released};

/// Default wall-clock limit of a foreground command.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// Most output (per stream) shown to the model.
const SHOW_LIMIT: usize = 30_000;

/// run_command's input.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct RunInput {
    /// The command, run as `/bin/sh -c`.
    pub command: String,
    /// Wall-clock limit in seconds (default 120).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub timeout_secs: Option<u64>,
    /// Return a handle at once and run on; read the output later with read_output.
    #[serde(default)]
    pub background: bool,
}

/// read_output's input.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReadOutputInput {
    /// The handle run_command gave (`bg-…`).
    pub handle: String,
}

/// Tells a background command's caller whether the call will run, once the pipeline has settled
/// it: its handle is only given after that (a refused command was never "started", and the stream
/// keeps the log's order). The first decision of the call is the command's own; its connections'
/// come after it runs.
struct Started(Mutex<Option<tokio::sync::oneshot::Sender<bool>>>);

impl Observer for Started {
    fn decided(&self, _call_id: Option<&str>, settled: &chock_decide::Settled) {
        if let Some(tx) = self.0.lock().ok().and_then(|mut tx| tx.take()) {
            let _ = tx.send(settled.allowed());
        }
    }
}

#[derive(Debug)]
enum Job {
    Running {
        started: Instant,
        command: String,
    },
    Ended {
        command: String,
        text: String,
        status: Option<i32>,
        told: bool,
    },
}

/// The commands of one session.
pub struct Commands {
    host: Arc<Host>,
    decider: Decider,
    sink: Arc<dyn EventSink>,
    jobs: Arc<Mutex<BTreeMap<String, Job>>>,
    /// Each background command's waiter, and whether the keeper keeps the command.
    handles: Mutex<Vec<(bool, tokio::task::JoinHandle<()>)>>,
    keeper: Arc<kept::Keeper>,
}

impl std::fmt::Debug for Commands {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Commands")
            .field("jobs", &self.jobs)
            .finish_non_exhaustive()
    }
}

fn clip(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    if text.len() <= SHOW_LIMIT {
        return text.into_owned();
    }
    let mut cut = SHOW_LIMIT;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!(
        "{}\n… [{} more bytes not shown]",
        &text[..cut],
        text.len() - cut
    )
}

/// For a command refused because its program has no class (`exec.unparsed`, most often: it is
/// not on the sandbox's PATH), the toolchain that would show it: `cargo` → `rust`.
/// Also for a command the shell could not find (exit status 127, POSIX's "command not found").
fn toolchain_hint(not_shown: bool, command: &str) -> String {
    let program = command.split_whitespace().next().unwrap_or("");
    let program = program.rsplit('/').next().unwrap_or(program);
    match chock_policy::toolchains::toolchain_for_program(program) {
        Some(t) if not_shown => format!(
            "\n`{program}` is not on the sandbox's PATH: it comes with the `{t}` toolchain, which \
             the person can show by writing `toolchains = [\"{t}\"]` under `[sandbox]` in \
             chock.toml (you cannot change chock.toml)"
        ),
        _ => String::new(),
    }
}

/// What the model reads about a finished confined call of `command`, and its exit status.
fn describe(result: &Result<CallResult, SessionError>, command: &str) -> (ToolOutput, Option<i32>) {
    match result {
        Ok(CallResult {
            outcome: CallOutcome::Refused { by, reason },
            action,
            ..
        }) => (
            ToolOutput::error(format!(
                "refused: `{action}` did not run: {reason} (decided by {by}){}",
                toolchain_hint(action == "exec.unparsed", command)
            )),
            None,
        ),
        Ok(CallResult {
            outcome:
                CallOutcome::Ran {
                    outcome,
                    stdout,
                    stderr,
                    truncated,
                },
            ..
        }) => describe_ran(outcome, stdout, stderr, *truncated, command),
        Err(err) => (
            ToolOutput::error(format!("the command did not run: {err}")),
            None,
        ),
    }
}

/// What the model reads about a command that ran, and its exit status.
fn describe_ran(
    outcome: &chock_sandbox::Outcome,
    stdout: &[u8],
    stderr: &[u8],
    truncated: bool,
    command: &str,
) -> (ToolOutput, Option<i32>) {
    let code = outcome.status.code();
    let status = match code {
        Some(c) => format!("exit status {c}"),
        None => format!("{:?}", outcome.status),
    };
    let mut text = format!("{status}\n");
    if let Some(note) = outcome.filter_note() {
        text.push_str(&format!("{note}\n"));
    }
    if !stdout.is_empty() {
        text.push_str(&format!("--- stdout\n{}\n", clip(stdout).trim_end()));
    }
    if !stderr.is_empty() {
        text.push_str(&format!("--- stderr\n{}\n", clip(stderr).trim_end()));
    }
    if truncated {
        text.push_str("(output was cut at the capture limit)\n");
    }
    // 127: the shell found no such program on the sandbox's PATH.
    text.push_str(toolchain_hint(code == Some(127), command).trim_start());
    let failed = code != Some(0);
    (
        if failed {
            ToolOutput::error(text)
        } else {
            ToolOutput::ok(text)
        },
        code,
    )
}

impl Commands {
    /// The commands of the session behind `host`.
    pub fn new(host: Arc<Host>, decider: Decider, sink: Arc<dyn EventSink>) -> Self {
        let keeper = Arc::new(kept::Keeper::new(decider.log.dir()));
        Self {
            keeper,
            host,
            decider,
            sink,
            jobs: Arc::default(),
            handles: Mutex::default(),
        }
    }

    /// run_command: the session's confined call, which writes `tool.call`, `decision` and
    /// `tool.result` itself (an input that does not parse never gets here: the toolbox refuses it).
    pub async fn run(&self, call_id: &str, input: &RunInput) -> Result<ToolOutput, LogError> {
        let argv = vec![
            "/bin/sh".to_string(),
            "-c".to_string(),
            input.command.clone(),
        ];
        let timeout = input
            .timeout_secs
            .map_or(DEFAULT_TIMEOUT, Duration::from_secs);
        // What the command prints reaches clients while it runs, as the item `<call>.output`
        // (known secrets redacted); the model reads the captured whole in the result.
        let output_item = Arc::new(OutputItem::new(
            format!("{call_id}.output"),
            self.decider.turn.load(std::sync::atomic::Ordering::Relaxed),
            call_id,
            self.decider.log.clone(),
            Arc::clone(&self.sink),
        ));
        // A background command is handed to the session's keeper once it started (when the
        // keeper program is installed), so it moves with the session.
        let ended_follow = Arc::new(Mutex::new(None));
        // Started at the session's first background command: a process started and waited
        // for (its first answer), off the runtime's workers.
        let link = if input.background {
            let keeper = Arc::clone(&self.keeper);
            let linked = tokio::task::spawn_blocking(move || keeper.link())
                .await
                .unwrap_or_else(|e| Err(e.to_string()));
            match linked {
                Ok(link) => link,
                Err(why) => {
                    // Installed but not started: the command runs in this process, as with no
                    // keeper, and will not move with a handover; the log says so, once.
                    if self.keeper.first_unavailable() {
                        let _ = self
                            .decider
                            .log
                            .record(None, chock_protocol::log::Note::KeeperUnavailable { why });
                    }
                    None
                }
            }
        } else {
            None
        };
        let keeping = link.map(|link| {
            chock_session::Keeping(Arc::new(kept::Handing {
                keeper: Arc::clone(&self.keeper),
                link,
                handle: format!("bg-{call_id}"),
                live: Arc::clone(&output_item) as Arc<dyn chock_session::OutputSink>,
                limit: CallOptions::default().capture_limit,
                ended: Arc::clone(&ended_follow),
                log: self.decider.log.clone(),
            }) as Arc<dyn chock_session::Keep>)
        });
        let is_kept = keeping.is_some();
        let options = CallOptions {
            keep: keeping,
            timeout: Some(timeout),
            call_id: Some(call_id.to_string()),
            // With someone to ask, a connection the table puts to a question waits for them.
            ask_connections: true,
            output: chock_session::Output::StreamTo(chock_session::StreamSink(Arc::clone(
                &output_item,
            )
                as Arc<dyn chock_session::OutputSink>)),
            ..CallOptions::default()
        };
        let session = Arc::clone(self.host.session());
        let (settled_tx, settled_rx) = tokio::sync::oneshot::channel();
        // The session settles the command (and its connections) through the pipeline, which logs
        // the question, the answer and the decision before anything runs.
        let pipeline = self
            .decider
            .pipeline()
            .with_observer(Arc::new(Started(Mutex::new(Some(settled_tx)))));
        // Awaited end to end: the decision, the start through the session's confiner, the wait.
        let task = tokio::spawn(async move {
            session
                .confined_call_async(&argv, &options, &pipeline)
                .await
        });
        // A background command is only "started" once the session has let it run; a refusal (or a
        // failure before the decision) is answered like a foreground call.
        if !input.background || settled_rx.await != Ok(true) {
            let result = task.await.unwrap_or_else(|e| {
                Err(SessionError::Output(std::io::Error::other(e.to_string())))
            });
            let told = describe(&result, &input.command).0;
            output_item.complete(!told.is_error);
            return self.told(call_id, told);
        }
        let handle = format!("bg-{call_id}");
        if let Ok(mut jobs) = self.jobs.lock() {
            jobs.insert(
                handle.clone(),
                Job::Running {
                    started: Instant::now(),
                    command: input.command.clone(),
                },
            );
        }
        let jobs = Arc::clone(&self.jobs);
        let log = self.decider.log.clone();
        let sink = Arc::clone(&self.sink);
        let bg = handle.clone();
        let command = input.command.clone();
        let background_item = Arc::clone(&output_item);
        let keeper = Arc::clone(&self.keeper);
        let waiter = tokio::spawn(async move {
            let result = task.await.unwrap_or_else(|e| {
                Err(SessionError::Output(std::io::Error::other(e.to_string())))
            });
            if is_kept && keeper.released() {
                // Let go with the session: the next owner records its end.
                return;
            }
            let (output, status) = describe(&result, &command);
            background_item.complete(!output.is_error);
            let _ = log.record(
                Some(&bg),
                Note::BackgroundEnded {
                    background: bg.clone(),
                    status,
                    is_error: output.is_error,
                },
            );
            sink.emit(&AgentEvent::BackgroundEnded {
                handle: bg.clone(),
                status,
            });
            if let Ok(mut jobs) = jobs.lock() {
                jobs.insert(
                    bg,
                    Job::Ended {
                        command,
                        text: output.text,
                        status,
                        told: false,
                    },
                );
            }
            // The end is in the log: the keeper may forget the command.
            let follow = ended_follow.lock().ok().and_then(|mut f| f.take());
            if let Some(follow) = follow {
                let _ = follow.recorded();
            }
        });
        if let Ok(mut handles) = self.handles.lock() {
            handles.push((is_kept, waiter));
        }
        self.told(
            call_id,
            ToolOutput::ok(format!(
                "started in the background as {handle}; read its output with read_output {{\"handle\": \"{handle}\"}}"
            )),
        )
    }

    /// Logs what the model is told about the call (`tool.result`): the session logged the
    /// command's own result (`command.result`).
    fn told(&self, call_id: &str, output: ToolOutput) -> Result<ToolOutput, LogError> {
        self.decider.log.record(
            Some(call_id),
            ToolResult {
                tool: "run_command".to_string(),
                is_error: output.is_error,
                output: output.text.clone(),
                changed: Vec::new(),
                shown: Vec::new(),
            },
        )?;
        Ok(output)
    }

    /// read_output.
    pub fn read_output(&self, input: &ReadOutputInput) -> ToolOutput {
        let Ok(mut jobs) = self.jobs.lock() else {
            return ToolOutput::error("internal: jobs unavailable".into());
        };
        match jobs.get_mut(&input.handle) {
            None => ToolOutput::error(format!("no background command {}", input.handle)),
            Some(Job::Running { started, command }) => ToolOutput::ok(format!(
                "`{command}` is still running ({} s); its output is shown once it ends",
                started.elapsed().as_secs()
            )),
            Some(Job::Ended {
                command,
                text,
                told,
                ..
            }) => {
                *told = true;
                ToolOutput::ok(format!("`{command}` ended: {text}"))
            }
        }
    }

    /// A background command that a process which had the session before this one (before a
    /// handover or a resume) ran: its end is known (`status`, `None` when unknown), its output
    /// is not here.
    pub fn ended_elsewhere(&self, handle: &str, command: &str, status: Option<i32>) {
        if let Ok(mut jobs) = self.jobs.lock() {
            jobs.insert(
                handle.to_string(),
                Job::Ended {
                    command: command.to_string(),
                    text: format!(
                        "exit status {}; it ran in a process that had the session before this \
                         one, and its output stayed there",
                        status.map_or("unknown".to_string(), |s| s.to_string())
                    ),
                    status,
                    told: true,
                },
            );
        }
    }

    /// Lines for the model about background commands that ended and that it has not heard of.
    pub fn ended_notes(&self) -> Vec<String> {
        let Ok(mut jobs) = self.jobs.lock() else {
            return Vec::new();
        };
        let mut notes = Vec::new();
        for (handle, job) in jobs.iter_mut() {
            if let Job::Ended { status, told, .. } = job
                && !*told
            {
                *told = true;
                notes.push(format!(
                    "(background command {handle} ended with status {}; read_output shows its output)",
                    status.map_or("none".to_string(), |s| s.to_string())
                ));
            }
        }
        notes
    }

    /// Waits for every background command, so each one's end is in the log before `session.end`;
    /// then the session's keeper ends.
    pub async fn finish_all(&self) {
        let handles: Vec<_> = self
            .handles
            .lock()
            .map(|mut h| std::mem::take(&mut *h))
            .unwrap_or_default();
        for (_, handle) in handles {
            let _ = handle.await;
        }
        let keeper = Arc::clone(&self.keeper);
        let _ = tokio::task::spawn_blocking(move || keeper.finish()).await;
    }

    /// The session is let go (a handover): the background commands this process runs itself
    /// (no keeper) are waited for and their end recorded; those the keeper keeps move with the
    /// session, and this process stops following them (the next owner records the rest).
    pub async fn release_all(&self) {
        let handles: Vec<_> = self
            .handles
            .lock()
            .map(|mut h| std::mem::take(&mut *h))
            .unwrap_or_default();
        self.keeper.release();
        for (kept, handle) in handles {
            if !kept {
                let _ = handle.await;
            }
        }
    }
}
