//! The system calls that make each mount step (see `mounts.rs` for which steps, in which order).
//! Run in the call's init, inside its user and mount namespaces; allocation-free.

use std::ffi::CStr;

use crate::child::sys::{check, errno};
use crate::wire::mount_ops::Op;

fn mount(
    source: Option<&CStr>,
    target: &CStr,
    fstype: Option<&CStr>,
    flags: libc::c_ulong,
    data: Option<&CStr>,
) -> Result<(), i32> {
    let ptr = |c: Option<&CStr>| c.map_or(std::ptr::null(), CStr::as_ptr);
    // SAFETY: every pointer is NULL or a NUL-terminated string that outlives the call.
    check(unsafe {
        libc::mount(
            ptr(source),
            target.as_ptr(),
            ptr(fstype),
            flags,
            ptr(data).cast(),
        )
    })
}

/// Makes the one mount at `target` nosuid, and read-only and nodev as asked: `mount_setattr`
/// (Linux 5.12) on that mount alone, no `AT_RECURSIVE`. It only ever adds attributes, so the
/// flags the kernel locks on a mount that came from a more privileged namespace stay as they are,
/// without reading them first as a remount must (it would clear what it does not repeat).
fn restrict(target: &CStr, readonly: bool, devices: bool) -> Result<(), i32> {
    let mut set = libc::MOUNT_ATTR_NOSUID;
    if readonly {
        set |= libc::MOUNT_ATTR_RDONLY;
    }
    if !devices {
        set |= libc::MOUNT_ATTR_NODEV;
    }
    let attr = libc::mount_attr {
        attr_set: set,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: `target` is NUL-terminated; `attr` is a valid mount_attr of the size passed.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            target.as_ptr(),
            0,
            &raw const attr,
            std::mem::size_of::<libc::mount_attr>(),
        )
    };
    if rc == 0 { Ok(()) } else { Err(errno()) }
}

/// `fstat` of a descriptor.
fn fstat(fd: libc::c_int) -> Result<libc::stat, i32> {
    // SAFETY: stat is plain data; zero is a valid initial value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is open; `st` is a valid out pointer.
    check(unsafe { libc::fstat(fd, &raw mut st) })?;
    Ok(st)
}

/// A mount point for a file. An existing entry is used as it is (opened `O_PATH`, which on an
/// overlay workspace is not a write and copies nothing up), unless it is a symlink (`ELOOP`): a
/// bind onto it would land wherever it points. A missing one is created without write access.
fn touch(path: &CStr) -> Result<(), i32> {
    // SAFETY: NUL-terminated path; the descriptor is closed right away.
    let fd = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd >= 0 {
        let st = fstat(fd);
        // SAFETY: `fd` was just opened.
        unsafe { libc::close(fd) };
        return match st {
            Ok(st) if st.st_mode & libc::S_IFMT == libc::S_IFLNK => Err(libc::ELOOP),
            Ok(_) => Ok(()),
            Err(e) => Err(e),
        };
    }
    let e = errno();
    if e != libc::ENOENT {
        return Err(e);
    }
    // SAFETY: NUL-terminated path; the descriptor is closed right away.
    let fd = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_CREAT | libc::O_EXCL | libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0o644,
        )
    };
    if fd < 0 {
        let e = errno();
        return if e == libc::EEXIST { Ok(()) } else { Err(e) };
    }
    // SAFETY: `fd` was just opened.
    unsafe { libc::close(fd) };
    Ok(())
}

/// `open(path, flags)` without following a symlink in the last component, close-on-exec: the
/// descriptor, or the errno.
fn open_nofollow(path: &CStr, flags: libc::c_int) -> Result<libc::c_int, i32> {
    // SAFETY: NUL-terminated path; the caller owns and closes the descriptor.
    let fd = unsafe { libc::open(path.as_ptr(), flags | libc::O_NOFOLLOW | libc::O_CLOEXEC) };
    if fd < 0 { Err(errno()) } else { Ok(fd) }
}

/// Copies the regular file `source` to the new file `target` with `sendfile` (no buffer: the init
/// does not allocate), keeping the source's permission bits (the tree is built under umask 0). A
/// symlink at `source` (`ELOOP`) or anything but a regular file (`EINVAL`) fails the step.
fn copy_file(source: &CStr, target: &CStr) -> Result<(), i32> {
    let src = open_nofollow(source, libc::O_RDONLY)?;
    let copied = copy_from(src, target);
    // SAFETY: `src` was opened above and is closed once.
    unsafe { libc::close(src) };
    copied
}

fn copy_from(src: libc::c_int, target: &CStr) -> Result<(), i32> {
    let st = fstat(src)?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(libc::EINVAL);
    }
    // SAFETY: NUL-terminated path.
    let dst = unsafe {
        libc::open(
            target.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            st.st_mode & 0o777,
        )
    };
    if dst < 0 {
        return Err(errno());
    }
    let mut result = Ok(());
    loop {
        // SAFETY: both descriptors are open; a null offset reads from the source's position.
        let n = unsafe { libc::sendfile(dst, src, std::ptr::null_mut(), 1 << 20) };
        if n == 0 {
            break;
        }
        if n < 0 {
            let e = errno();
            if e != libc::EINTR {
                result = Err(e);
                break;
            }
        }
    }
    if result.is_ok() {
        // The copy keeps the source's times too, as a bind would show them.
        let times = [
            libc::timespec {
                tv_sec: st.st_atime,
                tv_nsec: st.st_atime_nsec,
            },
            libc::timespec {
                tv_sec: st.st_mtime,
                tv_nsec: st.st_mtime_nsec,
            },
        ];
        // SAFETY: `dst` is open; `times` holds the two timespecs futimens reads.
        result = check(unsafe { libc::futimens(dst, times.as_ptr()) });
    }
    // SAFETY: `dst` was opened above and is closed once.
    unsafe { libc::close(dst) };
    result
}

/// `/oldroot/proc/self/fd/<fd>` in a stack buffer (the init does not allocate).
fn proc_fd_path(fd: libc::c_int, buf: &mut [u8; 48]) -> Result<&CStr, i32> {
    crate::child::sys::fd_path_in(b"/oldroot/proc/self/fd/", fd, buf).ok_or(libc::EBADF)
}

/// Binds the policy file through a descriptor: opened without following a symlink in its last
/// component, checked to be the same regular file (device and inode) the host checked before
/// fork, then bound by naming the descriptor, so no later path lookup can redirect the bind.
/// A mismatch fails the step with `ELOOP`.
fn bind_policy(source: &CStr, target: &CStr, dev: u64, ino: u64) -> Result<(), i32> {
    // Closed below on every path.
    let fd = open_nofollow(source, libc::O_PATH)?;
    let result = fstat(fd).and_then(|st| {
        let regular = st.st_mode & libc::S_IFMT == libc::S_IFREG;
        if !regular || st.st_dev != dev || st.st_ino != ino {
            return Err(libc::ELOOP);
        }
        let mut buf = [0u8; 48];
        let by_fd = proc_fd_path(fd, &mut buf)?;
        mount(Some(by_fd), target, None, libc::MS_BIND, None)
    });
    // SAFETY: `fd` was opened above and is closed once.
    unsafe { libc::close(fd) };
    result
}

/// Binds a declared host path through a descriptor opened with `openat2(RESOLVE_NO_SYMLINKS)`:
/// the host resolved every link on the path when it built the plan, so a link found on it now
/// was put there since (by something that could write beside it) and fails the step with
/// `ELOOP`; the bind then names the descriptor, never the path again.
fn bind_declared(source: &CStr, target: &CStr) -> Result<(), i32> {
    /// The kernel's `struct open_how` (libc's is non-exhaustive).
    #[repr(C)]
    struct OpenHow {
        flags: u64,
        mode: u64,
        resolve: u64,
    }
    let how = OpenHow {
        flags: u64::try_from(libc::O_PATH | libc::O_CLOEXEC).unwrap_or(0),
        mode: 0,
        resolve: libc::RESOLVE_NO_SYMLINKS,
    };
    // SAFETY: openat2 with a NUL-terminated path and a valid open_how of the size passed; the
    // descriptor it returns is closed below.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            libc::AT_FDCWD,
            source.as_ptr(),
            &raw const how,
            std::mem::size_of::<OpenHow>(),
        )
    };
    let Ok(fd) = libc::c_int::try_from(rc) else {
        return Err(libc::EBADF);
    };
    if fd < 0 {
        return Err(errno());
    }
    let mut buf = [0u8; 48];
    let result = proc_fd_path(fd, &mut buf)
        .and_then(|by_fd| mount(Some(by_fd), target, None, libc::MS_BIND, None));
    // SAFETY: `fd` was opened above and is closed once.
    unsafe { libc::close(fd) };
    result
}

/// Attaches a clone of the detached overlay mount `fd` (the session's one instance) at `target`:
/// `open_tree(OPEN_TREE_CLONE)` makes a new mount of the same superblock, `move_mount` attaches it
/// to this mount namespace. The same instance is cloned by every call, so all of them see one
/// filesystem. A refusal fails the step: there is no per-call overlay to fall back to.
pub(crate) fn attach_overlay(fd: libc::c_int, target: &CStr) -> Result<(), i32> {
    const OPEN_TREE_CLONE: libc::c_uint = 0x1;
    const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
    if fd < 0 {
        return Err(libc::EBADF);
    }
    let flags =
        OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint | libc::AT_EMPTY_PATH as libc::c_uint;
    // SAFETY: open_tree on a descriptor with an empty NUL-terminated path; the result is a new
    // descriptor, closed below.
    let tree = unsafe { libc::syscall(libc::SYS_open_tree, fd, c"".as_ptr(), flags) };
    let Ok(tree) = libc::c_int::try_from(tree) else {
        return Err(libc::EBADF);
    };
    if tree < 0 {
        return Err(errno());
    }
    // SAFETY: move_mount of our own detached clone onto a NUL-terminated target path.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree,
            c"".as_ptr(),
            libc::AT_FDCWD,
            target.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    };
    let result = if rc == 0 { Ok(()) } else { Err(errno()) };
    // SAFETY: `tree` was opened above and is closed once.
    unsafe { libc::close(tree) };
    result
}

/// Detaches the mount at `target` (`MNT_DETACH`) and removes its mount point.
fn detach(target: &CStr) -> Result<(), i32> {
    // SAFETY: NUL-terminated path.
    check(unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) })?;
    // SAFETY: as above.
    check(unsafe { libc::rmdir(target.as_ptr()) })
}

/// Runs one step. Called in the call's init, inside its namespaces. Allocation-free.
pub(crate) fn apply(op: &Op) -> Result<(), i32> {
    match op {
        Op::MakePrivate => mount(None, c"/", None, libc::MS_REC | libc::MS_PRIVATE, None),
        Op::EnterNewRoot => {
            mount(
                Some(c"tmpfs"),
                c"/tmp",
                Some(c"tmpfs"),
                libc::MS_NOSUID | libc::MS_NODEV,
                Some(c"mode=755,size=8388608"),
            )?;
            // SAFETY: constant NUL-terminated paths.
            check(unsafe { libc::chdir(c"/tmp".as_ptr()) })?;
            // SAFETY: as above.
            check(unsafe { libc::mkdir(c"oldroot".as_ptr(), 0o700) })?;
            // SAFETY: pivot_root takes two NUL-terminated paths.
            let rc =
                unsafe { libc::syscall(libc::SYS_pivot_root, c".".as_ptr(), c"oldroot".as_ptr()) };
            if rc != 0 {
                return Err(errno());
            }
            // SAFETY: constant path.
            check(unsafe { libc::chdir(c"/".as_ptr()) })
        }
        Op::Mkdir { path, mode } => {
            // SAFETY: NUL-terminated path.
            match check(unsafe { libc::mkdir(path.as_ptr(), *mode) }) {
                Err(libc::EEXIST) | Ok(()) => Ok(()),
                Err(e) => Err(e),
            }
        }
        Op::Touch { path } => touch(path),
        Op::CopyFile { source, target } => copy_file(source, target),
        Op::Tmpfs {
            target,
            data,
            flags,
        } => mount(Some(c"tmpfs"), target, Some(c"tmpfs"), *flags, Some(data)),
        Op::Bind {
            source,
            target,
            readonly,
            devices,
        } => {
            mount(Some(source), target, None, libc::MS_BIND, None)?;
            restrict(target, *readonly, *devices)
        }
        Op::BindDeclared {
            source,
            target,
            readonly,
        } => {
            bind_declared(source, target)?;
            restrict(target, *readonly, false)
        }
        Op::BindPolicy {
            source,
            target,
            dev,
            ino,
        } => {
            bind_policy(source, target, *dev, *ino)?;
            restrict(target, true, false)
        }
        Op::Unlink { path } => {
            // SAFETY: NUL-terminated path.
            check(unsafe { libc::unlink(path.as_ptr()) })
        }
        Op::Rmdir { path } => {
            // SAFETY: NUL-terminated path.
            check(unsafe { libc::rmdir(path.as_ptr()) })
        }
        Op::Symlink { text, link } => {
            // SAFETY: NUL-terminated strings.
            check(unsafe { libc::symlink(text.as_ptr(), link.as_ptr()) })
        }
        Op::Overlay {
            target,
            data,
            readonly,
        } => {
            let ro = if *readonly { libc::MS_RDONLY } else { 0 };
            mount(
                Some(c"overlay"),
                target,
                Some(c"overlay"),
                libc::MS_NOSUID | libc::MS_NODEV | ro,
                Some(data),
            )
        }
        Op::AttachOverlay { fd, target } => attach_overlay(*fd, target),
        Op::Proc { target } => {
            let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
            mount(Some(c"proc"), target, Some(c"proc"), flags, None)
        }
        Op::Devpts { target } => {
            let flags = libc::MS_NOSUID | libc::MS_NOEXEC;
            mount(
                Some(c"devpts"),
                target,
                Some(c"devpts"),
                flags,
                Some(c"newinstance,ptmxmode=0666,mode=620"),
            )
        }
        Op::DropOldRoot => detach(c"/oldroot"),
        Op::Detach { target } => detach(target),
        Op::RequireUserXattr { path } => {
            let name = c"user.chock.probe";
            // SAFETY: NUL-terminated path and name; a zero-length value from a valid pointer.
            check(unsafe {
                libc::setxattr(path.as_ptr(), name.as_ptr(), c"".as_ptr().cast(), 0, 0)
            })?;
            // SAFETY: as above.
            check(unsafe { libc::removexattr(path.as_ptr(), name.as_ptr()) })
        }
        Op::RemountReadonly { target } => restrict(target, true, false),
    }
}
