//! `chock vm kernel`: fetches the microVM guest's kernel (docs/microvm.md) with Debian's own
//! tools, unpacked into Chock's cache and never installed, so no boot hook runs.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use crate::exit;
use crate::say::say;

/// `chock vm ...`.
#[derive(Debug, clap::Subcommand)]
pub enum VmCommand {
    /// Download Debian's linux-image-amd64, unpack it (never install it) and keep its
    /// vmlinux and the modules the guest loads (9p included, for snapshots).
    Kernel {
        /// Where to keep it (default: $CHOCK_VM_DIR, else ~/.cache/chock/vm).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
}

pub fn run(cmd: VmCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        VmCommand::Kernel { dir } => {
            let dir = dir
                .or_else(chock_vm::kernel::default_dir)
                .context("no directory for the guest kernel: pass --dir or set HOME")?;
            let kernel = chock_vm::kernel::fetch(&dir)
                .with_context(|| format!("fetching the guest kernel into {}", dir.display()))?;
            say!(
                "guest kernel {} in {} ({} modules)",
                kernel.release,
                dir.display(),
                kernel.modules.len()
            );
            Ok(ExitCode::from(exit::OK))
        }
    }
}
