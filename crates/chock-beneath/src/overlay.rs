//! What the kernel's overlayfs leaves in an upper directory, read by descriptor.
//!
//! Checked on 6.18 with `unshare -Urm` and `-o userxattr`: a deleted path is a whiteout, a
//! character device 0/0 (or, on kernels that make xattr whiteouts, an empty regular file marked
//! `user.overlay.whiteout`); a directory that replaced one of the lower layer is marked opaque with
//! `user.overlay.opaque="y"` (`trusted.overlay.opaque` when real root mounted it without
//! `userxattr`).

use std::ffi::OsStr;

use rustix::fs::FileType;

use crate::dir::{Dir, Meta};

/// Whether `name` in `dir`, whose `lstat` is `meta`, is an overlay whiteout.
pub fn is_whiteout(dir: &Dir, name: &OsStr, meta: &Meta) -> bool {
    match meta.kind {
        FileType::CharacterDevice => meta.rdev == 0,
        FileType::RegularFile => {
            meta.size == 0 && dir.xattr_is(Some(name), "user.overlay.whiteout", None)
        }
        _ => false,
    }
}

/// Whether directory `dir` is opaque: it hides everything the lower layer had there.
pub fn is_opaque(dir: &Dir) -> bool {
    ["user.overlay.opaque", "trusted.overlay.opaque"]
        .iter()
        .any(|attr| dir.xattr_is(None, attr, Some(b"y")))
}
