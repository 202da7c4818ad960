//! The driver through real processes: each layer's basic function.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use chock_sandbox::{ExitStatus, Plan, SandboxError, StdioMode, WorkspaceMount, spawn};

struct Run {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

fn project() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().canonicalize().unwrap().join("proj");
    std::fs::create_dir_all(&p).unwrap();
    std::fs::write(p.join("hello.txt"), "hello\n").unwrap();
    (dir, p)
}

fn plan_for(project: &Path, argv: &[&str]) -> Plan {
    Plan::builder(
        argv.iter().map(|s| s.to_string()).collect(),
        WorkspaceMount::Bind {
            source: project.to_path_buf(),
        },
        project.to_path_buf(),
    )
    .timeout(Some(Duration::from_secs(30)))
    .build()
}

fn run(plan: &Plan) -> Result<Run, SandboxError> {
    let mut child = spawn(plan, StdioMode::Piped)?;
    let read = |f: Option<std::fs::File>| {
        let mut f = f.unwrap();
        std::thread::spawn(move || {
            let mut s = String::new();
            f.read_to_string(&mut s).unwrap();
            s
        })
    };
    let out = read(child.take_stdout());
    let err = read(child.take_stderr());
    let outcome = child.wait()?;
    let stdout = out.join().unwrap();
    let stderr = err.join().unwrap();
    Ok(Run {
        status: outcome.status,
        stdout,
        stderr,
    })
}

fn sh(project: &Path, script: &str) -> Run {
    run(&plan_for(project, &["/bin/sh", "-c", script])).unwrap()
}

#[test]
fn true_runs_and_exit_status_passes_through() {
    let (_d, p) = project();
    assert_eq!(sh(&p, "exit 0").status, ExitStatus::Exited(0));
    let r = sh(&p, "echo out; echo err >&2; exit 7");
    assert_eq!(r.status, ExitStatus::Exited(7));
    assert_eq!(r.stdout, "out\n");
    assert_eq!(r.stderr, "err\n");
}
