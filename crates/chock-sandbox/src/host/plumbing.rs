//! The host's plumbing of a call's processes, below the call itself: descriptors made for them
//! (pipes, the report socket pair, /dev/null), a process reaped or signalled through its pidfd,
//! the seccomp programs compiled once per process, and the setup's report read from its channel.
//! Used by per-call starts, the session init and the overlay helper alike.

use std::fs::File;
use std::net::TcpListener;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::time::Instant;

use crate::child::prepared::Prepared;
use crate::child::seccomp_rules::{self, Arch};
use crate::host::hints;
use crate::wire::error::{Layer, SandboxError};
use crate::wire::plan::Plan;
use crate::wire::report::{self, Kind};

pub(crate) fn pipe() -> Result<(OwnedFd, OwnedFd), SandboxError> {
    let [r, w] = crate::child::sys::pipe()
        .map_err(|e| SandboxError::host("pipe2", std::io::Error::from_raw_os_error(e)))?;
    // SAFETY: both descriptors were just created and are owned here.
    Ok(unsafe { (OwnedFd::from_raw_fd(r), OwnedFd::from_raw_fd(w)) })
}

pub(crate) fn seqpacket_pair() -> Result<(OwnedFd, OwnedFd), SandboxError> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for two descriptors.
    let rc = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if rc == -1 {
        return Err(SandboxError::host(
            "socketpair",
            std::io::Error::last_os_error(),
        ));
    }
    // SAFETY: both descriptors were just created and are owned here.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

pub(crate) fn dev_null() -> Result<OwnedFd, SandboxError> {
    File::options()
        .read(true)
        .write(true)
        .open("/dev/null")
        .map(OwnedFd::from)
        .map_err(|e| SandboxError::host("open /dev/null", e))
}

pub(crate) use crate::child::sys::{poll_any_readable, poll_readable};

pub(crate) fn reap(pid: libc::pid_t) {
    let mut status = 0;
    loop {
        // SAFETY: wait for our own child.
        let rc = unsafe { libc::waitpid(pid, &raw mut status, 0) };
        if rc != -1 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return;
        }
    }
}

/// The seccomp programs. The table is constant: compiled once per process, copied per call.
pub(crate) fn compiled_seccomp() -> Result<Vec<seccompiler::BpfProgram>, SandboxError> {
    let arch = Arch::current().ok_or_else(|| SandboxError::Layer {
        layer: Layer::Seccomp,
        reason: format!("no system call table for {}", std::env::consts::ARCH),
        hint: "Chock's filter covers x86_64 and aarch64".into(),
    })?;
    static COMPILED: std::sync::OnceLock<Result<Vec<seccompiler::BpfProgram>, String>> =
        std::sync::OnceLock::new();
    COMPILED
        .get_or_init(|| seccomp_rules::compile(arch))
        .clone()
        .map_err(|reason| SandboxError::Layer {
            layer: Layer::Seccomp,
            reason,
            hint: "this is a bug in Chock's filter table".into(),
        })
}

pub(crate) fn signal_pidfd(fd: RawFd) {
    // SAFETY: signal through a pidfd we hold; the kernel refuses if the process already exited.
    unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd,
            libc::SIGKILL,
            std::ptr::null::<u8>(),
            0,
        )
    };
}

/// The host pid of the process behind `pidfd` (its `Pid:` line in fdinfo): a session call's init
/// reports its pid in the session's pid namespace, which means nothing on the host.
pub(crate) fn host_pid_of(pidfd: RawFd) -> Option<u32> {
    let text = std::fs::read_to_string(format!("/proc/self/fdinfo/{pidfd}")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("Pid:"))
        .and_then(|v| v.trim().parse().ok())
}

/// What the setup processes said before the command started.
pub(crate) struct SetupReport {
    pub init_pidfd: Option<OwnedFd>,
    /// A session call's setup process (sent by the session init).
    pub setup_pidfd: Option<OwnedFd>,
    pub init_pid: u32,
    pub proxy: Option<TcpListener>,
    pub cgroup_not_joined: Option<i32>,
    /// A session init said it waits for calls.
    pub ready: bool,
    /// The listener of the call's seccomp filter (a call's init sends it).
    pub seccomp_listener: Option<OwnedFd>,
}

impl SetupReport {
    pub(crate) fn read(
        chan: RawFd,
        prepared: &Prepared,
        plan: &Plan,
        started: Instant,
    ) -> Result<Self, SandboxError> {
        let mut out = SetupReport {
            init_pidfd: None,
            setup_pidfd: None,
            ready: false,
            init_pid: 0,
            proxy: None,
            cgroup_not_joined: None,
            seccomp_listener: None,
        };
        let deadline = plan.timeout.map(|t| started + t);
        loop {
            if !poll_readable(chan, deadline) {
                return Err(SandboxError::Layer {
                    layer: Layer::Lifetime,
                    reason: "the timeout passed while the sandbox was being built".into(),
                    hint: "give the call a longer timeout".into(),
                });
            }
            let msg = report::recv(chan)
                .map_err(|e| SandboxError::host("reading the sandbox's report", e))?;
            let Some((rec, fd)) = msg else { return Ok(out) };
            match rec.kind {
                k if k == Kind::LayerFailed as u32 => {
                    let layer = u8::try_from(rec.layer)
                        .ok()
                        .and_then(Layer::from_id)
                        .unwrap_or(Layer::Lifetime);
                    return Err(hints::layer_error(layer, rec.step, rec.errno, prepared));
                }
                k if k == Kind::ExecFailed as u32 => {
                    return Err(SandboxError::Exec {
                        program: plan.argv[0].clone(),
                        reason: std::io::Error::from_raw_os_error(rec.errno).to_string(),
                        not_found: rec.errno == libc::ENOENT,
                    });
                }
                k if k == Kind::InitPid as u32 => {
                    out.init_pidfd = fd;
                    out.init_pid = u32::try_from(rec.value).unwrap_or(0);
                }
                k if k == Kind::SetupPid as u32 => out.setup_pidfd = fd,
                k if k == Kind::SessionReady as u32 => out.ready = true,
                k if k == Kind::SeccompListener as u32 => out.seccomp_listener = fd,
                k if k == Kind::ProxyListener as u32 => {
                    out.proxy = fd.map(TcpListener::from);
                }
                k if k == Kind::CgroupNotJoined as u32 => out.cgroup_not_joined = Some(rec.errno),
                _ => {}
            }
        }
    }
}
