//! Landlock around a guest's monitor and its file servers (docs/microvm.md, "The monitor's
//! sandbox"): the third step between a call and the host.
//!
//! The monitor (QEMU) and each virtiofsd already run in namespaces of their own (`monitor.rs`,
//! `machine.rs`). Last in each, `chock-confine` (chock-guest's second binary) applies a Landlock
//! ruleset made from [`rules::RULES`] for that process and this machine, then execs the
//! program: the ruleset is in force from its first instruction and cannot be dropped, and a
//! ruleset that cannot be applied exactly ends the process before the program runs, so the
//! guest's start fails (rule 1). This module turns the reviewed rows into that command line.

pub mod rules;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use chock_guest::confine::{Invocation, Rule};
use rules::{Place, Process, RULES, When};

use crate::VmError;

/// The helper's name, installed beside the guest's init.
pub const HELPER: &str = "chock-confine";

/// The helper: `CHOCK_VM_CONFINE` when set; else `chock-confine` beside the guest's init (both
/// are chock-guest's binaries, built together for musl), beside the running program, or in a
/// build tree the musl build beside the target's profile directories.
pub fn default_helper(guest_init: &Path) -> Result<PathBuf, VmError> {
    if let Some(p) = std::env::var_os("CHOCK_VM_CONFINE").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    let mut candidates: Vec<PathBuf> = guest_init
        .parent()
        .map(|d| d.join(HELPER))
        .into_iter()
        .collect();
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    {
        candidates.push(dir.join(HELPER));
        for d in dir.ancestors().take(3) {
            for p in ["debug", "release"] {
                candidates.push(d.join("x86_64-unknown-linux-musl").join(p).join(HELPER));
            }
        }
    }
    candidates.into_iter().find(|p| p.is_file()).ok_or_else(|| {
        VmError::Guest(format!(
            "the monitor's confinement `{HELPER}` is not installed beside the guest's init {} \
             (build chock-guest for x86_64-unknown-linux-musl, or set CHOCK_VM_CONFINE); a guest \
             does not start without it",
            guest_init.display()
        ))
    })
}

/// What a machine's rows are resolved against.
#[derive(Debug, Clone)]
pub(crate) struct Machine<'a> {
    /// The guest runs under KVM.
    pub kvm: bool,
    /// The machine's directory as the file servers see it (the host's path).
    pub dir: &'a Path,
    /// The directories the monitor serves itself by 9p (a guest that can be snapshotted; none
    /// otherwise), each at its own path in the monitor's root.
    pub served: &'a [crate::machine::HostShare],
    /// The guest can be snapshotted.
    pub snapshots: bool,
}

/// The rules of `process` for one machine and, for a file server, its share. The monitor's
/// share rows apply to each directory it serves itself ([`Machine::served`]).
pub(crate) fn rules_for(
    process: Process,
    m: &Machine<'_>,
    share: Option<&crate::machine::HostShare>,
) -> Vec<Rule> {
    let shares: Vec<&crate::machine::HostShare> = match process {
        Process::Monitor => m.served.iter().collect(),
        Process::FileServer => share.into_iter().collect(),
    };
    let mut out = Vec::new();
    for r in RULES.iter().filter(|r| r.process == process) {
        let applies = match r.when {
            When::Always => true,
            When::Kvm => m.kvm,
            When::Snapshots => m.snapshots,
            When::ReadOnlyShare | When::ReadWriteShare => false,
        };
        let path = match (process, r.place) {
            (_, Place::Share) => {
                let want_read_only = r.when == When::ReadOnlyShare;
                let matching = shares.iter().filter(|s| {
                    matches!(r.when, When::ReadOnlyShare | When::ReadWriteShare)
                        && s.read_only == want_read_only
                });
                out.extend(matching.map(|s| Rule {
                    grant: r.grant,
                    path: s.path.clone(),
                }));
                continue;
            }
            _ if !applies => continue,
            (_, Place::Usr) => PathBuf::from("/usr"),
            (_, Place::LoaderCache) => PathBuf::from("/etc/ld.so.cache"),
            (_, Place::DevNull) => PathBuf::from("/dev/null"),
            (_, Place::DevUrandom) => PathBuf::from("/dev/urandom"),
            (_, Place::DevKvm) => PathBuf::from("/dev/kvm"),
            (_, Place::Kernel) => PathBuf::from("/boot/vmlinux"),
            (_, Place::Initramfs) => PathBuf::from("/boot/initramfs"),
            (Process::Monitor, Place::MachineDir) => PathBuf::from("/vm"),
            (Process::FileServer, Place::MachineDir) => m.dir.to_path_buf(),
            (_, Place::ServerRun) => PathBuf::from("/run"),
            (_, Place::Proc) => PathBuf::from("/proc"),
            (_, Place::OwnFds) => PathBuf::from("/proc/self/fd"),
        };
        out.push(Rule {
            grant: r.grant,
            path,
        });
    }
    out
}

/// The helper's command line that confines `program` with `rules`, in the root `root`.
pub(crate) fn wrap(
    helper: &Path,
    root: Option<&Path>,
    rules: Vec<Rule>,
    program: &Path,
    args: Vec<OsString>,
) -> Vec<OsString> {
    let inv = Invocation {
        root: root.map(Path::to_path_buf),
        rules,
        program: program.as_os_str().to_owned(),
        args,
    };
    let mut out = vec![helper.as_os_str().to_owned()];
    out.extend(inv.to_args());
    out
}

#[cfg(test)]
mod tests;
