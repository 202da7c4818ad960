//! The host side's plumbing of a call, whichever way it is made (per call, or forked from a
//! session init): its channels and descriptors, the setup process to be gone before the call's
//! cgroup and overlay lease are released, and the setup's report (`plumbing.rs`).

use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use crate::child::init::ChildFds;
use crate::host::plumbing::{dev_null, pipe, poll_readable, reap, seqpacket_pair, signal_pidfd};
use crate::wire::error::SandboxError;

/// The process that set a call up, to be gone before its cgroup and overlay lease are released.
#[derive(Debug)]
pub(crate) enum Setup {
    /// The host's own child (a call made the per-call way): reaped.
    Child(libc::pid_t),
    /// A child of the session init (which reaps it), known by a pidfd once it reported one; the
    /// call holds the session init alive while it runs.
    Session {
        pidfd: Option<OwnedFd>,
        _zygote: Arc<crate::host::session_init::Zygote>,
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

/// Where the command's standard streams go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StdioMode {
    /// stdin from /dev/null; stdout and stderr are pipes the caller reads
    /// ([`crate::SandboxChild::take_stdout`], [`crate::SandboxChild::take_stderr`]).
    Piped,
    /// The command shares the caller's stdin, stdout and stderr (it is still in a new session,
    /// without the host's controlling terminal).
    Inherit,
    /// stdin, stdout and stderr are /dev/null.
    Null,
    /// stdin, stdout and stderr are all pipes: a long-lived server the host speaks to over its
    /// standard streams (an MCP server), [`crate::SandboxChild::take_stdin`] for the host's end.
    Duplex,
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
    /// The host channel's two ends, host's first ([`crate::Plan::host_channel`]).
    pub host_channel: Option<(OwnedFd, OwnedFd)>,
}

impl CallIo {
    pub(crate) fn new(stdio: StdioMode, host_channel: bool) -> Result<CallIo, SandboxError> {
        let (chan, chan_child) = seqpacket_pair()?;
        let host_channel = host_channel.then(seqpacket_pair).transpose()?;
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
            host_channel,
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
            host_channel: self.host_channel.as_ref().map(|(_, c)| c.as_raw_fd()),
        }
    }
}
