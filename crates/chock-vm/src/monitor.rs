//! The monitor's command: QEMU confined from its start (step 5 of docs/microvm.md).
//!
//! It runs in new user, mount, network, IPC and UTS namespaces, in a root of its own built in its
//! mount namespace (pivoted to, the host's root detached): a tmpfs holding /usr read-only (QEMU,
//! its libraries and its firmware), the loader's cache, /dev/null and /dev/urandom (and /dev/kvm
//! under KVM), the kernel and the initramfs read-only at /boot, and the machine's directory at /vm
//! (the channel's and the shares' sockets, the console). Nothing else of the host is in it: not
//! the project, not the workspace (the virtiofs servers hold those), not the home — except for a
//! guest that can be snapshotted, whose shares QEMU serves itself by virtio-9p: exactly those
//! directories are bound into its root at their own paths (read-only for a read-only share), with
//! its own `/proc/self/fd`, and nothing else of the project; an overlay workspace is mounted there
//! by the monitor itself (overlayfs with `userxattr`, in its user namespace, before the pivot), so
//! QEMU serves the merged directory. Under it QEMU's own seccomp filter denies every optional
//! group (`-sandbox on`: no spawning, no privilege changes, no obsolete calls, no resource
//! control). Between the two, last before QEMU's exec, Landlock: the monitor's rows of
//! `confine/rules.rs` (for a guest that can be snapshotted, those of its served directories too),
//! applied by `chock-confine` (`confine.rs`).

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;

use crate::accel::Accel;
use crate::confine::{self, rules::Process};
use crate::machine::{HostShare, KERNEL_CMDLINE, MachineSpec};

/// Builds the monitor's root in its mount namespace, then becomes the confinement helper, which
/// makes it the only root (pivot_root, the host's root detached), applies the monitor's Landlock
/// rules and becomes QEMU. `$1` the new root, `$2` the machine's directory, `$3` the kernel, `$4`
/// the initramfs, `$5` whether to bind /dev/kvm, `$6` how many directories QEMU serves itself,
/// then each as its path and `ro` or `rw`, or `ov` and the lower, upper and work directories of
/// the overlay mounted there; the helper's command line follows.
const ROOT_SCRIPT: &str = r#"set -e
R=$1 VM=$2 KERNEL=$3 INITRD=$4 KVM=$5 SERVED=$6
shift 6
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
# QEMU's 9p server changes a file's mode and attributes through /proc/self/fd/N: its own
# descriptors (this shell's pid is QEMU's, which it becomes), and nothing else of /proc.
if [ "$SERVED" -gt 0 ]; then
  mkdir -p "$R/proc/self/fd"
  mount --bind "/proc/$$/fd" "$R/proc/self/fd"
fi
while [ "$SERVED" -gt 0 ]; do
  mkdir -p "$R$1"
  if [ "$2" = ov ]; then
    mount -t overlay chock-workspace -o "lowerdir=$3,upperdir=$4,workdir=$5,userxattr" "$R$1"
    shift 3
  else
    mount --bind "$1" "$R$1"
    if [ "$2" = ro ]; then mount -o remount,bind,ro "$R$1"; fi
  fi
  shift 2
  SERVED=$((SERVED - 1))
done
exec "$@"
"#;

/// The command that starts the monitor of a guest whose directory is `dir`, showing `shares`:
/// through virtiofs servers (their sockets in `dir`), or, for a guest that can be snapshotted
/// (`spec.snapshots`), served by QEMU itself over virtio-9p, with a QMP socket to migrate it by.
/// `incoming`: the machine's state is loaded from the socket `in.sock` instead of booting.
pub(crate) fn command(
    spec: &MachineSpec,
    dir: &Path,
    shares: &[HostShare],
    incoming: bool,
) -> Command {
    let args = qemu_args(spec, shares, incoming);
    confined(spec, dir, shares, &spec.qemu, args)
}

/// `program` with `args`, run as the monitor is: in its namespaces and root (with the
/// directories it serves itself when `spec.snapshots`), under its Landlock rules (the tests run
/// a probe in QEMU's place).
pub(crate) fn confined(
    spec: &MachineSpec,
    dir: &Path,
    shares: &[HostShare],
    program: &Path,
    args: Vec<OsString>,
) -> Command {
    let kvm = spec.accel.accel == Accel::Kvm;
    let served = if spec.snapshots { shares } else { &[] };
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
        .arg(if kvm { "1" } else { "0" })
        .arg(served.len().to_string());
    for s in served {
        c.arg(&s.path);
        match &s.overlay {
            Some(layers) => c.arg("ov").args(layers),
            None => c.arg(if s.read_only { "ro" } else { "rw" }),
        };
    }
    let machine = confine::Machine {
        kvm,
        dir,
        served,
        snapshots: spec.snapshots,
    };
    let rules = confine::rules_for(Process::Monitor, &machine, None);
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
/// filter, the kernel, the channel and one device per share (vhost-user-fs, or virtio-9p served
/// by QEMU itself with a QMP socket for a guest that can be snapshotted).
fn qemu_args(spec: &MachineSpec, shares: &[HostShare], incoming: bool) -> Vec<OsString> {
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
    for (i, share) in shares.iter().enumerate() {
        if spec.snapshots {
            // QEMU's option syntax doubles a comma inside a value.
            let path = share.path.to_string_lossy().replace(',', ",,");
            let ro = if share.read_only { ",readonly=on" } else { "" };
            // `none`: files are created as QEMU's own user, as a virtiofs server's are; a
            // guest's chown is not carried to the host.
            args(&[
                "-fsdev",
                &format!("local,id=fs{i},path={path},security_model=none{ro}"),
                "-device",
                &format!("virtio-9p-device,fsdev=fs{i},mount_tag=s{i}"),
            ]);
        } else {
            args(&[
                "-chardev",
                &format!("socket,id=fs{i},path=/vm/fs{i}.sock"),
                "-device",
                &format!("vhost-user-fs-device,chardev=fs{i},tag=s{i}"),
            ]);
        }
    }
    if spec.snapshots {
        args(&["-qmp", "unix:/vm/qmp.sock,server=on,wait=off"]);
    }
    if incoming {
        args(&["-incoming", "unix:/vm/in.sock"]);
    }
    c
}
