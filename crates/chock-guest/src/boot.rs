//! The guest's first steps: the kernel's filesystems, the modules, the channel, the shares.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::Path;
use std::time::{Duration, Instant};

use chock_guest::{MODULE_DIR, PORT_NAME, Setup, Share, ShareFs};
use rustix::mount::{MountFlags, UnmountFlags, mount, unmount};

fn words(what: &str, e: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("{what}: {e}"))
}

/// Moves the guest's root off the initramfs onto a tmpfs: the sandbox driver's `pivot_root`
/// refuses the initramfs' rootfs (it can never be unmounted), as it would refuse a chroot. The
/// initramfs' files are copied into the tmpfs, which is moved over `/` and entered.
pub(crate) fn leave_initramfs() -> io::Result<()> {
    let new = Path::new("/newroot");
    fs::create_dir_all(new).map_err(|e| words("mkdir /newroot", e))?;
    mount(
        "tmpfs",
        new,
        "tmpfs",
        MountFlags::empty(),
        Some(c"mode=0755"),
    )
    .map_err(|e| words("mount the new root", e))?;
    for entry in fs::read_dir("/")
        .map_err(|e| words("read the initramfs", e))?
        .flatten()
    {
        if entry.file_name() == "newroot" {
            continue;
        }
        copy(&entry.path(), &new.join(entry.file_name()))?;
    }
    std::env::set_current_dir(new).map_err(|e| words("enter the new root", e))?;
    rustix::mount::mount_move(".", "/").map_err(|e| words("move the new root over /", e))?;
    rustix::process::chroot(".").map_err(|e| words("chroot into the new root", e))?;
    std::env::set_current_dir("/").map_err(|e| words("chdir /", e))
}

fn copy(from: &Path, to: &Path) -> io::Result<()> {
    let meta = fs::symlink_metadata(from).map_err(|e| words(&from.display().to_string(), e))?;
    let fail = |e| words(&format!("copy {}", from.display()), e);
    if meta.file_type().is_symlink() {
        std::os::unix::fs::symlink(fs::read_link(from).map_err(fail)?, to).map_err(fail)
    } else if meta.is_dir() {
        fs::create_dir_all(to).map_err(fail)?;
        fs::set_permissions(to, meta.permissions()).map_err(fail)?;
        for entry in fs::read_dir(from).map_err(fail)?.flatten() {
            copy(&entry.path(), &to.join(entry.file_name()))?;
        }
        Ok(())
    } else if meta.is_file() {
        fs::copy(from, to).map(|_| ()).map_err(fail)
    } else {
        // Device nodes the kernel put there (/dev/console): devtmpfs makes its own.
        Ok(())
    }
}

/// /proc, /sys, /dev (devtmpfs: the ports' nodes appear there), /tmp, /run and the cgroup tree.
pub(crate) fn mount_basics() -> io::Result<()> {
    let plain = MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC;
    let mounts: [(&str, &str, &str, MountFlags); 6] = [
        ("proc", "/proc", "proc", plain),
        ("sysfs", "/sys", "sysfs", plain),
        (
            "devtmpfs",
            "/dev",
            "devtmpfs",
            MountFlags::NOSUID | MountFlags::NOEXEC,
        ),
        (
            "tmpfs",
            "/tmp",
            "tmpfs",
            MountFlags::NOSUID | MountFlags::NODEV,
        ),
        (
            "tmpfs",
            "/run",
            "tmpfs",
            MountFlags::NOSUID | MountFlags::NODEV,
        ),
        ("cgroup2", "/sys/fs/cgroup", "cgroup2", plain),
    ];
    for (source, target, fs, flags) in mounts {
        fs::create_dir_all(target).map_err(|e| words(&format!("mkdir {target}"), e))?;
        mount(source, target, fs, flags, None).map_err(|e| words(&format!("mount {target}"), e))?;
    }
    Ok(())
}

/// Loads every module in [`MODULE_DIR`], in rounds until none more loads: a module whose
/// dependency is not loaded yet fails and is tried again in the next round.
pub(crate) fn load_modules() -> io::Result<()> {
    let mut left: Vec<_> = match fs::read_dir(MODULE_DIR) {
        Ok(dir) => dir.filter_map(|e| e.ok().map(|e| e.path())).collect(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(words("read the modules", e)),
    };
    left.sort();
    while !left.is_empty() {
        let before = left.len();
        let mut last = None;
        left.retain(|path| {
            let loaded = match File::open(path) {
                Ok(f) => rustix::system::finit_module(&f, c"", 0),
                Err(e) => {
                    last = Some(format!("{}: {e}", path.display()));
                    return true;
                }
            };
            match loaded {
                Ok(()) | Err(rustix::io::Errno::EXIST) => false,
                Err(e) => {
                    last = Some(format!("{}: {e}", path.display()));
                    true
                }
            }
        });
        if left.len() == before {
            return Err(words("load a module", last.unwrap_or_default()));
        }
    }
    Ok(())
}

/// The channel: the virtio-serial port named [`PORT_NAME`], once its node exists.
pub(crate) fn open_port() -> io::Result<File> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(dir) = fs::read_dir("/sys/class/virtio-ports") {
            for entry in dir.flatten() {
                let name = fs::read_to_string(entry.path().join("name")).unwrap_or_default();
                if name.trim() == PORT_NAME {
                    let node = Path::new("/dev").join(entry.file_name());
                    if let Ok(port) = OpenOptions::new().read(true).write(true).open(&node) {
                        return Ok(port);
                    }
                }
            }
        }
        if Instant::now() > deadline {
            return Err(io::Error::other(format!(
                "no virtio-serial port named {PORT_NAME} appeared"
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The options of a virtio-9p mount: the 9P2000.L protocol over virtio, large messages, the
/// client checking permissions (the server's side runs as one user), and a page cache that
/// allows a shared mapping but no cached metadata (what the host changes is seen at once).
const NINE_P_OPTIONS: &std::ffi::CStr =
    c"trans=virtio,version=9p2000.L,msize=524288,access=client,cache=mmap";

/// Sets the guest's wall clock to the host's, when the host sent it.
pub(crate) fn set_clock(setup: &Setup) -> io::Result<()> {
    if let Some((secs, nanos)) = setup.now {
        let now = rustix::time::Timespec {
            tv_sec: secs,
            tv_nsec: i64::from(nanos),
        };
        rustix::time::clock_settime(rustix::time::ClockId::Realtime, now)
            .map_err(|e| words("set the clock", e))?;
    }
    Ok(())
}

/// Mounts each share (virtiofs or virtio-9p) at its path; then the merged-/usr links a system
/// expects.
pub(crate) fn mount_shares(setup: &Setup) -> io::Result<()> {
    for share in &setup.shares {
        fs::create_dir_all(&share.path)
            .map_err(|e| words(&format!("mkdir {}", share.path.display()), e))?;
        let mut flags = MountFlags::NOSUID | MountFlags::NODEV;
        if share.read_only {
            flags |= MountFlags::RDONLY;
        }
        let (fs, options) = match share.fs {
            ShareFs::Virtiofs => ("virtiofs", None),
            ShareFs::NineP => ("9p", Some(NINE_P_OPTIONS)),
        };
        mount(share.tag.as_str(), &share.path, fs, flags, options).map_err(|e| {
            words(
                &format!("mount {} at {}", share.tag, share.path.display()),
                e,
            )
        })?;
    }
    for (link, to) in [
        ("/bin", "usr/bin"),
        ("/sbin", "usr/sbin"),
        ("/lib", "usr/lib"),
        ("/lib64", "usr/lib64"),
    ] {
        if Path::new("/usr").join(&to[4..]).is_dir() && fs::symlink_metadata(link).is_err() {
            std::os::unix::fs::symlink(to, link).map_err(|e| words(&format!("link {link}"), e))?;
        }
    }
    Ok(())
}

/// Unmounts every share, innermost first, so nothing of the host is open in the guest (a
/// virtio-9p share blocks the machine's migration while it is mounted). A call that just ended
/// may still hold a mount for a moment: a busy share is tried again for a few seconds, and a
/// 9p share's client is waited for until it is gone ([`wait_released`]).
pub(crate) fn unmount_shares(setup: &Setup) -> io::Result<()> {
    rustix::fs::sync();
    for share in setup.shares.iter().rev() {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match unmount(&share.path, UnmountFlags::empty()) {
                Ok(()) | Err(rustix::io::Errno::INVAL) => break,
                Err(rustix::io::Errno::BUSY) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => {
                    return Err(words(&format!("unmount {}", share.path.display()), e));
                }
            }
        }
        if share.fs == ShareFs::NineP {
            wait_released(share)?;
        }
    }
    Ok(())
}

/// Waits until the 9p client of an unmounted share is gone, so that QEMU has seen its root
/// clunked (only then does it lift the share's migration blocker). The unmount above can leave
/// it alive for a moment: a mount namespace of the call that just ended, or an overlay in it over
/// the share, is torn down by the kernel after its last process, not before `umount` returns.
/// The channel is taken while a client lives (a mount of its tag fails with EBUSY), so a mount
/// of the tag that succeeds, unmounted at once, says the old client has clunked everything.
fn wait_released(share: &Share) -> io::Result<()> {
    let probe = Path::new("/run/chock-suspend-probe");
    fs::create_dir_all(probe).map_err(|e| words("mkdir the unmount probe", e))?;
    let flags = MountFlags::NOSUID | MountFlags::NODEV | MountFlags::RDONLY;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match mount(share.tag.as_str(), probe, "9p", flags, Some(NINE_P_OPTIONS)) {
            Ok(()) => {
                return unmount(probe, UnmountFlags::empty()).map_err(|e| {
                    words(&format!("unmount the probe of {}", share.path.display()), e)
                });
            }
            Err(rustix::io::Errno::BUSY) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => {
                return Err(words(
                    &format!("wait until {} is released", share.path.display()),
                    e,
                ));
            }
        }
    }
}

/// The network interfaces the guest's kernel has (`/sys/class/net`).
pub(crate) fn interfaces() -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir("/sys/class/net")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// The virtio device ids on the guest's bus (`/sys/bus/virtio/devices/*/device`).
pub(crate) fn virtio_devices() -> Vec<u32> {
    let mut ids: Vec<u32> = fs::read_dir("/sys/bus/virtio/devices")
        .map(|d| {
            d.flatten()
                .filter_map(|e| fs::read_to_string(e.path().join("device")).ok())
                .filter_map(|id| u32::from_str_radix(id.trim().trim_start_matches("0x"), 16).ok())
                .collect()
        })
        .unwrap_or_default();
    ids.sort_unstable();
    ids
}

/// Powers the guest off: the host sees its monitor exit.
pub(crate) fn power_off() {
    let _ = rustix::system::reboot(rustix::system::RebootCommand::PowerOff);
    loop {
        std::thread::sleep(Duration::from_secs(60));
    }
}
