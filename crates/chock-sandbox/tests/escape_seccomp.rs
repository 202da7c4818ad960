//! Escape suite, the system call filter: every call on the reviewed kill list, made for real by
//! chock-hostile inside the sandbox, must kill it and be named in the outcome; the calls refused by argument must
//! fail with the table's errno. This list is written independently of `seccomp_rules.rs` on
//! purpose: removing a row there makes a test here fail.

mod escape_support;

use escape_support::{Backing, Fixture, run};

/// The calls the filter kills (the host's watch kills the process and names the call), by
/// chock-hostile's act name.
const KILLED: &[&str] = &[
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "keyctl",
    "add_key",
    "request_key",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "mount",
    "umount2",
    "pivot_root",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "open_tree_attr",
    "setns",
    "open_by_handle_at",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "quotactl",
    "quotactl_fd",
];

/// The calls refused by argument, with the errno the table gives them.
const REFUSED_BY_ARGUMENT: &[(&str, &str)] = &[
    ("unshare-user", "EPERM"),
    ("clone-newuser", "EPERM"),
    ("clone3-newuser", "ENOSYS"),
    // Refused, not killed: runtimes (libuv in Node 22+) probe io_uring at start and fall back.
    ("io_uring_setup", "ENOSYS"),
    ("io_uring_enter", "ENOSYS"),
    ("io_uring_register", "ENOSYS"),
    ("ioctl-tiocsti", "EPERM"),
    ("ioctl-tioclinux", "EPERM"),
];

/// Attack: every call on the kill list. Layer: seccomp (kill: the call waits on the filter's
/// listener, never executed, and the host's watch kills the process and names the call in the
/// outcome). Without the filter each of these returns an errno or succeeds instead; without the
/// watch the process is killed by SIGSYS (or refused with ENOSYS) and nothing names the call.
#[test]
fn every_call_on_the_kill_list_is_killed_and_named() {
    let fx = Fixture::new(Backing::Overlay);
    let mut failures = Vec::new();
    for call in KILLED {
        let r = run(&fx.hostile_plan(&["syscall", call]));
        if r.status != chock_sandbox::ExitStatus::Signaled(libc::SIGKILL)
            || r.forbidden_call.as_deref() != Some(*call)
        {
            failures.push(format!(
                "{call}: {:?} {:?} {}",
                r.status,
                r.forbidden_call,
                r.stdout.trim()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "calls on the kill list that were not killed:\n{}",
        failures.join("\n")
    );
}

/// Attack: survive a call on the kill list: with a SIGSYS handler installed (the kernel's
/// SECCOMP_RET_TRAP would let it run and go on), or from a second thread (a kill of the thread
/// alone would leave the process running). Layer: seccomp (the call waits on the listener; the
/// host's watch kills the whole process with SIGKILL, which no handler catches).
#[test]
fn a_killed_call_cannot_be_survived() {
    let fx = Fixture::new(Backing::Overlay);
    for act in ["syscall-handled", "syscall-on-thread"] {
        for call in ["ptrace", "bpf", "keyctl"] {
            run(&fx.hostile_plan(&[act, call])).assert_killed_for(call);
        }
    }
}

/// Attack: the calls the filter refuses by argument. Layer: seccomp (errno by argument). Without
/// the filter: unshare and clone of a user namespace succeed, clone3 succeeds, and the terminal
/// ioctls on /dev/null answer ENOTTY.
#[test]
fn calls_refused_by_argument_get_the_tables_errno() {
    let fx = Fixture::new(Backing::Overlay);
    for (call, errno) in REFUSED_BY_ARGUMENT {
        run(&fx.hostile_plan(&["syscall", call]))
            .assert_refused(errno, &format!("seccomp: {call}"));
    }
}

/// Control: a harmless call goes through, so the kills above are the filter's and not a broken
/// hostile program.
#[test]
fn an_ordinary_call_is_allowed() {
    let fx = Fixture::new(Backing::Overlay);
    let r = run(&fx.hostile_plan(&["syscall", "getpid"]));
    assert!(r.stdout.starts_with("succeeded getpid returned"), "{r:?}");
}

/// Attack: reach the kernel through another system call table, where the filter's numbers mean
/// other calls: the x32 entry point (number | 0x4000_0000) and the i386 one (`int 0x80`). Layer:
/// seccomp (the x32 kill program; seccompiler's audit-architecture check). Without them getpid
/// answers (or ENOSYS where the kernel lacks x32).
#[cfg(target_arch = "x86_64")]
#[test]
fn other_system_call_tables_are_killed() {
    let fx = Fixture::new(Backing::Overlay);
    for call in ["x32-getpid", "int80-getpid"] {
        run(&fx.hostile_plan(&["syscall", call])).assert_killed_by_sigsys(call);
    }
}

/// Socket families the filter refuses, by chock-hostile's name, or by number: 46 is one past the
/// highest family Linux 6.x knows, 0x1_0000_0028 is AF_VSOCK with the upper half of the register
/// set (the kernel reads an `int`, so it must be refused as AF_VSOCK), 0xffffffff is -1.
const REFUSED_FAMILIES: &[&str] = &[
    "AF_VSOCK",
    "AF_ALG",
    "AF_PACKET",
    "AF_KEY",
    "AF_TIPC",
    "AF_RDS",
    "AF_XDP",
    "AF_BLUETOOTH",
    "AF_CAN",
    "AF_SMC",
    "AF_KCM",
    "AF_LLC",
    "AF_PPPOX",
    "AF_MCTP",
    "46",
    "0x100000028",
    "0xffffffff",
];

/// The families a tool call keeps (`seccomp_rules.rs` SOCKET_FAMILIES).
const ALLOWED_FAMILIES: &[(&str, i32)] = &[
    ("AF_UNIX", libc::AF_UNIX),
    ("AF_INET", libc::AF_INET),
    ("AF_INET6", libc::AF_INET6),
    ("AF_NETLINK", libc::AF_NETLINK),
];

/// Attack: open a socket of a family no tool call needs: AF_VSOCK (a channel to the hypervisor
/// that the network namespace does not confine: here, on a VM, it is made, bound and listens),
/// the kernel crypto API, raw packets, IPsec keys, TIPC, RDS, XDP, Bluetooth and the other rare
/// families, an unknown number, and AF_VSOCK hidden behind upper register bits. Layer: seccomp by
/// argument (EAFNOSUPPORT, as from a kernel built without the family). Without it AF_VSOCK and
/// AF_ALG are made here, the privileged families answer EPERM (no capability), the rest
/// EAFNOSUPPORT from the kernel itself.
#[test]
fn socket_families_a_call_has_no_use_for_are_refused() {
    let fx = Fixture::new(Backing::Overlay);
    let mut failures = Vec::new();
    for family in REFUSED_FAMILIES {
        let r = run(&fx.hostile_plan(&["socket", family]));
        if r.stdout.trim() != "refused EAFNOSUPPORT" {
            failures.push(format!("{family}: {:?} {}", r.status, r.stdout.trim()));
        }
    }
    assert!(
        failures.is_empty(),
        "families not refused with EAFNOSUPPORT (seccomp):\n{}",
        failures.join("\n")
    );
}

/// Attack: every family number from 0 to 63 but the four allowed ones, so that a family this
/// suite does not name (or one a later kernel adds) is refused too. Layer: seccomp by argument
/// (an allow list: EAFNOSUPPORT for every other number).
#[test]
fn every_other_family_number_is_refused() {
    let fx = Fixture::new(Backing::Overlay);
    let mut failures = Vec::new();
    for family in 0..64 {
        if ALLOWED_FAMILIES.iter().any(|(_, f)| *f == family) {
            continue;
        }
        let r = run(&fx.hostile_plan(&["socket", &family.to_string()]));
        if r.stdout.trim() != "refused EAFNOSUPPORT" {
            failures.push(format!("{family}: {:?} {}", r.status, r.stdout.trim()));
        }
    }
    assert!(
        failures.is_empty(),
        "family numbers not refused with EAFNOSUPPORT (seccomp):\n{}",
        failures.join("\n")
    );
}

/// Attack: the same families through `socketpair`, which creates a socket of the family (loading
/// its module) before it finds out the family has no pairs; AF_TIPC has pairs. Layer: seccomp by
/// argument (EAFNOSUPPORT). Without it AF_VSOCK and AF_ALG answer EOPNOTSUPP.
#[test]
fn socketpair_of_a_refused_family_is_refused() {
    let fx = Fixture::new(Backing::Overlay);
    for family in ["AF_VSOCK", "AF_ALG", "AF_TIPC", "AF_BLUETOOTH", "46"] {
        run(&fx.hostile_plan(&["socketpair", family]))
            .assert_refused("EAFNOSUPPORT", &format!("seccomp: socketpair({family})"));
    }
}

/// Attack: netlink protocols other than NETLINK_ROUTE: socket diagnostics, IPsec, audit,
/// netfilter, device events, generic netlink, RDMA, the crypto API's, an unknown number, and
/// NETLINK_AUDIT behind upper register bits. Layer: seccomp by argument (EPROTONOSUPPORT, as from
/// a kernel without the protocol). Without it most of them are made.
#[test]
fn netlink_protocols_other_than_route_are_refused() {
    let fx = Fixture::new(Backing::Overlay);
    for protocol in [
        "NETLINK_SOCK_DIAG",
        "NETLINK_XFRM",
        "NETLINK_AUDIT",
        "NETLINK_NETFILTER",
        "NETLINK_KOBJECT_UEVENT",
        "NETLINK_GENERIC",
        "NETLINK_RDMA",
        "NETLINK_CRYPTO",
        "31",
        "0x100000009",
    ] {
        run(&fx.hostile_plan(&["netlink", protocol])).assert_refused(
            "EPROTONOSUPPORT",
            &format!("seccomp: netlink protocol {protocol}"),
        );
    }
}

/// Control: what the rules above keep. Sockets of the four allowed families (NETLINK_ROUTE for
/// netlink), a unix socketpair, and glibc's `if_nameindex`, which asks through NETLINK_ROUTE,
/// still work inside a call.
#[test]
fn the_families_a_call_needs_still_work() {
    let fx = Fixture::new(Backing::Overlay);
    for (family, _) in ALLOWED_FAMILIES {
        let r = run(&fx.hostile_plan(&["socket", family]));
        assert!(
            r.stdout
                .starts_with(&format!("succeeded socket({family}) made")),
            "{family}: {r:?}"
        );
    }
    let r = run(&fx.hostile_plan(&["netlink", "NETLINK_ROUTE"]));
    assert!(r.stdout.starts_with("succeeded netlink"), "{r:?}");
    let r = run(&fx.hostile_plan(&["socketpair", "AF_UNIX"]));
    assert!(r.stdout.starts_with("succeeded socketpair"), "{r:?}");
    let r = run(&fx.hostile_plan(&["ifaces"]));
    assert_eq!(r.assert_reported().trim(), "lo");
}

/// Attack: attach a line discipline (TIOCSETD) to a pseudo-terminal of the call's own devpts,
/// which makes the kernel run that discipline's code on the terminal (n_gsm, n_hdlc: a history
/// of exploits). The act sets N_TTY, the one the terminal has. Layer: seccomp by argument
/// (EPERM). Without it the ioctl succeeds.
#[test]
fn a_line_discipline_cannot_be_attached() {
    let fx = Fixture::new(Backing::Overlay);
    run(&fx.hostile_plan(&["tiocsetd"])).assert_refused("EPERM", "seccomp: ioctl(TIOCSETD)");
}

/// Attack: ask for file handles (name_to_handle_at) of `/usr` (the host's filesystem, bound
/// read-only), of the workspace and of `/tmp`: a handle carries the inode and generation numbers
/// that open_by_handle_at (killed, on the kill list above) would take. Layer: seccomp (EPERM,
/// which programs that probe handles treat as "not available"). Without it each handle is given.
#[test]
fn file_handles_are_not_handed_out() {
    let fx = Fixture::new(Backing::Overlay);
    let project = fx.project.to_string_lossy().into_owned();
    for path in ["/usr", &project, "/tmp"] {
        run(&fx.hostile_plan(&["name-to-handle", path]))
            .assert_refused("EPERM", &format!("seccomp: name_to_handle_at({path})"));
    }
}

/// Attack: set execution domains ordinary programs never set: READ_IMPLIES_EXEC (every readable
/// mapping executable), ADDR_NO_RANDOMIZE, MMAP_PAGE_ZERO, ADDR_COMPAT_LAYOUT, the address-limit
/// flags, foreign domains (PER_BSD, PER_SVR4), and READ_IMPLIES_EXEC behind upper register bits.
/// Layer: seccomp by argument (EPERM). Without it each is set. The ordinary values (Docker's
/// list) and the query (0xffffffff) must still work.
#[test]
fn only_ordinary_personalities_can_be_set() {
    let fx = Fixture::new(Backing::Overlay);
    for value in [
        "0x400000",
        "0x40000",
        "0x100000",
        "0x200000",
        "0x800000",
        "0x8000000",
        "0x6",
        "0x4100001",
        "0x100400000",
    ] {
        run(&fx.hostile_plan(&["personality", value]))
            .assert_refused("EPERM", &format!("seccomp: personality({value})"));
    }
    for value in ["0xffffffff", "0x0", "0x8", "0x20000", "0x20008"] {
        let r = run(&fx.hostile_plan(&["personality", value]));
        assert!(
            r.stdout
                .starts_with(&format!("succeeded personality({value})")),
            "personality({value}) must stay allowed: {r:?}"
        );
    }
}
