//! A `git` first on `PATH` whose `add` is slowed, and what the tests read of the slowed process
//! from `/proc`. Each test file that uses it is its own test process holding one test, so the
//! changed `PATH` and `SLOW_ADD` reach no other test.
#![allow(dead_code)]

use std::path::Path;
use std::time::Duration;

use chock_workspace::{Backing, Workspace};

/// The `sleep` duration that marks a slowed `git add`.
pub const MARK: &str = "31.4159";

/// Puts a `git` first on `PATH` whose `add` becomes `sleep MARK` (the process the job kills) when
/// `$SLOW_ADD` is [`MARK`], or sleeps `$SLOW_ADD` seconds and then adds; all else is the real git.
pub fn slow_git_add(dir: &Path) {
    let real = std::process::Command::new("sh")
        .args(["-c", "command -v git"])
        .output()
        .unwrap()
        .stdout;
    let real = String::from_utf8(real).unwrap();
    let script = format!(
        "#!/bin/sh\ncase \" $* \" in *\" add \"*) case \"$SLOW_ADD\" in {MARK}) exec sleep {MARK};; ?*) sleep \"$SLOW_ADD\";; esac;; esac\nexec {} \"$@\"\n",
        real.trim(),
        MARK = MARK,
    );
    std::fs::create_dir_all(dir).unwrap();
    let wrapper = dir.join("git");
    std::fs::write(&wrapper, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = std::env::var("PATH").unwrap_or_default();
    set_env("PATH", &format!("{}:{path}", dir.display()));
}

pub fn set_env(key: &str, value: &str) {
    // SAFETY: this test binary holds one test, and nothing else of it reads or writes the
    // environment while that test changes it.
    unsafe { std::env::set_var(key, value) };
}

/// The nice values of the running `sleep MARK` processes (field 19 of `/proc/PID/stat`).
pub fn marked_sleeps_nice() -> Vec<i32> {
    marked_pids()
        .into_iter()
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let after = &stat[stat.rfind(')')? + 2..];
            after.split(' ').nth(16)?.parse().ok()
        })
        .collect()
}

pub fn marked_sleeps() -> usize {
    marked_pids().len()
}

pub fn marked_pids() -> Vec<String> {
    let mut n = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        if args.len() >= 2 && args[0].ends_with(b"sleep") && args[1] == MARK.as_bytes() {
            n.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    n
}

pub fn base_of(ws_dir: &Path) -> Option<String> {
    match Workspace::open(ws_dir).unwrap().meta().backing.clone() {
        Backing::Git { base, .. } => base,
        Backing::Overlay => panic!("a git project has the git backing"),
    }
}

pub fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..500 {
        if done() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("timed out waiting for {what}");
}

/// The scheduler states of the running `sleep MARK` processes (field 3 of `/proc/PID/stat`:
/// `T` is stopped).
pub fn marked_sleeps_state() -> Vec<char> {
    marked_pids()
        .into_iter()
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            stat[stat.rfind(')')? + 2..].chars().next()
        })
        .collect()
}
