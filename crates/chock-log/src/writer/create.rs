//! A new session's log: its id and line 0 decided at once, its directory, writer lock and
//! `log.jsonl` made on a thread of their own.
//!
//! Why a thread: on this project's machine a new inode on the host's ext4 costs 0.24–0.34 ms, and a
//! session makes three (the directory, `lock`, `log.jsonl`) before its first act. `chock exec`
//! builds its sandbox while they are made ([`Log::create_in_background`]); nothing is written
//! after line 0, and nothing is synced, until they exist (every append and sync settles them
//! first), so rule 3 holds as before: the decision is durable before its act, under its names.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use serde_json::Value;

use super::{Log, Made, SessionHeader, Shared, State, short_secret};
use crate::fsutil::{create_private_dir_all, sync_dir};
use crate::line::{LOG_FILE, LOG_FORMAT, genesis_hash};
use crate::lock::WriterLock;
use crate::redact::Redactor;
use crate::{EventData, EventKind, LogError, SessionId};

/// How many fresh ids to try if a directory name is already taken (same second, same suffix).
const ID_ATTEMPTS: usize = 16;

impl Log {
    /// Creates a new session under `root` (normally [`crate::sessions_root`]): a fresh
    /// directory (0700) named by a new [`SessionId`], its writer lock, and `log.jsonl` whose
    /// line 0 is `session.start`, all on disk when this returns. Line 0 is durable, under its
    /// names, by the log's first sync (the first durable event's, the flusher's).
    ///
    /// The directory is new, so no other writer can hold it; [`Log::open`] is the path that
    /// refuses a directory with a live writer.
    pub fn create(root: &Path, header: SessionHeader) -> Result<Log, LogError> {
        let log = Self::create_in_background(root, header)?;
        log.made()?;
        Ok(log)
    }

    /// As [`Log::create`], but returns once the session's id and line 0 are decided, while its
    /// directory, lock and file are made on a thread: [`Log::dir`] may not exist yet. The first
    /// append, sync or [`Log::made`] waits for them; if they could not be made that call says
    /// why (naming the path) and the log is poisoned, so nothing after line 0 is ever written.
    pub fn create_in_background(root: &Path, header: SessionHeader) -> Result<Log, LogError> {
        // Whether the root is made now: only then is its own entry new, and its parent synced.
        let root_is_new = !root.is_dir();
        create_private_dir_all(root)?;
        let (id, dir) = match header.id.clone() {
            Some(id) => {
                let dir = root.join(id.as_str());
                if dir.symlink_metadata().is_ok() {
                    return Err(LogError::io(
                        "create session dir",
                        &dir,
                        std::io::ErrorKind::AlreadyExists.into(),
                    ));
                }
                (id, dir)
            }
            None => free_session_dir(root)?,
        };
        let mut redactor = Redactor::default();
        for secret in &header.secrets {
            if !redactor.add(secret) {
                return Err(short_secret(secret));
            }
        }
        let path = dir.join(LOG_FILE);
        let mut state = State {
            file: None,
            lock: None,
            making: None,
            next_seq: 0,
            prev: genesis_hash(id.as_str()),
            len: 0,
            redactor,
            poisoned: None,
            unsynced: 0,
            unsynced_since: None,
            names: None,
        };
        let kind = EventKind::SessionStart;
        let (seq, line) = state.render(kind, None, start_data(&id, header))?;
        // The new names: `log.jsonl` (and `lock`) in the session directory, the session directory
        // in the root, and the root in its parent when it was made just now (a root that already
        // existed was synced into its parent by the call that made it).
        let mut names = vec![dir.clone(), root.to_path_buf()];
        if let Some(parent) = root
            .parent()
            .filter(|p| root_is_new && !p.as_os_str().is_empty())
        {
            names.push(parent.to_path_buf());
        }
        let make = {
            let (dir, line) = (dir.clone(), line.clone());
            move || make_files(&dir, &line, names)
        };
        match std::thread::Builder::new()
            .name("chock-log-create".into())
            .spawn(make.clone())
        {
            Ok(thread) => state.making = Some(thread),
            Err(_) => {
                let Made { file, lock, names } = make()?;
                (state.file, state.lock, state.names) = (Some(file), Some(lock), names);
            }
        }
        state.chain(seq, &line);
        // Line 0 is grouped: synced by the first durable event (which waits for the names too).
        let durable = kind.durability().before_return();
        if !durable {
            state.unsynced = 1;
            state.unsynced_since = Some(Instant::now());
        }
        let log = Log::owning(Shared {
            dir,
            id,
            path,
            state: Mutex::new(state),
            flusher: Mutex::new(None),
            tap: OnceLock::new(),
        });
        if durable {
            log.sync()?;
        } else {
            log.wake_flusher();
        }
        Ok(log)
    }

    /// Waits until the session's directory, lock and `log.jsonl` (with line 0) exist; the error
    /// of their making, if any (a no-op for a log that was opened, or already made).
    pub fn made(&self) -> Result<(), LogError> {
        let mut state = self.state();
        state.settle(&self.shared.path)?;
        state.usable(&self.shared.path)
    }
}

/// The thread's work: the directory, the writer lock, `log.jsonl` with `line` (line 0) in it, and
/// a thread of its own syncing `names` (joined by the log's first sync).
fn make_files(dir: &Path, line: &[u8], names: Vec<PathBuf>) -> Result<Made, LogError> {
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(dir)
        .map_err(|e| LogError::io("create session dir", dir, e))?;
    let lock = WriterLock::acquire(dir)?;
    let path = dir.join(LOG_FILE);
    let mut file = OpenOptions::new()
        .append(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| LogError::io("create", &path, e))?;
    file.write_all(line)
        .map_err(|e| LogError::io("append to", &path, e))?;
    let sync_names = move || names.iter().try_for_each(|d| sync_dir(d));
    let names = match std::thread::Builder::new()
        .name("chock-log-names".into())
        .spawn(sync_names.clone())
    {
        Ok(thread) => Some(thread),
        Err(_) => {
            sync_names()?;
            None
        }
    };
    Ok(Made { file, lock, names })
}

/// A new id whose directory under `root` is not taken yet (the thread's `mkdir` still refuses a
/// name taken since).
fn free_session_dir(root: &Path) -> Result<(SessionId, PathBuf), LogError> {
    for _ in 0..ID_ATTEMPTS {
        let id = SessionId::new();
        let dir = root.join(id.as_str());
        if dir.symlink_metadata().is_err() {
            return Ok((id, dir));
        }
    }
    Err(LogError::io(
        "create session dir",
        root,
        std::io::Error::other(format!("{ID_ATTEMPTS} fresh session ids were all taken")),
    ))
}

fn start_data(id: &SessionId, header: SessionHeader) -> Value {
    let path = |p: Option<PathBuf>| p.map(|p| p.to_string_lossy().into_owned());
    EventData::from(chock_protocol::log::SessionStart {
        format: LOG_FORMAT.to_string(),
        session_id: id.as_str().to_string(),
        chock_version: env!("CARGO_PKG_VERSION").to_string(),
        pid: std::process::id(),
        project: path(header.project),
        parent: header.parent.map(|p| p.to_string()),
        command: header.command,
        provider: header.provider,
        model: header.model,
        policy_file: path(header.policy_file),
        org_policy_file: path(header.org_policy_file),
        fork: header.fork,
        toolchains: header.toolchains,
    })
    .to_value()
}
