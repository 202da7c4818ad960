//! The keeper's own confinement, applied before it reads a single message: it keeps descriptors
//! and copies bytes, and may do nothing else.

use std::collections::BTreeMap;

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetStatus,
    Scope,
};
use seccompiler::{BpfProgram, SeccompAction, SeccompFilter, SeccompRule};

/// The system calls the keeper makes once confined (its loop, its allocator, its exit).
fn allowed() -> Vec<libc::c_long> {
    let common = [
        libc::SYS_read,
        libc::SYS_write,
        libc::SYS_close,
        libc::SYS_ppoll,
        libc::SYS_sendmsg,
        libc::SYS_recvmsg,
        libc::SYS_accept4,
        libc::SYS_fcntl,
        libc::SYS_mmap,
        libc::SYS_munmap,
        libc::SYS_mremap,
        libc::SYS_brk,
        libc::SYS_madvise,
        libc::SYS_futex,
        libc::SYS_clock_gettime,
        libc::SYS_exit,
        libc::SYS_exit_group,
        libc::SYS_rt_sigreturn,
        libc::SYS_rt_sigprocmask,
        libc::SYS_sigaltstack,
        libc::SYS_pidfd_send_signal,
        libc::SYS_getrandom,
        libc::SYS_sched_yield,
        libc::SYS_restart_syscall,
    ];
    // `poll` exists on x86_64 only (aarch64 has `ppoll` alone).
    #[cfg(target_arch = "x86_64")]
    let arch: &[libc::c_long] = &[libc::SYS_poll];
    #[cfg(not(target_arch = "x86_64"))]
    let arch: &[libc::c_long] = &[];
    common.iter().chain(arch).copied().collect()
}

/// Confines the calling process for good (every thread it makes after inherits it): no new
/// privileges, not dumpable (a process of the same user cannot read its memory or take its
/// descriptors), Landlock with every filesystem access handled and none granted (and, where the
/// kernel has them, no TCP and no abstract unix socket outside its domain), and a seccomp
/// allow-list (`allowed`) that answers every other system call `EPERM`: no `socket`,
/// `connect`, `open`, `execve`, `kill` or `ptrace`. A step that cannot be applied is an error,
/// and the keeper does not run without it.
pub fn confine_self() -> Result<(), String> {
    // SAFETY: prctl with integer arguments changes only this process's own attributes.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(format!("no_new_privs: {}", std::io::Error::last_os_error()));
        }
        if libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) != 0 {
            return Err(format!("not dumpable: {}", std::io::Error::last_os_error()));
        }
    }
    landlock_nothing()?;
    let map: BTreeMap<i64, Vec<SeccompRule>> =
        allowed().into_iter().map(|n| (n, Vec::new())).collect();
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|e| format!("seccomp: {e:?}"))?;
    let filter = SeccompFilter::new(
        map,
        SeccompAction::Errno(u32::try_from(libc::EPERM).unwrap_or(1)),
        SeccompAction::Allow,
        arch,
    )
    .map_err(|e| format!("seccomp: {e}"))?;
    let program = BpfProgram::try_from(filter).map_err(|e| format!("seccomp: {e}"))?;
    seccompiler::apply_filter(&program).map_err(|e| format!("seccomp: {e}"))
}

/// Landlock with every access the kernel knows handled and no rule: the keeper opens no file
/// and binds or connects nothing by path or port once confined.
fn landlock_nothing() -> Result<(), String> {
    let found = crate::child::landlock_rules::kernel_abi();
    if found < crate::child::landlock_rules::MINIMUM_ABI {
        return Err(format!(
            "landlock: the kernel offers no Landlock ABI (answer {found})"
        ));
    }
    let abi = ABI::from(found);
    let fail = |e: landlock::RulesetError| format!("landlock: {e}");
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(abi))
        .map_err(fail)?;
    if found >= 4 {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(abi))
            .map_err(fail)?;
    }
    if found >= 6 {
        // Not the signal scope: the keeper kills its calls' inits, which are outside its domain.
        ruleset = ruleset.scope(Scope::AbstractUnixSocket).map_err(fail)?;
    }
    let status = ruleset
        .create()
        .map_err(fail)?
        .restrict_self()
        .map_err(fail)?;
    if status.ruleset != RulesetStatus::FullyEnforced {
        return Err("landlock: not fully enforced".into());
    }
    Ok(())
}
