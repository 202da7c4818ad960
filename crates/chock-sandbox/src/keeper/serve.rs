//! The keeper process's loop (see the module): one thread, one `poll` over its listener, its
//! owners' connections, and each kept call's output pipes and init pidfd.

use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use super::{ALONE, CHUNK, HOLD, Msg, recv, send};
use crate::confine::CallDoors;

/// One stream of a kept call: the bytes read and not yet acknowledged, numbered from `base`.
struct Stream {
    /// The pipe's read end, until its end of file.
    fd: Option<OwnedFd>,
    buf: Vec<u8>,
    /// The offset of `buf[0]`: every byte before it was recorded by an owner.
    base: u64,
    /// The offset up to which the follower was sent the bytes.
    sent: u64,
}

impl Stream {
    fn new(fd: OwnedFd) -> Stream {
        Stream {
            fd: Some(fd),
            buf: Vec::new(),
            base: 0,
            sent: 0,
        }
    }

    fn end(&self) -> u64 {
        self.base + self.buf.len() as u64
    }
}

/// A call kept for its session.
struct Job {
    handle: String,
    /// Held only for its being open: the call's setup kills the call when the last copy closes.
    _lifeline: OwnedFd,
    pidfd: OwnedFd,
    status: OwnedFd,
    /// Copies of the call's doors, held open for the next owner and given to each follower.
    doors: CallDoors,
    streams: [Stream; 2],
    deadline: Option<Instant>,
    /// The init is gone; its wait status, if it wrote one.
    exited: Option<Option<i32>>,
    timed_out: bool,
    end_sent: bool,
    /// The connection that follows the call.
    follower: Option<u64>,
}

impl Job {
    fn ended(&self) -> bool {
        self.exited.is_some() && self.streams.iter().all(|s| s.fd.is_none())
    }

    fn kill(&self) {
        // SAFETY: signal through a pidfd the keeper holds; refused if the process is gone.
        unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.pidfd.as_raw_fd(),
                libc::SIGKILL,
                std::ptr::null::<u8>(),
                0,
            )
        };
    }
}

struct Conn {
    id: u64,
    fd: OwnedFd,
}

#[derive(Default)]
struct Keeper {
    conns: Vec<Conn>,
    jobs: Vec<Job>,
    next_conn: u64,
    finish: bool,
}

/// Runs the keeper on `listener` (a bound, listening `SOCK_SEQPACKET` socket) until the session
/// ends or no owner has been connected for [`ALONE`]; then every call it keeps is killed.
/// Returns the error that stopped it early, if any.
pub fn serve(listener: OwnedFd) -> std::io::Result<()> {
    serve_alone(listener, ALONE)
}

/// As [`serve`], ending once no owner has been connected for `alone`.
pub fn serve_alone(listener: OwnedFd, alone: Duration) -> std::io::Result<()> {
    set_nonblocking(listener.as_raw_fd())?;
    let mut k = Keeper::default();
    let mut alone_since: Option<Instant> = Some(Instant::now());
    loop {
        let now = Instant::now();
        if k.finish {
            break;
        }
        match (k.conns.is_empty(), alone_since) {
            (true, None) => alone_since = Some(now),
            (true, Some(t)) if now.duration_since(t) >= alone => break,
            (false, _) => alone_since = None,
            _ => {}
        }
        for job in &mut k.jobs {
            if job.exited.is_none() && job.deadline.is_some_and(|d| d <= now) {
                job.kill();
                job.timed_out = true;
                job.deadline = None;
            }
        }
        let mut wait = alone_since.map(|t| (t + alone).saturating_duration_since(now));
        for d in k.jobs.iter().filter_map(|j| j.deadline) {
            let left = d.saturating_duration_since(now);
            wait = Some(wait.map_or(left, |w| w.min(left)));
        }
        k.poll_once(&listener, wait)?;
    }
    // No owner can reach the keeper from here on; then what it keeps ends.
    drop(listener);
    for job in &k.jobs {
        job.kill();
    }
    Ok(())
}

/// What each polled descriptor is.
#[derive(Clone, Copy)]
enum Polled {
    Listener,
    Conn(u64),
    Stream(usize, usize),
    Init(usize),
}

impl Keeper {
    fn poll_once(&mut self, listener: &OwnedFd, wait: Option<Duration>) -> std::io::Result<()> {
        let mut fds: Vec<libc::pollfd> = Vec::new();
        let mut what: Vec<Polled> = Vec::new();
        let mut watch = |fd: RawFd, events: libc::c_short, w: Polled| {
            fds.push(libc::pollfd {
                fd,
                events,
                revents: 0,
            });
            what.push(w);
        };
        watch(listener.as_raw_fd(), libc::POLLIN, Polled::Listener);
        for c in &self.conns {
            let pending = self
                .jobs
                .iter()
                .any(|j| j.follower == Some(c.id) && (j.unsent() || (j.ended() && !j.end_sent)));
            let events = libc::POLLIN | if pending { libc::POLLOUT } else { 0 };
            watch(c.fd.as_raw_fd(), events, Polled::Conn(c.id));
        }
        for (i, j) in self.jobs.iter().enumerate() {
            for (s, stream) in j.streams.iter().enumerate() {
                if let Some(fd) = &stream.fd
                    && stream.buf.len() < HOLD
                {
                    watch(fd.as_raw_fd(), libc::POLLIN, Polled::Stream(i, s));
                }
            }
            if j.exited.is_none() {
                watch(j.pidfd.as_raw_fd(), libc::POLLIN, Polled::Init(i));
            }
        }
        let ms = wait.map_or(-1, |w| {
            libc::c_int::try_from(w.as_millis().saturating_add(1)).unwrap_or(libc::c_int::MAX)
        });
        let nfds = libc::nfds_t::try_from(fds.len()).unwrap_or(0);
        // SAFETY: `fds` is a vector of `nfds` valid pollfd structs.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), nfds, ms) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            return if e.kind() == std::io::ErrorKind::Interrupted {
                Ok(())
            } else {
                Err(e)
            };
        }
        for (p, w) in fds.iter().zip(&what) {
            if p.revents == 0 {
                continue;
            }
            match *w {
                Polled::Listener => self.accept(listener),
                Polled::Conn(id) => self.read_conn(id),
                Polled::Stream(i, s) => self.read_stream(i, s),
                Polled::Init(i) => self.init_gone(i),
            }
        }
        self.flush();
        self.jobs.retain(|j| !j.handle.is_empty());
        Ok(())
    }

    fn accept(&mut self, listener: &OwnedFd) {
        while let Ok(fd) = rustix::net::accept_with(
            listener,
            rustix::net::SocketFlags::CLOEXEC | rustix::net::SocketFlags::NONBLOCK,
        ) {
            self.next_conn += 1;
            self.conns.push(Conn {
                id: self.next_conn,
                fd,
            });
        }
    }

    fn read_conn(&mut self, id: u64) {
        loop {
            let Some(conn) = self.conns.iter().find(|c| c.id == id) else {
                return;
            };
            match recv(conn.fd.as_fd()) {
                Ok(Some((msg, _, fds))) => self.handle(id, msg, fds),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Ok(None) | Err(_) => {
                    self.conns.retain(|c| c.id != id);
                    for j in &mut self.jobs {
                        if j.follower == Some(id) {
                            j.follower = None;
                        }
                    }
                    return;
                }
            }
        }
    }

    fn reply(&self, id: u64, msg: &Msg, fds: &[std::os::fd::BorrowedFd<'_>]) {
        if let Some(c) = self.conns.iter().find(|c| c.id == id) {
            let _ = send(c.fd.as_fd(), msg, &[], fds);
        }
    }

    fn handle(&mut self, id: u64, msg: Msg, fds: Vec<OwnedFd>) {
        match msg {
            Msg::Keep {
                handle,
                timeout_ms,
                doors,
            } => {
                let mut fds = fds;
                let door_fds = fds.split_off(fds.len().min(5));
                let (Ok([lifeline, pidfd, status, stdout, stderr]), Some(doors)) = (
                    <[OwnedFd; 5]>::try_from(fds),
                    CallDoors::from_fds(doors, door_fds),
                ) else {
                    let reason =
                        "keep needs five descriptors and one for each door it names".to_string();
                    return self.reply(id, &Msg::Refused { reason }, &[]);
                };
                // The status too: once the init is gone its status is in the pipe, or never
                // will be (killed first), and the read must not wait on another writer.
                if set_nonblocking(stdout.as_raw_fd())
                    .and_then(|()| set_nonblocking(stderr.as_raw_fd()))
                    .and_then(|()| set_nonblocking(status.as_raw_fd()))
                    .is_err()
                {
                    let reason = "the call's pipes cannot be made non-blocking".to_string();
                    return self.reply(id, &Msg::Refused { reason }, &[]);
                }
                self.jobs.push(Job {
                    handle,
                    _lifeline: lifeline,
                    pidfd,
                    status,
                    doors,
                    streams: [Stream::new(stdout), Stream::new(stderr)],
                    deadline: timeout_ms.map(|ms| Instant::now() + Duration::from_millis(ms)),
                    exited: None,
                    timed_out: false,
                    end_sent: false,
                    follower: Some(id),
                });
            }
            Msg::List => {
                let handles = self.jobs.iter().map(|j| j.handle.clone()).collect();
                self.reply(id, &Msg::Jobs { handles }, &[]);
            }
            Msg::Follow { handle, from } => self.follow(id, &handle, from),
            Msg::Ack { stream, upto } => {
                if let Some(j) = self.jobs.iter_mut().find(|j| j.follower == Some(id))
                    && let Some(s) = j.streams.get_mut(usize::from(stream))
                    && upto > s.base
                    && upto <= s.sent
                {
                    let n = usize::try_from(upto - s.base).unwrap_or(s.buf.len());
                    s.buf.drain(..n.min(s.buf.len()));
                    s.base = upto;
                }
            }
            Msg::Recorded => {
                for j in &mut self.jobs {
                    if j.follower == Some(id) && j.end_sent {
                        // Forgotten at the end of this round.
                        j.handle.clear();
                    }
                }
            }
            Msg::Finish => self.finish = true,
            Msg::Jobs { .. } | Msg::Job { .. } | Msg::Out { .. } => {}
            Msg::End { .. } | Msg::Refused { .. } => {}
        }
    }

    fn follow(&mut self, id: u64, handle: &str, from: [u64; 2]) {
        let Some(i) = self.jobs.iter().position(|j| j.handle == handle) else {
            let reason = format!("no kept call {handle}");
            return self.reply(id, &Msg::Refused { reason }, &[]);
        };
        let job = &mut self.jobs[i];
        for (s, at) in job.streams.iter().zip(from) {
            if at < s.base || at > s.end() {
                let reason = format!(
                    "{handle}: offset {at} is outside what is held ({}..{})",
                    s.base,
                    s.end()
                );
                return self.reply(id, &Msg::Refused { reason }, &[]);
            }
        }
        for (s, at) in job.streams.iter_mut().zip(from) {
            let n = usize::try_from(at - s.base).unwrap_or(0);
            s.buf.drain(..n);
            s.base = at;
            s.sent = at;
        }
        job.follower = Some(id);
        job.end_sent = false;
        let job = &self.jobs[i];
        let msg = Msg::Job {
            handle: handle.to_string(),
            doors: job.doors.present(),
        };
        let mut fds = vec![job.pidfd.as_fd()];
        fds.extend(job.doors.fds());
        self.reply(id, &msg, &fds);
    }

    fn read_stream(&mut self, i: usize, s: usize) {
        let stream = &mut self.jobs[i].streams[s];
        let Some(fd) = &stream.fd else { return };
        let mut buf = [0u8; CHUNK];
        match rustix::io::read(fd, &mut buf) {
            Ok(0) => stream.fd = None,
            Ok(n) => stream.buf.extend_from_slice(&buf[..n]),
            Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INTR) => {}
            Err(_) => stream.fd = None,
        }
    }

    fn init_gone(&mut self, i: usize) {
        let job = &mut self.jobs[i];
        let mut word = [0u8; 4];
        // The init wrote the status before it exited, or never will.
        let status = match rustix::io::read(&job.status, &mut word) {
            Ok(4) => Some(i32::from_ne_bytes(word)),
            _ => None,
        };
        job.exited = Some(status);
        job.deadline = None;
    }

    /// Sends each follower what it has not been sent, then the end once everything was.
    fn flush(&mut self) {
        for job in &mut self.jobs {
            let Some(conn) = job
                .follower
                .and_then(|id| self.conns.iter().find(|c| c.id == id))
            else {
                continue;
            };
            for (n, s) in job.streams.iter_mut().enumerate() {
                while s.sent < s.end() {
                    let at = usize::try_from(s.sent - s.base).unwrap_or(0);
                    let chunk = &s.buf[at..s.buf.len().min(at + CHUNK)];
                    let msg = Msg::Out {
                        stream: u8::try_from(n).unwrap_or(0),
                        offset: s.sent,
                    };
                    if send(conn.fd.as_fd(), &msg, chunk, &[]).is_err() {
                        break;
                    }
                    s.sent += chunk.len() as u64;
                }
            }
            if job.ended() && !job.unsent() && !job.end_sent {
                let msg = Msg::End {
                    status: job.exited.flatten(),
                    timed_out: job.timed_out,
                };
                if send(conn.fd.as_fd(), &msg, &[], &[]).is_ok() {
                    job.end_sent = true;
                }
            }
        }
    }
}

impl Job {
    fn unsent(&self) -> bool {
        self.streams.iter().any(|s| s.sent < s.end())
    }
}

fn set_nonblocking(fd: RawFd) -> std::io::Result<()> {
    // SAFETY: F_GETFL and F_SETFL on a descriptor the keeper holds.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}
