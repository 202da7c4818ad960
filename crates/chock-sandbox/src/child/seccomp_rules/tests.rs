//! The table's own checks: numbers against libc, rows unique and explained, both arches compile,
//! and the chained program answers as the per-answer programs installed one by one.

use super::*;

mod chained;

/// The host libc's number for a row's call; `NOT_ON_ARCH` for the calls aarch64 lacks. Built for
/// x86_64 and aarch64 (`cargo check -p chock-sandbox --tests --target aarch64-unknown-linux-gnu`),
/// so every name must exist in libc on both.
fn libc_number(name: &str) -> i64 {
    match name {
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
        "socket" => libc::SYS_socket,
        "socketpair" => libc::SYS_socketpair,
        "personality" => libc::SYS_personality,
        "name_to_handle_at" => libc::SYS_name_to_handle_at,
        "fchmod" => libc::SYS_fchmod,
        "fchmodat" => libc::SYS_fchmodat,
        "fchmodat2" => 452,
        "openat" => libc::SYS_openat,
        "mknodat" => libc::SYS_mknodat,
        "openat2" => libc::SYS_openat2,
        #[cfg(target_arch = "x86_64")]
        "chmod" => libc::SYS_chmod,
        #[cfg(target_arch = "x86_64")]
        "open" => libc::SYS_open,
        #[cfg(target_arch = "x86_64")]
        "creat" => libc::SYS_creat,
        #[cfg(target_arch = "x86_64")]
        "mknod" => libc::SYS_mknod,
        #[cfg(not(target_arch = "x86_64"))]
        "chmod" | "open" | "creat" | "mknod" => NOT_ON_ARCH,
        other => panic!("row `{other}` has no libc cross-check"),
    }
}

#[test]
fn numbers_match_libc_on_this_architecture() {
    let arch = Arch::current().expect("the table covers this architecture");
    for rule in RULES {
        assert_eq!(
            rule.number(arch),
            libc_number(rule.name),
            "{arch:?} number of {}",
            rule.name
        );
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
            // One program per answer, one entry per call in each: a second row with the same
            // answer would replace the first.
            assert!(
                seen.insert((rule.number(arch), rule.action)),
                "{} listed twice for {:?} on {arch:?}",
                rule.name,
                rule.action
            );
            assert!(!rule.why.is_empty());
        }
    }
}

#[test]
fn both_tables_compile() {
    // One program per answer, and the x32 kill program on x86_64; installed chained as one.
    assert_eq!(
        program::per_answer(Arch::X86_64).unwrap().len(),
        RuleAction::ALL.len() + 1
    );
    assert_eq!(
        program::per_answer(Arch::Aarch64).unwrap().len(),
        RuleAction::ALL.len()
    );
    for arch in [Arch::X86_64, Arch::Aarch64] {
        assert_eq!(compile(arch).unwrap().len(), 1);
    }
}

#[test]
fn a_call_in_two_programs_matches_disjoint_arguments() {
    // socket and socketpair are the only calls with two rows: every refused family (any but the
    // four), or AF_NETLINK with a refused protocol. AF_NETLINK must be among the families the
    // first row allows, or the second row would never be the answer.
    for name in ["socket", "socketpair"] {
        let rows: Vec<&SyscallRule> = RULES.iter().filter(|r| r.name == name).collect();
        assert_eq!(rows.len(), 2, "{name}");
        let ArgMatch::NoneOf32 { arg: 0, allowed } = rows[0].args else {
            panic!("{name}: the first row refuses families")
        };
        let ArgMatch::EqualsThenNoneOf32 {
            arg: 0,
            value,
            then_arg: 2,
            ..
        } = rows[1].args
        else {
            panic!("{name}: the second row narrows one family by its protocol")
        };
        assert!(allowed.contains(&value), "{name}: {value:?} is allowed");
    }
    let mut names: Vec<&str> = RULES.iter().map(|r| r.name).collect();
    names.sort_unstable();
    let before = names.len();
    names.dedup();
    assert_eq!(before - names.len(), 2, "only socket and socketpair repeat");
}

#[test]
fn the_family_and_personality_lists_are_the_reviewed_ones() {
    let values = |name: &str, action: RuleAction| {
        let rule = RULES
            .iter()
            .find(|r| r.name == name && r.action == action)
            .unwrap();
        let ArgMatch::NoneOf32 { allowed, .. } = rule.args else {
            panic!("{name} is an allow list")
        };
        allowed.iter().map(|(_, v)| *v).collect::<Vec<u64>>()
    };
    let families = [
        libc::AF_UNIX,
        libc::AF_INET,
        libc::AF_INET6,
        libc::AF_NETLINK,
    ]
    .map(|f| u64::try_from(f).unwrap());
    assert_eq!(values("socket", RuleAction::Eafnosupport), families);
    assert_eq!(values("socketpair", RuleAction::Eafnosupport), families);
    // Docker's default profile allows exactly these (profiles/seccomp/default.json).
    assert_eq!(
        values("personality", RuleAction::Eperm),
        [0x0, 0x8, 0x2_0000, 0x2_0008, 0xffff_ffff]
    );
}

#[test]
fn the_summary_counts_each_answer() {
    let s = summary(Arch::X86_64);
    let total: usize = RULES.len();
    assert!(s.starts_with(&format!("{total} rules: ")), "{s}");
    for part in ["kill", "EPERM", "ENOSYS", "EAFNOSUPPORT", "EPROTONOSUPPORT"] {
        assert!(s.contains(part), "{s}");
    }
    // aarch64 has no chmod, open, creat, mknod.
    assert!(
        summary(Arch::Aarch64).starts_with(&format!("{} rules: ", total - 4)),
        "{}",
        summary(Arch::Aarch64)
    );
}
