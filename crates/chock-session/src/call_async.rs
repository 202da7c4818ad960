//! The confined call (docs/architecture.md, "The execution seam"), the one way a session makes
//! one, for every kind of session ([`crate::Calls`]): `tool.call`, the decision, the run,
//! `command.result`, awaited end to end — the decision settled through the pipeline's async
//! `settle`, the call prepared, started and waited on through the session's confiner
//! (`Arc<dyn Confiner>`), the egress proxy served on the caller's runtime, and the turn of a
//! session whose calls take turns held across the awaits (an async mutex). Nothing here blocks on
//! a runtime; the confiner's own blocking kernel step (the fork) runs on the runtime's blocking
//! pool inside it. `chock exec` awaits it on the one runtime it makes; the agent's run_command on
//! the agent's.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Instant;

use chock_decide::Settled;
use chock_policy::Decision;
use chock_protocol::log::{CommandResult, ToolCall};
use chock_sandbox::{CallHandle, GateKey, Plan, SandboxError, StdioMode};

use crate::approve::Deciding;
use crate::call::refused_words;
use crate::call_end::output_sink;
use crate::call_output::{Stream, pump};
use crate::classify::Classified;
use crate::{CallOptions, CallOutcome, CallResult, Session, SessionError};

/// What the decision of one call needs.
struct ToDecide<'a> {
    call_id: &'a str,
    argv: &'a [String],
    plan: &'a Plan,
    classified: &'a Classified,
    action: &'a str,
    table: Decision,
    pipeline: &'a chock_decide::Pipeline,
}

impl Session {
    /// Runs one command as a tool call (see the module): classify it into an `exec.*` action, log
    /// `tool.call`, settle the act through `deciding`'s pipeline (the table, then whoever must
    /// answer: the question, the answer and the `decision` are durable before anything runs), run
    /// it in the sandbox, log `command.result`. The caller is on a tokio runtime (`chock exec`'s,
    /// the agent's); a multi-threaded one serves a call's egress proxy on it.
    ///
    /// A session whose calls take turns ([`crate::Calls::InTurn`], [`crate::Calls::One`]) holds
    /// its turn for the whole call, so its calls never overlap; a [`crate::Calls::One`] session's
    /// second call is `Err(SessionError::OneCallMade)`, before anything is logged for it.
    ///
    /// A refusal is an `Ok` result ([`CallOutcome::Refused`]). A layer that cannot be applied is
    /// `Err(SessionError::Sandbox(SandboxError::Layer))`, after a `command.result` saying so.
    pub async fn confined_call_async(
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
        let _turn = self.take_turn().await?;
        let pipeline = deciding.pipeline_for(self);
        let call_id = opts.call_id.clone().unwrap_or_else(|| self.next_call_id());
        self.settle_devshell(&pipeline, &call_id).await?;
        let can_ask = opts.ask_connections && pipeline.broker().can_ask();
        // A session's first plan with the git shim finds the host's gits (a `git --exec-path`
        // each, a few directories read): off the runtime's workers.
        let mut plan = if self.git.as_ref().is_some_and(|g| g.found().is_none()) {
            crate::nix::off_the_runtime(|| self.plan_asking(argv, opts, can_ask))
        } else {
            self.plan_asking(argv, opts, can_ask)
        };
        // A call to be kept by the session's keeper may outlive this process: it is built the
        // per-call way (a session sandbox ends with this process).
        plan.kept = opts.keep.is_some();
        let classified = self.classify(&plan);
        let action = classified.action.as_str().to_string();
        let table = self.decide(&classified.action).decision;
        let confiner = self.confiner();
        let how = ToDecide {
            call_id: &call_id,
            argv,
            plan: &plan,
            classified: &classified,
            action: &action,
            table,
            pipeline: &pipeline,
        };
        // A call the table allows outright is started at once, gated: built up to its command's
        // start while its `tool.call` and `decision` are written and synced, its command started
        // once the decision is durable. One that asks may wait on a person, and one the table
        // denies never runs.
        let (settled, early) = if table == Decision::Allow {
            let (gate, key) = chock_sandbox::gate()?;
            let starting = async {
                let call = confiner.prepare(plan.clone()).await?;
                confiner.start(call, StdioMode::Piped, Some(gate)).await
            };
            let mut starting = std::pin::pin!(starting);
            // The start is polled once before the decision is settled, which hands the build to
            // the confiner's blocking pool: the records' syncs (the decision's `fdatasync`, and on
            // a session's first act the sync of its new directory entries, together several
            // milliseconds) are written on this thread while the sandbox is built beside them.
            // Settled first, they were waited for before the build began.
            let polled = poll_once(starting.as_mut()).await;
            let settled = self.settle_async(&how, Some(key)).await;
            // Awaited even when the decision failed: what was built is gone before this returns.
            let started = match polled {
                Poll::Ready(started) => started,
                Poll::Pending => starting.await,
            };
            (settled?, Some(started))
        } else {
            (self.settle_async(&how, None).await?, None)
        };
        if !settled.allowed() {
            // A call started early was never let through its gate: its start failed and nothing
            // of it is left.
            drop(early);
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
        let started = match early {
            Some(started) => started,
            None => match confiner.prepare(plan.clone()).await {
                Ok(call) => confiner.start(call, StdioMode::Piped, None).await,
                Err(e) => Err(e),
            },
        };
        self.note_socket_walks(&plan);
        // A guest's call is read through the host's view of its workspace (it has no host pid).
        let guest_view = self
            .guest
            .is_some()
            .then(|| crate::channel::GuestView::new(&plan));
        let begun = Begun {
            started,
            guest_view,
        };
        self.run_async(call_id, action, settled, begun, opts, &pipeline)
            .await
    }

    /// The turn of a session whose calls mount their own overlay instance ([`crate::Calls`]):
    /// held for the whole call (across its awaits: an async mutex, so a call waiting for it
    /// holds no runtime thread), so that no two instances of the workspace's layers are mounted
    /// at once (each call's sandbox removes the mark the volatile one before it left). A
    /// [`crate::Calls::One`] session's second call is refused here, before anything is logged.
    async fn take_turn(&self) -> Result<Option<tokio::sync::MutexGuard<'_, bool>>, SessionError> {
        let Some(turn) = &self.in_turn else {
            return Ok(None);
        };
        let mut made = turn.lock().await;
        if self.calls == crate::Calls::One {
            if *made {
                return Err(SessionError::OneCallMade);
            }
            *made = true;
        }
        Ok(Some(made))
    }

    /// The call's `tool.call`, then its decision (the table, then whoever must answer: durable
    /// before it returns); `key` is opened the moment an allowing decision is durable.
    async fn settle_async(
        &self,
        how: &ToDecide<'_>,
        key: Option<GateKey>,
    ) -> Result<Settled, SessionError> {
        self.log.record(
            Some(how.call_id),
            ToolCall {
                tool: "exec".to_string(),
                input: None,
                argv: Some(how.argv.to_vec()),
                cwd: Some(how.plan.cwd.display().to_string()),
                action: Some(how.action.to_string()),
                resolved: how
                    .classified
                    .resolved
                    .as_ref()
                    .map(|p| p.display().to_string()),
            },
        )?;
        let detail = format!("run `{}` in the sandbox", how.argv.join(" "));
        // Only a question waits on a person; the table's own answer is at once.
        let _asking = (how.table == Decision::Ask).then(|| self.workspace.lend_background());
        let settled = how
            .pipeline
            .settle(Some(how.call_id), &how.classified.action, &detail)
            .await?;
        if let Some(key) = key.filter(|_| settled.allowed()) {
            key.open();
        }
        Ok(settled)
    }

    async fn run_async(
        &self,
        call_id: String,
        action: String,
        settled: Settled,
        begun: Begun,
        opts: &CallOptions,
        pipeline: &chock_decide::Pipeline,
    ) -> Result<CallResult, SessionError> {
        let Begun {
            started,
            guest_view,
        } = begun;
        let began = Instant::now();
        let mut call = match started {
            Ok(call) => call,
            Err(e) => return Err(self.start_failed(&call_id, e)?),
        };
        // Registered while it runs, so an interrupt can end it (and its whole process tree).
        let _running = call
            .killer()
            .ok()
            .and_then(|killer| self.running.register(&call_id, killer));
        // A call handed to the session's keeper: its output and end come through the keeper,
        // followed beside the wait (which then only cleans up after the call's processes). Kept
        // before its doors are taken, so that the keeper holds a copy of each.
        let kept = match &opts.keep {
            Some(keeping) => match call.keep() {
                // Spawned, so the keeper has the call from now on, not from when it is awaited.
                Ok(k) => Some(tokio::spawn(keeping.0.follow(&call_id, k))),
                Err(_) => None,
            },
            None => None,
        };
        let doors = crate::call_doors::Doors {
            call_id: &call_id,
            pipeline,
            credentials: std::sync::Arc::new(crate::channel::Credentials::new()),
            guest: guest_view.as_ref(),
        };
        let proxy = match call
            .take_egress()
            .map(|listener| self.open_egress(&doors, listener))
            .transpose()
        {
            Ok(proxy) => proxy,
            Err(e) => {
                // A kept call no longer ends with this handle: it is ended here.
                if let Ok(killer) = call.killer() {
                    killer.kill();
                }
                return Err(self.proxy_failed(&call_id, e)?);
            }
        };
        let limit = opts.capture_limit;
        // Both streams are read on the runtime's blocking pool while the call is awaited: the
        // wait enforces the timeout, and the call's end is what ends the streams.
        let pump_on = |f: Option<std::fs::File>, stream: Stream| {
            let output = opts.output.clone();
            f.map(|f| {
                tokio::task::spawn_blocking(move || pump(f, limit, output_sink(output, stream)))
            })
        };
        let out_task = pump_on(call.take_stdout(), Stream::Stdout);
        let err_task = pump_on(call.take_stderr(), Stream::Stderr);
        // The call's channel to the host is served beside the wait, on this runtime, and dropped
        // (closed) when the call has ended.
        let channel = call.take_host_channel();
        let waited = self.serve_channel_until(&doors, channel, call.wait()).await;
        let joined = |t: Option<tokio::task::JoinHandle<(Vec<u8>, bool)>>| async move {
            match t {
                Some(t) => t.await.unwrap_or_default(),
                None => Default::default(),
            }
        };
        let (mut stdout, out_trunc) = joined(out_task).await;
        let (mut stderr, err_trunc) = joined(err_task).await;
        let mut truncated = out_trunc || err_trunc;
        let mut waited = waited?;
        if let Some(kept) = kept {
            let end = kept
                .await
                .map_err(|e| SessionError::Output(std::io::Error::other(e)))?
                .map_err(SessionError::Output)?;
            waited.status = end.status;
            (stdout, stderr, truncated) = (end.stdout, end.stderr, end.truncated);
        }
        if let Some(proxy) = proxy {
            proxy.shutdown().await;
        }
        self.ran(
            call_id,
            action,
            settled,
            waited,
            (stdout, stderr, truncated),
            began,
        )
    }
}

/// A call as its start left it, and, for a call in a microVM guest, the host's view of its
/// workspace that its channel's requests are read through.
struct Begun {
    started: Result<Box<dyn CallHandle>, SandboxError>,
    guest_view: Option<crate::channel::GuestView>,
}

/// Polls `future` once and says what it gave: for a future whose first poll hands its work
/// elsewhere (the confiner's start, to the blocking pool), so that it runs while this task goes
/// on with something else.
async fn poll_once<F: Future + ?Sized>(mut future: Pin<&mut F>) -> Poll<F::Output> {
    std::future::poll_fn(|cx| Poll::Ready(future.as_mut().poll(cx))).await
}
