//! Landlock: the filesystem read-only except the call's writable places, TCP bind and connect
//! refused (ABI 4+) except connect to the proxy port, abstract unix sockets and signals scoped to the
//! call (ABI 6+).
//!
//! The ABI is detected on the host and every feature of that ABI is required ("hard requirement"):
//! if the kernel offers a feature, the call fails rather than run without it. The minimum is ABI 1
//! (filesystem rules): the network and scope features duplicate what the call's own network and pid
//! namespaces already enforce (TCP to the host, the host's abstract sockets and processes are not in
//! those namespaces), so an older kernel loses depth, not a boundary. `chock doctor` reports which.

use std::path::PathBuf;

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, NetPort, PathBeneath, PathFd,
    RestrictionStatus, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};

/// The lowest ABI a call accepts.
pub const MINIMUM_ABI: i32 = 1;

/// The Landlock ABI of the running kernel: 0 when Landlock is absent or disabled, or a negative
/// errno.
pub fn kernel_abi() -> i32 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a NULL attribute, size 0 and the VERSION flag, the call only returns a number.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if rc < 0 {
        -crate::child::sys::errno()
    } else {
        i32::try_from(rc).unwrap_or(i32::MAX)
    }
}

/// Names of the features a given ABI gives a call.
pub fn features(abi: i32) -> Vec<&'static str> {
    let mut f = Vec::new();
    if abi >= 1 {
        f.push("filesystem");
    }
    if abi >= 2 {
        f.push("refer");
    }
    if abi >= 3 {
        f.push("truncate");
    }
    if abi >= 4 {
        f.push("tcp bind/connect");
    }
    if abi >= 5 {
        f.push("device ioctl");
    }
    if abi >= 6 {
        f.push("abstract unix socket and signal scoping");
    }
    if abi >= 7 {
        f.push("audit logging flags");
    }
    if abi >= 9 {
        f.push("unix socket path resolution");
    }
    f
}

/// What the call's ruleset allows, with paths inside the new root.
#[derive(Debug, Clone)]
pub(crate) struct LandlockPlan {
    pub abi: i32,
    /// Directories where the call may create, write and delete.
    pub writable_dirs: Vec<PathBuf>,
    /// Files the call may read, write, truncate and ioctl: the device nodes, /dev/pts, and declared
    /// write paths that are files (directory rights on a file would fail the ruleset).
    pub writable_files: Vec<PathBuf>,
    pub proxy_port: Option<u16>,
}

/// Step codes reported when a rule fails.
pub(crate) const STEP_HANDLE: u32 = 1;
pub(crate) const STEP_CREATE: u32 = 2;
pub(crate) const STEP_RULE: u32 = 3;
pub(crate) const STEP_RESTRICT: u32 = 4;
pub(crate) const STEP_PARTIAL: u32 = 5;

fn fail(step: u32) -> (u32, i32) {
    (step, crate::child::sys::errno())
}

/// Builds and enforces the ruleset on the calling process (the call's init, after pivot_root).
pub(crate) fn apply(plan: &LandlockPlan) -> Result<(), (u32, i32)> {
    let abi = ABI::from(plan.abi);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(abi))
        .map_err(|_| fail(STEP_HANDLE))?;
    if plan.abi >= 4 {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(abi))
            .map_err(|_| fail(STEP_HANDLE))?;
    }
    if plan.abi >= 6 {
        ruleset = ruleset
            .scope(Scope::from_all(abi))
            .map_err(|_| fail(STEP_HANDLE))?;
    }
    let mut created = ruleset.create().map_err(|_| fail(STEP_CREATE))?;
    let read = AccessFs::from_read(abi);
    let root = PathFd::new("/").map_err(|_| fail(STEP_RULE))?;
    created = created
        .add_rule(PathBeneath::new(root, read))
        .map_err(|_| fail(STEP_RULE))?;
    for dir in &plan.writable_dirs {
        let fd = PathFd::new(dir).map_err(|_| fail(STEP_RULE))?;
        created = created
            .add_rule(PathBeneath::new(fd, AccessFs::from_all(abi)))
            .map_err(|_| fail(STEP_RULE))?;
    }
    for file in &plan.writable_files {
        let fd = PathFd::new(file).map_err(|_| fail(STEP_RULE))?;
        created = created
            .add_rule(PathBeneath::new(fd, AccessFs::from_file(abi)))
            .map_err(|_| fail(STEP_RULE))?;
    }
    if let (Some(port), true) = (plan.proxy_port, plan.abi >= 4) {
        created = created
            .add_rule(NetPort::new(port, AccessNet::ConnectTcp))
            .map_err(|_| fail(STEP_RULE))?;
    }
    let status: RestrictionStatus = created.restrict_self().map_err(|_| fail(STEP_RESTRICT))?;
    if status.ruleset != RulesetStatus::FullyEnforced {
        return Err((STEP_PARTIAL, libc::EOPNOTSUPP));
    }
    Ok(())
}

/// Words for a failed step.
pub(crate) fn describe_step(step: u32) -> &'static str {
    match step {
        STEP_HANDLE => "declaring the handled access rights",
        STEP_CREATE => "creating the ruleset",
        STEP_RULE => "adding a rule",
        STEP_RESTRICT => "enforcing the ruleset",
        STEP_PARTIAL => "the kernel enforced the ruleset only partly",
        _ => "unknown step",
    }
}
