//! The base set every call sees: /usr and the usual links, the /etc entries toolchains need, a
//! minimal /dev, and /proc for the call's pid namespace with the machine-wide knobs read-only.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::error::{Layer, SandboxError};
use crate::mounts::{Builder, Op, Step, cstr, human_size, under_old_root};
use crate::plan::Plan;

/// Directories bound from the host when they are directories, recreated when they are symlinks
/// (a merged-/usr system links /bin to usr/bin).
const SYSTEM_DIRS: &[&str] = &["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"];

/// The /etc entries programs and toolchains need: the loader cache, certificates, alternatives,
/// names for ids, host name lookup, time zone, terminal descriptions. Nothing with secrets
/// (shadow, ssh keys) and nothing about the host's network (resolv.conf: a call has no DNS).
const ETC_ENTRIES: &[&str] = &[
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

/// Device nodes bound from the host's /dev.
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
            readonly: false,
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

    Ok(())
}

/// A fresh /proc (mounted while the host's is still attached: the kernel requires one fully
/// visible procfs before it lets a user namespace mount another) and read-only machine knobs.
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
    Ok(())
}
