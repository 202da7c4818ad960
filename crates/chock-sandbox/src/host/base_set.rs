//! The base set every call sees: /usr and the usual links, the /etc entries toolchains need, a
//! minimal /dev, and /proc for the call's pid namespace with the machine-wide knobs read-only.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::host::mounts::builder::{Builder, human_size};
use crate::wire::error::{Layer, SandboxError};
use crate::wire::mount_ops::{Op, Step, cstr, under_old_root};
use crate::wire::plan::Plan;

/// Directories bound from the host when they are directories, recreated when they are symlinks
/// (a merged-/usr system links /bin to usr/bin).
const SYSTEM_DIRS: &[&str] = &["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"];

/// Every host directory the base set shows a call read-only (whole, or entries of it): what a
/// confined process sees of the host besides its plan's own paths.
pub const BASE_HOST_DIRS: &[&str] = &[
    "/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

/// The /etc entries programs and toolchains need: the loader cache, certificates, alternatives,
/// names for ids, host name lookup, time zone, terminal descriptions. Nothing with secrets
/// (shadow, ssh keys) and nothing about the host's network (resolv.conf: a call has no DNS).
pub const ETC_ENTRIES: &[&str] = &[
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "ssl",
    "ca-certificates",
    "ca-certificates.conf",
    "pki",
    "crypto-policies",
    "alternatives",
    "passwd",
    "group",
    "hosts",
    "host.conf",
    "nsswitch.conf",
    "gai.conf",
    "localtime",
    "timezone",
    "terminfo",
    "inputrc",
    "mime.types",
    "protocols",
    "services",
    "os-release",
    "lsb-release",
    "debian_version",
    "bash.bashrc",
    "profile",
    "environment",
    "gitconfig",
    "rustc",
    "python3",
    "perl",
];

/// Device nodes bound from the host's /dev, each read-only: reading and writing the device still
/// work (a read-only mount refuses writes to the inode, not to the device behind it), while chmod,
/// chown, times and extended attributes fail with EROFS. As root the call's uid 0 is the host's, so
/// a writable bind would let `chmod 000 /dev/null` in a call change the host's node.
const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

/// Parts of /proc made read-only on top of Landlock (they configure the whole machine).
const PROC_READONLY: &[&str] = &["sys", "sysrq-trigger", "irq", "bus", "fs"];

/// /usr, the links, /etc and /dev.
pub(crate) fn system_and_dev(b: &mut Builder, plan: &Plan) -> Result<(), SandboxError> {
    let fs = Layer::Filesystem;
    // The system: /usr and the usual links, /etc entries.
    b.copy_entry(Path::new("/usr"), fs)?;
    for dir in SYSTEM_DIRS {
        b.copy_entry(Path::new(dir), fs)?;
    }
    b.mkdirs(Path::new("/etc"), fs)?;
    for name in ETC_ENTRIES {
        b.copy_entry(&Path::new("/etc").join(name), fs)?;
    }

    // A minimal /dev.
    let dev_flags = libc::MS_NOSUID | libc::MS_NOEXEC;
    b.mkdirs(Path::new("/dev"), fs)?;
    b.push(
        Op::Tmpfs {
            target: cstr("/dev")?,
            data: cstr("mode=755,size=65536")?,
            flags: dev_flags,
        },
        fs,
        "tmpfs /dev".into(),
    );
    for dev in DEVICES {
        let target = PathBuf::from("/dev").join(dev);
        b.push(
            Op::Touch {
                path: cstr(target.as_os_str().as_bytes())?,
            },
            fs,
            format!("create {}", target.display()),
        );
        let op = Op::Bind {
            source: under_old_root(&target)?,
            target: cstr(target.as_os_str().as_bytes())?,
            readonly: true,
            devices: true,
        };
        b.push(op, fs, format!("device {}", target.display()));
    }
    b.push(
        Op::Mkdir {
            path: cstr("/dev/pts")?,
            mode: 0o755,
        },
        fs,
        "mkdir /dev/pts".into(),
    );
    b.push(
        Op::Devpts {
            target: cstr("/dev/pts")?,
        },
        fs,
        "private devpts /dev/pts".into(),
    );
    for (link, text) in [
        ("/dev/ptmx", "pts/ptmx"),
        ("/dev/fd", "/proc/self/fd"),
        ("/dev/stdin", "/proc/self/fd/0"),
        ("/dev/stdout", "/proc/self/fd/1"),
        ("/dev/stderr", "/proc/self/fd/2"),
    ] {
        b.push(
            Op::Symlink {
                text: cstr(text)?,
                link: cstr(link)?,
            },
            fs,
            format!("symlink {link} -> {text}"),
        );
    }
    b.push(
        Op::Mkdir {
            path: cstr("/dev/shm")?,
            mode: 0o755,
        },
        fs,
        "mkdir /dev/shm".into(),
    );
    let shm = Op::Tmpfs {
        target: cstr("/dev/shm")?,
        data: cstr(format!("mode=1777,size={}", plan.limits.tmp_size_bytes))?,
        flags: libc::MS_NOSUID | libc::MS_NODEV,
    };
    b.push(
        shm,
        fs,
        format!(
            "tmpfs /dev/shm (size {})",
            human_size(plan.limits.tmp_size_bytes)
        ),
    );
    b.made.insert(PathBuf::from("/dev"));
    // /dev itself read-only once made: in a session sandbox every call runs in a copy of one tree,
    // and a mode or extended attribute one call set on the /dev tmpfs would be seen by the next.
    // Its mounts (the devices, /dev/pts, /dev/shm) keep their own flags.
    b.push(
        Op::RemountReadonly {
            target: cstr("/dev")?,
        },
        fs,
        "/dev read-only".into(),
    );

    Ok(())
}

/// /proc files a call is never shown, as container runtimes mask them: each is covered by a
/// read-only, `nodev` bind of /dev/null, so opening it fails with EACCES (what a user other than
/// root meets there anyway). They are root-only or machine-wide, and for a root user the call's uid
/// 0 is the host's, so their owner check passes.
const PROC_MASKED_FILES: &[(&str, &str)] = &[
    ("kcore", "the machine's physical memory as a core file"),
    (
        "kmsg",
        "the kernel's log, which reading consumes for everyone",
    ),
    (
        "kpageflags",
        "the state of every physical page (a map for Rowhammer-style attacks)",
    ),
    (
        "kpagecount",
        "how often every physical page is mapped (as kpageflags)",
    ),
    (
        "kpagecgroup",
        "the cgroup of every physical page (as kpageflags)",
    ),
    (
        "slabinfo",
        "the kernel heap's caches, which heap exploits groom against",
    ),
    (
        "pagetypeinfo",
        "the page allocator's free lists (as slabinfo)",
    ),
    (
        "vmallocinfo",
        "kernel virtual addresses, which undo address randomisation",
    ),
    (
        "timer_list",
        "every timer of the machine, with kernel addresses",
    ),
    (
        "timer_stats",
        "who set which timer, machine-wide (older kernels)",
    ),
    ("sched_debug", "every task of the machine (older kernels)"),
    (
        "latency_stats",
        "where every process waited, with kernel symbols",
    ),
    (
        "keys",
        "the keys the caller's user may see in the kernel keyrings",
    ),
    (
        "interrupts",
        "per-CPU interrupt counts, a side channel on other processes' activity",
    ),
];

/// /proc directories a call is never shown (hardware and driver state), each covered by an empty
/// read-only tmpfs.
const PROC_MASKED_DIRS: &[(&str, &str)] = &[
    ("acpi", "firmware tables and ACPI events"),
    ("asound", "sound hardware"),
    ("scsi", "SCSI devices; `scsi/scsi` takes commands from root"),
    ("tty/driver", "serial ports' state and counters (root-only)"),
];

/// A fresh /proc (mounted while the host's is still attached: the kernel requires one fully
/// visible procfs before it lets a user namespace mount another), read-only machine knobs, and the
/// masked files and directories: the reviewed lists above, and any other entry at the top of the
/// host's /proc that is not world-readable (a kernel's own root-only file the lists do not name).
pub(crate) fn proc(b: &mut Builder) -> Result<(), SandboxError> {
    let fs = Layer::Filesystem;
    // /proc for the new pid namespace, with the machine-wide knobs read-only.
    b.mkdirs(Path::new("/proc"), fs)?;
    b.push(
        Op::Proc {
            target: cstr("/proc")?,
        },
        fs,
        "proc /proc (this call's pid namespace)".into(),
    );
    // Every step after the mount is optional (a missing entry is skipped): a session sandbox's
    // call makes them again on its own /proc (fresh.rs).
    for name in PROC_READONLY {
        let target = format!("/proc/{name}");
        let op = Op::Bind {
            source: cstr(&*target)?,
            target: cstr(&*target)?,
            readonly: true,
            devices: false,
        };
        b.steps.push(Step {
            op,
            layer: fs,
            label: format!("ro bind {target}"),
            optional: true,
        });
    }
    let (files, dirs) = masked_proc_entries();
    for name in files {
        let target = format!("/proc/{name}");
        let op = Op::Bind {
            source: cstr("/dev/null")?,
            target: cstr(&*target)?,
            readonly: true,
            devices: false,
        };
        b.steps.push(Step {
            op,
            layer: fs,
            label: format!("mask {target}"),
            optional: true,
        });
    }
    for name in dirs {
        let target = format!("/proc/{name}");
        let op = Op::Tmpfs {
            target: cstr(&*target)?,
            data: cstr("mode=555,size=4096")?,
            flags: libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        };
        b.steps.push(Step {
            op,
            layer: fs,
            label: format!("mask {target} (an empty read-only tmpfs)"),
            optional: true,
        });
    }
    Ok(())
}

/// The /proc files and directories to mask: the reviewed lists, then every other entry at the
/// top of the host's /proc (the call's shows the same kernel's) that is not world-readable, in
/// name order. Process directories and the machine-knob binds are left alone.
fn masked_proc_entries() -> (Vec<String>, Vec<String>) {
    use std::os::unix::fs::PermissionsExt;
    let mut files: Vec<String> = PROC_MASKED_FILES
        .iter()
        .map(|(n, _)| n.to_string())
        .collect();
    let mut dirs: Vec<String> = PROC_MASKED_DIRS
        .iter()
        .map(|(n, _)| n.to_string())
        .collect();
    let mut found: Vec<(String, bool)> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let meta = std::fs::symlink_metadata(e.path()).ok()?;
            let private = meta.permissions().mode() & 0o004 == 0;
            let ours = name.bytes().all(|c| c.is_ascii_digit())
                || PROC_READONLY.contains(&name.as_str())
                || meta.file_type().is_symlink();
            (private && !ours).then_some((name, meta.is_dir()))
        })
        .collect();
    found.sort();
    for (name, is_dir) in found {
        let list = if is_dir { &mut dirs } else { &mut files };
        if !list.contains(&name) {
            list.push(name);
        }
    }
    (files, dirs)
}

#[cfg(test)]
mod host_dirs_tests {
    use super::{BASE_HOST_DIRS, SYSTEM_DIRS};

    #[test]
    fn every_bound_system_directory_is_named_among_the_base_sets_host_directories() {
        for dir in SYSTEM_DIRS.iter().chain(&["/usr", "/etc"]) {
            assert!(BASE_HOST_DIRS.contains(dir), "{dir}");
        }
    }
}
