//! The host's handle on a session init (`child/zygote.rs` is the init as it runs): what its
//! sandbox was built from, the slot a session keeps it in, starting it, and the message that asks
//! it for one call. A session sandbox's calls are prepared in `session_sandbox.rs`.

use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags};

use crate::child::fresh;
use crate::child::init::{self, ChildFds};
use crate::child::landlock_rules::LandlockPlan;
use crate::child::prepared::{CommandSpec, Prepared};
use crate::host::plumbing::{SetupReport, seqpacket_pair};
use crate::wire::error::{Layer, SandboxError};
use crate::wire::mount_ops::Op;
use crate::wire::plan::{NetworkPlan, Plan, WorkspaceMount};

/// Everything a session sandbox was built from, compared as a whole with what a call would build.
/// The plan's fields that reach the namespaces, the tree or the init's confinement are all here;
/// only `argv`, `env` and `cwd` (the command message) and `timeout` (the host's) may differ
/// between the calls of one session sandbox. `tree` is the step list the builder makes for the
/// plan now, so the host's state it reads (symlinks resolved, the policy file's device and inode,
/// the sockets under declared paths from the session's index, which sources are directories)
/// is compared too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SessionKey {
    home: std::path::PathBuf,
    workspace: WorkspaceMount,
    shared_overlay: bool,
    project_path: std::path::PathBuf,
    policy_file: Option<std::path::PathBuf>,
    extra_read: Vec<std::path::PathBuf>,
    extra_write: Vec<std::path::PathBuf>,
    store_paths: Vec<crate::wire::plan::StorePath>,
    limits: crate::wire::plan::Limits,
    network: NetworkPlan,
    tree: Vec<Op>,
    fresh: Vec<fresh::FreshOp>,
    writable_dirs: Vec<std::path::PathBuf>,
    writable_files: Vec<std::path::PathBuf>,
}

impl SessionKey {
    pub(crate) fn new(plan: &Plan, p: &Prepared) -> SessionKey {
        let LandlockPlan {
            writable_dirs,
            writable_files,
            ..
        } = p.landlock.clone();
        SessionKey {
            home: plan.home.clone(),
            workspace: plan.workspace.clone(),
            shared_overlay: plan.shared_overlay,
            project_path: plan.project_path.clone(),
            policy_file: plan.policy_file.clone(),
            extra_read: plan.extra_read.clone(),
            extra_write: plan.extra_write.clone(),
            store_paths: plan.store_paths.clone(),
            limits: plan.limits.clone(),
            network: plan.network,
            tree: p.steps.iter().map(|s| s.op.clone()).collect(),
            fresh: p.fresh.iter().map(|s| s.op.clone()).collect(),
            writable_dirs,
            writable_files,
        }
    }
}

/// A session's sandbox slot (kept in its [`SocketIndex`], the object a session passes to every
/// call).
#[derive(Default)]
pub(crate) struct Slot(Mutex<Option<Arc<Zygote>>>, AtomicBool);

impl Slot {
    /// Whether this is the session's first call (which is built the per-call way); from the
    /// second on, calls run in the session sandbox.
    pub(crate) fn first_call(&self) -> bool {
        !self.1.swap(true, Ordering::SeqCst)
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Option<Arc<Zygote>>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The host pid of the current session init, when there is one.
    pub(crate) fn init_pid(&self) -> Option<u32> {
        self.lock().as_ref().map(|z| z.init_pid)
    }
}
/// A running session init, known by its setup process (the host's child) and a pidfd.
#[derive(Debug)]
pub(crate) struct Zygote {
    control: OwnedFd,
    setup_pid: libc::pid_t,
    pidfd: OwnedFd,
    init_pid: u32,
    lifeline: Option<OwnedFd>,
    pub(crate) key: SessionKey,
}

impl Zygote {
    /// Forks the session's setup process, which makes the namespaces and the session init, which
    /// builds the tree; returns once it waits for calls, or with the layer that failed.
    pub(crate) fn start(
        prepared: &Prepared,
        plan: &Plan,
        key: SessionKey,
    ) -> Result<Zygote, SandboxError> {
        let (chan, chan_child) = seqpacket_pair()?;
        let (control, control_child) = seqpacket_pair()?;
        let (status_r, status_w) = crate::host::plumbing::pipe()?;
        let (lifeline_r, lifeline_w) = crate::host::plumbing::pipe()?;
        let null = crate::host::plumbing::dev_null()?;
        let fds = ChildFds {
            chan: chan_child.as_raw_fd(),
            status_w: status_w.as_raw_fd(),
            lifeline_r: lifeline_r.as_raw_fd(),
            stdio: [Some(null.as_raw_fd()); 3],
            overlay: None,
            cgroup: None,
            control: Some(control_child.as_raw_fd()),
            gate: None,
            net: None,
            setup: None,
            host_channel: None,
        };
        let started = Instant::now();
        // SAFETY: the child runs only `init::setup_with` and the session init, which use prepared
        // data and async-signal-safe calls (see prepare.rs for the one exception), and never
        // return.
        let setup_pid = unsafe { libc::fork() };
        if setup_pid < 0 {
            return Err(SandboxError::host("fork", std::io::Error::last_os_error()));
        }
        if setup_pid == 0 {
            init::setup_with(prepared, fds, &crate::child::zygote::SESSION_SHAPE);
        }
        drop((
            chan_child,
            control_child,
            status_w,
            lifeline_r,
            null,
            status_r,
        ));
        let report = SetupReport::read(chan.as_raw_fd(), prepared, plan, started);
        match report {
            Ok(SetupReport {
                init_pidfd: Some(pidfd),
                init_pid,
                ready: true,
                ..
            }) => Ok(Zygote {
                control,
                setup_pid,
                pidfd,
                init_pid,
                lifeline: Some(lifeline_w),
                key,
            }),
            other => {
                drop(lifeline_w);
                // SAFETY: kill our own child (the setup); the session init dies with it.
                unsafe { libc::kill(setup_pid, libc::SIGKILL) };
                crate::host::plumbing::reap(setup_pid);
                Err(other.err().unwrap_or_else(|| SandboxError::Layer {
                    layer: Layer::Lifetime,
                    reason: "the session's sandbox ended before it was built".into(),
                    hint: "run `chock doctor` to see which layer this machine lacks".into(),
                }))
            }
        }
    }

    /// Whether the session init still runs (its pidfd is not readable).
    pub(crate) fn alive(&self) -> bool {
        let mut pfd = libc::pollfd {
            fd: self.pidfd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, no wait.
        unsafe { libc::poll(&raw mut pfd, 1, 0) == 0 }
    }

    /// Sends one call: the command message and its descriptors (the report channel, the status
    /// pipe, the lifeline, the three standard streams, then the overlay's and the cgroup's when
    /// the call has them, and last its host channel).
    pub(crate) fn send(&self, cmd: &CommandSpec, fds: &ChildFds) -> std::io::Result<()> {
        let flags = u32::from(fds.overlay.is_some())
            | (u32::from(fds.cgroup.is_some()) << 1)
            | (u32::from(fds.host_channel.is_some()) << 2);
        let bytes = message(cmd, flags);
        let mut raw: Vec<RawFd> = vec![fds.chan, fds.status_w, fds.lifeline_r];
        for (i, s) in fds.stdio.iter().enumerate() {
            raw.push(s.unwrap_or(i32::try_from(i).unwrap_or(0)));
        }
        raw.extend(fds.overlay);
        raw.extend(fds.cgroup);
        raw.extend(fds.host_channel);
        // SAFETY: every descriptor is open for the duration of the call (held by the caller, or
        // the host's own 0, 1 and 2 for inherited streams).
        let borrowed: Vec<BorrowedFd<'_>> = raw
            .iter()
            .map(|fd| unsafe { BorrowedFd::borrow_raw(*fd) })
            .collect();
        let mut space = [std::mem::MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(9))];
        let mut anc = SendAncillaryBuffer::new(&mut space);
        if !anc.push(SendAncillaryMessage::ScmRights(&borrowed)) {
            return Err(std::io::Error::other("too many descriptors"));
        }
        rustix::net::sendmsg(
            &self.control,
            &[std::io::IoSlice::new(&bytes)],
            &mut anc,
            SendFlags::NOSIGNAL,
        )?;
        Ok(())
    }
}

impl Drop for Zygote {
    fn drop(&mut self) {
        // The lifeline's end: the session's setup process kills the session init (and with it
        // every process of its pid namespace), then exits; it is reaped off the caller's thread.
        self.lifeline = None;
        let pid = self.setup_pid;
        if std::thread::Builder::new()
            .name("chock-reap-session".into())
            .spawn(move || crate::host::plumbing::reap(pid))
            .is_err()
        {
            crate::host::plumbing::reap(pid);
        }
    }
}

/// The command message: flags, the three counts, then every string NUL-terminated (candidates,
/// argv, environment, working directory).
pub(crate) fn message(cmd: &CommandSpec, flags: u32) -> Vec<u8> {
    let (candidates, argv, env, cwd) = cmd.parts();
    let mut out = Vec::new();
    for n in [
        flags,
        u32::try_from(candidates.len()).unwrap_or(u32::MAX),
        u32::try_from(argv.len()).unwrap_or(u32::MAX),
        u32::try_from(env.len()).unwrap_or(u32::MAX),
    ] {
        out.extend_from_slice(&n.to_ne_bytes());
    }
    for s in candidates.iter().chain(argv).chain(env).chain([cwd]) {
        out.extend_from_slice(s.as_bytes_with_nul());
    }
    out
}
