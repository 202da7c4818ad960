//! Raw system calls the seccomp table kills or refuses by argument, each with arguments that
//! change nothing on the host should the call go through: the kill list, the set-id modes, the
//! i386 entry point, and `clone`/`clone3` with namespace flags.

use std::os::fd::AsRawFd;

use super::{
    INCONCLUSIVE, REFUSED, USAGE, cstr, int, open_fd, ptr, raw_result, refused, succeeded, sys,
};

/// The raw system calls of the seccomp kill list, each with harmless arguments.
pub(super) fn syscall(name: &str) -> i32 {
    let ret: libc::c_long = match name {
        "ptrace" => sys(
            libc::SYS_ptrace,
            &[int(libc::PTRACE_TRACEME), int(0), int(0), int(0)],
        ),
        "process_vm_readv" | "process_vm_writev" => {
            let mut buf = [0u8; 8];
            let mut other = [7u8; 8];
            let local = libc::iovec {
                iov_base: buf.as_mut_ptr().cast(),
                iov_len: buf.len(),
            };
            let remote = libc::iovec {
                iov_base: other.as_mut_ptr().cast(),
                iov_len: other.len(),
            };
            let nr = if name == "process_vm_readv" {
                libc::SYS_process_vm_readv
            } else {
                libc::SYS_process_vm_writev
            };
            sys(
                nr,
                &[
                    int(std::process::id()),
                    ptr(&local as *const _),
                    int(1),
                    ptr(&remote as *const _),
                    int(1),
                    int(0),
                ],
            )
        }
        "bpf" => {
            let attr = [0u8; 128];
            // BPF_MAP_CREATE with a zeroed attribute: EINVAL when allowed.
            sys(
                libc::SYS_bpf,
                &[int(0), ptr(attr.as_ptr()), int(attr.len())],
            )
        }
        "perf_event_open" => {
            let mut attr = [0u8; 128];
            attr[4] = 128; // size field (u32 at offset 4), little or big endian both non-zero.
            sys(
                libc::SYS_perf_event_open,
                &[ptr(attr.as_ptr()), int(0), int(-1), int(-1), int(0)],
            )
        }
        "userfaultfd" => sys(libc::SYS_userfaultfd, &[int(libc::O_CLOEXEC)]),
        "io_uring_setup" => {
            let params = [0u8; 120];
            sys(libc::SYS_io_uring_setup, &[int(1), ptr(params.as_ptr())])
        }
        "io_uring_enter" => sys(
            libc::SYS_io_uring_enter,
            &[int(-1), int(0), int(0), int(0), int(0), int(0)],
        ),
        "io_uring_register" => sys(
            libc::SYS_io_uring_register,
            &[int(-1), int(0), int(0), int(0)],
        ),
        // KEYCTL_GET_KEYRING_ID of the session keyring, without creating it.
        "keyctl" => sys(libc::SYS_keyctl, &[int(0), int(-3), int(0)]),
        "add_key" => {
            let (t, d, p) = (cstr("user"), cstr("chock-hostile"), b"x");
            sys(
                libc::SYS_add_key,
                &[
                    ptr(t.as_ptr()),
                    ptr(d.as_ptr()),
                    ptr(p.as_ptr()),
                    int(1),
                    int(-2),
                ],
            )
        }
        "request_key" => {
            let (t, d) = (cstr("user"), cstr("chock-hostile-absent"));
            sys(
                libc::SYS_request_key,
                &[ptr(t.as_ptr()), ptr(d.as_ptr()), int(0), int(0)],
            )
        }
        // A kexec with an impossible architecture in the flags: EINVAL even with CAP_SYS_BOOT.
        "kexec_load" => sys(
            libc::SYS_kexec_load,
            &[int(0), int(0), int(0), int(0xffff_0000_u64)],
        ),
        "kexec_file_load" => sys(
            libc::SYS_kexec_file_load,
            &[int(-1), int(-1), int(0), int(0), int(0)],
        ),
        "init_module" => {
            let p = cstr("");
            sys(libc::SYS_init_module, &[int(0), int(0), ptr(p.as_ptr())])
        }
        "finit_module" => {
            let p = cstr("");
            sys(libc::SYS_finit_module, &[int(-1), ptr(p.as_ptr()), int(0)])
        }
        "delete_module" => {
            let n = cstr("chock_hostile_absent");
            sys(
                libc::SYS_delete_module,
                &[ptr(n.as_ptr()), int(libc::O_NONBLOCK)],
            )
        }
        "mount" => {
            let dir = format!("/tmp/chock-hostile-mnt-{}", std::process::id());
            let _ = std::fs::create_dir_all(&dir);
            let (src, target, fstype) = (cstr("none"), cstr(&dir), cstr("tmpfs"));
            let r = sys(
                libc::SYS_mount,
                &[
                    ptr(src.as_ptr()),
                    ptr(target.as_ptr()),
                    ptr(fstype.as_ptr()),
                    int(0),
                    int(0),
                ],
            );
            if r == 0 {
                // Undo it at once: harmless even where the mount namespace is missing.
                sys(
                    libc::SYS_umount2,
                    &[ptr(target.as_ptr()), int(libc::MNT_DETACH)],
                );
            }
            r
        }
        "umount2" => {
            let t = cstr("/chock-hostile-absent");
            sys(libc::SYS_umount2, &[ptr(t.as_ptr()), int(0)])
        }
        "pivot_root" => {
            let t = cstr("/chock-hostile-absent");
            sys(libc::SYS_pivot_root, &[ptr(t.as_ptr()), ptr(t.as_ptr())])
        }
        "open_tree" => {
            let t = cstr("/tmp");
            // OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC: a detached copy of /tmp, then dropped.
            sys(
                libc::SYS_open_tree,
                &[
                    int(libc::AT_FDCWD),
                    ptr(t.as_ptr()),
                    int(1 | libc::O_CLOEXEC),
                ],
            )
        }
        "move_mount" => {
            let e = cstr("");
            sys(
                libc::SYS_move_mount,
                &[int(-1), ptr(e.as_ptr()), int(-1), ptr(e.as_ptr()), int(0)],
            )
        }
        "fsopen" => {
            let t = cstr("tmpfs");
            sys(libc::SYS_fsopen, &[ptr(t.as_ptr()), int(1)])
        }
        "fsconfig" => sys(
            libc::SYS_fsconfig,
            &[int(-1), int(0), int(0), int(0), int(0)],
        ),
        "fsmount" => sys(libc::SYS_fsmount, &[int(-1), int(0), int(0)]),
        "fspick" => {
            let t = cstr("/tmp");
            sys(
                libc::SYS_fspick,
                &[int(libc::AT_FDCWD), ptr(t.as_ptr()), int(1)],
            )
        }
        "mount_setattr" => {
            let e = cstr("");
            sys(
                libc::SYS_mount_setattr,
                &[int(-1), ptr(e.as_ptr()), int(0), int(0), int(0)],
            )
        }
        // Joining our own network namespace: succeeds where setns is allowed, changes nothing.
        "setns" => match open_fd("/proc/self/ns/net") {
            Some(fd) => sys(libc::SYS_setns, &[int(fd.as_raw_fd()), int(0)]),
            None => {
                println!("inconclusive cannot open /proc/self/ns/net");
                return INCONCLUSIVE;
            }
        },
        "unshare-user" => sys(libc::SYS_unshare, &[int(libc::CLONE_NEWUSER)]),
        "unshare-mount" => sys(libc::SYS_unshare, &[int(libc::CLONE_NEWNS)]),
        "unshare-net" => sys(libc::SYS_unshare, &[int(libc::CLONE_NEWNET)]),
        "unshare-pid" => sys(libc::SYS_unshare, &[int(libc::CLONE_NEWPID)]),
        // A plain unshare without namespace flags must stay allowed (programs use CLONE_FILES).
        "unshare-files" => sys(libc::SYS_unshare, &[int(libc::CLONE_FILES)]),
        "clone-newuser" => clone_with(libc::CLONE_NEWUSER),
        "clone-newns" => clone_with(libc::CLONE_NEWNS),
        "clone-newnet" => clone_with(libc::CLONE_NEWNET),
        "clone3-newuser" => clone3_with(libc::CLONE_NEWUSER),
        "ioctl-tiocsti" => {
            let b = b'x';
            sys(
                libc::SYS_ioctl,
                &[int(0), int(libc::TIOCSTI), ptr(&b as *const u8)],
            )
        }
        "ioctl-tioclinux" => {
            // TIOCL_GETFGCONSOLE (12): a read-only subcode.
            let sub = [12u8; 1];
            sys(
                libc::SYS_ioctl,
                &[int(0), int(libc::TIOCLINUX), ptr(sub.as_ptr())],
            )
        }
        "open_by_handle_at" => {
            // struct file_handle { handle_bytes: 8, handle_type: 1, f_handle: [0; 8] }
            let mut handle = [0u8; 16];
            handle[0] = 8;
            handle[4] = 1;
            sys(
                libc::SYS_open_by_handle_at,
                &[
                    int(libc::AT_FDCWD),
                    ptr(handle.as_mut_ptr()),
                    int(libc::O_RDONLY),
                ],
            )
        }
        // A wrong magic number: EINVAL even with CAP_SYS_BOOT.
        "reboot" => sys(libc::SYS_reboot, &[int(0), int(0), int(0), int(0)]),
        "swapon" => {
            let p = cstr("/chock-hostile-absent");
            sys(libc::SYS_swapon, &[ptr(p.as_ptr()), int(0)])
        }
        "swapoff" => {
            let p = cstr("/chock-hostile-absent");
            sys(libc::SYS_swapoff, &[ptr(p.as_ptr())])
        }
        "acct" => {
            let p = cstr("/chock-hostile-absent");
            sys(libc::SYS_acct, &[ptr(p.as_ptr())])
        }
        "quotactl_fd" => sys(
            libc::SYS_quotactl_fd,
            &[int(-1), int(0x0080_0001u32), int(0), int(0)],
        ),
        "open_tree_attr" => {
            let t = cstr("/tmp");
            // open_tree_attr (Linux 6.15, the same number on every architecture), no attributes.
            sys(
                467,
                &[
                    int(libc::AT_FDCWD),
                    ptr(t.as_ptr()),
                    int(1 | libc::O_CLOEXEC),
                    int(0),
                    int(0),
                ],
            )
        }
        // Q_SYNC (0x800001) of every filesystem: needs no privilege where quotactl is allowed.
        "quotactl" => sys(
            libc::SYS_quotactl,
            &[int(0x0080_0001), int(0), int(0), int(0)],
        ),
        // getpid through the x32 entry point (number | 0x4000_0000): numbers the table does not
        // list, reaching the same kernel functions.
        "x32-getpid" if cfg!(target_arch = "x86_64") => sys(libc::SYS_getpid | 0x4000_0000, &[]),
        // getpid through the 32-bit entry point (int 0x80, i386 numbering): another table.
        "int80-getpid" => int80_getpid(),
        // A call that must stay allowed: the control for the tests' parsing.
        "getpid" => sys(libc::SYS_getpid, &[]),
        _ => {
            eprintln!("chock-hostile: unknown syscall act `{name}`");
            return USAGE;
        }
    };
    raw_result(ret, name)
}

/// One set-id act (see the `setid` subcommand). Succeeds only if the file really ends up with a
/// set-id bit, so "refused" or a silently dropped bit are both told apart from an escape.
pub(super) fn set_id(call: &str, path: &str) -> i32 {
    use std::os::unix::fs::PermissionsExt;
    let c = cstr(path);
    let p = ptr(c.as_ptr());
    let (call, mode) = match call.strip_suffix("-gid") {
        Some(base) => (base, 0o2755u32),
        None => (call, 0o4755u32),
    };
    let creat_flags = libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC;
    let make_plain = || {
        let fd = sys(
            libc::SYS_openat,
            &[int(libc::AT_FDCWD), p, int(creat_flags), int(0o644u32)],
        );
        if fd < 0 {
            println!(
                "inconclusive creating {path}: {}",
                std::io::Error::last_os_error()
            );
            std::process::exit(INCONCLUSIVE);
        }
        fd
    };
    let ret = match call {
        #[cfg(target_arch = "x86_64")]
        "chmod" => {
            let fd = make_plain();
            sys(libc::SYS_close, &[fd]);
            sys(libc::SYS_chmod, &[p, int(mode)])
        }
        "fchmod" => {
            let fd = make_plain();
            let r = sys(libc::SYS_fchmod, &[fd, int(mode)]);
            let e = std::io::Error::last_os_error();
            sys(libc::SYS_close, &[fd]);
            if r == -1 {
                return refused(e.raw_os_error().unwrap_or(0));
            }
            r
        }
        "fchmodat" => {
            let fd = make_plain();
            sys(libc::SYS_close, &[fd]);
            sys(libc::SYS_fchmodat, &[int(libc::AT_FDCWD), p, int(mode)])
        }
        "fchmodat2" => {
            let fd = make_plain();
            sys(libc::SYS_close, &[fd]);
            sys(452, &[int(libc::AT_FDCWD), p, int(mode), int(0)])
        }
        #[cfg(target_arch = "x86_64")]
        "open" => sys(libc::SYS_open, &[p, int(creat_flags), int(mode)]),
        "openat" => sys(
            libc::SYS_openat,
            &[int(libc::AT_FDCWD), p, int(creat_flags), int(mode)],
        ),
        #[cfg(target_arch = "x86_64")]
        "creat" => sys(libc::SYS_creat, &[p, int(mode)]),
        #[cfg(target_arch = "x86_64")]
        "mknod" => sys(libc::SYS_mknod, &[p, int(libc::S_IFREG | mode), int(0)]),
        "mknodat" => sys(
            libc::SYS_mknodat,
            &[int(libc::AT_FDCWD), p, int(libc::S_IFREG | mode), int(0)],
        ),
        "openat2" => {
            // struct open_how { u64 flags; u64 mode; u64 resolve; }
            let how = [
                u64::try_from(creat_flags).unwrap_or(0),
                u64::from(mode),
                0u64,
            ];
            sys(
                libc::SYS_openat2,
                &[
                    int(libc::AT_FDCWD),
                    p,
                    ptr(how.as_ptr()),
                    int(std::mem::size_of_val(&how)),
                ],
            )
        }
        _ => {
            eprintln!("chock-hostile: unknown setid act `{call}`");
            return USAGE;
        }
    };
    if ret == -1 {
        return raw_result(ret, call);
    }
    let bits = std::fs::metadata(path).map_or(0, |m| m.permissions().mode() & 0o6000);
    if bits == 0 {
        println!("refused dropped (the file has no set-id bit)");
        return REFUSED;
    }
    succeeded(&format!("{call}: {path} has mode bits {bits:o}"))
}

/// getpid (20 in the i386 table) through `int 0x80`: a filter that checks numbers but not the
/// audit architecture would let every i386 call through under numbers it never lists.
#[cfg(target_arch = "x86_64")]
fn int80_getpid() -> libc::c_long {
    let mut ret: i64 = 20;
    // SAFETY: int 0x80 with eax = 20 (getpid) takes no pointers and clobbers only what is listed.
    unsafe {
        std::arch::asm!("int 0x80", inout("rax") ret, out("r8") _, out("r9") _, out("r10") _, out("r11") _);
    }
    // The i386 entry returns a 32-bit value in eax: -errno or the pid. Keeping the low 32 bits is
    // the point of the cast.
    #[allow(clippy::cast_possible_truncation)]
    let ret = i64::from(ret as i32);
    if ret < 0 {
        // SAFETY: errno is thread-local; setting it for raw_result to read.
        unsafe { *libc::__errno_location() = i32::try_from(-ret).unwrap_or(libc::EINVAL) };
        -1
    } else {
        ret
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn int80_getpid() -> libc::c_long {
    println!("inconclusive int 0x80 exists on x86_64 only");
    std::process::exit(INCONCLUSIVE)
}

/// clone(2) with namespace flags, fork-like (no new stack); the child exits at once.
fn clone_with(flags: libc::c_int) -> libc::c_long {
    let flags = libc::c_long::from(flags) | libc::c_long::from(libc::SIGCHLD);
    // SAFETY: a clone without CLONE_VM and with a null stack behaves like fork: the child runs on a
    // copy of our memory and leaves with _exit at once, touching nothing.
    let r = sys(
        libc::SYS_clone,
        &[int(flags), int(0), int(0), int(0), int(0)],
    );
    if r == 0 {
        // SAFETY: leaving the child without running destructors.
        unsafe { libc::_exit(0) };
    }
    if r > 0 {
        // SAFETY: reaping our own child; a null status pointer is allowed.
        unsafe { libc::waitpid(i32::try_from(r).unwrap_or(-1), std::ptr::null_mut(), 0) };
    }
    r
}

/// clone3(2) with namespace flags (seccomp cannot read its arguments, so filters refuse it whole).
fn clone3_with(flags: libc::c_int) -> libc::c_long {
    // struct clone_args: flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls.
    let mut args = [0u64; 8];
    args[0] = u64::try_from(flags).unwrap_or(0);
    args[4] = u64::try_from(libc::SIGCHLD).unwrap_or(17);
    // SAFETY: as for `clone_with`: no new stack, no shared memory; the struct is 64 bytes as passed.
    let r = sys(
        libc::SYS_clone3,
        &[ptr(args.as_ptr()), int(std::mem::size_of_val(&args))],
    );
    if r == 0 {
        // SAFETY: leaving the child without running destructors.
        unsafe { libc::_exit(0) };
    }
    if r > 0 {
        // SAFETY: reaping our own child.
        unsafe { libc::waitpid(i32::try_from(r).unwrap_or(-1), std::ptr::null_mut(), 0) };
    }
    r
}
