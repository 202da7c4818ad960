//! The host side's plumbing of a call, whichever way it is made (per call, or forked from a
//! session init): its channels and descriptors, the setup process to be gone before the call's
//! cgroup and overlay lease are released, and the setup's report.

use std::fs::File;
use std::net::TcpListener;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::Instant;

use crate::error::{Layer, SandboxError};
use crate::hints;
use crate::init::ChildFds;
use crate::plan::Plan;
use crate::prepare::Prepared;
use crate::report::{self, Kind};
use crate::seccomp_rules::{self, Arch};
use crate::spawn::StdioMode;

pub(crate) fn pipe() -> Result<(OwnedFd, OwnedFd), SandboxError> {
    let [r, w] = crate::sys::pipe()
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

/// Polls `fd` for readability until `deadline`; true when readable.
pub(crate) fn poll_readable(fd: RawFd, deadline: Option<Instant>) -> bool {
    poll_any_readable([fd], deadline)
}

/// Polls `fds` until one is readable or `deadline` passes; true when one is.
pub(crate) fn poll_any_readable<const N: usize>(
    fds: [RawFd; N],
    deadline: Option<Instant>,
) -> bool {
    let mut pfds = fds.map(|fd| libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    });
    loop {
        let timeout_ms = match deadline {
            None => -1,
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    0
                } else {
                    i32::try_from(left.as_millis().max(1)).unwrap_or(i32::MAX)
                }
            }
        };
        // SAFETY: `N` valid pollfd structs.
        let n = unsafe { libc::poll(pfds.as_mut_ptr(), N as libc::nfds_t, timeout_ms) };
        if n > 0 {
            return true;
        }
        if n == 0 {
            return false;
        }
        if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return true;
        }
    }
}

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

/// The process that set a call up, to be gone before its cgroup and overlay lease are released.
#[derive(Debug)]
pub(crate) enum Setup {
    /// The host's own child (a call made the per-call way): reaped.
    Child(libc::pid_t),
    /// A child of the session init (which reaps it), known by a pidfd once it reported one; the
    /// call holds the session init alive while it runs.
    Session {
        pidfd: Option<OwnedFd>,
        _zygote: Arc<crate::session_sandbox::Zygote>,
    },
    /// Handed to the cleanup thread already.
    Gone,
}

impl Setup {
    pub(crate) fn kill(&self) {
        match self {
            // SAFETY: kill our own child (the setup); its init dies with it (PDEATHSIG).
            Setup::Child(pid) => unsafe {
                libc::kill(*pid, libc::SIGKILL);
            },
            Setup::Session {
                pidfd: Some(fd), ..
            } => signal_pidfd(fd.as_raw_fd()),
            Setup::Session { pidfd: None, .. } | Setup::Gone => {}
        }
    }

    /// Waits until the setup process is gone.
    pub(crate) fn reap(&self) {
        match self {
            Setup::Child(pid) => reap(*pid),
            Setup::Session {
                pidfd: Some(fd), ..
            } => {
                poll_readable(fd.as_raw_fd(), None);
            }
            Setup::Session { pidfd: None, .. } | Setup::Gone => {}
        }
    }
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

/// A call's channels: the report socket, the status pipe, the lifeline and the standard streams,
/// host ends and child ends.
pub(crate) struct CallIo {
    pub chan: OwnedFd,
    pub chan_child: OwnedFd,
    pub status_r: OwnedFd,
    pub status_w: OwnedFd,
    pub lifeline_r: OwnedFd,
    pub lifeline_w: OwnedFd,
    pub child_ends: Vec<OwnedFd>,
    pub stdio_fds: [Option<RawFd>; 3],
    pub stdin: Option<File>,
    pub stdout: Option<File>,
    pub stderr: Option<File>,
}

impl CallIo {
    pub(crate) fn new(stdio: StdioMode) -> Result<CallIo, SandboxError> {
        let (chan, chan_child) = seqpacket_pair()?;
        let (status_r, status_w) = pipe()?;
        let (lifeline_r, lifeline_w) = pipe()?;
        let mut child_ends: Vec<OwnedFd> = Vec::new();
        let (mut stdin, mut stdout, mut stderr) = (None, None, None);
        let stdio_fds = match stdio {
            StdioMode::Inherit => [None, None, None],
            StdioMode::Null => {
                let null = dev_null()?;
                let fd = null.as_raw_fd();
                child_ends.push(null);
                [Some(fd), Some(fd), Some(fd)]
            }
            StdioMode::Piped => {
                let null = dev_null()?;
                let (out_r, out_w) = pipe()?;
                let (err_r, err_w) = pipe()?;
                let fds = [
                    Some(null.as_raw_fd()),
                    Some(out_w.as_raw_fd()),
                    Some(err_w.as_raw_fd()),
                ];
                stdout = Some(File::from(out_r));
                stderr = Some(File::from(err_r));
                child_ends.extend([null, out_w, err_w]);
                fds
            }
            StdioMode::Duplex => {
                let (in_r, in_w) = pipe()?;
                let (out_r, out_w) = pipe()?;
                let (err_r, err_w) = pipe()?;
                let fds = [
                    Some(in_r.as_raw_fd()),
                    Some(out_w.as_raw_fd()),
                    Some(err_w.as_raw_fd()),
                ];
                stdin = Some(File::from(in_w));
                stdout = Some(File::from(out_r));
                stderr = Some(File::from(err_r));
                child_ends.extend([in_r, out_w, err_w]);
                fds
            }
        };
        Ok(CallIo {
            chan,
            chan_child,
            status_r,
            status_w,
            lifeline_r,
            lifeline_w,
            child_ends,
            stdio_fds,
            stdin,
            stdout,
            stderr,
        })
    }

    pub(crate) fn child_fds(&self, overlay: Option<RawFd>, cgroup: Option<RawFd>) -> ChildFds {
        ChildFds {
            gate: None,
            chan: self.chan_child.as_raw_fd(),
            status_w: self.status_w.as_raw_fd(),
            lifeline_r: self.lifeline_r.as_raw_fd(),
            stdio: self.stdio_fds,
            overlay,
            cgroup,
            control: None,
            net: None,
            setup: None,
        }
    }
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
