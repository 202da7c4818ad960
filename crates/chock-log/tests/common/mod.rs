//! Helpers shared by the log's integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use chock_log::{EventKind, Log, SessionHeader};
use serde_json::json;

/// A session with `events` events after `session.start` (seq 1..=events), writer dropped.
pub fn session_with(root: &Path, events: u64) -> PathBuf {
    let log = Log::create(root, SessionHeader::default()).unwrap();
    for i in 0..events {
        let call = format!("call-{i}");
        log.append(
            EventKind::ToolCall,
            Some(&call),
            json!({"tool": "run_command", "i": i}),
        )
        .unwrap();
    }
    log.dir().to_owned()
}

pub fn log_path(dir: &Path) -> PathBuf {
    dir.join("log.jsonl")
}

/// The log's lines, each with its newline.
pub fn lines(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(log_path(dir))
        .unwrap()
        .split_inclusive('\n')
        .map(str::to_owned)
        .collect()
}

pub fn write_lines(dir: &Path, lines: &[String]) {
    std::fs::write(log_path(dir), lines.concat()).unwrap();
}
