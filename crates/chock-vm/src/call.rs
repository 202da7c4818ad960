//! A call running in a guest ([`GuestCall`], the [`CallHandle`] of a [`crate::GuestConfiner`]):
//! its streams as pipes, its egress relayed, its end read off the channel by a thread of its
//! own, which gives the guest back to be kept warm when the call ended cleanly.

use std::fs::File;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chock_guest::{CallStdio, Ended, Frame, tag};
use chock_sandbox::{BoxFuture, CallHandle, Kill, Killer, Outcome, SandboxError};

use crate::confiner::{Inner, lost};
use crate::machine::{Machine, Monitor, send};

/// How long past its plan's timeout a call's end may take to arrive before the host stops the
/// guest itself (the guest's driver enforces the timeout; this is the host's backstop).
const TIMEOUT_GRACE: Duration = Duration::from_secs(30);

/// Kills a call in a guest: a kill frame to the guest's init (the guest stays warm), or, when
/// the channel is gone, the guest itself.
#[derive(Debug)]
struct GuestKill {
    writer: Arc<Mutex<std::os::unix::net::UnixStream>>,
    monitor: Arc<Monitor>,
    done: Arc<AtomicBool>,
}

impl Kill for GuestKill {
    fn kill(&self) -> bool {
        if self.done.load(Ordering::SeqCst) {
            return false;
        }
        if send(&self.writer, &Frame::new(tag::KILL, Vec::new())).is_err() {
            self.monitor.kill();
        }
        true
    }
}

/// A call running in a guest.
#[derive(Debug)]
pub struct GuestCall {
    stdin: Option<File>,
    stdout: Option<File>,
    stderr: Option<File>,
    outcome: Option<tokio::sync::oneshot::Receiver<Result<Outcome, SandboxError>>>,
    killer: Arc<GuestKill>,
    egress: Option<TcpListener>,
    host_channel: Option<std::os::fd::OwnedFd>,
    pub(crate) timeout: Option<Duration>,
}

fn pipe() -> Result<(File, File), SandboxError> {
    let (r, w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).map_err(|e| {
        SandboxError::Host {
            what: "make a pipe for the call's streams".into(),
            source: e.into(),
        }
    })?;
    Ok((File::from(r), File::from(w)))
}

impl GuestCall {
    /// The call's streams as pipes, and a thread that reads the channel until the call ends.
    pub(crate) fn run(
        inner: Arc<Inner>,
        mut machine: Machine,
        mode: CallStdio,
        egress: bool,
        host_channel: bool,
    ) -> Result<Self, SandboxError> {
        // The listener the session's broker serves; the guest's connections are relayed to it.
        let listener = if egress {
            let listen = |e| SandboxError::Host {
                what: "listen for the guest call's egress".into(),
                source: e,
            };
            let l = TcpListener::bind(("127.0.0.1", 0)).map_err(listen)?;
            let addr = l.local_addr().map_err(listen)?;
            Some((l, addr))
        } else {
            None
        };
        let mut relay = listener
            .as_ref()
            .map(|(_, addr)| crate::relay::HostRelay::new(*addr, machine.writer.clone()));
        // The call's host channel: requests from the guest are served by the session's handler
        // on the other end (`channel.rs`).
        let (channel, session_end) = if host_channel {
            let (c, s) =
                crate::channel::HostChannel::pair(machine.writer.clone()).map_err(|e| {
                    SandboxError::Host {
                        what: "make the guest call's host channel".into(),
                        source: e,
                    }
                })?;
            (Some(c), Some(s))
        } else {
            (None, None)
        };
        let streams = mode != CallStdio::Null;
        let (out_r, out_w) = if streams {
            pipe().map(|(r, w)| (Some(r), Some(w)))?
        } else {
            (None, None)
        };
        let (err_r, err_w) = if streams {
            pipe().map(|(r, w)| (Some(r), Some(w)))?
        } else {
            (None, None)
        };
        let done = Arc::new(AtomicBool::new(false));
        let killer = Arc::new(GuestKill {
            writer: machine.writer.clone(),
            monitor: machine.monitor.clone(),
            done: done.clone(),
        });
        let stdin = if mode == CallStdio::Duplex {
            let (r, w) = pipe()?;
            forward_stdin(r, machine.writer.clone(), done.clone());
            Some(w)
        } else {
            None
        };
        let (tx, rx) = tokio::sync::oneshot::channel();
        std::thread::spawn(move || {
            let (mut out_w, mut err_w) = (out_w, err_w);
            let ended = loop {
                let frame = match Frame::read_from(&mut machine.reader) {
                    Ok(Some(f)) => f,
                    _ => break Err(lost("the guest stopped mid-call (its monitor ended)")),
                };
                let to = match frame.tag {
                    tag::STDOUT => &mut out_w,
                    tag::STDERR => &mut err_w,
                    tag::STDOUT_END => {
                        out_w = None;
                        continue;
                    }
                    tag::STDERR_END => {
                        err_w = None;
                        continue;
                    }
                    tag::NET_OPEN | tag::NET_OUT | tag::NET_OUT_END => {
                        if let Some(r) = relay.as_mut() {
                            r.frame(frame.tag, &frame.body);
                        }
                        continue;
                    }
                    tag::CHANNEL_ASK => {
                        if let Some(c) = channel.as_ref() {
                            c.ask(&frame.body);
                        }
                        continue;
                    }
                    tag::ENDED => {
                        break frame
                            .parse::<Ended>()
                            .map_err(|e| lost(&format!("its call's end: {e}")))
                            .and_then(|e| e.map_err(SandboxError::from));
                    }
                    _ => continue,
                };
                // A reader that went away only loses the rest of its stream.
                if let Some(w) = to.as_mut()
                    && w.write_all(&frame.body).is_err()
                {
                    *to = None;
                }
            };
            done.store(true, Ordering::SeqCst);
            drop((out_w, err_w));
            match ended {
                Ok(_) | Err(SandboxError::Layer { .. } | SandboxError::Exec { .. }) => {
                    inner.give_back(machine);
                }
                Err(_) => drop(machine),
            }
            let _ = tx.send(ended);
        });
        Ok(GuestCall {
            stdin,
            stdout: out_r,
            stderr: err_r,
            outcome: Some(rx),
            killer,
            egress: listener.map(|(l, _)| l),
            host_channel: session_end,
            timeout: None,
        })
    }
}

/// Sends what the session writes to the call's stdin as frames, then its end.
fn forward_stdin(
    mut from: File,
    writer: Arc<Mutex<std::os::unix::net::UnixStream>>,
    done: Arc<AtomicBool>,
) {
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 << 10];
        loop {
            let n = match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if done.load(Ordering::SeqCst)
                || send(&writer, &Frame::new(tag::STDIN, buf[..n].to_vec())).is_err()
            {
                return;
            }
        }
        if !done.load(Ordering::SeqCst) {
            let _ = send(&writer, &Frame::new(tag::STDIN_END, Vec::new()));
        }
    });
}

impl CallHandle for GuestCall {
    fn wait(&mut self) -> BoxFuture<'_, Result<Outcome, SandboxError>> {
        Box::pin(async move {
            let rx = self
                .outcome
                .take()
                .ok_or_else(|| lost("the call was waited for already"))?;
            let ended = match self.timeout {
                Some(t) => match tokio::time::timeout(t + TIMEOUT_GRACE, rx).await {
                    Ok(r) => r,
                    Err(_) => {
                        self.killer.monitor.kill();
                        return Err(lost("the guest did not end the call after its timeout"));
                    }
                },
                None => rx.await,
            };
            ended.map_err(|_| lost("the call's reader ended"))?
        })
    }

    fn take_stdin(&mut self) -> Option<File> {
        self.stdin.take()
    }

    fn take_stdout(&mut self) -> Option<File> {
        self.stdout.take()
    }

    fn take_stderr(&mut self) -> Option<File> {
        self.stderr.take()
    }

    fn take_egress(&mut self) -> Option<TcpListener> {
        self.egress.take()
    }

    fn take_host_channel(&mut self) -> Option<std::os::fd::OwnedFd> {
        self.host_channel.take()
    }

    fn killer(&self) -> Result<Killer, SandboxError> {
        Ok(Killer::new(KillerRef(self.killer.clone())))
    }
}

/// A [`Killer`]'s share of the call's [`GuestKill`].
#[derive(Debug)]
struct KillerRef(Arc<GuestKill>);

impl Kill for KillerRef {
    fn kill(&self) -> bool {
        self.0.kill()
    }
}

impl Drop for GuestCall {
    fn drop(&mut self) {
        self.killer.kill();
    }
}
