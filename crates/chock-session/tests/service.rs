//! A session's service (what an MCP server runs in) is held through its confiner's handle, never
//! a host pid: stopping it, or dropping it as a session's end does, leaves no process of its tree
//! behind. Checked from outside, on the host: by the processes' command lines in /proc (a
//! background child of the service's own command included), and by its stdout, which reads
//! end-of-file only once no process holds its other end.

use std::io::Read;
use std::time::{Duration, Instant};

use chock_decide::ApprovalBroker;
use chock_session::{Service, ServiceOptions, Session, SessionOptions};

struct Fixture {
    _dir: tempfile::TempDir,
    session: Session,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let project = base.join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("chock.toml"), "").unwrap();
    let session = Session::open(
        &project,
        SessionOptions {
            sessions_root: Some(base.join("sessions")),
            ..SessionOptions::default()
        },
    )
    .unwrap();
    Fixture { _dir: dir, session }
}

/// A number no other process on the machine sleeps for: this test's mark in /proc.
fn mark(which: u32) -> String {
    chock_test_support::processes::mark(1_000_000, which)
}

use chock_test_support::processes::sleeping;

/// Starts a service whose command leaves two background children (one its own child, one
/// orphaned to the sandbox's init) and says `up` once both run; returns it and its stdout.
async fn started(f: &Fixture, mark: &str) -> (Service, std::fs::File) {
    let pipeline = f.session.pipeline(ApprovalBroker::new());
    let script = format!("sleep {mark} & (sleep {mark} &) ; echo up; wait");
    let argv: Vec<String> = ["sh", "-c", &script]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut service = f
        .session
        .spawn_service(
            &argv,
            &ServiceOptions {
                call_id: "svc".into(),
                ..ServiceOptions::default()
            },
            &pipeline,
        )
        .await
        .expect("the service starts");
    let mut stdout = service.stdout.take().expect("its stdout");
    let (stdout, said) = tokio::task::spawn_blocking(move || {
        let mut buf = [0u8; 3];
        let said = stdout.read_exact(&mut buf).map(|()| buf);
        (stdout, said)
    })
    .await
    .unwrap();
    assert_eq!(&said.expect("it says up"), b"up\n");
    let deadline = Instant::now() + Duration::from_secs(10);
    while sleeping(mark).len() < 2 {
        assert!(
            Instant::now() < deadline,
            "its children never showed in /proc"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (service, stdout)
}

/// Reads `stdout` to its end, which comes only when no process holds the pipe's other end.
async fn ends(stdout: std::fs::File) -> bool {
    let read = tokio::task::spawn_blocking(move || {
        let mut stdout = stdout;
        let mut rest = Vec::new();
        stdout.read_to_end(&mut rest).is_ok()
    });
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .is_ok_and(|r| r.unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn stopping_a_service_ends_its_whole_process_tree() {
    let f = fixture();
    let mark = mark(0);
    let (service, stdout) = started(&f, &mark).await;
    service.stop().await;
    assert_eq!(
        sleeping(&mark),
        Vec::<u32>::new(),
        "a process of the service outlived its stop"
    );
    assert!(ends(stdout).await, "its stdout is still held open");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_service_dropped_with_its_session_leaves_no_process() {
    let f = fixture();
    let mark = mark(1);
    let (service, stdout) = started(&f, &mark).await;
    drop(service);
    drop(f);
    assert_eq!(
        sleeping(&mark),
        Vec::<u32>::new(),
        "a process of the service outlived its drop"
    );
    assert!(ends(stdout).await, "its stdout is still held open");
}
