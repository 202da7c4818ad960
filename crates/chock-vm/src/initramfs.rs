//! The guest's initramfs, built by Chock itself: a `newc` cpio archive holding the guest's init
//! (`/init`, chock-guest's static binary), the kernel modules it loads (`/modules`), the /etc
//! entries a call sees on the host (`chock_sandbox::ETC_ENTRIES`, copied: the guest shares no
//! /etc of the host), and the empty directories the init mounts on.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use crate::VmError;
use crate::kernel::GuestKernel;

const DIR: u32 = 0o040_000;
const FILE: u32 = 0o100_000;
const LINK: u32 = 0o120_000;

/// Never copied into the guest, under an /etc entry: private keys.
const NEVER: &[&str] = &["ssl/private"];

/// A `newc` archive being written.
#[derive(Debug, Default)]
pub struct Archive {
    bytes: Vec<u8>,
    next_ino: u32,
}

impl Archive {
    fn entry(&mut self, name: &str, mode: u32, data: &[u8]) {
        self.next_ino += 1;
        let fields = [
            self.next_ino,
            mode,
            0,
            0,
            if mode & DIR == DIR { 2 } else { 1 },
            0,
            u32::try_from(data.len()).unwrap_or(u32::MAX),
            0,
            0,
            0,
            0,
            u32::try_from(name.len() + 1).unwrap_or(u32::MAX),
            0,
        ];
        self.bytes.extend_from_slice(b"070701");
        for f in fields {
            self.bytes.extend_from_slice(format!("{f:08X}").as_bytes());
        }
        self.bytes.extend_from_slice(name.as_bytes());
        self.bytes.push(0);
        self.pad();
        self.bytes.extend_from_slice(data);
        self.pad();
    }

    fn pad(&mut self) {
        while !self.bytes.len().is_multiple_of(4) {
            self.bytes.push(0);
        }
    }

    /// A directory (its parents must have been added first).
    pub fn dir(&mut self, name: &str) {
        self.entry(name, DIR | 0o755, &[]);
    }

    /// A regular file with `mode`'s permission bits.
    pub fn file(&mut self, name: &str, mode: u32, data: &[u8]) {
        self.entry(name, FILE | (mode & 0o7777), data);
    }

    /// A symbolic link to `target`.
    pub fn symlink(&mut self, name: &str, target: &str) {
        self.entry(name, LINK | 0o777, target.as_bytes());
    }

    /// The archive, closed by its trailer.
    pub fn finish(mut self) -> Vec<u8> {
        self.entry("TRAILER!!!", 0, &[]);
        self.bytes
    }

    /// Copies `host` (a file, a link, or a directory and what it holds) as `name`; what cannot
    /// be read is left out, as the host sandbox leaves out what does not exist.
    fn copy(&mut self, host: &Path, name: &str) {
        if NEVER.iter().any(|n| name == format!("etc/{n}")) {
            return;
        }
        let Ok(meta) = std::fs::symlink_metadata(host) else {
            return;
        };
        if meta.file_type().is_symlink() {
            if let Ok(target) = std::fs::read_link(host) {
                self.symlink(name, &target.to_string_lossy());
            }
        } else if meta.is_dir() {
            let Ok(entries) = std::fs::read_dir(host) else {
                return;
            };
            self.dir(name);
            let mut names: Vec<_> = entries.flatten().map(|e| e.file_name()).collect();
            names.sort();
            for n in names {
                let n = n.to_string_lossy();
                self.copy(&host.join(&*n), &format!("{name}/{n}"));
            }
        } else if meta.is_file()
            && let Ok(data) = std::fs::read(host)
        {
            self.file(
                name,
                meta.permissions().mode() | (meta.mode() & 0o7000),
                &data,
            );
        }
    }
}

/// The guest's initramfs: `init` (the guest's init binary) and `kernel`'s modules.
pub fn build(init: &Path, kernel: &GuestKernel) -> Result<Vec<u8>, VmError> {
    let read = |p: &Path| {
        std::fs::read(p).map_err(|e| VmError::Guest(format!("read {}: {e}", p.display())))
    };
    let mut a = Archive::default();
    for d in ["dev", "proc", "sys", "tmp", "run", "usr", "etc", "modules"] {
        a.dir(d);
    }
    a.file("init", 0o755, &read(init)?);
    for m in &kernel.modules {
        let name = m.file_name().unwrap_or_default().to_string_lossy();
        a.file(&format!("modules/{name}"), 0o644, &read(m)?);
    }
    for entry in chock_sandbox::ETC_ENTRIES {
        a.copy(&Path::new("/etc").join(entry), &format!("etc/{entry}"));
    }
    Ok(a.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_aligned_and_the_trailer_ends_it() {
        let mut a = Archive::default();
        a.dir("d");
        a.file("d/f", 0o644, b"abc");
        a.symlink("l", "d/f");
        let bytes = a.finish();
        assert_eq!(bytes.len() % 4, 0);
        assert!(bytes.starts_with(b"070701"));
        let text = String::from_utf8_lossy(&bytes);
        assert!(text.contains("d/f\0"));
        assert!(text.contains("TRAILER!!!\0"));
        // The file's size field (the seventh) says 3.
        let second = text
            .find("070701")
            .and_then(|_| text[6..].find("070701"))
            .unwrap()
            + 6;
        assert_eq!(&text[second + 6 + 6 * 8..second + 6 + 7 * 8], "00000003");
    }
}
