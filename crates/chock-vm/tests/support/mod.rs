//! What the guest suites share: the kernel directory (fetched when missing) and a confiner made of
//! it and the guest's init (`chock_test_support::microvm` says where each lies), or `None`
//! (reported by `chock_test_support`, which fails in CI) when a piece is missing.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::OnceLock;

use chock_test_support::microvm::{QEMU, guest_init};
use chock_test_support::{installed, requires};
use chock_vm::{GuestConfig, GuestConfiner};

/// The kernel directory (`CHOCK_VM_DIR`, else the target's), fetched once per binary when it is
/// missing, or (`nine_p`) has no 9p modules.
pub fn kernel_dir(nine_p: bool) -> Option<PathBuf> {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let dir = chock_test_support::microvm::kernel_dir();
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

/// A confiner of 512 MiB guests (`snapshots`: ones that can be snapshotted, sharing by 9p).
pub fn confiner(snapshots: bool) -> Option<GuestConfiner> {
    if !installed(QEMU) || !installed(guest_init()) {
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
