//! How the daemon keeps its socket, lock and token, and the record of the sessions it owns.
//!
//! Where they are is [`chock_dirs`]'s (the client resolves the same place). The socket lives in
//! `$XDG_RUNTIME_DIR/chock/` (else `$XDG_STATE_HOME/chock/run/`, else
//! `~/.local/state/chock/run/`): a directory made 0700 (0710 with `--group`, whose group may then
//! pass through to the socket but not list it), owned by the daemon's user, and refused if it is
//! anything else (another owner, a symlink, wider modes). Both places are among the directories
//! chock-policy refuses as `[sandbox]` paths, so no call's mount plan can contain them.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::error::DaemonError;

pub use chock_dirs::LOCK_FILE;

/// Makes `dir` (and its parents) and checks it is ours, a directory, not a link, and private:
/// `mode` exactly (0700, or 0710 for a group), with group `gid` when given.
pub(crate) fn private_dir(dir: &Path, mode: u32, gid: Option<u32>) -> Result<(), DaemonError> {
    if let Some(parent) = dir.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)
            .map_err(|e| DaemonError::io("create", parent, e))?;
    }
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(DaemonError::io("create", dir, e)),
    }
    let meta = std::fs::symlink_metadata(dir).map_err(|e| DaemonError::io("stat", dir, e))?;
    let unsafe_dir = |why: String| DaemonError::UnsafeDir {
        path: dir.to_path_buf(),
        why,
    };
    if !meta.file_type().is_dir() {
        return Err(unsafe_dir(
            "is not a directory (a link?); remove it and start again".into(),
        ));
    }
    let me = rustix::process::geteuid().as_raw();
    if meta.uid() != me {
        return Err(unsafe_dir(format!(
            "belongs to uid {}, not to this user ({me})",
            meta.uid()
        )));
    }
    if let Some(gid) = gid {
        std::os::unix::fs::chown(dir, None, Some(gid))
            .map_err(|e| DaemonError::io("give the group to", dir, e))?;
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode))
        .map_err(|e| DaemonError::io("chmod", dir, e))?;
    Ok(())
}

/// The held daemon lock: the file stays locked while this lives (the kernel lets it go when the
/// process dies, so a crashed daemon never blocks the next).
#[derive(Debug)]
pub struct DaemonLock {
    _file: File,
    path: PathBuf,
}

/// How long a held lock is retried before it counts as another daemon's.
const LOCK_SETTLE: std::time::Duration = std::time::Duration::from_millis(250);

/// `flock` is held by an open file description, and a child between its fork and its `exec`
/// shares every one of ours, close-on-exec or not: a lock a daemon of this process just released
/// can read as held for that window (a daemon restarted in-process while its sessions spawn
/// `git`). A daemon that really runs holds it for good, so the lock is retried for
/// [`LOCK_SETTLE`] before it is called taken.
fn try_lock_settled(file: &File) -> Result<(), std::fs::TryLockError> {
    let deadline = std::time::Instant::now() + LOCK_SETTLE;
    loop {
        match file.try_lock() {
            Err(std::fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            other => return other,
        }
    }
}

impl DaemonLock {
    /// Takes the lock in `dir`, or says which daemon holds it.
    pub fn acquire(dir: &Path) -> Result<DaemonLock, DaemonError> {
        let path = dir.join(LOCK_FILE);
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map_err(|e| DaemonError::io("open", &path, e))?;
        match try_lock_settled(&file) {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let mut text = String::new();
                let _ = file.read_to_string(&mut text);
                return Err(DaemonError::AlreadyRunning {
                    pid: text.trim().parse().unwrap_or(0),
                    lock: path,
                });
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(DaemonError::io("lock", &path, e));
            }
        }
        let write = |file: &mut File| -> std::io::Result<()> {
            file.set_len(0)?;
            file.seek(SeekFrom::Start(0))?;
            writeln!(file, "{}", std::process::id())?;
            file.sync_data()
        };
        write(&mut file).map_err(|e| DaemonError::io("write", &path, e))?;
        Ok(DaemonLock { _file: file, path })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Writes `text` to `path`, readable by this user only.
pub(crate) fn write_private(path: &Path, text: &str) -> Result<(), DaemonError> {
    let tmp = path.with_extension("tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(|e| DaemonError::io("create", &tmp, e))?;
    file.write_all(text.as_bytes())
        .map_err(|e| DaemonError::io("write", &tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| DaemonError::io("rename", path, e))
}

/// The sessions a daemon started, one id a line in `<state>/chock/daemon/owned`: so a daemon that
/// restarted still lists them as its own and shows their unanswered questions.
#[derive(Debug, Clone)]
pub struct Owned {
    path: PathBuf,
}

impl Owned {
    /// The record under `state` (`$XDG_STATE_HOME/chock`).
    pub fn new(state: &Path) -> Owned {
        Owned {
            path: state.join("daemon").join("owned"),
        }
    }

    /// Every id recorded.
    pub fn read(&self) -> Vec<String> {
        std::fs::read_to_string(&self.path)
            .unwrap_or_default()
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect()
    }

    /// Records `session`.
    pub fn add(&self, session: &str) -> Result<(), DaemonError> {
        if let Some(dir) = self.path.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| DaemonError::io("create", dir, e))?;
        }
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .open(&self.path)
            .map_err(|e| DaemonError::io("open", &self.path, e))?;
        writeln!(file, "{session}").map_err(|e| DaemonError::io("write", &self.path, e))
    }
}
