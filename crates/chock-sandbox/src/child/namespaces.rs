//! Namespaces: unshare one at a time (so a failure names its namespace), the user namespace's id
//! maps, the host name, the network namespace handed from a call's setup process to its init,
//! loopback, and the proxy listener. Allocation-free: run after fork.

use std::ffi::CStr;
use std::os::fd::RawFd;

use crate::child::sys::{check, errno, ioctl_request, write_file};
use crate::wire::error::Layer;

/// The namespaces a call gets after its user namespace, with the layer each one is.
pub(crate) const AFTER_USER: [(libc::c_int, Layer); 6] = [
    (libc::CLONE_NEWNS, Layer::MountNamespace),
    (libc::CLONE_NEWPID, Layer::PidNamespace),
    (libc::CLONE_NEWIPC, Layer::IpcNamespace),
    (libc::CLONE_NEWUTS, Layer::UtsNamespace),
    (libc::CLONE_NEWNET, Layer::NetNamespace),
    (libc::CLONE_NEWCGROUP, Layer::CgroupNamespace),
];

/// What a call's setup process unshares before it forks the init: every namespace of
/// [`AFTER_USER`] but the network's, which it makes after the fork ([`NetHandoff`]).
pub(crate) const BEFORE_INIT: [(libc::c_int, Layer); 5] = [
    (libc::CLONE_NEWNS, Layer::MountNamespace),
    (libc::CLONE_NEWPID, Layer::PidNamespace),
    (libc::CLONE_NEWIPC, Layer::IpcNamespace),
    (libc::CLONE_NEWUTS, Layer::UtsNamespace),
    (libc::CLONE_NEWCGROUP, Layer::CgroupNamespace),
];

/// unshare(2) with one flag.
pub(crate) fn unshare(flag: libc::c_int) -> Result<(), i32> {
    // SAFETY: unshare only changes this process's namespaces.
    check(unsafe { libc::unshare(flag) })
}

/// Maps the caller's own uid and gid to themselves in its new user namespace. Every user, root
/// included, maps only itself: no other id exists inside, and the kernel allows a process to write
/// this one-line map for itself once setgroups is denied.
pub(crate) fn write_id_maps(uid_map: &[u8], gid_map: &[u8]) -> Result<(), (u32, i32)> {
    write_file(c"/proc/self/setgroups", b"deny").map_err(|e| (1, e))?;
    write_file(c"/proc/self/uid_map", uid_map).map_err(|e| (2, e))?;
    write_file(c"/proc/self/gid_map", gid_map).map_err(|e| (3, e))
}

/// Sets the host name of the call's uts namespace.
pub(crate) fn set_hostname(name: &CStr) -> Result<(), i32> {
    // SAFETY: `name` is valid for its length.
    check(unsafe { libc::sethostname(name.as_ptr(), name.to_bytes().len()) })
}

/// Brings the loopback interface of the (new, empty) network namespace up.
pub(crate) fn loopback_up() -> Result<(), i32> {
    let get_flags = ioctl_request(libc::SIOCGIFFLAGS)?;
    let set_flags = ioctl_request(libc::SIOCSIFFLAGS)?;
    // SAFETY: a plain socket call.
    let sock = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if sock < 0 {
        return Err(errno());
    }
    // SAFETY: ifreq is plain data; zero is a valid initial value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    // SAFETY: `req` is a valid ifreq for SIOCGIFFLAGS/SIOCSIFFLAGS.
    let result = unsafe {
        if libc::ioctl(sock, get_flags, &raw mut req) == -1 {
            Err(errno())
        } else {
            req.ifr_ifru.ifru_flags |=
                libc::c_short::try_from(libc::IFF_UP | libc::IFF_RUNNING).unwrap_or(1);
            check(libc::ioctl(sock, set_flags, &raw const req))
        }
    };
    // SAFETY: `sock` was opened above.
    unsafe { libc::close(sock) };
    result
}

/// A listening TCP socket on 127.0.0.1:`port` inside the call's network namespace.
pub(crate) fn proxy_listener(port: u16) -> Result<RawFd, i32> {
    // SAFETY: a plain socket call.
    let sock = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if sock < 0 {
        return Err(errno());
    }
    let addr = libc::sockaddr_in {
        sin_family: libc::sa_family_t::try_from(libc::AF_INET).unwrap_or(2),
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(std::net::Ipv4Addr::LOCALHOST).to_be(),
        },
        sin_zero: [0; 8],
    };
    let len = libc::socklen_t::try_from(std::mem::size_of::<libc::sockaddr_in>()).unwrap_or(16);
    // SAFETY: `addr` is a valid sockaddr_in of `len` bytes.
    let bound = check(unsafe { libc::bind(sock, (&raw const addr).cast(), len) })
        // SAFETY: `sock` is a bound stream socket.
        .and_then(|()| check(unsafe { libc::listen(sock, 128) }));
    if let Err(e) = bound {
        // SAFETY: `sock` was opened above.
        unsafe { libc::close(sock) };
        return Err(e);
    }
    Ok(sock)
}

/// A call's network namespace, made by its setup process after it forked the init, while the init
/// builds the mount tree: the kernel spends most of a millisecond making a network namespace, and
/// the two processes run on two cores. The init joins it (`setns` through the pidfd of the setup
/// process it was handed, `ChildFds::setup`) once the setup says it is ready, before it gives up its capabilities; a namespace
/// that cannot be made or joined fails the call, and an init whose setup ended first starts
/// nothing.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NetHandoff {
    /// Where the init reads the setup's one byte (end of file: the setup ended without it).
    ready_r: RawFd,
    ready_w: RawFd,
}

impl NetHandoff {
    /// In the setup process, before it forks the init.
    pub(crate) fn open() -> Result<Self, i32> {
        let [ready_r, ready_w] = crate::child::sys::pipe()?;
        Ok(Self { ready_r, ready_w })
    }

    /// In the init, first: drops the setup's end, so that the setup's death is seen as end of
    /// file.
    pub(crate) fn init_side(self) {
        // SAFETY: the setup's write end, inherited; the init never writes it.
        unsafe { libc::close(self.ready_w) };
    }

    /// In the setup process, after the fork: drops the init's ends. The setup then makes the
    /// namespace and says so ([`NetReady::tell`]); a setup that ends first tells the init so.
    pub(crate) fn setup_side(self) -> NetReady {
        // SAFETY: the init's end: it holds its own copy.
        unsafe { libc::close(self.ready_r) };
        NetReady(self.ready_w)
    }

    /// In the init, before it gives up its capabilities: waits for the setup's word, then joins
    /// the network namespace of `setup` (a pidfd of the setup process, closed here).
    pub(crate) fn join(self, setup: RawFd) -> Result<(), JoinError> {
        let joined = if crate::child::sys::read_byte(self.ready_r) {
            // SAFETY: joins the namespace of the process the pidfd names; changes only this one.
            check(unsafe { libc::setns(setup, libc::CLONE_NEWNET) }).map_err(JoinError::Setns)
        } else {
            Err(JoinError::SetupEnded)
        };
        // SAFETY: both are used once.
        unsafe {
            libc::close(self.ready_r);
            libc::close(setup);
        }
        joined
    }
}

/// Why an init could not join its call's network namespace.
#[derive(Debug, Clone, Copy)]
pub(crate) enum JoinError {
    /// The setup process ended without making it (it reported why).
    SetupEnded,
    /// `setns` failed with this errno.
    Setns(i32),
}

/// The setup's end of a [`NetHandoff`].
#[derive(Debug)]
pub(crate) struct NetReady(RawFd);

impl NetReady {
    /// The namespace is made: one byte to the init. A write that fails means the init is gone
    /// already (the host learns why from the channel).
    pub(crate) fn tell(self) {
        let _ = crate::child::sys::write_all(self.0, b"n");
        // SAFETY: the write end is used once.
        unsafe { libc::close(self.0) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_gets_every_namespace_the_doctor_checks_and_the_network_one_after_the_fork() {
        let mut before: Vec<_> = BEFORE_INIT.iter().map(|(f, _)| *f).collect();
        before.push(libc::CLONE_NEWNET);
        before.sort_unstable();
        let mut all: Vec<_> = AFTER_USER.iter().map(|(f, _)| *f).collect();
        all.sort_unstable();
        assert_eq!(before, all);
        assert!(BEFORE_INIT.iter().all(|(f, _)| *f != libc::CLONE_NEWNET));
    }
}
