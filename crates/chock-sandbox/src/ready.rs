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

use crate::call_io::{CallIo, Setup, compiled_seccomp};
use crate::cgroup::{self, Cgroup};
use crate::error::{Layer, SandboxError};
use crate::hints;
use crate::init;
use crate::landlock_rules;
use crate::outcome::LimitsReport;
use crate::plan::Plan;
use crate::prepare::{self, Prepared};
use crate::session_sandbox::SessionCall;
use crate::shared_overlay::{OverlayLease, SharedOverlay};
use crate::socket_index::SocketIndex;
use crate::spawn::{SandboxChild, StdioMode};

/// A call ready to start (see the module). Dropped unstarted, it undoes what it made.
pub struct ReadyCall<'a> {
    plan: &'a Plan,
    limits: LimitsReport,
    cgroup: UnusedCgroup,
    /// Held from before the start (the setup and the init inherit its descriptor) until the call
    /// is reaped.
    overlay: Option<OverlayLease>,
    how: How<'a>,
}

enum How<'a> {
    /// Sent to the session's sandbox, with the cgroup's `cgroup.procs` to hand over.
    Session {
        call: Box<SessionCall<'a>>,
        procs: Option<OwnedFd>,
    },
    /// Built the per-call way.
    PerCall(Box<Prepared>),
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
        Some(index) => crate::session_sandbox::prepare(plan, abi, &seccomp, index)?,
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
        None => How::PerCall(Box::new(prepare::prepare(
            plan,
            abi,
            seccomp,
            procs.as_deref(),
            overlay_fd,
            sockets,
        )?)),
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
        let io = CallIo::new(stdio)?;
        let started = Instant::now();
        match how {
            How::Session { call, procs } => {
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
            How::PerCall(prepared) => {
                let fds = io.child_fds(overlay_fd, None);
                // SAFETY: the child runs only `init::setup_main`, which uses prepared data and
                // async-signal-safe calls (see prepare.rs for the one exception), and never
                // returns.
                let setup_pid = unsafe { libc::fork() };
                if setup_pid < 0 {
                    return Err(SandboxError::host("fork", std::io::Error::last_os_error()));
                }
                if setup_pid == 0 {
                    init::setup_main(&prepared, fds);
                }
                let cgroup = cgroup.0.take();
                io.finish(
                    Setup::Child(setup_pid),
                    &prepared,
                    plan,
                    started,
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
