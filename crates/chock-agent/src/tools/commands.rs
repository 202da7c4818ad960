//! run_command and read_output: every command goes through chock-session's confined call, the same
//! path `chock exec` takes, so the act is classified (`exec.<class>.<program>`), decided, logged
//! before it runs, run with every sandbox layer, and its result logged.
//!
//! A background command (`background: true`) runs the same confined call on a blocking thread and
//! returns a handle at once. `read_output` shows its output once it has ended (the confined call
//! captures output whole) or says it is still running; its end is recorded as a `note` event with its
//! status, and the model is told at its next turn.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chock_decide::Observer;
use chock_log::LogError;
use chock_protocol::live::ItemKind;
use chock_protocol::log::{Note, ToolResult};
use chock_session::{CallOptions, CallOutcome, CallResult, SessionError};
use schemars::JsonSchema;
use serde::Deserialize;

use super::ToolOutput;
use crate::events::{AgentEvent, EventSink};
use crate::gate::Decider;
use crate::host::Host;

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
    handles: Mutex<Vec<tokio::task::JoinHandle<()>>>,
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

/// What the model reads about a finished confined call, and its exit status.
fn describe(result: &Result<CallResult, SessionError>) -> (ToolOutput, Option<i32>) {
    match result {
        Ok(CallResult {
            outcome: CallOutcome::Refused { by, reason },
            action,
            ..
        }) => (
            ToolOutput::error(format!(
                "refused: `{action}` did not run: {reason} (decided by {by})"
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
        }) => {
            let code = outcome.status.code();
            let status = match code {
                Some(c) => format!("exit status {c}"),
                None => format!("{:?}", outcome.status),
            };
            let mut text = format!("{status}\n");
            if !stdout.is_empty() {
                text.push_str(&format!("--- stdout\n{}\n", clip(stdout).trim_end()));
            }
            if !stderr.is_empty() {
                text.push_str(&format!("--- stderr\n{}\n", clip(stderr).trim_end()));
            }
            if *truncated {
                text.push_str("(output was cut at the capture limit)\n");
            }
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
        Err(err) => (
            ToolOutput::error(format!("the command did not run: {err}")),
            None,
        ),
    }
}

impl Commands {
    /// The commands of the session behind `host`.
    pub fn new(host: Arc<Host>, decider: Decider, sink: Arc<dyn EventSink>) -> Self {
        Self {
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
        let output_item = Arc::new(OutputItem {
            item: format!("{call_id}.output"),
            call_id: call_id.to_string(),
            log: self.decider.log.clone(),
            sink: Arc::clone(&self.sink),
            state: Mutex::new(OutputState::default()),
        });
        let options = CallOptions {
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
        let task =
            tokio::task::spawn_blocking(move || session.confined_call(&argv, &options, &pipeline));
        // A background command is only "started" once the session has let it run; a refusal (or a
        // failure before the decision) is answered like a foreground call.
        if !input.background || settled_rx.await != Ok(true) {
            let result = task.await.unwrap_or_else(|e| {
                Err(SessionError::Output(std::io::Error::other(e.to_string())))
            });
            let told = describe(&result).0;
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
        let waiter = tokio::spawn(async move {
            let result = task.await.unwrap_or_else(|e| {
                Err(SessionError::Output(std::io::Error::other(e.to_string())))
            });
            let (output, status) = describe(&result);
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
        });
        if let Ok(mut handles) = self.handles.lock() {
            handles.push(waiter);
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

    /// Waits for every background command, so each one's end is in the log before `session.end`.
    pub async fn finish_all(&self) {
        let handles: Vec<_> = self
            .handles
            .lock()
            .map(|mut h| std::mem::take(&mut *h))
            .unwrap_or_default();
        for handle in handles {
            let _ = handle.await;
        }
    }
}

/// A running command's output as a live item: started at its first bytes, a delta per line, and
/// completed when the command ends.
///
/// The redaction funnel matches whole secrets, so text is only redacted and sent once a secret
/// cannot be cut in two by the next read: whole lines, or, for a line that grows past
/// [`LINE_HOLD`], all of it but a tail longer than any secret. The rest goes out at completion.
struct OutputItem {
    item: String,
    call_id: String,
    log: chock_log::Log,
    sink: Arc<dyn EventSink>,
    state: Mutex<OutputState>,
}

/// How much of a line without its end is held back before part of it is sent; the part kept
/// back ([`SECRET_TAIL`] bytes) is longer than any key a session holds.
const LINE_HOLD: usize = 64 * 1024;
const SECRET_TAIL: usize = 4096;

#[derive(Default)]
struct OutputState {
    started: bool,
    completed: bool,
    /// Bytes read and not sent yet (an unfinished line, a cut UTF-8 sequence).
    pending: Vec<u8>,
}

impl OutputItem {
    /// Sends `bytes` (whole lines or a safe prefix) as one redacted delta, starting the item.
    fn send(&self, state: &mut OutputState, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        if !state.started {
            state.started = true;
            self.sink.emit(&AgentEvent::ItemStarted {
                item: self.item.clone(),
                turn: 0,
                kind: ItemKind::CommandOutput {
                    call_id: self.call_id.clone(),
                },
            });
        }
        self.sink.emit(&AgentEvent::ItemDelta {
            item: self.item.clone(),
            text: self.log.redact(&String::from_utf8_lossy(bytes)),
        });
    }

    fn complete(&self, ok: bool) {
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        if state.completed {
            return;
        }
        let rest = std::mem::take(&mut state.pending);
        self.send(&mut state, &rest);
        if state.started {
            state.completed = true;
            self.sink.emit(&AgentEvent::ItemCompleted {
                item: self.item.clone(),
                ok,
            });
        }
    }
}

impl OutputItem {
    /// Whether cutting `bytes` at `cut` would split a secret the log redacts: the two halves
    /// redacted apart differ from the whole redacted.
    fn cut_splits_a_secret(&self, bytes: &[u8], cut: usize) -> bool {
        let text = |b: &[u8]| self.log.redact(&String::from_utf8_lossy(b));
        text(bytes) != text(&bytes[..cut]) + &text(&bytes[cut..])
    }
}

impl chock_session::OutputSink for OutputItem {
    fn write(&self, _stream: chock_session::Stream, bytes: &[u8]) {
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        state.pending.extend_from_slice(bytes);
        let ready = match state.pending.iter().rposition(|b| *b == b'\n') {
            Some(newline) => newline + 1,
            None if state.pending.len() > LINE_HOLD => {
                // Cut on a character boundary, keeping a tail no secret is longer than (for a
                // secret still arriving), and never inside a secret that has arrived whole: a
                // cut there would redact neither half.
                let mut cut = state.pending.len() - SECRET_TAIL;
                loop {
                    while cut > 0 && (state.pending[cut] & 0xC0) == 0x80 {
                        cut -= 1;
                    }
                    if cut == 0 || !self.cut_splits_a_secret(&state.pending, cut) {
                        break cut;
                    }
                    cut = cut.saturating_sub(SECRET_TAIL);
                }
            }
            None => 0,
        };
        let rest = state.pending.split_off(ready);
        let out = std::mem::replace(&mut state.pending, rest);
        self.send(&mut state, &out);
    }
}

#[cfg(test)]
mod output_item_tests {
    use chock_session::OutputSink;

    use super::*;

    #[test]
    fn a_secret_cut_in_two_by_the_reads_is_still_redacted_in_the_live_output() {
        let root = tempfile::tempdir().unwrap();
        let log = chock_log::Log::create(root.path(), chock_log::SessionHeader::default()).unwrap();
        log.add_secret("sk-live-0123456789").unwrap();
        let events: Arc<Mutex<Vec<AgentEvent>>> = Arc::default();
        let seen = Arc::clone(&events);
        let sink: Arc<dyn EventSink> =
            Arc::new(move |e: &AgentEvent| seen.lock().unwrap().push(e.clone()));
        let item = OutputItem {
            item: "c1.output".into(),
            call_id: "c1".into(),
            log,
            sink,
            state: Mutex::new(OutputState::default()),
        };
        let out = chock_session::Stream::Stdout;
        item.write(out, b"first line\nkey=sk-live-0123");
        item.write(out, b"456789 and more\nno newline sk-live-");
        item.write(out, b"0123456789");
        item.complete(true);
        let text: String = events
            .lock()
            .unwrap()
            .iter()
            .filter_map(|e| match e {
                AgentEvent::ItemDelta { text, .. } => Some(text.clone()),
                _ => None,
            })
            .collect();
        assert!(!text.contains("sk-live-0123456789"), "{text}");
        assert_eq!(
            text,
            "first line\nkey=[REDACTED] and more\nno newline [REDACTED]"
        );
    }

    /// A line longer than the hold is sent in parts; a secret that arrived whole across where the
    /// first part would end moves the cut before it.
    #[test]
    fn a_long_line_is_never_cut_inside_a_secret_that_has_arrived() {
        let root = tempfile::tempdir().unwrap();
        let log = chock_log::Log::create(root.path(), chock_log::SessionHeader::default()).unwrap();
        let key = "sk-ant-api03-0123456789abcdefghijklmnopqrstuv";
        log.add_secret(key).unwrap();
        let events: Arc<Mutex<Vec<AgentEvent>>> = Arc::default();
        let seen = Arc::clone(&events);
        let sink: Arc<dyn EventSink> =
            Arc::new(move |e: &AgentEvent| seen.lock().unwrap().push(e.clone()));
        let item = OutputItem {
            item: "c1.output".into(),
            call_id: "c1".into(),
            log,
            sink,
            state: Mutex::new(OutputState::default()),
        };
        let out = chock_session::Stream::Stdout;
        item.write(out, &vec![b'x'; 62_000]);
        // With these 4,110 bytes the line passes the hold, and the first cut would fall 14 bytes
        // into the key.
        let mut chunk = key.as_bytes().to_vec();
        chunk.extend(vec![b'y'; 4_070]);
        item.write(out, &chunk);
        let deltas: Vec<String> = events
            .lock()
            .unwrap()
            .iter()
            .filter_map(|e| match e {
                AgentEvent::ItemDelta { text, .. } => Some(text.clone()),
                _ => None,
            })
            .collect();
        assert!(!deltas.is_empty(), "the long line was sent before its end");
        for delta in &deltas {
            assert!(!delta.contains(&key[..14]), "a part of the key went out");
        }
        item.complete(true);
    }
}
