//! The owner's side of the keeper (see the module): starting it, reaching it again after a
//! handover, handing it a call and following a call it keeps. Blocking: an owner runs these on
//! a thread of their own (its runtime's blocking pool).

use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};

use super::{Msg, recv, send, socket_path};
use crate::confine::{CallDoors, KeptCall};

/// An owner's hold on its session's keeper: while its connection is open the keeper knows it has
/// an owner. Dropped without [`KeeperLink::finish`] (the owner lets go, or dies), the keeper
/// waits [`super::ALONE`] for the next owner.
#[derive(Debug)]
pub struct KeeperLink {
    dir: PathBuf,
    hold: OwnedFd,
    /// The keeper's process, when this owner started it (to reap it at the session's end).
    child: Mutex<Option<std::process::Child>>,
}

fn other(what: String) -> std::io::Error {
    std::io::Error::other(what)
}

fn socket() -> std::io::Result<OwnedFd> {
    Ok(rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )?)
}

/// A new connection to the keeper of the session in `dir`.
fn dial(dir: &Path) -> std::io::Result<OwnedFd> {
    let (_dirfd, path) = socket_path(dir)?;
    let sock = socket()?;
    rustix::net::connect(&sock, &SocketAddrUnix::new(path.as_str())?)?;
    Ok(sock)
}

/// Asks `sock` which calls the keeper keeps.
fn list(sock: &OwnedFd) -> std::io::Result<Vec<String>> {
    send(sock.as_fd(), &Msg::List, &[], &[])?;
    match recv(sock.as_fd())? {
        Some((Msg::Jobs { handles }, _, _)) => Ok(handles),
        Some((other_msg, _, _)) => Err(other(format!(
            "the keeper answered {other_msg:?} to a list"
        ))),
        None => Err(other("the keeper ended before it answered".into())),
    }
}

/// Starts a keeper for the session in `dir` from `program` (the `chock-keeper` beside `chock`):
/// binds `dir`'s keeper socket (replacing one no keeper serves), starts the keeper in its own
/// process group (a terminal's signals do not reach it) with the listener as its descriptor 3
/// and an empty environment, and waits for its first answer (it answers once confined).
pub fn start(program: &Path, dir: &Path) -> std::io::Result<KeeperLink> {
    let listener = bind(dir)?;
    let raw = listener.as_raw_fd();
    let mut command = std::process::Command::new(program);
    command
        .env_clear()
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0);
    // SAFETY: between fork and exec the child only calls dup2, which is async-signal-safe; the
    // copy at 3 has no close-on-exec flag, so the keeper gets the listener there.
    unsafe {
        command.pre_exec(move || {
            if libc::dup2(raw, 3) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = command.spawn()?;
    drop(listener);
    let hold = dial(dir)?;
    list(&hold).map_err(|e| {
        other(format!(
            "the keeper {} did not start: {e}",
            program.display()
        ))
    })?;
    Ok(KeeperLink {
        dir: dir.to_path_buf(),
        hold,
        child: Mutex::new(Some(child)),
    })
}

/// Binds and listens on the keeper socket of the session in `dir` (replacing one no keeper
/// serves): what [`start`] hands the keeper, and what a test serves itself.
pub fn bind(dir: &Path) -> std::io::Result<OwnedFd> {
    let (dirfd, path) = socket_path(dir)?;
    let _ = rustix::fs::unlinkat(&dirfd, super::SOCKET, rustix::fs::AtFlags::empty());
    let listener = socket()?;
    rustix::net::bind(&listener, &SocketAddrUnix::new(path.as_str())?)?;
    rustix::net::listen(&listener, 16)?;
    Ok(listener)
}

/// The keeper of the session in `dir`, if one runs (a new owner's hold on it), and the calls it
/// keeps.
pub fn connect(dir: &Path) -> std::io::Result<Option<(KeeperLink, Vec<String>)>> {
    let hold = match dial(dir) {
        Ok(sock) => sock,
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ECONNREFUSED)) => {
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    let handles = list(&hold)?;
    let link = KeeperLink {
        dir: dir.to_path_buf(),
        hold,
        child: Mutex::new(None),
    };
    Ok(Some((link, handles)))
}

impl KeeperLink {
    /// The session ends: the keeper kills what it still keeps and exits (and is reaped when this
    /// owner started it).
    pub fn finish(&self) {
        let _ = send(self.hold.as_fd(), &Msg::Finish, &[], &[]);
        let child = self.child.lock().ok().and_then(|mut c| c.take());
        if let Some(mut child) = child {
            let _ = child.wait();
        }
    }
}

/// Hands `call` to the keeper as `handle`; the connection returned follows it from offset 0.
pub fn keep(link: &KeeperLink, handle: &str, call: KeptCall) -> std::io::Result<Follow> {
    let conn = dial(&link.dir)?;
    let msg = Msg::Keep {
        handle: handle.to_string(),
        timeout_ms: call
            .timeout
            .map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
        doors: call.doors.present(),
    };
    let mut fds = vec![
        call.lifeline.as_fd(),
        call.pidfd.as_fd(),
        call.status.as_fd(),
        call.stdout.as_fd(),
        call.stderr.as_fd(),
    ];
    fds.extend(call.doors.fds());
    send(conn.as_fd(), &msg, &[], &fds)?;
    // This process's copies close here: the keeper alone holds the call from now on (its
    // lifeline above all, so this process's end no longer ends the call).
    drop(call);
    Ok(Follow { conn })
}

/// A kept call as a new follower is given it: a copy of its init's pidfd (to kill it, and
/// readable once its processes are gone) and copies of its doors, for this owner to serve.
#[derive(Debug)]
pub struct Followed {
    /// The call's init.
    pub pidfd: OwnedFd,
    /// The call's doors to the host.
    pub doors: CallDoors,
}

/// Follows the kept call `handle` from `from` (the offsets of stdout and stderr this owner has
/// recorded): the connection, and what the keeper gives of the call ([`Followed`]).
pub fn follow(
    link: &KeeperLink,
    handle: &str,
    from: [u64; 2],
) -> std::io::Result<(Follow, Followed)> {
    let conn = dial(&link.dir)?;
    let msg = Msg::Follow {
        handle: handle.to_string(),
        from,
    };
    send(conn.as_fd(), &msg, &[], &[])?;
    match recv(conn.as_fd())? {
        Some((Msg::Job { doors, .. }, _, mut fds)) if !fds.is_empty() => {
            let pidfd = fds.remove(0);
            let doors = CallDoors::from_fds(doors, fds)
                .ok_or_else(|| other("the keeper sent a call's doors that do not match".into()))?;
            Ok((Follow { conn }, Followed { pidfd, doors }))
        }
        Some((Msg::Refused { reason }, _, _)) => {
            Err(other(format!("the keeper refused: {reason}")))
        }
        Some((m, _, _)) => Err(other(format!("the keeper answered {m:?} to a follow"))),
        None => Err(other("the keeper ended before it answered".into())),
    }
}

/// What a follower receives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// Bytes of `stream` (0 stdout, 1 stderr) from `offset` on.
    Out {
        /// Which stream.
        stream: u8,
        /// The offset of the first byte.
        offset: u64,
        /// The bytes.
        bytes: Vec<u8>,
    },
    /// The call ended (after its last byte): its wait status, if its init wrote one.
    End {
        /// The command's wait status.
        status: Option<i32>,
        /// Killed at its wall-clock limit.
        timed_out: bool,
    },
}

/// One owner's connection following one kept call.
#[derive(Debug)]
pub struct Follow {
    conn: OwnedFd,
}

impl Follow {
    /// The next frame; `None` when the keeper is gone.
    pub fn next(&self) -> std::io::Result<Option<Frame>> {
        loop {
            match recv(self.conn.as_fd())? {
                None => return Ok(None),
                Some((Msg::Out { stream, offset }, bytes, _)) => {
                    return Ok(Some(Frame::Out {
                        stream,
                        offset,
                        bytes,
                    }));
                }
                Some((Msg::End { status, timed_out }, _, _)) => {
                    return Ok(Some(Frame::End { status, timed_out }));
                }
                Some((Msg::Refused { reason }, _, _)) => {
                    return Err(other(format!("the keeper refused: {reason}")));
                }
                Some(_) => {}
            }
        }
    }

    /// A copy of this connection, to stop it from another thread.
    pub fn try_clone(&self) -> std::io::Result<Follow> {
        Ok(Follow {
            conn: self.conn.try_clone()?,
        })
    }

    /// Stops following: a [`Follow::next`] waiting on this connection or a copy of it returns
    /// `None` at once, and the keeper holds the call for the next follower.
    pub fn stop(&self) {
        let _ = rustix::net::shutdown(&self.conn, rustix::net::Shutdown::Both);
    }

    /// Says `stream` is recorded up to `upto`: the keeper may let those bytes go.
    pub fn ack(&self, stream: u8, upto: u64) -> std::io::Result<()> {
        send(self.conn.as_fd(), &Msg::Ack { stream, upto }, &[], &[])
    }

    /// Says the call's end is recorded: the keeper forgets the call.
    pub fn recorded(&self) -> std::io::Result<()> {
        send(self.conn.as_fd(), &Msg::Recorded, &[], &[])
    }
}

/// The listener a keeper started by [`start`] finds at descriptor 3, taken once at its start.
///
/// # Safety
/// Only in the keeper's `main`, before anything else opens a descriptor: 3 is then the listener.
pub unsafe fn inherited_listener() -> OwnedFd {
    // SAFETY: the caller's contract: descriptor 3 is the listener `start` left there, owned by
    // nothing else in this process.
    unsafe { OwnedFd::from_raw_fd(3) }
}
