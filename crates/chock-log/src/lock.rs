//! The writer's lock: a `lock` file in the session directory holding the writer's pid, taken
//! with `flock(2)` (std's `File::try_lock`). The kernel drops a flock when its holder dies, so
//! a crashed writer leaves a lock file that anyone can see is stale: no pid guessing, no
//! timeouts.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use crate::LogError;
use crate::fsutil::open_private_rw;

/// The lock file's name inside a session directory.
pub const LOCK_FILE: &str = "lock";

/// Whether a session's writer is alive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    /// A process holds the lock: it is writing this session now.
    Live {
        /// The pid it recorded (0 if the file could not be read).
        pid: u32,
    },
    /// The lock file is there but nobody holds it: the writer ended or crashed
    /// (a `session.end` event tells which).
    Stale {
        /// The pid the last writer recorded, if readable.
        pid: Option<u32>,
    },
    /// No lock file: the directory was never opened by a writer (for example, imported).
    NoLock,
}

/// How often a writer tries again when the lock is held, and how long it waits between tries:
/// a liveness probe holds the lock shared for microseconds, so meeting one at each of these tries
/// (20 ms in all) means a writer holds it.
const PROBE_RETRIES: u32 = 20;
const PROBE_WAIT: std::time::Duration = std::time::Duration::from_millis(1);

/// A held writer lock. Dropping it (or the process dying) releases it.
#[derive(Debug)]
pub struct WriterLock {
    _file: File,
}

impl WriterLock {
    /// Takes the lock of `dir` for this process, or says who holds it.
    pub fn acquire(dir: &Path) -> Result<Self, LogError> {
        let path = dir.join(LOCK_FILE);
        let mut file = open_private_rw(&path)?;
        let mut tries = 0;
        loop {
            match file.try_lock() {
                Ok(()) => break,
                // Held: by a writer, or for a moment by a probe (`is_live` takes it shared to
                // look). A probe lets go within microseconds; a writer is still there after
                // every try.
                Err(std::fs::TryLockError::WouldBlock) if tries < PROBE_RETRIES => {
                    tries += 1;
                    std::thread::sleep(PROBE_WAIT);
                }
                Err(std::fs::TryLockError::WouldBlock) => {
                    let pid = read_pid(&mut file).unwrap_or(0);
                    return Err(LogError::Busy {
                        dir: dir.to_owned(),
                        pid,
                    });
                }
                Err(std::fs::TryLockError::Error(e)) => {
                    return Err(LogError::io("lock", &path, e));
                }
            }
        }
        // Not synced: the lock is the flock, which lives in the kernel; the pid is only what
        // `is_live` shows, and after a crash (the one case a sync would cover) the lock is stale
        // whatever the file says.
        let write_pid = |file: &mut File| -> std::io::Result<()> {
            file.set_len(0)?;
            file.seek(SeekFrom::Start(0))?;
            writeln!(file, "{}", std::process::id())
        };
        write_pid(&mut file).map_err(|e| LogError::io("write pid to", &path, e))?;
        Ok(Self { _file: file })
    }
}

/// Says whether a live process is writing the session in `dir`. Works across processes and
/// within one (a flock taken through another open file conflicts even in the same process).
pub fn is_live(dir: &Path) -> Result<Liveness, LogError> {
    let path = dir.join(LOCK_FILE);
    let mut file = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Liveness::NoLock),
        Err(e) => return Err(LogError::io("open", &path, e)),
    };
    let pid = read_pid(&mut file);
    match file.try_lock_shared() {
        // We got it, so nobody holds it exclusively; dropping `file` lets it go again.
        Ok(()) => Ok(Liveness::Stale { pid }),
        Err(std::fs::TryLockError::WouldBlock) => Ok(Liveness::Live {
            pid: pid.unwrap_or(0),
        }),
        Err(std::fs::TryLockError::Error(e)) => Err(LogError::io("probe lock", &path, e)),
    }
}

/// Blocks until no process holds the writer's lock of the session in `dir` (returns at once when
/// nobody does, or when there is no lock file): it waits on the lock itself (`flock(2)` shared,
/// blocking), so it returns as soon as the writer lets go, however it does. For a blocking
/// thread: the caller that wants to give up waits on it from elsewhere (the thread then stays
/// blocked until the lock is let go, or the process ends).
pub fn wait_until_free(dir: &Path) -> Result<(), LogError> {
    let path = dir.join(LOCK_FILE);
    let file = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(LogError::io("open", &path, e)),
    };
    loop {
        match file.lock_shared() {
            // Had it, so nobody holds it exclusively; dropping `file` lets it go again at once.
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(LogError::io("wait for lock", &path, e)),
        }
    }
}

fn read_pid(file: &mut File) -> Option<u32> {
    let mut text = String::new();
    file.seek(SeekFrom::Start(0)).ok()?;
    file.read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}
