//! The three processes of a call, as they run after fork. Everything here is async-signal-safe
//! except the Landlock ruleset (see `prepare.rs` for why that is acceptable).
//!
//! 1. **setup** (forked by the host): new session, joins the cgroup, makes the user namespace and
//!    maps its own ids, then the other namespaces but the network's; forks the init; makes the
//!    call's network namespace (loopback up, the proxy listener) while the init builds the tree,
//!    and hands it over (`namespaces::NetHandoff`); hands the host a pidfd of the init; then waits
//!    for it, killing it if the host goes away (its lifeline pipe closes).
//! 2. **init** (pid 1 of the call's pid namespace): host name, the fresh root, joins the network
//!    namespace, rlimits, then gives up everything (capabilities, no_new_privs, Landlock, seccomp)
//!    and starts the command (`command.rs`). It reaps orphans and, when the command ends, reports
//!    its status and exits: the kernel then kills every process left in the namespace,
//!    double-forked or not.
//! 3. **command**: closes every descriptor but 0, 1, 2 at exec, enters the working directory and
//!    executes the program with the scrubbed environment.
//!
//! A call of a session sandbox (`zygote.rs`) runs the same functions from one step further in: its
//! setup process (`setup_with`, forked by the session init) stays in the session's user namespace
//! and makes only the call's own namespaces; its init makes its fresh mounts (`fresh.rs`) instead of
//! the whole tree, then runs `confine_and_run` as a per-call init does.

use std::os::fd::RawFd;

use crate::child::command;
use crate::child::namespaces::{self, JoinError, NetHandoff};
use crate::child::prepared::{CommandSpec, Prepared};
use crate::child::sys::{self, check, errno};
use crate::wire::error::Layer;
use crate::wire::report::{self, Kind, Record};
use crate::{child::caps, child::landlock_rules, child::limits, child::seccomp_rules};

/// Descriptors the setup process starts with (already open in the parent, close-on-exec).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ChildFds {
    pub chan: RawFd,
    pub status_w: RawFd,
    pub lifeline_r: RawFd,
    /// What becomes 0, 1 and 2 (`None`: keep the parent's).
    pub stdio: [Option<RawFd>; 3],
    /// The session's shared overlay (a detached mount) the init attaches a clone of.
    pub overlay: Option<RawFd>,
    /// The call's `cgroup.procs`, opened by the host (a call forked from a session init, whose
    /// mount namespace has no /sys): the setup process joins by writing to it.
    pub cgroup: Option<RawFd>,
    /// The session init's control socket (only while a session sandbox is made).
    pub control: Option<RawFd>,
    /// The read end of the call's gate (a call built before its decision is durable, ready.rs):
    /// the init, every layer on, starts the command only once the host writes one byte to it,
    /// and starts nothing if the host closes it instead.
    pub gate: Option<RawFd>,
    /// The call's network namespace as its setup process hands it to the init: set by the setup
    /// (`setup_with`) for a shape that makes one, never by whoever forks the setup.
    pub net: Option<NetHandoff>,
    /// A pidfd of the setup process, for its child: set by the setup (`setup_with`), never by
    /// whoever forks the setup. The child checks it once it has asked to die with its parent
    /// ([`init_lifetime`]), and joins the network namespace through it ([`join_network`]).
    pub setup: Option<RawFd>,
    /// The call's end of its channel to the host ([`crate::Plan::host_channel`]): the command
    /// gets it as descriptor [`crate::HOST_CHANNEL_FD`]; the setup and the init only carry it.
    pub host_channel: Option<RawFd>,
}

pub(crate) use crate::child::sys::fail;
pub(crate) use crate::wire::step;

pub(crate) fn reset_signals() -> Result<(), i32> {
    // SAFETY: sigset_t is plain data; sigemptyset initialises it.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointers; only this thread's mask and dispositions change.
    unsafe {
        libc::sigemptyset(&raw mut set);
        check(libc::sigprocmask(
            libc::SIG_SETMASK,
            &raw const set,
            std::ptr::null_mut(),
        ))?;
        for sig in 1..libc::SIGRTMAX() {
            if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                libc::signal(sig, libc::SIG_DFL);
            }
        }
    }
    Ok(())
}

fn install_stdio(fds: &ChildFds) -> Result<(), i32> {
    for (target, src) in fds.stdio.iter().enumerate() {
        let Some(src) = *src else { continue };
        let target = i32::try_from(target).unwrap_or(0);
        if src == target {
            // SAFETY: clears close-on-exec on a descriptor we own.
            check(unsafe { libc::fcntl(src, libc::F_SETFD, 0) })?;
        } else {
            // SAFETY: dup2 onto 0..2; the result is not close-on-exec.
            check(unsafe { libc::dup2(src, target) })?;
        }
    }
    Ok(())
}

/// Closes this process's 0, 1 and 2: a setup or init process, once its child holds its own
/// copies, writes nothing to them.
///
/// # Safety
/// Only in a process that never uses its standard streams again.
unsafe fn close_stdio() {
    for fd in 0..3 {
        // SAFETY: the caller's contract; closing a descriptor that is not open is harmless.
        unsafe { libc::close(fd) };
    }
}

/// What a setup process unshares after the user namespace, and what its child runs.
pub(crate) struct Shape<'a> {
    /// Make a user namespace and map the caller's ids (false: stay in the session's).
    pub user: bool,
    pub unshare: &'a [(libc::c_int, Layer)],
    /// Make the call's network namespace after the fork, beside the child, which joins it
    /// (`NetHandoff`; the child must call [`join_network`]).
    pub net: bool,
    /// Never returns (`Infallible`: `!` is not a stable type).
    pub child: &'a dyn Fn(&Prepared, ChildFds) -> std::convert::Infallible,
}

/// The setup process of a call made the per-call way. Never returns.
pub(crate) fn setup_main(p: &Prepared, fds: ChildFds) -> ! {
    setup_with(
        p,
        fds,
        &Shape {
            user: true,
            unshare: &namespaces::BEFORE_INIT,
            net: true,
            child: &|p, fds| init_main(p, &p.cmd, fds),
        },
    )
}

/// A setup process: stdio, descriptors, signals, session, cgroup, namespaces, then the child (the
/// call's init, or a session init), whose pidfd goes to the host; then supervises it. Never
/// returns.
pub(crate) fn setup_with(p: &Prepared, fds: ChildFds, shape: &Shape<'_>) -> ! {
    let chan = fds.chan;
    if let Err(e) = install_stdio(&fds) {
        fail(chan, Layer::Descriptors, step::STDIO, e);
    }
    // A cgroup handed over as a descriptor is joined first (it is closed with the rest).
    if let Some(fd) = fds.cgroup
        && let Err(e) = sys::write_all(fd, b"0")
    {
        let _ = report::send(chan, Record::new(Kind::CgroupNotJoined, 0, 0, e, 0), None);
    }
    // The shared overlay's and the control socket's descriptors (or -1, which closes nothing)
    // stay for the child.
    let mut keep = [
        0,
        1,
        2,
        fds.chan,
        fds.status_w,
        fds.lifeline_r,
        fds.overlay.unwrap_or(-1),
        fds.control.unwrap_or(-1),
        fds.gate.unwrap_or(-1),
        fds.host_channel.unwrap_or(-1),
    ];
    keep.sort_unstable();
    if let Err(e) = sys::close_all_except(&keep) {
        fail(chan, Layer::Descriptors, step::CLOSE, e);
    }
    if let Err(e) = reset_signals() {
        fail(chan, Layer::Lifetime, step::SIGNALS, e);
    }
    // SAFETY: setsid only changes this process's session.
    if unsafe { libc::setsid() } == -1 {
        fail(chan, Layer::Session, step::SETSID, errno());
    }
    if fds.cgroup.is_none()
        && let Some(procs) = &p.cgroup_procs
        && let Err(e) = sys::write_file(procs, b"0")
    {
        let _ = report::send(chan, Record::new(Kind::CgroupNotJoined, 0, 0, e, 0), None);
    }
    if shape.user {
        if let Err(e) = namespaces::unshare(libc::CLONE_NEWUSER) {
            fail(chan, Layer::UserNamespace, step::UNSHARE, e);
        }
        if let Err((s, e)) = namespaces::write_id_maps(&p.uid_map, &p.gid_map) {
            fail(chan, Layer::UserNamespace, s, e);
        }
    }
    for &(flag, layer) in shape.unshare {
        if let Err(e) = namespaces::unshare(flag) {
            fail(chan, layer, step::UNSHARE, e);
        }
    }
    // A pidfd of this process for the child: a parent-death signal asked for after its parent
    // died is never sent, so the child looks through it once it has asked (`init_lifetime`).
    // SAFETY: getpid cannot fail.
    let me = match sys::pidfd_open(unsafe { libc::getpid() }) {
        Ok(fd) => fd,
        Err(e) => fail(chan, Layer::Lifetime, step::PIDFD, e),
    };
    let net = if shape.net {
        match NetHandoff::open() {
            Ok(n) => Some(n),
            Err(e) => fail(chan, Layer::NetNamespace, step::NET_OPEN, e),
        }
    } else {
        None
    };
    // SAFETY: fork in a single-threaded process (this one).
    let init = unsafe { libc::fork() };
    if init < 0 {
        fail(chan, Layer::PidNamespace, step::FORK, errno());
    }
    if init == 0 {
        match (shape.child)(
            p,
            ChildFds {
                net,
                setup: Some(me),
                ..fds
            },
        ) {}
    }
    // SAFETY: the child holds its own copy.
    unsafe { libc::close(me) };
    if let Some(net) = net {
        // While the init builds its tree. A failure ends this process, and the init with it.
        let ready = net.setup_side();
        if let Err(e) = namespaces::unshare(libc::CLONE_NEWNET) {
            fail(chan, Layer::NetNamespace, step::UNSHARE, e);
        }
        network(p, chan);
        ready.tell();
    }
    // Our own unreaped child: the pid cannot have been reused.
    let pidfd = match sys::pidfd_open(init) {
        Ok(fd) => fd,
        Err(e) => {
            // SAFETY: kill our own child.
            unsafe { libc::kill(init, libc::SIGKILL) };
            fail(chan, Layer::Lifetime, step::PIDFD, e)
        }
    };
    let _ = report::send(
        chan,
        Record::new(Kind::InitPid, 0, 0, 0, i64::from(init)),
        Some(pidfd),
    );
    // SAFETY: closing our copies: the host now holds the pidfd, the child its own channel, the
    // overlay's and control socket's descriptors, and its own standard streams. The streams
    // matter: a process's descriptors left open at exit are released only after its namespaces
    // are torn down (a mount tree's teardown waits for RCU grace periods, about a millisecond),
    // so a host reading the command's output to its end would wait for that teardown too.
    unsafe {
        libc::close(chan);
        libc::close(fds.status_w);
        for fd in [fds.overlay, fds.control, fds.gate, fds.host_channel]
            .into_iter()
            .flatten()
        {
            libc::close(fd);
        }
        close_stdio();
    }
    crate::child::waiting::supervise(init, pidfd, fds.lifeline_r)
}

/// pid 1 of a call made the per-call way. Never returns.
fn init_main(p: &Prepared, cmd: &CommandSpec, fds: ChildFds) -> ! {
    let chan = fds.chan;
    init_lifetime(&fds);
    if let Err(e) = namespaces::set_hostname(c"chock") {
        fail(chan, Layer::UtsNamespace, step::HOSTNAME, e);
    }
    build_tree(p, chan);
    join_network(&fds);
    confine_and_run(p, cmd, fds)
}

/// Applies the tree's mount steps in order (a per-call init's, or the session init's whole tree);
/// the first that fails ends the process with its layer and step (an optional step whose source is
/// gone is skipped).
pub(crate) fn build_tree(p: &Prepared, chan: RawFd) {
    // Each directory and mount point the steps make gets exactly the mode its step names (the
    // workspace's upper root shows as the project root's own mode), whatever the host's umask;
    // the command is given the host's umask back.
    // SAFETY: umask only sets this process's file-creation mask; it cannot fail.
    let host_umask = unsafe { libc::umask(0) };
    for (i, s) in p.steps.iter().enumerate() {
        if let Err(e) = crate::child::mount_calls::apply(&s.op) {
            if s.optional && e == libc::ENOENT {
                continue;
            }
            fail(
                chan,
                s.layer,
                step::MOUNT_BASE + u32::try_from(i).unwrap_or(0),
                e,
            );
        }
    }
    // SAFETY: as above.
    unsafe { libc::umask(host_umask) };
}

/// The init's first step: the setup's lifeline is not the init's (it watches its parent through
/// PDEATHSIG instead), nor is its end of the network namespace's hand-off. The kernel sends the
/// parent-death signal only for a death after it was asked for, so a setup that died since the
/// fork (killed by the host, or by its own lifeline) is looked for through its pidfd: the init
/// then ends as the signal would have ended it.
pub(crate) fn init_lifetime(fds: &ChildFds) {
    // SAFETY: lifeline belongs to setup.
    unsafe { libc::close(fds.lifeline_r) };
    if let Some(net) = fds.net {
        net.init_side();
    }
    if let Err(e) = caps::die_with_parent() {
        fail(fds.chan, Layer::Lifetime, step::PDEATHSIG, e);
    }
    let Some(setup) = fds.setup else {
        fail(fds.chan, Layer::Lifetime, step::SETUP_GONE, libc::EINVAL)
    };
    // A pidfd is readable from its process's exit on; a poll that fails counts as readable.
    if crate::child::sys::poll_readable(setup, Some(std::time::Instant::now())) {
        fail(fds.chan, Layer::Lifetime, step::SETUP_GONE, libc::ESRCH);
    }
    if fds.net.is_none() {
        // SAFETY: the setup's pidfd, inherited; only the network's join uses it again.
        unsafe { libc::close(setup) };
    }
}

/// The init, its tree built and before it gives up its capabilities, joins the network namespace
/// its setup made. A call whose network namespace cannot be joined starts nothing, and so does
/// an init that was handed none (its shape did not make one).
pub(crate) fn join_network(fds: &ChildFds) {
    let chan = fds.chan;
    let (Some(net), Some(setup)) = (fds.net, fds.setup) else {
        fail(chan, Layer::NetNamespace, step::NET_OPEN, libc::EINVAL)
    };
    match net.join(setup) {
        Ok(()) => {}
        Err(JoinError::SetupEnded) => fail(chan, Layer::NetNamespace, step::NET_WAIT, libc::ESRCH),
        Err(JoinError::Setns(e)) => fail(chan, Layer::NetNamespace, step::NET_JOIN, e),
    }
}

/// Loopback up in the call's network namespace, and the proxy listener handed to the host (by
/// the setup process, once it made the namespace).
fn network(p: &Prepared, chan: RawFd) {
    if let Err(e) = namespaces::loopback_up() {
        fail(chan, Layer::Network, step::LOOPBACK, e);
    }
    if let Some(port) = p.proxy_port {
        match namespaces::proxy_listener(port) {
            Ok(fd) => {
                if let Err(e) =
                    report::send(chan, Record::new(Kind::ProxyListener, 0, 0, 0, 0), Some(fd))
                {
                    fail(chan, Layer::Network, step::PROXY, e);
                }
                // SAFETY: the host now holds the listener; close our copy.
                unsafe { libc::close(fd) };
            }
            Err(e) => fail(chan, Layer::Network, step::PROXY, e),
        }
    }
}

/// The init's last steps, once its root is built: rlimits, then it gives up everything
/// (capabilities, no_new_privs, Landlock, seccomp), forks the command and reaps. Never returns.
pub(crate) fn confine_and_run(p: &Prepared, cmd: &CommandSpec, fds: ChildFds) -> ! {
    let chan = fds.chan;
    if let Some(fd) = fds.overlay {
        // SAFETY: the init's inherited copy of the shared overlay's descriptor: the clone is
        // attached, and no descriptor of the host's reaches the command.
        unsafe { libc::close(fd) };
    }
    if let Err((s, e)) = limits::apply(&p.rlimits) {
        fail(chan, Layer::Rlimits, s, e);
    }
    if let Err(e) = caps::set_non_dumpable() {
        fail(chan, Layer::Lifetime, step::DUMPABLE, e);
    }
    if let Err((s, e)) = caps::drop_all() {
        fail(chan, Layer::Capabilities, s, e);
    }
    if let Err(e) = caps::set_no_new_privs() {
        fail(chan, Layer::NoNewPrivs, step::NNP, e);
    }
    if let Err((s, e)) = landlock_rules::apply(&p.landlock) {
        fail(chan, Layer::Landlock, s, e);
    }
    // The filter's listener goes to the host, which watches the kill rows' calls (see
    // seccomp_watch.rs); a listener that cannot be handed over fails the call.
    let listener = match seccomp_rules::install(&p.seccomp, true) {
        Ok(Some(fd)) => fd,
        Ok(None) => fail(chan, Layer::Seccomp, step::SECCOMP, libc::EINVAL),
        Err(e) => fail(chan, Layer::Seccomp, step::SECCOMP, e),
    };
    let sent = report::send(
        chan,
        Record::new(Kind::SeccompListener, 0, 0, 0, 0),
        Some(listener),
    );
    // SAFETY: the host holds the listener now (or the call fails below); close the init's copy.
    unsafe { libc::close(listener) };
    if let Err(e) = sent {
        fail(chan, Layer::Seccomp, step::SECCOMP, e);
    }
    if let Some(gate) = fds.gate {
        wait_at_gate(gate, chan);
    }
    let command = match command::spawn(cmd, chan, fds.host_channel) {
        Ok(pid) => pid,
        Err(e) => fail(chan, Layer::Lifetime, step::FORK, e),
    };
    // SAFETY: the command holds its own copies of the channel (until exec), of the host channel
    // and of the standard streams: the streams end when the command and what it started are
    // gone, not when pid 1 is; the host channel likewise.
    unsafe {
        libc::close(chan);
        if let Some(fd) = fds.host_channel {
            libc::close(fd);
        }
        close_stdio();
    }
    crate::child::waiting::reap(command, fds.status_w)
}

/// Waits, with every layer on, for the host's word that the call may start (one byte on the
/// gate); anything else (the host closed the gate: the call was refused or dropped, or the host
/// died) ends the init before the command exists, saying so on the channel.
fn wait_at_gate(gate: RawFd, chan: RawFd) {
    if !sys::read_byte(gate) {
        fail(chan, Layer::Lifetime, step::GATE, libc::ECANCELED);
    }
    // SAFETY: the gate is used once.
    unsafe { libc::close(gate) };
}
