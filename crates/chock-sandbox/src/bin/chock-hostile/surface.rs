//! Acts on kernel surface a tool call has no use for, which the seccomp table narrows by argument:
//! socket families (`socket`, `socketpair`), netlink protocols, line disciplines (`TIOCSETD`), file
//! handles (`name_to_handle_at`) and execution domains (`personality`). Each act prints the
//! protocol line of the parent module; the allowed forms (AF_UNIX, AF_INET, AF_INET6,
//! NETLINK_ROUTE, the ordinary personalities) are acts too, and print `succeeded …` when they
//! work, so a test can check the rules refuse no more than they say.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::{INCONCLUSIVE, USAGE, cstr, int, ptr, raw_result, refused, succeeded, sys};

/// Families by name (linux/socket.h), with the socket type and protocol each is tried with: the
/// ones a family's own users open, so that without the filter the kernel reaches that family's
/// code (and, for the privileged ones, answers EPERM for the missing capability instead).
const FAMILIES: &[(&str, i32, i32, i32)] = &[
    ("AF_UNIX", libc::AF_UNIX, libc::SOCK_STREAM, 0),
    ("AF_INET", libc::AF_INET, libc::SOCK_STREAM, 0),
    ("AF_INET6", libc::AF_INET6, libc::SOCK_STREAM, 0),
    ("AF_NETLINK", libc::AF_NETLINK, libc::SOCK_RAW, 0),
    ("AF_VSOCK", libc::AF_VSOCK, libc::SOCK_STREAM, 0),
    ("AF_ALG", libc::AF_ALG, libc::SOCK_SEQPACKET, 0),
    // Protocol 0: a packet socket that receives nothing even if it is made.
    ("AF_PACKET", libc::AF_PACKET, libc::SOCK_DGRAM, 0),
    // PF_KEY_V2.
    ("AF_KEY", libc::AF_KEY, libc::SOCK_RAW, 2),
    ("AF_TIPC", libc::AF_TIPC, libc::SOCK_RDM, 0),
    ("AF_RDS", libc::AF_RDS, libc::SOCK_SEQPACKET, 0),
    ("AF_XDP", libc::AF_XDP, libc::SOCK_RAW, 0),
    // BTPROTO_L2CAP.
    ("AF_BLUETOOTH", libc::AF_BLUETOOTH, libc::SOCK_SEQPACKET, 0),
    ("AF_CAN", libc::AF_CAN, libc::SOCK_RAW, 1),
    // AF_SMC, AF_KCM and AF_MCTP are not in libc: 43, 41, 45 (Linux 4.11, 4.6, 5.15).
    ("AF_SMC", 43, libc::SOCK_STREAM, 0),
    ("AF_KCM", 41, libc::SOCK_DGRAM, 0),
    ("AF_LLC", libc::AF_LLC, libc::SOCK_DGRAM, 0),
    ("AF_PPPOX", libc::AF_PPPOX, libc::SOCK_STREAM, 0),
    ("AF_MCTP", 45, libc::SOCK_DGRAM, 0),
];

/// Netlink protocols by name (linux/netlink.h).
const NETLINK: &[(&str, i32)] = &[
    ("NETLINK_ROUTE", libc::NETLINK_ROUTE),
    ("NETLINK_SOCK_DIAG", libc::NETLINK_SOCK_DIAG),
    ("NETLINK_XFRM", libc::NETLINK_XFRM),
    ("NETLINK_AUDIT", libc::NETLINK_AUDIT),
    ("NETLINK_NETFILTER", libc::NETLINK_NETFILTER),
    ("NETLINK_KOBJECT_UEVENT", libc::NETLINK_KOBJECT_UEVENT),
    ("NETLINK_GENERIC", libc::NETLINK_GENERIC),
    ("NETLINK_RDMA", libc::NETLINK_RDMA),
    ("NETLINK_CRYPTO", libc::NETLINK_CRYPTO),
];

/// A number as the tests write it: decimal, or hex with `0x` (a word that a register carries as
/// it is, upper bits included).
fn number(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

/// socket(family, type, protocol): `family` by name (type and protocol from [`FAMILIES`]) or
/// by number (a stream socket, protocol 0). A socket that is made is reported and closed; an
/// AF_VSOCK one is first bound to any port and put to listen, as a channel to the host would be.
pub fn socket(family: &str) -> i32 {
    let (fam, ty, proto) = match FAMILIES.iter().find(|f| f.0 == family) {
        Some(&(_, f, t, p)) => (int(f), t, p),
        None => match number(family) {
            Some(n) => (int(n), libc::SOCK_STREAM, 0),
            None => return USAGE,
        },
    };
    let fd = sys(
        libc::SYS_socket,
        &[fam, int(ty | libc::SOCK_CLOEXEC), int(proto)],
    );
    let Some(fd) = owned(fd) else {
        return raw_result(-1, "socket");
    };
    if fam == int(libc::AF_VSOCK) {
        return succeeded(&format!("socket({family}): {}", vsock_listen(&fd)));
    }
    succeeded(&format!(
        "socket({family}) made descriptor {}",
        fd.as_raw_fd()
    ))
}

/// socketpair(family, SOCK_STREAM, 0), `family` by name or number.
pub fn socketpair(family: &str) -> i32 {
    let fam = match FAMILIES.iter().find(|f| f.0 == family) {
        Some(&(_, f, _, _)) => int(f),
        None => match number(family) {
            Some(n) => int(n),
            None => return USAGE,
        },
    };
    let mut fds = [-1i32; 2];
    let r = sys(
        libc::SYS_socketpair,
        &[
            fam,
            int(libc::SOCK_STREAM | libc::SOCK_CLOEXEC),
            int(0),
            ptr(fds.as_mut_ptr()),
        ],
    );
    if r == 0 {
        // SAFETY: a successful socketpair wrote two descriptors that are ours.
        drop(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) });
    }
    raw_result(r, &format!("socketpair({family})"))
}

/// socket(AF_NETLINK, SOCK_RAW, protocol), `protocol` by name or number.
pub fn netlink(protocol: &str) -> i32 {
    let proto = match NETLINK.iter().find(|p| p.0 == protocol) {
        Some(&(_, p)) => int(p),
        None => match number(protocol) {
            Some(n) => int(n),
            None => return USAGE,
        },
    };
    let fd = sys(
        libc::SYS_socket,
        &[
            int(libc::AF_NETLINK),
            int(libc::SOCK_RAW | libc::SOCK_CLOEXEC),
            proto,
        ],
    );
    match owned(fd) {
        Some(fd) => succeeded(&format!(
            "netlink {protocol} made descriptor {}",
            fd.as_raw_fd()
        )),
        None => raw_result(-1, "socket"),
    }
}

fn owned(fd: libc::c_long) -> Option<OwnedFd> {
    let fd = i32::try_from(fd).ok().filter(|fd| *fd >= 0)?;
    // SAFETY: a non-negative return of socket is a new descriptor that is ours.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn vsock_listen(fd: &OwnedFd) -> String {
    // SAFETY: sockaddr_vm is plain data; all zeroes is a valid value.
    let mut addr: libc::sockaddr_vm = unsafe { std::mem::zeroed() };
    addr.svm_family = libc::sa_family_t::try_from(libc::AF_VSOCK).unwrap_or(40);
    addr.svm_port = libc::VMADDR_PORT_ANY;
    addr.svm_cid = libc::VMADDR_CID_ANY;
    let len = std::mem::size_of_val(&addr);
    let fd = int(fd.as_raw_fd());
    if sys(libc::SYS_bind, &[fd, ptr(&raw const addr), int(len)]) != 0 {
        return format!("made, bind failed: {}", std::io::Error::last_os_error());
    }
    if sys(libc::SYS_listen, &[fd, int(1)]) != 0 {
        return format!("bound, listen failed: {}", std::io::Error::last_os_error());
    }
    "bound and listening".into()
}

/// TIOCSETD on a pseudo-terminal of the call's own devpts, setting the discipline it already has
/// (N_TTY, 0): a success proves line disciplines can be changed while changing nothing.
pub fn tiocsetd() -> i32 {
    let pty = match nix::pty::openpty(None, None) {
        Ok(p) => p,
        Err(e) => {
            println!("inconclusive openpty: {e}");
            return INCONCLUSIVE;
        }
    };
    let n_tty: libc::c_int = 0;
    let r = sys(
        libc::SYS_ioctl,
        &[
            int(pty.slave.as_raw_fd()),
            int(libc::TIOCSETD),
            ptr(&raw const n_tty),
        ],
    );
    raw_result(r, "ioctl(TIOCSETD, N_TTY)")
}

/// name_to_handle_at(AT_FDCWD, path, handle, &mount_id, 0): the handle that open_by_handle_at
/// would take, and which holds the file's inode and generation numbers.
pub fn name_to_handle(path: &str) -> i32 {
    // struct file_handle { u32 handle_bytes; i32 handle_type; u8 f_handle[] }, room for 128 bytes.
    let mut handle = [0u32; 2 + 32];
    handle[0] = 128;
    let mut mount_id: libc::c_int = 0;
    let p = cstr(path);
    let r = sys(
        libc::SYS_name_to_handle_at,
        &[
            int(libc::AT_FDCWD),
            ptr(p.as_ptr()),
            ptr(handle.as_mut_ptr()),
            ptr(&raw mut mount_id),
            int(0),
        ],
    );
    if r == -1 {
        let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        // A filesystem without handles answers EOPNOTSUPP whatever the filter says: that proves
        // nothing about the filter, so it is not reported as a refusal.
        if e == libc::EOPNOTSUPP {
            println!("inconclusive {path} has no file handles (EOPNOTSUPP)");
            return INCONCLUSIVE;
        }
        return refused(e);
    }
    succeeded(&format!(
        "{path}: handle type {} of {} bytes, mount {mount_id}",
        handle[1], handle[0]
    ))
}

/// personality(value): `value` in decimal or 0x hex. A success sets it for this process only,
/// which exits at once.
pub fn personality(value: &str) -> i32 {
    let Some(v) = number(value) else {
        return USAGE;
    };
    let r = sys(libc::SYS_personality, &[int(v)]);
    raw_result(r, &format!("personality({value})"))
}
