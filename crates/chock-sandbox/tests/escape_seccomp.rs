//! Escape suite, the system call filter: every call on the reviewed kill list, made for real by
//! chock-hostile inside the sandbox, must kill it with SIGSYS; the calls refused by argument must
//! fail with the table's errno. This list is written independently of `seccomp_rules.rs` on
//! purpose: removing a row there makes a test here fail.

mod escape_support;

use escape_support::{Backing, Fixture, run};

/// The calls the filter kills (SECCOMP_RET_KILL_PROCESS), by chock-hostile's act name.
const KILLED: &[&str] = &[
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
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
    ("ioctl-tiocsti", "EPERM"),
    ("ioctl-tioclinux", "EPERM"),
];

/// Attack: every call on the kill list. Layer: seccomp (kill). Without the filter each of these
/// returns an errno or succeeds instead, and the assertion names the call.
#[test]
fn every_call_on_the_kill_list_is_killed() {
    let fx = Fixture::new(Backing::Overlay);
    let mut failures = Vec::new();
    for call in KILLED {
        let r = run(&fx.hostile_plan(&["syscall", call]));
        if r.status != chock_sandbox::ExitStatus::Signaled(libc::SIGSYS) {
            failures.push(format!("{call}: {:?} {}", r.status, r.stdout.trim()));
        }
    }
    assert!(
        failures.is_empty(),
        "calls on the kill list that were not killed:\n{}",
        failures.join("\n")
    );
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
        run(&fx.hostile_plan(&["syscall", call])).assert_killed_by_seccomp(call);
    }
}
