//! Namespaces: unshare one at a time (so a failure names its namespace), the user namespace's id
//! maps, the host name, loopback, and the proxy listener. Allocation-free: run after fork.

use std::ffi::CStr;
use std::os::fd::RawFd;

use crate::error::Layer;
use crate::sys::{check, errno, write_file};

/// The namespaces a call gets after its user namespace, with the layer each one is.
pub(crate) const AFTER_USER: [(libc::c_int, Layer); 6] = [
    (libc::CLONE_NEWNS, Layer::MountNamespace),
    (libc::CLONE_NEWPID, Layer::PidNamespace),
    (libc::CLONE_NEWIPC, Layer::IpcNamespace),
    (libc::CLONE_NEWUTS, Layer::UtsNamespace),
    (libc::CLONE_NEWNET, Layer::NetNamespace),
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
        if libc::ioctl(sock, libc::SIOCGIFFLAGS, &raw mut req) == -1 {
            Err(errno())
        } else {
            req.ifr_ifru.ifru_flags |=
                libc::c_short::try_from(libc::IFF_UP | libc::IFF_RUNNING).unwrap_or(1);
            check(libc::ioctl(sock, libc::SIOCSIFFLAGS, &raw const req))
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
