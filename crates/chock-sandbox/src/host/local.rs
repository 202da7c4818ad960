//! The in-process sandbox as a [`Confiner`]: the first implementation of the execution seam
//! (`confine.rs`). It holds what a session's calls share — the session's one overlay instance,
//! its socket index and, in that index's slot, the session init — so a session holds none of it.
//!
//! The fork and the wait for the setup's report are blocking kernel steps: [`Confiner::start`]
//! runs them on tokio's blocking pool, here and nowhere else. The wait for the call's end is
//! not: [`CallHandle::wait`] waits on the init's pidfd and the status pipe through the runtime's
//! reactor (`SandboxChild::wait_async`).

use std::fs::File;
use std::net::TcpListener;
use std::sync::Arc;

use crate::confine::{BoxFuture, CallHandle, Confiner, KeptCall, Killer, PreparedCall};
use crate::host::call_io::StdioMode;
use crate::host::gate::Gate;
use crate::host::ready::ReadyCall;
use crate::host::running::SandboxChild;
use crate::host::shared_overlay::SharedOverlay;
use crate::host::socket_index::SocketIndex;
use crate::wire::error::SandboxError;
use crate::wire::outcome::Outcome;
use crate::wire::plan::Plan;

/// The in-process sandbox behind the execution seam (see the module). Cheap to clone: clones
/// share the overlay, the index and the session init.
#[derive(Debug, Clone)]
pub struct LocalConfiner(Arc<Local>);

#[derive(Debug)]
struct Local {
    overlay: Option<SharedOverlay>,
    sockets: Arc<SocketIndex>,
}

impl LocalConfiner {
    /// A confiner for one session: its calls share `overlay` (when the session's calls overlap)
    /// and `sockets`.
    pub fn new(overlay: Option<SharedOverlay>, sockets: Arc<SocketIndex>) -> LocalConfiner {
        LocalConfiner(Arc::new(Local { overlay, sockets }))
    }

    /// The session's socket index (to warm it while the model takes its first turn, and to say
    /// when it fell back to a walk per call).
    pub fn sockets(&self) -> &Arc<SocketIndex> {
        &self.0.sockets
    }

    /// The session's shared overlay, when its calls share one.
    pub fn overlay(&self) -> Option<&SharedOverlay> {
        self.0.overlay.as_ref()
    }

    /// Makes `plan` ready to start (`ready.rs`: the host's work before anything of the call runs),
    /// with the session's overlay when the plan shares it and the session's socket index. A
    /// caller that decides the call meanwhile builds it up to its gate
    /// ([`crate::ReadyCall::build`]) and starts it once the decision is durable.
    pub fn ready<'a>(&'a self, plan: &'a Plan) -> Result<ReadyCall<'a>, SandboxError> {
        let overlay = self.0.overlay.as_ref().filter(|_| plan.shared_overlay);
        crate::host::ready::ready(plan, overlay, Some(&self.0.sockets))
    }

    /// Starts `plan` now, on this thread (the fork and the setup's report included): what
    /// [`Confiner::start`] runs on the blocking pool, and only there. Every caller, a confined
    /// call and a session's service alike, goes through [`Confiner::start`].
    fn start_blocking(
        &self,
        plan: &Plan,
        stdio: StdioMode,
        gate: Option<Gate>,
    ) -> Result<SandboxChild, SandboxError> {
        let mut ready = self.ready(plan)?;
        if let Some(gate) = gate {
            ready.build(stdio, gate)?;
        }
        ready.start(stdio)
    }
}

impl Confiner for LocalConfiner {
    fn prepare(&self, plan: Plan) -> BoxFuture<'_, Result<PreparedCall, SandboxError>> {
        Box::pin(async move { PreparedCall::new(plan) })
    }

    fn start(
        &self,
        call: PreparedCall,
        stdio: StdioMode,
        gate: Option<Gate>,
    ) -> BoxFuture<'_, Result<Box<dyn CallHandle>, SandboxError>> {
        let this = self.clone();
        Box::pin(async move {
            let started =
                tokio::task::spawn_blocking(move || this.start_blocking(call.plan(), stdio, gate))
                    .await
                    .map_err(|e| {
                        SandboxError::host("start the call", std::io::Error::other(e))
                    })??;
            Ok(Box::new(started) as Box<dyn CallHandle>)
        })
    }
}

impl CallHandle for SandboxChild {
    fn wait(&mut self) -> BoxFuture<'_, Result<Outcome, SandboxError>> {
        Box::pin(self.wait_async())
    }

    fn take_stdin(&mut self) -> Option<File> {
        SandboxChild::take_stdin(self)
    }

    fn take_stdout(&mut self) -> Option<File> {
        SandboxChild::take_stdout(self)
    }

    fn take_stderr(&mut self) -> Option<File> {
        SandboxChild::take_stderr(self)
    }

    fn take_egress(&mut self) -> Option<TcpListener> {
        self.proxy_listener()
    }

    fn take_host_channel(&mut self) -> Option<std::os::fd::OwnedFd> {
        self.host_channel()
    }

    fn killer(&self) -> Result<Killer, SandboxError> {
        SandboxChild::killer(self)
    }

    fn keep(&mut self) -> Result<KeptCall, SandboxError> {
        SandboxChild::keep(self)
    }
}
