//! What a suite of microVM sessions needs before its one test: the guest's init and kernel,
//! found where CI puts them (or where `CHOCK_GUEST_INIT` and `CHOCK_VM_DIR` say) and named to the
//! session through those variables.

use std::path::{Path, PathBuf};

use chock_test_support::microvm::{QEMU, guest_init, kernel_dir};

/// Whether QEMU, the guest's init, its kernel and each of `tools` are here (each missing one is
/// reported by `chock_test_support::installed`, which fails in CI); when they are, the session
/// is told where the init and the kernel are.
///
/// Call it first in the binary's only test, before any thread starts: it sets the environment.
pub fn ready(tools: &[&str]) -> bool {
    let guest_init = guest_init();
    let kernel = kernel_dir();
    let needed = [
        Path::new(QEMU).to_path_buf(),
        guest_init.clone(),
        kernel.join("vmlinux"),
    ];
    // Every one is checked, so each missing one is reported.
    let missing = needed
        .iter()
        .map(PathBuf::as_path)
        .chain(tools.iter().map(Path::new))
        .filter(|p| !chock_test_support::installed(p))
        .count();
    if missing > 0 {
        return false;
    }
    // SAFETY: the binary's only test calls this before it starts any thread of its own; nothing
    // else reads the environment meanwhile.
    unsafe {
        std::env::set_var("CHOCK_VM_DIR", &kernel);
        std::env::set_var("CHOCK_GUEST_INIT", &guest_init);
    }
    true
}
