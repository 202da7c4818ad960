//! The guest kernel: Debian's `linux-image-amd64`, unpacked rather than installed
//! (`apt-get download`, `dpkg-deb -x`: no boot hooks run, nothing of the host changes), its
//! `vmlinux` taken out of the compressed image, and the few modules the guest loads.
//!
//! The kernel directory holds `vmlinux`, `release` (the kernel's release string) and
//! `modules/*.ko`. [`fetch`] makes it; [`GuestKernel::open`] reads it.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{VmError, lz4};

/// The Debian package whose dependency is the kernel: the generic flavour, because the cloud
/// flavour builds no 9p, and a guest that can be snapshotted shares by virtio-9p
/// (docs/microvm.md, "Snapshots and forks"). It boots as fast under TCG.
pub const PACKAGE: &str = "linux-image-amd64";

/// The modules the guest's init loads, under the kernel's module tree: the virtio-mmio transport
/// and ring, the console (the channel's port), FUSE and virtiofs (the shares), overlayfs (a
/// call's overlay workspace).
pub const MODULES: &[&str] = &[
    "kernel/drivers/virtio/virtio.ko",
    "kernel/drivers/virtio/virtio_ring.ko",
    "kernel/drivers/virtio/virtio_mmio.ko",
    "kernel/drivers/char/virtio_console.ko",
    "kernel/fs/fuse/fuse.ko",
    "kernel/fs/fuse/virtiofs.ko",
    "kernel/fs/overlayfs/overlay.ko",
];

/// The modules a guest that can be snapshotted also loads: virtio-9p and what it needs. A
/// kernel directory fetched before them (the cloud kernel has no 9p) boots guests that cannot
/// be snapshotted; one that is asked to be is refused by name.
pub const NINE_P_MODULES: &[&str] = &[
    "kernel/fs/netfs/netfs.ko",
    "kernel/fs/fscache/fscache.ko",
    "kernel/net/9p/9pnet.ko",
    "kernel/net/9p/9pnet_virtio.ko",
    "kernel/fs/9p/9p.ko",
];

/// A guest kernel ready to boot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestKernel {
    /// The uncompressed kernel (an ELF with a PVH entry).
    pub vmlinux: PathBuf,
    /// The kernel's release (`6.1.0-…-amd64`), what `uname -r` says in the guest.
    pub release: String,
    /// The modules, each a `.ko` file.
    pub modules: Vec<PathBuf>,
    /// Whether the 9p modules are among them ([`NINE_P_MODULES`]).
    pub nine_p: bool,
}

/// Where the kernel is kept unless told: `$CHOCK_VM_DIR`, else `$XDG_CACHE_HOME/chock/vm`, else
/// `~/.cache/chock/vm`.
pub fn default_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("CHOCK_VM_DIR").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(d));
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))?;
    Some(cache.join("chock").join("vm"))
}

impl GuestKernel {
    /// The kernel kept in `dir`, or an error saying what is missing and how to fetch it.
    pub fn open(dir: &Path) -> Result<GuestKernel, VmError> {
        let missing = |what: &str| {
            VmError::Kernel(format!(
                "no guest kernel in {}: {what} is missing (fetch it with `chock vm kernel`)",
                dir.display()
            ))
        };
        let vmlinux = dir.join("vmlinux");
        if !vmlinux.is_file() {
            return Err(missing("vmlinux"));
        }
        let release = std::fs::read_to_string(dir.join("release"))
            .map_err(|_| missing("release"))?
            .trim()
            .to_string();
        let mut modules = Vec::new();
        for m in MODULES {
            let name = Path::new(m).file_name().unwrap_or_default();
            let path = dir.join("modules").join(name);
            if !path.is_file() {
                return Err(missing(&format!("modules/{}", name.to_string_lossy())));
            }
            modules.push(path);
        }
        let nine_p: Vec<PathBuf> = NINE_P_MODULES
            .iter()
            .map(|m| {
                dir.join("modules")
                    .join(Path::new(m).file_name().unwrap_or_default())
            })
            .collect();
        let has_nine_p = nine_p.iter().all(|p| p.is_file());
        if has_nine_p {
            modules.extend(nine_p);
        }
        Ok(GuestKernel {
            vmlinux,
            release,
            modules,
            nine_p: has_nine_p,
        })
    }
}

fn run(cmd: &mut Command, what: &str) -> Result<String, VmError> {
    let out = cmd
        .output()
        .map_err(|e| VmError::Kernel(format!("{what}: {e}")))?;
    if !out.status.success() {
        return Err(VmError::Kernel(format!(
            "{what}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Fetches the kernel into `dir` with Debian's own tools (apt-get, dpkg-deb), unpacked in a
/// directory of its own and never installed, then takes `vmlinux` and the modules out of it.
pub fn fetch(dir: &Path) -> Result<GuestKernel, VmError> {
    let io = |what: &str, e: std::io::Error| VmError::Kernel(format!("{what}: {e}"));
    std::fs::create_dir_all(dir.join("modules")).map_err(|e| io("make the kernel directory", e))?;
    let work = tempfile::tempdir_in(dir).map_err(|e| io("make a download directory", e))?;
    // The metapackage only depends on the versioned kernel package: download that one.
    let depends = run(
        Command::new("apt-cache").args(["depends", PACKAGE]),
        "apt-cache depends",
    )?;
    let image = depends
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Depends: "))
        .find(|p| p.starts_with("linux-image-"))
        .ok_or_else(|| VmError::Kernel(format!("{PACKAGE} names no kernel package")))?
        .to_string();
    run(
        Command::new("apt-get")
            .args(["download", "-q", &image])
            .current_dir(work.path()),
        "apt-get download",
    )?;
    let deb = std::fs::read_dir(work.path())
        .map_err(|e| io("read the download directory", e))?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "deb"))
        .ok_or_else(|| VmError::Kernel(format!("apt-get download left no .deb of {image}")))?;
    let root = work.path().join("root");
    run(
        Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&root),
        "dpkg-deb -x",
    )?;
    let release = image
        .strip_prefix("linux-image-")
        .unwrap_or(&image)
        .to_string();
    let vmlinuz = root.join("boot").join(format!("vmlinuz-{release}"));
    let image_bytes = std::fs::read(&vmlinuz).map_err(|e| io("read the kernel image", e))?;
    let vmlinux = extract_vmlinux(&image_bytes)?;
    std::fs::write(dir.join("vmlinux"), vmlinux).map_err(|e| io("write vmlinux", e))?;
    let tree = root.join("lib/modules").join(&release);
    for m in MODULES.iter().chain(NINE_P_MODULES) {
        let name = Path::new(m).file_name().unwrap_or_default();
        std::fs::copy(tree.join(m), dir.join("modules").join(name))
            .map_err(|e| io(&format!("copy the module {m}"), e))?;
    }
    std::fs::write(dir.join("release"), format!("{release}\n"))
        .map_err(|e| io("write the release", e))?;
    GuestKernel::open(dir)
}

/// The uncompressed kernel out of a bzImage: its payload (where the setup header says), which a
/// Debian kernel compresses with LZ4 (the cloud flavour) or XZ (the generic one, unpacked by
/// the `xz` tool, as the package itself is by dpkg-deb). Checked to be an ELF file.
pub fn extract_vmlinux(bzimage: &[u8]) -> Result<Vec<u8>, VmError> {
    let bad = |why: &str| VmError::Kernel(format!("not a kernel image this can boot: {why}"));
    let u32_at = |at: usize| {
        bzimage
            .get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    };
    if bzimage.get(0x202..0x206) != Some(&b"HdrS"[..]) {
        return Err(bad("no setup header"));
    }
    let setup_sects = match bzimage.get(0x1f1).copied() {
        Some(0) => 4,
        Some(n) => usize::from(n),
        None => return Err(bad("cut short")),
    };
    let protected = (setup_sects + 1) * 512;
    let (offset, length) = (
        u32_at(0x248).ok_or_else(|| bad("cut short"))?,
        u32_at(0x24c).ok_or_else(|| bad("cut short"))?,
    );
    let payload = bzimage
        .get(protected + offset..protected + offset + length)
        .ok_or_else(|| bad("the payload lies past the end"))?;
    let elf = if payload.starts_with(&lz4::MAGIC) {
        lz4::decompress_legacy(payload)?
    } else if payload.starts_with(XZ_MAGIC) {
        unxz(payload)?
    } else {
        return Err(bad(
            "its payload is neither LZ4 nor XZ (only Debian's kernels are unpacked)",
        ));
    };
    if !elf.starts_with(b"\x7fELF") {
        return Err(bad("the payload is not an ELF kernel"));
    }
    Ok(elf)
}

/// The magic bytes an XZ stream starts with.
const XZ_MAGIC: &[u8] = b"\xfd7zXZ\0";

/// An XZ payload decompressed by `xz` (its one stream: the bytes after it are the image's own).
fn unxz(payload: &[u8]) -> Result<Vec<u8>, VmError> {
    use std::io::Write;
    let fail =
        |e: &dyn std::fmt::Display| VmError::Kernel(format!("xz -d (Debian: xz-utils): {e}"));
    let mut child = Command::new("xz")
        .args(["-d", "-c", "--single-stream", "-q"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| fail(&e))?;
    let mut stdin = child.stdin.take().ok_or_else(|| fail(&"no stdin"))?;
    let input = payload.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().map_err(|e| fail(&e))?;
    let _ = writer.join();
    if !out.status.success() {
        return Err(fail(&String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok(out.stdout)
}
