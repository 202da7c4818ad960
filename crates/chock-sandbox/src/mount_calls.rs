//! The system calls that make each mount step (see `mounts.rs` for which steps, in which order).
//! Run in the call's init, inside its user and mount namespaces; allocation-free.

use std::ffi::CStr;

use crate::mounts::Op;
use crate::sys::{check, errno};

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

/// The flags of the mount at `target` that a user namespace may not clear (the kernel locks them),
/// to be repeated on a remount.
fn locked_flags(target: &CStr) -> Result<libc::c_ulong, i32> {
    // SAFETY: statvfs is plain data; zero is a valid initial value.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `target` is NUL-terminated; `st` is a valid out pointer.
    check(unsafe { libc::statvfs(target.as_ptr(), &raw mut st) })?;
    let map = [
        (libc::ST_NOSUID, libc::MS_NOSUID),
        (libc::ST_NODEV, libc::MS_NODEV),
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (libc::ST_RELATIME, libc::MS_RELATIME),
        (libc::ST_RDONLY, libc::MS_RDONLY),
    ];
    Ok(map
        .iter()
        .filter(|(st_flag, _)| st.f_flag & st_flag != 0)
        .fold(0, |acc, (_, ms)| acc | ms))
}

fn remount(target: &CStr, readonly: bool, devices: bool) -> Result<(), i32> {
    let mut flags = libc::MS_BIND | libc::MS_REMOUNT | libc::MS_NOSUID | locked_flags(target)?;
    if readonly {
        flags |= libc::MS_RDONLY;
    }
    if !devices {
        flags |= libc::MS_NODEV;
    }
    mount(None, target, None, flags, None)
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
        Op::Touch { path } => {
            // SAFETY: NUL-terminated path; the descriptor is closed right away.
            let fd = unsafe {
                libc::open(
                    path.as_ptr(),
                    libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
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
            remount(target, *readonly, *devices)
        }
        Op::Symlink { text, link } => {
            // SAFETY: NUL-terminated strings.
            check(unsafe { libc::symlink(text.as_ptr(), link.as_ptr()) })
        }
        Op::Overlay { target, data } => mount(
            Some(c"overlay"),
            target,
            Some(c"overlay"),
            libc::MS_NOSUID | libc::MS_NODEV,
            Some(data),
        ),
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
        Op::DropOldRoot => {
            // SAFETY: constant path.
            check(unsafe { libc::umount2(c"/oldroot".as_ptr(), libc::MNT_DETACH) })?;
            // SAFETY: constant path.
            check(unsafe { libc::rmdir(c"/oldroot".as_ptr()) })
        }
        Op::RemountReadonly { target } => remount(target, true, false),
    }
}
