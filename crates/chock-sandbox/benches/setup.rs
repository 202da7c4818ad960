//! Benchmark: what a confined call costs before the command does anything.
//!
//! Prints, in one run, the median wall time of running `true`: plain (fork + exec), in Chock's
//! sandbox with a bound workspace and with an overlay workspace, and in bubblewrap with comparable
//! options, as ratios. Then it takes the setup apart: the cost of each namespace on its own, made
//! in a forked child, so the table says where the time goes (docs/sandbox.md, "Performance").
//!
//! A fifth row adds one declared `[sandbox]` read path (`CHOCK_BENCH_READ`, default `~/.rustup`)
//! to the bound workspace: every call walks that tree on the host for unix sockets to mask, so the
//! row shows what a toolchain directory costs per call (the entry count is printed with it).
//!
//! Two more rows time the same calls as calls of one session (`spawn_in_session`): after the
//! first, each is forked from the session sandbox's init (docs/sandbox.md, "A sandbox per
//! session"), with a bound workspace and with the session's shared overlay.
//!
//! `cargo bench -p chock-sandbox --bench setup` (runs: `CHOCK_BENCH_RUNS`, default 40). Not a test:
//! nothing here fails on a number; the numbers are for reading.

#[path = "support/bwrap_reference.rs"]
mod bwrap_reference;
use bwrap_reference::bwrap_args;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use chock_sandbox::{NetworkPlan, Plan, StdioMode, WorkspaceMount};

fn main() {
    let runs: usize = std::env::var("CHOCK_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    let base = bench_dir();
    let project = base.join("project");
    std::fs::create_dir_all(&project).expect("project dir");
    std::fs::write(project.join("chock.toml"), "[rules]\n").expect("policy file");
    let copy = base.join("copy");
    std::fs::create_dir_all(&copy).expect("copy dir");
    std::fs::write(copy.join("chock.toml"), "[rules]\n").expect("policy file");

    println!(
        "sandbox setup for `true`: median of {runs} runs (uid {})",
        nix::unistd::getuid()
    );
    println!();
    let plain = median(runs, || {
        let st = Command::new("/usr/bin/true").status().expect("true");
        assert!(st.success());
    });
    let mut rows: Vec<(String, Option<Duration>)> =
        vec![("plain true (fork + exec)".into(), Some(plain))];

    let bind = chock(
        runs,
        &project,
        WorkspaceMount::Bind {
            source: copy.clone(),
        },
        Vec::new(),
    );
    rows.push(("chock, bound workspace".into(), bind));
    match declared_read_path() {
        Some(read) => {
            println!(
                "declared read path: {} ({} entries walked for sockets per call)",
                read.display(),
                count_entries(&read)
            );
            let t = chock(
                runs,
                &project,
                WorkspaceMount::Bind {
                    source: copy.clone(),
                },
                vec![read],
            );
            rows.push(("chock, bound + declared read path".into(), t));
        }
        None => println!(
            "declared read path: none (set CHOCK_BENCH_READ, or have ~/.rustup); its row is skipped"
        ),
    }
    let overlay = chock(
        runs,
        &project,
        {
            let (upper, work) = (base.join("upper"), base.join("work"));
            std::fs::create_dir_all(&upper).expect("upper");
            std::fs::create_dir_all(&work).expect("work");
            WorkspaceMount::Overlay {
                lower: project.clone(),
                upper,
                work,
            }
        },
        Vec::new(),
    );
    rows.push(("chock, overlay workspace".into(), overlay));
    let session_bind = chock_in(
        runs,
        &project,
        WorkspaceMount::Bind {
            source: copy.clone(),
        },
        Vec::new(),
        true,
    );
    rows.push(("chock session sandbox, bound".into(), session_bind));
    let session_overlay = chock_in(
        runs,
        &project,
        WorkspaceMount::Overlay {
            lower: project.clone(),
            upper: base.join("upper"),
            work: base.join("work"),
        },
        Vec::new(),
        true,
    );
    rows.push(("chock session sandbox, overlay".into(), session_overlay));

    let bwrap = bwrap(runs, &copy);
    match bwrap {
        Some(_) => rows.push(("bubblewrap, comparable options".into(), bwrap)),
        None => println!(
            "bubblewrap: not installed (apt-get install bubblewrap); its column is skipped"
        ),
    }

    println!(
        "{:<34} {:>10} {:>9} {:>9}",
        "", "median", "x plain", "x bwrap"
    );
    for (name, t) in &rows {
        match t {
            Some(t) => println!(
                "{name:<34} {:>10} {:>9} {:>9}",
                ms(*t),
                ratio(*t, plain),
                bwrap.map_or_else(|| "-".to_string(), |b| ratio(*t, b))
            ),
            None => println!("{name:<34} {:>10}", "failed"),
        }
    }

    println!();
    println!("where the time goes: each step alone, in a forked child (median of {runs})");
    for (name, flags) in [
        ("fork + exit (baseline)", 0),
        ("unshare(user) + id maps", libc::CLONE_NEWUSER),
        ("  then mount namespace", libc::CLONE_NEWNS),
        ("  then pid namespace", libc::CLONE_NEWPID),
        ("  then ipc namespace", libc::CLONE_NEWIPC),
        ("  then uts namespace", libc::CLONE_NEWUTS),
        ("  then network namespace", libc::CLONE_NEWNET),
        ("  then cgroup namespace", libc::CLONE_NEWCGROUP),
    ] {
        let (step, total) = unshare_cost(runs, flags);
        println!(
            "{name:<34} step {:>9}   fork-to-reaped {:>9}",
            ms(step),
            ms(total)
        );
    }
    let (_, net_churn) = unshare_cost(runs, libc::CLONE_NEWNET | libc::CLONE_NEWIPC);
    println!(
        "{:<34} fork-to-reaped {:>9}",
        "user + net + ipc together",
        ms(net_churn)
    );
    remove_tree(&base);
}

/// Removes the scratch tree, opening up first the mode-000 directory the overlay leaves in its
/// work dir.
fn remove_tree(dir: &Path) {
    fn open_up(dir: &Path) {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                open_up(&e.path());
            }
        }
    }
    open_up(dir);
    let _ = std::fs::remove_dir_all(dir);
}

/// A scratch directory outside /tmp (which the sandbox replaces): under `$HOME`, like a project.
fn bench_dir() -> PathBuf {
    let root = std::env::var_os("HOME").map_or_else(std::env::temp_dir, PathBuf::from);
    let dir = root.join(format!(".chock-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("bench dir");
    dir
}

fn median(runs: usize, mut f: impl FnMut()) -> Duration {
    f(); // warm up: page cache, first-use costs
    let mut times: Vec<Duration> = (0..runs.max(1))
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn ratio(a: Duration, b: Duration) -> String {
    format!("{:.2}", a.as_secs_f64() / b.as_secs_f64().max(1e-9))
}

/// The declared read path of the fifth row: `CHOCK_BENCH_READ`, else `~/.rustup` if it exists.
fn declared_read_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CHOCK_BENCH_READ") {
        return Some(PathBuf::from(p));
    }
    let rustup = PathBuf::from(std::env::var_os("HOME")?).join(".rustup");
    rustup.is_dir().then_some(rustup)
}

/// Entries under `root` on its own filesystem, symlinks not followed: what the socket walk visits.
fn count_entries(root: &Path) -> usize {
    use std::os::unix::fs::MetadataExt;
    let Ok(top) = std::fs::symlink_metadata(root) else {
        return 0;
    };
    let mut stack = vec![root.to_path_buf()];
    let mut n = 0;
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            n += 1;
            if let Ok(m) = e.metadata()
                && m.is_dir()
                && m.dev() == top.dev()
            {
                stack.push(e.path());
            }
        }
    }
    n
}

fn chock(
    runs: usize,
    project: &Path,
    workspace: WorkspaceMount,
    extra_read: Vec<PathBuf>,
) -> Option<Duration> {
    chock_in(runs, project, workspace, extra_read, false)
}

/// As `chock`; with `session`, every call is one of a session (`spawn_in_session`, one socket
/// index, an overlay workspace as the session's shared instance): the calls after the first are
/// forked from the session sandbox's init.
fn chock_in(
    runs: usize,
    project: &Path,
    workspace: WorkspaceMount,
    extra_read: Vec<PathBuf>,
    session: bool,
) -> Option<Duration> {
    let index = chock_sandbox::SocketIndex::new();
    let shared = session && matches!(workspace, WorkspaceMount::Overlay { .. });
    let overlay = shared.then(|| chock_sandbox::SharedOverlay::new(&workspace).expect("overlay"));
    let mut plan = Plan::builder(
        vec!["/usr/bin/true".into()],
        workspace,
        project.to_path_buf(),
    )
    .policy_file(Some(project.join("chock.toml")))
    .extra_read(extra_read)
    .network(NetworkPlan::None)
    .build_with_env(&[("PATH".into(), chock_sandbox::DEFAULT_PATH.into())]);
    plan.shared_overlay = shared;
    let once = || -> Result<(), String> {
        let spawned = if session {
            chock_sandbox::spawn_in_session(&plan, StdioMode::Null, overlay.as_ref(), &index)
        } else {
            chock_sandbox::spawn(&plan, StdioMode::Null)
        };
        let mut child = spawned.map_err(|e| e.to_string())?;
        let outcome = child.wait().map_err(|e| e.to_string())?;
        match outcome.status {
            chock_sandbox::ExitStatus::Exited(0) => Ok(()),
            other => Err(format!("true ended with {other:?}")),
        }
    };
    if let Err(e) = once() {
        println!("chock: {e}");
        return None;
    }
    Some(median(runs, || once().expect("a confined true")))
}

/// bubblewrap with the options closest to Chock's layers: every namespace, a read-only /usr and
/// the loader's /etc entries, a fresh /proc and /dev, a /tmp tmpfs, the workspace bound
/// read-write, no capabilities, a new session, dying with its parent, a cleared environment.
fn bwrap(runs: usize, workspace: &Path) -> Option<Duration> {
    let (bin, args) = bwrap_args(workspace)?;
    let once = || {
        Command::new(bin)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .status()
    };
    match once() {
        Ok(st) if st.success() => {}
        Ok(st) => {
            println!("bubblewrap: `true` ended with {st}; its column is skipped");
            return None;
        }
        Err(e) => {
            println!("bubblewrap: {e}; its column is skipped");
            return None;
        }
    }
    Some(median(runs, || {
        let st = once().expect("bwrap");
        assert!(st.success());
    }))
}

/// Forks a child that makes a user namespace (mapping itself) and then, timed on its own, the
/// namespaces in `extra`. Returns (the timed step, fork to reaped).
fn unshare_cost(runs: usize, extra: libc::c_int) -> (Duration, Duration) {
    let mut steps = Vec::new();
    let total = median(runs, || steps.push(one_unshare(extra)));
    steps.sort();
    (steps[steps.len() / 2], total)
}

fn one_unshare(extra: libc::c_int) -> Duration {
    let (uid, gid) = (nix::unistd::getuid(), nix::unistd::getgid());
    let (r, w) = nix::unistd::pipe().expect("pipe");
    // SAFETY: the benchmark is single-threaded here; the child only makes system calls, writes
    // to a pipe and leaves with _exit.
    match unsafe { nix::unistd::fork() }.expect("fork") {
        nix::unistd::ForkResult::Child => {
            let mut nanos: u64 = 0;
            if extra != 0 {
                let t_user = Instant::now();
                let ok = nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWUSER).is_ok()
                    && std::fs::write("/proc/self/setgroups", "deny").is_ok()
                    && std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1")).is_ok()
                    && std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1")).is_ok();
                let flags = extra & !libc::CLONE_NEWUSER;
                let t = Instant::now();
                let rc = if flags == 0 {
                    0
                } else {
                    // SAFETY: unshare changes only this child's namespaces.
                    unsafe { libc::unshare(flags) }
                };
                // The user namespace's own row times the unshare and its id maps; the others
                // time only their own namespace, made inside a user namespace as the driver does.
                let timed = if flags == 0 {
                    t_user.elapsed()
                } else {
                    t.elapsed()
                };
                nanos = if ok && rc == 0 {
                    u64::try_from(timed.as_nanos()).unwrap_or(u64::MAX)
                } else {
                    0
                };
            }
            let _ = nix::unistd::write(&w, &nanos.to_ne_bytes());
            // SAFETY: leave the forked child without running the parent's destructors.
            unsafe { libc::_exit(0) }
        }
        nix::unistd::ForkResult::Parent { child } => {
            drop(w);
            let mut f = std::fs::File::from(r);
            let mut buf = [0u8; 8];
            let _ = f.read_exact(&mut buf);
            let _ = nix::sys::wait::waitpid(child, None);
            Duration::from_nanos(u64::from_ne_bytes(buf))
        }
    }
}
