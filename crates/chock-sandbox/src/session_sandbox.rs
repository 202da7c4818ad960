//! The host side of a session sandbox: a sandbox built once per session, each call forked from an
//! init that lives inside it (docs/sandbox.md, "A sandbox per session").
//!
//! A session's first call is built the per-call way, so a session of one call (`chock exec`)
//! pays nothing for a sandbox it would not reuse; at its second call the host starts a
//! **session init** (`zygote.rs`): a user namespace
//! with the caller's ids, a mount namespace holding the whole tree (fresh root, `/usr`, `/etc`,
//! devices, declared paths with their socket masks, the workspace or its placeholder, the policy
//! file, read-only root) and a uts namespace, with the session init as pid 1 of a pid namespace.
//! It waits on a `SOCK_SEQPACKET` control socket. Each call sends it the command (argv,
//! environment, working directory) and its descriptors; the session init forks the call's setup
//! process, which makes the call's own mount (a copy of the tree), pid, ipc, network and cgroup
//! namespaces, and from there on the call is made as the per-call way makes it (`init.rs`): its
//! fresh mounts (`fresh.rs`), rlimits, capabilities, no_new_privs, Landlock, seccomp.
//!
//! A call runs in the session sandbox only when the sandbox was built for exactly what the call
//! would build: [`SessionKey`] is that comparison, in one place. A call whose key differs (another
//! declared path, another network, a socket bound since under a declared path, the policy file
//! replaced) gets a new session sandbox; the old one lives on until its last running call ends.
//! A session init that died is noticed before the call is sent (its pidfd) or when sending fails,
//! and a new one is built; every layer is still applied in the call and still fails it.

use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags};

use crate::call_io::{SetupReport, seqpacket_pair};
use crate::error::{Layer, SandboxError};
use crate::fresh;
use crate::init::{self, ChildFds};
use crate::landlock_rules::LandlockPlan;
use crate::mounts::{self, Op};
use crate::plan::{NetworkPlan, Plan, WorkspaceMount};
use crate::prepare::{self, CommandSpec, Prepared};
use crate::socket_index::SocketIndex;

/// The largest command message (argv, environment, paths) sent to a session init; a larger one
/// is built the per-call way.
pub(crate) const MAX_MESSAGE: usize = 128 * 1024;

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
    limits: crate::plan::Limits,
    network: NetworkPlan,
    tree: Vec<Op>,
    fresh: Vec<fresh::FreshOp>,
    writable_dirs: Vec<std::path::PathBuf>,
    writable_files: Vec<std::path::PathBuf>,
}

impl SessionKey {
    fn new(plan: &Plan, p: &Prepared) -> SessionKey {
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
    fn first_call(&self) -> bool {
        !self.1.swap(true, Ordering::SeqCst)
    }

    fn lock(&self) -> MutexGuard<'_, Option<Arc<Zygote>>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The host pid of the current session init, when there is one.
    pub(crate) fn init_pid(&self) -> Option<u32> {
        self.lock().as_ref().map(|z| z.init_pid)
    }
}

/// A call to be made in its session's sandbox.
pub(crate) struct SessionCall<'a> {
    prepared: Prepared,
    key: SessionKey,
    slot: &'a Slot,
}

/// What a session call needs prepared. `None`: this call is built the per-call way (the session's
/// first call, or a plan the session sandbox does not cover: a call-owned overlay, too many mounts
/// below a fresh one, a command too large for one message). A cost path only: every layer is
/// applied either way.
pub(crate) fn prepare<'a>(
    plan: &Plan,
    abi: i32,
    seccomp: &[seccompiler::BpfProgram],
    index: &'a SocketIndex,
) -> Result<Option<SessionCall<'a>>, SandboxError> {
    if index.session_slot().first_call() {
        return Ok(None);
    }
    if matches!(plan.workspace, WorkspaceMount::Overlay { .. }) && !plan.shared_overlay {
        return Ok(None);
    }
    let (tree, roots) = mounts::build_session(plan, index)?;
    let Some(fresh) = fresh::steps(&tree, &roots)? else {
        return Ok(None);
    };
    let mut prepared = prepare::prepare_with(plan, abi, seccomp.to_vec(), None, tree)?;
    prepared.fresh = fresh;
    if message(&prepared.cmd, 0).len() > MAX_MESSAGE {
        return Ok(None);
    }
    let key = SessionKey::new(plan, &prepared);
    Ok(Some(SessionCall {
        prepared,
        key,
        slot: index.session_slot(),
    }))
}

impl SessionCall<'_> {
    /// Sends the call to the session init (made or remade first when needed); returns the
    /// session init the call runs in (held while it runs) and the prepared data its report is read
    /// against. The call's setup process then reports on `fds.chan` as a per-call setup does.
    pub(crate) fn start_call(
        self,
        plan: &Plan,
        fds: ChildFds,
    ) -> Result<(Arc<Zygote>, Prepared), SandboxError> {
        let mut slot = self.slot.lock();
        let mut failed = None;
        for _ in 0..2 {
            let current = match slot.as_ref() {
                Some(z) if z.key == self.key && z.alive() => Arc::clone(z),
                _ => {
                    // A new sandbox for this key; the old one (if any) ends with its last call.
                    *slot = None;
                    let z = Arc::new(Zygote::start(&self.prepared, plan, self.key.clone())?);
                    *slot = Some(Arc::clone(&z));
                    z
                }
            };
            match current.send(&self.prepared.cmd, &fds) {
                Ok(()) => return Ok((current, self.prepared)),
                // The session init went away since it was checked: once more, on a new one.
                Err(e) => {
                    *slot = None;
                    failed = Some(e);
                }
            }
        }
        Err(SandboxError::Layer {
            layer: Layer::Lifetime,
            reason: format!(
                "the session's sandbox did not take the call: {}",
                failed.map_or_else(String::new, |e| e.to_string())
            ),
            hint: "run `chock doctor`; the next call builds a new session sandbox".into(),
        })
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
    key: SessionKey,
}

impl Zygote {
    /// Forks the session's setup process, which makes the namespaces and the session init, which
    /// builds the tree; returns once it waits for calls, or with the layer that failed.
    fn start(prepared: &Prepared, plan: &Plan, key: SessionKey) -> Result<Zygote, SandboxError> {
        let (chan, chan_child) = seqpacket_pair()?;
        let (control, control_child) = seqpacket_pair()?;
        let (status_r, status_w) = crate::call_io::pipe()?;
        let (lifeline_r, lifeline_w) = crate::call_io::pipe()?;
        let null = crate::call_io::dev_null()?;
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
            init::setup_with(prepared, fds, &crate::zygote::SESSION_SHAPE);
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
                crate::call_io::reap(setup_pid);
                Err(other.err().unwrap_or_else(|| SandboxError::Layer {
                    layer: Layer::Lifetime,
                    reason: "the session's sandbox ended before it was built".into(),
                    hint: "run `chock doctor` to see which layer this machine lacks".into(),
                }))
            }
        }
    }

    /// Whether the session init still runs (its pidfd is not readable).
    fn alive(&self) -> bool {
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
    /// the call has them).
    fn send(&self, cmd: &CommandSpec, fds: &ChildFds) -> std::io::Result<()> {
        let flags = u32::from(fds.overlay.is_some()) | (u32::from(fds.cgroup.is_some()) << 1);
        let bytes = message(cmd, flags);
        let mut raw: Vec<RawFd> = vec![fds.chan, fds.status_w, fds.lifeline_r];
        for (i, s) in fds.stdio.iter().enumerate() {
            raw.push(s.unwrap_or(i32::try_from(i).unwrap_or(0)));
        }
        raw.extend(fds.overlay);
        raw.extend(fds.cgroup);
        // SAFETY: every descriptor is open for the duration of the call (held by the caller, or
        // the host's own 0, 1 and 2 for inherited streams).
        let borrowed: Vec<BorrowedFd<'_>> = raw
            .iter()
            .map(|fd| unsafe { BorrowedFd::borrow_raw(*fd) })
            .collect();
        let mut space = [std::mem::MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(8))];
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
            .spawn(move || crate::call_io::reap(pid))
            .is_err()
        {
            crate::call_io::reap(pid);
        }
    }
}

/// The command message: flags, the three counts, then every string NUL-terminated (candidates,
/// argv, environment, working directory).
fn message(cmd: &CommandSpec, flags: u32) -> Vec<u8> {
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
