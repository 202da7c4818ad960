//! rlimits of a call (always on): no core dumps, a largest file, a number of open files.

use crate::child::sys::check;
use crate::wire::plan::Limits;

/// The rlimits to set, computed on the host.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rlimits {
    pub fsize: u64,
    pub nofile: u64,
}

impl Rlimits {
    pub(crate) fn from_limits(limits: &Limits) -> Self {
        Rlimits {
            fsize: limits.fsize_bytes,
            nofile: limits.nofile,
        }
    }
}

/// The type `getrlimit` takes its resource as: glibc's own enum type, musl's `int` (the guest's
/// driver is built for musl, docs/microvm.md).
#[cfg(target_env = "gnu")]
type Resource = libc::__rlimit_resource_t;
#[cfg(not(target_env = "gnu"))]
type Resource = libc::c_int;

fn set(resource: Resource, value: u64) -> Result<(), i32> {
    // SAFETY: rlimit is plain data; getrlimit fills it.
    let mut cur: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: valid out pointer.
    check(unsafe { libc::getrlimit(resource, &raw mut cur) })?;
    // Never above the current hard limit: raising it needs a privilege the call does not have.
    let v = value.min(cur.rlim_max);
    let new = libc::rlimit {
        rlim_cur: v,
        rlim_max: v,
    };
    // SAFETY: valid pointer to an initialised rlimit.
    check(unsafe { libc::setrlimit(resource, &raw const new) })
}

/// Applies the rlimits; returns the step (1 core, 2 fsize, 3 nofile) that failed.
pub(crate) fn apply(r: &Rlimits) -> Result<(), (u32, i32)> {
    set(libc::RLIMIT_CORE, 0).map_err(|e| (1, e))?;
    set(libc::RLIMIT_FSIZE, r.fsize).map_err(|e| (2, e))?;
    set(libc::RLIMIT_NOFILE, r.nofile).map_err(|e| (3, e))
}
