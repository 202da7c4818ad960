//! What one tool call costs inside a real session, and how that grows with the project (issue 11).
//! Not a test: it prints, it never fails on a number. `cargo bench -p chock-cli --bench per_call`.
//!
//! For a git project of 1,000 and of 100,000 files (generated in a temporary directory with `git
//! fast-import` and one checkout), the bench-profile `chock` binary runs whole `chock run` processes
//! with an offline recording (`--provider script:FILE`): one of 40 turns, each one `run_command
//! "true"`, one with no call at all, and one with a single call. A pair's difference divided by 40
//! is the overhead of one call; the 40-call session against the one-call one, over 39, is a call
//! after the session's first (it leaves out one-time work such as the first walk of a declared
//! path); the session with no call is the cost of a session's start and end. A third project of
//! 1,000 files has a `chock.toml` that declares a `[sandbox] read` path of 120,000 entries.
//!
//! The machine's speed drifts by a third over minutes here, so the projects are measured in
//! rounds: each round runs one pair in every project (the order rotated from round to round),
//! with a whole `bwrap … true` (options close to Chock's, as in chock-sandbox's `setup` bench)
//! before, between and after each pair's sessions. Every ratio is the median of the round-by-round
//! ratios, printed with the lowest and highest; a ratio against bwrap takes the bwrap calls made
//! beside the pair. Then a whole `chock exec -- true` and a bwrap call in turns, run by run (after
//! a `sync`, and before the log's bench, so neither's writeback falls on `chock exec`'s log syncs);
//! and how many events a second the session log appends in the realistic mix chock-log's `throughput`
//! bench uses, on the disk the bench's temporary directory is on.
//!
//! `CHOCK_BENCH_PAIRS` (default 21) rounds (0: no sessions; the 1,000-file project is still made
//! for `chock exec`), `CHOCK_BENCH_LARGE` (default 100000; 0 skips it) the large project's size,
//! `CHOCK_BENCH_DECLARED` (default 120000; 0 skips it) the declared path's entries,
//! `CHOCK_BENCH_RUNS` (default 30) runs of `chock exec` and of bwrap. After generating a project
//! the bench runs `sync`, so the new tree's writeback does not fall on the measured calls' log
//! syncs.

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

/// Median, lowest and highest.
type Spread = (Duration, Duration, Duration);

/// Median, lowest and highest, of durations or of ratios (never NaN: durations divided by
/// durations the machine measured).
fn stats<T: Copy + PartialOrd>(mut v: Vec<T>) -> (T, T, T) {
    v.sort_by(|a, b| a.partial_cmp(b).expect("no NaN among the samples"));
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

fn show((m, lo, hi): Spread) -> String {
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

/// What one project's pairs measured, one entry per round.
#[derive(Default)]
struct Samples {
    /// (40-call session − no-call session) / 40: one call's overhead.
    per_call: Vec<Duration>,
    /// (40-call session − one-call session) / 39: a call after the session's first (what a
    /// session's one-time work, such as the first walk of a declared path, leaves out).
    after_first: Vec<Duration>,
    /// The session with no call: start plus end.
    start: Vec<Duration>,
    /// The median of the three bwrap calls made beside the round's pair (`None`: no bubblewrap).
    bwrap: Vec<Option<Duration>>,
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

/// A project of `files` files made under `base`, warmed with one session of each kind (the page
/// cache and git's own first-run work), `sync`ed.
fn prepare(base: &Path, files: usize, declared: Option<&Path>) -> World {
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
        "{files} files{with}: generated in {:.1} s",
        made.elapsed().as_secs_f64()
    );
    w.session(&w.without);
    w.session(&w.with_calls);
    w.session(&w.one_call);
    w
}

/// One round's pair in `w`, with a whole bwrap call before, between and after its sessions.
fn pair(w: &World, into: &mut Samples) {
    let bwrap = bwrap_call(&w.project);
    let bwrap_now = || bwrap.as_ref().map(|b| b());
    let one = w.session(&w.one_call);
    let b0 = bwrap_now();
    let none = w.session(&w.without);
    let b1 = bwrap_now();
    let calls = w.session(&w.with_calls);
    let b2 = bwrap_now();
    into.per_call.push(calls.saturating_sub(none) / CALLS);
    into.after_first
        .push(calls.saturating_sub(one) / (CALLS - 1));
    into.start.push(none);
    into.bwrap.push(match (b0, b1, b2) {
        (Some(b0), Some(b1), Some(b2)) => Some(stats(vec![b0, b1, b2]).0),
        _ => None,
    });
}

/// `rounds` rounds over every project, each round one pair in each, the projects' order rotated
/// from one round to the next: the machine's speed drifts by a third over minutes here (another
/// guest's load), so two projects are compared round by round, never across the run.
fn rounds(worlds: &[&World], rounds: usize) -> Vec<Samples> {
    let mut out: Vec<Samples> = worlds.iter().map(|_| Samples::default()).collect();
    for r in 0..rounds {
        for k in 0..worlds.len() {
            let i = (r + k) % worlds.len();
            pair(worlds[i], &mut out[i]);
        }
    }
    out
}

fn report(name: &str, s: &Samples) {
    println!(
        "{name}: per call {}   after the first {}   session with no call {}",
        show(stats(s.per_call.clone())),
        show(stats(s.after_first.clone())),
        show(stats(s.start.clone()))
    );
    if let Some(b) = s.bwrap.iter().copied().collect::<Option<Vec<_>>>() {
        let (r, lo, hi) = against(&s.per_call, &b);
        println!(
            "  bwrap … true beside the pairs {}   per call / bwrap, round by round: median {r:.2}x ({lo:.2}x–{hi:.2}x)",
            show(stats(b.clone()))
        );
    }
}

/// The round-by-round ratios `a[r] / b[r]`: median, lowest, highest.
fn against(a: &[Duration], b: &[Duration]) -> (f64, f64, f64) {
    stats(
        a.iter()
            .zip(b)
            .map(|(a, b)| a.as_secs_f64() / b.as_secs_f64())
            .collect(),
    )
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
    let pairs = env_usize("CHOCK_BENCH_PAIRS", 21);
    let runs = env_usize("CHOCK_BENCH_RUNS", 30);
    let large = env_usize("CHOCK_BENCH_LARGE", 100_000);
    let declared_entries = env_usize("CHOCK_BENCH_DECLARED", 120_000);
    let tmp = std::env::temp_dir().join(format!("chock-bench-per-call.{}", std::process::id()));
    let small_dir = tmp.join("small");

    let small = prepare(&small_dir, 1_000, None);
    let big = (pairs > 0 && large > 0).then(|| prepare(&tmp.join("large"), large, None));
    let declared = (pairs > 0 && declared_entries > 0).then(|| {
        let tree = tmp.join("toolchain");
        declared_tree(&tree, declared_entries);
        prepare(&tmp.join("declared"), 1_000, Some(&tree))
    });
    let mut worlds = vec![&small];
    worlds.extend(big.as_ref());
    worlds.extend(declared.as_ref());
    let measured = if pairs > 0 {
        println!("{pairs} rounds, one pair in each project a round");
        let mut m = rounds(&worlds, pairs).into_iter();
        let small = m.next();
        let big = big.as_ref().and_then(|_| m.next());
        let declared = declared.as_ref().and_then(|_| m.next());
        Some((small.unwrap(), big, declared))
    } else {
        None
    };
    if let Some((small, big, declared)) = &measured {
        report("1000 files", small);
        if let Some(big) = big {
            report(&format!("{large} files"), big);
        }
        if let Some(declared) = declared {
            report("1000 files, a declared read path", declared);
        }
    }

    let w = &small;
    // What the sessions above left to write back would otherwise land on `chock exec`'s log
    // syncs (bwrap writes nothing durable); the log's own bench runs after it for the same reason.
    let synced = Command::new("sync").status().is_ok_and(|s| s.success());
    assert!(synced, "sync before chock exec");
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
    let (mut exec_runs, mut bwrap_runs) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        exec_runs.push(exec_once());
        if let Some(b) = &bwrap_once {
            bwrap_runs.push(b());
        }
    }
    println!(
        "chock exec -- true (whole process, 1,000 files): {}",
        show(stats(exec_runs.clone()))
    );
    // Run by run: each `chock exec` against the bwrap call made right after it.
    let exec_ratio = (!bwrap_runs.is_empty()).then(|| against(&exec_runs, &bwrap_runs));
    match exec_ratio {
        Some((r, lo, hi)) => {
            println!("bwrap … true (whole process): {}", show(stats(bwrap_runs)));
            println!("chock exec / bwrap, run by run: median {r:.2}x ({lo:.2}x–{hi:.2}x)");
        }
        None => println!("bubblewrap: not installed; its ratios are skipped"),
    }

    let rate = log_rate(&tmp.join("log"));
    println!("session log, realistic mix: {rate:.0} events/s");

    println!();
    let line = |name: &str, r: String, target: &str| println!("{name:<42} {r:>20}   {target}");
    line("ratio", "value".into(), "target");
    // Between two projects, and against bwrap: the median of the round-by-round ratios (each
    // round's pairs and bwrap calls were made within a second or two of each other), with the
    // lowest and highest.
    let spread = |(r, lo, hi): (f64, f64, f64)| format!("{r:.2}x ({lo:.2}x–{hi:.2}x)");
    let row = |name: &str, a: &[Duration], b: &[Duration], target: &str| {
        line(name, spread(against(a, b)), target);
    };
    if let Some((small, big, declared)) = &measured {
        let beside = |m: &Samples| m.bwrap.iter().copied().collect::<Option<Vec<_>>>();
        // The large project's size as the rows name it (`CHOCK_BENCH_LARGE` may change it).
        let large = if large.is_multiple_of(1000) {
            format!("{}k", large / 1000)
        } else {
            large.to_string()
        };
        if let Some(big) = big {
            row(
                &format!("per call, {large} files / 1k files"),
                &big.per_call,
                &small.per_call,
                "<= 1.2x",
            );
            row(
                &format!("session start, {large} files / 1k files"),
                &big.start,
                &small.start,
                "<= 2x",
            );
        }
        for (name, m) in [
            ("per call at 1k files / bwrap".to_string(), Some(small)),
            (format!("per call at {large} files / bwrap"), big.as_ref()),
        ] {
            if let Some((m, b)) = m.and_then(|m| Some((m, beside(m)?))) {
                row(&name, &m.per_call, &b, "<= 1.5x");
            }
        }
        if let Some(d) = declared {
            row(
                "per call, declared read path / none",
                &d.per_call,
                &small.per_call,
                "<= 1.1x",
            );
            let after = "  a call after the first, declared / none";
            row(after, &d.after_first, &small.after_first, "<= 1.1x");
        }
    }
    if let Some(r) = exec_ratio {
        line("chock exec -- true / bwrap", spread(r), "<= 1.5x");
    }
    line("session log, events/s", format!("{rate:.0}"), ">= 5000");
    let _ = std::fs::remove_dir_all(&tmp);
}
