//! The system call filter, kept as reviewed data.
//!
//! [`RULES`] is the whole policy: one row per system call, with its number on each architecture we
//! build for (x86_64 and aarch64, checked against libc on the host in tests), what happens when it
//! is called, and why. The filter is a deny list on top of the other layers: namespaces, Landlock
//! and dropped capabilities already refuse most of these calls; the filter removes the kernel code
//! behind them from what a tool call can reach at all (a bug in `io_uring` or `bpf` is then not
//! reachable), and turns a refusal into a kill where nothing legitimate could want the call.
//!
//! Rows are compiled with seccompiler into one BPF program per action (kill, EPERM, ENOSYS); the
//! kernel runs every installed program and the strictest answer wins, so the programs compose.
//! A fourth, hand-written program kills any x32 system call on x86_64 (numbers with bit 30 set),
//! which would otherwise reach the same kernel functions under numbers this table does not list.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch, sock_filter,
};

/// What the kernel does when a row matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleAction {
    /// SECCOMP_RET_KILL_PROCESS: nothing a build or test legitimately does needs this call.
    Kill,
    /// Fail with EPERM: the call has legitimate uses with other arguments, or programs probe it and
    /// handle the refusal.
    Eperm,
    /// Fail with ENOSYS: makes libc fall back to an older call whose arguments the filter can see.
    Enosys,
}

/// Which invocations of the call match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgMatch {
    /// Every invocation.
    Any,
    /// Argument `arg` (64-bit) has any of these flag bits set.
    AnyFlag {
        arg: u8,
        flags: &'static [(&'static str, u64)],
    },
    /// Argument `arg` compared as 32 bits (the kernel truncates it to an `unsigned int`, so upper
    /// bits cannot be used to slip past) equals one of these values.
    Equals32 {
        arg: u8,
        values: &'static [(&'static str, u64)],
    },
}

/// One reviewed row of the filter.
#[derive(Debug, Clone, Copy)]
pub struct SyscallRule {
    pub name: &'static str,
    pub x86_64: i64,
    pub aarch64: i64,
    pub action: RuleAction,
    pub args: ArgMatch,
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

/// Terminal ioctls that inject input or reach the console (asm-generic/ioctls.h, same on both arches).
const TERMINAL_INJECTION: &[(&str, u64)] = &[("TIOCSTI", 0x5412), ("TIOCLINUX", 0x541C)];

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
    kill(
        "io_uring_setup",
        425,
        425,
        "io_uring bypasses the per-call filter and has a long exploit history",
    ),
    kill("io_uring_enter", 426, 426, "io_uring (see io_uring_setup)"),
    kill(
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
            values: TERMINAL_INJECTION,
        },
        why: "TIOCSTI types into a terminal's input queue; TIOCLINUX reaches the console",
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
    X86_64,
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

    fn target(self) -> TargetArch {
        match self {
            Arch::X86_64 => TargetArch::x86_64,
            Arch::Aarch64 => TargetArch::aarch64,
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

    fn seccomp_rules(&self) -> Result<Vec<SeccompRule>, seccompiler::BackendError> {
        match self.args {
            ArgMatch::Any => Ok(Vec::new()),
            ArgMatch::AnyFlag { arg, flags } => flags
                .iter()
                .map(|(_, bit)| {
                    let cond = SeccompCondition::new(
                        arg,
                        SeccompCmpArgLen::Qword,
                        SeccompCmpOp::MaskedEq(*bit),
                        *bit,
                    )?;
                    SeccompRule::new(vec![cond])
                })
                .collect(),
            ArgMatch::Equals32 { arg, values } => values
                .iter()
                .map(|(_, v)| {
                    let cond =
                        SeccompCondition::new(arg, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, *v)?;
                    SeccompRule::new(vec![cond])
                })
                .collect(),
        }
    }
}

/// Compiles [`RULES`] for `arch` into the BPF programs to install, in order.
pub fn compile(arch: Arch) -> Result<Vec<BpfProgram>, String> {
    let mut programs = Vec::new();
    for (action, on_match) in [
        (RuleAction::Kill, SeccompAction::KillProcess),
        (RuleAction::Eperm, SeccompAction::Errno(libc::EPERM as u32)),
        (
            RuleAction::Enosys,
            SeccompAction::Errno(libc::ENOSYS as u32),
        ),
    ] {
        let mut map: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
        for rule in RULES
            .iter()
            .filter(|r| r.action == action && r.number(arch) != NOT_ON_ARCH)
        {
            let rules = rule
                .seccomp_rules()
                .map_err(|e| format!("rule `{}`: {e}", rule.name))?;
            map.insert(rule.number(arch), rules);
        }
        let filter = SeccompFilter::new(map, SeccompAction::Allow, on_match, arch.target())
            .map_err(|e| format!("{action:?} filter: {e}"))?;
        programs.push(BpfProgram::try_from(filter).map_err(|e| format!("{action:?} filter: {e}"))?);
    }
    if arch == Arch::X86_64 {
        programs.push(x32_kill_program());
    }
    Ok(programs)
}

/// Kills any x86_64 system call whose number has the x32 bit (0x4000_0000) set. Without this, the
/// x32 entry point (when the kernel has CONFIG_X86_X32_ABI) reaches the same kernel functions under
/// numbers the table does not list. seccompiler checks the audit arch but not this bit.
fn x32_kill_program() -> BpfProgram {
    const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
    const JGE_K: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
    const RET_K: u16 = 0x06; // BPF_RET | BPF_K
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;
    const RET_KILL_PROCESS: u32 = 0x8000_0000;
    const RET_ALLOW: u32 = 0x7fff_0000;
    // struct seccomp_data { int nr; __u32 arch; ... }: nr at offset 0. seccompiler's own programs
    // already kill a foreign audit arch, so this one only looks at the number.
    vec![
        sock_filter {
            code: LD_W_ABS,
            jt: 0,
            jf: 0,
            k: 0,
        },
        sock_filter {
            code: JGE_K,
            jt: 0,
            jf: 1,
            k: X32_SYSCALL_BIT,
        },
        sock_filter {
            code: RET_K,
            jt: 0,
            jf: 0,
            k: RET_KILL_PROCESS,
        },
        sock_filter {
            code: RET_K,
            jt: 0,
            jf: 0,
            k: RET_ALLOW,
        },
    ]
}

/// Installs prepared programs on the calling thread. Requires no_new_privs (or CAP_SYS_ADMIN).
/// Async-signal-safe: no allocation, only the seccomp system call per program.
pub fn install(programs: &[BpfProgram]) -> Result<(), i32> {
    for program in programs {
        let Ok(len) = u16::try_from(program.len()) else {
            return Err(libc::E2BIG);
        };
        let prog = libc::sock_fprog {
            len,
            filter: program.as_ptr().cast::<libc::sock_filter>().cast_mut(),
        };
        // SAFETY: `prog` points at `program`, which outlives the call; the kernel copies the filter.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                0,
                &raw const prog,
            )
        };
        if rc != 0 {
            return Err(crate::sys::errno());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn x86_64_numbers_match_libc() {
        for rule in RULES {
            let expected = match rule.name {
                "ptrace" => libc::SYS_ptrace,
                "process_vm_readv" => libc::SYS_process_vm_readv,
                "process_vm_writev" => libc::SYS_process_vm_writev,
                "bpf" => libc::SYS_bpf,
                "perf_event_open" => libc::SYS_perf_event_open,
                "userfaultfd" => libc::SYS_userfaultfd,
                "io_uring_setup" => libc::SYS_io_uring_setup,
                "io_uring_enter" => libc::SYS_io_uring_enter,
                "io_uring_register" => libc::SYS_io_uring_register,
                "keyctl" => libc::SYS_keyctl,
                "add_key" => libc::SYS_add_key,
                "request_key" => libc::SYS_request_key,
                "kexec_load" => libc::SYS_kexec_load,
                "kexec_file_load" => libc::SYS_kexec_file_load,
                "init_module" => libc::SYS_init_module,
                "finit_module" => libc::SYS_finit_module,
                "delete_module" => libc::SYS_delete_module,
                "mount" => libc::SYS_mount,
                "umount2" => libc::SYS_umount2,
                "pivot_root" => libc::SYS_pivot_root,
                "open_tree" => libc::SYS_open_tree,
                "move_mount" => libc::SYS_move_mount,
                "fsopen" => libc::SYS_fsopen,
                "fsconfig" => libc::SYS_fsconfig,
                "fsmount" => libc::SYS_fsmount,
                "fspick" => libc::SYS_fspick,
                "mount_setattr" => libc::SYS_mount_setattr,
                "open_tree_attr" => 467,
                "setns" => libc::SYS_setns,
                "open_by_handle_at" => libc::SYS_open_by_handle_at,
                "reboot" => libc::SYS_reboot,
                "swapon" => libc::SYS_swapon,
                "swapoff" => libc::SYS_swapoff,
                "acct" => libc::SYS_acct,
                "quotactl" => libc::SYS_quotactl,
                "quotactl_fd" => libc::SYS_quotactl_fd,
                "unshare" => libc::SYS_unshare,
                "clone" => libc::SYS_clone,
                "clone3" => libc::SYS_clone3,
                "ioctl" => libc::SYS_ioctl,
                "chmod" => libc::SYS_chmod,
                "fchmod" => libc::SYS_fchmod,
                "fchmodat" => libc::SYS_fchmodat,
                "fchmodat2" => 452,
                "open" => libc::SYS_open,
                "openat" => libc::SYS_openat,
                "creat" => libc::SYS_creat,
                "mknod" => libc::SYS_mknod,
                "mknodat" => libc::SYS_mknodat,
                "openat2" => libc::SYS_openat2,
                other => panic!("row `{other}` has no libc cross-check"),
            };
            assert_eq!(rule.x86_64, expected, "x86_64 number of {}", rule.name);
        }
    }

    #[test]
    fn shared_numbers_agree_across_arches() {
        // From 403 up, asm-generic numbers are the same on every architecture.
        for rule in RULES.iter().filter(|r| r.x86_64 >= 403 || r.aarch64 >= 403) {
            assert_eq!(rule.x86_64, rule.aarch64, "{}", rule.name);
        }
    }

    #[test]
    fn rows_are_unique_and_explained() {
        for arch in [Arch::X86_64, Arch::Aarch64] {
            let mut seen = std::collections::HashSet::new();
            for rule in RULES.iter().filter(|r| r.number(arch) != NOT_ON_ARCH) {
                assert!(
                    seen.insert(rule.number(arch)),
                    "{} listed twice on {arch:?}",
                    rule.name
                );
                assert!(!rule.why.is_empty());
            }
        }
    }

    #[test]
    fn both_tables_compile() {
        assert_eq!(compile(Arch::X86_64).unwrap().len(), 4);
        assert_eq!(compile(Arch::Aarch64).unwrap().len(), 3);
    }
}
