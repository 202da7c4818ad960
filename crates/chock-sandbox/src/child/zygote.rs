//! The session init, as it runs (host side: `session_sandbox.rs`).
//!
//! Forked from the session's setup process (`init::setup_with` with [`SESSION_SHAPE`]: a user
//! namespace with the caller's ids, then mount, pid and uts namespaces), it is pid 1 of the
//! session's pid namespace: it sets the host name, builds the whole tree (`mounts.rs`, the same
//! steps and system calls as a per-call init), reports that it is ready and then waits on its
//! control socket. It never gives up its capabilities (it needs them to fork calls that build
//! their namespaces) and never runs anything but Chock's code: no command runs in its namespaces
//! outside a call's own pid, mount, ipc, network and cgroup namespaces, and every process of a
//! call is in a pid namespace below it that cannot see it.
//!
//! For each call it receives the command and the call's descriptors, and forks the call's setup
//! process (`init::setup_with` with [`CALL_SHAPE`]), whose child is the call's init: its fresh
//! mounts (`fresh.rs`), then the same confinement as a per-call init (`init::confine_and_run`).
//! It hands the host a pidfd of that setup process. Children are reaped by the kernel (SIGCHLD
//! ignored). When the host's end of the control socket closes, or the session's setup process
//! kills it (the host's lifeline), it exits and the kernel kills every process of its pid
//! namespace, every call's included.
//!
//! The session init allocates (it parses each message into a [`CommandSpec`]): it is a
//! single-threaded process, forked by `fork` from the host, whose allocator glibc and musl reset
//! in the child (see prepare.rs).

use std::ffi::CString;
use std::mem::MaybeUninit;
use std::os::fd::{IntoRawFd, RawFd};

use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};

use crate::child::init::{self, ChildFds, Shape, fail, step};
use crate::child::namespaces;
use crate::child::prepared::{CommandSpec, Prepared};
use crate::child::sys::exit_now;
use crate::wire::error::Layer;
use crate::wire::report::{self, Kind, Record};

/// The session's setup process: a user namespace, then the mount namespace that holds the tree,
/// the pid namespace the session init is pid 1 of, and the uts namespace (its host name is set
/// once; a call cannot change it, it holds no capability).
pub(crate) const SESSION_SHAPE: Shape<'static> = Shape {
    user: true,
    unshare: &[
        (libc::CLONE_NEWNS, Layer::MountNamespace),
        (libc::CLONE_NEWPID, Layer::PidNamespace),
        (libc::CLONE_NEWUTS, Layer::UtsNamespace),
    ],
    net: false,
    child: &|p, fds| main(p, fds),
};

/// A call's own namespaces, made by its setup process inside the session's user namespace: a
/// copy of the tree, its own pid namespace (its init is pid 1), and fresh ipc (no System V object
/// survives the call) and cgroup namespaces; and, after the fork, its network namespace (its own
/// loopback and proxy listener), which the init joins (`Shape::net`).
const CALL_NAMESPACES: [(libc::c_int, Layer); 4] = [
    (libc::CLONE_NEWNS, Layer::MountNamespace),
    (libc::CLONE_NEWPID, Layer::PidNamespace),
    (libc::CLONE_NEWIPC, Layer::IpcNamespace),
    (libc::CLONE_NEWCGROUP, Layer::CgroupNamespace),
];

/// The session init. Never returns.
fn main(p: &Prepared, fds: ChildFds) -> ! {
    let chan = fds.chan;
    init::init_lifetime(&fds);
    if let Err(e) = namespaces::set_hostname(c"chock") {
        fail(chan, Layer::UtsNamespace, step::HOSTNAME, e);
    }
    init::build_tree(p, chan);
    // SAFETY: ignoring SIGCHLD makes the kernel reap this process's children.
    unsafe { libc::signal(libc::SIGCHLD, libc::SIG_IGN) };
    if report::send(chan, Record::new(Kind::SessionReady, 0, 0, 0, 0), None).is_err() {
        exit_now(126);
    }
    // SAFETY: the report channel and status pipe of the session's making are done with.
    unsafe {
        libc::close(chan);
        libc::close(fds.status_w);
    }
    let Some(control) = fds.control else {
        exit_now(126)
    };
    let mut buf = vec![0u8; crate::wire::MAX_MESSAGE + 64];
    loop {
        let Some((len, received)) = receive(control, &mut buf) else {
            exit_now(0)
        };
        if let Some((cmd, call_fds)) = parse(&buf[..len], &received) {
            fork_call(p, &cmd, call_fds);
        }
        for fd in received {
            // SAFETY: the call's descriptors, received by this process; the call's setup process
            // holds its own copies.
            unsafe { libc::close(fd) };
        }
    }
}

/// Forks the call's setup process and hands the host a pidfd of it on the call's channel.
fn fork_call(p: &Prepared, cmd: &CommandSpec, fds: ChildFds) {
    let shape = Shape {
        user: false,
        unshare: &CALL_NAMESPACES,
        net: true,
        child: &|p, fds| call_init(p, cmd, fds),
    };
    // SAFETY: fork in a single-threaded process (this one).
    let setup = unsafe { libc::fork() };
    if setup == 0 {
        init::setup_with(p, fds, &shape);
    }
    if setup < 0 {
        let e = crate::child::sys::errno();
        let _ = report::send(
            fds.chan,
            Record::new(Kind::LayerFailed, Layer::Lifetime as u32, step::FORK, e, 0),
            None,
        );
        return;
    }
    // Our own child; SIGCHLD is ignored, so it is reaped at exit, and the pidfd keeps naming it
    // (or nothing).
    if let Ok(pidfd) = crate::child::sys::pidfd_open(setup) {
        let _ = report::send(
            fds.chan,
            Record::new(Kind::SetupPid, 0, 0, 0, i64::from(setup)),
            Some(pidfd),
        );
        // SAFETY: the host holds its copy now.
        unsafe { libc::close(pidfd) };
    }
}

/// pid 1 of a call in the session sandbox. Never returns.
fn call_init(p: &Prepared, cmd: &CommandSpec, fds: ChildFds) -> ! {
    let chan = fds.chan;
    init::init_lifetime(&fds);
    for (i, s) in p.fresh.iter().enumerate() {
        if let Err(e) = crate::child::fresh::apply(&s.op, fds.overlay) {
            if s.optional && e == libc::ENOENT {
                continue;
            }
            fail(
                chan,
                s.layer,
                step::FRESH_BASE + u32::try_from(i).unwrap_or(0),
                e,
            );
        }
    }
    init::join_network(&fds);
    init::confine_and_run(p, cmd, fds)
}

/// One message and its descriptors; `None` at end of file or on an error of the socket.
fn receive(control: RawFd, buf: &mut [u8]) -> Option<(usize, Vec<RawFd>)> {
    // SAFETY: the control socket stays open for the session init's life.
    let sock = unsafe { std::os::fd::BorrowedFd::borrow_raw(control) };
    let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(9))];
    loop {
        let mut anc = RecvAncillaryBuffer::new(&mut space);
        let mut iov = [std::io::IoSliceMut::new(buf)];
        match rustix::net::recvmsg(sock, &mut iov, &mut anc, RecvFlags::CMSG_CLOEXEC) {
            Ok(msg) if msg.bytes == 0 => return None,
            Ok(msg) => {
                let mut fds = Vec::new();
                for m in anc.drain() {
                    if let RecvAncillaryMessage::ScmRights(rights) = m {
                        fds.extend(rights.map(IntoRawFd::into_raw_fd));
                    }
                }
                return Some((msg.bytes, fds));
            }
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => return None,
        }
    }
}

/// The command and the call's descriptors from one message; `None` when it is malformed (the
/// caller closes the descriptors either way).
fn parse(bytes: &[u8], fds: &[RawFd]) -> Option<(CommandSpec, ChildFds)> {
    let word = |i: usize| {
        bytes
            .get(i * 4..i * 4 + 4)
            .and_then(|w| <[u8; 4]>::try_from(w).ok())
            .map(u32::from_ne_bytes)
    };
    let (flags, n_cand, n_argv, n_env) = (word(0)?, word(1)?, word(2)?, word(3)?);
    let mut strings = bytes
        .get(16..)?
        .split_inclusive(|b| *b == 0)
        .map(|s| CString::from_vec_with_nul(s.to_vec()).ok());
    let mut take =
        |n: u32| -> Option<Vec<CString>> { (0..n).map(|_| strings.next().flatten()).collect() };
    let candidates = take(n_cand)?;
    let argv = take(n_argv)?;
    let env = take(n_env)?;
    let cwd = take(1)?.pop()?;
    let overlay = flags & 1 != 0;
    let cgroup = flags & 2 != 0;
    let host_channel = flags & 4 != 0;
    let want = 6 + usize::from(overlay) + usize::from(cgroup) + usize::from(host_channel);
    if fds.len() != want {
        return None;
    }
    let call_fds = ChildFds {
        chan: fds[0],
        status_w: fds[1],
        lifeline_r: fds[2],
        stdio: [Some(fds[3]), Some(fds[4]), Some(fds[5])],
        overlay: overlay.then(|| fds[6]),
        cgroup: cgroup.then(|| fds[6 + usize::from(overlay)]),
        control: None,
        gate: None,
        net: None,
        setup: None,
        host_channel: host_channel.then(|| fds[want - 1]),
    };
    Some((
        CommandSpec::from_parts(candidates, argv, env, cwd),
        call_fds,
    ))
}
