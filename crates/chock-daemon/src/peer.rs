//! Who may use the unix socket: the peer's credentials as the kernel recorded them at connect
//! (`SO_PEERCRED`), then its namespaces.
//!
//! The peer's process is named by the pidfd the kernel recorded at connect (`SO_PEERPIDFD`), not
//! by its pid alone: its pid is read from the pidfd, its `/proc/<pid>` files are read, and the
//! pidfd must still name a running process afterwards — so a peer that exits and whose pid is
//! taken by another process during the check cannot have that process judged in its place.
//!
//! A uid alone is not enough. A confined call runs in a user namespace whose uid maps back to the
//! user, so the kernel reports the user's uid for it; it must never reach the daemon (it could
//! answer its own questions, apply its own work). The socket's directory is never in a call's mount
//! plan (chock-policy refuses a `[sandbox]` path that contains it), and here, besides, a peer whose
//! user, mount or pid namespace is not the daemon's own is refused, as is one whose pid the daemon
//! cannot see (a process of an outer pid namespace). Anything that cannot be checked is refused.
//!
//! The checks must work for a daemon that is not root and a peer of another uid (`--group`): the
//! kernel shows `/proc/<pid>/ns/*` only to a process that may trace the peer, so it is read when
//! the kernel allows it, and besides, always, what `/proc` shows anyone:
//! - `/proc/<pid>/status`'s `NSpid`: one pid per pid namespace the peer is in, so a peer in a pid
//!   namespace below the daemon's lists more pids than the daemon does;
//! - `/proc/<pid>/uid_map` and `gid_map`: a user namespace other than the daemon's shows other
//!   maps (a confined call's maps one uid, the daemon's initial one maps all 2^32);
//! - `/proc/<pid>/mountinfo`: a mount namespace other than the daemon's holds mounts of its own
//!   (a copy of a mount gets a new id), so the peer's table names a mount the daemon's lacks.
//!
//! What these cannot tell apart, the readable links would: a user namespace a privileged process
//! made with exactly the daemon's maps. Only root can make one whose maps are the initial one's.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::PathBuf;

use tokio::net::UnixStream;

/// A unix peer that was let in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnixPeer {
    /// Its uid.
    pub uid: u32,
    /// Its primary gid.
    pub gid: u32,
    /// Its pid, as this daemon's pid namespace sees it.
    pub pid: u32,
}

impl UnixPeer {
    /// How answers by this peer are named in the log (`unix:uid=1000,pid=4242`).
    pub fn name(&self) -> String {
        format!("unix:uid={},pid={}", self.uid, self.pid)
    }
}

/// Who is let in: this user, and the members of one group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerRule {
    /// The daemon's own uid.
    pub uid: u32,
    /// `--group`'s gid.
    pub group: Option<u32>,
}

impl PeerRule {
    /// This process's user, and `group`.
    pub fn this_user(group: Option<u32>) -> PeerRule {
        PeerRule {
            uid: rustix::process::geteuid().as_raw(),
            group,
        }
    }

    /// Lets `stream`'s peer in, or says why not.
    pub fn check(&self, stream: &UnixStream) -> Result<UnixPeer, String> {
        let cred = nix::sys::socket::getsockopt(stream, nix::sys::socket::sockopt::PeerCredentials)
            .map_err(|e| format!("cannot read the peer's credentials: {e}"))?;
        let process = PeerProcess::of(stream)?;
        let peer = UnixPeer {
            uid: cred.uid(),
            gid: cred.gid(),
            pid: process.pid()?,
        };
        self.check_peer(&peer)?;
        process.still_running()?;
        Ok(peer)
    }

    fn check_peer(&self, peer: &UnixPeer) -> Result<(), String> {
        let user_ok = peer.uid == self.uid;
        let group_ok = self
            .group
            .is_some_and(|g| peer.gid == g || groups_of(peer.pid).contains(&g));
        if !user_ok && !group_ok {
            return Err(format!(
                "uid {} is not this daemon's user ({}){}",
                peer.uid,
                self.uid,
                self.group
                    .map(|g| format!(" nor in its group {g}"))
                    .unwrap_or_default()
            ));
        }
        if peer.pid == 0 {
            return Err("the peer's process is not in this daemon's pid namespace".into());
        }
        let pid = peer.pid.to_string();
        let another = |ns: &str, how: String| {
            Err(format!(
                "the peer (pid {}) runs in another {ns} namespace ({how}): a confined call, or a \
                 container",
                peer.pid
            ))
        };
        // Read the peer's first: a pid reused between the two reads cannot then pass as ours.
        let (theirs, mine) = (nspid(&pid)?, nspid("self")?);
        if theirs.len() != mine.len() {
            return another(
                "pid",
                format!(
                    "it is {} pid namespace(s) deep, not {}",
                    theirs.len(),
                    mine.len()
                ),
            );
        }
        for map in ["uid_map", "gid_map"] {
            let (theirs, mine) = (read(&pid, map)?, read("self", map)?);
            if words(&theirs) != words(&mine) {
                return another("user", format!("its {map} is {:?}", words(&theirs)));
            }
        }
        let (theirs, mine) = (mount_ids(&pid)?, mount_ids("self")?);
        if let Some(id) = theirs.iter().find(|id| !mine.contains(id)) {
            return another("mnt", format!("its mount {id} is not one of this daemon's"));
        }
        for ns in ["user", "mnt", "pid"] {
            let Some(theirs) = namespace(&pid, ns)? else {
                // Not ours to read (another uid): the world-readable signs above decided.
                continue;
            };
            let mine = namespace("self", ns)?
                .ok_or_else(|| format!("cannot read this daemon's own {ns} namespace"))?;
            if mine != theirs {
                return another(ns, format!("{theirs}, not {mine}"));
            }
        }
        Ok(())
    }
}

/// The peer's process as the kernel recorded it at connect: a pidfd, which names that one process
/// whatever happens to its pid.
#[derive(Debug)]
struct PeerProcess(OwnedFd);

impl PeerProcess {
    fn of(stream: &UnixStream) -> Result<PeerProcess, String> {
        nix::sys::socket::getsockopt(stream, nix::sys::socket::sockopt::PeerPidfd)
            .map(PeerProcess)
            .map_err(|e| format!("cannot read the peer's pidfd (SO_PEERPIDFD): {e}"))
    }

    /// Its pid in this daemon's pid namespace (0: it is not in it), from the pidfd's `Pid:`.
    fn pid(&self) -> Result<u32, String> {
        let path = format!("/proc/self/fdinfo/{}", self.0.as_raw_fd());
        let info = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
        let field = info
            .lines()
            .find_map(|l| l.strip_prefix("Pid:"))
            .ok_or_else(|| format!("{path} has no Pid line"))?;
        match field.trim().parse::<i64>() {
            Ok(-1) => Err("the peer's process has ended".into()),
            Ok(pid) => u32::try_from(pid).map_err(|_| format!("{path}: a pid of {pid}")),
            Err(e) => Err(format!("{path}'s Pid: {e}")),
        }
    }

    /// Fails when the process has ended (its pid may be another's now, so what was read of it
    /// may not have been its own).
    fn still_running(&self) -> Result<(), String> {
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        let mut fds = [PollFd::new(self.0.as_fd(), PollFlags::POLLIN)];
        let ready = poll(&mut fds, PollTimeout::ZERO)
            .map_err(|e| format!("cannot poll the peer's pidfd: {e}"))?;
        if ready > 0 {
            return Err("the peer's process ended while it was checked".into());
        }
        Ok(())
    }
}

/// `/proc/<pid>/ns/<ns>`'s target (`user:[4026531837]`); `None` when the kernel does not let this
/// process see it (a peer of another uid, for a daemon that is not root).
fn namespace(pid: &str, ns: &str) -> Result<Option<String>, String> {
    let path = PathBuf::from(format!("/proc/{pid}/ns/{ns}"));
    match std::fs::read_link(&path) {
        Ok(target) => Ok(Some(target.to_string_lossy().into_owned())),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => Ok(None),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

/// `/proc/<pid>/<file>`, which every process may read.
fn read(pid: &str, file: &str) -> Result<String, String> {
    let path = format!("/proc/{pid}/{file}");
    std::fs::read_to_string(&path).map_err(|e| format!("cannot read {path}: {e}"))
}

fn words(text: &str) -> Vec<&str> {
    text.split_whitespace().collect()
}

/// The pids of `pid` in each pid namespace it is in, outermost first (`status`'s `NSpid`).
fn nspid(pid: &str) -> Result<Vec<u32>, String> {
    let status = read(pid, "status")?;
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))
        .ok_or_else(|| format!("/proc/{pid}/status has no NSpid line"))?;
    let pids: Vec<u32> = line
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("/proc/{pid}/status's NSpid: {e}"))?;
    if pids.is_empty() {
        return Err(format!("/proc/{pid}/status's NSpid is empty"));
    }
    Ok(pids)
}

/// The ids of the mounts `pid`'s mount namespace shows it (`mountinfo`'s first field); never
/// empty, or it is an error.
fn mount_ids(pid: &str) -> Result<std::collections::HashSet<u64>, String> {
    let info = read(pid, "mountinfo")?;
    let ids: std::collections::HashSet<u64> = info
        .lines()
        .map(|l| l.split_whitespace().next().and_then(|id| id.parse().ok()))
        .collect::<Option<_>>()
        .ok_or_else(|| format!("/proc/{pid}/mountinfo is not a mount table"))?;
    if ids.is_empty() {
        return Err(format!("/proc/{pid}/mountinfo lists no mount"));
    }
    Ok(ids)
}

/// The supplementary groups of `pid` (from `/proc/<pid>/status`).
fn groups_of(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("Groups:"))
        .map(|g| {
            g.split_whitespace()
                .filter_map(|n| n.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The gid of group `name`.
pub fn group_id(name: &str) -> Option<u32> {
    nix::unistd::Group::from_name(name)
        .ok()
        .flatten()
        .map(|g| g.gid.as_raw())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_passes_and_another_uid_does_not() {
        let rule = PeerRule::this_user(None);
        let me = UnixPeer {
            uid: rule.uid,
            gid: 0,
            pid: std::process::id(),
        };
        rule.check_peer(&me).unwrap();
        let other = UnixPeer {
            uid: rule.uid + 1,
            ..me.clone()
        };
        assert!(
            rule.check_peer(&other)
                .unwrap_err()
                .contains("not this daemon's user")
        );
        let unseen = UnixPeer { pid: 0, ..me };
        assert!(
            rule.check_peer(&unseen)
                .unwrap_err()
                .contains("pid namespace")
        );
    }

    /// A peer is the process the kernel recorded at connect: a live one passes; one that ended
    /// before the check is refused as ended (its pid could be another process's by now), not
    /// judged by whatever `/proc/<pid>` shows.
    #[tokio::test]
    async fn the_peer_is_the_process_that_connected_and_must_still_run() {
        let rule = PeerRule::this_user(None);
        let (ours, _other) = UnixStream::pair().unwrap();
        let peer = rule.check(&ours).unwrap();
        assert_eq!(peer.pid, std::process::id());

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let status = std::process::Command::new("python3")
            .args([
                "-c",
                "import socket, sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])",
            ])
            .arg(&path)
            .status()
            .expect("python3 runs (the CI machine installs it)");
        assert!(status.success());
        let (gone, _) = listener.accept().unwrap();
        gone.set_nonblocking(true).unwrap();
        let gone = UnixStream::from_std(gone).unwrap();
        let refused = rule.check(&gone).unwrap_err();
        assert!(
            refused.contains("ended"),
            "a peer that is gone is refused as gone (stopped by: the pidfd of SO_PEERPIDFD): \
             {refused}"
        );
    }
}
