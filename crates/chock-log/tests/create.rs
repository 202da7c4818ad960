//! A new session's files made on a thread (`Log::create_in_background`): what is appended before
//! they exist lands after line 0 in one chain, and a session whose files cannot be made writes
//! nothing and says where.

use std::path::Path;

use chock_log::{Liveness, Log, SessionHeader, is_live, verify};
use chock_protocol::log::Note;

fn note(text: &str) -> Note {
    Note::Text { text: text.into() }
}

#[test]
fn lines_appended_while_the_files_are_made_follow_line_0_in_one_chain() {
    let root = tempfile::tempdir().unwrap();
    let log = Log::create_in_background(root.path(), SessionHeader::default()).unwrap();
    // Appended at once, whether or not the thread is done: each waits for the files first.
    assert_eq!(log.record(None, note("first")).unwrap(), 1);
    assert_eq!(log.record(None, note("second")).unwrap(), 2);
    log.made().unwrap();
    assert!(log.dir().is_dir());
    // The writer lock is held by this log from the moment its files exist.
    assert!(matches!(is_live(log.dir()), Ok(Liveness::Live { .. })));
    log.sync().unwrap();
    let report = verify(log.dir()).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.lines, 3);
    let dir = log.dir().to_path_buf();
    drop(log);
    assert!(matches!(is_live(&dir), Ok(Liveness::Stale { .. })));
}

#[test]
fn a_session_whose_files_cannot_be_made_writes_nothing_and_names_the_directory() {
    // /proc exists, and no one (root included) can make a directory in it.
    let root = Path::new("/proc");
    let log = Log::create_in_background(root, SessionHeader::default()).unwrap();
    let dir = log.dir().display().to_string();
    let made = log.made().unwrap_err().to_string();
    assert!(made.contains(&dir), "{made}");
    // Poisoned: nothing after line 0 is ever written, however it is asked.
    let later = log.record(None, note("after")).unwrap_err().to_string();
    assert!(later.contains(&dir), "{later}");
    assert!(log.sync().is_err());
    // `Log::create` waits for the files, so it fails at once.
    let err = Log::create(root, SessionHeader::default()).unwrap_err();
    assert!(err.to_string().contains("/proc/"), "{err}");
}
