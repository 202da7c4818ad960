//! The monitor's command: QEMU confined from its start (step 5 of docs/microvm.md).
//!
//! It runs in new user, mount, network, IPC and UTS namespaces, in a root of its own built in its
//! mount namespace (pivoted to, the host's root detached): a tmpfs holding /usr read-only (QEMU, its libraries and its
//! firmware), the loader's cache, /dev/null and /dev/urandom (and /dev/kvm under KVM), the kernel
//! and the initramfs read-only at /boot, and the machine's directory at /vm (the channel's and the
//! shares' sockets, the console). Nothing else of the host is in it: not the project, not the
//! workspace (the virtiofs servers hold those), not the home. Under it QEMU's own seccomp filter
//! denies every optional group (`-sandbox on`: no spawning, no privilege changes, no obsolete
//! calls, no resource control). Between the two, last before QEMU's exec, Landlock: the
//! monitor's rows of `confine/rules.rs`, applied by `chock-confine` (`confine.rs`).

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;

use crate::accel::Accel;
use crate::confine::{self, rules::Process};
use crate::machine::{KERNEL_CMDLINE, MachineSpec};

/// Builds the monitor's root in its mount namespace, then becomes the confinement helper, which
/// makes it the only root (pivot_root, the host's root detached), applies the monitor's Landlock rules and becomes QEMU. `$1` the new root, `$2`
/// the machine's directory, `$3` the kernel, `$4` the initramfs, `$5` whether to bind /dev/kvm;
/// the helper's command line follows.
const ROOT_SCRIPT: &str = r#"set -e
R=$1 VM=$2 KERNEL=$3 INITRD=$4 KVM=$5
shift 5
mkdir -p "$R"
mount -t tmpfs -o mode=0755 chock-monitor "$R"
mkdir -p "$R/usr" "$R/vm" "$R/dev" "$R/boot" "$R/etc" "$R/tmp"
mount --bind /usr "$R/usr"
mount -o remount,bind,ro "$R/usr"
for l in bin lib lib64 sbin; do [ -e "/usr/$l" ] && ln -s "usr/$l" "$R/$l"; done
touch "$R/etc/ld.so.cache" "$R/boot/vmlinux" "$R/boot/initramfs"
mount --bind /etc/ld.so.cache "$R/etc/ld.so.cache"
mount --bind "$KERNEL" "$R/boot/vmlinux"
mount --bind "$INITRD" "$R/boot/initramfs"
mount -o remount,bind,ro "$R/boot/vmlinux"
mount -o remount,bind,ro "$R/boot/initramfs"
for d in null urandom; do touch "$R/dev/$d"; mount --bind "/dev/$d" "$R/dev/$d"; done
if [ "$KVM" = 1 ]; then touch "$R/dev/kvm"; mount --bind /dev/kvm "$R/dev/kvm"; fi
mount --bind "$VM" "$R/vm"
exec "$@"
"#;

/// The command that starts the monitor of a guest whose directory is `dir`, with `tags` shares.
pub(crate) fn command(spec: &MachineSpec, dir: &Path, tags: usize) -> Command {
    confined(spec, dir, &spec.qemu, qemu_args(spec, tags))
}

/// `program` with `args`, run as the monitor is: in its namespaces and root, under its
/// Landlock rules (the tests run a probe in QEMU's place).
pub(crate) fn confined(
    spec: &MachineSpec,
    dir: &Path,
    program: &Path,
    args: Vec<OsString>,
) -> Command {
    let kvm = spec.accel.accel == Accel::Kvm;
    let mut c = Command::new("unshare");
    c.args([
        "--user",
        "--map-root-user",
        "--mount",
        "--net",
        "--ipc",
        "--uts",
        "--",
        "sh",
        "-c",
        ROOT_SCRIPT,
        "sh",
    ]);
    let root = dir.join("root");
    c.arg(&root)
        .arg(dir)
        .arg(&spec.kernel.vmlinux)
        .arg(&spec.initramfs)
        .arg(if kvm { "1" } else { "0" });
    let rules = confine::rules_for(Process::Monitor, &confine::Machine { kvm, dir }, None);
    c.args(confine::wrap(
        &spec.confine,
        Some(&root),
        rules,
        program,
        args,
    ));
    c
}

/// QEMU's arguments: the machine, its one vCPU and memory, no network device, its own seccomp
/// filter, the kernel, the channel and one vhost-user-fs device per share.
fn qemu_args(spec: &MachineSpec, tags: usize) -> Vec<OsString> {
    let kvm = spec.accel.accel == Accel::Kvm;
    let mut c: Vec<OsString> = Vec::new();
    let mem = spec.memory_mib;
    let mut args = |a: &[&str]| c.extend(a.iter().map(OsString::from));
    args(&[
        "-M",
        "microvm,memory-backend=mem",
        "-global",
        "virtio-mmio.force-legacy=false",
        "-accel",
        spec.accel.accel.name(),
        "-cpu",
        if kvm { "host" } else { "max" },
        "-m",
        &format!("{mem}M"),
        "-smp",
        "1",
        "-nodefaults",
        "-no-user-config",
        "-display",
        "none",
        "-nic",
        "none",
        "-no-reboot",
        "-sandbox",
        "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny",
        "-object",
        &format!("memory-backend-memfd,id=mem,size={mem}M,share=on"),
        "-serial",
        "file:/vm/console.log",
        "-kernel",
        "/boot/vmlinux",
        "-initrd",
        "/boot/initramfs",
        "-append",
        KERNEL_CMDLINE,
        "-chardev",
        "socket,id=chan,path=/vm/chan.sock",
        "-device",
        "virtio-serial-device",
        "-device",
        &format!(
            "virtserialport,chardev=chan,name={}",
            chock_guest::PORT_NAME
        ),
    ]);
    for i in 0..tags {
        args(&[
            "-chardev",
            &format!("socket,id=fs{i},path=/vm/fs{i}.sock"),
            "-device",
            &format!("vhost-user-fs-device,chardev=fs{i},tag=s{i}"),
        ]);
    }
    c
}
