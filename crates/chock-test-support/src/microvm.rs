//! Where the microVM suites find what a guest is made of: the guest's init (`CHOCK_GUEST_INIT`,
//! which CI sets to its musl build, else that build beside the test's target directory), the guest
//! kernel's directory (`CHOCK_VM_DIR`, else `chock-vm-kernel` in the target directory) and QEMU.
//! Whether each is there is for the suite to check ([`crate::installed`]), so each missing one is
//! reported.

use std::path::PathBuf;

/// The QEMU every microVM guest runs in (Debian's `qemu-system-x86`).
pub const QEMU: &str = "/usr/bin/qemu-system-x86_64";

/// The target directory the running test binary was built in (it lies in `<target>/debug/deps`).
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.ancestors()
        .nth(3)
        .expect("the test binary lies three levels below the target directory")
        .to_path_buf()
}

/// The guest's init: `CHOCK_GUEST_INIT`, else the musl build in the target directory.
pub fn guest_init() -> PathBuf {
    std::env::var_os("CHOCK_GUEST_INIT")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join("x86_64-unknown-linux-musl/debug/chock-guest"))
}

/// The guest kernel's directory: `CHOCK_VM_DIR`, else `chock-vm-kernel` in the target directory.
pub fn kernel_dir() -> PathBuf {
    std::env::var_os("CHOCK_VM_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join("chock-vm-kernel"))
}
