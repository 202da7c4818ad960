//! A call's own mounts in a session sandbox: the writable places that are not the workspace.
//!
//! A session sandbox's tree (`session_sandbox.rs`) is shared by its calls, each of which runs in a
//! copy of its mount namespace. A copy of a mount is the same filesystem, so a tmpfs of the tree
//! would carry files from one call to the next. Each call therefore covers every such mount with a
//! fresh one before anything of it runs: `/tmp` and the home (the plan's tmpfs mounts), `/dev/shm`,
//! a private devpts on `/dev/pts`, a `/proc` of the call's own pid namespace (with the machine-wide
//! knobs read-only again), and, for a shared overlay workspace, a clone of the session's current
//! instance over the tree's empty placeholder. Mounts the tree holds below a covered one (a
//! declared path under the home, the project under `/tmp`, the policy file over the workspace) are
//! carried over: taken by descriptor before the cover (`open_tree` without a clone names the
//! attached mount itself), their mount points made again in the fresh filesystem as the tree made
//! them, and moved there (`move_mount`). Nothing is read from the host: the tree's binds are
//! the ones the session init made and checked.
//!
//! Built on the host from the tree's steps; applied in the call's init, allocation-free.

use std::ffi::{CStr, CString};
use std::os::fd::RawFd;
use std::path::PathBuf;

use crate::child::mount_calls;
use crate::child::sys::{check, errno};
use crate::wire::error::Layer;
use crate::wire::mount_ops::Op;

/// What a plan's fresh mount is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FreshKind {
    Tmpfs,
    SharedOverlay,
    /// A declared read directory's overlay, made again from the tree's layers
    /// (`read_overlay.rs`): a fresh one looks at the host again.
    ReadOverlay,
}

/// One mount of the session tree that each call replaces (besides the fixed `/dev/shm`,
/// `/dev/pts` and `/proc`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FreshRoot {
    pub target: PathBuf,
    pub kind: FreshKind,
}

/// The most mounts directly below one covered mount that a call carries over; a plan with more is
/// built the per-call way.
pub(crate) const MAX_CHILDREN: usize = 32;

/// What covers a mount of the tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Cover {
    /// A tmpfs, devpts or proc, as the tree's own step made it.
    Mount(Op),
    /// A clone of the session's shared overlay (the descriptor the call was handed).
    SharedOverlay,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FreshOp {
    /// Take `children` by descriptor, cover `target`, make `points` again, move the children back.
    Cover {
        target: CString,
        mount: Cover,
        children: Vec<CString>,
        points: Vec<Op>,
    },
    /// One ordinary step (the read-only binds on the fresh /proc).
    Plain(Op),
}

#[derive(Debug, Clone)]
pub(crate) struct FreshStep {
    pub op: FreshOp,
    pub layer: Layer,
    pub label: String,
    /// A missing source (ENOENT) skips the step.
    pub optional: bool,
}

/// Runs one fresh step in the call's init (its own copy of the session's mount namespace).
/// `overlay` is the call's descriptor of the shared overlay. Allocation-free.
pub(crate) fn apply(op: &FreshOp, overlay: Option<RawFd>) -> Result<(), i32> {
    match op {
        FreshOp::Plain(op) => mount_calls::apply(op),
        FreshOp::Cover {
            target,
            mount,
            children,
            points,
        } => {
            if children.len() > MAX_CHILDREN {
                return Err(libc::E2BIG);
            }
            let mut fds = [-1; MAX_CHILDREN];
            let result = cover(target, mount, children, points, overlay, &mut fds);
            for fd in fds.iter().filter(|fd| **fd >= 0) {
                // SAFETY: descriptors opened by `cover`, closed once.
                unsafe { libc::close(*fd) };
            }
            result
        }
    }
}

fn cover(
    target: &CStr,
    mount: &Cover,
    children: &[CString],
    points: &[Op],
    overlay: Option<RawFd>,
    fds: &mut [RawFd; MAX_CHILDREN],
) -> Result<(), i32> {
    const OPEN_TREE_CLOEXEC: libc::c_uint = libc::O_CLOEXEC as libc::c_uint;
    const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
    for (fd, child) in fds.iter_mut().zip(children) {
        // SAFETY: open_tree without OPEN_TREE_CLONE: a descriptor of the attached mount at a
        // NUL-terminated path; closed by the caller.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_open_tree,
                libc::AT_FDCWD,
                child.as_ptr(),
                OPEN_TREE_CLOEXEC | libc::AT_SYMLINK_NOFOLLOW as libc::c_uint,
            )
        };
        *fd = RawFd::try_from(rc).map_err(|_| libc::EBADF)?;
        if *fd < 0 {
            return Err(errno());
        }
    }
    match mount {
        Cover::Mount(op) => mount_calls::apply(op)?,
        Cover::SharedOverlay => mount_calls::attach_overlay(overlay.unwrap_or(-1), target)?,
    }
    for p in points {
        mount_calls::apply(p)?;
    }
    for (fd, child) in fds.iter().zip(children) {
        // SAFETY: move_mount of a mount of this namespace (by descriptor) onto a NUL-terminated
        // path.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_move_mount,
                *fd,
                c"".as_ptr(),
                libc::AT_FDCWD,
                child.as_ptr(),
                MOVE_MOUNT_F_EMPTY_PATH,
            )
        };
        check(if rc == 0 { 0 } else { -1 })?;
    }
    Ok(())
}
