//! The chained program against the per-answer programs, run by a classic BPF interpreter over
//! every row's call with the argument values the rows name (and their neighbours): the chained
//! answer must be the one the kernel gives when the programs are installed one by one (every
//! program runs, the most restrictive action wins, and of two equal actions the program installed
//! last).

use super::super::program::{chain, per_answer};
use super::super::{Arch, ArgMatch, NOT_ON_ARCH, RULES, RuleAction};
use seccompiler::sock_filter;

const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
const AUDIT_ARCH_AARCH64: u32 = 0xc000_00b7;

/// `struct seccomp_data` as the filter reads it: nr, arch, instruction pointer, six arguments.
fn data(nr: u32, arch: u32, args: [u64; 6]) -> [u8; 64] {
    let mut d = [0u8; 64];
    d[0..4].copy_from_slice(&nr.to_le_bytes());
    d[4..8].copy_from_slice(&arch.to_le_bytes());
    for (i, a) in args.iter().enumerate() {
        d[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_le_bytes());
    }
    d
}

/// Runs a classic BPF program over `d`; panics on an instruction it does not know (so a new one
/// in seccompiler's output cannot pass unseen).
fn run(prog: &[sock_filter], d: &[u8; 64]) -> u32 {
    let (mut a, mut x, mut mem) = (0u32, 0u32, [0u32; 16]);
    let mut pc = 0usize;
    loop {
        let i = &prog[pc];
        let word = |off: u32| {
            let o = off as usize;
            u32::from_le_bytes(d[o..o + 4].try_into().unwrap())
        };
        pc += 1;
        let jump = |cond: bool| {
            if cond {
                usize::from(i.jt)
            } else {
                usize::from(i.jf)
            }
        };
        match i.code {
            0x20 => a = word(i.k),            // ld [k]
            0x00 => a = i.k,                  // ld #k
            0x01 => x = i.k,                  // ldx #k
            0x60 => a = mem[i.k as usize],    // ld M[k]
            0x61 => x = mem[i.k as usize],    // ldx M[k]
            0x02 => mem[i.k as usize] = a,    // st M[k]
            0x03 => mem[i.k as usize] = x,    // stx M[k]
            0x54 => a &= i.k,                 // and #k
            0x07 => x = a,                    // tax
            0x87 => a = x,                    // txa
            0x05 => pc += i.k as usize,       // ja
            0x15 => pc += jump(a == i.k),     // jeq #k
            0x25 => pc += jump(a > i.k),      // jgt #k
            0x35 => pc += jump(a >= i.k),     // jge #k
            0x45 => pc += jump(a & i.k != 0), // jset #k
            0x06 => return i.k,               // ret #k
            other => panic!("instruction {other:#x} at {} is not interpreted", pc - 1),
        }
    }
}

/// The kernel's answer for programs installed in order: the most restrictive action (compared as
/// a signed action), the latest-installed program on a tie.
fn stacked(programs: &[Vec<sock_filter>], d: &[u8; 64]) -> u32 {
    let action = |r: u32| (r & 0xffff_0000) as i32;
    let mut answer = 0x7fff_0000u32;
    for p in programs.iter().rev() {
        let r = run(p, d);
        if action(r) < action(answer) {
            answer = r;
        }
    }
    answer
}

/// Argument values worth trying for `args`: each value the row names, its neighbours, and values
/// with none or every bit set.
fn candidates(args: &ArgMatch) -> (Vec<usize>, Vec<u64>) {
    let mut vals = vec![0, 1, 2, 0xffff_ffff, u64::MAX, 0x1_0000_0000];
    let mut which = vec![0, 1, 2];
    let mut named = |list: &[(&str, u64)]| {
        for (_, v) in list {
            vals.extend([*v, v.wrapping_add(1), v.wrapping_sub(1), v | 0x1_0000_0000]);
        }
    };
    match args {
        ArgMatch::Any => {}
        ArgMatch::AnyFlag { arg, flags } => {
            which.push(usize::from(*arg));
            named(flags);
        }
        ArgMatch::Equals32 { arg, values } => {
            which.push(usize::from(*arg));
            named(values);
        }
        ArgMatch::NoneOf32 { arg, allowed } => {
            which.push(usize::from(*arg));
            named(allowed);
        }
        ArgMatch::EqualsThenNoneOf32 {
            arg,
            value,
            then_arg,
            allowed,
        } => {
            which.extend([usize::from(*arg), usize::from(*then_arg)]);
            named(std::slice::from_ref(value));
            named(allowed);
        }
    }
    which.sort_unstable();
    which.dedup();
    (which, vals)
}

#[test]
fn the_chained_program_answers_as_the_programs_installed_one_by_one() {
    for (arch, audit) in [
        (Arch::X86_64, AUDIT_ARCH_X86_64),
        (Arch::Aarch64, AUDIT_ARCH_AARCH64),
    ] {
        let programs = per_answer(arch).unwrap();
        let chained = chain(programs.clone()).unwrap();
        let mut checked = 0usize;
        let mut check = |nr: u32, arch_value: u32, args: [u64; 6]| {
            let d = data(nr, arch_value, args);
            assert_eq!(
                run(&chained, &d),
                stacked(&programs, &d),
                "{arch:?}: call {nr:#x} (arch {arch_value:#x}) with {args:x?}"
            );
            checked += 1;
        };
        for row in RULES.iter().filter(|r| r.number(arch) != NOT_ON_ARCH) {
            let nr = u32::try_from(row.number(arch)).unwrap();
            let (which, vals) = candidates(&row.args);
            for &i in &which {
                for &j in &which {
                    for &v in &vals {
                        for &w in &vals {
                            let mut args = [0u64; 6];
                            args[i] = v;
                            args[j] = w;
                            check(nr, audit, args);
                            check(nr | 0x4000_0000, audit, args);
                        }
                    }
                }
            }
        }
        // Calls no row names, a foreign arch, and the x32 bit on its own.
        for nr in 0..520 {
            check(nr, audit, [0; 6]);
            check(nr, 0x4000_0003, [0; 6]);
            check(nr | 0x4000_0000, audit, [7; 6]);
        }
        assert!(checked > 10_000, "{arch:?}: only {checked} inputs");
    }
}

/// The kill rows answer SECCOMP_RET_USER_NOTIF in the installed program (the host's watch kills
/// the process and names the call), and nothing answers SECCOMP_RET_TRAP (seccompiler's action
/// used as the placeholder), which a SIGSYS handler would survive.
#[test]
fn the_kill_rows_wait_for_the_watch_and_nothing_traps() {
    for (arch, audit) in [
        (Arch::X86_64, AUDIT_ARCH_X86_64),
        (Arch::Aarch64, AUDIT_ARCH_AARCH64),
    ] {
        let chained = chain(per_answer(arch).unwrap()).unwrap();
        assert!(
            !chained
                .iter()
                .any(|i| i.code == 0x06 && i.k & 0xffff_0000 == 0x0003_0000),
            "{arch:?}: a `ret TRAP` is left"
        );
        for row in RULES.iter().filter(|r| r.number(arch) != NOT_ON_ARCH) {
            let nr = u32::try_from(row.number(arch)).unwrap();
            let answer = run(&chained, &data(nr, audit, [0; 6]));
            if row.action == RuleAction::Kill {
                assert_eq!(
                    answer, 0x7fc0_0000,
                    "{arch:?}: {} waits for the watch",
                    row.name
                );
            } else {
                assert_ne!(answer & 0xffff_0000, 0x7fc0_0000, "{arch:?}: {}", row.name);
            }
        }
    }
}
