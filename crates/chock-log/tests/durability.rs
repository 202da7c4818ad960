//! The durability path: each append is one write of a whole line; a kind an act waits on is
//! fdatasynced before append returns and a grouped kind is not (seen with strace); a process
//! killed mid-session loses no durable line and leaves a log that verifies; a failed write
//! leaves no torn line.

use std::io::BufRead;
use std::path::Path;
use std::process::{Command, Stdio};

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
    if mode == "crash" {
        // Until killed: per act one durable pair (question, decision) and a run of grouped lines, each seq
        // printed once append returned (the cap only stops a child whose parent died).
        for i in 0..200_000u64 {
            let (kind, tag) = if i % 6 < 2 {
                (
                    [EventKind::ApprovalAsk, EventKind::Decision][(i % 6) as usize],
                    "DURABLE",
                )
            } else {
                (EventKind::ToolResult, "GROUPED")
            };
            let seq = log
                .append(kind, Some("c1"), json!({"i": i, "pad": "y".repeat(40)}))
                .unwrap();
            println!("{tag} {seq}");
        }
        return;
    }
    // A durable kind, three grouped ones, a durable one, two grouped ones, then drop.
    for kind in [
        EventKind::Decision,
        EventKind::Note,
        EventKind::ToolResult,
        EventKind::ModelRequest,
        EventKind::ApprovalAnswer,
        EventKind::CommandResult,
        EventKind::TurnEnd,
    ] {
        let seq = log
            .append(kind, None, json!({"text": format!("event {kind}")}))
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
fn durable_kinds_are_fdatasynced_before_append_returns_and_grouped_kinds_are_not() {
    let root = tempfile::tempdir().unwrap();
    let trace = root.path().join("strace.out");
    let inner = child(root.path(), "mixed");
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
    // With -f every line starts with its thread's id. The appending thread is the one that
    // prints "RETURNED"; the flusher thread may sync grouped lines at any time, on its own id.
    let appender = trace
        .lines()
        .find(|l| l.contains("write(1,") && l.contains("RETURNED"))
        .and_then(|l| l.split_whitespace().next())
        .expect("a RETURNED line")
        .to_owned();
    // Sequence of acts on the log fd, and on stdout (the "RETURNED" lines), by any thread.
    let mut acts = Vec::new();
    for line in trace.lines() {
        let tid = line.split_whitespace().next().unwrap_or_default();
        let by = if tid == appender { "" } else { "other:" };
        if line.contains(&format!("write{fd_prefix}")) {
            acts.push(format!("{by}write-log"));
        } else if ["fdatasync", "fsync"].iter().any(|call| {
            // A call another thread's call interrupts is printed `<unfinished ...>`.
            line.contains(&format!("{call}{fd_only}"))
                || line.contains(&format!("{call}({fd} <unfinished"))
        }) {
            acts.push(format!("{by}sync-log"));
        } else if line.contains("write(1,") && line.contains("RETURNED") {
            acts.push(format!("{by}returned"));
        }
    }
    // Every write to the log but line 0 is the appender's, one whole line each; line 0
    // (session.start) is written by the thread that makes the session's files
    // (`Log::create_in_background`), before any other line.
    let writes: Vec<&str> = acts
        .iter()
        .filter(|a| a.ends_with("write-log"))
        .map(String::as_str)
        .collect();
    assert_eq!(writes[0], "other:write-log", "{trace}");
    assert!(!writes[1..].contains(&"other:write-log"), "{trace}");
    // What the appending thread did, in order, up to its last return.
    let own: Vec<&str> = acts
        .iter()
        .filter(|a| !a.starts_with("other:"))
        .map(String::as_str)
        .collect();
    let last_return = own.iter().rposition(|a| *a == "returned").unwrap();
    // Each durable kind (decision, approval.answer): written, then synced, then returned. Each
    // grouped kind (session.start, note, tool.result, model.request, command.result, turn.end):
    // written and returned with no sync of its own.
    assert_eq!(
        own[..=last_return],
        [
            // (session.start: written by the making thread, synced with the first durable event)
            "write-log", // decision
            "sync-log",
            "returned",
            "write-log", // note
            "returned",
            "write-log", // tool.result
            "returned",
            "write-log", // model.request
            "returned",
            "write-log", // approval.answer: its sync also covers the three before it
            "sync-log",
            "returned",
            "write-log", // command.result
            "returned",
            "write-log", // turn.end
            "returned",
        ],
        "{trace}"
    );
    // The session's directory entries (the log in its directory, the directory in the root)
    // were synced, on whichever thread, before the first durable event returned.
    let session_dir = open
        .split('"')
        .nth(1)
        .and_then(|p| Path::new(p).parent())
        .expect("the log's path")
        .display()
        .to_string();
    let root_dir = root.path().display().to_string();
    let first_return = trace
        .lines()
        .position(|l| l.contains("write(1,") && l.contains("RETURNED"))
        .unwrap();
    for dir in [&session_dir, &root_dir] {
        let lines: Vec<&str> = trace.lines().collect();
        let at = lines
            .iter()
            .position(|l| {
                l.contains("openat") && l.contains(&format!("\"{dir}\"")) && !l.contains("O_CREAT")
            })
            .unwrap_or_else(|| panic!("no open of {dir}:\n{trace}"));
        // An open another thread's call interrupted ends on a later `<... openat resumed>` line
        // of the same thread.
        let tid = lines[at].split_whitespace().next().unwrap_or_default();
        let returned = if lines[at].contains("<unfinished") {
            lines[at..]
                .iter()
                .find(|l| l.split_whitespace().next() == Some(tid) && l.contains("openat resumed>"))
                .unwrap_or_else(|| panic!("the open of {dir} never returned:\n{trace}"))
        } else {
            lines[at]
        };
        let dir_fd = returned.rsplit('=').next().unwrap().trim().to_owned();
        let synced = trace
            .lines()
            .position(|l| {
                l.contains(&format!("fsync({dir_fd})"))
                    || l.contains(&format!("fsync({dir_fd} <unfinished"))
            })
            .unwrap_or_else(|| panic!("{dir} was never synced:\n{trace}"));
        assert!(
            synced < first_return,
            "{dir} was synced after the first durable event returned:\n{trace}"
        );
    }
    // The last grouped lines were synced before the process ended (by drop, or by the flusher
    // if it came first): some sync of the log follows the last write.
    let last_write = acts.iter().rposition(|a| a.ends_with("write-log")).unwrap();
    assert!(
        acts[last_write..].iter().any(|a| a.ends_with("sync-log")),
        "the grouped tail was never synced:\n{trace}"
    );
}

#[test]
fn a_killed_writer_loses_no_durable_line_and_its_log_verifies() {
    let root = tempfile::tempdir().unwrap();
    let mut child = child(root.path(), "crash")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut durable = Vec::new();
    let mut returned = 0u64;
    for line in stdout.lines() {
        let line = line.unwrap();
        if let Some(seq) = line.split("DURABLE ").nth(1) {
            durable.push(seq.trim().parse::<u64>().unwrap());
        }
        if line.contains("DURABLE ") || line.contains("GROUPED ") {
            returned += 1;
        }
        // Mid-stream, right after a grouped line returned: pending lines are in flight.
        if durable.len() >= 40 && line.contains("GROUPED ") {
            break;
        }
    }
    child.kill().unwrap(); // SIGKILL: no drop, no flush
    child.wait().unwrap();
    assert!(returned > durable.len() as u64);

    let dir = std::fs::read_dir(root.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.is_dir())
        .unwrap();
    let report = verify(&dir).unwrap();
    assert!(report.is_intact(), "{report:?}");
    let events = chock_log::read_events(&dir).unwrap();
    let seqs: std::collections::BTreeSet<u64> = events.iter().map(|e| e.seq).collect();
    for seq in &durable {
        assert!(seqs.contains(seq), "durable seq {seq} lost");
    }

    // What a power cut can take besides: the grouped lines after the last durable one (and a
    // torn piece of the next). The log cut there still verifies, and reopens to go on.
    let last_durable = *durable.last().unwrap();
    let text = std::fs::read(dir.join("log.jsonl")).unwrap();
    let end = text
        .split_inclusive(|b| *b == b'\n')
        .take(usize::try_from(last_durable).unwrap() + 1)
        .map(<[u8]>::len)
        .sum::<usize>();
    let mut cut = text[..end].to_vec();
    cut.extend_from_slice(&text[end..(end + 7).min(text.len())]);
    std::fs::write(dir.join("log.jsonl"), &cut).unwrap();
    let report = verify(&dir).unwrap();
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.head.unwrap().seq, last_durable);
    let log = Log::open(&dir).unwrap();
    let seq = log
        .record(
            None,
            chock_protocol::log::SessionEnd {
                reason: chock_protocol::log::EndReason::Closed,
                error: None,
                summary: None,
                workspace_kept: None,
            },
        )
        .unwrap();
    assert_eq!(
        seq,
        last_durable + 2,
        "a note for the torn piece, then this"
    );
    drop(log);
    assert!(verify(&dir).unwrap().is_intact());
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

/// An idle session holds no flusher thread: one runs while grouped lines are pending and ends
/// after `FLUSHER_LINGER` with none; the next grouped line starts another, which syncs it.
#[test]
fn the_flusher_runs_only_while_grouped_lines_are_pending() {
    let root = tempfile::tempdir().unwrap();
    let log = Log::create(root.path(), SessionHeader::default()).unwrap();
    log.append(EventKind::TurnStart, None, json!({"turn": 1}))
        .unwrap();
    assert!(log.has_flusher(), "a grouped line starts a flusher");
    std::thread::sleep(chock_log::FLUSHER_LINGER * 3 + chock_log::GROUP_MAX_DELAY);
    assert!(
        !log.has_flusher(),
        "the flusher ended once nothing was pending"
    );
    log.append(EventKind::TurnEnd, None, json!({"turn": 1}))
        .unwrap();
    assert!(log.has_flusher(), "the next grouped line starts another");
    std::thread::sleep(chock_log::GROUP_MAX_DELAY * 10);
    // Synced by the new flusher (not by a durable line, `sync` or drop): a durable append now
    // finds nothing pending before it, which the log cannot show; instead, the flusher still
    // ends, which it only does with nothing pending.
    std::thread::sleep(chock_log::FLUSHER_LINGER * 3);
    assert!(!log.has_flusher());
}
