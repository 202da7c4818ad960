//! What one tool call costs inside a real session, and how that grows with the project (issue 11).
//! Not a test: it prints, it never fails on a number. `cargo bench -p chock-cli --bench per_call`.
//!
//! For a git project of 1,000 and of 100,000 files (generated in a temporary directory with `git
//! fast-import` and one checkout), the bench-profile `chock` binary runs whole `chock run` processes
//! with an offline recording (`--provider script:FILE`): one of 40 turns, each one `run_command
//! "true"`, and one with no call at all. The two are run in pairs, one after the other; a pair's
//! difference divided by 40 is the overhead of one call, and the session with no call is the cost
//! of a session's start and end. Medians over the pairs, with the spread (lowest–highest).
//!
//! In the same run: a whole `bwrap … true` with options close to Chock's (as in chock-sandbox's
//! `setup` bench) and a whole `chock exec -- true` process in the 1,000-file project; the same
//! pairs in a 1,000-file project whose `chock.toml` declares a `[sandbox] read` path of 120,000
//! entries (with one more pairing there and at 1,000 files: the 40-call session against a one-call
//! session, over 39, a call after the session's first, which leaves out the one walk of the
//! declared path that the first call waits for) (`CHOCK_BENCH_DECLARED`, default 120000; 0 skips it); and how many events a second the
//! session log appends in the realistic mix chock-log's `throughput` bench uses, on the disk the
//! bench's temporary directory is on.
//!
//! `CHOCK_BENCH_PAIRS` (default 7) pairs at 1,000 files, `CHOCK_BENCH_PAIRS_LARGE` (default 3) at
//! 100,000 files (0: the large project is not generated and its rows are skipped; `CHOCK_BENCH_PAIRS`
//! 0 skips the sessions at 1,000 files but still makes the project `chock exec` runs in),
//! `CHOCK_BENCH_RUNS` (default 20) runs of bwrap and `chock exec`, taken in turns (one of each,
//! then the next pair) so that load from elsewhere falls on both alike (and for the same reason a
//! bwrap call before, between and after the two sessions of each pair: every ratio against bwrap
//! is the median of pair-by-pair ratios, each against the bwrap calls made beside it); `CHOCK_BENCH_LARGE`
//! (default 100000) the large project's size. After generating a project the bench runs `sync`, so
//! the new tree's writeback does not fall on the measured calls' log syncs.

#[path = "../../chock-sandbox/benches/support/bwrap_reference.rs"]
mod bwrap_reference;
use bwrap_reference::bwrap_args;
#[path = "../../chock-log/benches/support/mix.rs"]
mod mix;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CHOCK: &str = env!("CARGO_BIN_EXE_chock");
const CALLS: u32 = 40;
/// The pause before each measured bwrap and `chock exec` process.
const SETTLE: Duration = Duration::from_millis(20);

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn ratio(a: Duration, b: Duration) -> String {
    format!("{:.2}x", a.as_secs_f64() / b.as_secs_f64())
}

/// Median, lowest and highest.
fn stats(mut v: Vec<Duration>) -> (Duration, Duration, Duration) {
    v.sort();
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

fn show((m, lo, hi): (Duration, Duration, Duration)) -> String {
    format!("{} ({}–{})", ms(m), ms(lo), ms(hi))
}

/// A project and the directories `chock` reads and writes, all under one temporary directory.
struct World {
    base: PathBuf,
    project: PathBuf,
    with_calls: String,
    without: String,
    /// A recording of one call: what the session with 40 is paired with for the calls after
    /// the first.
    one_call: String,
}

impl World {
    /// `declared`: a directory the project's `chock.toml` declares as a `[sandbox] read` path.
    fn new(base: &Path, files: usize, declared: Option<&Path>) -> World {
        let project = base.join("project");
        for dir in [
            "home", "config", "state", "data", "cache", "runtime", "project",
        ] {
            std::fs::create_dir_all(base.join(dir)).unwrap();
        }
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(base.join("runtime"), std::fs::Permissions::from_mode(0o700))
            .unwrap();
        std::fs::write(base.join("org.toml"), "").unwrap();
        let mut script = String::new();
        for _ in 0..CALLS {
            script.push_str(
                "[[turn]]\n[[turn.call]]\ntool = \"run_command\"\ninput = { command = \"true\" }\nexpect = { is_error = false }\n\n",
            );
        }
        script.push_str("[[turn]]\ntext = \"done\"\n");
        std::fs::write(base.join("calls.toml"), script).unwrap();
        std::fs::write(base.join("none.toml"), "[[turn]]\ntext = \"done\"\n").unwrap();
        std::fs::write(
            base.join("one.toml"),
            "[[turn]]\n[[turn.call]]\ntool = \"run_command\"\ninput = { command = \"true\" }\nexpect = { is_error = false }\n\n[[turn]]\ntext = \"done\"\n",
        )
        .unwrap();
        let w = World {
            with_calls: format!("script:{}", base.join("calls.toml").display()),
            without: format!("script:{}", base.join("none.toml").display()),
            one_call: format!("script:{}", base.join("one.toml").display()),
            base: base.to_path_buf(),
            project,
        };
        w.generate(files);
        if let Some(read) = declared {
            let toml = format!("[sandbox]\nread = [{:?}]\n", read.display().to_string());
            std::fs::write(w.project.join("chock.toml"), toml).unwrap();
        }
        w
    }

    fn env<'c>(&self, cmd: &'c mut Command) -> &'c mut Command {
        let at = |d: &str| self.base.join(d);
        cmd.env_clear()
            .current_dir(&self.project)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", at("home"))
            .env("XDG_CONFIG_HOME", at("config"))
            .env("XDG_STATE_HOME", at("state"))
            .env("XDG_DATA_HOME", at("data"))
            .env("XDG_CACHE_HOME", at("cache"))
            .env("XDG_RUNTIME_DIR", at("runtime"))
            .env("CHOCK_ORG_POLICY", at("org.toml"))
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "b")
            .env("GIT_AUTHOR_EMAIL", "b@b")
            .env("GIT_COMMITTER_NAME", "b")
            .env("GIT_COMMITTER_EMAIL", "b@b")
            .env("LANG", "C.UTF-8")
            .stdin(Stdio::null())
    }

    fn git(&self, args: &[&str]) {
        let out = self
            .env(&mut Command::new("git"))
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// `files` files in directories of 100 (two levels), committed with one `git fast-import`
    /// and written by one checkout, so the index has every file's stat data (as a user's would).
    fn generate(&self, files: usize) {
        self.git(&["init", "-q", "-b", "main"]);
        let mut stream = Vec::new();
        for i in 0..files {
            let data = format!("file {i}\nsome content of a source file\n");
            write!(
                stream,
                "blob\nmark :{}\ndata {}\n{data}\n",
                i + 1,
                data.len()
            )
            .unwrap();
        }
        let msg = "start";
        write!(
            stream,
            "commit refs/heads/main\ncommitter b <b@b> 1767225600 +0000\ndata {}\n{msg}\n",
            msg.len()
        )
        .unwrap();
        for i in 0..files {
            writeln!(
                stream,
                "M 100644 :{} d{:03}/e{:02}/f{i}.txt",
                i + 1,
                i / 1000,
                (i / 100) % 10
            )
            .unwrap();
        }
        stream.push(b'\n');
        let mut child = self
            .env(&mut Command::new("git"))
            .args(["fast-import", "--quiet"])
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(&stream).unwrap();
        assert!(child.wait().unwrap().success(), "git fast-import");
        self.git(&["checkout", "-q", "-f", "main"]);
    }

    /// One whole `chock args` process; panics with its output when it fails.
    fn chock(&self, args: &[&str]) -> Duration {
        let start = Instant::now();
        let out = self
            .env(&mut Command::new(CHOCK))
            .args(args)
            .output()
            .unwrap();
        let took = start.elapsed();
        assert!(
            out.status.success(),
            "chock {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        took
    }

    fn session(&self, provider: &str) -> Duration {
        self.chock(&["run", "--provider", provider, "run true"])
    }
}

/// Median, lowest and highest.
type Spread = (Duration, Duration, Duration);
/// Median, lowest and highest of ratios.
type RatioSpread = (f64, f64, f64);

struct Measured {
    per_call: Spread,
    /// The 40-call session against the one-call session, over 39: a call after the session's
    /// first (what a session's one-time work, such as the first walk of a declared path, leaves
    /// out).
    after_first: Spread,
    start: Spread,
    /// Each pair's call against the bwrap calls made beside it (median, lowest, highest), and
    /// those bwrap calls.
    against_bwrap: Option<(RatioSpread, Spread)>,
}

/// A whole `bwrap … true` in `project` (the options of `bwrap_reference.rs`); `None` without
/// bubblewrap.
fn bwrap_call(project: &Path) -> Option<impl Fn() -> Duration> {
    bwrap_args(project).map(|(bin, args)| {
        move || {
            // What the process before it left to the kernel (a namespace's teardown, RCU work)
            // settles first, so that it does not count against bwrap.
            std::thread::sleep(SETTLE);
            let start = Instant::now();
            let ok = Command::new(bin)
                .args(&args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .status()
                .unwrap()
                .success();
            assert!(ok, "bwrap failed");
            start.elapsed()
        }
    })
}

/// Median, lowest and highest of ratios.
fn ratio_stats(mut v: Vec<f64>) -> RatioSpread {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

/// Generates the project of `files` files under `base` and runs `pairs` pairs in it (none:
/// `None`, the project is still made for `chock exec`).
fn measure(base: &Path, files: usize, pairs: usize, declared: Option<&Path>) -> Option<Measured> {
    let made = Instant::now();
    let w = World::new(base, files, declared);
    // The generated tree's writeback would otherwise land on the first measured calls' log syncs
    // (bwrap writes nothing durable, so it would not feel it).
    let synced = Command::new("sync").status().is_ok_and(|s| s.success());
    assert!(synced, "sync after generating the project");
    let with = declared.map_or_else(String::new, |d| {
        format!(", a declared read path {}", d.display())
    });
    println!(
        "{files} files{with}: generated in {:.1} s; {pairs} pairs",
        made.elapsed().as_secs_f64()
    );
    if pairs == 0 {
        return None;
    }
    // One of each first, unmeasured: the page cache and git's own first-run work.
    w.session(&w.without);
    w.session(&w.with_calls);
    // A whole bwrap call before, between and after the two sessions of each pair: the machine's
    // speed drifts by a third over minutes here (another guest's load), so each pair's call is
    // compared with the bwrap calls made beside it.
    let bwrap = bwrap_call(&w.project);
    let bwrap_now = || bwrap.as_ref().map(|b| b());
    let (mut per_call, mut start, mut ratios, mut bwraps) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut after_first = Vec::new();
    w.session(&w.one_call);
    for _ in 0..pairs {
        let one = w.session(&w.one_call);
        let b0 = bwrap_now();
        let none = w.session(&w.without);
        let b1 = bwrap_now();
        let calls = w.session(&w.with_calls);
        let b2 = bwrap_now();
        let call = calls.saturating_sub(none) / CALLS;
        per_call.push(call);
        after_first.push(calls.saturating_sub(one) / (CALLS - 1));
        start.push(none);
        if let (Some(b0), Some(b1), Some(b2)) = (b0, b1, b2) {
            let (beside, _, _) = stats(vec![b0, b1, b2]);
            ratios.push(call.as_secs_f64() / beside.as_secs_f64());
            bwraps.extend([b0, b1, b2]);
        }
    }
    let m = Measured {
        per_call: stats(per_call),
        after_first: stats(after_first),
        start: stats(start),
        against_bwrap: (!ratios.is_empty()).then(|| (ratio_stats(ratios), stats(bwraps))),
    };
    println!(
        "  per call {}   after the first {}   session with no call {}",
        show(m.per_call),
        show(m.after_first),
        show(m.start)
    );
    if let Some(((r, lo, hi), b)) = m.against_bwrap {
        println!(
            "  bwrap … true beside the pairs {}   per call / bwrap, pair by pair: median {r:.2}x ({lo:.2}x–{hi:.2}x)",
            show(b)
        );
    }
    Some(m)
}

/// A directory of `entries` entries (directories of 99 empty files), as a toolchain a project
/// declares would be; `sync`ed so its writeback does not fall on the measured calls.
fn declared_tree(dir: &Path, entries: usize) {
    let mut made = 0;
    let mut d = 0;
    while made < entries {
        let sub = dir.join(format!("d{d:05}"));
        std::fs::create_dir_all(&sub).unwrap();
        made += 1;
        for f in 0..99.min(entries - made) {
            std::fs::File::create(sub.join(format!("f{f}"))).unwrap();
            made += 1;
        }
        d += 1;
    }
    let synced = Command::new("sync").status().is_ok_and(|s| s.success());
    assert!(synced, "sync after generating the declared tree");
}

/// Events a second the session log appends in chock-log's realistic mix (`mix.rs`), its durable
/// kinds synced before `append` returns, on the disk `dir` is on.
fn log_rate(dir: &Path) -> f64 {
    const TURNS: u64 = 120;
    std::fs::create_dir_all(dir).unwrap();
    let log = chock_log::Log::create(dir, chock_log::SessionHeader::default()).unwrap();
    let data = serde_json::json!({"tool": "run_command", "argv": ["cargo", "test"], "cwd": "/work/project"});
    let start = Instant::now();
    let events: u64 = (0..TURNS).map(|i| mix::turn(&log, i, &data)).sum();
    log.sync().unwrap();
    events as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` asks; there is nothing to list.
    }
    let pairs = env_usize("CHOCK_BENCH_PAIRS", 7);
    let pairs_large = env_usize("CHOCK_BENCH_PAIRS_LARGE", 3);
    let runs = env_usize("CHOCK_BENCH_RUNS", 20);
    let large = env_usize("CHOCK_BENCH_LARGE", 100_000);
    let declared_entries = env_usize("CHOCK_BENCH_DECLARED", 120_000);
    let tmp = std::env::temp_dir().join(format!("chock-bench-per-call.{}", std::process::id()));
    let (small_dir, large_dir) = (tmp.join("small"), tmp.join("large"));

    let small = measure(&small_dir, 1_000, pairs, None);
    let big = if pairs_large > 0 {
        measure(&large_dir, large, pairs_large, None)
    } else {
        None
    };
    let declared = (declared_entries > 0 && pairs > 0).then(|| {
        let tree = tmp.join("toolchain");
        declared_tree(&tree, declared_entries);
        measure(&tmp.join("declared"), 1_000, pairs, Some(&tree))
    });
    let declared = declared.flatten();
    let rate = log_rate(&tmp.join("log"));
    println!("session log, realistic mix: {rate:.0} events/s");

    let w = World {
        base: small_dir.clone(),
        project: small_dir.join("project"),
        with_calls: String::new(),
        without: String::new(),
        one_call: String::new(),
    };
    // `chock exec` and bwrap in turns, so load from elsewhere falls on both alike.
    let bwrap_once = bwrap_call(&w.project);
    let exec_once = || {
        std::thread::sleep(SETTLE);
        w.chock(&["exec", "--", "true"])
    };
    exec_once();
    if let Some(b) = &bwrap_once {
        b();
    }
    let (mut exec_runs, mut bwrap_runs, mut pair_ratios) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        let e = exec_once();
        exec_runs.push(e);
        if let Some(b) = &bwrap_once {
            let b = b();
            bwrap_runs.push(b);
            pair_ratios.push(e.as_secs_f64() / b.as_secs_f64());
        }
    }
    let exec = stats(exec_runs);
    println!(
        "chock exec -- true (whole process, 1,000 files): {}",
        show(exec)
    );
    let bwrap = (!bwrap_runs.is_empty()).then(|| stats(bwrap_runs));
    match bwrap {
        Some(b) => {
            pair_ratios.sort_by(f64::total_cmp);
            println!("bwrap … true (whole process): {}", show(b));
            println!(
                "chock exec / bwrap, run by run: median {:.2}x ({:.2}x–{:.2}x)",
                pair_ratios[pair_ratios.len() / 2],
                pair_ratios[0],
                pair_ratios[pair_ratios.len() - 1]
            );
        }
        None => println!("bubblewrap: not installed; its ratios are skipped"),
    }

    println!();
    println!("ratio                                   value   target");
    let line = |name: &str, r: String, target: &str| println!("{name:<38} {r:>7}   {target}");
    if let (Some(small), Some(big)) = (&small, &big) {
        line(
            "per call, 100k files / 1k files",
            ratio(big.per_call.0, small.per_call.0),
            "<= 1.2x",
        );
        line(
            "session start, 100k files / 1k files",
            ratio(big.start.0, small.start.0),
            "<= 2x",
        );
    }
    // Against bwrap: the median of the pair-by-pair (run-by-run) ratios, each against the bwrap
    // calls made at the same time.
    for (name, m) in [
        ("per call at 1k files / bwrap", &small),
        ("per call at 100k files / bwrap", &big),
    ] {
        if let Some(((r, _, _), _)) = m.as_ref().and_then(|m| m.against_bwrap) {
            line(name, format!("{r:.2}x"), "<= 1.5x");
        }
    }
    if bwrap.is_some() {
        line(
            "chock exec -- true / bwrap",
            format!("{:.2}x", pair_ratios[pair_ratios.len() / 2]),
            "<= 1.5x",
        );
    }
    if let (Some(small), Some(declared)) = (&small, &declared) {
        line(
            "per call, declared read path / none",
            ratio(declared.per_call.0, small.per_call.0),
            "<= 1.1x",
        );
        line(
            "  a call after the first, declared / none",
            ratio(declared.after_first.0, small.after_first.0),
            "<= 1.1x",
        );
    }
    line("session log, events/s", format!("{rate:.0}"), ">= 5000");
    let _ = std::fs::remove_dir_all(&tmp);
}
