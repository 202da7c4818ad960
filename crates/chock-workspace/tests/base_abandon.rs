//! The git base is waited for only by what needs it. A workspace that never changed ends without
//! waiting for its `git add -A` (the job is abandoned, its git process killed, `meta.json` keeps
//! `base: null`, and the next open records the base); a workspace that changed waits for it, so
//! its changes are measured against the state before they were made.
//!
//! `git add` is slowed by a wrapper first on `PATH` (this file is its own test process, so the
//! changed `PATH` reaches no other test): `exec sleep` with a duration no other process uses,
//! then the real git.

mod common;

use std::path::Path;
use std::time::Duration;

use chock_workspace::{Backing, Workspace};
use common::Env;

/// The `sleep` duration that marks a slowed `git add`.
const MARK: &str = "31.4159";

/// Puts a `git` first on `PATH` whose `add` becomes `sleep MARK` (the process the job kills) when
/// `$SLOW_ADD` is [`MARK`], or sleeps `$SLOW_ADD` seconds and then adds; all else is the real git.
fn slow_git_add(dir: &Path) {
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

fn set_env(key: &str, value: &str) {
    // SAFETY: this test binary holds one test, and nothing else of it reads or writes the
    // environment while that test changes it.
    unsafe { std::env::set_var(key, value) };
}

/// The nice values of the running `sleep MARK` processes (field 19 of `/proc/PID/stat`).
fn marked_sleeps_nice() -> Vec<i32> {
    marked_pids()
        .into_iter()
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let after = &stat[stat.rfind(')')? + 2..];
            after.split(' ').nth(16)?.parse().ok()
        })
        .collect()
}

fn marked_sleeps() -> usize {
    marked_pids().len()
}

fn marked_pids() -> Vec<String> {
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

fn base_of(ws_dir: &Path) -> Option<String> {
    match Workspace::open(ws_dir).unwrap().meta().backing.clone() {
        Backing::Git { base, .. } => base,
        Backing::Overlay => panic!("a git project has the git backing"),
    }
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..500 {
        if done() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("timed out waiting for {what}");
}

#[test]
fn an_unchanged_workspace_never_waits_for_its_base_and_a_changed_one_always_does() {
    let env = Env::git(&[("a.txt", "one\n")]);
    slow_git_add(&env.tmp.path().join("bin"));

    // Unchanged: a checkpoint does not wait, and the drop abandons the job (its git killed).
    set_env("SLOW_ADD", MARK);
    let ws = Workspace::create(&env.project, &env.sessions.join("s1"), "s1").unwrap();
    let dir = ws.session_dir().to_path_buf();
    wait_for("the slowed git add to start", || marked_sleeps() == 1);
    assert_eq!(
        marked_sleeps_nice(),
        [19],
        "the base's git runs at the lowest priority: the session's calls come first"
    );
    assert_eq!(ws.checkpoint("nothing happened").unwrap(), None);
    assert!(ws.diff().unwrap().files.is_empty());
    assert_eq!(
        marked_sleeps(),
        1,
        "neither the checkpoint nor the diff waited for the base"
    );
    let dropping = std::time::Instant::now();
    drop(ws);
    assert_eq!(marked_sleeps(), 0, "the abandoned job's git was killed");
    assert!(
        dropping.elapsed() < Duration::from_secs(20),
        "the drop waited for the slowed add instead of killing it"
    );
    assert_eq!(base_of(&dir), None, "an abandoned base is not recorded");

    // The next open records it then.
    set_env("SLOW_ADD", "");
    let reopened = Workspace::open(&dir).unwrap();
    let base = reopened.wait_base().unwrap().expect("recorded on reopen");
    assert_eq!(base_of(&dir).as_deref(), Some(base.as_str()));
    drop(reopened);

    // Changed: the drop waits for the base, which is recorded.
    set_env("SLOW_ADD", "0.3");
    let ws = Workspace::create(&env.project, &env.sessions.join("s2"), "s2").unwrap();
    let dir = ws.session_dir().to_path_buf();
    std::fs::write(ws.upper().join("new.txt"), "made\n").unwrap();
    drop(ws);
    assert!(
        base_of(&dir).is_some(),
        "a changed workspace's base was waited for"
    );
    let diff = Workspace::open(&dir).unwrap().diff().unwrap();
    assert_eq!(diff.files.len(), 1);
}
