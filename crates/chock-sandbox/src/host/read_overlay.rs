//! Declared `[sandbox]` read directories, shown through a read-only overlay of their own.
//!
//! A read-only bind shows the host's inodes, and `connect(2)` on a host socket among them reaches
//! the daemon behind it: a read-only mount does not stop it, Landlock below ABI 9 has no right
//! for it, and seccomp cannot see the path. An overlay shows inodes of its own instead: a socket
//! in a lower layer is an overlay inode no socket is bound to, so `connect` there answers
//! `ECONNREFUSED`, for the sockets that exist when the call starts and for every one bound later,
//! while it runs. So a read directory needs no walk for sockets (a 120,000-entry toolchain cost
//! about 100 ms per session) and no watch, and has no size limit. Declared write paths and read
//! paths that are files are still bound, with their sockets masked (`socket_mask.rs`).
//!
//! overlayfs wants two lower layers when it has no upper one: the second is an empty directory.
//! Its dentries are the overlay's own, and it does not look again at a lower directory it has
//! looked up (a name missing once stays missing): a session sandbox's tree is therefore never
//! what a call sees. Each call covers every read overlay of the tree with a fresh one
//! (`fresh.rs`), made from host binds the tree keeps under its `/tmp` for that, which the
//! call's own `/tmp` then covers. Inside one call, what the host changes under a read path after
//! the call looked it up may not show until the next call.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::host::mounts::builder::Builder;
use crate::wire::error::{Layer, SandboxError};
use crate::wire::mount_ops::{Op, cstr};

/// The empty layer of a call built on its own: a directory of the fresh root under `/proc`, so the
/// `/proc` mounted after it hides it. It is never removed: an overlay whose lower directory is
/// gone lists as empty.
const CALL_EMPTY_LAYER: &str = "/proc/.chock-empty-layer";

/// Where a call built on its own binds each host directory it shows through a read overlay: under
/// `/proc` too, hidden by it.
const CALL_LAYERS: &str = "/proc/.chock-layers";

/// Where a session sandbox's tree keeps what each call makes its read overlays from: a read-only
/// bind of each host directory and the empty layer, in the tree's `/tmp` (each call covers it
/// with its own and carries nothing of this over).
pub(crate) const SESSION_LAYERS: &str = "/tmp/.chock-layers";

/// The read overlays of one tree, in the order they are pushed.
pub(crate) struct Layers {
    session: bool,
    count: usize,
}

impl Layers {
    /// `session`: the tree is a session sandbox's (its calls make fresh overlays from it).
    pub(crate) fn new(session: bool) -> Layers {
        Layers { session, count: 0 }
    }

    /// The steps that show the host directory `lower` (symlinks resolved) at `target`.
    pub(crate) fn push(
        &mut self,
        b: &mut Builder,
        lower: &Path,
        target: &Path,
    ) -> Result<(), SandboxError> {
        let fs = Layer::Filesystem;
        // The host directory is first bound, through a descriptor opened without following any
        // link (`Op::BindDeclared`), where the overlay takes it as a layer: an overlay's
        // `lowerdir` is a path the kernel would resolve again, links and all.
        let (dir, empty) = if self.session {
            (
                PathBuf::from(SESSION_LAYERS),
                PathBuf::from(SESSION_LAYERS).join("empty"),
            )
        } else {
            (PathBuf::from(CALL_LAYERS), PathBuf::from(CALL_EMPTY_LAYER))
        };
        let bound = dir.join(self.count.to_string());
        if self.count == 0 {
            b.mkdirs(&empty, fs)?;
        }
        b.mkdirs(&bound, fs)?;
        b.push(
            Op::BindDeclared {
                source: crate::wire::mount_ops::under_old_root(lower)?,
                target: cstr(bound.as_os_str().as_bytes())?,
                readonly: true,
            },
            fs,
            format!(
                "ro bind {} -> {} (a layer)",
                lower.display(),
                bound.display()
            ),
        );
        let lower_layer = bound;
        self.count += 1;
        b.mkdirs(target, fs)?;
        let op = Op::Overlay {
            target: cstr(target.as_os_str().as_bytes())?,
            data: lowerdir(&lower_layer, &empty)?,
            readonly: true,
        };
        b.push(op, fs, format!("ro overlay {}", target.display()));
        Ok(())
    }
}

/// Whether `p` is one of a session tree's layer mounts, which a call covers and never carries.
pub(crate) fn is_session_layer(p: &Path) -> bool {
    p.starts_with(SESSION_LAYERS)
}

/// The `lowerdir` option of a read overlay: `upper` over `lower` (each escaped).
fn lowerdir(upper: &Path, lower: &Path) -> Result<CString, SandboxError> {
    let mut out = b"lowerdir=".to_vec();
    crate::host::mounts::builder::escape_layer(&mut out, upper);
    out.push(b':');
    crate::host::mounts::builder::escape_layer(&mut out, lower);
    cstr(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_separator_in_a_layer_path_is_escaped() {
        let data = lowerdir(Path::new("/oldroot/a:b,c\\d"), Path::new("/e")).unwrap();
        assert_eq!(data.to_bytes(), b"lowerdir=/oldroot/a\\:b\\,c\\\\d:/e");
    }
}
