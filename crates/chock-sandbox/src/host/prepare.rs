//! Building a call's [`Prepared`] data from its plan, on the host before fork (see
//! `child/prepared.rs` for why everything is made before fork).

use std::os::fd::RawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use seccompiler::BpfProgram;

use crate::child::landlock_rules::LandlockPlan;
use crate::child::limits::Rlimits;
use crate::child::prepared::{CommandSpec, Prepared, cstring};
use crate::host::mounts::{self, Step};
use crate::wire::error::SandboxError;
use crate::wire::plan::{NetworkPlan, Plan, WorkspaceMount};

pub(crate) fn prepare(
    plan: &Plan,
    abi: i32,
    seccomp: Vec<BpfProgram>,
    cgroup_procs: Option<&Path>,
    overlay_fd: Option<RawFd>,
    sockets: Option<&crate::SocketIndex>,
) -> Result<Prepared, SandboxError> {
    let steps = mounts::build(plan, overlay_fd, sockets)?;
    prepare_with(plan, abi, seccomp, cgroup_procs, steps)
}

/// As [`prepare`], with the mount steps already built.
pub(crate) fn prepare_with(
    plan: &Plan,
    abi: i32,
    seccomp: Vec<BpfProgram>,
    cgroup_procs: Option<&Path>,
    steps: Vec<Step>,
) -> Result<Prepared, SandboxError> {
    // SAFETY: getuid/getgid never fail.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    // A read-only workspace (the real project a service runs from) is not a writable place.
    let writable_project = match plan.workspace {
        WorkspaceMount::ReadOnly { .. } => None,
        _ => Some(&plan.project_path),
    };
    let mut writable_dirs: Vec<PathBuf> = writable_project
        .into_iter()
        .cloned()
        .chain([PathBuf::from("/tmp"), PathBuf::from("/dev/shm")])
        .collect();
    // The home is its own tmpfs (or a directory in /tmp) unless it lies in the workspace or a
    // declared write path, whose rule then covers it (and where it may not exist).
    let home_in_bind = writable_project
        .into_iter()
        .chain(&plan.extra_write)
        .any(|p| plan.home.starts_with(p));
    if !home_in_bind {
        writable_dirs.push(plan.home.clone());
    }
    let mut writable_files: Vec<PathBuf> = [
        "/dev/null",
        "/dev/zero",
        "/dev/full",
        "/dev/random",
        "/dev/urandom",
        "/dev/tty",
        "/dev/pts",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    for p in &plan.extra_write {
        let c = p.canonicalize().unwrap_or_else(|_| p.clone());
        if c.is_dir() {
            writable_dirs.push(c)
        } else {
            writable_files.push(c)
        }
    }
    let proxy_port = match plan.network {
        NetworkPlan::None => None,
        NetworkPlan::Proxy { port } => Some(port),
    };
    Ok(Prepared {
        uid_map: format!("{uid} {uid} 1\n").into_bytes(),
        gid_map: format!("{gid} {gid} 1\n").into_bytes(),
        steps,
        landlock: LandlockPlan {
            abi,
            writable_dirs,
            writable_files,
            proxy_port,
        },
        seccomp,
        fresh: Vec::new(),
        cmd: CommandSpec::new(plan)?,
        rlimits: Rlimits::from_limits(&plan.limits),
        cgroup_procs: cgroup_procs
            .map(|p| cstring("cgroup path", p.as_os_str().as_bytes()))
            .transpose()?,
        proxy_port,
    })
}
