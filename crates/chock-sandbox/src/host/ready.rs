//! A call made ready to start: all the host works out before anything of the call runs, split
//! from the start itself so a caller can do it while something else is waited on.
//!
//! The session's pipeline makes a call's `decision` durable before the call may start (rule 3),
//! an `fdatasync` of about a millisecond on this machine's disk. What the host has to do first —
//! check the plan, read the kernel's Landlock ABI, copy the seccomp programs, make the call's
//! cgroup, hold the session's overlay instance, work out the mount steps (and, in a session
//! sandbox, the key and message) — reads the host and makes nothing the command can use, so the
//! session does it on another thread while the decision is synced ([`ready`]), and the start
//! ([`ReadyCall::start`]) forks or sends the call only after. A ready call that is never started
//! (the decision refused it) leaves nothing: its cgroup is removed and its lease ends.

use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Instant;

use crate::child::init::{self, ChildFds};
use crate::child::landlock_rules;
use crate::child::prepared::Prepared;
use crate::host::call_io::StdioMode;
use crate::host::call_io::{CallIo, Setup};
use crate::host::cgroup::{self, Cgroup};
use crate::host::gate::Gate;
use crate::host::hints;
use crate::host::plumbing::compiled_seccomp;
use crate::host::prepare;
use crate::host::running::SandboxChild;
use crate::host::session_sandbox::SessionCall;
use crate::host::shared_overlay::{OverlayLease, SharedOverlay};
use crate::host::socket_index::SocketIndex;
use crate::wire::error::{Layer, SandboxError};
use crate::wire::outcome::LimitsReport;
use crate::wire::plan::Plan;

/// A call ready to start (see the module). Dropped unstarted, it undoes what it made.
pub struct ReadyCall<'a> {
    /// First, so that it is dropped first: a sandbox built already is killed and reaped before
    /// its cgroup is removed and its overlay lease ends.
    how: How<'a>,
    plan: &'a Plan,
    limits: LimitsReport,
    cgroup: UnusedCgroup,
    /// Held from before the start (the setup and the init inherit its descriptor) until the call
    /// is reaped.
    overlay: Option<OverlayLease>,
}

enum How<'a> {
    /// Sent to the session's sandbox, with the cgroup's `cgroup.procs` to hand over.
    Session {
        call: Box<SessionCall<'a>>,
        procs: Option<OwnedFd>,
    },
    /// Built the per-call way; `built` once [`ReadyCall::build`] made the sandbox already (its
    /// init waits at the gate).
    PerCall {
        prepared: Box<Prepared>,
        built: Option<Built>,
    },
}

/// A per-call sandbox built up to its command's start: the setup process and its init, every
/// layer on, the init blocked reading its gate.
struct Built {
    stdio: StdioMode,
    io: CallIo,
    setup: BuiltSetup,
}

/// A built call's setup process until the start owns it: dropped (the call refused or dropped
/// unstarted), it is killed (and the init with it) and reaped, and the command never existed.
struct BuiltSetup(libc::pid_t);

impl BuiltSetup {
    /// Hands the process over to the start, which reaps it.
    fn into_pid(self) -> libc::pid_t {
        let pid = self.0;
        std::mem::forget(self);
        pid
    }
}

impl Drop for BuiltSetup {
    fn drop(&mut self) {
        let setup = Setup::Child(self.0);
        setup.kill();
        setup.reap();
    }
}

/// Forks the setup process of a per-call sandbox with `fds`; the child never returns.
fn fork_setup(prepared: &Prepared, fds: ChildFds) -> Result<libc::pid_t, SandboxError> {
    // SAFETY: the child runs only `init::setup_main`, which uses prepared data and
    // async-signal-safe calls (see prepare.rs for the one exception), and never returns.
    let setup_pid = unsafe { libc::fork() };
    if setup_pid < 0 {
        return Err(SandboxError::host("fork", std::io::Error::last_os_error()));
    }
    if setup_pid == 0 {
        init::setup_main(prepared, fds);
    }
    Ok(setup_pid)
}

impl std::fmt::Debug for ReadyCall<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadyCall")
            .field("argv", &self.plan.argv)
            .field("in_session", &matches!(self.how, How::Session { .. }))
            .finish_non_exhaustive()
    }
}

/// Makes `plan` ready to start (see [`crate::spawn_in_session`] for `overlay` and `sockets`).
/// Every error a start would report for the plan itself (a layer the kernel lacks, an overlay
/// that cannot be made) is reported here, before anything ran.
pub fn ready<'a>(
    plan: &'a Plan,
    overlay: Option<&SharedOverlay>,
    sockets: Option<&'a SocketIndex>,
) -> Result<ReadyCall<'a>, SandboxError> {
    plan.validate()?;
    match (plan.shared_overlay, overlay) {
        (true, None) => {
            return Err(SandboxError::Plan(
                "the plan's workspace is a session's shared overlay: spawn it with spawn_shared"
                    .into(),
            ));
        }
        (false, Some(_)) => {
            return Err(SandboxError::Plan(
                "a shared overlay was given for a plan that does not share one".into(),
            ));
        }
        (true, Some(o)) if !o.is_for(&plan.workspace) => {
            return Err(SandboxError::Plan(
                "the plan's overlay layers are not those of the shared overlay given".into(),
            ));
        }
        _ => {}
    }
    let abi = landlock_rules::kernel_abi();
    if abi < landlock_rules::MINIMUM_ABI {
        return Err(SandboxError::Layer {
            layer: Layer::Landlock,
            reason: format!("the kernel offers no Landlock ABI (answer {abi})"),
            hint: hints::landlock_missing(),
        });
    }
    let seccomp = compiled_seccomp()?;
    let mut limits = LimitsReport {
        core_bytes: 0,
        fsize_bytes: plan.limits.fsize_bytes,
        nofile: plan.limits.nofile,
        tmp_size_bytes: plan.limits.tmp_size_bytes,
        ..LimitsReport::default()
    };
    // Removed again if the call never starts.
    let cgroup = UnusedCgroup(cgroup::create(&plan.limits, &mut limits));
    let procs = cgroup.0.as_ref().map(Cgroup::procs_file);
    let overlay = overlay.map(SharedOverlay::lease).transpose()?;
    let overlay_fd = overlay.as_ref().map(OverlayLease::fd);
    let session = match sockets {
        Some(index) => crate::host::session_sandbox::prepare(plan, abi, &seccomp, index)?,
        None => None,
    };
    let how = match session {
        Some(call) => {
            let procs = match &procs {
                Some(p) => Some(
                    File::options()
                        .write(true)
                        .open(p)
                        .map(OwnedFd::from)
                        .map_err(|e| SandboxError::host("open cgroup.procs", e))?,
                ),
                None => None,
            };
            How::Session {
                call: Box::new(call),
                procs,
            }
        }
        None => How::PerCall {
            prepared: Box::new(prepare::prepare(
                plan,
                abi,
                seccomp,
                procs.as_deref(),
                overlay_fd,
                sockets,
            )?),
            built: None,
        },
    };
    Ok(ReadyCall {
        plan,
        limits,
        cgroup,
        overlay,
        how,
    })
}

impl ReadyCall<'_> {
    /// Builds a per-call sandbox now, up to its command's start: the namespaces, the mount tree
    /// and every other layer, while the caller makes the call's decision durable. The command
    /// starts only once `gate`'s key is opened ([`crate::GateKey::open`]; the init waits at the gate
    /// until then, and starts nothing if the key is dropped instead), so the key may be opened
    /// as soon as the decision is durable, before this returns; [`ReadyCall::start`] then hands
    /// back the running call. A ready call dropped unstarted kills what was built. A call of a
    /// session sandbox is sent at its start, as before (`gate` is then unused: its start is its
    /// go). A layer that cannot be applied is reported by the start.
    pub fn build(&mut self, stdio: StdioMode, gate: Gate) -> Result<(), SandboxError> {
        let How::PerCall { prepared, built } = &mut self.how else {
            return Ok(());
        };
        if built.is_some() {
            return Err(SandboxError::Plan(
                "the call's sandbox is built already".into(),
            ));
        }
        let io = CallIo::new(stdio, self.plan.host_channel)?;
        let overlay_fd = self.overlay.as_ref().map(OverlayLease::fd);
        let fds = ChildFds {
            gate: Some(gate.0.as_raw_fd()),
            ..io.child_fds(overlay_fd, None)
        };
        let setup_pid = fork_setup(prepared, fds)?;
        drop(gate);
        *built = Some(Built {
            stdio,
            io,
            setup: BuiltSetup(setup_pid),
        });
        Ok(())
    }

    /// Starts the call: forks its setup process (or sends it to the session's sandbox), which
    /// builds every layer and executes the command. Returns once the command is executing, or with
    /// the error of the first layer that could not be applied.
    pub fn start(self, stdio: StdioMode) -> Result<SandboxChild, SandboxError> {
        let ReadyCall {
            plan,
            limits,
            mut cgroup,
            overlay,
            how,
        } = self;
        let overlay_fd = overlay.as_ref().map(OverlayLease::fd);
        match how {
            How::Session { call, procs } => {
                let io = CallIo::new(stdio, plan.host_channel)?;
                let started = Instant::now();
                let fds = io.child_fds(overlay_fd, procs.as_ref().map(AsRawFd::as_raw_fd));
                let (zygote, prepared) = call.start_call(plan, fds)?;
                drop(procs);
                let cgroup = cgroup.0.take();
                io.finish(
                    Setup::Session {
                        pidfd: None,
                        _zygote: zygote,
                    },
                    &prepared,
                    plan,
                    started,
                    (cgroup, overlay, limits),
                )
            }
            How::PerCall { prepared, built } => {
                let (io, setup_pid) = match built {
                    Some(b) => {
                        if b.stdio != stdio {
                            return Err(SandboxError::Plan(format!(
                                "the call was built with {:?} streams, not {stdio:?}",
                                b.stdio
                            )));
                        }
                        (b.io, b.setup.into_pid())
                    }
                    None => {
                        let io = CallIo::new(stdio, plan.host_channel)?;
                        let setup_pid = fork_setup(&prepared, io.child_fds(overlay_fd, None))?;
                        (io, setup_pid)
                    }
                };
                let cgroup = cgroup.0.take();
                io.finish(
                    Setup::Child(setup_pid),
                    &prepared,
                    plan,
                    Instant::now(),
                    (cgroup, overlay, limits),
                )
            }
        }
    }
}

/// A call's cgroup until the call owns it: dropped early (an error, a call never started), it is
/// removed.
#[derive(Debug)]
struct UnusedCgroup(Option<Cgroup>);

impl Drop for UnusedCgroup {
    fn drop(&mut self) {
        if let Some(cg) = &self.0 {
            cg.remove();
        }
    }
}
