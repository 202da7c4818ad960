//! The one narrowing (`Pipeline::restrict`, `Pipeline::restrict_for_call`), with a real policy
//! file and a real session log: an accepted narrowing is logged (for a call, its decision too)
//! before the live table changes; a refused one logs nothing and changes nothing; one the log
//! cannot hold is not made (the kernel refuses the write, in a child process under a file size
//! limit).

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, RwLock};

use chock_decide::{ApprovalBroker, Pipeline, RestrictError};
use chock_log::{Log, SessionHeader};
use chock_policy::{Action, Decision, Policy, RatchetError};
use chock_protocol::EventData;
use chock_protocol::log::{Note, RatchetChange};

const CHILD_ENV: &str = "CHOCK_DECIDE_TEST_CHILD_ROOT";

/// A pipeline over a project whose table allows `fs.write`, its log under `root`.
fn pipeline(root: &Path) -> Pipeline {
    let project = root.join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(
        project.join("chock.toml"),
        "[[rule]]\naction = \"fs.write\"\ndecision = \"allow\"\n",
    )
    .unwrap();
    let policy = Policy::load(&project).unwrap();
    let log = Log::create(&root.join("sessions"), SessionHeader::default()).unwrap();
    Pipeline::new(log, Arc::new(RwLock::new(policy)), ApprovalBroker::new())
}

fn fs_write(pipeline: &Pipeline) -> Decision {
    pipeline
        .verdict(&Action::parse("fs.write").unwrap())
        .decision
}

/// The events after session.start, each parsed strictly, with their call ids.
fn events(pipeline: &Pipeline) -> Vec<(Option<String>, EventData)> {
    chock_log::read_events(pipeline.log().dir())
        .unwrap()
        .iter()
        .skip(1)
        .map(|e| {
            (
                e.call_id.clone(),
                EventData::parse_exact(e.kind, &e.data).unwrap(),
            )
        })
        .collect()
}

#[test]
fn a_narrowing_for_a_call_logs_its_decision_and_the_note_under_the_call_and_applies() {
    let root = tempfile::tempdir().unwrap();
    let p = pipeline(root.path());
    assert_eq!(fs_write(&p), Decision::Allow);
    p.restrict_for_call("c1", "fs.write", Decision::Deny)
        .unwrap();
    assert_eq!(fs_write(&p), Decision::Deny);
    let events = events(&p);
    let [
        (decided, EventData::Decision(decision)),
        (noted, EventData::Note(note)),
    ] = events.as_slice()
    else {
        panic!("not decision → note: {events:?}");
    };
    assert_eq!(decided.as_deref(), Some("c1"));
    assert_eq!(noted.as_deref(), Some("c1"));
    assert!(decision.allowed, "{decision:?}");
    assert_eq!(
        decision.decided_by,
        "grants no capability (narrowing the session's own policy)"
    );
    assert_eq!(
        note,
        &Note::Ratchet {
            change: RatchetChange::Restrict,
            pattern: "fs.write".into(),
            decision: "deny".into(),
            removed: None,
        }
    );
    // A front end's narrowing has no call: the note alone.
    p.restrict("fs.*", Decision::Deny).unwrap();
    let events = self::events(&p);
    assert_eq!(events.len(), 3, "{events:?}");
    assert!(matches!(
        &events[2],
        (None, EventData::Note(Note::Ratchet { .. }))
    ));
}

#[test]
fn a_refused_narrowing_logs_nothing_and_changes_nothing() {
    let root = tempfile::tempdir().unwrap();
    let p = pipeline(root.path());
    p.restrict("fs.write", Decision::Deny).unwrap();
    let before = events(&p).len();
    for (pattern, decision) in [
        ("fs.write", Decision::Ask),
        ("fs.write", Decision::Allow),
        ("no such..pattern", Decision::Deny),
    ] {
        let err = p.restrict_for_call("c2", pattern, decision).unwrap_err();
        assert!(matches!(err, RestrictError::Ratchet(_)), "{err:?}");
        assert_eq!(events(&p).len(), before, "{pattern} {decision}");
        assert_eq!(fs_write(&p), Decision::Deny);
    }
    assert!(matches!(
        p.restrict_for_call("c2", "fs.write", Decision::Ask),
        Err(RestrictError::Ratchet(RatchetError::Widening { .. }))
    ));
}

/// Run by the test below as a child process, under a file size limit: fills the log until the
/// kernel refuses a line, then narrows, and prints what the table says after.
#[test]
fn narrowing_child() {
    let Some(root) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let p = pipeline(Path::new(&root));
    // The smallest lines there are, so that once one does not fit, no decision or note does.
    for _ in 0..1000 {
        let filler = Note::CheckpointFailed {
            checkpoint: String::new(),
            failed: String::new(),
        };
        if p.log().record(None, filler).is_err() {
            let narrowed = p.restrict_for_call("c1", "fs.write", Decision::Deny);
            println!(
                "NARROWING {}",
                if narrowed.is_ok() { "made" } else { "refused" }
            );
            println!("TABLE {}", fs_write(&p));
            return;
        }
    }
    panic!("the file size limit never hit");
}

#[test]
fn a_narrowing_the_log_cannot_hold_is_not_made() {
    let root = tempfile::tempdir().unwrap();
    // RLIMIT_FSIZE through the shell's ulimit (512-byte blocks); SIGXFSZ ignored, so the
    // process sees EFBIG.
    let out = Command::new("sh")
        .arg("-c")
        .arg("trap '' XFSZ; ulimit -f 8; exec \"$0\" \"$@\"")
        .arg(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "narrowing_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, root.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("NARROWING refused"), "{stdout}");
    assert!(
        stdout.contains("TABLE allow"),
        "a narrowing was made that the log does not hold: {stdout}"
    );
}
