//! A started call, on the host: reading the child's setup report, waiting with a timeout,
//! killing the whole tree (the entry points that start one are in `spawn.rs`).

use std::fs::File;
use std::net::TcpListener;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::child::prepared::Prepared;
use crate::confine::{CallDoors, KeptCall, Killer};
use crate::host::call_io::{CallIo, Setup};
use crate::host::cgroup::Cgroup;
use crate::host::plumbing::{SetupReport, host_pid_of, poll_any_readable, poll_readable};
use crate::host::shared_overlay::OverlayLease;
use crate::wire::error::{Layer, SandboxError};
use crate::wire::outcome::{ExitStatus, LimitsReport, Outcome};
use crate::wire::plan::Plan;

/// What a call leaves to be cleaned up after its init exited: the setup process to reap, then its
/// cgroup and its hold on the shared overlay.
type Leftovers = (Setup, Option<Cgroup>, Option<OverlayLease>);

/// A running confined call. Dropping it kills the call.
#[derive(Debug)]
pub struct SandboxChild {
    setup: Setup,
    init_pid: u32,
    init_pidfd: OwnedFd,
    status_r: OwnedFd,
    lifeline: Option<OwnedFd>,
    stdin: Option<File>,
    stdout: Option<File>,
    stderr: Option<File>,
    proxy: Option<TcpListener>,
    /// The host's end of the call's host channel ([`crate::Plan::host_channel`]).
    host_channel: Option<OwnedFd>,
    cgroup: Option<Cgroup>,
    /// The call's hold on the session's shared overlay: released once the setup process is
    /// reaped, when the call's mount namespace (and its clone of the overlay) is gone.
    overlay: Option<OverlayLease>,
    limits: LimitsReport,
    started: Instant,
    timeout: Option<Duration>,
    finished: Option<Outcome>,
    killed: bool,
    /// Handed over to a keeper ([`SandboxChild::keep`]): the call is no longer this handle's to
    /// time out, kill on drop or read the status of.
    kept: bool,
    /// The host's watch over the call's seccomp filter: which forbidden call killed a process.
    seccomp: crate::host::seccomp_watch::SeccompWatch,
}

impl CallIo {
    /// After the setup process was started: reads its report and hands back the running call,
    /// or kills it and returns the first layer that failed.
    pub(crate) fn finish(
        self,
        mut setup: Setup,
        prepared: &Prepared,
        plan: &Plan,
        started: Instant,
        (cgroup, overlay, mut limits): (Option<Cgroup>, Option<OverlayLease>, LimitsReport),
    ) -> Result<SandboxChild, SandboxError> {
        let CallIo {
            chan,
            chan_child,
            status_r,
            status_w,
            lifeline_r,
            lifeline_w,
            child_ends,
            stdin,
            stdout,
            stderr,
            host_channel,
            ..
        } = self;
        // The call's end is closed here once the setup holds its copy: the host channel's
        // other end is then held only by the call's processes, so it reads as closed when they
        // are all gone.
        let (host_channel, host_child) =
            host_channel.map_or((None, None), |(h, c)| (Some(h), Some(c)));
        drop((chan_child, status_w, lifeline_r, child_ends, host_child));
        let report = SetupReport::read(chan.as_raw_fd(), prepared, plan, started);
        let report = match report {
            Ok(mut r) => {
                if let Setup::Session { pidfd, .. } = &mut setup {
                    *pidfd = r.setup_pidfd.take();
                }
                Ok(r)
            }
            Err(e) => Err(e),
        };
        match report {
            Ok(SetupReport {
                init_pidfd: Some(init_pidfd),
                init_pid,
                proxy,
                cgroup_not_joined,
                seccomp_listener,
                ..
            }) => {
                // The filter's watch: without it the kill rows would answer ENOSYS, and nobody
                // would say which call was forbidden; the call does not run without it.
                let watch = seccomp_listener
                    .ok_or_else(|| std::io::Error::from_raw_os_error(libc::EBADF))
                    .and_then(|l| crate::host::seccomp_watch::SeccompWatch::start(l, &init_pidfd));
                let seccomp = match watch {
                    Ok(w) => w,
                    Err(e) => {
                        abandon(lifeline_w, &setup, cgroup.as_ref());
                        return Err(SandboxError::Layer {
                            layer: Layer::Seccomp,
                            reason: format!("the filter's listener was not handed over: {e}"),
                            hint: "run `chock doctor` to see which layers this machine supports"
                                .into(),
                        });
                    }
                };
                if let Some(e) = cgroup_not_joined {
                    limits.memory_max_bytes = None;
                    limits.pids_max = None;
                    limits.cpu_max_percent = None;
                    limits.cgroup_note = format!(
                        "could not join the call's cgroup: {}",
                        std::io::Error::from_raw_os_error(e)
                    );
                }
                let init_pid = match setup {
                    Setup::Child(_) | Setup::Gone => init_pid,
                    Setup::Session { .. } => host_pid_of(init_pidfd.as_raw_fd()).unwrap_or(0),
                };
                Ok(SandboxChild {
                    setup,
                    init_pid,
                    init_pidfd,
                    status_r,
                    lifeline: Some(lifeline_w),
                    stdin,
                    stdout,
                    stderr,
                    proxy,
                    host_channel,
                    cgroup,
                    overlay,
                    limits,
                    started,
                    timeout: plan.timeout,
                    finished: None,
                    killed: false,
                    kept: false,
                    seccomp,
                })
            }
            other => {
                abandon(lifeline_w, &setup, cgroup.as_ref());
                Err(other.err().unwrap_or_else(|| SandboxError::Layer {
                    layer: Layer::Lifetime,
                    reason: match setup {
                        Setup::Child(_) | Setup::Gone => "the sandbox's setup process ended without starting the call's init".into(),
                        Setup::Session { .. } => "the session's sandbox ended without starting the call's init (the session init is gone; the next call builds a new one)".into(),
                    },
                    hint: "run `chock doctor` to see which layer this machine lacks".into(),
                }))
            }
        }
    }
}

/// Ends a call that will not run: its lifeline closed (so an init that started ends), its setup
/// killed and reaped, and every process of its cgroup killed before the cgroup is removed.
fn abandon(lifeline: OwnedFd, setup: &Setup, cgroup: Option<&Cgroup>) {
    drop(lifeline);
    setup.kill();
    setup.reap();
    if let Some(cg) = cgroup {
        cg.kill();
        cg.remove();
    }
}

impl SandboxChild {
    /// The host pid of the call's init (pid 1 of its pid namespace).
    pub fn pid(&self) -> u32 {
        self.init_pid
    }

    /// The command's stdout, in [`crate::StdioMode::Piped`] (once). Read it on another thread than the
    /// one calling [`SandboxChild::wait`]: `wait` enforces the timeout, and the stream ends only when
    /// every process of the call is gone.
    pub fn take_stdout(&mut self) -> Option<File> {
        self.stdout.take()
    }

    /// The command's stdin, in [`crate::StdioMode::Duplex`] (once). Dropping it closes the command's
    /// standard input.
    pub fn take_stdin(&mut self) -> Option<File> {
        self.stdin.take()
    }

    /// The command's stderr, in [`crate::StdioMode::Piped`] (once).
    pub fn take_stderr(&mut self) -> Option<File> {
        self.stderr.take()
    }

    /// The listener made inside the call's network namespace for [`crate::NetworkPlan::Proxy`]
    /// (once): the host broker accepts on it.
    pub fn proxy_listener(&mut self) -> Option<TcpListener> {
        self.proxy.take()
    }

    /// The host's end of the call's host channel, for a plan with [`crate::Plan::host_channel`]
    /// (once): a `SOCK_SEQPACKET` socket whose other end only the call's processes hold.
    pub fn host_channel(&mut self) -> Option<OwnedFd> {
        self.host_channel.take()
    }

    /// Which limits are on for this call.
    pub fn limits(&self) -> &LimitsReport {
        &self.limits
    }

    /// Hands the call's keeping to another process ([`crate::CallHandle::keep`]): the lifeline,
    /// the command's output and copies of the init's pidfd and the status pipe go to the
    /// [`KeptCall`]; this handle keeps what it needs to clean up once the call's processes are
    /// gone. Only a call of the per-call way (a session sandbox's calls end with its init) with
    /// piped output can be kept.
    pub fn keep(&mut self) -> Result<KeptCall, SandboxError> {
        let refuse = |why: &str| {
            Err(SandboxError::Plan(format!(
                "the call cannot be kept: {why}"
            )))
        };
        if self.finished.is_some() || self.kept {
            return refuse("it has ended or was kept already");
        }
        if matches!(self.setup, Setup::Session { .. }) {
            return refuse("it runs in the session's sandbox, which ends with this process");
        }
        if self.stdout.is_none() || self.stderr.is_none() || self.lifeline.is_none() {
            return refuse("its output is not piped to the host");
        }
        let dup = |fd: &OwnedFd, what: &str| {
            fd.try_clone()
                .map_err(|e| SandboxError::host(format!("duplicate {what}"), e))
        };
        let pidfd = dup(&self.init_pidfd, "the init's pidfd")?;
        let status = dup(&self.status_r, "the status pipe")?;
        // Copies of the doors still here (this handle's own are served by this process until
        // it lets go): taken before the doors are, so that every door the call has goes along.
        let doors = CallDoors {
            egress: self
                .proxy
                .as_ref()
                .map(|l| {
                    l.try_clone()
                        .map(OwnedFd::from)
                        .map_err(|e| SandboxError::host("duplicate the egress listener", e))
                })
                .transpose()?,
            channel: self
                .host_channel
                .as_ref()
                .map(|c| dup(c, "the host channel"))
                .transpose()?,
            seccomp: Some(
                self.seccomp
                    .listener_copy()
                    .map_err(|e| SandboxError::host("duplicate the seccomp listener", e))?,
            ),
        };
        let (Some(stdout), Some(stderr), Some(lifeline)) =
            (self.stdout.take(), self.stderr.take(), self.lifeline.take())
        else {
            return refuse("its output is not piped to the host");
        };
        let timeout = self
            .timeout
            .map(|t| t.saturating_sub(self.started.elapsed()));
        self.timeout = None;
        self.kept = true;
        Ok(KeptCall {
            lifeline,
            pidfd,
            status,
            stdout: stdout.into(),
            stderr: stderr.into(),
            timeout,
            doors,
        })
    }

    /// Waits for the call to end (or its timeout), then makes sure every process it started is
    /// gone: the init's death takes the whole pid namespace with it, and the cgroup (if any) is
    /// killed as well.
    pub fn wait(&mut self) -> Result<Outcome, SandboxError> {
        if let Some(done) = &self.finished {
            return Ok(done.clone());
        }
        if self.kept {
            poll_readable(self.init_pidfd.as_raw_fd(), None);
            return Ok(self.conclude(true));
        }
        let deadline = self.timeout.map(|t| self.started + t);
        // The init writes the command's status once every other process of the call is gone
        // (init.rs): that, or the init's own end (killed before it could write), is the call's.
        let ended = poll_any_readable(
            [self.status_r.as_raw_fd(), self.init_pidfd.as_raw_fd()],
            deadline,
        );
        if !ended {
            self.signal_init();
            poll_readable(self.init_pidfd.as_raw_fd(), None);
        }
        Ok(self.conclude(ended))
    }

    /// As [`SandboxChild::wait`], without holding a thread: the status pipe and the init's pidfd
    /// are waited on through the tokio runtime's reactor (`AsyncFd`), the timeout by its timer.
    /// Must be polled inside a tokio runtime with I/O and time enabled.
    pub async fn wait_async(&mut self) -> Result<Outcome, SandboxError> {
        if let Some(done) = &self.finished {
            return Ok(done.clone());
        }
        let io = |e: std::io::Error| SandboxError::host("wait for the call", e);
        let watch = |fd: std::os::fd::RawFd| {
            // SAFETY: `fd` is the status pipe's read end or the init's pidfd, owned by this
            // `SandboxChild`, which this method borrows mutably: neither is closed or replaced
            // before the `AsyncFd` is dropped, at the end of this method.
            unsafe {
                tokio::io::unix::AsyncFd::register_with_interest(
                    Watched(fd),
                    tokio::io::Interest::READABLE,
                )
            }
            .map_err(|e| io(e.into_parts().1))
        };
        if self.kept {
            // The keeper reads the status; the call's processes are gone once the init is.
            let init = watch(self.init_pidfd.as_raw_fd())?;
            drop(init.readable().await.map_err(io)?);
            drop(init);
            return Ok(self.conclude(true));
        }
        let status = watch(self.status_r.as_raw_fd())?;
        let init = watch(self.init_pidfd.as_raw_fd())?;
        let either = async {
            tokio::select! {
                r = status.readable() => r.map(drop),
                r = init.readable() => r.map(drop),
            }
        };
        let ended = match self.timeout {
            Some(t) => {
                let deadline = tokio::time::Instant::from_std(self.started + t);
                match tokio::time::timeout_at(deadline, either).await {
                    Ok(r) => r.map(|()| true).map_err(io)?,
                    Err(_) => false,
                }
            }
            None => either.await.map(|()| true).map_err(io)?,
        };
        if !ended {
            self.signal_init();
            drop(init.readable().await.map_err(io)?);
        } else if !self.status_written() {
            // The init died without a status (killed: an interrupt, a service stopped). Its end
            // of the status pipe closed as it began to exit, before the kernel killed the rest of
            // its pid namespace; the namespace is gone once the init's pidfd reads.
            drop(init.readable().await.map_err(io)?);
        }
        drop((status, init));
        Ok(self.conclude(ended))
    }

    /// Whether the init wrote the command's status (it does once every other process of the
    /// call is gone), rather than its end of the pipe closing without one.
    fn status_written(&self) -> bool {
        let mut pending: libc::c_int = 0;
        // SAFETY: FIONREAD on our own pipe's read end writes one int.
        let rc =
            unsafe { libc::ioctl(self.status_r.as_raw_fd(), libc::FIONREAD, &raw mut pending) };
        rc == 0 && pending > 0
    }

    /// A handle that kills the call from anywhere (another task, an interrupt), through a
    /// duplicate of the init's pidfd: never a pid, which the kernel may have given to another
    /// process by then.
    pub fn killer(&self) -> Result<Killer, SandboxError> {
        let pidfd = self
            .init_pidfd
            .try_clone()
            .map_err(|e| SandboxError::host("duplicate the init's pidfd", e))?;
        Ok(Killer::from_pidfd(pidfd))
    }

    /// The end of a wait, once the init wrote the status or exited (`ended`), or was killed at
    /// the timeout: the cleanup handed to a thread, the status read, the outcome kept.
    fn conclude(&mut self, ended: bool) -> Outcome {
        // Every process of the call is gone once its init has written the status or exited (the
        // pid namespace dies with it). What remains is Chock's own setup process while the kernel
        // tears the call's mount namespace down (an overlay syncs its upper filesystem there:
        // 10-15 ms): reap it, and only then remove the cgroup it sits in, on a thread of their
        // own, so `wait` returns now.
        // The shared overlay's lease goes last: the call's clone of it is gone with the setup.
        let setup = std::mem::replace(&mut self.setup, Setup::Gone);
        let leftovers = Arc::new(Mutex::new(Some((
            setup,
            self.cgroup.take(),
            self.overlay.take(),
        ))));
        let cleanup = |leftovers: &Mutex<Option<Leftovers>>| {
            let taken = leftovers
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take();
            if let Some((setup, cgroup, overlay)) = taken {
                setup.reap();
                if let Some(cg) = cgroup {
                    cg.kill();
                    cg.remove();
                }
                drop(overlay);
            }
        };
        let theirs = Arc::clone(&leftovers);
        if std::thread::Builder::new()
            .name("chock-reap".into())
            .spawn(move || cleanup(&theirs))
            .is_err()
        {
            cleanup(&leftovers);
        }
        let mut buf = [0u8; 4];
        // A kept call's status is the keeper's to read (it holds a copy of the pipe).
        let n = if self.kept {
            0
        } else {
            // SAFETY: reading into a 4-byte buffer from our own pipe.
            unsafe { libc::read(self.status_r.as_raw_fd(), buf.as_mut_ptr().cast(), 4) }
        };
        let status = if !ended {
            ExitStatus::TimedOut
        } else if n == 4 {
            let ws = i32::from_ne_bytes(buf);
            if libc::WIFEXITED(ws) {
                ExitStatus::Exited(libc::WEXITSTATUS(ws))
            } else {
                ExitStatus::Signaled(libc::WTERMSIG(ws))
            }
        } else {
            // The init died without reporting: it was killed (by `kill`, or from outside).
            ExitStatus::Signaled(libc::SIGKILL)
        };
        let outcome = Outcome {
            status,
            limits: self.limits.clone(),
            duration: self.started.elapsed(),
            forbidden_call: self.seccomp.killed(),
        };
        self.lifeline = None;
        self.finished = Some(outcome.clone());
        outcome
    }

    fn signal_init(&mut self) {
        // SAFETY: signal through our pidfd of the init; the kernel refuses if it already exited.
        unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.init_pidfd.as_raw_fd(),
                libc::SIGKILL,
                std::ptr::null::<u8>(),
                0,
            )
        };
        if let Some(cg) = &self.cgroup {
            cg.kill();
        }
        self.killed = true;
    }

    /// Kills every process of the call now. [`SandboxChild::wait`] then reports `Signaled(9)`.
    pub fn kill(&mut self) -> Result<(), SandboxError> {
        if self.finished.is_none() {
            self.signal_init();
        }
        Ok(())
    }
}

impl Drop for SandboxChild {
    fn drop(&mut self) {
        // A kept call is its keeper's to end.
        if self.finished.is_none() && !self.kept {
            self.signal_init();
            poll_readable(self.init_pidfd.as_raw_fd(), None);
            self.setup.reap();
            if let Some(cg) = &self.cgroup {
                cg.kill();
                cg.remove();
            }
        }
    }
}

/// A raw descriptor the reactor watches while its owner (the [`SandboxChild`]) keeps it open: the
/// `AsyncFd` is dropped, and the descriptor deregistered, before the owner can close it.
struct Watched(std::os::fd::RawFd);

impl AsRawFd for Watched {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.0
    }
}

/// The host's end of a call's host channel ([`crate::CallHandle::take_host_channel`]) made
/// non-blocking and registered with the caller's tokio runtime, to be read as it becomes
/// readable: the session serves it on its own runtime, beside the call's wait.
pub fn watch_host_channel(channel: OwnedFd) -> std::io::Result<tokio::io::unix::AsyncFd<OwnedFd>> {
    rustix::io::ioctl_fionbio(&channel, true)?;
    // SAFETY: the descriptor is owned by the value registered, so it is neither closed nor
    // replaced while registered: it is closed only when the `AsyncFd` (and the value) is dropped,
    // after its registration is removed.
    unsafe {
        tokio::io::unix::AsyncFd::register_with_interest(channel, tokio::io::Interest::READABLE)
    }
    .map_err(|e| e.into_parts().1)
}

/// Resolves once the process `pidfd` names has ended (its pidfd reads as readable), on the
/// caller's tokio runtime: a kept call's init, for an owner that took the call over and serves
/// its doors until every process of it is gone.
pub async fn wait_gone(pidfd: OwnedFd) -> std::io::Result<()> {
    // SAFETY: the descriptor is owned by the value registered and closed only when the
    // `AsyncFd` is dropped, after its registration is removed.
    let init = unsafe {
        tokio::io::unix::AsyncFd::register_with_interest(pidfd, tokio::io::Interest::READABLE)
    }
    .map_err(|e| e.into_parts().1)?;
    drop(init.readable().await?);
    Ok(())
}
