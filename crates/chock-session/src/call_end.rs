//! How a confined call (`call_async.rs`) ended, as it is recorded: a sandbox that could not
//! start, a proxy that could not be served, a call that ran; and where its output goes besides
//! the capture.

use std::io::Write;
use std::time::Instant;

use chock_decide::Settled;
use chock_protocol::log::CommandResult;
use chock_sandbox::SandboxError;

use crate::call::command_status;
use crate::call_output::{Output, SinkWriter, Stream, StreamSink};
use crate::{CallOutcome, CallResult, Session, SessionError};

/// Where a call's `stream` goes besides its capture, as `output` says.
pub(crate) fn output_sink(output: Output, stream: Stream) -> Option<Box<dyn Write + Send>> {
    match (output, stream) {
        (Output::Capture, _) => None,
        (Output::Stream, Stream::Stdout) => Some(Box::new(std::io::stdout())),
        (Output::Stream, Stream::Stderr) => Some(Box::new(std::io::stderr())),
        (Output::StreamTo(StreamSink(sink)), stream) => Some(Box::new(SinkWriter { sink, stream })),
    }
}

/// What a confined call records of how it ended.
impl Session {
    /// Records a call whose sandbox could not be started; the error to return.
    pub(crate) fn start_failed(
        &self,
        call_id: &str,
        e: SandboxError,
    ) -> Result<SessionError, SessionError> {
        let (kind, layer) = match &e {
            SandboxError::Layer { layer, .. } => ("layer", Some(layer.name())),
            SandboxError::Exec { .. } => ("exec", None),
            SandboxError::Plan(_) => ("plan", None),
            SandboxError::Host { .. } => ("host", None),
        };
        self.log.record(
            Some(call_id),
            CommandResult::Failed {
                error: kind.to_string(),
                layer: layer.map(str::to_string),
                message: e.to_string(),
            },
        )?;
        Ok(e.into())
    }

    /// Records a call whose egress proxy could not be served; the error to return.
    pub(crate) fn proxy_failed(
        &self,
        call_id: &str,
        e: SessionError,
    ) -> Result<SessionError, SessionError> {
        self.log.record(
            Some(call_id),
            CommandResult::Failed {
                error: "proxy".to_string(),
                layer: None,
                message: e.to_string(),
            },
        )?;
        Ok(e)
    }

    /// Checkpoints and records a call that ran, and gives its result.
    pub(crate) fn ran(
        &self,
        call_id: String,
        action: String,
        settled: Settled,
        outcome: chock_sandbox::Outcome,
        (stdout, stderr, truncated): (Vec<u8>, Vec<u8>, bool),
        started: Instant,
    ) -> Result<CallResult, SessionError> {
        let checkpoint = self.workspace.checkpoint(&call_id).ok().flatten();
        self.log.record(
            Some(&call_id),
            CommandResult::Ran {
                status: command_status(outcome.status),
                exit_code: outcome.status.code(),
                limits: serde_json::to_value(&outcome.limits).unwrap_or_default(),
                duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                stdout_bytes: stdout.len(),
                stderr_bytes: stderr.len(),
                truncated,
                checkpoint,
            },
        )?;
        Ok(CallResult {
            call_id,
            action,
            decision: settled.decision,
            decided_by: settled.rule.clone(),
            settled,
            outcome: CallOutcome::Ran {
                outcome,
                stdout,
                stderr,
                truncated,
            },
        })
    }
}
