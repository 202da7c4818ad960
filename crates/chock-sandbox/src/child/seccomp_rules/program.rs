//! Turning the reviewed table into BPF programs, and installing them. The table itself, and every
//! decision in it, is in `seccomp_rules.rs`.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch, sock_filter,
};

use super::{Arch, ArgMatch, NOT_ON_ARCH, RULES, RuleAction, SyscallRule};

fn target(arch: Arch) -> TargetArch {
    match arch {
        Arch::X86_64 => TargetArch::x86_64,
        Arch::Aarch64 => TargetArch::aarch64,
    }
}

/// SECCOMP_RET_TRAP, which seccompiler writes for [`SeccompAction::Trap`]: the kill program's
/// placeholder, rewritten to [`RET_USER_NOTIF`] (seccompiler has no action for it).
const RET_TRAP: u32 = 0x0003_0000;
/// SECCOMP_RET_USER_NOTIF: the call waits, never executed, for the filter's listener (the host, see
/// `seccomp_watch.rs`), which records its name and kills the process. Without a listener (closed,
/// or never asked for) the kernel answers ENOSYS: either way the call's kernel code is not reached.
pub(crate) const RET_USER_NOTIF: u32 = 0x7fc0_0000;

/// The seccompiler action of a row's answer.
fn seccomp_action(action: RuleAction) -> SeccompAction {
    let errno = |e: i32| SeccompAction::Errno(e.unsigned_abs());
    match action {
        // Rewritten to SECCOMP_RET_USER_NOTIF in `per_answer`.
        RuleAction::Kill => SeccompAction::Trap,
        RuleAction::Eperm => errno(libc::EPERM),
        RuleAction::Enosys => errno(libc::ENOSYS),
        RuleAction::Eafnosupport => errno(libc::EAFNOSUPPORT),
        RuleAction::Eprotonosupport => errno(libc::EPROTONOSUPPORT),
    }
}

/// The seccompiler rules of one row: any of them matching means the row matches.
fn seccomp_rules(rule: &SyscallRule) -> Result<Vec<SeccompRule>, seccompiler::BackendError> {
    match rule.args {
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
            .map(|(_, v)| SeccompRule::new(vec![dword(arg, SeccompCmpOp::Eq, *v)?]))
            .collect(),
        // One rule whose conditions must all hold: not the first allowed value, and not the
        // second, and so on.
        ArgMatch::NoneOf32 { arg, allowed } => Ok(vec![SeccompRule::new(
            allowed
                .iter()
                .map(|(_, v)| dword(arg, SeccompCmpOp::Ne, *v))
                .collect::<Result<_, _>>()?,
        )?]),
        ArgMatch::EqualsThenNoneOf32 {
            arg,
            value: (_, value),
            then_arg,
            allowed,
        } => {
            let mut conds = vec![dword(arg, SeccompCmpOp::Eq, value)?];
            for (_, v) in allowed {
                conds.push(dword(then_arg, SeccompCmpOp::Ne, *v)?);
            }
            Ok(vec![SeccompRule::new(conds)?])
        }
    }
}

/// A comparison of the low 32 bits of argument `arg`.
fn dword(
    arg: u8,
    op: SeccompCmpOp,
    value: u64,
) -> Result<SeccompCondition, seccompiler::BackendError> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value)
}

/// Compiles [`RULES`] for `arch` into the BPF programs to install, in order: one program, the
/// per-answer programs of `per_answer` chained (see `chain`).
pub fn compile(arch: Arch) -> Result<Vec<BpfProgram>, String> {
    Ok(vec![chain(per_answer(arch)?)?])
}

/// One BPF program per answer of the table (in [`RuleAction::ALL`]'s order, Kill first), each
/// allowing what it does not match, and on x86_64 the x32 kill program first of all.
pub fn per_answer(arch: Arch) -> Result<Vec<BpfProgram>, String> {
    let mut programs = Vec::new();
    if arch == Arch::X86_64 {
        programs.push(x32_kill_program());
    }
    for action in RuleAction::ALL {
        let mut map: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
        for rule in RULES
            .iter()
            .filter(|r| r.action == action && r.number(arch) != NOT_ON_ARCH)
        {
            let rules = seccomp_rules(rule).map_err(|e| format!("rule `{}`: {e}", rule.name))?;
            if map.insert(rule.number(arch), rules).is_some() {
                return Err(format!("rule `{}` listed twice for {action:?}", rule.name));
            }
        }
        let on_match = seccomp_action(action);
        let filter = SeccompFilter::new(map, SeccompAction::Allow, on_match, target(arch))
            .map_err(|e| format!("{action:?} filter: {e}"))?;
        let mut program =
            BpfProgram::try_from(filter).map_err(|e| format!("{action:?} filter: {e}"))?;
        if action == RuleAction::Kill {
            // Only this program answers TRAP (seccompiler's own architecture check kills).
            for insn in &mut program {
                if insn.code == RET_K && insn.k == RET_TRAP {
                    insn.k = RET_USER_NOTIF;
                }
            }
        }
        programs.push(program);
    }
    Ok(programs)
}

const RET_K: u16 = 0x06; // BPF_RET | BPF_K
const RET_A: u16 = 0x16; // BPF_RET | BPF_A
const JA: u16 = 0x05; // BPF_JMP | BPF_JA
const RET_ALLOW: u32 = 0x7fff_0000; // SECCOMP_RET_ALLOW
/// The kernel's limit on one classic BPF program (BPF_MAXINSNS).
const MAX_INSNS: usize = 4096;

/// Joins `programs` into one that answers as the first of them that does not allow the call, and
/// allows what all of them allow: every `ret ALLOW` of a program but the last becomes a jump to
/// the start of the next (jumps are relative, so each program's own jumps are unchanged).
///
/// Installed one by one, the kernel runs every program and takes the most restrictive answer; a
/// kill program placed first answers the same chained. Two error answers for one call cannot
/// differ: the rows of one call match disjoint arguments (`a_call_in_two_programs_matches_disjoint_
/// arguments`). One program is one filter to check and compile at every call's start, not six
/// (each costs the kernel about 30 µs here), and one program to run at each system call.
pub fn chain(programs: Vec<BpfProgram>) -> Result<BpfProgram, String> {
    let total: usize = programs.iter().map(Vec::len).sum();
    if total > MAX_INSNS {
        return Err(format!(
            "the chained seccomp program has {total} instructions; the kernel takes {MAX_INSNS}"
        ));
    }
    let last = programs.len().saturating_sub(1);
    let mut out = Vec::with_capacity(total);
    for (n, program) in programs.into_iter().enumerate() {
        let len = program.len();
        for (i, mut insn) in program.into_iter().enumerate() {
            if n < last {
                if insn.code == RET_A {
                    return Err("a program returns its accumulator: its answer is unknown".into());
                }
                if insn.code == RET_K && insn.k == RET_ALLOW {
                    // ja k jumps to pc + 1 + k: the first instruction after this program.
                    let k = u32::try_from(len - i - 1).map_err(|e| e.to_string())?;
                    insn = sock_filter {
                        code: JA,
                        jt: 0,
                        jf: 0,
                        k,
                    };
                }
            }
            out.push(insn);
        }
    }
    Ok(out)
}

/// Kills any x86_64 system call whose number has the x32 bit (0x4000_0000) set. Without this, the
/// x32 entry point (when the kernel has CONFIG_X86_X32_ABI) reaches the same kernel functions under
/// numbers the table does not list. seccompiler checks the audit arch but not this bit.
fn x32_kill_program() -> BpfProgram {
    const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
    const JGE_K: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;
    const RET_KILL_PROCESS: u32 = 0x8000_0000;
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
/// With `listener`, the last program is installed with SECCOMP_FILTER_FLAG_NEW_LISTENER and its
/// listener (close-on-exec) is returned: what the kill rows' calls wait on. Async-signal-safe: no
/// allocation, only the seccomp system call per program.
pub fn install(programs: &[BpfProgram], listener: bool) -> Result<Option<i32>, i32> {
    let mut fd = None;
    for (i, program) in programs.iter().enumerate() {
        let Ok(len) = u16::try_from(program.len()) else {
            return Err(libc::E2BIG);
        };
        let prog = libc::sock_fprog {
            len,
            filter: program.as_ptr().cast::<libc::sock_filter>().cast_mut(),
        };
        let flags = if listener && i + 1 == programs.len() {
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER
        } else {
            0
        };
        // SAFETY: `prog` points at `program`, which outlives the call; the kernel copies the filter.
        let set = |flags: libc::c_ulong| unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                flags,
                &raw const prog,
            )
        };
        // Once the watcher has received a kill row's notification, the waiting thread ignores
        // every signal but SIGKILL (Linux 5.19): a handler that never returns cannot take the
        // process out of the wait between the watcher's receive and its kill. Before 5.19 the
        // kernel refuses the flag and the filter is installed without it: the call still never
        // runs (the watcher kills the process when it receives the call again after the handler,
        // or the process goes on without it); docs/sandbox.md says so.
        let mut rc = if flags == 0 {
            set(0)
        } else {
            set(flags | libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV)
        };
        if rc < 0 && flags != 0 && crate::child::sys::errno() == libc::EINVAL {
            rc = set(flags);
        }
        if rc < 0 {
            return Err(crate::child::sys::errno());
        }
        if flags != 0 {
            fd = Some(i32::try_from(rc).map_err(|_| libc::EBADF)?);
        }
    }
    if listener && fd.is_none() {
        return Err(libc::EINVAL);
    }
    Ok(fd)
}
