//! Acts on an inode's metadata that change nothing even when they go through: a file's mode set
//! to the mode it has, its owner to the owner it has, its times to the times it has, and an
//! extended attribute set and removed again. The mount's read-only flag answers each (EROFS)
//! before the owner checks do; for a root user, whose uid 0 is the host's, that flag is all that
//! keeps a call from changing the host's /dev/null.

use std::os::unix::fs::MetadataExt;

use super::{USAGE, cstr, errno_result, refused, succeeded};

/// `inode <chmod|chown|times|xattr> <path>`.
pub fn act(what: &str, path: &str) -> i32 {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) => return errno_result::<(), _>(Err(e)),
    };
    let c = cstr(path);
    let rc = match what {
        // SAFETY: NUL-terminated path; the mode it already has.
        "chmod" => unsafe { libc::chmod(c.as_ptr(), meta.mode() & 0o7777) },
        // SAFETY: NUL-terminated path; the owner and group it already has.
        "chown" => unsafe { libc::lchown(c.as_ptr(), meta.uid(), meta.gid()) },
        "times" => {
            let times = [
                libc::timespec {
                    tv_sec: meta.atime(),
                    tv_nsec: meta.atime_nsec(),
                },
                libc::timespec {
                    tv_sec: meta.mtime(),
                    tv_nsec: meta.mtime_nsec(),
                },
            ];
            // SAFETY: NUL-terminated path; two timespecs.
            unsafe {
                libc::utimensat(
                    libc::AT_FDCWD,
                    c.as_ptr(),
                    times.as_ptr(),
                    libc::AT_SYMLINK_NOFOLLOW,
                )
            }
        }
        "xattr" => {
            let name = c"user.chock-hostile";
            // SAFETY: NUL-terminated path and name; a one-byte value.
            let rc =
                unsafe { libc::lsetxattr(c.as_ptr(), name.as_ptr(), c"x".as_ptr().cast(), 1, 0) };
            if rc == 0 {
                // SAFETY: as above.
                unsafe { libc::lremovexattr(c.as_ptr(), name.as_ptr()) };
            }
            rc
        }
        _ => return USAGE,
    };
    if rc == 0 {
        succeeded(&format!("{what} {path}"))
    } else {
        refused(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    }
}
