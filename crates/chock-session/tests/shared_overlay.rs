//! A session's calls share one overlay instance: calls started at the same time both run and see
//! each other's writes, and a call's mount table names no path of the session's state.

mod support;

use std::path::PathBuf;
use std::sync::Barrier;

use chock_session::{CallOptions, CallOutcome, NoApprover, Session, SessionOptions};

struct Fixture {
    _dir: tempfile::TempDir,
    project: PathBuf,
    root: PathBuf,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let project = base.join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("chock.toml"), "").unwrap();
    Fixture {
        _dir: dir,
        project,
        root: base.join("sessions"),
    }
}

fn open(f: &Fixture) -> Session {
    let opts = SessionOptions {
        sessions_root: Some(f.root.clone()),
        ..SessionOptions::default()
    };
    Session::open(&f.project, opts).unwrap()
}

fn sh(session: &Session, script: &str) -> (i32, String, String) {
    let argv: Vec<String> = ["sh", "-c", script].iter().map(|s| s.to_string()).collect();
    let r = support::confined_call(session, &argv, &CallOptions::default(), &NoApprover)
        .unwrap_or_else(|e| panic!("{script}: {e}"));
    match r.outcome {
        CallOutcome::Ran {
            outcome,
            stdout,
            stderr,
            ..
        } => (
            outcome.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&stdout).into_owned(),
            String::from_utf8_lossy(&stderr).into_owned(),
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn calls_started_together_share_the_sessions_overlay() {
    let f = fixture();
    let s = open(&f);
    for pair in 0..10 {
        let barrier = Barrier::new(2);
        let results: Vec<(i32, String, String)> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..2)
                .map(|i| {
                    let (s, barrier) = (&s, &barrier);
                    scope.spawn(move || {
                        let (mine, theirs) = (format!("p{pair}-{i}"), format!("p{pair}-{}", 1 - i));
                        let script = format!(
                            "echo {mine} > {mine}.tmp; mv {mine}.tmp {mine}; n=0; \
                             until [ -e {theirs} ]; do n=$((n+1)); if [ $n -gt 500 ]; then \
                             echo never-saw-{theirs}; exit 1; fi; sleep 0.01; done; cat {theirs}"
                        );
                        barrier.wait();
                        sh(s, &script)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (i, (code, out, err)) in results.into_iter().enumerate() {
            assert_eq!(
                (code, out.as_str()),
                (0, format!("p{pair}-{}\n", 1 - i).as_str()),
                "pair {pair}, call {i}: {err}"
            );
        }
    }
    let upper = s.workspace().upper();
    assert_eq!(
        std::fs::read_to_string(upper.join("p9-1")).unwrap(),
        "p9-1\n"
    );
    assert!(!f.project.join("p0-0").exists());
}

#[test]
fn a_calls_mount_table_names_no_path_of_the_session() {
    let f = fixture();
    let s = open(&f);
    let (code, mountinfo, err) = sh(&s, "cat /proc/self/mountinfo");
    assert_eq!(code, 0, "{err}");
    let session_dir = s.log().dir().display().to_string();
    let upper = s.workspace().upper().display().to_string();
    let sessions_root = f.root.display().to_string();
    for (what, p) in [
        ("the session directory", &session_dir),
        ("the upper directory", &upper),
        ("the sessions root", &sessions_root),
    ] {
        assert!(
            !mountinfo.contains(p.as_str()),
            "{what} {p} shows:\n{mountinfo}"
        );
    }
    assert!(
        mountinfo.contains(&format!(" {} ", f.project.display())),
        "the workspace is at the project's own path:\n{mountinfo}"
    );
}
