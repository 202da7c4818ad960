//! A session's socket index end to end: a host daemon binds its socket under the project's
//! declared `[sandbox]` write path (a cache: the index's paths; a read directory is an overlay
//! and needs no index, `chock-sandbox/tests/escape_net.rs`) between two calls of one session, in
//! a directory made after the first call, or after the session opened (and walked the path) but
//! before its first call; the call after cannot reach it (the mask answers ECONNREFUSED).

mod support;

use std::os::unix::net::UnixListener;
use std::path::Path;

use chock_session::{CallOptions, CallOutcome, NoApprover, Session, SessionOptions};

/// Connects to the unix socket named by its argument and prints the errno's name (or
/// `connected`).
const CONNECT: &str = "import errno, socket, sys\n\
s = socket.socket(socket.AF_UNIX)\n\
try:\n    s.connect(sys.argv[1]); print('connected')\n\
except OSError as e:\n    print(errno.errorcode[e.errno])\n";

fn connect_from_a_call(s: &Session, socket: &Path) -> String {
    let argv: Vec<String> = ["/usr/bin/python3", "-c", CONNECT, &socket.to_string_lossy()]
        .iter()
        .map(|a| a.to_string())
        .collect();
    match support::confined_call(s, &argv, &CallOptions::default(), &NoApprover)
        .unwrap()
        .outcome
    {
        CallOutcome::Ran { stdout, stderr, .. } => {
            let out = String::from_utf8_lossy(&stdout).trim().to_string();
            assert!(
                !out.is_empty(),
                "python3 printed nothing: {}",
                String::from_utf8_lossy(&stderr)
            );
            out
        }
        other => panic!("the call did not run: {other:?}"),
    }
}

/// A session of a project whose `chock.toml` declares `<base>/cache` as a write path; the
/// session and that path.
fn session_writing_a_cache(base: &Path) -> (Session, std::path::PathBuf) {
    let base = base.canonicalize().unwrap();
    let (project, shared) = (base.join("project"), base.join("cache"));
    std::fs::create_dir_all(&project).unwrap();
    std::fs::create_dir_all(&shared).unwrap();
    std::fs::write(
        project.join("chock.toml"),
        format!("[sandbox]\nwrite = [\"{}\"]\n", shared.display()),
    )
    .unwrap();
    let opts = SessionOptions {
        sessions_root: Some(base.join("sessions")),
        ..SessionOptions::default()
    };
    (Session::open(&project, opts).unwrap(), shared)
}

#[test]
fn a_socket_bound_between_two_calls_is_masked_in_the_second() {
    assert!(
        Path::new("/usr/bin/python3").exists(),
        "this test connects from inside the call with /usr/bin/python3"
    );
    let dir = tempfile::tempdir().unwrap();
    let (s, shared) = session_writing_a_cache(dir.path());
    let socket = shared.join("new").join("deeper").join("daemon.sock");
    // The first call builds the session's index; nothing is there yet.
    assert_eq!(connect_from_a_call(&s, &socket), "ENOENT");
    std::fs::create_dir_all(socket.parent().unwrap()).unwrap();
    let listener = UnixListener::bind(&socket).unwrap();
    listener.set_nonblocking(true).unwrap();
    assert_eq!(connect_from_a_call(&s, &socket), "ECONNREFUSED");
    assert!(
        listener.accept().is_err(),
        "the host listener accepted a connection from the call"
    );
    s.close(false).unwrap();
}

#[test]
fn a_socket_bound_after_the_session_opened_is_masked_in_its_first_call() {
    assert!(
        Path::new("/usr/bin/python3").exists(),
        "this test connects from inside the call with /usr/bin/python3"
    );
    let dir = tempfile::tempdir().unwrap();
    let (s, shared) = session_writing_a_cache(dir.path());
    // The session walks its declared paths on a thread of its own when it opens (so its first
    // call does not wait for the walk): whatever is bound after that walk, in a directory that
    // was there or in one made after it, is still masked in the first call.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let there = shared.join("daemon.sock");
    let _listener = UnixListener::bind(&there).unwrap();
    let later = shared.join("made-later").join("daemon.sock");
    std::fs::create_dir_all(later.parent().unwrap()).unwrap();
    let _later = UnixListener::bind(&later).unwrap();
    assert_eq!(connect_from_a_call(&s, &there), "ECONNREFUSED");
    assert_eq!(connect_from_a_call(&s, &later), "ECONNREFUSED");
    s.close(false).unwrap();
}

/// The test below, run again in a user namespace that allows no inotify instance.
const NO_INOTIFY: &str = "CHOCK_TEST_NO_INOTIFY";

#[test]
fn without_inotify_every_call_walks_its_declared_paths_and_the_log_says_so_once() {
    if std::env::var_os(NO_INOTIFY).is_none() {
        let exe = std::env::current_exe().unwrap();
        let out = std::process::Command::new("unshare")
            .args([
                "-Ur",
                "sh",
                "-c",
                "echo 0 > /proc/sys/user/max_inotify_instances && exec \"$0\" \"$@\"",
            ])
            .arg(exe)
            .args([
                "--exact",
                "without_inotify_every_call_walks_its_declared_paths_and_the_log_says_so_once",
                "--nocapture",
            ])
            .env(NO_INOTIFY, "1")
            .output()
            .expect("unshare");
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "the run without inotify failed:\n{text}"
        );
        assert!(
            text.contains("1 passed"),
            "the inner test did not run:\n{text}"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (s, shared) = session_writing_a_cache(dir.path());
    let socket = shared.join("later").join("daemon.sock");
    assert_eq!(connect_from_a_call(&s, &socket), "ENOENT");
    std::fs::create_dir_all(socket.parent().unwrap()).unwrap();
    let _listener = UnixListener::bind(&socket).unwrap();
    // No watch saw it: the walk of this call finds it.
    assert_eq!(connect_from_a_call(&s, &socket), "ECONNREFUSED");
    assert_eq!(connect_from_a_call(&s, &socket), "ECONNREFUSED");
    let log_dir = s.log().dir().to_path_buf();
    s.close(false).unwrap();
    let notes: Vec<_> = chock_log::read_events(&log_dir)
        .unwrap()
        .into_iter()
        .filter(|e| e.data.get("about").and_then(|a| a.as_str()) == Some("socket_index_degraded"))
        .collect();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0].data["why"]
            .as_str()
            .is_some_and(|w| w.contains("inotify")),
        "{notes:?}"
    );
}
