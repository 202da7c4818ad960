//! Running `nix` on the host: with a deadline, its standard error streamed as progress, and a
//! kill that reaches every process it started (a builder that left nix's process group included).

use std::io::{BufRead, Read};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process};

use super::NixError;

/// How many lines of nix's standard error a failure quotes.
const TAIL_LINES: usize = 12;

/// What a finished nix run printed.
#[derive(Debug)]
pub(crate) struct NixOutput {
    pub stdout: Vec<u8>,
}

/// Receives nix's standard error, a line at a time, while it runs.
pub(crate) type Progress<'a> = &'a (dyn Fn(&str) + Sync);

/// Kills one nix run and everything below it. Cheap to clone; registered with the session's
/// running calls so that an interrupt reaches it.
#[derive(Debug, Clone)]
pub(crate) struct TreeKill {
    root: i32,
    killed: Arc<AtomicBool>,
    /// Whether `root` is not reaped yet, held while it is waited for: once reaped its pid may
    /// name another process, which no kill may reach.
    unreaped: Arc<Mutex<bool>>,
}

impl chock_sandbox::Kill for TreeKill {
    fn kill(&self) -> bool {
        let unreaped = self.unreaped.lock().unwrap_or_else(PoisonError::into_inner);
        if !*unreaped {
            return false;
        }
        self.killed.store(true, Ordering::SeqCst);
        kill_tree(self.root);
        true
    }
}

/// The direct children of each process, read from `/proc/<pid>/stat`.
fn children_of(parent: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| {
                    // The command name is in parentheses and may hold anything: read after it.
                    let rest = &stat[stat.rfind(')')? + 1..];
                    rest.split_whitespace().nth(1)?.parse::<i32>().ok()
                })
                == Some(parent)
        })
        .collect()
}

/// Every process below `root`, found before any of them is killed (a process whose parent dies
/// is moved to another parent, out of reach of a walk made later).
fn tree_below(root: i32) -> Vec<i32> {
    let mut found = Vec::new();
    let mut next = vec![root];
    while let Some(pid) = next.pop() {
        for child in children_of(pid) {
            if !found.contains(&child) {
                found.push(child);
                next.push(child);
            }
        }
    }
    found
}

/// Stops `root` and every process below it (so none can start another), then kills them all;
/// again until no process is left below it. `root` stays a zombie until its parent reaps it, so
/// its pid is not reused meanwhile.
pub(crate) fn kill_tree(root: i32) {
    let signal = |pid: i32, sig: Signal| {
        if let Some(pid) = Pid::from_raw(pid) {
            let _ = kill_process(pid, sig);
        }
    };
    for _ in 0..20 {
        let below = tree_below(root);
        signal(root, Signal::STOP);
        for &pid in &below {
            signal(pid, Signal::STOP);
        }
        // What the stopped ones started before they stopped.
        let below: Vec<i32> = below.into_iter().chain(tree_below(root)).collect();
        signal(root, Signal::KILL);
        for &pid in &below {
            signal(pid, Signal::KILL);
        }
        if tree_below(root).is_empty() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Runs `nix args…` until it ends, `deadline` passes or `on_start`'s registration is used to kill
/// it. `what` names the act for errors ("building `nixpkgs#ripgrep`").
pub(crate) fn run(
    nix: &Path,
    args: &[String],
    what: &str,
    deadline: Duration,
    progress: Progress<'_>,
    on_start: &dyn Fn(TreeKill) -> Option<crate::running::Registered>,
) -> Result<NixOutput, NixError> {
    use std::os::unix::process::CommandExt;
    let mut child = Command::new(nix)
        .args(["--extra-experimental-features", "nix-command flakes"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group: the terminal's Ctrl-C is the session's to turn into an
        // interrupt, which then kills the tree here.
        .process_group(0)
        .spawn()
        .map_err(|source| NixError::Spawn {
            nix: nix.to_path_buf(),
            source,
        })?;
    let root = i32::try_from(child.id()).unwrap_or(i32::MAX);
    let killer = TreeKill {
        root,
        killed: Arc::new(AtomicBool::new(false)),
        unreaped: Arc::new(Mutex::new(true)),
    };
    let _registered = on_start(killer.clone());
    let mut stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let started = Instant::now();
    let (status, out, tail) = std::thread::scope(|scope| {
        let reading = scope.spawn(move || {
            let mut out = Vec::new();
            if let Some(s) = stdout.as_mut() {
                let _ = s.read_to_end(&mut out);
            }
            out
        });
        let tailing = scope.spawn(move || {
            let mut tail: Vec<String> = Vec::new();
            if let Some(err) = stderr {
                for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
                    progress(&line);
                    tail.push(line);
                    if tail.len() > TAIL_LINES {
                        tail.remove(0);
                    }
                }
            }
            tail
        });
        let status = loop {
            {
                let mut unreaped = killer
                    .unreaped
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                match child.try_wait() {
                    Ok(Some(status)) => {
                        *unreaped = false;
                        break Some(status);
                    }
                    Ok(None) => {}
                    Err(_) => {
                        kill_tree(root);
                        let _ = child.wait();
                        *unreaped = false;
                        break None;
                    }
                }
                if killer.killed.load(Ordering::SeqCst) || started.elapsed() >= deadline {
                    kill_tree(root);
                    let _ = child.wait();
                    *unreaped = false;
                    break None;
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let out = reading.join().unwrap_or_default();
        let tail = tailing.join().unwrap_or_default();
        (status, out, tail)
    });
    let tail = tail.join("\n");
    if killer.killed.load(Ordering::SeqCst) {
        return Err(NixError::Interrupted {
            what: what.to_string(),
        });
    }
    match status {
        None => Err(NixError::Deadline {
            what: what.to_string(),
            secs: deadline.as_secs(),
            tail,
        }),
        Some(s) if s.success() => Ok(NixOutput { stdout: out }),
        Some(s) => Err(NixError::Failed {
            what: what.to_string(),
            status: s.to_string(),
            tail,
        }),
    }
}
