//! Finding a test's processes from outside, through the host's /proc: a test starts `sleep
//! <mark>` inside a sandbox and then checks that no such process is left once its owner ended.

use std::path::PathBuf;

/// A number no other process on the machine sleeps for: the test process's id, made distinct
/// per `base` (one per test binary) and `which` (one per mark in a test).
pub fn mark(base: u32, which: u32) -> String {
    (base + std::process::id() * 2 + which).to_string()
}

/// The host pids of the processes running `sleep <mark>`, read from /proc.
pub fn sleeping(mark: &str) -> Vec<u32> {
    let mut pids = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return pids;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) =
            std::fs::read(PathBuf::from("/proc").join(pid.to_string()).join("cmdline"))
        else {
            continue;
        };
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        if args.len() >= 2 && args[0].ends_with(b"sleep") && args[1] == mark.as_bytes() {
            pids.push(pid);
        }
    }
    pids
}
