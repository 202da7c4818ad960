//! What the guest suites share: the kernel directory, the guest's init and a confiner made of
//! them, or `None` (reported by `chock_test_support`, which fails in CI) when a piece is missing.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::OnceLock;

use chock_test_support::{installed, requires};
use chock_vm::{GuestConfig, GuestConfiner};

/// The target directory this test binary was built in.
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.ancestors().nth(3).unwrap().to_path_buf()
}

/// The kernel directory (`CHOCK_VM_DIR`, else the target's), fetched once per binary when it is
/// missing, or (`nine_p`) has no 9p modules.
pub fn kernel_dir(nine_p: bool) -> Option<PathBuf> {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let dir = std::env::var_os("CHOCK_VM_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| target_dir().join("chock-vm-kernel"));
        if chock_vm::GuestKernel::open(&dir).is_ok_and(|k| k.nine_p || !nine_p) {
            return Ok(dir);
        }
        chock_vm::kernel::fetch(&dir)
            .map(|_| dir)
            .map_err(|e| e.to_string())
    });
    match dir {
        Ok(d) => Some(d.clone()),
        Err(e) => {
            requires(false, format_args!("the guest kernel: {e}"));
            None
        }
    }
}

/// The guest's init: `CHOCK_GUEST_INIT` (CI names its build), else the musl build beside this
/// test's target directory.
pub fn guest_init() -> PathBuf {
    std::env::var_os("CHOCK_GUEST_INIT")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join("x86_64-unknown-linux-musl/debug/chock-guest"))
}

/// A confiner of 512 MiB guests (`snapshots`: ones that can be snapshotted, sharing by 9p).
pub fn confiner(snapshots: bool) -> Option<GuestConfiner> {
    if !installed("/usr/bin/qemu-system-x86_64") || !installed(guest_init()) {
        return None;
    }
    let config = GuestConfig {
        kernel_dir: kernel_dir(snapshots)?,
        guest_init: guest_init(),
        memory_mib: 512,
        snapshots,
    };
    Some(GuestConfiner::new(&config).expect("a guest confiner"))
}
