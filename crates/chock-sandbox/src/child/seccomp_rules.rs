//! The system call filter, kept as reviewed data.
//!
//! [`RULES`] is the whole policy: one row per system call and answer, with its number on each
//! architecture we build for (x86_64 and aarch64, checked against libc on the host in tests), what
//! happens when it is called, and why. The filter is a deny list on top of the other layers:
//! namespaces, Landlock and dropped capabilities already refuse most of these calls; the filter
//! removes the kernel code behind them from what a tool call can reach at all (a bug in `io_uring`
//! or `bpf` is then not reachable), and turns a refusal into a kill where nothing legitimate could
//! want the call.
//!
//! Rows are compiled with seccompiler into one BPF program per action (kill, EPERM, ENOSYS,
//! EAFNOSUPPORT, EPROTONOSUPPORT); the kernel runs every installed program and the strictest answer
//! wins, so the programs compose. A call may have a row in more than one program only when the rows
//! match disjoint arguments (`socket`: a refused family, or AF_NETLINK with a refused protocol).
//! One more, hand-written program kills any x32 system call on x86_64 (numbers with bit 30 set),
//! which would otherwise reach the same kernel functions under numbers this table does not list.
//! The compiling and installing is in `seccomp_rules/program.rs`; this file is the data.

mod program;

pub use program::{compile, install};

/// The name of the kill row whose number on `arch` is `nr`: what a killed process called.
pub fn killed_call(arch: Arch, nr: i64) -> Option<&'static str> {
    RULES
        .iter()
        .find(|r| r.action == RuleAction::Kill && r.number(arch) == nr)
        .map(|r| r.name)
}

/// What the kernel does when a row matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RuleAction {
    /// The process is killed, and the call's report names the call: nothing a build or test
    /// legitimately does needs it, and no common runtime probes it at start (a probed call is
    /// refused instead, as io_uring is). Made with SECCOMP_RET_USER_NOTIF: the call waits,
    /// never executed, while the host's watcher (`seccomp_watch.rs`) records its name and kills
    /// the process with SIGKILL. Were the watcher gone, the kernel would answer ENOSYS: the
    /// call's kernel code is unreachable either way.
    Kill,
    /// Fail with EPERM: the call has legitimate uses with other arguments, or programs probe it and
    /// handle the refusal.
    Eperm,
    /// Fail with ENOSYS: makes libc fall back to an older call whose arguments the filter can see.
    Enosys,
    /// Fail with EAFNOSUPPORT: what the kernel answers for a socket family it was built without, so
    /// programs that probe a family (or try IPv6, then IPv4) fall back as they would there.
    Eafnosupport,
    /// Fail with EPROTONOSUPPORT: what the kernel answers for a protocol of a family it lacks
    /// (a netlink protocol whose module is not there).
    Eprotonosupport,
}

impl RuleAction {
    /// Every action, in the order their programs are installed.
    pub const ALL: [RuleAction; 5] = [
        RuleAction::Kill,
        RuleAction::Eperm,
        RuleAction::Enosys,
        RuleAction::Eafnosupport,
        RuleAction::Eprotonosupport,
    ];

    /// How `chock doctor` and the docs name it.
    pub fn name(self) -> &'static str {
        match self {
            RuleAction::Kill => "kill",
            RuleAction::Eperm => "EPERM",
            RuleAction::Enosys => "ENOSYS",
            RuleAction::Eafnosupport => "EAFNOSUPPORT",
            RuleAction::Eprotonosupport => "EPROTONOSUPPORT",
        }
    }
}

/// Which invocations of the call match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgMatch {
    /// Every invocation.
    Any,
    /// Argument `arg` (64-bit) has any of these flag bits set.
    AnyFlag {
        /// Which argument (0-based).
        arg: u8,
        /// The flag bits (name, value): any of them set matches.
        flags: &'static [(&'static str, u64)],
    },
    /// Argument `arg` compared as 32 bits (the kernel truncates it to an `unsigned int`, so upper
    /// bits cannot be used to slip past) equals one of these values.
    Equals32 {
        /// Which argument (0-based).
        arg: u8,
        /// The values (name, value) that match.
        values: &'static [(&'static str, u64)],
    },
    /// Argument `arg` compared as 32 bits is none of these values: an allow list, every other value
    /// matches (and gets the row's answer).
    NoneOf32 {
        /// Which argument (0-based).
        arg: u8,
        /// The values (name, value) left alone; every other value matches.
        allowed: &'static [(&'static str, u64)],
    },
    /// Argument `arg` (32 bits) equals `value` and argument `then_arg` (32 bits) is none of
    /// `allowed`: one allowed value of `arg` narrowed further by another argument.
    EqualsThenNoneOf32 {
        /// The first argument compared (0-based).
        arg: u8,
        /// The value (name, value) of `arg` the row narrows.
        value: (&'static str, u64),
        /// The second argument compared (0-based).
        then_arg: u8,
        /// The values (name, value) of `then_arg` left alone; every other value matches.
        allowed: &'static [(&'static str, u64)],
    },
}

/// One reviewed row of the filter.
#[derive(Debug, Clone, Copy)]
pub struct SyscallRule {
    /// The system call's name, as in the kernel's table.
    pub name: &'static str,
    /// Its number on x86_64.
    pub x86_64: i64,
    /// Its number on aarch64.
    pub aarch64: i64,
    /// What happens when the row matches.
    pub action: RuleAction,
    /// Which invocations the row matches.
    pub args: ArgMatch,
    /// Why the row is there: the review of the call, in words.
    pub why: &'static str,
}

/// Namespace flags of clone/unshare (linux/sched.h). A tool call must not make namespaces: a new
/// user namespace would hand it a fresh set of capabilities over objects it creates, the door to
/// most unprivileged kernel exploits.
const NAMESPACE_FLAGS: &[(&str, u64)] = &[
    ("CLONE_NEWNS", 0x0002_0000),
    ("CLONE_NEWCGROUP", 0x0200_0000),
    ("CLONE_NEWUTS", 0x0400_0000),
    ("CLONE_NEWIPC", 0x0800_0000),
    ("CLONE_NEWUSER", 0x1000_0000),
    ("CLONE_NEWPID", 0x2000_0000),
    ("CLONE_NEWNET", 0x4000_0000),
    ("CLONE_NEWTIME", 0x0000_0080),
];

/// Terminal ioctls a tool call must not make (asm-generic/ioctls.h, the same on both arches).
/// TIOCSTI types into a terminal's input queue, TIOCLINUX reaches the console, and TIOCSETD
/// attaches a line discipline to a terminal (the call's own pseudo-terminals included): that runs
/// the discipline's kernel code on every byte (n_gsm, n_hdlc and others have a history of
/// exploitable bugs) and, where `dev.tty.ldisc_autoload` is on, loads its module. Nothing a build or
/// test does changes a line discipline; reading it (TIOCGETD) stays allowed.
const TERMINAL_IOCTLS: &[(&str, u64)] = &[
    ("TIOCSTI", 0x5412),
    ("TIOCLINUX", 0x541C),
    ("TIOCSETD", 0x5423),
];

/// The socket families a tool call may create with `socket` and `socketpair` (linux/socket.h, the
/// same on every architecture); every other family gets EAFNOSUPPORT, as from a kernel built
/// without it. AF_UNIX, AF_INET and AF_INET6 are what programs talk with: among their own
/// processes, on the call's loopback, and to the broker's proxy (Landlock and the empty network
/// namespace decide where an inet socket can reach). AF_NETLINK is allowed for NETLINK_ROUTE only
/// (see NETLINK_PROTOCOLS): glibc's `if_nameindex`, `getifaddrs` and `getaddrinfo` with
/// AI_ADDRCONFIG, libuv's `uv_interface_addresses` (Node's `os.networkInterfaces()`, which dev
/// servers call at start), Go's `net.Interfaces` and `ip` all open one; `getifaddrs` has no
/// fallback, so refusing it fails those programs. It reads the call's own network namespace (only
/// `lo`) and changes nothing without CAP_NET_ADMIN, which no call holds.
///
/// Refused, among others: AF_VSOCK (a channel to the hypervisor or its guests that the network
/// namespace does not confine: no decision, log entry or address check would see it), AF_ALG (the
/// kernel's crypto API, a frequent source of bugs), AF_PACKET and AF_XDP (raw frames; they need
/// CAP_NET_RAW, which no call holds, but the family code is reached first), AF_KEY (IPsec keys),
/// AF_TIPC, AF_RDS, AF_BLUETOOTH, AF_CAN, AF_SMC and the other rarely used families, whose modules
/// the kernel loads on a first `socket()` when it has modules; and any number it does not know.
const SOCKET_FAMILIES: &[(&str, u64)] = &[
    ("AF_UNIX", 1),
    ("AF_INET", 2),
    ("AF_INET6", 10),
    ("AF_NETLINK", 16),
];

/// AF_NETLINK's number, the family SOCKET_FAMILIES allows only with NETLINK_PROTOCOLS.
const AF_NETLINK: (&str, u64) = ("AF_NETLINK", 16);

/// The netlink protocols a tool call may open (linux/netlink.h): NETLINK_ROUTE, for the programs
/// SOCKET_FAMILIES names. Every other protocol gets EPROTONOSUPPORT, as from a kernel without it:
/// NETLINK_SOCK_DIAG (`ss`), NETLINK_AUDIT (libaudit treats the refusal as "no audit"),
/// NETLINK_KOBJECT_UEVENT (device events), NETLINK_GENERIC (dozens of subsystems' families),
/// NETLINK_NETFILTER, NETLINK_XFRM, NETLINK_CRYPTO, NETLINK_RDMA and the rest are kernel code a
/// tool call has no use for, and an unknown protocol makes the kernel try to load its module.
const NETLINK_PROTOCOLS: &[(&str, u64)] = &[("NETLINK_ROUTE", 0)];

/// The execution domains `personality` may set (linux/personality.h), the same list as Docker's
/// default seccomp profile: PER_LINUX, PER_LINUX32 (`linux32`, `setarch i686`), UNAME26 (`uname -r`
/// answers 2.6.x, for old build scripts), both together, and 0xffffffff, which only queries. Every
/// other value gets EPERM: READ_IMPLIES_EXEC makes every readable mapping executable,
/// MMAP_PAGE_ZERO maps page zero at exec, ADDR_NO_RANDOMIZE and ADDR_COMPAT_LAYOUT turn address
/// randomisation off for what the call executes, and the non-Linux domains reach old emulation code.
/// The cost: `setarch -R` and a debugger's "disable randomisation" fail (ptrace is killed anyway).
const ORDINARY_PERSONALITIES: &[(&str, u64)] = &[
    ("PER_LINUX", 0x0000),
    ("PER_LINUX32", 0x0008),
    ("UNAME26", 0x0002_0000),
    ("PER_LINUX32 | UNAME26", 0x0002_0008),
    ("query (0xffffffff)", 0xffff_ffff),
];

/// The set-id bits of a file mode (sys/stat.h). As root, the call's uid 0 is the host's root, so a
/// file it leaves with S_ISUID in the workspace (the overlay's upper directory or the session's
/// copy, both on the host's filesystem, where the sandbox's `nosuid` does not follow them) is a
/// set-uid-root program on the host. For another user the bit is harmless but refused alike: one
/// table for everyone, and an apply never carries such bits either.
const SET_ID_BITS: &[(&str, u64)] = &[("S_ISUID", 0o4000), ("S_ISGID", 0o2000)];

/// The number of a call an architecture does not have (aarch64 has only the `*at` forms of
/// `open`, `creat`, `chmod`, `mknod`). Such a row is left out of that architecture's filter.
pub const NOT_ON_ARCH: i64 = -1;

/// A row refusing (EPERM) a call whose mode argument `arg` carries a set-id bit.
const fn set_id(
    name: &'static str,
    x86_64: i64,
    aarch64: i64,
    arg: u8,
    why: &'static str,
) -> SyscallRule {
    SyscallRule {
        name,
        x86_64,
        aarch64,
        action: RuleAction::Eperm,
        args: ArgMatch::AnyFlag {
            arg,
            flags: SET_ID_BITS,
        },
        why,
    }
}

/// The two rows of a call that makes sockets (`socket`, `socketpair`: the family is argument 0,
/// the protocol argument 2): a family outside SOCKET_FAMILIES, and AF_NETLINK with a protocol
/// outside NETLINK_PROTOCOLS. The kernel creates a socket of the family (loading its module)
/// before `socketpair` finds out the family has no pairs, so both calls need both rows.
const fn socket_rows(name: &'static str, x86_64: i64, aarch64: i64) -> [SyscallRule; 2] {
    [
        SyscallRule {
            name,
            x86_64,
            aarch64,
            action: RuleAction::Eafnosupport,
            args: ArgMatch::NoneOf32 {
                arg: 0,
                allowed: SOCKET_FAMILIES,
            },
            why: "a socket family outside SOCKET_FAMILIES: AF_VSOCK reaches the hypervisor \
                  around the network namespace; the rest are kernel code with no use to a call",
        },
        SyscallRule {
            name,
            x86_64,
            aarch64,
            action: RuleAction::Eprotonosupport,
            args: ArgMatch::EqualsThenNoneOf32 {
                arg: 0,
                value: AF_NETLINK,
                then_arg: 2,
                allowed: NETLINK_PROTOCOLS,
            },
            why: "a netlink protocol other than NETLINK_ROUTE (see NETLINK_PROTOCOLS)",
        },
    ]
}

const SOCKET: [SyscallRule; 2] = socket_rows("socket", 41, 198);
const SOCKETPAIR: [SyscallRule; 2] = socket_rows("socketpair", 53, 199);

const fn kill(name: &'static str, x86_64: i64, aarch64: i64, why: &'static str) -> SyscallRule {
    SyscallRule {
        name,
        x86_64,
        aarch64,
        action: RuleAction::Kill,
        args: ArgMatch::Any,
        why,
    }
}

/// A row refusing every invocation of a call with ENOSYS, as a kernel without it would.
const fn enosys(name: &'static str, x86_64: i64, aarch64: i64, why: &'static str) -> SyscallRule {
    SyscallRule {
        name,
        x86_64,
        aarch64,
        action: RuleAction::Enosys,
        args: ArgMatch::Any,
        why,
    }
}

/// The filter. Numbers: x86_64 from arch/x86/entry/syscalls/syscall_64.tbl, aarch64 from
/// include/uapi/asm-generic/unistd.h (numbers from 403 up are shared by every architecture).
pub const RULES: &[SyscallRule] = &[
    kill(
        "ptrace",
        101,
        117,
        "reads and writes other processes' memory and registers",
    ),
    kill(
        "process_vm_readv",
        310,
        270,
        "reads another process's memory without ptrace",
    ),
    kill(
        "process_vm_writev",
        311,
        271,
        "writes another process's memory without ptrace",
    ),
    kill(
        "bpf",
        321,
        280,
        "loads programs into the kernel; a large, often-exploited surface",
    ),
    kill(
        "perf_event_open",
        298,
        241,
        "kernel and hardware counters: side channels and a history of bugs",
    ),
    kill(
        "userfaultfd",
        323,
        282,
        "lets a process stall the kernel mid-copy, the classic race-widening tool",
    ),
    // io_uring: refused, not killed. libuv (Node 22 and later, and every MCP server on it) and
    // other runtimes probe io_uring_setup at start and fall back to epoll when it fails; a kill
    // took the whole process down with an empty stderr. ENOSYS is what a kernel built without
    // io_uring answers, so every caller already handles it; the kernel code stays unreachable.
    enosys(
        "io_uring_setup",
        425,
        425,
        "io_uring bypasses the per-call filter and has a long exploit history; ENOSYS, not a \
         kill: libuv (Node 22+) probes it at start and falls back to epoll",
    ),
    enosys("io_uring_enter", 426, 426, "io_uring (see io_uring_setup)"),
    enosys(
        "io_uring_register",
        427,
        427,
        "io_uring (see io_uring_setup)",
    ),
    kill(
        "keyctl",
        250,
        219,
        "kernel keyrings are not namespaced: a tool could read or plant keys",
    ),
    kill("add_key", 248, 217, "kernel keyrings (see keyctl)"),
    kill("request_key", 249, 218, "kernel keyrings (see keyctl)"),
    kill("kexec_load", 246, 104, "replaces the running kernel"),
    kill("kexec_file_load", 320, 294, "replaces the running kernel"),
    kill("init_module", 175, 105, "loads kernel code"),
    kill("finit_module", 313, 273, "loads kernel code"),
    kill("delete_module", 176, 106, "unloads kernel code"),
    kill(
        "mount",
        165,
        40,
        "the sandbox's mounts are final; a new mount could uncover or shadow paths",
    ),
    kill(
        "umount2",
        166,
        39,
        "unmounting would uncover what a sandbox mount hides (the policy file bind)",
    ),
    kill("pivot_root", 155, 41, "changes the root the sandbox built"),
    kill(
        "open_tree",
        428,
        428,
        "new mount API: clones mounts (see mount)",
    ),
    kill(
        "move_mount",
        429,
        429,
        "new mount API: attaches mounts (see mount)",
    ),
    kill(
        "fsopen",
        430,
        430,
        "new mount API: creates filesystems (see mount)",
    ),
    kill("fsconfig", 431, 431, "new mount API (see mount)"),
    kill("fsmount", 432, 432, "new mount API (see mount)"),
    kill(
        "fspick",
        433,
        433,
        "new mount API: reconfigures mounted filesystems (see mount)",
    ),
    kill(
        "mount_setattr",
        442,
        442,
        "new mount API: would clear the read-only flag of a bind",
    ),
    kill(
        "open_tree_attr",
        467,
        467,
        "new mount API (Linux 6.15): clones mounts with new attributes",
    ),
    kill(
        "setns",
        308,
        268,
        "joins other namespaces through a descriptor",
    ),
    kill(
        "open_by_handle_at",
        304,
        265,
        "opens files by handle, bypassing path checks (the 'shocker' escape)",
    ),
    kill("reboot", 169, 142, "reboots or halts the machine"),
    kill("swapon", 167, 224, "changes the machine's swap"),
    kill("swapoff", 168, 225, "changes the machine's swap"),
    kill(
        "acct",
        163,
        89,
        "process accounting writes to a file of the caller's choosing, machine-wide",
    ),
    kill("quotactl", 179, 60, "filesystem quotas are machine-wide"),
    kill("quotactl_fd", 443, 443, "filesystem quotas (see quotactl)"),
    SyscallRule {
        name: "unshare",
        x86_64: 272,
        aarch64: 97,
        action: RuleAction::Eperm,
        args: ArgMatch::AnyFlag {
            arg: 0,
            flags: NAMESPACE_FLAGS,
        },
        why: "new namespaces (see NAMESPACE_FLAGS); unshare of files or fs state stays allowed",
    },
    SyscallRule {
        name: "clone",
        x86_64: 56,
        aarch64: 220,
        action: RuleAction::Eperm,
        args: ArgMatch::AnyFlag {
            arg: 0,
            flags: NAMESPACE_FLAGS,
        },
        why: "new namespaces at fork; clone for processes and threads stays allowed",
    },
    SyscallRule {
        name: "clone3",
        x86_64: 435,
        aarch64: 435,
        action: RuleAction::Enosys,
        args: ArgMatch::Any,
        why: "its flags sit in memory the filter cannot read; ENOSYS makes libc fall back to clone",
    },
    SyscallRule {
        name: "ioctl",
        x86_64: 16,
        aarch64: 29,
        action: RuleAction::Eperm,
        args: ArgMatch::Equals32 {
            arg: 1,
            values: TERMINAL_IOCTLS,
        },
        why: "TIOCSTI types into a terminal's input queue, TIOCLINUX reaches the console, \
              TIOCSETD attaches a line discipline (see TERMINAL_IOCTLS)",
    },
    SOCKET[0],
    SOCKET[1],
    SOCKETPAIR[0],
    SOCKETPAIR[1],
    SyscallRule {
        name: "personality",
        x86_64: 135,
        aarch64: 92,
        action: RuleAction::Eperm,
        args: ArgMatch::NoneOf32 {
            arg: 0,
            allowed: ORDINARY_PERSONALITIES,
        },
        why: "an execution domain outside ORDINARY_PERSONALITIES: READ_IMPLIES_EXEC, \
              ADDR_NO_RANDOMIZE and the like weaken what the call executes next",
    },
    SyscallRule {
        name: "name_to_handle_at",
        x86_64: 303,
        aarch64: 264,
        action: RuleAction::Eperm,
        args: ArgMatch::Any,
        why: "hands out file handles (inode and generation numbers of host filesystems, the \
              input of open_by_handle_at); EPERM, not a kill: systemd-style mount-point checks \
              probe it and fall back on EPERM, as inside containers",
    },
    // Set-id bits (see SET_ID_BITS): every call that sets a file's mode, refused by its mode
    // argument only, so ordinary modes (0644, 0755, sticky directories) stay allowed.
    set_id(
        "chmod",
        90,
        NOT_ON_ARCH,
        1,
        "chmod(path, mode): a set-id mode on a file the call owns",
    ),
    set_id(
        "fchmod",
        91,
        52,
        1,
        "fchmod(fd, mode): the same through a descriptor (cp -p, install)",
    ),
    set_id(
        "fchmodat",
        268,
        53,
        2,
        "fchmodat(dirfd, path, mode): what glibc's chmod uses",
    ),
    set_id(
        "fchmodat2",
        452,
        452,
        2,
        "fchmodat2(dirfd, path, mode, flags) (Linux 6.6): the same with flags",
    ),
    set_id(
        "open",
        2,
        NOT_ON_ARCH,
        2,
        "open(path, flags, mode): a new file created with set-id bits needs no chmod; libc \
         passes mode 0 when it does not create",
    ),
    set_id(
        "openat",
        257,
        56,
        3,
        "openat(dirfd, path, flags, mode): as open",
    ),
    set_id("creat", 85, NOT_ON_ARCH, 1, "creat(path, mode): as open"),
    set_id(
        "mknod",
        133,
        NOT_ON_ARCH,
        1,
        "mknod(path, mode, dev): makes a regular file with the given mode too",
    ),
    set_id(
        "mknodat",
        259,
        33,
        2,
        "mknodat(dirfd, path, mode, dev): as mknod",
    ),
    SyscallRule {
        name: "openat2",
        x86_64: 437,
        aarch64: 437,
        action: RuleAction::Enosys,
        args: ArgMatch::Any,
        why: "its mode sits in a struct the filter cannot read (set-id bits, see SET_ID_BITS); \
              ENOSYS makes libc and careful programs fall back to openat",
    },
];

/// The architectures the table covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    /// 64-bit x86 (`x86_64`).
    X86_64,
    /// 64-bit Arm (`aarch64`).
    Aarch64,
}

impl Arch {
    /// The architecture this binary runs on, if the table covers it.
    pub fn current() -> Option<Arch> {
        match std::env::consts::ARCH {
            "x86_64" => Some(Arch::X86_64),
            "aarch64" => Some(Arch::Aarch64),
            _ => None,
        }
    }
}

impl SyscallRule {
    /// This call's number on `arch`.
    pub fn number(&self, arch: Arch) -> i64 {
        match arch {
            Arch::X86_64 => self.x86_64,
            Arch::Aarch64 => self.aarch64,
        }
    }
}

/// What the table holds on `arch`: `N rules: A kill, B EPERM, …` (rows left out on that
/// architecture not counted), as `chock doctor` prints it.
pub fn summary(arch: Arch) -> String {
    let rows = RULES.iter().filter(|r| r.number(arch) != NOT_ON_ARCH);
    let per_action: Vec<String> = RuleAction::ALL
        .iter()
        .map(|a| (a, rows.clone().filter(|r| r.action == *a).count()))
        .filter(|(_, n)| *n > 0)
        .map(|(a, n)| format!("{n} {}", a.name()))
        .collect();
    format!("{} rules: {}", rows.count(), per_action.join(", "))
}

#[cfg(test)]
mod tests;
