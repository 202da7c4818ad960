//! Which accelerator QEMU runs a guest with, and why: hardware KVM where the host has it, TCG
//! emulation where it does not. `chock doctor` prints the choice and its reason.

use std::path::Path;

/// How the guest's CPU is run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accel {
    /// Hardware virtualisation through /dev/kvm.
    Kvm,
    /// QEMU's emulation (slower; needs nothing of the host).
    Tcg,
}

impl Accel {
    /// QEMU's name for it (`-accel`).
    pub fn name(self) -> &'static str {
        match self {
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg",
        }
    }
}

/// The accelerator chosen for this machine, and the reason in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccelChoice {
    /// The accelerator.
    pub accel: Accel,
    /// Why it was chosen.
    pub why: String,
}

/// Chooses for this machine: `CHOCK_VM_ACCEL=kvm|tcg` forces one; otherwise KVM when /dev/kvm
/// opens and is hardware KVM (kvm_intel or kvm_amd), TCG when it is not there, cannot be opened,
/// or is PVM (kvm_pvm: a paravirtual KVM that boots only guest kernels built for it, not a stock
/// Debian kernel).
pub fn choose() -> AccelChoice {
    choose_from(
        std::env::var("CHOCK_VM_ACCEL").ok().as_deref(),
        Path::new("/sys/module"),
        Path::new("/dev/kvm"),
    )
}

fn choose_from(forced: Option<&str>, modules: &Path, dev: &Path) -> AccelChoice {
    let pick = |accel, why: String| AccelChoice { accel, why };
    match forced {
        Some("kvm") => return pick(Accel::Kvm, "CHOCK_VM_ACCEL=kvm".into()),
        Some("tcg") => return pick(Accel::Tcg, "CHOCK_VM_ACCEL=tcg".into()),
        _ => {}
    }
    if modules.join("kvm_pvm").exists() {
        return pick(
            Accel::Tcg,
            "/dev/kvm is PVM (kvm_pvm is loaded), which boots only PVM guest kernels, not a stock \
             one"
            .into(),
        );
    }
    if let Err(e) = std::fs::File::options().read(true).write(true).open(dev) {
        return pick(
            Accel::Tcg,
            format!("{} cannot be opened: {e}", dev.display()),
        );
    }
    if ["kvm_intel", "kvm_amd"]
        .iter()
        .any(|m| modules.join(m).exists())
    {
        pick(Accel::Kvm, "/dev/kvm is hardware KVM".into())
    } else {
        pick(
            Accel::Tcg,
            "/dev/kvm opens but neither kvm_intel nor kvm_amd is loaded".into(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pvm_is_emulated_and_hardware_kvm_is_used() {
        let d = tempfile::tempdir().unwrap();
        let dev = d.path().join("kvm");
        std::fs::write(&dev, b"").unwrap();
        let modules = d.path().join("module");
        std::fs::create_dir_all(modules.join("kvm_intel")).unwrap();
        assert_eq!(choose_from(None, &modules, &dev).accel, Accel::Kvm);
        std::fs::create_dir_all(modules.join("kvm_pvm")).unwrap();
        let c = choose_from(None, &modules, &dev);
        assert_eq!(c.accel, Accel::Tcg);
        assert!(c.why.contains("PVM"), "{}", c.why);
        let none = choose_from(None, &d.path().join("none"), &d.path().join("none"));
        assert_eq!(none.accel, Accel::Tcg);
        assert_eq!(choose_from(Some("kvm"), &modules, &dev).accel, Accel::Kvm);
    }
}
