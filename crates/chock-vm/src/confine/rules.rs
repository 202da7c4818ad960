//! What a guest's monitor and its file servers may reach, kept as reviewed data.
//!
//! [`RULES`] is the whole list: one row per place, the process it is for, what it may do there
//! and why. Everything not named here is closed to the process by Landlock (every filesystem
//! right the kernel knows is handled; TCP bind and connect have no rule at all). The list is
//! short on purpose: what a process needs to run a machine, and of the project nothing but the
//! one share a file server serves (or, for a guest that can be snapshotted, the shares the monitor
//! serves itself by 9p). A change to a row is a change to the monitor's sandbox:
//! review it with the row's reason.

use chock_guest::confine::Grant;

/// Which process a row confines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Process {
    /// QEMU. Its paths are those of the root the monitor is pivoted to (`monitor.rs`).
    Monitor,
    /// One virtiofsd, serving one share. Its paths are the host's, in its mount namespace.
    FileServer,
}

/// What a row names, resolved for each machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// `/usr`: programs, libraries, firmware.
    Usr,
    /// `/etc/ld.so.cache`.
    LoaderCache,
    /// `/dev/null`.
    DevNull,
    /// `/dev/urandom`.
    DevUrandom,
    /// `/dev/kvm`.
    DevKvm,
    /// The guest's kernel (`/boot/vmlinux` in the monitor's root).
    Kernel,
    /// The guest's initramfs (`/boot/initramfs` in the monitor's root).
    Initramfs,
    /// The machine's directory (`/vm` in the monitor's root): its sockets and its console log.
    MachineDir,
    /// The directory a file server serves; for the monitor of a guest that can be snapshotted,
    /// each directory it serves itself by 9p (bound at its own path in its root; an overlay
    /// workspace's merged directory, which it mounted there, is one of them).
    Share,
    /// A file server's own `/run` (a tmpfs of its mount namespace).
    ServerRun,
    /// `/proc`.
    Proc,
    /// The monitor's own descriptor directory, `/proc/self/fd` in its root (bound from its
    /// `/proc/PID/fd`; nothing else of /proc is there).
    OwnFds,
}

/// When a row applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    /// Always.
    Always,
    /// Only when the guest runs under KVM.
    Kvm,
    /// Only for a share the guest may only read.
    ReadOnlyShare,
    /// Only for a share the guest may write.
    ReadWriteShare,
    /// Only for a guest that can be snapshotted (its shares served by QEMU itself over 9p).
    Snapshots,
}

/// One reviewed row.
#[derive(Debug, Clone, Copy)]
pub struct AccessRule {
    /// The process it confines.
    pub process: Process,
    /// Where.
    pub place: Place,
    /// What may be done there.
    pub grant: Grant,
    /// When the row applies.
    pub when: When,
    /// Why the process needs it.
    pub why: &'static str,
}

const fn row(
    process: Process,
    place: Place,
    grant: Grant,
    when: When,
    why: &'static str,
) -> AccessRule {
    AccessRule {
        process,
        place,
        grant,
        when,
        why,
    }
}

use Grant::{Device, Exec, MakeSockets, Read, ReadWrite, WriteFiles};
use Place::*;
use Process::{FileServer, Monitor};
use When::{Always, Kvm, ReadOnlyShare, ReadWriteShare, Snapshots};

/// The list. Paths beneath a row's place are covered by it; nothing else is reachable.
pub const RULES: &[AccessRule] = &[
    // The monitor.
    row(
        Monitor,
        Usr,
        Exec,
        Always,
        "QEMU itself, the libraries it links and the firmware and option ROMs it loads; the \
         root shows the host's /usr read-only",
    ),
    row(
        Monitor,
        LoaderCache,
        Read,
        Always,
        "the dynamic loader reads its cache before it finds QEMU's libraries",
    ),
    row(
        Monitor,
        DevNull,
        Device,
        Always,
        "QEMU's unused standard streams",
    ),
    row(
        Monitor,
        DevUrandom,
        Read,
        Always,
        "QEMU seeds its random numbers (and the guest's, if it asks) from it",
    ),
    row(
        Monitor,
        DevKvm,
        Device,
        Kvm,
        "the accelerator: QEMU opens /dev/kvm and drives the VM and its vCPU by ioctl",
    ),
    row(
        Monitor,
        Kernel,
        Read,
        Always,
        "the guest's kernel, loaded once at boot",
    ),
    row(
        Monitor,
        Initramfs,
        Read,
        Always,
        "the guest's initramfs, loaded once at boot",
    ),
    row(
        Monitor,
        MachineDir,
        WriteFiles,
        Always,
        "the console log QEMU writes, and the channel's and the shares' sockets it connects to; \
         it reads nothing there",
    ),
    // The monitor of a guest that can be snapshotted, which serves its shares itself by 9p.
    row(
        Monitor,
        Share,
        Read,
        ReadOnlyShare,
        "each directory it serves by 9p that the guest may only read (a read-only bind in its \
         root; QEMU's `readonly=on` refuses the guest's writes too)",
    ),
    row(
        Monitor,
        Share,
        ReadWrite,
        ReadWriteShare,
        "each directory it serves by 9p that the guest may write: the bound workspace or the \
         merged directory of the overlay it mounted itself, and `[sandbox] write`",
    ),
    row(
        Monitor,
        OwnFds,
        Read,
        Snapshots,
        "QEMU's 9p server changes a file's mode and attributes through /proc/self/fd/N; the \
         directory is its own descriptors' alone, and a link out of it is checked at the path \
         it leads to",
    ),
    row(
        Monitor,
        MachineDir,
        MakeSockets,
        Snapshots,
        "the QMP socket the host stops and migrates the machine by, and the socket a fork's \
         monitor loads a snapshot's state from (`-incoming`); it may make sockets there",
    ),
    // Each file server.
    row(
        FileServer,
        Usr,
        Exec,
        Always,
        "virtiofsd itself and the libraries it links",
    ),
    row(
        FileServer,
        LoaderCache,
        Read,
        Always,
        "the dynamic loader reads its cache before it finds virtiofsd's libraries",
    ),
    row(
        FileServer,
        Share,
        Read,
        ReadOnlyShare,
        "the one directory it serves, which the guest may only read",
    ),
    row(
        FileServer,
        Share,
        ReadWrite,
        ReadWriteShare,
        "the one directory it serves, which the guest may write",
    ),
    row(
        FileServer,
        ServerRun,
        ReadWrite,
        Always,
        "its pid file, in a /run of its own (a tmpfs of its mount namespace)",
    ),
    row(
        FileServer,
        MachineDir,
        MakeSockets,
        Always,
        "the listening socket QEMU connects to; it may make sockets there and nothing else (it \
         cannot read the console, nor remove or replace another server's socket)",
    ),
    row(
        FileServer,
        Proc,
        Read,
        Always,
        "libcap-ng reads its capabilities from /proc/self/status, it reads /proc/sys/fs/file-max \
         and opens /proc/self/fd before its chroot; other processes' entries stay closed by \
         Landlock's own ptrace rule, and a link out of /proc is checked at the path it leads to",
    ),
];
