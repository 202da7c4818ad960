//! A scratch session (`chock exec` without `--keep`): its calls are confined in the same overlay, but
//! nothing is written for a later review — no git process, no base commit, no checkpoint, no
//! session ref — and its overlay instances are mounted `volatile`, one after another; a session of
//! one call keeps that call's writes in a tmpfs of its own and makes nothing of the workspace on
//! disk.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use chock_log::EventData;
use chock_protocol::log::CommandResult;
use chock_session::{CallOptions, CallOutcome, NoApprover, Session, SessionOptions};
use chock_workspace::Backing;

struct Fixture {
    _dir: tempfile::TempDir,
    project: PathBuf,
    root: PathBuf,
}

fn git(project: &Path, args: &[&str]) {
    let out = Command::new("git")
        .arg("-C")
        .arg(project)
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .output()
        .expect("git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A git project with one committed file.
fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let project = base.join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("chock.toml"), "").unwrap();
    std::fs::write(project.join("a.txt"), "a\n").unwrap();
    git(&project, &["init", "-q"]);
    git(&project, &["add", "-A"]);
    git(&project, &["commit", "-q", "-m", "start"]);
    Fixture {
        _dir: dir,
        project,
        root: base.join("sessions"),
    }
}

fn open(f: &Fixture, scratch: bool) -> Session {
    let opts = SessionOptions {
        sessions_root: Some(f.root.clone()),
        scratch,
        ..SessionOptions::default()
    };
    Session::open(&f.project, opts).unwrap()
}

fn sh(session: &Session, script: &str) -> String {
    let argv: Vec<String> = ["sh", "-c", script].iter().map(|s| s.to_string()).collect();
    let r = support::confined_call(session, &argv, &CallOptions::default(), &NoApprover)
        .unwrap_or_else(|e| panic!("{script}: {e}"));
    match r.outcome {
        CallOutcome::Ran {
            outcome, stdout, ..
        } => {
            assert_eq!(outcome.status.code(), Some(0), "{script}");
            String::from_utf8_lossy(&stdout).into_owned()
        }
        other => panic!("{other:?}"),
    }
}

/// The project's mount line of the call's own mount table.
const OVERLAY_LINE: &str = "grep ' - overlay ' /proc/self/mountinfo";

#[test]
fn a_scratch_session_writes_nothing_for_a_review_and_mounts_volatile_instances() {
    let f = fixture();
    let git_before = chock_workspace::git_processes_started();
    let s = open(&f, true);
    assert_eq!(s.workspace().backing(), &Backing::Overlay);
    // Two calls one after the other: two instances, the second made after the first one's
    // volatile mark was left in the work directory.
    let first = sh(&s, &format!("{OVERLAY_LINE}; echo made > b.txt"));
    assert!(first.contains("volatile"), "{first}");
    let second = sh(&s, &format!("{OVERLAY_LINE}; cat a.txt b.txt"));
    assert!(second.contains("volatile"), "{second}");
    assert!(second.ends_with("a\nmade\n"), "{second}");
    assert!(!f.project.join("b.txt").exists());
    let checkpoints: Vec<Option<String>> = chock_log::read_events(s.log().dir())
        .unwrap()
        .iter()
        .filter_map(|e| match e.payload() {
            Ok(EventData::CommandResult(CommandResult::Ran { checkpoint, .. })) => Some(checkpoint),
            _ => None,
        })
        .collect();
    assert_eq!(checkpoints, [None, None]);
    let dir = s.log().dir().to_path_buf();
    s.close(false).unwrap();
    assert!(!dir.join("workspace").exists());
    assert_eq!(chock_workspace::git_processes_started(), git_before);
    let refs = f.project.join(".git/refs/chock");
    assert!(
        !refs.exists() || std::fs::read_dir(&refs).unwrap().next().is_none(),
        "a session ref was written"
    );
}

#[test]
fn a_reviewed_session_keeps_a_synced_overlay() {
    let f = fixture();
    let s = open(&f, false);
    assert!(matches!(s.workspace().backing(), Backing::Git { .. }));
    let line = sh(&s, OVERLAY_LINE);
    assert!(line.contains("overlay"), "{line}");
    assert!(!line.contains("volatile"), "{line}");
    s.close(false).unwrap();
}

/// A scratch session whose calls take turns (`chock exec`): each call's own sandbox mounts the
/// workspace overlay (its options name the layers under the call's `/oldroot`, not a helper's
/// descriptors), `volatile`, one after another over the same upper directory (the second call
/// sees the first one's file, its mount made after the first one's mark was removed), in a
/// project whose path holds the overlay options' separators `,` and `:`.
#[test]
fn a_scratch_session_taking_turns_mounts_each_instance_in_its_own_call() {
    let f = fixture();
    let odd = f.project.with_file_name("pro,ject:odd");
    std::fs::rename(&f.project, &odd).unwrap();
    let opts = SessionOptions {
        sessions_root: Some(f.root.clone()),
        scratch: true,
        calls: chock_session::Calls::InTurn,
        ..SessionOptions::default()
    };
    let s = Session::open(&odd, opts).unwrap();
    let first = sh(&s, &format!("{OVERLAY_LINE}; echo made > b.txt"));
    assert!(first.contains("volatile"), "{first}");
    assert!(first.contains("lowerdir=/oldroot/"), "{first}");
    let second = sh(&s, &format!("{OVERLAY_LINE}; cat a.txt b.txt"));
    assert!(second.contains("volatile"), "{second}");
    assert!(second.ends_with("a\nmade\n"), "{second}");
    assert!(!odd.join("b.txt").exists(), "the write reached the project");
    let dir = s.log().dir().to_path_buf();
    s.close(false).unwrap();
    assert!(!dir.join("workspace").exists());
}

/// A scratch session of one call (`chock exec` without `--keep`): the call reads and writes the
/// workspace as any other, its upper layer is a tmpfs of its own (the overlay's options name the
/// staging place, not the session directory), the session directory holds only the lock and the
/// log while it runs and after, a second call is refused before anything is logged for it, and
/// `session.end` says the workspace was not kept.
#[test]
fn a_one_call_scratch_session_keeps_its_writes_in_memory() {
    if !chock_sandbox::in_memory_supported() {
        eprintln!("skipped: this kernel's tmpfs keeps no user.* xattrs (Linux 6.6)");
        return;
    }
    let f = fixture();
    let opts = SessionOptions {
        sessions_root: Some(f.root.clone()),
        scratch: true,
        calls: chock_session::Calls::One,
        ..SessionOptions::default()
    };
    let s = Session::open(&f.project, opts).unwrap();
    let dir = s.log().dir().to_path_buf();
    let out = sh(
        &s,
        &format!("{OVERLAY_LINE}; echo made > b.txt; cat a.txt b.txt"),
    );
    assert!(out.contains("upperdir=/.chock-scratch/upper"), "{out}");
    assert!(!out.contains(&dir.display().to_string()), "{out}");
    assert!(out.ends_with("a\nmade\n"), "{out}");
    assert!(
        !f.project.join("b.txt").exists(),
        "the write reached the project"
    );
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["lock", "log.jsonl"]);
    let events_before = chock_log::read_events(&dir).unwrap().len();
    let argv: Vec<String> = vec!["true".into()];
    let second = support::confined_call(&s, &argv, &CallOptions::default(), &NoApprover);
    assert!(
        matches!(second, Err(chock_session::SessionError::OneCallMade)),
        "{second:?}"
    );
    assert_eq!(chock_log::read_events(&dir).unwrap().len(), events_before);
    s.close(false).unwrap();
    let end = chock_log::read_events(&dir)
        .unwrap()
        .into_iter()
        .find_map(|e| match e.payload() {
            Ok(EventData::SessionEnd(end)) => Some(end),
            _ => None,
        })
        .expect("a session.end");
    assert_eq!(end.workspace_kept, Some(false));
    assert!(!dir.join("workspace").exists());
}
