//! Who may use the unix socket: the peer's credentials as the kernel recorded them at connect
//! (`SO_PEERCRED`), then its namespaces.
//!
//! A uid alone is not enough. A confined call runs in a user namespace whose uid maps back to the
//! user, so the kernel reports the user's uid for it; it must never reach the daemon (it could
//! answer its own questions, apply its own work). The socket's directory is never in a call's mount
//! plan (chock-policy refuses a `[sandbox]` path that contains it), and here, besides, a peer whose
//! user or mount namespace is not the daemon's own is refused, as is one whose pid the daemon cannot
//! see (a process of another pid namespace). Anything that cannot be checked is refused.

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
        // nix's form keeps a pid of 0 (a peer outside this pid namespace) as 0.
        let cred = nix::sys::socket::getsockopt(stream, nix::sys::socket::sockopt::PeerCredentials)
            .map_err(|e| format!("cannot read the peer's credentials: {e}"))?;
        let peer = UnixPeer {
            uid: cred.uid(),
            gid: cred.gid(),
            pid: u32::try_from(cred.pid()).unwrap_or(0),
        };
        self.check_peer(&peer)?;
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
        for ns in ["user", "mnt"] {
            let mine = namespace("self", ns)?;
            let theirs = namespace(&peer.pid.to_string(), ns)?;
            if mine != theirs {
                return Err(format!(
                    "the peer (pid {}) runs in another {ns} namespace ({theirs}, not {mine}): a \
                     confined call, or a container",
                    peer.pid
                ));
            }
        }
        Ok(())
    }
}

/// `/proc/<pid>/ns/<ns>`'s target (`user:[4026531837]`).
fn namespace(pid: &str, ns: &str) -> Result<String, String> {
    let path = PathBuf::from(format!("/proc/{pid}/ns/{ns}"));
    std::fs::read_link(&path)
        .map(|t| t.to_string_lossy().into_owned())
        .map_err(|e| format!("cannot read {}: {e}", path.display()))
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
}
