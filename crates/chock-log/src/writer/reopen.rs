//! Reopening a session's log to append to it: the writer's lock, the whole chain verified, and
//! a torn tail (what a crash cut mid-line) saved aside and cut, so the chain goes on from the last
//! whole line.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::{Mutex, OnceLock};

use super::{Log, Shared, State};
use crate::line::LOG_FILE;
use crate::lock::WriterLock;
use crate::redact::Redactor;
use crate::{LogError, SessionId};

/// Where a torn tail is moved when a session is reopened: nothing a crash left is thrown away.
pub const TORN_FILE: &str = "log.jsonl.torn";

impl Log {
    /// Reopens an existing session in `dir` to append to it (resuming after a crash or a
    /// clean end). Refuses a directory whose writer is alive ([`LogError::Busy`]) and a log
    /// whose chain is broken ([`LogError::Broken`]). A torn tail is appended to
    /// `log.jsonl.torn`, cut from the log, and recorded in a `note` event, so the chain goes on
    /// from the last whole line. Secrets are not stored: add them again with
    /// [`Log::add_secret`].
    pub fn open(dir: &Path) -> Result<Log, LogError> {
        let lock = WriterLock::acquire(dir)?;
        let report = crate::verify(dir)?;
        if let Some(first) = report.problems.first() {
            return Err(LogError::Broken {
                dir: dir.to_owned(),
                reason: first.to_string(),
            });
        }
        let head = report.head.ok_or_else(|| LogError::Broken {
            dir: dir.to_owned(),
            reason: "the log has no complete event".into(),
        })?;
        let id = SessionId::parse(&report.session_id)?;
        let path = dir.join(LOG_FILE);
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .open(&path)
            .map_err(|e| LogError::io("open", &path, e))?;
        let mut len = report.bytes;
        if let Some(torn) = &report.torn_tail {
            save_torn_tail(dir, &mut file, torn.offset)?;
            file.set_len(torn.offset)
                .and_then(|()| file.sync_data())
                .map_err(|e| LogError::io("cut torn tail from", &path, e))?;
            len = torn.offset;
        }
        let state = State {
            file: Some(file),
            lock: Some(lock),
            making: None,
            next_seq: head.seq + 1,
            prev: head.hash,
            len,
            redactor: Redactor::default(),
            poisoned: None,
            unsynced: 0,
            unsynced_since: None,
            names: None,
        };
        let log = Log::owning(Shared {
            dir: dir.to_owned(),
            id,
            path,
            state: Mutex::new(state),
            flusher: Mutex::new(None),
            tap: OnceLock::new(),
        });
        if let Some(torn) = report.torn_tail {
            log.record(
                None,
                chock_protocol::log::Note::TornTail {
                    torn_line: torn.line as u64,
                    torn_bytes: torn.len,
                    saved_to: TORN_FILE.to_string(),
                },
            )?;
        }
        Ok(log)
    }
}

fn save_torn_tail(dir: &Path, log_file: &mut File, offset: u64) -> Result<(), LogError> {
    use std::io::{Read, Seek, SeekFrom};
    let log_path = dir.join(LOG_FILE);
    let mut torn = Vec::new();
    log_file
        .seek(SeekFrom::Start(offset))
        .and_then(|_| log_file.read_to_end(&mut torn))
        .map_err(|e| LogError::io("read torn tail of", &log_path, e))?;
    let path = dir.join(TORN_FILE);
    let mut out = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| LogError::io("open", &path, e))?;
    out.write_all(&torn)
        .and_then(|()| out.sync_data())
        .map_err(|e| LogError::io("write", &path, e))
}
