//! The confined call: classify → decide → log the decision (durable) → sandbox → log the result.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use chock_decide::{Outcome as Settlement, Pipeline, RefusedBy, Settled};
use chock_policy::{Decision, LimitsConfig};
use chock_protocol::log::{CommandResult, CommandStatus, ToolCall};
use chock_sandbox::{
    ExitStatus, Limits, NetworkPlan, Outcome, Plan, SandboxError, StdioMode, WorkspaceMount,
};

use crate::approve::Deciding;
use crate::call_end::output_sink;
use crate::call_output::{Output, Stream, pump};
use crate::classify::ExecContext;
use crate::{Session, SessionError};

/// How to run one call.
#[derive(Debug, Clone)]
pub struct CallOptions {
    /// Wall-clock limit (default: the policy's `[limits] timeout_secs`).
    pub timeout: Option<Duration>,
    /// Working directory inside the sandbox: relative to the project, or absolute inside it.
    pub cwd: Option<PathBuf>,
    /// Where the command's output goes (it is captured in every case).
    pub output: Output,
    /// How many bytes of each stream to keep.
    pub capture_limit: usize,
    /// The network asked for; the call gets the proxy anyway when the table may let it connect
    /// (see `ask_connections`).
    pub network: NetworkPlan,
    /// The call's id in the log (the agent passes its tool-use id); default `call-<n>`.
    pub call_id: Option<String>,
    /// Whether a connection the table puts to a question may be asked about (through the call's
    /// pipeline, when it has someone to ask): then rows that only ask give the call the proxy
    /// too. `false`, or nobody to ask: such a connection is refused and only allowing rows give
    /// the call a proxy.
    pub ask_connections: bool,
}

impl Default for CallOptions {
    fn default() -> Self {
        CallOptions {
            timeout: None,
            cwd: None,
            output: Output::Capture,
            capture_limit: 1 << 20,
            network: NetworkPlan::None,
            call_id: None,
            ask_connections: true,
        }
    }
}

/// How a call ended.
#[derive(Debug, Clone)]
pub enum CallOutcome {
    /// The policy or a person refused: nothing ran.
    Refused {
        /// Who refused, in words: the rule, the person or reviewer, or `chock`.
        by: String,
        /// Why, in words.
        reason: String,
    },
    /// The command ran.
    Ran {
        /// How it ended, and the limits it ran under.
        outcome: Outcome,
        /// Its standard output, up to the capture limit.
        stdout: Vec<u8>,
        /// Its standard error, up to the capture limit.
        stderr: Vec<u8>,
        /// Whether either stream went past the capture limit and was cut.
        truncated: bool,
    },
}

/// The result of [`Session::confined_call`].
#[derive(Debug, Clone)]
pub struct CallResult {
    /// The call's id in the log.
    pub call_id: String,
    /// The act the command was classified as (`exec.<class>.<program>`).
    pub action: String,
    /// What the table said of the act.
    pub decision: Decision,
    /// Which rule decided it, in words ("chock.toml:12 (rule `exec.*`)").
    pub decided_by: String,
    /// How the pipeline settled the act (who allowed or refused it).
    pub settled: Settled,
    /// Whether it ran, and what came of it.
    pub outcome: CallOutcome,
}

/// Who refused and why, in words, for [`CallOutcome::Refused`].
pub(crate) fn refused_words(settled: &Settled) -> (String, String) {
    match &settled.outcome {
        Settlement::Refused {
            by: RefusedBy::Table,
            ..
        } => (settled.rule.clone(), "the policy denies it".to_string()),
        Settlement::Refused {
            by: RefusedBy::Person { name } | RefusedBy::Reviewer { name },
            reason,
        } => (
            name.clone(),
            if reason.is_empty() {
                "answered no".to_string()
            } else {
                reason.clone()
            },
        ),
        Settlement::Refused {
            by: RefusedBy::Harness,
            reason,
        } => ("chock".to_string(), reason.clone()),
        Settlement::Unanswered { .. } | Settlement::Allowed { .. } => (
            "nobody".to_string(),
            "nobody answered: a refusal".to_string(),
        ),
    }
}

pub(crate) fn command_status(status: ExitStatus) -> CommandStatus {
    match status {
        ExitStatus::Exited(code) => CommandStatus::Exited(code),
        ExitStatus::Signaled(signal) => CommandStatus::Signaled(signal),
        ExitStatus::TimedOut => CommandStatus::TimedOut,
    }
}

/// The sandbox limits for a policy's `[limits]`.
pub(crate) fn limits_from(cfg: &LimitsConfig) -> Limits {
    const MIB: u64 = 1 << 20;
    Limits {
        nofile: cfg.open_files,
        fsize_bytes: cfg.file_size_mb.saturating_mul(MIB),
        memory_max_bytes: Some(cfg.memory_mb.saturating_mul(MIB)),
        pids_max: Some(cfg.pids),
        cpu_max_percent: Some(u32::try_from(cfg.cpu_percent).unwrap_or(u32::MAX)),
        tmp_size_bytes: cfg.tmp_size_mb.saturating_mul(MIB),
    }
}

impl Session {
    /// The plan the sandbox would get for `argv` (also what `chock exec --verbose` prints).
    pub fn plan_for(&self, argv: &[String], opts: &CallOptions) -> Plan {
        self.plan_asking(argv, opts, opts.ask_connections)
    }

    pub(crate) fn plan_asking(&self, argv: &[String], opts: &CallOptions, can_ask: bool) -> Plan {
        let sandbox = self.policy.sandbox();
        let limits = self.policy.limits();
        let cwd = match &opts.cwd {
            Some(c) if c.is_absolute() => c.clone(),
            Some(c) => self.project.join(c),
            None => self.project.clone(),
        };
        let timeout = opts
            .timeout
            .or(Some(Duration::from_secs(limits.timeout_secs)));
        let mut plan = Plan::builder(argv.to_vec(), self.workspace.mount(), self.project.clone())
            .shared_overlay(self.confiner.overlay().is_some())
            .own_overlay(self.own_overlay)
            .cwd(cwd)
            .policy_file(self.policy.project_file().map(PathBuf::from))
            .extra_read(sandbox.read.clone())
            .extra_write(sandbox.write.clone())
            .pass_env(
                sandbox
                    .env
                    .iter()
                    .filter(|name| !self.withheld_env.contains(name))
                    .cloned()
                    .collect(),
            )
            .limits(limits_from(limits))
            .network(crate::egress::network_for(
                &self.policy,
                opts.network,
                can_ask,
            ))
            .store_paths(self.nix.store_paths())
            .timeout(timeout)
            .build();
        self.nix.apply_env(&mut plan);
        crate::egress::point_at_proxy(&mut plan);
        plan
    }

    /// The turn of a session whose calls mount their own overlay instance ([`crate::Calls`]):
    /// held for the whole call, so that no two instances of the workspace's layers are mounted
    /// at once (each call's sandbox removes the mark the volatile one before it left). A
    /// [`crate::Calls::One`] session's second call is refused here, before anything is logged.
    fn take_turn(&self) -> Result<Option<std::sync::MutexGuard<'_, bool>>, SessionError> {
        let Some(turn) = &self.in_turn else {
            return Ok(None);
        };
        let mut made = turn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if self.calls == crate::Calls::One {
            if *made {
                return Err(SessionError::OneCallMade);
            }
            *made = true;
        }
        Ok(Some(made))
    }

    /// Makes `plan` ready to start in this session's sandbox (chock-sandbox's ready.rs): nothing
    /// of it runs until [`chock_sandbox::ReadyCall::start`].
    fn ready<'a>(&'a self, plan: &'a Plan) -> Result<chock_sandbox::ReadyCall<'a>, SandboxError> {
        self.confiner.ready(plan)
    }

    pub(crate) fn classify(&self, plan: &Plan) -> crate::classify::Classified {
        let layers: Vec<PathBuf> = match &plan.workspace {
            WorkspaceMount::Overlay { upper, .. } => vec![upper.clone()],
            WorkspaceMount::Bind { source } => vec![source.clone()],
            // Nothing a call writes lands there.
            WorkspaceMount::ReadOnly { .. } => Vec::new(),
        };
        let extra: Vec<PathBuf> = plan
            .extra_read
            .iter()
            .chain(&plan.extra_write)
            .cloned()
            .collect();
        let devshell: Vec<PathBuf> = self
            .nix
            .devshell()
            .map(|d| d.closure.clone())
            .unwrap_or_default();
        let ctx = ExecContext {
            project: &self.project,
            workspace_layers: &layers,
            extra: &extra,
            devshell: &devshell,
            store: self.nix.store_dir(),
            path: plan.env_var("PATH").unwrap_or(chock_sandbox::DEFAULT_PATH),
            cwd: &plan.cwd,
        };
        ctx.classify(&plan.argv[0])
    }

    /// Runs one command as a tool call: classify it into an `exec.*` action, log `tool.call`, settle
    /// the act through `deciding`'s pipeline (the table, then whoever must answer: the question, the
    /// answer and the `decision` are durable before anything runs), run it in the sandbox, log
    /// `command.result`.
    ///
    /// A refusal is an `Ok` result ([`CallOutcome::Refused`]). A layer that cannot be applied is
    /// `Err(SessionError::Sandbox(SandboxError::Layer))`, after a `command.result` saying so.
    pub fn confined_call(
        &self,
        argv: &[String],
        opts: &CallOptions,
        deciding: &dyn Deciding,
    ) -> Result<CallResult, SessionError> {
        if argv.is_empty() {
            return Err(SessionError::Sandbox(SandboxError::Plan(
                "no command given".into(),
            )));
        }
        // The workspace's background git (the base) is paused while the call is worked on: run
        // beside a call, even at nice 19, it slowed the call by about 40% in a 100,000-file
        // project. Not while a person decides (that wait is the base's to use), and whatever
        // needs the base (a changed workspace's checkpoint) resumes it.
        let _pause = self.workspace.pause_background();
        let _turn = self.take_turn()?;
        let pipeline = deciding.pipeline_for(self);
        let call_id = opts.call_id.clone().unwrap_or_else(|| self.next_call_id());
        self.settle_devshell(&pipeline, &call_id)?;
        let can_ask = opts.ask_connections && pipeline.broker().can_ask();
        let plan = self.plan_asking(argv, opts, can_ask);
        let classified = self.classify(&plan);
        let action = classified.action.as_str().to_string();
        // The table's own answer, before anyone is asked: whether the call is made ready while
        // its records are synced, and whether the decision may wait on a person.
        let table = self.decide(&classified.action).decision;
        std::thread::scope(|scope| {
            let plan = &plan;
            // The call's `tool.call`, then its decision (the table, then whoever must answer:
            // durable before it returns); a built sandbox's key is opened the moment an allowing
            // decision is durable.
            let (settle_id, settle_action) = (call_id.clone(), action.clone());
            let (classified, pipeline) = (&classified, &pipeline);
            let settle =
                move |key: Option<chock_sandbox::GateKey>| -> Result<Settled, SessionError> {
                    self.log.record(
                        Some(&settle_id),
                        ToolCall {
                            tool: "exec".to_string(),
                            input: None,
                            argv: Some(argv.to_vec()),
                            cwd: Some(plan.cwd.display().to_string()),
                            action: Some(settle_action),
                            resolved: classified
                                .resolved
                                .as_ref()
                                .map(|p| p.display().to_string()),
                        },
                    )?;
                    let detail = format!("run `{}` in the sandbox", argv.join(" "));
                    // Only a question waits on a person; the table's own answer is at once.
                    let _asking =
                        (table == Decision::Ask).then(|| self.workspace.lend_background());
                    let settled =
                        pipeline.settle_blocking(Some(&settle_id), &classified.action, &detail)?;
                    if let Some(key) = key.filter(|_| settled.allowed()) {
                        key.open();
                    }
                    Ok(settled)
                };
            // A call the table allows outright is made ready and its sandbox built (its cgroup,
            // the overlay instance, the namespaces, the mount tree and every other layer:
            // ready.rs in chock-sandbox) while another thread writes and syncs its `tool.call`
            // and `decision`, about a millisecond each; its command starts only once the decision
            // is durable (the sandbox's init waits at a gate until then), and a refusal kills what
            // was built. One that asks may wait on a person, and one the table denies never runs.
            let (settled, early) = if table == Decision::Allow {
                let (gate, key) = chock_sandbox::gate()?;
                let settling = scope.spawn(move || settle(Some(key)));
                let ready = self.ready(plan).and_then(|mut ready| {
                    ready.build(StdioMode::Piped, gate)?;
                    Ok(ready)
                });
                let settled = settling
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
                (settled, Some(ready))
            } else {
                (settle(None)?, None)
            };
            if !settled.allowed() {
                // A refused call's record ends with its result like any other (`chock exec` and
                // the agent both rely on call → decision → result); a call made ready is dropped
                // unstarted, which undoes what it made.
                let (by, reason) = refused_words(&settled);
                self.log.record(
                    Some(&call_id),
                    CommandResult::Refused {
                        by: by.clone(),
                        reason: reason.clone(),
                    },
                )?;
                return Ok(CallResult {
                    call_id,
                    action,
                    decision: settled.decision,
                    decided_by: settled.rule.clone(),
                    settled,
                    outcome: CallOutcome::Refused { by, reason },
                });
            }
            let ready = early.unwrap_or_else(|| self.ready(plan));
            self.note_socket_walks(plan);
            self.run(call_id, action, settled, ready, opts, pipeline)
        })
    }

    fn run(
        &self,
        call_id: String,
        action: String,
        settled: Settled,
        ready: Result<chock_sandbox::ReadyCall<'_>, SandboxError>,
        opts: &CallOptions,
        pipeline: &Pipeline,
    ) -> Result<CallResult, SessionError> {
        let started = Instant::now();
        // Calls that run at the same time share one overlay instance: a write by one is seen by the
        // other at once, and no two overlays are mounted on the session's upper directory. The
        // sockets to mask come from the session's index, not a walk per call.
        let spawned = ready.and_then(|r| r.start(StdioMode::Piped));
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => return Err(self.start_failed(&call_id, e)?),
        };
        // Registered while it runs, so an interrupt can end it (and its whole process tree).
        let _running = child
            .killer()
            .ok()
            .and_then(|killer| self.running.register(&call_id, killer));
        // The egress proxy (when the plan has one) is served for as long as the command runs; if it
        // cannot be served the call fails (dropping the child kills it).
        let served = child
            .proxy_listener()
            .map(|listener| crate::egress::serve(pipeline, &self.log, &call_id, listener))
            .transpose();
        let proxy = match served {
            Ok(proxy) => proxy,
            Err(e) => return Err(self.proxy_failed(&call_id, e)?),
        };
        let out = child.take_stdout();
        let err = child.take_stderr();
        let limit = opts.capture_limit;
        // Both streams are read on their own threads while this one waits: `wait` enforces the
        // timeout, and killing the call is what ends the streams.
        let pump_on = |f: Option<std::fs::File>, stream: Stream| {
            let output = opts.output.clone();
            f.map(|f| std::thread::spawn(move || pump(f, limit, output_sink(output, stream))))
        };
        let out_thread = pump_on(out, Stream::Stdout);
        let err_thread = pump_on(err, Stream::Stderr);
        let waited = child.wait();
        let (stdout, out_trunc) = out_thread.and_then(|t| t.join().ok()).unwrap_or_default();
        let (stderr, err_trunc) = err_thread.and_then(|t| t.join().ok()).unwrap_or_default();
        if let Some(proxy) = proxy {
            proxy.stop();
        }
        self.ran(
            call_id,
            action,
            settled,
            waited?,
            (stdout, stderr, out_trunc || err_trunc),
            started,
        )
    }
}

impl Session {
    /// Writes, once per session, that the socket index fell back to a walk per call (it only
    /// matters to a call with declared paths).
    pub(crate) fn note_socket_walks(&self, plan: &Plan) {
        if plan.extra_read.is_empty() && plan.extra_write.is_empty() {
            return;
        }
        let Some(why) = self.confiner.sockets().degraded() else {
            return;
        };
        if !self
            .sockets_degraded_noted
            .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            let _ = self
                .log
                .record(None, chock_protocol::log::Note::SocketIndexDegraded { why });
        }
    }
}
