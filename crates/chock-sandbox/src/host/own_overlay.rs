//! The mount steps of a call's own overlay instance (one it mounts itself, not the session's
//! shared one): where its upper layer lives ([`OwnOverlay`]) and what each place needs.
//!
//! - `Durable` and `Volatile`: the workspace's upper and work directories on the host, reached
//!   under `/oldroot`; a volatile instance first removes the mark the last one left.
//! - `InMemory`: a tmpfs mounted at [`STAGING`] in the new root, the upper and work directories
//!   made in it, the overlay mounted over them, then the tmpfs detached from the tree and its
//!   mount point removed. The overlay keeps its own reference to the upper layer, so the call
//!   writes to it through the workspace and reaches it by no other path. Overlayfs needs extended
//!   attributes in the `user.` namespace on the upper layer (`userxattr`: opaque directories);
//!   without them it mounts anyway and a directory removed and made again would show the lower
//!   layer's files. tmpfs has them from Linux 6.6, so a step sets one first and fails the call
//!   (layer `workspace`) where the kernel lacks them; [`in_memory_supported`] lets the host
//!   choose `Volatile` on such a kernel before any call.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::host::mounts::builder::{Builder, escape_layer};
use crate::wire::error::{Layer, SandboxError};
use crate::wire::mount_ops::{Op, Step, cstr, old_root_path};
use crate::wire::plan::{OwnOverlay, Plan};

/// Where an in-memory upper's tmpfs is mounted while the overlay is made (in the call's new
/// root, removed before the command starts).
pub(crate) const STAGING: &str = "/.chock-scratch";

/// Whether this kernel's tmpfs keeps `user.` extended attributes (Linux 6.6), which an overlay's
/// upper layer needs ([`OwnOverlay::InMemory`]). Read from the release the kernel reports, since
/// the host cannot mount a tmpfs to try.
pub fn in_memory_supported() -> bool {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .and_then(|r| release_at_least(&r, (6, 6)))
        .unwrap_or(false)
}

fn release_at_least(release: &str, want: (u32, u32)) -> Option<bool> {
    let mut parts = release.trim().split(['.', '-']);
    let major = parts.next()?.parse::<u32>().ok()?;
    let minor = parts.next()?.parse::<u32>().ok()?;
    Some((major, minor) >= want)
}

/// The steps that mount the call's own overlay of `lower` at `target`, its upper layer where
/// `plan.own_overlay` says.
pub(crate) fn push(
    b: &mut Builder,
    plan: &Plan,
    target: &Path,
    (lower, upper, work): (&Path, &Path, &Path),
) -> Result<(), SandboxError> {
    b.mkdirs(target, Layer::Workspace)?;
    let staging = Path::new(STAGING);
    let (upper_at, work_at) = match plan.own_overlay {
        OwnOverlay::InMemory => {
            push_memory_layers(b, staging, root_mode(lower)?)?;
            (staging.join("upper"), staging.join("work"))
        }
        OwnOverlay::Durable | OwnOverlay::Volatile => (old_root_path(upper), old_root_path(work)),
    };
    let mut data = Vec::new();
    for (key, layer) in [
        ("lowerdir", &old_root_path(lower)),
        ("upperdir", &upper_at),
        ("workdir", &work_at),
    ] {
        data.extend_from_slice(key.as_bytes());
        data.push(b'=');
        escape_layer(&mut data, layer);
        data.push(b',');
    }
    data.extend_from_slice(b"userxattr");
    if plan.own_overlay == OwnOverlay::Volatile {
        data.extend_from_slice(b",volatile");
        push_clear_volatile_mark(b, work)?;
    }
    let label = match plan.own_overlay {
        OwnOverlay::InMemory => format!(
            "overlay {} (lower {}, upper in memory: a tmpfs of the call's own)",
            target.display(),
            lower.display(),
        ),
        OwnOverlay::Durable | OwnOverlay::Volatile => format!(
            "overlay {} (lower {}, upper {})",
            target.display(),
            lower.display(),
            upper.display()
        ),
    };
    let op = Op::Overlay {
        target: cstr(target.as_os_str().as_bytes())?,
        data: cstr(data)?,
        readonly: false,
    };
    b.push(op, Layer::Workspace, label);
    if plan.own_overlay == OwnOverlay::InMemory {
        b.push(
            Op::Detach {
                target: cstr(STAGING)?,
            },
            Layer::Workspace,
            format!("detach the in-memory upper's tmpfs from {STAGING}"),
        );
    }
    Ok(())
}

/// The permission bits of the project root `lower`: an overlay's root shows its upper root's
/// mode, so the upper root is made with the lower's (a project at 0755 is not 0700 inside).
fn root_mode(lower: &Path) -> Result<libc::mode_t, SandboxError> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(lower)
        .map_err(|e| SandboxError::host(format!("stat {}", lower.display()), e))?;
    Ok(meta.permissions().mode() & 0o7777)
}

/// A tmpfs at `staging` with the upper and work directories in it, checked for `user.` xattrs;
/// the upper root gets `upper_mode` (the project root's).
fn push_memory_layers(
    b: &mut Builder,
    staging: &Path,
    upper_mode: libc::mode_t,
) -> Result<(), SandboxError> {
    if b.made.contains(staging) {
        return Err(SandboxError::Plan(format!(
            "{STAGING} is where a call's in-memory workspace is staged; nothing else may be mounted there"
        )));
    }
    b.mkdirs(staging, Layer::Workspace)?;
    b.push(
        Op::Tmpfs {
            target: cstr(STAGING)?,
            data: cstr("mode=700,size=50%")?,
            flags: libc::MS_NOSUID | libc::MS_NODEV,
        },
        Layer::Workspace,
        format!("tmpfs {STAGING} (the workspace's upper layer, half of the memory)"),
    );
    let dirs: [PathBuf; 2] = [staging.join("upper"), staging.join("work")];
    for (dir, mode) in dirs.iter().zip([upper_mode, 0o700]) {
        b.push(
            Op::Mkdir {
                path: cstr(dir.as_os_str().as_bytes())?,
                mode,
            },
            Layer::Workspace,
            format!("mkdir {} (mode {mode:o})", dir.display()),
        );
    }
    b.push(
        Op::RequireUserXattr {
            path: cstr(dirs[0].as_os_str().as_bytes())?,
        },
        Layer::Workspace,
        "user.* extended attributes on the in-memory upper layer (tmpfs, Linux 6.6)".into(),
    );
    Ok(())
}

/// Steps that remove the mark a volatile instance of the same layers left
/// (`work/incompat/volatile/dirty` in the work directory), without which overlayfs refuses the
/// next mount; nothing there (the first instance) skips them. Run in the call's user namespace,
/// which may pass the kernel's mode-000 `work` directory (the host user may not).
fn push_clear_volatile_mark(b: &mut Builder, work: &Path) -> Result<(), SandboxError> {
    let mark = old_root_path(work).join("work/incompat/volatile");
    for (op, label) in [
        (
            Op::Unlink {
                path: cstr(mark.join("dirty").as_os_str().as_bytes())?,
            },
            "remove the last volatile instance's mark",
        ),
        (
            Op::Rmdir {
                path: cstr(mark.as_os_str().as_bytes())?,
            },
            "remove the last volatile instance's mark directory",
        ),
    ] {
        b.steps.push(Step {
            op,
            layer: Layer::Workspace,
            label: label.into(),
            optional: true,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::release_at_least;

    #[test]
    fn a_kernel_release_is_compared_by_major_and_minor() {
        assert_eq!(release_at_least("6.18.0-1-amd64\n", (6, 6)), Some(true));
        assert_eq!(release_at_least("6.6", (6, 6)), Some(true));
        assert_eq!(release_at_least("6.1.0-28-amd64", (6, 6)), Some(false));
        assert_eq!(release_at_least("5.15.0", (6, 6)), Some(false));
        assert_eq!(release_at_least("7.0-rc1", (6, 6)), Some(true));
        assert_eq!(release_at_least("garbage", (6, 6)), None);
    }
}
