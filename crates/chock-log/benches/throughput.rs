//! Prints how fast the log appends, and how fast `verify` reads. Not a timed test: it prints, it
//! does not judge. Run with `cargo bench -p chock-log`. The temporary directory is under cargo's
//! target dir, so the numbers are those of the disk it lives on (a tmpfs makes fsync free).
//!
//! Appends are measured four ways, each as events/s and as a ratio to the first:
//! - the old path: one `fdatasync` per event, whatever its kind (an append then `Log::sync`);
//! - durable kinds only (`approval.ask`, `decision`): still one sync per event;
//! - a realistic mix (`support/mix.rs`, which chock-cli's `per_call` bench measures too);
//! - grouped kinds only (`tool.result`), synced in groups.

#[path = "support/mix.rs"]
mod mix;
use mix::append;

use std::time::Instant;

use chock_log::{EventKind, Log, SessionHeader, verify};
use serde_json::json;

const SYNCED_EVENTS: u64 = 1_000;
const MIX_TURNS: u64 = 120;
const GROUPED_EVENTS: u64 = 100_000;
const VERIFY_EVENTS: u64 = 200_000;

fn main() {
    let base = option_env!("CARGO_TARGET_TMPDIR").map_or_else(std::env::temp_dir, Into::into);
    let root = tempfile::tempdir_in(base).expect("temp dir");
    println!("chock-log throughput (dir {})", root.path().display());

    let data = json!({"tool": "run_command", "argv": ["cargo", "test", "-p", "chock-log"], "cwd": "/work/project"});
    let old = run(
        "old path (one fdatasync per event)",
        root.path(),
        None,
        |log, i| {
            append(log, EventKind::ToolResult, i, &data);
            log.sync().expect("sync");
            1
        },
        SYNCED_EVENTS,
    );
    let durable = [EventKind::ApprovalAsk, EventKind::Decision];
    run(
        "durable kinds only (approval.ask, decision)",
        root.path(),
        Some(old),
        |log, i| {
            append(log, durable[(i % 2) as usize], i, &data);
            1
        },
        SYNCED_EVENTS,
    );
    run(
        "realistic mix (the durable kinds of 16 a turn)",
        root.path(),
        Some(old),
        |log, i| mix::turn(log, i, &data),
        MIX_TURNS,
    );
    run(
        "grouped kinds only (tool.result)",
        root.path(),
        Some(old),
        |log, i| {
            append(log, EventKind::ToolResult, i, &data);
            1
        },
        GROUPED_EVENTS,
    );

    // A big log for verify, written straight from the documented format (docs/log.md) without
    // fsync: verify reads bytes, so how they were written does not matter, and a real disk
    // would take minutes to fsync this many lines.
    let dir = write_plain_log(root.path(), VERIFY_EVENTS);
    let bytes = std::fs::read(dir.join("log.jsonl")).expect("read");
    let start = Instant::now();
    let digest = chock_log::sha256_hex(&bytes);
    println!(
        "sha256 alone: {:.1} MB/s ({})",
        bytes.len() as f64 / 1e6 / start.elapsed().as_secs_f64(),
        &digest[..8]
    );
    let start = Instant::now();
    let report = verify(&dir).expect("verify");
    let secs = start.elapsed().as_secs_f64();
    assert!(report.is_intact(), "bench log does not verify: {report:?}");
    let mb = report.bytes as f64 / 1_000_000.0;
    println!(
        "verify: {} lines, {mb:.1} MB in {secs:.3} s = {:.1} MB/s ({:.0} lines/s)",
        report.lines,
        mb / secs,
        report.lines as f64 / secs
    );
}

/// Appends `rounds` rounds of `round` (which returns how many events it appended) to a fresh
/// log, syncs what is pending, prints the rate (and its ratio to `old`), and returns the rate.
fn run(
    name: &str,
    root: &std::path::Path,
    old: Option<f64>,
    round: impl Fn(&Log, u64) -> u64,
    rounds: u64,
) -> f64 {
    let log = Log::create(root, SessionHeader::default()).expect("create");
    log.add_secret("sk-bench-secret-0123456789")
        .expect("secret");
    let start = Instant::now();
    let mut events = 0;
    for i in 0..rounds {
        events += round(&log, i);
    }
    log.sync().expect("sync");
    let secs = start.elapsed().as_secs_f64();
    let rate = events as f64 / secs;
    let ratio = old.map_or_else(String::new, |old| {
        format!(", {:.1}x the old path", rate / old)
    });
    println!(
        "append, {name}: {events} events in {secs:.3} s = {rate:.0} events/s ({:.3} ms/event){ratio}",
        secs * 1000.0 / events as f64
    );
    rate
}

fn write_plain_log(root: &std::path::Path, events: u64) -> std::path::PathBuf {
    use std::io::Write;
    let id = "20261130T000000Z-000001";
    let dir = root.join(id);
    std::fs::create_dir(&dir).expect("dir");
    let mut out =
        std::io::BufWriter::new(std::fs::File::create(dir.join("log.jsonl")).expect("log"));
    let mut prev = chock_log::genesis_hash(id);
    for seq in 0..events {
        let (kind, data) = if seq == 0 {
            (
                "session.start",
                json!({"format": "chock-log/1", "session_id": id}),
            )
        } else {
            (
                "tool.result",
                json!({"status": 0, "stdout": "ok\n".repeat(8), "i": seq}),
            )
        };
        let line = json!({"seq": seq, "ts": "2026-11-30T00:00:00Z", "kind": kind, "call_id": format!("call-{seq}"), "prev": prev, "data": data});
        let mut bytes = serde_json::to_vec(&line).expect("json");
        bytes.push(b'\n');
        prev = chock_log::sha256_hex(&bytes);
        out.write_all(&bytes).expect("write");
    }
    out.flush().expect("flush");
    dir
}
