//! The execution seam: what a session asks of whatever confines its calls, and nothing about how.
//!
//! A session prepares a call from its [`Plan`] ([`Confiner::prepare`]: checked, and serialisable
//! as it stands, [`PreparedCall::to_wire`]), starts it with its standard streams
//! ([`Confiner::start`]), and gets a [`CallHandle`]: the command's streams, the endpoint its
//! egress reaches the host on, a wait for its [`Outcome`], and a [`Killer`]. No host pid crosses
//! the seam: a call confined somewhere else (a microVM guest, docs/architecture.md, "The execution
//! seam") has none the host could signal. Every method is async and none blocks the caller's
//! thread; the one blocking kernel step of the local implementation (the fork and the setup's
//! report) runs in one place, on tokio's blocking pool (`host/local.rs`).
//!
//! [`crate::LocalConfiner`] is the first implementation: the in-process sandbox, holding the
//! session's shared overlay, socket index and session init behind it.

use std::fs::File;
use std::future::Future;
use std::net::TcpListener;
use std::os::fd::{AsRawFd, OwnedFd};
use std::pin::Pin;
use std::sync::Arc;

use crate::host::call_io::StdioMode;
use crate::host::gate::Gate;
use crate::wire::error::SandboxError;
use crate::wire::outcome::Outcome;
use crate::wire::plan::Plan;

/// A boxed future, so that [`Confiner`] and [`CallHandle`] can be used as trait objects (a
/// session holds an `Arc<dyn Confiner>`).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What confines a session's calls (see the module).
pub trait Confiner: Send + Sync + std::fmt::Debug {
    /// Checks `plan` and makes it ready to start. Nothing of the call exists yet: a prepared call
    /// that is never started leaves nothing behind.
    fn prepare(&self, plan: Plan) -> BoxFuture<'_, Result<PreparedCall, SandboxError>>;

    /// Starts `call` with its standard streams as `stdio` says. With a `gate`, the call is built
    /// up to its command's start and waits there until the gate's key is opened
    /// ([`crate::GateKey::open`]: the call's decision is durable, rule 3); a key dropped unopened
    /// ends it before anything ran, and this returns the error. Resolves once the command is
    /// executing, or with the first layer that could not be applied (rule 1). The work begins
    /// when the future is first polled, and goes on without it being polled again (the local
    /// confiner hands it to the blocking pool): a gated call is polled once, then its decision is
    /// settled while it is built.
    fn start(
        &self,
        call: PreparedCall,
        stdio: StdioMode,
        gate: Option<Gate>,
    ) -> BoxFuture<'_, Result<Box<dyn CallHandle>, SandboxError>>;
}

/// A started call, whoever confines it. Dropping it kills the call.
pub trait CallHandle: Send + std::fmt::Debug {
    /// Waits for the call to end or reach its plan's timeout (then it is killed); every process
    /// of the call is gone when this resolves.
    fn wait(&mut self) -> BoxFuture<'_, Result<Outcome, SandboxError>>;
    /// The command's stdin, in [`StdioMode::Duplex`] (once).
    fn take_stdin(&mut self) -> Option<File>;
    /// The command's stdout, in [`StdioMode::Piped`] or `Duplex` (once). It ends when every
    /// process of the call is gone, so read it beside [`CallHandle::wait`], not before.
    fn take_stdout(&mut self) -> Option<File>;
    /// The command's stderr, as [`CallHandle::take_stdout`].
    fn take_stderr(&mut self) -> Option<File>;
    /// The endpoint the call's egress reaches the host on, for a plan with
    /// [`crate::NetworkPlan::Proxy`] (once): the host's broker serves the proxy on it.
    fn take_egress(&mut self) -> Option<TcpListener>;
    /// The host's end of the call's host channel, for a plan with [`Plan::host_channel`] (once):
    /// a `SOCK_SEQPACKET` unix socket whose other end only the call's processes hold, so it reads
    /// end-of-file once they are all gone. A confiner that cannot give one fails the call's start
    /// instead of starting it without; the default gives none.
    fn take_host_channel(&mut self) -> Option<std::os::fd::OwnedFd> {
        None
    }
    /// A handle that kills the call from elsewhere (an interrupt, another task).
    fn killer(&self) -> Result<Killer, SandboxError>;
    /// Hands the call's keeping to another process (a session's keeper, docs/handover.md): the
    /// descriptors that keep it running, read its output and tell its end, for a call started in
    /// [`StdioMode::Piped`] from a plan with [`Plan::kept`]. From then on the call no longer ends
    /// with this handle or with this process: it ends when its command does, at the timeout the
    /// keeper enforces, or when the last copy of [`KeptCall::lifeline`] is closed. This handle's
    /// [`CallHandle::wait`] still resolves when the call's processes are gone (and cleans up after
    /// them), but its status is the keeper's to read. A confiner that cannot hand a call over
    /// refuses, and the call stays with this handle.
    fn keep(&mut self) -> Result<KeptCall, SandboxError> {
        Err(SandboxError::Plan(
            "this confiner cannot hand a call to another process".into(),
        ))
    }
}

/// What keeps a started call running and says how it went, as descriptors another process can be
/// given over a unix socket ([`CallHandle::keep`]). No host pid: the call's init is named by a
/// pidfd only.
#[derive(Debug)]
pub struct KeptCall {
    /// While any copy of it is open, the call runs on; when the last is closed, the call is killed.
    pub lifeline: OwnedFd,
    /// A pidfd of the call's init: readable once every process of the call is gone, and what
    /// kills it ([`Killer::from_pidfd`]).
    pub pidfd: OwnedFd,
    /// The read end of the call's status pipe: the command's wait status (4 bytes, native
    /// order) once every process of the call is gone; nothing if the init was killed first.
    pub status: OwnedFd,
    /// The read ends of the command's stdout and stderr.
    pub stdout: OwnedFd,
    /// As `stdout`.
    pub stderr: OwnedFd,
    /// What is left of the plan's wall-clock limit, for the keeper to enforce.
    pub timeout: Option<std::time::Duration>,
    /// Copies of the call's doors to the host: the keeper holds them open while no owner
    /// serves them, and gives them to the owner that takes the call over.
    pub doors: CallDoors,
}

/// The host's ends of a kept call's doors (docs/handover.md, "Background commands move"): what
/// the call reaches the host through, which the owner of the session serves — whichever process
/// that is. The process that started the call serves its own copies until it lets go; the
/// keeper holds these copies, so that while nobody serves them the call's requests wait (a
/// connection in the listener's queue, a request in the channel, a forbidden system call
/// blocked before it runs) instead of being refused, and hands them to the next owner.
#[derive(Debug, Default)]
pub struct CallDoors {
    /// The listening socket the call's egress proxy is served on
    /// ([`CallHandle::take_egress`]).
    pub egress: Option<OwnedFd>,
    /// The host's end of the call's host channel ([`CallHandle::take_host_channel`]).
    pub channel: Option<OwnedFd>,
    /// The call's seccomp filter's listener, watched by [`crate::SeccompWatch`].
    pub seccomp: Option<OwnedFd>,
}

impl CallDoors {
    /// The doors there are, in their fixed order (egress, channel, seccomp): what is sent.
    pub fn present(&self) -> [bool; 3] {
        [
            self.egress.is_some(),
            self.channel.is_some(),
            self.seccomp.is_some(),
        ]
    }

    /// The descriptors there are, in the order of [`CallDoors::present`].
    pub fn fds(&self) -> Vec<std::os::fd::BorrowedFd<'_>> {
        [&self.egress, &self.channel, &self.seccomp]
            .into_iter()
            .flatten()
            .map(std::os::fd::AsFd::as_fd)
            .collect()
    }

    /// The doors from `present` (as [`CallDoors::present`] said) and their descriptors in that
    /// order; `None` when the count does not match.
    pub fn from_fds(present: [bool; 3], fds: Vec<OwnedFd>) -> Option<CallDoors> {
        if present.iter().filter(|p| **p).count() != fds.len() {
            return None;
        }
        let mut fds = fds.into_iter();
        let mut take = |p: bool| if p { fds.next() } else { None };
        Some(CallDoors {
            egress: take(present[0]),
            channel: take(present[1]),
            seccomp: take(present[2]),
        })
    }
}

/// A plan checked by a [`Confiner`] and ready to be started by it.
#[derive(Debug, Clone)]
pub struct PreparedCall {
    plan: Plan,
}

impl PreparedCall {
    /// A call of `plan`, once it was checked ([`Plan::validate`]).
    pub fn new(plan: Plan) -> Result<PreparedCall, SandboxError> {
        plan.validate()?;
        Ok(PreparedCall { plan })
    }

    /// The plan.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The call as bytes, for a confiner in another process (a microVM guest's agent) that runs
    /// the same driver: the plan is the whole of it, plain data naming nothing of this process.
    pub fn to_wire(&self) -> Result<Vec<u8>, SandboxError> {
        serde_json::to_vec(&self.plan)
            .map_err(|e| SandboxError::Plan(format!("the plan cannot be serialised: {e}")))
    }

    /// The call [`PreparedCall::to_wire`] wrote, checked again (the bytes crossed a boundary).
    pub fn from_wire(bytes: &[u8]) -> Result<PreparedCall, SandboxError> {
        let plan = serde_json::from_slice(bytes)
            .map_err(|e| SandboxError::Plan(format!("a serialised plan does not parse: {e}")))?;
        PreparedCall::new(plan)
    }
}

/// How a [`Killer`] kills its call: one implementation per confiner.
pub trait Kill: Send + Sync + std::fmt::Debug {
    /// Kills every process of the call; true when the call was still running.
    fn kill(&self) -> bool;
}

/// Kills a running call from anywhere ([`CallHandle::killer`]); cheap to clone. Killing a call
/// that ended already does nothing.
#[derive(Debug, Clone)]
pub struct Killer(Arc<dyn Kill>);

impl Killer {
    /// A killer that kills through `how`.
    pub fn new(how: impl Kill + 'static) -> Killer {
        Killer(Arc::new(how))
    }

    /// Kills the call; true when it was still running.
    pub fn kill(&self) -> bool {
        self.0.kill()
    }

    /// A killer of the call whose init `pidfd` names (as [`KeptCall::pidfd`] gives it, or a
    /// copy received from another process): SIGKILL through the pidfd, never a pid.
    pub fn from_pidfd(pidfd: OwnedFd) -> Killer {
        Killer::new(PidfdKill(pidfd))
    }
}

/// SIGKILL through a pidfd of a call's init, pid 1 of its pid namespace, whose death ends every
/// process of the call.
#[derive(Debug)]
pub(crate) struct PidfdKill(pub(crate) OwnedFd);

impl Kill for PidfdKill {
    fn kill(&self) -> bool {
        // SAFETY: signal through a pidfd we hold; the kernel refuses if the process exited.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.0.as_raw_fd(),
                libc::SIGKILL,
                std::ptr::null::<u8>(),
                0,
            )
        };
        rc == 0
    }
}
