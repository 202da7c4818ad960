//! Privileges: every capability dropped from every set, securebits locked so uid 0 regains nothing
//! at exec, no_new_privs, and the init made non-dumpable. Allocation-free: run after fork.

use crate::child::sys::{check, errno};

const CAPABILITY_VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

// linux/securebits.h
const SECBIT_NOROOT: libc::c_ulong = 1 << 0;
const SECBIT_NOROOT_LOCKED: libc::c_ulong = 1 << 1;
const SECBIT_NO_SETUID_FIXUP: libc::c_ulong = 1 << 2;
const SECBIT_NO_SETUID_FIXUP_LOCKED: libc::c_ulong = 1 << 3;
const SECBIT_KEEP_CAPS_LOCKED: libc::c_ulong = 1 << 5;
const SECBIT_NO_CAP_AMBIENT_RAISE: libc::c_ulong = 1 << 6;
const SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED: libc::c_ulong = 1 << 7;

fn prctl(option: libc::c_int, arg: libc::c_ulong) -> Result<(), i32> {
    // SAFETY: prctl with integer arguments only changes this process's state.
    check(unsafe { libc::prctl(option, arg, 0, 0, 0) })
}

/// Drops every capability: bounding set, ambient set, then effective/permitted/inheritable, and
/// locks the securebits so that neither uid 0 nor a setuid binary can bring any back. Returns the
/// step that failed (1 securebits, 2 bounding, 3 ambient, 4 capset, 5 still holding a capability).
pub(crate) fn drop_all() -> Result<(), (u32, i32)> {
    let bits = SECBIT_NOROOT
        | SECBIT_NOROOT_LOCKED
        | SECBIT_NO_SETUID_FIXUP
        | SECBIT_NO_SETUID_FIXUP_LOCKED
        | SECBIT_KEEP_CAPS_LOCKED
        | SECBIT_NO_CAP_AMBIENT_RAISE
        | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
    prctl(libc::PR_SET_SECUREBITS, bits).map_err(|e| (1, e))?;
    for cap in 0..64 {
        match prctl(libc::PR_CAPBSET_DROP, cap) {
            Ok(()) => {}
            Err(libc::EINVAL) => break, // past the last capability this kernel knows
            Err(e) => return Err((2, e)),
        }
    }
    // SAFETY: integer arguments only.
    check(unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        )
    })
    .map_err(|e| (3, e))?;
    let header = CapHeader {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    };
    let data = [CapData::default(); 2];
    // SAFETY: header and two data structs, as capset(2) with version 3 expects.
    let rc = unsafe { libc::syscall(libc::SYS_capset, &raw const header, data.as_ptr()) };
    if rc != 0 {
        return Err((4, errno()));
    }
    if holds_any_capability().map_err(|e| (5, e))? {
        return Err((5, libc::EPERM));
    }
    Ok(())
}

/// Whether the calling thread still has any capability in any set, bounding included.
pub(crate) fn holds_any_capability() -> Result<bool, i32> {
    let mut header = CapHeader {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: header and two data structs, as capget(2) with version 3 expects.
    let rc = unsafe { libc::syscall(libc::SYS_capget, &raw mut header, data.as_mut_ptr()) };
    if rc != 0 {
        return Err(errno());
    }
    if data
        .iter()
        .any(|d| d.effective | d.permitted | d.inheritable != 0)
    {
        return Ok(true);
    }
    for cap in 0..64 {
        // SAFETY: integer arguments only.
        let rc = unsafe { libc::prctl(libc::PR_CAPBSET_READ, cap, 0, 0, 0) };
        if rc == 1 {
            return Ok(true);
        }
        if rc < 0 {
            break;
        }
    }
    Ok(false)
}

/// no_new_privs: execve never grants privileges again (setuid bits and file capabilities are
/// ignored), and is a precondition of Landlock and seccomp for an unprivileged process.
pub(crate) fn set_no_new_privs() -> Result<(), i32> {
    prctl(libc::PR_SET_NO_NEW_PRIVS, 1)
}

/// Makes the init non-dumpable, so the command (same uid) cannot open /proc/1/mem or ptrace it.
pub(crate) fn set_non_dumpable() -> Result<(), i32> {
    prctl(libc::PR_SET_DUMPABLE, 0)
}

/// Asks the kernel to SIGKILL this process when its parent dies.
pub(crate) fn die_with_parent() -> Result<(), i32> {
    prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong)
}
