//! Creation cost of a session workspace on a 1,000-file and a 100,000-file project, side by side
//! with `git worktree add` and `cp -a` on the same trees. Prints the times and the 100k/1k ratio.
//!
//! `cargo bench -p chock-workspace --bench create` (set `CHOCK_BENCH_DIR` to build the trees
//! somewhere other than the system temp directory; `CHOCK_BENCH_LARGE` to change 100,000;
//! `CHOCK_BENCH_REFERENCE=0` to skip the slow `git worktree add` and `cp -a` rows).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use chock_workspace::Workspace;

/// Runs of chock's own creation (cheap, so many: the median hides a loaded machine's noise).
const RUNS: usize = 11;
/// Runs of the reference points (each copies the whole tree).
const REFERENCE_RUNS: usize = 3;

fn sh(dir: &Path, script: &str) {
    let status = Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .status()
        .expect("sh");
    assert!(status.success(), "`{script}` failed in {}", dir.display());
}

/// A project of `files` files, 100 per directory, a few lines each.
fn tree(root: &Path, files: usize) {
    for i in 0..files {
        let dir = root.join(format!("src/d{:04}", i / 100));
        if i % 100 == 0 {
            fs::create_dir_all(&dir).unwrap();
        }
        fs::write(
            dir.join(format!("f{i}.rs")),
            format!("// file {i}\nfn f{i}() {{}}\n"),
        )
        .unwrap();
    }
}

/// The median of `runs` runs of `f`; `f` gets the run number.
fn median(runs: usize, mut f: impl FnMut(usize) -> Duration) -> Duration {
    let mut times: Vec<Duration> = (0..runs).map(&mut f).collect();
    times.sort();
    times[runs / 2]
}

struct Trees {
    plain: PathBuf,
    repo: PathBuf,
    scratch: PathBuf,
}

fn make(base: &Path, files: usize) -> Trees {
    let plain = base.join(format!("plain-{files}"));
    let repo = base.join(format!("repo-{files}"));
    let scratch = base.join(format!("scratch-{files}"));
    for dir in [&plain, &repo, &scratch] {
        fs::create_dir_all(dir).unwrap();
    }
    tree(&plain, files);
    tree(&repo, files);
    sh(
        &repo,
        "git init -q . && git add -A && git -c user.name=b -c user.email=b@b commit -q -m init",
    );
    // A little uncommitted state, as a user's project usually has.
    fs::write(repo.join("src/d0000/f0.rs"), "// edited\n").unwrap();
    fs::write(repo.join("notes.txt"), "untracked\n").unwrap();
    Trees {
        plain,
        repo,
        scratch,
    }
}

fn measure(t: &Trees, reference: bool) -> [Option<Duration>; 5] {
    let overlay = median(RUNS, |n| {
        let session = t.scratch.join(format!("ov-{n}"));
        fs::create_dir_all(&session).unwrap();
        let start = Instant::now();
        Workspace::create(&t.plain, &session, &format!("bench-ov-{n}")).unwrap();
        start.elapsed()
    });
    let mut git_view = Vec::new();
    let git_base = median(RUNS, |n| {
        let session = t.scratch.join(format!("git-{n}"));
        fs::create_dir_all(&session).unwrap();
        let start = Instant::now();
        let ws = Workspace::create(&t.repo, &session, &format!("bench-git-{n}")).unwrap();
        git_view.push(start.elapsed());
        ws.wait_base().unwrap();
        start.elapsed()
    });
    git_view.sort();
    if !reference {
        return [
            Some(overlay),
            Some(git_view[RUNS / 2]),
            Some(git_base),
            None,
            None,
        ];
    }
    let worktree = median(REFERENCE_RUNS, |n| {
        let dest = t.scratch.join(format!("wt-{n}"));
        let start = Instant::now();
        sh(
            &t.repo,
            &format!("git worktree add -q --detach {} HEAD", dest.display()),
        );
        let took = start.elapsed();
        sh(
            &t.repo,
            &format!("git worktree remove --force {}", dest.display()),
        );
        took
    });
    let cp = median(REFERENCE_RUNS, |n| {
        let dest = t.scratch.join(format!("cp-{n}"));
        let start = Instant::now();
        sh(
            &t.scratch,
            &format!("cp -a {} {}", t.repo.display(), dest.display()),
        );
        let took = start.elapsed();
        fs::remove_dir_all(&dest).unwrap();
        took
    });
    [
        Some(overlay),
        Some(git_view[RUNS / 2]),
        Some(git_base),
        Some(worktree),
        Some(cp),
    ]
}

fn ms(d: Option<Duration>) -> String {
    d.map_or_else(
        || "-".into(),
        |d| format!("{:.1} ms", d.as_secs_f64() * 1000.0),
    )
}

fn main() {
    let large: usize = std::env::var("CHOCK_BENCH_LARGE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let base = std::env::var_os("CHOCK_BENCH_DIR").map_or_else(std::env::temp_dir, PathBuf::from);
    let base = base.join(format!("chock-bench-create-{}", std::process::id()));
    fs::create_dir_all(&base).unwrap();
    eprintln!(
        "building trees of 1,000 and {large} files in {} ...",
        base.display()
    );
    let small = make(&base, 1_000);
    let big = make(&base, large);
    let reference = std::env::var("CHOCK_BENCH_REFERENCE").map_or(true, |v| v != "0");
    let a = measure(&small, reference);
    let b = measure(&big, reference);
    let names = [
        "chock overlay backing (create)",
        "chock git backing (create: view ready)",
        "chock git backing (+ base commit)",
        "git worktree add",
        "cp -a",
    ];
    println!(
        "workspace creation, median of {RUNS} runs ({REFERENCE_RUNS} for git worktree and cp)"
    );
    println!(
        "{:<40} {:>12} {:>14} {:>8}",
        "",
        "1,000 files",
        format!("{large} files"),
        "ratio"
    );
    for i in 0..names.len() {
        let ratio = match (a[i], b[i]) {
            (Some(a), Some(b)) => format!("{:.1}x", b.as_secs_f64() / a.as_secs_f64().max(1e-9)),
            _ => "-".into(),
        };
        println!(
            "{:<40} {:>12} {:>14} {:>8}",
            names[i],
            ms(a[i]),
            ms(b[i]),
            ratio
        );
    }
    let _ = Command::new("rm").arg("-rf").arg(&base).status();
}
