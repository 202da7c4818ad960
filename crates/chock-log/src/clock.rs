//! The one clock and id source: every timestamp Chock writes (a log line's `ts`, a seal's
//! `sealed_at`, a workspace's and an apply record's `created`) is [`now`], and a session id is
//! made of [`now`] and [`session_suffix`].
//!
//! **A fixed clock and ids for tests.** In a build with `debug_assertions` (what `cargo build`
//! and `cargo test` make) two environment variables are honoured:
//!
//! - `CHOCK_TEST_CLOCK=2026-01-01T00:00:00Z` (any RFC 3339 instant): the n-th timestamp is that
//!   instant plus n microseconds, n counting from 0. The clock still moves forward on every
//!   call, so whatever is ordered by time (log lines, session ids, records) keeps its order.
//! - `CHOCK_TEST_IDS=1` (any value but empty or `0`): a session id's suffix is 1, 2, 3, … instead
//!   of random, so with the fixed clock the first session is `20260101T000000Z-000001`. Apply ids
//!   (`<session>.<n>`) and question ids (`q-<n>`) are counters already, so they follow.
//!
//! The counters live in one file, `test-counters`, beside the sessions root
//! (`$XDG_STATE_HOME/chock/`, else `~/.local/state/chock/`), taken with `flock(2)` for each step:
//! successive processes in one test (`chock run`, then `chock apply` on the same session) go on
//! counting where the last stopped, so their ids are distinct and their timestamps keep rising;
//! a test with a state directory of its own starts from zero. With neither variable set nothing
//! is read or written.
//!
//! **Why only in debug builds.** The log is evidence of what a session did and when: a variable
//! that could set its clock would let whoever starts the process backdate the record, and one
//! that fixed the ids would make a session's directory name predictable to anyone who can write
//! into the sessions root first. A release binary (`cargo install`, what people run) therefore
//! never reads either variable: the check is `cfg!(debug_assertions)`, before the environment is
//! looked at.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use rand::Rng;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::fsutil::{create_private_dir_all, open_private_rw};

/// The variable that fixes the clock (debug builds only).
pub const TEST_CLOCK_ENV: &str = "CHOCK_TEST_CLOCK";
/// The variable that makes session ids a sequence (debug builds only).
pub const TEST_IDS_ENV: &str = "CHOCK_TEST_IDS";
/// The counters' file name, in the directory above the sessions root.
pub const COUNTER_FILE: &str = "test-counters";

/// Now: the real time, or the fixed clock's next instant.
pub fn now() -> OffsetDateTime {
    match fixed() {
        Some(fixed) if fixed.base.is_some() => fixed.tick(),
        _ => OffsetDateTime::now_utc(),
    }
}

/// [`now`] as RFC 3339 UTC.
pub fn now_rfc3339() -> String {
    rfc3339(now())
}

/// `when` as RFC 3339 UTC.
pub fn rfc3339(when: OffsetDateTime) -> String {
    when.to_offset(time::UtcOffset::UTC)
        .format(&Rfc3339)
        .unwrap_or_else(|_| "1970-01-01T00:00:00Z".to_owned())
}

/// A session id's 24-bit suffix: random, or the next of the fixed sequence (1, 2, …).
pub fn session_suffix() -> u32 {
    match fixed() {
        Some(fixed) if fixed.ids => {
            u32::try_from(fixed.next(Counter::Ids) & 0x00ff_ffff).unwrap_or(0)
        }
        _ => rand::thread_rng().r#gen::<u32>() & 0x00ff_ffff,
    }
}

/// Whether this process runs on the fixed clock or ids (never in a release build).
pub fn is_fixed() -> bool {
    fixed().is_some()
}

fn fixed() -> Option<&'static Fixed> {
    static FIXED: OnceLock<Option<Fixed>> = OnceLock::new();
    FIXED
        .get_or_init(|| Fixed::from_env().unwrap_or_else(|e| panic!("chock: {e}")))
        .as_ref()
}

/// Which counter a step advances.
#[derive(Debug, Clone, Copy)]
enum Counter {
    Ticks = 0,
    Ids = 1,
}

/// A fixed clock and/or id sequence, and where its counters are kept.
#[derive(Debug)]
pub struct Fixed {
    base: Option<OffsetDateTime>,
    ids: bool,
    counters: Counters,
}

#[derive(Debug)]
enum Counters {
    /// Shared by every process that names the same state directory.
    File(PathBuf),
    /// This process only (no state directory could be named).
    Memory,
}

impl Fixed {
    /// The fixed clock and ids the environment asks for; `None` when it asks for neither, and
    /// always in a build without `debug_assertions`.
    pub fn from_env() -> Result<Option<Self>, String> {
        if !cfg!(debug_assertions) {
            return Ok(None);
        }
        let clock = std::env::var(TEST_CLOCK_ENV).ok();
        let ids = std::env::var(TEST_IDS_ENV).ok();
        if clock.is_none() && ids.is_none() {
            return Ok(None);
        }
        let dir = chock_dirs::state_root().ok();
        Self::new(clock.as_deref(), ids.as_deref(), dir.as_deref())
    }

    /// From the variables' values, the counters kept in `dir` (in memory when `None`).
    pub fn new(
        clock: Option<&str>,
        ids: Option<&str>,
        dir: Option<&Path>,
    ) -> Result<Option<Self>, String> {
        let base = clock
            .filter(|c| !c.is_empty())
            .map(|c| {
                OffsetDateTime::parse(c, &Rfc3339)
                    .map_err(|e| format!("{TEST_CLOCK_ENV}={c:?} is not an RFC 3339 instant: {e}"))
            })
            .transpose()?;
        let ids = ids.is_some_and(|v| !v.is_empty() && v != "0");
        if base.is_none() && !ids {
            return Ok(None);
        }
        let counters = match dir {
            Some(dir) => Counters::File(dir.join(COUNTER_FILE)),
            None => Counters::Memory,
        };
        Ok(Some(Self {
            base,
            ids,
            counters,
        }))
    }

    /// The clock's next instant (the real time when only the ids are fixed).
    pub fn tick(&self) -> OffsetDateTime {
        match self.base {
            Some(base) => {
                let n = i64::try_from(self.next(Counter::Ticks)).unwrap_or(i64::MAX);
                base + time::Duration::microseconds(n - 1)
            }
            None => OffsetDateTime::now_utc(),
        }
    }

    /// Advances `counter` and returns its new value (1 for the first step).
    fn next(&self, counter: Counter) -> u64 {
        static IN_PROCESS: Mutex<[u64; 2]> = Mutex::new([0, 0]);
        let mut memory = IN_PROCESS.lock().unwrap_or_else(|e| e.into_inner());
        match &self.counters {
            Counters::Memory => {
                memory[counter as usize] += 1;
                memory[counter as usize]
            }
            Counters::File(path) => step_file(path, counter).unwrap_or_else(|e| {
                panic!(
                    "chock: {TEST_CLOCK_ENV}/{TEST_IDS_ENV}: {}: {e}",
                    path.display()
                )
            }),
        }
    }
}

/// Advances one counter in the file under `flock(2)`: `TICKS IDS\n`, both 0 when the file is new.
fn step_file(path: &Path, counter: Counter) -> Result<u64, String> {
    if let Some(dir) = path.parent() {
        create_private_dir_all(dir).map_err(|e| e.to_string())?;
    }
    let mut file: File = open_private_rw(path).map_err(|e| e.to_string())?;
    file.lock().map_err(|e| format!("lock: {e}"))?;
    let mut text = String::new();
    file.read_to_string(&mut text)
        .map_err(|e| format!("read: {e}"))?;
    let mut values = [0u64; 2];
    for (slot, word) in values.iter_mut().zip(text.split_whitespace()) {
        *slot = word
            .parse()
            .map_err(|_| format!("not a counter: {word:?}"))?;
    }
    values[counter as usize] += 1;
    file.seek(SeekFrom::Start(0))
        .and_then(|_| file.set_len(0))
        .and_then(|()| writeln!(file, "{} {}", values[0], values[1]))
        .map_err(|e| format!("write: {e}"))?;
    Ok(values[counter as usize])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixed(dir: Option<&Path>) -> Fixed {
        Fixed::new(Some("2026-01-01T00:00:00Z"), Some("1"), dir)
            .unwrap()
            .unwrap()
    }

    #[test]
    fn the_fixed_clock_starts_at_its_instant_and_moves_one_microsecond_a_call() {
        let dir = tempfile::tempdir().unwrap();
        let clock = fixed(Some(dir.path()));
        let stamps: Vec<String> = (0..3).map(|_| rfc3339(clock.tick())).collect();
        assert_eq!(
            stamps,
            [
                "2026-01-01T00:00:00Z",
                "2026-01-01T00:00:00.000001Z",
                "2026-01-01T00:00:00.000002Z"
            ]
        );
    }

    #[test]
    fn a_second_process_on_the_same_state_dir_goes_on_counting() {
        let dir = tempfile::tempdir().unwrap();
        let first = fixed(Some(dir.path()));
        let a = first.tick();
        assert_eq!(first.next(Counter::Ids), 1);
        drop(first);
        // Another process naming the same directory: the file carries the counters over.
        let second = fixed(Some(dir.path()));
        assert!(second.tick() > a, "the clock never goes back");
        assert_eq!(second.next(Counter::Ids), 2);
        assert_eq!(
            std::fs::read_to_string(dir.path().join(COUNTER_FILE)).unwrap(),
            "2 2\n"
        );
        // A test of its own (another state dir) starts from the beginning.
        let other = tempfile::tempdir().unwrap();
        assert_eq!(fixed(Some(other.path())).next(Counter::Ids), 1);
    }

    #[test]
    fn threads_sharing_the_file_never_get_the_same_value() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_path_buf();
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let path = path.clone();
                std::thread::spawn(move || {
                    let clock = fixed(Some(&path));
                    (0..25)
                        .map(|_| clock.next(Counter::Ids))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut all: Vec<u64> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        all.sort_unstable();
        assert_eq!(all, (1..=100).collect::<Vec<_>>());
    }

    #[test]
    fn ids_alone_keep_the_real_clock_and_neither_means_off() {
        let ids = Fixed::new(None, Some("1"), None).unwrap().unwrap();
        assert!(ids.base.is_none() && ids.ids);
        let before = OffsetDateTime::now_utc();
        assert!(ids.tick() >= before);
        assert!(Fixed::new(None, None, None).unwrap().is_none());
        assert!(Fixed::new(Some(""), Some("0"), None).unwrap().is_none());
        let clock = Fixed::new(Some("2026-01-01T00:00:00Z"), None, None)
            .unwrap()
            .unwrap();
        assert!(!clock.ids);
    }

    #[test]
    fn a_malformed_instant_is_an_error_naming_the_variable() {
        let e = Fixed::new(Some("yesterday"), None, None).unwrap_err();
        assert!(e.contains("CHOCK_TEST_CLOCK=\"yesterday\""), "{e}");
    }

    #[test]
    fn a_session_id_from_the_fixed_sources_is_readable_and_parses() {
        let clock = fixed(None);
        let id = crate::SessionId::at(
            clock.tick(),
            u32::try_from(clock.next(Counter::Ids)).unwrap(),
        );
        assert!(id.as_str().starts_with("20260101T000000Z-"), "{id}");
        assert_eq!(crate::SessionId::parse(id.as_str()).unwrap(), id);
    }
}
