//! Making entries in a directory by descriptor: what writing a fresh overlay upper layer needs (a
//! fork's workspace, docs/forks.md). Every entry is made `O_EXCL`-style (never over something
//! already there) and relative to the [`Dir`] it goes in, so nothing is made through a symlink.

use std::ffi::OsStr;
use std::io::Write;

use rustix::fs::{Mode, OFlags};

use crate::dir::Dir;

impl Dir {
    /// Makes the directory `name` in this one with `mode` (refused when anything is there).
    pub fn make_dir(&self, name: &OsStr, mode: u32) -> std::io::Result<()> {
        Ok(rustix::fs::mkdirat(self, name, Mode::from_raw_mode(mode))?)
    }

    /// Makes the regular file `name` with `bytes` and `mode` (`O_CREAT | O_EXCL | O_NOFOLLOW`:
    /// refused when anything, a symlink included, is there); the mode is set on the descriptor, so
    /// the umask does not narrow it.
    pub fn make_file(&self, name: &OsStr, bytes: &[u8], mode: u32) -> std::io::Result<()> {
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(self, name, flags, Mode::from_raw_mode(0o600))?;
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode))?;
        let mut file = std::fs::File::from(fd);
        file.write_all(bytes)?;
        file.sync_data()
    }

    /// Makes the symlink `name` pointing at `target` (never followed here).
    pub fn make_symlink(&self, name: &OsStr, target: &OsStr) -> std::io::Result<()> {
        Ok(rustix::fs::symlinkat(target, self, name)?)
    }

    /// Makes an overlay whiteout named `name`: a character device 0/0, which hides the lower
    /// layer's `name` in the merged view. The kernel lets an unprivileged process make exactly this
    /// device (Linux 5.8 and later), so a fork works as any user.
    pub fn make_whiteout(&self, name: &OsStr) -> std::io::Result<()> {
        Ok(rustix::fs::mknodat(
            self,
            name,
            rustix::fs::FileType::CharacterDevice,
            Mode::from_raw_mode(0o600),
            0,
        )?)
    }
}
