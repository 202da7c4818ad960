//! The writer: creates a session directory and appends durable, redacted, chained lines.
//!
//! Durability follows [`EventKind::durability`]: a kind an act waits on is written and
//! `fdatasync`ed before [`Log::record`] returns; any other kind is written at once and synced in a
//! group — by the next durable event (same file, append order, so its sync covers every line
//! before it), by [`Log::sync`], when the log is dropped, after [`GROUP_MAX_LINES`] lines, or by
//! the flusher thread at most [`GROUP_MAX_DELAY`] after the first unsynced line was written. The
//! flusher runs only while there is something to sync: it ends [`FLUSHER_LINGER`] after the last
//! sync, so an idle session holds no thread.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::thread::Thread;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::lock::WriterLock;
use crate::redact::{MIN_SECRET_LEN, Redactor};
use crate::{EventData, EventKind, LogError, SessionId};

mod create;
mod reopen;
mod state;
pub use reopen::TORN_FILE;

/// What line 0 (`session.start`) says about the session, beyond what the log fills in itself
/// (`format`, `session_id`, `chock_version`, `pid`).
#[derive(Debug, Clone, Default)]
pub struct SessionHeader {
    /// The real project the session works on.
    pub project: Option<PathBuf>,
    /// The session that spawned this one (`session.spawn` in the parent names this one back).
    pub parent: Option<SessionId>,
    /// Secrets known before the first line is written (the provider's API key): the header
    /// itself already passes through the redaction funnel.
    pub secrets: Vec<String>,
    /// The command that started the session (`run`, `exec`).
    pub command: Option<String>,
    /// The provider's name.
    pub provider: Option<String>,
    /// The model asked for.
    pub model: Option<String>,
    /// The project's `chock.toml`, if it has one.
    pub policy_file: Option<PathBuf>,
    /// The organisation bundle, if one is installed.
    pub org_policy_file: Option<PathBuf>,
    /// The id to create the session under, chosen beforehand (a spawned child's: its parent names
    /// it in `session.spawn` before the child exists). Creating refuses an id already taken.
    /// None: a fresh one.
    pub id: Option<SessionId>,
    /// For a fork: the parent's log line it starts after (`parent` names the same session).
    pub fork: Option<chock_protocol::log::ForkOrigin>,
    /// What the policy's `[sandbox] toolchains` expanded to.
    pub toolchains: Vec<chock_protocol::log::ToolchainExpansion>,
}

/// An open session log. Cheap to clone and shareable across threads: all clones append to the
/// same file under one mutex, so `seq` and `prev` stay a single chain.
#[derive(Debug, Clone)]
pub struct Log {
    shared: Arc<Shared>,
    /// Held only by the clones of the log, never by the flusher: the last clone dropped is
    /// what syncs the tail and lets the writer lock go, on its own thread, before its drop
    /// returns (a flusher that let the lock go could make a resume right after an end busy).
    _owner: Arc<Owner>,
}

/// What the clones of a log own together and the flusher never does: dropping the last of them
/// lets the writer lock go.
#[derive(Debug)]
struct Owner {
    shared: Arc<Shared>,
}

/// What the thread that makes a new session's files hands over.
#[derive(Debug)]
struct Made {
    file: File,
    lock: WriterLock,
    names: Option<std::thread::JoinHandle<Result<(), LogError>>>,
}

#[derive(Debug)]
struct Shared {
    dir: PathBuf,
    id: SessionId,
    path: PathBuf,
    state: Mutex<State>,
    /// The thread that syncs grouped lines when no durable event comes soon enough: started on
    /// a grouped line when there is none, and ended after [`FLUSHER_LINGER`] with nothing
    /// pending, so an idle session holds no thread. `None`: no thread is running; set and
    /// cleared under this lock (the flusher clears it itself, with the state's lock held).
    flusher: Mutex<Option<Thread>>,
    /// Who is told of each line as it is written ([`Log::tap`]): at most one.
    tap: OnceLock<Arc<dyn LineTap>>,
}

/// Told of each line the moment it is written, in chain order, with the writer's lock held: the
/// in-process way to follow a session as it happens (a session runtime's subscribers), where a
/// reader in another process tails the file. It must not block and must not write to the log.
pub trait LineTap: Send + Sync + std::fmt::Debug {
    /// Line `seq` (its JSON text, no newline) is in the file now.
    fn line(&self, seq: u64, line: &str);
}

#[derive(Debug)]
struct State {
    /// `None` only while a new session's files are being made ([`State::making`]).
    file: Option<File>,
    /// The writer lock: held while any clone of the log is, let go by the last one's drop
    /// ([`Owner`]); `None` while the files are being made.
    lock: Option<WriterLock>,
    /// A new session's directory, lock and `log.jsonl` being made, line 0 written into it, on a
    /// thread of their own ([`Log::create_in_background`]): settled by the first use of the file.
    making: Option<std::thread::JoinHandle<Result<Made, LogError>>>,
    next_seq: u64,
    prev: String,
    len: u64,
    redactor: Redactor,
    poisoned: Option<String>,
    /// Lines written since the last sync (grouped lines only: a durable line is synced at once).
    unsynced: u64,
    /// When the oldest of them was written.
    unsynced_since: Option<Instant>,
    /// The new session's directory entries being synced (see [`Log::create`]): joined by the
    /// first sync of the log.
    names: Option<std::thread::JoinHandle<Result<(), LogError>>>,
}

/// How long a grouped line may stay unsynced: the flusher syncs it at most this long after the
/// first unsynced line was written (a crash can lose at most about this much of the tail).
pub const GROUP_MAX_DELAY: Duration = Duration::from_millis(20);

/// How many grouped lines may stay unsynced: the append that writes one more syncs them.
pub const GROUP_MAX_LINES: u64 = 256;

/// How long the flusher waits with nothing pending before it ends (the next grouped line
/// starts another).
pub const FLUSHER_LINGER: Duration = Duration::from_millis(500);

impl Log {
    fn owning(shared: Shared) -> Log {
        let shared = Arc::new(shared);
        Log {
            _owner: Arc::new(Owner {
                shared: Arc::clone(&shared),
            }),
            shared,
        }
    }

    /// Appends one event, a payload of the session protocol (`chock_protocol::log`), and returns
    /// its `seq`. A kind an act waits on ([`EventKind::durability`]) is durable when this returns:
    /// written, then `fdatasync`ed, which also makes every grouped line before it durable. Any
    /// other kind is written now and synced with the next durable event, on [`Log::sync`], on
    /// drop, or within [`GROUP_MAX_DELAY`] / [`GROUP_MAX_LINES`]; a crash can lose only such lines
    /// written after the last durable one. Every string in the payload and `call_id` passes
    /// through the redaction funnel first.
    ///
    /// If a write fails the file is cut back to the last whole line; if even that fails the
    /// log refuses every further append ([`LogError::Poisoned`]) rather than chain onto a torn
    /// line.
    pub fn record(
        &self,
        call_id: Option<&str>,
        payload: impl Into<EventData>,
    ) -> Result<u64, LogError> {
        let payload = payload.into();
        self.append_data(payload.kind(), call_id, payload.to_value())
    }

    /// Appends an event whose `data` is not one of the protocol's types: for tests that forge
    /// lines, and nothing else (every writer of the harness uses [`Log::record`]); only with the
    /// `forge` feature.
    #[cfg(feature = "forge")]
    pub fn append(
        &self,
        kind: EventKind,
        call_id: Option<&str>,
        data: Value,
    ) -> Result<u64, LogError> {
        self.append_data(kind, call_id, data)
    }

    fn append_data(
        &self,
        kind: EventKind,
        call_id: Option<&str>,
        data: Value,
    ) -> Result<u64, LogError> {
        let path = &self.shared.path;
        let mut state = self.state();
        state.usable(path)?;
        let (seq, line) = state.render(kind, call_id, data)?;
        let len = state.len;
        let file = state.file_mut(path)?;
        if let Err(e) = file.write_all(&line) {
            let cut = file.set_len(len);
            if let Err(cut) = cut {
                state.poisoned = Some(format!(
                    "write failed ({e}) and cutting back failed ({cut})"
                ));
            }
            return Err(LogError::io("append to", path, e));
        }
        let durable = kind.durability().before_return() || state.unsynced + 1 >= GROUP_MAX_LINES;
        if durable {
            sync_state(&mut state, path)?;
        } else {
            state.unsynced += 1;
        }
        state.chain(seq, &line);
        if let Some(tap) = self.shared.tap.get() {
            let text = std::str::from_utf8(&line).unwrap_or_default();
            tap.line(seq, text.trim_end_matches('\n'));
        }
        if !durable && state.unsynced_since.is_none() {
            state.unsynced_since = Some(Instant::now());
            // Under the state's lock: a flusher that is ending clears its slot under it too, so
            // a line is never left to a thread that has already decided to end.
            self.wake_flusher();
            drop(state);
        }
        Ok(seq)
    }

    /// Makes every line written so far durable (one `fdatasync`, none if nothing is pending).
    pub fn sync(&self) -> Result<(), LogError> {
        let mut state = self.state();
        state.usable(&self.shared.path)?;
        sync_state(&mut state, &self.shared.path)
    }

    /// Wakes the flusher, or starts one; called with the state's lock held.
    fn wake_flusher(&self) {
        let mut flusher = self
            .shared
            .flusher
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(thread) = flusher.as_ref() {
            thread.unpark();
            return;
        }
        let weak = Arc::downgrade(&self.shared);
        let spawned = std::thread::Builder::new()
            .name("chock-log-flush".into())
            .spawn(move || flush_loop(&weak));
        // Without a thread, grouped lines are still synced by the next durable event, the
        // line bound, `sync` and drop.
        *flusher = spawned.ok().map(|handle| handle.thread().clone());
    }

    /// Whether a flusher thread is running now (tests of the idle cost).
    #[doc(hidden)]
    pub fn has_flusher(&self) -> bool {
        self.shared
            .flusher
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_some()
    }

    /// Passes `text` through the redaction funnel without logging it: text that leaves the host
    /// for the model (a fetched page, a command's output) must not carry a known secret either.
    pub fn redact(&self, text: &str) -> String {
        self.state().redactor.redact_str(text)
    }

    /// Adds a secret to the redaction funnel: from now on it is replaced by `[REDACTED]` in
    /// every event before it is written. Secrets shorter than [`MIN_SECRET_LEN`] characters
    /// are refused ([`LogError::SecretTooShort`]): redacting them would mangle everything.
    pub fn add_secret(&self, secret: &str) -> Result<(), LogError> {
        if self.state().redactor.add(secret) {
            Ok(())
        } else {
            Err(short_secret(secret))
        }
    }

    /// The session directory.
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    /// The session id.
    pub fn id(&self) -> &SessionId {
        &self.shared.id
    }

    /// Installs `tap`, told of every line written from now on, and returns the seq of the last
    /// line already in the file (None: the log holds no line yet), which a follower reads from the
    /// file instead. Once a new session's files are made, so that line is readable when this
    /// returns. A log takes one tap: a second is refused ([`LogError::TapTaken`]).
    pub fn tap(&self, tap: Arc<dyn LineTap>) -> Result<Option<u64>, LogError> {
        let path = &self.shared.path;
        let mut state = self.state();
        state.usable(path)?;
        state.settle(path)?;
        self.shared
            .tap
            .set(tap)
            .map_err(|_| LogError::TapTaken { path: path.clone() })?;
        Ok(state.next_seq.checked_sub(1))
    }

    /// The seq the next event will get and the hash it will chain from.
    pub fn head(&self) -> (u64, String) {
        let state = self.state();
        (state.next_seq, state.prev.clone())
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock happens before any write (serialisation), so the
        // state is still consistent.
        self.shared
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// `fdatasync`s the log and marks nothing pending; a failure poisons the log (after a failed
/// fsync the page cache cannot be trusted to reach the disk).
fn sync_state(state: &mut State, path: &Path) -> Result<(), LogError> {
    if let Err(e) = state.file_mut(path)?.sync_data() {
        state.poisoned = Some(format!("fdatasync failed: {e}"));
        return Err(LogError::io("fdatasync", path, e));
    }
    if let Some(names) = state.names.take() {
        let synced = names.join().unwrap_or_else(|_| {
            Err(LogError::io(
                "fsync directory",
                path,
                std::io::Error::other("the thread syncing the session's names panicked"),
            ))
        });
        if let Err(e) = synced {
            state.poisoned = Some(format!(
                "syncing the session's directory entries failed: {e}"
            ));
            return Err(e);
        }
    }
    state.unsynced = 0;
    state.unsynced_since = None;
    Ok(())
}

/// The flusher: waits until a grouped line is pending, then syncs it once it is
/// [`GROUP_MAX_DELAY`] old (unless something else synced first); ends after [`FLUSHER_LINGER`]
/// with nothing pending. Holds the log only while it looks, so dropping the last [`Log`] ends it.
fn flush_loop(weak: &Weak<Shared>) {
    let mut idle_since: Option<Instant> = None;
    loop {
        let wait = {
            let Some(shared) = weak.upgrade() else { return };
            let mut state = shared
                .state
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let pending = match state.unsynced_since {
                _ if state.poisoned.is_some() => None,
                None => None,
                Some(since) => match GROUP_MAX_DELAY.checked_sub(since.elapsed()) {
                    Some(left) if !left.is_zero() => Some(left),
                    _ => {
                        // An error poisons the log: the next append reports it.
                        let _ = sync_state(&mut state, &shared.path);
                        None
                    }
                },
            };
            match pending {
                Some(left) => {
                    idle_since = None;
                    left
                }
                None => {
                    let since = *idle_since.get_or_insert_with(Instant::now);
                    match FLUSHER_LINGER.checked_sub(since.elapsed()) {
                        Some(left) if !left.is_zero() => left,
                        _ => {
                            // Ends with the state's lock held: an append that comes next sees
                            // no flusher and starts one.
                            *shared
                                .flusher
                                .lock()
                                .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
                            return;
                        }
                    }
                }
            }
        };
        std::thread::park_timeout(wait);
    }
}

impl Drop for Owner {
    /// The last clone of the log is gone: sync what is pending (best effort: nobody is left to
    /// tell) and let the flusher see that the log is gone; the lock goes when this returns.
    fn drop(&mut self) {
        {
            let mut state = self
                .shared
                .state
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            // A session whose files are still being made waits for them: line 0 is written
            // before the lock goes (best effort: nobody is left to tell of a failure).
            let _ = state.settle(&self.shared.path);
            if state.unsynced > 0 && state.poisoned.is_none() {
                if let Some(file) = &state.file {
                    let _ = file.sync_data();
                }
                state.unsynced = 0;
                state.unsynced_since = None;
            }
            // The lock goes with the last clone, whoever else still holds the state.
            state.lock = None;
        }
        if let Some(thread) = self
            .shared
            .flusher
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
        {
            thread.unpark();
        }
    }
}

fn short_secret(secret: &str) -> LogError {
    LogError::SecretTooShort {
        len: secret.chars().count(),
        min: MIN_SECRET_LEN,
    }
}
