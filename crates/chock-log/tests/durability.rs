//! The durability path: each append is one write of a whole line followed by fdatasync of
//! the log before append returns (seen with strace), and a failed write leaves no torn line.

use std::path::Path;
use std::process::Command;

use chock_log::{EventKind, Log, LogError, SessionHeader, verify};
use serde_json::json;

const CHILD_ENV: &str = "CHOCK_LOG_TEST_CHILD_ROOT";

/// Run by the tests below as a child process: appends and prints each seq as it returns.
#[test]
fn appender_child() {
    let Some(root) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let log = Log::create(Path::new(&root), SessionHeader::default()).unwrap();
    let mode = std::env::var("CHOCK_LOG_TEST_MODE").unwrap_or_default();
    if mode == "fill" {
        // Under a file size limit: append until the kernel refuses.
        let big = "x".repeat(300);
        let mut last_ok = 0;
        for _ in 0..100 {
            match log.append(EventKind::ToolResult, Some("c1"), json!({"stdout": big})) {
                Ok(seq) => last_ok = seq,
                Err(LogError::Io { source, .. }) => {
                    println!("REFUSED {last_ok} {source}");
                    return;
                }
                Err(other) => panic!("unexpected error {other}"),
            }
        }
        panic!("the file size limit never hit");
    }
    for i in 0..3 {
        let seq = log
            .append(EventKind::Note, None, json!({"text": format!("event {i}")}))
            .unwrap();
        println!("RETURNED {seq}");
    }
}

fn child(root: &Path, mode: &str) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "appender_child",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(CHILD_ENV, root)
    .env("CHOCK_LOG_TEST_MODE", mode);
    cmd
}

#[test]
fn every_append_is_one_write_then_fdatasync_before_it_returns() {
    let root = tempfile::tempdir().unwrap();
    let trace = root.path().join("strace.out");
    let inner = child(root.path(), "three");
    let mut cmd = Command::new("strace");
    cmd.args([
        "-f",
        "-qq",
        "-e",
        "trace=openat,write,fdatasync,fsync",
        "-o",
    ])
    .arg(&trace);
    cmd.arg(inner.get_program()).args(inner.get_args());
    for (k, v) in inner.get_envs() {
        cmd.env(k, v.unwrap());
    }
    let out = match cmd.output() {
        Ok(out) => out,
        Err(e) => panic!("strace is needed for this test (apt-get install strace): {e}"),
    };
    let trace = std::fs::read_to_string(&trace).unwrap();
    assert!(
        out.status.success(),
        "child failed: {}\n{trace}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The log's fd, from its openat.
    let open = trace
        .lines()
        .find(|l| l.contains("log.jsonl\"") && l.contains("openat"))
        .expect("open of log.jsonl");
    let fd = open.rsplit('=').next().unwrap().trim().to_owned();
    let fd_prefix = format!("({fd},");
    let fd_only = format!("({fd})");
    // Sequence of acts on the log fd, and on stdout (the "RETURNED" lines).
    let mut acts = Vec::new();
    for line in trace.lines() {
        if line.contains(&format!("write{fd_prefix}")) {
            acts.push("write-log");
        } else if line.contains(&format!("fdatasync{fd_only}"))
            || line.contains(&format!("fsync{fd_only}"))
        {
            acts.push("sync-log");
        } else if line.contains("write(1,") && line.contains("RETURNED") {
            acts.push("returned");
        }
    }
    // session.start, then three appends, each whole line written once and synced before return.
    assert_eq!(
        acts,
        [
            "write-log",
            "sync-log",
            "write-log",
            "sync-log",
            "returned",
            "write-log",
            "sync-log",
            "returned",
            "write-log",
            "sync-log",
            "returned"
        ],
        "{trace}"
    );
}

#[test]
fn a_write_the_kernel_refuses_leaves_no_torn_line() {
    // RLIMIT_FSIZE (via the shell's ulimit, in 512-byte blocks) makes the kernel cut a write
    // short and then refuse with EFBIG; SIGXFSZ is ignored so the process sees the error.
    let root = tempfile::tempdir().unwrap();
    let inner = child(root.path(), "fill");
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg("trap '' XFSZ; ulimit -f 4; exec \"$0\" \"$@\"")
        .arg(inner.get_program())
        .args(inner.get_args());
    for (k, v) in inner.get_envs() {
        cmd.env(k, v.unwrap());
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The harness prints "test appender_child ... " before the child's own output.
    let refused = stdout
        .split("REFUSED ")
        .nth(1)
        .expect("the append was refused");
    let last_ok: u64 = refused.split(' ').next().unwrap().parse().unwrap();

    let dir = std::fs::read_dir(root.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.is_dir())
        .unwrap();
    let report = verify(&dir).unwrap();
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.torn_tail, None, "the partial line was not cut back");
    assert_eq!(report.head.unwrap().seq, last_ok);
    assert!(std::fs::metadata(dir.join("log.jsonl")).unwrap().len() <= 4 * 512);
}
