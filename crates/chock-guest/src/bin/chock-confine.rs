//! chock-confine: the host's Landlock step around a microVM guest's monitor (QEMU) and each of
//! its file servers (virtiofsd), docs/microvm.md "The monitor's sandbox".
//!
//! It runs last in the namespaces and mounts chock-vm builds for the process, makes the root it
//! is told the process's only root (pivot_root, the old root detached), applies a Landlock ruleset of exactly the rules on its command line (every
//! filesystem access right the kernel knows is handled, TCP bind and connect are refused
//! outright, abstract unix sockets and signals are scoped), sets no_new_privs, and then becomes
//! the program: the ruleset is in force before the program's first instruction and cannot be
//! dropped. Anything that cannot be applied exactly ends it with an error and the program never
//! runs (rule 1), so the guest's start fails.
//!
//! Built for x86_64-unknown-linux-musl beside the guest's init (static, so it runs on any host).

#![forbid(unsafe_code)]

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode};

use chock_guest::confine::{Grant, Invocation, Rule};
use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let inv = match Invocation::parse(&args) {
        Ok(inv) => inv,
        Err(e) => {
            eprintln!("chock-confine: {e}");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = confine(&inv) {
        eprintln!("chock-confine: {e}; the program was not started");
        return ExitCode::from(3);
    }
    let e = Command::new(&inv.program).args(&inv.args).exec();
    eprintln!("chock-confine: exec {}: {e}", inv.program.to_string_lossy());
    ExitCode::from(127)
}

/// The new root, then the ruleset on this process (inherited by the program across exec).
fn confine(inv: &Invocation) -> Result<(), String> {
    if let Some(root) = &inv.root {
        let failed = |what: &str, e: std::io::Error| format!("{what} ({}): {e}", root.display());
        std::env::set_current_dir(root).map_err(|e| failed("chdir to the new root", e))?;
        rustix::process::pivot_root(".", ".")
            .map_err(|e| failed("pivot_root to the new root", e.into()))?;
        rustix::mount::unmount(".", rustix::mount::UnmountFlags::DETACH)
            .map_err(|e| failed("detach the old root", e.into()))?;
        std::env::set_current_dir("/").map_err(|e| failed("chdir / in the new root", e))?;
    }
    let abi_number = chock_sandbox::landlock_abi();
    if abi_number < 1 {
        return Err(format!(
            "this kernel offers no Landlock (ABI {abi_number}); boot the host with Landlock \
             among its security modules (`lsm=landlock,...`)"
        ));
    }
    let abi = ABI::from(abi_number);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(abi))
        .map_err(|e| format!("Landlock: handling the filesystem rights: {e}"))?;
    if abi_number >= 4 {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(abi))
            .map_err(|e| format!("Landlock: handling TCP: {e}"))?;
    }
    if abi_number >= 6 {
        ruleset = ruleset
            .scope(Scope::from_all(abi))
            .map_err(|e| format!("Landlock: scoping: {e}"))?;
    }
    let mut created = ruleset
        .create()
        .map_err(|e| format!("Landlock: creating the ruleset: {e}"))?;
    for rule in &inv.rules {
        let fd = PathFd::new(&rule.path)
            .map_err(|e| format!("Landlock: the rule's path {}: {e}", rule.path.display()))?;
        let access = access_for(rule, abi)?;
        created = created
            .add_rule(PathBeneath::new(fd, access))
            .map_err(|e| format!("Landlock: the rule for {}: {e}", rule.path.display()))?;
    }
    let status = created
        .restrict_self()
        .map_err(|e| format!("Landlock: enforcing the ruleset: {e}"))?;
    if status.ruleset != RulesetStatus::FullyEnforced || !status.no_new_privs {
        return Err(format!(
            "Landlock: the kernel enforced the ruleset only partly ({:?}, no_new_privs {})",
            status.ruleset, status.no_new_privs
        ));
    }
    Ok(())
}

/// The access rights a grant stands for under `abi`, narrowed to a file's rights when the path
/// is not a directory.
fn access_for(rule: &Rule, abi: ABI) -> Result<BitFlags<AccessFs>, String> {
    let all = AccessFs::from_all(abi);
    let wanted: BitFlags<AccessFs> = match rule.grant {
        Grant::Exec => AccessFs::from_read(abi),
        Grant::Read => AccessFs::ReadFile | AccessFs::ReadDir,
        Grant::Device => AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::IoctlDev,
        Grant::WriteFiles => {
            AccessFs::WriteFile | AccessFs::MakeReg | AccessFs::Truncate | AccessFs::ResolveUnix
        }
        Grant::MakeSockets => AccessFs::MakeSock.into(),
        Grant::ReadWrite => all,
    };
    let mut access = wanted & all;
    if !rule.path.is_dir() {
        access &= AccessFs::from_file(abi);
    }
    if access.is_empty() {
        return Err(format!(
            "Landlock: the grant `{}` gives nothing on {} (not a directory?)",
            rule.grant.name(),
            rule.path.display()
        ));
    }
    Ok(access)
}
