//! The microVM guest behind the execution seam (docs/microvm.md): [`GuestConfiner`], the second
//! implementation of `chock_sandbox::Confiner`.
//!
//! Each call runs in a guest with a kernel of its own (QEMU's `microvm` machine, Debian's
//! kernel, an initramfs Chock builds around its own static init), and inside the guest the same
//! sandbox driver builds the same layers from the same serialised plan. A guest that cannot
//! start fails the call; nothing falls back to the host's driver. The guest has no network
//! device; the directories a plan names are shared into it by virtiofs (or virtio-9p, for a
//! guest that can be snapshotted), each at its own path. A guest is kept warm between calls;
//! one killed mid-call fails that call, and the next call boots a new one. A warm guest can be
//! snapshotted, and a fork's guest started from the snapshot with the fork's own workspace.

#![cfg_attr(not(test), deny(clippy::disallowed_methods))]

mod accel;
mod call;
mod channel;
pub mod confine;
mod confiner;
pub mod doctor;
pub mod initramfs;
pub mod kernel;
mod lz4;
mod machine;
mod monitor;
mod relay;
mod server_ids;
mod snapshot;

pub use accel::{Accel, AccelChoice, choose as choose_accel};
pub use confiner::{GuestConfig, GuestConfiner, default_guest_init, shares_for};
pub use kernel::GuestKernel;
pub use machine::{HostShare, KERNEL_CMDLINE};

/// What can go wrong outside a call: the kernel, the guest's files, a boot.
#[derive(Debug, thiserror::Error)]
pub enum VmError {
    /// The guest kernel is missing or cannot be unpacked.
    #[error("guest kernel: {0}")]
    Kernel(String),
    /// A guest could not be built or booted.
    #[error("microVM guest: {0}")]
    Guest(String),
}

impl VmError {
    /// What went wrong, without the part of the system it went wrong in.
    pub(crate) fn words(&self) -> &str {
        match self {
            VmError::Kernel(w) | VmError::Guest(w) => w,
        }
    }
}
