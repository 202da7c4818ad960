//! The writer lock: a live writer is seen as live, a killed one as stale, and a second writer
//! is refused while the first lives. The writer is a real child process (this test binary,
//! re-run with an environment variable).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use chock_log::{EventKind, Liveness, Log, LogError, SessionHeader, is_live};
use serde_json::json;

const HOLD_ENV: &str = "CHOCK_LOG_TEST_HOLD_LOCK_IN";

/// Not a test on its own: when run by `a_killed_writer_leaves_a_stale_lock`, it creates a
/// session, says where, and sleeps holding the lock until killed.
#[test]
fn lock_holder_child() {
    let Some(root) = std::env::var_os(HOLD_ENV) else {
        return;
    };
    let log = Log::create(Path::new(&root), SessionHeader::default()).unwrap();
    println!("SESSION-DIR {}", log.dir().display());
    loop {
        std::thread::sleep(std::time::Duration::from_secs(3600));
    }
}

/// Kills the holder if the test fails half-way, so no child sleeps on forever.
struct Holder(std::process::Child);

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_holder(root: &Path) -> (Holder, PathBuf) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "lock_holder_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(HOLD_ENV, root)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let child = Holder(child);
    for line in stdout.lines() {
        let line = line.unwrap();
        // The harness prints "test lock_holder_child ... " before the child's own output.
        if let Some((_, dir)) = line.split_once("SESSION-DIR ") {
            return (child, PathBuf::from(dir));
        }
    }
    panic!("the lock holder ended without naming its session");
}

#[test]
fn a_killed_writer_leaves_a_stale_lock() {
    let root = tempfile::tempdir().unwrap();
    let (mut holder, dir) = spawn_holder(root.path());
    let pid = holder.0.id();

    assert_eq!(is_live(&dir).unwrap(), Liveness::Live { pid });
    match Log::open(&dir) {
        Err(LogError::Busy { pid: holder, .. }) => assert_eq!(holder, pid),
        other => panic!("a second writer was not refused: {other:?}"),
    }

    holder.0.kill().unwrap();
    holder.0.wait().unwrap();

    assert_eq!(is_live(&dir).unwrap(), Liveness::Stale { pid: Some(pid) });
    let log = Log::open(&dir).unwrap();
    assert_eq!(
        is_live(&dir).unwrap(),
        Liveness::Live {
            pid: std::process::id()
        }
    );
    assert_eq!(
        log.append(EventKind::SessionEnd, None, json!({"reason": "recovered"}))
            .unwrap(),
        1
    );
    drop(log);
    assert_eq!(
        is_live(&dir).unwrap(),
        Liveness::Stale {
            pid: Some(std::process::id())
        }
    );
    assert!(chock_log::verify(&dir).unwrap().is_intact());
}

#[test]
fn a_second_writer_in_the_same_process_is_refused_too() {
    let root = tempfile::tempdir().unwrap();
    let log = Log::create(root.path(), SessionHeader::default()).unwrap();
    assert!(matches!(Log::open(log.dir()), Err(LogError::Busy { .. })));
    // Clones share the one lock and the one chain.
    let clone = log.clone();
    let t = std::thread::spawn(move || {
        clone
            .append(EventKind::Note, None, json!({"text": "from a thread"}))
            .unwrap()
    });
    let a = log
        .append(EventKind::Note, None, json!({"text": "from main"}))
        .unwrap();
    let b = t.join().unwrap();
    assert_eq!([a.min(b), a.max(b)], [1, 2]);
    assert!(chock_log::verify(log.dir()).unwrap().is_intact());
}

#[test]
fn a_directory_without_a_lock_file_has_no_writer() {
    let root = tempfile::tempdir().unwrap();
    assert_eq!(is_live(root.path()).unwrap(), Liveness::NoLock);
}

#[test]
fn session_directories_and_files_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let root = tempfile::tempdir().unwrap();
    let sessions = root.path().join("state").join("chock").join("sessions");
    let log = Log::create(&sessions, SessionHeader::default()).unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&sessions), 0o700);
    assert_eq!(mode(log.dir()), 0o700);
    assert_eq!(mode(&log.dir().join("log.jsonl")), 0o600);
    assert_eq!(mode(&log.dir().join("lock")), 0o600);
}

/// The last clone dropped releases the lock at once, on the dropping thread: the flusher that
/// syncs grouped lines may be mid-sync then, and it must not be what lets the lock go (a
/// resume straight after an end was refused as busy when it was).
#[test]
fn dropping_the_last_clone_releases_the_lock_even_while_the_flusher_syncs() {
    let root = tempfile::tempdir().unwrap();
    for round in 0..200u64 {
        let log = Log::create(root.path(), SessionHeader::default()).unwrap();
        assert!(!EventKind::ToolResult.durability().before_return());
        log.append(EventKind::ToolResult, Some("c1"), json!({"stdout": "x"}))
            .unwrap();
        // Drop near the moment the flusher wakes to sync (GROUP_MAX_DELAY after the line).
        let near = chock_log::GROUP_MAX_DELAY + std::time::Duration::from_micros(round % 8 * 50);
        std::thread::sleep(near - std::time::Duration::from_micros(200));
        let dir = log.dir().to_path_buf();
        drop(log);
        if let Err(e) = Log::open(&dir) {
            panic!("round {round}: reopening right after the last drop failed: {e}");
        }
    }
}

#[test]
fn a_liveness_probe_never_makes_a_free_session_look_busy_to_its_next_writer() {
    // `is_live` takes the lock shared for a moment; a writer reopening the session in that moment
    // must not be refused (the daemon's listing, `sessions list` and a reopen race like this).
    let root = tempfile::tempdir().unwrap();
    let dir = Log::create(root.path(), SessionHeader::default())
        .unwrap()
        .dir()
        .to_path_buf();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let prober = {
        let (dir, stop) = (dir.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = is_live(&dir).unwrap();
            }
        })
    };
    let mut busy = 0;
    for _ in 0..2000 {
        match Log::open(&dir) {
            Ok(log) => drop(log),
            Err(LogError::Busy { .. }) => busy += 1,
            Err(e) => panic!("{e}"),
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    prober.join().unwrap();
    assert_eq!(busy, 0, "reopens refused as busy while only a probe looked");
}

/// `wait_until_free` waits on the lock itself: it blocks while a writer (a real process) holds
/// it, and returns as soon as the writer is gone; on a lock nobody holds it returns at once.
#[test]
fn waiting_until_free_blocks_while_a_writer_lives_and_returns_once_it_is_gone() {
    let root = tempfile::tempdir().unwrap();
    let (mut holder, dir) = spawn_holder(root.path());
    let (done_tx, done) = std::sync::mpsc::channel();
    let waited = dir.clone();
    std::thread::spawn(move || {
        let _ = done_tx.send(chock_log::wait_until_free(&waited));
    });
    assert!(
        done.recv_timeout(std::time::Duration::from_millis(500))
            .is_err(),
        "it returned while the writer held the lock"
    );
    holder.0.kill().unwrap();
    holder.0.wait().unwrap();
    done.recv_timeout(std::time::Duration::from_secs(10))
        .expect("it did not return once the writer was gone")
        .unwrap();
    // Free now: at once, and a writer can take the lock after it.
    chock_log::wait_until_free(&dir).unwrap();
    assert!(matches!(is_live(&dir).unwrap(), Liveness::Stale { .. }));
}
