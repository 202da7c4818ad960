//! Benchmark: what a large declared `[sandbox]` read path costs a call of a session.
//!
//! Generates a tree of 120,020 entries (20 directories of 20 directories of 299 empty files: the
//! size of `~/.rustup` with three toolchains), then times `true` in pairs: a bound workspace with
//! no declared path, and the same call with the tree declared, both through one session-long
//! `SocketIndex` (`spawn_in_session`, as `chock-session` calls it). The ratio of each pair is the
//! cost the declared path adds; the median and spread of the ratios are printed. The first call
//! (the index's walk and watches) and a few calls without an index (a walk per call, as
//! `chock exec` without a session would) are printed beside it.
//!
//! `cargo bench -p chock-sandbox --bench socket_index` (pairs: `CHOCK_BENCH_RUNS`, default 40;
//! `CHOCK_BENCH_READ` declares that directory instead of the generated tree).
//! Not a test: nothing here fails on a number; the numbers are for reading.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use chock_sandbox::{NetworkPlan, Plan, SocketIndex, StdioMode, WorkspaceMount};

fn main() {
    let runs: usize = std::env::var("CHOCK_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40)
        .max(1);
    // Outside /tmp (which the sandbox replaces): under `$HOME`, like a project.
    let home = std::env::var_os("HOME").map_or_else(std::env::temp_dir, PathBuf::from);
    let base = home.join(format!(".chock-bench-index-{}", std::process::id()));
    let project = base.join("project");
    let copy = base.join("copy");
    for d in [&project, &copy] {
        std::fs::create_dir_all(d).expect("bench dir");
    }
    std::fs::write(project.join("chock.toml"), "[rules]\n").expect("policy file");
    std::fs::write(copy.join("chock.toml"), "[rules]\n").expect("policy file");
    let tree = match std::env::var_os("CHOCK_BENCH_READ") {
        Some(p) => {
            let p = PathBuf::from(p).canonicalize().expect("CHOCK_BENCH_READ");
            println!("declared read path: {} (CHOCK_BENCH_READ)", p.display());
            p
        }
        None => {
            let tree = base.join("toolchain");
            std::fs::create_dir_all(&tree).expect("bench dir");
            let t = Instant::now();
            let entries = generate(&tree);
            println!(
                "declared read path: {entries} entries generated in {}",
                ms(t.elapsed())
            );
            tree
        }
    };

    let plain = plan(&project, &copy, Vec::new());
    let declared = plan(&project, &copy, vec![tree.clone()]);
    let index = SocketIndex::new();
    if !index.watching() {
        println!(
            "the index cannot watch here ({:?}): every call walks",
            index.degraded()
        );
    }
    let first = time(|| call(&declared, Some(&index)));
    println!("first call with the path (walk + watches): {}", ms(first));
    // Warm both plans, then pairs.
    call(&plain, Some(&index));
    call(&declared, Some(&index));
    let (mut without, mut with, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        let a = time(|| call(&plain, Some(&index)));
        let b = time(|| call(&declared, Some(&index)));
        ratios.push(b.as_secs_f64() / a.as_secs_f64().max(1e-9));
        without.push(a);
        with.push(b);
    }
    let walks: Vec<Duration> = (0..runs.min(10))
        .map(|_| time(|| call(&declared, None)))
        .collect();

    println!();
    println!("`true`, {runs} pairs (median, spread min..max):");
    row("bound workspace, no declared path", &without);
    row("+ declared read path, session index", &with);
    row("+ declared read path, walk per call", &walks);
    let median = |t: &[Duration]| {
        let mut t = t.to_vec();
        t.sort();
        t[t.len() / 2].as_secs_f64()
    };
    println!(
        "ratio of the medians: {:.3}",
        median(&with) / median(&without).max(1e-9)
    );
    ratios.sort_by(f64::total_cmp);
    println!(
        "ratio with / without the path, per pair: median {:.3} (min {:.3}, p90 {:.3}, max {:.3})",
        ratios[ratios.len() / 2],
        ratios[0],
        ratios[ratios.len() * 9 / 10],
        ratios[ratios.len() - 1]
    );
    let _ = std::fs::remove_dir_all(&base);
}

/// 20 × 20 directories of 299 empty files each: 120,020 entries.
fn generate(tree: &Path) -> usize {
    let mut n = 0;
    for i in 0..20 {
        let top = tree.join(format!("d{i}"));
        std::fs::create_dir(&top).expect("dir");
        n += 1;
        for j in 0..20 {
            let sub = top.join(format!("e{j}"));
            std::fs::create_dir(&sub).expect("dir");
            n += 1;
            for k in 0..299 {
                std::fs::File::create(sub.join(format!("f{k}"))).expect("file");
                n += 1;
            }
        }
    }
    n
}

fn plan(project: &Path, copy: &Path, extra_read: Vec<PathBuf>) -> Plan {
    Plan::builder(
        vec!["/usr/bin/true".into()],
        WorkspaceMount::Bind {
            source: copy.to_path_buf(),
        },
        project.to_path_buf(),
    )
    .policy_file(Some(project.join("chock.toml")))
    .extra_read(extra_read)
    .network(NetworkPlan::None)
    .build_with_env(&[("PATH".into(), chock_sandbox::DEFAULT_PATH.into())])
}

fn call(plan: &Plan, index: Option<&SocketIndex>) {
    let spawned = match index {
        Some(index) => chock_sandbox::spawn_in_session(plan, StdioMode::Null, None, index),
        None => chock_sandbox::spawn(plan, StdioMode::Null),
    };
    let outcome = spawned
        .and_then(|mut child| child.wait())
        .unwrap_or_else(|e| panic!("a confined true: {e}"));
    assert_eq!(
        outcome.status,
        chock_sandbox::ExitStatus::Exited(0),
        "a confined true"
    );
}

fn time(f: impl FnOnce()) -> Duration {
    let t = Instant::now();
    f();
    t.elapsed()
}

fn row(name: &str, times: &[Duration]) {
    let mut t = times.to_vec();
    t.sort();
    println!(
        "{name:<40} {:>10}  ({} .. {})",
        ms(t[t.len() / 2]),
        ms(t[0]),
        ms(t[t.len() - 1])
    );
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}
