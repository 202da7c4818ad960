//! The call's host channel in the guest (docs/microvm.md, "The host channel"): the sandbox made
//! the call's socket pair here, as on the host, and the call's end is its descriptor 3; this
//! init holds the other end and relays each request to the host as a frame, where the session's
//! own channel handler answers it. The host trusts nothing of this relay: it reads the call's
//! repository through its own view of the shared workspace and refuses a path outside it.
//!
//! Two things cannot cross the virtio port as they would cross a socket, and are done here:
//! the asking process's identity (its working directory is checked against the one it claims,
//! as the host checks it for a local call), and the descriptor of an allowed git's real
//! program (the host names it, a file of the shared read-only `/usr`, and this init hands on a
//! sealed in-memory copy of it, made once per guest).

use std::collections::HashMap;
use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use chock_guest::{net_frame, tag};
use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};

use crate::{Writer, send};

/// The largest request or answer (the session's channel frame limit).
const MAX_DATAGRAM: usize = 128 * 1024;

/// At most this many requests of a call wait for the host at once; more are refused here.
const MAX_WAITING: usize = 64;

/// Request ids, unique for the guest's life: an answer that comes after its call ended (the
/// host closes what it had not answered) finds no request of the next call under its id.
static NEXT_ID: AtomicU32 = AtomicU32::new(0);

/// One call's requests waiting for the host's answers, by id.
#[derive(Default, Clone)]
pub(crate) struct Channel {
    waiting: Arc<Mutex<HashMap<u32, OwnedFd>>>,
}

impl Channel {
    /// Reads requests from `host_end` (the sandbox's host end of the call's channel) on a thread
    /// of its own until every process of the call has closed its end.
    pub(crate) fn serve(&self, host_end: OwnedFd, writer: Writer) {
        let this = self.clone();
        std::thread::spawn(move || {
            while let Ok(Some((bytes, mut fds))) = recv(host_end.as_fd()) {
                // Exactly one socket to answer on, as the host's own server requires.
                let (Some(reply_to), true) = (fds.pop(), fds.is_empty()) else {
                    continue;
                };
                if let Some(reason) = wrong_cwd(&bytes, &reply_to) {
                    let _ = send_datagram(reply_to.as_fd(), &refusal(&reason), &[]);
                    continue;
                }
                let id = NEXT_ID.fetch_add(1, Ordering::SeqCst);
                {
                    let mut waiting = this.lock();
                    if waiting.len() >= MAX_WAITING {
                        continue;
                    }
                    waiting.insert(id, reply_to);
                }
                if send(&writer, &net_frame(tag::CHANNEL_ASK, id, &bytes)).is_err() {
                    return;
                }
            }
        });
    }

    /// The host's answer to request `id`: written on the asker's own socket, with the sealed
    /// copy of the real git an allowed git answer names. Empty: the host had no answer, and the
    /// asker's socket is closed (a refusal).
    pub(crate) fn answer(&self, id: u32, bytes: &[u8]) {
        let Some(reply_to) = self.lock().remove(&id) else {
            return;
        };
        if bytes.is_empty() {
            return;
        }
        let program = program_of(bytes).and_then(|p| sealed_copy(&p).ok());
        let fds: Vec<BorrowedFd<'_>> = program.iter().map(AsFd::as_fd).collect();
        let _ = send_datagram(reply_to.as_fd(), bytes, &fds);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u32, OwnedFd>> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The request's JSON (after its 4-byte length).
fn json_of(datagram: &[u8]) -> Option<serde_json::Value> {
    serde_json::from_slice(datagram.get(4..)?).ok()
}

/// For a git request: why its claimed working directory is not the asking process's own (same
/// device and inode, read through the process's root in the guest), if it is not.
fn wrong_cwd(datagram: &[u8], reply_to: &OwnedFd) -> Option<String> {
    let request = json_of(datagram)?;
    if request["kind"] != "git" {
        return None;
    }
    let cwd = request["cwd"].as_str().unwrap_or_default();
    let pid = match rustix::net::sockopt::socket_peercred(reply_to) {
        Ok(cred) => cred.pid.as_raw_nonzero().get(),
        Err(_) => return Some("git: the asking process could not be identified".into()),
    };
    let claimed = Path::new(&format!("/proc/{pid}/root")).join(cwd.trim_start_matches('/'));
    let same = match (
        std::fs::metadata(claimed),
        std::fs::metadata(format!("/proc/{pid}/cwd")),
    ) {
        (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
        _ => false,
    };
    (!same || !cwd.starts_with('/')).then(|| {
        format!(
            "git: the working directory `{cwd}` is not the asking process's (in the microVM guest)"
        )
    })
}

/// A `Refused` answer as the session's channel writes one.
fn refusal(reason: &str) -> Vec<u8> {
    let body = serde_json::json!({ "kind": "refused", "reason": reason }).to_string();
    let mut out = u32::try_from(body.len())
        .unwrap_or(0)
        .to_be_bytes()
        .to_vec();
    out.extend_from_slice(body.as_bytes());
    out
}

/// The real git an allowed git answer names (`program`): a plain absolute path under the
/// shared, read-only `/usr`, or nothing.
fn program_of(datagram: &[u8]) -> Option<PathBuf> {
    let answer = json_of(datagram)?;
    if answer["kind"] != "git" || answer["allowed"] != true {
        return None;
    }
    let path = PathBuf::from(answer["program"].as_str()?);
    let plain = path
        .components()
        .skip(1)
        .all(|c| matches!(c, Component::Normal(_)));
    (path.starts_with("/usr/") && plain).then_some(path)
}

/// A sealed in-memory copy of the program at `path`, made once per guest and path: the call's
/// Landlock ruleset lets it execute nothing outside its own tree, and an anonymous file belongs
/// to no tree (as on the host).
fn sealed_copy(path: &Path) -> std::io::Result<OwnedFd> {
    use rustix::fs::{MemfdFlags, SealFlags};
    static COPIES: OnceLock<Mutex<HashMap<PathBuf, OwnedFd>>> = OnceLock::new();
    let mut copies = COPIES
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(fd) = copies.get(path) {
        return fd.try_clone();
    }
    let flags = MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING;
    let fd = rustix::fs::memfd_create("git", flags | MemfdFlags::EXEC)
        .or_else(|_| rustix::fs::memfd_create("git", flags))?;
    let mut file = std::fs::File::from(fd);
    std::io::copy(&mut std::fs::File::open(path)?, &mut file)?;
    let fd = OwnedFd::from(file);
    rustix::fs::fcntl_add_seals(
        &fd,
        SealFlags::SEAL | SealFlags::SHRINK | SealFlags::GROW | SealFlags::WRITE,
    )?;
    let mine = fd.try_clone()?;
    copies.insert(path.to_path_buf(), fd);
    Ok(mine)
}

/// Sends one datagram with `fds`.
fn send_datagram(
    sock: BorrowedFd<'_>,
    bytes: &[u8],
    fds: &[BorrowedFd<'_>],
) -> std::io::Result<()> {
    let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut anc = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() && !anc.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(std::io::Error::other("too many descriptors"));
    }
    let flags = SendFlags::NOSIGNAL | SendFlags::DONTWAIT;
    rustix::net::sendmsg(sock, &[IoSlice::new(bytes)], &mut anc, flags)?;
    Ok(())
}

/// Receives one request and the descriptors on it; `None` once every process of the call has
/// closed its end. A request cut short is dropped (its socket closed: a refusal).
fn recv(sock: BorrowedFd<'_>) -> std::io::Result<Option<(Vec<u8>, Vec<OwnedFd>)>> {
    let mut buf = vec![0u8; MAX_DATAGRAM];
    let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(4))];
    loop {
        let mut anc = RecvAncillaryBuffer::new(&mut space);
        let mut iov = [IoSliceMut::new(&mut buf)];
        match rustix::net::recvmsg(sock, &mut iov, &mut anc, RecvFlags::CMSG_CLOEXEC) {
            Ok(msg) => {
                let mut fds = Vec::new();
                for m in anc.drain() {
                    if let RecvAncillaryMessage::ScmRights(rights) = m {
                        fds.extend(rights);
                    }
                }
                if msg.bytes == 0 && fds.is_empty() {
                    return Ok(None);
                }
                if msg.flags.contains(rustix::net::ReturnFlags::TRUNC)
                    || msg.flags.contains(rustix::net::ReturnFlags::CTRUNC)
                {
                    continue;
                }
                return Ok(Some((buf[..msg.bytes].to_vec(), fds)));
            }
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}
