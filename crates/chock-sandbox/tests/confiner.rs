//! The execution seam through real processes: a call started through `dyn Confiner` (the local
//! sandbox behind it), its streams, its outcome awaited without a thread held, its timeout, its
//! gate, and a kill that names no pid.

use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chock_sandbox::{
    CallHandle, Confiner, ExitStatus, LocalConfiner, Plan, PreparedCall, SharedOverlay,
    SocketIndex, StdioMode, WorkspaceMount, gate,
};

struct Fixture {
    _dir: tempfile::TempDir,
    project: PathBuf,
    upper: PathBuf,
    work: PathBuf,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let project = base.join("proj");
        let (upper, work) = (base.join("state/upper"), base.join("state/work"));
        for d in [&project, &upper, &work] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(project.join("hello.txt"), "hello\n").unwrap();
        Fixture {
            _dir: dir,
            project,
            upper,
            work,
        }
    }

    fn mount(&self) -> WorkspaceMount {
        WorkspaceMount::Overlay {
            lower: self.project.clone(),
            upper: self.upper.clone(),
            work: self.work.clone(),
        }
    }

    fn plan(&self, script: &str, timeout: Duration) -> Plan {
        Plan::builder(
            vec!["/bin/sh".into(), "-c".into(), script.into()],
            self.mount(),
            self.project.clone(),
        )
        .shared_overlay(true)
        .timeout(Some(timeout))
        .build()
    }

    /// The session's confiner, as a session holds it.
    fn confiner(&self) -> Arc<dyn Confiner> {
        let overlay = SharedOverlay::new(&self.mount()).unwrap();
        Arc::new(LocalConfiner::new(
            Some(overlay),
            Arc::new(SocketIndex::new()),
        ))
    }
}

fn read_all(f: Option<std::fs::File>) -> std::thread::JoinHandle<String> {
    let mut f = f.expect("a piped stream");
    std::thread::spawn(move || {
        let mut s = String::new();
        f.read_to_string(&mut s).unwrap();
        s
    })
}

async fn start(c: &dyn Confiner, plan: Plan) -> Box<dyn CallHandle> {
    let call = c.prepare(plan).await.unwrap();
    c.start(call, StdioMode::Piped, None).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_through_the_seam_runs_confined_and_its_outcome_is_awaited() {
    let fx = Fixture::new();
    let c = fx.confiner();
    let script = "cat hello.txt; echo made > made.txt; echo err >&2; exit 3";
    let mut call = start(&*c, fx.plan(script, Duration::from_secs(30))).await;
    let (out, err) = (read_all(call.take_stdout()), read_all(call.take_stderr()));
    let outcome = call.wait().await.unwrap();
    assert_eq!(outcome.status, ExitStatus::Exited(3));
    assert_eq!(out.join().unwrap(), "hello\n");
    assert_eq!(err.join().unwrap(), "err\n");
    // The write went to the session's upper layer, never to the project.
    assert!(fx.upper.join("made.txt").exists());
    assert!(!fx.project.join("made.txt").exists());
    // A second call of the same confiner sees the first one's write (one shared overlay).
    let mut call = start(&*c, fx.plan("cat made.txt", Duration::from_secs(30))).await;
    let out = read_all(call.take_stdout());
    drop(call.take_stderr());
    assert_eq!(call.wait().await.unwrap().status, ExitStatus::Exited(0));
    assert_eq!(out.join().unwrap(), "made\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killer_ends_the_call_and_every_process_in_it_without_a_pid() {
    let fx = Fixture::new();
    let c = fx.confiner();
    // A child in the background and one in the foreground: both must be gone for stdout to end.
    let mut call = start(&*c, fx.plan("sleep 60 & sleep 60", Duration::from_secs(60))).await;
    let out = read_all(call.take_stdout());
    drop(call.take_stderr());
    let killer = call.killer().unwrap();
    let began = Instant::now();
    let killing = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        killer.kill()
    });
    let outcome = call.wait().await.unwrap();
    assert!(
        killing.await.unwrap(),
        "the call was running when it was killed"
    );
    assert_eq!(outcome.status, ExitStatus::Signaled(libc::SIGKILL));
    assert!(
        began.elapsed() < Duration::from_secs(10),
        "{:?}",
        began.elapsed()
    );
    assert_eq!(
        out.join().unwrap(),
        "",
        "stdout ended: no process of the call holds it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plans_timeout_ends_an_awaited_call() {
    let fx = Fixture::new();
    let c = fx.confiner();
    let mut call = start(&*c, fx.plan("sleep 60", Duration::from_millis(300))).await;
    drop((call.take_stdout(), call.take_stderr()));
    let began = Instant::now();
    let outcome = call.wait().await.unwrap();
    assert_eq!(outcome.status, ExitStatus::TimedOut);
    assert!(
        began.elapsed() < Duration::from_secs(10),
        "{:?}",
        began.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gated_call_starts_only_once_its_key_is_opened() {
    let fx = Fixture::new();
    let c = fx.confiner();
    // Refused: the key is dropped unopened, and the command never ran.
    let (g, key) = gate().unwrap();
    let call = c
        .prepare(fx.plan("echo ran > refused.txt", Duration::from_secs(30)))
        .await
        .unwrap();
    drop(key);
    let started = c.start(call, StdioMode::Piped, Some(g)).await;
    assert!(started.is_err(), "a call whose key was dropped started");
    assert!(!fx.upper.join("refused.txt").exists());
    // Allowed: the key opened while the start waits at the gate.
    let (g, key) = gate().unwrap();
    let call = c
        .prepare(fx.plan("echo ran > allowed.txt", Duration::from_secs(30)))
        .await
        .unwrap();
    let opening = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        key.open();
    });
    let mut call = c.start(call, StdioMode::Piped, Some(g)).await.unwrap();
    opening.await.unwrap();
    drop((call.take_stdout(), call.take_stderr()));
    assert_eq!(call.wait().await.unwrap().status, ExitStatus::Exited(0));
    assert!(fx.upper.join("allowed.txt").exists());
}

#[tokio::test]
async fn a_prepared_call_crosses_the_wire_whole_and_a_bad_one_is_refused() {
    let fx = Fixture::new();
    let plan = fx.plan("true", Duration::from_secs(5));
    let call = fx.confiner().prepare(plan.clone()).await.unwrap();
    let back = PreparedCall::from_wire(&call.to_wire().unwrap()).unwrap();
    assert_eq!(back.plan(), &plan);
    let mut bad = plan;
    bad.argv.clear();
    assert!(
        fx.confiner().prepare(bad).await.is_err(),
        "an empty argv was prepared"
    );
    assert!(PreparedCall::from_wire(b"{\"argv\":").is_err());
}
