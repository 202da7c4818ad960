//! The operations a call's fresh root is built from, as data: what `mounts.rs` plans on the host and
//! `mount_calls.rs` (or `fresh.rs`, in a session sandbox) carries out inside the call's namespaces.
//! A leaf module, so the planner and the executors share the types without depending on each other.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::wire::error::{Layer, SandboxError};

/// Where the host's root is reachable while the tree is built.
pub(crate) const OLD_ROOT: &str = "/oldroot";

/// One mount operation. Paths are final (sources under [`OLD_ROOT`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Op {
    /// Make every mount of the new mount namespace private.
    MakePrivate,
    /// tmpfs on /tmp, pivot into it, old root at /oldroot.
    EnterNewRoot,
    Mkdir {
        path: CString,
        mode: libc::mode_t,
    },
    Touch {
        path: CString,
    },
    Tmpfs {
        target: CString,
        data: CString,
        flags: libc::c_ulong,
    },
    Bind {
        source: CString,
        target: CString,
        readonly: bool,
        devices: bool,
    },
    /// A path a table declared (`[sandbox]` read or write, an MCP server's `read` or `cache`),
    /// bound through a descriptor: `source` is the path the host resolved when it built the plan,
    /// opened with `RESOLVE_NO_SYMLINKS`, so a symlink anywhere on it now was swapped in since and
    /// fails the step (`ELOOP`) instead of redirecting the bind; the bind names the descriptor.
    BindDeclared {
        source: CString,
        target: CString,
        readonly: bool,
    },
    /// The policy file, bound read-only over itself through a descriptor: `source` is opened
    /// without following a symlink, must still be the regular file `dev`/`ino` the host checked,
    /// and the bind names the descriptor (`/proc/self/fd/N`), never the path again.
    BindPolicy {
        source: CString,
        target: CString,
        dev: u64,
        ino: u64,
    },
    Symlink {
        text: CString,
        link: CString,
    },
    /// A copy of the host's regular file `source` (under the old root, opened without following
    /// a symlink) as the new file `target`, with the source's permission bits: for the small
    /// /etc files of the base set, a file written into the fresh root (read-only once the tree is
    /// built) costs a third of a bind mount.
    CopyFile {
        source: CString,
        target: CString,
    },
    /// Remove a file of the new tree (the socket masks' source, once they are bound), or the
    /// last volatile overlay's mark.
    Unlink {
        path: CString,
    },
    /// Remove an empty directory (the last volatile overlay's mark).
    Rmdir {
        path: CString,
    },
    Overlay {
        target: CString,
        data: CString,
        /// A declared read path's overlay (lower layers only): mounted read-only.
        readonly: bool,
    },
    /// Attach a clone of the session's shared overlay (the detached mount at host descriptor `fd`,
    /// inherited by the init) at `target`.
    AttachOverlay {
        fd: libc::c_int,
        target: CString,
    },
    Proc {
        target: CString,
    },
    Devpts {
        target: CString,
    },
    /// Detach the mount at `target` from the tree (what holds it, an overlay's upper layer,
    /// keeps it) and remove its mount point.
    Detach {
        target: CString,
    },
    /// Set and remove an extended attribute in the `user.` namespace on `path`: fails where the
    /// filesystem keeps none (an in-memory upper layer on tmpfs before Linux 6.6).
    RequireUserXattr {
        path: CString,
    },
    /// Detach /oldroot and remove its mount point.
    DropOldRoot,
    /// Remount a mount point read-only in place.
    RemountReadonly {
        target: CString,
    },
}

/// One step: the operation, the layer it belongs to, and what it is in words.
#[derive(Debug, Clone)]
pub(crate) struct Step {
    pub op: Op,
    pub layer: Layer,
    pub label: String,
    /// A missing source (ENOENT) skips the step instead of failing it.
    pub optional: bool,
}

pub(crate) fn cstr(p: impl AsRef<[u8]>) -> Result<CString, SandboxError> {
    CString::new(p.as_ref()).map_err(|_| SandboxError::Plan("a path contains a NUL byte".into()))
}

/// A host path as the call's init reaches it while the tree is built: under [`OLD_ROOT`].
pub(crate) fn old_root_path(p: &Path) -> PathBuf {
    Path::new(OLD_ROOT).join(p.strip_prefix("/").unwrap_or(p))
}

/// [`old_root_path`] as a C string, for a mount step.
pub(crate) fn under_old_root(p: &Path) -> Result<CString, SandboxError> {
    cstr(old_root_path(p).as_os_str().as_bytes())
}
